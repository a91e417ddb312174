"""Compensation approach vs the truncated CTMC (an independent method) and closed forms."""

import numpy as np
import pytest

import exactq
from exactq.errors import ModelError, NotApplicableError
from exactq.solvers.compensation import symmetric_jsq

MEASURES = ["mean_number", "mean_waiting_time", "mean_response_time", "p_wait", "prob_empty"]


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.5, 0.8, 0.9, 0.95])
def test_agrees_with_truncated_ctmc(rho):
    for measure in MEASURES:
        comp = exactq.solve("jsq", measure, method="compensation", arrival_rate=2 * rho, service_rates="1,1")
        ctmc = exactq.solve("jsq", measure, method="ctmc", arrival_rate=2 * rho, service_rates="1,1", tol=1e-12)
        assert comp.value == pytest.approx(ctmc.value, rel=1e-11, abs=1e-14), measure
        assert comp.error_estimate < 1e-10 * max(1.0, abs(comp.value))


def test_reference_values_from_models_md():
    assert symmetric_jsq(0.5).measures()["mean_number"] == pytest.approx(1.42632075, abs=5e-9)
    m = symmetric_jsq(0.9).measures()
    assert m["mean_number"] == pytest.approx(9.85484308, abs=5e-9)
    assert m["mean_waiting_time"] == pytest.approx(4.47491282, abs=5e-9)


def test_distribution_matches_ctmc_pointwise_and_is_a_distribution():
    rho = 0.7
    sol = symmetric_jsq(rho)
    model = exactq.model("jsq", arrival_rate=2 * rho, service_rates="1,1")
    chain = model.ctmc(80)
    from exactq.solvers.stationary import solve_stationary as solve_chain

    pi = solve_chain(chain).pi
    q1, q2 = chain.states[:, 0], chain.states[:, 1]
    p = sol.joint(q1, q2)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.max(np.abs(p - pi)) < 1e-13


def test_interior_product_forms_lie_on_the_kernel_curve():
    rho = 0.6
    s = symmetric_jsq(rho)
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
        symmetric_jsq(1.0)


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
