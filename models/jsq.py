"""Join-the-shortest-queue with heterogeneous exponential servers.

n >= 2 parallel queues, server i of rate ``service_rates[i]``, Poisson arrivals of total
rate ``arrival_rate`` (to the whole system, not per server); an arrival joins a
shortest queue (queue lengths count the job in service). Ties go uniformly to the tied
queues (``ties=random``) or to the fastest tied server (``ties=fastest``, uniformly
among equally fast ones). With a finite ``capacity`` per queue an arrival finding
every queue full is lost; the shortest non-full queue is joined otherwise.

The model describes itself through

* ``ctmc(level)`` / ``lumped_ctmc(level)``: the chain on queue lengths (sorted queue
  lengths for identical servers), truncated at ``level`` jobs per queue;
* ``quarter_plane()``: two servers, no capacity: the
  :class:`~exactq.representations.walk.QuarterPlaneWalk` of the queue lengths
  (arrivals join the shorter queue), solved by the compensation series;
* ``threshold_bracket(measure, T)``: two identical servers: the threshold-jockeying
  and threshold-blocking systems, two QBDs (:func:`threshold_qbd`) whose measures
  bound this model's (Adan, van Houtum & van der Wal 1994);
* ``asymptotic(measure, context)``: two identical servers with a finite capacity: the
  large-capacity approximations of :mod:`exactq.models.jsq_asymptotic`;
* ``qbd()``: with ``threshold_system=jockeying`` or ``blocking`` the model *is* that
  threshold system (two identical servers, threshold ``T``), a level-independent QBD
  solved exactly by ``--method qbd`` (the systems the bounds method brackets JSQ by).
  Deprecated: the threshold systems are the model ``jsq-threshold``
  (:mod:`exactq.models.jsq_threshold`); ``threshold_system`` still works and warns.

References
----------
Adan, Wessels & Zijm, "Analysis of the symmetric shortest queue problem", Stochastic
Models 6(4), 1990; "Analysis of the asymmetric shortest queue problem", Queueing
Systems 8, 1991.
I. J. B. F. Adan, G. J. van Houtum and J. van der Wal, "Upper and lower bounds for the
waiting time in the symmetric shortest queue system", Ann. Oper. Res. 48 (1994) 197-217.
G. J. van Houtum, W. H. M. Zijm, I. J. B. F. Adan and J. Wessels, "Bounds for
performance characteristics: a systematic approach via cost structures", Stochastic
Models 14 (1998).
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations import QBD, Bracket, QuarterPlaneWalk
from exactq.result import Estimate
from exactq.statespace import SortedSpace, StateSpace
from exactq.truncation import Truncation

from . import jsq_asymptotic as asym

__all__ = ["JSQ", "jsq_routing", "load", "threshold_qbd", "threshold_measure", "blocking_drift",
           "min_stable_threshold", "check_threshold_stability", "SYSTEMS", "BOUNDED_MEASURES"]


def jsq_routing(states: np.ndarray, rates: np.ndarray, ties: str, capacity: float) -> np.ndarray:
    """Routing probabilities of an arrival in every state at once.

    Parameters
    ----------
    states : (N, n) int array of queue lengths
    rates : (n,) service rates
    ties : {"random", "fastest"}
    capacity : per-queue capacity (``inf`` for none)

    Returns
    -------
    (N, n) array whose rows sum to 1, or to 0 where every queue is full.

    Examples
    --------
    >>> jsq_routing(np.array([[1, 1], [0, 2], [3, 3]]), np.array([1.0, 2.0]), "fastest", 3).tolist()
    [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]
    """
    q = states.astype(float)
    if math.isfinite(capacity):
        q = np.where(states >= capacity, np.inf, q)
    shortest = q.min(axis=1, keepdims=True)
    tied = (q == shortest) & np.isfinite(q)
    if ties == "fastest":
        mu = np.where(tied, rates[None, :], -np.inf)
        tied &= mu == mu.max(axis=1, keepdims=True)
    count = tied.sum(axis=1, keepdims=True)
    return np.divide(tied, count, out=np.zeros(q.shape), where=count > 0)


def load(arrival_rate: float, service_rates) -> float:
    """``arrival_rate / sum(service_rates)``, computed relative to the largest rate (no overflow).

    Examples
    --------
    >>> load(1e308, (1e308, 1e308)), load(1.5, (1.0, 2.0))
    (0.5, 0.5)
    """
    m = max(arrival_rate, *service_rates)
    return (arrival_rate / m) / sum(mu / m for mu in service_rates)


# ----------------------------------------------------------------------------------------
# the threshold systems (Adan, van Houtum & van der Wal 1994)
# ----------------------------------------------------------------------------------------
#: the two comparison systems of the bounds method
SYSTEMS = ("jockeying", "blocking")
#: measure -> (system giving the lower bound, system giving the upper bound)
BOUNDED_MEASURES = {
    "mean_number": ("jockeying", "blocking"),
    "mean_response_time": ("jockeying", "blocking"),
    "mean_waiting_time": ("jockeying", "blocking"),
    "prob_empty": ("blocking", "jockeying"),
}
_EPS = np.finfo(float).eps


def threshold_qbd(arrival_rate: float, service_rate: float, threshold: int, system: str) -> QBD:
    """The threshold-jockeying or threshold-blocking system of two identical servers, as a QBD.

    State ``(m, d)``: level ``m = min(q1, q2)`` (the shorter queue, job in service
    included), phase ``d = |q1 - q2| in {0, ..., T}``; arrival rate ``lambda``, service
    rate ``mu`` per server. Levels ``m >= 1`` (blocks ``A0`` up, ``A1`` local, ``A2``
    down)::

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
    and level 1 goes down into level 0 through ``A2``. The rates are in units of ``mu``
    (``lambda / mu`` and 1), which leaves the stationary law unchanged and keeps them
    finite for any rates.

    Raises
    ------
    ModelError
        An unknown ``system`` or a threshold that is not an integer >= 1.

    Examples
    --------
    With ``T = 1`` the jockeying system is the M/M/2 queue, ``E[L] = 2 rho / (1 - rho^2)``:

    >>> from exactq.catalogue import solve_representation
    >>> sol = solve_representation(threshold_qbd(1.0, 1.0, 1, "jockeying"))
    >>> L = sol.expect_affine([0.0, 1.0], [0.0, 1.0], 2.0)   # L = 2 m + d
    >>> bool(abs(L - 2 * 0.5 / (1 - 0.25)) < 1e-12)
    True
    """
    if system not in SYSTEMS:
        raise ModelError(f"system must be one of {', '.join(SYSTEMS)}; got {system!r}")
    if int(threshold) != threshold or threshold < 1:
        raise ModelError(f"threshold must be an integer >= 1; got {threshold!r}")
    lam, mu, T = float(arrival_rate) / float(service_rate), 1.0, int(threshold)
    m = T + 1
    d = np.arange(1, m)
    A0, A1, A2 = np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))
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
    return QBD(A0, A1, A2, B1=B1)


def blocking_drift(arrival_rate: float, service_rate: float, threshold: int) -> float:
    """Mean level drift (up - down) of the threshold-blocking QBD, in closed form.

    The phase process is a birth-death chain with ``pi(d) = c r^(d-1) pi(0)``,
    ``c = (lambda + 2 mu)/(lambda + mu)``, ``r = mu / (lambda + mu)``; the drift is
    ``(lambda P(d >= 1) - 2 mu P(d = 0) - mu P(1 <= d < T))``. It tends to
    ``(lambda - 2 mu) / 2`` as ``T -> oo``.

    Examples
    --------
    For ``T = 1`` the system is stable iff ``lambda < sqrt(2) mu``:

    >>> blocking_drift(1.41, 1.0, 1) < 0 < blocking_drift(1.42, 1.0, 1)
    True
    """
    lam, mu, T = float(arrival_rate) / float(service_rate), 1.0, int(threshold)
    c = (lam + 2 * mu) / (lam + mu)
    r = mu / (lam + mu)
    s_all = c * (1 - r ** T) / (1 - r)  # sum_{d=1..T} pi(d) / pi(0)
    s_below = c * (1 - r ** (T - 1)) / (1 - r)  # sum_{d=1..T-1}
    return float(service_rate) * (lam * s_all - (2 * mu + mu * s_below)) / (1 + s_all)


def min_stable_threshold(arrival_rate: float, service_rate: float) -> int:
    """Smallest ``T >= 1`` for which the threshold-blocking system is stable (drift < -1e-12 lambda).

    The drift decreases geometrically (ratio ``mu / (lambda + mu)``) to its limit
    ``(lambda - 2 mu) / 2``, so ``T`` grows only like the logarithm of ``2 mu - lambda``.

    Raises
    ------
    UnstableError
        ``arrival_rate >= 2 service_rate (1 - 1e-12)``: no threshold gives a stable
        blocking system to rounding.

    Examples
    --------
    >>> min_stable_threshold(1.4, 1.0), min_stable_threshold(1.42, 1.0)  # sqrt(2) = 1.414...
    (1, 2)
    """
    lam, mu = float(arrival_rate), float(service_rate)
    if not (lam / mu - 2) / 2 < -1e-12 * lam / mu:
        raise UnstableError(f"threshold blocking is unstable for every threshold at arrival_rate {lam:.12g} "
                            f"(service rate {mu:g} per server): arrival_rate must be < 2 service rate")
    T = 1
    while blocking_drift(lam, mu, T) >= -1e-12 * lam:
        T += 1
    return T


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


def _numerical_error(sol, value: float, coeff: float) -> float:
    """Rounding-error estimate of an expectation computed from a QBD solution (the bounds' margin).

    The level sums pass ``pi_1`` through ``(I - R)^-1`` twice, so relative rounding
    errors of size ``m eps`` in ``R`` and ``pi`` (plus the balance residual) are
    amplified by about ``kappa^2``, with ``kappa = pi_1 (I - R)^-1 1 / pi_1 1`` (about
    ``1 / (1 - sp(R))``); ``coeff`` is the largest reward coefficient. An estimate
    with a safety factor of 10, not a proof: against a 40-digit mpmath re-solve it
    exceeds the actual error by 10^2 to 10^4 (``tests/models/test_bounds.py``).
    """
    pi1 = sol.pi1
    mass = float(pi1.sum())
    kappa = float(pi1 @ sol.resolvent().sum(1)) / mass if mass > 0 else 1.0
    return float(10.0 * kappa * kappa * (sol.n_phases * _EPS + sol.residual) * (abs(value) + max(coeff, 1.0)))


def check_threshold_stability(arrival_rate: float, service_rate: float, threshold: int, system: str) -> None:
    """Refuse a threshold system that is not stable (:class:`~exactq.errors.UnstableError`, one line).

    Threshold jockeying is stable iff ``lambda < 2 mu`` (it is work conserving);
    threshold blocking needs a negative level drift as well (:func:`blocking_drift`),
    which fixes a smallest threshold (:func:`min_stable_threshold`).
    """
    lam, mu, T = float(arrival_rate), float(service_rate), int(threshold)
    if lam >= 2 * mu:
        raise UnstableError(f"arrival_rate must be < total service rate {2 * mu:g} for stability; got {lam:g}")
    if system == "blocking" and blocking_drift(lam, mu, T) >= -1e-12 * lam:
        raise UnstableError(
            f"threshold blocking with threshold={T} is unstable at arrival_rate {lam:.12g} (service rate "
            f"{mu:g} per server; level drift {blocking_drift(lam, mu, T):.6g} >= 0): use threshold >= "
            f"{min_stable_threshold(lam, mu)}")


def threshold_measure(sol, system: str, threshold: int, measure: str, arrival_rate: float) -> tuple:
    """``(value, numerical error estimate)`` of ``measure`` in a solved threshold system.

    Examples
    --------
    With ``T = 1`` the jockeying system is M/M/2: ``P(empty) = (1 - rho) / (1 + rho)``:

    >>> from exactq.catalogue import solve_representation
    >>> sol = solve_representation(threshold_qbd(1.0, 1.0, 1, "jockeying"))
    >>> p0, err = threshold_measure(sol, "jockeying", 1, "prob_empty", 1.0)
    >>> bool(abs(p0 - 0.5 / 1.5) < 1e-12 and err < 1e-12)
    True
    """
    if measure not in BOUNDED_MEASURES:
        raise ModelError(f"unknown measure {measure!r} for the bounds method; valid: {', '.join(BOUNDED_MEASURES)}")
    lam = float(arrival_rate)
    if measure == "prob_empty":
        value = float(sol.pi0[0])
        return value, _numerical_error(sol, value, 1.0)
    key = "not_in_service" if measure == "mean_waiting_time" else "number"
    value = sol.expect_affine(*_rewards(system, int(threshold))[key])
    err = _numerical_error(sol, value, 2.0 * threshold)
    if measure in ("mean_response_time", "mean_waiting_time"):
        value, err = value / lam, err / lam
    return value, err


@register_model
@dataclass(frozen=True)
class JSQ(Model):
    """Join the shortest queue (see the module docstring).

    Examples
    --------
    MODELS.md: two unit-rate servers at load 1/2, E[L] = 1.42632075:

    >>> import exactq
    >>> round(exactq.solve("jsq", arrival_rate=1.0, service_rates="1,1").value, 8)
    1.42632075
    """

    name = "jsq"
    summary = "join-the-shortest-queue, n >= 2 exponential servers, optional capacity per queue"
    reference = "Adan, Wessels & Zijm, Stochastic Models 6(4) 1990; Queueing Systems 8 1991"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate, total over all servers (not per server)", low=0.0,
              low_open=True, scope="total", count=Count("service_rates", "len"), aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rates", "floats", "service rate of each server", low=0.0, low_open=True, min_len=2,
              scope="per-server"),
        Param("ties", "choice", "how ties between shortest queues are broken", default="random",
              choices=("random", "fastest")),
        Param("capacity", "int_or_inf", "maximum jobs per queue (arrivals finding all full are lost)",
              default=math.inf, low=1),
        Param("threshold", "int", "threshold T of --method bounds (default: grown until the width is < tol) "
              "and of threshold_system", default=None, low=1),
        Param("threshold_system", "choice", "none: JSQ itself; jockeying or blocking: the threshold system of "
              "Adan, van Houtum & van der Wal (1994) with threshold T, solved exactly by --method qbd (needs "
              "threshold, two equal service_rates and no capacity)", default="none",
              choices=("none",) + SYSTEMS),
    )
    measures = {
        "mean_number": "E[L], mean total number in system",
        "mean_response_time": "E[T] of an accepted job (Little)",
        "mean_waiting_time": "E[W], time in queue excluding service, of an accepted job",
        "mean_queue_lengths": "mean number at each queue (list)",
        "p_wait": "probability that an accepted arrival has to wait",
        "prob_empty": "probability that every queue is empty",
        "blocking_probability": "probability that an arrival is lost (finite capacity)",
        "queue_length_distributions": "P(Q_i = k) for each queue i (list of lists): k = 0..capacity (ctmc, "
                                      "asymptotic), or up to where the rest is below tol (compensation)",
    }
    methods = ("ctmc", "compensation", "bounds", "asymptotic", "qbd")
    default_measure = "mean_number"

    arrival_rate: float
    service_rates: tuple
    ties: str = "random"
    capacity: float = math.inf
    threshold: int | None = None
    threshold_system: str = "none"

    #: the threshold system's QBD is the whole infinite chain: the qbd method solves it once
    qbd_truncated = False

    def check(self):
        if self.threshold_system != "none":
            self._check_threshold_system()
        if self.is_infinite:
            total = float(sum(self.service_rates))
            unstable = self.arrival_rate >= total if math.isfinite(total) else self.load >= 1
            if unstable:
                raise UnstableError(
                    f"arrival_rate must be < total service rate {total:g} for stability; "
                    f"got {self.arrival_rate:g}"
                )

    @property
    def load(self) -> float:
        """``arrival_rate / sum(service_rates)``, without overflow for rates near the float limit."""
        return load(self.arrival_rate, self.service_rates)

    #: largest service-rate ratio for which ``auto`` uses the compensation series for two
    #: unequal servers (tested over loads 0.01..0.999 and all tie rules; beyond it the
    #: series needs very large near-origin regions or does not converge)
    AUTO_COMPENSATION_MAX_RATIO = 100.0

    def auto_method(self) -> str:
        """Compensation for two servers without capacity (exact series), else the CTMC; a threshold system: its QBD."""
        if self.threshold_system != "none":
            return "qbd"
        if self._two_server_walk():
            r = self.service_rates
            if max(r) / min(r) <= self.AUTO_COMPENSATION_MAX_RATIO:
                return "compensation"
        return "ctmc"

    def _two_server_walk(self) -> bool:
        return self.is_infinite and len(self.service_rates) == 2 and self.threshold is None

    # -- a threshold system as the model (method qbd) ------------------------------------
    def _check_threshold_system(self) -> None:
        system, T = self.threshold_system, self.threshold
        if T is None:
            raise ModelError(f"threshold_system={system} needs threshold=T (an integer >= 1); got none")
        rates = tuple(self.service_rates)
        if len(rates) != 2 or abs(rates[0] - rates[1]) > 1e-12 * max(rates):
            raise ModelError(f"threshold_system={system} needs two equal service_rates; got "
                             f"{','.join(f'{r:g}' for r in rates)}")
        if not self.is_infinite:
            raise ModelError(f"threshold_system={system} needs an infinite capacity; got capacity={self.capacity:g}")
        check_threshold_stability(self.arrival_rate, float(rates[0]), int(T), system)
        warnings.warn(f"jsq threshold_system={system} is deprecated: the threshold systems are the model "
                      f"jsq-threshold (exactq solve jsq-threshold system={system} threshold={T} "
                      f"arrival_rate={self.arrival_rate:g} service_rate={rates[0]:g})", DeprecationWarning,
                      stacklevel=4)

    def _plain_jsq(self, method: str) -> None:
        """Refuse ``method`` for a threshold system (only its QBD describes it)."""
        if self.threshold_system != "none":
            raise NotApplicableError(f"method {method} solves JSQ itself; threshold_system={self.threshold_system} "
                                     f"is solved by method qbd")

    def qbd(self, width=None) -> QBD:
        """The threshold system as a QBD (:func:`threshold_qbd`): level = shorter queue, phase = difference.

        Deprecated, as ``threshold_system`` is: the model ``jsq-threshold`` is these systems.

        Examples
        --------
        At ``T = 1`` threshold jockeying keeps the queues within one job: it is M/M/2,
        ``E[L] = 2 rho / (1 - rho^2)``:

        >>> import exactq, warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     r = exactq.solve("jsq", method="qbd", arrival_rate=1.0, service_rates="1,1", threshold=1,
        ...                      threshold_system="jockeying")
        >>> bool(abs(r.value - 1.0 / 0.75) < 1e-12), r.method, "jsq-threshold" in str(caught[0].message)
        (True, 'qbd', True)
        """
        if self.threshold_system == "none":
            raise NotApplicableError("method qbd solves the threshold systems: pass threshold_system=jockeying or "
                                     "blocking with threshold=T (JSQ itself has no level-independent QBD; use "
                                     "compensation, ctmc or bounds)")
        if width is not None:
            raise NotApplicableError(f"threshold_system={self.threshold_system} is an exact QBD: it takes no "
                                     f"truncation; got {width}")
        return threshold_qbd(self.arrival_rate, float(self.service_rates[0]), int(self.threshold),
                             self.threshold_system)

    def qbd_measure(self, measure, qbd, sol) -> Estimate:
        """A measure of the solved threshold system, with its rounding-error estimate."""
        if measure not in BOUNDED_MEASURES:
            raise NotApplicableError(f"measure {measure!r} is not available for a threshold system; valid: "
                                     f"{', '.join(BOUNDED_MEASURES)}")
        value, err = threshold_measure(sol, self.threshold_system, int(self.threshold), measure,
                                       self.arrival_rate)
        return Estimate(value, error=err, info={"threshold_system": self.threshold_system,
                                                "threshold": int(self.threshold),
                                                "spectral_radius": sol.spectral_radius, "residual": sol.residual})

    # -- quarter-plane walk (compensation approach) ------------------------------------
    @property
    def tie_probability(self) -> float:
        """Probability that an arrival finding two equal queues joins queue 1 (two servers)."""
        mu1, mu2 = self.service_rates[:2]
        return 0.5 if self.ties == "random" or mu1 == mu2 else (1.0 if mu1 > mu2 else 0.0)

    def quarter_plane(self) -> QuarterPlaneWalk:
        """The two-server walk of the queue lengths: arrivals join the shorter queue.

        Arrivals (rate ``arrival_rate``) add one to the shorter queue, or on a tie to
        queue 1 with :attr:`tie_probability` (1/2 for ``ties=random``; for
        ``ties=fastest`` 1 or 0, and 1/2 between equal rates); queue i loses a job at
        rate ``service_rates[i]`` while busy. Rates in the model's own time unit.

        Raises
        ------
        NotApplicableError
            Not exactly two servers, a finite capacity, or a threshold set.

        Examples
        --------
        Every interior state is left at rate ``lambda + mu1 + mu2``:

        >>> import exactq
        >>> w = exactq.model("jsq", arrival_rate=2.4, service_rates="1,2").quarter_plane()
        >>> w.out_rate("upper"), dict(w.origin)
        (5.4, {(1, 0): 1.2, (0, 1): 1.2})
        """
        self._plain_jsq("compensation")
        if not self._two_server_walk():
            raise NotApplicableError(
                "compensation needs exactly two servers, infinite capacity and no threshold; got "
                f"service_rates={list(self.service_rates)}, capacity={self.capacity}, threshold={self.threshold}; "
                "use --method ctmc"
            )
        return QuarterPlaneWalk.join_shorter(self.arrival_rate, self.service_rates, self.tie_probability)

    #: measures the compensation series gives (``queue_length_distributions`` up to tol)
    WALK_MEASURES = ("mean_number", "mean_response_time", "mean_waiting_time", "mean_queue_lengths", "p_wait",
                     "prob_empty", "queue_length_distributions")

    def quarter_plane_measure(self, measure: str, walk: QuarterPlaneWalk, sol):
        """A measure from the walk's solution, with the solution's error estimate.

        E[L] = E[Q1] + E[Q2], E[T] = E[L] / lambda (Little), E[W] by PASTA: an arrival
        joins queue 1 above the diagonal (waiting Q1 / mu1), queue 2 below it, and on
        the diagonal queue 1 with probability q; P(wait) = P(min(Q1, Q2) > 0).

        Examples
        --------
        MODELS.md: E[L] = 9.85484308 and E[W] = 4.47491282 at rho = 0.9:

        >>> import exactq
        >>> from exactq.catalogue import solve_representation
        >>> m = exactq.model("jsq", arrival_rate=1.8, service_rates="1,1")
        >>> w = m.quarter_plane()
        >>> sol = solve_representation(w)
        >>> [round(m.quarter_plane_measure(x, w, sol).value, 8) for x in ("mean_number", "mean_waiting_time")]
        [9.85484308, 4.47491282]
        """
        if measure not in self.WALK_MEASURES:
            raise NotApplicableError(f"measure {measure!r} is not available from the compensation method")
        lam = self.arrival_rate
        mu1, mu2 = self.service_rates
        q = self.tie_probability
        if measure == "queue_length_distributions":
            p1, p2, missing = sol.marginals()
            return Estimate([p1.tolist(), p2.tolist()], error=float(missing + sol.tail),
                            info={"levels": len(p1), "mass_beyond_levels": missing})
        t = sol.part_sums()
        whole = sol.sums()
        L = whole.x + whole.y
        x_idle = (t["upper_edge"] + t["origin"]).mass
        y_idle = (t["lower_edge"] + t["origin"]).mass
        W = (t["upper"].x / mu1 + t["lower"].y / mu2 + t["diagonal"].x * (q / mu1 + (1 - q) / mu2))
        values = {
            "mean_number": (L, "mean"),
            "mean_response_time": (L / lam, "time"),
            "mean_waiting_time": (W, "time"),
            "mean_queue_lengths": ([whole.x, whole.y], "mean"),
            "p_wait": (1.0 - (t["upper_edge"] + t["lower_edge"] + t["origin"]).mass, "probability"),
            "prob_empty": (t["origin"].mass, "probability"),
        }
        value, kind = values[measure]
        err = sol.error(value, kind=kind, rate=min(mu1, mu2, lam))
        little = abs((L - (1 - x_idle) - (1 - y_idle)) / lam - W)  # Little vs PASTA: 0 for the exact law
        return Estimate(value, error=err, info={"tie_prob_1": q, "prob_empty": t["origin"].mass,
                                                "little_gap": little})

    # -- threshold bounds (bracket of two QBDs) -----------------------------------------
    def _bounded_pair(self, measure: str) -> float:
        """The common service rate, if the bounds apply to this model and measure."""
        rates = tuple(self.service_rates)
        if not self.is_infinite:
            raise NotApplicableError(f"method bounds needs an infinite capacity; got capacity={self.capacity:g}")
        if len(rates) != 2:
            raise NotApplicableError(f"method bounds needs exactly 2 servers; got {len(rates)} service_rates")
        if abs(rates[0] - rates[1]) > 1e-12 * max(rates):
            raise NotApplicableError(
                f"method bounds needs equal service_rates (symmetric JSQ, the case the bounds are "
                f"proved for); got {rates[0]:g}, {rates[1]:g}"
            )
        if measure not in BOUNDED_MEASURES:
            raise NotApplicableError(
                f"measure {measure!r} has no threshold bounds; valid with method bounds: {', '.join(BOUNDED_MEASURES)}"
            )
        return float(rates[0])

    def threshold_bracket(self, measure: str, threshold: int | None) -> Bracket:
        """The threshold-jockeying (lower) and threshold-blocking (upper) QBDs at ``threshold``.

        Adan, van Houtum & van der Wal (1994) prove that the total number of jobs ``L``
        in JSQ is stochastically larger than in the jockeying system and smaller than in
        the blocking system, for every ``T >= 1``. Every job receives exactly its
        exponential service in all three systems, so the mean number of busy servers is
        ``lambda / mu`` in each, and the order of ``L`` bounds :data:`BOUNDED_MEASURES`
        (``prob_empty`` with the systems swapped). ``threshold=None`` gives the first
        threshold of the growth: ``max(2, min_stable_threshold)``.

        Raises
        ------
        NotApplicableError
            Not two identical servers without capacity, or a measure without bounds.
        UnstableError
            The blocking system is unstable at this threshold (the message names the
            smallest stable one).

        Examples
        --------
        >>> import exactq
        >>> b = exactq.model("jsq", arrival_rate=1.8, service_rates="1,1").threshold_bracket("mean_number", None)
        >>> b.parameter, sorted(b.systems), b.systems["blocking"].n_phases   # T = 2: phases d = 0, 1, 2
        (2, ['blocking', 'jockeying'], 3)
        """
        self._plain_jsq("bounds")
        mu = self._bounded_pair(measure)
        lam = self.arrival_rate
        if threshold is None:
            T = max(2, min_stable_threshold(lam, mu))
        else:
            T = int(threshold)
            if blocking_drift(lam, mu, T) >= -1e-12 * lam:
                raise UnstableError(
                    f"threshold blocking with threshold={T} is unstable at arrival_rate {lam:.12g} "
                    f"(service rate {mu:g} per server): use threshold >= {min_stable_threshold(lam, mu)}"
                )
        return Bracket({s: threshold_qbd(lam, mu, T, s) for s in SYSTEMS}, parameter=T, parameter_name="threshold")

    def threshold_bracket_measure(self, measure: str, bracket: Bracket, solution) -> Estimate:
        """Lower and upper bound of ``measure``, each widened outward by its rounding-error estimate.

        Examples
        --------
        At ``T = 1`` the lower system is M/M/2, ``E[L] = 2 rho / (1 - rho^2)``; the exact
        JSQ value (MODELS.md: 1.42632075 at rho = 0.5) lies between the bounds:

        >>> import exactq
        >>> from exactq.catalogue import solve_representation
        >>> m = exactq.model("jsq", arrival_rate=1.0, service_rates="1,1")
        >>> b = m.threshold_bracket("mean_number", 1)
        >>> est = m.threshold_bracket_measure("mean_number", b, solve_representation(b))
        >>> bool(abs(est.info["jockeying"]["value"] - 1 / 0.75) < 1e-12 and est.lower <= 1.42632075 <= est.upper)
        True
        """
        mu, lam, T = self._bounded_pair(measure), self.arrival_rate, bracket.parameter
        out = {}
        for system in SYSTEMS:
            sol = solution[system]
            value, err = threshold_measure(sol, system, T, measure, lam)
            busy = sol.expect_affine(*_rewards(system, T)["busy"])
            out[system] = {"value": value, "numerical_error": err, "spectral_radius": sol.spectral_radius,
                           "residual": sol.residual, "g_defect": sol.g_defect, "nit": sol.nit,
                           "mean_busy_servers_defect": abs(busy - lam / mu)}
        lo_sys, up_sys = BOUNDED_MEASURES[measure]
        lower = out[lo_sys]["value"] - out[lo_sys]["numerical_error"]
        upper = out[up_sys]["value"] + out[up_sys]["numerical_error"]
        mid = 0.5 * (lower + upper)
        info = {"threshold": T, "lower_system": f"threshold {lo_sys}", "upper_system": f"threshold {up_sys}",
                "relative_width": (upper - lower) / abs(mid) if mid else math.inf,
                "algorithm": solution[lo_sys].algorithm, "seconds": solution.seconds, **out}
        return Estimate(mid, error=0.5 * (upper - lower), lower=lower, upper=upper, info=info)

    # -- large-capacity asymptotics ----------------------------------------------------------
    #: measures of the asymptotic method
    ASYMPTOTIC_MEASURES = ("blocking_probability", "mean_number", "mean_response_time", "queue_length_distributions")

    def asymptotic(self, measure: str, context) -> Estimate:
        """Large-capacity approximation of ``measure`` (:mod:`exactq.models.jsq_asymptotic`).

        The light-load regime solves the infinite-capacity walk (``context.solve`` of
        :meth:`quarter_plane`'s walk); the marginal above rho = 2 solves the full-corner
        QBD. No error bound: ``error`` is None and ``info`` names the regime.

        Examples
        --------
        At rho = 2 the blocking probability is ``1 / (2K)`` (Yao & Knessl):

        >>> import exactq
        >>> r = exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=2.0,
        ...                  service_rates="1,1", capacity=20)
        >>> round(r.value, 12), r.error_estimate
        (0.025, None)
        """
        self._plain_jsq("asymptotic")
        r = self.service_rates
        if self.is_infinite or len(r) != 2 or r[0] != r[1] or self.ties != "random":
            raise NotApplicableError(
                "the asymptotic method needs two identical servers, ties=random and a finite capacity; got "
                f"service_rates={list(r)}, capacity={self.capacity}, ties={self.ties}"
            )
        if measure not in self.ASYMPTOTIC_MEASURES:
            raise NotApplicableError(f"measure {measure!r} has no asymptotic approximation; valid: "
                                     f"{', '.join(sorted(self.ASYMPTOTIC_MEASURES))}")
        mu, lam, K = float(r[0]), self.arrival_rate, int(self.capacity)
        rho = lam / mu
        if not math.isfinite(rho):
            raise ModelError(f"arrival_rate / service rate must be finite for the asymptotic method; got "
                             f"{lam:g} / {mu:g}")
        k = np.arange(K + 1)
        if asym.far_from_capacity(rho, K):
            sol = context.solve(QuarterPlaneWalk.join_shorter(rho, (1.0, 1.0)), tol=context.tol)
            block = (1 + rho / 4) * float(sol.probability(K, K))
            whole = sol.sums()
            L = whole.x + whole.y
            marginal = lambda: sol.probability(k[:, None], k[None, :]).sum(axis=1)  # noqa: E731
        else:
            p = asym.free_places_law(rho, K)
            j = np.arange(2 * K)
            block, L = float(p[0]), float(p @ (2 * K - j))

            def marginal():
                if K * (rho - 2) / rho >= 1:
                    # P(Q = K - i) = P(i free places), renormalised on i <= K (the capacity boundary)
                    m = asym.corner_marginal(context.solve(asym.corner_qbd(rho), strict=True), K)[::-1].copy()
                    return m / m.sum()
                # balanced split of j free places: floor(j/2) and ceil(j/2), each queue either with prob 1/2
                m = np.zeros(K + 1)
                np.add.at(m, K - j // 2, 0.5 * p)
                np.add.at(m, K - (j + 1) // 2, 0.5 * p)
                return m

        if measure == "queue_length_distributions":
            m = marginal()
            value = [m.tolist(), m.tolist()]
        else:
            value = {"blocking_probability": block, "mean_number": L,
                     "mean_response_time": L / (lam * (1 - block))}[measure]
        return Estimate(value, error=None, info={
            "regime": asym.regime(rho, K), "limit_blocking": max(0.0, 1 - 2 / rho),
            "accuracy": "asymptotic as capacity -> inf; no error bound (use --method ctmc for the exact value)"})

    @property
    def is_infinite(self) -> bool:
        return not math.isfinite(self.capacity)

    @property
    def n_servers(self) -> int:
        return len(self.service_rates)

    def _event_rates(self) -> tuple:
        """``(lambda, mu)`` for a generator: their total must be a finite float."""
        lam, mu = self.arrival_rate, np.asarray(self.service_rates, dtype=float)
        if not math.isfinite(lam + sum(self.service_rates)):
            raise ModelError(f"arrival_rate + sum(service_rates) must be below {sys.float_info.max:.4g} for a CTMC "
                             f"generator; got {lam:g} + {float((mu / mu.max()).sum()):g} x {float(mu.max()):g} "
                             "(rescale the time unit)")
        return lam, mu

    # -- CTMC ------------------------------------------------------------------
    def truncation_start(self, tol: float) -> int:
        self._plain_jsq("ctmc")
        return int(math.ceil(math.log(tol) / math.log(self.load) / self.n_servers)) + 10

    def ctmc_size(self, truncation) -> int:
        K = int(truncation) if self.is_infinite else int(self.capacity)
        return (K + 1) ** self.n_servers

    def ctmc(self, truncation=None):
        self._plain_jsq("ctmc")
        n = self.n_servers
        if self.is_infinite:
            if truncation is None:
                raise ModelError("jsq without capacity needs a truncation level")
            K = int(truncation)
            trunc = Truncation(K, "block", "each queue")
        else:
            K = int(self.capacity)
            trunc = None
        lam, mu = self._event_rates()
        space = StateSpace.box([f"q{i + 1}" for i in range(n)], hi=[K] * n)
        routing = jsq_routing(space.states, mu, self.ties, self.capacity)
        unit = np.eye(n, dtype=np.int64)

        def arrival(i):
            return Event(f"arrival_{i + 1}", lambda s: (lam * routing[:, i], s + unit[i]))

        def departure(i):
            return Event(f"departure_{i + 1}", lambda s: (mu[i] * (s[:, i] > 0), s - unit[i]))

        events = [arrival(i) for i in range(n)] + [departure(i) for i in range(n)]
        consts = {"K": K, "capacity": K, "arrival_rate": lam}
        return build_ctmc(space, events, initial=np.zeros(n, np.int64), truncation=trunc,
                          constants=consts, labels={"full": routing.sum(1) == 0})

    # -- the chain lumped by symmetry (identical servers) ------------------------------
    def lumps(self, measure: str) -> bool:
        """Identical servers are exchangeable: every measure follows from sorted queue lengths."""
        return len(set(self.service_rates)) == 1

    def lumped_size(self, truncation) -> int:
        K = int(truncation) if self.is_infinite else int(self.capacity)
        return math.comb(K + self.n_servers, self.n_servers)

    def lumped_ctmc(self, truncation=None):
        """The chain on sorted queue lengths s1 <= ... <= sn (exact lumping for equal rates).

        An arrival joins a shortest queue: the last of the tied shortest entries grows,
        which keeps the vector sorted; a departure at position i is followed by a sort.
        About K^n / n! states instead of (K+1)^n.
        """
        self._plain_jsq("ctmc")
        n = self.n_servers
        K = int(truncation) if self.is_infinite else int(self.capacity)
        lam, mu = self._event_rates()
        mu = float(mu[0])
        space = SortedSpace([n], level=K, names=[f"s{i + 1}" for i in range(n)])

        def arrival(st):
            t = st.copy()
            t[:, 0] += 1
            t.sort(axis=1)
            room = st[:, 0] < self.capacity
            return lam * room, t

        def departure(i):
            def fn(st):
                t = st.copy()
                t[:, i] -= 1
                t.sort(axis=1)
                return mu * (st[:, i] > 0), t
            return Event(f"departure_pos{i + 1}", fn)

        trunc = Truncation(K, "block", "each queue (sorted queue lengths)") if self.is_infinite else None
        return build_ctmc(space, [Event("arrival", arrival)] + [departure(i) for i in range(n)],
                          initial=np.zeros(n, np.int64), truncation=trunc,
                          constants={"K": K, "capacity": K, "arrival_rate": lam},
                          labels={"full": space.states[:, 0] >= self.capacity})

    def _functional(self, measure, chain, *, lumped: bool):
        """``(f, g)`` with the scalar measure ``(f . pi) / (g . pi)`` (full or lumped chain), else None.

        Accepted jobs arrive at rate ``lambda (1 - P(full))`` (PASTA); Little's law
        divides by it.
        """
        s = chain.states
        accepted = (~chain.labels["full"]).astype(float) if not self.is_infinite else np.ones(len(s))
        total = s.sum(axis=1).astype(float)
        ones = np.ones(len(s))
        lam = self.arrival_rate
        if measure == "mean_number":
            return total, ones
        if measure == "mean_response_time":
            return total, lam * accepted
        if measure == "mean_waiting_time":
            return np.maximum(s - 1, 0).sum(axis=1).astype(float), lam * accepted
        if measure == "prob_empty":
            return (total == 0).astype(float), ones
        if measure == "blocking_probability":
            self._finite_capacity_for(measure)
            return 1.0 - accepted, ones
        if measure == "p_wait":
            if lumped:  # identical servers: an accepted arrival waits iff the shortest queue is busy
                return (s[:, 0] >= 1) * accepted, accepted
            routing = jsq_routing(s, np.asarray(self.service_rates, float), self.ties, self.capacity)
            return (routing * (s > 0)).sum(axis=1), accepted
        return None

    def _measure(self, measure, chain, sol, *, lumped: bool):
        """Measures of the full chain (states q_i) or the lumped one (sorted queue lengths)."""
        pi = sol.pi
        pair = self._functional(measure, chain, lumped=lumped)
        if pair is not None:
            f, g = pair
            return float(pi @ f) / float(pi @ g)
        s = chain.states
        n = self.n_servers
        if measure == "mean_queue_lengths":
            return [float(pi @ s.sum(axis=1)) / n] * n if lumped else (pi @ s).tolist()
        if measure == "queue_length_distributions":
            K = self._finite_capacity_for(measure)
            marg = [np.bincount(s[:, i], weights=pi, minlength=K + 1) for i in range(n)]
            if lumped:  # exchangeable servers: a given queue is any sorted position with probability 1/n
                return [(sum(marg) / n).tolist()] * n
            return [m.tolist() for m in marg]
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover

    def lumped_measure(self, measure, chain, sol):
        return self._measure(measure, chain, sol, lumped=True)

    def ctmc_measure(self, measure, chain, sol):
        return self._measure(measure, chain, sol, lumped=False)

    def lumped_functional(self, measure, chain):
        """What ``certify`` encloses on the lumped chain: ``(f, g)`` or None for vector measures."""
        return self._functional(measure, chain, lumped=True)

    def ctmc_functional(self, measure, chain):
        """What ``certify`` encloses on the full chain: ``(f, g)`` or None for vector measures."""
        return self._functional(measure, chain, lumped=False)

    def _finite_capacity_for(self, measure: str) -> int:
        if self.is_infinite:
            raise ModelError(f"{measure} needs a finite capacity; got capacity=inf")
        return int(self.capacity)
