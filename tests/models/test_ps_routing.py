"""Routing to processor-sharing servers: closed forms, convex programs, games, networks.

Reference values: MODELS.md ("Processor-sharing routing"), mu = (1, 2), c = (1, 1),
rho = 1.5, whose exact forms are loads 1 - 1.5/(1 + sqrt 2), 1 - 1.5/(2 + sqrt 2), cost
4 sqrt(2)/3, equilibrium (1/4, 5/8) with cost 2, and PoA 3/(2 sqrt 2). Braess values:
Braess (1968) for the linear network; the queue variant is solved by hand in
``braess_network``'s docstring.
"""

from __future__ import annotations

import json
import math
import warnings

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ModelError,
    NotApplicableError,
    UnstableError,
)
import exactq
from exactq.models.ps_routing import PSRouting
from exactq.representations.routing import NetworkRoutingProblem, RoutingProblem, braess_network
from exactq.solvers.network_routing import solve_network
from exactq.solvers.routing import best_response, convex_loads, kkt_residuals, water_filling

INF = math.inf
SQ2 = math.sqrt(2.0)


def reference(**extra):
    return PSRouting.create(service_rates="1,2", holding_costs="1,1", work_rate=1.5, **extra)


def closed(model, measure):
    """The closed-form method's value of ``measure``."""
    return exactq.solve(model, measure, method="closed-form").value


def solve_convex(model, measure, **kw):
    return exactq.solve(model, measure, method="convex", **kw)


def wf(mu, c, rho, dispatchers=1):
    return water_filling(RoutingProblem(mu, c, rho, dispatchers=dispatchers))


def cvx(mu, c, rho, dispatchers=1, **options):
    return convex_loads(RoutingProblem(mu, c, rho, dispatchers=dispatchers), **options)


def network_optimum(graph, demands, **options):
    return solve_network(NetworkRoutingProblem(graph, demands, "optimum"), **options)


def network_equilibrium(graph, demands, **options):
    return solve_network(NetworkRoutingProblem(graph, demands, "equilibrium"), **options)


# -- instances ---------------------------------------------------------------------------

@st.composite
def instances(draw, max_servers=12, equal_costs=False):
    n = draw(st.integers(1, max_servers))
    mu = np.array(draw(st.lists(st.floats(0.05, 20.0), min_size=n, max_size=n)))
    c = np.ones(n) if equal_costs else np.array(draw(st.lists(st.floats(0.05, 20.0), min_size=n, max_size=n)))
    fraction = draw(st.floats(0.01, 0.995))
    return mu, c, fraction * mu.sum()


# -- reference values --------------------------------------------------------------------

def test_reference_values_closed_form():
    m = reference()
    assert np.allclose(closed(m, "loads_centralized"), [1 - 1.5 / (1 + SQ2), 1 - 1.5 / (2 + SQ2)],
                       rtol=0, atol=1e-15)
    assert np.allclose(closed(m, "loads_centralized"), [0.378680, 0.560660], atol=5e-7)
    assert closed(m, "cost_centralized") == pytest.approx(4 * SQ2 / 3, rel=1e-15)
    assert closed(m, "cost_centralized") == pytest.approx(1.885618, abs=5e-7)
    assert np.allclose(closed(m, "loads_decentralized"), [0.25, 0.625], rtol=0, atol=1e-15)
    assert closed(m, "cost_decentralized") == pytest.approx(2.0, rel=1e-15)
    assert closed(m, "price_of_anarchy") == pytest.approx(3 / (2 * SQ2), rel=1e-15)
    assert closed(m, "price_of_anarchy") == pytest.approx(1.060660, abs=5e-7)
    assert closed(m, "servers_used_centralized") == [0, 1]
    r = exactq.solve(m, "price_of_anarchy", method="closed-form")
    assert r.method == "closed-form" and r.residual is None and r.info["arithmetic"] == "float64"
    assert r.info["centralized"]["multiplier"] == pytest.approx((1 + SQ2) ** 2 / 1.5**2, rel=1e-14)
    assert r.info["decentralized"]["servers_used"] == [0, 1]


@pytest.mark.parametrize("measure", list(PSRouting.measures))
def test_convex_matches_closed_form_on_every_measure(measure):
    m = reference(dispatchers=3)
    exact = closed(m, measure)
    r = solve_convex(m, measure, tol=1e-9)
    assert r.method == "convex"
    assert np.allclose(r.value, exact, rtol=1e-10, atol=1e-12)
    assert r.residual <= 1e-12
    for regime in r.info.values():
        assert regime["status"] == "optimal" and regime["dcp"] is True
        assert regime["kkt_residual"] <= 1e-12
        assert regime["multiplier"] > 0


def test_convex_reports_multiplier_and_equilibrium_gap():
    r = solve_convex(reference(), "price_of_anarchy")
    opt, eq = r.info["centralized"], r.info["decentralized"]
    # nu = marginal cost per unit of work: 1/t^2 (optimum), 1/t (equilibrium), t = spare / sum w
    t_opt, t_eq = 1.5 / (1 + SQ2), 1.5 / 2
    assert opt["multiplier"] == pytest.approx(1 / t_opt**2, rel=1e-12)
    assert eq["multiplier"] == pytest.approx(1 / t_eq, rel=1e-12)
    assert opt["multiplier_solver"] == pytest.approx(opt["multiplier"], rel=1e-3)  # the solver's own dual
    assert eq["equilibrium_gap"] <= 1e-12 and eq["unused_slack"] == INF
    assert opt["kkt_residual_solver"] < 1e-3 and opt["polish_shift"] < 1e-3
    assert json.dumps(r.to_dict())  # JSON-ready


# -- the convex programs agree with the closed forms ---------------------------------------

@settings(max_examples=25, deadline=None)
@given(instances(), st.sampled_from([1, INF, 3]))
def test_convex_agrees_with_water_filling(instance, k):
    mu, c, rho = instance
    exact = wf(mu, c, rho, dispatchers=k)
    r = cvx(mu, c, rho, dispatchers=k)
    assert np.max(np.abs(r.loads - exact.loads)) <= 1e-8
    assert r.info["servers_used"] == exact.info["servers_used"] == exact.servers_used
    assert r.info["cost"] == pytest.approx(exact.info["cost"], rel=1e-8)
    assert r.residual <= 1e-9 and exact.residual is None and exact.closed_form
    assert kkt_residuals(exact.problem, exact.loads, exact.multiplier)["kkt_residual"] <= 1e-9


def test_raw_solver_answer_is_close_without_polishing():
    """The cvxpy answer itself (no polishing) is within the interior point's accuracy."""
    rng = np.random.default_rng(5)
    mu, c = rng.uniform(0.5, 2, 50), rng.uniform(0.5, 3, 50)
    rho = 0.7 * mu.sum()
    for k in (1, INF):
        with pytest.warns(AccuracyWarning, match="KKT residual"):
            raw = cvx(mu, c, rho, dispatchers=k, polish=False)
        assert np.max(np.abs(raw.loads - wf(mu, c, rho, dispatchers=k).loads)) < 1e-3
        with pytest.raises(ConvergenceError, match="CLARABEL"):
            cvx(mu, c, rho, dispatchers=k, polish=False, strict=True)


def test_thousand_servers_agree():
    rng = np.random.default_rng(1000)
    mu, c = rng.uniform(0.5, 2.0, 1000), rng.uniform(0.5, 3.0, 1000)
    rho = 0.8 * mu.sum()
    for k in (1, INF):
        exact = wf(mu, c, rho, dispatchers=k).loads
        assert np.max(np.abs(cvx(mu, c, rho, dispatchers=k).loads - exact)) <= 1e-8


def test_heavy_traffic_and_ties():
    mu = np.array([1.0, 1.0, 2.0, 0.5])
    c = np.array([2.0, 2.0, 4.0, 1.0])  # every c_i/mu_i equal: all used, proportional loads
    for k in (1, INF):
        loads = wf(mu, c, 4.5 * (1 - 1e-9), dispatchers=k).loads
        assert np.allclose(loads, loads[0], rtol=0, atol=1e-12)
        assert np.allclose(cvx(mu, c, 4.5 * (1 - 1e-9), dispatchers=k).loads, loads, atol=1e-8)


# -- properties of the paper --------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(instances(max_servers=8, equal_costs=True))
def test_price_of_anarchy_at_most_number_of_servers_for_equal_costs(instance):
    mu, c, rho = instance
    m = PSRouting(service_rates=tuple(mu), holding_costs=tuple(c), work_rate=rho)
    poa = closed(m, "price_of_anarchy")
    assert 1.0 - 1e-12 <= poa <= len(mu) * (1 + 1e-12)


def test_equal_cost_bound_is_approached():
    mu = np.array([1.0, 1.0, 1e8])
    poa = closed(PSRouting(service_rates=tuple(mu), work_rate=mu.sum() - 1e-4), "price_of_anarchy")
    assert 2.99 < poa < 3.0


def test_price_of_anarchy_unbounded_with_server_dependent_costs():
    poas = []
    for big in (1e2, 1e4, 1e6):
        m = PSRouting(service_rates=(1.0, 1.0), holding_costs=(1.0, big), work_rate=1 - 1 / big)
        poas.append(closed(m, "price_of_anarchy"))
        assert closed(m, "servers_used_decentralized") == [0]
        assert closed(m, "servers_used_centralized") == [0, 1]
        assert poas[-1] == pytest.approx(math.sqrt(big) / 2, rel=0.06)
    assert poas[2] > 400


@settings(max_examples=150, deadline=None)
@given(instances(), st.integers(2, 6))
def test_used_sets_nested_and_costs_ordered(instance, k):
    mu, c, rho = instance
    sets, costs = {}, {}
    for regime in (1, k, INF):
        sol = wf(mu, c, rho, regime)
        loads = sol.loads
        sets[regime] = set(sol.servers_used)
        costs[regime] = sol.cost
        assert abs(mu @ loads - rho) <= 1e-12 * rho + 1e-15
        assert np.all(loads >= 0) and np.all(loads < 1)
    assert sets[INF] <= sets[k] <= sets[1]  # selfish jobs use a subset of the optimal servers
    assert costs[1] <= costs[k] * (1 + 1e-12) and costs[k] <= costs[INF] * (1 + 1e-12)


# -- several classes: a size-independent policy is optimal ------------------------------------

def test_per_class_routing_is_size_independent():
    m = PSRouting.create(service_rates="1,2,0.5", holding_costs="1,2,3", arrival_rates="1,0.5", mean_sizes="0.5,2")
    assert m.total_work_rate == pytest.approx(1.5)
    one_class = PSRouting.create(service_rates="1,2,0.5", holding_costs="1,2,3", work_rate=1.5)
    for regime in ("centralized", "decentralized"):
        routing = np.array(closed(m, f"routing_{regime}"))
        assert routing.shape == (2, 3)
        assert np.allclose(routing.sum(axis=1), 1.0) and np.allclose(routing[0], routing[1])
        loads = (m.class_work_rates @ routing) / np.array([1, 2, 0.5])
        assert np.allclose(loads, closed(m, f"loads_{regime}"), atol=1e-14)
        # the loads do not depend on how the work is split into classes
        assert np.allclose(loads, closed(one_class, f"loads_{regime}"), atol=1e-14)
    # the class-aware program (routing variables per class) reaches the size-blind cost,
    # and every class sees the same marginal cost per unit of work
    r = solve_convex(m, "price_of_anarchy")
    for regime in ("centralized", "decentralized"):
        info = r.info[regime]
        assert info["n_variables"] == 6
        assert info["objective"] is not None
        assert np.ptp(info["multiplier_solver"]) <= 1e-4 * info["multiplier"]
        assert info["cost"] == pytest.approx(closed(m, f"cost_{regime}"), rel=1e-12)
    assert r.value == pytest.approx(closed(m, "price_of_anarchy"), rel=1e-12)


# -- atomic dispatchers -------------------------------------------------------------------

def test_atomic_symmetric_three_ways():
    mu, c, rho = np.array([1.0, 2.0, 0.5]), np.array([1.0, 3.0, 0.2]), 1.5
    for k in (2, 5):
        exact = wf(mu, c, rho, dispatchers=k)
        br = best_response(RoutingProblem(mu, c, dispatcher_rates=[rho / k] * k))
        symmetric = best_response(RoutingProblem(mu, c, rho, dispatchers=k))  # rho/K each, the same game
        conv = cvx(mu, c, rho, dispatchers=k)
        assert np.allclose(br.loads, exact.loads, atol=1e-10)
        assert np.allclose(symmetric.loads, br.loads, atol=1e-14)
        assert np.allclose(conv.loads, exact.loads, atol=1e-10)
        assert br.multiplier is None and br.residual == br.info["nash_gap"]
        assert br.info["nash_gap"] <= 1e-9
        assert br.info["cost"] == pytest.approx(exact.info["cost"], rel=1e-9)
        flows = np.array(br.info["flows"])
        assert np.allclose(flows, flows[0], atol=1e-10)  # symmetric


def test_atomic_limits_and_ordering():
    mu, c, rho = np.array([1.0, 2.0]), np.array([1.0, 1.0]), 1.5
    opt = wf(mu, c, rho).info["cost"]
    ward = wf(mu, c, rho, dispatchers=INF).info["cost"]
    assert wf(mu, c, rho, dispatchers=1).loads.tolist() == wf(mu, c, rho).loads.tolist()
    assert best_response(RoutingProblem(mu, c, dispatcher_rates=[rho])).info["cost"] == pytest.approx(opt, rel=1e-12)
    assert wf(mu, c, rho, dispatchers=10**7).info["cost"] == pytest.approx(ward, rel=1e-6)
    costs = [wf(mu, c, rho, dispatchers=k).info["cost"] for k in (1, 2, 4, 8)]
    assert costs == sorted(costs) and opt <= costs[1] <= ward


def test_asymmetric_dispatchers_no_worse_than_symmetric():
    """Ayesta, Brun & Prabhu (2011, Thm. 1): for a given total rate the symmetric game is worst."""
    rng = np.random.default_rng(7)
    for _ in range(10):
        n = rng.integers(2, 6)
        mu, c = 10 ** rng.uniform(-1, 1, n), 10 ** rng.uniform(-1, 1, n)
        rho = mu.sum() * rng.uniform(0.05, 0.95)
        rates = rng.dirichlet(np.ones(3)) * rho
        r = best_response(RoutingProblem(mu, c, dispatcher_rates=rates))
        assert r.info["nash_gap"] <= 1e-9
        assert np.allclose(np.array(r.info["flows"]).sum(axis=1), rates, rtol=1e-12)
        sym = wf(mu, c, rho, dispatchers=3).info["cost"]
        assert wf(mu, c, rho).info["cost"] <= r.info["cost"] * (1 + 1e-12)
        assert r.info["cost"] <= sym * (1 + 1e-9)


def test_atomic_poa_bounded_by_sqrt_k_where_wardrop_is_unbounded():
    m = PSRouting(service_rates=(1.0, 1.0), holding_costs=(1.0, 1e6), work_rate=1 - 1e-6, dispatchers=4)
    assert closed(m, "price_of_anarchy") > 400
    assert 1.0 < closed(m, "price_of_anarchy_atomic") <= 2.0


# -- validation and failures ------------------------------------------------------------------

@pytest.mark.parametrize(
    "params, error, message",
    [
        (dict(service_rates="1,2", work_rate=3.2), UnstableError,
         "work_rate must be < total service rate 3; got 3.2"),
        (dict(service_rates="1,2", work_rate=3), UnstableError, "work_rate must be < total service rate 3"),
        (dict(service_rates="1,2", arrival_rates="1,2", mean_sizes="1,1"), UnstableError,
         "work rate sum(arrival_rates * mean_sizes) must be < total service rate 3; got 3"),
        (dict(service_rates="1,0", work_rate=0.5), ModelError, "service_rates must be > 0; got '0'"),
        (dict(service_rates="1,2", holding_costs="1,-1", work_rate=0.5), ModelError,
         "holding_costs must be > 0; got '-1'"),
        (dict(service_rates="1,2", holding_costs="1", work_rate=0.5), ModelError,
         "holding_costs must have one value per server (2); got 1"),
        (dict(service_rates="1,2"), ModelError, "give exactly one of work_rate or arrival_rates"),
        (dict(service_rates="1,2", work_rate=1, arrival_rates="1"), ModelError, "give exactly one of"),
        (dict(service_rates="1,2", work_rate=1, mean_sizes="1"), ModelError, "mean_sizes needs arrival_rates"),
        (dict(service_rates="1,2", arrival_rates="1,1", mean_sizes="1"), ModelError,
         "mean_sizes must have one value per class (2); got 1"),
        (dict(service_rates="1,2", work_rate=-1), ModelError, "work_rate must be > 0"),
        (dict(service_rates="1,2", work_rate=1, dispatchers=0), ModelError, "dispatchers must be >= 1"),
    ],
)
def test_bad_input_one_line_error(params, error, message):
    with pytest.raises(error) as exc:
        PSRouting.create(**params)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_atomic_measure_needs_dispatchers():
    with pytest.raises(ModelError, match="need dispatchers"):
        closed(reference(), "cost_atomic")


def test_array_functions_validate():
    with pytest.raises(UnstableError, match="work_rate must be < total service rate 3"):
        wf([1, 2], [1, 1], 3.0)
    with pytest.raises(UnstableError):
        cvx([1, 2], [1, 1], 3.5)
    with pytest.raises(ModelError, match="holding_costs must each be > 0"):
        cvx([1, 2], [1, 0], 1.0)
    with pytest.raises(ModelError, match="service_rates"):
        wf([1, 0], None, 0.5)
    with pytest.raises(ModelError, match="dispatchers must be an integer"):
        wf([1, 2], None, 0.5, dispatchers=0.5)
    with pytest.raises(ModelError, match="dispatcher_rates"):
        RoutingProblem([1, 2], None, dispatcher_rates=[0.5, -0.1])
    with pytest.raises(UnstableError, match="sum of dispatcher_rates must be < total service rate 3"):
        RoutingProblem([1, 2], None, dispatcher_rates=[1.5, 1.5])
    with pytest.raises(ModelError, match="dispatchers must equal the number of dispatcher_rates"):
        RoutingProblem([1, 2], None, dispatchers=3, dispatcher_rates=[0.5, 0.5])
    with pytest.raises(ModelError, match="class_work_rates must be > 0 and sum to work_rate 1"):
        RoutingProblem([1, 2], None, 1.0, class_work_rates=[0.5, 0.4])


def test_solvers_declare_the_structure_they_need():
    """Unequal dispatchers are not a potential game: the closed form and the convex program refuse."""
    from exactq.catalogue import solve_representation

    unequal = RoutingProblem([1.0, 2.0], None, dispatcher_rates=[0.5, 1.0])
    for name in ("water-filling", "convex"):
        with pytest.raises(NotApplicableError, match="unequal work rates"):
            solve_representation(unequal, name)
    assert solve_representation(unequal).method == "best-response"  # the one that applies
    with pytest.raises(NotApplicableError, match="finite number of dispatchers"):
        solve_representation(RoutingProblem([1.0, 2.0], None, 1.5, dispatchers=INF), "best-response")


def test_solver_failures_name_the_solver():
    with pytest.raises(NotApplicableError, match="installed cvxpy solvers"):
        cvx([1, 2], [1, 1], 1.5, solver="NO_SUCH_SOLVER")
    with pytest.raises(NotApplicableError, match="solver OSQP cannot solve .* exponential cones .*CLARABEL"):
        cvx([1, 2], [1, 1], 1.5, solver="OSQP")  # no cones in a QP solver


def test_scs_as_second_solver():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no silent inaccuracy
        r = cvx([1, 2, 3], [3, 1, 2], 4.0, dispatchers=INF, solver="SCS")
    assert r.info["solver"] == "SCS"
    assert np.allclose(r.loads, wf([1, 2, 3], [3, 1, 2], 4.0, dispatchers=INF).loads, atol=1e-10)


# -- networks ---------------------------------------------------------------------------------

def test_braess_linear():
    without = network_equilibrium(*braess_network("linear", shortcut=False))
    eq = network_equilibrium(*braess_network("linear"))
    opt = network_optimum(*braess_network("linear"))
    assert without.cost == pytest.approx(1.5, abs=1e-10)
    assert eq.cost == pytest.approx(2.0, abs=1e-10)  # the paradox
    assert opt.cost == pytest.approx(1.5, abs=1e-10)
    assert eq.cost / opt.cost == pytest.approx(4 / 3, abs=1e-10)
    assert max(eq.residual, opt.residual) <= 1e-9
    assert eq.info["program"] == "equilibrium" and opt.info["program"] == "optimum"


def test_braess_queueing_network():
    without = network_equilibrium(*braess_network("queue", shortcut=False))
    with_link = network_equilibrium(*braess_network("queue"))
    assert without.cost == pytest.approx(22 / 15, abs=1e-10)
    assert with_link.cost == pytest.approx(1.6, abs=1e-10)
    flows = {(u, v): f for u, v, f in with_link.info["edge_flows"]}
    assert flows[("v", "w")] == pytest.approx(0.5, abs=1e-9) == with_link.flow_of("v", "w")
    assert with_link.info["path_costs"][0][3] == pytest.approx(1.6, abs=1e-10)
    assert with_link.info["path_costs_dual"][0][3] == pytest.approx(1.6, abs=1e-6)
    # adding a link never hurts the optimum
    opt_without = network_optimum(*braess_network("queue", shortcut=False)).cost
    assert network_optimum(*braess_network("queue")).cost <= opt_without + 1e-10


def test_parallel_links_network_is_ps_routing():
    mu, c, rho = [1.0, 2.0, 0.7], [1.0, 0.5, 2.0], 2.2
    g = nx.DiGraph()
    for i, (m, h) in enumerate(zip(mu, c)):  # s -> i (queue) -> t (free)
        g.add_edge("s", i, kind="ps", capacity=m, cost=h)
        g.add_edge(i, "t")
    for fn, k in ((network_optimum, 1), (network_equilibrium, INF)):
        r = fn(g, [("s", "t", rho)])
        exact = wf(mu, c, rho, dispatchers=k)
        flows = {(u, v): f for u, v, f in r.info["edge_flows"]}
        assert np.allclose([flows[("s", i)] / mu[i] for i in range(3)], exact.loads, atol=1e-10)
        assert r.cost == pytest.approx(exact.info["cost"], rel=1e-10)


def test_two_commodities():
    g = nx.DiGraph()
    g.add_edge("a", "m", capacity=3.0)
    g.add_edge("b", "m", capacity=3.0)
    g.add_edge("m", "x", capacity=2.5, cost=2.0)
    g.add_edge("m", "y", capacity=2.0)
    g.add_edge("a", "x", slope=1.0, offset=0.5)
    g.add_edge("b", "y", offset=1.0)
    g.add_edge("x", "y", capacity=4.0)
    demands = {("a", "x"): 1.0, ("a", "y"): 0.5, ("b", "x"): 0.8}
    for fn in (network_optimum, network_equilibrium):
        r = fn(g, demands)
        assert r.residual <= 1e-9
        for o, d, rate, cost in r.info["path_costs"]:
            assert cost > 0
        for (_, _, _, a), (_, _, _, b) in zip(r.info["path_costs"], r.info["path_costs_dual"]):
            assert a == pytest.approx(b, rel=1e-5)
    assert network_equilibrium(g, demands).cost / network_optimum(g, demands).cost >= 1 - 1e-12


def test_network_errors():
    g, demands = braess_network("queue")
    with pytest.raises(UnstableError, match="max-flow capacity 4 between them; got 4"):
        network_equilibrium(g, [("s", "t", 4.0)])
    with pytest.raises(ModelError, match="not in the graph"):
        network_optimum(g, [("s", "zz", 1.0)])
    with pytest.raises(ModelError, match="no directed path"):
        network_optimum(g, [("t", "s", 1.0)])
    bad = g.copy()
    bad.edges["s", "v"]["capacity"] = 0.0
    with pytest.raises(ModelError, match="edge s->v: capacity must be > 0; got 0.0"):
        network_optimum(bad, demands)
    bad = g.copy()
    bad.edges["v", "t"]["slope"] = -1
    with pytest.raises(ModelError, match="edge v->t: slope must be >= 0"):
        network_optimum(bad, demands)
    with pytest.raises(NotApplicableError, match="DiGraph"):
        network_optimum(nx.Graph(g), demands)
    # two demands that fit alone but not together
    h = nx.DiGraph()
    h.add_edge("a", "m", capacity=5.0)
    h.add_edge("b", "m", capacity=5.0)
    h.add_edge("m", "t", capacity=1.0)
    with pytest.raises(UnstableError, match="infeasible"):
        network_optimum(h, [("a", "t", 0.6), ("b", "t", 0.6)])


# -- documentation examples and reproduction --------------------------------------------------------------------------

def test_doctests():
    import doctest

    import exactq.models.ps_routing
    import exactq.representations.routing
    import exactq.solvers.network_routing
    import exactq.solvers.routing

    for module in (exactq.models.ps_routing, exactq.solvers.routing, exactq.solvers.network_routing,
                   exactq.representations.routing):
        failed, attempted = doctest.testmod(module)
        assert attempted > 0 and failed == 0, module.__name__


def test_reproduction(tmp_path):
    from exactq.reproduce.ps_routing import reproduce_ps_routing

    text = reproduce_ps_routing(tmp_path, scale="smoke")  # 20 random instances, a 3 x 5 grid
    assert "1.060660" in text
    data = json.loads((tmp_path / "ps_routing.json").read_text())
    assert all(r["poa"] <= r["bound"] for r in data["equal_costs_family"])
    assert all(r["max_poa"] <= r["bound"] for r in data["equal_costs_random"])
    assert data["server_dependent_costs"][-1]["poa"] > 1000
    assert all(r["max_poa_found"] <= r["upper_bound"] for r in data["atomic_worst_case"])
