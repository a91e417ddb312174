"""Join-the-shortest-queue with heterogeneous exponential servers.

n >= 2 parallel queues, server i of rate ``service_rates[i]``, Poisson arrivals of
rate ``arrival_rate``; an arrival joins a shortest queue (queue lengths count the job
in service). Ties go uniformly to the tied queues (``ties=random``) or to the fastest
tied server (``ties=fastest``, uniformly among equally fast ones). With a finite
``capacity`` per queue an arrival finding every queue full is lost; the shortest
non-full queue is joined otherwise.

References
----------
Adan, Wessels & Zijm, "Analysis of the symmetric shortest queue problem", Stochastic
Models 6(4), 1990; "Analysis of the asymmetric shortest queue problem", Queueing
Systems 8, 1991.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.params import Param
from exactq.statespace import SortedSpace, StateSpace
from exactq.truncation import Truncation

__all__ = ["JSQ", "jsq_routing"]


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


@register_model
@dataclass(frozen=True)
class JSQ(Model):
    """Join the shortest queue (see the module docstring)."""

    name = "jsq"
    summary = "join-the-shortest-queue, n >= 2 exponential servers, optional capacity per queue"
    reference = "Adan, Wessels & Zijm, Stochastic Models 6(4) 1990; Queueing Systems 8 1991"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate (total)", low=0.0, low_open=True),
        Param("service_rates", "floats", "service rate of each server", low=0.0, low_open=True, min_len=2),
        Param("ties", "choice", "how ties between shortest queues are broken", default="random",
              choices=("random", "fastest")),
        Param("capacity", "int_or_inf", "maximum jobs per queue (arrivals finding all full are lost)",
              default=math.inf, low=1),
        Param("threshold", "int", "threshold T of --method bounds (default: grown until the width is < tol)",
              default=None, low=1),
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
    methods = ("ctmc", "compensation", "bounds", "asymptotic")
    default_measure = "mean_number"

    arrival_rate: float
    service_rates: tuple
    ties: str = "random"
    capacity: float = math.inf
    threshold: int | None = None

    def check(self):
        if self.is_infinite:
            total = float(sum(self.service_rates))
            if self.arrival_rate >= total:
                raise UnstableError(
                    f"arrival_rate must be < total service rate {total:g} for stability; "
                    f"got {self.arrival_rate:g}"
                )

    #: largest service-rate ratio for which ``auto`` uses the compensation series for two
    #: unequal servers (tested over loads 0.01..0.999 and all tie rules; beyond it the
    #: series needs very large near-origin regions or does not converge)
    AUTO_COMPENSATION_MAX_RATIO = 100.0

    def auto_method(self) -> str:
        """Compensation for two servers without capacity (exact series), else the CTMC."""
        if self._two_server_walk():
            r = self.service_rates
            if max(r) / min(r) <= self.AUTO_COMPENSATION_MAX_RATIO:
                return "compensation"
        return "ctmc"

    def _two_server_walk(self) -> bool:
        return self.is_infinite and len(self.service_rates) == 2 and self.threshold is None

    # -- quarter-plane random walk (compensation approach) ----------------------------
    def quarter_plane(self) -> dict:
        """The two-server walk for the compensation approach.

        Equal rates: ``{"kind": "symmetric-jsq", "rho", "service_rate"}`` (ties are then
        broken 1/2-1/2 under both tie rules). Unequal rates: ``{"kind": "asymmetric-jsq",
        "arrival_rate", "service_rates", "tie_prob_1"}`` with ``tie_prob_1`` the probability
        that an arrival finding equal queues joins queue 1 (1/2 for ``ties=random``; 1 or 0
        for ``ties=fastest``).
        """
        if not self._two_server_walk():
            raise NotApplicableError(
                "compensation needs exactly two servers, infinite capacity and no threshold; got "
                f"service_rates={list(self.service_rates)}, capacity={self.capacity}, threshold={self.threshold}; "
                "use --method ctmc"
            )
        mu1, mu2 = (float(x) for x in self.service_rates)
        if mu1 == mu2:
            return {"kind": "symmetric-jsq", "rho": self.arrival_rate / (2 * mu1), "service_rate": mu1}
        q = 0.5 if self.ties == "random" else (1.0 if mu1 > mu2 else 0.0)
        return {"kind": "asymmetric-jsq", "arrival_rate": float(self.arrival_rate), "service_rates": (mu1, mu2),
                "tie_prob_1": q}

    def jsq_bounds(self) -> dict:
        """Data of the threshold-jockeying / threshold-blocking bounds (van Houtum et al. 1998)."""
        return {"arrival_rate": self.arrival_rate, "service_rates": tuple(self.service_rates),
                "ties": self.ties, "threshold": self.threshold, "capacity": self.capacity}

    def finite_capacity_walk(self) -> dict:
        """Two identical servers with a finite capacity K per queue (asymptotic regimes)."""
        r = self.service_rates
        if self.is_infinite or len(r) != 2 or r[0] != r[1] or self.ties != "random":
            raise NotApplicableError(
                "the asymptotic method needs two identical servers, ties=random and a finite capacity; got "
                f"service_rates={list(r)}, capacity={self.capacity}, ties={self.ties}"
            )
        return {"rho": self.arrival_rate / r[0], "capacity": int(self.capacity), "service_rate": r[0]}

    @property
    def is_infinite(self) -> bool:
        return not math.isfinite(self.capacity)

    @property
    def n_servers(self) -> int:
        return len(self.service_rates)

    # -- CTMC ------------------------------------------------------------------
    def truncation_start(self, tol: float) -> int:
        rho = self.arrival_rate / sum(self.service_rates)
        return int(math.ceil(math.log(tol) / math.log(rho) / self.n_servers)) + 10

    def ctmc_size(self, truncation) -> int:
        K = int(truncation) if self.is_infinite else int(self.capacity)
        return (K + 1) ** self.n_servers

    def ctmc(self, truncation=None):
        n = self.n_servers
        if self.is_infinite:
            if truncation is None:
                raise ModelError("jsq without capacity needs a truncation level")
            K = int(truncation)
            trunc = Truncation(K, "block", "each queue")
        else:
            K = int(self.capacity)
            trunc = None
        mu = np.asarray(self.service_rates, dtype=float)
        lam = self.arrival_rate
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
        n = self.n_servers
        K = int(truncation) if self.is_infinite else int(self.capacity)
        mu, lam = float(self.service_rates[0]), self.arrival_rate
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

    def _measure(self, measure, chain, sol, *, lumped: bool):
        """Measures of the full chain (states q_i) or the lumped one (sorted queue lengths)."""
        pi = sol.pi
        s = chain.states
        full = chain.labels["full"]
        p_lost = float(pi[full].sum()) if not self.is_infinite else 0.0
        accepted = self.arrival_rate * (1.0 - p_lost)
        total = s.sum(axis=1)
        n = self.n_servers
        if measure == "mean_number":
            return float(pi @ total)
        if measure == "mean_response_time":
            return float(pi @ total) / accepted
        if measure == "mean_waiting_time":
            return float(pi @ np.maximum(s - 1, 0).sum(axis=1)) / accepted
        if measure == "prob_empty":
            return float(pi[total == 0].sum())
        if measure == "blocking_probability":
            self._finite_capacity_for(measure)
            return p_lost
        if measure == "mean_queue_lengths":
            return [float(pi @ total) / n] * n if lumped else (pi @ s).tolist()
        if measure == "p_wait":
            if lumped:  # identical servers: an accepted arrival waits iff the shortest queue is busy
                return float(pi[(s[:, 0] >= 1) & ~full].sum()) / (1.0 - p_lost)
            routing = jsq_routing(s, np.asarray(self.service_rates, float), self.ties, self.capacity)
            return float(pi @ (routing * (s > 0)).sum(axis=1)) / (1.0 - p_lost)
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

    def _finite_capacity_for(self, measure: str) -> int:
        if self.is_infinite:
            raise ModelError(f"{measure} needs a finite capacity; got capacity=inf")
        return int(self.capacity)
