"""Checking PRISM properties on an MDP: optima over schedulers, with bounds that enclose them.

:func:`check_mdp` answers the properties of a PRISM ``mdp`` file (compiled by
:mod:`exactq.prism.properties` against the model's declarations) on the
:class:`~exactq.representations.mdp.MDP` the builder made, with the sound solvers of
:mod:`exactq.solvers.mdp` and :mod:`exactq.solvers.mdp_average`:

===============================================  =============================================
``Pmax=? / Pmin=? [ a U b ]``, ``[ F b ]``         :func:`~exactq.solvers.mdp.reachability`:
                                                 prob0/prob1 by graph search, then interval
                                                 iteration or policy iteration verified into
                                                 bounds
``[ a U<=k b ]``, ``[ F<=k b ]``                   ``k`` backups (exact up to rounding)
``[ G b ]``, ``[ G<=k b ]``                        ``1 - Pmin / Pmax [ F !b ]``
``[ a W b ]``, ``[ a R b ]``                       ``1 -`` the opposite optimum of PRISM's until
``[ X b ]``                                      one backup
``Rmax=? / Rmin=? [ F b ]``                        :func:`~exactq.solvers.mdp.total_reward`
                                                 (infinite where ``b`` may be missed)
``[ C<=k ]``, ``[ I=k ]``                          ``k`` backups
``R{"r"}max=? [ S ]``, ``LRAmax=? [ φ ]``          :func:`~exactq.solvers.mdp_average.long_run_average`
``P>=p [ .. ]``, ``P<p [ .. ]``, ``R~r [ .. ]``    ``P>=p`` holds iff ``Pmin >= p``, ``P<=p`` iff
                                                 ``Pmax <= p`` (PRISM's semantics: over all
                                                 schedulers); ``Pmax>=p`` as written
filters, nested operators, arithmetic            as for Markov chains (:mod:`exactq.solvers.csl`)
===============================================  =============================================

Rewards are PRISM's: a step from state ``s`` by a choice of action ``a`` earns the
state reward of ``s`` plus the transition rewards ``[a] g : r`` whose guard holds in
``s``. Step bounds count steps. ``P=?`` without ``min`` or ``max``, ``S``, ``F>=k``,
``U[k1,k2]`` and ``C`` (the total reward) are refused in one line.

Every numeric answer carries ``lower`` and ``upper`` (from the solvers' per-state
bounds; they coincide for the step-bounded forms, which are exact up to rounding)
and names the solver in ``info["solver"]``.

References
----------
C. Baier and J.-P. Katoen, *Principles of Model Checking*, MIT Press, 2008, sec. 10.6
(PCTL on MDPs: thresholds quantify over all schedulers).
M. Kwiatkowska, G. Norman and D. Parker, "Stochastic model checking", SFM 2007, LNCS
4486 (PRISM's semantics of MDP properties and rewards).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from exactq.errors import AccuracyWarning, ModelError

__all__ = ["Optimum", "check_mdp"]


@dataclass(frozen=True)
class Optimum:
    """``Pmax=? [ .. ]``, ``R{"r"}min=? [ .. ]``, ``LRAmax=? [ φ ]``: ``query`` optimised over schedulers."""

    query: object
    sense: str
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "optimum"

    def __post_init__(self):
        if self.sense not in ("min", "max"):
            raise ModelError(f"an optimum's sense must be min or max; got {self.sense!r}")

    def __str__(self) -> str:
        return self.text or f"{self.sense} {self.query}"


def _unsupported(what: str) -> ModelError:
    return ModelError(f"{what} on an mdp is outside the supported fragment")


def _flip(sense: str) -> str:
    return "min" if sense == "max" else "max"


class _Values:
    """Per-state values of one numeric query, with per-state bounds (``lower``/``upper``) where known."""

    __slots__ = ("value", "lower", "upper")

    def __init__(self, value, lower=None, upper=None):
        self.value, self.lower, self.upper = value, lower, upper


class _MDPEvaluator:
    def __init__(self, mdp, strict: bool, state_text):
        self.mdp, self.strict, self.state_text = mdp, strict, state_text
        self.n = mdp.n_states
        self.memo: dict = {}
        self.parts: list = []
        self.method = ""
        self.info: dict = {}

    # -- state formulas -------------------------------------------------------------------
    def _state(self, expr) -> np.ndarray:
        v = expr.on_chain(self.mdp, self) if getattr(expr, "deps", None) else expr.on_chain(self.mdp)
        return np.broadcast_to(np.asarray(v), (self.n,))

    def _condition(self, expr, role: str) -> np.ndarray:
        v = self._state(expr)
        if v.dtype == bool:
            return np.array(v)
        if v.dtype.kind in "iu" and np.all((v == 0) | (v == 1)):
            return v.astype(bool)
        raise ModelError(f"{role} must be a condition (true or false in each state); {expr.text!r} is numeric")

    def per_state(self, q) -> np.ndarray:
        """A nested query's value in every state (what the formula containing it reads)."""
        hit = self.memo.get(id(q))
        if hit is not None:
            return hit[1]
        child = _MDPEvaluator(self.mdp, self.strict, self.state_text)
        child.memo, child.parts = self.memo, self.parts
        out = child.evaluate(q)
        per_state = np.asarray(out.value if isinstance(out, _Values) else out)
        if per_state.shape != (self.n,):
            per_state = np.broadcast_to(per_state, (self.n,)).copy()
        self.memo[id(q)] = (q, per_state)
        self.parts.append({"query": str(q), "method": child.method})
        return per_state

    # -- dispatch ---------------------------------------------------------------------------
    def evaluate(self, q):
        """``_Values`` for a numeric query, a bool array for a true/false one."""
        from exactq.query import Filter, Formula, Threshold

        if isinstance(q, Optimum):
            return self.optimum(q.query, q.sense, str(q))
        if isinstance(q, Threshold):
            return self.threshold(q)
        if isinstance(q, Filter):
            raise ModelError("a filter nested in a query is evaluated by check_mdp")  # pragma: no cover
        if isinstance(q, Formula):
            v = np.array(self._state(q.expr))
            self.method = "mdp/formula"
            return v if v.dtype == bool else _Values(v.astype(float) if v.dtype.kind == "f" else v)
        raise _unsupported(f"'{q}' without min or max")

    def optimum(self, q, sense: str, text: str) -> _Values:
        from exactq.query import Globally, Next, RewardQuery, SteadyExpectation, SteadyProbability, Until

        self.info["sense"] = sense
        if isinstance(q, Until):
            if q.lower_bound:
                raise _unsupported(f"the lower step bound of '{text}' (F>=k, U[k1,k2])")
            left = None if q.left is _true() else self._condition(q.left, "the left side of U")
            right = self._condition(q.right, "the target")
            if q.negated:  # W and R: 1 - the opposite optimum of PRISM's until
                v = self.reach(left, right, _flip(sense), q.time_bound)
                self._negate_exact()
                return _Values(1.0 - v.value, 1.0 - v.upper, 1.0 - v.lower)
            return self.reach(left, right, sense, q.time_bound)
        if isinstance(q, Globally):
            if q.lower_bound:
                raise _unsupported(f"the lower step bound of '{text}' (G>=k, G[k1,k2])")
            bad = ~self._condition(q.expr, "the argument of G")
            v = self.reach(None, bad, _flip(sense), q.time_bound)
            self._negate_exact()
            return _Values(1.0 - v.value, 1.0 - v.upper, 1.0 - v.lower)
        if isinstance(q, Next):
            x = self._condition(q.expr, "the argument of X").astype(float)
            v = self._backup(x, sense)
            self.method = "mdp/next"
            self.info["solver"] = "one backup (exact up to rounding)"
            return _Values(v, v.copy(), v.copy())
        if isinstance(q, RewardQuery):
            return self.reward(q, sense, text)
        if isinstance(q, (SteadyProbability, SteadyExpectation)):
            v = self._state(q.expr)
            r = np.asarray(v, dtype=float)
            if not np.all(np.isfinite(r)):
                raise ModelError(f"the argument of '{text}' is not finite in every state")
            return self.long_run(r, sense)
        raise _unsupported(f"'{text}'")

    # -- the solvers ------------------------------------------------------------------------
    def _backup(self, x: np.ndarray, sense: str) -> np.ndarray:
        q = self.mdp.P @ x
        opt = np.maximum if sense == "max" else np.minimum
        return opt.reduceat(q, self.mdp.row_groups[:-1])

    def _solution(self, sol, method: str) -> _Values:
        self.method = method
        self.info["solver"] = sol.method
        for key in ("prob0", "prob1", "maybe", "infinite", "end_components", "communicating", "policy_iteration",
                    "sweeps", "exact", "certificate", "certificate_width", "certificate_relative_width"):
            v = sol.info.get(key)
            if isinstance(v, (bool, int, float, str, np.integer, np.floating)):
                self.info[key] = v.item() if isinstance(v, np.generic) else v
        self.info["iterations"] = int(sol.nit)
        return _Values(np.asarray(sol.value, float), np.asarray(sol.lower, float), np.asarray(sol.upper, float))

    def reach(self, left, right, sense: str, steps) -> _Values:
        from exactq.representations.mdp import Reachability
        from exactq.solvers.mdp import reachability

        k = None if steps is None else int(steps)
        problem = Reachability(self.mdp, right, sense, constraint=left, steps=k)
        sol = reachability(problem, strict=self.strict)
        self.exact = [left, right, sense, False] if k is None else None
        return self._solution(sol, "mdp/reachability" if k is None else "mdp/steps")

    def _reward_vector(self, name) -> tuple[str, np.ndarray]:
        mdp = self.mdp
        names = list(dict.fromkeys(list(mdp.state_rewards) + list(mdp.choice_rewards)))
        if not names:
            raise ModelError("R=? needs a reward structure; the model has none")
        if name is None:
            key = names[0]
        elif isinstance(name, int):
            if not 1 <= name <= len(names):
                raise ModelError(f"reward structure {name} does not exist; the model has {len(names)}")
            key = names[name - 1]
        elif name not in names:
            raise ModelError(f'unknown reward structure "{name}"; valid: ' + ", ".join(f'"{k}"' for k in names))
        else:
            key = name
        self.info["reward"] = key
        return key, mdp.reward(key)

    def reward(self, q, sense: str, text: str) -> _Values:
        from exactq.representations.mdp import TotalReward
        from exactq.solvers.mdp import total_reward

        key, r = self._reward_vector(q.reward)
        if q.kind_of == "steady":
            return self.long_run(r, sense)
        if q.kind_of == "total":
            raise _unsupported(f"the total reward '{text}' (C without a bound)")
        if q.kind_of == "reachability":
            target = self._condition(q.target, "the target of R [ F b ]")
            if r.size and r.min() < 0:
                raise ModelError(f"{text}: rewards until a target must be >= 0 on an mdp; reward structure "
                                 f'"{key}" has {float(r.min()):g}')
            sol = total_reward(TotalReward(self.mdp, r, sense, target=target), strict=self.strict)
            out = self._solution(sol, "mdp/expected_reward")
            if not np.all(np.isfinite(out.value)):
                self.info["infinite_states"] = int(np.count_nonzero(~np.isfinite(out.value)))
            return out
        k = int(q.time)
        self.info["steps"] = k
        if q.kind_of == "cumulative":
            sol = total_reward(TotalReward(self.mdp, r, sense, steps=k), strict=self.strict)
            return self._solution(sol, "mdp/steps")
        # I=k: the state reward after k steps (PRISM: the state part of the structure)
        x = np.asarray(self.mdp.state_rewards.get(key, np.zeros(self.n)), dtype=float).copy()
        for _ in range(k):
            x = self._backup(x, sense)
        self.method = "mdp/steps"
        self.info["solver"] = "value-iteration (bounded)"
        return _Values(x, x.copy(), x.copy())

    def long_run(self, r: np.ndarray, sense: str) -> _Values:
        from exactq.representations.mdp import LongRunAverage
        from exactq.solvers.mdp_average import long_run_average

        sol = long_run_average(LongRunAverage(self.mdp, r, sense), strict=self.strict)
        out = self._solution(sol, "mdp/long_run_average")
        if r.size:  # an average of the per-step rewards lies between their extremes (an indicator's in [0, 1])
            lo, hi = float(r.min()), float(r.max())
            out.lower, out.upper = np.clip(out.lower, lo, hi), np.clip(out.upper, lo, hi)
            out.value = np.clip(0.5 * (out.lower + out.upper), out.lower, out.upper)
        return out

    # -- thresholds -------------------------------------------------------------------------
    def threshold(self, q) -> np.ndarray:
        inner = q.query
        b = float(q.bound)
        # PRISM: P>=p holds iff it holds under every scheduler, i.e. Pmin >= p; P<=p iff Pmax <= p
        if isinstance(inner, Optimum):
            sense, body = inner.sense, inner.query
        else:
            sense, body = ("min" if q.relation in (">", ">=") else "max"), inner
        self.exact = None
        v = self.optimum(body, sense, str(q))
        lo, hi, val = v.lower, v.upper, v.value
        cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[q.relation]
        with np.errstate(invalid="ignore"):
            result = cmp(val, b)
            sure_true = cmp(lo, b) & cmp(hi, b)
            sure_false = ~cmp(lo, b) & ~cmp(hi, b)
        undecided = ~(sure_true | sure_false)
        sets = self._exact_sets()
        if sets is not None and b in (0.0, 1.0):
            zero, one = sets
            if b == 1.0 and q.relation in (">=", "<"):
                result = one.copy() if q.relation == ">=" else ~one
                undecided[:] = False
            elif b == 0.0 and q.relation in (">", "<="):
                result = ~zero if q.relation == ">" else zero.copy()
                undecided[:] = False
            self.info["exact_0_1"] = "probability 0 and 1 decided by graph analysis"
        if undecided.any():
            i = int(np.flatnonzero(undecided)[0])
            warnings.warn(f"{q}: in {int(undecided.sum())} state{'s' if undecided.sum() > 1 else ''} the bounds "
                          f"[{float(lo[i])!r}, {float(hi[i])!r}] contain the bound {b:g} (e.g. {self.state_text(i)}); "
                          "the comparison there may be wrong", AccuracyWarning, stacklevel=4)
        self.info["threshold"] = f"{q.relation} {b:g}"
        return np.asarray(result, dtype=bool)

    def _negate_exact(self) -> None:
        if getattr(self, "exact", None) is not None:
            self.exact[3] = True

    def _exact_sets(self):
        """(probability 0, probability 1) of the last unbounded until, by graph analysis, or None."""
        spec = getattr(self, "exact", None)
        if spec is None:
            return None
        from exactq.solvers.mdp_graph import prob0a, prob0e, prob1a, prob1e

        left, right, sense, negated = spec
        P, g = self.mdp.P, self.mdp.row_groups
        c = np.ones(self.n, dtype=bool) if left is None else left
        if sense == "max":
            zero = prob0a(P, g, c, right)
            one = prob1e(P, g, c, right, zero_max=zero)
        else:
            zero = prob0e(P, g, c, right)
            one = prob1a(P, g, c, right, zero_min=zero)
        return (one, zero) if negated else (zero, one)


def _true():
    from exactq.query import TRUE

    return TRUE


def _scalar(values: np.ndarray, init) -> float:
    return float(values[init])


def check_mdp(mdp, query, *, strict: bool = False, state_text=None):
    """Check one compiled PRISM property on an MDP (see the module docstring).

    Parameters
    ----------
    mdp : MDP
        From the builder of a PRISM ``mdp`` file (its labels, state and choice rewards).
    query : compiled property
        :class:`Optimum`, :class:`~exactq.query.Threshold`, :class:`~exactq.query.Filter`
        or :class:`~exactq.query.Formula` (from :func:`exactq.prism.properties.compile_properties`).
    strict : bool
        Non-convergence of a solver is an error instead of a warning.
    state_text : callable, optional
        ``state_text(i)`` describes state ``i`` (for argmin/argmax/print filters).

    Returns
    -------
    exactq.solvers.csl.QueryAnswer
        ``result.value`` at the initial state (PRISM's default filter with several),
        ``result.lower``/``result.upper`` enclosing it, ``result.method``
        (``mdp/reachability``, ``mdp/steps``, ``mdp/expected_reward``,
        ``mdp/long_run_average``, ``mdp/next``, ``mdp/formula``) and ``info["solver"]``.

    Examples
    --------
    A gamble: from ``s=0`` a ``safe`` bet wins (``s=1``) with probability 0.5 and loses
    (``s=2``) otherwise; a ``risky`` one wins with 0.3 and else returns to ``s=0``.
    Trying the risky bet forever wins surely; the safe one at once gives the minimum.

    >>> from exactq.prism import load_prism
    >>> from exactq.api import check_properties
    >>> m = load_prism("gamble.nm", text='''mdp
    ... module g s : [0..2] init 0;
    ...   [safe]  s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
    ...   [risky] s=0 -> 0.3 : (s'=1) + 0.7 : (s'=0);
    ... endmodule
    ... label "win" = s=1;''')
    >>> hi, lo, th = check_properties(m, 'Pmax=? [ F "win" ]\\nPmin=? [ F "win" ]\\nP>=0.5 [ F "win" ]')
    >>> hi.value, lo.value, th.value
    (1.0, 0.5, True)
    """
    from exactq.query import Filter
    from exactq.result import Result
    from exactq.solvers.csl import QueryAnswer, _apply_filter, _default_value

    t0 = time.perf_counter()
    ev = _MDPEvaluator(mdp, strict, state_text or (lambda i: f"state {int(i)}"))
    inner = query.query if isinstance(query, Filter) else query
    info = ev.info
    info.update(query=str(query), kind=getattr(inner, "kind", "formula"), model="mdp", time="steps",
                n_choices=int(mdp.n_choices))
    out = ev.evaluate(inner)
    n = mdp.n_states
    lower = upper = None
    init = mdp.initial_states
    if isinstance(query, Filter):
        mask = np.ones(n, dtype=bool) if query.states is None else ev._condition(query.states, "the states of the "
                                                                                               "filter")
        per_state = out.value if isinstance(out, _Values) else out
        count = int(mask.sum())
        info["filter"] = f"{query.op} over {count} state{'s' if count != 1 else ''}"
        value, states = _apply_filter(query.op, np.asarray(per_state), mask, ev)
        if isinstance(out, _Values) and out.lower is not None and query.op in ("min", "max", "sum", "avg", "first",
                                                                                 "state"):
            lower, _ = _apply_filter(query.op, out.lower, mask, ev)
            upper, _ = _apply_filter(query.op, out.upper, mask, ev)
            lower, upper = float(lower), float(upper)
        if query.op in ("argmin", "argmax"):
            info["states"] = [ev.state_text(i) for i in np.flatnonzero(states)]
            value = _default_value(mdp, states, n, info)
        elif query.op in ("print", "printall"):
            shown = mask if query.op == "printall" else (mask & (np.asarray(per_state) != 0))
            info["printed"] = [[ev.state_text(i), float(per_state[i]) if np.asarray(per_state).dtype.kind == "f"
                                else per_state[i].item()] for i in np.flatnonzero(shown)]
            value = _default_value(mdp, np.asarray(per_state), n, info)
        per = np.asarray(per_state)
    else:
        per = out.value if isinstance(out, _Values) else out
        value = _default_value(mdp, np.asarray(per), n, info)
        if isinstance(out, _Values) and out.lower is not None:
            if init.size == 1:
                lower, upper = float(out.lower[init[0]]), float(out.upper[init[0]])
            else:
                lower, upper = float(out.lower[init].min()), float(out.upper[init].max())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    err = None
    if lower is not None and upper is not None and np.isfinite(lower) and np.isfinite(upper):
        err = 0.5 * (upper - lower)
    if isinstance(value, float) and not np.isfinite(value):
        info["infinite"] = ("under the optimising schedulers the target is missed with positive probability, so the "
                            "expected reward is infinite (PRISM's convention)")
    if ev.parts:
        info["parts"] = ev.parts
    result = Result(value=value, method=ev.method or "mdp/formula", lower=lower, upper=upper, error_estimate=err,
                    n_states=n, seconds=time.perf_counter() - t0, measure=str(query), info=info)
    answer = QueryAnswer(result=result)
    answer.per_state = per
    return answer
