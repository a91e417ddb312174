"""Shortest-expected-delay routing to Erlang (or exponential) servers.

n >= 2 parallel FCFS queues; server i has Erlang-r service with mean 1/mu_i (r phases
of rate r mu_i each); Poisson arrivals of total rate ``arrival_rate`` (to the whole
system, not per server). The state is the
number of remaining service phases at each queue, p_i = (phases left of the job in
service) + r x (waiting jobs). An arrival joins the queue with the shortest expected
delay *counting its own service*, (p_i + r) / (r mu_i); ties go uniformly to the tied
queues (``ties=random``) or to the fastest tied server (``ties=fastest``).

``phases=1`` is exponential SED (Selen, Adan, Kapodistria & van Leeuwaarden, Queueing
Systems 84, 2016: join queue 1 iff (q1+1)/mu1 < (q2+1)/mu2); with equal rates it is
JSQ. By PASTA, E[W] = E[ p_J / (r mu_J) ] with J the queue an arrival joins.

The model describes itself through ``ctmc(level)`` (the chain on remaining phases,
at most ``level`` jobs' worth per queue), and, for two identical servers, through
``qbd(width)`` (level = the shorter queue's phases in groups of r, phase = the
difference, truncated at ``width``) and ``quarter_plane()`` (the
:class:`~exactq.representations.walk.QuarterPlaneWalk` of the remaining phases: an
arrival adds r phases to the queue with fewer, each busy queue completes phases at
rate r mu), solved by the compensation series.

References
----------
Adan & Wessels, "Shortest expected delay routing for Erlang servers", Queueing
Systems 23, 1996.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations import QBD, QuarterPlaneWalk
from exactq.result import Estimate
from exactq.statespace import StateSpace
from exactq.truncation import Truncation

from .jsq import load

__all__ = ["SED", "sed_routing"]


def sed_routing(phases_left: np.ndarray, rates: np.ndarray, r: int, ties: str) -> np.ndarray:
    """Routing probabilities of an arrival in every state at once.

    Compares (p_i + r) mu_j with (p_j + r) mu_i exactly enough for ties: delays are
    equal when they agree to 1e-12 relative.

    Examples
    --------
    Erlang-2, rates 1 and 3: from (2, 5) phases the delays are (2 + 2)/2 = 2 and (5 + 2)/6:

    >>> sed_routing(np.array([[2, 5], [0, 0]]), np.array([1.0, 3.0]), 2, "random").tolist()
    [[0.0, 1.0], [0.0, 1.0]]
    """
    delay = (phases_left + r) / (r * rates[None, :])
    best = delay.min(axis=1, keepdims=True)
    tied = delay <= best * (1 + 1e-12)
    if ties == "fastest":
        mu = np.where(tied, rates[None, :], -np.inf)
        tied &= mu == mu.max(axis=1, keepdims=True)
    return tied / tied.sum(axis=1, keepdims=True)


@register_model
@dataclass(frozen=True)
class SED(Model):
    """Shortest expected delay routing to Erlang servers (see the module docstring).

    Examples
    --------
    MODELS.md: two identical Erlang-2 servers of mean 1 at load 1/2, E[W] = 0.29938794:

    >>> import exactq
    >>> round(exactq.solve("sed", arrival_rate=1.0, service_rates="1,1", phases=2).value, 8)
    0.29938794
    """

    name = "sed"
    summary = "shortest-expected-delay routing, n >= 2 servers with Erlang-r service"
    reference = "Adan & Wessels, Queueing Systems 23 (1996); Selen et al., Queueing Systems 84 (2016)"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate, total over all servers (not per server)", low=0.0,
              low_open=True, scope="total", count=Count("service_rates", "len"), aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rates", "floats", "mean service rate mu_i of each server", low=0.0, low_open=True,
              min_len=2, scope="per-server"),
        Param("phases", "int", "Erlang phases r of every service time (1 = exponential)", default=1,
              low=1, high=50),
        Param("ties", "choice", "how equal expected delays are broken", default="random",
              choices=("random", "fastest")),
    )
    measures = {
        "mean_number": "E[L], mean total number of jobs in system",
        "mean_response_time": "E[T] = E[W] + E[service] of an arrival",
        "mean_waiting_time": "E[W], time in queue excluding service (PASTA)",
        "mean_queue_lengths": "mean number of jobs at each queue (list)",
        "p_wait": "probability that an arrival has to wait",
        "prob_empty": "probability that the system is empty",
    }
    methods = ("ctmc", "qbd", "compensation")
    default_measure = "mean_waiting_time"

    arrival_rate: float
    service_rates: tuple
    phases: int = 1
    ties: str = "random"

    is_infinite = True

    def check(self):
        total = float(sum(self.service_rates))
        if self.arrival_rate >= total if math.isfinite(total) else self.load >= 1:
            raise UnstableError(
                f"arrival_rate must be < total service rate {total:g} for stability; got {self.arrival_rate:g}"
            )

    @property
    def load(self) -> float:
        """``arrival_rate / sum(service_rates)``, without overflow for rates near the float limit."""
        return load(self.arrival_rate, self.service_rates)

    # -- quarter-plane walk (compensation approach) ----------------------------------------
    def quarter_plane(self) -> QuarterPlaneWalk:
        """The walk of the remaining phases of two identical servers, in units of the mean service time.

        An arrival (rate ``arrival_rate / mu``) adds r phases to the queue with fewer
        remaining phases (ties 1/2: for identical servers ``ties=fastest`` breaks ties
        uniformly, as ``random``); each busy queue completes a phase at rate r.

        Raises
        ------
        NotApplicableError
            Not exactly two identical servers.

        Examples
        --------
        >>> import exactq
        >>> w = exactq.model("sed", arrival_rate=3.0, service_rates="2,2", phases=2).quarter_plane()
        >>> dict(w.upper) == {(2, 0): 1.5, (-1, 0): 2.0, (0, -1): 2.0}
        True
        """
        rates = self.service_rates
        if len(rates) != 2 or rates[0] != rates[1]:
            raise NotApplicableError(
                "compensation needs exactly two identical servers; got "
                f"service_rates={list(rates)}; use --method ctmc")
        r = int(self.phases)
        return QuarterPlaneWalk.join_shorter(self.arrival_rate / float(rates[0]), (float(r), float(r)), 0.5, r)

    #: measures the compensation series gives
    WALK_MEASURES = ("mean_number", "mean_waiting_time", "mean_response_time", "mean_queue_lengths", "p_wait",
                     "prob_empty")

    def quarter_plane_measure(self, measure: str, walk: QuarterPlaneWalk, sol):
        """A measure from the walk's solution: E[W] = E[min(p1, p2)] / (r mu) by PASTA, the rest from it.

        E[T] = E[W] + 1/mu, E[L] = lambda E[T] (Little), P(wait) = P(min(p1, p2) > 0),
        P(empty) = p(0, 0); the error estimates of the means propagate from E[W]'s.

        Examples
        --------
        MODELS.md: E[W] = 0.29938794 for r = 2, rho = 0.5 (service rate 1):

        >>> import exactq
        >>> from exactq.catalogue import solve_representation
        >>> m = exactq.model("sed", arrival_rate=1.0, service_rates="1,1", phases=2)
        >>> w = m.quarter_plane()
        >>> round(m.quarter_plane_measure("mean_waiting_time", w, solve_representation(w)).value, 8)
        0.29938794
        """
        if measure not in self.WALK_MEASURES:
            raise NotApplicableError(f"measure {measure!r} is not available from the compensation method")
        mu, r, lam = float(self.service_rates[0]), self.phases, self.arrival_rate
        t = sol.part_sums()
        wait_walk = sol.mean_min() / r  # in units of the mean service time 1 / mu
        wait = wait_walk / mu
        err_w = sol.error(wait_walk, kind="time", rate=float(r)) / mu
        L = lam * (wait + 1 / mu)
        p_idle = (t["upper_edge"] + t["lower_edge"] + t["origin"]).mass
        values = {
            "mean_number": (L, lam * err_w),
            "mean_waiting_time": (wait, err_w),
            "mean_response_time": (wait + 1 / mu, err_w),
            "mean_queue_lengths": ([L / 2, L / 2], lam * err_w / 2),
            "p_wait": (1.0 - p_idle, sol.error(1.0 - p_idle)),
            "prob_empty": (t["origin"].mass, sol.error(t["origin"].mass)),
        }
        value, err = values[measure]
        return Estimate(value, error=float(err), info={"phases": r, "prob_empty": t["origin"].mass})

    def auto_method(self) -> str:
        """The QBD (exact in the shorter queue) for two identical servers with few phases, else the CTMC."""
        r = self.service_rates
        small = self.qbd_size(int(1.5 * 1.5 * self.qbd_start(1e-9)) + 1) <= 2000
        return "qbd" if len(r) == 2 and r[0] == r[1] and small else "ctmc"

    # -- QBD in (min phases, difference): exact in the min, truncated in the difference --
    def _identical_pair(self, method: str) -> float:
        rates = self.service_rates
        if len(rates) != 2 or rates[0] != rates[1]:
            raise NotApplicableError(
                f"the {method} method needs exactly two identical servers; got service_rates={list(rates)}; "
                "use --method ctmc")
        return float(rates[0])

    #: the QBD's phase (the difference of the queues) is truncated; the driver grows it
    qbd_truncated = True

    def qbd_start(self, tol: float) -> int:
        return max(2 * self.phases, 16)

    def qbd_size(self, width: int) -> int:
        """Phases per level at phase truncation ``width``."""
        return self.phases * (int(width) + 1)

    def qbd(self, width: int) -> QBD:
        """Level = floor(m / r) with m = min(p1, p2); phase = (m mod r, n), n = |p1 - p2| <= width.

        For two identical servers the phases (p1, p2) only matter up to order. From
        (m, n) an arrival (rate lambda) joins the queue with fewer phases:
        (min(m + r, m + n), |n - r|); the shorter queue (m > 0) completes a phase at
        rate r mu, to (m - 1, n + 1) (both queues when n = 0: rate 2 r mu, to (m - 1, 1));
        the longer one (n > 0) at rate r mu, to (m, n - 1). Every jump raises m by at
        most r and lowers it by at most 1, so grouping r values of m per level gives a
        level-independent QBD (levels >= 1 see the same jumps). The difference n is
        truncated at ``width``: a phase completion at the shorter queue from n = width
        stays at n = width (the ``redirect`` rule: no job is lost).
        """
        mu = self._identical_pair("qbd")
        # rates in units of mu (the stationary law does not depend on the time unit)
        r, lam, N = self.phases, self.arrival_rate / mu, int(width)
        mu = 1.0
        if N < r:
            raise ModelError(f"phase truncation must be >= phases ({r}); got {N}")
        w = N + 1
        m, n = np.divmod(np.arange(2 * r * w), w)  # levels 0 and 1 as sources
        src, dst, rate = [], [], []

        def add(mask, m2, n2, q):
            src.append((m * w + n)[mask])
            dst.append((m2 * w + n2)[mask])
            rate.append(np.broadcast_to(q, m.shape)[mask])

        add(np.ones_like(m, bool), np.minimum(m + r, m + n), np.abs(n - r), lam)
        add((m > 0) & (n == 0), m - 1, np.ones_like(n), 2 * r * mu)
        add((m > 0) & (n > 0), m - 1, np.minimum(n + 1, N), r * mu)
        add(n > 0, m, n - 1, r * mu)
        src, dst, rate = map(np.concatenate, (src, dst, rate))
        size = 3 * r * w
        Q = np.zeros((2 * r * w, size))
        np.add.at(Q, (src, dst), rate)
        Q[np.arange(2 * r * w), np.arange(2 * r * w)] -= Q.sum(axis=1)
        L0, L1, L2 = slice(0, r * w), slice(r * w, 2 * r * w), slice(2 * r * w, 3 * r * w)
        edge = (np.arange(r * w) % w) == N
        return QBD(A0=Q[L1, L2], A1=Q[L1, L1], A2=Q[L1, L0], B1=Q[L0, L0], B0=Q[L0, L1], B2=Q[L1, L0],
                   truncation=Truncation(N, "redirect", "difference of the remaining phases"), edge=edge)

    def qbd_rewards(self, qbd: QBD) -> dict:
        """Rewards ``(level 0, constant, slope)`` per phase, affine in the level (jobs, phases, ...)."""
        r, w = self.phases, qbd.truncation.level + 1
        j, nn = np.divmod(np.arange(r * w), w)
        jobs0 = (j > 0) + -(-(j + nn) // r)  # ceil(m / r) + ceil((m + n) / r) at level 0
        return {
            "jobs": (jobs0, jobs0, 2.0),
            "short": (j, j, float(r)),
            "busy_short": (j > 0, 1.0, 0.0),
            "empty": ((j == 0) & (nn == 0), 0.0, 0.0),
        }

    def qbd_measure(self, measure: str, qbd: QBD, sol):
        mu, r = float(self.service_rates[0]), self.phases
        e = {name: sol.expect_affine(*triple) for name, triple in self.qbd_rewards(qbd).items()}
        wait = e["short"] / r / mu  # PASTA: an arrival joins the shorter queue
        values = {
            "mean_number": e["jobs"],
            "mean_waiting_time": wait,
            "mean_response_time": wait + 1 / mu,
            "mean_queue_lengths": [e["jobs"] / 2, e["jobs"] / 2],
            "p_wait": e["busy_short"],
            "prob_empty": e["empty"],
        }
        return values[measure]

    def truncation_start(self, tol: float) -> int:
        rho = self.load
        return int(math.ceil(math.log(tol) / math.log(rho) / len(self.service_rates))) + 10

    def ctmc_size(self, truncation) -> int:
        return (self.phases * int(truncation) + 1) ** len(self.service_rates)

    def ctmc(self, truncation=None):
        """Truncated chain: at most ``truncation`` jobs' worth of phases (r K) per queue."""
        if truncation is None:
            raise ModelError("sed needs a truncation level (jobs per queue)")
        K = int(truncation)
        n, r = len(self.service_rates), self.phases
        mu = np.asarray(self.service_rates, dtype=float)
        lam = self.arrival_rate
        if not math.isfinite(lam + r * sum(self.service_rates)):
            raise ModelError(f"arrival_rate + phases * sum(service_rates) must be below {sys.float_info.max:.4g} for "
                             f"a CTMC generator; got {lam:g} + {r} x {float((mu / mu.max()).sum()):g} x "
                             f"{float(mu.max()):g} (rescale the time unit)")
        space = StateSpace.box([f"p{i + 1}" for i in range(n)], hi=[r * K] * n)
        routing = sed_routing(space.states, mu, r, self.ties)
        unit = np.eye(n, dtype=np.int64)

        def arrival(i):
            return Event(f"arrival_{i + 1}", lambda s: (lam * routing[:, i], s + r * unit[i]))

        def phase_done(i):
            return Event(f"phase_{i + 1}", lambda s: (r * mu[i] * (s[:, i] > 0), s - unit[i]))

        jobs = -(-space.states // r)  # ceil(p / r): jobs at each queue
        rewards = {f"q{i + 1}": jobs[:, i] for i in range(n)}
        return build_ctmc(space, [arrival(i) for i in range(n)] + [phase_done(i) for i in range(n)],
                          initial=np.zeros(n, np.int64), rewards=rewards,
                          truncation=Truncation(K, "block", "jobs per queue", layers=jobs.max(axis=1)),
                          constants={"r": r, "K": K})

    def ctmc_measure(self, measure, chain, sol):
        pi = sol.pi
        r = self.phases
        mu = np.asarray(self.service_rates, dtype=float)
        p = chain.states
        jobs = -(-p // r)
        routing = sed_routing(p, mu, r, self.ties)
        wait = float(pi @ (routing * p / (r * mu[None, :])).sum(axis=1))
        if measure == "mean_number":
            return float(pi @ jobs.sum(axis=1))
        if measure == "mean_waiting_time":
            return wait
        if measure == "mean_response_time":
            return wait + float(pi @ (routing / mu[None, :]).sum(axis=1))
        if measure == "mean_queue_lengths":
            return (pi @ jobs).tolist()
        if measure == "p_wait":
            return float(pi @ (routing * (p > 0)).sum(axis=1))
        if measure == "prob_empty":
            return float(pi[p.sum(axis=1) == 0].sum())
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover
