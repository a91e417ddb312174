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
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp  # noqa: F401  (the examples use it)

from exactq.ctmc import DTMC, StationaryDistribution
from exactq.errors import ModelError, ReducibleError
from exactq.query import (
    ExpectedTime, Filter, Globally, Next, Query, RewardQuery, RewardStructure, SteadyExpectation, SteadyProbability,
    Until, parse_query,
)
from exactq.result import Result

from .dtmc import step_bounded_until, step_cumulative, step_values
from .reachability import absorption_values, expected_reward, expected_time, until_probability
from .stationary import solve_stationary, stationary
from .structure import communicating_classes
from .transient import bounded_until, cumulative_reward, transient_values

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
        The value of the query from every state (what filters select from).
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


def _state_values(expr, chain, ns: dict, n: int) -> np.ndarray:
    """Evaluate a state formula: on the chain itself when it knows how (PRISM expressions), else on the namespace."""
    on_chain = getattr(expr, "on_chain", None)
    v = on_chain(chain) if callable(on_chain) else expr(ns, n)
    return np.broadcast_to(np.asarray(v), (n,))


def _condition(expr, chain, ns: dict, n: int, role: str) -> np.ndarray:
    v = _state_values(expr, chain, ns, n)
    if v.dtype == bool:
        return np.array(v)
    if v.dtype.kind in "iu" and np.all((v == 0) | (v == 1)):
        return v.astype(bool)
    raise ModelError(f"{role} must be a condition (true or false in each state); {expr.text!r} is numeric")


def _numeric(expr, chain, ns: dict, n: int) -> np.ndarray:
    return np.asarray(_state_values(expr, chain, ns, n), dtype=float)


def check_chain(chain: Any, query: str | Query, *, eps: float = 1e-12, solver: str = "auto",
                strict: bool = False, rewards: dict | None = None, cache: dict | None = None) -> QueryAnswer:
    """Evaluate a query on a CTMC or a DTMC.

    Parameters
    ----------
    chain : CTMC or DTMC
        The chain (its ``namespace()`` gives the variables, rewards, labels and
        constants of native expressions; ``initial`` the start of path queries).
    query : str or Query
        The query text (the native language of :func:`~exactq.query.parse_query`) or
        a parsed query, e.g. one of PRISM's properties compiled by
        :func:`exactq.prism.compile_property`.
    eps : float
        Truncation bound of the Fox–Glynn weights for time-bounded queries.
    solver : str
        The stationary solver for steady-state queries.
    strict : bool
        Raise on non-convergence of the stationary solver.
    rewards : dict of str -> RewardStructure, optional
        The reward structures of ``R=?`` queries (default: the chain's ``rewards``
        as state rewards).
    cache : dict, optional
        Shared by the queries of one chain: the stationary solution is computed once
        and reused by every steady-state query that passes the same dict.

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
    q = parse_query(query)
    text = str(q)
    filt = None
    if isinstance(q, Filter):
        filt, q = q, q.query
        if isinstance(q, Filter):
            raise ModelError("nested filters are not supported")
    discrete = isinstance(chain, DTMC)
    n = int(chain.n_states)
    ns = chain.namespace()
    info: dict = {"query": text, "kind": q.kind}
    if discrete:
        info["time"] = "steps"
    answer = QueryAnswer(result=None)  # type: ignore[arg-type]
    truncated = getattr(chain, "truncation", None) is not None
    boundary = chain.boundary_mask() if truncated else None
    ev = _Evaluator(chain, discrete, eps, solver, strict, info, ns, n, rewards, cache)
    per_state, scalar = ev.evaluate(q, answer)
    if filt is not None:
        mask = np.ones(n, dtype=bool) if filt.states is None else _condition(filt.states, chain, ns, n,
                                                                               "the states of the filter")
        value = _apply_filter(filt.op, per_state, mask, chain)
        info["filter"] = f"{filt.op} over {int(mask.sum())} state{'s' if mask.sum() != 1 else ''}"
    elif scalar is not None:
        value = scalar
    else:
        value = _default_value(chain, per_state, n, info)
    if isinstance(q, ExpectedTime):
        info["reached_surely"] = bool(np.all(np.isfinite(np.atleast_1d(value))))
    if isinstance(q, RewardQuery) and q.kind_of == "reachability" and not np.all(np.isfinite(np.atleast_1d(value))):
        info["infinite"] = ("the target is reached with probability < 1, so the expected reward is infinite "
                            "(PRISM's convention)")
    info.pop("seconds", None)
    if boundary is not None and boundary.any() and ev.undecided is not None:
        answer.boundary_probability = _boundary_probability(chain, ev, boundary, q, eps)
    answer.per_state = per_state
    answer.result = Result(value=value, method=ev.method, residual=ev.residual, error_estimate=ev.error_estimate,
                           n_states=n, seconds=time.perf_counter() - t0, measure=text, info=info)
    return answer


class _Evaluator:
    """Per-state values of one (unfiltered) query."""

    def __init__(self, chain, discrete, eps, solver, strict, info, ns, n, rewards, cache=None):
        self.chain, self.discrete, self.eps, self.solver, self.strict = chain, discrete, eps, solver, strict
        self.cache = {} if cache is None else cache
        self.info, self.ns, self.n = info, ns, n
        self.rewards = rewards
        self.Q = chain.generator() if discrete else chain.Q
        self.P = chain.P if discrete else None
        self.method = ""
        self.residual = None
        self.error_estimate = None
        self.undecided = None  # states where a path query is not yet decided (truncation bound)
        from .linear import LINEAR_SOLVERS  # the reachability systems take the stationary solver's name if they know it

        self.linear_solver = solver if solver in LINEAR_SOLVERS else "auto"

    # -- dispatch --------------------------------------------------------------------
    def evaluate(self, q, answer: QueryAnswer):
        chain, ns, n = self.chain, self.ns, self.n
        if isinstance(q, (SteadyProbability, SteadyExpectation)):
            if isinstance(q, SteadyProbability):
                values = _condition(q.expr, chain, ns, n, "the argument of S=?").astype(float)
            else:
                values = _numeric(q.expr, chain, ns, n)
            return self.long_run(values, q.expr.text, answer)
        if isinstance(q, Until):
            left = _condition(q.left, chain, ns, n, "the left side of U")
            right = _condition(q.right, chain, ns, n, "the target of the path formula")
            self.undecided = left & ~right
            return self.until(left, right, q.lower_bound, q.time_bound), None
        if isinstance(q, Globally):
            holds = _condition(q.expr, chain, ns, n, "the argument of G")
            self.undecided = holds.copy()
            p = self.until(np.ones(n, dtype=bool), ~holds, q.lower_bound, q.time_bound)
            return 1.0 - p, None
        if isinstance(q, Next):
            target = _condition(q.expr, chain, ns, n, "the argument of X").astype(float)
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
            target = _condition(q.target, chain, ns, n, "the target of T=?")
            per_state, sinfo = expected_time(self.Q, target, solver=self.linear_solver)
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
        hit = self.cache.get(("classes", self.solver))
        cls = hit[0] if hit is not None else communicating_classes(sp.csr_matrix(self.Q))
        if hit is None:
            self.cache[("classes", self.solver)] = (cls, {})
        if len(cls.closed) > 1:  # the bottom SCCs one by one, weighted by the probability of reaching each
            return self.long_run_classes(values, what), None
        try:  # one closed class: solve_stationary solves it alone (zero on the transient states)
            st = self.cache.get(key)
            if st is None:
                st = solve_stationary(self.chain, solver=self.solver, strict=self.strict)
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
        hit = self.cache.get(("classes", self.solver))
        cls = hit[0] if hit is not None else communicating_classes(Q)
        solved = hit[1] if hit is not None else {}
        if hit is None:
            self.cache[("classes", self.solver)] = (cls, solved)
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
        per_state, ainfo = absorption_values(Q, recurrent, v_rec)
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
                y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver)
                self.residual = float(sinfo["residual"])
                self.error_estimate = sinfo.get("error_estimate")
                info.update(_small(sinfo))
            else:
                y, sinfo = step_bounded_until(self.P, left, right, upper - lower)
                info["steps"] = upper
            if lower:
                y, _ = step_values(self.P, y, lower, keep=left)
                info["lower_steps"] = lower
            return y
        if upper is None and not lower:
            y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver)
            self.residual = float(sinfo["residual"])
            self.error_estimate = sinfo.get("error_estimate")
            info.update(_small(sinfo))
            self.method = "query/reachability"
            return y
        self.method = "query/uniformisation"
        err = 0.0
        if upper is None:
            y, sinfo = until_probability(self.Q, left, right, solver=self.linear_solver)
            self.residual = float(sinfo["residual"])
            err += float(sinfo.get("error_estimate") or 0.0)
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
        return np.clip(y, 0.0, 1.0)

    # -- rewards -----------------------------------------------------------------------
    def structure(self, name) -> RewardStructure:
        table = self.rewards
        if table is None:
            table = {k: RewardStructure(k, np.asarray(v, dtype=float)) for k, v in self.chain.rewards.items()}
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
        if q.kind_of == "reachability":
            target = _condition(q.target, chain, ns, n, "the target of R=? [ F b ]")
            per_state, sinfo = expected_reward(self.Q, target, np.asarray(rs.rate(), dtype=float),
                                               solver=self.linear_solver)
            self.residual = float(sinfo["residual"])
            self.error_estimate = sinfo.get("error_estimate")
            self.info.update(_small(sinfo))
            self.method = "query/expected_reward"
            self.undecided = ~target
            return per_state, None
        t = self._time(q.time, "the time bound")
        if self.discrete:
            self.method = "query/steps"
            self.info["steps"] = t
            if q.kind_of == "cumulative":
                return step_cumulative(self.P, rs.rate(), t)[0], None
            return step_values(self.P, rs.state, t)[0], None
        self.method = "query/uniformisation"
        if q.kind_of == "cumulative":
            out, tinfo = cumulative_reward(self.Q, rs.rate(), t, eps=self.eps)
        else:
            out, tinfo = transient_values(self.Q, rs.state, t, eps=self.eps)
        self.error_estimate = float(tinfo["error_bound"])
        self.info.update(time_bound=t, matvecs=tinfo["matvecs"],
                         uniformisation_rate=tinfo.get("uniformisation_rate"))
        return out, None


def _apply_filter(op: str, per_state: np.ndarray, mask: np.ndarray, chain) -> Any:
    values = per_state[mask]
    if values.size == 0:
        raise ModelError(f"the filter's states are empty (no state satisfies them); filter {op} needs at least one")
    if op == "min":
        return float(values.min())
    if op == "max":
        return float(values.max())
    if op == "sum":
        return float(values.sum())
    if op == "avg":
        return float(values.mean())
    if op == "first":
        return float(values[0])
    if op == "range":
        return [float(values.min()), float(values.max())]
    if op == "state":
        if values.size != 1:
            raise ModelError(f"filter(state, ...) needs exactly one state; {values.size} satisfy the filter")
        return float(values[0])
    raise ModelError(f"unknown filter operator {op!r}")  # pragma: no cover (Filter validates)


def _default_value(chain, per_state: np.ndarray, n: int, info: dict) -> Any:
    """PRISM's default filter: the single initial state, or the range over several."""
    init_label = getattr(chain, "labels", {}).get("init")
    if init_label is not None and np.asarray(init_label).shape == (n,) and np.count_nonzero(init_label) > 1 \
            and np.ndim(getattr(chain, "initial", 0)) == 0:
        vals = per_state[np.asarray(init_label, dtype=bool)]
        k = int(vals.size)
        info["filter"] = f"range over the {k} initial states (PRISM's default with several initial states)"
        lo, hi = float(vals.min()), float(vals.max())
        return lo if lo == hi else [lo, hi]
    init = _initial(chain, n)
    return _at_initial(per_state, init)


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
        probs, _ = until_probability(ev.Q, undecided, hit)
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


def _at_initial(per_state: np.ndarray, init: int | np.ndarray) -> float:
    if isinstance(init, int):
        return float(per_state[init])
    used = init > 0
    return float(np.dot(init[used], per_state[used]))
