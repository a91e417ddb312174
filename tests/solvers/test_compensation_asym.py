"""Compensation approach for the asymmetric two-server JSQ vs the truncated CTMC and invariants."""

import json

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.catalogue import solve_representation
from exactq.solvers.compensation import symmetric_series
from exactq.solvers.compensation_asym import AsymmetricSeries, _route1, asymmetric_series

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


def _generic(sol):
    """Quantities every walk solution offers: E[X], E[Y], E[min], P(min = 0), P(0, 0)."""
    t = sol.part_sums()
    s = sol.sums()
    return {"x": s.x, "y": s.y, "min": sol.mean_min(), "idle": (t["upper_edge"] + t["lower_edge"] + t["origin"]).mass,
            "empty": t["origin"].mass}


def test_equal_rates_reproduce_the_symmetric_series():
    for rho in (0.1, 0.5, 0.9, 0.97):
        a = _generic(asymmetric_series(2 * rho, 1.0, 1.0, 0.5))
        s = _generic(symmetric_series(rho))
        for key in a:
            assert a[key] == pytest.approx(s[key], rel=1e-12, abs=1e-15), (rho, key)
        assert a["x"] == pytest.approx(a["y"], rel=1e-12)
        # on equal servers the tie rule does not matter for the total
        b = _generic(asymmetric_series(2 * rho, 1.0, 1.0, 1.0))
        assert b["x"] + b["y"] == pytest.approx(s["x"] + s["y"], rel=1e-12)
        assert b["x"] > b["y"]  # ties to queue 1
    # and the model's walk with equal rates is the symmetric one (ties=fastest splits equal rates 1/2)
    qp = exactq.model("jsq", arrival_rate=1.0, service_rates="2,2", ties="fastest").quarter_plane()
    assert qp.is_symmetric and qp.join_shorter_rates().tie_probability == 0.5
    assert not isinstance(solve_representation(qp), AsymmetricSeries)


@pytest.mark.parametrize("mu1, mu2, load, q", [(1.0, 2.0, 0.7, 0.5), (1.0, 4.0, 0.8, 0.0), (3.0, 1.0, 0.3, 1.0),
                                               (1.0, 30.0, 0.6, 0.5)])
def test_distribution_invariants(mu1, mu2, load, q):
    lam = load * (mu1 + mu2)
    s = asymmetric_series(lam, mu1, mu2, q)
    i, j = np.meshgrid(np.arange(100), np.arange(100), indexing="ij")
    p = s.probability(i, j)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # balance equations on a grid: the near-origin states (imposed), the seam at total K
    # (not imposed) and the series region
    res = s.balance_residual(i[:40, :40], j[:40, :40])
    assert np.max(np.abs(res)) < 1e-13
    r = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=lam,
                     service_rates=f"{mu1},{mu2}", ties="random" if q == 0.5 else "fastest")  # same q
    assert r.info["tie_prob_1"] == q
    assert r.info["little_gap"] < 1e-12 * max(1.0, r.value)  # Little (Lq / lambda) = PASTA
    # flow balance per server: mu_k P(Q_k > 0) = rate of arrivals joining k
    t = s.part_sums()
    busy1, busy2 = 1 - (t["upper_edge"] + t["origin"]).mass, 1 - (t["lower_edge"] + t["origin"]).mass
    r1 = _route1(i, j, q)
    assert mu1 * busy1 == pytest.approx(lam * float(np.sum(p * r1)), rel=1e-11)
    assert mu2 * busy2 == pytest.approx(lam * float(np.sum(p * (1 - r1))), rel=1e-11)
    whole = s.sums()
    assert whole.x == pytest.approx(float(np.sum(p * i)), rel=1e-11)
    assert whole.y == pytest.approx(float(np.sum(p * j)), rel=1e-11)
    # every part's sums against the pointwise law
    for part, sel in (("upper", (i >= 1) & (i < j)), ("lower_edge", (j == 0) & (i > 0)),
                      ("diagonal", (i == j) & (i > 0))):
        assert t[part].mass == pytest.approx(float(p[sel].sum()), abs=1e-14), part
        assert t[part].x == pytest.approx(float((p * i)[sel].sum()), abs=1e-12), part
        assert t[part].y == pytest.approx(float((p * j)[sel].sum()), abs=1e-12), part


def test_pointwise_against_the_ctmc():
    ref, chain, pi = _ctmc_measures(2.1, 1.0, 2.0, "fastest")
    s = asymmetric_series(2.1, 1.0, 2.0, 0.0)
    p = s.probability(chain.states[:, 0], chain.states[:, 1])
    assert np.max(np.abs(p - pi)) < 1e-14


def test_series_region_and_product_forms():
    lam, mu1, mu2 = 2.4, 1.0, 2.0
    s = asymmetric_series(lam, mu1, mu2, 0.5)
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
    t = asymmetric_series(lam, mu1, mu2, 0.5, K=s.K + 6)
    assert t.sums().x + t.sums().y == pytest.approx(s.sums().x + s.sums().y, rel=1e-13)
    # the rates are used relative to the larger one: scaling the walk changes nothing
    u = asymmetric_series(lam * 1e300, mu1 * 1e300, mu2 * 1e300, 0.5)
    assert u.sums().x == pytest.approx(s.sums().x, rel=1e-14) and u.K == s.K


def test_strong_asymmetry_and_extreme_loads():
    for mu2, load in ((100.0, 0.95), (30.0, 0.999), (2.0, 0.001), (10.0, 0.99)):
        s = asymmetric_series(load * (1 + mu2), 1.0, mu2, 0.5)
        assert s.ratio < 0.5 and s.tail < 1e-12
        i, j = np.meshgrid(np.arange(s.K + 4), np.arange(s.K + 4), indexing="ij")
        assert np.max(np.abs(s.balance_residual(i, j))) < 1e-13


def test_errors():
    with pytest.raises(ConvergenceError, match="too asymmetric"):
        asymmetric_series(0.99 * 1001, 1.0, 1000.0, 0.5)
    with pytest.raises(ModelError):
        asymmetric_series(3.0, 1.0, 2.0)
    with pytest.raises(ModelError):
        asymmetric_series(1.0, 1.0, 2.0, q=1.5)
    with pytest.raises(ModelError, match="K must be"):
        asymmetric_series(1.0, 1.0, 2.0, K=1)
    with pytest.raises(NotApplicableError, match="not available"):
        exactq.solve("jsq", "blocking_probability", method="compensation", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="exactly two servers"):
        exactq.solve("jsq", method="compensation", arrival_rate=1.0, service_rates="1,2,3")
    with pytest.raises(NotApplicableError, match="infinite capacity"):
        exactq.solve("jsq", method="compensation", arrival_rate=1.0, service_rates="1,2", capacity=4)


def test_quarter_plane_walks():
    """The model hands over the rates of its walk in every part of the quarter plane."""
    w = exactq.model("jsq", arrival_rate=2.4, service_rates="1,2", ties="fastest").quarter_plane()
    assert dict(w.upper) == {(1, 0): 2.4, (-1, 0): 1.0, (0, -1): 2.0}
    assert dict(w.lower) == {(0, 1): 2.4, (-1, 0): 1.0, (0, -1): 2.0}
    assert dict(w.diagonal) == {(0, 1): 2.4, (-1, 0): 1.0, (0, -1): 2.0}  # ties to the faster queue 2
    assert dict(w.upper_edge) == {(1, 0): 2.4, (0, -1): 2.0} and dict(w.lower_edge) == {(0, 1): 2.4, (-1, 0): 1.0}
    assert dict(w.origin) == {(0, 1): 2.4}
    assert w.join_shorter_rates().tie_probability == 0.0 and not w.is_symmetric
    assert w.mirror().join_shorter_rates().tie_probability == 1.0
    assert exactq.model("jsq", arrival_rate=2.4, service_rates="2,1", ties="fastest").quarter_plane() \
        .join_shorter_rates().tie_probability == 1
    assert exactq.model("jsq", arrival_rate=2.4, service_rates="2,1").quarter_plane().join_shorter_rates() \
        .tie_probability == 0.5
    assert exactq.model("jsq", arrival_rate=1.0, service_rates="1,1").quarter_plane().is_symmetric
    assert isinstance(solve_representation(w), AsymmetricSeries)


def test_cli_json(capsys):
    code = main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "compensation", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["method"] == "compensation" and d["measure"] == "mean_number"
    assert d["value"] == pytest.approx(5.0206059992298, rel=1e-12)
