"""Join-the-shortest-queue: reference values from MODELS.md, an independently hand-built
chain, identities (Erlang B, truncation = capacity, equal rates), conservation laws,
the solvers against each other and against larger truncations.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import exactq
from exactq import solve
from exactq.errors import ModelError, UnstableError
from exactq.solvers.stationary import solve_stationary as solve_chain


def jsq(measure="mean_number", **kw):
    kw.setdefault("method", "ctmc")
    return solve("jsq", measure, **kw)


# ---------------------------------------------------------------------------------
# reference values (MODELS.md, "Shortest queue"), to 1e-8
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, measure, expected",
    [
        (dict(arrival_rate=1.0, service_rates="1,1"), "mean_number", 1.42632075),
        (dict(arrival_rate=1.8, service_rates="1,1"), "mean_number", 9.85484308),
        (dict(arrival_rate=1.8, service_rates="1,1"), "mean_waiting_time", 4.47491282),
        (dict(arrival_rate=2.0, service_rates="1,1", capacity=5), "blocking_probability", 0.0996884735),
        (dict(arrival_rate=2.0, service_rates="1,1", capacity=5), "mean_number", 5.43457965),
    ],
    ids=["L-rho0.5", "L-rho0.9", "W-rho0.9", "block-K5", "L-K5"],
)
def test_reference_values(params, measure, expected):
    r = jsq(measure, **params)
    assert r.value == pytest.approx(expected, abs=1e-8)
    if r.error_estimate is not None:
        assert r.error_estimate < 1e-8


def test_default_method_and_measure():
    r = solve("jsq", arrival_rate=1.0, service_rates="1,1")
    assert r.measure == "mean_number"
    assert r.value == pytest.approx(1.42632075, abs=1e-8)


# ---------------------------------------------------------------------------------
# an independently hand-built chain
# ---------------------------------------------------------------------------------
def hand_built_jsq(lam, mus, K, ties="random"):
    """Stationary law of JSQ on {0..K}^n, one state at a time; arrivals finding all queues at K are lost."""
    n = len(mus)
    states = list(itertools.product(range(K + 1), repeat=n))
    where = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for s in states:
        i = where[s]
        open_queues = [k for k in range(n) if s[k] < K]
        if open_queues:
            shortest = min(s[k] for k in open_queues)
            tied = [k for k in open_queues if s[k] == shortest]
            if ties == "fastest":
                top = max(mus[k] for k in tied)
                tied = [k for k in tied if mus[k] == top]
            for k in tied:
                t = list(s)
                t[k] += 1
                Q[i, where[tuple(t)]] += lam / len(tied)
        for k in range(n):
            if s[k] > 0:
                t = list(s)
                t[k] -= 1
                Q[i, where[tuple(t)]] += mus[k]
    np.fill_diagonal(Q, -Q.sum(axis=1))
    A = Q.T.copy()
    A[-1, :] = 1.0
    b = np.zeros(len(states))
    b[-1] = 1.0
    pi = np.linalg.solve(A, b)
    S = np.array(states)
    full = (S == K).all(axis=1)
    return pi, S, full


@pytest.mark.parametrize(
    "lam, mus, ties, K",
    [
        (1.2, (1.0, 1.0), "random", 14),
        (1.5, (1.0, 2.0), "random", 12),
        (1.5, (1.0, 2.0), "fastest", 12),
        (4.0, (1.0, 1.5), "random", 6),  # overloaded: only a finite capacity makes sense
        (1.0, (0.5, 1.0, 0.75), "fastest", 5),
    ],
)
def test_against_a_hand_built_chain(lam, mus, ties, K):
    pi, S, full = hand_built_jsq(lam, mus, K, ties)
    rates = ",".join(str(m) for m in mus)
    L = float(pi @ S.sum(axis=1))
    B = float(pi[full].sum())
    kw = dict(arrival_rate=lam, service_rates=rates, ties=ties, capacity=K)
    assert jsq("mean_number", **kw).value == pytest.approx(L, rel=1e-11)
    assert jsq("blocking_probability", **kw).value == pytest.approx(B, rel=1e-10)
    np.testing.assert_allclose(jsq("mean_queue_lengths", **kw).value, pi @ S, rtol=1e-11)
    assert jsq("prob_empty", **kw).value == pytest.approx(float(pi[S.sum(axis=1) == 0].sum()), rel=1e-11)
    W = float(pi @ np.maximum(S - 1, 0).sum(axis=1)) / (lam * (1 - B))
    assert jsq("mean_waiting_time", **kw).value == pytest.approx(W, rel=1e-10)


def test_truncated_infinite_model_is_the_capacity_model():
    """Arrivals are blocked only when every queue is at the level: exactly a capacity-K system."""
    for K in (5, 17):
        trunc = jsq("mean_number", arrival_rate=1.4, service_rates="1,1.5", truncation=K, tol=0.5)
        cap = jsq("mean_number", arrival_rate=1.4, service_rates="1,1.5", capacity=K)
        assert trunc.value == pytest.approx(cap.value, rel=1e-12)
        assert trunc.n_states == cap.n_states == (K + 1) ** 2


# ---------------------------------------------------------------------------------
# identities and conservation laws
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("lam", [0.3, 1.0, 2.0, 7.5])
def test_capacity_one_two_servers_is_the_erlang_loss_system(lam):
    a = Fraction(lam).limit_denominator(100)
    erlang_b = float((a**2 / 2) / (1 + a + a**2 / 2))
    b = jsq("blocking_probability", arrival_rate=lam, service_rates="1,1", capacity=1).value
    assert b == pytest.approx(erlang_b, rel=1e-12)
    mmck = solve("mmck", "blocking_probability", arrival_rate=lam, servers=2, capacity=2).value
    assert b == pytest.approx(mmck, rel=1e-12)
    L = jsq("mean_number", arrival_rate=lam, service_rates="1,1", capacity=1).value
    assert L == pytest.approx(lam * (1 - erlang_b), rel=1e-12)
    assert jsq("p_wait", arrival_rate=lam, service_rates="1,1", capacity=1).value == 0.0


@pytest.mark.parametrize(
    "params",
    [
        dict(arrival_rate=1.0, service_rates="1,1"),
        dict(arrival_rate=1.5, service_rates="1,2", ties="fastest"),
        dict(arrival_rate=3.0, service_rates="1,2", capacity=4),
        dict(arrival_rate=1.5, service_rates="1,0.5,1.5", truncation=12),
    ],
)
def test_mean_queue_lengths_sum_to_mean_number(params):
    per_queue = jsq("mean_queue_lengths", **params)
    total = jsq("mean_number", **params)
    n = len(params["service_rates"].split(","))
    assert isinstance(per_queue.value, list) and len(per_queue.value) == n
    assert sum(per_queue.value) == pytest.approx(total.value, rel=1e-12)
    with pytest.raises(TypeError, match="vector"):
        float(per_queue)


@pytest.mark.parametrize(
    "params",
    [
        dict(arrival_rate=1.2, service_rates="1,1"),
        dict(arrival_rate=2.5, service_rates="1,2", capacity=3),
        dict(arrival_rate=1.5, service_rates="1,2", ties="fastest"),
    ],
)
def test_littles_law_and_response_times(params):
    v = {m: jsq(m, **params).value for m in ("mean_number", "mean_response_time", "mean_waiting_time")}
    B = jsq("blocking_probability", **params).value if "capacity" in params else 0.0
    lam_eff = params["arrival_rate"] * (1 - B)
    assert v["mean_response_time"] == pytest.approx(v["mean_number"] / lam_eff, rel=1e-12)
    assert 0 < v["mean_waiting_time"] < v["mean_response_time"]
    if params["service_rates"] == "1,1":  # identical servers: T = W + 1/mu
        assert v["mean_response_time"] == pytest.approx(v["mean_waiting_time"] + 1.0, rel=1e-9)


@pytest.mark.parametrize("mus, ties, K", [((1.0, 2.0), "random", 6), ((1.0, 2.0, 0.5), "fastest", 5)])
def test_throughput_balance(mus, ties, K):
    """Accepted arrivals = departures: lam (1 - B) = sum_i mu_i P(q_i > 0)."""
    lam = 2.0
    m = exactq.model("jsq", arrival_rate=lam, service_rates=list(mus), ties=ties, capacity=K)
    chain = m.ctmc()
    sol = solve_chain(chain)
    pi = sol.pi
    busy = (chain.states > 0).T @ pi
    B = m.ctmc_measure("blocking_probability", chain, sol)
    assert lam * (1 - B) == pytest.approx(float(np.dot(mus, busy)), rel=1e-11)


def test_equal_rates_ties_fastest_is_ties_random():
    a = jsq("mean_queue_lengths", arrival_rate=1.5, service_rates="1,1", ties="fastest", truncation=40, tol=0.5)
    b = jsq("mean_queue_lengths", arrival_rate=1.5, service_rates="1,1", ties="random", truncation=40, tol=0.5)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-12)
    assert a.value[0] == pytest.approx(a.value[1], rel=1e-10)  # symmetry


def test_ties_fastest_puts_more_load_on_the_fast_server():
    kw = dict(arrival_rate=1.5, service_rates=[1.0, 2.0], capacity=40)
    out = {}
    for ties in ("random", "fastest"):
        m = exactq.model("jsq", ties=ties, **kw)
        chain = m.ctmc()
        sol = solve_chain(chain)
        pi = sol.pi
        out[ties] = {
            "L": m.ctmc_measure("mean_number", chain, sol),
            "queues": np.asarray(m.ctmc_measure("mean_queue_lengths", chain, sol)),
            "busy": (chain.states > 0).T @ pi,
        }
    r, f = out["random"], out["fastest"]
    assert abs(r["L"] - f["L"]) > 1e-3 * r["L"]  # the policies differ
    assert f["L"] < r["L"]  # and sending ties to the fast server helps here
    assert f["queues"][1] > r["queues"][1]  # more jobs at the fast server (index 1)
    assert f["busy"][1] > r["busy"][1]  # busy more often: it carries more of the load (2.0 * busy)
    assert f["busy"][0] < r["busy"][0]
    # and the same through the public API
    api = {t: jsq("mean_number", ties=t, arrival_rate=1.5, service_rates="1,2").value for t in ("random", "fastest")}
    assert api["fastest"] == pytest.approx(f["L"], rel=1e-9) and api["random"] == pytest.approx(r["L"], rel=1e-9)


def test_jsq_lies_between_mm2_and_two_separate_mm1_queues():
    for rho in (0.3, 0.6, 0.9):
        L = jsq("mean_number", arrival_rate=2 * rho, service_rates="1,1").value
        mm2 = solve("mmc", "mean_number", arrival_rate=2 * rho, servers=2).value
        assert mm2 == pytest.approx(2 * rho / (1 - rho**2), rel=1e-12)
        assert mm2 < L < 2 * rho / (1 - rho)


@pytest.mark.parametrize("K", [10, 30])
def test_finite_capacity_blocking_limits(K):
    """Yao & Knessl: at rho = 2 the blocking is about 1/(2K); for rho > 2 it tends to 1 - 2/rho."""
    at_two = jsq("blocking_probability", arrival_rate=2.0, service_rates="1,1", capacity=K).value
    assert at_two == pytest.approx(1 / (2 * K), rel=1e-3)
    for rho in (3.0, 6.0):
        b = jsq("blocking_probability", arrival_rate=rho, service_rates="1,1", capacity=K).value
        assert b == pytest.approx(1 - 2 / rho, rel=1e-3)


# ---------------------------------------------------------------------------------
# larger truncations, verification, solvers
# ---------------------------------------------------------------------------------
def test_heterogeneous_three_servers_against_a_larger_truncation():
    kw = dict(arrival_rate=1.2, service_rates="1,1.5,0.5")
    auto = jsq("mean_number", **kw)
    level = auto.info["truncation"]["level"]
    bigger = jsq("mean_number", truncation=level + 4, **kw)
    assert bigger.n_states == (level + 5) ** 3
    assert auto.value == pytest.approx(bigger.value, rel=1e-9)
    assert abs(auto.value - bigger.value) <= auto.error_estimate + 1e-14 * auto.value
    q = jsq("mean_queue_lengths", truncation=level, **kw).value
    assert q[2] > q[0] > q[1]  # jobs linger longest at the slowest server


def test_automatic_truncation_is_reported():
    r = jsq("mean_number", arrival_rate=1.8, service_rates="1,1")
    t = r.info["truncation"]
    assert t["rule"] == "block" and t["level"] == t["history"][-1]["level"]
    assert t["boundary_mass"] <= 1e-9
    # identical servers: the chain lumped by symmetry (sorted queue lengths) is solved
    assert r.info["lumped"] and r.n_states == (t["level"] + 1) * (t["level"] + 2) // 2
    assert 0 <= r.error_estimate <= 1e-9 * r.value
    full = jsq("mean_number", arrival_rate=1.8, service_rates="1,1", lump=False)
    assert full.n_states == (full.info["truncation"]["level"] + 1) ** 2
    assert full.value == pytest.approx(r.value, rel=1e-12)


def test_verify_reports_agreement():
    r = jsq("mean_number", arrival_rate=1.0, service_rates="1,2", verify=True)
    v = r.info["verify"]
    assert v["agree"] is True and v["dps"] == 50
    assert v["abs_diff"] <= 1e-12
    assert v["mp_relative_residual"] < 1e-40
    assert v["value_mp"] == pytest.approx(r.value, rel=1e-12)


def test_verify_on_a_vector_measure():
    r = jsq("mean_queue_lengths", arrival_rate=2.0, service_rates="1,1", capacity=6, verify=True)
    assert r.info["verify"]["agree"] is True
    np.testing.assert_allclose(r.info["verify"]["value_mp"], r.value, rtol=1e-12)


@pytest.mark.parametrize("solver", ["direct", "gmres", "power", "gth", "mpmath"])
@pytest.mark.parametrize("rates, ties", [("1,1", "random"), ("1,2", "fastest"), ("1,2,0.5", "random")])
def test_all_stationary_solvers_agree_on_a_fixed_truncation(solver, rates, ties):
    level = 12 if rates.count(",") == 1 else 6
    kw = dict(arrival_rate=1.2, service_rates=rates, ties=ties, truncation=level, tol=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = solve("jsq", "mean_number", method="gth", **kw)
        r = solve("jsq", "mean_number", method=solver, **kw)
        q = solve("jsq", "mean_queue_lengths", method=solver, **kw)
    assert r.method == f"ctmc/{solver}"
    assert r.value == pytest.approx(reference.value, rel=1e-8 if solver == "power" else 1e-11)
    assert sum(q.value) == pytest.approx(r.value, rel=1e-12)
    n = rates.count(",") + 1
    if len(set(rates.split(","))) == 1:  # identical servers: lumped to sorted queue lengths
        assert r.info["lumped"] and r.n_states == math.comb(level + n, n)
    else:
        assert r.n_states == (level + 1) ** n


# ---------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------
def test_blocking_probability_needs_a_capacity():
    with pytest.raises(ModelError, match="blocking_probability needs a finite capacity; got capacity=inf"):
        jsq("blocking_probability", arrival_rate=1.0, service_rates="1,1")


def test_unstable_infinite_jsq_and_overloaded_finite_jsq():
    with pytest.raises(UnstableError, match=r"^arrival_rate must be < total service rate 3 for stability; got 3$"):
        jsq(arrival_rate=3.0, service_rates="1,2")
    r = jsq("blocking_probability", arrival_rate=3.0, service_rates="1,2", capacity=3)
    assert 0 < r.value < 1


def test_methods_that_do_not_apply():
    with pytest.raises(exactq.NotApplicableError, match="method 'closed-form' does not apply to model jsq"):
        solve("jsq", method="closed-form", arrival_rate=1.0, service_rates="1,1")


def test_jsq_without_capacity_needs_a_truncation_level():
    m = exactq.model("jsq", arrival_rate=1.0, service_rates="1,1")
    with pytest.raises(ModelError, match="needs a truncation level"):
        m.ctmc(None)
    assert m.is_infinite and m.n_servers == 2
    assert not exactq.model("jsq", arrival_rate=1.0, service_rates="1,1", capacity=3).is_infinite


def test_routing_rows_sum_to_one_unless_everything_is_full():
    from exactq.models.jsq import jsq_routing

    states = np.array(list(itertools.product(range(4), repeat=3)))
    rates = np.array([1.0, 3.0, 2.0])
    for ties in ("random", "fastest"):
        for cap in (math.inf, 3):
            R = jsq_routing(states, rates, ties, cap)
            full = (states >= cap).all(axis=1)
            np.testing.assert_allclose(R.sum(axis=1), np.where(full, 0.0, 1.0))
            assert np.all(R[states >= cap] == 0)  # never route to a full queue
            joined_len = (R > 0) * states + (R == 0) * 99
            shortest_open = np.where(states >= cap, 99, states).min(axis=1)
            assert np.all((joined_len.min(axis=1) == shortest_open) | full)
    R = jsq_routing(np.array([[2, 2, 2]]), rates, "fastest", math.inf)
    assert R.tolist() == [[0.0, 1.0, 0.0]]
    R = jsq_routing(np.array([[2, 2, 5]]), rates, "random", math.inf)
    assert R.tolist() == [[0.5, 0.5, 0.0]]


def test_loads_near_the_float_limit():
    """Loads are computed relative to the largest rate: no overflow, and the exact stability rule."""
    m = exactq.model("jsq", arrival_rate=1.5e308, service_rates="1e308,1e308")
    assert m.load == pytest.approx(0.75, rel=1e-15)
    with pytest.raises(UnstableError, match="total service rate 1e\\+308 for stability; got 1.7e\\+308"):
        exactq.model("jsq", arrival_rate=1.7e308, service_rates="5e307,5e307")
    with pytest.raises(UnstableError, match="total service rate 3 for stability; got 3$"):
        exactq.model("jsq", arrival_rate=3.0, service_rates="1,2")  # lambda = mu1 + mu2 exactly is unstable
    b = exactq.solve("jsq", "mean_number", method="bounds", threshold=4, arrival_rate=1e308,
                     service_rates="1e308,1e308")
    assert b.lower <= 1.42632075 <= b.upper


def test_parameters_say_that_the_arrival_rate_is_the_total():
    for name in ("jsq", "sed"):
        doc = {p.name: p.doc for p in exactq.catalogue.get_model(name).parameters}["arrival_rate"]
        assert "total" in doc and "not per server" in doc
