"""Solvers of level-independent QBDs: the matrices G and R and the matrix-geometric law.

The representation and its block convention (``A0`` up, ``A1`` local, ``A2`` down,
boundary blocks ``B0``, ``B1``, ``B2``) are in :mod:`exactq.representations.qbd`;
:func:`solve_qbd` takes a :class:`~exactq.representations.qbd.QBD` and returns a
:class:`~exactq.representations.qbd.QBDSolution`.

``G`` is the minimal nonnegative solution of ``A2 + A1 G + A0 G^2 = 0`` (logarithmic
reduction, or cyclic reduction as an independent second algorithm), ``U = A1 + A0 G``,
``R = A0 (-U)^-1`` (the minimal solution of ``A0 + R A1 + R^2 A2 = 0``) and
``R0 = B0 (-U)^-1``. The vector ``pi_0`` solves the censored boundary chain
``pi_0 (B1 + R0 B2) = 0`` with the normalisation ``pi_0 1 + pi_0 R0 (I - R)^-1 1 = 1``.
A discrete-time QBD is solved as the continuous-time one with ``A1 - I`` and
``B1 - I``, which has the same ``G``, ``R`` and stationary law. A QBD with a
``reset`` block ``Z`` (jumps from every level to level 0) has the same ``G`` and ``R``
equations; only the boundary changes, to ``pi_0 (B1 + R0 B2 + R0 (I - R)^-1 Z) = 0``.

Three algorithms compute ``G``: logarithmic reduction (quadratic convergence, the
default), cyclic reduction (quadratic, an independent second one) and functional
iteration (linear, the slow reference). ``dps=50`` recomputes ``G``, ``R``, ``R0``
and ``pi_0`` at 50 significant digits with ``mpmath`` (:func:`refine_mp`; QBDs with
at most :data:`MP_MAX_PHASES` phases). Stability is the mean-drift condition
(:func:`mean_drift`), checked before any iteration, with ``sp(R) < 1`` as a second
test (the only one for a QBD with resets).

Everything here is dense (``numpy.linalg``; LAPACK ``gesv``): phase counts above
:data:`MAX_PHASES` are refused.

References
----------
G. Latouche and V. Ramaswami, "A logarithmic reduction algorithm for
quasi-birth-death processes", J. Appl. Probab. 30 (1993) 650-674.
G. Latouche and V. Ramaswami, *Introduction to Matrix Analytic Methods in
Stochastic Modeling*, SIAM 1999, ch. 6 (matrix-geometric law), ch. 7 (stability:
the mean-drift condition) and ch. 8 (the logarithmic-reduction algorithm for G).
D. Bini and B. Meini, "On the solution of a nonlinear matrix equation arising in
queueing problems", SIAM J. Matrix Anal. Appl. 17 (1996) 906-926 (cyclic
reduction; Bini, Latouche & Meini, *Numerical Methods for Structured Markov
Chains*, OUP 2005).
M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*, 1981 (functional
iteration, Thm 8.2.1 / Lemma 1.2.3 for ``R``).
D. Bini, B. Meini, S. Steffe and B. Van Houdt, "Structured Markov chains solver:
software tools", SMCTOOLS 2006 (the algorithm family of SMCSolver; BuTools'
``QBDFundamentalMatrices`` offers the same set).
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002,
ch. 12 (mixed-precision iterative refinement, used by :func:`refine_mp`).

Examples
--------
The M/M/1 queue is the scalar QBD; its level law is geometric, ``pi_n = (1-r) r^n``:

>>> import numpy as np
>>> from exactq.representations import QBD
>>> lam, mu = 0.5, 1.0
>>> sol = solve_qbd(QBD([[lam]], [[-(lam + mu)]], [[mu]]))
>>> np.allclose([sol.R[0, 0], sol.mean_level()], [lam / mu, lam / (mu - lam)])
True
>>> bool(np.isclose(sol.level_probability(3), (1 - lam) * lam ** 3))
True
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.linalg as sla

from exactq.catalogue import register_solver
from exactq.method_table import QBD_MAX_PHASES
from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ModelError,
    NotApplicableError,
    UnstableError,
)
from exactq.representations.qbd import QBD, QBDSolution

__all__ = [
    "solve_qbd",
    "mean_drift",
    "logarithmic_reduction",
    "cyclic_reduction",
    "functional_iteration",
    "refine_mp",
    "MAX_PHASES",
    "MP_MAX_PHASES",
    "ALGORITHMS",
]

#: largest number of phases accepted (every matrix here is dense; declared with the qbd method, exactq.method_table)
MAX_PHASES = QBD_MAX_PHASES
#: largest number of phases of the 50-digit path (each mpmath product of two blocks costs
#: m^3 multiplications in Python objects: about 0.2 s at m = 50)
MP_MAX_PHASES = 64
ALGORITHMS = ("logarithmic_reduction", "cyclic_reduction", "functional_iteration")
_EPS = np.finfo(float).eps


# ----------------------------------------------------------------------------- helpers
def _lsolve(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A^-1 B`` by LAPACK ``getrf``/``getrs`` (``scipy.linalg.lu_factor``/``lu_solve``).

    With many right-hand sides this is about three times faster than
    ``numpy.linalg.solve`` (measured at 600 phases with 1,200 right-hand sides: 0.21 s
    against 0.67 s), whose ``gesv`` call works on transposed copies.
    """
    return sla.lu_solve(sla.lu_factor(A, check_finite=False), B, check_finite=False)


def _stationary_dense(A: np.ndarray) -> np.ndarray:
    """Stationary vector of a small irreducible generator (one equation replaced)."""
    m = A.shape[0]
    M = A.copy()
    M[:, -1] = 1.0
    rhs = np.zeros(m)
    rhs[-1] = 1.0
    return np.linalg.solve(M.T, rhs)


def _is_irreducible(A: np.ndarray) -> bool:
    P = A.copy()
    np.fill_diagonal(P, 0.0)
    from scipy.sparse.csgraph import connected_components

    n, _ = connected_components(P > 0, directed=True, connection="strong")
    return n == 1


def mean_drift(A0, A1, A2) -> dict:
    """Mean drift of the level in the repeating part: the stability test.

    With ``pi_A`` the stationary vector of the phase generator ``A = A0 + A1 + A2``,
    an irreducible level-independent QBD is positive recurrent iff
    ``pi_A A0 1 < pi_A A2 1`` (Latouche & Ramaswami 1999, ch. 7).

    Returns
    -------
    dict
        ``up`` (``pi_A A0 1``), ``down`` (``pi_A A2 1``), ``drift`` (up - down),
        ``irreducible`` (whether ``A`` is irreducible; the test needs it) and
        ``pi_A``.

    Examples
    --------
    M/M/1 with ``lambda = 0.3``, ``mu = 1``: the drift is ``lambda - mu``.

    >>> d = mean_drift([[0.3]], [[-1.3]], [[1.0]])
    >>> bool(np.isclose(d["drift"], 0.3 - 1.0)), d["irreducible"]
    (True, True)
    """
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    A = A0 + A1 + A2
    irreducible = _is_irreducible(A)
    if not irreducible:
        return {"up": np.nan, "down": np.nan, "drift": np.nan, "irreducible": False, "pi_A": None}
    pi = _stationary_dense(A)
    up = float(pi @ A0.sum(1))
    down = float(pi @ A2.sum(1))
    return {"up": up, "down": down, "drift": up - down, "irreducible": True, "pi_A": pi}


# ----------------------------------------------------------------------- algorithms
def logarithmic_reduction(A0, A1, A2, *, tol: float = 1e-14, maxiter: int = 100):
    """The matrix ``G`` by logarithmic reduction (Latouche & Ramaswami 1993).

    ``G`` is the minimal nonnegative solution of ``A2 + A1 G + A0 G^2 = 0``
    (``G[i, j]``: probability that, starting in phase ``i`` of level ``n``, the
    first visit to level ``n - 1`` is in phase ``j``). This is the algorithm of
    Latouche & Ramaswami (1993; 1999, ch. 8), applied to the jump chain
    ``H = (-A1)^-1 A0`` (up), ``L = (-A1)^-1 A2`` (down); iteration ``k`` accounts
    for paths that reach up to ``2^k`` levels above the start.

    Stopping test: ``max(1 - G 1) <= tol`` (the mass still unaccounted for), or the
    last increment's row sums fall below machine precision (no further progress,
    e.g. when ``G`` is substochastic).

    Returns
    -------
    G : (m, m) ndarray
    nit : int
    converged : bool

    Examples
    --------
    A recurrent M/M/1 queue returns to the level below with probability one:

    >>> G, nit, ok = logarithmic_reduction([[0.5]], [[-1.5]], [[1.0]])
    >>> bool(ok and abs(G[0, 0] - 1.0) < 1e-14)
    True
    """
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    m = A1.shape[0]
    eye = np.eye(m)
    HL = _lsolve(-A1, np.hstack([A0, A2]))
    H, L = HL[:, :m], HL[:, m:]
    G = L.copy()
    T = H.copy()
    for k in range(1, maxiter + 1):
        # the four products H L, H H, L L, L H as one matrix product [H; L] [L, H] (one large GEMM)
        P = np.vstack([H, L]) @ np.hstack([L, H])
        U = P[:m, :m] + P[m:, m:]
        HL = _lsolve(eye - U, np.hstack([P[:m, m:], P[m:, :m]]))
        H, L = HL[:, :m], HL[:, m:]
        TLH = T @ np.hstack([L, H])
        inc = TLH[:, :m]
        G += inc
        T = TLH[:, m:]
        defect = float(np.max(np.abs(1.0 - G.sum(1))))
        if defect <= tol or float(inc.sum(1).max()) <= _EPS * 0.5:
            return G, k, True
    return G, maxiter, False


def cyclic_reduction(A0, A1, A2, *, tol: float = 1e-14, maxiter: int = 100):
    """The matrix ``G`` by cyclic reduction (Bini & Meini 1996).

    Bini & Meini (1996; Bini, Latouche & Meini 2005), in the continuous-time form: with
    ``X0 = A0`` (up), ``X1 = A1``, ``X2 = A2`` (down) and ``Xhat = A1``, repeat
    ``K = X1^-1``, ``X1 <- X1 - X0 K X2 - X2 K X0``, ``Xhat <- Xhat - X0 K X2``,
    ``X0 <- -X0 K X0``, ``X2 <- -X2 K X2``; then ``G = -Xhat^-1 A2``. An independent
    second method for the tests of :func:`logarithmic_reduction`.

    Stopping test: ``max(1 - G 1) <= tol`` or ``||X0||_inf <= eps ||A0||_inf``.

    Returns
    -------
    G : (m, m) ndarray
    nit : int
    converged : bool

    Examples
    --------
    >>> G, nit, ok = cyclic_reduction([[0.5]], [[-1.5]], [[1.0]])
    >>> bool(ok and abs(G[0, 0] - 1.0) < 1e-14)
    True
    """
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    m = A1.shape[0]
    X0, X1, X2 = A0.copy(), A1.copy(), A2.copy()
    Xhat = A1.copy()
    scale = max(float(np.abs(A0).sum(1).max()), 1e-300)
    for k in range(1, maxiter + 1):
        K = _lsolve(X1, np.hstack([X2, X0]))
        KX2, KX0 = K[:, :m], K[:, m:]
        X1 = X1 - X0 @ KX2 - X2 @ KX0
        Xhat = Xhat - X0 @ KX2
        X0, X2 = -X0 @ KX0, -X2 @ KX2
        G = -_lsolve(Xhat, A2)
        defect = float(np.max(np.abs(1.0 - G.sum(1))))
        if defect <= tol or float(np.abs(X0).sum(1).max()) <= _EPS * scale:
            return G, k, True
    return G, maxiter, False


FUNCTIONAL_VARIANTS = ("u-based", "traditional")


def functional_iteration(A0, A1, A2, *, tol: float = 1e-14, maxiter: int = 1_000_000, variant: str = "u-based"):
    """The matrix ``G`` by functional iteration from ``G_0 = 0``: the slow reference.

    Two of the linearly convergent iterations of Latouche & Ramaswami (1999, sec. 8.1;
    Neuts 1981), in continuous time (SMCSolver's ``QBD_FI`` modes of the same names):

    ``"traditional"``
        ``G <- (-A1)^-1 (A2 + A0 G^2)``;
    ``"u-based"``
        ``G <- (-(A1 + A0 G))^-1 A2`` (fewer iterations, one solve each).

    Both increase monotonically to the minimal solution. Each iteration removes a
    fixed fraction of the error (about ``sp(R)`` near saturation), so they need
    thousands of iterations where the reductions need twenty: an independent check,
    not a production method.

    Stopping test: ``max(1 - G 1) <= tol``, or the last increment below
    ``eps`` (a substochastic ``G``, e.g. a QBD with resets).

    Returns
    -------
    G : (m, m) ndarray
    nit : int
    converged : bool

    Examples
    --------
    >>> G, nit, ok = functional_iteration([[0.5]], [[-1.5]], [[1.0]])
    >>> bool(ok and abs(G[0, 0] - 1.0) < 1e-13 and nit > 20)
    True
    """
    if variant not in FUNCTIONAL_VARIANTS:
        raise ModelError(f"variant must be one of {', '.join(FUNCTIONAL_VARIANTS)}; got {variant!r}")
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    m = A1.shape[0]
    G = np.zeros((m, m))
    if variant == "traditional":
        lu = sla.lu_factor(-A1)
        L = sla.lu_solve(lu, A2)
        H = sla.lu_solve(lu, A0)
    for k in range(1, int(maxiter) + 1):
        if variant == "traditional":
            G_new = L + H @ (G @ G)
        else:
            G_new = _lsolve(-(A1 + A0 @ G), A2)
        inc = float(np.abs(G_new - G).max())
        G = G_new
        if float(np.max(np.abs(1.0 - G.sum(1)))) <= tol or inc <= _EPS * 0.5:
            return G, k, True
    return G, int(maxiter), False


_ALGO = {"logarithmic_reduction": logarithmic_reduction, "cyclic_reduction": cyclic_reduction,
         "functional_iteration": functional_iteration}
#: default iteration limits: the reductions double the levels accounted for per step
_MAXITER = {"logarithmic_reduction": 100, "cyclic_reduction": 100, "functional_iteration": 1_000_000}


# ------------------------------------------------------------------- 50-digit refinement
def _mp(X) -> np.ndarray:
    """A float array as an object array of ``mpmath.mpf`` (exact: every float is a binary fraction)."""
    import mpmath  # the 50-digit path only: mpmath is not imported with the module

    return np.vectorize(mpmath.mpf, otypes=[object])(np.asarray(X, dtype=float))


def _mp_norm(X) -> float:
    """Largest absolute entry of an object array of mpf (as a float)."""
    return float(max((abs(x) for x in np.asarray(X).flat), default=0.0))


def _mp_solve(A, B, digits: int, maxsteps: int = 40):
    """``A X = B`` in mpmath by float LU and mixed-precision iterative refinement (Higham 2002, ch. 12).

    Each step gains about ``-log10(cond(A) eps)`` digits; it stops when the residual
    ``||B - A X||`` is below ``10^-digits ||B||``. Returns ``(X, residual, steps)``.
    """
    lu = sla.lu_factor(A.astype(float))
    X = _mp(sla.lu_solve(lu, B.astype(float)))
    target = 10.0 ** (-digits) * max(_mp_norm(B), 1e-300)
    res = float("inf")
    for step in range(1, maxsteps + 1):
        Res = B - A @ X
        res = _mp_norm(Res)
        if res <= target:
            return X, res, step
        X = X + _mp(sla.lu_solve(lu, Res.astype(float)))
    return X, res, maxsteps


def _stein_solver(M: np.ndarray, N: np.ndarray):
    """A solver of ``X + M X N = D`` in float (complex Schur forms of ``M`` and ``N``; Bartels-Stewart).

    With ``M = Q1 T1 Q1^H`` and ``N = Q2 T2 Q2^H`` (upper triangular ``T``), ``Y =
    Q1^H X Q2`` solves ``Y + T1 Y T2 = Q1^H D Q2`` column by column:
    ``(I + T2[j, j] T1) y_j = e_j - T1 sum_{k<j} y_k T2[k, j]``.
    """
    T1, Q1 = sla.schur(M.astype(complex), output="complex")
    T2, Q2 = sla.schur(N.astype(complex), output="complex")
    m = M.shape[0]
    eye = np.eye(m)

    def solve(D: np.ndarray) -> np.ndarray:
        E = Q1.conj().T @ D @ Q2
        Y = np.zeros_like(E)
        for j in range(m):
            rhs = E[:, j] - T1 @ (Y[:, :j] @ T2[:j, j])
            Y[:, j] = sla.solve_triangular(eye + T2[j, j] * T1, rhs)
        return (Q1 @ Y @ Q2.conj().T).real

    return solve


def refine_mp(A0, A1, A2, G, *, dps: int = 50, maxsteps: int = 30):
    """``G`` and ``R`` of a continuous-time QBD at ``dps`` digits, from a float ``G``.

    Simplified Newton iteration on ``F(G) = A2 + A1 G + A0 G^2 = 0`` (Latouche 1994):
    the residual is computed in ``mpmath`` at ``dps`` digits, the correction ``X``
    from the float derivative ``U X + A0 X G = -F`` (``U = A1 + A0 G``), a Stein
    equation ``X + (U^-1 A0) X G = -U^-1 F`` solved through complex Schur forms. Each
    step gains about ``-log10(cond eps)`` digits. Then ``R = A0 (-U)^-1`` by
    mixed-precision refinement of the float LU. Precision is scoped
    (``mpmath.workdps``), never set globally.

    Returns
    -------
    dict
        ``G``, ``R``, ``U`` (object arrays of ``mpmath.mpf``), ``g_residual`` and
        ``r_residual`` (``||F(G)||``, ``||A0 + R A1 + R^2 A2||`` at ``dps`` digits, as
        floats), ``steps`` (Newton steps), ``dps``.

    Examples
    --------
    M/M/1 with ``lambda = 3/8``, ``mu = 1`` (exact binary fractions): ``G = 1`` and
    ``R = 3/8`` to 50 digits, from a float ``G`` that is off by ``1e-12``.

    >>> import mpmath
    >>> out = refine_mp([[0.375]], [[-1.375]], [[1.0]], [[1.0 - 1e-12]])
    >>> with mpmath.workdps(50):
    ...     bool(abs(out["R"][0, 0] - mpmath.mpf(3) / 8) < mpmath.mpf(10) ** -48
    ...          and abs(out["G"][0, 0] - 1) < mpmath.mpf(10) ** -48)
    True
    """
    import mpmath

    dps = int(dps)
    if dps < 16:
        raise ModelError(f"dps must be >= 16 (the float path has 16 digits); got {dps}")
    A0f, A1f, A2f, Gf = (np.atleast_2d(np.asarray(X, dtype=float)) for X in (A0, A1, A2, G))
    m = A1f.shape[0]
    if m > MP_MAX_PHASES:
        raise NotApplicableError(f"the {dps}-digit path applies to QBDs with at most {MP_MAX_PHASES} phases; got {m}")
    Uf = A1f + A0f @ Gf
    stein = _stein_solver(np.linalg.solve(Uf, A0f), Gf)
    scale = max(float(np.abs(A1f).max()), 1e-300)
    with mpmath.workdps(dps + 10):
        A0, A1, A2, Gm = (_mp(X) for X in (A0f, A1f, A2f, Gf))
        target = 10.0 ** (-dps) * scale
        g_res, steps = float("inf"), 0
        for steps in range(1, maxsteps + 1):
            F = A2 + A1 @ Gm + A0 @ (Gm @ Gm)
            g_res = _mp_norm(F)
            if g_res <= target:
                break
            X = stein(np.linalg.solve(Uf, -F.astype(float)))
            Gm = Gm + _mp(X)
        U = A1 + A0 @ Gm
        Rt, _, _ = _mp_solve(-U.T, A0.T.copy(), dps)
        R = Rt.T.copy()
        r_res = _mp_norm(A0 + R @ A1 + R @ (R @ A2))
    return {"G": Gm, "R": R, "U": U, "g_residual": g_res, "r_residual": r_res, "steps": steps, "dps": dps}


# --------------------------------------------------------------------------- solver
#: dense QBDs with at most this many phases run BLAS on one thread: at these sizes the
#: threads' start-up costs more than they save, and on a busy machine multithreaded
#: OpenBLAS slows small solves by one to two orders of magnitude (measured 35 ms vs
#: 7-16 s for a 222-phase SED QBD with another process holding a core)
SINGLE_THREAD_PHASES = 400


def _phase_count(qbd: QBD) -> str | None:
    if qbd.n_phases > MAX_PHASES:
        return f"number of phases must be <= {MAX_PHASES} (dense QBD solver); got {qbd.n_phases}"
    return None


@register_solver(QBD, name="matrix-geometric", priority=100, applies=_phase_count,
                 doc="G by logarithmic or cyclic reduction (or functional iteration), R, the boundary and the "
                     "matrix-geometric law; optionally recomputed at 50 digits",
                 options=("algorithm", "tol", "maxiter", "strict", "dps"))
def solve_qbd(qbd: QBD, *, algorithm: str = "logarithmic_reduction", tol: float = 1e-14, maxiter: int | None = None,
              strict: bool = False, dps: int | None = None) -> QBDSolution:
    """Stationary law of a level-independent QBD with a boundary level 0.

    Parameters
    ----------
    qbd : QBD
        The blocks (validated by the representation), continuous or discrete time,
        with or without resets to level 0.
    algorithm : {"logarithmic_reduction", "cyclic_reduction", "functional_iteration"}
        How ``G`` is computed; ``R = A0 (-(A1 + A0 G))^-1``.
    tol : float
        Stop when ``max(1 - G 1) <= tol``.
    maxiter : int, optional
        At most this many steps (default 100 for the reductions, each of which
        doubles the levels accounted for, and 10^6 for functional iteration).
    strict : bool
        Raise :class:`ConvergenceError` (instead of a warning) when ``G`` does not
        reach ``tol``.
    dps : int, optional
        Recompute ``G``, ``R``, ``R0`` and ``pi_0`` at ``dps`` significant digits
        (typically 50) with ``mpmath`` from the float solution (:func:`refine_mp`);
        at most :data:`MP_MAX_PHASES` phases. The returned float arrays are the
        rounded high-precision ones and ``solution.mp`` holds the ``mpmath``
        matrices with their residuals.

    Returns
    -------
    QBDSolution

    Raises
    ------
    ModelError
        More than :data:`MAX_PHASES` phases, or a bad ``algorithm``, ``tol`` or ``dps``.
    UnstableError
        The mean drift ``pi_A A0 1 - pi_A A2 1`` is >= 0 (or ``sp(R) >= 1``); the
        message gives the drift.
    ConvergenceError
        With ``strict=True`` when ``G`` does not reach ``tol``.

    Notes
    -----
    The boundary vector solves the censored chain on level 0,
    ``pi_0 (B1 + R0 B2 + R0 (I - R)^-1 Z) = 0`` (``Z`` the reset block, zero without
    one), with the normalisation ``pi_0 1 + pi_0 R0 (I - R)^-1 1 = 1``, by a dense LU
    solve with one equation replaced by the normalisation. Dense QBDs with at most
    :data:`SINGLE_THREAD_PHASES` phases run BLAS on one thread.

    Examples
    --------
    M/M/1 as a QBD with one phase:

    >>> sol = solve_qbd(QBD([[0.9]], [[-1.9]], [[1.0]]))
    >>> bool(abs(sol.mean_level() - 9.0) < 1e-9 and sol.spectral_radius < 1)
    True

    The same at 50 digits (``lambda = 7/8``, an exact binary fraction): ``R = 7/8``
    with a residual below ``1e-45``.

    >>> sol = solve_qbd(QBD([[0.875]], [[-1.875]], [[1.0]]), dps=50)
    >>> sol.R[0, 0] == 0.875 and sol.mp["r_residual"] < 1e-45 and sol.mp["dps"] == 50
    True
    """
    if not isinstance(qbd, QBD):
        raise ModelError(f"solve_qbd takes a QBD representation; got {type(qbd).__name__}")
    if algorithm not in _ALGO:
        raise ModelError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    if maxiter is None:
        maxiter = _MAXITER[algorithm]
    if not (isinstance(maxiter, (int, np.integer)) and maxiter >= 1):
        raise ModelError(f"maxiter must be an integer >= 1; got {maxiter!r}")
    if dps is not None:
        if not (isinstance(dps, (int, np.integer)) and 16 <= dps <= 1000):
            raise ModelError(f"dps must be an integer in [16, 1000]; got {dps!r}")
        if qbd.n_phases > MP_MAX_PHASES or qbd.n_boundary_phases > MP_MAX_PHASES:
            raise NotApplicableError(f"dps={dps}: the high-precision path applies to QBDs with at most {MP_MAX_PHASES} "
                             f"phases; got {max(qbd.n_phases, qbd.n_boundary_phases)}")
    why = _phase_count(qbd)
    if why:
        raise ModelError(why)
    if qbd.n_phases <= SINGLE_THREAD_PHASES:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return _solve(qbd, algorithm, tol, maxiter, strict, dps)
    return _solve(qbd, algorithm, tol, maxiter, strict, dps)


def _check_drift(A0, A1, A2) -> dict:
    """The mean-drift test; ``UnstableError`` naming the drift when it is >= 0."""
    drift = mean_drift(A0, A1, A2)
    if drift["irreducible"] and drift["drift"] >= -1e-12 * max(drift["up"], drift["down"]):
        raise UnstableError(
            f"the QBD is not positive recurrent: mean drift pi_A A0 1 - pi_A A2 1 = {drift['drift']:.6g} must be "
            f"< 0 (pi_A A0 1 = {drift['up']:.6g} must be < pi_A A2 1 = {drift['down']:.6g}; pi_A the stationary "
            "vector of A0 + A1 + A2)"
        )
    return drift


#: above this many phases sp(R) comes from ARPACK (the Perron root of R >= 0) instead of a dense eigen-solve
DENSE_EIG_PHASES = 300


def _spectral_radius(R: np.ndarray) -> float:
    """``sp(R)``: all eigenvalues for small ``R``; the eigenvalue of largest modulus by ARPACK above
    :data:`DENSE_EIG_PHASES` phases (a dense nonsymmetric eigen-solve costs about ``25 m^3``)."""
    m = R.shape[0]
    if m == 0:
        return 0.0
    if m > DENSE_EIG_PHASES:
        from scipy.sparse.linalg import ArpackError, eigs

        try:
            vals = eigs(R, k=1, which="LM", tol=1e-14, maxiter=20 * m, return_eigenvectors=False)
            return float(np.abs(vals).max())
        except (ArpackError, ValueError):
            pass
    return float(np.max(np.abs(np.linalg.eigvals(R))))


def _solve(qbd: QBD, algorithm: str, tol: float, maxiter: int, strict: bool, dps: int | None) -> QBDSolution:
    t0 = time.perf_counter()
    c = qbd.as_continuous()
    A0, A1, A2, B0, B1, B2, Z = c.A0, c.A1, c.A2, c.B0, c.B1, c.B2, c.reset
    m, m0 = c.n_phases, c.n_boundary_phases
    scale = float(max(np.abs(A1).max(), np.abs(B1).max()))

    # a QBD with resets has no drift test (A0 + A1 + A2 is not a generator): sp(R) < 1 decides
    drift = _check_drift(A0, A1, A2) if Z is None else {"resets": True}

    G, nit, converged = _ALGO[algorithm](A0, A1, A2, tol=tol, maxiter=maxiter)
    U = A1 + A0 @ G
    RR = _lsolve(-U.T, np.vstack([A0, B0]).T).T  # [A0; B0] (-U)^-1
    R, R0 = RR[:m], RR[m:]
    R = np.maximum(R, 0.0)
    R0 = np.maximum(R0, 0.0)
    spr = _spectral_radius(R)
    if spr >= 1.0 - 1e-13:
        raise UnstableError(
            f"the QBD is not positive recurrent: spectral radius of R is {spr:.12g} >= 1 "
            f"(mean drift condition pi_A A0 1 < pi_A A2 1 fails)"
        )
    g_defect = float(np.max(np.abs(1.0 - G.sum(1))))
    # a substochastic G (resets) is judged by the residual of its equation, a stochastic one by G 1 = 1
    g_residual = None if Z is None else float(np.abs(A2 + A1 @ G + A0 @ (G @ G)).sum(1).max())
    g_ok = g_defect <= max(tol, 1e3 * _EPS * m) if Z is None else g_residual <= 1e3 * _EPS * m * max(scale, 1.0)
    if not converged or not g_ok:
        what = (f"G is not stochastic to tol={tol:g}" if Z is None else "G does not solve A2 + A1 G + A0 G^2 = 0")
        msg = (f"{algorithm}: {what} after {nit} iterations (max |1 - G 1| = {g_defect:.3e}"
               + ("" if g_residual is None else f", residual {g_residual:.3e}") + ")")
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)

    eye = np.eye(m)
    mp_out = None
    if dps is not None:
        mp_out = _boundary_mp(A0, A1, A2, B0, B1, B2, Z, G, dps)
        r_change = float(np.abs(R - mp_out["R"].astype(float)).max())
        mp_out["r_change"] = r_change
        G, R, R0, pi0, W = (mp_out[k].astype(float) for k in ("G", "R", "R0", "pi0", "W"))
    else:
        # boundary: censored chain on level 0 plus normalisation
        W = _lsolve(eye - R, eye)
        C = B1 + R0 @ B2
        if Z is not None:
            C = C + R0 @ (W @ Z)
        norm = 1.0 + R0 @ W.sum(1)
        M = C.copy()
        j = int(np.argmax(np.abs(np.diag(C))))  # replace the equation of the busiest state
        M[:, j] = norm
        rhs = np.zeros(m0)
        rhs[j] = 1.0
        pi0 = np.linalg.solve(M.T, rhs)
        if pi0.min() < -1e-10 * max(float(pi0.max()), 1e-300):
            warnings.warn(f"QBD boundary vector has a negative entry {pi0.min():.3e}; the boundary "
                          "blocks may be inconsistent", AccuracyWarning, stacklevel=3)
        pi0 = np.maximum(pi0, 0.0)
        pi0 /= float(pi0 @ norm)

    pi1 = pi0 @ R0
    pi2 = pi1 @ R
    pi3 = pi2 @ R
    r_res = float(np.abs(A0 + R @ A1 + R @ R @ A2).sum(1).max())
    level0 = pi0 @ B1 + pi1 @ B2 + (0.0 if Z is None else (pi1 @ W) @ Z)
    residual = max(
        float(np.abs(level0).max()),
        float(np.abs(pi0 @ B0 + pi1 @ A1 + pi2 @ A2).max()),
        float(np.abs(pi1 @ A0 + pi2 @ A1 + pi3 @ A2).max()),
        abs(float(pi0.sum() + pi1 @ W.sum(1)) - 1.0),
    )
    if residual > 1e-8 * max(scale, 1.0):
        warnings.warn(f"QBD balance residual {residual:.3e} is large; the stationary law may be "
                      "inaccurate", AccuracyWarning, stacklevel=3)
    return QBDSolution(
        R=R, G=G, R0=R0, pi0=pi0, spectral_radius=spr, residual=residual, r_residual=r_res,
        g_defect=g_defect, nit=nit, algorithm=algorithm if dps is None else f"{algorithm}+mpmath{dps}",
        drift=drift, seconds=time.perf_counter() - t0, qbd=qbd, _inv=W, g_residual=g_residual, mp=mp_out,
    )


def _boundary_mp(A0, A1, A2, B0, B1, B2, Z, G, dps: int) -> dict:
    """``G``, ``R``, ``R0``, ``(I - R)^-1`` and ``pi_0`` at ``dps`` digits (:func:`refine_mp`, then refined solves)."""
    import mpmath

    m, m0 = A1.shape[0], B1.shape[0]
    out = refine_mp(A0, A1, A2, G, dps=dps)
    with mpmath.workdps(dps + 10):
        U = out["U"]
        R0t, _, _ = _mp_solve(-U.T, _mp(B0).T.copy(), dps)
        R0 = R0t.T.copy()
        one = mpmath.mpf(1)
        I_R = _mp(np.eye(m)) - out["R"]
        rhs = [_mp(np.eye(m))] + ([_mp(Z)] if Z is not None else [])
        Y, _, _ = _mp_solve(I_R, np.hstack(rhs), dps)
        W = Y[:, :m]
        C = _mp(B1) + R0 @ _mp(B2)
        if Z is not None:
            C = C + R0 @ Y[:, m:]
        norm = one + R0 @ W.sum(axis=1)
        M = C.copy()
        j = int(np.argmax(np.abs(np.diag(C.astype(float)))))
        M[:, j] = norm
        e = _mp(np.eye(m0)[:, [j]])
        p, p_res, _ = _mp_solve(M.T.copy(), e, dps)
        pi0 = p[:, 0]
        pi0 = pi0 / (pi0 @ norm)
        out.update(R0=R0, W=W, pi0=pi0, pi0_residual=p_res)
    return out
