"""The ``fluid`` method: fluid-limit fixed points of heterogeneous many-server dispatching.

N servers in classes j = 1..J (a fraction gamma_j of the servers, exponential rate
mu_j each) receive Poisson arrivals of rate N * lambda. As N -> infinity the
fractions of busy servers converge to the fixed point of the fluid (mean-field)
dynamics. Three dispatch rules cover the policies of the literature:

``priority``
    An arrival joins an idle server of the fastest class that has one (speed-aware
    JSQ and JIQ). The fixed point has no waiting; the busy fractions
    x_j (busy class-j servers per server of the system) solve the linear program
    (Bhambay & Mukhopadhyay 2022, the "delay-optimal configuration")

        minimise sum_j x_j   s.t.   sum_j mu_j x_j = lambda,   0 <= x_j <= gamma_j,

    whose solution fills the fastest classes first. Solved in closed form
    (:func:`fill_fastest_first`) and, independently, by :func:`fill_by_linprog`.
``idle-uniform``
    An arrival joins an idle server chosen uniformly among all idle servers
    (JIQ, and JSQ with uniform ties: the shortest queues are the idle ones).
    Stolyar's fixed point (PULL, 2015): with I = sum_j (gamma_j - x_j) the idle
    fraction, balance mu_j x_j = lambda (gamma_j - x_j) / I gives
    x_j = lambda gamma_j / (lambda + mu_j I), and I > 0 is the unique root of

        g(I) = 1 - sum_j gamma_j mu_j / (lambda + mu_j I) = 0,

    which is increasing in I, negative at 0 iff lambda < sum_j gamma_j mu_j and
    positive at 1. Solved by Brent's method (:func:`idle_uniform_fixed_point`); the
    independent check solves the J balance equations in x with ``scipy.optimize.root``.
``uniform``
    An arrival joins a uniformly random server: every server is an M/M/1 queue with
    arrival rate lambda, for every N (stable iff lambda < min_j mu_j). Closed form.

With no waiting (the first two rules) E[T] = sum_j x_j / lambda (Little's law on
the busy servers). The mean-field limit is a *limit* value; the finite-N values of
the ``ctmc`` method approach it as N grows.

Representation (the ``fluid_problem`` protocol)
-----------------------------------------------
``fluid_problem() -> mapping`` with plain data: ``rates`` (J,) mu_j > 0,
``fractions`` (J,) gamma_j > 0 summing to 1, ``arrival_rate`` lambda > 0 (per
server) and ``dispatch`` (one of :data:`DISPATCH_RULES`).
``fluid_measure(measure, point) -> float | list`` maps a :class:`FluidPoint` to the
model's measure.

References
----------
S. Bhambay, A. Mukhopadhyay, "Asymptotic optimality of speed-aware JSQ for
heterogeneous service systems", Performance Evaluation 157-158 (2022) 102320.
A. L. Stolyar, "Pull-based load distribution in large-scale heterogeneous service
systems", Queueing Systems 80 (2015) 341-361.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, UnstableError
from exactq.result import Result

__all__ = [
    "DISPATCH_RULES",
    "FluidPoint",
    "fill_fastest_first",
    "fill_by_linprog",
    "idle_uniform_fixed_point",
    "fluid_fixed_point",
    "solve_fluid",
]

DISPATCH_RULES = ("priority", "idle-uniform", "uniform")
_EPS = np.finfo(float).eps


@dataclass
class FluidPoint:
    """A fluid-limit fixed point; per-class arrays have shape (J,).

    Attributes
    ----------
    dispatch : str
        The dispatch rule.
    busy : ndarray
        x_j, busy class-j servers as a fraction of *all* servers (0 <= x_j <= gamma_j).
    fractions : ndarray
        gamma_j.
    mean_queue : ndarray
        Mean number of jobs at one class-j server (in service plus waiting).
    mean_waiting : ndarray
        Mean number of jobs waiting (not in service) at one class-j server.
    dispatch_fractions : ndarray
        Fraction of arrivals sent to class j (sums to 1).
    p_wait : float
        Probability that an arrival joins a busy server.
    mean_response_time : float
        E[T] = (mean number per server) / lambda, Little's law.
    mean_waiting_time : float
        E[W], time in queue excluding service.
    mean_number_per_server : float
        sum_j gamma_j mean_queue_j.
    idle : float
        Fraction of idle servers.
    error_estimate : float
        Bound on the absolute error of ``mean_response_time`` from the computation.
    info : dict
        Method details (root residual, iterations, ...).
    """

    dispatch: str
    busy: np.ndarray
    fractions: np.ndarray
    mean_queue: np.ndarray
    mean_waiting: np.ndarray
    dispatch_fractions: np.ndarray
    p_wait: float
    mean_response_time: float
    mean_waiting_time: float
    mean_number_per_server: float
    idle: float
    error_estimate: float
    info: dict = field(default_factory=dict)

    @property
    def busy_fractions(self) -> np.ndarray:
        """Fraction of the class-j servers that are busy, x_j / gamma_j."""
        return self.busy / self.fractions


# -- validation -----------------------------------------------------------------------


def _validate(rates, fractions, arrival_rate):
    mu = np.asarray(rates, dtype=float).ravel()
    gamma = np.asarray(fractions, dtype=float).ravel()
    lam = float(arrival_rate)
    if mu.size == 0 or mu.shape != gamma.shape:
        raise ModelError(f"rates and fractions must be non-empty and of equal length; got {mu.size} and {gamma.size}")
    if not np.all(np.isfinite(mu)) or np.any(mu <= 0):
        raise ModelError(f"rates must be > 0 and finite; got {mu.tolist()}")
    if not np.all(np.isfinite(gamma)) or np.any(gamma <= 0):
        raise ModelError(f"fractions must be > 0 and finite; got {gamma.tolist()}")
    if abs(gamma.sum() - 1.0) > 1e-9:
        raise ModelError(f"fractions must sum to 1; got sum {gamma.sum():.12g}")
    if not (math.isfinite(lam) and lam > 0):
        raise ModelError(f"arrival_rate must be > 0 and finite; got {arrival_rate!r}")
    return mu, gamma, lam


def _check_capacity(mu, gamma, lam):
    cap = float(gamma @ mu)
    if lam >= cap:
        raise UnstableError(
            f"arrival_rate must be < mean service rate sum_j fraction_j speed_j = {cap:g} "
            f"for stability; got {lam:g}"
        )


# -- the three fixed points -----------------------------------------------------------


def fill_fastest_first(rates, fractions, arrival_rate) -> np.ndarray:
    """Busy fractions of the speed-priority fluid limit, in closed form.

    Solves ``min sum x_j  s.t.  sum mu_j x_j = lambda, 0 <= x_j <= gamma_j``
    (Bhambay & Mukhopadhyay 2022) by filling the classes in decreasing order of
    speed: with the classes sorted so that mu_(1) >= mu_(2) >= ... and
    C_k = sum_{i<=k} mu_(i) gamma_(i), x_(k) = min(gamma_(k), (lambda - C_{k-1})^+ / mu_(k)).
    Equally fast classes are filled in proportion to their fractions (every solution
    of the program has the same objective; this one is symmetric).

    Parameters
    ----------
    rates, fractions : (J,) array_like
        mu_j > 0 and gamma_j > 0 with sum gamma_j = 1.
    arrival_rate : float
        lambda, arrivals per server; must be < sum_j gamma_j mu_j.

    Returns
    -------
    (J,) ndarray
        x_j in the order of the input classes.

    Raises
    ------
    UnstableError
        If lambda >= sum_j gamma_j mu_j.

    Examples
    --------
    >>> x = fill_fastest_first([2.0, 1.0], [0.5, 0.5], 1.2)
    >>> bool(np.allclose(x, [0.5, 0.2]) and np.isclose(x.sum() / 1.2, 0.58333333))
    True
    """
    mu, gamma, lam = _validate(rates, fractions, arrival_rate)
    _check_capacity(mu, gamma, lam)
    speeds, group = np.unique(-mu, return_inverse=True)  # groups of equal speed, fastest first
    cap_group = np.bincount(group, weights=mu * gamma)
    before = np.concatenate([[0.0], np.cumsum(cap_group)[:-1]])
    share = np.clip((lam - before) / cap_group, 0.0, 1.0)  # busy fraction within each speed group
    return gamma * share[group]


def fill_by_linprog(rates, fractions, arrival_rate) -> tuple[np.ndarray, dict]:
    """The same linear program solved by ``scipy.optimize.linprog`` (HiGHS).

    An independent check of :func:`fill_fastest_first`. With equally fast classes the
    optimum is not unique; compare the objective ``x.sum()`` then.

    Returns
    -------
    x : (J,) ndarray
    info : dict
        ``status``, ``message`` and the equality residual.
    """
    from scipy.optimize import linprog

    mu, gamma, lam = _validate(rates, fractions, arrival_rate)
    _check_capacity(mu, gamma, lam)
    res = linprog(np.ones_like(mu), A_eq=mu[None, :], b_eq=[lam],
                  bounds=list(zip(np.zeros_like(gamma), gamma)), method="highs")
    if res.status != 0:
        raise ModelError(f"linprog failed on the fluid program: {res.message}")
    x = np.asarray(res.x, dtype=float)
    return x, {"status": int(res.status), "message": str(res.message),
               "residual": float(abs(mu @ x - lam))}


def idle_uniform_fixed_point(rates, fractions, arrival_rate) -> tuple[np.ndarray, float, dict]:
    """Busy fractions of the fluid limit when arrivals join a uniformly chosen idle server.

    Stolyar (2015): x_j = lambda gamma_j / (lambda + mu_j I), where the idle fraction
    I in (0, 1) is the root of g(I) = 1 - sum_j gamma_j mu_j / (lambda + mu_j I)
    (module docstring), found by ``scipy.optimize.brentq`` with ``xtol = 1e-15``.

    Returns
    -------
    x : (J,) ndarray
    idle : float
        I.
    info : dict
        ``residual`` |g(I)|, ``iterations`` and ``idle_error`` (a bound on |I - I*|).

    Examples
    --------
    One class is the M/M/infinity-like no-wait limit with I = 1 - lambda / mu:

    >>> x, idle, _ = idle_uniform_fixed_point([2.0], [1.0], 1.5)
    >>> bool(np.isclose(idle, 0.25) and np.isclose(x[0], 0.75))
    True
    """
    from scipy.optimize import brentq

    mu, gamma, lam = _validate(rates, fractions, arrival_rate)
    _check_capacity(mu, gamma, lam)

    def g(idle):
        return 1.0 - float(np.sum(gamma * mu / (lam + mu * idle)))

    xtol = 1e-15
    idle, r = brentq(g, 0.0, 1.0, xtol=xtol, rtol=4 * _EPS, full_output=True)
    x = lam * gamma / (lam + mu * idle)
    err = 2 * (xtol + 4 * _EPS * abs(idle))
    return x, float(idle), {"residual": abs(g(idle)), "iterations": int(r.iterations), "idle_error": err}


def _idle_uniform_by_root(mu, gamma, lam, x0):
    """Independent check: solve mu_j x_j I(x) = lambda (gamma_j - x_j) for x with ``root``."""
    from scipy.optimize import root

    def F(x):
        idle = np.sum(gamma - x)
        return mu * x * idle - lam * (gamma - x)

    sol = root(F, x0, method="hybr", tol=1e-15)
    return np.asarray(sol.x, dtype=float), bool(sol.success), float(np.max(np.abs(F(sol.x))))


def fluid_fixed_point(rates, fractions, arrival_rate, dispatch: str) -> FluidPoint:
    """The fluid-limit fixed point and its measures for one dispatch rule.

    Parameters
    ----------
    rates, fractions : (J,) array_like
        mu_j > 0 and gamma_j > 0 (sum 1).
    arrival_rate : float
        lambda, arrivals per server (total N lambda).
    dispatch : {"priority", "idle-uniform", "uniform"}
        See the module docstring.

    Returns
    -------
    FluidPoint

    Raises
    ------
    UnstableError
        If lambda >= sum_j gamma_j mu_j (``priority``, ``idle-uniform``) or
        lambda >= min_j mu_j (``uniform``).

    Examples
    --------
    Random routing is M/M/1 at every server: E[T] = sum_j gamma_j / (mu_j - lambda).

    >>> p = fluid_fixed_point([2.0, 1.0], [0.5, 0.5], 0.6, "uniform")
    >>> bool(np.isclose(p.mean_response_time, 0.5 / 1.4 + 0.5 / 0.4))
    True
    """
    mu, gamma, lam = _validate(rates, fractions, arrival_rate)
    if dispatch not in DISPATCH_RULES:
        raise ModelError(f"dispatch must be one of {', '.join(DISPATCH_RULES)}; got {dispatch!r}")
    info: dict = {}
    if dispatch == "uniform":
        if lam >= mu.min():
            raise UnstableError(
                f"arrival_rate must be < slowest speed {mu.min():g} for stability under random "
                f"routing (every server is an M/M/1 queue); got {lam:g}"
            )
        rho = lam / mu
        busy = gamma * rho
        queue = rho / (1.0 - rho)
        waiting = rho * rho / (1.0 - rho)
        dispatch_fr = gamma.copy()
        p_wait = float(gamma @ rho)
        ET = float(gamma @ (1.0 / (mu - lam)))
        EW = float(gamma @ (rho / (mu - lam)))
        err = 8 * _EPS * mu.size * ET / float(np.min(1.0 - rho))
        idle = float(np.sum(gamma - busy))
        info["closed_form"] = "M/M/1 per server"
    else:
        if dispatch == "priority":
            busy = fill_fastest_first(mu, gamma, lam)
            idle = float(np.sum(gamma - busy))
            err_busy = 8 * _EPS * mu.size * float(gamma.max())
            info["closed_form"] = "fill fastest first"
        else:
            busy, idle, inf = idle_uniform_fixed_point(mu, gamma, lam)
            # dx_j/dI = -lambda gamma_j mu_j / (lambda + mu_j I)^2, summed over j
            sens = float(np.sum(lam * gamma * mu / (lam + mu * idle) ** 2))
            err_busy = sens * inf["idle_error"] + 8 * _EPS * mu.size
            info.update({"idle_residual": inf["residual"], "iterations": inf["iterations"]})
        queue = busy / gamma
        waiting = np.zeros_like(busy)
        dispatch_fr = mu * busy / lam
        p_wait = 0.0
        ET = float(busy.sum() / lam)
        EW = 0.0
        err = err_busy / lam + 4 * _EPS * ET
    return FluidPoint(
        dispatch=dispatch,
        busy=busy,
        fractions=gamma,
        mean_queue=queue,
        mean_waiting=waiting,
        dispatch_fractions=dispatch_fr,
        p_wait=p_wait,
        mean_response_time=ET,
        mean_waiting_time=EW,
        mean_number_per_server=float(gamma @ queue),
        idle=idle,
        error_estimate=float(err),
        info=info,
    )


def _cross_check(problem: dict, point: FluidPoint) -> dict:
    """Re-solve the fixed point by an independent method (for ``verify=True``)."""
    mu, gamma, lam = _validate(problem["rates"], problem["fractions"], problem["arrival_rate"])
    rule = point.dispatch
    if rule == "priority":
        x, inf = fill_by_linprog(mu, gamma, lam)
        # the optimum is unique up to equally fast classes: compare the objective
        diff = abs(x.sum() - point.busy.sum()) / lam
        return {"independent": "scipy.optimize.linprog (HiGHS)", "abs_diff": diff, **inf}
    if rule == "idle-uniform":
        x, ok, resid = _idle_uniform_by_root(mu, gamma, lam, x0=0.5 * gamma)
        diff = float(np.max(np.abs(x - point.busy))) * mu.size / lam
        return {"independent": "scipy.optimize.root on the balance equations in x", "abs_diff": diff,
                "success": ok, "residual": resid}
    # uniform: E[T] from the per-class mean queues by Little's law
    ET = float(gamma @ point.mean_queue) / lam
    return {"independent": "Little's law on the M/M/1 mean queue lengths",
            "abs_diff": abs(ET - point.mean_response_time)}


@register_method(
    "fluid",
    requires="fluid_problem",
    doc="fluid (mean-field) limit N -> infinity: fixed point of the dispatch dynamics (LP or root)",
    options=("verify", "strict"),
)
def solve_fluid(model, measure, *, tol=1e-9, truncation=None, verify=False, strict=False,
                **_ignored) -> Result:
    """Evaluate ``measure`` at the fluid-limit fixed point of ``model.fluid_problem()``.

    The value is the N -> infinity limit (not a finite-N value). ``error_estimate``
    is the numerical error of the fixed point (rounding, root tolerance), as a relative
    error of E[T] times the magnitude of the value.
    ``verify=True`` re-solves it independently (``linprog`` for ``priority``,
    ``scipy.optimize.root`` for ``idle-uniform``) and reports the agreement in
    ``info["verify"]``; a disagreement above ``tol`` warns (raises with ``strict``).
    """
    t0 = time.perf_counter()
    if truncation is not None:
        raise ModelError("truncation does not apply to the fluid method; got truncation="
                         f"{truncation!r}")
    problem = dict(model.fluid_problem())
    point = fluid_fixed_point(problem["rates"], problem["fractions"], problem["arrival_rate"],
                              problem["dispatch"])
    value = model.fluid_measure(measure, point)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    # the fixed point's relative error carries over to every measure computed from it
    rel = point.error_estimate / max(point.mean_response_time, 1e-300)
    err = rel * float(np.max(np.abs(np.atleast_1d(np.asarray(value, dtype=float)))))
    info = {"limit": "N -> infinity (fluid / mean-field fixed point)", "dispatch": point.dispatch,
            "busy": point.busy.tolist(), "idle_fraction": point.idle, "arithmetic": "float64",
            **point.info}
    if verify:
        chk = _cross_check(problem, point)
        chk["agree"] = bool(chk["abs_diff"] <= max(tol * point.mean_response_time, 1e-13))
        info["verify"] = chk
        if not chk["agree"]:
            msg = f"verify: fluid fixed point and {chk['independent']} differ by {chk['abs_diff']:.3e}"
            if strict:
                raise ConvergenceError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=3)
    return Result(value=value, method=f"fluid/{point.dispatch}", error_estimate=err,
                  residual=point.info.get("idle_residual"), seconds=time.perf_counter() - t0, info=info)
