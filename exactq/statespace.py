"""State spaces with vectorised indexing.

A :class:`StateSpace` holds the states of a chain as an ``(n_states, n_vars)`` integer
array with variable names, sorted by an integer key (mixed radix over the bounding
box). :meth:`StateSpace.index` maps a whole array of rows to state indices at once:
for a full box the key *is* the index; otherwise ``np.searchsorted`` on the sorted keys.
No Python loop runs over states.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import NotApplicableError

__all__ = ["StateSpace"]

_MAX_KEY = np.iinfo(np.int64).max // 4


class StateSpace:
    """A finite set of integer state vectors.

    Parameters
    ----------
    states : (n, d) array_like of int
        The states; duplicates are removed and rows are sorted by key.
    names : sequence of str
        One name per column (the variables of state expressions).
    lo, hi : (d,) array_like of int, optional
        The bounding box used for keys (defaults: the column minima and maxima).

    Examples
    --------
    >>> s = StateSpace.box(["q1", "q2"], hi=[2, 2])
    >>> int(s.index(np.array([[1, 2]]))[0]), s.n_states
    (5, 9)
    """

    def __init__(self, states, names: Sequence[str], *, lo=None, hi=None):
        states = np.asarray(states, dtype=np.int64)
        if states.ndim == 1:
            states = states[:, None]
        self.names = tuple(names)
        if states.shape[1] != len(self.names):
            raise ValueError(f"{states.shape[1]} columns but {len(self.names)} names")
        if len(states) == 0:
            raise ValueError("a state space needs at least one state")
        self.lo = np.asarray(states.min(0) if lo is None else lo, dtype=np.int64)
        self.hi = np.asarray(states.max(0) if hi is None else hi, dtype=np.int64)
        radix = self.hi - self.lo + 1
        if np.prod(radix.astype(float)) > _MAX_KEY:
            raise NotApplicableError(
                f"state space bounding box {radix.tolist()} is too large for 64-bit keys"
            )
        self.radix = radix
        self.strides = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]]).astype(np.int64)
        keys = self._raw_key(states)
        if np.any(keys < 0):
            raise ValueError("states outside the given bounding box")
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        keep = np.ones(len(keys), dtype=bool)
        keep[1:] = keys[1:] != keys[:-1]
        self.keys = keys[keep]
        self.states = states[order][keep]
        self.states.flags.writeable = False
        self.is_box = len(self.keys) == int(np.prod(radix))

    @classmethod
    def box(cls, names: Sequence[str], hi, lo=None) -> "StateSpace":
        """All integer vectors with ``lo <= x <= hi`` (``lo`` defaults to 0)."""
        hi = np.asarray(hi, dtype=np.int64)
        lo = np.zeros_like(hi) if lo is None else np.asarray(lo, dtype=np.int64)
        grids = np.indices(tuple(hi - lo + 1)).reshape(len(hi), -1).T + lo
        return cls(grids, names, lo=lo, hi=hi)

    @classmethod
    def sorted_vectors(cls, names: Sequence[str], high: int) -> "StateSpace":
        """All nondecreasing integer vectors ``0 <= x_1 <= ... <= x_d <= high``.

        The state space of a chain lumped by the symmetry of ``d`` exchangeable
        components (multisets of queue lengths); ``C(high + d, d)`` states. Built one
        column at a time with ``np.repeat``, without a loop over states.
        """
        d = len(names)
        cols = np.arange(high + 1, dtype=np.int64)[:, None]
        for _ in range(d - 1):
            last = cols[:, -1]
            counts = high - last + 1
            rows = np.repeat(np.arange(len(cols)), counts)
            start = np.repeat(np.cumsum(counts) - counts, counts)
            nxt = last[rows] + (np.arange(len(rows)) - start)
            cols = np.column_stack([cols[rows], nxt])
        return cls(cols, names, lo=np.zeros(d, np.int64), hi=np.full(d, high, np.int64))

    # ------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self.keys)

    @property
    def n_vars(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return self.n_states

    def column(self, name: str) -> np.ndarray:
        return self.states[:, self.names.index(name)]

    def _raw_key(self, rows: np.ndarray) -> np.ndarray:
        """Mixed-radix key of each row; -1 where the row is outside the box."""
        off = rows - self.lo
        inside = np.all((off >= 0) & (off < self.radix), axis=1)
        key = off @ self.strides
        return np.where(inside, key, -1)

    def index(self, rows) -> np.ndarray:
        """Index of each row in the space, ``-1`` where the row is not a state."""
        rows = np.asarray(rows, dtype=np.int64)
        key = self._raw_key(rows)
        if self.is_box:
            return key
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, len(self.keys) - 1)
        return np.where((key >= 0) & (self.keys[pos] == key), pos, -1)

    def format_state(self, i: int) -> str:
        """``(q1=3, q2=0)`` for state ``i``."""
        return "(" + ", ".join(f"{n}={v}" for n, v in zip(self.names, self.states[i])) + ")"

    def namespace(self) -> dict:
        return {n: self.states[:, k] for k, n in enumerate(self.names)}
