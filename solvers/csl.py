"""Model checking of CSL-style queries on a chain (the queries of :mod:`exactq.query`).

:func:`check_chain` evaluates a parsed query on a :class:`~exactq.ctmc.CTMC` with the
library's solvers: ``S=?`` and ``E=?`` from the stationary distribution
(:func:`~exactq.solvers.stationary.solve_stationary`, the one stationary solver),
time-bounded until by uniformisation on the chain made absorbing in ``b`` and in
``¬a ∧ ¬b`` [BHHK03]_ (:func:`~exactq.solvers.transient.bounded_until`), unbounded
until and expected times by graph analysis and a sparse solve
(:mod:`exactq.solvers.reachability`).

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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp  # noqa: F401  (the examples use it)

from exactq.ctmc import StationaryDistribution
from exactq.errors import ModelError
from exactq.expr import Expression
from exactq.query import ExpectedTime, Query, SteadyExpectation, SteadyProbability, Until, parse_query
from exactq.result import Result

from .reachability import expected_time, until_probability
from .stationary import solve_stationary
from .transient import bounded_until

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
        The stationary law of a steady-state query.
    values : (n,) ndarray or None
        The per-state quantity a steady-state query averages.
    boundary_probability : float or None
        For a path query on a truncated chain: the probability of reaching a
        boundary state while the formula is undecided (a bound on the truncation
        error).
    """

    result: Result
    stationary: StationaryDistribution | None = None
    values: np.ndarray | None = None
    boundary_probability: float | None = None

    def value_under(self, law: StationaryDistribution) -> float:
        """The steady-state query's value under another distribution (e.g. conditioned)."""
        used = law.pi > 0
        return float(np.dot(law.pi[used], self.values[used]))


def _small(info: dict) -> dict:
    """Keep only scalar entries (no per-state vectors) of a solver's info."""
    return {k: v for k, v in info.items() if isinstance(v, (str, bool, int, float, np.generic, type(None)))}


def _condition(expr: Expression, ns: dict, n: int, role: str) -> np.ndarray:
    v = expr(ns, n)
    if v.dtype == bool:
        return v
    if v.dtype.kind in "iu" and np.all((v == 0) | (v == 1)):
        return v.astype(bool)
    raise ModelError(f"{role} must be a condition (true or false in each state); {expr.text!r} is numeric")


def check_chain(chain: Any, query: str | Query, *, eps: float = 1e-12, solver: str = "auto",
                strict: bool = False) -> QueryAnswer:
    """Evaluate a query on a CTMC.

    Parameters
    ----------
    chain : CTMC
        The chain (its ``namespace()`` gives the variables, rewards, labels and
        constants of the expressions; ``initial`` the start of ``P=?`` and ``T=?``).
    query : str or Query
        The query text or a parsed query (:func:`~exactq.query.parse_query`).
    eps : float
        Truncation bound of the Fox–Glynn weights for time-bounded queries.
    solver : str
        The stationary solver for ``S=?`` and ``E=?``.
    strict : bool
        Raise on non-convergence of the stationary solver.

    Returns
    -------
    QueryAnswer
        ``result.value`` (at the initial state for ``P=?``/``T=?``), ``result.method``
        (``query/stationary``, ``query/uniformisation``, ``query/reachability`` or
        ``query/expected_time``), ``result.residual``, ``result.error_estimate`` (the
        truncated Poisson mass for time-bounded queries, which bounds the error), and
        a small ``result.info`` (``query``, ``kind`` and the solver's scalar details;
        never per-state vectors).

    Raises
    ------
    QuerySyntaxError
        For a malformed query.
    ModelError
        For unknown names, a numeric expression where a condition is needed (or the
        reverse), or a bad initial state.

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
    Q = chain.Q
    n = int(chain.n_states)
    ns = chain.namespace()
    info: dict = {"query": text, "kind": q.kind}
    residual = error_estimate = None
    answer = QueryAnswer(result=None)  # type: ignore[arg-type]
    truncated = getattr(chain, "truncation", None) is not None
    boundary = chain.boundary_mask() if truncated else None

    if isinstance(q, (SteadyProbability, SteadyExpectation)):
        if isinstance(q, SteadyProbability):
            values = _condition(q.expr, ns, n, "the argument of S=?").astype(float)
        else:
            values = q.expr(ns, n).astype(float)
        st = solve_stationary(chain, solver=solver, strict=strict)
        bad = (st.pi > 0) & ~np.isfinite(values)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ModelError(f"{q.expr.text!r} is not finite in state {i}, which has positive probability")
        answer.stationary, answer.values = st, values
        value = answer.value_under(st)
        residual = float(st.residual)
        info["stationary"] = {"method": st.method, "residual": st.residual}
        method = "query/stationary"
    else:
        init = _initial(chain, n)
        if isinstance(q, Until):
            left = _condition(q.left, ns, n, "the left side of U")
            right = _condition(q.right, ns, n, "the target of the path formula")
            if q.time_bound is not None:
                per_state, sinfo = bounded_until(Q, left, right, q.time_bound, eps=eps)
                error_estimate = float(sinfo["truncated_mass"])
                info.update(time_bound=q.time_bound, uniformisation_rate=sinfo["uniformisation_rate"],
                            fox_glynn=sinfo["fox_glynn"], matvecs=sinfo["matvecs"])
                method = "query/uniformisation"
            else:
                per_state, sinfo = until_probability(Q, left, right)
                residual = float(sinfo["residual"])
                info.update(_small(sinfo))
                method = "query/reachability"
            undecided = left & ~right
        else:
            target = _condition(q.target, ns, n, "the target of T=?")
            per_state, sinfo = expected_time(Q, target)
            residual = float(sinfo["residual"])
            info.update(_small(sinfo))
            method = "query/expected_time"
            undecided = ~target
        value = _at_initial(per_state, init)
        if isinstance(q, ExpectedTime):
            info["reached_surely"] = bool(math.isfinite(value))
        info.pop("seconds", None)
        if boundary is not None and boundary.any():
            answer.boundary_probability = _boundary_probability(Q, undecided, boundary, init, q, eps)
    answer.result = Result(value=value, method=method, residual=residual, error_estimate=error_estimate,
                           n_states=n, seconds=time.perf_counter() - t0, measure=text, info=info)
    return answer


def _boundary_probability(Q, undecided, boundary, init, q, eps) -> float:
    """P(undecided U boundary-and-undecided) from the initial state (time-bounded like the query)."""
    hit = undecided & boundary
    if not hit.any():
        return 0.0
    bound = getattr(q, "time_bound", None)
    if bound is not None:
        probs, _ = bounded_until(Q, undecided, hit, bound, eps=eps)
    else:
        probs, _ = until_probability(Q, undecided, hit)
    return _at_initial(probs, init)


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
    if arr.shape != (n,) or np.any(arr < 0) or abs(math.fsum(arr) - 1.0) > 1e-9:
        raise ModelError(f"chain.initial must be a state index or a distribution of shape ({n},)")
    return arr


def _at_initial(per_state: np.ndarray, init: int | np.ndarray) -> float:
    if isinstance(init, int):
        return float(per_state[init])
    used = init > 0
    return float(np.dot(init[used], per_state[used]))

