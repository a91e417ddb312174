"""Stationary distributions by linear level reduction with low-rank upward blocks.

Many queueing chains are block tridiagonal in a *level* (here: the largest
coordinate, e.g. the longest queue) and move *up* a level only from a few states of
each level. Join-the-shortest-queue is the example: the longest queue grows only when
an arrival finds all queues equal, so each level has one state with an upward
transition, whatever the number of servers.

For such chains Gaussian elimination level by level, from the top level down, is
exact and costs little (linear level reduction, Gaver, Jacobs & Latouche 1984;
Latouche & Ramaswami 1999, sec. 10.2). Write ``A_b``, ``U_b``, ``D_b`` for the blocks
of level ``b`` to itself, one level up and one level down, and ``S_b`` for the
generator of the chain watched only on level ``b`` while it stays at levels ``>= b``
(the Schur complement of the levels above):

.. math::

    S_M = A_M, \\qquad S_b = A_b + U_b (-S_{b+1})^{-1} D_{b+1}, \\qquad
    \\pi_{b+1} = \\pi_b U_b (-S_{b+1})^{-1}, \\qquad \\pi_0 S_0 = 0.

When ``U_b`` has nonzero rows only at the ``r_b`` states ``P_b`` of level ``b``, the
correction touches only those rows of ``S_b``, and only ``r_b`` left solves with
``-S_{b+1}`` are needed. Each ``-S_b`` is therefore the sparse ``-A_b`` with ``r_b``
dense rows; it is solved by block elimination of the sparse part ``F`` (the other
states), banded LAPACK (``gbtrf``) when that part is narrow and SuperLU otherwise,
and a dense ``r_b x r_b`` Schur complement on ``P_b``. The cost is
``O(sum_b r_b (m_b + m_{b+1}))`` plus the sparse factorisations of the levels: linear
in the number of states for JSQ, where a sparse LU of the whole chain fills like
``N log N`` or worse.

Accuracy: every quantity computed is a product or sum of nonnegative numbers except
the diagonals, which are set from row sums in the manner of GTH (Grassmann, Taksar &
Heyman 1985): ``S_b 1 = -D_b 1`` (what leaves level ``b`` downward), and the Schur
complement on ``P_b`` has row sums ``d_P + G h`` (``h`` the solve of ``d_F``). So no
subtraction of nearly equal numbers forms a pivot, and the levels are solved in the
stable M-matrix setting. The caller reports the residual of the answer.

References
----------
D. P. Gaver, P. A. Jacobs, G. Latouche, "Finite birth-and-death models in randomly
changing environments", Adv. Appl. Probab. 16, 1984 (linear level reduction).
G. Latouche, V. Ramaswami, *Introduction to Matrix Analytic Methods in Stochastic
Modeling*, SIAM 1999, ch. 10. W. K. Grassmann, M. I. Taksar, D. P. Heyman,
"Regenerative analysis and steady state distributions for Markov chains", Oper. Res.
33, 1985.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import lapack

__all__ = ["LevelPlan", "plan_level_reduction", "stationary_level_reduction"]

#: sparse parts of bandwidth up to this are factorised by banded LAPACK
BAND_MAX = 16
#: the method pays only when levels are not tiny (per-level overhead ~50-300 us)
MIN_STATES_PER_LEVEL = 64
#: dense upward rows may cost at most this many times the generator's nonzeros
MAX_DENSE_WORK = 2.0
#: and never more than this many dense entries (800 MB), whatever is asked
MAX_DENSE_ENTRIES = 10**8


@dataclass(frozen=True)
class LevelPlan:
    """How the states of a chain split into levels for :func:`stationary_level_reduction`.

    Attributes
    ----------
    order : (n,) ndarray of int
        The states, level by level; inside a level the states without an upward
        transition (``F``) come first, those with one (``P``) last.
    bounds : (L + 1,) ndarray of int
        Level ``b`` is ``order[bounds[b]:bounds[b + 1]]``.
    n_free : (L,) ndarray of int
        ``|F|`` of each level (the rest, ``r_b = m_b - n_free[b]``, are ``P``).
    level : (n,) ndarray of int
        The level of each state, ``0 .. L - 1``.
    local : (n,) ndarray of int
        The position of each state inside its level (in ``order``).
    entries : tuple of ndarray
        The off-diagonal nonzeros of the ``Q`` the plan was made for: source, target,
        rate, level step (-1, 0, +1); kept so that the solve does not rebuild them.
    """

    order: np.ndarray
    bounds: np.ndarray
    n_free: np.ndarray
    level: np.ndarray
    local: np.ndarray
    entries: tuple

    @property
    def n_levels(self) -> int:
        return len(self.bounds) - 1


def plan_level_reduction(Q: sp.spmatrix, levels: np.ndarray, *,
                         min_states_per_level: int = MIN_STATES_PER_LEVEL,
                         max_dense_work: float = MAX_DENSE_WORK) -> tuple[LevelPlan | None, str]:
    """A :class:`LevelPlan` for ``Q`` and the state levels ``levels``, or ``(None, why)``.

    The plan exists when every transition changes the level by at most one, there
    are at least two levels of ``min_states_per_level`` states on average (below
    that, the per-level overhead outweighs a sparse LU), and the dense rows the
    upward transitions create cost at most ``max_dense_work`` times the nonzeros of
    ``Q``. All checks are vectorised, ``O(nnz)``.
    """
    Q = sp.csr_matrix(Q)
    n = Q.shape[0]
    uniq, lev = np.unique(np.asarray(levels), return_inverse=True)
    L = len(uniq)
    if L < 2:
        return None, "fewer than two levels"
    if n < min_states_per_level * L:
        return None, f"{L} levels for {n} states (fewer than {min_states_per_level} states per level)"
    it = np.int32 if n < 2**31 else np.int64  # 32-bit indices: half the fresh pages, which cost here
    lev = lev.astype(it)
    rows = np.repeat(np.arange(n, dtype=it), np.diff(Q.indptr))
    off = (rows != Q.indices) & (Q.data != 0)
    src, dst, rate = rows[off], Q.indices[off].astype(it, copy=False), Q.data[off]
    del rows
    step = lev[dst] - lev[src]
    if step.size and np.abs(step).max() > 1:
        return None, "a transition skips a level"
    is_up = np.zeros(n, bool)
    is_up[src[step > 0]] = True
    m = np.bincount(lev, minlength=L)
    r = np.bincount(lev, weights=is_up, minlength=L).astype(np.int64)
    work = float(np.sum(r[:-1] * (m[:-1] + m[1:])))
    if work > MAX_DENSE_ENTRIES:
        return None, f"{int(r.sum())} states move up a level ({work:.3g} dense entries > {MAX_DENSE_ENTRIES:.0e})"
    if work > max_dense_work * max(Q.nnz, 1):
        return None, f"{int(r.sum())} states move up a level (dense work {work:.3g} > {max_dense_work} nnz)"
    order = np.lexsort((np.arange(n), is_up, lev))
    bounds = np.concatenate([[0], np.cumsum(m)])
    local = np.empty(n, it)
    local[order] = np.arange(n) - bounds[lev[order]]
    return LevelPlan(order, bounds, m - r, lev, local, (src, dst, rate, step.astype(np.int8))), ""


class _FreeParts:
    """Factorisations of the sparse parts ``N_FF`` of all levels, done before the recursion.

    ``N_FF`` (the states of a level without an upward transition) does not depend on
    the corrections the recursion adds to the ``P`` rows, so all levels are factorised
    at once: the levels whose ``N_FF`` has bandwidth <= :data:`BAND_MAX` as one
    block-diagonal banded matrix (one LAPACK ``dgbtrf``; partial pivoting never
    leaves a block, whose other rows are zero in its columns), the others by SuperLU
    each. ``solve`` gives all levels' right-hand sides at once; ``solve_level``
    one level's (transposed) system.
    """

    def __init__(self, fi, fj, fv, diag, level_of_row, starts, wide):
        nf = len(diag)
        self.starts = starts
        self.wide = {}
        band = ~wide[level_of_row[fi]] if wide.any() else slice(None)
        d = fi[band] - fj[band]
        self.kl = kl = int(max(0, d.max(initial=0)))
        self.ku = ku = int(max(0, -d.min(initial=0)))
        rows = 2 * kl + ku + 1
        ab = np.zeros((rows, nf), order="F")
        d += kl + ku  # in place: A[i, j] sits at ab[kl + ku + i - j, j]
        d += rows * fj[band].astype(np.int64 if rows * nf >= 2**31 else d.dtype, copy=False)
        ab.reshape(-1, order="F")[d] = fv[band]
        ab[kl + ku] = diag
        for b in np.flatnonzero(wide):  # identity in the band; factorised apart
            s, e = starts[b], starts[b + 1]
            ab[kl + ku, s:e] = 1.0
            sel = ~band & (fi >= s) & (fi < e)
            N = sp.csc_matrix((np.concatenate([fv[sel], diag[s:e]]),
                               (np.concatenate([fi[sel] - s, np.arange(e - s)]),
                                np.concatenate([fj[sel] - s, np.arange(e - s)]))), shape=(e - s, e - s))
            self.wide[int(b)] = spla.splu(N, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                          options=dict(SymmetricMode=True))
        self.lu, self.piv, info = lapack.dgbtrf(ab, kl, ku) if nf else (ab, np.zeros(0, np.int32), 0)
        if info != 0:
            raise np.linalg.LinAlgError(f"level reduction: singular pivot {info} in a level's banded part")
        self.lu = np.asfortranarray(self.lu)

    def solve(self, B):
        """``N_FF^{-1} B`` for all levels at once (rows: the F states, level by level), clipped at 0."""
        if not len(B):
            return B
        x, _ = lapack.dgbtrs(self.lu, self.kl, self.ku, B, self.piv)
        for b, slu in self.wide.items():
            s, e = self.starts[b], self.starts[b + 1]
            x[s:e] = slu.solve(np.ascontiguousarray(B[s:e]))
        return np.maximum(x, 0.0)  # the exact values are >= 0 (an M-matrix inverse)

    def solve_level(self, b, B):
        """``N_FF^{-T} B`` of level ``b``, clipped at 0."""
        s, e = self.starts[b], self.starts[b + 1]
        if b in self.wide:
            x = self.wide[b].solve(np.ascontiguousarray(B), trans="T")
        else:
            x, _ = lapack.dgbtrs(self.lu[:, s:e], self.kl, self.ku, B, self.piv[s:e] - s, trans=1)
        return np.maximum(x, 0.0)


def _dense_rows(size_rows, size_cols, row, col, val, level):
    """The entries ``(row, col)`` of each level's small dense block, in one flat buffer."""
    offsets = np.concatenate([[0], np.cumsum(size_rows * size_cols)])
    flat = np.zeros(int(offsets[-1]))
    np.add.at(flat, offsets[level] + row * size_cols[level] + col, val)
    return flat, offsets


def stationary_level_reduction(Q: sp.spmatrix, plan: LevelPlan, *, level_zero=None) -> tuple[np.ndarray, dict]:
    """Stationary vector of the irreducible generator ``Q`` by linear level reduction.

    Parameters
    ----------
    Q : (n, n) sparse matrix
        An irreducible generator (off-diagonal rates >= 0, rows summing to 0).
    plan : LevelPlan
        From :func:`plan_level_reduction` for this ``Q`` (it carries ``Q``'s entries).
    level_zero : callable, optional
        ``S0 -> pi0``: the stationary vector of the generator censored on level 0 (the
        stationary solvers pass theirs, with its checks and recoveries); default the
        dense GTH elimination (:func:`exactq.solvers.linear.gth`).

    Returns
    -------
    pi : (n,) ndarray
        The stationary vector (sums to 1).
    info : dict
        ``algorithm``, ``levels``, ``upward_states`` (``sum r_b``), ``banded_levels``.

    Examples
    --------
    A birth-death chain (M/M/1/255 with load 1/2) cut into four levels of 64 states,
    against its geometric law:

    >>> import scipy.sparse as sp
    >>> n = 256
    >>> Q = sp.diags([np.full(n - 1, 2.0), np.full(n - 1, 1.0)], [-1, 1], format="lil")
    >>> Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    >>> plan, why = plan_level_reduction(Q.tocsr(), np.arange(n) // 64)
    >>> pi, info = stationary_level_reduction(Q.tocsr(), plan)
    >>> exact = 0.5 ** np.arange(n); exact /= exact.sum()
    >>> bool(np.allclose(pi, exact, rtol=1e-12, atol=0)), info["upward_states"]
    (True, 3)
    """
    rr, cc, vv, step = plan.entries  # step: -1 down, 0 same, +1 up
    lev, loc = plan.level, plan.local
    it = loc.dtype
    L = plan.n_levels
    m = np.diff(plan.bounds).astype(it)
    f = plan.n_free.astype(it)
    r = m - f
    lr = lev[rr]
    ri, ci = loc[rr], loc[cc]
    # per state (in plan order): the rate down and the off-diagonal rates inside the level
    pos = np.empty(len(lev), it)
    pos[plan.order] = np.arange(len(lev), dtype=it)
    is_down, is_same = step < 0, step == 0
    down = np.bincount(pos[rr[is_down]], vv[is_down], minlength=len(lev))
    # the F states of all levels, numbered level by level
    fstart = np.concatenate([[0], np.cumsum(f)]).astype(it)
    free = np.flatnonzero(is_same & (ri < f[lr]))
    lf, rf, cf, vf = lr[free], ri[free], ci[free], vv[free]
    fi = fstart[lf] + rf
    ff = cf < f[lf]
    gpos_f = plan.bounds[:-1].repeat(f) + (np.arange(int(fstart[-1])) - fstart[:-1].repeat(f))
    exit_f = np.bincount(fi, vf, minlength=int(fstart[-1])) + down[gpos_f]
    width = np.abs(rf[ff] - cf[ff])
    band = np.zeros(L, np.int64)
    if width.max(initial=0) > BAND_MAX:  # some level is wide: find which
        np.maximum.at(band, lf[ff], width)
    wide = band > BAND_MAX
    parts = _FreeParts(fi[ff], fstart[lf[ff]] + cf[ff], -vf[ff], exit_f, np.repeat(np.arange(L), f), fstart, wide)
    # X = N_FF^{-1} (-N_FP) and h = N_FF^{-1} d_F, all levels in one solve (P columns padded to max r)
    rmax = int(r.max(initial=0))
    fp = ~ff
    rhs = np.zeros((int(fstart[-1]), rmax + 1), order="F")
    np.add.at(rhs, (fi[fp], cf[fp] - f[lf[fp]]), vf[fp])
    rhs[:, rmax] = down[gpos_f]
    XH = parts.solve(rhs)
    # the P rows' own off-diagonal rates (r_b x m_b per level) and the rows up (r_{b-1} x m_b)
    pp = is_same & (ri >= f[lr])
    GA, goff = _dense_rows(r, m, ri[pp] - f[lr[pp]], ci[pp], vv[pp], lr[pp])
    up = step > 0
    r_below = np.concatenate([[0], r[:-1]])
    UA, uoff = _dense_rows(r_below, m, ri[up] - f[lr[up]], ci[up], vv[up], lr[up] + 1)
    # the down entries of each level, for the corrections W_{b-1} = Y_b D_b
    o = np.flatnonzero(is_down)[np.argsort(lr[is_down], kind="stable")]
    dcut = np.searchsorted(lr[o], np.arange(L + 1))
    d_i, d_j, d_v = ri[o], ci[o], vv[o]

    Y = [None] * L
    W = None  # the dense correction rows of S_b at P_b: (r_b, m_b)
    for b in range(L - 1, -1, -1):
        mb, fb, rb = int(m[b]), int(f[b]), int(r[b])
        G = GA[goff[b]:goff[b + 1]].reshape(rb, mb)  # the off-diagonal rates of the P rows of S_b
        if W is not None:
            G = G + W
            G[np.arange(rb), fb + np.arange(rb)] = 0.0  # a self-return is not a rate
        if b == 0:
            pi0 = _level_zero(plan, G, ri, ci, vv, lr, is_same, f, level_zero)
            break
        s, e = fstart[b], fstart[b + 1]
        X, h = XH[s:e, :rb], XH[s:e, rmax]
        GF = G[:, :fb]
        GX = GF @ X
        Z = -(G[:, fb:] + GX)  # the Schur complement on P: off-diagonal <= 0
        np.fill_diagonal(Z, 0.0)  # GTH: the diagonal from the row sums d_P + G h
        np.fill_diagonal(Z, down[plan.bounds[b] + fb:plan.bounds[b + 1]] + GF @ h - Z.sum(axis=1))
        # the upward rows into this level from P_{b-1}: Y_b = U~ (-S_b)^{-1}
        U = UA[uoff[b]:uoff[b + 1]].reshape(int(r[b - 1]), mb)
        UF = U[:, :fb]
        YP = U[:, fb:] + UF @ X
        if rb == 1:  # the common case (JSQ): a scalar pivot
            YP = np.maximum(YP / Z[0, 0], 0.0)
        elif rb:
            YP = np.maximum(np.linalg.solve(Z.T, YP.T).T, 0.0)
        YF = parts.solve_level(b, (UF + YP @ GF).T).T if fb else UF
        Y[b] = Yb = np.hstack([YF, YP])
        # W_{b-1} = Y_b D_b: the correction rows of S_{b-1}
        k = slice(dcut[b], dcut[b + 1])
        W = np.stack([np.bincount(d_j[k], y[d_i[k]] * d_v[k], minlength=int(m[b - 1])) for y in Yb]) \
            if len(Yb) else None
    # pi_{b+1} = pi_b Y_{b+1}: kept finite by rescaling a level whose largest entry leaves
    # [1e-100, 1e100] (its log scale carried along), so that mass far above or below
    # level 0 neither overflows nor underflows on the way
    out = [pi0]
    logs = np.zeros(L)
    for b in range(1, L):
        v = out[-1][int(f[b - 1]):] @ Y[b]
        top = float(v.max(initial=0.0))
        logs[b] = logs[b - 1]
        if top > 0.0 and not 1e-100 <= top <= 1e100:
            v = v / top
            logs[b] += np.log(top)
        out.append(v)
    if logs.any():  # rescaled somewhere: bring every level to the scale of the largest
        peak = max(logs[b] + np.log(out[b].max()) for b in range(L) if out[b].max(initial=0.0) > 0)
        out = [v * np.exp(logs[b] - peak) for b, v in enumerate(out)]
    x = np.concatenate(out)
    pi = np.empty_like(x)
    pi[plan.order] = x
    pi /= pi.sum()
    return pi, {"algorithm": "linear level reduction by the largest coordinate", "levels": L,
                "upward_states": int(r.sum()), "banded_levels": int(np.sum(~wide & (f > 0)))}


def _level_zero(plan, G, ri, ci, vv, lr, is_same, f, solve=None):
    """Stationary vector of ``S_0``, the (conservative) generator censored on level 0 (by ``solve``, default GTH)."""
    m0, f0 = int(plan.bounds[1]), int(f[0])
    if m0 == 1:
        return np.ones(1)
    sel = is_same & (lr == 0) & (ri < f0)
    pr, pc = np.nonzero(G)
    i = np.concatenate([ri[sel], pr + f0])
    j = np.concatenate([ci[sel], pc])
    v = np.concatenate([vv[sel], G[pr, pc]])
    S0 = sp.csr_matrix((np.concatenate([v, -np.bincount(i, v, minlength=m0)]),
                        (np.concatenate([i, np.arange(m0)]), np.concatenate([j, np.arange(m0)]))), shape=(m0, m0))
    if solve is None:
        from .linear import gth

        return gth(S0.toarray())
    return solve(S0)
