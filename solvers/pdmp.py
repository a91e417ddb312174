"""Solvers for piecewise-deterministic window processes (:class:`~exactq.representations.pdmp.PDMP`).

Four things live here, each taking a representation and returning a solution:

:func:`stability`
    The verdict (positive recurrent or not) with the quantity that decides it.
:func:`solve_series` (solver ``q-series``)
    The analytic stationary law for power-law profiles ``a(w) = a w^alpha``,
    ``lambda(w) = lam w^gamma`` and the decrease ``W -> nu W`` (Altman, Avrachenkov,
    Kherani & Prabhu 2005). With ``m = gamma + 1 - alpha``, ``u = W^m``, ``h(x) = x^alpha
    f(x)`` and ``H(u) = h(x)``, the Kolmogorov equation differentiates to
    ``H'(u) = theta (H(u / q) / q - H(u))`` with ``theta = lam / (a m)`` and ``q = nu^m``:
    the equation of a linear-increase protocol with constant-rate losses ``theta`` and
    decrease factor ``q``. Its solution is the q-Pochhammer series

    ``H(u) = sum_n c_n exp(-theta q^-n u)``, ``c_n = (-1)^n q^(n(n-1)/2) / (q; q)_n``,

    so ``f(x) = C x^-alpha H(x^m)``. Its Mellin transform is
    ``int u^(s-1) H(u) du = Phi(s) theta^-s`` with ``Phi(s) = Gamma(s) (q^s; q)_inf``
    (the q-binomial theorem), an entire function, so every moment exists and

    ``E[W^k] = theta^(-k/m) Phi(s0 + k/m) / Phi(s0)``, ``s0 = (1 - alpha) / m``.

    A floor ``w_min`` conditions the law on ``W >= w_min`` (the level-crossing equation
    above ``w_min`` is unchanged), with moments from the incomplete-gamma series; for
    ``m = 0`` with a floor the law is Pareto. ``Phi`` and the tail series are evaluated
    with mpmath at a scoped precision (``mpmath.workdps``), twice, to estimate the
    error; densities in float64 unless the series' cancellation (``sum |c_n|``) needs
    mpmath.
:func:`solve_kolmogorov` (solver ``kolmogorov``)
    The independent numerical solution of the level-crossing equation
    ``a(x) f(x) = int_x^{d^-1(x)} lambda(y) f(y) dy`` for general ``a``, ``lambda`` and
    ``d``. With ``G(x) = int_x^inf lambda f`` (the loss intensity above ``x``, the atom at
    a ceiling included) it reads ``a f = G(x) - G(d^-1(x))`` and ``G' = -lambda f``: in
    ``t = ln x`` the advanced delay equation ``dG/dt = -r(t) (G(t) - G(s(t)))``, with
    ``r = lambda x / a`` and ``s = ln d^-1(e^t)``. The trapezoidal rule on a log mesh
    (aligned with ``ln(1/nu)`` for the multiplicative decrease, so that ``s(t)`` is a
    node; otherwise degree-5 Lagrange interpolation of the history) gives a sparse
    upper-triangular system, solved from the top down. Its error expands in even
    powers of the mesh width; Richardson extrapolation over mesh halvings removes them
    and the last two extrapolants give the error estimate. Without a ceiling the top of
    the mesh is an artificial ceiling far in the tail; without a floor the bottom is
    cut where the law has no mass; both masses are reported.
:func:`compare_cdfs` (solver ``cdf-comparison`` for :class:`~exactq.representations.pdmp.CDFPair`)
    Stochastic ordering of two laws from their CDFs on a grid.

References
----------
E. Altman, K. Avrachenkov, A. A. Kherani and B. J. Prabhu, "Performance analysis and
stochastic stability of congestion control protocols", IEEE INFOCOM 2005.
V. Dumas, F. Guillemin and Ph. Robert, "A Markovian analysis of additive-increase
multiplicative-decrease algorithms", Adv. Appl. Probab. 34 (2002) 85-111 (the series
for the linear-increase protocol with constant-rate losses).
G. Gasper and M. Rahman, *Basic Hypergeometric Series*, 2nd ed., CUP 2004, eq. (1.3.16)
(``sum_n (-1)^n q^(n(n-1)/2) z^n / (q;q)_n = (z; q)_inf``).
L. F. Richardson, "The deferred approach to the limit", Phil. Trans. R. Soc. A 226
(1927) 299-361.

Examples
--------
A linear increase ``a(w) = 1`` with window-proportional losses ``lambda(w) = p w``,
``p = 0.001``, and ``nu = 1/2`` has ``E[W^2] = a / (p (1 - nu)) = 2000`` exactly, and both solvers agree:

>>> from exactq.representations.pdmp import PDMP, PowerLaw
>>> rep = PDMP(PowerLaw(1.0), PowerLaw(0.001, 1.0), nu=0.5)
>>> exact, numeric = solve_series(rep), solve_kolmogorov(rep)
>>> bool(abs(exact.moment(2) - 2000) < 1e-9 and abs(numeric.mean() - exact.mean()) < 1e-8)
True
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import mpmath
import numpy as np
from scipy import sparse, special
from scipy.optimize import brentq
from scipy.sparse.linalg import spsolve_triangular

from exactq.catalogue import register_method, register_solver
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, NotApplicableError
from exactq.representations.pdmp import (
    PDMP,
    CDFPair,
    PDMPSolution,
    StabilityVerdict,
    StochasticOrdering,
)

__all__ = [
    "stability",
    "solve_series",
    "solve_kolmogorov",
    "compare_cdfs",
    "series_moment",
    "reference_window",
    "richardson",
    "MAX_NODES",
]

#: the finest Kolmogorov mesh may have at most this many nodes
MAX_NODES = 2_000_000
_EPS = np.finfo(float).eps
_LONG_EPS = float(np.finfo(np.longdouble).eps)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)


# =============================================================================== stability
def _power_law_parameters(rep: PDMP):
    inc, loss = rep.increase, rep.loss_rate
    return inc.coefficient, inc.exponent, loss.coefficient, loss.exponent, rep.nu


def _kappa_floor(a: float, lam: float, c: float) -> float:
    """The root ``kappa > 0`` of ``a kappa = lam (1 - e^(-c kappa))`` (needs ``lam c > a``).

    Lambert's W: with ``beta = lam c / a``, ``c kappa = beta + W_0(-beta e^-beta)``;
    refined by Newton's method at 30 digits.
    """
    beta = lam * c / a
    guess = (beta + float(special.lambertw(-beta * math.exp(-beta), 0).real)) / c
    with mpmath.workdps(30):
        root = mpmath.findroot(lambda k: a * k - lam * (1 - mpmath.exp(-c * k)), max(guess, 1e-12))
        return float(root)


def _kappa_ceiling(a: float, lam: float, c: float) -> float:
    """The root ``kappa > 0`` of ``a kappa = lam (e^(c kappa) - 1)`` (needs ``lam c < a``).

    With ``beta = lam c / a``: ``c kappa = -W_-1(-beta e^-beta) - beta``.
    """
    beta = lam * c / a
    guess = (-float(special.lambertw(-beta * math.exp(-beta), -1).real) - beta) / c
    with mpmath.workdps(30):
        root = mpmath.findroot(lambda k: a * k - lam * (mpmath.exp(c * k) - 1), max(guess, 1e-12))
        return float(root)


def _power_law_stability(rep: PDMP) -> StabilityVerdict:
    a, alpha, lam, gamma, nu = _power_law_parameters(rep)
    m = gamma + 1.0 - alpha
    c = -math.log(nu)
    Q = "m = gamma + 1 - alpha"
    floor, ceiling = rep.w_min is not None, rep.w_max is not None
    ratio = lam * c / a
    details = {"m": m, "alpha": alpha, "gamma": gamma}
    if floor and ceiling:
        return StabilityVerdict(True, Q, m, "a window confined to [w_min, w_max], with a > 0 and lambda > 0 there, "
                                "is positive recurrent for every m", details=details)
    if abs(m) > 1e-12:
        if m > 0:
            return StabilityVerdict(True, Q, m, "stable iff m > 0: at large windows losses outpace the increase, at "
                                    "small ones the increase outpaces them", details=details)
        if ceiling:
            rule = "with a ceiling only, stable iff m >= 0 (m < 0: losses outpace the increase at small windows and " \
                   "the window collapses to 0; a floor w_min would make it stable)"
        elif floor:
            rule = "with a floor only, stable iff m >= 0 (m < 0: the increase outpaces losses at large windows and " \
                   "the window escapes to infinity; a ceiling w_max would make it stable)"
        else:
            rule = "stable iff m > 0"
        return StabilityVerdict(False, Q, m, rule, details=details)
    # m = 0: in log scale, after the time change by W^(alpha - 1), a random walk with
    # drift a - lam ln(1/nu) and jumps -ln(1/nu)
    details["log_drift_ratio"] = ratio
    RQ = "lam ln(1/nu) / a"
    if not floor and not ceiling:
        return StabilityVerdict(False, Q, m, "stable iff m > 0 (m = 0: the log-window is a random walk, null "
                                "recurrent or transient without a window bound)", details=details)
    if floor:
        rule = "m = 0 with a floor: stable iff lam ln(1/nu) / a > 1 and the tail index kappa + alpha - 1 > 0 " \
               "(kappa > 0 solves a kappa = lam (1 - nu^kappa))"
        if ratio <= 1.0:
            return StabilityVerdict(False, RQ, ratio, rule, details=details)
        kappa = _kappa_floor(a, lam, c)
        eta = kappa + alpha - 1.0
        details.update(kappa=kappa, tail_index=eta)
        return StabilityVerdict(eta > 0, "tail index kappa + alpha - 1", eta, rule, details=details)
    rule = "m = 0 with a ceiling: stable iff lam ln(1/nu) / a < 1 and kappa + 1 - alpha > 0 " \
           "(kappa > 0 solves a kappa = lam (nu^-kappa - 1); the density is ~ x^(kappa - alpha) near 0)"
    if ratio >= 1.0:
        return StabilityVerdict(False, RQ, ratio, rule, details=details)
    kappa = _kappa_ceiling(a, lam, c)
    eta = kappa + 1.0 - alpha
    details.update(kappa=kappa, low_index=eta)
    return StabilityVerdict(eta > 0, "kappa + 1 - alpha", eta, rule, details=details)


def _log_drift_ratio(rep: PDMP, w: np.ndarray) -> np.ndarray:
    """``lambda(w) ln(w / d(w)) / (a(w) / w)``: mean log-decrease rate over log-increase rate."""
    d = rep.d(w)
    if rep.w_min is not None:
        d = np.maximum(d, rep.w_min)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rep.loss(w) * w * np.log(w / d) / rep.a(w)


def _general_stability(rep: PDMP) -> StabilityVerdict:
    floor, ceiling = rep.w_min is not None, rep.w_max is not None
    Q = "log-drift ratio lambda(w) w ln(w / d(w)) / a(w)"
    if floor and ceiling:
        if not float(rep.loss(rep.w_max)) > 0:
            return StabilityVerdict(False, "lambda(w_max)", float(rep.loss(rep.w_max)),
                                    "a window ceiling needs losses there: lambda(w_max) > 0")
        return StabilityVerdict(True, "window bounds", rep.w_max / rep.w_min,
                                "a window confined to [w_min, w_max] with a > 0 and lambda(w_max) > 0 is positive "
                                "recurrent")
    scale = reference_window(rep)
    details = {"reference_window": scale}
    if not ceiling:
        far = scale * np.array([1e3, 1e6, 1e9])
        top = _log_drift_ratio(rep, far)
        details["ratio_at_large_windows"] = dict(zip(map(float, far), map(float, top)))
        if not top[-1] > 1.0:
            return StabilityVerdict(False, Q + " at large w", float(top[-1]),
                                    "stable at large windows iff the ratio exceeds 1 there (asymptotic test at "
                                    f"w = {far[-1]:.3g})", exact=False, details=details)
    if not floor:
        near = scale * np.array([1e-3, 1e-6, 1e-9])
        low = _log_drift_ratio(rep, near)
        details["ratio_at_small_windows"] = dict(zip(map(float, near), map(float, low)))
        if not low[-1] < 1.0:
            return StabilityVerdict(False, Q + " at small w", float(low[-1]),
                                    "stable at small windows iff the ratio is below 1 there (asymptotic test at "
                                    f"w = {near[-1]:.3g})", exact=False, details=details)
    value = float(_log_drift_ratio(rep, np.array([scale * (1e9 if not ceiling else 1e-9)]))[0])
    return StabilityVerdict(True, Q, value, "the ratio is > 1 at large windows (or a ceiling) and < 1 at small "
                            "windows (or a floor); asymptotic test at w = reference * 1e+-9", exact=False,
                            details=details)


def stability(rep: PDMP) -> StabilityVerdict:
    """Whether the window process is positive recurrent, with the quantity that decides it.

    Power-law profiles with ``W -> nu W`` (exact conditions; ``m = gamma + 1 - alpha``,
    ``c = ln(1/nu)``):

    * no bounds: stable iff ``m > 0``;
    * a floor only: ``m > 0`` stable, ``m < 0`` unstable (escape to infinity); ``m = 0``
      stable iff ``lam c > a`` and ``kappa + alpha - 1 > 0`` with ``kappa`` the positive
      root of ``a kappa = lam (1 - nu^kappa)`` (the law is then Pareto with that index);
    * a ceiling only: ``m > 0`` stable, ``m < 0`` unstable (collapse to 0); ``m = 0``
      stable iff ``lam c < a`` and ``kappa + 1 - alpha > 0`` with ``a kappa = lam
      (nu^-kappa - 1)``;
    * both bounds: stable.

    The ``m = 0`` cases follow from the log-window, which after the time change
    ``ds = W^(alpha - 1) dt`` is a compound-Poisson walk with drift ``a`` and jumps
    ``-c`` at rate ``lam``; its reflected stationary law is exponential in ``ln W``
    and the time change multiplies it by ``W^(1 - alpha)``.

    General profiles: both bounds give a stable process; an unbounded end is judged
    by the log-drift ratio ``lambda(w) w ln(w/d(w)) / a(w)`` (> 1 at large windows,
    < 1 at small ones) evaluated far from the bulk (``exact=False`` in the verdict).

    Examples
    --------
    A multiplicative increase ``a(w) = 0.01 w`` with ``nu = 0.875``, constant-rate losses
    ``lam`` and a floor of one packet is stable iff ``lam > 0.01 / ln(1/0.875)``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> edge = 0.01 / math.log(1 / 0.875)
    >>> [stability(PDMP(PowerLaw(0.01, 1.0), PowerLaw(lam), nu=0.875, w_min=1.0)).stable
    ...  for lam in (0.9 * edge, 1.1 * edge)]
    [False, True]
    """
    if not isinstance(rep, PDMP):
        raise ModelError(f"stability takes a PDMP representation; got {type(rep).__name__}")
    return _power_law_stability(rep) if rep.is_power_law else _general_stability(rep)


def reference_window(rep: PDMP) -> float:
    """A typical window: where the log-drift ratio crosses 1 (the fluid equilibrium).

    For power laws, ``(a / (lam ln(1/nu)))^(1/m)``; otherwise the first upward crossing
    on a log scan around ``rep.scale`` (the floor or ceiling if there is none),
    clipped into ``[w_min, w_max]``.

    Examples
    --------
    ``a(w) = 1``, ``lambda(w) = 0.001 w``, ``nu = 1/2``: ``sqrt(1 / (0.001 ln 2)) = 37.98...``

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> w = reference_window(PDMP(PowerLaw(1.0), PowerLaw(0.001, 1.0), nu=0.5))
    >>> bool(abs(w - (1 / (0.001 * math.log(2))) ** 0.5) < 1e-9)
    True
    """
    lo = rep.w_min if rep.w_min is not None else 0.0
    hi = rep.w_max if rep.w_max is not None else math.inf
    w = None
    if rep.is_power_law:
        a, alpha, lam, gamma, nu = _power_law_parameters(rep)
        m = gamma + 1.0 - alpha
        if abs(m) > 1e-12:
            logw = (math.log(a) - math.log(lam * -math.log(nu))) / m
            w = math.exp(min(max(logw, -690.0), 690.0))
    if w is None:
        centre = rep.scale or (rep.w_min if rep.w_min is not None else (rep.w_max if rep.w_max is not None else 1.0))
        grid = centre * np.geomspace(1e-12, 1e12, 481)
        if rep.w_min is not None:
            grid = grid[grid >= rep.w_min]
        if rep.w_max is not None:
            grid = grid[grid <= rep.w_max]
        if grid.size == 0:
            grid = np.array([centre])
        ratio = _log_drift_ratio(rep, grid)
        up = np.flatnonzero((ratio[:-1] < 1.0) & (ratio[1:] >= 1.0))
        if up.size:
            w = float(grid[up[0] + 1])
        elif np.all(ratio >= 1.0):
            w = float(rep.w_min) if rep.w_min is not None else centre
        else:
            w = float(rep.w_max) if rep.w_max is not None else centre
    return float(min(max(w, lo), hi))


def _unstable(rep: PDMP, verdict: StabilityVerdict, method: str, t0: float) -> PDMPSolution:
    return PDMPSolution(verdict, method, _support(rep), info={"stability": verdict.to_info()},
                        seconds=time.perf_counter() - t0)


def _support(rep: PDMP) -> tuple:
    return (rep.w_min if rep.w_min is not None else 0.0, rep.w_max if rep.w_max is not None else math.inf)


# ============================================================================ the q-series
def _phi(s, q):
    """``Phi(s) = Gamma(s) (q^s; q)_inf`` at the current mpmath precision (entire in ``s``).

    For ``s <= 0`` the poles of ``Gamma`` cancel the zeros of ``(q^s; q)_inf``:
    ``Phi(s) = Gamma(s + N) (q^(s+N); q)_inf prod_{i<N} (1 - q^(s+i)) / (s + i)``, with
    ``(1 - q^t) / t = ln(1/q)`` at ``t = 0``.
    """
    s, q = mpmath.mpf(s), mpmath.mpf(q)
    if s > 0:
        return mpmath.gamma(s) * mpmath.qp(q**s, q)
    N = int(mpmath.ceil(1 - s))
    out = mpmath.gamma(s + N) * mpmath.qp(q ** (s + N), q)
    lq = mpmath.log(q)
    for i in range(N):
        t = s + i
        out *= -lq if t == 0 else -mpmath.expm1(t * lq) / t
    return out


def series_moment(a: float, alpha: float, lam: float, gamma: float, nu: float, k: float, *, dps: int = 30):
    """``E[W^k] = theta^(-k/m) Phi(s0 + k/m) / Phi(s0)`` of the unbounded power-law process (mpmath).

    ``m = gamma + 1 - alpha > 0``, ``theta = lam / (a m)``, ``q = nu^m``,
    ``s0 = (1 - alpha) / m``; evaluated at ``dps`` digits (scoped).

    Examples
    --------
    AIMD with constant-rate losses: ``E[W^n] = n! (a/lam)^n / prod_{k<=n} (1 - nu^k)``,
    e.g. ``16/3`` for ``n = 2``, ``a/lam = 1``, ``nu = 1/2``; a multiplicative increase
    (``a(w) = a w``, losses ``lam w``): ``E[W] = (a/lam) / ln(1/nu)``:

    >>> with mpmath.workdps(30):
    ...     aimd = abs(series_moment(1, 0, 1, 0, 0.5, 2) - mpmath.mpf(16) / 3)
    ...     mult = abs(series_moment(0.01, 1, 1e-3, 1, 0.875, 1) - 10 / mpmath.log(8 / mpmath.mpf(7)))
    >>> bool(aimd < 1e-25 and mult < 1e-25)
    True
    """
    with mpmath.workdps(dps):
        m = mpmath.mpf(gamma) + 1 - mpmath.mpf(alpha)
        if not m > 0:
            raise ModelError(f"the series needs m = gamma + 1 - alpha > 0; got {float(m):.6g}")
        q = mpmath.mpf(nu) ** m
        theta = mpmath.mpf(lam) / (mpmath.mpf(a) * m)
        s0 = (1 - mpmath.mpf(alpha)) / m
        kk = mpmath.mpf(k)
        return +(theta ** (-kk / m) * _phi(s0 + kk / m, q) / _phi(s0, q))


@dataclass
class _QSeries:
    """The series law of a stable power-law process with ``m > 0`` (module docstring)."""

    a: float
    alpha: float
    lam: float
    gamma: float
    nu: float
    w_min: float | None
    dps: int

    def __post_init__(self):
        self.m = self.gamma + 1.0 - self.alpha
        self.q = self.nu ** self.m
        self.theta = self.lam / (self.a * self.m)
        self.s0 = (1.0 - self.alpha) / self.m
        # log |c_n| and the cancellation the float series suffers: sum_n |c_n|
        n = np.arange(0, 20001)
        lq = math.log(self.q)
        logc = 0.5 * n * (n - 1) * lq - np.concatenate([[0.0], np.cumsum(np.log1p(-self.q ** n[1:]))])
        # terms with log |c_n| < -800 are below the float range whatever u is
        alive = np.flatnonzero(logc > -800.0)
        last = int(alive[-1]) + 1 if alive.size else 1
        self.logc = logc[:last]
        self.sign = np.where(n[:last] % 2 == 0, 1.0, -1.0)
        self.cancellation = float(np.exp(self.logc).sum())
        self.float_ok = self.cancellation <= 1e6
        self.mp_dps = max(self.dps, int(17 + math.log10(self.cancellation) + 8))
        # normalisation: int_0^inf x^-alpha H(x^m) dx = Phi(s0) theta^-s0 / m; with a floor, conditioned
        full, full_err = self._twice(lambda: _phi(self.s0, self.q) * mpmath.mpf(self.theta) ** (-self.s0))
        if self.w_min is None:
            self.norm, self.norm_err = full, full_err
            self.tail_prob = 1.0
        else:
            self.norm, self.norm_err = self._tail(self.s0)
            self.tail_prob = float(self.norm / full)
            if self.theta * self.w_min ** self.m > 600 or self.tail_prob < 1e-200:
                self.float_ok = False
        self.C = float(self.m / self.norm)
        self._mp_terms: dict = {}
        self.scale = max(self.moment(1.0)[0], self.w_min or 0.0)
        if self.w_min is None:
            self._lower_tail_setup()

    # -- mpmath pieces, each computed at two precisions ---------------------------------
    def _twice(self, fn):
        with mpmath.workdps(self.dps):
            lo = fn()
        with mpmath.workdps(self.dps + 20):
            hi = fn()
            err = abs(hi - lo)
        return hi, err

    def _tail_sum(self, s):
        """``sum_n c_n (theta q^-n)^-s Gamma(s, theta q^-n w_min^m)`` (= int_{w_min}^inf u^(s-1) H)."""
        q, theta = mpmath.mpf(self.q), mpmath.mpf(self.theta)
        U = mpmath.mpf(self.w_min) ** mpmath.mpf(self.m)
        s = mpmath.mpf(s)
        cut = mpmath.mp.dps * 2.31 + 60
        total, c, n = mpmath.mpf(0), mpmath.mpf(1), 0
        while True:
            rate = theta * q ** (-n)
            z = rate * U
            term = c * rate ** (-s) * mpmath.gammainc(s, z)
            total += term
            if z > cut and abs(term) <= mpmath.eps * abs(total):
                return total
            n += 1
            if n > 100000:
                raise ConvergenceError("the incomplete-gamma series for the floored moments did not converge "
                                       "in 100000 terms")
            c *= -q ** (n - 1) / (1 - q**n)

    def _tail(self, s):
        dps = max(self.dps, self.mp_dps)
        for _ in range(4):
            with mpmath.workdps(dps):
                lo = self._tail_sum(s)
            with mpmath.workdps(dps + 20):
                hi = self._tail_sum(s)
                err = abs(hi - lo)
                if err <= abs(hi) * mpmath.mpf(10) ** -17:
                    return hi, err
            dps += 30
        return hi, err

    # -- the law -----------------------------------------------------------------------
    def moment(self, k: float) -> tuple[float, float]:
        s = self.s0 + k / self.m
        if self.w_min is None:
            val, err = self._twice(lambda: _phi(s, self.q) * mpmath.mpf(self.theta) ** (-s) / self.norm)
        else:
            num, nerr = self._tail(s)
            with mpmath.workdps(self.dps + 20):
                val = num / self.norm
                err = abs(val) * (nerr / abs(num) + self.norm_err / abs(self.norm))
        v = float(val)
        return v, float(err) + abs(v) * 2 * _EPS

    # -- a rigorous bound on the lower tail (no floor): Markov's inequality for 1/W ----------
    def _lower_tail_setup(self) -> None:
        """Negative moments ``E[W^-k]`` (``Phi`` is entire) for ``P(W <= x) <= x^k E[W^-k]``."""
        self.neg_k = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
        logs = []
        with mpmath.workdps(self.dps):
            for k in self.neg_k:
                v = _phi(self.s0 - k / self.m, self.q) * mpmath.mpf(self.theta) ** (k / self.m) / self.norm
                logs.append(float(mpmath.log(abs(v))))
        self.neg_log_moments = np.array(logs)

    def lower_tail_bound(self, x: np.ndarray) -> np.ndarray:
        """``min_k x^k E[W^-k]`` over ``k = 1, 2, 4, ..., 64``: a bound on ``P(W <= x)``."""
        with np.errstate(divide="ignore"):
            logb = np.min(self.neg_k[None, :] * np.log(x)[:, None] + self.neg_log_moments[None, :], axis=1)
        return np.minimum(np.exp(logb), 1.0)

    def _density_bound(self, x: np.ndarray) -> np.ndarray:
        """``f(x) <= max(lambda(x), lambda(x/nu)) P(W <= x/nu) / a(x)`` (the Kolmogorov equation)."""
        lam = self.lam * np.maximum(x**self.gamma, (x / self.nu) ** self.gamma)
        return lam * self.lower_tail_bound(x / self.nu) / (self.a * x**self.alpha)

    def density(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=float)
        out = np.zeros_like(x)
        err = np.zeros_like(x)
        lower = self.w_min if self.w_min is not None else 0.0
        inside = (x > 0) & (x >= lower) & np.isfinite(x)
        target = 1e-12 / self.scale
        if self.w_min is None and inside.any():
            # far in the lower tail the density is below 1e-3 * target by a rigorous bound: 0
            with np.errstate(all="ignore"):
                bound = np.where(inside, self._density_bound(np.where(inside, x, 1.0)), 0.0)
            negligible = inside & (bound <= 1e-3 * target)
            err[negligible] = bound[negligible]
            inside &= ~negligible
        if not inside.any():
            return out, err
        xi = x[inside]
        if self.float_ok:
            f, e = self._density_float(xi, np.float64)
            # where the float series cancels beyond 1e-12 of the density's scale 1 / E[W]: 80-bit
            # extended precision, then mpmath
            bad = e > target
            if bad.any() and _LONG_EPS < _EPS:
                f[bad], e[bad] = self._density_float(xi[bad], np.longdouble)
                bad = e > target
            if bad.any():
                lost = math.log10(float(e[bad].max()) / (4 * _EPS * target))
                dps = int(max(self.dps, 20 + math.ceil(lost)))
                f[bad] = [self._density_mp(v, dps) for v in xi[bad]]
                e[bad] = np.abs(f[bad]) * 1e-15
            out[inside], err[inside] = np.maximum(f, 0.0), e
            return out, err
        vals = np.array([self._density_mp(v, self.mp_dps) for v in xi])
        out[inside] = vals
        err[inside] = np.abs(vals) * 1e-15
        return out, err

    def _density_float(self, xi: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
        """The series in ``dtype`` arithmetic, with a rounding bound from the sum of |terms|."""
        eps = float(np.finfo(dtype).eps)
        u = xi.astype(dtype) ** dtype(self.m)
        # every term with theta q^-n u below 800 + max log|c_n| counts (beyond, exp underflows)
        need = math.log((800.0 + max(float(self.logc.max()), 0.0)) / (self.theta * float(u.min())))
        n_terms = int(min(self.logc.size, max(1, math.ceil(need / -math.log(self.q)) + 2)))
        n = np.arange(n_terms)
        rate = dtype(self.theta) * np.exp(-n.astype(dtype) * np.log(dtype(self.q)))
        logc = self._logc_in(dtype)[:n_terms]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            terms = np.exp(logc[None, :] - u[:, None] * rate[None, :])
            H = terms @ self.sign[:n_terms].astype(dtype)
            absH = terms.sum(1)
            pre = dtype(self.C) * xi.astype(dtype) ** dtype(-self.alpha)
            f = (pre * H).astype(float)
            e = (pre * absH).astype(float) * 4 * eps * math.sqrt(n_terms) + np.abs(f) * 4 * _EPS
        f = np.where(np.isfinite(f), f, 0.0)
        e = np.where(np.isfinite(e), e, np.inf)
        return f, e

    def _logc_in(self, dtype) -> np.ndarray:
        if dtype is np.float64:
            return self.logc
        n = np.arange(self.logc.size).astype(dtype)
        lq = np.log(dtype(self.q))
        qn = np.exp(n[1:] * lq)
        return 0.5 * n * (n - 1) * lq - np.concatenate([[dtype(0)], np.cumsum(np.log1p(-qn))])

    def _density_mp(self, x: float, dps: int) -> float:
        """The series at ``x`` in mpmath at ``dps`` digits (coefficients cached per precision)."""
        cache = self._mp_terms.setdefault(dps, ([], []))
        coeffs, rates = cache
        with mpmath.workdps(dps):
            q = mpmath.mpf(self.q)
            u = mpmath.mpf(x) ** mpmath.mpf(self.m)
            cut = dps * 2.31 + 60
            total, n = mpmath.mpf(0), 0
            while True:
                if n == len(coeffs):
                    if n == 0:
                        coeffs.append(mpmath.mpf(1))
                        rates.append(mpmath.mpf(self.theta))
                    else:
                        coeffs.append(-coeffs[-1] * q ** (n - 1) / (1 - q**n))
                        rates.append(rates[-1] / q)
                z = rates[n] * u
                total += coeffs[n] * mpmath.exp(-z)
                if z > cut + abs(mpmath.log(abs(coeffs[n]) + 1)):
                    break
                n += 1
            f = self.m / self.norm * mpmath.mpf(x) ** (-mpmath.mpf(self.alpha)) * total
            return max(float(f), 0.0)

    def _panels(self, top: float) -> "_Panels":
        """The cumulative panels up to at least ``top`` (cached and extended by doubling)."""
        cached = getattr(self, "_panel_cache", None)
        if cached is not None and cached.top >= top:
            return cached
        if self.w_min is not None:
            start, bound = self.w_min, None
        else:
            # start where P(W <= x) < 1e-18 (Markov's bound on 1/W)
            start = float(np.exp(((np.log(1e-18) - self.neg_log_moments) / self.neg_k).max()))
            bound = self.lower_tail_bound
        reach = max(top, 4.0 * self.scale, 2.0 * (cached.top if cached is not None else 0.0))
        self._panel_cache = _Panels(self.density, start, self.scale, reach, bound)
        return self._panel_cache

    def cdf(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=float)
        fin = x[np.isfinite(x)]
        return self._panels(float(fin.max()) if fin.size else 0.0).cdf(x)

    def quantile(self, p: float) -> float:
        """The ``p``-quantile: panels extended until they pass ``p``, then the root of the CDF."""
        top = 4.0 * self.scale
        for _ in range(60):
            panels = self._panels(top)
            if panels.cum[-1] >= p:
                return panels.quantile(p)
            top = 2.0 * panels.top
        raise ConvergenceError(f"the {p} quantile lies beyond {top:.3g}")


_LEG_V = np.polynomial.legendre.legvander(_GL_X, _GL_X.size - 1)  # P_k at the Gauss nodes
_LEG_FWD = (_LEG_V * _GL_W[:, None]).T * ((2 * np.arange(_GL_X.size) + 1) / 2.0)[:, None]
_LEG_INT = np.stack([np.polynomial.legendre.legint(np.eye(_GL_X.size)[k], lbnd=-1) for k in range(_GL_X.size)],
                    axis=1)  # column k: the antiderivative (from -1) of P_k, in Legendre coefficients


class _Panels:
    """``P(W <= x) = int_start^x f``: a density's Legendre expansion (degree 19) on fixed panels.

    Panels: geometric (ratio 1.1) from ``start`` to the scale ``E[W]``, then uniform of
    width ``scale / 10`` up to ``top``. On each panel the 20-point Gauss-Legendre values
    give the Legendre coefficients of ``f``; their antiderivative gives the CDF inside
    the panel (spectrally accurate for the smooth density). Below ``start`` the CDF is 0
    within ``below_bound(x)``; above ``top`` it is not available.
    """

    def __init__(self, density, start: float, scale: float, top: float, below_bound):
        self.start, self.top, self.below_bound = start, top, below_bound
        geo_hi = min(max(scale, start * 1.1), top)
        if start > 0:
            n_geo = max(int(math.ceil(math.log(max(geo_hi, start * 1.0001) / start) / math.log(1.1))), 1)
            edges = [np.geomspace(start, max(geo_hi, start * 1.0001), n_geo + 1)]
        else:
            edges = [np.array([0.0]), np.geomspace(scale * 1e-4, max(geo_hi, scale * 1.1e-4), 100)]
        if top > geo_hi:
            edges.append(np.linspace(geo_hi, top, int(math.ceil((top - geo_hi) / (scale / 10.0))) + 1))
        self.edges = edges = np.unique(np.concatenate(edges))
        self.left = edges[:-1]
        self.half = 0.5 * (edges[1:] - edges[:-1])
        nodes = (self.left + self.half)[:, None] + self.half[:, None] * _GL_X[None, :]
        f, fe = density(nodes.ravel())
        f, fe = f.reshape(nodes.shape), fe.reshape(nodes.shape)
        self.anti = (f @ _LEG_FWD.T) @ _LEG_INT.T  # antiderivative on each panel, per unit of xi
        panel = (f @ _GL_W) * self.half
        self.panel_err = (fe @ _GL_W) * self.half + np.abs(panel) * 4 * _EPS
        self.cum = np.concatenate([[0.0], np.cumsum(panel)])
        self.cum_err = np.concatenate([[0.0], np.cumsum(self.panel_err)])
        self.base_err = float(below_bound(np.array([start]))[0]) if below_bound is not None and start > 0 else 0.0

    def _inside(self, xa: np.ndarray):
        j = np.clip(np.searchsorted(self.edges, xa, side="right") - 1, 0, self.left.size - 1)
        xi = np.clip((xa - self.left[j]) / self.half[j] - 1.0, -1.0, 1.0)
        leg = np.polynomial.legendre.legvander(xi, _LEG_INT.shape[0] - 1)
        return j, self.cum[j] + np.einsum("ij,ij->i", leg, self.anti[j]) * self.half[j]

    def cdf(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros(x.shape)
        err = np.zeros(x.shape)
        fin = np.isfinite(x)
        out[~fin & (x > 0)] = 1.0
        above = fin & (x > self.start)
        if self.below_bound is not None:
            low = fin & (x > 0) & ~above
            err[low] = self.below_bound(x[low])
        if above.any():
            j, F = self._inside(x[above])
            out[above] = np.clip(F, 0.0, 1.0)
            err[above] = self.cum_err[j] + self.panel_err[j] + self.base_err
        return out, err

    def quantile(self, p: float) -> float:
        j = int(np.clip(np.searchsorted(self.cum, p) - 1, 0, self.left.size - 1))
        lo, hi = self.edges[j], self.edges[j + 1]
        return float(brentq(lambda v: self._inside(np.array([v]))[1][0] - p, lo, hi, xtol=1e-13 * hi, rtol=1e-13))


def _pareto_solution(rep: PDMP, verdict: StabilityVerdict, t0: float) -> PDMPSolution:
    """``m = 0`` with a floor: ``f(x) = eta w_min^eta x^-(eta+1)`` on ``[w_min, inf)``."""
    eta = float(verdict.details["tail_index"])
    w0 = float(rep.w_min)

    def moment(k):
        if k >= eta:
            return math.inf, 0.0
        v = eta / (eta - k) * w0**k
        return v, abs(v) * 1e-14

    def density(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(x >= w0, eta * w0**eta * np.power(np.maximum(x, w0), -eta - 1.0), 0.0)
        return f, np.abs(f) * 1e-14

    def cdf(x):
        F = np.where(x >= w0, 1.0 - np.power(w0 / np.maximum(x, w0), eta), 0.0)
        return F, np.full(F.shape, 1e-15)

    info = {"stability": verdict.to_info(), "law": "Pareto", "tail_index": eta,
            "error_estimate_kind": "closed form (the tail index from Lambert's W, refined at 30 digits)",
            "arithmetic": "float64 from a 30-digit root"}
    return PDMPSolution(verdict, "q-series/pareto", _support(rep), moment_fn=moment, density_fn=density, cdf_fn=cdf,
                        quantile_fn=lambda p: w0 * (1.0 - p) ** (-1.0 / eta), info=info,
                        seconds=time.perf_counter() - t0)


@register_solver(PDMP, name="q-series", applies=lambda rep: rep.series_refusal(),
                 doc="analytic stationary law of power-law profiles with W -> nu W: the q-Pochhammer series "
                     "(floor allowed, no ceiling)", options=("dps", "tol", "strict"))
def solve_series(rep: PDMP, *, dps: int = 30, tol: float = 1e-9, strict: bool = False) -> PDMPSolution:
    """The analytic stationary law of power-law profiles (module docstring).

    Parameters
    ----------
    rep : PDMP
        Power-law increase and loss rate, ``W -> nu W``, an optional floor, no ceiling.
    dps : int
        Decimal digits of the mpmath evaluations (each done at ``dps`` and ``dps + 20``;
        their difference is the error estimate). The float series for densities
        switches to mpmath when its cancellation ``sum_n |c_n|`` exceeds ``1e6``.
    tol, strict : float, bool
        ``strict=True`` raises :class:`ConvergenceError` when a moment's estimated
        relative error exceeds ``tol`` (it never does at the default precision).

    Returns
    -------
    PDMPSolution
        With only the verdict for an unstable process.

    Raises
    ------
    NotApplicableError
        The profiles are not declared power laws, the decrease is not multiplicative,
        or there is a ceiling.

    Examples
    --------
    Losses at rate ``lam W`` with linear increase: ``E[W^2] = a / (lam (1 - nu))``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> sol = solve_series(PDMP(PowerLaw(2.0), PowerLaw(0.01, 1.0), nu=0.7))
    >>> bool(abs(sol.moment(2) - 2.0 / (0.01 * 0.3)) < 1e-9)
    True
    """
    t0 = time.perf_counter()
    why = rep.series_refusal() if isinstance(rep, PDMP) else "not a PDMP"
    if why:
        raise NotApplicableError(f"the q-series does not apply: {why}")
    verdict = stability(rep)
    if not verdict.stable:
        return _unstable(rep, verdict, "q-series", t0)
    a, alpha, lam, gamma, nu = _power_law_parameters(rep)
    if abs(gamma + 1.0 - alpha) <= 1e-12:
        return _pareto_solution(rep, verdict, t0)
    law = _QSeries(a, alpha, lam, gamma, nu, rep.w_min, int(dps))

    def moment(k):
        v, e = law.moment(k)
        if strict and e > tol * max(abs(v), 1e-300):
            raise ConvergenceError(f"q-series moment k={k:g}: estimated relative error {e / abs(v):.2e} > tol={tol:g}")
        return v, e

    info = {
        "stability": verdict.to_info(),
        "law": "q-Pochhammer series" + (" conditioned on W >= w_min" if rep.w_min is not None else ""),
        "m": law.m, "q": law.q, "theta": law.theta, "s0": law.s0,
        "series_cancellation": law.cancellation,
        "arithmetic": (f"moments in mpmath at {dps} and {dps + 20} digits; densities in "
                       + ("float64" if law.float_ok else f"mpmath at {law.mp_dps} digits")),
        "error_estimate_kind": "moments: difference of two mpmath precisions; density: float rounding bound "
                               "times the series' cancellation; CDF: Gauss-Legendre quadrature of the density",
    }
    if rep.w_min is not None:
        info["unbounded_tail_probability"] = law.tail_prob
    return PDMPSolution(verdict, "q-series", _support(rep), moment_fn=moment, density_fn=law.density,
                        cdf_fn=law.cdf, quantile_fn=law.quantile,
                        info=info, seconds=time.perf_counter() - t0)


# ===================================================================== Kolmogorov equation
def richardson(values, columns: int) -> tuple[float, float, list]:
    """Richardson extrapolation of values on meshes halved each time (errors in ``h^2, h^4, ...``).

    Returns ``(best, error estimate, table)``; the estimate is the larger difference of
    the best extrapolant from its two neighbours in the table.

    Examples
    --------
    The trapezoidal rule for ``int_0^1 e^x dx`` with 4, 8, 16 and 32 panels (error
    ``1e-3`` at 32 panels) extrapolates to ``e - 1``, and the estimate covers the error:

    >>> vals = [np.trapezoid(np.exp(np.linspace(0, 1, n + 1)), dx=1 / n) for n in (4, 8, 16, 32)]
    >>> best, err, _ = richardson(vals, 3)
    >>> bool(abs(best - (math.e - 1)) < 1e-14 < err < 1e-9)
    True
    """
    vals = np.asarray(values, dtype=float)
    T = [[v] for v in vals]
    for i in range(1, vals.shape[0]):
        for k in range(1, min(i, columns) + 1):
            T[i].append(T[i][k - 1] + (T[i][k - 1] - T[i - 1][k - 1]) / (4.0**k - 1.0))
    last = T[-1]
    best = last[-1]
    if len(T) == 1:
        return float(best), math.inf, T
    diffs = [abs(best - last[-2]) if len(last) >= 2 else abs(best - T[-2][-1])]
    prev = T[-2][min(len(T[-2]), len(last)) - 1]
    diffs.append(abs(best - prev))
    return float(best), float(np.max(diffs)), T


def _richardson_arrays(values: list, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`richardson` elementwise for arrays of equal shape."""
    V = np.stack([np.asarray(v, dtype=float) for v in values])
    T = [[V[i]] for i in range(V.shape[0])]
    for i in range(1, V.shape[0]):
        for k in range(1, min(i, columns) + 1):
            T[i].append(T[i][k - 1] + (T[i][k - 1] - T[i - 1][k - 1]) / (4.0**k - 1.0))
    best = T[-1][-1]
    if len(T) == 1:
        return best, np.full(best.shape, np.inf)
    e1 = np.abs(best - (T[-1][-2] if len(T[-1]) >= 2 else T[-2][-1]))
    e2 = np.abs(best - T[-2][min(len(T[-2]), len(T[-1])) - 1])
    return best, np.maximum(e1, e2)


def _lagrange(t_nodes: np.ndarray, base: np.ndarray, valid: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Weights ``(n, 6)`` of the Lagrange interpolant on nodes ``base + 0..5`` (invalid ones skipped)."""
    idx = base[:, None] + np.arange(6)[None, :]
    tt = t_nodes[np.minimum(idx, t_nodes.size - 1)]
    w = np.ones(idx.shape)
    for i in range(6):
        for j in range(6):
            if i == j:
                continue
            factor = np.where(valid[:, j], (s - tt[:, j]) / np.where(valid[:, j], tt[:, i] - tt[:, j], 1.0), 1.0)
            w[:, i] *= factor
    return np.where(valid, w, 0.0)


def _stencils(t: np.ndarray, breaks: np.ndarray, s: np.ndarray, lowest: np.ndarray):
    """6-point stencils around points ``s`` within the smooth segment of ``s``, using nodes ``>= lowest``."""
    N = t.size - 1
    k = np.searchsorted(t, s)
    seg_edges = np.concatenate([[t[0]], breaks, [t[-1]]])
    seg = np.clip(np.searchsorted(seg_edges, s, side="right") - 1, 0, seg_edges.size - 2)
    seg_lo = np.searchsorted(t, seg_edges[seg], side="left")
    seg_hi = np.searchsorted(t, seg_edges[seg + 1], side="right") - 1
    lo = np.maximum(seg_lo, lowest)
    base = np.clip(k - 3, lo, np.maximum(lo, seg_hi - 5))
    base = np.maximum(np.minimum(base, N - 5), lowest)
    idx = base[:, None] + np.arange(6)[None, :]
    valid = idx <= N
    return base, valid, _lagrange(t, base, valid, s)


@dataclass
class _Level:
    t: np.ndarray
    x: np.ndarray
    fp: np.ndarray  # right limits of the density at the nodes
    fm: np.ndarray  # left limits
    Z: float
    P: float  # the ceiling's atom (unnormalised)
    cum: np.ndarray  # P(W <= x_j) from the continuous part (normalised)
    breaks: np.ndarray
    exact_history: bool
    bottom_mass: float
    noise: np.ndarray  # rounding bound of the normalised density at the nodes

    @property
    def noise_mass(self) -> float:
        """The mass the rounding floor of the density could hide (trapezoid of ``x * noise``)."""
        h = np.diff(self.t)
        return float(np.sum(0.5 * h * (self.x[:-1] * self.noise[:-1] + self.x[1:] * self.noise[1:])))

    def moment(self, k: float) -> float:
        h = np.diff(self.t)
        with np.errstate(over="ignore"):
            body = np.sum(0.5 * h * (self.x[:-1] ** (k + 1) * self.fp[:-1] + self.x[1:] ** (k + 1) * self.fm[1:]))
            return float((body + self.P * self.x[-1] ** k) / self.Z)

    def _interp(self, values_left, values_right, tq):
        """Interpolate node values (one-sided at segment boundaries) at points ``tq`` inside the mesh."""
        base, valid, w = _stencils(self.t, self.breaks, tq, np.zeros(tq.shape, dtype=int))
        idx = np.minimum(base[:, None] + np.arange(6)[None, :], self.t.size - 1)
        node_t = self.t[idx]
        vals = np.where(node_t <= tq[:, None], values_left[idx], values_right[idx])
        return np.sum(w * vals, axis=1)

    def density(self, xq: np.ndarray) -> np.ndarray:
        out = np.zeros(xq.shape)
        inside = (xq >= self.x[0] * (1 - 1e-12)) & (xq <= self.x[-1] * (1 + 1e-12)) & (xq > 0)
        if inside.any():
            tq = np.clip(np.log(xq[inside]), self.t[0], self.t[-1])
            out[inside] = self._interp(self.fp, self.fm, tq) / self.Z
        return out

    def rounding(self, xq: np.ndarray) -> np.ndarray:
        """The rounding bound of the density at ``xq`` (the largest at the two nearest nodes)."""
        j = np.clip(np.searchsorted(self.x, xq), 1, self.x.size - 1)
        return np.maximum(self.noise[j - 1], self.noise[j])

    def cdf(self, xq: np.ndarray) -> np.ndarray:
        out = np.where(xq >= self.x[-1], 1.0, 0.0)
        inside = (xq >= self.x[0]) & (xq < self.x[-1]) & (xq > 0)
        if inside.any():
            tq = np.log(xq[inside])
            out[inside] = self._interp(self.cum, self.cum, tq)
        return np.clip(out, 0.0, 1.0)


def _above_noise(D: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """``D`` where it exceeds its rounding floor, 0 where it is indistinguishable from noise.

    Far in the lower tail, where the law has (numerically) no mass, the computed ``a f``
    is rounding noise, which ``1 / a`` amplifies where ``a`` vanishes (``alpha > 1``); the
    error estimate keeps the floor.
    """
    return np.where(np.abs(D) > floor, D, 0.0)


class _KolmogorovMesh:
    """The log mesh, its history points and the triangular system of one refinement level."""

    def __init__(self, rep: PDMP, t_lo: float, t_top: float, h: float, anchor_top: bool, breaks_x: list):
        self.rep = rep
        if anchor_top:
            n = int(math.floor((t_top - t_lo) / h + 1e-9))
            uniform = t_top - h * np.arange(n, -1, -1)
        else:
            n = int(math.floor((t_top - t_lo) / h + 1e-9))
            uniform = t_lo + h * np.arange(0, n + 1)
        extra = [t_lo, t_top] + [math.log(b) for b in breaks_x if math.exp(t_lo) < b < math.exp(t_top)]
        t = np.unique(np.concatenate([uniform, extra]))
        t = t[(t >= t_lo - 1e-12) & (t <= t_top + 1e-12)]
        # snap nodes closer than 1e-6 h to a break or an end onto it
        keep = np.concatenate([[True], np.diff(t) > 1e-6 * h])
        t = t[keep]
        t[0], t[-1] = t_lo, t_top
        self.t0 = t
        bt = np.array(sorted(math.log(b) for b in breaks_x if math.exp(t_lo) < b < math.exp(t_top)))
        # a segment boundary needs at least 6 nodes on each side to keep the stencils inside
        good = []
        edges = [t[0]] + list(bt) + [t[-1]]
        for i, b in enumerate(bt):
            left = np.count_nonzero((t >= edges[i]) & (t <= b))
            right = np.count_nonzero((t >= b) & (t <= edges[i + 2]))
            if left >= 6 and right >= 6:
                good.append(b)
        self.breaks = np.array(good)
        steps = np.diff(t)
        ratio = -math.log(rep.nu) / h if rep.is_multiplicative else 0.5
        # a uniform mesh with ln(1/nu) a whole number of steps: the history is on the nodes
        self.aligned = bool(rep.is_multiplicative and np.allclose(steps, h, rtol=1e-9, atol=0)
                            and abs(ratio - round(ratio)) < 1e-6)
        self.K = int(round(ratio)) if self.aligned else None

    @staticmethod
    def refine(t: np.ndarray, level: int) -> np.ndarray:
        for _ in range(level):
            t = np.sort(np.concatenate([t, 0.5 * (t[:-1] + t[1:])]))
        return t

    def solve(self, level: int) -> _Level:
        rep = self.rep
        t = self.refine(self.t0, level)
        N = t.size - 1
        if N + 1 > MAX_NODES:
            raise ModelError(f"the Kolmogorov mesh needs {N + 1} nodes at refinement level {level}; the limit is "
                             f"{MAX_NODES} (lower points_per_decrease or max_levels)")
        x = np.exp(t)
        h = np.diff(t)
        A = np.asarray(rep.a(x), dtype=float)
        L = np.asarray(rep.loss(x), dtype=float)
        if not float(L[-1]) > 0:
            raise ModelError(f"the loss rate at the top of the window range ({x[-1]:.6g}) must be > 0")
        r = L * x / A
        if self.aligned:
            return self._solve_aligned(t, x, A, L, r, self.K * 2**level)
        s = np.log(rep.d_inverse(x))
        tiny = 1e-7 * float(h.min())
        top = t[-1]
        beyond = s > top + tiny
        at_top = np.abs(s - top) <= tiny
        inner = ~beyond & ~at_top
        # exact hits on nodes
        k = np.clip(np.searchsorted(t, s), 0, N)
        km = np.clip(k - 1, 0, N)
        hit_k = np.abs(t[k] - s) <= tiny
        hit_km = np.abs(t[km] - s) <= tiny
        exact = inner & (hit_k | hit_km)
        exact_idx = np.where(hit_k, k, km)
        interp = inner & ~exact
        rows_i = np.flatnonzero(interp)
        if rows_i.size:
            base, valid, wts = _stencils(t, self.breaks, s[rows_i], rows_i)
        # history H = sum_c W[j, c] G_c (the same for both limits except at the top)
        hist_r, hist_c, hist_w = [], [], []
        je = np.flatnonzero(exact)
        hist_r.append(je), hist_c.append(exact_idx[je]), hist_w.append(np.ones(je.size))
        if rows_i.size:
            cols = base[:, None] + np.arange(6)[None, :]
            hist_r.append(np.repeat(rows_i, 6)[valid.ravel()])
            hist_c.append(cols.ravel()[valid.ravel()])
            hist_w.append(wts.ravel()[valid.ravel()])
        hr, hc, hw = (np.concatenate(v) for v in (hist_r, hist_c, hist_w))
        Hmat = sparse.csr_matrix((hw, (hr, hc)), shape=(N + 1, N + 1))
        jt = np.flatnonzero(at_top)
        Hminus = Hmat + sparse.csr_matrix((np.ones(jt.size), (jt, np.full(jt.size, N))), shape=(N + 1, N + 1))
        # cell j: G_j (1 - h r_j / 2) - G_{j+1} (1 + h r_{j+1} / 2) + h/2 (r_j H+_j + r_{j+1} H-_{j+1}) = 0
        j = np.arange(N)
        D = sparse.csr_matrix((np.concatenate([1 - 0.5 * h * r[:-1], -(1 + 0.5 * h * r[1:]), [1.0]]),
                               (np.concatenate([j, j, [N]]), np.concatenate([j, j + 1, [N]]))), shape=(N + 1, N + 1))
        left = sparse.diags(np.concatenate([0.5 * h * r[:-1], [0.0]])) @ Hmat
        shift = sparse.csr_matrix((0.5 * h * r[1:], (j, j + 1)), shape=(N + 1, N + 1))
        M = (D + left + shift @ Hminus).tocsr()
        rhs = np.zeros(N + 1)
        rhs[N] = 1.0
        G = spsolve_triangular(M, rhs, lower=False)
        if not np.all(np.isfinite(G)):
            raise ConvergenceError("the Kolmogorov recursion overflowed: int lambda / a over the window range "
                                   f"[{x[0]:.6g}, {x[-1]:.6g}] exceeds the float range; give w_max or a smaller range")
        Hp, Hm = Hmat @ G, Hminus @ G
        floor = 8 * _EPS * (np.abs(G) + np.abs(Hm))  # rounding of the difference G - H
        fp, fm = _above_noise(G - Hp, floor) / A, _above_noise(G - Hm, floor) / A
        noise = floor / A
        P = float(G[N] / L[N])
        cells = 0.5 * h * (x[:-1] * fp[:-1] + x[1:] * fm[1:])
        Z = float(cells.sum() + P)
        cum = np.concatenate([[0.0], np.cumsum(cells)]) / Z
        low_window = t <= s[0] if s[0] < top else np.ones(t.size, bool)
        bottom = float(cells[low_window[:-1]].sum() / Z)
        return _Level(t, x, fp, fm, Z, P, cum, self.breaks, bool(rows_i.size == 0), bottom, noise / Z)

    def _solve_aligned(self, t, x, A, L, r, K: int) -> _Level:
        """The aligned mesh (``x / nu`` is node ``j + K``): the same scheme written for ``D = a f``.

        With ``D_j = G_j - G_{j+K}``, subtracting the trapezoidal step of cell ``j + K`` from
        that of cell ``j`` gives ``D_j (1 - h r_j / 2) - D_{j+1} (1 + h r_{j+1} / 2)
        + h/2 (r_{j+K} D_{j+K} + r_{j+K+1} D_{j+K+1}) = 0``: the solution of the G system,
        without the cancellation of ``G - G(x / nu)`` where both are near the total loss rate
        (that difference loses every digit where ``a`` is small, e.g. ``alpha > 1`` near 0).
        Unknowns: ``U_j = D_j^+`` (right limits); at ``j* = N - K`` (``x / nu`` is the top)
        ``D^-_{j*} = U_{j*} - U_N``; above ``j*`` the history is 0, so ``D = G``; ``U_N = G_N``.
        """
        N = t.size - 1
        h = (t[-1] - t[0]) / N
        js = N - K
        half = 0.5 * h
        rows, cols, vals = [np.array([N])], [np.array([N])], [np.array([1.0])]
        top = np.arange(max(js, 0), N)
        rows += [top, top]
        cols += [top, top + 1]
        vals += [1 - half * r[top], -(1 + half * r[top + 1])]
        if js > 0:
            j = np.arange(js)
            rows += [j, j, j]
            cols += [j, j + 1, j + K]
            vals += [1 - half * r[j], -(1 + half * r[j + 1]), half * r[j + K]]
            # D^-_{j+K+1}: U_{j+K+1}, minus U_N where j + K + 1 = j*
            rows.append(j)
            cols.append(j + K + 1)
            vals.append(half * r[j + K + 1])
            jump = j[j + K + 1 == js]
            rows.append(jump)
            cols.append(np.full(jump.size, N))
            vals.append(-half * r[jump + K + 1])
            # D^-_{j+1} at j + 1 = j*: -(U_{j*} - U_N)(1 + h r / 2)
            last = j[j + 1 == js]
            rows.append(last)
            cols.append(np.full(last.size, N))
            vals.append(1 + half * r[last + 1])
        M = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(N + 1, N + 1))
        rhs = np.zeros(N + 1)
        rhs[N] = 1.0
        U = spsolve_triangular(M, rhs, lower=False)
        if not np.all(np.isfinite(U)):
            raise ConvergenceError("the Kolmogorov recursion overflowed: int lambda / a over the window range "
                                   f"[{x[0]:.6g}, {x[-1]:.6g}] exceeds the float range; give w_max or a smaller range")
        Dm = U.copy()
        if js >= 0:
            Dm[js] = U[js] - U[N]
        # rounding: an error made at node i persists below it (the recursion's nearly constant
        # mode), so the noise floor of D at j is eps times the largest D above j
        floor = 8 * _EPS * np.sqrt(np.arange(N, -1, -1) + 1.0) * np.maximum.accumulate(np.abs(U)[::-1])[::-1]
        fp, fm = _above_noise(U, floor) / A, _above_noise(Dm, floor) / A
        noise = floor / A
        P = float(U[N] / L[N])
        cells = half * (x[:-1] * fp[:-1] + x[1:] * fm[1:])
        Z = float(cells.sum() + P)
        cum = np.concatenate([[0.0], np.cumsum(cells)]) / Z
        bottom = float(cells[: min(K, N)].sum() / Z)
        return _Level(t, x, fp, fm, Z, P, cum, self.breaks, True, bottom, noise / Z)


def _history_width(rep: PDMP, x: np.ndarray) -> np.ndarray:
    """``ln(d^-1(x) / x)``: how far above ``x`` (in ``ln w``) the losses landing at ``x`` start."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(rep.d_inverse(x) / x)


def _tail_top(rep: PDMP, w_ref: float, tail: float) -> float:
    """Where ``int_{w_ref}^x lambda/a`` reaches ``tail`` (the no-loss survival is ``e^-tail``)."""
    x = w_ref * np.geomspace(1.0, 1e15, 3001)
    integrand = np.asarray(rep.loss(x), float) * x / np.asarray(rep.a(x), float)
    cum = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(np.log(x)) * (integrand[1:] + integrand[:-1]))])
    hit = np.flatnonzero(cum >= tail)
    return float(x[hit[0]]) if hit.size else float(x[-1])


@register_solver(PDMP, name="kolmogorov",
                 doc="the level-crossing equation a f = int lambda f on a log mesh (trapezoidal rule, Richardson "
                     "extrapolation over mesh halvings), for general a, lambda, d and window bounds",
                 options=("points_per_decrease", "max_levels", "tol", "strict"))
def solve_kolmogorov(rep: PDMP, *, points_per_decrease: int = 32, max_levels: int = 7, tol: float = 1e-9,
                     strict: bool = False, tail: float = 45.0) -> PDMPSolution:
    """The stationary law from a discretisation of the Kolmogorov equation (module docstring).

    Parameters
    ----------
    rep : PDMP
        Any profiles and decrease, optional bounds.
    points_per_decrease : int
        Mesh nodes per decrease width ``ln(1/nu)`` (``ln(d^-1(w)/w)``, its smallest
        value over the window range, for a general decrease) on the coarsest mesh; raised
        where the tail needs it (``h lambda x / a <= 1``).
    max_levels : int
        At most this many meshes (each halving the last); at least three are solved.
    tol : float
        Stop refining when the estimated relative error of ``E[W]`` and of the
        normalisation is below ``tol``.
    strict : bool
        Raise :class:`ConvergenceError` instead of an :class:`AccuracyWarning` when
        ``tol`` is not met on the finest mesh.
    tail : float
        Without a ceiling the mesh ends where ``int lambda / a`` from the reference
        window reaches ``tail`` (extended while the artificial ceiling holds mass).

    Returns
    -------
    PDMPSolution
        Moments, density and CDF by Richardson extrapolation over the levels, with
        their error estimates; ``info`` has the mesh, the levels and the masses at the
        artificial ceiling (``ceiling_mass``) and below the bottom cut
        (``floor_cut_mass``, an estimate: the mass of the lowest decrease window).

    Notes
    -----
    Order: the trapezoidal rule is of order 2 with an error expansion in even powers
    of the mesh width when the history falls on nodes (the multiplicative decrease on
    an aligned mesh); three extrapolation columns are then used (order 8). With an
    interpolated history (a general decrease, or both a floor and a ceiling) the
    degree-5 interpolation limits the expansion and two columns are used (order 6).

    Examples
    --------
    AIMD with constant-rate losses: ``E[W] = (a/lam) / (1 - nu)``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> sol = solve_kolmogorov(PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.5))
    >>> bool(abs(sol.mean() - 2.0) < 1e-10)
    True
    """
    t0 = time.perf_counter()
    if not isinstance(rep, PDMP):
        raise ModelError(f"solve_kolmogorov takes a PDMP representation; got {type(rep).__name__}")
    K = int(points_per_decrease)
    if K < 4:
        raise ModelError(f"points_per_decrease must be >= 4; got {points_per_decrease!r}")
    if int(max_levels) < 3:
        raise ModelError(f"max_levels must be >= 3; got {max_levels!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    verdict = stability(rep)
    if not verdict.stable:
        return _unstable(rep, verdict, "kolmogorov", t0)
    w_ref = reference_window(rep)
    floor, ceiling = rep.w_min is not None, rep.w_max is not None
    tail_now = float(tail)
    # without a ceiling: where the no-loss survival from the bulk (the floor, if it is above the
    # reference window) is e^-tail (extended below while the artificial ceiling holds mass)
    bulk = max(w_ref, rep.w_min or 0.0)
    top = rep.w_max if ceiling else max(_tail_top(rep, bulk, tail_now), 1.5 * bulk)
    span = 16.0
    ceiling_extensions = floor_extensions = 0
    while True:
        lo = rep.w_min if floor else None
        probe = np.geomspace(lo if lo is not None else w_ref * 1e-6, top, 400)
        widths = _history_width(rep, probe)
        c = -math.log(rep.nu) if rep.is_multiplicative else float(np.min(widths[np.isfinite(widths)]))
        if lo is None:
            lo = w_ref * math.exp(-span * max(c, float(np.median(widths[np.isfinite(widths)]))))
            lo = min(lo, top * math.exp(-4 * c))
        r_top = float(np.max(np.asarray(rep.loss(probe), float) * probe / np.asarray(rep.a(probe), float)))
        K_eff = max(K, int(math.ceil(c * r_top)))
        h = c / K_eff
        anchor_top = ceiling or not floor or not rep.is_multiplicative
        if rep.is_multiplicative and not (floor and ceiling):
            # align the free end with the mesh so that x / nu is always a node
            n = math.ceil(math.log(top / lo) / h - 1e-9)
            if floor:
                top = lo * math.exp(n * h)
            else:
                lo = top * math.exp(-n * h)
        breaks, b = [], top
        for _ in range(5):  # where f jumps (d(top)) and where its derivatives do
            b = float(rep.d(np.array([b]))[0])
            if floor:
                b = max(b, rep.w_min)
            breaks.append(b)
        mesh = _KolmogorovMesh(rep, math.log(lo), math.log(top), h, anchor_top, breaks)
        if mesh.t0.size > MAX_NODES // 8:
            raise ModelError(f"the coarsest Kolmogorov mesh needs {mesh.t0.size} nodes (window range "
                             f"[{lo:.3g}, {top:.3g}], {K_eff} points per decrease); lower points_per_decrease")
        level0 = mesh.solve(0)
        ceiling_mass = level0.P / level0.Z if not ceiling else 0.0
        if not ceiling and ceiling_mass > 1e-17 and top < bulk * 1e14 and tail_now < 600.0:
            # a heavier tail than the no-loss survival suggests: a longer range (G grows like
            # exp(int lambda / a) from the top down, so the range stays below exp(600))
            tail_now = min(2.0 * tail_now, 600.0)
            top = max(top, min(_tail_top(rep, bulk, tail_now), bulk * 1e15))
            ceiling_extensions += 1
            continue
        if not floor and level0.bottom_mass > 1e-17 and floor_extensions < 6 and lo > 1e-250:
            span *= 2.0
            floor_extensions += 1
            continue
        break
    columns = 3 if level0.exact_history else 2
    levels = [level0]
    converged = False
    means = [level0.moment(1.0)]
    best = err = math.nan
    for ell in range(1, int(max_levels)):
        lev = mesh.solve(ell)
        levels.append(lev)
        means.append(lev.moment(1.0))
        if ell >= 2:
            best, err, _ = richardson(means, columns)
            if err <= tol * abs(best):
                converged = True
                break
    finest = levels[-1]
    ceiling_mass = finest.P / finest.Z if not ceiling else 0.0
    floor_cut = finest.bottom_mass if not floor else 0.0
    noise_mass = finest.noise_mass
    info = {
        "stability": verdict.to_info(),
        "scheme": "trapezoidal rule for dG/dt = -(lambda x / a)(G - G(d^-1)) on a log mesh, Richardson "
                  "extrapolation over mesh halvings",
        "levels": len(levels),
        "nodes": [int(lv.t.size) for lv in levels],
        "points_per_decrease": K_eff,
        "extrapolation_order": 2 * (columns + 1),
        "history": "on nodes (aligned mesh)" if level0.exact_history else "degree-5 Lagrange interpolation",
        "window_range": [float(math.exp(mesh.t0[0])), float(math.exp(mesh.t0[-1]))],
        "reference_window": w_ref,
        "ceiling_mass": ceiling_mass,
        "floor_cut_mass": floor_cut,
        "rounding_mass": noise_mass,
        "first_moment_error": err,
        "first_moment_by_level": means,
        "error_estimate_kind": "Richardson: the larger difference of the best extrapolant from its neighbours, plus "
                               "the masses at the artificial ceiling, below the bottom cut and under the rounding "
                               "floor of the density",
    }
    if not converged:
        msg = (f"kolmogorov: E[W] reached an estimated relative error {err / abs(best):.2e}, not tol={tol:g}, "
               f"after {len(levels)} meshes ({levels[-1].t.size} nodes)")
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=2)
    info["converged"] = converged

    def cut_error(k: float, value: float) -> float:
        e = noise_mass * abs(value)
        if not ceiling:
            e += ceiling_mass * (finest.x[-1] ** k + abs(value))
        if not floor:
            e += floor_cut * (finest.x[0] ** k + abs(value))
        return e

    def moment(k: float):
        v, e, _ = richardson([lv.moment(k) for lv in levels], columns)
        if not ceiling and ceiling_mass * finest.x[-1] ** k > 1e-3 * abs(v):
            # the artificial ceiling's atom decides E[W^k]: the tail beyond the window range
            # (heavy, as a Pareto tail) is not resolved, so no finite error can be claimed
            warnings.warn(f"kolmogorov: E[W^{k:g}] depends on the tail beyond the computational window "
                          f"(mass {ceiling_mass:.2e} at {finest.x[-1]:.3g}); the moment may be infinite",
                          AccuracyWarning, stacklevel=2)
            return v, math.inf
        # rounding: the recursion and the sums run over the finest mesh's nodes
        return v, e + cut_error(k, v) + 4 * _EPS * math.sqrt(finest.t.size) * abs(v)

    def density(xq):
        xq = np.asarray(xq, float)
        v, e = _richardson_arrays([lv.density(xq) for lv in levels], columns)
        # the extrapolation weights sum to at most 3 in absolute value
        e = e + 3 * finest.rounding(xq) * (xq > 0)
        return np.maximum(v, 0.0), e + np.maximum(-v, 0.0) + 8 * _EPS * np.abs(v)

    def cdf(xq):
        xq = np.asarray(xq, float)
        v, e = _richardson_arrays([lv.cdf(xq) for lv in levels], columns)
        return np.clip(v, 0.0, 1.0), e + ceiling_mass + floor_cut + 8 * _EPS

    def quantile(p):
        F = finest.cum
        j = int(np.searchsorted(F, p))
        if j >= F.size:
            return float(finest.x[-1])
        lo_x, hi_x = finest.x[max(j - 1, 0)], finest.x[j]
        if hi_x <= lo_x:
            return float(hi_x)
        return float(brentq(lambda v: cdf(np.array([v]))[0][0] - p, lo_x, hi_x, xtol=1e-12 * hi_x))

    atom = (float(rep.w_max), float(finest.P / finest.Z)) if ceiling else None
    if atom is not None:
        vals = [lv.P / lv.Z for lv in levels]
        pa, pe, _ = richardson(vals, columns)
        atom = (atom[0], pa)
        info["ceiling_atom"] = {"w_max": atom[0], "probability": pa, "error_estimate": pe}
    return PDMPSolution(verdict, "kolmogorov", _support(rep), moment_fn=moment, density_fn=density, cdf_fn=cdf,
                        quantile_fn=quantile, atom=atom, info=info, seconds=time.perf_counter() - t0)


# ===================================================================== stochastic ordering
@register_solver(CDFPair, name="cdf-comparison",
                 doc="stochastic ordering of two laws from their CDFs on a grid (pointwise, up to tol)")
def compare_cdfs(pair: CDFPair) -> StochasticOrdering:
    """Where ``first <=_st second`` holds: ``F_first(x) >= F_second(x) - tol`` on the grid.

    Returns
    -------
    StochasticOrdering
        Both directions, the grid intervals where the first is pointwise smaller, the
        largest gap and the largest violation of ``first <=_st second``.

    Examples
    --------
    Exponential laws of rates 2 and 1 (``Exp(2) <=_st Exp(1)``):

    >>> x = np.linspace(0, 5, 11)
    >>> out = compare_cdfs(CDFPair(x, 1 - np.exp(-2 * x), 1 - np.exp(-x), labels=("Exp(2)", "Exp(1)")))
    >>> out.verdict(), out.regions
    ('Exp(2) <=st Exp(1)', [(0.0, 5.0)])
    """
    if not isinstance(pair, CDFPair):
        raise ModelError(f"compare_cdfs takes a CDFPair; got {type(pair).__name__}")
    diff = pair.first - pair.second  # >= 0 where the first law is smaller
    holds = diff >= -pair.tol
    reverse = diff <= pair.tol
    regions = []
    if holds.any():
        edges = np.flatnonzero(np.diff(np.concatenate([[0], holds.astype(int), [0]])))
        for a, b in zip(edges[::2], edges[1::2]):
            regions.append((float(pair.grid[a]), float(pair.grid[b - 1])))
    return StochasticOrdering(
        first_smaller=bool(holds.all()), second_smaller=bool(reverse.all()), first_smaller_at=holds,
        regions=regions, largest_gap=float(np.max(np.abs(diff))), largest_violation=float(max(-diff.min(), 0.0)),
        info={"labels": pair.labels, "tol": pair.tol, "points": pair.n_points},
    )


# ============================================================================== the methods
register_method(
    "analytic",
    requires="pdmp",
    driver="single",
    solver="q-series",
    solver_controls=("strict", "tol"),
    label="analytic/q-series",
    options=("dps",),
    doc="the analytic stationary law of power-law window profiles (q-Pochhammer series, mpmath where the series "
        "needs precision); no window ceiling",
)

register_method(
    "numerical",
    requires="pdmp",
    driver="single",
    solver="kolmogorov",
    solver_controls=("strict", "tol"),
    label="numerical/kolmogorov",
    options=("points_per_decrease", "max_levels"),
    doc="the Kolmogorov (level-crossing) equation discretised on a log mesh, Richardson-extrapolated to tol; "
        "general profiles, decrease and window bounds",
)
