"""State spaces with vectorised indexing.

Two kinds of finite sets of integer state vectors, both held as an ``(n_states,
n_vars)`` integer array with variable names, and both mapping a whole array of rows
to state indices with one vectorised call (no Python loop over states):

:class:`StateSpace`
    Any set of vectors inside a bounding box, kept sorted by a mixed-radix key; for a
    full box the key *is* the index, otherwise ``np.searchsorted`` on the keys.
:class:`SortedSpace`
    Multisets of queue lengths: the states of a chain lumped by the symmetry of
    identical servers. Within each class of servers the entries are kept sorted
    (``ascending`` or ``descending``), and a class's multiset is ranked in closed form
    by the combinatorial number system; a product over classes is ranked in mixed
    radix. Either every such vector with entries up to a ``level`` (ranked directly),
    or an explicit subset in an order the model chooses (ranked, then looked up).

Both derive from :class:`Space`, which gives the shared protocol: ``states``,
``names``, ``n_states``, ``index(rows)``, ``column(name)``, ``format_state(i)`` and
``namespace()``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from .errors import ModelError, NotApplicableError

__all__ = ["Space", "StateSpace", "SortedSpace", "colex_rank", "binomial_table", "RANK_LIMIT"]

_MAX_KEY = np.iinfo(np.int64).max // 4
#: ranks and mixed-radix indices stay below this (so that sums of them cannot overflow int64)
RANK_LIMIT = 2**62


class Space:
    """The protocol every state space follows (subclasses set ``states`` and ``names``)."""

    states: np.ndarray
    names: tuple

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_vars(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return self.n_states

    def index(self, rows) -> np.ndarray:  # pragma: no cover - every subclass defines it
        """Index of each row in the space, ``-1`` where the row is not a state."""
        raise NotImplementedError

    def column(self, name: str) -> np.ndarray:
        return self.states[:, self.names.index(name)]

    def format_state(self, i: int) -> str:
        """``(q1=3, q2=0)`` for state ``i``."""
        return "(" + ", ".join(f"{n}={v}" for n, v in zip(self.names, self.states[i])) + ")"

    def namespace(self) -> dict:
        """The state variables by name, for state expressions."""
        return {n: self.states[:, k] for k, n in enumerate(self.names)}


class StateSpace(Space):
    """A finite set of integer state vectors inside a bounding box.

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


# ------------------------------------------------------------------ sorted vectors
@lru_cache(maxsize=64)
def _binomials(vmax: int, size: int) -> np.ndarray:
    """``T[v, k] = C(v, k)`` for ``0 <= v <= vmax``, ``0 <= k <= size`` (int64, overflow-checked)."""
    if math.comb(vmax, min(size, vmax // 2)) >= RANK_LIMIT:
        raise NotApplicableError(
            f"sorted vectors of {size} entries up to {vmax - size} have more than 2^62 ranks")
    T = np.zeros((vmax + 1, size + 1), dtype=np.int64)
    T[:, 0] = 1
    for k in range(1, size + 1):  # C(v, k) = sum_{u < v} C(u, k - 1): one cumsum per column
        T[1:, k] = np.cumsum(T[:-1, k - 1])
    T.flags.writeable = False
    return T


def binomial_table(vmax: int, size: int) -> np.ndarray:
    """``T[v, k] = C(v, k)`` for ``0 <= v <= vmax``, ``0 <= k <= size`` (read-only int64).

    The table behind :func:`colex_rank`; a chain on sorted vectors uses it for the
    closed-form change of rank when one entry moves. Refused
    (``NotApplicableError``) when an entry would reach 2^62.

    Examples
    --------
    >>> binomial_table(4, 2)[4].tolist()
    [1, 4, 6]
    """
    return _binomials(int(vmax), int(size))


def colex_rank(X, vmax: int | None = None) -> np.ndarray:
    """Closed-form rank of nondecreasing vectors: ``sum_i C(x_i + i, i + 1)`` (int64).

    The map ``x -> {x_i + i}`` is a bijection from nondecreasing vectors to strictly
    increasing ones, ranked by the combinatorial number system in colex order (Knuth,
    *TAOCP* 4A, sec. 7.2.1.3, eq. (3)), so the nondecreasing vectors of length ``c``
    with entries ``<= K`` get exactly the ranks ``0 .. C(K + c, c) - 1``, whatever K.

    Examples
    --------
    >>> colex_rank(np.array([[0, 0], [0, 1], [1, 1], [0, 2]])).tolist()
    [0, 1, 2, 3]
    """
    X = np.asarray(X)
    c = X.shape[1]
    top = (int(X.max(initial=0)) if vmax is None else int(vmax)) + c
    T = _binomials(top, c)
    X = np.asarray(X, dtype=np.int64)
    out = np.zeros(len(X), dtype=np.int64)
    for i in range(c):  # loop over positions: one 1-D gather each (a 2-D fancy index is 3-4x slower)
        out += T[:, i + 1].take(X[:, i] + i)
    return out


def _colex_unrank(ranks: np.ndarray, size: int, level: int) -> np.ndarray:
    """The nondecreasing vectors of the given colex ranks (greedy, one position at a time)."""
    T = _binomials(level + size, size)
    r = np.asarray(ranks, dtype=np.int64).copy()
    out = np.empty((len(r), size), dtype=np.int64)
    for i in range(size - 1, -1, -1):  # loop over positions, not states
        col = T[:, i + 1]
        b = np.searchsorted(col, r, side="right") - 1  # largest b with C(b, i + 1) <= r
        r -= col[b]
        out[:, i] = b - i
    return out


class SortedSpace(Space):
    """Queue-length multisets of servers in classes (a chain lumped by symmetry).

    Columns are grouped by class (class 1 first); within a class the entries are
    sorted, ``ascending`` (``x_1 <= ... <= x_c``) or ``descending``. A class's
    multiset is ranked by :func:`colex_rank` (of the ascending form), a state by the
    mixed-radix combination of its classes' ranks (last class fastest).

    Parameters
    ----------
    counts : sequence of int
        Servers per class (``[n]`` for one class of identical servers).
    level : int, optional
        Every state whose entries lie in ``0..level``: ``prod_j C(level + c_j, c_j)``
        states, in rank order (``index`` is then the closed-form rank itself).
    states : (N, sum(counts)) array_like of int, optional
        An explicit subset instead of ``level``, with every class block sorted;
        kept in the given order (a model may need one, e.g. by total jobs for the
        level-aggregation solver) and indexed by rank and ``searchsorted``.
    order : {"ascending", "descending"}
        The order of the entries within a class.
    names : sequence of str, optional
        Column names (default ``x0, x1, ...``).
    max_states : int
        Refuse (``NotApplicableError``) a full space above this many states before
        allocating it.

    Examples
    --------
    Two identical servers with at most 2 jobs each, and a class of two servers with
    a class of one:

    >>> s = SortedSpace([2], level=2)
    >>> s.n_states, s.states.tolist()
    (6, [[0, 0], [0, 1], [1, 1], [0, 2], [1, 2], [2, 2]])
    >>> t = SortedSpace([2, 1], level=1, order="descending")
    >>> t.n_states, int(t.index([[1, 0, 1]])[0]) == t.states.tolist().index([1, 0, 1])
    (6, True)
    """

    def __init__(self, counts, *, level: int | None = None, states=None, order: str = "ascending",
                 names: Sequence[str] | None = None, max_states: int = 50_000_000):
        self.counts = tuple(int(c) for c in counts)
        if not self.counts or min(self.counts) < 1:
            raise ModelError(f"counts must be a list of positive class sizes; got {list(counts)}")
        if order not in ("ascending", "descending"):
            raise ModelError(f"order must be ascending or descending; got {order!r}")
        if (level is None) == (states is None):
            raise ModelError("give exactly one of level (the full space) or states (a subset)")
        self.order = order
        d = sum(self.counts)
        self.names = tuple(names) if names is not None else tuple(f"x{i}" for i in range(d))
        if len(self.names) != d:
            raise ValueError(f"{d} columns but {len(self.names)} names")
        ends = np.cumsum(self.counts)
        self.class_slices = tuple(slice(int(e - c), int(e)) for c, e in zip(self.counts, ends))
        if level is not None:
            self.level = int(level)
            if self.level < 0:
                raise ModelError(f"level must be >= 0; got {level}")
            sizes = [math.comb(self.level + c, c) for c in self.counts]
            total = math.prod(sizes)
            if total > max_states:
                raise NotApplicableError(
                    f"the sorted space of classes {list(self.counts)} up to level {self.level} has {total} "
                    f"states, above the limit of {max_states}")
            self._radix = np.array(sizes, dtype=np.int64)
            self._strides = np.concatenate([np.cumprod(self._radix[::-1])[::-1][1:], [1]]).astype(np.int64)
            idx = np.arange(total, dtype=np.int64)
            blocks = [self._oriented(_colex_unrank((idx // self._strides[j]) % sizes[j], c, self.level))
                      for j, c in enumerate(self.counts)]
            X = np.concatenate(blocks, axis=1)
            self.is_full = True
        else:
            X = np.asarray(states)
            if X.ndim != 2 or X.shape[1] != d:
                raise ValueError(f"states must have {d} columns; got shape {X.shape}")
            if X.dtype not in (np.int16, np.int32, np.int64):
                X = X.astype(np.int64)
            self.level = int(X.max(initial=0))
            self._radix = np.array([math.comb(self.level + c, c) for c in self.counts], dtype=object)
            if math.prod(int(r) for r in self._radix) >= RANK_LIMIT:
                raise NotApplicableError(
                    f"sorted-vector ranks of classes {list(self.counts)} with entries up to {self.level} "
                    f"overflow 64 bits")
            self._radix = self._radix.astype(np.int64)
            self._strides = np.concatenate([np.cumprod(self._radix[::-1])[::-1][1:], [1]]).astype(np.int64)
            self.is_full = False
        self.states = X
        self.states.flags.writeable = False
        if not self.is_full:
            ranks = self.rank(X)
            if np.any(ranks < 0):
                raise ValueError("states must be sorted within each class and have entries >= 0")
            self._order = np.argsort(ranks, kind="stable")
            self._sorted_ranks = ranks[self._order]
            if np.any(np.diff(self._sorted_ranks) == 0):
                raise ValueError("duplicate states")

    def _oriented(self, ascending: np.ndarray) -> np.ndarray:
        return ascending if self.order == "ascending" else ascending[:, ::-1]

    def rank(self, rows, level: int | None = None) -> np.ndarray:
        """Mixed-radix rank of each row, ``-1`` where a class block is not sorted or exceeds ``level``.

        ``level`` defaults to the space's own (its largest entry for a subset).
        """
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim == 1:
            rows = rows[None, :]
        level = self.level if level is None else int(level)
        out = np.zeros(len(rows), dtype=np.int64)
        bad = np.zeros(len(rows), dtype=bool)
        for j, sl in enumerate(self.class_slices):  # loop over classes
            blk = rows[:, sl] if self.order == "ascending" else rows[:, sl][:, ::-1]
            ok = (blk[:, 0] >= 0) & (blk[:, -1] <= level)
            if blk.shape[1] > 1:
                ok &= np.all(blk[:, 1:] >= blk[:, :-1], axis=1)
            bad |= ~ok
            r = colex_rank(np.clip(blk, 0, level), vmax=level)
            out += np.where(ok, r, 0) * self._strides[j]
        return np.where(bad, -1, out)

    def index(self, rows) -> np.ndarray:
        """Index of each row, ``-1`` where it is not a state (unsorted class, entry out of range)."""
        return self.lookup(self.rank(rows))

    def lookup(self, ranks) -> np.ndarray:
        """Index of each rank (as :meth:`rank` gives it), ``-1`` where it is not a state.

        A chain whose transitions change the rank by closed-form amounts (one entry
        of a sorted vector moved by one) finds its targets here without forming them.
        """
        r = np.asarray(ranks, dtype=np.int64)
        if self.is_full:
            return np.where((r >= 0) & (r < self.n_states), r, -1)
        pos = np.minimum(np.searchsorted(self._sorted_ranks, r), len(self._sorted_ranks) - 1)
        hit = (r >= 0) & (self._sorted_ranks[pos] == r)
        return np.where(hit, self._order[pos], -1)

    @property
    def ranks(self) -> np.ndarray:
        """The rank of every state, in the order of ``states``."""
        if self.is_full:
            return np.arange(self.n_states, dtype=np.int64)
        out = np.empty(self.n_states, dtype=np.int64)
        out[self._order] = self._sorted_ranks
        return out

    def format_state(self, i: int) -> str:
        """``(x0=0, x1=2)`` with one class; ``(class1=[2, 1], class2=[0])`` with several."""
        if len(self.counts) == 1:
            return super().format_state(i)
        row = self.states[i]
        return "(" + ", ".join(f"class{j + 1}={row[sl].tolist()}" for j, sl in enumerate(self.class_slices)) + ")"
