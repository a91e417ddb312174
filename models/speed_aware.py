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
counts/N): the N -> infinity limit (the fixed point of the fluid dynamics; a *limit*
value, which the finite-N values of ``ctmc`` approach as N grows). Each policy maps
to a dispatch rule (:data:`DISPATCH_OF_POLICY`) and the rule to plain mathematics
(:mod:`exactq.representations.routing`) that the generic solvers of
:mod:`exactq.solvers.fluid` consume:

* ``priority`` (sa-jsq, sa-jiq): the fastest classes fill first with no waiting; the
  busy fractions x_j (busy class-j servers per server of the system) solve the linear
  program min sum x_j s.t. sum mu_j x_j = lambda, 0 <= x_j <= gamma_j (Bhambay &
  Mukhopadhyay 2022, the delay-optimal configuration; :meth:`SpeedAware.fluid_program`),
  solved by the greedy fill and independently by HiGHS;
* ``idle-uniform`` (jsq, jiq): arrivals join a uniformly chosen idle server in the
  limit, Stolyar's fixed point x_j = lambda gamma_j / (lambda + mu_j I) with the idle
  fraction I the root of sum_j gamma_j mu_j / (lambda + mu_j I) = 1
  (:meth:`SpeedAware.idle_equation`, Brent's method; independently the J balance
  equations by ``scipy.optimize.root``), also without waiting but with more busy
  servers (a larger E[T]);
* ``uniform`` (random): M/M/1 at every server for every N, in closed form.

With no waiting E[T] = sum_j x_j / lambda (Little's law on the busy servers).

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
import warnings
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, NotApplicableError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Param, parse_params
from exactq.representations.routing import LinearProgram, RootProblem
from exactq.result import Result
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
#: the fluid-limit dispatch rule of each policy (module docstring)
DISPATCH_OF_POLICY = {"sa-jsq": "priority", "sa-jiq": "priority", "jsq": "idle-uniform",
                      "jiq": "idle-uniform", "random": "uniform"}
_EPS = np.finfo(float).eps
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


def _count_servers(values: dict):
    """N = sum(counts), the number of servers (inf for the limit), for the arrival-rate aliases."""
    counts = _parse_counts(values.get("counts"))
    if counts is None:
        if values.get("fractions") is None:
            raise ModelError("give counts (servers per class, or inf) or fractions (the N -> infinity limit)")
        return math.inf
    return counts if counts == math.inf else sum(counts)


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
        Param("speeds", "floats", "service rate mu_j of one server of each class", low=0.0, low_open=True,
              scope="per-server"),
        Param("counts", "str", "servers in each class, comma separated (ints >= 1), or inf for the "
              "N -> infinity limit (then give fractions)", default=None),
        Param("fractions", "floats", "fraction gamma_j of servers in each class, summing to 1 "
              "(the N -> infinity limit; not with finite counts)", default=None, low=0.0, low_open=True),
        Param("arrival_rate", "float", "arrival rate PER SERVER lambda (total N lambda)", low=0.0, low_open=True,
              scope="per-server", count=_count_servers, count_doc="sum(counts)", aliases=ARRIVAL_RATE_ALIASES),
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
        values = parse_params(cls.name, cls.parameters, raw, known={"counts": counts})
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

    # -- the fluid limit (the ``fluid`` method, ``model`` driver) ---------------------------------
    @property
    def dispatch_rule(self) -> str:
        """The fluid-limit dispatch rule of the policy (:data:`DISPATCH_OF_POLICY`)."""
        return DISPATCH_OF_POLICY[self.policy]

    def fluid_program(self) -> LinearProgram:
        """The speed-priority fixed point: min sum x_j s.t. sum mu_j x_j = lambda, 0 <= x_j <= gamma_j.

        Bhambay & Mukhopadhyay (2022), the delay-optimal configuration; x_j is the
        fraction of all servers that are busy class-j servers.

        Examples
        --------
        >>> m = SpeedAware(speeds=(2.0, 1.0), fractions=(0.5, 0.5), arrival_rate=1.2)
        >>> m.fluid_program().A_eq.tolist(), m.fluid_program().upper.tolist()
        ([[2.0, 1.0]], [0.5, 0.5])
        """
        mu = np.asarray(self.speeds, dtype=float)
        return LinearProgram(np.ones_like(mu), mu[None, :], [self.arrival_rate], self.gamma)

    def idle_equation(self) -> RootProblem:
        """Stolyar's (2015) fixed point: the idle fraction I is the root of g on [0, 1].

        With I = sum_j (gamma_j - x_j), balance mu_j x_j = lambda (gamma_j - x_j) / I
        gives x_j = lambda gamma_j / (lambda + mu_j I) and
        g(I) = 1 - sum_j gamma_j mu_j / (lambda + mu_j I), increasing in I, negative
        at 0 iff lambda < sum_j gamma_j mu_j and positive at 1.

        Examples
        --------
        One class has I = 1 - lambda / mu:

        >>> m = SpeedAware(speeds=(2.0,), fractions=(1.0,), arrival_rate=1.5, policy="jiq")
        >>> m.idle_equation().function(0.25)
        0.0
        """
        mu, gamma, lam = np.asarray(self.speeds, dtype=float), self.gamma, self.arrival_rate

        def g(idle):
            return 1.0 - float(np.sum(gamma * mu / (lam + mu * idle)))

        return RootProblem(g, bracket=(0.0, 1.0), xtol=1e-15, rtol=4 * _EPS)

    def balance_equations(self) -> RootProblem:
        """The same fixed point as J equations in x: mu_j x_j I(x) = lambda (gamma_j - x_j).

        The independent check of :meth:`idle_equation` (``verify``), from x = gamma/2.

        Examples
        --------
        >>> m = SpeedAware(speeds=(2.0,), fractions=(1.0,), arrival_rate=1.5, policy="jiq")
        >>> m.balance_equations().function(np.array([0.75])).tolist()
        [0.0]
        """
        mu, gamma, lam = np.asarray(self.speeds, dtype=float), self.gamma, self.arrival_rate

        def F(x):
            return mu * x * np.sum(gamma - x) - lam * (gamma - x)

        return RootProblem(F, start=0.5 * gamma, xtol=1e-15)

    def fluid(self, measure: str, context) -> Result:
        """``measure`` at the fluid-limit fixed point (N -> infinity with the fractions gamma).

        ``priority`` (sa-jsq, sa-jiq): the linear program :meth:`fluid_program`;
        ``idle-uniform`` (jsq, jiq): the root of :meth:`idle_equation`; both have no
        waiting, so E[T] = sum_j x_j / lambda (Little's law on the busy servers).
        ``uniform`` (random): M/M/1 at every server, in closed form. The error
        estimate is the numerical error of the fixed point (rounding, root
        tolerance) carried to the measure as a relative error. With ``verify`` the
        fixed point is re-solved independently (HiGHS; ``scipy.optimize.root`` on
        :meth:`balance_equations`; Little's law) and compared in ``info["verify"]``.

        Examples
        --------
        MODELS.md: gamma = (.5, .5), mu = (2, 1), lambda = 1.2 under SA-JSQ gives
        x = (0.5, 0.2) and E[T] = 0.58333333.

        >>> import exactq
        >>> r = exactq.solve("speed-aware", speeds="2,1", fractions="0.5,0.5", arrival_rate=1.2)
        >>> r.method, round(r.value, 8), np.round(r.info["busy"], 12).tolist()
        ('fluid/priority', 0.58333333, [0.5, 0.2])
        """
        mu, gamma, lam = np.asarray(self.speeds, dtype=float), self.gamma, self.arrival_rate
        rule = self.dispatch_rule
        info: dict = {}
        residual = None
        if rule == "uniform":  # every server M/M/1 with arrival rate lambda (stable: check())
            rho = lam / mu
            busy = gamma * rho
            queue = rho / (1.0 - rho)
            dispatch = gamma.copy()
            p_wait = float(gamma @ rho)
            ET = float(gamma @ (1.0 / (mu - lam)))
            EW = float(gamma @ (rho / (mu - lam)))
            err = 8 * _EPS * mu.size * ET / float(np.min(1.0 - rho))
            idle = float(np.sum(gamma - busy))
            info["closed_form"] = "M/M/1 per server"
        else:
            if rule == "priority":
                program = self.fluid_program()
                sol = context.solve(program)
                busy, err_busy = sol.x, sol.error
                idle = float(np.sum(gamma - busy))
                if sol.closed_form:
                    info["closed_form"] = "fill fastest first"
            else:
                root = context.solve(self.idle_equation())
                idle = root.x
                busy = lam * gamma / (lam + mu * idle)
                # dx_j/dI = -lambda gamma_j mu_j / (lambda + mu_j I)^2, summed over j
                sens = float(np.sum(lam * gamma * mu / (lam + mu * idle) ** 2))
                err_busy = sens * root.error + 8 * _EPS * mu.size
                residual = root.residual
                info.update({"idle_residual": root.residual, "iterations": root.iterations})
            queue = busy / gamma
            dispatch = mu * busy / lam
            p_wait, EW = 0.0, 0.0
            ET = float(busy.sum() / lam)
            err = err_busy / lam + 4 * _EPS * ET
        per_server = float(gamma @ queue)
        values = {
            "mean_response_time": ET,
            "mean_waiting_time": EW,
            "mean_number_per_server": per_server,
            "mean_queue_lengths": queue.tolist(),
            "busy_fractions": (busy / gamma).tolist(),
            "busy_shares": busy.tolist(),
            "dispatch_fractions": dispatch.tolist(),
            "p_wait": p_wait,
        }
        if measure == "mean_number":
            if self.is_limit:
                raise NotApplicableError("mean_number (total) is infinite as N -> infinity; use "
                                         "mean_number_per_server")
            value = self.n_servers * per_server  # the fluid approximation of E[L]
        elif measure in values:
            value = values[measure]
        else:  # pragma: no cover (validated by the API)
            raise ModelError(f"unknown measure {measure!r}")
        # the fixed point's relative error carries over to every measure computed from it
        rel = float(err) / max(ET, 1e-300)
        out = {"limit": "N -> infinity (fluid / mean-field fixed point)", "dispatch": rule, "busy": busy.tolist(),
               "idle_fraction": idle, "arithmetic": "float64", **info}
        if context.options.get("verify"):
            out["verify"] = self._fluid_check(rule, context, busy, queue, ET)
        return Result(value=value, method=f"fluid/{rule}",
                      error_estimate=rel * float(np.max(np.abs(np.atleast_1d(np.asarray(value, dtype=float))))),
                      residual=residual, info=out)

    def _fluid_check(self, rule, context, busy, queue, ET) -> dict:
        """Re-solve the fixed point by an independent method and compare (``verify``)."""
        mu, gamma, lam = np.asarray(self.speeds, dtype=float), self.gamma, self.arrival_rate
        if rule == "priority":
            other = context.solve(self.fluid_program(), using="linprog")
            # the optimum is unique up to equally fast classes: compare the objective
            chk = {"independent": "scipy.optimize.linprog (HiGHS)", "abs_diff": abs(other.x.sum() - busy.sum()) / lam,
                   "status": other.status, "message": other.message, "residual": other.residual}
        elif rule == "idle-uniform":
            other = context.solve(self.balance_equations())
            chk = {"independent": "scipy.optimize.root on the balance equations in x",
                   "abs_diff": float(np.max(np.abs(other.x - busy))) * mu.size / lam,
                   "success": other.converged, "residual": other.residual}
        else:  # uniform: E[T] from the per-class mean queues by Little's law
            chk = {"independent": "Little's law on the M/M/1 mean queue lengths",
                   "abs_diff": abs(float(gamma @ queue) / lam - ET)}
        chk["agree"] = bool(chk["abs_diff"] <= max(context.tol * ET, 1e-13))
        if not chk["agree"]:
            msg = f"verify: fluid fixed point and {chk['independent']} differ by {chk['abs_diff']:.3e}"
            if context.strict:
                raise ConvergenceError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=4)
        return chk


class SpeedAwareLimit(SpeedAware):
    """The N -> infinity limit of :class:`SpeedAware` (``counts=inf``): fluid method only."""

    methods = ("fluid",)
    measures = {k: v for k, v in _MEASURES.items() if k != "mean_number"}
    ctmc = None  # no finite chain: not offered
