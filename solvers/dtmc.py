"""Step-bounded analysis of discrete-time Markov chains, and the ``dtmc`` method.

- :func:`step_bounded_until` — the PCTL probability of ``left U<=k right`` from every
  state: ``k`` sparse products with the chain made absorbing in ``right`` and in
  ``¬left ∧ ¬right`` (Hansson & Jonsson 1994; Baier & Katoen, *Principles of Model
  Checking*, 2008, Sec. 10.2).
- :func:`step_values` — ``P^k v`` from every state, optionally with the states outside
  a set killed at every step (the first phase of ``left U[k1,k2] right``, and the
  instantaneous reward ``I=k``).
- :func:`step_cumulative` — the expected reward of the first ``k`` steps,
  ``Σ_{i<k} P^i r`` (``C<=k``).

Unbounded properties of a DTMC use the CTMC algorithms on ``P - I`` (the chain with
one jump per unit of time has the same reachability probabilities and stationary law,
and its expected hitting times are expected numbers of steps).

The ``dtmc`` method solves the stationary law of a model's DTMC representation with
the stationary solvers (:func:`exactq.solvers.stationary.solve_stationary`, on
``P - I``), with ``verify`` re-solving at 50 digits; an infinite model is truncated by
the one truncation driver (``dtmc(level)``, ``truncation_start``, ``dtmc_size``), as
the ``ctmc`` method does.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from exactq.catalogue import register_method
from exactq.errors import ModelError

from .transient import as_mask

__all__ = ["as_stochastic", "step_bounded_until", "step_values", "step_cumulative", "step_until_sets",
           "step_keep_sets"]


def as_stochastic(P, *, name: str = "P") -> sp.csr_array:
    """Validate a transition matrix (square, entries in [0, 1], rows summing to 1) as float CSR."""
    try:
        A = sp.csr_array(P, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name} must be a square sparse or dense matrix; got {type(P).__name__}") from exc
    n = A.shape[0]
    if A.ndim != 2 or A.shape != (n, n) or n == 0:
        raise ModelError(f"{name} must be a non-empty square matrix; got shape {A.shape}")
    A.sum_duplicates()
    if not np.all(np.isfinite(A.data)) or np.any(A.data < 0) or np.any(A.data > 1 + 1e-12):
        raise ModelError(f"{name} must have entries in [0, 1]")
    rows = np.asarray(A.sum(axis=1)).ravel()
    bad = np.abs(rows - 1) > 1e-9
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ModelError(f"rows of {name} must sum to 1; row {i} (state {i}) sums to {rows[i]:.12g}")
    return A


def _steps(k) -> int:
    try:
        kf = float(k)
    except (TypeError, ValueError):
        raise ModelError(f"a step bound must be an integer >= 0; got {k!r}") from None
    if not (kf >= 0 and kf == int(kf)):
        raise ModelError(f"a step bound of a dtmc must be an integer >= 0; got {k!r}")
    return int(kf)


def step_bounded_until(P, left_mask, right_mask, steps) -> tuple[np.ndarray, dict]:
    """Probability of ``left U<=steps right`` from every state.

    Parameters
    ----------
    P : (n, n) sparse or dense array
        Transition probabilities (rows sum to 1).
    left_mask, right_mask : (n,) bool array_like
    steps : int
        The step bound ``k >= 0``.

    Returns
    -------
    probs : (n,) ndarray
        Exactly 1 on ``right``; the iteration ``x_{i+1} = 1_right + 1_{left ∧ ¬right} P x_i``
        from ``x_0 = 1_right``, ``k`` times.
    info : dict
        ``method``, ``matvecs``, ``seconds``.

    Examples
    --------
    A coin flipped until heads (probability 1/2 each step): ``P(F<=3 heads) = 1 - 1/8``.

    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> probs, _ = step_bounded_until(P, [True, True], [False, True], 3)
    >>> float(probs[0])
    0.875
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    go = (left & ~right).astype(float)
    x = right.astype(float)
    base = right.astype(float)
    for _ in range(k):  # a loop over steps, not states
        x = base + go * (A @ x)
    return x, {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def step_values(P, values, steps, *, keep=None) -> tuple[np.ndarray, dict]:
    """``E_s[v(X_k)]`` from every state, the path killed (value 0) when it leaves ``keep`` before step ``k``.

    Parameters
    ----------
    P : (n, n) sparse or dense array
    values : (n,) array_like
    steps : int
    keep : (n,) bool array_like, optional
        The states the path must be in at steps ``0 .. k-1`` (default: all).

    Returns
    -------
    out : (n,) ndarray
        ``z_k`` with ``z_0 = v`` and ``z_{i+1} = 1_keep · P z_i``.
    info : dict

    Examples
    --------
    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> float(step_values(P, [0.0, 1.0], 2)[0][0])
    0.75
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    z = np.asarray(values, dtype=float).copy()
    if z.shape != (n,):
        raise ModelError(f"values must have shape ({n},); got {z.shape}")
    mask = None if keep is None else as_mask(keep, n, "keep").astype(float)
    for _ in range(k):
        z = A @ z
        if mask is not None:
            z *= mask
    return z, {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def step_cumulative(P, reward, steps) -> tuple[np.ndarray, dict]:
    """Expected reward of the first ``steps`` steps, ``Σ_{i<k} P^i r``, from every state.

    Examples
    --------
    A reward of 1 per step in state 0, left with probability 1/2 per step for an
    absorbing state: ``C<=3`` from state 0 is ``1 + 1/2 + 1/4``.

    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> float(step_cumulative(P, [1.0, 0.0], 3)[0][0])
    1.75
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    r = np.asarray(reward, dtype=float)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise ModelError(f"reward must be {n} finite numbers (one per state)")
    x = np.zeros(n)
    for _ in range(k):
        x = r + A @ x
    return x, {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def step_until_sets(adjacency, left_mask, right_mask, steps) -> tuple[np.ndarray, np.ndarray]:
    """The states where ``P(left U<=steps right)`` is exactly 0 and exactly 1, by iteration on the graph.

    With ``pos_0 = one_0 = right``: ``pos_{i+1} = right | (left & ¬right & some successor in
    pos_i)`` and ``one_{i+1} = right | (left & ¬right & every successor in one_i)``, the
    qualitative counterpart of :func:`step_bounded_until` (PRISM's bounded
    precomputation). Both sequences only grow, so the iteration stops at its fixed
    point (at most ``n`` steps) even for a huge bound.

    Parameters
    ----------
    adjacency : (n, n) sparse array
        1 for each transition of positive probability (self-loops included).

    Returns
    -------
    (no, yes) : (n,) bool arrays

    Examples
    --------
    A fair coin flipped until heads: after 3 flips heads has not surely come.

    >>> A = sp.csr_array(np.array([[1.0, 1.0], [0.0, 1.0]]))
    >>> no, yes = step_until_sets(A, [True, True], [False, True], 3)
    >>> no.tolist(), yes.tolist()
    ([False, False], [False, True])
    """
    A = sp.csr_array(adjacency)
    n = A.shape[0]
    k = _steps(steps)
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    go = left & ~right
    pos, one = right.copy(), right.copy()
    for _ in range(k):  # a loop over steps (to the fixed point), not states
        new_pos = right | (go & ((A @ pos.astype(float)) > 0))
        new_one = right | (go & ((A @ (~one).astype(float)) == 0))
        if np.array_equal(new_pos, pos) and np.array_equal(new_one, one):
            break
        pos, one = new_pos, new_one
    return ~pos, one


def step_keep_sets(adjacency, no, yes, steps, keep) -> tuple[np.ndarray, np.ndarray]:
    """``(no, yes)`` after ``steps`` steps that must stay in ``keep`` (the first phase of ``U[k1,k2]``).

    The qualitative counterpart of :func:`step_values` with ``keep``: positive where
    ``keep`` holds and some successor is positive, one where ``keep`` holds and every
    successor is one. Stops early at a fixed point.
    """
    A = sp.csr_array(adjacency)
    n = A.shape[0]
    k = _steps(steps)
    keep = as_mask(keep, n, "keep")
    pos, one = ~np.asarray(no, dtype=bool), np.asarray(yes, dtype=bool).copy()
    for _ in range(k):
        new_pos = keep & ((A @ pos.astype(float)) > 0)
        new_one = keep & ((A @ (~one).astype(float)) == 0)
        if np.array_equal(new_pos, pos) and np.array_equal(new_one, one):
            break
        pos, one = new_pos, new_one
    return ~pos, one


register_method(
    "dtmc",
    requires="dtmc",
    driver="adaptive",
    doc="stationary solve of the model's (truncated) DTMC, as P - I, with the stationary solvers; truncation grown "
        "until the measure converges",
    options=("solver", "tol", "truncation", "verify", "strict"),
    start="truncation_start",
    size="dtmc_size",
    verify=(("solver", "mpmath"),),
)
