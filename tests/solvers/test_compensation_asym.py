"""Compensation approach for the asymmetric two-server JSQ vs the truncated CTMC and invariants."""

import json

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.solvers.compensation import symmetric_jsq
from exactq.solvers.compensation_asym import _route1, asymmetric_jsq

RATES = [(1.0, 2.0), (2.0, 1.0), (1.0, 1.5), (1.0, 4.0)]
LOADS = [0.2, 0.5, 0.8, 0.9]
MEASURES = ["mean_number", "mean_waiting_time", "mean_response_time", "mean_queue_lengths", "p_wait",
            "prob_empty"]


def _q(mu1, mu2, ties):
    return 0.5 if ties == "random" or mu1 == mu2 else (1.0 if mu1 > mu2 else 0.0)


def _ctmc_measures(lam, mu1, mu2, ties, K=None):
    """All measures from one truncated CTMC solve (what method="ctmc" computes, at a fixed level)."""
    model = exactq.model("jsq", arrival_rate=lam, service_rates=f"{mu1},{mu2}", ties=ties)
    from exactq.solvers.stationary import solve_stationary as solve_chain

    rho = lam / (mu1 + mu2)
    # JSQ keeps the queues balanced: P(max(Q1, Q2) >= K) ~ rho^(2K)
    K = K or int(np.ceil(np.log(1e-17) / np.log(rho) / 2)) + 10
    chain = model.ctmc(K)
    sol = solve_chain(chain)
    pi = sol.pi
    return {m: model.ctmc_measure(m, chain, sol) for m in MEASURES}, chain, pi


@pytest.mark.parametrize("ties", ["random", "fastest"])
@pytest.mark.parametrize("mu1, mu2", RATES)
def test_agrees_with_truncated_ctmc_on_the_grid(mu1, mu2, ties):
    for load in LOADS:
        lam = load * (mu1 + mu2)
        ref, _, _ = _ctmc_measures(lam, mu1, mu2, ties)
        for measure in MEASURES:
            r = exactq.solve("jsq", measure, method="compensation", arrival_rate=lam,
                             service_rates=f"{mu1},{mu2}", ties=ties)
            assert r.method == "compensation"
            got, want = np.atleast_1d(r.value), np.atleast_1d(ref[measure])
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14, err_msg=f"{measure} load={load}")
            assert r.error_estimate < 1e-11 * max(1.0, float(np.max(np.abs(got))))
            assert r.info["terms"] == r.nit > 0 and 0 <= r.info["contribution_ratio"] < 1


def test_public_api_ctmc_agrees_at_high_load():
    """The catalogue's adaptive ctmc method (not only a fixed truncation) at lambda/(mu1+mu2) = 0.9."""
    for ties in ("random", "fastest"):
        kw = dict(arrival_rate=2.7, service_rates="1,2", ties=ties)
        c = exactq.solve("jsq", "mean_waiting_time", method="ctmc", tol=1e-12, **kw)
        r = exactq.solve("jsq", "mean_waiting_time", method="compensation", **kw)
        assert r.value == pytest.approx(c.value, rel=1e-10)


def test_equal_rates_reproduce_the_symmetric_series():
    for rho in (0.1, 0.5, 0.9, 0.97):
        a = asymmetric_jsq(2 * rho, 1.0, 1.0, 0.5).measures()
        s = symmetric_jsq(rho).measures()
        for key in ("mean_number", "mean_waiting_time", "p_wait", "prob_empty"):
            assert a[key] == pytest.approx(s[key], rel=1e-12, abs=1e-15), (rho, key)
        assert a["mean_queue_lengths"][0] == pytest.approx(a["mean_queue_lengths"][1], rel=1e-12)
        # on equal servers the tie rule does not matter for the total
        b = asymmetric_jsq(2 * rho, 1.0, 1.0, 1.0).measures()
        assert b["mean_number"] == pytest.approx(s["mean_number"], rel=1e-12)
        assert b["mean_queue_lengths"][0] > b["mean_queue_lengths"][1]  # ties to queue 1
    # and the model routes equal rates to the symmetric walk
    qp = exactq.model("jsq", arrival_rate=1.0, service_rates="2,2", ties="fastest").quarter_plane()
    assert qp["kind"] == "symmetric-jsq"


@pytest.mark.parametrize("mu1, mu2, load, q", [(1.0, 2.0, 0.7, 0.5), (1.0, 4.0, 0.8, 0.0), (3.0, 1.0, 0.3, 1.0),
                                               (1.0, 30.0, 0.6, 0.5)])
def test_distribution_invariants(mu1, mu2, load, q):
    lam = load * (mu1 + mu2)
    s = asymmetric_jsq(lam, mu1, mu2, q)
    i, j = np.meshgrid(np.arange(100), np.arange(100), indexing="ij")
    p = s.probability(i, j)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # balance equations on a grid: the near-origin states (imposed), the seam at total K
    # (not imposed) and the series region
    res = s.balance_residual(i[:40, :40], j[:40, :40])
    assert np.max(np.abs(res)) < 1e-13
    m = s.measures()
    assert m["little_gap"] < 1e-12 * max(1.0, m["mean_waiting_time"])  # Little (Lq / lambda) = PASTA
    # flow balance per server: mu_k P(Q_k > 0) = rate of arrivals joining k
    r1 = _route1(i, j, q)
    assert mu1 * m["utilisation"][0] == pytest.approx(lam * float(np.sum(p * r1)), rel=1e-11)
    assert mu2 * m["utilisation"][1] == pytest.approx(lam * float(np.sum(p * (1 - r1))), rel=1e-11)
    assert m["mean_queue_lengths"][0] == pytest.approx(float(np.sum(p * i)), rel=1e-11)
    assert m["mean_queue_lengths"][1] == pytest.approx(float(np.sum(p * j)), rel=1e-11)


def test_pointwise_against_the_ctmc():
    ref, chain, pi = _ctmc_measures(2.1, 1.0, 2.0, "fastest")
    s = asymmetric_jsq(2.1, 1.0, 2.0, 0.0)
    p = s.probability(chain.states[:, 0], chain.states[:, 1])
    assert np.max(np.abs(p - pi)) < 1e-14


def test_series_region_and_product_forms():
    lam, mu1, mu2 = 2.4, 1.0, 2.0
    s = asymmetric_jsq(lam, mu1, mu2, 0.5)
    S = lam + mu1 + mu2
    for (c, a, b), ms, ml in ((s.upper, mu1, mu2), (s.lower, mu2, mu1)):
        curve = S * a * b - (lam * b**2 + ms * a**2 + ml * a * b**2)
        assert np.max(np.abs(curve) / (a * b)) < 1e-12
        assert np.all((0 < a) & (a < 1) & (0 < b) & (b < 1))
    assert s.diag[1][0] == pytest.approx((lam / (mu1 + mu2)) ** 2)  # alpha_0 = rho^2
    # the series reproduces the near-origin solve where both are valid (total = K)
    i = np.arange(s.K + 1)
    assert np.allclose(s.series(i, s.K - i), s.probability(i, s.K - i), rtol=0, atol=1e-16)
    # forcing a larger series start changes nothing
    t = asymmetric_jsq(lam, mu1, mu2, 0.5, K=s.K + 6)
    assert t.measures()["mean_number"] == pytest.approx(s.measures()["mean_number"], rel=1e-13)


def test_strong_asymmetry_and_extreme_loads():
    for mu2, load in ((100.0, 0.95), (30.0, 0.999), (2.0, 0.001), (10.0, 0.99)):
        s = asymmetric_jsq(load * (1 + mu2), 1.0, mu2, 0.5)
        assert s.ratio < 0.5 and s.tail < 1e-12
        i, j = np.meshgrid(np.arange(s.K + 4), np.arange(s.K + 4), indexing="ij")
        assert np.max(np.abs(s.balance_residual(i, j))) < 1e-13


def test_errors():
    with pytest.raises(ConvergenceError, match="too asymmetric"):
        asymmetric_jsq(0.99 * 1001, 1.0, 1000.0, 0.5)
    with pytest.raises(ModelError):
        asymmetric_jsq(3.0, 1.0, 2.0)
    with pytest.raises(ModelError):
        asymmetric_jsq(1.0, 1.0, 2.0, q=1.5)
    with pytest.raises(NotApplicableError, match="not available"):
        exactq.solve("jsq", "blocking_probability", method="compensation", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="exactly two servers"):
        exactq.solve("jsq", method="compensation", arrival_rate=1.0, service_rates="1,2,3")
    with pytest.raises(NotApplicableError, match="infinite capacity"):
        exactq.solve("jsq", method="compensation", arrival_rate=1.0, service_rates="1,2", capacity=4)


def test_quarter_plane_kinds():
    m = exactq.model("jsq", arrival_rate=2.4, service_rates="1,2", ties="fastest")
    assert m.quarter_plane() == {"kind": "asymmetric-jsq", "arrival_rate": 2.4, "service_rates": (1.0, 2.0),
                                 "tie_prob_1": 0.0}
    assert exactq.model("jsq", arrival_rate=2.4, service_rates="2,1", ties="fastest").quarter_plane()["tie_prob_1"] == 1
    assert exactq.model("jsq", arrival_rate=2.4, service_rates="2,1").quarter_plane()["tie_prob_1"] == 0.5
    assert exactq.model("jsq", arrival_rate=1.0, service_rates="1,1").quarter_plane()["kind"] == "symmetric-jsq"


def test_cli_json(capsys):
    code = main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "compensation", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["method"] == "compensation" and d["measure"] == "mean_number"
    assert d["value"] == pytest.approx(5.0206059992298, rel=1e-12)
