"""Large-capacity approximations of the finite shortest queue against the exact chain."""

import numpy as np
import pytest

import exactq
from exactq.catalogue import solve_representation
from exactq.errors import ModelError, NotApplicableError
from exactq.models.jsq_asymptotic import corner_marginal, corner_qbd, free_places_law


def exact(measure, rho, K):
    return exactq.solve("jsq", measure, arrival_rate=rho, service_rates="1,1", capacity=K).value


def approx(measure, rho, K):
    return exactq.solve("jsq", measure, method="asymptotic", arrival_rate=rho, service_rates="1,1", capacity=K).value


def corner_walk(rho, width=60):
    return solve_representation(corner_qbd(rho, width), strict=True)


def test_reference_value_at_critical_load():
    # MODELS.md: K = 5, rho = 2
    assert exact("blocking_probability", 2.0, 5) == pytest.approx(0.0996884735, abs=1e-10)
    assert exact("mean_number", 2.0, 5) == pytest.approx(5.43457965, abs=1e-8)


@pytest.mark.parametrize("rho", [0.5, 1.0, 1.2])
def test_light_load_corner_factor(rho):
    for K in (10, 20):
        assert approx("blocking_probability", rho, K) == pytest.approx(exact("blocking_probability", rho, K), rel=5e-5)


@pytest.mark.parametrize("rho,K,rel", [(2.0, 5, 0.005), (2.0, 40, 1e-6), (2.5, 10, 0.001), (3.0, 10, 1e-3),
                                       (6.0, 10, 1e-6)])
def test_heavy_and_critical_load(rho, K, rel):
    assert approx("blocking_probability", rho, K) == pytest.approx(exact("blocking_probability", rho, K), rel=rel)


def test_accuracy_improves_with_capacity_at_heavy_load():
    errs = [abs(approx("blocking_probability", 2.5, K) / exact("blocking_probability", 2.5, K) - 1)
            for K in (5, 10, 20)]
    assert errs[0] > errs[1] > errs[2]
    assert exact("blocking_probability", 2.0, 20) == pytest.approx(1 / 40, rel=1e-6)


def test_heavy_load_limit():
    assert exact("blocking_probability", 4.0, 15) == pytest.approx(1 - 2 / 4.0, rel=1e-6)


def test_free_places_law_is_a_distribution_without_overflow():
    for rho, K in [(0.1, 500), (50.0, 500)]:
        p = free_places_law(rho, K)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        # geometric with ratio 2 / rho
        j = min(int(np.argmax(p)), p.size - 2)  # next to the largest entry (the other end underflows)
        assert p[j + 1] / p[j] == pytest.approx(2 / rho, rel=1e-12)


def test_mean_values_against_the_exact_chain():
    for rho, K, rel in [(1.0, 20, 1e-8), (3.0, 20, 1e-4)]:
        for measure in ("mean_number", "mean_response_time"):
            assert approx(measure, rho, K) == pytest.approx(exact(measure, rho, K), rel=rel), (measure, rho)
    # the response time of an accepted job: Little with the accepted rate
    L, B = approx("mean_number", 3.0, 20), approx("blocking_probability", 3.0, 20)
    assert approx("mean_response_time", 3.0, 20) == pytest.approx(L / (3.0 * (1 - B)), rel=1e-14)


def test_rates_scale_out():
    """Only rho = lambda / mu matters; rates near the float limit do not overflow."""
    a = approx("blocking_probability", 3.0, 10)
    b = exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=3e307,
                     service_rates="1e307,1e307", capacity=10).value
    assert b == pytest.approx(a, rel=1e-14)
    with pytest.raises(ModelError, match="must be finite for the asymptotic method"):
        exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=1e308,
                     service_rates="1e-10,1e-10", capacity=10)


def test_method_reports_regime_and_no_false_accuracy():
    r = exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=3, service_rates="1,1",
                     capacity=10)
    assert r.error_estimate is None and "rho > 2" in r.info["regime"]
    with pytest.raises(exactq.NotApplicableError, match="finite capacity"):
        exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=1, service_rates="1,1")
    with pytest.raises(exactq.NotApplicableError, match="has no asymptotic approximation; valid: blocking"):
        exactq.solve("jsq", "p_wait", method="asymptotic", arrival_rate=1, service_rates="1,1", capacity=5)
    with pytest.raises(exactq.NotApplicableError, match="two identical servers"):
        exactq.solve("jsq", method="asymptotic", arrival_rate=1, service_rates="1,2", capacity=5)


# -- the marginal law of each queue ---------------------------------------------------

def _marg(method="ctmc", **kw):
    return np.array(exactq.solve("jsq", "queue_length_distributions", method=method, **kw).value)


def test_exact_marginals_lumped_equal_unlumped_and_match_the_means():
    kw = dict(arrival_rate=2.5, service_rates="1,1", capacity=8)
    lumped = _marg(**kw)
    full = np.array(exactq.solve("jsq", "queue_length_distributions", method="ctmc", lump=False, **kw).value)
    assert lumped.shape == (2, 9)
    assert np.allclose(lumped, full, atol=1e-14)
    assert np.allclose(lumped.sum(1), 1) and lumped.min() >= 0
    means = exactq.solve("jsq", "mean_queue_lengths", method="ctmc", **kw).value
    assert lumped @ np.arange(9) == pytest.approx(means, rel=1e-12)
    # unequal servers: each queue has its own law; the faster one is shorter on average
    m = _marg(arrival_rate=2.5, service_rates="1,2", capacity=6)
    assert np.allclose(m.sum(1), 1) and (m @ np.arange(7))[1] < (m @ np.arange(7))[0]


def test_marginals_need_a_finite_capacity():
    with pytest.raises(ModelError, match="finite capacity"):
        exactq.solve("jsq", "queue_length_distributions", method="ctmc", arrival_rate=1, service_rates="1,1")


@pytest.mark.parametrize("rho, K, tol", [(1.0, 10, 1e-5), (1.5, 20, 1e-5), (3.0, 20, 1e-6), (5.0, 20, 1e-12),
                                         (4.0, 20, 1e-10)])
def test_asymptotic_marginal_against_the_exact_chain(rho, K, tol):
    kw = dict(arrival_rate=rho, service_rates="1,1", capacity=K)
    ex, ap = _marg(**kw)[0], _marg("asymptotic", **kw)[0]
    assert np.abs(ap - ex).max() < tol


def test_asymptotic_marginal_improves_with_capacity_above_two():
    errs = [np.abs(_marg("asymptotic", arrival_rate=2.5, service_rates="1,1", capacity=K)[0]
                   - _marg(arrival_rate=2.5, service_rates="1,1", capacity=K)[0]).max() for K in (10, 20, 30)]
    assert errs[0] > 10 * errs[1] > 100 * errs[2]


@pytest.mark.parametrize("rho, rate", [(3.0, 4 / 9), (5.0, 1 / 5), (8.0, 1 / 8)])
def test_corner_marginal_transition_at_rho_four(rho, rate):
    """Free places decay like max(4/rho^2, 1/rho)^i: balanced below rho = 4, one queue alone above."""
    p = corner_marginal(corner_walk(rho, width=80), 60)
    assert p[60] / p[59] == pytest.approx(rate, rel=2e-3)
    sol = corner_walk(rho)
    assert sol.pi0[0] == pytest.approx(1 - 2 / rho, rel=1e-12)  # both full: the limit blocking probability
    assert sol.spectral_radius < 1 and sol.residual < 1e-12


def test_corner_walk_needs_heavy_load():
    with pytest.raises(NotApplicableError, match="rho > 2"):
        corner_qbd(2.0)


@pytest.mark.parametrize("rho, K, tv", [(2.2, 20, 0.005), (2.1, 40, 0.003), (2.05, 10, 0.05), (2.05, 20, 0.025)])
def test_asymptotic_marginal_near_the_critical_load(rho, K, tv):
    """Total variation to the exact chain: the corner limit once K (rho - 2) / rho >= 1, else the even split."""
    kw = dict(arrival_rate=rho, service_rates="1,1", capacity=K)
    ex, ap = _marg(**kw)[0], _marg("asymptotic", **kw)[0]
    assert ap.sum() == pytest.approx(1, abs=1e-12)
    assert 0.5 * np.abs(ap - ex).sum() < tv
