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
    """

    order: np.ndarray
    bounds: np.ndarray
    n_free: np.ndarray
    level: np.ndarray
    local: np.ndarray

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
    rows = np.repeat(np.arange(n), np.diff(Q.indptr))
    off = (rows != Q.indices) & (Q.data != 0)
    step = lev[Q.indices[off]] - lev[rows[off]]
    if step.size and np.abs(step).max() > 1:
        return None, "a transition skips a level"
    is_up = np.zeros(n, bool)
    is_up[rows[off][step > 0]] = True
    m = np.bincount(lev, minlength=L)
    r = np.bincount(lev, weights=is_up, minlength=L).astype(np.int64)
    work = float(np.sum(r[:-1] * (m[:-1] + m[1:])))
    if work > MAX_DENSE_ENTRIES:
        return None, f"{int(r.sum())} states move up a level ({work:.3g} dense entries > {MAX_DENSE_ENTRIES:.0e})"
    if work > max_dense_work * max(Q.nnz, 1):
        return None, f"{int(r.sum())} states move up a level (dense work {work:.3g} > {max_dense_work} nnz)"
    order = np.lexsort((np.arange(n), is_up, lev))
    bounds = np.concatenate([[0], np.cumsum(m)])
    local = np.empty(n, np.int64)
    local[order] = np.arange(n) - bounds[lev[order]]
    return LevelPlan(order, bounds, m - r, lev, local), ""


class _Sparse:
    """Solves with the sparse part ``N_FF`` of one level: banded LAPACK or SuperLU."""

    def __init__(self, i, j, v, diag, f):
        self.f = f
        if f == 0:
            return
        kl = int(max(0, (i - j).max(initial=0)))
        ku = int(max(0, (j - i).max(initial=0)))
        self.banded = max(kl, ku) <= BAND_MAX
        if self.banded:
            ab = np.zeros((2 * kl + ku + 1, f))
            ab[kl + ku + i - j, j] = v
            ab[kl + ku, np.arange(f)] = diag
            self.lu, self.piv, info = lapack.dgbtrf(ab, kl, ku)
            if info != 0:
                raise np.linalg.LinAlgError(f"banded LU: singular pivot {info}")
            self.kl, self.ku = kl, ku
        else:
            N = sp.csc_matrix((np.concatenate([v, diag]), (np.concatenate([i, np.arange(f)]),
                                                           np.concatenate([j, np.arange(f)]))), shape=(f, f))
            self.slu = spla.splu(N, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                 options=dict(SymmetricMode=True))

    def solve(self, B, trans=False):
        """``N_FF^{-1} B`` (or ``N_FF^{-T} B``), clipped at 0 (the exact values are >= 0)."""
        B = np.ascontiguousarray(B, dtype=float).reshape(self.f, -1)
        if self.banded:
            x, info = lapack.dgbtrs(self.lu, self.kl, self.ku, B, self.piv, trans=1 if trans else 0)
        else:
            x = self.slu.solve(B, trans="T" if trans else "N")
        return np.maximum(x, 0.0)


def stationary_level_reduction(Q: sp.spmatrix, plan: LevelPlan) -> tuple[np.ndarray, dict]:
    """Stationary vector of the irreducible generator ``Q`` by linear level reduction.

    Parameters
    ----------
    Q : (n, n) sparse matrix
        An irreducible generator (off-diagonal rates >= 0, rows summing to 0).
    plan : LevelPlan
        From :func:`plan_level_reduction`.

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
    Q = sp.coo_matrix(Q)
    off = (Q.row != Q.col) & (Q.data != 0)
    rr, cc, vv = Q.row[off], Q.col[off], Q.data[off]
    lev, loc = plan.level, plan.local
    lr, kind = lev[rr], lev[cc] - lev[rr] + 1  # kind 0 down, 1 same, 2 up
    key = lr * 3 + kind
    o = np.argsort(key, kind="stable")
    key, ri, ci, vv = key[o], loc[rr[o]], loc[cc[o]], vv[o]
    L = plan.n_levels
    cut = np.searchsorted(key, np.arange(3 * L + 1))
    m = np.diff(plan.bounds)
    f = plan.n_free

    def block(b, k):
        s, e = cut[3 * b + k], cut[3 * b + k + 1]
        return ri[s:e], ci[s:e], vv[s:e]

    Y = [None] * L
    W = None  # the dense correction rows of S_b at P_b: (r_b, m_b)
    banded = 0
    for b in range(L - 1, -1, -1):
        mb, fb = int(m[b]), int(f[b])
        rb = mb - fb
        i, j, v = block(b, 1)
        di, dj, dv = block(b, 0)
        down = np.bincount(di, dv, minlength=mb)
        pf = i >= fb
        G = np.zeros((rb, mb))  # the off-diagonal rates of the P rows of S_b (A_b's and the correction's)
        np.add.at(G, (i[pf] - fb, j[pf]), v[pf])
        if W is not None:
            G += W
            G[np.arange(rb), fb + np.arange(rb)] = 0.0  # a self-return is not a rate
        if b == 0:
            from .stationary import stationary

            fi, fj, fv = i[~pf], j[~pf], v[~pf]
            pr, pc = np.nonzero(G)
            ii, jj = np.concatenate([fi, pr + fb]), np.concatenate([fj, pc])
            vv = np.concatenate([fv, G[pr, pc]])
            S0 = sp.csr_matrix((np.concatenate([vv, -np.bincount(ii, vv, minlength=mb)]),
                                (np.concatenate([ii, np.arange(mb)]), np.concatenate([jj, np.arange(mb)]))),
                               shape=(mb, mb))
            pi0 = np.ones(1) if mb == 1 else stationary(S0, method="gth" if mb <= 200 else "direct").pi
            break
        fi, fj, fv = i[~pf], j[~pf], v[~pf]
        ff = fj < fb
        # GTH: -diag(S_b) = the off-diagonal rates + the rate down (S_b 1 = -D_b 1)
        N = _Sparse(fi[ff], fj[ff], -fv[ff], np.bincount(fi, fv, minlength=fb) + down[:fb], fb)
        banded += fb > 0 and N.banded
        if fb:
            rhs = np.zeros((fb, rb + 1))
            np.add.at(rhs, (fi[~ff], fj[~ff] - fb), fv[~ff])  # -N_FP >= 0
            rhs[:, rb] = down[:fb]
            XH = N.solve(rhs)
            X, h = XH[:, :rb], XH[:, rb]
        else:
            X, h = np.zeros((0, rb)), np.zeros(0)
        GF = G[:, :fb]
        Z = -(G[:, fb:] + GF @ X)  # the Schur complement on P: off-diagonal <= 0
        np.fill_diagonal(Z, 0.0)  # GTH: the diagonal from the row sums d_P + G h
        Z[np.diag_indices(rb)] = down[fb:] + GF @ h - Z.sum(axis=1)
        # the upward rows into this level from P_{b-1}: Y_b = U~ (-S_b)^{-1}
        ui, uj, uv = block(b - 1, 2)
        fprev = int(f[b - 1])
        U = np.zeros((int(m[b - 1]) - fprev, mb))
        np.add.at(U, (ui - fprev, uj), uv)
        YP = np.maximum(np.linalg.solve(Z.T, (U[:, fb:] + U[:, :fb] @ X).T).T, 0.0) if rb else U[:, fb:]
        YF = N.solve((U[:, :fb] + YP @ GF).T, trans=True).T if fb else U[:, :0]
        Y[b] = Yb = np.hstack([YF, YP])
        # W_{b-1} = Y_b D_b: the correction rows of S_{b-1}
        W = np.stack([np.bincount(dj, y[di] * dv, minlength=int(m[b - 1])) for y in Yb]) if len(Yb) else None
    parts = [pi0]
    for b in range(1, L):
        parts.append(parts[-1][int(f[b - 1]):] @ Y[b])
    x = np.concatenate(parts)
    pi = np.empty_like(x)
    pi[plan.order] = x
    pi /= pi.sum()
    return pi, {"algorithm": "linear level reduction by the largest coordinate", "levels": L,
                "upward_states": int(np.sum(m - f)), "banded_levels": int(banded)}
