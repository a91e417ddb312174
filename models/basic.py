"""Single-queue reference models: M/M/1, M/M/c and M/M/c/K.

They anchor the library's tests: every CTMC answer is checked against these closed
forms (Kleinrock, *Queueing Systems* vol. 1, 1975, sec. 3.2-3.7; Erlang's C formula).
Conventions: FCFS, the number in system counts jobs in service, waiting time excludes
service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, UnstableError
from exactq.params import Param
from exactq.statespace import StateSpace
from exactq.truncation import Truncation

__all__ = ["MM1", "MMc", "MMcK"]

_MEASURES = {
    "mean_number": "E[L], mean number in system",
    "mean_queue_length": "mean number waiting (excluding those in service)",
    "mean_response_time": "E[T] = E[W] + 1/mu, sojourn time of an accepted job",
    "mean_waiting_time": "E[W], time in queue before service of an accepted job",
    "p_wait": "probability that an accepted arrival waits",
    "utilization": "mean fraction of busy servers",
    "prob_empty": "probability that the system is empty",
}


class _BirthDeath(Model):
    """Common CTMC and closed-form machinery for M/M/c with optional capacity."""

    methods = ("closed-form", "ctmc")
    default_measure = "mean_number"

    # subclasses provide: arrival_rate, service_rate, _servers, _capacity (None = infinite)
    @property
    def is_infinite(self) -> bool:
        return self._capacity is None

    def _probabilities(self, K: int) -> np.ndarray:
        """Exact stationary law on 0..K of the birth-death chain (product form)."""
        n = np.arange(K + 1)
        c = self._servers
        a = self.arrival_rate / self.service_rate
        # log p_n = n log a - log(min(n, c)!) - (n - c)^+ log c
        logp = n * math.log(a) - gammaln(np.minimum(n, c) + 1) - np.maximum(n - c, 0) * math.log(c)
        p = np.exp(logp - logp.max())
        return p / p.sum()

    # -- CTMC representation ---------------------------------------------------
    def truncation_start(self, tol: float) -> int:
        rho = self.arrival_rate / (self._servers * self.service_rate)
        return int(self._servers + math.ceil(math.log(tol) / math.log(rho))) + 10

    def ctmc_size(self, truncation) -> int:
        return (self._capacity if self._capacity is not None else int(truncation)) + 1

    def ctmc(self, truncation=None):
        K = self._capacity if self._capacity is not None else int(truncation)
        lam, mu, c = self.arrival_rate, self.service_rate, self._servers
        space = StateSpace.box(["n"], hi=[K])
        events = [
            Event("arrival", lambda s: (np.full(len(s), lam), s + 1)),
            Event("departure", lambda s: (mu * np.minimum(s[:, 0], c), s - 1)),
        ]
        trunc = Truncation(K, "block", "number in system") if self._capacity is None else None
        return build_ctmc(space, events, initial=0, truncation=trunc,
                          constants={"c": c, "K": K})

    def ctmc_measure(self, measure, chain, sol):
        pi = sol.pi
        n = chain.states[:, 0].astype(float)
        K = chain.states[-1, 0]
        c = self._servers
        p_full = pi[-1] if self._capacity is not None else 0.0
        return self._measure_from(measure, n, pi, p_full, K, c)

    def _measure_from(self, measure, n, pi, p_full, K, c):
        lam, mu = self.arrival_rate, self.service_rate
        accepted = lam * (1.0 - p_full)
        L = float(pi @ n)
        Lq = float(pi @ np.maximum(n - c, 0))
        if measure == "mean_number":
            return L
        if measure == "mean_queue_length":
            return Lq
        if measure == "mean_response_time":
            return L / accepted
        if measure == "mean_waiting_time":
            return Lq / accepted
        if measure == "p_wait":
            waits = float(pi[(n >= c) & (n < K)].sum()) if self._capacity is not None else float(pi[n >= c].sum())
            return waits / (1.0 - p_full)
        if measure == "utilization":
            return float(pi @ np.minimum(n, c)) / c
        if measure == "prob_empty":
            return float(pi[0])
        if measure == "blocking_probability":
            return float(p_full)
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover (validated by the API)

    # -- closed forms ------------------------------------------------------------
    def closed_form(self, measure):
        lam, mu, c = self.arrival_rate, self.service_rate, self._servers
        if self._capacity is not None:
            K = self._capacity
            p = self._probabilities(K)
            n = np.arange(K + 1, dtype=float)
            return self._measure_from(measure, n, p, p[-1], K, c)
        a = lam / mu
        rho = a / c
        # Erlang C via the stable Erlang B recursion B(k) = a B(k-1) / (k + a B(k-1))
        B = 1.0
        for k in range(1, c + 1):
            B = a * B / (k + a * B)
        C = B / (1.0 - rho * (1.0 - B))
        Wq = C / (c * mu - lam)
        values = {
            "mean_waiting_time": Wq,
            "mean_response_time": Wq + 1.0 / mu,
            "mean_queue_length": lam * Wq,
            "mean_number": lam * Wq + a,
            "p_wait": C,
            "utilization": rho,
        }
        if measure == "prob_empty":
            s = sum(a**k / math.factorial(k) for k in range(c)) + a**c / (math.factorial(c) * (1 - rho))
            return 1.0 / s
        return values[measure]


def _stability(arrival_rate: float, total: float, what: str) -> None:
    if arrival_rate >= total:
        raise UnstableError(
            f"arrival_rate must be < {what} {total:g} for stability; got {arrival_rate:g}"
        )


_RATE = dict(low=0.0, low_open=True)


@register_model
@dataclass(frozen=True)
class MM1(_BirthDeath):
    """The M/M/1 queue."""

    name = "mm1"
    summary = "M/M/1: Poisson arrivals, one exponential server, infinite buffer"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.2"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda", **_RATE),
        Param("service_rate", "float", "service rate mu", default=1.0, **_RATE),
    )
    measures = dict(_MEASURES)
    arrival_rate: float
    service_rate: float = 1.0

    _servers = 1
    _capacity = None

    def check(self):
        _stability(self.arrival_rate, self.service_rate, "service_rate")


@register_model
@dataclass(frozen=True)
class MMc(_BirthDeath):
    """The M/M/c queue (Erlang C)."""

    name = "mmc"
    summary = "M/M/c: c identical exponential servers, one FCFS queue (Erlang C)"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.5"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda", **_RATE),
        Param("servers", "int", "number of servers c", low=1),
        Param("service_rate", "float", "service rate of each server", default=1.0, **_RATE),
    )
    measures = dict(_MEASURES)
    arrival_rate: float
    servers: int
    service_rate: float = 1.0
    _capacity = None

    @property
    def _servers(self):
        return self.servers

    def check(self):
        _stability(self.arrival_rate, self.servers * self.service_rate, "total service rate")


@register_model
@dataclass(frozen=True)
class MMcK(_BirthDeath):
    """The M/M/c/K queue: at most K jobs in system, arrivals finding K are lost."""

    name = "mmck"
    summary = "M/M/c/K: c exponential servers, room for K jobs in total; arrivals finding K are lost"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.6-3.7"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda", **_RATE),
        Param("servers", "int", "number of servers c", low=1),
        Param("capacity", "int", "maximum number in system K (>= servers)", low=1),
        Param("service_rate", "float", "service rate of each server", default=1.0, **_RATE),
    )
    measures = dict(_MEASURES, blocking_probability="probability an arrival is lost (PASTA)")
    arrival_rate: float
    servers: int
    capacity: int
    service_rate: float = 1.0

    @property
    def _servers(self):
        return self.servers

    @property
    def _capacity(self):
        return self.capacity

    def check(self):
        if self.capacity < self.servers:
            raise ModelError(f"capacity must be >= servers {self.servers}; got {self.capacity}")
