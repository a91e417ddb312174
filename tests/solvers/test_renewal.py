"""GI/M/1 root finding: against the PH/M/1 QBD of the same queue, closed forms and an mpmath root."""

import doctest
import math

import mpmath
import numpy as np
import pytest

import exactq.solvers.renewal as renewal_module
from exactq.errors import ModelError, UnstableError
from exactq.representations.qbd import QBD, RenewalQueue, RenewalQueueSolution
from exactq.solvers.qbd import solve_qbd
from exactq.solvers.renewal import solve_renewal_queue


def test_doctests():
    assert doctest.testmod(renewal_module).failed == 0


def erlang_arrivals_qbd(r, lam, mu):
    """E_r/M/1 as a QBD: level = number in system, phase = the arrival clock (r phases of rate lam)."""
    A0 = np.zeros((r, r))
    A0[r - 1, 0] = lam
    A1 = np.diag(np.full(r - 1, lam), 1) - np.diag(np.full(r, lam + mu))
    A2 = mu * np.eye(r)
    return QBD(A0, A1, A2)


@pytest.mark.parametrize("r, lam, mu", [(1, 0.7, 1.0), (2, 2.0, 1.5), (3, 3.3, 1.2), (5, 4.0, 0.9)])
def test_erlang_input_root_matches_the_ph_m_1_qbd(r, lam, mu):
    sol = solve_renewal_queue(RenewalQueue.erlang(r, lam, mu))
    assert 0 < sol.sigma < 1 and sol.residual < 1e-15
    q = solve_qbd(erlang_arrivals_qbd(r, lam, mu))
    assert sol.mean_number() == pytest.approx(q.mean_level(), rel=1e-11)
    for n in (0, 1, 4, 10):
        assert sol.level_probability(n) == pytest.approx(q.level_probability(n), rel=1e-10)
    # sp(R) of the QBD is the arrival root sigma (the tail decays like sigma^n)
    assert q.spectral_radius == pytest.approx(sol.sigma, rel=1e-11)
    # Little: E[N] = (arrival rate) E[T]
    assert sol.mean_number() == pytest.approx(sol.mean_sojourn() * lam / r, rel=1e-13)
    assert sol.mean_sojourn() == pytest.approx(sol.mean_wait() + 1 / mu, rel=1e-13)


def test_reference_value_of_round_robin_to_two_servers():
    """MODELS.md: Poisson(1) split round-robin to two unit-rate servers, sigma = (3 - sqrt 5)/2, E[T] = 1.61803399."""
    sol = solve_renewal_queue(RenewalQueue.erlang(2, 1.0, 1.0))
    assert sol.sigma == pytest.approx((3 - math.sqrt(5)) / 2, rel=1e-15)
    assert sol.mean_sojourn() == pytest.approx(1.61803399, abs=5e-9)


def test_phase_type_input_agrees_with_the_erlang_form():
    a = solve_renewal_queue(RenewalQueue.erlang(3, 2.0, 1.0))
    T = np.diag([-2.0] * 3) + np.diag([2.0, 2.0], 1)
    b = solve_renewal_queue(RenewalQueue.phase_type([1, 0, 0], T, 1.0))
    assert b.sigma == pytest.approx(a.sigma, rel=1e-14)


def test_deterministic_input_against_an_mpmath_root():
    mu, d = 1.0, 1.25  # D/M/1 at load 0.8
    sol = solve_renewal_queue(RenewalQueue(lambda s: math.exp(-s * d), d, mu))
    with mpmath.workdps(40):
        ref = mpmath.findroot(lambda s: mpmath.exp(-mu * d * (1 - s)) - s, 0.5)
        assert abs(sol.sigma - float(ref)) < 1e-15


def test_heavy_load_root_is_still_found():
    sol = solve_renewal_queue(RenewalQueue.erlang(2, 2.0, 1.0 / 0.999))  # load 0.999
    assert 0.99 < sol.sigma < 1 and sol.residual < 1e-14


def test_unstable_and_invalid_input():
    with pytest.raises(UnstableError, match=r"load 1 / \(mu E\[A\]\) = 1.25 must be < 1"):
        solve_renewal_queue(RenewalQueue.erlang(2, 2.5, 1.0))
    with pytest.raises(ModelError, match="service_rate must be > 0"):
        RenewalQueue.erlang(2, 1.0, 0.0)
    with pytest.raises(ModelError, match="interarrival_lst\\(0\\) must be 1"):
        RenewalQueue(lambda s: 0.5, 1.0, 2.0)
    with pytest.raises(ModelError, match="alpha must be a probability vector"):
        RenewalQueue.phase_type([0.5, 0.2], -np.eye(2), 1.0)


def test_solution_laws_are_consistent():
    sol = RenewalQueueSolution(sigma=0.3, load=0.6, service_rate=2.0, residual=0.0, nit=0)
    n = np.arange(200)
    assert sum(sol.level_probability(k) for k in n) == pytest.approx(1.0, rel=1e-14)
    assert sum(sol.arrival_probability(k) for k in n) == pytest.approx(1.0, rel=1e-14)
    assert sum(k * sol.level_probability(k) for k in n) == pytest.approx(sol.mean_number(), rel=1e-13)
    assert sol.sojourn_cdf(1.0) == pytest.approx(1 - math.exp(-2.0 * 0.7), rel=1e-14)
