"""The PDMP representation (piecewise-deterministic window processes) and its solutions.

A window ``W(t) > 0`` (time in round-trip times, the window in packets) evolves as

* ``dW/dt = a(W)`` between losses (the *increase profile*, ``a > 0``);
* losses come at rate ``lambda(W)`` (``>= 0``);
* at a loss ``W -> d(W)`` (the *decrease*; multiplicative ``d(W) = nu W`` with
  ``0 < nu < 1`` by default, otherwise any increasing map with ``d(w) < w``);
* optional bounds: a floor ``w_min`` (``W -> max(d(W), w_min)``) and a ceiling
  ``w_max`` (the increase stops there, so the law has an atom at ``w_max``).

This is the adaptive window protocol of Altman, Avrachenkov, Kherani & Prabhu
(INFOCOM 2005). For ``w_min < x < w_max`` the stationary density ``f`` satisfies the
level-crossing (Kolmogorov) equation, upward flux = downward flux through ``x``::

    a(x) f(x) = integral over {y > x, d(y) < x} of lambda(y) f(y) dy
                + 1{d(w_max) < x} lambda(w_max) P(W = w_max),

and the atom balances ``a(w_max) f(w_max-) = lambda(w_max) P(W = w_max)``. For the
multiplicative decrease the integral runs over ``(x, x / nu)``.

Power-law profiles ``a(w) = a w^alpha`` and ``lambda(w) = lam w^gamma`` are declared
as :class:`PowerLaw` objects (not as opaque callables) so that a solver can recognise
the structure the series solution needs: with ``m = gamma + 1 - alpha`` and
``u = W^m`` the process maps to a linear-increase protocol with constant-rate losses
and decrease factor ``q = nu^m`` (:mod:`exactq.solvers.pdmp`).

:class:`PDMPSolution` is what the solvers return: the stability verdict with the
quantity that decides it (:class:`StabilityVerdict`), and for a stable process the
stationary law (moments, density and CDF at any points, each with an error estimate).
:class:`CDFPair` holds two CDFs on one grid for a stochastic-ordering comparison; its
solver returns a :class:`StochasticOrdering`.

References
----------
E. Altman, K. Avrachenkov, A. A. Kherani and B. J. Prabhu, "Performance analysis and
stochastic stability of congestion control protocols", Proc. IEEE INFOCOM 2005
(doi:10.1109/INFCOM.2005.1498357).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ModelError, UnstableError

__all__ = ["PowerLaw", "PDMP", "StabilityVerdict", "PDMPSolution", "CDFPair", "StochasticOrdering"]


def _positive(name: str, value, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{name} must be a number; got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ModelError(f"{name} must be > 0 and finite; got {value!r}")
    return v


@dataclass(frozen=True)
class PowerLaw:
    """The profile ``w -> coefficient * w**exponent``, declared as a power law.

    Parameters
    ----------
    coefficient : float
        ``> 0`` (a rate per round-trip time).
    exponent : float
        Any finite real.

    Examples
    --------
    Standard TCP's increase of one packet per round-trip time, and losses at rate
    ``p W`` (each of the ``W`` packets of a round trip lost with probability ``p``):

    >>> PowerLaw(1.0)(np.array([1.0, 10.0])).tolist(), PowerLaw(0.01, 1.0)(20.0)
    ([1.0, 1.0], 0.2)
    """

    coefficient: float
    exponent: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "coefficient", _positive("power-law coefficient", self.coefficient))
        e = float(self.exponent)
        if not math.isfinite(e):
            raise ModelError(f"power-law exponent must be finite; got {self.exponent!r}")
        object.__setattr__(self, "exponent", e)

    def __call__(self, w):
        w = np.asarray(w, dtype=float)
        if self.exponent == 0.0:
            out = np.full(w.shape, self.coefficient)
            return float(out) if out.ndim == 0 else out
        with np.errstate(divide="ignore", over="ignore"):
            out = self.coefficient * np.power(w, self.exponent)
        return float(out) if np.ndim(out) == 0 else out

    def __str__(self) -> str:
        return f"{self.coefficient:.12g}*w^{self.exponent:.12g}"


def _as_profile(name: str, fn) -> PowerLaw | Callable:
    if isinstance(fn, PowerLaw):
        return fn
    if isinstance(fn, (int, float)):
        return PowerLaw(float(fn))
    if not callable(fn):
        raise ModelError(f"{name} must be a PowerLaw, a positive number or a vectorised callable; got {fn!r}")
    return fn


@dataclass(frozen=True)
class PDMP:
    """A piecewise-deterministic window process (module docstring for the conventions).

    Parameters
    ----------
    increase : PowerLaw or callable
        ``a(w) > 0``, the window's growth per round-trip time. A callable must accept
        and return numpy arrays.
    loss_rate : PowerLaw or callable
        ``lambda(w) >= 0``, losses per round-trip time at window ``w``.
    nu : float, optional
        Multiplicative decrease ``W -> nu W``, ``0 < nu < 1``. Give either ``nu`` or
        ``decrease``.
    decrease : callable, optional
        A general decrease map ``d``: increasing, ``d(w) < w`` (and ``d(w) >= 0`` unless
        ``w_min`` is given); vectorised.
    decrease_inverse : callable, optional
        ``d^-1``, if known in closed form (otherwise it is found by bisection).
    w_min, w_max : float, optional
        Window floor (``W -> max(d(W), w_min)``) and ceiling; ``0 < w_min < w_max``.
    scale : float, optional
        A typical window (packets) for general profiles: where solvers start looking
        for the bulk of the law. Power laws do not need it.

    Raises
    ------
    ModelError
        ``nu`` outside ``(0, 1)``, both or neither of ``nu`` and ``decrease``, bounds
        that are not positive or with ``w_min >= w_max``, a profile that is not
        positive (or a decrease that does not decrease) at a probe window.

    Examples
    --------
    NewReno with per-packet loss probability ``p``: ``a(w) = 1``, ``lambda(w) = p w``,
    ``nu = 1/2``; the growth exponent is ``m = gamma + 1 - alpha = 2`` and the
    linear-increase protocol it maps to has decrease factor ``q = nu^m = 1/4``:

    >>> pd = PDMP(PowerLaw(1.0), PowerLaw(0.001, 1.0), nu=0.5)
    >>> pd.is_power_law, pd.growth_exponent, pd.q
    (True, 2.0, 0.25)
    """

    increase: Any
    loss_rate: Any
    nu: float | None = None
    decrease: Callable | None = field(default=None, repr=False)
    decrease_inverse: Callable | None = field(default=None, repr=False)
    w_min: float | None = None
    w_max: float | None = None
    scale: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "increase", _as_profile("increase", self.increase))
        object.__setattr__(self, "loss_rate", _as_profile("loss_rate", self.loss_rate))
        if (self.nu is None) == (self.decrease is None):
            raise ModelError("give exactly one of nu (multiplicative decrease) and decrease (a map d(w))")
        if self.nu is not None:
            nu = float(self.nu)
            if not (0.0 < nu < 1.0):
                raise ModelError(f"nu must be > 0 and < 1; got {self.nu!r}")
            object.__setattr__(self, "nu", nu)
        elif not callable(self.decrease):
            raise ModelError(f"decrease must be a vectorised callable d(w); got {self.decrease!r}")
        if self.decrease_inverse is not None and not callable(self.decrease_inverse):
            raise ModelError(f"decrease_inverse must be callable; got {self.decrease_inverse!r}")
        w_min = _positive("w_min", self.w_min, allow_none=True)
        w_max = _positive("w_max", self.w_max, allow_none=True)
        if w_min is not None and w_max is not None and not w_min < w_max:
            raise ModelError(f"w_min must be < w_max {w_max:g}; got {w_min:g}")
        object.__setattr__(self, "w_min", w_min)
        object.__setattr__(self, "w_max", w_max)
        object.__setattr__(self, "scale", _positive("scale", self.scale, allow_none=True))
        self._probe()

    # -- validation on probe windows ------------------------------------------------
    def probe_windows(self) -> np.ndarray:
        """Windows at which the profiles are checked: a log grid over the support."""
        lo = self.w_min if self.w_min is not None else 1e-6 * (self.scale or 1.0)
        hi = self.w_max if self.w_max is not None else 1e6 * max(self.scale or 1.0, lo)
        return np.geomspace(lo, hi, 61)

    def _probe(self) -> None:
        # declared power laws are valid by construction; opaque callables are probed
        w = self.probe_windows()
        for name, fn, rule in (("increase a(w)", self.increase, "> 0"), ("loss rate lambda(w)", self.loss_rate, ">= 0")):
            if isinstance(fn, PowerLaw):
                continue
            with np.errstate(all="ignore"):
                v = np.asarray(fn(w), dtype=float)
            ok = v > 0 if rule == "> 0" else v >= 0
            if v.shape != w.shape:
                raise ModelError(f"{name} must be vectorised (return one value per window); got shape {v.shape}")
            bad = ~(ok & np.isfinite(v))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ModelError(f"{name} must be {rule} and finite on the support; got {v[i]:.6g} at w = {w[i]:.6g}")
        if self.decrease is not None:
            with np.errstate(all="ignore"):
                d = np.asarray(self.decrease(w), dtype=float)
            low = -np.inf if self.w_min is not None else 0.0
            bad = ~((d < w) & (d >= low) & np.isfinite(d))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                rule = "< w" if self.w_min is not None else "< w and >= 0 (or give w_min)"
                raise ModelError(f"decrease d(w) must be {rule}; got d({w[i]:.6g}) = {d[i]:.6g}")
            if np.any(np.diff(d) < 0):
                i = int(np.flatnonzero(np.diff(d) < 0)[0])
                raise ModelError(f"decrease d(w) must be increasing in w; d({w[i]:.6g}) = {d[i]:.6g} > "
                                 f"d({w[i + 1]:.6g}) = {d[i + 1]:.6g}")

    # -- the profiles -----------------------------------------------------------------
    def a(self, w):
        """The increase ``a(w)`` (packets per round-trip time)."""
        return self.increase(np.asarray(w, dtype=float))

    def loss(self, w):
        """The loss rate ``lambda(w)`` (losses per round-trip time)."""
        return self.loss_rate(np.asarray(w, dtype=float))

    def d(self, w):
        """The decrease map without the floor: ``nu w`` or ``decrease(w)``."""
        w = np.asarray(w, dtype=float)
        return self.nu * w if self.nu is not None else np.asarray(self.decrease(w), dtype=float)

    def d_inverse(self, x):
        """``d^-1(x)``: the largest window whose loss lands at or below ``x`` (``x / nu``).

        Uses ``decrease_inverse`` when given, else a vectorised bisection (60 halvings
        after doubling an upper bracket).

        Examples
        --------
        An additive decrease ``d(w) = w - 3`` given without its inverse: ``d^-1(x) = x + 3``.

        >>> pd = PDMP(PowerLaw(1.0), PowerLaw(0.1), decrease=lambda w: w - 3.0, w_min=1.0)
        >>> np.allclose(pd.d_inverse(np.array([2.0, 10.0])), [5.0, 13.0], rtol=1e-14)
        True
        """
        x = np.asarray(x, dtype=float)
        if self.nu is not None:
            return x / self.nu
        if self.decrease_inverse is not None:
            return np.asarray(self.decrease_inverse(x), dtype=float)
        lo = x.copy()
        hi = np.maximum(2.0 * x, x + 1.0)
        for _ in range(200):  # bracket: d(hi) >= x
            short = self.d(hi) < x
            if not short.any():
                break
            hi = np.where(short, 2.0 * hi, hi)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            below = self.d(mid) < x
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return hi

    # -- declared structure -------------------------------------------------------------
    @property
    def is_multiplicative(self) -> bool:
        """Whether the decrease is ``W -> nu W``."""
        return self.nu is not None

    @property
    def is_power_law(self) -> bool:
        """Power-law increase and loss rate and a multiplicative decrease."""
        return isinstance(self.increase, PowerLaw) and isinstance(self.loss_rate, PowerLaw) and self.is_multiplicative

    @property
    def growth_exponent(self) -> float:
        """``m = gamma + 1 - alpha`` of power-law profiles (``ModelError`` otherwise)."""
        if not self.is_power_law:
            raise ModelError("the growth exponent m = gamma + 1 - alpha needs power-law profiles and nu")
        return self.loss_rate.exponent + 1.0 - self.increase.exponent

    @property
    def q(self) -> float:
        """``nu^m``: the decrease factor of the linear-increase protocol the power laws map to."""
        return self.nu ** self.growth_exponent

    def series_refusal(self) -> str | None:
        """Why the power-law series does not describe this process (``None`` when it does).

        The series needs power-law profiles, the multiplicative decrease and no window
        ceiling (a floor is allowed: the floored law is the unbounded one conditioned
        on ``W >= w_min``).

        Examples
        --------
        >>> PDMP(PowerLaw(1.0), PowerLaw(0.01, 1.0), nu=0.5, w_max=60.0).series_refusal()
        'a window ceiling w_max puts an atom at w_max (solve it numerically)'
        """
        if not isinstance(self.increase, PowerLaw):
            return "the increase a(w) is not a declared power law"
        if not isinstance(self.loss_rate, PowerLaw):
            return "the loss rate lambda(w) is not a declared power law"
        if not self.is_multiplicative:
            return "the decrease is not multiplicative (W -> nu W)"
        if self.w_max is not None:
            return "a window ceiling w_max puts an atom at w_max (solve it numerically)"
        return None

    def describe(self) -> dict:
        """A JSON-ready description of the profiles and bounds."""
        def name(p):
            return str(p) if isinstance(p, PowerLaw) else getattr(p, "__name__", "callable")
        return {
            "increase": name(self.increase),
            "loss_rate": name(self.loss_rate),
            "decrease": f"{self.nu:.12g}*w" if self.nu is not None else name(self.decrease),
            "w_min": self.w_min,
            "w_max": self.w_max,
        }


@dataclass(frozen=True)
class StabilityVerdict:
    """Whether the window process is positive recurrent, and the quantity that decides it.

    Attributes
    ----------
    stable : bool
    quantity : str
        The deciding quantity, e.g. ``"m = gamma + 1 - alpha"``.
    value : float
        Its value for this process.
    rule : str
        The condition, e.g. ``"stable iff m > 0"``.
    exact : bool
        ``True`` for a proven condition (power laws, bounded windows); ``False`` for the
        asymptotic test applied to general profiles at finitely many windows.
    details : dict
        Further quantities (the log-drift ratio, the tail index, ...).

    Examples
    --------
    >>> v = StabilityVerdict(False, "m = gamma + 1 - alpha", -0.5, "stable iff m > 0")
    >>> v.message()
    'the window process is unstable (stable iff m > 0); here m = gamma + 1 - alpha = -0.5'
    """

    stable: bool
    quantity: str
    value: float
    rule: str
    exact: bool = True
    details: dict = field(default_factory=dict)

    def message(self) -> str:
        """One line: the verdict, the rule and the deciding quantity's value."""
        state = "stable" if self.stable else "unstable"
        return f"the window process is {state} ({self.rule}); here {self.quantity} = {self.value:.12g}"

    def to_info(self) -> dict:
        """JSON-ready: ``stable``, ``quantity``, ``value``, ``rule``, ``exact``, ``details``."""
        return {"stable": bool(self.stable), "quantity": self.quantity, "value": float(self.value),
                "rule": self.rule, "exact": bool(self.exact), "details": dict(self.details)}


@dataclass
class PDMPSolution:
    """The stationary law of a :class:`PDMP` (or only the verdict, when it is unstable).

    A solver fills the evaluation functions; each returns values with absolute error
    estimates. Every accessor of the law raises :class:`~exactq.errors.UnstableError`
    (naming the deciding quantity) for an unstable process.

    Attributes
    ----------
    stability : StabilityVerdict
    method : str
        The solver that produced the law.
    support : (float, float)
        Where the law lives: ``(w_min or 0, w_max or inf)``.
    moment_fn : callable ``k -> (E[W^k], error)``, optional
    density_fn, cdf_fn : callable ``x (n,) -> (values (n,), errors (n,))``, optional
        The density of the continuous part (the atom at ``w_max`` excluded) and the
        CDF ``P(W <= x)`` (the atom included).
    quantile_fn : callable ``p -> x``, optional
    atom : (float, float), optional
        ``(w_max, P(W = w_max))`` for a window ceiling.
    info : dict
        How the law was obtained (precision, mesh, extrapolation, tail masses, ...).
    seconds : float

    Examples
    --------
    The exponential law of rate 1, given by hand:

    >>> sol = PDMPSolution(StabilityVerdict(True, "m", 1.0, "m > 0"), "by hand", (0.0, math.inf),
    ...                    moment_fn=lambda k: (math.gamma(k + 1), 0.0),
    ...                    density_fn=lambda x: (np.exp(-x), 0 * x), cdf_fn=lambda x: (1 - np.exp(-x), 0 * x))
    >>> sol.moment(2), bool(np.isclose(sol.cdf([1.0])[0], 1 - math.exp(-1)))
    (2.0, True)
    """

    stability: StabilityVerdict
    method: str
    support: tuple = (0.0, math.inf)
    moment_fn: Callable | None = field(default=None, repr=False)
    density_fn: Callable | None = field(default=None, repr=False)
    cdf_fn: Callable | None = field(default=None, repr=False)
    quantile_fn: Callable | None = field(default=None, repr=False)
    atom: tuple | None = None
    info: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def is_stable(self) -> bool:
        return bool(self.stability.stable)

    def require_stable(self) -> None:
        """Raise :class:`UnstableError` with the verdict's message if the process is unstable."""
        if not self.stability.stable:
            raise UnstableError(self.stability.message())

    def _law(self, fn, what: str):
        self.require_stable()
        if fn is None:
            raise ModelError(f"the {self.method} solution provides no {what}")
        return fn

    def moment_estimate(self, k: float) -> tuple[float, float]:
        """``(E[W^k], absolute error estimate)``; ``E[W^k]`` may be ``inf`` (heavy tail)."""
        value, err = self._law(self.moment_fn, "moments")(float(k))
        return float(value), float(err)

    def moment(self, k: float) -> float:
        """``E[W^k]``."""
        return self.moment_estimate(k)[0]

    def mean(self) -> float:
        """``E[W]``."""
        return self.moment(1.0)

    def density_estimate(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Density of the continuous part at ``x`` and its absolute error estimates."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        v, e = self._law(self.density_fn, "density")(x)
        return np.asarray(v, dtype=float), np.asarray(e, dtype=float)

    def density(self, x) -> np.ndarray:
        return self.density_estimate(x)[0]

    def cdf_estimate(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``P(W <= x)`` and its absolute error estimates."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        v, e = self._law(self.cdf_fn, "CDF")(x)
        return np.asarray(v, dtype=float), np.asarray(e, dtype=float)

    def cdf(self, x) -> np.ndarray:
        return self.cdf_estimate(x)[0]

    def quantile(self, p: float) -> float:
        """The smallest ``x`` with ``P(W <= x) >= p`` (``0 < p < 1``)."""
        if not 0.0 < p < 1.0:
            raise ModelError(f"quantile probability must be > 0 and < 1; got {p!r}")
        return float(self._law(self.quantile_fn, "quantiles")(float(p)))


@dataclass(frozen=True)
class CDFPair:
    """Two CDFs on one grid, for a stochastic-ordering comparison.

    ``first <=_st second`` (the first law is stochastically smaller) iff
    ``F_first(x) >= F_second(x)`` for every ``x``; on a grid this is checked up to
    ``tol`` (the CDFs' own accuracy).

    Parameters
    ----------
    grid : (n,) array_like
        Increasing points.
    first, second : (n,) array_like
        The CDF values at ``grid``, in ``[0, 1]`` and nondecreasing.
    tol : float
        Differences up to ``tol`` count as ties.
    labels : (str, str)

    Examples
    --------
    The exponential laws of rates 2 and 1 at three points (``F(x) = 1 - e^(-rate x)``):

    >>> x = np.array([0.5, 1.0, 2.0])
    >>> pair = CDFPair(x, 1 - np.exp(-2 * x), 1 - np.exp(-x))
    >>> pair.n_points, bool(np.all(pair.first >= pair.second))
    (3, True)
    """

    grid: np.ndarray
    first: np.ndarray
    second: np.ndarray
    tol: float = 1e-10
    labels: tuple = ("first", "second")

    def __post_init__(self):
        grid = np.asarray(self.grid, dtype=float).ravel()
        if grid.size < 1 or np.any(np.diff(grid) <= 0) or not np.all(np.isfinite(grid)):
            raise ModelError("grid must be a nonempty increasing array of finite points")
        for name in ("first", "second"):
            F = np.asarray(getattr(self, name), dtype=float).ravel()
            if F.shape != grid.shape:
                raise ModelError(f"{name} must have one CDF value per grid point ({grid.size}); got {F.size}")
            if np.any(F < -self.tol) or np.any(F > 1 + self.tol) or np.any(np.diff(F) < -self.tol):
                raise ModelError(f"{name} must be a CDF on the grid (values in [0, 1], nondecreasing)")
            object.__setattr__(self, name, F)
        if not (self.tol >= 0 and math.isfinite(self.tol)):
            raise ModelError(f"tol must be >= 0; got {self.tol!r}")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "labels", tuple(self.labels))

    @property
    def n_points(self) -> int:
        return int(self.grid.size)


@dataclass
class StochasticOrdering:
    """The outcome of comparing two CDFs on a grid (:class:`CDFPair`).

    Attributes
    ----------
    first_smaller, second_smaller : bool
        ``first <=_st second`` (``F_first >= F_second - tol`` at every grid point), and
        the reverse. Both hold when the CDFs agree to ``tol``.
    first_smaller_at : (n,) ndarray of bool
        Where ``F_first >= F_second - tol`` holds.
    regions : list of (float, float)
        Maximal grid intervals on which ``first <=_st second`` holds pointwise.
    largest_gap : float
        ``max |F_first - F_second|`` over the grid.
    largest_violation : float
        ``max (F_second - F_first)``: by how much ``first <=_st second`` fails (``<= tol``
        when it holds).
    info : dict
    """

    first_smaller: bool
    second_smaller: bool
    first_smaller_at: np.ndarray
    regions: list
    largest_gap: float
    largest_violation: float
    info: dict = field(default_factory=dict)

    def verdict(self) -> str:
        """``"first <=st second"``, ``"second <=st first"``, ``"equal"`` or ``"not ordered"``.

        Examples
        --------
        >>> out = StochasticOrdering(False, True, np.array([False]), [], 0.5, 0.5, {"labels": ("A", "B")})
        >>> out.verdict()
        'B <=st A'
        """
        a, b = self.info.get("labels", ("first", "second"))
        if self.first_smaller and self.second_smaller:
            return "equal"
        if self.first_smaller:
            return f"{a} <=st {b}"
        if self.second_smaller:
            return f"{b} <=st {a}"
        return "not ordered"
