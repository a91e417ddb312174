"""SED routing to Erlang servers: reference values, identities, Little's law."""

import numpy as np
import pytest

import exactq
from exactq.errors import UnstableError
from exactq.models.sed import sed_routing


def test_reference_value_erlang2():
    # Adan & Wessels (1996) / MODELS.md: r = 2, rho = 0.5
    r = exactq.solve("sed", "mean_waiting_time", arrival_rate=1.0, service_rates="1,1", phases=2)
    assert r.value == pytest.approx(0.29938794, abs=5e-9)


@pytest.mark.parametrize("measure", ["mean_number", "mean_waiting_time", "p_wait", "prob_empty"])
def test_one_phase_equal_rates_is_jsq(measure):
    a = exactq.solve("sed", measure, arrival_rate=1.4, service_rates="1,1", phases=1).value
    b = exactq.solve("jsq", measure, arrival_rate=1.4, service_rates="1,1", method="compensation").value
    assert a == pytest.approx(b, rel=1e-10)


def test_heterogeneous_exponential_rule():
    # join queue 1 iff (q1+1)/mu1 < (q2+1)/mu2 (Selen et al. 2016)
    mu = np.array([1.0, 3.0])
    q = np.array([[0, 0], [0, 1], [1, 1], [0, 2], [2, 8]])
    route = sed_routing(q, mu, 1, "random")
    expect1 = (q[:, 0] + 1) / mu[0] < (q[:, 1] + 1) / mu[1]
    tie = np.isclose((q[:, 0] + 1) / mu[0], (q[:, 1] + 1) / mu[1])
    assert np.allclose(route[:, 0], np.where(tie, 0.5, expect1.astype(float)))


def test_little_law_and_response_time():
    kw = dict(arrival_rate=1.2, service_rates="1,1.5", phases=2)
    L = exactq.solve("sed", "mean_number", **kw).value
    T = exactq.solve("sed", "mean_response_time", **kw).value
    assert L == pytest.approx(1.2 * T, rel=1e-9)


def test_more_phases_less_waiting():
    # less variable service (more phases) gives less waiting at the same mean
    w = [exactq.solve("sed", arrival_rate=1.6, service_rates="1,1", phases=r).value for r in (1, 2, 3)]
    assert w[0] > w[1] > w[2] > 0


def test_verify_and_truncation_are_reported():
    r = exactq.solve("sed", arrival_rate=1.0, service_rates="1,1", phases=3, verify=True)
    assert r.info["verify"]["agree"]
    assert r.info["truncation"]["boundary_mass"] < 1e-9


def test_unstable_load_is_rejected():
    with pytest.raises(UnstableError, match="arrival_rate must be < total service rate 2"):
        exactq.solve("sed", arrival_rate=2.0, service_rates="1,1", phases=2)
