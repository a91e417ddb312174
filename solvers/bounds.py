"""Bounds for the symmetric two-server shortest queue from threshold-modified systems.

The ``bounds`` method brackets a measure of join-the-shortest-queue (JSQ) with two
identical exponential servers between the same measure of two modified systems
that are quasi-birth-death processes (solved exactly by :mod:`exactq.solvers.qbd`):

* **threshold jockeying** (lower system): as soon as the difference between the
  queues would exceed ``T``, one job jockeys from the longer queue to the shorter;
* **threshold blocking** (upper system): while the difference equals ``T`` the
  server of the shorter queue is switched off.

Adan, van Houtum & van der Wal (1994) prove that the total number of jobs ``L`` in
JSQ is stochastically larger than in the jockeying system and stochastically
smaller than in the blocking system, for every ``T >= 1`` (proved by precedence
relations on the value function; van Houtum, Zijm, Adan & Wessels (1998) recast
the argument as a comparison of average costs for a cost structure).
Every job receives exactly its exponential service in all three systems, so the
mean number of busy servers is ``lambda / mu`` in each, and the stochastic order
of ``L`` gives bounds for

=====================  =====================================  ==========  ==========
measure                value                                  lower       upper
=====================  =====================================  ==========  ==========
``mean_number``        ``E[L]``                               jockeying   blocking
``mean_response_time`` ``E[L] / lambda`` (Little)             jockeying   blocking
``mean_waiting_time``  ``E[L - busy] / lambda = E[T] - 1/mu`` jockeying   blocking
``prob_empty``         ``P(L = 0)``                           blocking    jockeying
=====================  =====================================  ==========  ==========

Waiting time means time *not in service*: in JSQ (and in the jockeying system) the
jobs not in service are ``sum_i max(q_i - 1, 0)``; in the blocking system the job at
the head of a switched-off shorter queue waits as well. (Counting only
``sum_i max(q_i - 1, 0)`` in the blocking system drops the blocked job's waiting;
that quantity is not covered by the theorem and is not used, although on the test
grid it also stayed above the exact value.) The directions in the table were
checked numerically against the exact JSQ for ``rho in {0.1, ..., 0.9, 0.95, 0.99}``
and ``T in 1..10`` (``tests/test_bounds.py``); none failed.

The QBDs
--------
State ``(m, d)``: level ``m = min(q1, q2)`` (the shorter queue, job in service
included), phase ``d = |q1 - q2| in {0, ..., T}``; arrival rate ``lambda``,
service rate ``mu`` per server. Levels ``m >= 1`` (blocks ``A0`` up, ``A1`` local,
``A2`` down):

::

    from      event                                        to          rate     block
    (m, 0)    arrival (either queue)                       (m, 1)      lambda   A1
    (m, 0)    departure (either queue)                     (m-1, 1)    2 mu     A2
    (m, d)    arrival joins the shorter queue, d >= 1      (m+1, d-1)  lambda   A0
    (m, d)    departure from the longer queue, d >= 1      (m, d-1)    mu       A1
    (m, d)    departure from the shorter queue, 1 <= d < T (m-1, d+1)  mu       A2
    (m, T)    shorter queue departs, one job jockeys  (J)  (m, T-1)    mu       A1
    (m, T)    shorter queue's server switched off     (B)  --          0        --

(J) threshold jockeying only: the departure would make the difference ``T + 1``;
one job moves from the longer queue, giving ``(m, T - 1)``. (B) threshold blocking
only: no departure from the shorter queue at ``d = T``. Level 0 (block ``B1``; the
shorter queue is empty, its server idle, and neither modification acts):
``(0, 0) -> (0, 1)`` at rate ``lambda``; ``(0, d) -> (0, d - 1)`` at rate ``mu``
(``d >= 1``); arrivals from ``(0, d)``, ``d >= 1``, go up to ``(1, d - 1)`` (``A0``),
and level 1 goes down into level 0 through ``A2``. With ``T = 1`` the jockeying
system is the M/M/2 queue, ``E[L] = 2 rho / (1 - rho^2)``, ``rho = lambda/(2 mu)``.

Stability: the jockeying system is stable iff ``lambda < 2 mu``. Blocking reduces
capacity: the phase process is a birth-death chain with stationary law
``pi(d) = c r^(d-1) pi(0)``, ``c = (lambda + 2 mu)/(lambda + mu)``,
``r = mu / (lambda + mu)``, and the system is stable iff the mean drift
``lambda P(d >= 1) < 2 mu P(d = 0) + mu P(1 <= d < T)`` (for ``T = 1``:
``lambda < sqrt(2) mu``; as ``T -> oo``: ``lambda < 2 mu``).
:func:`min_stable_threshold` gives the smallest stable ``T``.

References
----------
I. J. B. F. Adan, G. J. van Houtum and J. van der Wal, "Upper and lower bounds for
the waiting time in the symmetric shortest queue system", Ann. Oper. Res. 48 (1994)
197-217.
G. J. van Houtum, W. H. M. Zijm, I. J. B. F. Adan and J. Wessels, "Bounds for
performance characteristics: a systematic approach via cost structures",
Stochastic Models 14 (1998).
I. J. B. F. Adan, J. Wessels and W. H. M. Zijm, "Matrix-geometric analysis of the
shortest queue problem with threshold jockeying", Oper. Res. Lett. 13 (1993) 107-112.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Mapping, NamedTuple

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ModelError,
    NotApplicableError,
    TruncationError,
    UnstableError,
)
from exactq.result import Result

from exactq.representations import QBD, QBDSolution

from .qbd import MAX_PHASES, solve_qbd

__all__ = [
    "SYSTEMS",
    "MEASURES",
    "BoundPair",
    "threshold_qbd",
    "solve_threshold_system",
    "threshold_measure",
    "min_stable_threshold",
    "threshold_bounds",
    "adaptive_threshold_bounds",
    "solve_bounds",
    "MAX_THRESHOLD",
]

SYSTEMS = ("jockeying", "blocking")
#: measure -> (system giving the lower bound, system giving the upper bound)
MEASURES = {
    "mean_number": ("jockeying", "blocking"),
    "mean_response_time": ("jockeying", "blocking"),
    "mean_waiting_time": ("jockeying", "blocking"),
    "prob_empty": ("blocking", "jockeying"),
}
#: largest threshold tried by :func:`adaptive_threshold_bounds` (T + 1 phases, dense)
MAX_THRESHOLD = 400
_EPS = np.finfo(float).eps


class BoundPair(NamedTuple):
    """``lower <= exact JSQ value <= upper``, with details in ``info``."""

    lower: float
    upper: float
    info: dict


# ------------------------------------------------------------------------ validation
def _check_rates(arrival_rate: float, service_rate: float, threshold: int) -> tuple[float, float, int]:
    lam, mu = float(arrival_rate), float(service_rate)
    if not (math.isfinite(lam) and lam > 0):
        raise ModelError(f"arrival_rate must be > 0; got {arrival_rate!r}")
    if not (math.isfinite(mu) and mu > 0):
        raise ModelError(f"service_rate must be > 0; got {service_rate!r}")
    if int(threshold) != threshold or threshold < 1:
        raise ModelError(f"threshold must be an integer >= 1; got {threshold!r}")
    if lam >= 2 * mu:
        raise UnstableError(
            f"arrival_rate must be < total service rate {2 * mu:g} for stability; got {lam:g}"
        )
    return lam, mu, int(threshold)


def _blocking_drift(lam: float, mu: float, T: int) -> float:
    """Mean level drift (up - down) of the threshold-blocking QBD, closed form."""
    c = (lam + 2 * mu) / (lam + mu)
    r = mu / (lam + mu)
    s_all = c * (1 - r ** T) / (1 - r)  # sum_{d=1..T} pi(d) / pi(0)
    s_below = c * (1 - r ** (T - 1)) / (1 - r)  # sum_{d=1..T-1}
    return (lam * s_all - (2 * mu + mu * s_below)) / (1 + s_all)


def min_stable_threshold(arrival_rate: float, service_rate: float) -> int:
    """Smallest ``T >= 1`` for which the threshold-blocking system is stable.

    Uses the closed-form mean drift of the module docstring; raises
    :class:`UnstableError` if ``arrival_rate >= 2 service_rate`` (no ``T`` works).

    Examples
    --------
    >>> min_stable_threshold(1.4, 1.0), min_stable_threshold(1.42, 1.0)  # sqrt(2) = 1.414...
    (1, 2)
    """
    lam, mu, _ = _check_rates(arrival_rate, service_rate, 1)
    cap = MAX_PHASES - 1
    for T in range(1, cap + 1):
        if _blocking_drift(lam, mu, T) < -1e-12 * lam:
            return T
    raise UnstableError(
        f"threshold blocking at arrival_rate {lam:.12g} (service rate {mu:g} per server) needs a "
        f"threshold above {cap}, beyond the dense QBD solver's limit of {MAX_PHASES} phases"
    )


# ------------------------------------------------------------------------ the QBDs
def threshold_qbd(arrival_rate: float, service_rate: float, threshold: int, system: str) -> dict:
    """Blocks of the threshold jockeying or blocking QBD (module docstring).

    Returns
    -------
    dict
        ``A0``, ``A1``, ``A2``, ``B1`` as ``(T + 1, T + 1)`` arrays; phase ``d`` is
        the queue difference, the level the shorter queue. ``B0 = A0``, ``B2 = A2``.
    """
    if system not in SYSTEMS:
        raise ModelError(f"system must be one of {', '.join(SYSTEMS)}; got {system!r}")
    if int(threshold) != threshold or threshold < 1:
        raise ModelError(f"threshold must be an integer >= 1; got {threshold!r}")
    lam, mu, T = float(arrival_rate), float(service_rate), int(threshold)
    m = T + 1
    d = np.arange(1, m)
    A0 = np.zeros((m, m))
    A1 = np.zeros((m, m))
    A2 = np.zeros((m, m))
    A0[d, d - 1] = lam  # arrival joins the shorter queue
    A1[0, 1] = lam  # arrival at equal queues
    A1[d, d - 1] += mu  # departure from the longer queue
    A2[0, 1] = 2 * mu  # departure at equal queues
    inner = np.arange(1, T)
    A2[inner, inner + 1] = mu  # departure from the shorter queue, difference < T
    if system == "jockeying":
        A1[T, T - 1] += mu  # shorter departs at d = T, one job jockeys
    # blocking: no departure from the shorter queue at d = T
    B1 = A1.copy()
    if system == "jockeying":
        B1[T, T - 1] -= mu  # level 0: the shorter queue is empty, nothing to jockey
    np.fill_diagonal(A1, 0.0)
    np.fill_diagonal(B1, 0.0)
    np.fill_diagonal(A1, -(A0.sum(1) + A1.sum(1) + A2.sum(1)))
    np.fill_diagonal(B1, -(A0.sum(1) + B1.sum(1)))
    return {"A0": A0, "A1": A1, "A2": A2, "B1": B1}


def solve_threshold_system(arrival_rate: float, service_rate: float, threshold: int, system: str,
                           *, algorithm: str = "logarithmic_reduction", strict: bool = False) -> QBDSolution:
    """Solve the jockeying or blocking QBD; a clear :class:`UnstableError` if blocking is unstable."""
    lam, mu, T = _check_rates(arrival_rate, service_rate, threshold)
    if system == "blocking" and _blocking_drift(lam, mu, T) >= -1e-12 * lam:
        T_min = min_stable_threshold(lam, mu)
        raise UnstableError(
            f"threshold blocking with threshold={T} is unstable at arrival_rate {lam:.12g} "
            f"(service rate {mu:g} per server): use threshold >= {T_min}"
        )
    blocks = threshold_qbd(lam, mu, T, system)
    return solve_qbd(QBD(blocks["A0"], blocks["A1"], blocks["A2"], blocks["B1"]),
                     algorithm=algorithm, strict=strict)


def _rewards(system: str, T: int) -> dict:
    """Rewards as (level-0 value, constant, slope) per phase, affine in the level."""
    d = np.arange(T + 1, dtype=float)
    busy0 = (d >= 1).astype(float)
    busy = np.full(T + 1, 2.0)
    if system == "blocking":
        busy[T] = 1.0
    return {
        "number": (d, d, 2.0 * np.ones(T + 1)),  # L = 2m + d
        "busy": (busy0, busy, np.zeros(T + 1)),
        "not_in_service": (d - busy0, d - busy, 2.0 * np.ones(T + 1)),
        "empty": ((d == 0).astype(float), np.zeros(T + 1), np.zeros(T + 1)),
    }


def _numerical_error(sol: QBDSolution, value: float, coeff: float) -> float:
    """Rounding-error estimate of an expectation computed from a QBD solution.

    The level sums pass ``pi_1`` through ``(I - R)^-1`` twice, so relative rounding
    errors of size ``m eps`` in ``R`` and ``pi`` (plus the balance residual) are
    amplified by about ``kappa^2``, with ``kappa = pi_1 (I - R)^-1 1 / pi_1 1`` (about
    ``1 / (1 - sp(R))``); ``coeff`` is the largest reward coefficient. An estimate
    with a safety factor of 10, not a proof: against a 40-digit mpmath re-solve it
    exceeds the actual error by 10^2 to 10^4 (``tests/test_bounds.py``).
    """
    pi1 = sol.pi1
    mass = float(pi1.sum())
    kappa = float(pi1 @ sol.resolvent().sum(1)) / mass if mass > 0 else 1.0
    m = sol.n_phases
    return float(10.0 * kappa * kappa * (m * _EPS + sol.residual) * (abs(value) + max(coeff, 1.0)))


def threshold_measure(sol: QBDSolution, system: str, threshold: int, measure: str,
                      arrival_rate: float) -> tuple[float, float]:
    """``(value, numerical error estimate)`` of ``measure`` in a solved threshold system."""
    if measure not in MEASURES:
        raise ModelError(f"unknown measure {measure!r} for the bounds method; valid: {', '.join(MEASURES)}")
    rw = _rewards(system, int(threshold))
    lam = float(arrival_rate)
    if measure == "prob_empty":
        value = float(sol.pi0[0])
        return value, _numerical_error(sol, value, 1.0)
    key = "not_in_service" if measure == "mean_waiting_time" else "number"
    value = sol.expect_affine(*rw[key])
    err = _numerical_error(sol, value, 2.0 * threshold)
    if measure in ("mean_response_time", "mean_waiting_time"):
        value, err = value / lam, err / lam
    return value, err


# ------------------------------------------------------------------------ the bounds
def threshold_bounds(arrival_rate: float, service_rate: float, threshold: int, measure: str,
                     *, algorithm: str = "logarithmic_reduction", strict: bool = False) -> BoundPair:
    """Lower and upper bound of a symmetric two-server JSQ measure at threshold ``T``.

    Parameters
    ----------
    arrival_rate : float
        Poisson arrival rate ``lambda`` (total), ``< 2 service_rate``.
    service_rate : float
        Rate ``mu`` of each of the two servers.
    threshold : int
        ``T >= 1``; the blocking system needs ``T >= min_stable_threshold(lambda, mu)``.
    measure : str
        One of :data:`MEASURES` (``mean_number``, ``mean_response_time``,
        ``mean_waiting_time``, ``prob_empty``).
    algorithm : str
        The QBD algorithm (:func:`~exactq.solvers.qbd.solve_qbd`).
    strict : bool
        Passed to the QBD solver.

    Returns
    -------
    BoundPair
        ``lower``, ``upper`` (each widened outward by its rounding-error estimate)
        and ``info`` with both systems' values and QBD diagnostics.

    Raises
    ------
    UnstableError
        ``lambda >= 2 mu``, or the blocking system is unstable at this ``T`` (the
        message names the smallest stable threshold).

    Examples
    --------
    With ``T = 1`` the jockeying system is M/M/2, ``E[L] = 2 rho / (1 - rho^2)``:

    >>> b = threshold_bounds(1.0, 1.0, 1, "mean_number")
    >>> bool(abs(b.info["jockeying"]["value"] - 2 * 0.5 / (1 - 0.25)) < 1e-12)
    True
    >>> bool(b.lower <= 1.42632075 <= b.upper)   # exact JSQ at rho = 0.5
    True
    """
    t0 = time.perf_counter()
    lam, mu, T = _check_rates(arrival_rate, service_rate, threshold)
    if measure not in MEASURES:
        raise ModelError(f"unknown measure {measure!r} for the bounds method; valid: {', '.join(MEASURES)}")
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        sol = solve_threshold_system(lam, mu, T, system, algorithm=algorithm, strict=strict)
        value, err = threshold_measure(sol, system, T, measure, lam)
        busy = sol.expect_affine(*_rewards(system, T)["busy"])
        out[system] = {
            "value": value,
            "numerical_error": err,
            "spectral_radius": sol.spectral_radius,
            "residual": sol.residual,
            "g_defect": sol.g_defect,
            "nit": sol.nit,
            "mean_busy_servers_defect": abs(busy - lam / mu),
            "_sol": sol,
        }
    lo_sys, up_sys = MEASURES[measure]
    lower = out[lo_sys]["value"] - out[lo_sys]["numerical_error"]
    upper = out[up_sys]["value"] + out[up_sys]["numerical_error"]
    if lower > upper:  # pragma: no cover - would contradict the theorem
        raise ConvergenceError(f"bounds crossed at threshold {T}: lower {lower!r} > upper {upper!r}")
    mid = 0.5 * (lower + upper)
    info = {
        "threshold": T,
        "lower_system": f"threshold {lo_sys}",
        "upper_system": f"threshold {up_sys}",
        "relative_width": (upper - lower) / abs(mid) if mid else math.inf,
        "algorithm": algorithm,
        "seconds": time.perf_counter() - t0,
    }
    for system in SYSTEMS:
        info[system] = {k: v for k, v in out[system].items() if not k.startswith("_")}
    return BoundPair(lower, upper, info)


def adaptive_threshold_bounds(arrival_rate: float, service_rate: float, measure: str, *,
                              rtol: float = 1e-6, start: int | None = None,
                              max_threshold: int = MAX_THRESHOLD,
                              algorithm: str = "logarithmic_reduction", strict: bool = False) -> BoundPair:
    """Bounds with the threshold grown until ``upper - lower <= rtol * |midpoint|``.

    ``T`` starts at ``max(start, min_stable_threshold)`` (``start`` defaults to 2) and
    grows by ``max(1, T // 4)`` per step. Every threshold gives valid bounds, so the
    result is the intersection of all those computed (``info["threshold"]`` is the
    last one). The loop also stops when the width no longer shrinks (the rounding
    margin dominates, about 1e-11 to 1e-9 relative depending on the load) or at
    ``max_threshold``; if ``rtol`` is not met, an :class:`AccuracyWarning` is issued
    (a :class:`TruncationError` with ``strict=True``); the bounds are still valid.
    """
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise ModelError(f"rtol must be in (0, 1); got {rtol!r}")
    lam, mu, _ = _check_rates(arrival_rate, service_rate, 1)
    T = max(int(start) if start is not None else 2, min_stable_threshold(lam, mu))
    history = []
    lower, upper = -math.inf, math.inf
    prev_width = math.inf
    while True:
        b = threshold_bounds(lam, mu, T, measure, algorithm=algorithm, strict=strict)
        history.append({"threshold": T, "lower": b.lower, "upper": b.upper})
        lower, upper = max(lower, b.lower), min(upper, b.upper)
        width = upper - lower
        mid = 0.5 * (lower + upper)
        if width <= rtol * abs(mid) or (mid == 0 and width <= rtol):
            break
        stalled = b.upper - b.lower >= prev_width
        if stalled or T >= max_threshold:
            why = "the width stopped shrinking (rounding margin)" if stalled else "max_threshold reached"
            msg = (f"bounds: relative width {width / abs(mid):.2e} at threshold {T} exceeds "
                   f"rtol={rtol:g}; {why}")
            if strict:
                raise TruncationError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=2)
            break
        prev_width = b.upper - b.lower
        T = min(T + max(1, T // 4), max_threshold)
    info = dict(b.info)
    info["relative_width"] = width / abs(mid) if mid else math.inf
    info["history"] = history
    info["adaptive"] = True
    return BoundPair(lower, upper, info)


# ----------------------------------------------------------------- registered method
def _field(data: Any, name: str, default: Any = None) -> Any:
    if isinstance(data, Mapping):
        return data.get(name, default)
    return getattr(data, name, default)


@register_method(
    "bounds",
    requires="jsq_bounds",
    doc="lower/upper bounds from the threshold jockeying and threshold blocking QBDs "
        "(symmetric two-server JSQ; Adan, van Houtum & van der Wal 1994)",
    options=("tol", "strict", "verify"),
)
def solve_bounds(model, measure, *, tol=1e-9, truncation=None, verify=False, strict=False,
                 **_ignored) -> Result:
    """Bound ``measure`` of a JSQ model between the two threshold systems.

    ``model.jsq_bounds()`` returns plain data (a mapping or an object with these
    attributes): ``arrival_rate`` (float), ``service_rates`` (two equal floats),
    ``ties`` (ignored: with equal rates both tie rules coincide), ``threshold``
    (int ``>= 1``, or ``None`` to grow ``T`` until the relative width is ``<= tol``)
    and optionally ``capacity`` (must be infinite).

    The result's ``value`` is the midpoint, ``error_estimate`` the half-width;
    ``lower``/``upper`` are the bounds. ``verify=True`` re-solves both QBDs by cyclic
    reduction and reports the agreement in ``info["verify"]``.
    """
    t0 = time.perf_counter()
    if truncation is not None:
        raise ModelError(
            f"truncation does not apply to method bounds (set threshold instead); got {truncation!r}"
        )
    data = model.jsq_bounds()
    rates = tuple(float(x) for x in _field(data, "service_rates", ()))
    capacity = _field(data, "capacity", math.inf)
    if capacity is not None and math.isfinite(float(capacity)):
        raise NotApplicableError(f"method bounds needs an infinite capacity; got capacity={capacity:g}")
    if len(rates) != 2:
        raise NotApplicableError(f"method bounds needs exactly 2 servers; got {len(rates)} service_rates")
    if abs(rates[0] - rates[1]) > 1e-12 * max(rates):
        raise NotApplicableError(
            f"method bounds needs equal service_rates (symmetric JSQ, the case the bounds are "
            f"proved for); got {rates[0]:g}, {rates[1]:g}"
        )
    if measure not in MEASURES:
        raise NotApplicableError(
            f"measure {measure!r} has no threshold bounds; valid with method bounds: {', '.join(MEASURES)}"
        )
    lam, mu = float(_field(data, "arrival_rate")), rates[0]
    threshold = _field(data, "threshold", None)
    if threshold is None:
        b = adaptive_threshold_bounds(lam, mu, measure, rtol=tol, strict=strict)
    else:
        b = threshold_bounds(lam, mu, int(threshold), measure, strict=strict)
    info = dict(b.info)
    if verify:
        T = info["threshold"]
        cr = threshold_bounds(lam, mu, T, measure, algorithm="cyclic_reduction", strict=strict)
        diff = max(abs(cr.lower - b.lower), abs(cr.upper - b.upper))
        info["verify"] = {"second_algorithm": "cyclic_reduction", "abs_diff": diff,
                          "agree": bool(diff <= 1e-9 * max(1.0, abs(b.upper)))}
    return Result(
        value=0.5 * (b.lower + b.upper),
        lower=b.lower,
        upper=b.upper,
        method="bounds",
        residual=max(info["jockeying"]["residual"], info["blocking"]["residual"]),
        error_estimate=0.5 * (b.upper - b.lower),
        nit=info["jockeying"]["nit"] + info["blocking"]["nit"],
        seconds=time.perf_counter() - t0,
        measure=measure,
        info=info,
    )
