"""Stationary distributions of large level-structured CTMCs (the solver of the ``exact`` method).

Solver
------
:func:`stationary_levels` solves ``pi Q = 0`` for a chain whose states are sorted by
an integer *level* and whose transitions always change the level (no transition
within a level), such as a chain of sorted queue lengths of identical servers
ordered by the total number of jobs. It runs BiCGSTAB (van der Vorst 1992) on the reduced system
``B x = b`` (``B = Q^T`` minus the row and column of a reference state; Stewart 1994,
sec. 2.5) with a two-level multiplicative preconditioner:

1. *coarse correction*: iterative aggregation by level (Koury, McAllister & Stewart
   1984; Stewart 1994, ch. 6): the aggregated chain ``A_c = G^T B P`` with
   ``G`` the level indicator and ``P`` the prolongation weighted by the current
   iterate, solved exactly (it has one state per level). It removes the slow mode of
   the total-jobs birth-death process, which has relaxation time
   ``~ 1 / (n (1 - sqrt(lambda))^2)``.
2. *smoothing*: one symmetric block Gauss-Seidel sweep over the levels. Each diagonal
   block is diagonal (no transition inside a level), so the block sweeps are exact
   per-level solves: two compiled sweeps over the chain's triangles (the level
   order makes them triangular), or, when the levels are very large, one sparse
   product per level on zero-copy row blocks (no copies of the triangles).

The prolongation weights are refreshed from the iterate every ``restart`` iterations
(BiCGSTAB is restarted from the current iterate), so the coarse problem becomes the
exact aggregated chain as the iteration converges. The stopping test is the
library's: ``||pi Q||_1 / q <= rtol`` with ``q`` the largest exit rate, computed afresh
from the returned vector. Measured on sorted queue-length chains of 4 to 12 servers
(bench/): 30-60 iterations for 1e-12 from a cold start at any size, against hours
for SuperLU, whose fill explodes on these 12-dimensional lattices.

Method ``exact``
----------------
Declared in :mod:`exactq.method_table` with the one truncation driver
(:func:`exactq.truncation.grow`, ``adaptive`` with ``previous=True``): the model builds each truncated chain from the
previous one and its solution (``level_chain(level, previous)``, a
:class:`~exactq.ctmc.CTMC` that declares its ``levels``, ``start`` and ``boundary``),
:func:`~exactq.solvers.stationary.solve_stationary` picks this solver by the declared
levels and warm-starts it from the previous solution, and the model maps the
stationary law to the measure (``level_chain_measure``). A kept set that is not an
integer level is fixed by the option ``cost_bound`` (one solve).

References
----------
J. R. Koury, D. F. McAllister, W. J. Stewart, "Iterative methods for computing
stationary distributions of nearly completely decomposable Markov chains", SIAM J.
Alg. Disc. Meth. 5(2), 1984. W. J. Stewart, *Introduction to the Numerical Solution of
Markov Chains*, Princeton 1994, ch. 3 and 6. H. A. van der Vorst, "Bi-CGSTAB", SIAM J. Sci. Stat. Comput. 13,
1992. H. De Sterck et al., "Multilevel adaptive aggregation for
Markov chains", Numer. Linear Algebra Appl. 15, 2008 (aggregation preconditioning).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.ctmc import StationaryDistribution
from exactq.errors import ModelError

from .linear import MAX_REFERENCES, NoValidVector
from .linear import warn_or_raise as _warn_or_raise

__all__ = ["stationary_levels"]

#: mean states per level from which the smoother loops over levels (zero-copy row blocks of ``Q^T``), else it sweeps
#: two triangular copies (:class:`~exactq.solvers.linear.Triangle`, compiled). Measured on power-of-2 chains, whole
#: solves, median of 3: the sweeps 0.081 s against the loop's 0.273 s at 40,129 states (128 a level), 0.68 against
#: 1.01 s at 201,219 (742), 2.71 against 3.00 s at 612,145 (2,540); the loop's advantage is memory (no copies)
LEVEL_LOOP_MIN = 10_000


class _LevelSystem:
    """The system ``B x = b`` and its two-level preconditioner, in one copy of ``Q^T``.

    ``B`` is ``Q^T`` with the equation of the reference state replaced by
    ``x_ref = 1`` (Stewart 1994, sec. 2.3.1), stored as the off-diagonal part ``A`` of
    ``Q^T`` (CSR) and the diagonal ``-d``: ``B x = A x - d x``. The per-level row
    blocks of ``A`` are zero-copy views; within a Gauss-Seidel sweep the entries of
    ``z`` not yet computed are zero, so ``A_l z`` involves only the finished levels.
    The aggregated matrix ``G^T B`` (one row per level) is formed once, so every coarse
    operator ``G^T B P`` costs one sparse product.
    """

    def __init__(self, Q: sp.csr_matrix, level: np.ndarray, ref: int):
        n = Q.shape[0]
        A = Q.T.tocsr()
        diag = A.diagonal()
        self.ref_row = A[ref].tocsr()  # the original equation of the reference state
        self.qmax = float((-diag).max()) or 1.0
        A.setdiag(0.0)
        A.data[A.indptr[ref]:A.indptr[ref + 1]] = 0.0
        A.eliminate_zeros()
        A.sort_indices()
        lev = np.unique(level, return_inverse=True)[1]
        if np.any(np.diff(lev) < 0):
            raise ModelError("states must be sorted by level")
        self.n_levels = nl = int(lev[-1]) + 1
        self.lev = lev
        self.starts = st = np.searchsorted(lev, np.arange(nl + 1))
        self.d = -diag
        self.d[ref] = 1.0
        if np.any(self.d <= 0):
            raise ModelError("every state needs a positive exit rate")
        self.b = np.zeros(n)
        self.b[ref] = -1.0
        rows = np.repeat(lev, np.diff(A.indptr))
        if np.any(rows == lev[A.indices]):
            raise ModelError("a transition stays within its level; the level solver needs none")
        del rows
        self.A = A
        # the triangles swept by compiled code beat one Python step per level unless the levels are very large
        self.mode = "levels" if n / nl >= LEVEL_LOOP_MIN else "triangular"
        if self.mode == "levels":
            self.blocks = [sp.csr_matrix((A.data[A.indptr[st[l]]:A.indptr[st[l + 1]]],
                                          A.indices[A.indptr[st[l]]:A.indptr[st[l + 1]]],
                                          A.indptr[st[l]:st[l + 1] + 1] - A.indptr[st[l]]),
                                         shape=(st[l + 1] - st[l], n)) for l in range(nl)]
        else:
            Dm = sp.diags(-self.d, format="csr")
            self.L = (sp.tril(A, k=-1, format="csr") + Dm).tocsr()
            self.U = (sp.triu(A, k=1, format="csr") + Dm).tocsr()
            self.L.sort_indices()
            self.U.sort_indices()
            from .linear import Triangle

            self._lower, self._upper = Triangle(self.L, lower=True), Triangle(self.U, lower=False)
        G = sp.csr_matrix((np.ones(n), (np.arange(n), lev)), shape=(n, nl))
        self.GtB = (G.T @ A).tocsr() - sp.csr_matrix((self.d, (lev, np.arange(n))), shape=(nl, n))
        self.G = G
        self.ref = ref
        self.n = n
        self._lu = None
        self._P = None

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.A @ x - self.d * x

    def set_weights(self, x: np.ndarray) -> None:
        w = np.maximum(x, 0.0) + 1e-300
        w = w / np.bincount(self.lev, w, minlength=self.n_levels)[self.lev]
        P = sp.csr_matrix((w, (np.arange(len(w)), self.lev)), shape=self.G.shape)
        self._P = P
        self._lu = spla.splu((self.GtB @ P).tocsc())

    def sgs(self, r: np.ndarray) -> np.ndarray:
        """One symmetric Gauss-Seidel step: ``(D + U)^-1 D (D + L)^-1 r``."""
        st, d = self.starts, self.d
        if self.mode == "triangular":
            return self._upper.solve(-d * self._lower.solve(r))
        z = np.zeros_like(r)
        for l in range(self.n_levels):
            a, c = st[l], st[l + 1]
            z[a:c] = (self.blocks[l] @ z - r[a:c]) / d[a:c]
        y = d * z
        out = np.zeros_like(r)
        for l in range(self.n_levels - 1, -1, -1):
            a, c = st[l], st[l + 1]
            out[a:c] = (self.blocks[l] @ out + y[a:c]) / d[a:c]
        return out

    def precondition(self, r: np.ndarray) -> np.ndarray:
        zc = self._P @ self._lu.solve(self.G.T @ r)
        return zc + self.sgs(r - self.matvec(zc))

    def assemble(self, x: np.ndarray) -> np.ndarray:
        return x / x.sum()

    def residual(self, pi: np.ndarray) -> np.ndarray:
        """``(pi Q)_j`` for every state (the reference state's own equation included)."""
        out = self.matvec(pi)
        out[self.ref] = float((self.ref_row @ pi)[0])
        return out


def stationary_levels(Q, level, *, x0=None, rtol: float = 1e-12, maxiter: int = 400,
                      restart: int = 10, strict: bool = False, reference: int | None = None) -> StationaryDistribution:
    """Stationary distribution of a level-structured CTMC (module docstring).

    Parameters
    ----------
    Q : (n, n) sparse generator, rows sum to 0
        States sorted by ``level``; every transition changes the level.
    level : (n,) int array, nondecreasing
    x0 : (n,) array, optional
        Initial guess (e.g. the solution on a smaller truncation); positive.
    rtol : float
        Stop when ``||pi Q||_1 / q <= rtol`` (``q`` the largest exit rate).
    maxiter : int
        Largest total number of BiCGSTAB iterations.
    restart : int
        Iterations between refreshes of the coarse weights (BiCGSTAB restarts).
    strict : bool
        Raise :class:`ConvergenceError` instead of warning when ``rtol`` is not met.
    reference : int, optional
        State whose equation is dropped (default: the state of largest stationary
        guess on the lowest level).

    Returns
    -------
    StationaryDistribution
        ``method="level-aggregation"``, ``nit`` the BiCGSTAB iterations, ``info`` with
        ``relative_residual``, ``restarts`` and ``levels``.

    Examples
    --------
    The M/M/1 queue truncated at 30 (levels = number in system):

    >>> import scipy.sparse as sp
    >>> K, lam = 30, 0.5
    >>> Q = sp.diags([np.full(K, lam), np.ones(K)], [1, -1], shape=(K + 1, K + 1)).tolil()
    >>> Q.setdiag(-np.asarray(Q.sum(1)).ravel())
    >>> st = stationary_levels(Q.tocsr(), np.arange(K + 1))
    >>> p = lam ** np.arange(K + 1); bool(np.allclose(st.pi, p / p.sum()))
    True
    """
    t0 = time.perf_counter()
    Q = sp.csr_matrix(Q, dtype=float)
    level = np.asarray(level)
    n = Q.shape[0]
    if level.shape != (n,):
        raise ModelError(f"level must have one entry per state; got {level.shape} for {n} states")
    if n == 1:
        return StationaryDistribution(np.ones(1), "trivial", 0.0, seconds=time.perf_counter() - t0)
    if x0 is None:
        x0 = np.ones(n)
    x0 = np.asarray(x0, dtype=float)
    if x0.shape != (n,) or not np.all(np.isfinite(x0)):
        raise ModelError(f"the start vector x0 must be {n} finite numbers (one per state)")
    x0 = np.maximum(x0, 0.0)
    if reference is None:
        low = np.flatnonzero(level == level.min())
        reference = int(low[np.argmax(x0[low])])
    recovery: list[dict] = []
    tried: list[int] = []
    while True:
        tried.append(reference)
        sysm = _LevelSystem(Q, level, reference)
        pi, x, nit, restarts, res = _iterate(sysm, x0, reference, rtol, maxiter, restart)
        finite = np.isfinite(x)
        if finite.all() and np.isfinite(res):
            break
        # the iterate over- or underflowed: the reference state is far from the mass. Restart
        # from the largest finite entry (a likelier state), warm-started by the finite part
        why = f"{int((~finite).sum())} of {n} entries are not finite (the iteration over- or underflowed)"
        v = np.where(finite & (x > 0), x, -np.inf)
        v[tried] = -np.inf
        new = int(np.argmax(v))
        if not np.isfinite(v[new]) or len(tried) > MAX_REFERENCES:
            steps = "; ".join(f"{r['from']} -> {r['to']}" for r in recovery)
            raise NoValidVector(f"level-aggregation: no valid stationary vector ({why})"
                                   + (f"; tried {steps}" if steps else ""))
        recovery.append({"from": f"level-aggregation, reference state {reference}",
                         "to": f"level-aggregation, reference state {new}",
                         "why": f"{why}; the new reference is the largest finite entry"})
        top = float(x[finite].max())
        x0 = np.where(finite, np.maximum(x, 0.0), top) / top
        reference = new
    if res > rtol:
        _warn_or_raise(f"level-aggregation BiCGSTAB stopped at relative residual {res:.2e} > rtol={rtol:g} "
                       f"after {nit} iterations", strict)
    neg = pi < 0
    if neg.any():
        if pi[neg].min() < -1e3 * rtol * pi.max():
            _warn_or_raise(f"level-aggregation: negative probability {pi[neg].min():.2e}", strict)
        pi = np.maximum(pi, 0.0)
        pi /= pi.sum()
    rvec = sysm.residual(pi)
    residual = float(np.abs(rvec).max())
    info = {"relative_residual": float(np.abs(rvec).sum()) / sysm.qmax, "restarts": restarts,
            "levels": sysm.n_levels, "reference": reference}
    if recovery:
        info["recovery"] = recovery
    return StationaryDistribution(pi, "level-aggregation", residual, nit=nit, seconds=time.perf_counter() - t0, info=info)


def _iterate(sysm: _LevelSystem, x0: np.ndarray, reference: int, rtol: float, maxiter: int, restart: int):
    """Restarted, aggregation-preconditioned BiCGSTAB from ``x0``: (pi, x, nit, restarts, relative residual).

    Stops early when the iterate stops being finite (the caller changes the reference).
    """
    scale = x0[reference] if x0[reference] > 0 else 1.0
    x = x0 / scale
    qmax = sysm.qmax
    restarts = 0
    count = [0]

    def cb(_):
        count[0] += 1

    M = spla.LinearOperator((sysm.n, sysm.n), sysm.precondition, dtype=float)
    B = spla.LinearOperator((sysm.n, sysm.n), sysm.matvec, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        while True:
            if not np.all(np.isfinite(x)):
                return x, x, count[0], restarts, math.inf
            try:
                sysm.set_weights(x)
            except RuntimeError:  # a singular coarse matrix: weights from an iterate that went wrong
                return np.full_like(x, np.nan), np.full_like(x, np.nan), count[0], restarts, math.inf
            x, _ = spla.bicgstab(B, sysm.b, x0=x, M=M, rtol=1e-15, atol=0.0, maxiter=restart, callback=cb)
            restarts += 1
            nit = count[0]
            pi = sysm.assemble(x)
            res = float(np.abs(sysm.residual(pi)).sum()) / qmax
            if not np.isfinite(res):
                return pi, x, nit, restarts, math.inf
            if res <= rtol or nit >= maxiter:
                return pi, x, nit, restarts, res
            x = np.maximum(x, 0.0)
