"""Routing representations: static routing to PS servers, networks, and the fluid program's LP and root.

Four kinds of plain mathematics, each with the solution type its solvers return:

:class:`RoutingProblem` -> :class:`RoutingSolution`
    Work of rate rho routed to parallel processor-sharing servers (capacities mu_i,
    holding costs c_i) by K decision makers: K = 1 is the system optimum, K = inf the
    Wardrop equilibrium of selfish jobs, a finite K >= 2 the Nash equilibrium of K
    atomic dispatchers (Altman, Ayesta & Prabhu 2011; Ayesta, Brun & Prabhu 2011).
    Solved in closed form (water-filling), as a convex program (cvxpy) and, for
    finite K, by best-response dynamics (:mod:`exactq.solvers.routing`).
:class:`NetworkRoutingProblem` -> :class:`NetworkRoutingSolution`
    The same two objectives on a network of links with latency functions, a
    :class:`networkx.DiGraph` with origin-destination demands
    (:mod:`exactq.solvers.network_routing`).
:class:`LinearProgram` -> :class:`LinearProgramSolution`
    minimise ``cost @ x`` subject to ``A_eq @ x = b_eq`` and ``lower <= x <= upper``.
:class:`RootProblem` -> :class:`RootSolution`
    ``F(x) = 0``: a scalar equation on a sign-changing bracket, or a system from a
    starting point.

Why a linear program and a root problem live here. The fluid limit of dispatching
to server classes (speed-aware JSQ/JIQ, Bhambay & Mukhopadhyay 2022; Stolyar 2015) is
itself a routing problem: arrivals of rate lambda per server are routed to classes
j of speed mu_j holding a fraction gamma_j of the servers, and the busy fractions
x_j = (rate sent to j) / mu_j are what the routing costs. Under speed priority the
cost is linear (the number of busy servers), and the fixed point is the linear
program min sum_j x_j s.t. sum_j mu_j x_j = lambda, 0 <= x_j <= gamma_j: posed as a
:class:`LinearProgram` it is solved by the greedy fill of its one-row (knapsack)
structure, and independently by HiGHS without any translation. When idle servers
are chosen uniformly, the fixed point is the root of one monotone scalar equation in
the idle fraction, a :class:`RootProblem` with a bracket (Brent's method), and
independently the root of the J balance equations in x, a :class:`RootProblem` with
a starting point (Powell's hybrid method). The model (``speed-aware``) builds these
from its policy; the solvers know neither policies nor measures
(:mod:`exactq.solvers.fluid`).

One word per concept: *spare* is the free fraction 1 - rho_i of a server (computed
without cancellation in heavy traffic); a *multiplier* is the Lagrange multiplier
nu of the work constraint (the marginal cost per unit of work).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ModelError, NotApplicableError, UnstableError

__all__ = [
    "RoutingProblem",
    "RoutingSolution",
    "NetworkRoutingProblem",
    "NetworkRoutingSolution",
    "LinearProgram",
    "LinearProgramSolution",
    "RootProblem",
    "RootSolution",
    "braess_network",
    "OBJECTIVES",
    "LINK_KINDS",
]

#: the two programs of a network: the system optimum and the Wardrop equilibrium
OBJECTIVES = ("optimum", "equilibrium")
#: the optional ``kind`` attribute of a network link (checked against its other attributes)
LINK_KINDS = ("ps", "mm1", "linear", "delay")


def _frozen(x, dtype=float) -> np.ndarray:
    a = np.array(x, dtype=dtype).ravel()
    a.flags.writeable = False
    return a


# -- parallel servers ------------------------------------------------------------------


def _dispatchers(k):
    if k == math.inf:
        return math.inf
    if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)) \
            or not float(k).is_integer() or k < 1:
        raise ModelError(f"dispatchers must be an integer >= 1 or inf; got {k!r}")
    return int(k)


@dataclass(frozen=True, eq=False)
class RoutingProblem:
    """Static routing of work to parallel processor-sharing servers by K decision makers.

    Server i is an M/G/1-PS queue of capacity mu_i with utilisation rho_i = x_i / mu_i
    (x_i the work routed to it per unit time); its mean number of jobs is
    rho_i / (1 - rho_i) whatever the size laws. The loads of K symmetric decision
    makers minimise

        F_K(rho) = sum_i c_i [ (1/K) / (1 - rho_i) + (1 - 1/K) (-log(1 - rho_i)) ]
        subject to  sum_i mu_i rho_i = rho,  rho_i >= 0,

    F_1 being the holding cost sum_i c_i rho_i / (1 - rho_i) up to a constant
    (Altman, Ayesta & Prabhu 2011, sec. 3), F_inf the potential of the Wardrop game
    (sec. 4) and F_K that of the symmetric K-dispatcher game (Ayesta, Brun & Prabhu
    2011, Lemma 2).

    Parameters
    ----------
    service_rates : (n,) array_like
        Capacities mu_i > 0 (work per unit time).
    holding_costs : (n,) array_like, optional
        Holding costs c_i > 0 per job per unit time (default 1 each).
    work_rate : float, optional
        The total work rate rho, 0 < rho < sum(mu) (default: the sum of
        ``dispatcher_rates``, or of ``class_work_rates``).
    class_work_rates : (m,) array_like, optional
        Work rate lambda_k E[B_k] of each job class, summing to rho (default one
        class); with m > 1 the convex program is posed over class-by-server routing
        probabilities.
    dispatchers : 1, int >= 2 or math.inf, optional
        K (default 1, or the number of ``dispatcher_rates``).
    dispatcher_rates : (K,) array_like, optional
        Each dispatcher's own work rate when they differ (the atomic game with
        unequal traffic); they sum to rho.

    Attributes
    ----------
    regime : {"centralized", "decentralized", "atomic"}
        Altman et al.'s name of the problem: K = 1, K = inf, finite K >= 2.
    symmetric : bool
        Whether every dispatcher routes the same rate (always for K = 1 and inf).

    Raises
    ------
    ModelError
        Non-positive or non-finite rates or costs, a length mismatch, class or
        dispatcher rates that do not sum to rho, a bad K.
    UnstableError
        rho >= sum(mu).

    Examples
    --------
    The reference case of MODELS.md (mu = (1, 2), c = (1, 1), rho = 1.5):

    >>> p = RoutingProblem([1, 2], [1, 1], 1.5)
    >>> p.regime, p.n_servers, float(p.service_rates.sum() - p.work_rate)
    ('centralized', 2, 1.5)
    >>> RoutingProblem([1, 2], None, 1.5, dispatchers=math.inf).regime
    'decentralized'
    """

    service_rates: np.ndarray
    holding_costs: np.ndarray | None = None
    work_rate: float | None = None
    class_work_rates: np.ndarray | None = None
    dispatchers: Any = None
    dispatcher_rates: np.ndarray | None = None

    def __post_init__(self):
        set_ = object.__setattr__
        mu = np.array(self.service_rates, dtype=float).ravel()
        if mu.size == 0 or not np.all(np.isfinite(mu)) or np.any(mu <= 0):
            raise ModelError(f"service_rates must be a list of 1+ values, each > 0; got {mu.tolist()}")
        c = np.ones_like(mu) if self.holding_costs is None else np.array(self.holding_costs, dtype=float).ravel()
        if c.shape != mu.shape:
            raise ModelError(f"holding_costs must have one value per server ({mu.size}); got {c.size}")
        if not np.all(np.isfinite(c)) or np.any(c <= 0):
            raise ModelError(f"holding_costs must each be > 0; got {c.tolist()}")
        r = None
        if self.dispatcher_rates is not None:
            r = np.array(self.dispatcher_rates, dtype=float).ravel()
            if r.size == 0 or np.any(r <= 0) or not np.all(np.isfinite(r)):
                raise ModelError(f"dispatcher_rates must be a list of 1+ values, each > 0; got {r.tolist()}")
            if r.sum() >= mu.sum():
                raise UnstableError(f"sum of dispatcher_rates must be < total service rate {mu.sum():g}; "
                                    f"got {r.sum():g}")
            if self.dispatchers is not None and _dispatchers(self.dispatchers) != r.size:
                raise ModelError(f"dispatchers must equal the number of dispatcher_rates ({r.size}); "
                                 f"got {self.dispatchers!r}")
        k = (r.size if r is not None else 1) if self.dispatchers is None else _dispatchers(self.dispatchers)
        given = self.work_rate
        if given is None:
            if r is None and self.class_work_rates is None:
                raise ModelError("work_rate must be given (or class_work_rates or dispatcher_rates); got none")
            given = float(np.sum(r if r is not None else np.asarray(self.class_work_rates, dtype=float)))
        try:
            rho = float(given)
        except (TypeError, ValueError):
            raise ModelError(f"work_rate must be a number > 0; got {given!r}") from None
        if not (math.isfinite(rho) and rho > 0):
            raise ModelError(f"work_rate must be > 0; got {given!r}")
        if rho >= mu.sum():
            raise UnstableError(f"work_rate must be < total service rate {mu.sum():g}; got {rho:g}")
        w = np.array([rho]) if self.class_work_rates is None else np.array(self.class_work_rates, float).ravel()
        if w.size == 0 or np.any(w <= 0) or not math.isclose(w.sum(), rho, rel_tol=1e-12):
            raise ModelError(f"class_work_rates must be > 0 and sum to work_rate {rho:g}; got {w.tolist()}")
        if r is not None and not math.isclose(r.sum(), rho, rel_tol=1e-12):
            raise ModelError(f"dispatcher_rates must sum to work_rate {rho:g}; got {r.sum():g}")
        set_(self, "service_rates", _frozen(mu))
        set_(self, "holding_costs", _frozen(c))
        set_(self, "work_rate", rho)
        set_(self, "class_work_rates", _frozen(w))
        set_(self, "dispatchers", k)
        set_(self, "dispatcher_rates", None if r is None else _frozen(r))

    @property
    def n_servers(self) -> int:
        """Number of servers n."""
        return int(self.service_rates.size)

    @property
    def regime(self) -> str:
        """``"centralized"`` (K = 1), ``"decentralized"`` (K = inf) or ``"atomic"``."""
        if self.dispatchers == 1:
            return "centralized"
        return "decentralized" if math.isinf(self.dispatchers) else "atomic"

    @property
    def symmetric(self) -> bool:
        """Whether all dispatchers route the same work rate (the potential games)."""
        r = self.dispatcher_rates
        return r is None or bool(np.all(r == r[0]))

    @property
    def thresholds(self) -> np.ndarray:
        """a_i = c_i / mu_i, the marginal cost per unit of work of an idle server."""
        return self.holding_costs / self.service_rates


@dataclass(frozen=True, eq=False)
class RoutingSolution:
    """The loads of one :class:`RoutingProblem`.

    Attributes
    ----------
    problem : RoutingProblem
    loads : (n,) ndarray
        Utilisations rho_i in [0, 1), server order.
    spare : (n,) ndarray
        1 - rho_i, computed without cancellation where the solver can.
    multiplier : float or None
        nu, the Lagrange multiplier of the work constraint (the common marginal cost
        per unit of work of the used servers); ``None`` when the dispatchers have
        their own (unequal rates: see ``flows``).
    method : str
        The solver (``water-filling``, ``convex``, ``best-response``).
    residual : float or None
        The KKT residual (convex program) or Nash gap (best responses) of the loads;
        ``None`` for a closed form, which has no residual to check.
    closed_form : bool
        The loads are a closed form's, exact up to rounding.
    nit : int or None
        Iterations of the solver.
    flows : (K, n) ndarray or None
        Each dispatcher's work rate to each server (best responses).
    info : dict
        The solver's report, JSON-ready.

    Examples
    --------
    >>> p = RoutingProblem([1, 2], [1, 1], 1.5, dispatchers=math.inf)
    >>> s = RoutingSolution(p, np.array([0.25, 0.625]), np.array([0.75, 0.375]), 4 / 3, "hand")
    >>> s.cost, s.servers_used
    (2.0, [0, 1])
    """

    problem: RoutingProblem
    loads: np.ndarray
    spare: np.ndarray
    multiplier: float | None
    method: str
    residual: float | None = None
    closed_form: bool = False
    nit: int | None = None
    flows: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def cost(self) -> float:
        """The holding cost rate sum_i c_i rho_i / (1 - rho_i) (``spare`` in the denominator)."""
        return float(np.sum(self.problem.holding_costs * self.loads / self.spare))

    @property
    def servers_used(self) -> list:
        """0-based indices of the servers with rho_i > 0."""
        return np.flatnonzero(self.loads > 0).tolist()


# -- networks ---------------------------------------------------------------------------


def _number(x, what, positive=False):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number; got {x!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ModelError(f"{what} must be {'> 0' if positive else '>= 0'}; got {x!r}")
    return v


@dataclass(frozen=True, eq=False)
class NetworkRoutingProblem:
    """The system optimum or the Wardrop equilibrium of a network of queues and links.

    Each link e of the graph carries a flow x_e (jobs of mean size 1, or work, per
    unit time) and has the latency (mean time, times a holding cost, spent on it per
    job)

        l_e(x) = cost_e / (capacity_e - x)  +  slope_e * x  +  offset_e

    from its edge attributes ``capacity`` (> 0, optional: a processor-sharing or
    M/M/1 queue of that service rate, whose mean number in system is
    x / (capacity - x); without it the link has no queueing term and no capacity),
    ``cost`` (> 0, default 1: holding cost per job per unit time at the queue),
    ``slope`` and ``offset`` (>= 0, default 0: an affine latency, the Braess and
    Pigou links; an offset alone is a fixed delay, all zero a free link) and ``kind``
    (optional: one of :data:`LINK_KINDS`, checked against the others, for
    readability only).

    * ``objective="optimum"`` minimises the total cost rate sum_e x_e l_e(x_e) (the
      cost-weighted mean number of jobs in the network, by Little's law): one
      decision maker, K = 1 of :class:`RoutingProblem`;
    * ``objective="equilibrium"`` minimises the Beckmann potential
      sum_e int_0^{x_e} l_e(s) ds: every job takes a cheapest path given the others
      (Wardrop), K = inf.

    Parameters
    ----------
    graph : networkx.DiGraph
        The links (copied and frozen).
    demands : sequence of (origin, destination, rate), or dict {(origin, destination): rate}
    objective : {"optimum", "equilibrium"}

    Attributes
    ----------
    edges : list of (u, v)
        The links in ``graph.edges`` order, the order of every per-link array.
    capacity, link_cost, slope, offset : (m,) ndarray
        The link data (``capacity`` inf where a link has none).
    pairs : list of (origin, destination, rate)

    Raises
    ------
    NotApplicableError
        The graph is not a networkx DiGraph.
    ModelError
        A bad attribute (the message names the edge), a self-loop, a demand between
        unknown or unconnected nodes, or a bad objective.
    UnstableError
        A demand at or above the max-flow capacity between its origin and
        destination.

    Examples
    --------
    Braess's network has four links and one unit of demand:

    >>> g, demands = braess_network("linear", shortcut=False)
    >>> p = NetworkRoutingProblem(g, demands)
    >>> len(p.edges), p.pairs
    (4, [('s', 't', 1.0)])
    >>> p.latencies(np.array([0.5, 0.5, 0.5, 0.5])).tolist()
    [0.5, 1.0, 1.0, 0.5]
    """

    graph: Any
    demands: Any
    objective: str = "equilibrium"
    edges: list = field(init=False, repr=False)
    capacity: np.ndarray = field(init=False, repr=False)
    link_cost: np.ndarray = field(init=False, repr=False)
    slope: np.ndarray = field(init=False, repr=False)
    offset: np.ndarray = field(init=False, repr=False)
    pairs: list = field(init=False, repr=False)

    def __post_init__(self):
        import networkx as nx

        set_ = object.__setattr__
        graph = self.graph
        if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
            raise NotApplicableError(f"graph must be a networkx DiGraph; got {type(graph).__name__}")
        if self.objective not in OBJECTIVES:
            raise ModelError(f"objective must be one of {', '.join(OBJECTIVES)}; got {self.objective!r}")
        graph = nx.freeze(graph.copy())
        set_(self, "graph", graph)
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
            if kind is not None and kind not in LINK_KINDS:
                raise ModelError(f"{name}: kind must be one of {', '.join(sorted(LINK_KINDS))}; got {kind!r}")
            if "capacity" in d:
                cap[e] = _number(d["capacity"], f"{name}: capacity", positive=True)
            elif kind in ("ps", "mm1"):
                raise ModelError(f"{name}: a {kind} link needs a capacity > 0; got none")
            if kind in ("linear", "delay") and "capacity" in d:
                raise ModelError(f"{name}: a {kind} link has no capacity; got capacity={d['capacity']!r}")
            cost[e] = _number(d.get("cost", 1.0), f"{name}: cost", positive=True)
            slope[e] = _number(d.get("slope", 0.0), f"{name}: slope")
            offset[e] = _number(d.get("offset", 0.0), f"{name}: offset")
        for name, value in (("edges", edges), ("capacity", _frozen(cap)), ("link_cost", _frozen(cost)),
                            ("slope", _frozen(slope)), ("offset", _frozen(offset)),
                            ("pairs", self._pairs(graph, self.demands))):
            set_(self, name, value)

    @staticmethod
    def _pairs(graph, demands) -> list:
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

    def latencies(self, flows, *, marginal: bool = False, derivative: bool = False) -> np.ndarray:
        """Per link: the latency l_e(x_e), or with ``marginal`` the marginal cost (x l_e(x))'.

        ``derivative`` gives the x-derivative of that function instead (the Newton
        polish uses it). ``flows`` is (m,) in :attr:`edges` order.
        """
        x = np.asarray(flows, dtype=float)
        cap, cost, slope, offset = self.capacity, self.link_cost, self.slope, self.offset
        queue = np.isfinite(cap)
        spare = np.where(queue, cap - x, 1.0)
        if not marginal:
            if derivative:
                return np.where(queue, cost / spare**2, 0.0) + slope
            return np.where(queue, cost / spare, 0.0) + slope * x + offset
        if derivative:
            return np.where(queue, 2 * cost * cap / spare**3, 0.0) + 2 * slope
        return np.where(queue, cost * cap / spare**2, 0.0) + 2 * slope * x + offset

    def with_objective(self, objective: str) -> "NetworkRoutingProblem":
        """The same network and demands with the other program."""
        return NetworkRoutingProblem(self.graph, self.pairs, objective)


@dataclass(frozen=True, eq=False)
class NetworkRoutingSolution:
    """The link flows of one :class:`NetworkRoutingProblem`.

    Attributes
    ----------
    problem : NetworkRoutingProblem
    edge_flows : (m,) ndarray
        x_e in :attr:`NetworkRoutingProblem.edges` order.
    cost : float
        The total cost rate sum_e x_e l_e(x_e) at these flows.
    residual : float
        The relative gap (sum x m - sum d dist) / sum d dist under the latencies
        (equilibrium) or marginal costs (optimum): zero exactly at the solution.
    method : str
    nit : int or None
    info : dict
        The solver's report: flows and latencies per link, path costs, status.

    Examples
    --------
    >>> g, demands = braess_network("linear", shortcut=False)
    >>> p = NetworkRoutingProblem(g, demands)
    >>> s = NetworkRoutingSolution(p, np.full(4, 0.5), 1.5, 0.0, "hand")
    >>> s.flow_of("s", "v")
    0.5
    """

    problem: NetworkRoutingProblem
    edge_flows: np.ndarray
    cost: float
    residual: float
    method: str
    nit: int | None = None
    info: dict = field(default_factory=dict)

    def flow_of(self, u, v) -> float:
        """The flow on link u -> v."""
        return float(self.edge_flows[self.problem.edges.index((u, v))])


def braess_network(kind: str = "linear", *, shortcut: bool = True):
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

    Examples
    --------
    >>> g, demands = braess_network("queue")
    >>> sorted(g.edges), demands
    ([('s', 'v'), ('s', 'w'), ('v', 't'), ('v', 'w'), ('w', 't')], [('s', 't', 1.0)])
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


# -- the fluid program: a linear program and a root ---------------------------------------


@dataclass(frozen=True, eq=False)
class LinearProgram:
    """minimise ``cost @ x`` subject to ``A_eq @ x = b_eq`` and ``lower <= x <= upper``.

    Parameters
    ----------
    cost : (n,) array_like
    A_eq : (r, n) array_like
    b_eq : (r,) array_like
    upper : (n,) array_like
        Upper bounds (``inf`` allowed).
    lower : (n,) array_like, optional
        Lower bounds (default 0).

    Attributes
    ----------
    is_knapsack : bool
        The declared structure of the greedy solver: one equality row with positive
        coefficients, positive costs, ``lower = 0`` and finite ``upper`` (a fractional
        knapsack: filling the variables in decreasing order of coefficient per unit
        cost is optimal).

    Raises
    ------
    ModelError
        Shapes that do not match, non-finite data, ``lower > upper``.

    Examples
    --------
    The speed-priority fluid program of MODELS.md (gamma = (.5, .5), mu = (2, 1),
    lambda = 1.2):

    >>> lp = LinearProgram([1, 1], [[2, 1]], [1.2], [0.5, 0.5])
    >>> lp.n_variables, lp.is_knapsack
    (2, True)
    """

    cost: np.ndarray
    A_eq: np.ndarray
    b_eq: np.ndarray
    upper: np.ndarray
    lower: np.ndarray | None = None
    is_knapsack: bool = field(init=False, repr=False)

    def __post_init__(self):
        set_ = object.__setattr__
        c = np.array(self.cost, dtype=float).ravel()
        A = np.atleast_2d(np.array(self.A_eq, dtype=float))
        b = np.array(self.b_eq, dtype=float).ravel()
        u = np.array(self.upper, dtype=float).ravel()
        lo = np.zeros_like(c) if self.lower is None else np.array(self.lower, dtype=float).ravel()
        n = c.size
        if n == 0 or A.shape != (b.size, n) or u.shape != (n,) or lo.shape != (n,):
            raise ModelError(f"A_eq must have shape (len(b_eq), len(cost)) and the bounds len(cost) entries; "
                             f"got cost {c.shape}, A_eq {A.shape}, b_eq {b.shape}, upper {u.shape}, "
                             f"lower {lo.shape}")
        if not np.isfinite(np.concatenate((c, A.ravel(), b, lo))).all():
            raise ModelError("cost, A_eq, b_eq and lower must be finite")
        if (lo > u).any() or np.isnan(u).any():
            raise ModelError(f"lower must be <= upper; got lower {lo.tolist()}, upper {u.tolist()}")
        for name, value in (("cost", c), ("A_eq", A), ("b_eq", b), ("upper", u), ("lower", lo)):
            value.flags.writeable = False
            set_(self, name, value)
        # the declared structure, decided once: one positive equality row, positive costs,
        # lower = 0, finite upper bounds
        set_(self, "is_knapsack", bool(A.shape[0] == 1 and (A > 0).all() and (c > 0).all() and not lo.any()
                                       and np.isfinite(u).all()))

    @property
    def n_variables(self) -> int:
        """n."""
        return int(self.cost.size)


@dataclass(frozen=True, eq=False)
class LinearProgramSolution:
    """An optimal point of a :class:`LinearProgram`.

    Attributes
    ----------
    x : (n,) ndarray
    objective : float
        ``cost @ x``.
    residual : float
        ``max |A_eq x - b_eq|``.
    method : str
    status : int
        0 when optimal (scipy.optimize.linprog's convention).
    message : str
    error : float or None
        A bound on the absolute error of each x_j from rounding (closed forms).
    closed_form : bool
        x is a closed form's, exact up to rounding.

    Examples
    --------
    >>> s = LinearProgramSolution(np.array([0.5, 0.2]), 0.7, 0.0, "hand")
    >>> s.status, s.objective
    (0, 0.7)
    """

    x: np.ndarray
    objective: float
    residual: float
    method: str
    status: int = 0
    message: str = ""
    error: float | None = None
    closed_form: bool = False


@dataclass(frozen=True, eq=False)
class RootProblem:
    """A root of F: a scalar equation on a bracket, or a system of equations from a start.

    Parameters
    ----------
    function : callable
        ``F(x) -> float`` for a scalar equation, ``F(x: (n,)) -> (n,)`` for a system.
    bracket : (lo, hi), optional
        A scalar equation with F(lo) and F(hi) of opposite signs (or zero).
    start : (n,) array_like, optional
        The starting point of a system (exactly one of ``bracket`` and ``start``).
    xtol, rtol : float
        The absolute and relative tolerance on x (a bracketing solver stops when the
        bracket is below ``xtol + rtol |x|``).
    maxiter : int

    Raises
    ------
    ModelError
        Neither or both of ``bracket`` and ``start``; an empty or non-finite bracket;
        non-positive tolerances.

    Examples
    --------
    >>> RootProblem(lambda x: x * x - 2, bracket=(0, 2)).is_scalar
    True
    """

    function: Callable
    bracket: tuple | None = None
    start: np.ndarray | None = None
    xtol: float = 1e-15
    rtol: float = 4 * np.finfo(float).eps
    maxiter: int = 500

    def __post_init__(self):
        if not callable(self.function):
            raise ModelError(f"function must be callable; got {type(self.function).__name__}")
        if (self.bracket is None) == (self.start is None):
            raise ModelError("give exactly one of bracket (a scalar equation) and start (a system)")
        if self.bracket is not None:
            lo, hi = (float(v) for v in self.bracket)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ModelError(f"bracket must be finite with lo < hi; got {self.bracket!r}")
            object.__setattr__(self, "bracket", (lo, hi))
        else:
            x0 = _frozen(self.start)
            if x0.size == 0 or not np.all(np.isfinite(x0)):
                raise ModelError(f"start must be a finite point of 1+ entries; got {x0.tolist()}")
            object.__setattr__(self, "start", x0)
        if not (self.xtol > 0 and self.rtol >= 0 and int(self.maxiter) >= 1):
            raise ModelError(f"xtol must be > 0, rtol >= 0 and maxiter >= 1; got {self.xtol!r}, {self.rtol!r}, "
                             f"{self.maxiter!r}")

    @property
    def is_scalar(self) -> bool:
        """Whether this is a bracketed scalar equation."""
        return self.bracket is not None


@dataclass(frozen=True, eq=False)
class RootSolution:
    """A root of a :class:`RootProblem`.

    Attributes
    ----------
    x : float or (n,) ndarray
    residual : float
        ``max |F(x)|``.
    method : str
    converged : bool
    iterations : int or None
    error : float or None
        A bound on |x - x*| (bracketing solvers: the final bracket).

    Examples
    --------
    >>> RootSolution(2**0.5, 0.0, "hand", True).converged
    True
    """

    x: Any
    residual: float
    method: str
    converged: bool
    iterations: int | None = None
    error: float | None = None
