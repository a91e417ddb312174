"""M/PH/1: the Pollaczek-Khinchine mean against the exact QBD and the truncated CTMC, and the
phase-type fit against its defining moments (Tijms 2003, sec. 2.5; Kleinrock 1975, sec. 5.6)."""

import doctest
import json
import math
import warnings

import numpy as np
import pytest

import exactq
import exactq.models.basic as basic
from exactq import solve
from exactq.cli import main
from exactq.errors import ModelError, UnstableError
from exactq.models.basic import phase_type_fit
from exactq.solvers.qbd import solve_qbd

MEASURES = ("mean_number", "mean_queue_length", "mean_response_time", "mean_waiting_time", "p_wait",
            "utilization", "prob_empty")


def test_doctests():
    assert doctest.testmod(basic).failed == 0


def moments(alpha, S):
    one = np.ones(len(alpha))
    m1 = alpha @ np.linalg.solve(-S, one)
    m2 = 2 * alpha @ np.linalg.solve(S @ S, one)
    return m1, m2 / m1**2 - 1


@pytest.mark.parametrize("scv", [0.01, 0.1, 0.25, 0.3, 1 / 3, 0.45, 0.5, 0.7, 0.99, 1.0, 1.01, 2.0, 9.0, 50.0])
def test_phase_type_fit_has_the_mean_and_scv(scv):
    alpha, S = phase_type_fit(1.7, scv)
    m1, c2 = moments(alpha, S)
    assert m1 == pytest.approx(1.7, rel=1e-12) and c2 == pytest.approx(scv, rel=1e-10)
    assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(1.0, abs=1e-15)
    if scv < 1:
        assert len(alpha) == math.ceil(1 / scv - 1e-9)
        assert len(set(np.round(np.diag(S), 12))) == 1  # one phase rate
    elif scv > 1:
        p, mu = alpha, -np.diag(S)
        assert p[0] / mu[0] == pytest.approx(p[1] / mu[1], rel=1e-12)  # balanced means


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_scv_one_over_k_is_erlang_k(k):
    alpha, S = phase_type_fit(2.0, 1 / k)
    assert len(alpha) == k and alpha[0] == pytest.approx(1.0)
    assert np.allclose(np.diag(S), -k / 2.0)


@pytest.mark.parametrize("lam, es, scv", [(0.5, 1.0, 1.0), (0.7, 1.2, 0.3), (0.3, 2.0, 0.5), (0.9, 1.0, 0.25),
                                          (0.6, 1.0, 4.0), (0.2, 0.5, 0.8)])
def test_qbd_and_ctmc_against_pollaczek_khinchine(lam, es, scv):
    kw = dict(arrival_rate=lam, mean_service_time=es, scv=scv)
    rho = lam * es
    wait = rho * es * (1 + scv) / (2 * (1 - rho))  # Pollaczek-Khinchine, written out here
    for measure in MEASURES:
        exact = solve("mph1", measure, method="closed-form", **kw).value
        q = solve("mph1", measure, method="qbd", **kw)
        assert q.value == pytest.approx(exact, rel=1e-10, abs=1e-14), measure
    assert solve("mph1", "mean_waiting_time", method="closed-form", **kw).value == pytest.approx(wait, rel=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = solve("mph1", "mean_waiting_time", method="ctmc", tol=1e-10, **kw)
    assert c.value == pytest.approx(wait, rel=1e-8)
    assert abs(c.value - wait) <= c.error_estimate + 1e-12 * wait


def test_qbd_level_law_equals_the_truncated_ctmc():
    m = exactq.model("mph1", arrival_rate=0.8, scv=0.4)
    sol = solve_qbd(m.qbd())
    from exactq.solvers.stationary import solve_stationary

    chain = m.ctmc(150)
    pi = solve_stationary(chain).pi
    law = np.bincount(chain.states[:, 0], weights=pi)
    np.testing.assert_allclose(sol.level_distribution(40), law[:41], rtol=1e-9, atol=1e-16)
    assert sol.spectral_radius < 1 and sol.g_defect < 1e-12 and sol.residual < 1e-13


def test_exponential_service_is_mm1():
    for measure in MEASURES:
        a = solve("mph1", measure, method="qbd", arrival_rate=0.6, mean_service_time=1 / 1.5).value
        b = solve("mm1", measure, arrival_rate=0.6, service_rate=1.5).value
        assert a == pytest.approx(b, rel=1e-11)


def test_bad_input():
    with pytest.raises(UnstableError, match="arrival_rate must be < 1 / mean_service_time = 0.5 for stability; "
                                            "got 0.5"):
        exactq.model("mph1", arrival_rate=0.5, mean_service_time=2.0)
    with pytest.raises(ModelError, match="scv must be >= 0.01"):
        exactq.model("mph1", arrival_rate=0.5, scv=0.001)
    assert main(["solve", "mph1", "arrival_rate=0.5", "scv=0"]) == 2


def test_cli(capsys):
    assert main(["solve", "mph1", "arrival_rate=0.5", "scv=2", "--method", "qbd", "--measure", "mean_waiting_time",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == pytest.approx(0.5 * 3 / (2 * 0.5), rel=1e-11)
