"""State spaces with vectorised indexing.

Two kinds of finite sets of integer state vectors, both held as an ``(n_states,
n_vars)`` integer array with variable names, and both mapping a whole array of rows
to state indices with one vectorised call (no Python loop over states):

:class:`StateSpace`
    Any set of vectors inside a bounding box, kept sorted by a mixed-radix key; for a
    full box the key *is* the index, otherwise ``np.searchsorted`` on the keys. A
    box of more than 2^61 points packs each state into several words
    (:class:`Packing`) and keys it by a hash of the words, checked against the words.
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

__all__ = ["Space", "StateSpace", "row_reader", "SortedSpace", "Packing", "hash_words", "colex_rank", "binomial_table", "RANK_LIMIT"]

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

    def column_at(self, j: int) -> np.ndarray:
        """Column ``j`` of :attr:`states` (a space that decodes its states reads that column alone)."""
        return self.states[:, j]

    def row(self, i: int) -> np.ndarray:
        """State ``i`` (a space that decodes its states reads that row alone)."""
        return self.states[int(i)]

    def column(self, name: str) -> np.ndarray:
        return self.column_at(self.names.index(name))

    def format_state(self, i: int) -> str:
        """``(q1=3, q2=0)`` for state ``i``."""
        return "(" + ", ".join(f"{n}={v}" for n, v in zip(self.names, self.row(i))) + ")"

    def namespace(self) -> dict:
        """The state variables by name, for state expressions."""
        return {n: self.column_at(k) for k, n in enumerate(self.names)}


def row_reader(chain):
    """``i -> state i`` of a chain: its space's :meth:`Space.row` (one row decoded, not all of them), or a row of
    ``chain.states`` for a chain without such a space."""
    space = getattr(chain, "space", None)
    return space.row if hasattr(space, "row") else (lambda i: chain.states[int(i)])


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
    seed : int
        The first hash seed tried for a wide box (see below).

    Notes
    -----
    The key of a state is its mixed-radix index in the box (:class:`Packing`) when
    the box has at most 2^61 points: exact, and ``index`` is one matrix-vector
    product and a ``searchsorted`` (nothing at all for a full box). A wider box
    (many variables, as in leader-election or crowds models) packs each state into
    several such words, and the key is a 64-bit hash of the words
    (:func:`hash_words`); the sorted words are kept beside the keys, so that
    ``index`` compares them on every match and stays exact, and a collision between
    two states at construction re-seeds the hash (``wide`` and ``seed`` say which).

    Examples
    --------
    >>> s = StateSpace.box(["q1", "q2"], hi=[2, 2])
    >>> int(s.index(np.array([[1, 2]]))[0]), s.n_states
    (5, 9)
    """

    def __init__(self, states, names: Sequence[str], *, lo=None, hi=None, seed: int = 0):
        self._states = None
        self._columns = {}
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
        self.packing = Packing(self.lo, self.hi, self.names)
        self.radix = self.hi - self.lo + 1
        self.wide = self.packing.n_words > 1
        if not self.wide:
            self.strides = self.packing.strides
            keys = self._raw_key(states)
            if np.any(keys < 0):
                raise ValueError("states outside the given bounding box")
            order = np.argsort(keys)  # equal keys are equal rows: any order among them
            keys = keys[order]
            keep = np.ones(len(keys), dtype=bool)
            keep[1:] = keys[1:] != keys[:-1]
            self.keys = keys[keep]
            self.states = states[order][keep]
            self.is_box = len(self.keys) == int(np.prod(self.radix))
            self.seed = seed
        else:
            if not np.all(self.packing.inside(states)):
                raise ValueError("states outside the given bounding box")
            self._set_wide(states, self.packing.words(states), seed)
            self.is_box = False  # a box wider than 2^61 states is never held in memory
        self.states.flags.writeable = False

    def _set_wide(self, states, words, seed: int) -> None:
        """Sort by the hashed key, drop duplicate states, re-seed on a hash collision."""
        for attempt in range(_MAX_RESEEDS):
            keys = hash_words(words, seed + attempt)
            order = np.argsort(keys)
            keys, w = keys[order], words[order]
            same = keys[1:] == keys[:-1]
            dup = np.zeros(len(keys), dtype=bool)
            if same.any():
                equal = np.all(w[1:] == w[:-1], axis=1)
                if np.any(same & ~equal):
                    continue  # two different states share a key: try the next seed
                dup[1:] = same
            keep = ~dup
            self.keys, self._words, self.seed = keys[keep], w[keep], seed + attempt
            self.states = states[order][keep]
            return
        raise NotApplicableError(f"state keys collided under {_MAX_RESEEDS} hash seeds; report this as a bug")

    @classmethod
    def _presorted(cls, names, packing: "Packing", keys, words, seed: int) -> "StateSpace":
        """A space from distinct states already sorted by key (what an exploration found).

        The rows are decoded from the keys (or ``words``) when :attr:`states` is first read,
        and a column alone by :meth:`column_at`.
        """
        self = cls.__new__(cls)
        self.names = tuple(names)
        self.packing = packing
        self.lo, self.hi = packing.lo, packing.hi
        self.radix = self.hi - self.lo + 1
        self.wide = packing.n_words > 1
        self.keys = keys
        self._states = None
        self._columns = {}
        self.seed = seed
        if self.wide:
            self._words = words
            self.is_box = False
        else:
            self.strides = packing.strides
            self.is_box = len(keys) == int(np.prod(self.radix))
        return self

    # -- the rows, decoded when first read ----------------------------------------------------
    # An exploration keeps each state's key (and, in a wide box, its words); the (n, d) int64 rows are decoded from
    # them only when something reads them all. A PRISM model's checks read only the columns that its labels,
    # rewards and properties name (crowds N=6, R=15: 1.3M states of 19 variables, 198 MB of rows), and a column
    # is decoded alone (:meth:`column_at`).
    @property
    def states(self) -> np.ndarray:
        """The ``(n, d)`` int64 state vectors (read-only), sorted by key."""
        s = self.__dict__.get("_states")
        if s is None:
            rows = np.empty((self.n_vars, self.n_states), dtype=np.int64)  # column-major rows: a column is contiguous
            for j in range(self.n_vars):  # a loop over the variables
                c = self._columns.get(j)
                if c is not None:
                    rows[j] = c
                else:
                    self.packing.decode_column(self._word_of_column(j), j, out=rows[j])
            s = rows.T
            s.flags.writeable = False
            self._states = s
            self._columns = {}  # (views of the rows from now on)
        return s

    @states.setter
    def states(self, value: np.ndarray) -> None:
        self._states = value
        self._columns = {}

    def _word_of_column(self, j: int) -> np.ndarray:
        return self.keys if not self.wide else self._words[:, self.packing.word_of[j]]

    @property
    def n_states(self) -> int:
        return len(self.keys)

    def column_at(self, j: int) -> np.ndarray:
        """Column ``j`` of :attr:`states` (int64, read-only), decoded alone while the rows are not held."""
        s = self.__dict__.get("_states")
        if s is not None:
            return s[:, j]
        c = self._columns.get(j)
        if c is None:
            c = self._columns[j] = self.packing.decode_column(self._word_of_column(j), j)
            c.flags.writeable = False
        return c

    def row(self, i: int) -> np.ndarray:
        """State ``i`` (int64), decoded alone while the rows are not held."""
        s = self.__dict__.get("_states")
        if s is not None:
            return s[int(i)]
        i = range(self.n_states)[int(i)]  # (a negative index counts from the end; out of range: IndexError)
        return self.packing.decode(self.keys[i:i + 1, None] if not self.wide else self._words[i:i + 1])[0]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_columns"] = {}  # (decoded again where needed)
        return state

    @classmethod
    def box(cls, names: Sequence[str], hi, lo=None) -> "StateSpace":
        """All integer vectors with ``lo <= x <= hi`` (``lo`` defaults to 0)."""
        hi = np.asarray(hi, dtype=np.int64)
        lo = np.zeros_like(hi) if lo is None else np.asarray(lo, dtype=np.int64)
        grids = np.indices(tuple(hi - lo + 1)).reshape(len(hi), -1).T + lo
        return cls(grids, names, lo=lo, hi=hi)

    def _raw_key(self, rows: np.ndarray) -> np.ndarray:
        """Mixed-radix key of each row; -1 where the row is outside the box (single-word keys only)."""
        off = rows - self.lo
        inside = np.all((off >= 0) & (off < self.radix), axis=1)
        key = off @ self.strides
        return np.where(inside, key, -1)

    def key(self, rows) -> np.ndarray:
        """The key of each row (the mixed-radix key, or the hash of the words of a wide box).

        Rows outside the box get -1 with single-word keys; with a wide box, their
        key is meaningless (check :meth:`Packing.inside`).
        """
        rows = np.asarray(rows, dtype=np.int64)
        if not self.wide:
            return self._raw_key(rows)
        return hash_words(self.packing.words(rows), self.seed)

    def index(self, rows) -> np.ndarray:
        """Index of each row in the space, ``-1`` where the row is not a state."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.wide:
            if rows.ndim == 1:
                rows = rows[None, :]
            return self.index_words(self.packing.words(rows), inside=self.packing.inside(rows))
        key = self._raw_key(rows)
        if self.is_box:
            return key
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, len(self.keys) - 1)
        return np.where((key >= 0) & (self.keys[pos] == key), pos, -1)

    def index_words(self, words: np.ndarray, *, inside=None) -> np.ndarray:
        """Index of each packed row (``packing.words``), ``-1`` where it is not a state."""
        words = np.asarray(words, dtype=np.int64)
        if not self.wide:
            key = words[:, 0]
            ok = (key >= 0) if inside is None else inside
            if self.is_box:
                return np.where(ok, key, -1)
            pos = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
            return np.where(ok & (self.keys[pos] == key), pos, -1)
        key = hash_words(words, self.seed)
        pos = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        ok = (self.keys[pos] == key) & np.all(self._words[pos] == words, axis=1)
        if inside is not None:
            ok &= inside
        return np.where(ok, pos, -1)


# ------------------------------------------------------------------ packed keys
#: rows per block of :meth:`Packing.decode_column`
DECODE_BLOCK = 1 << 16
#: tries of a new hash seed before a collision of wide keys is reported
_MAX_RESEEDS = 8
_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (a bijection of 64-bit words), in place on a uint64 array."""
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


def hash_words(words: np.ndarray, seed: int = 0) -> np.ndarray:
    """A 64-bit key (int64) of each row of packed words.

    ``h = mix(... mix(mix(s ^ w_0) ^ w_1) ...)`` with ``mix`` the finaliser of
    splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
    generators", OOPSLA 2014; the constants of Vigna's ``splitmix64.c``) and ``s``
    derived from ``seed``. Different rows may share a key; every user of these keys
    compares the words on a match and changes the seed on a collision.

    Examples
    --------
    >>> w = np.array([[1, 2], [2, 1], [1, 2]])
    >>> k = hash_words(w)
    >>> bool(k[0] == k[2]), bool(k[0] == k[1])
    (True, False)
    """
    words = np.asarray(words, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = np.full(len(words), (np.uint64(seed) + np.uint64(1)) * _GOLDEN, dtype=np.uint64)
        for j in range(words.shape[1]):  # loop over words (2-4), not states
            h ^= words[:, j].view(np.uint64)
            _mix(h)
    return h.view(np.int64)


class Packing:
    """Integer vectors of a box packed into mixed-radix words of at most 2^61 values.

    The columns are grouped, in order, into as few words as keep each word's
    product of ranges ``hi - lo + 1`` below 2^61; within a word the last column
    varies fastest. One word is the exact key of a state (what :class:`StateSpace`
    sorts by); several words are hashed into one 64-bit key (:func:`hash_words`),
    with the words kept to resolve collisions.

    Attributes
    ----------
    n_words : int
    word_of : (d,) ndarray of int
        The word that holds each column.
    strides : (d,) ndarray of int64
        The column's multiplier within its word: a change ``dx`` of column ``j``
        changes word ``word_of[j]`` by ``strides[j] * dx``.

    Examples
    --------
    >>> p = Packing([0, 0, 0], [2**40, 2**40, 3])
    >>> p.n_words, p.word_of.tolist()
    (2, [0, 1, 1])
    >>> w = p.words(np.array([[5, 7, 2]]))
    >>> p.decode(w).tolist()
    [[5, 7, 2]]
    """

    def __init__(self, lo, hi, names: Sequence[str] | None = None):
        self.lo = np.asarray(lo, dtype=np.int64)
        self.hi = np.asarray(hi, dtype=np.int64)
        d = len(self.lo)
        radix = [int(h) - int(l) + 1 for l, h in zip(self.lo.tolist(), self.hi.tolist())]
        self.radix = np.asarray(radix, dtype=np.int64) if d else np.zeros(0, np.int64)
        word_of = np.zeros(d, dtype=np.int64)
        strides = np.ones(d, dtype=np.int64)
        w, prod = 0, 1
        ends = []
        for j, r in enumerate(radix):
            if r > _MAX_KEY:
                name = names[j] if names is not None else f"column {j}"
                raise NotApplicableError(f"variable {name!r} has {r} values, more than a state key holds (2^61)")
            if prod * r > _MAX_KEY:
                ends.append(j)
                w, prod = w + 1, 1
            word_of[j] = w
            prod *= r
        ends.append(d)
        start = 0
        for end in ends:  # strides within each word: the last column fastest
            acc = 1
            for j in range(end - 1, start - 1, -1):
                strides[j] = acc
                acc *= radix[j]
            start = end
        self.n_words = max(1, len(ends))
        self.word_of = word_of
        self.strides = strides
        self._groups = [np.flatnonzero(word_of == k) for k in range(self.n_words)]

    def inside(self, rows: np.ndarray) -> np.ndarray:
        """Whether each row lies in the box."""
        return np.all((rows >= self.lo) & (rows <= self.hi), axis=1)

    def inside_words(self, rows: np.ndarray):
        """``(inside, words)``: whether each row lies in the box, and the words (meaningful where it does)."""
        off = np.asarray(rows, dtype=np.int64) - self.lo
        inside = np.all(off.view(np.uint64) < self.radix.view(np.uint64), axis=1)  # negative offsets wrap to huge
        if self.n_words == 1:
            return inside, (off @ self.strides)[:, None]
        out = np.empty((len(off), self.n_words), dtype=np.int64)
        for k, cols in enumerate(self._groups):  # loop over words
            out[:, k] = off[:, cols] @ self.strides[cols]
        return inside, out

    def words(self, rows: np.ndarray) -> np.ndarray:
        """The ``(n, n_words)`` packed words of rows inside the box."""
        rows = np.asarray(rows, dtype=np.int64)
        off = rows - self.lo
        if self.n_words == 1:
            return (off @ self.strides)[:, None]
        out = np.empty((len(rows), self.n_words), dtype=np.int64)
        for k, cols in enumerate(self._groups):  # loop over words
            out[:, k] = off[:, cols] @ self.strides[cols]
        return out

    def decode_column(self, word: np.ndarray, j: int, out: np.ndarray | None = None) -> np.ndarray:
        """Column ``j`` of the rows whose word ``word_of[j]`` is ``word``: ``(w // stride_j) % radix_j + lo_j``
        (into ``out``, a contiguous int64 vector, when given).

        Blocks of :data:`DECODE_BLOCK` rows: the quotient is a small buffer used again, not a vector as long as
        the column (at 1.3M states a fresh 10 MB vector cost more in page faults than the arithmetic).

        >>> p = Packing([0, -1], [4, 3])
        >>> w = p.words(np.array([[3, -1], [4, 2]]))[:, 0]
        >>> p.decode_column(w, 0).tolist(), p.decode_column(w, 1).tolist()
        ([3, 4], [-1, 2])
        """
        x = np.asarray(word, dtype=np.int64)
        n = len(x)
        if out is None:
            out = np.empty(n, dtype=np.int64)
        stride, r, lo = int(self.strides[j]), int(self.radix[j]), int(self.lo[j])
        q = np.empty(min(n, DECODE_BLOCK), dtype=np.int64)
        for a in range(0, n, DECODE_BLOCK):  # a loop over blocks of rows
            b = min(n, a + DECODE_BLOCK)
            qa, o = q[:b - a], out[a:b]
            np.floor_divide(x[a:b], stride, out=qa)  # (libdivide: two quotients and a product, not a remainder)
            np.floor_divide(qa, r, out=o)
            np.multiply(o, r, out=o)
            np.subtract(qa, o, out=o)
            if lo:
                o += lo
        return out

    def decode(self, words: np.ndarray) -> np.ndarray:
        """The rows of packed words (the inverse of :meth:`words`), in column-major order.

        Each word is divided by the ranges of its columns from the last (fastest) one:
        one ``divmod`` per column, each writing a contiguous column. The result is
        Fortran-ordered, so a column (what an expression over the states reads) is a
        view; writing rows of 19 columns one column at a time was 3x slower (1.3M
        states: 288 ms against 96 ms).
        """
        words = np.asarray(words, dtype=np.int64)
        d = len(self.lo)
        out = np.empty((d, len(words)), dtype=np.int64)
        for k, cols in enumerate(self._groups):  # loop over words, then over their columns
            x = words[:, k].copy()
            q = np.empty_like(x)
            for j in cols[::-1]:
                # x = q r + (x - q r): NumPy divides an integer array by a scalar with libdivide in floor_divide
                # (not in divmod), so the quotient, a product and a difference are 1.2-1.6x faster than one
                # divmod (26,233 states of 26 variables: 2.3 -> 1.4 ms; 1.3M of 19: 87 -> 73 ms)
                r = self.radix[j]
                np.floor_divide(x, r, out=q)
                row = out[j]
                np.multiply(q, r, out=row)
                np.subtract(x, row, out=row)
                x, q = q, x
        out += self.lo[:, None]
        return out.T


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
