"""Certified enclosures of the stationary law of a finite CTMC, and of expectations under it.

A float solve gives ``pi_hat``; a *certificate* gives intervals that provably contain
the exact value for the finite chain, floating-point rounding included. Two
independent methods:

``a-posteriori`` (any size; :func:`enclose_stationary`)
    Fix the reference state ``r`` and write the balance equations for the other
    states as ``A x = c`` with ``x_r = 1``: ``A_jj = q_j`` (the exit rate, the exact sum
    of the off-diagonal rates of row ``j``), ``A_ji = -Q_ij``, ``c_j = Q_rj``. For an
    irreducible chain ``A`` is a nonsingular M-matrix, so ``A^-1 >= 0``. For any float
    vector ``v > 0`` with ``A v >= gamma 1 > 0`` (verified), ``A^-1 1 <= v / gamma``
    componentwise, hence for the float solution ``x_hat`` with residual
    ``r = c - A x_hat``:

        ``|x - x_hat| = |A^-1 r| <= A^-1 |r| <= (||r||_inf / gamma) v``

    (the M-matrix bound behind ``||A^-1||_inf <= ||v||_inf / min(A v)``; Varah 1975,
    Rump's verification methods, Acta Numerica 2010, sec. 10.2). ``v`` is a float
    solution of ``A v = 1`` with the same sparse LU, so the certificate costs one
    factorisation more than the float solve; for chains the float solve handed to the
    level-aggregation solver (too large for a sparse LU) the approximate solves are
    that solver's preconditioned BiCGSTAB instead. The residuals ``A y`` are computed in
    float64 and bounded rigorously by the standard model of floating-point arithmetic
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and
    eq. (3.4)): the computed sum of ``k`` products is within ``gamma_k`` times the sum
    of their absolute values, ``gamma_k = k u / (1 - k u)``. Expectations ``f . pi =
    (f . x) / (1 . x)`` are then intervals, with ``math.fsum`` for the dot products.
``arb`` (small chains; :func:`enclose_stationary_arb`)
    The same system solved in ball arithmetic (python-flint's ``arb_mat.solve``, a
    rigorous dense solve at 128 bits); an independent check of the first.

Both certify the chain *as built*: the rates are the float64 numbers of the generator
(a decimal rate such as 1.8 differs from its double by at most half an ulp), and the
exit rates are their exact sums.

Progress: ``progress=`` (a callback for :mod:`exactq.progress` job events) reports the
certificate's steps as the job ``certify``: the factorisation and the four approximate
solves of the a-posteriori bound (weighted by their predicted shares: a sparse LU
factorisation costs several solves with its factors; BiCGSTAB solves cost alike), or
the build and the ball-arithmetic solve of ``arb``.

References
----------
J. M. Varah, "A lower bound for the smallest singular value of a matrix", Linear
Algebra Appl. 11 (1975). S. M. Rump, "Verification methods: rigorous results using
floating-point arithmetic", Acta Numerica 19 (2010) 287-449. N. J. Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002, ch. 3.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.catalogue import register_certifier
from exactq.ctmc import CTMC
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.progress import Job

__all__ = ["StationaryEnclosure", "enclose_stationary", "enclose_stationary_arb", "ARB_MAX_STATES"]

U = np.finfo(float).eps / 2  # unit roundoff of float64
TINY = np.finfo(float).tiny
#: the dense ball-arithmetic solve is used up to this many states
ARB_MAX_STATES = 600


def _up(x):
    """``x`` rounded up by a relative 4u (absorbs the rounding of computing a bound)."""
    return x * (1 + 4 * U) + TINY


def _gamma(k: int) -> float:
    return k * U / (1 - k * U)


@dataclass
class StationaryEnclosure:
    """The exact stationary law of a finite chain, enclosed: ``x`` within ``radius`` of ``x_hat``.

    ``x`` is the stationary vector scaled so that ``x[ref] = 1`` (``pi = x / sum(x)``);
    ``x_hat`` a float approximation and ``radius`` (n,) a componentwise bound on
    ``|x - x_hat|`` (or, for the ball-arithmetic method, the balls' radii).

    Examples
    --------
    The two-state chain with rates 1 and 2 has ``pi = (2/3, 1/3)``:

    >>> from fractions import Fraction
    >>> from exactq.ctmc import CTMC
    >>> e = enclose_stationary(CTMC.from_generator([[-1.0, 1.0], [2.0, -2.0]]))
    >>> lo, hi = e.expectation(np.array([0.0, 1.0]))
    >>> bool(Fraction(lo) <= Fraction(1, 3) <= Fraction(hi) and hi - lo < 1e-14)
    True
    """

    x_hat: np.ndarray
    radius: np.ndarray
    ref: int
    method: str
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    def _dot(self, f: np.ndarray) -> tuple[float, float]:
        """``[lo, hi]`` containing ``f . x`` (``f`` exact floats)."""
        f = np.asarray(f, dtype=float)
        prods = f * self.x_hat
        s = math.fsum(prods)
        rounding = 2 * U * (math.fsum(np.abs(prods)) + abs(s))  # product roundings and the final one
        spread = math.fsum(np.abs(f) * self.radius)
        half = _up(_up(rounding) + _up(spread))
        return s - half, s + half

    def expectation(self, f, g=None) -> tuple[float, float]:
        """``[lo, hi]`` containing ``(f . pi) / (g . pi)`` (``g`` defaults to 1: ``E[f]``).

        ``f`` and ``g`` are per-state arrays; ``g . pi`` must be positive.
        """
        n = len(self.x_hat)
        f = np.broadcast_to(np.asarray(f, dtype=float), (n,))
        g = np.ones(n) if g is None else np.broadcast_to(np.asarray(g, dtype=float), (n,))
        a, b = self._dot(f)
        c, d = self._dot(g)
        if not c > 0:
            raise ConvergenceError(f"the certificate cannot bound the denominator away from 0 ([{c:.3g}, {d:.3g}])")
        q = [a / c, a / d, b / c, b / d]
        lo, hi = min(q), max(q)
        return lo - abs(lo) * 2 * U - TINY, hi + abs(hi) * 2 * U + TINY


def _system(Q: sp.csr_matrix, ref: int):
    """``A`` (csc, reference removed), ``c``, the exit rates and the row nonzero counts."""
    n = Q.shape[0]
    coo = Q.tocoo()
    off = coo.row != coo.col
    rows, cols, vals = coo.row[off], coo.col[off], coo.data[off]
    if np.any(vals < 0):
        raise ModelError("a certificate needs a generator with nonnegative off-diagonal rates")
    exit_rate = np.bincount(rows, weights=vals, minlength=n)
    keep = np.concatenate([np.arange(ref), np.arange(ref + 1, n)])
    inv = np.full(n, -1, dtype=np.int64)
    inv[keep] = np.arange(n - 1)
    # equation j (a column of Q): sum_i x_i Q_ij - q_j x_j = 0
    ok = (inv[rows] >= 0) & (inv[cols] >= 0)
    M = sp.csr_matrix((vals[ok], (inv[cols[ok]], inv[rows[ok]])), shape=(n - 1, n - 1))  # M_ji = Q_ij
    q = exit_rate[keep]
    c = np.zeros(n - 1)
    from_ref = (rows == ref) & (inv[cols] >= 0)
    c[inv[cols[from_ref]]] = vals[from_ref]
    row_terms = np.maximum(np.diff(M.indptr), np.bincount(rows, minlength=n)[keep]) + 1
    return M, q, c, keep, row_terms, exit_rate


def _apply_bounds(M, q, y, row_terms, qerr):
    """``A y`` in float64 with a rigorous bound on its error, ``A = diag(q) - M``."""
    s = M @ y
    Ay = q * y - s
    k = int(row_terms.max(initial=1)) + 2
    bound = _gamma(k) * (np.abs(q * y) + np.abs(M) @ np.abs(y)) + qerr * np.abs(y) + U * np.abs(Ay)
    return Ay, _up(bound)


#: predicted cost of a sparse LU factorisation in solves with its factors (the progress weights only)
_FACTOR_WEIGHT = 4.0


def enclose_stationary(chain: CTMC, solution=None, *, progress=None) -> StationaryEnclosure:
    """Certified enclosure of the stationary vector by the a-posteriori M-matrix bound.

    Parameters
    ----------
    chain : CTMC
        An irreducible finite chain (``chain.Q``).
    solution : StationaryDistribution, optional
        The float solution to certify; by default one is computed here (sparse LU).
    progress : callable, optional
        Receives :mod:`exactq.progress` job events (task ``certify``), one point per step.

    Returns
    -------
    StationaryEnclosure

    Raises
    ------
    ConvergenceError
        ``A v > 0`` could not be verified (the chain is too ill-conditioned for this
        bound in float64), or the chain is reducible.

    Examples
    --------
    M/M/1/3 with arrival rate 1 and service rate 2: ``P(N = 3) = (1/8)(1/2) / (15/16)``.

    >>> from fractions import Fraction
    >>> Q = [[-1, 1, 0, 0], [2, -3, 1, 0], [0, 2, -3, 1], [0, 0, 2, -2]]
    >>> e = enclose_stationary(CTMC.from_generator(np.array(Q, float)))
    >>> lo, hi = e.expectation(np.array([0.0, 0, 0, 1]))
    >>> bool(Fraction(lo) <= Fraction(1, 15) <= Fraction(hi) and hi - lo < 1e-14)
    True
    """
    t0 = time.perf_counter()
    Q = sp.csr_matrix(chain.Q, dtype=float)
    n = Q.shape[0]
    if n == 1:
        return StationaryEnclosure(np.ones(1), np.zeros(1), 0, "trivial")
    levels = getattr(chain, "levels", None)
    # a chain that declares levels is solved (and then certified) by the level solver's BiCGSTAB
    iterative = levels is not None and (solution is None or getattr(solution, "method", None) == "level-aggregation")
    job = Job("certify", progress)
    names = ["float solve" if solution is None else "float solution (given)",
             "set up the level solver" if iterative else "sparse LU of the balance system",
             "no refinement (iterative solves)" if iterative else "refinement solve",
             "solve for the residual bound (A v = 1)", "solve for the error bound (A w = r)"]
    weights = [2.0 * _FACTOR_WEIGHT if solution is None else 0.0, 1.0 if iterative else _FACTOR_WEIGHT,
               0.0 if iterative else 1.0] + ([2.0, 2.0] if iterative else [1.0, 1.0])  # BiCGSTAB: two runs' worth
    steps = job.stage(f"certificate of {n:,} states", weights, labels=names).each(names)
    next(steps)
    if solution is None:
        from .stationary import solve_stationary

        solution = solve_stationary(chain)
    iterative = levels is not None and getattr(solution, "method", None) == "level-aggregation"
    pi = np.asarray(solution.pi, dtype=float)
    ref = int(np.argmax(pi))
    next(steps)
    M, q, c, keep, row_terms, exit_rate = _system(Q, ref)
    qerr = _gamma(int(row_terms.max(initial=1))) * q  # the float exit rates are sums of the row's rates
    if iterative:
        # the chain was too large for a sparse LU: approximate solves by the level solver's preconditioned
        # BiCGSTAB instead (nothing below relies on them being exact: every residual is bounded afresh)
        solve, how = _level_solver(Q, np.asarray(levels), ref, keep, pi), {"solves": "level-aggregation BiCGSTAB"}
        refine = False
    else:
        A = (sp.diags(q) - M).tocsc()
        try:
            lu = spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options=dict(SymmetricMode=True))
        except RuntimeError as exc:
            raise ConvergenceError(f"certify: the reduced balance system is singular ({exc}); is the chain "
                                   "irreducible?") from None
        solve, how, refine = lu.solve, {"lu_nnz": int(lu.nnz)}, True
    x = pi[keep] / pi[ref]
    next(steps)
    if refine:  # one step of iterative refinement with the same factors tightens the residual
        r, _ = _apply_bounds(M, q, x, row_terms, qerr)
        x = x + solve(c - r)
    Ax, err_x = _apply_bounds(M, q, x, row_terms, qerr)
    rbar = _up(np.abs(c - Ax) + err_x + U * np.abs(c - Ax))  # |c - A x| <= rbar, componentwise
    next(steps)
    v = solve(np.ones(n - 1))
    Av, err_v = _apply_bounds(M, q, v, row_terms, qerr)
    gamma = float(np.min(Av - err_v))
    if not (np.all(v > 0) and gamma > 0):
        raise ConvergenceError(f"certify: could not verify A v > 0 (min {gamma:.3g}); the chain is too "
                               "ill-conditioned for the float64 M-matrix bound")
    # |x - x_hat| <= A^-1 rbar; with w ~ A^-1 rbar from the same factors, A^-1 rbar = w + A^-1 (rbar - A w)
    # <= w+ + (||(rbar - A w)+||_inf / gamma) v, since A^-1 >= 0 and A^-1 1 <= v / gamma
    next(steps)
    w = solve(rbar)
    next(steps, None)  # the last point is done
    job.close()
    Aw, err_w = _apply_bounds(M, q, w, row_terms, qerr)
    excess = _up(float(np.max(np.maximum(rbar - Aw + err_w, 0.0), initial=0.0)))
    radius = _up(np.maximum(w, 0.0) + _up(excess / gamma * _up(v)))
    res = float(rbar.max())
    x_hat = np.empty(n)
    x_hat[keep] = x
    x_hat[ref] = 1.0
    rad = np.zeros(n)
    rad[keep] = radius
    info = {"reference_state": ref, "residual_bound": res, "min_Av": gamma, "norm_inv_bound": float(v.max()) / gamma,
            **how}
    return StationaryEnclosure(x_hat, rad, ref, "a-posteriori", time.perf_counter() - t0, info)


def _level_solver(Q: sp.csr_matrix, levels: np.ndarray, ref: int, keep: np.ndarray, pi: np.ndarray):
    """``b -> y ~ A^-1 b`` for the reduced system ``A`` of :func:`_system`, by the level solver's BiCGSTAB.

    The level system (:class:`~exactq.solvers.level_aggregation._LevelSystem`) is ``B x
    = A_off x - d x`` on every state, with the reference row replaced by ``-x_ref``; for
    ``x = (y, x_ref = 0)`` its other rows are ``-(A y)``, so ``B x = -(b, 0)`` gives ``y``.
    The aggregation weights are ``pi``. The solves need not be exact: the certificate
    bounds every residual rigorously.
    """
    from .level_aggregation import _LevelSystem

    system = _LevelSystem(Q, levels, ref)
    system.set_weights(pi)
    n = Q.shape[0]
    op = spla.LinearOperator((n, n), matvec=system.matvec)
    pre = spla.LinearOperator((n, n), matvec=system.precondition)

    def solve(b: np.ndarray) -> np.ndarray:
        scale = float(np.abs(b).max(initial=0.0))
        if scale == 0.0:
            return np.zeros(len(keep))
        rhs = np.zeros(n)
        rhs[keep] = -np.asarray(b, dtype=float) / scale
        x, _ = spla.bicgstab(op, rhs, M=pre, rtol=1e-10, maxiter=400)
        return x[keep] * scale

    return solve


def enclose_stationary_arb(chain: CTMC, *, prec: int = 128, progress=None) -> StationaryEnclosure:
    """Certified enclosure by a dense solve in ball arithmetic (python-flint ``arb_mat``).

    For chains up to :data:`ARB_MAX_STATES` states. The result's ``x_hat`` are the
    balls' midpoints and ``radius`` their radii (rounded outward to float64).
    ``progress`` receives :mod:`exactq.progress` job events (the build, the solve).

    Examples
    --------
    >>> from fractions import Fraction
    >>> e = enclose_stationary_arb(CTMC.from_generator(np.array([[-1.0, 1.0], [2.0, -2.0]])))
    >>> lo, hi = e.expectation(np.array([0.0, 1.0]))
    >>> bool(Fraction(lo) <= Fraction(1, 3) <= Fraction(hi) and hi - lo < 1e-15)
    True
    """
    try:
        import flint
    except ImportError:  # pragma: no cover - python-flint is a dependency
        raise NotApplicableError("the ball-arithmetic certificate needs python-flint (pip install python-flint)")
    t0 = time.perf_counter()
    Q = sp.csr_matrix(chain.Q, dtype=float)
    n = Q.shape[0]
    if n > ARB_MAX_STATES:
        raise NotApplicableError(f"the ball-arithmetic certificate is dense and limited to {ARB_MAX_STATES} states; "
                                 f"this chain has {n} (the a-posteriori certificate applies)")
    if n == 1:
        return StationaryEnclosure(np.ones(1), np.zeros(1), 0, "arb")
    old = flint.ctx.prec
    flint.ctx.prec = prec
    job = Job("certify", progress)
    # the dense build is O(n^2) Python-level entries, the solve O(n^3) in ball arithmetic
    steps = job.stage(f"ball-arithmetic certificate of {n} states", [float(n * n), n**3 / 50.0],
                      labels=["build the ball matrix", "solve in ball arithmetic"]).each([0, 1])
    try:
        next(steps)
        ref = 0
        D = Q.toarray()
        np.fill_diagonal(D, 0.0)
        if np.any(D < 0):
            raise ModelError("a certificate needs a generator with nonnegative off-diagonal rates")
        keep = list(range(1, n))
        exit_rate = [sum((flint.arb(float(v)) for v in D[j] if v), flint.arb(0)) for j in range(n)]
        A = flint.arb_mat(n - 1, n - 1)
        cvec = flint.arb_mat(n - 1, 1)
        for a, j in enumerate(keep):  # a dense build: small chains only
            A[a, a] = exit_rate[j]
            cvec[a, 0] = flint.arb(float(D[ref, j]))
            for b, i in enumerate(keep):
                if i != j and D[i, j]:
                    A[a, b] = -flint.arb(float(D[i, j]))
        next(steps)
        x = A.solve(cvec)
        next(steps, None)
        job.close()
        mids, rads = [], []
        for a in range(n - 1):
            ball = x[a, 0]
            mids.append(float(ball.mid()))
            rads.append(float(ball.rad()))
    finally:
        flint.ctx.prec = old
    x_hat = np.concatenate([[1.0], mids])
    # the midpoint's conversion to float64 moves it by at most half an ulp
    rad = np.concatenate([[0.0], _up(np.asarray(rads) + U * np.abs(mids))])
    return StationaryEnclosure(x_hat, rad, ref, "arb", time.perf_counter() - t0, {"precision_bits": prec})


@register_certifier(CTMC, doc="certified enclosure of the stationary law: ball arithmetic (arb) up to "
                              f"{ARB_MAX_STATES} states, else the a-posteriori M-matrix bound")
def certify_chain(chain: CTMC, solution=None, *, progress=None) -> StationaryEnclosure:
    """The certificate the ``certify`` option uses: ``arb`` for small chains, a-posteriori above.

    ``progress`` receives the certificate's :mod:`exactq.progress` job events.
    """
    if chain.n_states <= ARB_MAX_STATES:
        return enclose_stationary_arb(chain, progress=progress)
    return enclose_stationary(chain, solution, progress=progress)
