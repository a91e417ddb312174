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
``B1 - I``, which has the same ``G``, ``R`` and stationary law.

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
M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*, 1981.

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
from scipy.sparse.csgraph import connected_components

from exactq.catalogue import register_method, register_solver
from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ModelError,
    UnstableError,
)
from exactq.representations.qbd import QBD, QBDSolution

__all__ = [
    "solve_qbd",
    "mean_drift",
    "logarithmic_reduction",
    "cyclic_reduction",
    "MAX_PHASES",
    "ALGORITHMS",
]

#: largest number of phases accepted (every matrix here is dense)
MAX_PHASES = 2000
ALGORITHMS = ("logarithmic_reduction", "cyclic_reduction")
_EPS = np.finfo(float).eps


# ----------------------------------------------------------------------------- helpers
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
    """
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    m = A1.shape[0]
    eye = np.eye(m)
    HL = np.linalg.solve(-A1, np.hstack([A0, A2]))
    H, L = HL[:, :m], HL[:, m:]
    G = L.copy()
    T = H.copy()
    for k in range(1, maxiter + 1):
        U = H @ L + L @ H
        HL = np.linalg.solve(eye - U, np.hstack([H @ H, L @ L]))
        H, L = HL[:, :m], HL[:, m:]
        inc = T @ L
        G += inc
        T = T @ H
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
    """
    A0, A1, A2 = (np.asarray(X, dtype=float) for X in (A0, A1, A2))
    m = A1.shape[0]
    X0, X1, X2 = A0.copy(), A1.copy(), A2.copy()
    Xhat = A1.copy()
    scale = max(float(np.abs(A0).sum(1).max()), 1e-300)
    for k in range(1, maxiter + 1):
        K = np.linalg.solve(X1, np.hstack([X2, X0]))
        KX2, KX0 = K[:, :m], K[:, m:]
        X1 = X1 - X0 @ KX2 - X2 @ KX0
        Xhat = Xhat - X0 @ KX2
        X0, X2 = -X0 @ KX0, -X2 @ KX2
        G = -np.linalg.solve(Xhat, A2)
        defect = float(np.max(np.abs(1.0 - G.sum(1))))
        if defect <= tol or float(np.abs(X0).sum(1).max()) <= _EPS * scale:
            return G, k, True
    return G, maxiter, False


_ALGO = {"logarithmic_reduction": logarithmic_reduction, "cyclic_reduction": cyclic_reduction}


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


@register_solver(QBD, name="matrix-geometric", applies=_phase_count,
                 doc="G by logarithmic (or cyclic) reduction, R, the boundary and the matrix-geometric law",
                 options=("algorithm", "tol", "maxiter", "strict"))
def solve_qbd(qbd: QBD, *, algorithm: str = "logarithmic_reduction", tol: float = 1e-14, maxiter: int = 100,
              strict: bool = False) -> QBDSolution:
    """Stationary law of a level-independent QBD with a boundary level 0.

    Parameters
    ----------
    qbd : QBD
        The blocks (validated by the representation), continuous or discrete time.
    algorithm : {"logarithmic_reduction", "cyclic_reduction"}
        How ``G`` is computed; ``R = A0 (-(A1 + A0 G))^-1``.
    tol : float
        Stop when ``max(1 - G 1) <= tol``.
    maxiter : int
        At most this many reduction steps (each doubles the levels accounted for).
    strict : bool
        Raise :class:`ConvergenceError` (instead of a warning) when ``G`` does not
        reach ``tol``.

    Returns
    -------
    QBDSolution

    Raises
    ------
    ModelError
        More than :data:`MAX_PHASES` phases, or a bad ``algorithm`` or ``tol``.
    UnstableError
        The mean drift ``pi_A A0 1 - pi_A A2 1`` is >= 0 (or ``sp(R) >= 1``).
    ConvergenceError
        With ``strict=True`` when ``G`` is not stochastic to ``tol``.

    Notes
    -----
    The boundary vector solves the censored chain on level 0,
    ``pi_0 (B1 + R0 B2) = 0``, with the normalisation
    ``pi_0 1 + pi_0 R0 (I - R)^-1 1 = 1``, by a dense LU solve with one equation
    replaced by the normalisation. Dense QBDs with at most
    :data:`SINGLE_THREAD_PHASES` phases run BLAS on one thread.

    Examples
    --------
    M/M/1 as a QBD with one phase:

    >>> sol = solve_qbd(QBD([[0.9]], [[-1.9]], [[1.0]]))
    >>> bool(abs(sol.mean_level() - 9.0) < 1e-9 and sol.spectral_radius < 1)
    True
    """
    if not isinstance(qbd, QBD):
        raise ModelError(f"solve_qbd takes a QBD representation; got {type(qbd).__name__}")
    if algorithm not in _ALGO:
        raise ModelError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    why = _phase_count(qbd)
    if why:
        raise ModelError(why)
    if qbd.n_phases <= SINGLE_THREAD_PHASES:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return _solve(qbd, algorithm, tol, maxiter, strict)
    return _solve(qbd, algorithm, tol, maxiter, strict)


def _solve(qbd: QBD, algorithm: str, tol: float, maxiter: int, strict: bool) -> QBDSolution:
    t0 = time.perf_counter()
    c = qbd.as_continuous()
    A0, A1, A2, B0, B1, B2 = c.A0, c.A1, c.A2, c.B0, c.B1, c.B2
    m, m0 = c.n_phases, c.n_boundary_phases
    scale = float(max(np.abs(A1).max(), np.abs(B1).max()))

    drift = mean_drift(A0, A1, A2)
    if drift["irreducible"] and drift["drift"] >= -1e-12 * max(drift["up"], drift["down"]):
        raise UnstableError(
            f"the QBD is not positive recurrent: mean drift pi_A A0 1 = {drift['up']:.6g} must be "
            f"< pi_A A2 1 = {drift['down']:.6g} (pi_A the stationary vector of A0 + A1 + A2)"
        )

    G, nit, converged = _ALGO[algorithm](A0, A1, A2, tol=tol, maxiter=maxiter)
    U = A1 + A0 @ G
    RR = np.linalg.solve(-U.T, np.vstack([A0, B0]).T).T  # [A0; B0] (-U)^-1
    R, R0 = RR[:m], RR[m:]
    R = np.maximum(R, 0.0)
    R0 = np.maximum(R0, 0.0)
    spr = float(np.max(np.abs(np.linalg.eigvals(R)))) if m else 0.0
    if spr >= 1.0 - 1e-13:
        raise UnstableError(
            f"the QBD is not positive recurrent: spectral radius of R is {spr:.12g} >= 1 "
            f"(mean drift condition pi_A A0 1 < pi_A A2 1 fails)"
        )
    g_defect = float(np.max(np.abs(1.0 - G.sum(1))))
    if not converged or g_defect > max(tol, 1e3 * _EPS * m):
        msg = (f"{algorithm}: G is not stochastic to tol={tol:g} after {nit} iterations "
               f"(max |1 - G 1| = {g_defect:.3e})")
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)

    # boundary: censored chain on level 0 plus normalisation
    eye = np.eye(m)
    W = np.linalg.inv(eye - R)
    C = B1 + R0 @ B2
    norm = 1.0 + R0 @ W.sum(1)
    M = C.copy()
    j = int(np.argmax(np.abs(np.diag(C))))  # replace the equation of the busiest state
    M[:, j] = norm
    rhs = np.zeros(m0)
    rhs[j] = 1.0
    pi0 = np.linalg.solve(M.T, rhs)
    if pi0.min() < -1e-10 * max(float(pi0.max()), 1e-300):
        warnings.warn(f"QBD boundary vector has a negative entry {pi0.min():.3e}; the boundary "
                      "blocks may be inconsistent", AccuracyWarning, stacklevel=2)
    pi0 = np.maximum(pi0, 0.0)
    pi0 /= float(pi0 @ norm)

    pi1 = pi0 @ R0
    pi2 = pi1 @ R
    pi3 = pi2 @ R
    r_res = float(np.abs(A0 + R @ A1 + R @ R @ A2).sum(1).max())
    residual = max(
        float(np.abs(pi0 @ B1 + pi1 @ B2).max()),
        float(np.abs(pi0 @ B0 + pi1 @ A1 + pi2 @ A2).max()),
        float(np.abs(pi1 @ A0 + pi2 @ A1 + pi3 @ A2).max()),
        abs(float(pi0.sum() + pi1 @ W.sum(1)) - 1.0),
    )
    if residual > 1e-8 * max(scale, 1.0):
        warnings.warn(f"QBD balance residual {residual:.3e} is large; the stationary law may be "
                      "inaccurate", AccuracyWarning, stacklevel=2)
    return QBDSolution(
        R=R, G=G, R0=R0, pi0=pi0, spectral_radius=spr, residual=residual, r_residual=r_res,
        g_defect=g_defect, nit=nit, algorithm=algorithm, drift=drift,
        seconds=time.perf_counter() - t0, qbd=qbd, _inv=W,
    )


register_method(
    "qbd",
    requires="qbd",
    driver="adaptive",
    doc="matrix-geometric solution: exact in the unbounded level (the phase truncated adaptively, where "
        "the model has one)",
    options=("tol", "truncation", "strict"),
    infinite="qbd_truncated",
    start="qbd_start",
    size="qbd_size",
    growth=1.5,
    max_states=MAX_PHASES,
    unit="phases per level",
    label="qbd",
    solver_controls=("strict",),
)
