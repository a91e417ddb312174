"""System-optimal and Wardrop routing on a network of queues, as convex programs.

The network is a :class:`networkx.DiGraph`. Each link e carries a flow x_e (jobs of
mean size 1, or work, per unit time) and has the latency (mean time, times a holding
cost, spent on it per job)

    l_e(x) = cost_e / (capacity_e - x)  +  slope_e * x  +  offset_e

with the edge attributes

``capacity`` (> 0, optional)
    Makes the link a processor-sharing or M/M/1 queue of that service rate; its mean
    number in system is x / (capacity - x) (exact for PS, and for M/M/1 nodes of a
    product-form network). Without it the link has no queueing term and no capacity.
``cost`` (> 0, default 1)
    Holding cost per job per unit time at the queue.
``slope``, ``offset`` (>= 0, default 0)
    Affine latency (the classical Braess and Pigou links; an offset alone is a
    fixed delay, all zero a free link).
``kind`` (optional)
    ``"ps"``, ``"mm1"``, ``"linear"`` or ``"delay"``; checked against the other
    attributes, for readability only.

Demands are origin-destination rates ``[(origin, destination, rate), ...]`` (or a
mapping ``{(origin, destination): rate}``).

* The **system optimum** minimises the total cost rate sum_e x_e l_e(x_e) (the
  cost-weighted mean number of jobs in the network, by Little's law).
* The **Wardrop equilibrium** (every job takes a cheapest path given the others)
  minimises the Beckmann potential sum_e int_0^{x_e} l_e(s) ds
  = sum_e [-cost_e log(1 - x_e/capacity_e) + slope_e x_e^2 / 2 + offset_e x_e].

Both are posed over per-origin link flows with flow conservation (the oriented
incidence matrix), checked DCP and solved by Clarabel; the answer is verified by the
relative gap of the Frank-Wolfe literature, (sum_e x_e l_e - sum_k d_k dist_k) /
sum_k d_k dist_k with dist_k the cheapest path cost of pair k under the link
latencies (marginal costs for the optimum), computed independently with Dijkstra.

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

import math
import time
import warnings

import numpy as np

from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ModelError,
    NotApplicableError,
    UnstableError,
)
from exactq.result import Result

from .routing import solve_program

__all__ = [
    "network_optimum",
    "network_equilibrium",
    "network_price_of_anarchy",
    "link_latencies",
    "braess_network",
]

_KINDS = {"ps", "mm1", "linear", "delay"}


def _links(graph):
    """Validated link data as arrays in ``graph.edges`` order."""
    import networkx as nx

    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise NotApplicableError(f"graph must be a networkx DiGraph; got {type(graph).__name__}")
    edges = list(graph.edges)
    if not edges:
        raise ModelError("graph must have at least one edge; got none")
    cap = np.full(len(edges), np.inf)
    cost = np.ones(len(edges))
    slope = np.zeros(len(edges))
    offset = np.zeros(len(edges))
    for e, (u, v) in enumerate(edges):
        d = graph.edges[u, v]
        name = f"edge {u}->{v}"
        if u == v:
            raise ModelError(f"{name}: self-loops carry no flow and are not allowed; got one")
        kind = d.get("kind")
        if kind is not None and kind not in _KINDS:
            raise ModelError(f"{name}: kind must be one of {', '.join(sorted(_KINDS))}; got {kind!r}")
        if "capacity" in d:
            cap[e] = _number(d["capacity"], f"{name}: capacity", positive=True)
        elif kind in ("ps", "mm1"):
            raise ModelError(f"{name}: a {kind} link needs a capacity > 0; got none")
        if kind in ("linear", "delay") and "capacity" in d:
            raise ModelError(f"{name}: a {kind} link has no capacity; got capacity={d['capacity']!r}")
        cost[e] = _number(d.get("cost", 1.0), f"{name}: cost", positive=True)
        slope[e] = _number(d.get("slope", 0.0), f"{name}: slope")
        offset[e] = _number(d.get("offset", 0.0), f"{name}: offset")
    return edges, cap, cost, slope, offset


def _number(x, what, positive=False):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number; got {x!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ModelError(f"{what} must be {'> 0' if positive else '>= 0'}; got {x!r}")
    return v


def _demands(graph, demands):
    import networkx as nx

    items = list(demands.items()) if isinstance(demands, dict) else list(demands)
    out = []
    for item in items:
        if isinstance(demands, dict):
            (o, d), rate = item
        else:
            try:
                o, d, rate = item
            except (TypeError, ValueError):
                raise ModelError(f"demands must be (origin, destination, rate) triples; got {item!r}") from None
        for node in (o, d):
            if node not in graph:
                raise ModelError(f"demand node {node!r} is not in the graph")
        if o == d:
            raise ModelError(f"demand origin and destination must differ; got {o!r} twice")
        rate = _number(rate, f"demand rate from {o} to {d}", positive=True)
        if not nx.has_path(graph, o, d):
            raise ModelError(f"demand from {o} to {d}: no directed path in the graph")
        out.append((o, d, rate))
    if not out:
        raise ModelError("demands must name at least one origin-destination pair; got none")
    for o, d, rate in out:  # each pair alone must fit (strictly) under its min cut
        try:
            cut = nx.maximum_flow_value(graph, o, d, capacity="capacity")
        except nx.NetworkXUnbounded:  # a path of links without capacity
            continue
        if rate >= cut:
            raise UnstableError(f"demand from {o} to {d} must be < the network's max-flow "
                                f"capacity {cut:g} between them; got {rate:g}")
    return out


def _edge_cost(links, x, objective, derivative=False):
    """Latency l_e(x) (``equilibrium``) or marginal cost (x l_e(x))' (``optimum``), or its x-derivative."""
    cap, cost, slope, offset = links
    queue = np.isfinite(cap)
    spare = np.where(queue, cap - x, 1.0)
    if objective == "equilibrium":
        if derivative:
            return np.where(queue, cost / spare**2, 0.0) + slope
        return np.where(queue, cost / spare, 0.0) + slope * x + offset
    if derivative:
        return np.where(queue, 2 * cost * cap / spare**3, 0.0) + 2 * slope
    return np.where(queue, cost * cap / spare**2, 0.0) + 2 * slope * x + offset


def link_latencies(graph, flows, *, marginal=False) -> np.ndarray:
    """Latency l_e(x_e) (or marginal cost d/dx [x l_e(x)]) of each edge, in ``graph.edges`` order."""
    links = _links(graph)[1:]
    return _edge_cost(links, np.asarray(flows, dtype=float), "optimum" if marginal else "equilibrium")


#: the dense Newton polish is skipped above this many unknowns
POLISH_MAX_UNKNOWNS = 4000


def _polish_flows(incidence, supply, flows, potentials, links, objective):
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
            if np.any(x >= links[0]):
                return None
            cost = _edge_cost(links, x, objective)
            r1 = cost[e_idx] - (p[head[e_idx], o_idx] - p[tail[e_idx], o_idx])
            r2 = (A @ f - supply).ravel()
            res = np.concatenate([r1, r2])
            if np.max(np.abs(res)) <= 1e-13 * max(1.0, scale, float(np.max(cost))):
                break
            jac = np.zeros((k + n * n_orig, k + n * n_orig))
            slope = _edge_cost(links, x, objective, derivative=True)[e_idx]
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


def _relative_gap(graph, edges, x, links, objective, demands):
    """(sum x m - sum d dist) / sum d dist, and each pair's cheapest path cost (Dijkstra).

    m is the latency (equilibrium) or marginal cost (optimum); the gap is >= 0 and
    zero exactly at the equilibrium (optimum). For the optimum, convexity gives
    cost(x) - gap * sum d dist <= optimal cost <= cost(x).
    """
    import networkx as nx

    weight = dict(zip(edges, _edge_cost(links, x, objective).tolist()))
    dist_of = {}
    for o in {o for o, _, _ in demands}:
        dist_of[o] = nx.single_source_dijkstra_path_length(graph, o, weight=lambda u, v, _: weight[(u, v)])
    path_cost = [dist_of[o][d] for o, d, _ in demands]
    shortest = sum(rate * pc for (_, _, rate), pc in zip(demands, path_cost))
    total = float(x @ np.array([weight[e] for e in edges]))
    gap = (total - shortest) / shortest if shortest > 0 else total
    return max(gap, 0.0), path_cost


def _build_program(graph, edges, links, pairs, objective):
    """The cvxpy program over per-origin link flows; returns (problem, flows, conservation,
    incidence, supply, node index, origins)."""
    import cvxpy as cp
    import networkx as nx

    cap, cost, slope, offset = links
    nodes = list(graph.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    origins = sorted({o for o, _, _ in pairs}, key=index.get)
    supply = np.zeros((len(nodes), len(origins)))
    for o, d, rate in pairs:
        supply[index[o], origins.index(o)] -= rate
        supply[index[d], origins.index(o)] += rate
    incidence = nx.incidence_matrix(graph, nodelist=nodes, edgelist=edges, oriented=True).tocsr()
    flows = cp.Variable((len(edges), len(origins)), nonneg=True)
    conservation = incidence @ flows == supply
    x = cp.sum(flows, axis=1)
    q = np.flatnonzero(np.isfinite(cap))
    terms = [offset @ x]
    if q.size:
        if objective == "optimum":  # c x/(mu - x) = c mu/(mu - x) - c
            terms.append(cp.sum(cp.multiply(cost[q] * cap[q], cp.inv_pos(cap[q] - x[q]))))
        else:  # int_0^x c/(mu - s) ds = -c log(1 - x/mu)
            terms.append(cp.sum(cp.multiply(cost[q], -cp.log(1 - cp.multiply(1 / cap[q], x[q])))))
    if np.any(slope > 0):  # x (a x) for the optimum, int_0^x a s ds for the equilibrium
        half = 1.0 if objective == "optimum" else 0.5
        terms.append(cp.sum(cp.multiply(half * slope, cp.square(x))))
    problem = cp.Problem(cp.Minimize(sum(terms)), [conservation])
    return problem, flows, conservation, incidence, supply, index, origins


def _network_program(graph, demands, objective, solver, solver_tol, tol, strict, polish):
    """Solve, polish and check the optimum or equilibrium program."""
    t0 = time.perf_counter()
    edges, *links = _links(graph)
    pairs = _demands(graph, demands)
    problem, flows, conservation, incidence, supply, index, origins = _build_program(
        graph, edges, links, pairs, objective)
    try:
        info = solve_program(problem, solver=solver, solver_tol=solver_tol,
                             what=f"network {objective} program ({len(edges)} edges)")
    except UnstableError:
        raise UnstableError(f"demands must fit together under the link capacities; solver {solver} "
                            f"found the network {objective} program infeasible") from None
    potentials = -np.asarray(conservation.dual_value)  # node potentials, one column per origin
    raw = np.clip(np.asarray(flows.value, dtype=float), 0.0, None)
    gap_solver, path_cost = _relative_gap(graph, edges, raw.sum(axis=1), links, objective, pairs)
    best, gap = raw, gap_solver
    polished = _polish_flows(incidence, supply, raw, potentials, links, objective) if polish else None
    if polished is not None:
        gap_polished, path_cost_polished = _relative_gap(graph, edges, polished.sum(axis=1), links,
                                                         objective, pairs)
        if gap_polished <= max(gap_solver, 1e-14):  # keep whichever is better
            best, gap, path_cost = polished, gap_polished, path_cost_polished
    x = best.sum(axis=1)
    if np.any(x >= links[0]):
        raise ConvergenceError(f"solver {solver} returned a flow at or above a link capacity")
    latency = _edge_cost(links, x, "equilibrium")
    path_cost_dual = [float(potentials[index[d], origins.index(o)] - potentials[index[o], origins.index(o)])
                      for o, d, _ in pairs]
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
        "cost": float(x @ latency),
    })
    if gap > tol:
        msg = (f"solver {solver} (status {info['status']}): relative gap {gap:.2e} of the network "
               f"{objective} exceeds tol {tol:g}")
        if strict or info["status"] != "optimal":
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=3)
    return Result(value=info["cost"], method=f"convex/{objective}", residual=gap,
                  nit=info["solver_iterations"], seconds=time.perf_counter() - t0, info=info)


def network_optimum(graph, demands, *, solver="CLARABEL", solver_tol=1e-9, tol=1e-9,
                    strict=False, polish=True) -> Result:
    """System-optimal routing: minimise the total cost rate sum_e x_e l_e(x_e).

    Parameters
    ----------
    graph : networkx.DiGraph
        Links with the attributes of the module docstring.
    demands : sequence of (origin, destination, rate) or dict {(origin, destination): rate}
    solver : str
        Installed cvxpy solver (Clarabel by default).
    solver_tol : float
        Tolerance passed to the solver.
    tol : float
        Largest relative gap accepted (above it: ``AccuracyWarning``, or
        ``ConvergenceError`` with ``strict`` or an inexact solver status).
    strict : bool

    Returns
    -------
    Result
        ``value``: the total cost rate; ``residual``: the relative gap under marginal
        costs; ``info``: ``edge_flows`` / ``edge_latencies`` as [u, v, value] lists,
        ``path_costs`` (cheapest marginal path cost of each pair, Dijkstra) and
        ``path_costs_dual`` (the same from the solver's flow-conservation duals),
        solver status and iterations.

    Raises
    ------
    ModelError
        Bad attributes or demands (the message names the edge or pair).
    UnstableError
        A demand at or above its max-flow capacity, or demands that do not fit together.
    ConvergenceError
        Solver failure or a status other than optimal.

    Examples
    --------
    Two parallel M/M/1 links, the optimum of the ``ps-routing`` model (cost 4 sqrt(2)/3):

    >>> import networkx as nx
    >>> g = nx.DiGraph()
    >>> g.add_edge("s", "t", kind="ps", capacity=1.0)
    >>> g.add_edge("s", "u", kind="ps", capacity=2.0)
    >>> g.add_edge("u", "t")
    >>> r = network_optimum(g, [("s", "t", 1.5)])
    >>> bool(abs(r.value - 4 * 2**0.5 / 3) < 1e-6)
    True
    """
    return _network_program(graph, demands, "optimum", solver, solver_tol, tol, strict, polish)


def network_equilibrium(graph, demands, *, solver="CLARABEL", solver_tol=1e-9, tol=1e-9,
                        strict=False, polish=True) -> Result:
    """Wardrop equilibrium: minimise the Beckmann potential sum_e int_0^{x_e} l_e.

    Parameters and returns as :func:`network_optimum`; ``value`` is the total cost
    rate sum_e x_e l_e(x_e) at the equilibrium, ``residual`` the relative gap under
    the latencies (zero iff every used path of a pair is a cheapest one).

    Examples
    --------
    Braess's paradox: the shortcut raises every job's delay from 1.5 to 2.

    >>> g, demands = braess_network("linear", shortcut=False)
    >>> round(network_equilibrium(g, demands).value, 6)
    1.5
    >>> g, demands = braess_network("linear")
    >>> round(network_equilibrium(g, demands).value, 6)
    2.0
    """
    return _network_program(graph, demands, "equilibrium", solver, solver_tol, tol, strict, polish)


def network_price_of_anarchy(graph, demands, **options) -> Result:
    """Cost at the Wardrop equilibrium over the optimal cost (options as :func:`network_optimum`).

    ``info`` holds the two results' ``info`` under ``optimum`` and ``equilibrium``.
    """
    t0 = time.perf_counter()
    opt = network_optimum(graph, demands, **options)
    eq = network_equilibrium(graph, demands, **options)
    return Result(value=eq.value / opt.value, method="convex", residual=max(opt.residual, eq.residual),
                  seconds=time.perf_counter() - t0,
                  info={"optimum": opt.info, "equilibrium": eq.info,
                        "cost_optimum": opt.value, "cost_equilibrium": eq.value})


def braess_network(kind="linear", *, shortcut=True):
    """The Braess network s -> {v, w} -> t, with or without the free shortcut v -> w.

    ``kind="linear"`` (Braess 1968; Roughgarden 2005, sec. 1.1): s->v and w->t have
    latency x, s->w and v->t latency 1, demand 1. The equilibrium delay is 3/2 without
    the shortcut and 2 with it; the optimum stays at 3/2 (price of anarchy 4/3).

    ``kind="queue"``: s->v and w->t are PS (or M/M/1) queues of capacity 2, s->w and
    v->t fixed delays 0.8, demand 1. Without the shortcut the equilibrium delay is
    0.8 + 1/(2 - 1/2) = 22/15; with it, 1/(2 - x) = 0.8 on both queues makes every path
    cost 1.6 (half the jobs take the shortcut).

    Returns
    -------
    (networkx.DiGraph, list of (origin, destination, rate))
    """
    import networkx as nx

    g = nx.DiGraph()
    if kind == "linear":
        g.add_edge("s", "v", kind="linear", slope=1.0)
        g.add_edge("v", "t", kind="delay", offset=1.0)
        g.add_edge("s", "w", kind="delay", offset=1.0)
        g.add_edge("w", "t", kind="linear", slope=1.0)
    elif kind == "queue":
        g.add_edge("s", "v", kind="ps", capacity=2.0)
        g.add_edge("v", "t", kind="delay", offset=0.8)
        g.add_edge("s", "w", kind="delay", offset=0.8)
        g.add_edge("w", "t", kind="ps", capacity=2.0)
    else:
        raise ModelError(f"kind must be one of linear, queue; got {kind!r}")
    if shortcut:
        g.add_edge("v", "w", kind="delay", offset=0.0)
    return g, [("s", "t", 1.0)]
