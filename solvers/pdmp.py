"""Solvers for piecewise-deterministic window processes (:class:`~exactq.representations.pdmp.PDMP`).

Four things, each taking a representation and returning a solution; the stability
verdict and the ordering are here, the two solvers in a module each:

:func:`stability`
    The verdict (positive recurrent or not) with the quantity that decides it.
:func:`~exactq.solvers.pdmp_series.solve_series` (solver ``q-series``, :mod:`exactq.solvers.pdmp_series`)
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
:func:`~exactq.solvers.pdmp_kolmogorov.solve_kolmogorov` (solver ``kolmogorov``, :mod:`exactq.solvers.pdmp_kolmogorov`)
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
>>> from exactq.solvers.pdmp_kolmogorov import solve_kolmogorov
>>> from exactq.solvers.pdmp_series import solve_series
>>> rep = PDMP(PowerLaw(1.0), PowerLaw(0.001, 1.0), nu=0.5)
>>> exact, numeric = solve_series(rep), solve_kolmogorov(rep)
>>> bool(abs(exact.moment(2) - 2000) < 1e-9 and abs(numeric.mean() - exact.mean()) < 1e-8)
True
"""

from __future__ import annotations

import math
import time

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ModelError
from exactq.representations.pdmp import (
    PDMP,
    CDFPair,
    PDMPSolution,
    StabilityVerdict,
    StochasticOrdering,
)

__all__ = ["stability", "compare_cdfs", "reference_window"]
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
    import mpmath
    from scipy import special

    beta = lam * c / a
    guess = (beta + float(special.lambertw(-beta * math.exp(-beta), 0).real)) / c
    with mpmath.workdps(30):
        root = mpmath.findroot(lambda k: a * k - lam * (1 - mpmath.exp(-c * k)), max(guess, 1e-12))
        return float(root)


def _kappa_ceiling(a: float, lam: float, c: float) -> float:
    """The root ``kappa > 0`` of ``a kappa = lam (e^(c kappa) - 1)`` (needs ``lam c < a``).

    With ``beta = lam c / a``: ``c kappa = -W_-1(-beta e^-beta) - beta``.
    """
    import mpmath
    from scipy import special

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


# ===================================================================== stochastic ordering
@register_solver(CDFPair, name="cdf-comparison", priority=100,
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

