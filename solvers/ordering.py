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
    coords = np.asarray(coords, dtype=np.int64)
    n, d = coords.shape
    jumps = np.maximum(np.asarray(jumps, dtype=np.int64), 0)
    splittable = jumps > 0
    if n == 0:
        return np.zeros(0, np.int64)
    box = np.zeros(n, dtype=np.int64)
    lo = coords.min(0)[None, :]
    hi = coords.max(0)[None, :]
    alive = np.ones(1, dtype=bool)  # boxes that may still be split
    key = np.zeros(n, dtype=np.int64)
    for _level in range(_MAX_LEVELS):
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
        if separators is not None:
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
    return np.argsort(key, kind="stable")


# 3**39 < 2**63: the base-3 key of a point fits in int64 for 39 levels
_MAX_LEVELS = 39
