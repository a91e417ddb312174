"""Model checking of CSL/PCTL queries on a chain (the queries of :mod:`exactq.query`).

:func:`check_chain` evaluates a parsed query on a :class:`~exactq.ctmc.CTMC` (CSL,
time in time units) or a :class:`~exactq.ctmc.DTMC` (PCTL, time in steps) with the
library's solvers:

* ``S=?``, ``E=?`` and ``R=? [ S ]`` from the stationary distribution
  (:func:`~exactq.solvers.stationary.solve_stationary`, the one stationary solver); a
  chain with several closed classes gets the long-run value of each class weighted by
  the probability of ending in it (:func:`~exactq.solvers.reachability.absorption_values`),
  as PRISM computes it;
* time-bounded until ``a U<=t b`` by uniformisation on the chain made absorbing in
  ``b`` and in ``¬a ∧ ¬b`` [BHHK03]_ (:func:`~exactq.solvers.transient.bounded_until`),
  interval until ``a U[t1,t2] b`` and ``F>=t`` by a second, backward transient phase
  over ``[0, t1]`` in which ``¬a`` is absorbing [BHHK03]_
  (:func:`~exactq.solvers.transient.transient_values`), ``G`` as the complement of
  ``F ¬``, and the DTMC versions by step iteration (:mod:`exactq.solvers.dtmc`);
* unbounded until, expected times and ``R=? [ F b ]`` by graph analysis and a sparse
  solve (:mod:`exactq.solvers.reachability`); the expected reward is infinite when
  ``b`` is reached with probability < 1, and the answer says so;
* ``R=? [ C<=t ]`` and ``R=? [ I=t ]`` by uniformisation
  (:func:`~exactq.solvers.transient.cumulative_reward`,
  :func:`~exactq.solvers.transient.transient_values`).

Rewards come from :class:`~exactq.query.RewardStructure` objects: the state part and
the expected transition reward per unit time (per step in a DTMC); ``S``, ``C`` and
``F`` count both, ``I`` the state part only (PRISM's semantics).

Values are for the chain's initial state; with several initial states (a label
``"init"`` true in more than one state) the default is PRISM's: the range over the
initial states. ``filter(op, query, states)`` applies ``op`` over other states.

On a truncated chain it also says how much the truncation can matter: for ``S=?``
and ``E=?`` the stationary mass on the boundary states (the truncation driver turns it
into a boundary sensitivity), and for path queries the probability that a path
reaches a boundary state while the formula is still undecided. The truncated and the
infinite chain agree on every path until it leaves a boundary state, so that
probability bounds the truncation error of ``P=?``.

References
----------
.. [BHHK03] C. Baier, B. Haverkort, H. Hermanns and J.-P. Katoen, "Model-checking
   algorithms for continuous-time Markov chains", IEEE Transactions on Software
   Engineering 29(6):524–541, 2003.
.. [KNP07] M. Kwiatkowska, G. Norman and D. Parker, "Stochastic model checking",
   SFM 2007, LNCS 4486, pp. 220–270 (rewards of CTMCs and DTMCs).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from exactq.ctmc import DTMC, StationaryDistribution
from exactq.errors import AccuracyWarning, ModelError, ReducibleError
from exactq.query import (
    ExpectedTime, Filter, Formula, Globally, NativeQuery, Next, Query, RewardQuery, RewardStructure,
    SteadyExpectation, SteadyProbability, Threshold, Until, parse_query,
)
from exactq.result import Result

from .dtmc import step_bounded_until, step_cumulative, step_values
from .reachability import absorption_values, expected_reward, expected_time, until_probability
from .stationary import STATIONARY_SOLVERS, solve_stationary, stationary
from .structure import communicating_classes
from .transient import (STEADY_STATE_MIN_STEPS, UNIFORMISATION_FACTOR, bounded_until, cumulative_reward, is_trusted,
                        pair_from_projections, transient_pair, transient_values, trust)

__all__ = ["check_chain", "QueryAnswer"]


@dataclass
class QueryAnswer:
    """A query's answer on one chain.

    Attributes
    ----------
    result : Result
        Value, method, residual, error estimate (the truncated Poisson mass of a
        time-bounded query) and details.
    stationary : StationaryDistribution or None
        The stationary law of a steady-state query (when it is unique).
    values : (n,) ndarray or None
        The per-state quantity a steady-state query averages.
    boundary_probability : float or None
        For a path query on a truncated chain: the probability of reaching a
        boundary state while the formula is undecided (a bound on the truncation
        error).
    per_state : (n,) ndarray or None
        The value of the query from every state (what filters select from). A top-level
        time- or step-bounded query, read at the initial states only, may have been
        computed on the states those reach (``info["projection"]``,
        ``info["states_iterated"]``): NaN elsewhere.
    """

    result: Result
    stationary: StationaryDistribution | None = None
    values: np.ndarray | None = None
    boundary_probability: float | None = None
    per_state: np.ndarray | None = None

    def value_under(self, law: StationaryDistribution) -> float:
        """The steady-state query's value under another distribution (e.g. conditioned)."""
        return law.expect(self.values)  # finite pi (checked on construction), finite values where pi > 0


_SCALAR = (str, bool, int, float, np.generic, type(None))


def _small(info: dict) -> dict:
    """Keep only scalar entries (no per-state vectors) of a solver's info, and its ``solver`` details."""
    out = {k: v for k, v in info.items() if isinstance(v, _SCALAR)}
    if isinstance(info.get("solver"), dict):
        out["solver"] = {k: v for k, v in info["solver"].items() if isinstance(v, _SCALAR)}
    return out


def _state_values(expr, chain, ns: dict, n: int, ev=None) -> np.ndarray:
    """Evaluate a compiled state formula on the chain's states.

    A formula with nested operators gets the evaluator ``ev`` as its checker: the
    nested queries' per-state values are computed first (bottom-up).
    """
    v = expr.on_chain(chain, ev) if getattr(expr, "deps", None) else expr.on_chain(chain)
    return np.broadcast_to(np.asarray(v), (n,))


def _condition(expr, chain, ns: dict, n: int, role: str, ev=None) -> np.ndarray:
    v = _state_values(expr, chain, ns, n, ev)
    if v.dtype == bool:
        return np.array(v)
    if v.dtype.kind in "iu" and np.all((v == 0) | (v == 1)):
        return v.astype(bool)
    raise ModelError(f"{role} must be a condition (true or false in each state); {expr.text!r} is numeric")


def _numeric(expr, chain, ns: dict, n: int, ev=None) -> np.ndarray:
    return np.asarray(_state_values(expr, chain, ns, n, ev), dtype=float)


def check_chain(chain: Any, query: str | Query, *, eps: float = 1e-12, solver: str = "auto",
                strict: bool = False, rewards: dict | None = None, cache: dict | None = None,
                state_text=None) -> QueryAnswer:
    """Evaluate a query on a CTMC or a DTMC.

    Parameters
    ----------
    chain : CTMC or DTMC
        The chain (its ``namespace()`` gives the variables, rewards, labels and
        constants of native expressions; ``initial`` the start of path queries).
    query : str, NativeQuery or Query
        A native query (its text, or :func:`~exactq.query.parse_query`'s result),
        compiled against this chain's variables, constants, rewards and labels; or a
        compiled query, e.g. one of PRISM's properties
        (:func:`exactq.prism.properties.compile_properties`).
    eps : float
        Truncation bound of the Fox–Glynn weights for time-bounded queries.
    solver : str
        The solver by name, from the registry: a stationary solver (``gmres``,
        ``power``, ...) for steady-state queries, a linear solver
        (:func:`exactq.solvers.linear.linear_solvers`) for the systems of unbounded
        reachability, expected time and expected reward; ``direct`` and ``bicgstab``
        are both. A query whose kind has no solver of that name uses ``auto``.
    strict : bool
        Raise on non-convergence of the stationary solver.
    rewards : dict of str -> RewardStructure, optional
        The reward structures of ``R=?`` queries (default: the chain's ``rewards``
        as state rewards).
    cache : dict, optional
        Shared by the queries of one chain: the stationary solution is computed once
        and reused by every steady-state query that passes the same dict.
    state_text : callable, optional
        ``state_text(i)`` describes state ``i`` (default ``(x=1,y=0)`` from the
        chain's variables), for the states that ``argmin``, ``argmax``, ``print`` and
        ``printall`` filters list in ``info``.

    Returns
    -------
    QueryAnswer
        ``result.value`` (at the initial state for path and reward queries),
        ``result.method`` (``query/stationary``, ``query/uniformisation``,
        ``query/reachability``, ``query/expected_time``, ``query/steps``,
        ``query/expected_reward``, ``query/next``), ``result.residual``,
        ``result.error_estimate`` (the truncated Poisson mass for time-bounded
        queries, which bounds the error), and a small ``result.info`` (``query``,
        ``kind`` and the solvers' scalar details; never per-state vectors).

    Raises
    ------
    QuerySyntaxError
        For a malformed query.
    ModelError
        For unknown names, a numeric expression where a condition is needed (or the
        reverse), a bad initial state, an unknown reward structure or a step bound
        that is not an integer (DTMC).

    Examples
    --------
    M/M/1/3 with arrival rate 1 and service rate 2: the blocking probability is
    ``ρ^3 (1 - ρ) / (1 - ρ^4)`` with ``ρ = 1/2``.

    >>> from exactq.ctmc import CTMC
    >>> Q = sp.csr_matrix([[-1, 1, 0, 0], [2, -3, 1, 0], [0, 2, -3, 1], [0, 0, 2, -2]], dtype=float)
    >>> a = check_chain(CTMC.from_generator(Q, ["q"]), "S=? [ q = 3 ]")
    >>> bool(np.isclose(a.result.value, 0.5**3 * 0.5 / (1 - 0.5**4)))
    True
    """
    t0 = time.perf_counter()
    from .linear import LINEAR_SOLVERS

    # a built-in name needs no look-up; another one is checked against the registry (plug-ins' solvers)
    stationary_names, linear_names = (STATIONARY_SOLVERS, LINEAR_SOLVERS) if solver in STATIONARY_SOLVERS + \
        LINEAR_SOLVERS else _solver_names()
    if solver not in stationary_names and solver not in linear_names:
        valid = list(dict.fromkeys(["auto", *stationary_names, *linear_names]))
        raise ModelError(f"solver must be one of {', '.join(valid)} (steady state: "
                         f"{', '.join(n for n in stationary_names if n != 'auto')}; linear systems: "
                         f"{', '.join(n for n in linear_names if n != 'auto')}); got {solver!r}")
    q = parse_query(query)
    if isinstance(q, NativeQuery):  # a native query: compiled against this chain's symbols
        q = q.bind(chain)
    text = str(q)
    discrete = isinstance(chain, DTMC)
    n = int(chain.n_states)
    ns: dict = {}  # (the names are compiled into the query's state formulas)
    inner = q.query if isinstance(q, Filter) else q
    info: dict = {"query": text, "kind": inner.kind}
    if discrete:
        info["time"] = "steps"
    answer = QueryAnswer(result=None)  # type: ignore[arg-type]
    truncated = getattr(chain, "truncation", None) is not None
    boundary = chain.boundary_mask() if truncated else None
    ev = _Evaluator(chain, discrete, eps, solver, strict, info, ns, n, rewards, cache)
    ev.state_text = state_text or _default_state_text(chain)
    if isinstance(q, Filter):
        value, per_state = ev.filter(q, answer, top=True)
    else:
        ev.sources = _initial_support(chain, n)
        per_state, scalar = ev.evaluate(q, answer)
        value = scalar if scalar is not None else _default_value(chain, per_state, n, info)
    if isinstance(inner, ExpectedTime):
        info["reached_surely"] = bool(np.all(np.isfinite(np.atleast_1d(value))))
    if isinstance(inner, RewardQuery) and inner.kind_of in ("reachability", "total") \
            and not np.all(np.isfinite(np.atleast_1d(value))):
        info["infinite"] = ("the target is reached with probability < 1, so the expected reward is infinite "
                            "(PRISM's convention)" if inner.kind_of == "reachability" else
                            "a closed class of positive reward is reached with positive probability, so the total "
                            "reward is infinite")
    info.pop("seconds", None)
    if ev.parts:
        info["parts"] = ev.parts
    if boundary is not None and boundary.any() and ev.undecided is not None:
        answer.boundary_probability = _boundary_probability(chain, ev, boundary, inner, eps)
    answer.per_state = per_state
    answer.result = Result(value=value, method=ev.method, residual=ev.residual, error_estimate=ev.error_estimate,
                           n_states=n, seconds=time.perf_counter() - t0, measure=text, info=info)
    return answer


def _solver_names() -> tuple[list[str], list[str]]:
    """The registry's solver names a query can be given: (stationary, linear), each with ``auto``."""
    from exactq.api import stationary_solvers

    from .linear import linear_solvers

    return ["auto", *stationary_solvers()], linear_solvers()


def _default_state_text(chain):
    from exactq.statespace import row_reader

    names = list(getattr(chain.space, "names", ())) or [f"x{k}" for k in range(chain.states.shape[1])]
    row_of = row_reader(chain)

    def text(i: int) -> str:
        row = row_of(int(i))
        return "(" + ",".join(f"{nm}={int(v)}" for nm, v in zip(names, row)) + ")"
    return text


class _Evaluator:
    """Per-state values of one (unfiltered) query."""

    def __init__(self, chain, discrete, eps, solver, strict, info, ns, n, rewards, cache=None):
        self.chain, self.discrete, self.eps, self.solver, self.strict = chain, discrete, eps, solver, strict
        self.cache = {} if cache is None else cache
        self.info, self.ns, self.n = info, ns, n
        self.rewards = rewards
        if discrete:  # P - I, formed once for the queries that share the cache (0.2 ms a query at 2,694 states)
            self.Q = self.cache.get(("generator",))
            if self.Q is None:
                self.Q = self.cache[("generator",)] = chain.generator()
                if is_trusted("stochastic P", chain.P):  # P - I of a validated P: a generator, not read again
                    trust("generator Q", self.Q)
        else:
            self.Q = chain.Q
        self.P = chain.P if discrete else None
        self.method = ""
        self.residual = None
        self.error_estimate = None
        self.undecided = None  # states where a path query is not yet decided (truncation bound)
        self.memo: dict = {}  # per-state values of nested queries, by id (one check_chain call)
        self.parts: list = []  # what the nested queries ran (info["parts"])
        self.state_text = None
        # the states whose value a top-level query is read at (its initial states), when only those are: a
        # step-bounded DTMC reward then iterates on the states they reach within the bound (never nested ones)
        self.sources = None
        # the reachability systems take the solver's name when the registry has a linear solver of that name
        # (check_chain validated it against both families)
        from .linear import LINEAR_SOLVERS

        self.linear_solver = solver if solver in LINEAR_SOLVERS or (
            solver not in STATIONARY_SOLVERS and solver in _solver_names()[1]) else "auto"

    # -- nested operators ----------------------------------------------------------------
    def child(self) -> "_Evaluator":
        """An evaluator for a nested query: the same chain, caches and settings, its own info."""
        ev = _Evaluator(self.chain, self.discrete, self.eps, self.solver, self.strict, {}, self.ns, self.n,
                        self.rewards, self.cache)
        ev.memo, ev.parts, ev.state_text = self.memo, self.parts, self.state_text
        return ev

    def per_state(self, q) -> np.ndarray:
        """The value of a (nested) query in every state: what the formula containing it reads."""
        key = id(q)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        ev = self.child()
        if isinstance(q, Filter):
            value, per_state = ev.filter(q, QueryAnswer(result=None), top=False)
        else:
            per_state, _ = ev.evaluate(q, QueryAnswer(result=None))
        per_state = np.asarray(per_state)
        if per_state.shape != (self.n,):
            per_state = np.broadcast_to(per_state, (self.n,)).copy()
        self.memo[key] = (q, per_state)  # q kept alive, so its id is not reused
        part = {"query": str(q), "method": ev.method}
        if ev.error_estimate is not None:
            part["error_estimate"] = ev.error_estimate
        if ev.residual is not None:
            part["residual"] = ev.residual
        self.parts.append(part)
        return per_state

    def formula(self, q: Formula) -> np.ndarray:
        values = _state_values(q.expr, self.chain, self.ns, self.n, self)
        self.method = "query/formula"
        errs = [p["error_estimate"] for p in self.parts if "error_estimate" in p]
        res = [p["residual"] for p in self.parts if "residual" in p]
        self.residual = max(res) if res else None
        if errs:
            self.info["error_estimates_of_parts"] = max(errs)
        return np.array(values)

    def filter(self, q: Filter, answer: QueryAnswer, *, top: bool):
        """``filter(op, prop, states)``: ``(value, per_state)``; ``value`` is None for the per-state operators."""
        per_state, scalar = self.evaluate(q.query, answer)
        per_state = np.asarray(per_state)
        if per_state.shape != (self.n,):
            per_state = np.broadcast_to(per_state, (self.n,)).copy()
        mask = np.ones(self.n, dtype=bool) if q.states is None else _condition(
            q.states, self.chain, self.ns, self.n, "the states of the filter", self)
        count = int(mask.sum())
        self.info["filter"] = f"{q.op} over {count} state{'s' if count != 1 else ''}"
        value, states = _apply_filter(q.op, per_state, mask, self)
        if q.op in ("argmin", "argmax"):
            self.info["states"] = [self.state_text(i) for i in np.flatnonzero(states)]
        elif q.op in ("print", "printall"):
            shown = mask if q.op == "printall" else (mask & (per_state != 0))
            self.info["printed"] = [[self.state_text(i), _plain_value(per_state[i])] for i in np.flatnonzero(shown)]
        if value is None:  # a per-state filter: its states (argmin/argmax) or the values themselves (print)
            result = states if q.op in ("argmin", "argmax") else per_state
            if top:
                note = self.info.pop("filter")
                value = _default_value(self.chain, result, self.n, self.info)
                self.info["filter"] = note + "; " + self.info.get("filter", "the value at the initial state")
            return value, result
        if top:
            return value, per_state
        if isinstance(value, list):  # pragma: no cover - range is refused inside expressions at compile time
            raise ModelError("filter(range, ...) gives an interval; it cannot be used inside an expression")
        return value, np.full(self.n, value)

    def total_reward(self, rate: np.ndarray) -> np.ndarray:
        """``R=? [ C ]``: the expected reward of the whole path, finite where it is.

        The reward stops only in closed classes whose states all have reward 0; it is
        infinite from a state that reaches a closed class with a positive reward with
        positive probability (PRISM's total reward), and otherwise the expected reward
        until a reward-free closed class is entered (:func:`expected_reward`).
        """
        if np.any(rate < 0):
            i = int(np.flatnonzero(rate < 0)[0])
            raise ModelError(f"R=? [ C ] (the total reward) needs rewards >= 0; state {self.state_text(i)} has "
                             f"{rate[i]:g}")
        cls = self.classes()
        rec = cls.recurrent_mask
        positive = np.zeros(cls.n_classes, dtype=bool)
        positive[cls.labels[rec & (rate > 0)]] = True
        zero_rec = rec & ~positive[cls.labels]
        per_state, sinfo = expected_reward(self.Q, zero_rec, rate, graph=self.predecessors())
        self.residual = float(sinfo["residual"])
        self.info.update(_small(sinfo))
        self.info["reward_free_closed_states"] = int(zero_rec.sum())
        self.method = "query/expected_reward"
        self.undecided = ~zero_rec
        return per_state

    # -- thresholds --------------------------------------------------------------------
    def threshold(self, q: Threshold) -> np.ndarray:
        """``P~p``, ``S~p``, ``R~r``: per state, the comparison; probabilities 0 and 1 by graph analysis."""
        inner = q.query
        values, _ = self.evaluate(inner, QueryAnswer(result=None))
        values = np.array(np.broadcast_to(values, (self.n,)), dtype=float)
        sets = self.exact_sets(inner)
        b = float(q.bound)
        if sets is not None:
            no, yes = sets
            values = np.clip(values, 0.0, 1.0)
            values[no], values[yes] = 0.0, 1.0
        cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[q.relation]
        with np.errstate(invalid="ignore"):
            result = cmp(values, b)
        if sets is not None:
            no, yes = sets
            undecided = ~(no | yes)
            if b == 1.0 and q.relation in (">=", "<"):
                result = yes.copy() if q.relation == ">=" else ~yes
                undecided[:] = False  # decided by the graph in every state
            elif b == 0.0 and q.relation in (">", "<="):
                result = ~no if q.relation == ">" else no.copy()
                undecided[:] = False
        else:
            undecided = np.ones(self.n, dtype=bool)
        err = self.error_estimate or 0.0
        tol = max(err, 1e-12 * max(1.0, abs(b)))
        with np.errstate(invalid="ignore"):
            close = undecided & (np.abs(values - b) <= tol) & (values != b)
        if close.any():
            i = int(np.flatnonzero(close)[0])
            warnings.warn(f"{q}: in {int(close.sum())} state{'s' if close.sum() > 1 else ''} the value is within its "
                          f"error ({tol:.1e}) of the bound {b:g} (e.g. {self.state_text(i)}: "
                          f"{float(values[i])!r}); the comparison there may be wrong", AccuracyWarning, stacklevel=4)
        self.info["threshold"] = f"{q.relation} {b:g}"
        if sets is not None:
            self.info["exact_0_1"] = "probability 0 and 1 decided by graph analysis"
        return result

    def exact_sets(self, q):
        """The states where the probability of ``q`` is exactly 0 and exactly 1 (graph analysis), or None."""
        chain, ns, n = self.chain, self.ns, self.n
        if isinstance(q, Until):
            left = _condition(q.left, chain, ns, n, "the left side of U", self)
            right = _condition(q.right, chain, ns, n, "the target of the path formula", self)
            no, yes = self.until_sets(left, right, q.lower_bound or 0.0, q.time_bound)
            return (yes, no) if q.negated else (no, yes)
        if isinstance(q, Globally):
            holds = _condition(q.expr, chain, ns, n, "the argument of G", self)
            no, yes = self.until_sets(np.ones(n, dtype=bool), ~holds, q.lower_bound or 0.0, q.time_bound)
            return yes, no
        if isinstance(q, Next):
            target = _condition(q.expr, chain, ns, n, "the argument of X", self)
            adj = self.adjacency()
            pos = (adj @ target.astype(float)) > 0
            one = (adj @ (~target).astype(float)) == 0
            if not self.discrete:
                moving = np.asarray(-sp.csr_array(self.Q).diagonal() > 0)
                pos, one = np.where(moving, pos, target), np.where(moving, one, target)
            return ~pos, one
        if isinstance(q, SteadyProbability):
            holds = _condition(q.expr, chain, ns, n, "the argument of S", self)
            return self.steady_sets(holds)
        return None

    def predecessors(self):
        """The reversed transition graph of the reachability analyses (prob0/prob1), built once per chain and
        kept in the cache the queries of one chain share (crowds TotalRuns=5, CrowdSize=10: 4 ms a query)."""
        from .reachability import _Predecessors

        key = ("predecessors",)
        graph = self.cache.get(key)
        if graph is None:
            graph = self.cache[key] = _Predecessors(self.Q)
        return graph

    def classes(self):
        """The chain's communicating classes, found once per chain from the strong components that also order
        its linear systems (:meth:`predecessors`; one search of the graph where there were two)."""
        key = ("classes-structure",)
        cls = self.cache.get(key)
        if cls is None:
            cls = self.cache[key] = communicating_classes(sp.csr_matrix(self.Q),
                                                          components=self.predecessors().components())
        return cls

    def adjacency(self) -> sp.csr_array:
        """The transition graph (1 for each transition; no diagonal in a CTMC, self-loops kept in a DTMC)."""
        key = ("adjacency",)
        A = self.cache.get(key)
        if A is None:
            M = sp.csr_array(self.P if self.discrete else self.Q)
            coo = M.tocoo()
            keep = (coo.data > 0) & ((coo.row != coo.col) | self.discrete)
            A = sp.csr_array((np.ones(int(keep.sum())), (coo.row[keep], coo.col[keep])), shape=M.shape)
            self.cache[key] = A
        return A

    def reach(self, targets: np.ndarray, through: np.ndarray) -> np.ndarray:
        """States with a path to ``targets`` whose states before the last are all in ``through`` (BFS on the
        cached reversed graph; a self-loop changes no reachability)."""
        if not targets.any():
            return np.zeros(self.n, dtype=bool)
        return self.predecessors().restrict(np.asarray(through, dtype=bool)).reach(targets)

    def until_sets(self, left, right, lower, upper):
        """``(no, yes)`` of ``left U[lower, upper] right``: probability exactly 0 and exactly 1.

        Continuous time: every state a path can reach is visited at any time with positive
        probability, so (with ``t1 > 0``) probability 1 needs every reachable state in
        ``left & right`` (``t2`` finite) or in ``left`` with ``left U right`` sure
        (``t2`` infinite). Discrete time: the step iterations on the graph, alongside the
        numerical ones (:func:`~exactq.solvers.dtmc.step_until_sets`).
        """
        from .dtmc import step_keep_sets, step_until_sets
        from .reachability import _prob01

        Q = sp.csr_array(self.Q)
        every = np.ones(self.n, dtype=bool)
        if self.discrete:
            lower = int(lower or 0)
            if upper is None:
                no, yes = _prob01(Q, left, right, graph=self.predecessors())
            else:
                no, yes = step_until_sets(self.adjacency(), left, right, int(upper) - lower)
            if lower:
                no, yes = step_keep_sets(self.adjacency(), no, yes, lower, left)
            return no, yes
        no_u, yes_u = _prob01(Q, left, right, graph=self.predecessors())
        if not lower:
            if upper is None:
                return no_u, yes_u
            if upper == 0:
                return ~right, right.copy()
            return no_u, right.copy()
        pos_target = (left & ~no_u) if (upper is None or upper > lower) else (left & right)
        pos = left & self.reach(pos_target, left)
        good = (left & yes_u) if upper is None else (left & right)
        yes = ~self.reach(~good, every)
        return ~pos, yes

    def steady_sets(self, holds):
        """``(no, yes)`` of ``S [ holds ]``: no closed class reached has a ``holds`` state / every one is inside it."""
        cls = self.classes()
        rec = cls.recurrent_mask
        labels = cls.labels
        good = np.zeros(cls.n_classes, dtype=bool)
        bad = np.zeros(cls.n_classes, dtype=bool)
        good[labels[rec & holds]] = True
        bad[labels[rec & ~holds]] = True
        every = np.ones(self.n, dtype=bool)
        no = ~self.reach(rec & good[labels], every)
        yes = ~self.reach(rec & bad[labels], every)
        return no, yes

    # -- dispatch --------------------------------------------------------------------
    def evaluate(self, q, answer: QueryAnswer):
        chain, ns, n = self.chain, self.ns, self.n
        if isinstance(q, (SteadyProbability, SteadyExpectation)):
            if isinstance(q, SteadyProbability):
                values = _condition(q.expr, chain, ns, n, "the argument of S=?", self).astype(float)
            else:
                values = _numeric(q.expr, chain, ns, n, self)
            return self.long_run(values, q.expr.text, answer)
        if isinstance(q, Until):
            left = _condition(q.left, chain, ns, n, "the left side of U", self)
            right = _condition(q.right, chain, ns, n, "the target of the path formula", self)
            self.undecided = left & ~right
            y = self.until(left, right, q.lower_bound, q.time_bound)
            return (1.0 - y if q.negated else y), None
        if isinstance(q, Threshold):
            return self.threshold(q), None
        if isinstance(q, Formula):
            return self.formula(q), None
        if isinstance(q, Filter):
            value, per_state = self.filter(q, answer, top=False)
            return per_state, None
        if isinstance(q, Globally):
            holds = _condition(q.expr, chain, ns, n, "the argument of G", self)
            self.undecided = holds.copy()
            p = self.until(np.ones(n, dtype=bool), ~holds, q.lower_bound, q.time_bound)
            return 1.0 - p, None
        if isinstance(q, Next):
            target = _condition(q.expr, chain, ns, n, "the argument of X", self).astype(float)
            self.method = "query/next"
            if self.discrete:
                return np.asarray(self.P @ target), None
            Q = sp.csr_array(self.Q)
            exit_rate = -Q.diagonal()
            off = Q - sp.diags_array(Q.diagonal())
            moving = exit_rate > 0
            out = np.where(moving, (off @ target) / np.where(moving, exit_rate, 1.0), target)
            self.undecided = np.ones(n, dtype=bool)
            return out, None
        if isinstance(q, ExpectedTime):
            target = _condition(q.target, chain, ns, n, "the target of T=?", self)
            per_state, sinfo = expected_time(self.Q, target, solver=self.linear_solver, graph=self.predecessors())
            self.residual = float(sinfo["residual"])
            self.error_estimate = sinfo.get("error_estimate")
            self.info.update(_small(sinfo))
            self.method = "query/expected_time"
            self.undecided = ~target
            return per_state, None
        if isinstance(q, RewardQuery):
            return self.reward(q, answer)
        raise ModelError(f"unsupported query {q!r}")  # pragma: no cover

    # -- steady state ------------------------------------------------------------------
    def long_run(self, values: np.ndarray, what: str, answer: QueryAnswer):
        self.method = "query/stationary"
        key = ("stationary", self.solver, self.strict)
        cls = self.classes()
        if len(cls.closed) > 1:  # the bottom SCCs one by one, weighted by the probability of reaching each
            return self.long_run_classes(values, what), None
        try:  # one closed class: solve_stationary solves it alone (zero on the transient states)
            st = self.cache.get(key)
            if st is None:
                st = solve_stationary(self.chain, solver=self.solver, strict=self.strict, classes=cls)
                self.cache[key] = st
            else:
                self.info["stationary_reused"] = True
        except ReducibleError:
            return self.long_run_classes(values, what), None
        bad = (st.pi > 0) & ~np.isfinite(values)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ModelError(f"{what!r} is not finite in state {i}, which has positive probability")
        answer.stationary, answer.values = st, values
        value = answer.value_under(st)
        self.residual = float(st.residual)
        self.info["stationary"] = {"method": st.method, "residual": st.residual,
                                   **({"recovery": st.info["recovery"]} if st.info.get("recovery") else {}),
                                   **_small({"solver": st.info.get("solver"),
                                             "error_bound_l1": st.info.get("error_bound_l1")})}
        bound = st.info.get("error_bound_l1")
        if bound is not None and st.method == "bicgstab" and np.all(np.isfinite(values)):  # iterative: say it
            # |f.pi* - f.pi| <= ||pi* - pi||_1 (max f - min f) / 2, the solver's bound on ||pi* - pi||_1
            self.error_estimate = float(bound) * float(values.max() - values.min()) / 2.0
        return np.full(self.n, value), value

    def long_run_classes(self, values: np.ndarray, what: str) -> np.ndarray:
        """Several closed classes: each one's long-run value, weighted by the probability of ending in it."""
        Q = sp.csr_matrix(self.Q)
        cls = self.classes()
        solved = self.cache.setdefault(("closed-classes solved", self.solver), {})
        labels = cls.labels
        recurrent = cls.recurrent_mask
        sizes = np.bincount(labels, minlength=cls.n_classes)
        class_value = np.zeros(cls.n_classes)
        single = cls.closed[sizes[cls.closed] == 1]
        first = np.full(cls.n_classes, -1)
        first[labels[::-1]] = np.arange(len(labels))[::-1]
        class_value[single] = values[first[single]]
        residual, methods = 0.0, set()
        for c in cls.closed[sizes[cls.closed] > 1]:  # a loop over the (few) larger closed classes
            idx = np.flatnonzero(labels == c)
            st = solved.get(int(c))
            if st is None:
                st = solved[int(c)] = stationary(
                    Q[idx][:, idx], method=self.solver if self.solver != "level-aggregation" else "auto",
                    strict=self.strict, coords=self.chain.states[idx], jumps=getattr(self.chain, "jumps", None))
            if np.any(~np.isfinite(values[idx][st.pi > 0])):
                raise ModelError(f"{what!r} is not finite in a state of positive long-run probability")
            class_value[c] = st.expect(values[idx])
            residual = max(residual, float(st.residual))
            methods.add(st.method)
        v_rec = np.where(recurrent, class_value[labels], 0.0)
        per_state, ainfo = absorption_values(Q, recurrent, v_rec, graph=self.predecessors())
        # every state ends in a closed class, so its value is an average of the classes' values: clipping to their
        # range never moves it away from the exact one (an iterative absorption solve gave 1 + 8e-13 for S=? of a
        # label), and an iterative solve's bound is the error estimate, as for the other queries
        closed_values = class_value[cls.closed]
        if closed_values.size and np.all(np.isfinite(closed_values)):
            per_state = np.clip(per_state, closed_values.min(), closed_values.max())
        if ainfo.get("error_estimate") is not None:
            self.error_estimate = float(ainfo["error_estimate"])
        self.residual = max(residual, float(ainfo["residual"]))
        self.info["stationary"] = {"method": ", ".join(sorted(methods)) or "trivial", "residual": residual}
        self.info["closed_classes"] = int(len(cls.closed))
        return per_state

    # -- until and its variants --------------------------------------------------------
    def _time(self, t, what: str):
        if t is None:
            return None
        t = float(t)
        if not math.isfinite(t) or t < 0:
            raise ModelError(f"{what} must be a finite number >= 0; got {t!r}")
        if self.discrete and t != int(t):
            raise ModelError(f"{what} of a dtmc counts steps and must be an integer; got {t:g}")
        return int(t) if self.discrete else t

    def until(self, left, right, lower, upper) -> np.ndarray:
        lower = self._time(lower or 0.0, "the lower time bound")
        upper = self._time(upper, "the time bound")
        if upper is not None and lower > upper:
            raise ModelError(f"the time interval [{lower:g}, {upper:g}] is empty")
        info = self.info
        if self.discrete:
            self.method = "query/steps" if (upper is not None or lower) else "query/reachability"
            if upper is None:
                y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver, graph=self.predecessors())
                self.residual = float(sinfo["residual"])
                self.error_estimate = sinfo.get("error_estimate")
                info.update(_small(sinfo))
            else:
                y, sinfo = step_bounded_until(self.P, left, right, upper - lower)
                info["steps"] = upper
                if "steady_state_detection" in sinfo:
                    info["steady_state_detection"] = sinfo["steady_state_detection"]
                    self.error_estimate = float(sinfo["error_bound"])
            if lower:
                y, linfo = step_values(self.P, y, lower, keep=left, eps=self.eps)
                info["lower_steps"] = lower
                if "steady_state_detection" in linfo:
                    info["lower_steady_state_detection"] = linfo["steady_state_detection"]
                    self.error_estimate = (self.error_estimate or 0.0) + float(linfo["error_bound"])
            return y
        if upper is None and not lower:
            y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver, graph=self.predecessors())
            self.residual = float(sinfo["residual"])
            self.error_estimate = sinfo.get("error_estimate")
            info.update(_small(sinfo))
            self.method = "query/reachability"
            return y
        self.method = "query/uniformisation"
        err = 0.0
        if upper is None:
            y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver, graph=self.predecessors())
            self.residual = float(sinfo["residual"])
            err += float(sinfo.get("error_estimate") or 0.0)
        elif not lower and (proj := self.projected("until", upper, left=left, right=right)) is not None:
            y, perr = proj
            err += perr
        else:
            y, sinfo = bounded_until(self.Q, left, right, upper - lower, eps=self.eps)
            err += float(sinfo["truncated_mass"])
            info.update(time_bound=upper, uniformisation_rate=sinfo["uniformisation_rate"],
                        fox_glynn=sinfo["fox_glynn"], matvecs=sinfo["matvecs"])
            if "steady_state_detection" in sinfo:
                info["steady_state_detection"] = sinfo["steady_state_detection"]
        if lower:
            y, tinfo = transient_values(self.Q, y * left, lower, absorbing=~left, eps=self.eps)
            err += float(tinfo["error_bound"])
            info.update(lower_time_bound=lower, matvecs=int(info.get("matvecs", 0)) + int(tinfo["matvecs"]))
            info.setdefault("uniformisation_rate", tinfo["uniformisation_rate"])
        self.error_estimate = err
        return np.clip(y, 0.0, 1.0)  # (NaN, where a projection computed no value, stays NaN)

    def projected(self, kind: str, t: float, *, left=None, right=None, reward=None):
        """A time-bounded CTMC query read at the initial states only (``self.sources``), by uniformisation on
        the states they reach within ``m`` jumps (``m`` = 64, 256, 1024, ... while those are at most
        :data:`~exactq.solvers.dtmc.NEAR_SHARE` of the chain), everything else lumped into one absorbing
        sink of value 0: the finite state projection of Munsky & Khammash (J. Chem. Phys. 124, 044104,
        2006, Theorem 2.2). The value at a source differs from the chain's by at most the probability of
        reaching the sink by ``t`` (times ``t max|r|`` for ``C<=t``, ``max|r|`` for ``I=t``), computed on the
        same small chain and added to the error estimate; accepted when that is at most ``eps``
        (relative to the value's scale). The sink's rates are the rates that leave the projection, so the
        uniformisation rate is the projection's own: a cell of 100,001 states whose high-rate states are
        never reached by ``t``. Returns ``(per_state, error)`` (NaN off the projection) or None.
        """
        from .dtmc import _reachable_within

        if self.discrete or self.sources is None:
            return None
        Q = sp.csr_array(self.Q)
        n = self.n
        diag = Q.diagonal()
        full = float(-diag.min(initial=0.0)) * t * Q.nnz  # the whole chain's uniformisation: ~ q t products
        if full < PROJECTION_MIN_WORK:
            return None  # cheap anyway: a failed projection would cost more than it can save
        scale = 1.0
        if reward is not None:
            r = np.asarray(reward, dtype=float)
            top = float(np.max(np.abs(r), initial=0.0))
            scale = top * (t if kind == "cumulative" else 1.0)
        m = PROJECTION_FIRST_DEPTH
        while m < n:
            near = _reachable_within(Q, self.sources, m)
            if near is None:
                return None
            idx = np.flatnonzero(near)
            k = idx.size
            sub = Q[idx][:, idx].tocsr()
            if 2.0 * float(-diag[idx].min(initial=0.0)) * t * sub.nnz > PROJECTION_SHARE * full:
                return None  # the escape check and the solve on it would cost too much of the whole
            out = np.clip(-np.asarray(sub.sum(axis=1)).ravel(), 0.0, None)  # the rates that leave: to the sink
            QJ = sp.block_array([[sub, sp.csr_array(out[:, None])], [None, sp.csr_array((1, 1))]], format="csr")
            sink = np.r_[np.zeros(k, bool), True]
            # the escape probability's own truncation counts times the scale too: its Poisson tail is cut finer
            tail = max(self.eps / max(1.0, scale), 1e-30)
            if kind == "until":
                lj, rj = np.r_[left[idx], False], np.r_[right[idx], False]
                escape, einfo = bounded_until(QJ, lj & ~rj, sink, t, eps=tail)
            else:
                escape, einfo = bounded_until(QJ, ~sink, sink, t, eps=tail)
            src = self.sources[idx]
            lost = float(np.max(escape[:k][src], initial=0.0)) * scale
            if lost <= self.eps * max(1.0, scale):  # else surely too much: a deeper projection
                if kind == "until":
                    yj, info = bounded_until(QJ, lj, rj, t, eps=self.eps)
                    error = float(info["truncated_mass"])
                elif kind == "cumulative":
                    yj, info = cumulative_reward(QJ, np.r_[r[idx], 0.0], t, eps=self.eps)
                    error = float(info["error_bound"])
                else:
                    yj, info = transient_values(QJ, np.r_[r[idx], 0.0], t, eps=self.eps)
                    error = float(info["error_bound"])
                if lost > self.eps * max(1.0, float(np.max(np.abs(yj[:k][src]), initial=0.0))):
                    m *= 4  # within eps of the value's own scale, as the uniformisation's truncation
                    continue
                y = np.full(n, np.nan)
                y[idx] = yj[:k]
                self.info.update(time_bound=t, uniformisation_rate=info.get("uniformisation_rate"),
                                 matvecs=int(info.get("matvecs", 0)) + int(einfo.get("matvecs", 0)),
                                 projection={"states": int(k), "depth": int(m), "escape_bound": lost,
                                             "rule": "finite state projection from the initial states "
                                                     "(Munsky & Khammash 2006); the others' values are not "
                                                     "computed"})
                return y, error + lost + float(einfo.get("truncated_mass", 0.0)) * scale
            m *= 4
        return None

    def forward(self, kind: str, t: float, reward) -> tuple[np.ndarray, float] | None:
        """A time-bounded CTMC reward (``I=t``, ``C<=t``) read at the single initial state, from the
        distribution at ``t`` and its integral (:func:`~exactq.solvers.transient.transient_pair`), kept in
        the shared cache per time bound: every further ``I=t`` or ``C<=t`` reward at that ``t``, of any
        reward structure, is then a dot product. Taken when the cache has the pair, or when the backward
        pass would iterate the whole chain anyway (every state can reach a state of nonzero reward) and
        needs no more than :data:`~exactq.solvers.transient.STEADY_STATE_MIN_STEPS` products (beyond, its
        steady-state detection may stop it early). On chains of :data:`FORWARD_RECORD_MIN_STATES` states
        or more the pass also projects its iterates onto the reward asked for and the other reward
        structures' vectors (:meth:`_forward_vectors`), so that an ``I=s`` or ``C<=s`` reward at another
        time whose window the pass covers is read with no product (tandem c=127, ``C<=1`` then ``I=0.5``:
        299 -> 133 ms, interleaved, median of 7). Returns ``(per_state, error)`` (NaN off the initial
        state) or None.
        """
        if self.discrete or self.sources is None or np.count_nonzero(self.sources) != 1:
            return None
        init = getattr(self.chain, "initial", None)
        if np.ndim(init) != 0:
            return None
        init = int(init)
        key = ("forward pair", float(t), float(self.eps))
        pair = self.cache.get(key)
        r = np.asarray(reward, dtype=float)
        rkey = ("forward projections", init, float(self.eps))
        if pair is None:
            recorded = self.cache.get(rkey)
            read = self._read_projections(recorded, t, r) if recorded is not None else None
            if read is not None:
                at_r, up_to_r, info = read
                return self._forward_answer(kind, t, r, init, at_r, up_to_r, info, shared=True,
                                            passed=recorded["matvecs"], rule=_READ_RULE)
            from .reachability import _backward_reachable

            Q = sp.csr_array(self.Q)
            rate = UNIFORMISATION_FACTOR * float(-Q.diagonal().min(initial=0.0))
            if rate * t > STEADY_STATE_MIN_STEPS or not _backward_reachable(Q, r != 0, np.ones(self.n, bool)).all():
                return None
            p0 = np.zeros(self.n)
            p0[init] = 1.0
            if self.n < FORWARD_RECORD_MIN_STATES:
                pair = self.cache[key] = transient_pair(Q, p0, t, eps=self.eps)
            else:
                vectors = self._forward_vectors(r)
                pair = self.cache[key] = transient_pair(Q, p0, t, eps=self.eps, record=np.column_stack(vectors))
                S = pair[2].pop("projections")
                if recorded is None or len(S) > len(recorded["projections"]):
                    self.cache[rkey] = {"vectors": vectors, "projections": S, "matvecs": pair[2]["matvecs"],
                                        "rate": pair[2]["uniformisation_rate"]}
            shared = False
        else:
            shared = True
        at, up_to, info = pair
        return self._forward_answer(kind, t, r, init, float(np.dot(at, r)), float(np.dot(up_to, r)), info,
                                    shared=shared, passed=info["matvecs"], rule=_PAIR_RULE)

    def _forward_answer(self, kind: str, t: float, r: np.ndarray, init: int, at_r: float, up_to_r: float,
                        info: dict, *, shared: bool, passed: int, rule: str) -> tuple[np.ndarray, float]:
        """``(per_state, error)`` of :meth:`forward` from ``p_t . r`` and ``c_t . r``: the value at the initial state
        (NaN elsewhere) and :func:`transient_pair`'s bound; ``shared``: no product of this query's own, ``passed``
        the forward pass's products."""
        if kind == "cumulative":
            value, error = up_to_r, float(info["cumulative_bound"]) * float(np.max(np.abs(r), initial=0.0))
        else:  # p_t . r within lost (b - a)
            value = at_r
            error = float(info["truncated_mass"]) * (float(r.max(initial=0.0)) - float(r.min(initial=0.0)))
        out = np.full(self.n, np.nan)
        out[init] = value
        self.info.update(time_bound=t, uniformisation_rate=info["uniformisation_rate"],
                         matvecs=0 if shared else passed, forward={"matvecs": passed, "shared": shared, "rule": rule})
        return out, error

    def _read_projections(self, recorded: dict, t: float, r: np.ndarray):
        """``(p_t . r, c_t . r, info)`` read from an earlier forward pass's projections (None when the pass did not
        project onto ``r`` or its window ends before ``t``'s)."""
        j = next((j for j, v in enumerate(recorded["vectors"]) if np.array_equal(v, r)), None)
        if j is None:
            return None
        read = pair_from_projections(recorded["projections"][:, j:j + 1], recorded["rate"], t, eps=self.eps)
        if read is None:
            return None
        at, up_to, info = read
        return float(at[0]), float(up_to[0]), info

    def _forward_vectors(self, r: np.ndarray) -> list:
        """``r`` and every reward structure's state and rate vectors (distinct): what a forward pass projects its
        iterates onto, so that a later ``I=s`` or ``C<=s`` reward of any structure at a time whose window the pass
        covers is read with no product (:func:`~exactq.solvers.transient.pair_from_projections`)."""
        vectors = [r]
        for rs in self._reward_table().values():
            for v in (rs.state, rs.rate()):
                v = np.asarray(v, dtype=float)
                if v.shape == r.shape and not any(np.array_equal(v, w) for w in vectors):
                    vectors.append(v)
        # each vector costs n multiply-adds an iterate, against the product's nnz(Q): at most half a product's
        # work in all (tandem c=127, nnz/n = 4.5, two vectors: C<=1 132 ms with them, 154 ms without, interleaved;
        # four vectors cost 15-25% more)
        room = max(1, int(FORWARD_VECTOR_SHARE * sp.csr_array(self.Q).nnz / max(self.n, 1)))
        return vectors[:room]

    # -- rewards -----------------------------------------------------------------------
    def _reward_table(self) -> dict:
        """The reward structures by name: those given, else the chain's state rewards."""
        if self.rewards is not None:
            return self.rewards
        return {k: RewardStructure(k, np.asarray(v, dtype=float)) for k, v in self.chain.rewards.items()}

    def structure(self, name) -> RewardStructure:
        table = self._reward_table()
        if not table:
            raise ModelError("R=? needs a reward structure; the model has none")
        names = list(table)
        if name is None:
            return table[names[0]]
        if isinstance(name, int):
            if not 1 <= name <= len(names):
                raise ModelError(f"reward structure {name} does not exist; the model has {len(names)}")
            return table[names[name - 1]]
        if name not in table:
            raise ModelError(f'unknown reward structure "{name}"; valid: '
                             + ", ".join(f'"{k}"' for k in names))
        return table[name]

    def reward(self, q: RewardQuery, answer: QueryAnswer):
        rs = self.structure(q.reward)
        self.info["reward"] = rs.name
        chain, ns, n = self.chain, self.ns, self.n
        if q.kind_of == "steady":
            return self.long_run(np.asarray(rs.rate(), dtype=float), f"reward {rs.name}", answer)
        if q.kind_of == "total":
            return self.total_reward(np.asarray(rs.rate(), dtype=float)), None
        if q.kind_of == "reachability":
            target = _condition(q.target, chain, ns, n, "the target of R=? [ F b ]", self)
            per_state, sinfo = expected_reward(self.Q, target, np.asarray(rs.rate(), dtype=float),
                                               solver=self.linear_solver, graph=self.predecessors())
            self.residual = float(sinfo["residual"])
            self.error_estimate = sinfo.get("error_estimate")
            self.info.update(_small(sinfo))
            self.method = "query/expected_reward"
            self.undecided = ~target
            return per_state, None
        t = self._time(q.time, "the time bound")
        solver = self.solver if self.solver not in ("level-aggregation",) else "auto"
        if self.discrete:
            self.method = "query/steps"
            self.info["steps"] = t
            if q.kind_of == "cumulative":
                out, tinfo = step_cumulative(self.P, rs.rate(), t, eps=self.eps, solver=solver, sources=self.sources)
            else:
                out, tinfo = step_values(self.P, rs.state, t, eps=self.eps, solver=solver, sources=self.sources)
            if "states_iterated" in tinfo:
                self.info["states_iterated"] = tinfo["states_iterated"]
                self.info["per_state"] = (f"only the {tinfo['states_iterated']} states the initial states reach "
                                          f"within {t} steps were iterated; the others' values are not computed")
            if "steady_state_detection" in tinfo:
                self.info["steady_state_detection"] = tinfo["steady_state_detection"]
                self.error_estimate = float(tinfo["error_bound"])
            return out, None
        self.method = "query/uniformisation"
        kind = "cumulative" if q.kind_of == "cumulative" else "instantaneous"
        vector = rs.rate() if kind == "cumulative" else rs.state
        proj = self.projected(kind, t, reward=vector)
        if proj is None:
            proj = self.forward(kind, t, vector)
        if proj is not None:
            out, self.error_estimate = proj
            return out, None
        if q.kind_of == "cumulative":
            out, tinfo = cumulative_reward(self.Q, rs.rate(), t, eps=self.eps, solver=solver)
        else:
            out, tinfo = transient_values(self.Q, rs.state, t, eps=self.eps, solver=solver)
        self.error_estimate = float(tinfo["error_bound"])
        self.info.update(time_bound=t, matvecs=tinfo["matvecs"],
                         uniformisation_rate=tinfo.get("uniformisation_rate"))
        if "steady_state_detection" in tinfo:
            self.info["steady_state_detection"] = tinfo["steady_state_detection"]
        return out, None


def _plain_value(v):
    v = v.item() if isinstance(v, np.generic) else v
    return v


def _apply_filter(op: str, per_state: np.ndarray, mask: np.ndarray, ev) -> tuple:
    """``(value, states)``: the filter's one value (None for argmin/argmax/print/printall), and for
    argmin/argmax the set of states where the extreme is reached."""
    values = per_state[mask]
    if values.size == 0:
        raise ModelError(f"the filter's states are empty (no state satisfies them); filter {op} needs at least one")
    kind = values.dtype.kind
    if op in ("count", "forall", "exists"):
        if kind != "b":
            raise ModelError(f"filter {op} needs a true/false property")
        if op == "count":
            return int(np.count_nonzero(values)), None
        return (bool(values.all()) if op == "forall" else bool(values.any())), None
    if op in ("print", "printall"):
        return None, None
    if kind == "b" and op not in ("first", "state"):
        raise ModelError(f"filter {op} needs a numerical property")
    if op in ("argmin", "argmax"):
        target = values.min() if op == "argmin" else values.max()
        scale = max(abs(float(target)), 1.0) if np.isfinite(target) else 1.0
        with np.errstate(invalid="ignore"):
            near = (per_state == target) | (np.abs(per_state - target) <= 1e-12 * scale)
        return None, mask & near
    if op == "min":
        return _plain_value(values.min()), None
    if op == "max":
        return _plain_value(values.max()), None
    if op == "sum":
        return _plain_value(values.sum()), None
    if op == "avg":
        return float(values.mean()), None
    if op == "first":
        return _plain_value(values[0]), None
    if op == "range":
        return [_plain_value(values.min()), _plain_value(values.max())], None
    if op == "state":
        if values.size != 1:
            raise ModelError(f"filter(state, ...) needs exactly one state; {values.size} satisfy the filter")
        return _plain_value(values[0]), None
    raise ModelError(f"unknown filter operator {op!r}")  # pragma: no cover (Filter validates)


def _default_value(chain, per_state: np.ndarray, n: int, info: dict) -> Any:
    """PRISM's default filter: the single initial state, or the range over several (``forall`` if true/false)."""
    several = _several_initial(chain, n)
    per_state = np.asarray(per_state)
    if per_state.dtype.kind == "b":
        if several is not None:
            vals = per_state[several]
            info["filter"] = (f"forall over the {vals.size} initial states (PRISM's default for a true/false property "
                              "with several initial states)")
            return bool(vals.all())
        init = _initial(chain, n)
        if isinstance(init, int):
            return bool(per_state[init])
        return bool(per_state[init > 0].all())
    if several is not None:
        vals = per_state[several]
        k = int(vals.size)
        info["filter"] = f"range over the {k} initial states (PRISM's default with several initial states)"
        lo, hi = _plain_value(vals.min()), _plain_value(vals.max())
        return lo if lo == hi else [lo, hi]
    init = _initial(chain, n)
    if per_state.dtype.kind in "iu" and isinstance(init, int):
        return int(per_state[init])
    return _at_initial(per_state.astype(float), init)


def _boundary_probability(chain, ev: _Evaluator, boundary, q, eps) -> float:
    """P(undecided U boundary-and-undecided) from the initial state (time-bounded like the query)."""
    undecided = ev.undecided
    hit = undecided & boundary
    if not hit.any():
        return 0.0
    bound = getattr(q, "time_bound", None)
    if bound is not None and not ev.discrete and not getattr(q, "lower_bound", 0.0):
        probs, _ = bounded_until(ev.Q, undecided, hit, bound, eps=eps)
    else:
        probs, _ = until_probability(ev.Q, undecided, hit, graph=ev.predecessors())
    return _at_initial(probs, _initial(chain, chain.n_states))


def _initial(chain: Any, n: int) -> int | np.ndarray:
    init = getattr(chain, "initial", None)
    if init is None:
        raise ModelError("P=? and T=? need the chain's initial state; chain.initial is None")
    arr = np.asarray(init)
    if arr.ndim == 0:
        if arr.dtype.kind not in "iu" or not (0 <= int(arr) < n):
            raise ModelError(f"chain.initial must be a state index in [0, {n}); got {init!r}")
        return int(arr)
    arr = arr.astype(float)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(math.fsum(arr) - 1.0) > 1e-9:
        raise ModelError(f"chain.initial must be a state index or a distribution of shape ({n},)")
    return arr


#: a forward pass projects its iterates onto at most this share of nnz(Q) / n vectors (the reward asked for first,
#: then every structure's; :meth:`_Evaluator._forward_vectors`): their dot products cost at most that share of the
#: products
FORWARD_VECTOR_SHARE = 0.5
#: ... and only on chains of at least this many states: on smaller ones the projections' calls, a few microseconds
#: an iterate, are a large share of a product (MAPK cascade N=2, 2,172 states, C<=5: 8,290 iterates, 126 ms without
#: them, 148 ms with one vector), and a second pass is cheap anyway
FORWARD_RECORD_MIN_STATES = 10_000
#: what :meth:`_Evaluator.forward` says of its answer (``info["forward"]["rule"]``): from a pass at this t, or read
#: from an earlier pass's projections
_PAIR_RULE = ("the distribution at t and its integral from the initial state, one forward pass kept for every I=t "
              "and C<=t reward at this t; the other states' values are not computed")
_READ_RULE = ("read from the projections of an earlier forward pass from the initial state (its iterates dotted "
              "with every reward structure's vectors), with the Fox-Glynn weights of this t; the other states' "
              "values are not computed")
#: the first depth (jumps from the initial states) of :meth:`_Evaluator.projected`, multiplied by 4 each try
PROJECTION_FIRST_DEPTH = 64
#: a projection is tried only when the whole chain's uniformisation would take at least this much work (rate x
#: time x transitions: 2e8 is about 0.2 s here), and given up when the two solves on it would take more than
#: this share of that: on cheap or well-mixed chains the tries cost 5-10 ms a property (peer2peer, tandem)
PROJECTION_MIN_WORK = 2e8
PROJECTION_SHARE = 0.25


def _several_initial(chain: Any, n: int) -> np.ndarray | None:
    """The ``init`` label when it marks several initial states of a chain with one initial index (PRISM's
    default filter then ranges over them), else None."""
    init_label = getattr(chain, "labels", {}).get("init")
    if init_label is not None and np.asarray(init_label).shape == (n,) and np.count_nonzero(init_label) > 1 \
            and np.ndim(getattr(chain, "initial", 0)) == 0:
        return np.asarray(init_label, dtype=bool)
    return None


def _initial_support(chain: Any, n: int) -> np.ndarray | None:
    """The states a top-level query's value is read at (what :func:`_default_value` reads), or None."""
    several = _several_initial(chain, n)
    if several is not None:
        return several
    try:
        init = _initial(chain, n)
    except ModelError:
        return None
    mask = np.zeros(n, dtype=bool)
    if isinstance(init, int):
        mask[init] = True
    else:
        mask[init > 0] = True
    return mask


def _at_initial(per_state: np.ndarray, init: int | np.ndarray) -> float:
    if isinstance(init, int):
        return float(per_state[init])
    used = init > 0
    return float(np.dot(init[used], per_state[used]))
