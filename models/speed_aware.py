"""Speed-aware JSQ and JIQ: dispatching to server classes of different speeds.

N servers in classes j = 1..J: ``counts[j]`` servers (a fraction gamma_j = counts_j / N)
of exponential rate mu_j = ``speeds[j]``, FCFS, Poisson arrivals of total rate
N * lambda (``arrival_rate`` = lambda is the rate *per server*, as in power-of-d).
Queue lengths count the job in service. An arrival is dispatched by ``policy``:

``sa-jsq``
    a shortest queue; ties go to the fastest class among the tied servers, uniformly
    within it (speed-aware JSQ, Bhambay & Mukhopadhyay 2022);
``jsq``
    a shortest queue, ties uniform over all tied servers;
``sa-jiq``
    an idle server of the fastest class that has one (uniformly within it), else a
    uniformly random server (speed-aware JIQ);
``jiq``
    an idle server chosen uniformly among all idle servers, else a uniformly random
    server;
``random``
    a uniformly random server (every server is then an M/M/1 queue with arrival rate
    lambda).

Equally fast classes are treated as one speed group by the speed-aware policies.

Methods
-------
``ctmc`` (finite ``counts``): the exact chain, lumped within each class: a state is,
for every class, the multiset of its queue lengths (stored as a non-increasing vector),
each queue truncated at a level K that the ``ctmc`` method grows until the measure
converges (an arrival to a queue at K is blocked and accounted as cut rate). States
are ranked in closed form (combinatorial number system per class, mixed radix across
classes; :class:`~exactq.statespace.SortedSpace`), so no 64-bit key can overflow. The chain has
prod_j C(K + counts_j, counts_j) states.

``fluid`` (``counts=inf`` with ``fractions``, or finite ``counts`` read as fractions
counts/N): the N -> infinity limit, see :mod:`exactq.solvers.fluid`. Speed-aware
policies fill the fastest classes first with no waiting (the linear program
min sum x_j s.t. sum mu_j x_j = lambda, 0 <= x_j <= gamma_j); ``jsq`` and ``jiq`` send
arrivals to a uniformly chosen idle server in the limit, which gives Stolyar's fixed
point x_j = lambda gamma_j / (lambda + mu_j I) with the idle fraction I the root of
sum_j gamma_j mu_j / (lambda + mu_j I) = 1 (also without waiting, but with more busy
servers: a larger E[T]); ``random`` is M/M/1 at every server for every N.

Stability
---------
For ``sa-jsq`` and ``jsq`` (finite N, and every policy but ``random`` in the limit):
N lambda < sum_j counts_j mu_j, i.e. lambda < sum_j gamma_j mu_j. For ``random``:
lambda < min_j mu_j. For ``sa-jiq`` and ``jiq`` at finite N the first condition is
necessary but not sufficient (a slow server receives lambda whenever every server is
busy); an unstable chain shows as probability mass on the truncation boundary that
does not vanish, and the ``ctmc`` method then stops with a ``TruncationError``
instead of returning a value.

References
----------
S. Bhambay, A. Mukhopadhyay, "Asymptotic optimality of speed-aware JSQ for
heterogeneous service systems", Performance Evaluation 157-158 (2022) 102320.
A. L. Stolyar, "Pull-based load distribution in large-scale heterogeneous service
systems", Queueing Systems 80 (2015) 341-361.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, TruncationError, UnstableError
from exactq.params import Param, parse_params
from exactq.statespace import SortedSpace
from exactq.truncation import Truncation

__all__ = [
    "SpeedAware",
    "SpeedAwareLimit",
    "speed_aware_routing",
    "POLICIES",
    "DISPATCH_OF_POLICY",
]

POLICIES = ("sa-jsq", "jsq", "sa-jiq", "jiq", "random")
#: the fluid-limit dispatch rule of each policy (see :mod:`exactq.solvers.fluid`)
DISPATCH_OF_POLICY = {"sa-jsq": "priority", "sa-jiq": "priority", "jsq": "idle-uniform",
                      "jiq": "idle-uniform", "random": "uniform"}
#: refuse to build lumped chains larger than this (the ``ctmc`` method stops at 6e6 too)
MAX_BUILD_STATES = 6_000_000


# -- routing ------------------------------------------------------------------------------


def speed_aware_routing(states: np.ndarray, server_speeds: np.ndarray, policy: str) -> np.ndarray:
    """Probability that an arrival joins each server, in every state at once.

    Parameters
    ----------
    states : (n, N) int array
        Queue length of every server.
    server_speeds : (N,) array
        Service rate of every server.
    policy : {"sa-jsq", "jsq", "sa-jiq", "jiq", "random"}
        See the module docstring.

    Returns
    -------
    (n, N) array whose rows sum to 1.

    Examples
    --------
    >>> q = np.array([[1, 1, 0], [1, 0, 0]])
    >>> speed_aware_routing(q, np.array([2.0, 1.0, 1.0]), "sa-jiq").tolist()
    [[0.0, 0.0, 1.0], [0.0, 0.5, 0.5]]
    """
    q = np.asarray(states)
    n, N = q.shape
    if policy == "random":
        return np.full((n, N), 1.0 / N)
    if policy in ("jsq", "sa-jsq"):
        cand = q == q.min(axis=1, keepdims=True)
    elif policy in ("jiq", "sa-jiq"):
        cand = q == 0
    else:
        raise ModelError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    if policy.startswith("sa-"):
        s = np.where(cand, np.asarray(server_speeds, dtype=float)[None, :], -np.inf)
        cand &= s == s.max(axis=1, keepdims=True)
    count = cand.sum(axis=1, keepdims=True)
    return np.where(count > 0, cand / np.maximum(count, 1), 1.0 / N)


# -- parameters -----------------------------------------------------------------------------


def _is_inf(raw) -> bool:
    if isinstance(raw, str):
        return raw.strip().lower() in ("inf", "infinity", "oo")
    return isinstance(raw, float) and math.isinf(raw) and raw > 0


_COUNTS = Param("counts", "ints", "servers in each class", low=1)


def _parse_counts(raw):
    if raw is None:
        return None
    if _is_inf(raw):
        return math.inf
    return _COUNTS.parse(raw)


_FIELDS = ("speeds", "arrival_rate", "counts", "fractions", "policy")


def _wants_limit(counts, fractions) -> bool:
    return (counts is None and fractions is not None) or (counts is not None and _is_inf(counts))


_MEASURES = {
    "mean_response_time": "E[T], mean sojourn time of a job (Little: E[L] / (N lambda)), in time units of 1/speed",
    "mean_waiting_time": "E[W], mean time in queue excluding service",
    "mean_number": "E[L], mean TOTAL number of jobs in the system (all N servers); finite counts only",
    "mean_number_per_server": "E[L] / N, mean number of jobs per server",
    "mean_queue_lengths": "mean number of jobs at ONE server of each class (list, one per class)",
    "busy_fractions": "fraction of each class's servers that are busy (list, one per class)",
    "busy_shares": "busy servers of each class as a fraction of ALL servers, x_j (list; sums to utilised servers)",
    "dispatch_fractions": "fraction of arrivals sent to each class (list, sums to 1)",
    "p_wait": "probability that an arrival joins a busy server",
}


@register_model
@dataclass(frozen=True)
class SpeedAware(Model):
    """Heterogeneous server classes under speed-aware or plain JSQ/JIQ (module docstring).

    Build with ``exactq.model("speed-aware", speeds="2,1", counts="3,3", ...)``;
    ``counts="inf"`` with ``fractions`` (or ``fractions`` alone) gives the
    N -> infinity limit, an instance of :class:`SpeedAwareLimit` whose only method is
    ``fluid``.

    Examples
    --------
    One server per class under SA-JSQ is two-server JSQ with ties to the faster one:

    >>> import exactq
    >>> a = exactq.solve("speed-aware", speeds="2,1", counts="1,1", arrival_rate=0.6)
    >>> b = exactq.solve("jsq", "mean_response_time", arrival_rate=1.2, service_rates="2,1",
    ...                  ties="fastest")
    >>> abs(a.value - b.value) < 1e-8
    True
    """

    name = "speed-aware"
    summary = "speed-aware JSQ/JIQ over server classes with speeds and counts; exact finite N and the fluid limit"
    reference = ("Bhambay & Mukhopadhyay, Performance Evaluation 2022 (speed-aware JSQ); "
                 "Stolyar, Queueing Systems 80, 2015 (JIQ limit)")
    parameters = (
        Param("speeds", "floats", "service rate mu_j of one server of each class", low=0.0, low_open=True),
        Param("counts", "str", "servers in each class, comma separated (ints >= 1), or inf for the "
              "N -> infinity limit (then give fractions)", default=None),
        Param("fractions", "floats", "fraction gamma_j of servers in each class, summing to 1 "
              "(the N -> infinity limit; not with finite counts)", default=None, low=0.0, low_open=True),
        Param("arrival_rate", "float", "arrival rate PER SERVER lambda (total N lambda)", low=0.0, low_open=True),
        Param("policy", "choice", "dispatching policy", default="sa-jsq", choices=POLICIES),
    )
    measures = dict(_MEASURES)
    methods = ("ctmc", "fluid")
    default_measure = "mean_response_time"

    speeds: tuple
    arrival_rate: float
    counts: object = None
    fractions: object = None
    policy: str = "sa-jsq"

    def __new__(cls, *args, **kwargs):
        # one model name, two capabilities: the limit offers only the fluid method
        given = dict(zip(_FIELDS, args))
        given.update(kwargs)
        target = SpeedAwareLimit if _wants_limit(given.get("counts"), given.get("fractions")) else SpeedAware
        obj = object.__new__(target)
        if not issubclass(target, cls):  # Python runs __init__ only for instances of cls
            obj.__init__(*args, **kwargs)
        return obj

    @classmethod
    def create(cls, **raw) -> "SpeedAware":
        raw = dict(raw)
        counts = raw.pop("counts", None)
        values = parse_params(cls.name, cls.parameters, raw)
        values["counts"] = counts
        return SpeedAware(**values)

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "speeds", tuple(float(v) for v in self.parameters[0].parse(self.speeds)))
        set_(self, "counts", _parse_counts(self.counts))
        if self.fractions is not None:
            set_(self, "fractions", self.parameters[2].parse(self.fractions))
            if self.counts is None:  # fractions alone: the limit, stored canonically as counts=inf
                set_(self, "counts", math.inf)
        set_(self, "arrival_rate", self.parameters[3].parse(self.arrival_rate))
        set_(self, "policy", self.parameters[4].parse(self.policy))
        self.check()

    def check(self):
        J = len(self.speeds)
        if self.counts is None and self.fractions is None:
            raise ModelError("give counts (servers per class, or inf) or fractions (the N -> infinity limit)")
        if self.is_limit:
            if self.fractions is None:
                raise ModelError("counts=inf needs fractions (fraction of servers in each class)")
            if len(self.fractions) != J:
                raise ModelError(f"fractions must have one entry per class ({J} speeds); got {len(self.fractions)}")
            total = float(sum(self.fractions))
            if abs(total - 1.0) > 1e-6:
                raise ModelError(f"fractions must sum to 1; got sum {total:.9g}")
            object.__setattr__(self, "fractions", tuple(f / total for f in self.fractions))
        else:
            if self.fractions is not None:
                raise ModelError("fractions apply to the N -> infinity limit only; give counts or fractions, not both")
            if len(self.counts) != J:
                raise ModelError(f"counts must have one entry per class ({J} speeds); got {len(self.counts)}")
        mu = np.asarray(self.speeds)
        gamma = self.gamma
        lam = self.arrival_rate
        if self.policy == "random":
            if lam >= mu.min():
                raise UnstableError(
                    f"arrival_rate must be < slowest speed {mu.min():g} for stability under random routing "
                    f"(each server is M/M/1 with arrival rate arrival_rate); got {lam:g}"
                )
        cap = float(gamma @ mu)
        if lam >= cap:
            raise UnstableError(
                f"arrival_rate must be < mean speed sum_j gamma_j speeds_j = {cap:g} for stability "
                f"(N arrival_rate < total service rate); got {lam:g}"
            )

    # -- derived --------------------------------------------------------------------------
    @property
    def is_limit(self) -> bool:
        """Whether the model is the N -> infinity limit (no finite counts)."""
        return not isinstance(self.counts, tuple)

    @property
    def gamma(self) -> np.ndarray:
        """Fractions gamma_j of servers in each class."""
        if self.is_limit:
            return np.asarray(self.fractions, dtype=float)
        c = np.asarray(self.counts, dtype=float)
        return c / c.sum()

    @property
    def n_servers(self) -> int:
        return int(sum(self.counts))

    @property
    def server_class(self) -> np.ndarray:
        """(N,) class index of every server, in the column order of the lumped states."""
        return np.repeat(np.arange(len(self.counts)), self.counts)

    # -- CTMC protocol ------------------------------------------------------------------------
    is_infinite = True

    def truncation_start(self, tol: float) -> int:
        """First truncation level: where the geometric tail of the policy falls below ``tol``."""
        mu = np.asarray(self.speeds)
        lam = self.arrival_rate
        N = self.n_servers
        if self.policy == "random":
            k = math.log(tol) / math.log(lam / mu.min())
        else:
            rho = N * lam / float(np.asarray(self.counts) @ mu)
            # JSQ-type: a queue reaches k only if every queue held k - 1, i.e. ~N (k - 1) jobs
            k = 1 + math.log(tol) / (N * math.log(rho))
            if self.policy in ("jiq", "sa-jiq"):
                k += 2
        return max(2, int(math.ceil(k)))

    def ctmc_size(self, truncation: int) -> int:
        """States of the lumped chain at ``truncation``: prod_j C(K + counts_j, counts_j)."""
        K = int(truncation)
        return math.prod(math.comb(K + c, c) for c in self.counts)

    def ctmc(self, truncation=None):
        """The lumped chain truncated at ``truncation`` jobs per queue (rule: block arrivals)."""
        if truncation is None:
            raise ModelError("speed-aware needs a truncation level for its CTMC")
        K = int(truncation)
        names = [f"q{j + 1}_{i + 1}" for j, c in enumerate(self.counts) for i in range(c)]
        space = SortedSpace(self.counts, level=K, order="descending", names=names, max_states=MAX_BUILD_STATES)
        states = space.states
        N = self.n_servers
        cls = self.server_class
        mu = np.asarray(self.speeds, dtype=float)[cls]
        lam_total = N * self.arrival_rate
        routing = speed_aware_routing(states, mu, self.policy)
        slices = space.class_slices

        def arrival(p):
            sl = slices[cls[p]]

            def fn(s):
                blk = s[:, sl]
                first = sl.start + (blk == s[:, [p]]).argmax(axis=1)  # keeps the class sorted
                t = s.copy()
                t[np.arange(len(s)), first] += 1
                return lam_total * routing[:, p], t

            return Event(f"arrival_{self._server_label(p)}", fn)

        def departure(p):
            sl = slices[cls[p]]
            width = sl.stop - sl.start

            def fn(s):
                blk = s[:, sl]
                last = sl.start + width - 1 - (blk == s[:, [p]])[:, ::-1].argmax(axis=1)
                t = s.copy()
                t[np.arange(len(s)), last] -= 1
                return mu[p] * (s[:, p] > 0), t

            return Event(f"departure_{self._server_label(p)}", fn)

        events = [arrival(p) for p in range(N)] + [departure(p) for p in range(N)]
        onehot = (cls[:, None] == np.arange(len(self.counts))[None, :]).astype(np.int64)
        rewards = {"total": states.sum(axis=1)}
        busy = (states > 0).astype(np.int64) @ onehot
        jobs = states @ onehot
        for j in range(len(self.counts)):
            rewards[f"busy{j + 1}"] = busy[:, j]
            rewards[f"jobs{j + 1}"] = jobs[:, j]
        consts = {"K": K, "N": N, "arrival_rate": self.arrival_rate}
        # many dimensions, narrow levels: a block-banded LU by total jobs fills 6x less
        # than nested dissection (53,361 states: 5.5M vs 34M factor entries)
        return build_ctmc(space, events, initial=np.zeros(N, np.int64), rewards=rewards, constants=consts,
                          truncation=Truncation(K, "block", "each queue"), ordering="level" if N > 3 else "auto")

    def _server_label(self, p: int) -> str:
        j = int(self.server_class[p])
        return f"class{j + 1}_{p - int(sum(self.counts[:j])) + 1}"

    def ctmc_measure(self, measure, chain, sol):
        pi = sol.pi
        s = chain.states
        N = self.n_servers
        counts = np.asarray(self.counts, dtype=float)
        K = int(chain.truncation.level)
        cls = self.server_class
        onehot = (cls[:, None] == np.arange(len(self.counts))[None, :]).astype(float)
        lam_total = N * self.arrival_rate
        accepted = lam_total - float(pi @ chain.cut_rate)
        total = s.sum(axis=1)
        if measure == "mean_response_time":
            return float(pi @ total) / accepted
        if measure == "mean_waiting_time":
            return float(pi @ np.maximum(s - 1, 0).sum(axis=1)) / accepted
        if measure == "mean_number":
            return float(pi @ total)
        if measure == "mean_number_per_server":
            return float(pi @ total) / N
        if measure == "mean_queue_lengths":
            return ((pi @ s) @ onehot / counts).tolist()
        if measure in ("busy_fractions", "busy_shares"):
            busy = (pi @ (s > 0)) @ onehot
            return (busy / (counts if measure == "busy_fractions" else N)).tolist()
        mu = np.asarray(self.speeds, dtype=float)[cls]
        routed = speed_aware_routing(s, mu, self.policy) * (s < K)  # blocked arrivals excluded
        if measure == "dispatch_fractions":
            per_class = (pi @ routed) @ onehot
            return (per_class / per_class.sum()).tolist()
        if measure == "p_wait":
            return float(pi @ (routed * (s > 0)).sum(axis=1)) / float(pi @ routed.sum(axis=1))
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover (validated by the API)

    # -- fluid protocol ------------------------------------------------------------------------
    def fluid_problem(self) -> dict:
        """The limit N -> infinity with the same fractions (counts / N for finite counts)."""
        return {"rates": np.asarray(self.speeds, dtype=float), "fractions": self.gamma,
                "arrival_rate": self.arrival_rate, "dispatch": DISPATCH_OF_POLICY[self.policy]}

    def fluid_measure(self, measure, point):
        if measure == "mean_response_time":
            return point.mean_response_time
        if measure == "mean_waiting_time":
            return point.mean_waiting_time
        if measure == "mean_number_per_server":
            return point.mean_number_per_server
        if measure == "mean_number":
            if self.is_limit:
                raise ModelError("mean_number (total) is infinite as N -> infinity; use mean_number_per_server")
            return self.n_servers * point.mean_number_per_server  # the fluid approximation of E[L]
        if measure == "mean_queue_lengths":
            return point.mean_queue.tolist()
        if measure == "busy_fractions":
            return point.busy_fractions.tolist()
        if measure == "busy_shares":
            return point.busy.tolist()
        if measure == "dispatch_fractions":
            return point.dispatch_fractions.tolist()
        if measure == "p_wait":
            return point.p_wait
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover


class SpeedAwareLimit(SpeedAware):
    """The N -> infinity limit of :class:`SpeedAware` (``counts=inf``): fluid method only."""

    methods = ("fluid",)
    measures = {k: v for k, v in _MEASURES.items() if k != "mean_number"}
    ctmc = None  # no finite chain: not offered
