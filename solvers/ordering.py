"""Fill-reducing orderings for sparse LU of generators with geometric structure.

Queueing chains usually have states on an integer lattice with short jumps. A
*geometric nested dissection* (George, "Nested dissection of a regular finite element
mesh", SIAM J. Numer. Anal. 10, 1973) splits the bounding box along its longest side
with a separator slab as thick as the longest jump in that direction, orders the two
halves recursively and the separator last. On a k x k grid this gives O(k^2 log k) fill
and O(k^3) work, against the O(k^3) fill of a band ordering; it beats SuperLU's own
minimum-degree orderings by 2x on the 10^6-state JSQ chain (see bench/ctmc.py).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nested_dissection"]


def nested_dissection(coords: np.ndarray, jumps: np.ndarray, *, leaf_size: int = 32,
                      separators: list | None = None) -> np.ndarray:
    """Nested-dissection permutation of points on an integer lattice.

    Parameters
    ----------
    coords : (n, d) ndarray of int
        Lattice coordinates of the unknowns.
    jumps : (d,) ndarray of int
        Largest coordinate change of one transition in each direction (the
        separator thickness; a direction with jump 0 is never split).
    leaf_size : int
        Stop splitting at this many points.
    separators : list, optional
        If given, receives one array per level: the sizes of that level's separators
        (what :func:`exactq.solvers.linear.predict_lu` turns into a fill estimate).

    Returns
    -------
    perm : (n,) ndarray of int
        ``perm[k]`` is the unknown placed at position ``k`` (separators last).

    Notes
    -----
    All boxes of one level are split at once. Each point accumulates a base-3 key,
    one digit per level (0 left half, 1 right half, 2 separator; points whose box is
    no longer split get 0s); sorting by the key lists every box's left subtree, then
    its right subtree, then its separator. No loop runs over points or boxes, only
    over the O(log n) levels.
    """
    given = coords
    coords = np.asarray(coords, dtype=np.int64)
    n, d = coords.shape
    jumps = np.maximum(np.asarray(jumps, dtype=np.int64), 0)
    if n == 0:
        return np.zeros(0, np.int64)
    key = (tuple(jumps.tolist()), int(leaf_size))
    hit = _cached(given, coords, key)
    if hit is not None:
        perm, seps = hit
        if separators is not None:
            separators.extend(seps)
        return perm.copy()
    seps = []
    perm = _dissect(coords, jumps, leaf_size, seps)
    _remember(given, coords, key, perm, seps)
    if separators is not None:
        separators.extend(seps)
    return perm.copy()


#: the last ordering made (:func:`_cached`): the stationary solver asks for the same one twice, once to predict the
#: LU's fill (:func:`exactq.solvers.linear.predict_lu`) and once to factorise (190 ms at 490,000 states)
_LAST: dict = {}


def _fingerprint(coords: np.ndarray) -> tuple:
    """The shape and two sums of the coordinates: an array changed in place between two calls is not taken for
    the one ordered before (one pass, a few percent of an ordering's cost)."""
    w = np.arange(1, coords.shape[1] + 1, dtype=np.int64)
    return coords.shape, int(coords.sum()), int((coords @ w) @ np.arange(coords.shape[0], dtype=np.int64) % (1 << 61))


def _cached(given, coords: np.ndarray, key: tuple):
    """``(perm, separators)`` when the last ordering was of this same array (the caller's object, alive) with the same
    jumps and leaf size, and its contents match (:func:`_fingerprint`); else None."""
    last = _LAST.get("entry")
    if last is None or last[0]() is not given or last[1] != key or last[2] != _fingerprint(coords):
        return None
    return last[3], last[4]


def _remember(given, coords: np.ndarray, key: tuple, perm: np.ndarray, seps: list) -> None:
    import weakref

    try:
        ref = weakref.ref(given)
    except TypeError:  # (a list, say: nothing to recognise it by)
        _LAST.pop("entry", None)
        return
    _LAST["entry"] = (ref, key, _fingerprint(coords), perm, [s.copy() for s in seps])


def separator_sizes(coords: np.ndarray, jumps: np.ndarray, levels: int, *, leaf_size: int = 32) -> list:
    """The sizes of the separators of :func:`nested_dissection`'s first ``levels`` levels (one array per level),
    without the ordering: the largest separators, at a fraction of the whole dissection's cost (a lower bound of
    its fill and work for :func:`exactq.solvers.linear.predict_lu`)."""
    coords = np.asarray(coords, dtype=np.int64)
    seps: list = []
    if coords.shape[0]:
        _dissect(coords, np.maximum(np.asarray(jumps, dtype=np.int64), 0), leaf_size, seps, levels=levels)
    return seps


def _dissect(coords: np.ndarray, jumps: np.ndarray, leaf_size: int, separators: list,
             levels: int | None = None) -> np.ndarray | None:
    """The ordering of :func:`nested_dissection` (its separators' sizes appended to ``separators``); with
    ``levels``, only that many levels' separators and no ordering (None)."""
    n = coords.shape[0]
    splittable = jumps > 0
    box = np.zeros(n, dtype=np.int64)
    lo = coords.min(0)[None, :]
    hi = coords.max(0)[None, :]
    alive = np.ones(1, dtype=bool)  # boxes that may still be split
    key = np.zeros(n, dtype=np.int64)
    for _level in range(_MAX_LEVELS if levels is None else min(levels, _MAX_LEVELS)):
        size = np.bincount(box, minlength=len(lo))
        extent = np.where(splittable[None, :], hi - lo, -1)
        k = np.argmax(extent, axis=1)
        w = jumps[k]
        ext_k = extent[np.arange(len(lo)), k]
        split = alive & (size > leaf_size) & (ext_k >= 2 * w + 1)
        if not split.any():
            break
        c = (lo[np.arange(len(lo)), k] + hi[np.arange(len(lo)), k] - w + 1) // 2
        pk = k[box]
        x = coords[np.arange(n), pk]
        pc, pw = c[box], w[box]
        digit = np.where(x < pc, 0, np.where(x < pc + pw, 2, 1))
        digit = np.where(split[box], digit, 0)
        key = key * 3 + digit
        # children: (parent, digit) -> compact ids with inherited, narrowed bounds
        raw = box * 3 + digit
        present = np.zeros(3 * len(lo), dtype=bool)
        present[raw] = True
        child = np.flatnonzero(present)
        remap = np.cumsum(present) - 1
        box = remap[raw]
        parent, dig = np.divmod(child, 3)
        separators.append(np.bincount(box, minlength=len(child))[(dig == 2) & split[parent]])
        was_split = split[parent]
        new_lo, new_hi = lo[parent].copy(), hi[parent].copy()
        rows = np.flatnonzero(was_split)
        kk = k[parent[rows]]
        cc, ww = c[parent[rows]], w[parent[rows]]
        dd = dig[rows]
        new_hi[rows, kk] = np.where(dd == 0, cc - 1, np.where(dd == 2, cc + ww - 1, new_hi[rows, kk]))
        new_lo[rows, kk] = np.where(dd == 1, cc + ww, np.where(dd == 2, cc, new_lo[rows, kk]))
        lo, hi = new_lo, new_hi
        alive = was_split & (dig != 2)
    return np.argsort(key, kind="stable") if levels is None else None


# 3**39 < 2**63: the base-3 key of a point fits in int64 for 39 levels
_MAX_LEVELS = 39
