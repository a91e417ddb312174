"""Optimal dynamic dispatching to parallel exponential servers: a continuous-time MDP.

Poisson arrivals at TOTAL rate ``arrival_rate`` (to the whole system, as in ``jsq``);
``n`` exponential servers with rates ``service_rates``, each with its own FCFS queue
(the job in service counts in the queue length) of at most ``capacity`` jobs. The
dispatcher sees every queue length and sends each arrival to one queue that is not
full; an arrival that finds every queue full is lost (the only losses: the dispatcher
may not reject a job while some queue has room). A *policy* maps the vector of queue
lengths to a queue.

The model is the continuous-time MDP on the queue lengths, made discrete by
uniformisation with the constant ``Lambda = arrival_rate + sum(service_rates)``
(:meth:`~exactq.representations.mdp.MDP.from_rates`); its states are the box
``{0..K}^n`` (``(K + 1)^n`` states), the choices of a state the non-full queues (one
choice, ``lost``, when all are full).

Measures
--------
``mean_number``
    The optimal long-run average number of jobs in the system, ``min_policy E[L]``.
``holding_cost``
    The optimal long-run average holding cost ``min E[sum_i c_i L_i]``, ``c_i`` =
    ``holding_costs`` (default 1 each: then it equals ``mean_number``).
``mean_response_time``
    The minimal mean response (sojourn) time of ACCEPTED jobs over all policies. By
    Little's law a policy's ``E[T] = E[L] / (arrival_rate (1 - P(all full)))``; with a
    finite capacity the denominator depends on the policy, so minimising ``E[L]`` is
    not minimising ``E[T]`` (a policy that keeps queues shorter may lose more jobs).
    The ratio is minimised by Dinkelbach's method: ``theta <- E_d[L] / E_d[accepted]``
    for the policy ``d`` minimising ``E[L - theta * accepted]``, an average-cost MDP
    each time; ``lower``/``upper`` come from its span bounds. With ``capacity=inf``
    nothing is lost and ``E[T] = E[L] / arrival_rate`` for the optimum of
    ``mean_number``.
``gap_jsq``, ``gap_sed``, ``gap_sa_jsq``
    The relative excess ``(E_h[L] - E*[L]) / E*[L]`` of a heuristic's mean number in
    the system over the optimum, on the same (truncated) model; every heuristic is
    evaluated exactly (the Markov chain of its randomised scheduler, one sparse LU):
    JSQ (a shortest non-full queue, ties uniform), SED (shortest expected delay: the
    non-full queue minimising ``(q_i + 1) / mu_i``, ties uniform; Selen et al. 2016)
    and speed-aware JSQ (a shortest non-full queue, ties to the fastest server,
    uniform among equally fast ones; Bhambay & Mukhopadhyay 2022).

Every optimal-cost result carries ``info["policy"]``: for two servers the *switching
curve*, for each length ``q2 < K`` of queue 2 the smallest length ``q1 < K`` of queue
1 at which the optimum sends an arrival to queue 2 (``None``: never, while queue 1 has
room), and whether the policy is monotone (sends to queue 2 at every longer queue 1);
for more servers the size of the policy table and how often each queue is chosen
(``--option policy_out=FILE`` writes the whole table as JSON: the state vectors and
the queue chosen in each). Ties between queues whose values agree to rounding are
broken towards the faster server, then the lower index. ``info["heuristics"]`` holds
JSQ's, SED's and SA-JSQ's cost of the same measure and their relative gaps.

Numerics
--------
Policy iteration (Howard; unichain: every policy reaches the empty system) with one
sparse LU per policy, then the span bounds of one Bellman backup of its relative
values: ``min(L h - h) <= g* <= max(L h - h)`` (Puterman 1994, Theorem 8.5.5), which
give ``lower`` and ``upper`` (relative width about 1e-13). ``--verify`` re-solves by
relative value iteration (from zero) and, up to 20,000 states, by the linear program
(HiGHS), and reports both brackets and the agreement. ``--option
solver=value-iteration`` or ``solver=linear-program`` makes that the main method.

With ``capacity=inf`` the model is approximated by the truncations ``K = K0, ...``
(each queue at most ``K`` jobs, extra arrivals lost: Sennott's approximating sequence,
whose optimal costs converge to the infinite model's for this routing problem), grown
by the one truncation driver of :mod:`exactq.truncation` until the change and the
boundary sensitivity (the stationary mass, under the optimal policy, of states with a
full queue) are below ``tol``; ``info["truncation"]`` reports it as for every other
truncated model. The load must then be below 1 (``arrival_rate < sum(service_rates)``).

Size
----
``(K + 1)^n`` states and about ``n (K + 1)^n`` choices: two servers with ``K = 60`` have
3,721 states (a few hundredths of a second), three with ``K = 30`` have 29,791 (a few
seconds), four with ``K = 15`` 65,536. What stops larger systems is the sparse LU
of the policy's chain, whose fill grows like ``N^{2 - 2/n}`` for the ``n``-dimensional
grid (``N`` states); the model checks the predicted memory first.

References
----------
W. Winston, "Optimality of the shortest line discipline", J. Appl. Prob. 14 (1977).
R. R. Weber, "On the optimal assignment of customers to parallel servers", J. Appl.
Prob. 15 (1978) 406-413.
L. I. Sennott, "On computing average cost optimal policies with application to
routing to parallel queues", Math. Methods of OR 45 (1997) 45-62.
W. Dinkelbach, "On nonlinear fractional programming", Management Science 13 (1967).
M. L. Puterman, *Markov Decision Processes*, Wiley, 1994, ch. 8 and sec. 11.5.
M. Selen, I. Adan, S. Kapodistria, J. van Leeuwaarden, "Steady-state analysis of
shortest expected delay routing", Queueing Systems 84 (2016).
S. Bhambay, A. Mukhopadhyay, "Asymptotic optimality of speed-aware JSQ for
heterogeneous service systems", Performance Evaluation 157-158 (2022).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from exactq.budget import require_memory
from exactq.catalogue import Model, register_model
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, NotApplicableError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations.mdp import MDP, LongRunAverage, Scheduler
from exactq.result import Result
from exactq.statespace import StateSpace
from exactq.truncation import Evaluation, Truncation, grow, tail_factor

from .jsq import jsq_routing

__all__ = ["OptimalDispatch", "HEURISTICS", "heuristic_weights", "switching_curve"]

#: the heuristics whose gap to the optimum the model reports
HEURISTICS = ("jsq", "sed", "sa_jsq")
_COSTS = {"mean_number": "number", "holding_cost": "holding", "mean_response_time": "number"}
_EPS = np.finfo(float).eps


def heuristic_weights(states: np.ndarray, rates: np.ndarray, capacity: int, policy: str) -> np.ndarray:
    """Probability that each heuristic sends an arrival to each queue, in every state at once.

    Parameters
    ----------
    states : (N, n) int array of queue lengths
    rates : (n,) service rates
    capacity : int
        Queue capacity ``K`` (full queues are never chosen).
    policy : {"jsq", "sed", "sa_jsq"}

    Returns
    -------
    (N, n) array; rows sum to 1, or to 0 where every queue is full.

    Examples
    --------
    SED sends to the fast server while ``(q1 + 1) / 2 < (q2 + 1) / 1``:

    >>> q = np.array([[0, 0], [1, 0], [2, 0], [3, 3]])
    >>> heuristic_weights(q, np.array([2.0, 1.0]), 3, "sed").tolist()
    [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [0.0, 0.0]]
    """
    rates = np.asarray(rates, dtype=float)
    if policy == "jsq":
        return jsq_routing(states, rates, "random", capacity)
    if policy == "sa_jsq":
        return jsq_routing(states, rates, "fastest", capacity)
    if policy != "sed":
        raise ModelError(f"policy must be one of {', '.join(HEURISTICS)}; got {policy!r}")
    delay = (states + 1.0) / rates[None, :]
    delay = np.where(states >= capacity, np.inf, delay)
    best = delay.min(axis=1, keepdims=True)
    tied = (delay == best) & np.isfinite(delay)
    count = tied.sum(axis=1, keepdims=True)
    return np.divide(tied, count, out=np.zeros(states.shape), where=count > 0)


def switching_curve(actions: np.ndarray, K: int) -> tuple[list, bool]:
    """The switching curve of a two-queue policy table ``actions[q1, q2]`` (0: queue 1, 1: queue 2).

    Returns ``(curve, monotone)``: ``curve[q2]`` is the smallest ``q1 < K`` at which
    the policy sends to queue 2 (``None`` if there is none), for ``q2 = 0 .. K-1``;
    ``monotone`` says whether it sends to queue 2 at every longer ``q1 < K`` too.

    Examples
    --------
    Rows are ``q1``, columns ``q2``; 2 marks the forced choices of full queues:

    >>> a = np.array([[0, 0, 1], [1, 0, 1], [1, 1, 2]])
    >>> switching_curve(a, 2)
    ([1, None], True)
    """
    to2 = np.asarray(actions)[:K, :K] == 1
    has = to2.any(axis=0)
    first = np.argmax(to2, axis=0)  # the first q1 sending to queue 2, per column q2
    after = (np.arange(K)[:, None] >= first[None, :]) & has[None, :]
    monotone = bool(np.all(to2 | ~after))  # every q1 past the curve sends to queue 2
    curve = [int(f) if h else None for f, h in zip(first, has)]
    return curve, bool(monotone)


_MEASURES = {
    "mean_number": "optimal long-run average number of jobs in the system, min over dispatching policies",
    "holding_cost": "optimal long-run average holding cost sum_i c_i L_i (holding_costs c_i)",
    "mean_response_time": "minimal mean response time of accepted jobs over policies (Little's law, Dinkelbach)",
    "gap_jsq": "relative excess of JSQ's mean number over the optimum, (E_JSQ[L] - E*[L]) / E*[L]",
    "gap_sed": "relative excess of SED's mean number over the optimum",
    "gap_sa_jsq": "relative excess of speed-aware JSQ's mean number over the optimum",
}


def _widen(lower: float, upper: float) -> tuple[float, float]:
    """A response-time bracket widened for the roundings after the span bounds: the division by the arrival
    rate, the ratio and the cost ``number - theta accepted`` (a few units of ``u |value|``; 16 taken)."""
    u = 2.0 ** -53
    return (float(np.nextafter(lower - 16 * u * abs(lower), -np.inf)),
            float(np.nextafter(upper + 16 * u * abs(upper), np.inf)))


@register_model
@dataclass(frozen=True)
class OptimalDispatch(Model):
    """The optimal dynamic dispatching policy and its exact average cost (module docstring).

    Examples
    --------
    Two identical servers: JSQ is optimal (Winston 1977), and with capacity 20 the
    optimal mean number is the infinite-buffer JSQ value of MODELS.md, 1.42632075 at
    load 0.5, to 10 digits:

    >>> import exactq
    >>> r = exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="1,1", capacity=20)
    >>> round(r.value, 8), r.lower <= r.value <= r.upper, (r.upper - r.lower) / r.value < 1e-9
    (1.42632075, True, True)
    """

    name = "optimal-dispatch"
    summary = "optimal dynamic dispatching to exponential servers (an MDP): optimal cost, policy, heuristics' gaps"
    reference = ("Winston 1977; Weber 1978; Sennott 1997 (approximating sequences); Puterman 1994 (average-cost "
                 "MDPs)")
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate, total over all servers (not per server)", low=0.0,
              low_open=True, scope="total", count=Count("service_rates", "len"), aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rates", "floats", "service rate of each exponential server (each has its own FCFS queue)",
              low=0.0, low_open=True, scope="per-server"),
        Param("capacity", "int_or_inf", "maximum jobs per queue, the job in service included (an arrival finding "
              "every queue full is lost); inf: an approximating sequence of truncations", default=math.inf, low=1),
        Param("holding_costs", "floats", "cost per job per unit of time at each server, for holding_cost "
              "(default 1 each)", default=None, low=0.0),
    )
    measures = dict(_MEASURES)
    methods = ("mdp",)
    default_measure = "mean_number"

    arrival_rate: float
    service_rates: tuple
    capacity: float = math.inf
    holding_costs: tuple | None = None

    def check(self) -> None:
        n = len(self.service_rates)
        if self.holding_costs is not None and len(self.holding_costs) != n:
            raise ModelError(f"holding_costs must have one entry per server ({n} service_rates); got "
                             f"{len(self.holding_costs)}")
        total = float(sum(self.service_rates))
        if not math.isfinite(self.arrival_rate + total):
            raise ModelError(f"arrival_rate + sum(service_rates) must be finite (rescale the time unit); got "
                             f"{self.arrival_rate:g} + {total:g}")
        if self.is_infinite and self.arrival_rate >= total:
            raise UnstableError(f"arrival_rate must be < total service rate {total:g} for stability; "
                                f"got {self.arrival_rate:g}")

    # -- derived ------------------------------------------------------------------------
    @property
    def is_infinite(self) -> bool:
        return not math.isfinite(self.capacity)

    @property
    def n_servers(self) -> int:
        return len(self.service_rates)

    @property
    def load(self) -> float:
        return self.arrival_rate / float(sum(self.service_rates))

    @property
    def costs(self) -> np.ndarray:
        return np.ones(self.n_servers) if self.holding_costs is None else np.asarray(self.holding_costs, float)

    def truncation_start(self, tol: float) -> int:
        """First truncation level: the JSQ-like tail ``rho^(n K)`` below ``tol``, plus a margin."""
        rho = self.load
        return int(math.ceil(math.log(tol) / math.log(rho) / self.n_servers)) + 6

    def mdp_size(self, capacity) -> int:
        """States of the MDP at capacity ``K``: ``(K + 1)^n``."""
        return (int(capacity) + 1) ** self.n_servers

    # -- the representation ---------------------------------------------------------------
    def mdp(self, capacity: int | None = None) -> MDP:
        """The uniformised MDP at capacity ``K`` (the model's own, or a truncation level).

        States: the box ``{0..K}^n`` of queue lengths (variables ``q1..qn``, mixed-radix
        order). Choices: ``queue i`` for every non-full queue, ``lost`` when all are
        full. State reward rates: ``number`` (sum of the queue lengths), ``holding``
        (``sum_i c_i q_i``), ``accepted`` (the rate of accepted arrivals,
        ``arrival_rate`` unless all are full) and ``full`` (1 when all queues are
        full), each per unit of time.

        Examples
        --------
        One server with capacity 2 has three states and one choice each:

        >>> m = OptimalDispatch(arrival_rate=1.0, service_rates=(2.0,), capacity=2).mdp()
        >>> m.n_states, m.n_choices, m.uniformisation_rate
        (3, 3, 3.0)
        """
        n = self.n_servers
        if capacity is None:
            if self.is_infinite:
                raise ModelError("optimal-dispatch without capacity needs a truncation level")
            K = int(self.capacity)
            trunc = None
        else:
            K = int(capacity)
            trunc = Truncation(K, "block", "each queue")
        N = (K + 1) ** n
        rows_est = float(N) * n
        require_memory(rows_est * (n + 2) * 40.0, f"the optimal-dispatch MDP (capacity={K}, {n} servers: {N:.3g} "
                       "states)", hint="lower the capacity")
        space = StateSpace.box([f"q{i + 1}" for i in range(n)], hi=[K] * n)
        q = space.states
        strides = space.strides
        lam, mu = self.arrival_rate, np.asarray(self.service_rates, dtype=float)
        room = q < K
        full = ~room.any(axis=1)
        avail = np.column_stack([room, full])  # n queues, then 'lost'
        row_state, row_action = np.nonzero(avail)  # state-major, actions ascending: the row groups
        counts = avail.sum(axis=1)
        groups = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        m = row_state.size
        # arrival: to the chosen queue (none when lost)
        send = row_action < n
        arr_rows = np.flatnonzero(send)
        arr_cols = row_state[send] + strides[row_action[send]]
        # services: every busy server, for every choice of the state
        busy = q[row_state] > 0  # (m, n)
        srv_rows, srv_server = np.nonzero(busy)
        srv_cols = row_state[srv_rows] - strides[srv_server]
        R = sp.csr_matrix((np.concatenate([np.full(arr_rows.size, lam), mu[srv_server]]),
                           (np.concatenate([arr_rows, srv_rows]), np.concatenate([arr_cols, srv_cols]))),
                          shape=(m, N))
        total = q.sum(axis=1).astype(float)
        rates = {"number": total, "holding": q @ self.costs, "accepted": np.where(full, 0.0, lam),
                 "full": full.astype(float)}
        names = [f"queue{i + 1}" for i in range(n)] + ["lost"]
        # every transition changes the total number of jobs by one: ordered by it, the LU is block banded
        # (three servers, capacity 30: fill 2.9e6 against 5.0e6 by minimum degree; four servers: 2.1e6 / 1.6e7)
        return MDP.from_rates(R, groups, uniformisation_rate=lam + float(mu.sum()), state_reward_rates=rates,
                              actions=row_action, action_names=names, space=space, truncation=trunc,
                              labels={"full": full}, ordering="level" if n >= 3 else "auto")

    # -- solving ------------------------------------------------------------------------------
    def optimal(self, measure: str, context) -> Result:
        """The ``mdp`` method: the optimum of ``measure`` (module docstring), on the model or its truncations."""
        opts = dict(context.options)
        solver = opts.pop("solver", "policy-iteration")
        policy_out = opts.pop("policy_out", None)
        verify = bool(opts.pop("verify", False))
        fixed = opts.pop("truncation", None)
        aperiodicity = float(opts.pop("aperiodicity", 0.05))
        if opts:
            raise NotApplicableError(f"option {sorted(opts)[0]!r} does not apply to method mdp; valid: solver, "
                                     "policy_out, aperiodicity")
        if solver not in ("policy-iteration", "value-iteration", "linear-program"):
            raise ModelError(f"solver must be one of policy-iteration, value-iteration, linear-program; got {solver!r}")
        if fixed is not None and not self.is_infinite:
            raise NotApplicableError(f"truncation applies to capacity=inf only; this model has capacity "
                                     f"{int(self.capacity)}")
        settings = dict(solver=solver, tol=context.tol, strict=context.strict, aperiodicity=aperiodicity,
                        context=context)

        def solve(mdp, previous):
            return self._solve_measure(measure, mdp, **settings)

        if not self.is_infinite:
            rep = self.mdp()
            out = solve(rep, None)
            info: dict = {}
            error = 0.5 * (out["upper"] - out["lower"])
        else:
            def evaluate(rep, out):
                return Evaluation(out["value"], out["boundary_mass"], out["sensitivity"],
                                  record={"policy_improvements": out["nit"]})

            grown = grow(lambda level, _prev: self.mdp(level), solve, evaluate, tol=context.tol,
                         start=None if fixed is not None else self.truncation_start(context.tol),
                         fixed=fixed, size=self.mdp_size, strict=context.strict)
            rep, out, info = grown.representation, grown.solution, dict(grown.info)
            error = max(grown.error_estimate or 0.0, 0.5 * (out["upper"] - out["lower"]))
        info.update(out["info"])
        if verify:
            info["verify"] = self._verify(measure, rep, out, context, aperiodicity)
        if policy_out is not None:
            out["scheduler"].write_json(rep, policy_out)
            info["policy"]["export"] = str(policy_out)
        return Result(value=out["value"], method=f"mdp/{out['method']}", lower=out["lower"], upper=out["upper"],
                      error_estimate=error, n_states=rep.n_states, nit=out["nit"], info=info)

    def _solve_measure(self, measure, mdp, *, solver, tol, strict, aperiodicity, context) -> dict:
        """Solve one MDP for ``measure``: the optimum, its policy, the heuristics, the truncation data."""
        cost = _COSTS.get(measure, "number")
        start = self._start(mdp) if solver == "policy-iteration" else None
        sol = context.solve(LongRunAverage(mdp, cost, "min"), method=solver, tol=tol, strict=strict,
                            aperiodicity=aperiodicity, start=start)
        g, lo, hi = sol.at(0)
        pi = sol.stationary if sol.stationary is not None else self._stationary(mdp, sol.scheduler, context)
        tied, policy = self._policy(mdp, sol)
        out = {"value": g, "lower": lo, "upper": hi, "method": sol.method, "nit": sol.nit, "scheduler": policy,
               "stationary": pi}
        info = {"uniformisation_rate": mdp.uniformisation_rate, "n_choices": mdp.n_choices,
                "policy": self._describe_policy(mdp, policy, tied), "solver": sol.method}
        if measure == "mean_response_time":
            out.update(self._response_time(mdp, sol, pi, context, tol, strict, aperiodicity))
            info["response_time"] = out.pop("details")
            info["policy"] = self._describe_policy(mdp, out["scheduler"], 0)
        heuristics = {}
        for h in HEURISTICS:
            ev = context.solve(LongRunAverage(mdp, cost, "min", scheduler=self._heuristic(mdp, h)))
            hv, hlo, hhi = ev.at(0)
            heuristics[h] = {"value": hv, "gap": (hv - g) / g if g else math.nan,
                             "gap_lower": (hlo - hi) / hi if hi else math.nan,
                             "gap_upper": (hhi - lo) / lo if lo > 0 else math.inf}
        info["heuristics"] = heuristics
        info["cost"] = cost
        if measure.startswith("gap_"):
            hh = heuristics[measure[4:]]
            out.update(value=hh["gap"], lower=hh["gap_lower"], upper=hh["gap_upper"])
        # the truncation: stationary mass of the states with a full queue, and the value without them
        K = int(mdp.space.states.max()) if mdp.n_states > 1 else 0
        layers = mdp.space.states.max(axis=1)
        edge = layers == K
        bmass = float(pi[edge].sum()) if mdp.truncation is not None else 0.0
        sens = None
        if mdp.truncation is not None and 0 < bmass < 0.5 and measure in ("mean_number", "holding_cost"):
            # the value without the boundary states, renormalised, against the value of the same law (so that
            # the law's rounding cancels), times the tail factor: the estimate every truncated chain uses
            rate = mdp.state_rewards[cost] * mdp.uniformisation_rate
            inner = float(pi[~edge] @ rate[~edge]) / float(pi[~edge].sum())
            sens = abs(float(pi @ rate) - inner) * tail_factor(layers, pi)
        elif mdp.truncation is not None and bmass >= 0.5:
            sens = math.inf
        out.update(boundary_mass=bmass, sensitivity=sens, info=info)
        return out

    def _stationary(self, mdp, scheduler, context) -> np.ndarray:
        ev = context.solve(LongRunAverage(mdp, "number", "min", scheduler=scheduler))
        return ev.stationary

    def _policy(self, mdp, sol) -> tuple[int, Scheduler]:
        """The optimal scheduler with ties broken towards the faster server (then the lower index).

        Choices whose values ``(P h)_c`` (the reward is a state reward, the same for every
        choice of a state) are within 1e3 eps of the best count as tied.
        """
        h = sol.bias
        if h is None:
            return 0, sol.scheduler
        q = mdp.P @ h
        best = np.minimum.reduceat(q, mdp.row_groups[:-1])
        scale = max(1.0, float(np.max(np.abs(q))))
        near = q <= np.repeat(best, mdp.choice_counts) + 1e3 * _EPS * scale
        mu = np.concatenate([np.asarray(self.service_rates, float), [0.0]])
        speed_rank = np.argsort(np.argsort(-mu, kind="stable"), kind="stable")  # 0 = fastest, ties by index
        key = np.where(near, speed_rank[mdp.actions], self.n_servers + 1)
        pick = np.minimum.reduceat(key, mdp.row_groups[:-1])
        chosen = np.where(near & (key == np.repeat(pick, mdp.choice_counts)), np.arange(mdp.n_choices),
                          mdp.n_choices)
        choice = np.minimum.reduceat(chosen, mdp.row_groups[:-1])
        tied = int(np.sum(np.add.reduceat(near.astype(np.int64), mdp.row_groups[:-1]) > 1))
        return tied, Scheduler(choice)

    def _describe_policy(self, mdp, scheduler: Scheduler, tied: int) -> dict:
        actions = scheduler.actions(mdp)
        n = self.n_servers
        K = int(mdp.space.states.max())
        out: dict = {"states": mdp.n_states, "table_entries": int(actions.size),
                     "chosen": {mdp.action_names[a]: int(c) for a, c in
                                zip(*np.unique(actions, return_counts=True))},
                     "tied_states": int(tied),
                     "tie_break": "towards the faster server, then the lower index, among choices equal to rounding"}
        if n == 2:
            table = actions.reshape(K + 1, K + 1)  # mixed radix: q1 slowest
            curve, monotone = switching_curve(table, K)
            out["switching_curve"] = curve
            out["switching_curve_monotone"] = monotone
            out["switching_curve_meaning"] = ("for q2 = 0..K-1: the smallest q1 < K at which the optimum sends an "
                                              "arrival to queue 2 (None: never while queue 1 has room)")
        return out

    def _start(self, mdp) -> np.ndarray:
        """Policy iteration's first scheduler: SED made deterministic (ties to the faster server)."""
        w = self._heuristic(mdp, "sed").weights
        mu = np.concatenate([np.asarray(self.service_rates, float), [0.0]])
        speed_rank = np.argsort(np.argsort(-mu, kind="stable"), kind="stable")
        key = -w * (self.n_servers + 2) + speed_rank[mdp.actions]
        best = np.minimum.reduceat(key, mdp.row_groups[:-1])
        hit = np.where(key == np.repeat(best, mdp.choice_counts), np.arange(mdp.n_choices), mdp.n_choices)
        return np.minimum.reduceat(hit, mdp.row_groups[:-1])

    def _heuristic(self, mdp, policy: str) -> Scheduler:
        K = int(mdp.space.states.max())
        w = heuristic_weights(mdp.space.states, np.asarray(self.service_rates, float), K, policy)
        n = self.n_servers
        owner = mdp.state_of_choice
        wrow = np.where(mdp.actions < n, w[owner, np.minimum(mdp.actions, n - 1)], 1.0)
        return Scheduler(weights=wrow)

    def _response_time(self, mdp, sol, pi, context, tol, strict, aperiodicity) -> dict:
        """Dinkelbach's method for ``min_d E_d[L] / E_d[accepted rate]``, with bounds."""
        lam = self.arrival_rate
        num = mdp.state_rewards["number"] * mdp.uniformisation_rate
        acc = mdp.state_rewards["accepted"] * mdp.uniformisation_rate
        details: dict = {"number_optimal_policy": {"mean_response_time": float(pi @ num) / float(pi @ acc),
                                                   "blocking_probability": 1.0 - float(pi @ acc) / lam}}
        if not mdp.labels["full"].any() or self.is_infinite and mdp.truncation is None:
            theta = float(pi @ num) / float(pi @ acc)
            lower, upper = _widen(sol.lower[0] / lam, sol.upper[0] / lam)
            return {"value": theta, "lower": lower, "upper": upper, "scheduler": sol.scheduler, "details": details}
        theta = float(pi @ num) / float(pi @ acc)
        history = []
        scheduler, bias = sol.scheduler, sol.bias
        for it in range(50):  # Dinkelbach: superlinear, a few steps
            cost = (mdp.state_rewards["number"] - theta * mdp.state_rewards["accepted"])
            s = context.solve(LongRunAverage(mdp, cost, "min"), tol=tol, strict=strict, aperiodicity=aperiodicity,
                              start=scheduler.choice)
            p = s.stationary if s.stationary is not None else self._stationary(mdp, s.scheduler, context)
            new = float(p @ num) / float(p @ acc)
            history.append({"theta": theta, "G_lower": float(s.lower[0]), "G_upper": float(s.upper[0])})
            scheduler, bias, last = s.scheduler, s.bias, s
            if abs(new - theta) <= 0.25 * tol * abs(new):
                theta = new
                break
            theta = new
        else:
            raise ConvergenceError("Dinkelbach's iteration for the response time did not settle in 50 steps")
        # bounds: the last policy's ratio (its span bounds) above; G(theta) >= lo below
        ev_n = context.solve(LongRunAverage(mdp, "number", "min", scheduler=scheduler))
        ev_a = context.solve(LongRunAverage(mdp, "accepted", "min", scheduler=scheduler))
        upper = float(ev_n.upper[0]) / float(ev_a.lower[0])
        final = context.solve(LongRunAverage(mdp, (mdp.state_rewards["number"] - theta * mdp.state_rewards["accepted"]),
                                             "min"), tol=tol, strict=strict, aperiodicity=aperiodicity,
                              start=scheduler.choice)
        G_lo = float(final.lower[0])
        if G_lo >= 0:
            lower = theta + G_lo / lam
        else:
            amin = context.solve(LongRunAverage(mdp, "accepted", "min"), tol=tol, strict=strict,
                                 aperiodicity=aperiodicity)
            lower = theta + G_lo / float(amin.lower[0])
            details["min_acceptance_rate"] = float(amin.lower[0])
        lower, upper = _widen(min(lower, upper), upper)
        details.update(dinkelbach=history, blocking_probability=1.0 - float(ev_a.value[0]) / lam)
        return {"value": 0.5 * (lower + upper), "lower": lower, "upper": upper, "scheduler": scheduler,
                "details": details, "nit": sol.nit + len(history)}

    def _verify(self, measure, mdp, out, context, aperiodicity) -> dict:
        """Re-solve the optimal gain by relative value iteration and (small models) the LP."""
        cost = _COSTS.get(measure, "number")
        main = (out["lower"], out["upper"]) if measure in ("mean_number", "holding_cost") else None
        res: dict = {}
        sol = context.solve(LongRunAverage(mdp, cost, "min"), method="policy-iteration", tol=context.tol)
        ref = sol.at(0)
        others = [("value-iteration", {"aperiodicity": aperiodicity})]
        if mdp.n_states <= 20_000:
            others.append(("linear-program", {}))
        agree = True
        for name, extra in others:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                o = context.solve(LongRunAverage(mdp, cost, "min"), method=name, tol=context.tol, **extra)
            diff = abs(o.at(0)[0] - ref[0])
            slack = 1e-12 * abs(ref[0])
            overlap = o.lower[0] <= ref[2] + slack and ref[1] <= o.upper[0] + slack
            # agreement: the values within tol, or the other solver's own bracket holding this value (the LP's
            # point value is only as exact as HiGHS's feasibility tolerance; its span bounds are exact)
            ok = overlap and (diff <= max(10 * context.tol * abs(ref[0]), 1e-12)
                              or o.lower[0] - slack <= ref[0] <= o.upper[0] + slack)
            agree &= ok
            res[name] = {"value": o.at(0)[0], "lower": float(o.lower[0]), "upper": float(o.upper[0]),
                         "abs_diff": diff, "agree": bool(ok), "nit": o.nit}
        res["policy-iteration"] = {"value": ref[0], "lower": ref[1], "upper": ref[2]}
        if main is not None:
            res["measure_bracket"] = list(main)
        res["agree"] = bool(agree)
        if not agree:
            msg = "verify: the optimal gains of policy iteration and the independent solvers differ"
            if context.strict:
                raise ConvergenceError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=4)
        return res
