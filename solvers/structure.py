"""Graph structure of a generator: communicating classes and irreducibility.

Uses :func:`scipy.sparse.csgraph.connected_components` (Tarjan/Pearce strong
components), so it scales to millions of states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["ClassStructure", "communicating_classes"]


@dataclass(frozen=True)
class ClassStructure:
    """Strong components of the transition graph.

    Attributes
    ----------
    labels : (n,) ndarray of int
        Component of each state.
    n_classes : int
    closed : ndarray of int
        Labels of the closed (recurrent) classes: no transition leaves them.
    representatives : ndarray of int
        One state index in each closed class (its smallest index).
    """

    labels: np.ndarray
    n_classes: int
    closed: np.ndarray
    representatives: np.ndarray

    @property
    def is_irreducible(self) -> bool:
        return self.n_classes == 1

    @property
    def recurrent_mask(self) -> np.ndarray:
        """States in a closed class."""
        return np.isin(self.labels, self.closed)


def communicating_classes(Q: sp.spmatrix, components: tuple | None = None) -> ClassStructure:
    """Communicating classes of the chain with generator (or transition matrix) ``Q``.

    ``components``: ``Q``'s strong components ``(count, labels)`` when the caller has found them
    (:meth:`exactq.solvers.reachability._Predecessors.components`).
    """
    # self-loops (the diagonal) do not change strong components; explicit zeros are
    # dropped so that they are not taken for transitions
    A = sp.csr_matrix(Q)
    if A.nnz and np.any(A.data == 0):
        A = A.copy()
        A.eliminate_zeros()
    if components is None:
        n_classes, labels = connected_components(A, directed=True, connection="strong")
    else:
        n_classes, labels = components
    if n_classes == 1:
        return ClassStructure(labels, 1, np.array([0]), np.array([0]))
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    leaving = labels[rows] != labels[A.indices]
    has_exit = np.zeros(n_classes, dtype=bool)
    has_exit[labels[rows[leaving]]] = True
    closed = np.flatnonzero(~has_exit)
    n = len(labels)
    first = np.full(n_classes, n)
    np.minimum.at(first, labels, np.arange(n))
    return ClassStructure(labels, n_classes, closed, first[closed])
