"""Round-robin to unreliable processors: the per-processor QBD against the joint CTMC (n = 2, 3), the
E_n/M/1 root, the MODELS.md references, M/M/1 with breakdowns, and the orderings of Liu & Righter."""

import doctest
import json
import math
import warnings

import numpy as np
import pytest

import exactq
import exactq.models.round_robin as rr_module
from exactq import solve
from exactq.cli import main
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.models.round_robin import arrival_map


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return solve(*args, **kwargs)


def test_doctests():
    assert doctest.testmod(rr_module).failed == 0


def test_models_md_reference_values():
    """n = 2, mu = 1, Lambda = 1: sigma = (3 - sqrt 5)/2, E[T] = 1.61803399; random splitting: 2."""
    for method in ("qbd", "closed-form"):
        r = solve("round-robin", "mean_response_time", method=method, servers=2, arrival_rate=1.0)
        assert r.value == pytest.approx(1.61803399, abs=5e-9)
        assert r.value == pytest.approx(1 / (1 - (3 - math.sqrt(5)) / 2), rel=1e-13)
        rnd = solve("round-robin", "mean_response_time", method=method, servers=2, arrival_rate=1.0, policy="random")
        assert rnd.value == pytest.approx(2.0, rel=1e-13)


CASES = [
    dict(servers=2, arrival_rate=1.6),
    dict(servers=2, arrival_rate=1.2, policy="random"),
    dict(servers=2, arrival_rate=1.2, dispatch="distributed"),
    dict(servers=2, arrival_rate=1.0, failure_rate=0.1, repair_rate=1.0),
    dict(servers=2, arrival_rate=1.0, failure_rate=0.2, repair_rate=2.0, dispatch="distributed"),
    dict(servers=2, arrival_rate=1.2, phases=2),
    dict(servers=2, arrival_rate=1.0, scv=3.0, policy="random"),
    dict(servers=3, arrival_rate=0.9),
    dict(servers=3, arrival_rate=0.6, failure_rate=0.05, repair_rate=1.0, options={"solver": "power"}),
    # 27 pointer states: the sparse LU fills badly (about a minute at K = 8), the power method takes 0.2 s
    dict(servers=3, arrival_rate=0.45, dispatch="distributed", options={"solver": "power"}),
]


@pytest.mark.parametrize("params", CASES, ids=[str(i) for i in range(len(CASES))])
def test_qbd_agrees_with_the_joint_ctmc(params):
    params = dict(params)
    options = params.pop("options", None)
    q = solve("round-robin", "mean_response_time", method="qbd", **params)
    c = quiet("round-robin", "mean_response_time", method="ctmc", tol=1e-11, options=options, **params)
    assert c.method.startswith("ctmc/") and c.info["truncation"]["rule"] == "block"
    assert q.value == pytest.approx(c.value, rel=1e-9)
    assert abs(q.value - c.value) <= c.error_estimate + 1e-12 * q.value
    n = params["servers"]
    total = solve("round-robin", "mean_number", method="qbd", **params).value
    per = solve("round-robin", "mean_number_per_processor", method="qbd", **params).value
    assert total == pytest.approx(n * per, rel=1e-14)
    assert total == pytest.approx(params["arrival_rate"] * q.value, rel=1e-13)  # Little


@pytest.mark.parametrize("n, lam", [(2, 1.3), (3, 2.4), (5, 4.0), (8, 2.0)])
def test_closed_form_root_agrees_with_the_qbd(n, lam):
    for policy in ("round-robin", "random"):
        a = solve("round-robin", "mean_response_time", method="closed-form", servers=n, arrival_rate=lam, policy=policy)
        b = solve("round-robin", "mean_response_time", method="qbd", servers=n, arrival_rate=lam, policy=policy)
        assert a.method == "closed-form" and a.value == pytest.approx(b.value, rel=1e-11)
    # sigma from its defining equation, by bisection here
    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (lam / (lam + 1 - mid)) ** n - mid > 0 else (lo, mid)
    rr = solve("round-robin", "mean_response_time", method="closed-form", servers=n, arrival_rate=lam)
    assert rr.info["sigma"] == pytest.approx(lo, abs=1e-13)
    assert rr.value == pytest.approx(1 / (1 - lo), rel=1e-12)


def test_random_routing_with_breakdowns_is_the_models_md_formula():
    """M/M/1 with breakdowns: E[N] = a rho (1 + gamma (delta + lambda) / delta^2) / (a - rho) + gamma a lambda / delta^2."""
    for n, lam, g, d, mu in [(2, 1.0, 0.2, 1.0, 1.0), (3, 2.0, 0.05, 0.5, 1.5), (4, 1.0, 1.0, 3.0, 0.7)]:
        l, rho, a = lam / n, lam / n / mu, d / (g + d)
        EN = a * rho * (1 + g * (d + l) / d**2) / (a - rho) + g * a * l / d**2
        r = solve("round-robin", "mean_number_per_processor", servers=n, arrival_rate=lam, service_rate=mu,
                  policy="random", failure_rate=g, repair_rate=d)
        assert r.value == pytest.approx(EN, rel=1e-11)


def test_liu_righter_orderings():
    """Round-robin beats random, and central round-robin beats distributed round-robin (means)."""
    for n, lam, fail in [(2, 1.5, 0.0), (3, 2.0, 0.1), (4, 2.0, 0.3)]:
        kw = dict(servers=n, arrival_rate=lam, failure_rate=fail, repair_rate=1.0 if fail else None)
        central = solve("round-robin", "mean_response_time", **kw).value
        distributed = solve("round-robin", "mean_response_time", dispatch="distributed", **kw).value
        random_ = solve("round-robin", "mean_response_time", policy="random", **kw).value
        assert central < distributed < random_


def test_completion_time_cdf_orders_round_robin_before_random():
    """P(D_k <= t): round-robin stochastically minimises the k-th completion time (Liu & Righter)."""
    kw = dict(servers=2, arrival_rate=1.0, k=3)
    for t in (1.0, 3.0, 6.0):
        rr = quiet("round-robin", "completion_time_cdf", t=t, **kw)
        assert rr.method == "ctmc/transient" and 0 < rr.value < 1
        dist = quiet("round-robin", "completion_time_cdf", t=t, dispatch="distributed", **kw).value
        rnd = quiet("round-robin", "completion_time_cdf", t=t, policy="random", **kw).value
        assert rr.value >= dist - 1e-12 and dist >= rnd - 1e-12


def test_first_completion_from_empty_is_a_convolution():
    """One processor from empty: D_1 = (first arrival, rate Lambda) + (its service, rate mu), so
    P(D_1 <= t) = 1 - (mu e^{-Lambda t} - Lambda e^{-mu t}) / (mu - Lambda); and D_2 <= t needs two arrivals."""
    lam, mu = 1.0, 1.5
    for t in (0.5, 2.0, 5.0):
        exact = 1 - (mu * math.exp(-lam * t) - lam * math.exp(-mu * t)) / (mu - lam)
        r = quiet("round-robin", "completion_time_cdf", servers=1, arrival_rate=lam, service_rate=mu, k=1, t=t,
                  tol=1e-12)
        assert r.value == pytest.approx(exact, rel=1e-10)
        two = quiet("round-robin", "completion_time_cdf", servers=1, arrival_rate=lam, service_rate=mu, k=2, t=t,
                    tol=1e-12).value
        assert two < r.value and two <= 1 - math.exp(-lam * t) * (1 + lam * t)  # P(2 arrivals by t)


def test_arrival_maps_have_the_right_rate():
    for n in (2, 3, 4):
        for policy, dispatch in [("round-robin", "central"), ("round-robin", "distributed"), ("random", "central")]:
            D0, D1 = arrival_map(n, 2.0, policy, dispatch)
            Q = D0 + D1
            assert np.allclose(Q.sum(1), 0)
            w = np.linalg.lstsq(np.vstack([Q.T, np.ones(len(Q))]), np.r_[np.zeros(len(Q)), 1.0], rcond=None)[0]
            assert float(w @ D1.sum(1)) == pytest.approx(2.0 / n, rel=1e-12)
    assert arrival_map(4, 1.0, "round-robin", "distributed")[0].shape == (35, 35)  # C(7, 4)


def test_cli_contract(capsys):
    base = ["solve", "round-robin", "servers=2", "arrival_rate=1.6", "service_rate=1", "policy=round-robin",
            "--measure", "mean_response_time", "--json"]
    for extra in ([], ["dispatch=distributed"], ["failure_rate=0.1", "repair_rate=1"], ["phases=2"]):
        assert main(base[:6] + extra + base[6:]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["method"] == "qbd" and out["warnings"] == [] and out["value"] > 1
        params = dict(a.split("=") for a in base[2:6] + extra)
        assert out["value"] == pytest.approx(solve("round-robin", "mean_response_time", method="qbd",
                                                   **params).value, rel=1e-14)


def test_bad_input():
    with pytest.raises(UnstableError, match=r"arrival_rate / servers = 0.95 must be < service_rate x availability = "
                                            r"0.909091"):
        exactq.model("round-robin", servers=2, arrival_rate=1.9, failure_rate=0.1, repair_rate=1.0)
    with pytest.raises(UnstableError, match="got arrival_rate=2"):
        exactq.model("round-robin", servers=2, arrival_rate=2.0)
    with pytest.raises(ModelError, match="failure_rate > 0 needs repair_rate"):
        exactq.model("round-robin", servers=2, arrival_rate=1.0, failure_rate=0.1)
    with pytest.raises(ModelError, match="give phases or scv, not both"):
        exactq.model("round-robin", servers=2, arrival_rate=1.0, phases=2, scv=0.5)
    with pytest.raises(ModelError, match="policy must be one of round-robin, random"):
        exactq.model("round-robin", servers=2, arrival_rate=1.0, policy="jsq")
    with pytest.raises(NotApplicableError, match="use --method ctmc"):
        solve("round-robin", "completion_time_cdf", method="qbd", servers=2, arrival_rate=1.0, k=2, t=1.0)
    with pytest.raises(NotApplicableError, match="closed-form needs reliable processors"):
        solve("round-robin", method="closed-form", servers=2, arrival_rate=1.0, failure_rate=0.1, repair_rate=1)
    with pytest.raises(NotApplicableError, match="joint chain is offered for servers <= 4"):
        solve("round-robin", method="ctmc", servers=5, arrival_rate=1.0)
    with pytest.raises(ModelError, match="completion_time_cdf needs k"):
        solve("round-robin", "completion_time_cdf", method="ctmc", servers=2, arrival_rate=1.0)
    assert main(["solve", "round-robin", "servers=2", "arrival_rate=3"]) == 2


def test_reproduction_runs_and_its_orderings_hold(tmp_path):
    from exactq.reproduce import reproduce

    text = reproduce("round-robin", tmp_path, scale="smoke")
    assert "Central against distributed" in text
    data = json.loads((tmp_path / "round_robin.json").read_text())
    for r in data["policies"]:
        assert r["round_robin"] < r["random"] and r["gain_%"] > 0
        if r["failure_rate"] == 0:  # random routing is M/M/1 at the same load: E[T] = 1 / (mu (1 - rho))
            assert r["random"] == pytest.approx(1 / (1 - r["load"]), rel=1e-10)
    for r in data["dispatch"]:
        assert r["central"] < r["distributed"] < r["random"]
    assert data["completion_ordered"] is True
