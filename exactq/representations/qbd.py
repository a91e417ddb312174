"""The QBD representation (level-independent quasi-birth-death processes) and its solution.

A QBD has states ``(n, j)``: a *level* ``n >= 0`` and a *phase* ``j``. One block-naming
convention for the whole library, as in Latouche & Ramaswami (1999):

``A0`` (m, m)
    rates *up*, from level ``n`` to level ``n + 1`` (``n >= 1``);
``A1`` (m, m)
    *local* rates within a level ``n >= 1``; its diagonal holds minus the total exit
    rate of each state;
``A2`` (m, m)
    rates *down*, from level ``n`` to ``n - 1`` (``n >= 2``).

Level 0 is the boundary, with ``m0`` phases (``m0 = m`` in the common case):
``B1`` (m0, m0) local rates within level 0, ``B0`` (m0, m) up from level 0 to 1
(default ``A0``), ``B2`` (m, m0) down from level 1 to 0 (default ``A2``). So the
generator is, in block form (levels 0, 1, 2, ...)::

    [ B1  B0              ]
    [ B2  A1  A0          ]
    [     A2  A1  A0      ]
    [         A2  A1  A0  ]
    [              ...    ]

and every row sums to zero: ``(A0 + A1 + A2) 1 = 0``, ``(B1 + B0) 1 = 0`` and
``B2 1 = A2 1``. In discrete time (``time="discrete"``) the blocks hold transition
probabilities and the same rows sum to one.

A QBD may also *reset*: an optional block ``Z`` (m, m0) of rates (or probabilities)
from every level ``n >= 1`` straight to level 0 (a catastrophe, a clearing, the age of
information falling back to one period). The rows then satisfy
``(A0 + A1 + A2 + Z) 1 = 0`` (``Z`` is summed into ``Z 1``) and ``B2 1 = A2 1``. The resets
enter only the equations of level 0, so the law stays matrix-geometric with the
same ``R``; ``G`` becomes substochastic (a reset may come before the first passage
down).

The stationary law is matrix-geometric (Neuts 1981; Latouche & Ramaswami 1999, ch. 6):
``pi_1 = pi_0 R0`` and ``pi_n = pi_1 R^(n-1)`` for ``n >= 1``; :class:`QBDSolution`
holds ``R``, ``G``, ``R0`` and ``pi_0`` and gives the level law, moments and
expectations of rewards affine in the level. The solvers are in
:mod:`exactq.solvers.qbd`.

:class:`RenewalQueue` is the scalar member of the family: one exponential server fed
by a renewal process (GI/M/1), whose embedded chain at arrivals is of GI/M/1 type
with the geometric law ``(1 - sigma) sigma^n``, ``sigma`` the root in (0, 1) of
``sigma = A~(mu (1 - sigma))`` (Kleinrock 1975, vol. 1, sec. 6.4);
:class:`RenewalQueueSolution` holds the root and the laws that follow from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import ModelError
from ..truncation import Truncation

__all__ = ["QBD", "QBDSolution", "RenewalQueue", "RenewalQueueSolution", "TIMES"]

TIMES = ("continuous", "discrete")


def _block(name: str, X, shape=None) -> np.ndarray:
    X = np.atleast_2d(np.asarray(X, dtype=float))
    if X.ndim != 2:
        raise ModelError(f"{name} must be a 2-d matrix; got shape {X.shape}")
    if shape is not None and X.shape != shape:
        raise ModelError(f"{name} must have shape {shape}; got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ModelError(f"{name} must be finite; it has a non-finite entry")
    X.flags.writeable = False
    return X


def _nonnegative(name: str, X: np.ndarray, offdiag_only: bool) -> None:
    Y = X.copy()
    if offdiag_only:
        np.fill_diagonal(Y, 0.0)
    if np.any(Y < 0):
        i, j = np.argwhere(Y < 0)[0]
        what = "off-diagonal entries" if offdiag_only else "entries"
        raise ModelError(f"{name} {what} must be >= 0; got {name}[{i}, {j}] = {Y[i, j]:g}")


def _rows(name: str, rows: np.ndarray, target: float, scale: float) -> None:
    bad = np.abs(rows - target) > 1e-10 * max(scale, 1.0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        what = "a generator" if target == 0 else "a stochastic matrix"
        raise ModelError(f"row {i} of {name} must sum to {target:g} ({what}); got {rows[i]:.6g}")


@dataclass(frozen=True)
class QBD:
    """A level-independent QBD with a boundary level 0 (module docstring for the blocks).

    Parameters
    ----------
    A0, A1, A2 : (m, m) array_like
        Up, local and down blocks of the levels ``n >= 1``.
    B1 : (m0, m0) array_like, optional
        Local block of level 0. Default: ``A1 + diag(A2 1)`` in continuous time (the
        down transitions of level 0 are suppressed), ``A1 + diag(A2 1)`` likewise in
        discrete time (they become self-loops); requires ``m0 = m``.
    B0 : (m0, m) array_like, optional
        Up block from level 0 (default ``A0``).
    B2 : (m, m0) array_like, optional
        Down block from level 1 into level 0 (default ``A2``); ``B2 1 = A2 1``.
    time : {"continuous", "discrete"}
        Rates (rows of the generator sum to 0) or probabilities (rows sum to 1).
    truncation : Truncation, optional
        A truncation of the *phase* (the level is never truncated): ``level`` is the
        phase width a model chose.
    edge, edge0 : (m,) and (m0,) array_like of bool, optional
        The phases at the edge of that phase truncation (``edge0`` defaults to
        ``edge`` when ``m0 = m``); their mass is the truncation's boundary mass.
    reset : (m, m0) array_like, optional
        Rates (probabilities) from every level ``n >= 1`` straight to level 0
        (module docstring); ``None`` (the default) for none.

    Raises
    ------
    ModelError
        Bad shapes, negative rates or probabilities, rows that do not sum to 0 (or 1).

    Examples
    --------
    The M/M/1 queue is the QBD with one phase:

    >>> q = QBD([[0.5]], [[-1.5]], [[1.0]])
    >>> q.n_phases, q.B1.tolist()
    (1, [[-0.5]])

    A discrete-time counter that grows by one with probability 0.4 and falls back to
    level 0 otherwise (a reset); its law is geometric, ``P(N = n) = 0.6 * 0.4^n``:

    >>> c = QBD([[0.4]], [[0.0]], [[0.0]], B1=[[0.6]], B2=[[0.0]], reset=[[0.6]], time="discrete")
    >>> c.has_reset, float(c.reset[0, 0])
    (True, 0.6)
    """

    A0: np.ndarray
    A1: np.ndarray
    A2: np.ndarray
    B1: np.ndarray | None = None
    B0: np.ndarray | None = None
    B2: np.ndarray | None = None
    time: str = "continuous"
    truncation: Truncation | None = None
    edge: np.ndarray | None = field(default=None, repr=False)
    edge0: np.ndarray | None = field(default=None, repr=False)
    reset: np.ndarray | None = None

    def __post_init__(self):
        if self.time not in TIMES:
            raise ModelError(f"time must be one of {', '.join(TIMES)}; got {self.time!r}")
        A1 = _block("A1", self.A1)
        m = A1.shape[0]
        if A1.shape != (m, m):
            raise ModelError(f"A1 must be square; got shape {A1.shape}")
        A0 = _block("A0", self.A0, (m, m))
        A2 = _block("A2", self.A2, (m, m))
        B1 = self.B1
        if B1 is None:
            if self.B0 is not None and np.shape(self.B0)[0] != m:
                raise ModelError("B1 is required when level 0 has a different number of phases")
            B1 = A1 + np.diag(A2.sum(1))
        B1 = _block("B1", B1)
        m0 = B1.shape[0]
        if B1.shape != (m0, m0):
            raise ModelError(f"B1 must be square; got shape {B1.shape}")
        for name, given in (("B0", self.B0), ("B2", self.B2)):
            if given is None and m0 != m:
                raise ModelError(f"{name} is required when level 0 has m0={m0} phases and the others m={m}")
        B0 = _block("B0", A0 if self.B0 is None else self.B0, (m0, m))
        B2 = _block("B2", A2 if self.B2 is None else self.B2, (m, m0))
        Z = None if self.reset is None else _block("reset", self.reset, (m, m0))
        continuous = self.time == "continuous"
        for name, X in (("A0", A0), ("A2", A2), ("B0", B0), ("B2", B2), ("reset", Z)):
            if X is not None:
                _nonnegative(name, X, offdiag_only=False)
        for name, X in (("A1", A1), ("B1", B1)):
            _nonnegative(name, X, offdiag_only=continuous)
        target = 0.0 if continuous else 1.0
        scale = float(max(np.abs(A1).max(), np.abs(B1).max(), np.abs(A0).max(), np.abs(A2).max()))
        out = np.zeros(m) if Z is None else Z.sum(1)
        _rows("A0 + A1 + A2" + (" + reset" if Z is not None else ""), (A0 + A1 + A2).sum(1) + out, target, scale)
        _rows("[B1 B0]", B1.sum(1) + B0.sum(1), target, scale)
        _rows("[B2 A1 A0]" + (" + reset" if Z is not None else ""), B2.sum(1) + A1.sum(1) + A0.sum(1) + out,
              target, scale)
        edge = None if self.edge is None else np.asarray(self.edge, dtype=bool)
        edge0 = None if self.edge0 is None else np.asarray(self.edge0, dtype=bool)
        if edge is not None and edge.shape != (m,):
            raise ModelError(f"edge must mark the {m} phases; got shape {edge.shape}")
        if edge is not None and edge0 is None:
            if m0 != m:
                raise ModelError(f"edge0 is required when level 0 has m0={m0} phases and the others m={m}")
            edge0 = edge
        if Z is not None and not np.any(Z):
            Z = None  # a zero block is no reset
        for name, X in (("A0", A0), ("A1", A1), ("A2", A2), ("B0", B0), ("B1", B1), ("B2", B2),
                        ("edge", edge), ("edge0", edge0), ("reset", Z)):
            object.__setattr__(self, name, X)

    @property
    def n_phases(self) -> int:
        """Phases ``m`` of the levels ``n >= 1``."""
        return self.A1.shape[0]

    @property
    def has_reset(self) -> bool:
        """Whether some level ``n >= 1`` jumps straight to level 0 (a ``reset`` block)."""
        return self.reset is not None

    @property
    def n_boundary_phases(self) -> int:
        """Phases ``m0`` of level 0."""
        return self.B1.shape[0]

    def as_continuous(self) -> "QBD":
        """The continuous-time QBD with the same stationary law and the same ``R`` and ``G``.

        For a discrete-time QBD, ``A1 - I`` and ``B1 - I`` (unit-rate jumps):
        ``R = A0 + R A1 + R^2 A2`` is ``A0 + R (A1 - I) + R^2 A2 = 0``.
        """
        if self.time == "continuous":
            return self
        return QBD(self.A0, self.A1 - np.eye(self.n_phases), self.A2,
                   B1=self.B1 - np.eye(self.n_boundary_phases), B0=self.B0, B2=self.B2,
                   truncation=self.truncation, edge=self.edge, edge0=self.edge0, reset=self.reset)


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
        ``max |1 - G 1|`` (``G`` is stochastic for a recurrent QBD without resets).
    nit : int
        Iterations of the algorithm for ``G``.
    algorithm : str
    drift : dict
        The mean-drift test (``up``, ``down``, ``drift``; :func:`exactq.solvers.qbd.mean_drift`).
    seconds : float
    qbd : QBD, optional
        The representation that was solved.
    g_residual : float, optional
        ``||A2 + A1 G + A0 G^2||_inf`` (continuous-time blocks), the test of ``G``
        when the QBD resets and ``G`` is substochastic (``None`` without resets,
        where ``g_defect`` is the test).
    mp : dict, optional
        The high-precision path (``solve_qbd(..., dps=50)``): ``dps``, the
        ``mpmath`` matrices ``R``, ``G``, ``R0``, ``pi0``, their residuals at that
        precision and the largest change of the float ``R``.
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
    qbd: "QBD | None" = field(default=None, repr=False)
    _inv: np.ndarray | None = field(default=None, repr=False)
    g_residual: float | None = None
    mp: dict | None = field(default=None, repr=False)

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

    def level_moment(self, k: int = 1) -> float:
        """``E[N^k]`` from the factorial moments of the matrix-geometric law.

        With ``pi_n = pi_1 R^(n-1)`` for ``n >= 1``,
        ``E[N (N-1) ... (N-j+1)] = j! pi_1 R^(j-1) (I - R)^-(j+1) 1`` (``j >= 1``), and
        ``E[N^k] = sum_j S(k, j) E[N (N-1) ... (N-j+1)]`` with the Stirling numbers of
        the second kind ``S(k, j)``.

        Examples
        --------
        The M/M/1 law ``(1 - r) r^n`` has ``E[N^2] = r (1 + r) / (1 - r)^2``:

        >>> sol = QBDSolution(R=np.array([[0.5]]), G=np.array([[1.0]]), R0=np.array([[0.5]]),
        ...                   pi0=np.array([0.5]), spectral_radius=0.5, residual=0.0, r_residual=0.0,
        ...                   g_defect=0.0, nit=0, algorithm="closed form")
        >>> bool(np.isclose(sol.level_moment(2), 0.5 * 1.5 / 0.25))
        True
        """
        k = int(k)
        if k < 0:
            raise ModelError(f"moment order k must be >= 0; got {k}")
        if k == 0:
            return 1.0
        W = self.resolvent()
        one = np.ones(self.n_phases)
        # S(k, j) by the recurrence S(k, j) = j S(k-1, j) + S(k-1, j-1)
        S = [1] + [0] * k
        for _ in range(k):
            S = [0] + [j * S[j] + S[j - 1] for j in range(1, k + 1)]
        total, v, fact = 0.0, self.pi1.copy(), 1.0
        for j in range(1, k + 1):
            fact *= j
            u = one
            for _ in range(j + 1):
                u = W @ u
            total += S[j] * fact * float(v @ u)
            v = v @ self.R
        return total

    @property
    def tail_decay_rate(self) -> float:
        """``sp(R)``: ``P(N >= n)`` decays like ``c sp(R)^n`` (the caudal characteristic)."""
        return self.spectral_radius

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

    @property
    def info(self) -> dict:
        """The solution's diagnostics, as reported in a result's ``info``."""
        out = {"levels": "all (matrix-geometric)", "phases_per_level": self.n_phases,
               "spectral_radius_R": self.spectral_radius, "g_defect": self.g_defect, "algorithm": self.algorithm}
        if self.qbd is not None and self.qbd.truncation is not None:
            out["phase_truncation"] = self.qbd.truncation.level
            out["edge_mass"] = self.edge_mass()
        if self.mp is not None:
            out.update(dps=self.mp["dps"], mp_r_residual=self.mp["r_residual"], mp_r_change=self.mp["r_change"])
        return out

    def edge_mass(self) -> float:
        """Probability of the phases at the edge of the QBD's phase truncation (0 without one)."""
        if self.qbd is None or self.qbd.edge is None:
            return 0.0
        return self.expect_affine(self.qbd.edge0.astype(float), self.qbd.edge.astype(float), 0.0)


# ----------------------------------------------------------------------------------------
# GI/M/1: a renewal input to one exponential server
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RenewalQueue:
    """One exponential server (rate ``service_rate``) fed by a renewal process: GI/M/1, FCFS.

    The queue seen by arrivals is geometric, ``(1 - sigma) sigma^n``, where ``sigma``
    is the root in (0, 1) of ``sigma = A~(mu (1 - sigma))`` and ``A~`` is the
    Laplace-Stieltjes transform of the interarrival time (Kleinrock 1975, vol. 1,
    sec. 6.4, eq. 6.24); it exists iff the load ``1 / (mu E[A])`` is below 1.

    Parameters
    ----------
    interarrival_lst : callable
        ``s -> A~(s) = E[exp(-s A)]`` for real ``s >= 0`` (a float function).
    mean_interarrival : float
        ``E[A] > 0``.
    service_rate : float
        ``mu > 0``.
    description : str
        The interarrival law in words (reported in a result's ``info``).

    Examples
    --------
    Erlang-2 input with rate 3 per phase (mean interarrival time 2/3) to a server of
    rate 2 has load 3/4 and ``A~(1) = (3/4)^2``:

    >>> q = RenewalQueue.erlang(2, 3.0, 2.0)
    >>> bool(np.isclose(q.load, 0.75) and np.isclose(q.interarrival_lst(1.0), 0.5625))
    True
    """

    interarrival_lst: Callable[[float], float]
    mean_interarrival: float
    service_rate: float
    description: str = ""

    def __post_init__(self):
        if not callable(self.interarrival_lst):
            raise ModelError("interarrival_lst must be a function s -> E[exp(-s A)]")
        for name in ("mean_interarrival", "service_rate"):
            v = float(getattr(self, name))
            if not (np.isfinite(v) and v > 0):
                raise ModelError(f"{name} must be > 0 and finite; got {v!r}")
            object.__setattr__(self, name, v)
        a0 = float(self.interarrival_lst(0.0))
        if abs(a0 - 1.0) > 1e-12:
            raise ModelError(f"interarrival_lst(0) must be 1 (a probability law); got {a0:.6g}")

    @property
    def load(self) -> float:
        """``rho = 1 / (mu E[A])``."""
        return 1.0 / (self.service_rate * self.mean_interarrival)

    @classmethod
    def phase_type(cls, alpha, T, service_rate: float, description: str = "") -> "RenewalQueue":
        """Phase-type interarrival times ``PH(alpha, T)``: ``A~(s) = alpha (sI - T)^-1 t``, ``t = -T 1``.

        Examples
        --------
        One phase of rate 2 is Poisson input of rate 2: ``A~(s) = 2 / (2 + s)``.

        >>> q = RenewalQueue.phase_type([1.0], [[-2.0]], 4.0)
        >>> float(q.interarrival_lst(1.0)), q.mean_interarrival
        (0.6666666666666666, 0.5)
        """
        alpha = np.asarray(alpha, dtype=float).ravel()
        T = np.atleast_2d(np.asarray(T, dtype=float))
        k = alpha.size
        if T.shape != (k, k):
            raise ModelError(f"T must be ({k}, {k}) for {k} phases; got shape {T.shape}")
        if np.any(alpha < 0) or abs(alpha.sum() - 1.0) > 1e-12:
            raise ModelError(f"alpha must be a probability vector; got {alpha.tolist()}")
        t = -T.sum(1)
        off = T - np.diag(np.diag(T))
        if np.any(off < 0) or np.any(t < -1e-12 * max(1.0, float(np.abs(T).max()))):
            raise ModelError("T must be a sub-generator: off-diagonal entries >= 0, row sums <= 0")
        eye = np.eye(k)
        mean = float(alpha @ np.linalg.solve(-T, np.ones(k)))

        def lst(s):
            return float(alpha @ np.linalg.solve(s * eye - T, t))

        return cls(lst, mean, service_rate, description or f"phase-type with {k} phases")

    @classmethod
    def erlang(cls, phases: int, rate: float, service_rate: float) -> "RenewalQueue":
        """Erlang-``phases`` interarrival times with ``rate`` per phase: ``A~(s) = (rate / (rate + s))^phases``.

        Examples
        --------
        >>> q = RenewalQueue.erlang(3, 6.0, 4.0)
        >>> q.mean_interarrival, bool(np.isclose(q.interarrival_lst(2.0), 0.75 ** 3)), q.load
        (0.5, True, 0.5)
        """
        r, lam = int(phases), float(rate)
        if r < 1:
            raise ModelError(f"phases must be >= 1; got {phases}")
        return cls(lambda s: (lam / (lam + s)) ** r, r / lam, service_rate, f"Erlang-{r} of rate {lam:g} per phase")


@dataclass(frozen=True)
class RenewalQueueSolution:
    """The GI/M/1 laws that follow from the root ``sigma`` (Kleinrock 1975, vol. 1, sec. 6.4).

    Attributes
    ----------
    sigma : float
        The root in (0, 1) of ``sigma = A~(mu (1 - sigma))``: the number an arrival
        finds is geometric, ``P = (1 - sigma) sigma^n``.
    load : float
        ``rho = 1 / (mu E[A])``.
    service_rate : float
    residual : float
        ``|A~(mu (1 - sigma)) - sigma|``.
    nit : int
        Function evaluations of the root finder.
    method : str
    seconds : float
    info : dict

    Examples
    --------
    >>> sol = RenewalQueueSolution(sigma=0.5, load=0.5, service_rate=1.0, residual=0.0, nit=0)
    >>> sol.mean_sojourn(), sol.mean_number(), sol.level_probability(2)
    (2.0, 1.0, 0.125)
    """

    sigma: float
    load: float
    service_rate: float
    residual: float
    nit: int
    method: str = "brentq"
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    def arrival_probability(self, n: int) -> float:
        """``P(an arrival finds n) = (1 - sigma) sigma^n``."""
        return (1.0 - self.sigma) * self.sigma ** int(n)

    def level_probability(self, n: int) -> float:
        """Time-average ``P(N = n)``: ``1 - rho`` for ``n = 0``, ``rho (1 - sigma) sigma^(n-1)`` otherwise."""
        n = int(n)
        if n == 0:
            return 1.0 - self.load
        return self.load * (1.0 - self.sigma) * self.sigma ** (n - 1)

    def mean_number(self) -> float:
        """Time-average ``E[N] = rho / (1 - sigma)``."""
        return self.load / (1.0 - self.sigma)

    def mean_sojourn(self) -> float:
        """``E[T] = 1 / (mu (1 - sigma))``: the sojourn time is exponential with that mean."""
        return 1.0 / (self.service_rate * (1.0 - self.sigma))

    def mean_wait(self) -> float:
        """``E[W] = sigma / (mu (1 - sigma))`` (waiting excludes service)."""
        return self.sigma / (self.service_rate * (1.0 - self.sigma))

    def sojourn_cdf(self, t: float) -> float:
        """``P(T <= t) = 1 - exp(-mu (1 - sigma) t)``."""
        return float(-np.expm1(-self.service_rate * (1.0 - self.sigma) * float(t)))
