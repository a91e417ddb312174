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
  so every target index is found by one vectorised ``searchsorted``
  (:class:`exactq.statespace.SortedSpace`); transitions change the total ``L`` by
  +-1 (or more downwards under the lower rule), which the chain declares
  (``CTMC.levels``) and the level-aggregation solver exploits.
  The state set is ``{x sorted: c . x <= C}`` for a cost vector ``c`` fitted to the
  log-probabilities of a smaller solve (a linear model of ``-log pi`` is accurate to
  a few nats: at n = 6 and 8 the set needed for a given mass is within 10% of the
  ideal one, the states sorted by probability), so the kept states are nearly the
  most probable ones.
* **Population process** (``population``, methods ``meanfield`` and ``refined``; a
  :class:`~exactq.representations.population.Population`): the occupancy fractions
  ``s_k`` (servers with >= k jobs) with drift
  ``ds_k/dt = lambda (A_{k-1}(s) - A_k(s)) - (s_k - s_{k+1})``, ``A_j`` the
  probability that the destination has >= j jobs (Mitzenmacher 2001; Vvedenskaya,
  Dobrushin & Karpelevich 1996; Bhambay & Mukhopadhyay 2023/2024 for the errors).
* **Bounding chains** (``finite_bounds``, method ``bounds``, orchestrated by the
  model): a truncated lumped chain that only ever loses jobs (the ``lower`` rule, a
  CTMC: a lower bound) and a level-independent QBD (level = shortest queue, phase =
  the queue-length differences under caps, the *profile*) that only ever gains jobs
  (an upper bound, :func:`~exactq.models.power_of_d_chain.shape_qbd`). This is the
  structure of the threshold bounds for JSQ (Adan, van Houtum & van der Wal 1994; van
  Houtum, Zijm, Adan & Wessels 1998) -- the lower bound loses (their *jockeying*), the
  upper bound blocks (their *threshold blocking*) -- with the proofs replaced by the
  sample-path coupling below, which covers any rank-based routing. The finite-regime
  bounds of Ciucu & Poloczek (ICDCS 2016) "borrow ideas for analyzing JSQ" in the
  same way; only their abstract is available to us, so their exact construction is
  not reproduced. Both chains are solved to a relative residual of ~1e-12 in
  float64 and the bounds are widened by :data:`ROUNDING` (1e-10 relative) to cover
  that rounding.

Truncation
----------
The kept set ``{x: c . x <= C}`` (:class:`~exactq.models.power_of_d_chain.CostSet`;
``C`` is the *cost bound*, not an integer level) is enumerated prefix by prefix
(vectorised) and the cost ``c`` is refitted once from a first solve with the default
cost; each further stage raises ``C`` so that the state count about doubles. The
stages are grown by the one truncation driver (:func:`exactq.truncation.grow`), the
model choosing each set from the previous solution. Two boundary rules:

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
shortest line discipline", J. Appl. Probab. 14, 1977. I. J. B. F. Adan, G. J. van
Houtum, J. van der Wal, "Upper and lower bounds for the waiting time in the symmetric
shortest queue system", Ann. Oper. Res. 48, 1994. G. J. van Houtum, W. H. M. Zijm,
I. J. B. F. Adan, J. Wessels, "Bounds for performance characteristics: a systematic
approach via cost structures", Stochastic Models 14, 1998.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import CTMC, Event, build_ctmc
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations import FixedPoint, Population
from exactq.result import Estimate, Result
from exactq.statespace import SortedSpace
from exactq.truncation import Truncation

from .power_of_d_chain import (
    CostSet,
    choose_profile,
    default_cost,
    enumerate_sorted,
    fit_cost,
    lumped_generator,
    shape_qbd,
)
from .power_of_d_routing import (
    _groups,
    dispatch_tail,
    finite_stability_limit,
    group_arrival_probabilities,
    meanfield_stability_limit,
)

__all__ = ["PowerOfD", "LUMPED_MAX_SERVERS", "ROUNDING"]

#: The lumped chain (methods exact and bounds) ranks sorted queue-length vectors in 64
#: bits: the binomial table behind the colex ranks of ``n`` queues of up to ``K`` jobs
#: holds ``C(n + K, (n + K) / 2) < 2^62`` only while ``n + K <= 65``. Beyond 40 servers
#: that leaves fewer than 25 jobs per queue, less than converged truncations hold (at
#: lambda = 0.9 the last set reaches queues of 49 jobs at n = 6 and 33 at n = 8); the
#: state budget binds long before at high load.
LUMPED_MAX_SERVERS = 40
#: the states of the job-losing truncation of the lower bound, and the phases of the upper QBD
LOWER_STATES = 100_000
MAX_PHASES = 700
#: relative widening of both bounds for the rounding of the float64 solves
ROUNDING = 1e-10


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
        return float(pi @ _wait_probability(states, n=n, d=d, sampling=sampling, error=error, eps=eps, g=g))
    raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover


def _state_functional(measure, states, *, n, lam, d, sampling, error, eps, g):
    """``(f, g)`` with the scalar measure ``(f . pi) / (g . pi)`` over sorted states (for ``certify``), else None.

    The mean measures are affine in ``E[L]`` (:func:`_from_mean_number`); ``p_wait``
    is ``E[sum_i P(join position i) 1{x_i > 0}]``.
    """
    L = states.sum(axis=1, dtype=np.int64).astype(float)
    ones = np.ones(len(states))
    if measure == "mean_number":
        return L, ones
    if measure == "mean_queue_length":
        return L, n * ones
    if measure == "mean_response_time":
        return L, n * lam * ones
    if measure == "mean_waiting_time":
        return L - n * lam, n * lam * ones
    if measure == "p_wait":
        return _wait_probability(states, n=n, d=d, sampling=sampling, error=error, eps=eps, g=g), ones
    return None


def _wait_probability(states, *, n, d, sampling, error, eps, g) -> np.ndarray:
    """Per state, the probability that an arrival joins a busy server (chunks of states, vectorised within)."""
    f = np.empty(len(states))
    for lo in range(0, len(states), 500_000):
        X = states[lo:lo + 500_000]
        f[lo:lo + 500_000] = (group_arrival_probabilities(X, n, d, sampling, error, eps, g) * (X > 0)).sum(axis=1)
    return f


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
    """Power-of-d load balancing with optional load-comparison errors (module docstring).

    Examples
    --------
    The mean-field limit at lambda = 0.9, d = 2 has ``E[T] = sum_k lambda^(2^k - 2)``,
    2.614057 (MODELS.md), and with n = d = 2 the system is two-server JSQ:

    >>> import exactq
    >>> round(exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.9).value, 6)
    2.614057
    >>> m = exactq.model("power-of-d", servers=2, d=2, arrival_rate=0.5)
    >>> m.intrinsic_measure("stability_limit").value, m.delegate("exact")
    (1.0, None)
    """

    name = "power-of-d"
    summary = ("n unit-rate servers, arrivals n*lambda, join the shortest of d sampled queues "
               "(with independent or load-dependent comparison errors); exact finite n or mean field")
    reference = ("Mitzenmacher, IEEE TPDS 12(10) 2001; Bhambay & Mukhopadhyay et al., MobiHoc 2023 and "
                 "Perf. Eval. 2024; Ciucu & Poloczek, ICDCS 2016; Gast & Van Houdt, SIGMETRICS 2018")
    parameters = (
        Param("servers", "int_or_inf", "number of servers n (inf: the mean-field limit)", low=1),
        Param("d", "int", "servers sampled per arrival", default=2, low=1),
        Param("arrival_rate", "float", "arrival rate per server lambda (the total arrival rate is n*lambda); "
              "optional for stability_limit", default=None, low=0.0, low_open=True, scope="per-server",
              count=Count("servers"), aliases=ARRIVAL_RATE_ALIASES),
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

    def intrinsic_measure(self, measure: str) -> Estimate | None:
        """``stability_limit`` needs no solve: the same closed form for every method."""
        if measure != "stability_limit":
            return None
        limit, rule = self.stability_limit()
        return Estimate(limit, 0.0, info={"rule": rule})

    def delegate(self, method: str) -> str | None:
        """With infinitely many servers the exact value is the mean-field limit."""
        return "meanfield" if method == "exact" and not self.is_finite else None

    def _lam(self, what: str) -> float:
        if self.arrival_rate is None:
            raise ModelError(f"missing required parameter arrival_rate for model power-of-d: needed for {what}")
        return float(self.arrival_rate)

    def _routing(self) -> dict:
        return dict(d=self.d, sampling=self.sampling, error=self.error, eps=self.eps, g=self.g)

    def _lumped_servers(self) -> int:
        n = self.n
        if n > LUMPED_MAX_SERVERS:
            raise NotApplicableError(
                f"servers must be <= {LUMPED_MAX_SERVERS} for the lumped chain of methods exact and bounds (its "
                f"64-bit ranks of n sorted queues hold up to 65 - n jobs per queue, too few beyond "
                f"{LUMPED_MAX_SERVERS} servers); got servers={n}; methods meanfield and refined apply to any "
                "number of servers")
        return n

    # ------------------------------------------------------------ population (mean field)
    def population(self) -> Population:
        """The occupancy process (:class:`~exactq.representations.population.Population`).

        In the limit the ``d`` sampled lengths are i.i.d. with P(>= j) = s_j (with or
        without replacement alike); the ``power_correction`` is the 1/n term of
        sampling without replacement, ``C(nw, d)/C(n, d) - w^d``.

        Examples
        --------
        Power-of-two, no errors: ``A_j = s_j^2`` and a super-geometric tail:

        >>> import exactq
        >>> p = exactq.model("power-of-d", servers="inf", d=2, arrival_rate=0.5).population()
        >>> p.dispatch(np.array([1.0, 0.5, 0.125])).tolist(), p.tail_ratio
        ([1.0, 0.25, 0.015625], 0.0)
        """
        d, err, eps, g = self.d, self.error, self.eps, self.g
        dep = err == "dependent" and eps > 0 and g > 0
        if err == "independent":
            slope = (1.0 - eps) * (d == 1) + eps * d
            tail_map = lambda x: (1.0 - eps) * x ** d - eps * math.expm1(d * math.log1p(-x)) if x < 1 else 1.0  # noqa: E731,E501
        else:
            slope = 1.0 if d == 1 else 0.0
            tail_map = None if dep else (lambda x: x ** d)
        corr = None
        if self.sampling == "without" and self.is_finite and d > 1:
            corr = lambda w: 0.5 * d * (d - 1) * (w ** d - w ** (d - 1))  # noqa: E731
        return Population(
            arrival_rate=self._lam("the mean-field limit"),
            dispatch=lambda s, power=None: dispatch_tail(s, d, err, eps, g, power),
            service_rate=1.0, servers=self.servers, closure=g if dep else 0, bandwidth=g if dep else 0,
            tail_slope=slope, tail_map=tail_map, power=lambda w: w ** d, power_correction=corr)

    def population_measure(self, measure, population: Population, solution) -> Estimate:
        """A measure at the fixed point (``FixedPoint``) or the refined occupancy (``RefinedFixedPoint``).

        The error estimate of the fixed point is its last Newton step; the refined
        value is an O(1/n^2) approximation without one.
        """
        lam = population.arrival_rate
        total = solution.total()
        s = np.asarray(solution.s)
        # the mean measures follow from the total; the Newton step (the error of the total) scales alike
        if measure == "mean_queue_length":
            value, scale = total, 1.0
        elif measure in ("mean_response_time", "mean_waiting_time"):
            value, scale = total / lam - (1.0 if measure == "mean_waiting_time" else 0.0), 1.0 / lam
        elif measure == "mean_number":
            value, scale = self.n * total, float(self.n)
        elif measure == "p_wait":
            full = np.concatenate([[1.0], s, np.zeros(self.g + 2)])
            value, scale = float(dispatch_tail(full, self.d, self.error, self.eps, self.g)[1]), 1.0
        elif measure == "occupancy":
            keep = np.flatnonzero(s >= 1e-12)
            value, scale = s[: keep[-1] + 1 if keep.size else 1].tolist(), 1.0
        else:  # pragma: no cover
            raise ModelError(f"unknown measure {measure!r}")
        info = {"servers": int(self.servers) if self.is_finite else "inf"}
        if not isinstance(solution, FixedPoint):
            info["accuracy"] = "approximation with error O(1/n^2) (Gast & Van Houdt 2017); not an error bound"
            return Estimate(value, None, info=info)
        if not solution.stable:
            warnings.warn(f"the mean-field fixed point is not locally stable (spectral abscissa "
                          f"{solution.spectral_abscissa:.3e})", AccuracyWarning, stacklevel=3)
        if self.is_finite:
            info["note"] = "the n -> infinity limit; the finite system differs by O(1/n)"
        return Estimate(value, solution.step * scale, info=info)

    # ------------------------------------------------------------- lumped level chain
    def truncation_schedule(self, tol):
        """First set ~2500 n states (default cost, at most 40 000); the fitted cost then
        triples the count; afterwards the bound grows so that the count doubles per stage
        (the step in nats is estimated from the last two stages; 1.5 nats at first)."""
        return {"start_states": int(min(40_000, 2_500 * self.n)), "first_growth": 3.0, "step": 1.5, "growth": 2.0}

    def default_cost(self) -> np.ndarray:
        return default_cost(self.n, self._lam("the exact chain"))

    @property
    def is_infinite(self) -> bool:
        """The queues are unbounded: every chain of this model is a truncation."""
        return True

    def level_chain(self, level=None, previous=None, *, cost_bound=None, rule="redirect",
                    target_states=None) -> CTMC:
        """The sorted chain on ``{x: cost . x <= bound}`` (module docstring), as a CTMC.

        Parameters
        ----------
        level : None
            The truncation driver's level: this model's sets are not levels. An int
            here is the deprecated ``truncation=C`` of method exact, read as
            ``cost_bound=C`` (with a :class:`DeprecationWarning`).
        previous : (CTMC, StationaryDistribution), optional
            The last set (its generator released) and its solution: the next set uses
            the cost fitted to ``-log pi`` (:func:`fit_cost`), with a bound that
            multiplies the state count by about ``first_growth`` on the first fit and
            then adds a step in nats chosen for about ``growth`` times the states.
        cost_bound : float, optional
            A fixed bound ``C`` with the default cost (:func:`default_cost`): one set.
        rule : {"redirect", "lower", "block"}
            Boundary rule (:func:`~exactq.models.power_of_d_chain.lumped_generator`):
            ``redirect`` for ``exact`` (no job is lost), ``lower`` for the lower bound.
        target_states : int, optional
            Without a bound or a previous set: choose the bound for about this many
            states.

        Returns
        -------
        CTMC
            With ``levels``, ``start``, ``boundary`` and
            ``truncation = Truncation(None, rule, kept_set=CostSet(...))``.

        Raises
        ------
        NotApplicableError
            ``servers`` above :data:`LUMPED_MAX_SERVERS`, before anything is built.

        Examples
        --------
        One server is the M/M/1 queue; the first set keeps queue lengths up to some
        bound ``C``, the states are sorted by level:

        >>> import exactq
        >>> c = exactq.model("power-of-d", servers=1, d=1, arrival_rate=0.5).level_chain()
        >>> bool(np.array_equal(c.levels, np.arange(c.n_states))), c.truncation.rule
        (True, 'redirect')
        """
        n, lam = self._lumped_servers(), self._lam("the exact chain")
        if level is not None:
            if cost_bound is not None:
                raise ModelError(f"give the cost bound once, as cost_bound; got truncation={level} and "
                                 f"cost_bound={cost_bound}")
            warnings.warn(f"truncation={level} for method exact is a cost bound, not a level; pass it as "
                          f"--option cost_bound={level} (options={{'cost_bound': {level}}})", DeprecationWarning,
                          stacklevel=2)
            cost_bound = float(level)
        sched = self.truncation_schedule(None)
        cost = self.default_cost()
        stage, counts, bound = 0, (), cost_bound
        if previous is not None:
            pchain, psol = previous
            kept = pchain.truncation.kept_set
            stage, counts = kept.stage + 1, kept.counts
            if np.array_equal(kept.cost_vector, cost):  # the first set: fit the cost to its solution
                cost = fit_cost(pchain.states, psol.pi, C=kept.bound, cost=kept.cost_vector,
                                floor=0.5 * np.cumsum(cost[::-1])[::-1])
                target_states = int(sched["first_growth"] * pchain.n_states)
                counts = ()
            else:
                cost = kept.cost_vector
                step = sched["step"]
                if len(counts) >= 2 and counts[-1][1] > counts[-2][1]:
                    # states grow ~exponentially in the bound: aim at x growth per stage
                    slope = math.log(counts[-1][1] / counts[-2][1]) / (counts[-1][0] - counts[-2][0])
                    step = min(max(math.log(sched["growth"]) / slope, 0.5), 8.0)
                bound = kept.bound + step
        if bound is None:
            bound = _bound_for(cost, target_states or sched["start_states"])
        X = enumerate_sorted(cost, float(bound))
        kept = CostSet(cost, bound, stage, counts + ((float(bound), len(X)),))
        return lumped_generator(SortedSpace([n], states=X), kept, n=n, lam=lam, rule=rule, **self._routing())

    def level_chain_functional(self, measure, chain: CTMC):
        """What ``certify`` encloses on the level chain: ``(f, g)``, or None for ``occupancy``."""
        return _state_functional(measure, chain.states, n=self.n, lam=self._lam(measure), **self._routing())

    def level_chain_measure(self, measure, chain: CTMC, solution) -> Estimate:
        """A measure of the truncated chain's stationary law (with the stage's size for the history)."""
        value = _state_measure(measure, chain.states, solution.pi, n=self.n, lam=self._lam(measure),
                               **self._routing())
        record = {"iterations": solution.nit}
        if chain.Q is not None:
            record["nnz"] = int(chain.Q.nnz)
        return Estimate(value, info={"record": record})

    # -------------------------------------------------- CTMC for the foundation (small n)
    def truncation_start(self, tol: float) -> int:
        lam = self._lam("the ctmc method")
        return int(math.ceil(math.log(tol) / math.log(lam) / max(1, self.n - 1))) + 6

    def ctmc_size(self, truncation) -> int:
        """States of :meth:`ctmc` at ``truncation`` K: the sorted vectors in ``{0..K}^n``, ``C(n + K, n)``.

        >>> import exactq
        >>> exactq.model("power-of-d", servers=12, d=2, arrival_rate=0.9).ctmc_size(16)
        30421755
        """
        return math.comb(self.n + int(truncation), self.n)

    def ctmc(self, truncation=None) -> CTMC:
        """Sorted chain with every queue <= ``truncation`` (block rule), built from events.

        Examples
        --------
        One server kept at 3 jobs is the M/M/1/3 queue:

        >>> import exactq
        >>> c = exactq.model("power-of-d", servers=1, d=1, arrival_rate=0.5).ctmc(3)
        >>> c.Q.toarray()[1].tolist(), c.cut_rate.tolist()
        ([1.0, -1.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.5])
        """
        n, lam = self.n, self._lam("the ctmc method")
        if truncation is None:
            raise ModelError("power-of-d needs a truncation level (largest queue length)")
        K = int(truncation)
        space = SortedSpace([n], level=K)
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

    def ctmc_functional(self, measure, chain):
        """What ``certify`` encloses on the foundation chain: ``(f, g)``, or None for ``occupancy``."""
        return _state_functional(measure, np.asarray(chain.states), n=self.n, lam=self._lam(measure),
                                 **self._routing())

    def ctmc_measure(self, measure, chain, sol):
        return _state_measure(measure, np.asarray(chain.states), sol.pi, n=self.n, lam=self._lam(measure),
                              **self._routing())

    # -------------------------------------------------------------------- bounds
    def finite_bounds(self, measure: str, context) -> Result:
        """Rigorous bounds on ``measure`` from two bounding chains (method ``bounds``).

        The lower bound is E[L] of the job-losing sorted chain (:meth:`level_chain`
        with the ``lower`` rule: a first set of ``lower_states / 8`` states fits the
        cost, then a fitted one), the upper bound E[L] of the job-gaining shape QBD
        (:func:`~exactq.models.power_of_d_chain.shape_qbd`) on a profile of caps
        chosen greedily from the lower-bound solution with at most ``max_phases``
        phases, or with every cap equal to the option ``spread``. Both are solved by
        ``context.solve`` (the generic CTMC and QBD solvers). Valid for
        position-based routing by the monotone coupling of the module docstring; the
        measure must be increasing in E[L].

        Options (``context.options``): ``spread`` (int; ``truncation`` is its
        deprecated name), ``lower_states`` (default 100 000), ``max_phases`` (700).

        Returns
        -------
        Result
            ``lower <= exact <= upper``; ``value`` the midpoint, ``error_estimate`` the
            half-width (``inf`` with only a lower bound when the QBD is unstable).
        """
        t0 = time.perf_counter()
        n, lam = self._lumped_servers(), self._lam(measure)
        if not self.is_position_based:
            raise NotApplicableError("bounds need routing that depends on queue ranks only (error none or "
                                     "independent); load-dependent errors break the monotone coupling")
        _from_mean_number(measure, 0.0, n, lam)  # refuses measures that are not monotone in E[L]
        opts = dict(context.options)
        spread = opts.get("spread")
        if opts.get("truncation") is not None:
            if spread is not None:
                raise ModelError(f"give the spread once, as spread; got truncation={opts['truncation']} and "
                                 f"spread={spread}")
            spread = opts["truncation"]
            warnings.warn(f"truncation={spread} for method bounds is the spread of the upper QBD, not a level; "
                          f"pass it as --option spread={spread} (options={{'spread': {spread}}})",
                          DeprecationWarning, stacklevel=2)
        lower_states = int(opts.get("lower_states", LOWER_STATES))
        max_phases = int(opts.get("max_phases", MAX_PHASES))
        # the job-losing truncation: a lower bound
        chain0 = self.level_chain(None, None, rule="lower", target_states=max(2000, lower_states // 8))
        st0 = context.solve(chain0, strict=context.strict)
        chain = self.level_chain(None, (chain0.released(), st0), rule="lower", target_states=lower_states)
        st = context.solve(chain, strict=context.strict, previous=(chain0.released(), st0))
        lo = {"EL": st.expect(chain.levels), "n_states": chain.n_states,
              "loss_rate": st.expect(chain.rewards["lost_rate"] + chain.rewards["removed_jobs"]),
              "residual": st.residual, "first_stage_EL": st0.expect(chain0.levels)}
        # the job-gaining shape QBD: an upper bound
        X = chain.states
        profile = spread if spread is not None else choose_profile(n, X - X[:, :1], st.pi, max_phases)
        shape = shape_qbd(n, self.d, lam, profile, self.sampling, self.error, self.eps)
        try:
            sol = context.solve(shape.qbd, strict=context.strict)
        except UnstableError as exc:
            up = {"EL": math.inf, "profile": list(shape.profile), "phases": len(shape.phases), "unstable": str(exc)}
        else:
            jobs = shape.phase_jobs
            up = {"EL": sol.expect_affine(jobs, jobs, np.full(len(jobs), float(n))), "profile": list(shape.profile),
                  "phases": len(shape.phases), "residual": sol.residual, "spectral_radius": sol.spectral_radius,
                  "phantom_job_rate": sol.expect_affine(shape.phantom_rate, shape.phantom_rate, 0.0)}
        lower = _from_mean_number(measure, lo["EL"] * (1.0 - ROUNDING), n, lam)
        upper = _from_mean_number(measure, up["EL"] * (1.0 + ROUNDING), n, lam)
        if upper < lower:  # pragma: no cover - would be a bug
            raise AssertionError(f"upper bound {upper} below lower bound {lower}")
        if math.isfinite(upper):
            value, err = 0.5 * (lower + upper), 0.5 * (upper - lower)
        else:
            value, err = lower, math.inf
            warnings.warn(f"the upper-bound QBD with profile {up['profile']} is unstable; only the lower bound "
                          "is finite", AccuracyWarning, stacklevel=2)
        info = {"lower": lo, "upper": up,
                "guarantee": "lower <= exact <= upper by sample-path coupling (float64 rounding aside)"}
        return Result(value=value, method="bounds/coupling", lower=lower, upper=upper, error_estimate=err,
                      residual=lo["residual"], n_states=lo["n_states"], seconds=time.perf_counter() - t0, info=info)


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
