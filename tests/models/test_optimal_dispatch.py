"""Tests of the optimal-dispatch model: the optimal dynamic policy of parallel exponential queues.

Independent checks: the M/M/1/K closed form (one server: nothing to decide); the
symmetric two-server system, where JSQ is optimal (Winston 1977; Weber 1978), against
the ``jsq`` model's own chain and the compensation series of MODELS.md; the heuristics'
costs against the ``jsq`` model's chains (ties random and fastest); the optimum and the
minimal response time against the enumeration of every deterministic policy of a small
system; policy iteration against value iteration and the LP (``verify``).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

import exactq
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.models.optimal_dispatch import OptimalDispatch, heuristic_weights
from exactq.representations.mdp import Scheduler
from exactq.solvers.mdp_average import evaluate_chain


def mm1k(lam, mu, K):
    rho = lam / mu
    pi = rho ** np.arange(K + 1)
    pi /= pi.sum()
    return pi


def test_single_server_is_the_mm1k_queue():
    lam, mu, K = 1.2, 1.0, 8
    pi = mm1k(lam, mu, K)
    L = float(pi @ np.arange(K + 1))
    r = exactq.solve("optimal-dispatch", arrival_rate=lam, service_rates=str(mu), capacity=K)
    assert r.lower <= L <= r.upper and (r.upper - r.lower) / L < 1e-9
    t = exactq.solve("optimal-dispatch", "mean_response_time", arrival_rate=lam, service_rates=str(mu), capacity=K)
    T = L / (lam * (1 - pi[K]))
    assert t.lower <= T + 1e-12 and T <= t.upper + 1e-12
    h = exactq.solve("optimal-dispatch", "holding_cost", arrival_rate=lam, service_rates=str(mu), capacity=K,
                     holding_costs="2.5")
    assert abs(h.value - 2.5 * L) < 1e-9 * L
    for gap in ("gap_jsq", "gap_sed", "gap_sa_jsq"):
        g = exactq.solve("optimal-dispatch", gap, arrival_rate=lam, service_rates=str(mu), capacity=K)
        assert abs(g.value) < 1e-9


def test_symmetric_servers_jsq_is_optimal():
    # MODELS.md: capacity 20 gives the infinite-buffer symmetric JSQ value 1.42632075 to 10 digits
    r = exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="1,1", capacity=20)
    assert abs(r.value - 1.42632075) < 5e-9
    chain = exactq.solve("jsq", "mean_number", arrival_rate=1.0, service_rates="1,1", capacity=20, method="ctmc")
    assert abs(r.value - chain.value) < 1e-9 * r.value
    for h in ("jsq", "sed", "sa_jsq"):
        assert abs(r.info["heuristics"][h]["gap"]) < 1e-9
    curve = r.info["policy"]["switching_curve"]
    assert curve[:19] == list(range(1, 20))  # join the shorter queue; ties to queue 1 (lower index)
    assert r.info["policy"]["switching_curve_monotone"]


@pytest.mark.parametrize("lam, rates, K", [(1.5, "2,1", 12), (2.7, "3,1", 10), (0.9, "1,0.5", 9)])
def test_heuristics_are_the_jsq_chains_and_the_optimum_beats_them(lam, rates, K):
    r = exactq.solve("optimal-dispatch", arrival_rate=lam, service_rates=rates, capacity=K)
    heur = r.info["heuristics"]
    for ties, name in (("random", "jsq"), ("fastest", "sa_jsq")):
        chain = exactq.solve("jsq", "mean_number", arrival_rate=lam, service_rates=rates, capacity=K, ties=ties,
                             method="ctmc")
        assert abs(heur[name]["value"] - chain.value) < 1e-9 * chain.value, name
    for name, h in heur.items():
        assert h["gap_lower"] >= -1e-9 and h["gap_lower"] <= h["gap"] <= h["gap_upper"], name
    assert heur["jsq"]["gap"] > 1e-3  # heterogeneous servers: plain JSQ is not optimal
    assert r.info["policy"]["switching_curve_monotone"]


def _all_policies_values(model: OptimalDispatch):
    """Mean number and mean response time of every deterministic policy of a small model."""
    mdp = model.mdp()
    lam_acc = mdp.state_rewards["accepted"] * mdp.uniformisation_rate
    num = mdp.state_rewards["number"] * mdp.uniformisation_rate
    ranges = [range(mdp.row_groups[s], mdp.row_groups[s + 1]) for s in range(mdp.n_states)]
    out = []
    for ch in itertools.product(*ranges):
        pi = evaluate_chain(mdp.induced(Scheduler(np.array(ch))), np.zeros(mdp.n_states))["stationary"]
        out.append((float(pi @ num), float(pi @ num) / float(pi @ lam_acc)))
    return np.array(out)


def test_optimum_and_minimal_response_time_match_policy_enumeration():
    # two servers, capacity 3: 9 states with two choices, 512 deterministic policies; heavy load so that
    # blocking differs between policies (minimising E[L] is then not minimising E[T])
    m = OptimalDispatch.create(arrival_rate=3.5, service_rates="2,1", capacity=3)
    values = _all_policies_values(m)
    best_L, best_T = values[:, 0].min(), values[:, 1].min()
    r = exactq.solve(m, "mean_number")
    assert r.lower - 1e-12 <= best_L <= r.upper + 1e-12
    t = exactq.solve(m, "mean_response_time")
    assert t.lower - 1e-12 <= best_T <= t.upper + 1e-12 and (t.upper - t.lower) / best_T < 1e-9
    number_optimal = t.info["response_time"]["number_optimal_policy"]["mean_response_time"]
    assert best_T <= number_optimal + 1e-12


def test_verify_and_other_solvers_agree():
    kw = dict(arrival_rate=2.0, service_rates="2,1", capacity=10)
    r = exactq.solve("optimal-dispatch", verify=True, **kw)
    v = r.info["verify"]
    assert v["agree"] and v["value-iteration"]["agree"] and v["linear-program"]["agree"]
    for solver in ("value-iteration", "linear-program"):
        o = exactq.solve("optimal-dispatch", options={"solver": solver}, **kw)
        assert abs(o.value - r.value) < 1e-9 * r.value and o.lower <= r.upper and r.lower <= o.upper


def test_infinite_capacity_by_growing_truncations():
    # symmetric: the compensation series of the jsq model is the independent value
    r = exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="1,1", tol=1e-9)
    series = exactq.solve("jsq", "mean_number", arrival_rate=1.0, service_rates="1,1")
    assert abs(r.value - series.value) < 2e-9 * series.value
    trunc = r.info["truncation"]
    assert trunc["stopped_by"] == "tol" and trunc["rule"] == "block" and len(trunc["history"]) >= 2
    assert r.error_estimate <= 1e-9 * r.value
    with pytest.warns(exactq.errors.AccuracyWarning, match="truncation 12: probability mass"):
        fixed = exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="1,1", truncation=12)
    assert fixed.info["truncation"]["level"] == 12
    # mean response time without losses is E[L] / arrival_rate
    t = exactq.solve("optimal-dispatch", "mean_response_time", arrival_rate=1.0, service_rates="1,1")
    assert abs(t.value - r.value / 1.0) < 2e-9 * r.value


def test_three_servers_policy_table_and_export(tmp_path):
    out = tmp_path / "policy.json"
    r = exactq.solve("optimal-dispatch", arrival_rate=2.4, service_rates="2,1,1", capacity=5,
                     options={"policy_out": str(out)})
    pol = r.info["policy"]
    assert pol["table_entries"] == 6 ** 3 == r.n_states and pol["export"] == str(out)
    data = json.loads(out.read_text())
    assert data["variables"] == ["q1", "q2", "q3"] and len(data["states"]) == 216
    names = [data["action_names"][a] for a in data["actions"]]
    assert names[0] == "queue1" and names[-1] == "lost"  # empty system: the fastest server; all full: lost
    # the exported policy's cost is the optimum
    m = OptimalDispatch.create(arrival_rate=2.4, service_rates="2,1,1", capacity=5)
    mdp = m.mdp()
    choice = mdp.row_groups[:-1] + np.array([np.flatnonzero(
        mdp.actions[mdp.row_groups[s]:mdp.row_groups[s + 1]] == a)[0] for s, a in enumerate(data["actions"])])
    pi = evaluate_chain(mdp.induced(Scheduler(choice)), np.zeros(mdp.n_states))["stationary"]
    assert abs(float(pi @ mdp.state_rewards["number"]) * mdp.uniformisation_rate - r.value) < 1e-9 * r.value
    # the two slow servers are alike: SA-JSQ and JSQ still differ from the optimum
    assert all(h["gap"] > 0 for h in r.info["heuristics"].values())


def test_heuristic_weights_respect_full_queues():
    q = np.array([[3, 1], [2, 3], [0, 0]])
    w = heuristic_weights(q, np.array([1.0, 2.0]), 3, "sa_jsq")
    assert w.tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ModelError, match="policy must be one of"):
        heuristic_weights(q, np.array([1.0, 2.0]), 3, "jiq")


def test_parameter_errors_are_one_line():
    with pytest.raises(UnstableError, match="arrival_rate must be < total service rate 3 for stability; got 3"):
        exactq.model("optimal-dispatch", arrival_rate=3.0, service_rates="2,1")
    exactq.model("optimal-dispatch", arrival_rate=30.0, service_rates="2,1", capacity=4)  # finite: any load
    with pytest.raises(ModelError, match="holding_costs must have one entry per server"):
        exactq.model("optimal-dispatch", arrival_rate=1.0, service_rates="2,1", holding_costs="1,2,3")
    with pytest.raises(ModelError, match="capacity must be >= 1"):
        exactq.model("optimal-dispatch", arrival_rate=1.0, service_rates="2,1", capacity=0)
    with pytest.raises(NotApplicableError, match="option 'foo' does not apply"):
        exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="2,1", capacity=3, options={"foo": 1})
    with pytest.raises(NotApplicableError, match="truncation applies to capacity=inf only"):
        exactq.solve("optimal-dispatch", arrival_rate=1.0, service_rates="2,1", capacity=3, truncation=5)


def test_command_line(capsys):
    from exactq.cli import main

    code = main(["solve", "optimal-dispatch", "arrival_rate=1.5", "service_rates=2,1", "capacity=30",
                 "--measure", "mean_number", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["lower"] <= out["value"] <= out["upper"]
    assert (out["upper"] - out["lower"]) / out["value"] <= 1e-9 and out["n_states"] == 961
    assert len(out["info"]["policy"]["switching_curve"]) == 30
    code = main(["solve", "optimal-dispatch", "arrival_rate=1.5", "service_rates=2,1", "capacity=-1"])
    assert code == 2 and "capacity must be >= 1" in capsys.readouterr().err


def test_reproduction_table_small(tmp_path):
    from exactq.reproduce import reproduction_names
    from exactq.reproduce.optimal_dispatch import dispatch_table

    assert "optimal-dispatch" in reproduction_names()
    rows = dispatch_table(systems=(((2.0, 1.0), 8), ((3.0, 2.0, 1.0), 4)), loads=(0.5, 0.8))
    assert len(rows) == 4
    for row in rows:
        assert row["lower"] <= row["optimum"] <= row["upper"]
        for h in ("jsq", "sed", "sa_jsq"):
            assert row[h] >= row["lower"] - 1e-9 and row[f"gap_{h}"] > -1e-9
    assert rows[0]["switching_curve"][0] == 1 and rows[0]["monotone"]


@pytest.mark.parametrize("lam,K", [(1.2, 8), (0.7, 5), (1.9, 12), (1.0, 9)])
def test_single_server_bracket_encloses_the_exact_rational_value(lam, K):
    # the span bounds are widened by their rounding: against the M/M/1/K mean number in 40 digits (the float
    # closed form itself rounds by a few ulps; before the widening (1.2, 8) gave a bracket 3e-15 below it)
    import mpmath

    with mpmath.workdps(40):
        rho = mpmath.mpf(lam)
        w = [rho ** k for k in range(K + 1)]
        exact = sum(k * wk for k, wk in enumerate(w)) / sum(w)
    r = exactq.solve("optimal-dispatch", arrival_rate=lam, service_rates="1", capacity=K)
    assert mpmath.mpf(r.lower) <= exact <= mpmath.mpf(r.upper)
    assert (r.upper - r.lower) / r.value < 1e-12
