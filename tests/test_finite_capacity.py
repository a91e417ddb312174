"""Large-capacity approximations of the finite shortest queue against the exact chain."""

import pytest

import exactq
from exactq.solvers.finite_capacity import finite_capacity_asymptotics, total_birth_death


def exact(measure, rho, K):
    return exactq.solve("jsq", measure, arrival_rate=rho, service_rates="1,1", capacity=K).value


def test_reference_value_at_critical_load():
    # MODELS.md: K = 5, rho = 2
    assert exact("blocking_probability", 2.0, 5) == pytest.approx(0.0996884735, abs=1e-10)
    assert exact("mean_number", 2.0, 5) == pytest.approx(5.43457965, abs=1e-8)


@pytest.mark.parametrize("rho", [0.5, 1.0, 1.2])
def test_light_load_corner_factor(rho):
    for K in (10, 20):
        approx = finite_capacity_asymptotics(rho, K)["blocking_probability"]
        assert approx == pytest.approx(exact("blocking_probability", rho, K), rel=5e-5)


@pytest.mark.parametrize("rho,K,rel", [(2.0, 5, 0.005), (2.0, 40, 1e-6), (2.5, 10, 0.001), (3.0, 10, 1e-3),
                                       (6.0, 10, 1e-6)])
def test_heavy_and_critical_load(rho, K, rel):
    approx = finite_capacity_asymptotics(rho, K)["blocking_probability"]
    assert approx == pytest.approx(exact("blocking_probability", rho, K), rel=rel)


def test_accuracy_improves_with_capacity_at_heavy_load():
    errs = [abs(finite_capacity_asymptotics(2.5, K)["blocking_probability"] / exact("blocking_probability", 2.5, K) - 1)
            for K in (5, 10, 20)]
    assert errs[0] > errs[1] > errs[2]
    assert exact("blocking_probability", 2.0, 20) == pytest.approx(1 / 40, rel=1e-6)


def test_heavy_load_limit():
    assert exact("blocking_probability", 4.0, 15) == pytest.approx(1 - 2 / 4.0, rel=1e-6)


def test_birth_death_is_a_distribution_without_overflow():
    for rho, K in [(0.1, 500), (50.0, 500)]:
        p = total_birth_death(rho, K)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)


def test_method_reports_regime_and_no_false_accuracy():
    r = exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=3, service_rates="1,1",
                     capacity=10)
    assert r.error_estimate is None and "rho > 2" in r.info["regime"]
    with pytest.raises(exactq.NotApplicableError):
        exactq.solve("jsq", "blocking_probability", method="asymptotic", arrival_rate=1, service_rates="1,1")
