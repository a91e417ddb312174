"""Adaptive window protocols: the window process of NewReno, Scalable and HighSpeed TCP.

Altman, Avrachenkov, Kherani & Prabhu (INFOCOM 2005). Time is measured in round-trip
times and the window ``W`` in packets. Between losses the window grows as
``dW/dt = a(W)``; losses come at rate ``lambda(W)``; a loss multiplies the window by
``nu``. Optional bounds: a minimum window ``w_min`` (``W -> max(nu W, w_min)``) and a
maximum window ``w_max`` (e.g. the receiver's advertised window).

Presets (``loss_prob`` = ``p``, each packet lost independently, so that the ``W``
packets of a round trip bring losses at rate ``lambda(W) = p W``):

``newreno``
    ``a(W) = 1``, ``nu = 1/2``.
``scalable``
    Scalable TCP: ``a(W) = 0.01 W`` (0.01 packets per ACK), ``nu = 0.875``.
``highspeed``
    HighSpeed TCP (RFC 3649) in power-law form. The response function of RFC 3649
    is ``W(p) = Low_Window (Low_P / p)^S`` above ``Low_Window = 38`` (``Low_P = 10^-3``);
    with the design exponent ``S = 0.835`` (the RFC's, from ``High_Window = 83000`` at
    ``High_P = 10^-7``) this is ``W = 0.12 / p^0.835``. RFC 3649's increase
    ``a(w) = w^2 p(w) 2 b / (2 - b)`` with ``p(w)`` the inverse response function
    becomes ``a(W) = (2b / (2 - b)) Low_P Low_Window^(1/S) W^(2 - 1/S)``, i.e. the power
    law ``alpha = 2 - 1/S`` (0.80 for the RFC), with the decrease held at its
    Low_Window value ``b = 1/2`` (``nu = 1/2``) so that the process keeps the power-law
    form the analytic solution needs. The one design parameter is ``S``
    (``response_exponent``): ``S = 1/2`` gives NewReno's law (``alpha = 0``) and
    ``S = 1`` Scalable TCP's multiplicative increase (``alpha = 1``).
``general``
    ``a(W) = a W^alpha``, ``lambda(W) = lam W^gamma``, ``W -> nu W``.

The model describes itself as a :class:`~exactq.representations.pdmp.PDMP`
(:meth:`AWP.pdmp`); the ``analytic`` method solves it by the q-Pochhammer series, the
``numerical`` method by the discretised Kolmogorov equation (``exactq.solvers.pdmp``).
Stability is decided by ``m = gamma + 1 - alpha`` (and, when ``m = 0`` with a window
bound, by the log-drift ratio ``lam ln(1/nu) / a`` and a tail index); an unstable
process answers ``stable = false`` with the deciding quantity, and every other measure
raises :class:`~exactq.errors.UnstableError` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.errors import ModelError
from exactq.params import Param
from exactq.representations.pdmp import PDMP, PDMPSolution, PowerLaw
from exactq.result import Estimate

__all__ = ["AWP", "PRESETS", "LOW_WINDOW", "LOW_P", "HIGHSPEED_EXPONENT", "highspeed_increase"]

PRESETS = ("newreno", "scalable", "highspeed", "general")
#: RFC 3649: HighSpeed TCP behaves as standard TCP at windows up to Low_Window ...
LOW_WINDOW = 38.0
#: ... reached at the loss probability Low_P (standard TCP's 1.2 / sqrt(p) = 38 there)
LOW_P = 1e-3
#: RFC 3649's response-function exponent: log(83000 / 38) / log(10^-3 / 10^-7) = 0.835
HIGHSPEED_EXPONENT = 0.835
#: HighSpeed TCP's decrease factor, held at its Low_Window value b = 1/2
HIGHSPEED_NU = 0.5


def highspeed_increase(exponent: float = HIGHSPEED_EXPONENT) -> PowerLaw:
    """RFC 3649's increase ``a(w) = w^2 p(w) 2b / (2 - b)`` for the response ``W = 38 (10^-3 / p)^S``.

    With ``b = 1/2`` and ``p(w) = Low_P (Low_Window / w)^(1/S)``:
    ``a(w) = (2/3) 10^-3 38^(1/S) w^(2 - 1/S)``.

    Examples
    --------
    At ``S = 1/2`` the increase is constant, ``(2/3) 10^-3 38^2 = 0.963`` packets per
    round trip (NewReno's 1, within the RFC's rounding of ``1.2 / sqrt(p)``); at the
    RFC's exponent it is ``0.078 w^0.8 (2b/(2-b))``, RFC 3649's ``p(w) = 0.078 / w^1.2``:

    >>> highspeed_increase(0.5)
    PowerLaw(coefficient=0.9626666666666667, exponent=0.0)
    >>> inc = highspeed_increase()
    >>> round(inc.exponent, 4), round(inc.coefficient * 1.5, 4)
    (0.8024, 0.078)
    """
    b = 1.0 - HIGHSPEED_NU
    S = float(exponent)
    return PowerLaw(2.0 * b / (2.0 - b) * LOW_P * LOW_WINDOW ** (1.0 / S), 2.0 - 1.0 / S)


_GENERAL_ONLY = ("a", "alpha", "lam", "gamma", "nu")
_MEASURES = {
    "mean_window": "E[W], the time-average window (packets)",
    "window_moment": "E[W^k] for the parameter k",
    "throughput": "E[W] / rtt, the time-average sending rate (packets per second; per round trip with rtt = 1)",
    "stable": "whether the window process is positive recurrent (true/false); the deciding quantity in info",
    "density": "the stationary density of the window on the grid (points, grid_min, grid_max; the grid in info)",
    "cdf": "P(W <= x) on the grid (points, grid_min, grid_max; the grid in info)",
}


@register_model
@dataclass(frozen=True)
class AWP(Model):
    """An adaptive window protocol (module docstring): presets or general power-law profiles."""

    name = "awp"
    summary = ("adaptive window protocol: window W with increase a(W), losses at rate lambda(W), W -> nu W "
               "(NewReno, Scalable and HighSpeed TCP presets); time in round trips, W in packets")
    reference = ("Altman, Avrachenkov, Kherani & Prabhu, Performance analysis and stochastic stability of "
                 "congestion control protocols, INFOCOM 2005; RFC 3649 (HighSpeed TCP)")
    parameters = (
        Param("preset", "choice", "protocol: newreno, scalable, highspeed (loss_prob) or general (a, alpha, lam, "
              "gamma, nu)", default="general", choices=PRESETS),
        Param("loss_prob", "float", "presets: per-packet loss probability p (losses at rate p W per round trip)",
              default=None, low=0.0, high=1.0, low_open=True, high_open=True),
        Param("response_exponent", "float", "highspeed: RFC 3649's response-function exponent S, "
              "W = 38 (0.001/p)^S (0.835 in the RFC; 1/2 behaves as NewReno, 1 as Scalable TCP)",
              default=None, low=0.0, low_open=True),
        Param("a", "float", "general: increase coefficient, dW/dt = a W^alpha (packets per round trip)",
              default=None, low=0.0, low_open=True),
        Param("alpha", "float", "general: increase exponent alpha (0 when omitted)", default=None),
        Param("lam", "float", "general: loss-rate coefficient, losses at rate lam W^gamma per round trip",
              default=None, low=0.0, low_open=True),
        Param("gamma", "float", "general: loss-rate exponent gamma (0 when omitted)", default=None),
        Param("nu", "float", "general: decrease factor, W -> nu W at a loss", default=None, low=0.0, high=1.0,
              low_open=True, high_open=True),
        Param("w_min", "float", "minimum window (packets): W -> max(nu W, w_min)", default=None, low=0.0,
              low_open=True),
        Param("w_max", "float", "maximum window (packets), e.g. the receiver window", default=None, low=0.0,
              low_open=True),
        Param("k", "float", "window_moment: the order k of E[W^k]", default=None),
        Param("points", "int", "density, cdf: number of grid points", default=200, low=2, high=1_000_000),
        Param("grid_min", "float", "density, cdf: first grid point (default w_min, else 0)", default=None, low=0.0),
        Param("grid_max", "float", "density, cdf: last grid point (default w_max, else the 1 - 1e-6 quantile)",
              default=None, low=0.0, low_open=True),
        Param("rtt", "float", "throughput: the round-trip time in seconds", default=1.0, low=0.0, low_open=True),
    )
    measures = dict(_MEASURES)
    methods = ("analytic", "numerical")
    default_measure = "mean_window"

    preset: str = "general"
    loss_prob: float | None = None
    response_exponent: float | None = None
    a: float | None = None
    alpha: float | None = None
    lam: float | None = None
    gamma: float | None = None
    nu: float | None = None
    w_min: float | None = None
    w_max: float | None = None
    k: float | None = None
    points: int = 200
    grid_min: float | None = None
    grid_max: float | None = None
    rtt: float = 1.0

    def check(self) -> None:
        """The cross-parameter rules: which parameters each preset takes, ``w_min < w_max``.

        Examples
        --------
        >>> AWP.create(preset="newreno", loss_prob=0.01, nu=0.7)
        Traceback (most recent call last):
        ...
        exactq.errors.ModelError: nu applies to preset=general only; got preset=newreno (its profiles are fixed)
        """
        if self.preset == "general":
            for name in ("a", "lam", "nu"):
                if getattr(self, name) is None:
                    raise ModelError(f"missing required parameter {name} for model awp preset=general")
            for name in ("loss_prob", "response_exponent"):
                if getattr(self, name) is not None:
                    raise ModelError(f"{name} applies to the presets newreno, scalable and highspeed only; got "
                                     f"preset=general")
        else:
            if self.loss_prob is None:
                raise ModelError(f"missing required parameter loss_prob for model awp preset={self.preset}: "
                                 "per-packet loss probability (> 0 and < 1)")
            given = [n for n in _GENERAL_ONLY if getattr(self, n) is not None]
            if given:
                raise ModelError(f"{given[0]} applies to preset=general only; got preset={self.preset} "
                                 "(its profiles are fixed)")
            if self.response_exponent is not None and self.preset != "highspeed":
                raise ModelError(f"response_exponent applies to preset=highspeed only; got preset={self.preset}")
        if self.w_min is not None and self.w_max is not None and not self.w_min < self.w_max:
            raise ModelError(f"w_min must be < w_max {self.w_max:g}; got {self.w_min:g}")
        if self.grid_min is not None and self.grid_max is not None and not self.grid_min < self.grid_max:
            raise ModelError(f"grid_min must be < grid_max {self.grid_max:g}; got {self.grid_min:g}")

    # -- the representation ---------------------------------------------------------------
    def profiles(self) -> tuple[PowerLaw, PowerLaw, float]:
        """``(increase a(W), loss rate lambda(W), nu)`` of the preset or the general parameters.

        Examples
        --------
        >>> AWP.create(preset="scalable", loss_prob=0.001).profiles()
        (PowerLaw(coefficient=0.01, exponent=1.0), PowerLaw(coefficient=0.001, exponent=1.0), 0.875)
        """
        if self.preset == "general":
            return (PowerLaw(self.a, self.alpha or 0.0), PowerLaw(self.lam, self.gamma or 0.0), float(self.nu))
        losses = PowerLaw(self.loss_prob, 1.0)
        if self.preset == "newreno":
            return PowerLaw(1.0), losses, 0.5
        if self.preset == "scalable":
            return PowerLaw(0.01, 1.0), losses, 0.875
        S = HIGHSPEED_EXPONENT if self.response_exponent is None else self.response_exponent
        return highspeed_increase(S), losses, HIGHSPEED_NU

    def pdmp(self) -> PDMP:
        """The window process as a :class:`PDMP` with declared power-law profiles.

        Examples
        --------
        NewReno maps to the linear-increase protocol with ``q = nu^2 = 1/4``:

        >>> AWP.create(preset="newreno", loss_prob=0.01).pdmp().q
        0.25
        """
        a, lam, nu = self.profiles()
        return PDMP(a, lam, nu=nu, w_min=self.w_min, w_max=self.w_max)

    def auto_method(self) -> str:
        """The analytic series where it describes the process (no ceiling), else the numerical solution.

        Examples
        --------
        >>> [AWP.create(preset="newreno", loss_prob=0.01, **kw).auto_method() for kw in ({}, {"w_max": 50})]
        ['analytic', 'numerical']
        """
        return "analytic" if self.pdmp().series_refusal() is None else "numerical"

    # -- solutions -> measures -------------------------------------------------------------
    def grid(self, sol: PDMPSolution) -> np.ndarray:
        """The ``points`` grid from ``grid_min`` (``w_min`` or 0) to ``grid_max`` (``w_max`` or a quantile).

        Examples
        --------
        >>> AWP.create(preset="newreno", loss_prob=0.01, w_max=40, points=5).grid(None).tolist()
        [0.0, 10.0, 20.0, 30.0, 40.0]
        """
        lo = self.grid_min if self.grid_min is not None else (self.w_min or 0.0)
        if self.grid_max is not None:
            hi = self.grid_max
        elif self.w_max is not None:
            hi = self.w_max
        else:
            hi = sol.quantile(1.0 - 1e-6)
        if not hi > lo:
            raise ModelError(f"grid_max must be > grid_min {lo:g}; got {hi:g}")
        return np.linspace(lo, hi, int(self.points))

    def pdmp_measure(self, measure: str, rep: PDMP, sol: PDMPSolution):
        """Map a :class:`PDMPSolution` to a measure (an :class:`Estimate` with its error).

        Examples
        --------
        A hand-made exponential law of mean 10 (``E[W^2] = 2 * 10^2``):

        >>> from exactq.representations.pdmp import StabilityVerdict
        >>> model = AWP.create(preset="general", a=1, lam=0.1, nu=0.5, k=2)
        >>> sol = PDMPSolution(StabilityVerdict(True, "m", 1.0, "m > 0"), "by hand",
        ...                    moment_fn=lambda k: (math.gamma(k + 1) * 10.0**k, 0.0))
        >>> model.pdmp_measure("window_moment", model.pdmp(), sol).value
        200.0
        """
        verdict = sol.stability
        info = {"stability": verdict.to_info(), "profiles": rep.describe()}
        if measure == "stable":
            return Estimate(bool(verdict.stable), 0.0, info=info)
        sol.require_stable()
        if measure in ("mean_window", "throughput", "window_moment"):
            if measure == "window_moment":
                if self.k is None:
                    raise ModelError("window_moment needs the parameter k (the order of E[W^k]), e.g. k=2")
                order = float(self.k)
            else:
                order = 1.0
            value, err = sol.moment_estimate(order)
            if math.isinf(value):
                info["moment"] = (f"E[W^{order:g}] is infinite: the stationary law has a Pareto tail of index "
                                  f"{verdict.details.get('tail_index', float('nan')):.6g} <= {order:g}")
                info["infinite"] = info["moment"]  # the exact value is infinite (not an overflow)
            if measure == "throughput":
                value, err = value / self.rtt, err / self.rtt
                info["throughput_unit"] = "packets per second" if self.rtt != 1.0 else "packets per round trip"
            return Estimate(value, err, info=info)
        grid = self.grid(sol)
        values, errors = sol.density_estimate(grid) if measure == "density" else sol.cdf_estimate(grid)
        info["grid"] = grid.tolist()
        if sol.atom is not None:
            info["atom"] = {"w_max": sol.atom[0], "probability": sol.atom[1]}
        return Estimate(values.tolist(), float(np.max(errors)), info=info)
