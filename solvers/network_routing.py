"""The system optimum and the Wardrop equilibrium of a network, as convex programs.

The solver of a :class:`~exactq.representations.routing.NetworkRoutingProblem`
(links with latency functions l_e on a networkx graph, origin-destination demands,
and the objective: ``optimum`` minimises the total cost rate sum_e x_e l_e(x_e),
``equilibrium`` the Beckmann potential sum_e int_0^{x_e} l_e, whose minimiser is
the Wardrop equilibrium).

Both programs are posed over per-origin link flows with flow conservation (the
oriented incidence matrix), checked DCP and solved by Clarabel; the answer is
polished by Newton's method on the KKT system of the used (link, origin) pairs and
verified by the relative gap of the Frank-Wolfe literature,
(sum_e x_e l_e - sum_k d_k dist_k) / sum_k d_k dist_k with dist_k the cheapest path
cost of pair k under the link latencies (marginal costs for the optimum), computed
independently with Dijkstra.

References
----------
M. Beckmann, C. B. McGuire, C. B. Winsten, *Studies in the Economics of
Transportation*, Yale University Press, 1956 (the potential).
D. Braess, "Über ein Paradoxon aus der Verkehrsplanung", Unternehmensforschung 12
(1968) 258-268.
J. E. Cohen, F. P. Kelly, "A paradox of congestion in a queuing network", Journal of
Applied Probability 27 (1990) 730-734.
T. Roughgarden, *Selfish Routing and the Price of Anarchy*, MIT Press, 2005.
"""

from __future__ import annotations

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, UnstableError
from exactq.representations.routing import NetworkRoutingProblem, NetworkRoutingSolution

from .routing import check_accuracy, solve_program

__all__ = ["solve_network", "POLISH_MAX_UNKNOWNS"]

#: the dense Newton polish is skipped above this many unknowns (reported as ``polished: False``)
POLISH_MAX_UNKNOWNS = 4000


def _polish_flows(problem, incidence, supply, flows, potentials, marginal):
    """Newton's method on the KKT system over the used (edge, origin) pairs.

    Unknowns: the flows f[e, o] on the pairs the solver used (flow > 1e-10 of the
    largest demand) and the node potentials p[v, o]. Equations: f's conservation, and
    m_e(x_e) = p[head, o] - p[tail, o] on every used pair, m the latency (equilibrium)
    or marginal cost (optimum). Steps are minimum-norm least-squares solutions (the
    potentials are defined up to a constant per origin, and flows around a cycle of
    equal costs are not unique). Pairs whose flow turns negative leave the set and
    Newton restarts. Returns the flows, or None when it does not settle.
    """
    A = incidence.toarray()
    n, m = A.shape
    n_orig = supply.shape[1]
    tail = np.argmax(A < 0, axis=0)
    head = np.argmax(A > 0, axis=0)
    scale = float(np.abs(supply).max())
    support = flows > 1e-10 * scale
    f = np.where(support, flows, 0.0)
    p = potentials.copy()
    for _ in range(m * n_orig + 1):
        e_idx, o_idx = np.nonzero(support)
        k = e_idx.size
        if k + n * n_orig > POLISH_MAX_UNKNOWNS:
            return None
        rows = np.arange(k)
        for _ in range(50):
            x = f.sum(axis=1)
            if np.any(x >= problem.capacity):
                return None
            cost = problem.latencies(x, marginal=marginal)
            r1 = cost[e_idx] - (p[head[e_idx], o_idx] - p[tail[e_idx], o_idx])
            r2 = (A @ f - supply).ravel()
            res = np.concatenate([r1, r2])
            if np.max(np.abs(res)) <= 1e-13 * max(1.0, scale, float(np.max(cost))):
                break
            jac = np.zeros((k + n * n_orig, k + n * n_orig))
            slope = problem.latencies(x, marginal=marginal, derivative=True)[e_idx]
            jac[:k, :k] = (e_idx[:, None] == e_idx[None, :]) * slope[:, None]
            jac[rows, k + head[e_idx] * n_orig + o_idx] = -1.0
            jac[rows, k + tail[e_idx] * n_orig + o_idx] = 1.0
            jac[k + np.arange(n)[:, None] * n_orig + o_idx[None, :], rows[None, :]] = A[:, e_idx]
            step = np.linalg.lstsq(jac, -res, rcond=None)[0]
            f[e_idx, o_idx] += step[:k]
            p += step[k:].reshape(n, n_orig)
        else:
            return None
        negative = support & (f < 0)
        if not negative.any():
            return np.where(support, f, 0.0)
        support &= ~negative
        f[negative] = 0.0
    return None


def _relative_gap(problem, x, marginal):
    """(sum x m - sum d dist) / sum d dist, and each pair's cheapest path cost (Dijkstra).

    m is the latency (equilibrium) or marginal cost (optimum); the gap is >= 0 and
    zero exactly at the equilibrium (optimum). For the optimum, convexity gives
    cost(x) - gap * sum d dist <= optimal cost <= cost(x).
    """
    import networkx as nx

    weight = dict(zip(problem.edges, problem.latencies(x, marginal=marginal).tolist()))
    dist_of = {}
    for o in {o for o, _, _ in problem.pairs}:
        dist_of[o] = nx.single_source_dijkstra_path_length(problem.graph, o, weight=lambda u, v, _: weight[(u, v)])
    path_cost = [dist_of[o][d] for o, d, _ in problem.pairs]
    shortest = sum(rate * pc for (_, _, rate), pc in zip(problem.pairs, path_cost))
    total = float(x @ np.array([weight[e] for e in problem.edges]))
    gap = (total - shortest) / shortest if shortest > 0 else total
    return max(gap, 0.0), path_cost


def _build_program(problem):
    """The cvxpy program over per-origin link flows; returns (program, flows, conservation,
    incidence, supply, node index, origins)."""
    import cvxpy as cp
    import networkx as nx

    cap, cost, slope, offset = problem.capacity, problem.link_cost, problem.slope, problem.offset
    graph, pairs = problem.graph, problem.pairs
    nodes = list(graph.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    origins = sorted({o for o, _, _ in pairs}, key=index.get)
    supply = np.zeros((len(nodes), len(origins)))
    for o, d, rate in pairs:
        supply[index[o], origins.index(o)] -= rate
        supply[index[d], origins.index(o)] += rate
    incidence = nx.incidence_matrix(graph, nodelist=nodes, edgelist=problem.edges, oriented=True).tocsr()
    flows = cp.Variable((len(problem.edges), len(origins)), nonneg=True)
    conservation = incidence @ flows == supply
    x = cp.sum(flows, axis=1)
    q = np.flatnonzero(np.isfinite(cap))
    terms = [offset @ x]
    if q.size:
        if problem.objective == "optimum":  # c x/(mu - x) = c mu/(mu - x) - c
            terms.append(cp.sum(cp.multiply(cost[q] * cap[q], cp.inv_pos(cap[q] - x[q]))))
        else:  # int_0^x c/(mu - s) ds = -c log(1 - x/mu)
            terms.append(cp.sum(cp.multiply(cost[q], -cp.log(1 - cp.multiply(1 / cap[q], x[q])))))
    if np.any(slope > 0):  # x (a x) for the optimum, int_0^x a s ds for the equilibrium
        half = 1.0 if problem.objective == "optimum" else 0.5
        terms.append(cp.sum(cp.multiply(half * slope, cp.square(x))))
    program = cp.Problem(cp.Minimize(sum(terms)), [conservation])
    return program, flows, conservation, incidence, supply, index, origins


@register_solver(NetworkRoutingProblem, name="convex", priority=100,
                 doc="the optimum or equilibrium program in cvxpy (Clarabel), Newton-polished, checked by the "
                     "relative gap (Dijkstra)",
                 options=("solver", "solver_tol", "tol", "strict", "polish"))
def solve_network(problem: NetworkRoutingProblem, *, solver: str = "CLARABEL", solver_tol: float = 1e-9,
                  tol: float = 1e-9, strict: bool = False, polish: bool = True) -> NetworkRoutingSolution:
    """System-optimal or Wardrop flows of a network (``problem.objective``).

    Parameters
    ----------
    problem : NetworkRoutingProblem
    solver : str
        Installed cvxpy solver (Clarabel by default).
    solver_tol : float
        Tolerance passed to the solver.
    tol : float
        Largest relative gap accepted (above it: ``AccuracyWarning``, or
        ``ConvergenceError`` with ``strict`` or an inexact solver status).
    strict : bool
    polish : bool
        Newton's method on the KKT system of the used pairs (kept only when it
        lowers the gap; skipped above :data:`POLISH_MAX_UNKNOWNS` unknowns).

    Returns
    -------
    NetworkRoutingSolution
        ``cost``: the total cost rate sum_e x_e l_e(x_e); ``residual``: the relative
        gap (under marginal costs for the optimum, latencies for the equilibrium);
        ``info``: ``edge_flows`` / ``edge_latencies`` as [u, v, value] lists,
        ``path_costs`` (cheapest path cost of each pair under the program's costs,
        Dijkstra) and ``path_costs_dual`` (the same from the solver's
        flow-conservation duals), ``relative_gap``, ``relative_gap_solver``,
        ``polished``, ``polish_shift``, solver status and iterations.

    Raises
    ------
    UnstableError
        Demands that do not fit together under the link capacities.
    ConvergenceError
        Solver failure or a status other than optimal; a gap above ``tol`` with
        ``strict``.
    NotApplicableError
        The solver is not installed or lacks the program's cones.

    Examples
    --------
    Braess's paradox: the shortcut raises every job's delay from 1.5 to 2, and the
    optimum stays at 1.5 (price of anarchy 4/3):

    >>> from exactq.representations.routing import braess_network
    >>> g, demands = braess_network("linear", shortcut=False)
    >>> round(solve_network(NetworkRoutingProblem(g, demands, "equilibrium")).cost, 6)
    1.5
    >>> g, demands = braess_network("linear")
    >>> eq = solve_network(NetworkRoutingProblem(g, demands, "equilibrium"))
    >>> opt = solve_network(NetworkRoutingProblem(g, demands, "optimum"))
    >>> round(eq.cost, 6), round(opt.cost, 6), round(eq.cost / opt.cost, 6)
    (2.0, 1.5, 1.333333)

    Two parallel M/M/1 links are the parallel-server optimum of MODELS.md (cost 4 sqrt(2)/3):

    >>> import networkx as nx
    >>> g = nx.DiGraph()
    >>> g.add_edge("s", "t", kind="ps", capacity=1.0)
    >>> g.add_edge("s", "u", kind="ps", capacity=2.0)
    >>> g.add_edge("u", "t")
    >>> bool(abs(solve_network(NetworkRoutingProblem(g, [("s", "t", 1.5)], "optimum")).cost
    ...          - 4 * 2**0.5 / 3) < 1e-6)
    True
    """
    objective = problem.objective
    marginal = objective == "optimum"
    program, flows, conservation, incidence, supply, index, origins = _build_program(problem)
    try:
        info = solve_program(program, solver=solver, solver_tol=solver_tol,
                             what=f"network {objective} program ({len(problem.edges)} edges)")
    except UnstableError:
        raise UnstableError(f"demands must fit together under the link capacities; solver {solver} "
                            f"found the network {objective} program infeasible") from None
    potentials = -np.asarray(conservation.dual_value)  # node potentials, one column per origin
    raw = np.clip(np.asarray(flows.value, dtype=float), 0.0, None)
    gap_solver, path_cost = _relative_gap(problem, raw.sum(axis=1), marginal)
    best, gap = raw, gap_solver
    polished = _polish_flows(problem, incidence, supply, raw, potentials, marginal) if polish else None
    if polished is not None:
        gap_polished, path_cost_polished = _relative_gap(problem, polished.sum(axis=1), marginal)
        if gap_polished <= max(gap_solver, 1e-14):  # keep whichever is better
            best, gap, path_cost = polished, gap_polished, path_cost_polished
    x = best.sum(axis=1)
    if np.any(x >= problem.capacity):
        raise ConvergenceError(f"solver {solver} returned a flow at or above a link capacity")
    latency = problem.latencies(x)
    pairs, edges = problem.pairs, problem.edges
    path_cost_dual = [float(potentials[index[d], origins.index(o)] - potentials[index[o], origins.index(o)])
                      for o, d, _ in pairs]
    cost = float(x @ latency)
    info.update({
        "program": objective,
        "relative_gap": gap,
        "relative_gap_solver": gap_solver,
        "polished": best is not raw,
        "polish_shift": float(np.max(np.abs(best - raw))),
        "edge_flows": [[u, v, float(f)] for (u, v), f in zip(edges, x)],
        "edge_latencies": [[u, v, float(lv)] for (u, v), lv in zip(edges, latency)],
        "path_costs": [[o, d, rate, float(pc)] for (o, d, rate), pc in zip(pairs, path_cost)],
        "path_costs_dual": [[o, d, rate, pc] for (o, d, rate), pc in zip(pairs, path_cost_dual)],
        "cost": cost,
    })
    check_accuracy(info, f"relative gap {gap:.2e} of the network {objective}", gap, tol, strict)
    return NetworkRoutingSolution(problem, x, cost, gap, "convex", nit=info["solver_iterations"], info=info)
