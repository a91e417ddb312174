"""The population representation (occupancy processes and their mean-field limits) and its solutions.

A *population* of ``N`` identical servers is described by the occupancy fractions
``s_k`` of servers with at least ``k`` jobs (``s_0 = 1 >= s_1 >= s_2 >= ...``). A job
arrives at rate ``N lambda`` and joins a server with at least ``j`` jobs with
probability ``A_j(s)``, the *dispatch tail* (``A_0 = 1``); every busy server completes
at rate ``mu``. As ``N -> infinity`` the occupancy follows the ODE (Kurtz 1970;
Vvedenskaya, Dobrushin & Karpelevich 1996; Mitzenmacher 2001)::

    ds_k/dt = f_k(s) = lambda (A_{k-1}(s) - A_k(s)) - mu (s_k - s_{k+1}),   k >= 1,

whose fixed point satisfies the flux balance ``F_k(s) = lambda A_{k-1}(s) - mu s_k = 0``.

Conventions
-----------
* An occupancy vector ``s`` holds ``s_1 .. s_K``, shape ``(..., K)`` (leading axes
  are vectorised over; real or complex).
* Beyond ``K`` the *tail closure* continues it geometrically, ``s_{K+j} = s_K r^j``;
  ``r = lambda a / mu`` (:attr:`Population.tail_ratio`) with ``a`` the tail slope
  (``A_j ~ a s_j`` as ``s_j -> 0``), exact to first order in ``s_K``.
* ``dispatch(s_full, power=None)`` receives ``s_0 .. s_K`` followed by ``closure``
  values beyond ``K`` and returns ``A_0 .. A_K``; ``A_j`` depends on
  ``s_{j-b} .. s_{j+b}`` only (``b`` the ``bandwidth``), and the function accepts
  complex input (the Jacobian is a complex-step derivative, Squire & Trapp 1998).
  ``power(w)`` is the probability that all samples of an arrival fall in a set
  holding the fraction ``w`` of the servers in the limit (``w**d`` for ``d``
  samples); ``power_correction(w)`` is its ``1/N`` term at finite ``N`` (sampling
  without replacement: ``C(Nw, d)/C(N, d) = w^d + d(d-1)/(2N) (w^d - w^{d-1}) + O(N^-2)``).

The solvers (:mod:`exactq.solvers.meanfield`) return a :class:`FixedPoint` (the
fixed point, its drift Jacobian and stability verdict) or a
:class:`RefinedFixedPoint` (the fixed point with its ``1/N`` correction, Gast & Van
Houdt 2017); the model maps either to its measures.

References
----------
T. G. Kurtz, "Solutions of ordinary differential equations as limits of pure jump
Markov processes", J. Appl. Probab. 7, 1970. M. Mitzenmacher, "The power of two
choices in randomized load balancing", IEEE TPDS 12(10), 2001. N. Gast, B. Van Houdt,
"A refined mean field approximation", Proc. ACM Meas. Anal. Comput. Syst. 1(2), 2017.
W. Squire, G. Trapp, "Using complex variables to estimate derivatives of real
functions", SIAM Review 40, 1998. A. R. Curtis, M. J. D. Powell, J. K. Reid, "On the
estimation of sparse Jacobian matrices", IMA J. Appl. Math. 13, 1974.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError

__all__ = ["Population", "FixedPoint", "RefinedFixedPoint", "banded_jacobian", "band_to_dense", "band_to_sparse"]

#: the complex step of the Jacobians (exact to rounding for analytic functions)
COMPLEX_STEP = 1e-30


def banded_jacobian(fun: Callable[[np.ndarray], np.ndarray], s: np.ndarray, lower: int, upper: int) -> np.ndarray:
    """Banded Jacobian of ``fun`` at ``s`` by grouped complex steps (exact to rounding).

    ``fun`` maps ``(..., K)`` to ``(..., K)`` (complex input allowed) and output ``i``
    depends on inputs ``i - upper .. i + lower``. The ``lower + upper + 1`` column
    groups of Curtis, Powell & Reid (1974) give every column in one evaluation.

    Returns
    -------
    (lower + upper + 1, K) ndarray
        The band in the layout of ``scipy.linalg.solve_banded((lower, upper), ...)``.

    Examples
    --------
    The tridiagonal map ``x_{i-1} - 2 x_i + x_{i+1}``:

    >>> f = lambda x: np.diff(np.pad(x, [(0, 0)] * (x.ndim - 1) + [(1, 1)]), 2)
    >>> banded_jacobian(f, np.zeros(3), 1, 1).tolist()
    [[0.0, 1.0, 1.0], [-2.0, -2.0, -2.0], [1.0, 1.0, 0.0]]
    """
    s = np.asarray(s, dtype=float)
    K = len(s)
    period = lower + upper + 1
    groups = np.arange(K) % period
    P = np.zeros((period, K), dtype=complex)
    P[:] = s
    P[groups, np.arange(K)] += 1j * COMPLEX_STEP
    D = fun(P).imag / COMPLEX_STEP  # row g: the sum of the columns in group g
    ab = np.zeros((period, K))
    cols = np.arange(K)
    for off in range(-upper, lower + 1):  # loop over the band's diagonals; row = col + off
        rows = cols + off
        ok = (rows >= 0) & (rows < K)
        ab[upper + off, cols[ok]] = D[groups[cols[ok]], rows[ok]]
    return ab


def band_to_dense(ab: np.ndarray, lower: int, upper: int, K: int | None = None) -> np.ndarray:
    """The ``(K, K)`` matrix of a band in ``solve_banded`` layout (the first ``K`` columns).

    Examples
    --------
    >>> band_to_dense(np.array([[0.0, 5.0], [1.0, 2.0], [3.0, 0.0]]), 1, 1).tolist()
    [[1.0, 5.0], [3.0, 2.0]]
    """
    K = ab.shape[1] if K is None else int(K)
    J = np.zeros((K, K))
    cols = np.arange(K)
    for off in range(-upper, lower + 1):
        rows = cols + off
        ok = (rows >= 0) & (rows < K)
        J[rows[ok], cols[ok]] = ab[upper + off, cols[ok]]
    return J


def band_to_sparse(ab: np.ndarray, lower: int, upper: int) -> sp.csr_matrix:
    """The ``(K, K)`` sparse matrix of a band in ``solve_banded`` layout.

    Examples
    --------
    >>> band_to_sparse(np.array([[0.0, 5.0], [1.0, 2.0], [3.0, 0.0]]), 1, 1).toarray().tolist()
    [[1.0, 5.0], [3.0, 2.0]]
    """
    K = ab.shape[1]
    cols = np.arange(K)
    rows, cc, vals = [], [], []
    for off in range(-upper, lower + 1):  # loop over the band's diagonals
        ok = (cols + off >= 0) & (cols + off < K)
        rows.append(cols[ok] + off)
        cc.append(cols[ok])
        vals.append(ab[upper + off, cols[ok]])
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cc))), shape=(K, K))


def _positive(name: str, value, *, zero: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise ModelError(f"{name} must be a finite number {'>=' if zero else '>'} 0; got {value!r}")
    return v


@dataclass(frozen=True)
class Population:
    """An occupancy process of identical servers: its drift, Jacobian and tail closure.

    Parameters
    ----------
    arrival_rate : float
        ``lambda``, the arrival rate *per server* (the total is ``N lambda``); > 0.
    dispatch : callable ``(s_full, power=None) -> A``
        The dispatch tail (module docstring, *Conventions*): ``s_full`` of shape
        ``(..., K + 1 + closure)``, ``A`` of shape ``(..., K + 1)``.
    service_rate : float
        ``mu``, the service rate of each server; > 0.
    servers : float
        ``N``, an integer >= 1 or ``inf`` (the limit itself).
    closure : int
        How many values beyond ``K`` the dispatch reads (>= 0).
    bandwidth : int
        ``b``: ``A_j`` depends on ``s_{j-b} .. s_{j+b}`` (>= 0).
    tail_slope : float
        ``a`` with ``A_j ~ a s_j`` as ``s_j -> 0`` (0 for super-geometric tails).
    tail_map : callable ``x -> A(x)``, optional
        When ``A_{k-1}`` depends on ``s_{k-1}`` alone (``bandwidth = 0``): that scalar
        function, so that the flux balance is the recursion
        ``s_k = (lambda / mu) A(s_{k-1})``.
    power : callable, optional
        ``w -> P(all samples in a fraction w of the servers)`` in the limit.
    power_correction : callable, optional
        Its ``1/N`` term (needs ``power``); ``None`` when the finite-``N`` rates are the
        limit ones.

    Raises
    ------
    ModelError
        A rate that is not a positive finite number, ``servers < 1``, negative
        ``closure``/``bandwidth``/``tail_slope``, or a field that should be callable
        and is not.

    Examples
    --------
    Random routing to one server (``A_j = s_j``) is ``N`` independent M/M/1 queues:
    ``s_k = rho^k`` is the fixed point, and the Jacobian is the tridiagonal
    birth-death drift:

    >>> pop = Population(0.5, dispatch=lambda s, power=None: s, tail_slope=1.0)
    >>> s = 0.5 ** np.arange(1, 41)
    >>> bool(np.abs(pop.drift(s, pop.tail_ratio)).max() < 1e-16), pop.tail_ratio
    (True, 0.5)
    >>> pop.jacobian(s[:3]).toarray().tolist()
    [[-1.5, 1.0, 0.0], [0.5, -1.5, 1.0], [0.0, 0.5, -1.5]]
    """

    arrival_rate: float
    dispatch: Callable
    service_rate: float = 1.0
    servers: float = math.inf
    closure: int = 0
    bandwidth: int = 0
    tail_slope: float = 0.0
    tail_map: Callable | None = field(default=None, repr=False)
    power: Callable | None = field(default=None, repr=False)
    power_correction: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "arrival_rate", _positive("arrival_rate", self.arrival_rate))
        object.__setattr__(self, "service_rate", _positive("service_rate", self.service_rate))
        object.__setattr__(self, "tail_slope", _positive("tail_slope", self.tail_slope, zero=True))
        n = float(self.servers)
        if not (n == math.inf or (n >= 1 and n == int(n))):
            raise ModelError(f"servers must be an integer >= 1 or inf; got {self.servers!r}")
        object.__setattr__(self, "servers", n)
        for name in ("closure", "bandwidth"):
            v = getattr(self, name)
            if int(v) != v or v < 0:
                raise ModelError(f"{name} must be an integer >= 0; got {v!r}")
            object.__setattr__(self, name, int(v))
        for name in ("dispatch", "tail_map", "power", "power_correction"):
            v = getattr(self, name)
            if (v is not None or name == "dispatch") and not callable(v):
                raise ModelError(f"{name} must be callable; got {type(v).__name__}")
        if self.power_correction is not None and self.power is None:
            raise ModelError("power_correction needs power (the limit it corrects)")

    @property
    def tail_ratio(self) -> float:
        """``r = lambda a / mu``: the geometric ratio of the fixed point's tail."""
        return self.arrival_rate * self.tail_slope / self.service_rate

    @property
    def is_finite(self) -> bool:
        """Whether ``servers`` is finite (then a refined ``1/N`` term exists)."""
        return math.isfinite(self.servers)

    def extend(self, s: np.ndarray, r: float, extra: int = 1) -> np.ndarray:
        """``s_0 = 1, s_1 .. s_K`` followed by ``closure + extra`` closure values ``s_K r^j``."""
        s = np.asarray(s)
        c = self.closure + extra
        one = np.ones(s.shape[:-1] + (1,), dtype=s.dtype)
        tail = s[..., -1:] * (r ** np.arange(1, c + 1))
        return np.concatenate([one, s, tail], axis=-1)

    def flux(self, s: np.ndarray, r: float = 0.0) -> np.ndarray:
        """``F_k = lambda A_{k-1}(s) - mu s_k``, ``k = 1..K``: zero at the fixed point."""
        s = np.asarray(s)
        A = self.dispatch(self.extend(s, r, extra=0))
        return self.arrival_rate * A[..., :s.shape[-1]] - self.service_rate * s

    def drift(self, s: np.ndarray, r: float = 0.0, power: Callable | None = None) -> np.ndarray:
        """The drift ``f_k(s)``, ``k = 1..K``, with the tail closure ``r`` (``power`` replaces the window law)."""
        s = np.asarray(s)
        K = s.shape[-1]
        full = self.extend(s, r, extra=1)
        A = self.dispatch(full[..., :-1]) if power is None else self.dispatch(full[..., :-1], power=power)
        return self.arrival_rate * (A[..., :K] - A[..., 1:K + 1]) - self.service_rate * (s - full[..., 2:K + 2])

    def jacobian(self, s: np.ndarray, r: float = 0.0) -> sp.csr_matrix:
        """``Df(s)``, the ``(K, K)`` banded Jacobian of the drift (sparse; complex step)."""
        s = np.asarray(s, dtype=float)
        b = self.bandwidth + 1
        return band_to_sparse(banded_jacobian(lambda x: self.drift(x, r), s, b, b), b, b)

    def jump_variance(self, s: np.ndarray, r: float = 0.0) -> np.ndarray:
        """``lambda (A_{k-1} - A_k) + mu (s_k - s_{k+1})``: the jump rate of ``s_k`` (steps of ``1/N``).

        The diagonal of the ``N``-scaled jump covariance ``Qn`` of the refined mean
        field (every jump moves one coordinate by ``1/N``).
        """
        s = np.asarray(s, dtype=float)
        K = len(s)
        full = self.extend(s, r, extra=1)
        A = self.dispatch(full[:-1])
        return self.arrival_rate * (A[:K] - A[1:K + 1]) + self.service_rate * (s - full[2:K + 2])

    def finite_drift_term(self, s: np.ndarray, r: float = 0.0) -> np.ndarray:
        """``f~``: the ``1/N`` part of the finite-``N`` drift (zero without a ``power_correction``)."""
        s = np.asarray(s, dtype=float)
        if self.power_correction is None:
            return np.zeros(len(s))
        base, corr = self.power, self.power_correction
        return self.drift(s, r, power=lambda w: base(w) + corr(w)) - self.drift(s, r, power=base)


@dataclass(frozen=True)
class FixedPoint:
    """A fixed point of the mean-field drift, with its Jacobian and stability verdict.

    Attributes
    ----------
    s : (K,) ndarray
        ``s_1 .. s_K``, nonincreasing in ``[0, 1]``.
    tail_ratio : float
        ``r`` in ``[0, 1)``: ``s_{K+j} = s_K r^j`` beyond ``K``.
    residual : float
        ``max_k |F_k(s)|`` (the flux balance).
    step : float
        Sum of the absolute values of the last Newton step: an estimate of the error
        of ``sum_k s_k``.
    nit : int
        Newton iterations.
    jacobian_band : (2 w + 1, K) ndarray, optional
        ``Df(s)``, the drift Jacobian at the fixed point, as its band (``w`` below and
        above the diagonal, the layout of ``scipy.linalg.solve_banded``); the sparse
        matrix is :attr:`jacobian`.
    band_width : int
        ``w``.
    eigenvalues : ndarray
        The eigenvalues of the leading ``eig_block`` block of the Jacobian.
    spectral_abscissa : float
        The largest real part: of the leading block and, when ``eig_block < K``, of
        the analytic bound of the linear tail, ``tail_abscissa``.
    tail_abscissa : float
        ``-(sqrt(mu) - sqrt(lambda a))^2``, the largest real part of the spectrum of
        the linear (birth-death) tail.
    stable : bool
        ``spectral_abscissa < 0``: the fixed point is locally asymptotically stable.
    eig_block : int
    seconds : float

    Examples
    --------
    The M/M/1 occupancy ``s_k = rho^k`` with its geometric closure sums to
    ``E[L] = rho / (1 - rho)`` per server:

    >>> rho = 0.5
    >>> fp = FixedPoint(rho ** np.arange(1, 31), tail_ratio=rho)
    >>> abs(fp.total() - rho / (1 - rho)) < 1e-15, fp.K
    (True, 30)
    """

    s: np.ndarray
    tail_ratio: float
    residual: float = 0.0
    step: float = 0.0
    nit: int = 0
    jacobian_band: np.ndarray | None = field(default=None, repr=False)
    band_width: int = 0
    eigenvalues: np.ndarray = field(default_factory=lambda: np.zeros(0, complex), repr=False)
    spectral_abscissa: float = math.nan
    tail_abscissa: float = math.nan
    stable: bool = False
    eig_block: int = 0
    seconds: float = 0.0

    def __post_init__(self):
        s = np.asarray(self.s, dtype=float)
        if s.ndim != 1 or len(s) == 0 or not np.all(np.isfinite(s)):
            raise ModelError(f"s must be a nonempty finite vector s_1..s_K; got shape {s.shape}")
        if not 0.0 <= self.tail_ratio < 1.0:
            raise ModelError(f"tail_ratio must be in [0, 1); got {self.tail_ratio!r}")
        object.__setattr__(self, "s", s)

    @property
    def K(self) -> int:
        """The number of coordinates kept."""
        return len(self.s)

    @property
    def jacobian(self) -> sp.csr_matrix | None:
        """``Df(s)`` as a ``(K, K)`` sparse matrix (``None`` when the solver gave no band)."""
        if self.jacobian_band is None:
            return None
        return band_to_sparse(self.jacobian_band, self.band_width, self.band_width)

    @property
    def tail_sum(self) -> float:
        """``sum_{k > K} s_k = s_K r / (1 - r)`` from the closure."""
        r = self.tail_ratio
        return float(self.s[-1] * r / (1.0 - r)) if r > 0 else 0.0

    def total(self) -> float:
        """``sum_{k >= 1} s_k``: the mean number of jobs per server."""
        return float(self.s.sum() + self.tail_sum)

    @property
    def info(self) -> dict:
        """The diagnostics reported in a result's ``info``."""
        lead = self.eigenvalues[np.argsort(-self.eigenvalues.real)][:5]
        return {"K": self.K, "tail_ratio": self.tail_ratio, "tail_sum": self.tail_sum, "newton_iterations": self.nit,
                "stable": self.stable, "spectral_abscissa": self.spectral_abscissa,
                "leading_eigenvalues": [[float(z.real), float(z.imag)] for z in lead],
                "tail_eigenvalue_bound": self.tail_abscissa, "eig_block": self.eig_block,
                "occupancy_head": self.s[:8].tolist()}


@dataclass(frozen=True)
class RefinedFixedPoint:
    """The refined mean field: ``E[s] = s* + V / N + o(1/N)`` (Gast & Van Houdt 2017, Thm. 3.1).

    Attributes
    ----------
    fixed_point : FixedPoint
        ``s*``, the limit.
    V : (K,) ndarray
        The ``1/N`` coefficient (zero beyond the leading ``dim`` coordinates).
    servers : float
        ``N`` (``inf``: no correction, ``s = s*``).
    dim : int
        Size of the leading block on which ``V`` was computed.
    lyapunov_residual : float
        ``max |A W + W A^T + Qn|`` of the covariance equation.
    drift_term : float
        ``max |f~|``, the ``1/N`` part of the finite-``N`` drift.
    seconds : float

    Examples
    --------
    At ``N = 10`` the corrected occupancy is ``s* + V/10``:

    >>> fp = FixedPoint(np.array([0.5, 0.25]), tail_ratio=0.0)
    >>> RefinedFixedPoint(fp, np.array([0.0, 0.5]), servers=10).s.tolist()
    [0.5, 0.3]
    """

    fixed_point: FixedPoint
    V: np.ndarray
    servers: float
    dim: int = 0
    lyapunov_residual: float = 0.0
    drift_term: float = 0.0
    seconds: float = 0.0

    def __post_init__(self):
        V = np.asarray(self.V, dtype=float)
        if V.shape != self.fixed_point.s.shape:
            raise ModelError(f"V must have the shape of s, {self.fixed_point.s.shape}; got {V.shape}")
        object.__setattr__(self, "V", V)

    @property
    def s(self) -> np.ndarray:
        """``s* + V / N`` (``s*`` when ``N`` is infinite)."""
        fp = self.fixed_point
        return fp.s + self.V / self.servers if math.isfinite(self.servers) else fp.s

    @property
    def tail_sum(self) -> float:
        """The closure's tail of the limit (the correction beyond ``K`` is below rounding)."""
        return self.fixed_point.tail_sum

    def total(self) -> float:
        """``sum_k E[s_k]`` to first order in ``1/N``."""
        return float(self.s.sum() + self.tail_sum)

    @property
    def residual(self) -> float:
        return self.fixed_point.residual

    @property
    def nit(self) -> int:
        return self.fixed_point.nit

    @property
    def stable(self) -> bool:
        return self.fixed_point.stable

    @property
    def info(self) -> dict:
        """The fixed point's diagnostics and the correction's."""
        out = dict(self.fixed_point.info)
        if math.isfinite(self.servers):
            out.update({"correction_dim": self.dim, "lyapunov_residual": self.lyapunov_residual,
                        "drift_term_max": self.drift_term, "V_head": self.V[:8].tolist()})
        return out
