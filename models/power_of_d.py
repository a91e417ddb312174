"""Power-of-d (supermarket) load balancing, with load-comparison errors.

``n`` unit-rate FCFS servers, Poisson arrivals of rate ``n * lambda``; each arrival
samples ``d`` servers (without replacement by default) and joins the shortest sampled
queue, ties uniform. With *independent* errors (probability ``eps``) the job joins
the LONGEST sampled queue instead; with *dependent* errors the error (probability
``eps``) can only happen when max - min of the sampled queue lengths is <= ``g``.
Queue lengths count the job in service; E[T] = E[L] / (n lambda) by Little.

Three descriptions of the same system, each used by a different method:

* **Lumped CTMC** (``level_chain``, method ``exact``): by symmetry the sorted
  queue-length vector ``x_0 <= ... <= x_{n-1}`` is a Markov chain. An arrival joins
  the server in ascending position ``i`` (ties resolved by position) with a
  probability that depends only on ``i`` for error-free and independent-error
  routing, e.g. ``C(n-1-i, d-1)/C(n, d)`` without replacement; an arrival that joins
  a tie group increments its *last* member and a departure from a group decrements its
  *first* member, which keeps the vector sorted. Sorted vectors are ranked in closed
  form by the combinatorial number system (``rank(x) = sum_i C(x_i + i, i + 1)``),
  so every target index is found by one vectorised ``searchsorted``; transitions
  change the total ``L`` by +-1 (or more downwards under the lower rule), which the
  level-aggregation solver (:mod:`exactq.solvers.level_aggregation`) exploits.
  The state set is ``{x sorted: c . x <= C}`` for a cost vector ``c`` fitted to the
  log-probabilities of a smaller solve (a linear model of ``-log pi`` is accurate to
  a few nats: at n = 6 and 8 the set needed for a given mass is within 10% of the
  ideal one, the states sorted by probability), so the kept states are nearly the
  most probable ones.
* **Population process** (``population``, methods ``meanfield`` and ``refined``):
  the occupancy fractions ``s_k`` (servers with >= k jobs) with drift
  ``ds_k/dt = lambda (A_{k-1}(s) - A_k(s)) - (s_k - s_{k+1})``, ``A_j`` the
  probability that the destination has >= j jobs (Mitzenmacher 2001; Vvedenskaya,
  Dobrushin & Karpelevich 1996; Bhambay & Mukhopadhyay 2023/2024 for the errors).
* **Bounding chains** (``finite_bounds``, method ``bounds``): a truncated lumped
  chain that only ever loses jobs (a lower bound) and a level-independent QBD (level =
  shortest queue, phase = the queue-length differences under caps) that only ever
  gains jobs (an upper bound); see :func:`shape_qbd` and
  :mod:`exactq.solvers.lb_bounds`.

Truncation
----------
The kept set ``{x: c . x <= C}`` is enumerated prefix by prefix (vectorised) and the
cost ``c`` is refitted once from a first solve with the default cost; each further
stage raises ``C`` so that the state count about doubles. Two boundary rules:

* ``redirect`` (method ``exact``): an arrival that would leave the set joins the
  cheapest tie group instead, a departure that would leave it happens at the cheapest
  busy group. No job is lost, so the total number of jobs keeps its true dynamics
  and the truncation error is small (at n = 12, lambda = 0.9 it falls by ~7x per
  doubling of the set). The ``exact`` method estimates it from successive stages.
* ``lower`` (method ``bounds``): arrivals that would leave the set are lost; a
  departure that would leave it also removes one job from every longest queue until
  inside. For routing that depends on positions only (``error`` none or
  independent) the sorted chain is *monotone*: coupling arrivals and departures by
  position, ``x <= y`` (componentwise, sorted) is preserved by every event, so the
  truncated system stays below the true one path by path and its E[L] is a rigorous
  lower bound (slower to converge: each lost job lowers L for a long time).

References
----------
M. Mitzenmacher, "The power of two choices in randomized load balancing", IEEE TPDS
12(10), 2001. N. D. Vvedenskaya, R. L. Dobrushin, F. I. Karpelevich, "Queueing system
with selection of the shortest of two queues: an asymptotic approach", Probl. Inf.
Transm. 32(1), 1996. A. Bhambay, A. Mukhopadhyay et al., "The power of two choices
with load comparison errors", MobiHoc 2023, and the power-of-d version, Performance
Evaluation 2024. F. Ciucu, F. Poloczek, "Randomized load balancing in finite regimes",
ICDCS 2016. N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM
Meas. Anal. Comput. Syst. 1(2), 2017 (SIGMETRICS 2018). W. Winston, "Optimality of the
shortest line discipline", J. Appl. Probab. 14, 1977.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.params import Param
from exactq.statespace import StateSpace
from exactq.truncation import Truncation

from .power_of_d_chain import (  # noqa: F401  (re-exported: the model's public API)
    LumpedChain,
    SortedSpace,
    choose_profile,
    colex_rank,
    default_cost,
    enumerate_sorted,
    fit_cost,
    lumped_generator,
    shape_qbd,
    unlumped_generator,
)
from .power_of_d_routing import (  # noqa: F401
    _groups,
    dispatch_tail,
    finite_stability_limit,
    group_arrival_probabilities,
    meanfield_stability_limit,
    position_probabilities,
    window_probability,
)

__all__ = [
    "PowerOfD",
    "window_probability",
    "group_arrival_probabilities",
    "position_probabilities",
    "finite_stability_limit",
    "meanfield_stability_limit",
    "enumerate_sorted",
    "colex_rank",
    "SortedSpace",
    "lumped_generator",
    "fit_cost",
    "default_cost",
    "shape_qbd",
    "choose_profile",
    "unlumped_generator",
    "dispatch_tail",
]


# ================================================================== measures on states
def _state_measure(measure, states, pi, *, n, lam, d, sampling, error, eps, g):
    """A measure from a distribution ``pi`` over sorted states (lumped or truncated)."""
    L = states.sum(axis=1, dtype=np.int64).astype(float)
    EL = float(pi @ L)
    if measure in MEAN_MEASURES:
        return _from_mean_number(measure, EL, n, lam)
    if measure == "occupancy":
        kmax = int(states.max(initial=0))
        counts = np.zeros(kmax + 1)
        for i in range(n):  # one pass per position
            counts += np.bincount(states[:, i], weights=pi, minlength=kmax + 1)
        s = (counts[::-1].cumsum()[::-1] / n)[1:]
        keep = np.flatnonzero(s >= 1e-12)
        return s[: keep[-1] + 1 if keep.size else 1].tolist()
    if measure == "p_wait":
        total = 0.0
        for lo in range(0, len(states), 500_000):
            X = states[lo:lo + 500_000]
            P = group_arrival_probabilities(X, n, d, sampling, error, eps, g)
            total += float(pi[lo:lo + 500_000] @ (P * (X > 0)).sum(axis=1))
        return total
    raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover


_MEASURES = {
    "mean_response_time": "E[T] = E[L] / (n lambda), sojourn time including service",
    "mean_waiting_time": "E[W] = E[T] - 1, time in queue excluding service",
    "mean_number": "E[L], mean total number of jobs (finite servers)",
    "mean_queue_length": "mean number of jobs per server, E[L] / n",
    "p_wait": "probability that an arrival joins a busy server",
    "occupancy": "s_k, mean fraction of servers with >= k jobs, k = 1, 2, ... (list, down to 1e-12)",
    "stability_limit": "largest per-server arrival rate lambda for which the system is stable",
}


@register_model
@dataclass(frozen=True)
class PowerOfD(Model):
    """Power-of-d load balancing with optional load-comparison errors (module docstring)."""

    name = "power-of-d"
    summary = ("n unit-rate servers, arrivals n*lambda, join the shortest of d sampled queues "
               "(with independent or load-dependent comparison errors); exact finite n or mean field")
    reference = ("Mitzenmacher, IEEE TPDS 12(10) 2001; Bhambay & Mukhopadhyay et al., MobiHoc 2023 and "
                 "Perf. Eval. 2024; Ciucu & Poloczek, ICDCS 2016; Gast & Van Houdt, SIGMETRICS 2018")
    parameters = (
        Param("servers", "int_or_inf", "number of servers n (inf: the mean-field limit)", low=1),
        Param("d", "int", "servers sampled per arrival", default=2, low=1),
        Param("arrival_rate", "float", "arrival rate per server lambda (total n*lambda); "
              "optional for stability_limit", default=None, low=0.0, low_open=True),
        Param("sampling", "choice", "sampling of the d servers", default="without", choices=("without", "with")),
        Param("error", "choice", "load-comparison errors", default="none",
              choices=("none", "independent", "dependent")),
        Param("eps", "float", "error probability (the job joins the longest sampled queue)",
              default=0.0, low=0.0, high=1.0),
        Param("g", "int", "dependent errors: possible only when max - min of the sampled queues <= g",
              default=0, low=0),
    )
    measures = _MEASURES
    methods = ("exact", "meanfield", "refined", "bounds", "ctmc")
    default_measure = "mean_response_time"

    servers: float
    d: int = 2
    arrival_rate: float | None = None
    sampling: str = "without"
    error: str = "none"
    eps: float = 0.0
    g: int = 0

    # ------------------------------------------------------------------ validation
    def check(self):
        if self.error == "none" and self.eps != 0.0:
            raise ModelError(f"eps applies to error=independent or dependent; got eps={self.eps:g} with error=none")
        if self.error != "dependent" and self.g != 0:
            raise ModelError(f"g applies to error=dependent only; got g={self.g} with error={self.error}")
        if self.is_finite and self.d > self.servers:
            raise ModelError(f"d must be <= servers ({int(self.servers)}); got d={self.d}")
        if self.arrival_rate is not None:
            limit, rule = self.stability_limit()
            if self.arrival_rate >= limit:
                raise UnstableError(
                    f"arrival_rate must be < {limit:.6g} for stability ({rule}); got {self.arrival_rate:g}")

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.servers)

    @property
    def n(self) -> int:
        if not self.is_finite:
            raise NotApplicableError("this computation needs a finite number of servers; got servers=inf")
        return int(self.servers)

    @property
    def is_position_based(self) -> bool:
        """Routing depends on the ranks of the sampled queues only (monotone sorted chain)."""
        return self.error != "dependent" or self.eps == 0.0 or self.g == 0 or self.d == 1

    def stability_limit(self) -> tuple[float, str]:
        """``(limit, rule)``: finite n (:func:`finite_stability_limit`) or the mean field."""
        if self.is_finite:
            return finite_stability_limit(int(self.servers), self.d, self.sampling, self.error, self.eps)
        return meanfield_stability_limit(self.d, self.error, self.eps)

    def _lam(self, measure: str) -> float:
        if self.arrival_rate is None:
            raise ModelError(f"missing required parameter arrival_rate for model power-of-d: needed for {measure}")
        return float(self.arrival_rate)

    def _routing(self) -> dict:
        return dict(d=self.d, sampling=self.sampling, error=self.error, eps=self.eps, g=self.g)

    def stability_result(self, method: str):
        from exactq.result import Result

        limit, rule = self.stability_limit()
        return Result(value=limit, method=method, error_estimate=0.0, info={"rule": rule})

    # ------------------------------------------------------------ population (mean field)
    def population(self) -> dict:
        """The occupancy representation for :mod:`exactq.solvers.meanfield`.

        In the limit the ``d`` sampled lengths are i.i.d. with P(>= j) = s_j (with or
        without replacement alike); the ``power_correction`` is the 1/n term of
        sampling without replacement, ``C(nw, d)/C(n, d) - w^d``.
        """
        d, err, eps, g = self.d, self.error, self.eps, self.g
        dep = err == "dependent" and eps > 0 and g > 0
        lam = self.arrival_rate
        limit, rule = meanfield_stability_limit(d, err, eps)
        if err == "independent":
            slope = (1.0 - eps) * (d == 1) + eps * d
            tail_map = lambda x: (1.0 - eps) * x ** d - eps * math.expm1(d * math.log1p(-x)) if x < 1 else 1.0  # noqa: E731,E501
        else:
            slope = 1.0 if d == 1 else 0.0
            tail_map = None if dep else (lambda x: x ** d)
        corr = None
        if self.sampling == "without" and self.is_finite and d > 1:
            corr = lambda w: 0.5 * d * (d - 1) * (w ** d - w ** (d - 1))  # noqa: E731
        return {
            "arrival_rate": lam,
            "service_rate": 1.0,
            "servers": self.servers,
            "dispatch": lambda s, power=None: dispatch_tail(s, d, err, eps, g, power),
            "power": lambda w: w ** d,
            "power_correction": corr,
            "closure": g if dep else 0,
            "bandwidth": g if dep else 0,
            "tail_slope": slope,
            "tail_map": tail_map,
            "stability_limit": limit,
            "stability_rule": rule,
        }

    def population_measure(self, measure, s, tail_sum=0.0):
        """A measure at occupancy ``s = (s_1, s_2, ...)`` (fixed point or refined)."""
        lam = self._lam(measure)
        total = float(np.sum(s) + tail_sum)
        if measure == "mean_queue_length":
            return total
        if measure == "mean_response_time":
            return total / lam
        if measure == "mean_waiting_time":
            return total / lam - 1.0
        if measure == "mean_number":
            return self.n * total
        if measure == "p_wait":
            full = np.concatenate([[1.0], s, np.zeros(self.g + 2)])
            return float(dispatch_tail(full, self.d, self.error, self.eps, self.g)[1])
        if measure == "occupancy":
            s = np.asarray(s)
            keep = np.flatnonzero(s >= 1e-12)
            return s[: keep[-1] + 1 if keep.size else 1].tolist()
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover

    def population_measure_error(self, measure, fp):
        """Error estimate of a measure at the fixed point: the last Newton step."""
        lam = self._lam(measure)
        if measure in ("mean_response_time", "mean_waiting_time"):
            return fp.step / lam
        if measure == "mean_queue_length":
            return fp.step
        if measure == "mean_number":
            return self.n * fp.step
        return fp.step

    # ------------------------------------------------------------- lumped level chain
    def exact_delegate(self):
        """With infinitely many servers the exact value is the mean-field limit."""
        return None if self.is_finite else "meanfield"

    def truncation_schedule(self, tol):
        """First set ~2500 n states (default cost, at most 40 000); the fitted cost then
        triples the count; afterwards the bound grows so that the count doubles per stage
        (the step in nats is estimated from the last two stages; 1.5 nats at first)."""
        return {"start_states": int(min(40_000, 2_500 * self.n)), "first_growth": 3.0, "step": 1.5, "growth": 2.0}

    def default_cost(self) -> np.ndarray:
        return default_cost(self.n, self._lam("the exact chain"))

    def level_chain(self, truncation=None, previous=None, *, rule="redirect", target_states=None):
        """The sorted chain on ``{x: cost . x <= bound}`` (module docstring).

        Parameters
        ----------
        truncation : float, optional
            The bound, with the default cost (:func:`default_cost`) unless
            ``previous`` carries a fitted one.
        previous : (LumpedChain, pi), optional
            The last truncation and its solution: the next set uses the cost fitted to
            ``-log pi`` (:func:`fit_cost`), with a bound that multiplies the state count
            by about ``first_growth`` on the first fit and then adds ``step`` nats.
        rule : {"redirect", "lower", "block"}
            Boundary rule. ``redirect`` (default for ``exact``): an arrival leaving the
            set joins the cheapest tie group, a departure leaving it happens at the
            cheapest busy group (the number of jobs evolves as in the true system);
            ``lower``: jobs are lost (a rigorous lower bound for position-based
            routing); ``block``: transitions are suppressed.
        target_states : int, optional
            Without ``truncation``: choose the bound for about this many states.
        """
        n, lam = self.n, self._lam("the exact chain")
        sched = self.truncation_schedule(None)
        cost = self.default_cost()
        stage = 0
        if previous is not None:
            pchain, ppi = previous
            stage = pchain.stage + 1
            counts = list(getattr(pchain, "counts", []))
            if np.array_equal(pchain.cost, cost):
                cost = fit_cost(pchain.states, ppi, C=pchain.bound, cost=pchain.cost,
                                floor=0.5 * np.cumsum(cost[::-1])[::-1])
                target_states = int(sched["first_growth"] * pchain.n_states)
                truncation = None
                counts = []
            else:
                cost = pchain.cost
                step = sched["step"]
                if len(counts) >= 2 and counts[-1][1] > counts[-2][1]:
                    # states grow ~exponentially in the bound: aim at x growth per stage
                    slope = math.log(counts[-1][1] / counts[-2][1]) / (counts[-1][0] - counts[-2][0])
                    step = min(max(math.log(sched["growth"]) / slope, 0.5), 8.0)
                truncation = pchain.bound + step
        if truncation is None:
            target = target_states or sched["start_states"]
            truncation = _bound_for(cost, target)
        X = enumerate_sorted(cost, float(truncation))
        space = SortedSpace(X)
        chain = lumped_generator(space, n=n, lam=lam, cost=cost, bound=float(truncation), rule=rule,
                                 **self._routing())
        chain.stage = stage
        chain.counts = (counts if previous is not None else []) + [(float(truncation), len(X))]
        chain.guess = np.exp(-(X @ cost - (X @ cost).min()))
        return chain

    def level_measure(self, measure, chain, pi):
        return _state_measure(measure, chain.states, pi, n=self.n, lam=self._lam(measure), **self._routing())

    # -------------------------------------------------- CTMC for the foundation (small n)
    @property
    def is_infinite(self) -> bool:
        return True

    def truncation_start(self, tol: float) -> int:
        lam = self._lam("the ctmc method")
        return int(math.ceil(math.log(tol) / math.log(lam) / max(1, self.n - 1))) + 6

    def ctmc(self, truncation=None):
        """Sorted chain with every queue <= ``truncation`` (block rule), as an exactq CTMC."""
        n, lam = self.n, self._lam("the ctmc method")
        if truncation is None:
            raise ModelError("power-of-d needs a truncation level (largest queue length)")
        K = int(truncation)
        cost = np.zeros(n)
        cost[-1] = 1.0
        X = enumerate_sorted(cost, K)
        space = StateSpace(X, [f"x{i}" for i in range(n)], lo=np.zeros(n, np.int64), hi=np.full(n, K))
        X = space.states
        P = group_arrival_probabilities(X, n, **self._routing())
        first, last, start, _ = _groups(X)
        unit = np.eye(n, dtype=np.int64)

        def arrival(b):
            return Event(f"arrival_{b}", lambda s: (n * lam * P[:, b], s + unit[b]))

        def departure(a):
            rate = np.where(start[:, a] & (X[:, a] > 0), last[:, a] - a + 1, 0).astype(float)
            return Event(f"departure_{a}", lambda s: (rate, s - unit[a]))

        events = [arrival(b) for b in range(n)] + [departure(a) for a in range(n)]
        return build_ctmc(space, events, initial=np.zeros(n, np.int64),
                          truncation=Truncation(K, "block", "largest queue"),
                          constants={"K": K, "n": n, "arrival_rate": lam},
                          rewards={"L": X.sum(axis=1).astype(float)})

    def ctmc_measure(self, measure, chain, sol):
        pi = sol.pi
        if measure == "stability_limit":
            return self.stability_limit()[0]
        return _state_measure(measure, np.asarray(chain.states), pi, n=self.n, lam=self._lam(measure),
                              **self._routing())

    # -------------------------------------------------------------------- bounds
    def finite_bounds(self) -> dict:
        """Bounding chains for the ``bounds`` method (:mod:`exactq.solvers.lb_bounds`).

        ``lower_chain(previous)``: the sorted chain with the *lower* rule (jobs are only
        lost) on a fitted truncation; ``upper_qbd(spread)``: the QBD of
        :func:`shape_qbd` (jobs are only gained). Both bound E[L] for position-based
        routing, by the monotone coupling of the module docstring.
        """
        n, lam = self.n, self._lam("bounds")
        routing = self._routing()

        def lower_chain(previous=None, target_states=None):
            return self.level_chain(None, previous, rule="lower", target_states=target_states)

        def upper_qbd(profile):
            return shape_qbd(n, self.d, lam, profile, self.sampling, self.error, self.eps)

        def profile_for(chain, pi, max_phases):
            X = chain.states
            return choose_profile(n, X - X[:, :1], pi, max_phases)

        return {"servers": n, "arrival_rate": lam, **routing, "position_based": self.is_position_based,
                "lower_chain": lower_chain, "upper_qbd": upper_qbd, "profile_for": profile_for,
                "measure": lambda measure, chain, pi: self.level_measure(measure, chain, pi),
                "from_mean_number": lambda measure, EL: _from_mean_number(measure, EL, n, lam)}


#: the measures that follow from E[L] alone (Little), increasing in it
MEAN_MEASURES = ("mean_number", "mean_queue_length", "mean_response_time", "mean_waiting_time")


def _from_mean_number(measure, EL, n, lam):
    """Measures that are increasing functions of E[L] (so bounds carry over)."""
    if measure == "mean_number":
        return EL
    if measure == "mean_queue_length":
        return EL / n
    if measure == "mean_response_time":
        return EL / (n * lam)
    if measure == "mean_waiting_time":
        return EL / (n * lam) - 1.0
    raise NotApplicableError(f"bounds are available for mean_number, mean_queue_length, mean_response_time "
                             f"and mean_waiting_time; got {measure}")


def _bound_for(cost, target: int) -> float:
    """Smallest bound (in steps of 0.25 nats) whose set has at least ``target`` states."""
    C = float(np.max(cost)) + 1.0
    count = len(enumerate_sorted(cost, C, max_states=50 * target))
    while count < target:
        C += 0.25 if count > target / 4 else 1.0
        count = len(enumerate_sorted(cost, C, max_states=50 * target))
    return C
