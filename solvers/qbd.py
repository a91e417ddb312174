"""Level-independent quasi-birth-death processes: matrix-geometric stationary laws.

A continuous-time QBD has states ``(n, j)``: a *level* ``n >= 0`` and a *phase* ``j``.
Block naming convention (one for the whole library, as in Latouche & Ramaswami 1999):

``A0`` (m, m)
    rates *up*, from level ``n`` to level ``n + 1`` (``n >= 1``);
``A1`` (m, m)
    *local* rates within a level ``n >= 1``; its diagonal holds minus the total exit
    rate of each state;
``A2`` (m, m)
    rates *down*, from level ``n`` to ``n - 1`` (``n >= 2``).

Level 0 is the boundary, with ``m0`` phases (``m0 = m`` in the common case):

``B1`` (m0, m0)
    local rates within level 0 (diagonal = minus the exit rate);
``B0`` (m0, m)
    rates up from level 0 to level 1 (default ``A0``);
``B2`` (m, m0)
    rates down from level 1 to level 0 (default ``A2``).

So the generator is, in block form (levels 0, 1, 2, ...)::

    [ B1  B0              ]
    [ B2  A1  A0          ]
    [     A2  A1  A0      ]
    [         A2  A1  A0  ]
    [              ...    ]

and every row sums to zero: ``(A0 + A1 + A2) 1 = 0``, ``(B1 + B0) 1 = 0`` and
``B2 1 = A2 1``.

The stationary law is matrix-geometric (Neuts 1981; Latouche & Ramaswami 1999,
ch. 6): ``pi_1 = pi_0 R0`` and ``pi_n = pi_1 R^(n-1)`` for
``n >= 1``, where ``G`` is the minimal nonnegative solution of
``A2 + A1 G + A0 G^2 = 0``, ``U = A1 + A0 G``, ``R = A0 (-U)^-1`` (the minimal
solution of ``A0 + R A1 + R^2 A2 = 0``) and ``R0 = B0 (-U)^-1``. When ``B0 = A0``,
``R0 = R`` and ``pi_n = pi_0 R^n`` for every ``n >= 0``. The vector ``pi_0`` solves
the censored boundary chain ``pi_0 (B1 + R0 B2) = 0`` with the normalisation
``pi_0 1 + pi_0 R0 (I - R)^-1 1 = 1``.

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
>>> lam, mu = 0.5, 1.0
>>> sol = solve_qbd([[lam]], [[-(lam + mu)]], [[mu]])
>>> np.allclose([sol.R[0, 0], sol.mean_level()], [lam / mu, lam / (mu - lam)])
True
>>> bool(np.isclose(sol.level_probability(3), (1 - lam) * lam ** 3))
True
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.sparse.csgraph import connected_components

from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ModelError,
    UnstableError,
)

__all__ = [
    "QBDSolution",
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


# ----------------------------------------------------------------------------- checks
def _as_block(name: str, X, shape=None) -> np.ndarray:
    X = np.atleast_2d(np.asarray(X, dtype=float))
    if X.ndim != 2:
        raise ModelError(f"{name} must be a 2-d matrix; got shape {X.shape}")
    if shape is not None and X.shape != shape:
        raise ModelError(f"{name} must have shape {shape}; got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ModelError(f"{name} must be finite; it has a non-finite entry")
    return X


def _check_nonnegative(name: str, X: np.ndarray, offdiag_only: bool) -> None:
    Y = X.copy()
    if offdiag_only:
        np.fill_diagonal(Y, 0.0)
    if np.any(Y < 0):
        i, j = np.argwhere(Y < 0)[0]
        what = "off-diagonal entries" if offdiag_only else "entries"
        raise ModelError(f"{name} {what} must be >= 0 (rates); got {name}[{i}, {j}] = {Y[i, j]:g}")


def _check_rows(name: str, rows: np.ndarray, scale: float) -> None:
    bad = np.abs(rows) > 1e-10 * max(scale, 1.0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ModelError(f"row {i} of {name} must sum to 0 (a generator); got {rows[i]:.6g}")


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


# ---------------------------------------------------------------------------- result
@dataclass
class QBDSolution:
    """The stationary law of a QBD in matrix-geometric form.

    Attributes
    ----------
    R, G : (m, m) ndarray
        The rate matrix (minimal solution of ``A0 + R A1 + R^2 A2 = 0``) and the
        first-passage matrix (minimal solution of ``A2 + A1 G + A0 G^2 = 0``).
    R0 : (m0, m) ndarray
        ``pi_1 = pi_0 R0`` (equals ``R`` when ``B0 = A0``).
    pi0 : (m0,) ndarray
        Stationary probabilities of the level-0 states.
    spectral_radius : float
        ``sp(R) < 1``.
    residual : float
        Largest absolute violation of the balance equations ``pi Q = 0`` at levels
        0, 1 and 2 (``pi_n`` for ``n >= 2`` satisfies them iff level 2 does) and of
        the normalisation.
    r_residual : float
        ``||A0 + R A1 + R^2 A2||_inf``.
    g_defect : float
        ``max |1 - G 1|`` (``G`` is stochastic for a recurrent QBD).
    nit : int
        Iterations of the algorithm for ``G``.
    algorithm : str
    drift : dict
        The mean-drift test (:func:`mean_drift`).
    seconds : float
    """

    R: np.ndarray
    G: np.ndarray
    R0: np.ndarray
    pi0: np.ndarray
    spectral_radius: float
    residual: float
    r_residual: float
    g_defect: float
    nit: int
    algorithm: str
    drift: dict = field(default_factory=dict)
    seconds: float = 0.0
    _inv: np.ndarray | None = field(default=None, repr=False)

    # -- shapes --------------------------------------------------------------------
    @property
    def n_phases(self) -> int:
        """Phases ``m`` of the repeating levels ``n >= 1``."""
        return self.R.shape[0]

    @property
    def n_boundary_phases(self) -> int:
        """Phases ``m0`` of level 0."""
        return self.pi0.shape[0]

    @property
    def pi1(self) -> np.ndarray:
        """``pi_1 = pi_0 R0``, the stationary probabilities of level 1."""
        return self.pi0 @ self.R0

    def resolvent(self) -> np.ndarray:
        """``(I - R)^-1`` (cached)."""
        if self._inv is None:
            self._inv = np.linalg.inv(np.eye(self.n_phases) - self.R)
        return self._inv

    @property
    def condition(self) -> float:
        """``||(I - R)^-1||_inf``: how strongly level sums amplify rounding errors."""
        return float(np.abs(self.resolvent()).sum(1).max())

    # -- levels --------------------------------------------------------------------
    def level_vector(self, n: int) -> np.ndarray:
        """``pi_n``, the stationary probabilities of the states of level ``n``."""
        n = int(n)
        if n < 0:
            raise ModelError(f"level must be >= 0; got {n}")
        if n == 0:
            return self.pi0.copy()
        return self.pi1 @ np.linalg.matrix_power(self.R, n - 1)

    def level_probability(self, n) -> float | np.ndarray:
        """``P(N = n) = pi_n 1`` (``n`` an int or an array of ints)."""
        if np.ndim(n) == 0:
            return float(self.level_vector(int(n)).sum())
        return np.array([self.level_vector(int(k)).sum() for k in np.asarray(n).ravel()])

    def level_distribution(self, n_max: int) -> np.ndarray:
        """``[P(N = 0), ..., P(N = n_max)]``."""
        out = np.empty(int(n_max) + 1)
        out[0] = self.pi0.sum()
        v = self.pi1
        for k in range(1, int(n_max) + 1):
            out[k] = v.sum()
            v = v @ self.R
        return out

    def level_tail(self, n: int) -> float:
        """``P(N >= n) = pi_1 R^(n-1) (I - R)^-1 1`` for ``n >= 1`` (1 for ``n <= 0``)."""
        n = int(n)
        if n <= 0:
            return 1.0
        v = self.level_vector(n)
        return float(v @ self.resolvent().sum(1))

    def mean_level(self) -> float:
        """``E[N] = pi_1 (I - R)^-2 1`` (``= pi_0 R (I - R)^-2 1`` when ``B0 = A0``)."""
        W = self.resolvent()
        return float(self.pi1 @ (W @ W.sum(1)))

    def level_variance(self) -> float:
        """``Var[N]``, from ``E[N^2] = pi_1 (I + R)(I - R)^-3 1``."""
        W = self.resolvent()
        one = np.ones(self.n_phases)
        second = float(self.pi1 @ ((np.eye(self.n_phases) + self.R) @ (W @ (W @ (W @ one)))))
        mean = self.mean_level()
        return second - mean * mean

    def phase_marginal(self, include_level0: bool = True) -> np.ndarray:
        """``sum_n pi_n`` over levels ``n >= 0`` (or ``n >= 1``): the phase law.

        With ``include_level0=True`` the boundary must have the same phases
        (``m0 = m``); otherwise the sum runs over the repeating levels only.
        """
        rep = self.pi1 @ self.resolvent()
        if not include_level0:
            return rep
        if self.n_boundary_phases != self.n_phases:
            raise ModelError(
                f"phase_marginal(include_level0=True) needs level 0 to have the m={self.n_phases} "
                f"phases of the other levels; it has m0={self.n_boundary_phases}"
            )
        return rep + self.pi0

    def expect_affine(self, boundary, constant, slope) -> float:
        """``E[f(N, J)]`` for ``f(0, j) = boundary[j]`` and ``f(n, j) = constant[j] + n slope[j]``.

        ``sum_{n>=1} pi_n (a + n b) = pi_1 [(I - R)^-1 a + (I - R)^-2 b]``.
        """
        c0 = np.broadcast_to(np.asarray(boundary, dtype=float), (self.n_boundary_phases,))
        a = np.broadcast_to(np.asarray(constant, dtype=float), (self.n_phases,))
        b = np.broadcast_to(np.asarray(slope, dtype=float), (self.n_phases,))
        W = self.resolvent()
        return float(self.pi0 @ c0 + self.pi1 @ (W @ a + W @ (W @ b)))

    def expect(self, f: Callable) -> float:
        """``E[f(N, J)]`` for a reward affine in the level on levels ``n >= 1``.

        ``f(level, phases)`` receives an int level and the array of phase indices and
        returns one value per phase (a scalar broadcasts). Level 0 may be arbitrary;
        for ``n >= 1`` ``f`` must be ``a_j + n b_j`` (checked at levels 1..4).
        """
        ph0 = np.arange(self.n_boundary_phases)
        ph = np.arange(self.n_phases)

        def at(n, phases):
            return np.broadcast_to(np.asarray(f(n, phases), dtype=float), phases.shape)

        f1, f2, f3, f4 = (at(n, ph) for n in (1, 2, 3, 4))
        b = f2 - f1
        scale = max(1.0, float(np.abs(f4).max()))
        if not (np.allclose(f3 - f2, b, rtol=0, atol=1e-12 * scale)
                and np.allclose(f4 - f3, b, rtol=0, atol=1e-12 * scale)):
            raise ModelError("expect: the reward must be affine in the level for levels >= 1")
        return self.expect_affine(at(0, ph0), f1 - b, b)


# --------------------------------------------------------------------------- solver
#: dense QBDs with at most this many phases run BLAS on one thread: at these sizes the
#: threads' start-up costs more than they save, and on a busy machine multithreaded
#: OpenBLAS slows small solves by one to two orders of magnitude (measured 35 ms vs
#: 7-16 s for a 222-phase SED QBD with another process holding a core)
SINGLE_THREAD_PHASES = 400


def solve_qbd(A0, A1, A2, B1=None, B0=None, B2=None, **kw) -> "QBDSolution":
    """Stationary law of a level-independent QBD with a boundary level 0 (see :func:`_solve_qbd`)."""
    if np.shape(A1)[0] <= SINGLE_THREAD_PHASES:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return _solve_qbd(A0, A1, A2, B1, B0, B2, **kw)
    return _solve_qbd(A0, A1, A2, B1, B0, B2, **kw)


def _solve_qbd(
    A0,
    A1,
    A2,
    B1=None,
    B0=None,
    B2=None,
    *,
    algorithm: str = "logarithmic_reduction",
    tol: float = 1e-14,
    maxiter: int = 100,
    strict: bool = False,
) -> QBDSolution:
    """Stationary law of a level-independent QBD with a boundary level 0.

    Parameters
    ----------
    A0, A1, A2 : (m, m) array_like
        Up, local and down blocks of levels ``n >= 1`` (module docstring);
        ``(A0 + A1 + A2) 1 = 0``.
    B1 : (m0, m0) array_like, optional
        Local block of level 0. Default: ``A1 + diag(A2 1)``, i.e. the down
        transitions of level 0 are suppressed (requires ``m0 = m``).
    B0 : (m0, m) array_like, optional
        Up block from level 0 (default ``A0``).
    B2 : (m, m0) array_like, optional
        Down block from level 1 into level 0 (default ``A2``); ``B2 1 = A2 1``.
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
        Bad shapes, negative rates or rows that do not sum to 0.
    UnstableError
        The mean drift ``pi_A A0 1 - pi_A A2 1`` is >= 0 (or ``sp(R) >= 1``).
    ConvergenceError
        With ``strict=True`` when ``G`` is not stochastic to ``tol``.

    Notes
    -----
    The boundary vector solves the censored chain on level 0,
    ``pi_0 (B1 + R0 B2) = 0``, with the normalisation
    ``pi_0 1 + pi_0 R0 (I - R)^-1 1 = 1``, by a dense LU solve with one equation
    replaced by the normalisation.

    Examples
    --------
    M/M/1 as a QBD with one phase:

    >>> sol = solve_qbd([[0.9]], [[-1.9]], [[1.0]])
    >>> bool(abs(sol.mean_level() - 9.0) < 1e-9 and sol.spectral_radius < 1)
    True
    """
    t0 = time.perf_counter()
    if algorithm not in _ALGO:
        raise ModelError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    A1 = _as_block("A1", A1)
    m = A1.shape[0]
    if A1.shape != (m, m):
        raise ModelError(f"A1 must be square; got shape {A1.shape}")
    if m > MAX_PHASES:
        raise ModelError(f"number of phases must be <= {MAX_PHASES} (dense QBD solver); got {m}")
    A0 = _as_block("A0", A0, (m, m))
    A2 = _as_block("A2", A2, (m, m))
    if B1 is None:
        if B0 is not None and np.shape(B0)[0] != m:
            raise ModelError("B1 is required when level 0 has a different number of phases")
        B1 = A1 + np.diag(A2.sum(1))
    B1 = _as_block("B1", B1)
    m0 = B1.shape[0]
    if B1.shape != (m0, m0):
        raise ModelError(f"B1 must be square; got shape {B1.shape}")
    if B0 is None:
        if m0 != m:
            raise ModelError(f"B0 is required when level 0 has m0={m0} phases and the others m={m}")
        B0 = A0
    if B2 is None:
        if m0 != m:
            raise ModelError(f"B2 is required when level 0 has m0={m0} phases and the others m={m}")
        B2 = A2
    B0 = _as_block("B0", B0, (m0, m))
    B2 = _as_block("B2", B2, (m, m0))
    for name, X in (("A0", A0), ("A2", A2), ("B0", B0), ("B2", B2)):
        _check_nonnegative(name, X, offdiag_only=False)
    for name, X in (("A1", A1), ("B1", B1)):
        _check_nonnegative(name, X, offdiag_only=True)
    scale = float(max(np.abs(A1).max(), np.abs(B1).max()))
    _check_rows("A0 + A1 + A2", (A0 + A1 + A2).sum(1), scale)
    _check_rows("[B1 B0]", B1.sum(1) + B0.sum(1), scale)
    _check_rows("[B2 A1 A0]", B2.sum(1) + A1.sum(1) + A0.sum(1), scale)

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
        seconds=time.perf_counter() - t0, _inv=W,
    )


solve_qbd.__doc__ = _solve_qbd.__doc__
