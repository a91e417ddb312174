"""Compensation approach vs the truncated CTMC (an independent method) and closed forms."""

import numpy as np
import pytest

import exactq
from exactq.catalogue import solve_representation, solvers_for
from exactq.errors import ModelError, NotApplicableError
from exactq.representations import QuarterPlaneWalk
from exactq.solvers.compensation import SymmetricSeries, solve_symmetric_walk, symmetric_series


def _walk(rho, mu=1.0):
    return QuarterPlaneWalk.join_shorter(2 * rho * mu, (mu, mu))


def _mean_number(sol):
    s = sol.sums()
    return s.x + s.y

MEASURES = ["mean_number", "mean_waiting_time", "mean_response_time", "p_wait", "prob_empty"]


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.5, 0.8, 0.9, 0.95])
def test_agrees_with_truncated_ctmc(rho):
    for measure in MEASURES:
        comp = exactq.solve("jsq", measure, method="compensation", arrival_rate=2 * rho, service_rates="1,1")
        ctmc = exactq.solve("jsq", measure, method="ctmc", arrival_rate=2 * rho, service_rates="1,1", tol=1e-12)
        assert comp.value == pytest.approx(ctmc.value, rel=1e-11, abs=1e-14), measure
        assert comp.error_estimate < 1e-10 * max(1.0, abs(comp.value))


def test_reference_values_from_models_md():
    assert _mean_number(symmetric_series(0.5)) == pytest.approx(1.42632075, abs=5e-9)
    s = symmetric_series(0.9)
    assert _mean_number(s) == pytest.approx(9.85484308, abs=5e-9)
    assert s.mean_min() == pytest.approx(4.47491282, abs=5e-9)  # E[W] = E[min] / mu by PASTA


def test_dispatch_picks_the_symmetric_series_by_the_walks_rates():
    """The walk's declared structure, not a kind string, selects the solver."""
    sol = solve_representation(_walk(0.7))
    assert isinstance(sol, SymmetricSeries)
    refusal = {s.name: s.refusal(_walk(0.7)) for s in solvers_for(_walk(0.7))}
    assert refusal["compensation-symmetric"] is None and refusal["compensation-asymmetric"] is None
    assert "jumps r >= 2" in refusal["compensation-erlang"]
    # unequal rates or unequal ties: the symmetric series refuses with the reason
    asym = QuarterPlaneWalk.join_shorter(1.5, (1.0, 2.0))
    assert "different rates" in {s.name: s.refusal(asym) for s in solvers_for(asym)}["compensation-symmetric"]
    ties = QuarterPlaneWalk.join_shorter(1.5, (1.0, 1.0), 1.0)
    assert "probability 1" in {s.name: s.refusal(ties) for s in solvers_for(ties)}["compensation-symmetric"]
    with pytest.raises(NotApplicableError, match="compensation-symmetric: the walk is not of the join-the-shorter"):
        w = _walk(0.5)
        solve_representation(QuarterPlaneWalk(**{**w.parts, "origin": {(1, 1): 1.0}}))


def test_part_sums_are_a_normalised_symmetric_law():
    s = symmetric_series(0.6)
    t = s.part_sums()
    assert sum(v.mass for v in t.values()) == pytest.approx(1.0, abs=1e-15)
    assert t["upper"] == exactq.representations.PartSums(t["lower"].mass, t["lower"].y, t["lower"].x)
    assert t["origin"].x == t["origin"].y == t["upper_edge"].x == 0.0
    # the sums against the pointwise law on a large grid
    x, y = np.meshgrid(np.arange(150), np.arange(150), indexing="ij")
    p = s.probability(x, y)
    assert p[x < y].sum() - p[(x == 0) & (y > 0)].sum() == pytest.approx(t["upper"].mass, abs=1e-14)
    assert float((p * x)[(x >= 1) & (x < y)].sum()) == pytest.approx(t["upper"].x, abs=1e-13)
    assert float((p * y)[(x >= 1) & (x < y)].sum()) == pytest.approx(t["upper"].y, abs=1e-13)
    assert float((p * x)[(x == y) & (x >= 1)].sum()) == pytest.approx(t["diagonal"].x, abs=1e-13)
    assert s.mean_min() == pytest.approx(float((p * np.minimum(x, y)).sum()), abs=1e-13)


def test_distribution_matches_ctmc_pointwise_and_is_a_distribution():
    rho = 0.7
    sol = solve_symmetric_walk(_walk(rho))
    model = exactq.model("jsq", arrival_rate=2 * rho, service_rates="1,1")
    chain = model.ctmc(80)
    from exactq.solvers.stationary import solve_stationary as solve_chain

    pi = solve_chain(chain).pi
    q1, q2 = chain.states[:, 0], chain.states[:, 1]
    p = sol.probability(q1, q2)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.max(np.abs(p - pi)) < 1e-13


def test_interior_product_forms_lie_on_the_kernel_curve():
    rho = 0.6
    s = symmetric_series(rho)
    a, b = s.alpha, s.beta
    curve = (2 * rho + 2) * a * b - (2 * rho * b**2 + a**2 + a * b**2)
    assert np.max(np.abs(curve) / (a * b)) < 1e-12
    assert np.all((0 < a) & (a < 1) & (0 < b) & (b < 1))


def test_scaling_with_service_rate():
    r1 = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=1.6, service_rates="1,1")
    r2 = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=3.2, service_rates="2,2")
    assert r2.value == pytest.approx(r1.value / 2, rel=1e-13)
    n1 = exactq.solve("jsq", method="compensation", arrival_rate=1.6, service_rates="1,1").value
    n2 = exactq.solve("jsq", method="compensation", arrival_rate=3.2, service_rates="2,2").value
    assert n1 == pytest.approx(n2, rel=1e-13)


def test_little_and_queue_lengths():
    lam = 1.5
    r = exactq.solve("jsq", "mean_queue_lengths", method="compensation", arrival_rate=lam, service_rates="1,1")
    L = exactq.solve("jsq", method="compensation", arrival_rate=lam, service_rates="1,1").value
    T = exactq.solve("jsq", "mean_response_time", method="compensation", arrival_rate=lam, service_rates="1,1").value
    W = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=lam, service_rates="1,1").value
    assert sum(r.value) == pytest.approx(L, rel=1e-13)
    assert L == pytest.approx(lam * T, rel=1e-13)
    assert T == pytest.approx(W + 1.0, rel=1e-13)


def test_auto_picks_compensation_for_two_server_pairs_only():
    assert exactq.solve("jsq", arrival_rate=1.0, service_rates="1,1").method == "compensation"
    # unequal pairs use the asymmetric series (solvers/compensation_asym.py) up to a rate ratio of 100
    assert exactq.solve("jsq", arrival_rate=1.0, service_rates="1,2").method == "compensation"
    assert exactq.solve("jsq", arrival_rate=1.0, service_rates="1,1000").method.startswith("ctmc")
    assert exactq.solve("jsq", arrival_rate=1.0, service_rates="1,1,1").method.startswith("ctmc")
    assert exactq.solve("jsq", arrival_rate=1.0, service_rates="1,2", capacity=5).method.startswith("ctmc")


def test_not_applicable_is_one_clear_error():
    for kw in (dict(service_rates="1,1,1"), dict(service_rates="1,2", capacity=5),
               dict(service_rates="1,1", capacity=5), dict(service_rates="1,1", threshold=3)):
        with pytest.raises(NotApplicableError, match="exactly two servers, infinite capacity") as e:
            exactq.solve("jsq", method="compensation", arrival_rate=1.0, **kw)
        assert "\n" not in str(e.value)
    with pytest.raises(ModelError):
        symmetric_series(1.0)
    with pytest.raises(ModelError, match="rho must be in"):
        solve_symmetric_walk(QuarterPlaneWalk.join_shorter(2.0, (1.0, 1.0)))


def test_rates_near_the_float_limit():
    """Loads are computed without overflow: 1e308 arrivals to two servers of 1e308 is load 1/2."""
    r = exactq.solve("jsq", arrival_rate=1e308, service_rates="1e308,1e308")
    assert r.method == "compensation" and r.value == pytest.approx(1.42632075, abs=1e-8)
    w = exactq.solve("jsq", "mean_waiting_time", arrival_rate=1e308, service_rates="1e308,1e308").value
    assert w == pytest.approx(0.42632075116724 / 1e308, rel=1e-12)
    with pytest.raises(ModelError, match="must be below .* for a CTMC generator"):
        exactq.solve("jsq", method="ctmc", arrival_rate=1e308, service_rates="1e308,1e308")


@pytest.mark.parametrize("rates, rho", [("1,1", 0.5), ("1,1", 0.9), ("1,2", 0.6), ("2,1", 0.85)])
def test_queue_length_distributions_from_the_series(rates, rho):
    """Marginals of each queue: sum to 1, give the means, match a large finite-capacity chain."""
    import numpy as np

    lam = rho * sum(float(x) for x in rates.split(","))
    kw = dict(arrival_rate=lam, service_rates=rates)
    r = exactq.solve("jsq", "queue_length_distributions", method="compensation", tol=1e-12, **kw)
    p = np.array(r.value)
    assert p.min() >= 0 and np.allclose(p.sum(1), 1, atol=1e-11)
    assert r.error_estimate < 1e-10
    means = exactq.solve("jsq", "mean_queue_lengths", method="compensation", **kw).value
    assert p @ np.arange(p.shape[1]) == pytest.approx(means, rel=1e-8)
    K = p.shape[1] - 1
    big = np.array(exactq.solve("jsq", "queue_length_distributions", method="ctmc", capacity=K + 30, **kw).value)
    assert np.abs(big[:, : K + 1] - p).max() < 1e-10
