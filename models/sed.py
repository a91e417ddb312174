"""Shortest-expected-delay routing to Erlang (or exponential) servers.

n >= 2 parallel FCFS queues; server i has Erlang-r service with mean 1/mu_i (r phases
of rate r mu_i each); Poisson arrivals of rate ``arrival_rate``. The state is the
number of remaining service phases at each queue, p_i = (phases left of the job in
service) + r x (waiting jobs). An arrival joins the queue with the shortest expected
delay *counting its own service*, (p_i + r) / (r mu_i); ties go uniformly to the tied
queues (``ties=random``) or to the fastest tied server (``ties=fastest``).

``phases=1`` is exponential SED (Selen, Adan, Kapodistria & van Leeuwaarden, Queueing
Systems 84, 2016: join queue 1 iff (q1+1)/mu1 < (q2+1)/mu2); with equal rates it is
JSQ. By PASTA, E[W] = E[ p_J / (r mu_J) ] with J the queue an arrival joins.

References
----------
Adan & Wessels, "Shortest expected delay routing for Erlang servers", Queueing
Systems 23, 1996.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, UnstableError
from exactq.params import Param
from exactq.statespace import StateSpace

__all__ = ["SED", "sed_routing"]


def sed_routing(phases_left: np.ndarray, rates: np.ndarray, r: int, ties: str) -> np.ndarray:
    """Routing probabilities of an arrival in every state at once.

    Compares (p_i + r) mu_j with (p_j + r) mu_i exactly enough for ties: delays are
    equal when they agree to 1e-12 relative.
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
    """Shortest expected delay routing to Erlang servers (see the module docstring)."""

    name = "sed"
    summary = "shortest-expected-delay routing, n >= 2 servers with Erlang-r service"
    reference = "Adan & Wessels, Queueing Systems 23 (1996); Selen et al., Queueing Systems 84 (2016)"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate (total)", low=0.0, low_open=True),
        Param("service_rates", "floats", "mean service rate mu_i of each server", low=0.0, low_open=True,
              min_len=2),
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
    methods = ("ctmc",)
    default_measure = "mean_waiting_time"

    arrival_rate: float
    service_rates: tuple
    phases: int = 1
    ties: str = "random"

    is_infinite = True

    def check(self):
        total = float(sum(self.service_rates))
        if self.arrival_rate >= total:
            raise UnstableError(
                f"arrival_rate must be < total service rate {total:g} for stability; got {self.arrival_rate:g}"
            )

    def truncation_start(self, tol: float) -> int:
        rho = self.arrival_rate / sum(self.service_rates)
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
                          truncation={"level": K, "rule": "block", "variables": "jobs per queue",
                                      "levels": jobs.max(axis=1)},
                          constants={"r": r, "K": K})

    def ctmc_measure(self, measure, chain, pi):
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
