"""M/M/1, M/M/c and M/M/c/K: the CTMC method against the closed forms, and both against
formulas computed here from their textbook definitions (Kleinrock 1975, vol. 1, ch. 3):
the geometric law, Erlang's B and C formulas, Little's law.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactq
from exactq import solve
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, TruncationError, UnstableError
from exactq.solvers.stationary import solve_stationary as solve_chain

FAST = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

MEASURES = ("mean_number", "mean_queue_length", "mean_response_time", "mean_waiting_time", "p_wait",
            "utilization", "prob_empty")

CASES = [
    ("mm1", dict(arrival_rate=0.7, service_rate=1.3)),
    ("mm1", dict(arrival_rate=0.9)),
    ("mm1", dict(arrival_rate=0.05, service_rate=2.0)),
    ("mmc", dict(arrival_rate=2.5, servers=3, service_rate=1.1)),
    ("mmc", dict(arrival_rate=7.2, servers=8)),
    ("mmc", dict(arrival_rate=0.3, servers=1)),
    ("mmck", dict(arrival_rate=2.5, servers=2, capacity=6)),
    ("mmck", dict(arrival_rate=5.0, servers=3, capacity=3)),
    ("mmck", dict(arrival_rate=0.4, servers=1, capacity=12, service_rate=0.5)),
]


def _measures(name):
    return MEASURES + (("blocking_probability",) if name == "mmck" else ())


# ---------------------------------------------------------------------------------
# CTMC against closed form, every measure
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_ctmc_agrees_with_closed_form_for_every_measure(name, params):
    m = exactq.model(name, **params)
    assert set(type(m).measures) == set(_measures(name))
    for measure in _measures(name):
        exact = solve(name, measure, method="closed-form", **params)
        chain = solve(name, measure, method="ctmc", **params)
        assert exact.method == "closed-form" and chain.method.startswith("ctmc/")
        assert chain.measure == exact.measure == measure
        assert chain.value == pytest.approx(exact.value, rel=1e-9, abs=1e-15), measure
        if chain.error_estimate is not None:  # infinite models: the estimate covers the true error
            assert abs(chain.value - exact.value) <= chain.error_estimate + 1e-14 * abs(exact.value), measure


@pytest.mark.parametrize("solver", ["direct", "gmres", "power", "gth", "mpmath"])
def test_every_stationary_solver_through_the_api(solver):
    r = solve("mmc", "mean_number", method=solver, arrival_rate=2.5, servers=3)
    assert r.method == f"ctmc/{solver}"
    exact = solve("mmc", "mean_number", method="closed-form", arrival_rate=2.5, servers=3).value
    assert r.value == pytest.approx(exact, rel=1e-9)


# ---------------------------------------------------------------------------------
# independent textbook formulas
# ---------------------------------------------------------------------------------
def erlang_b(c: int, a: Fraction) -> Fraction:
    """B(c, a) = (a^c / c!) / sum_{k=0}^{c} a^k / k!, exactly."""
    terms = [a**k / math.factorial(k) for k in range(c + 1)]
    return terms[-1] / sum(terms)


def erlang_c(c: int, a: Fraction) -> Fraction:
    """C(c, a) = (a^c/c! * c/(c - a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c - a)), exactly."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@FAST
@given(rho=st.fractions(min_value=Fraction(1, 50), max_value=Fraction(49, 50), max_denominator=50),
       mu=st.sampled_from([Fraction(1), Fraction(1, 2), Fraction(3)]))
def test_mm1_closed_forms_and_geometric_law(rho, mu):
    lam = rho * mu
    kw = dict(arrival_rate=float(lam), service_rate=float(mu))
    r = float(rho)
    assert solve("mm1", "mean_number", **kw).value == pytest.approx(r / (1 - r), rel=1e-12)
    assert solve("mm1", "mean_queue_length", **kw).value == pytest.approx(r * r / (1 - r), rel=1e-12)
    assert solve("mm1", "mean_response_time", **kw).value == pytest.approx(1 / float(mu - lam), rel=1e-12)
    assert solve("mm1", "mean_waiting_time", **kw).value == pytest.approx(r / float(mu - lam), rel=1e-12)
    assert solve("mm1", "prob_empty", **kw).value == pytest.approx(1 - r, rel=1e-12)
    assert solve("mm1", "p_wait", **kw).value == pytest.approx(r, rel=1e-12)
    assert solve("mm1", "utilization", **kw).value == pytest.approx(r, rel=1e-12)


@pytest.mark.parametrize("rho", [0.3, 0.75])
def test_mm1_chain_is_a_truncated_geometric_law(rho):
    """The truncated M/M/1 chain (arrivals blocked at K) has pi_n = (1 - rho) rho^n / (1 - rho^{K+1})."""
    m = exactq.model("mm1", arrival_rate=rho)
    K = 40
    chain = m.ctmc(K)
    assert chain.n_states == K + 1 and chain.truncation.level == K
    sol = solve_chain(chain)
    pi = sol.pi
    n = np.arange(K + 1)
    expected = (1 - rho) * rho**n / (1 - rho ** (K + 1))
    np.testing.assert_allclose(pi, expected, rtol=1e-11, atol=0)
    np.testing.assert_allclose(pi[1:] / pi[:-1], rho, rtol=1e-11)
    assert chain.cut_rate.tolist() == [0.0] * K + [rho]


@pytest.mark.parametrize("c, lam", [(1, 0.5), (2, 1.5), (3, 2.5), (5, 4.9), (10, 7.0), (20, 19.0)])
def test_erlang_c_from_its_textbook_definition(c, lam):
    a = Fraction(lam).limit_denominator(1000)
    C = float(erlang_c(c, a))
    kw = dict(arrival_rate=lam, servers=c)
    for method in ("closed-form", "ctmc"):
        assert solve("mmc", "p_wait", method=method, **kw).value == pytest.approx(C, rel=1e-9)
        Wq = C / (c - lam)
        assert solve("mmc", "mean_waiting_time", method=method, **kw).value == pytest.approx(Wq, rel=1e-9)
        assert solve("mmc", "mean_number", method=method, **kw).value == pytest.approx(lam * Wq + lam, rel=1e-9)
    p0 = 1 / float(sum(a**k / math.factorial(k) for k in range(c)) + a**c / math.factorial(c) * c / (c - a))
    assert solve("mmc", "prob_empty", **kw).value == pytest.approx(p0, rel=1e-12)


@pytest.mark.parametrize("c, lam", [(1, 0.5), (2, 3.0), (4, 2.0), (6, 12.0), (15, 10.0)])
def test_loss_system_blocking_is_erlang_b(c, lam):
    B = float(erlang_b(c, Fraction(lam)))
    for method in ("closed-form", "ctmc"):
        r = solve("mmck", "blocking_probability", method=method, arrival_rate=lam, servers=c, capacity=c)
        assert r.value == pytest.approx(B, rel=1e-12)
        # nobody waits in a loss system
        for measure in ("p_wait", "mean_waiting_time", "mean_queue_length"):
            assert solve("mmck", measure, method=method, arrival_rate=lam, servers=c, capacity=c).value == 0.0
        carried = solve("mmck", "mean_number", method=method, arrival_rate=lam, servers=c, capacity=c).value
        assert carried == pytest.approx(lam * (1 - B), rel=1e-12)  # carried traffic


def test_mmck_blocking_for_a_finite_queue_from_the_product_form():
    lam, c, K = Fraction(5, 2), 2, 6
    w = [lam**n / (math.factorial(min(n, c)) * c ** max(n - c, 0)) for n in range(K + 1)]
    p = [x / sum(w) for x in w]
    for method in ("closed-form", "ctmc"):
        kw = dict(method=method, arrival_rate=2.5, servers=c, capacity=K)
        assert solve("mmck", "blocking_probability", **kw).value == pytest.approx(float(p[K]), rel=1e-12)
        assert solve("mmck", "prob_empty", **kw).value == pytest.approx(float(p[0]), rel=1e-12)
        L = sum(n * p[n] for n in range(K + 1))
        assert solve("mmck", "mean_number", **kw).value == pytest.approx(float(L), rel=1e-12)
        wait = sum(p[n] for n in range(c, K)) / (1 - p[K])
        assert solve("mmck", "p_wait", **kw).value == pytest.approx(float(wait), rel=1e-12)


@pytest.mark.parametrize("name, params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_littles_law(name, params):
    for method in ("closed-form", "ctmc"):
        v = {k: solve(name, k, method=method, **params).value for k in _measures(name)}
        lam_eff = params["arrival_rate"] * (1 - v.get("blocking_probability", 0.0))
        mu = params.get("service_rate", 1.0)
        c = params.get("servers", 1)
        assert v["mean_number"] == pytest.approx(lam_eff * v["mean_response_time"], rel=1e-9)
        assert v["mean_queue_length"] == pytest.approx(lam_eff * v["mean_waiting_time"], rel=1e-9)
        assert v["mean_response_time"] == pytest.approx(v["mean_waiting_time"] + 1 / mu, rel=1e-9)
        # mean busy servers = carried load
        assert v["utilization"] * c == pytest.approx(lam_eff / mu, rel=1e-9)
        assert 0 <= v["p_wait"] <= 1 and 0 < v["prob_empty"] <= 1


def test_mmc_with_one_server_is_mm1():
    for measure in MEASURES:
        a = solve("mmc", measure, arrival_rate=0.6, servers=1, service_rate=1.5).value
        b = solve("mm1", measure, arrival_rate=0.6, service_rate=1.5).value
        assert a == pytest.approx(b, rel=1e-12)


def test_mmck_tends_to_mmc_as_capacity_grows():
    inf = solve("mmc", "mean_number", arrival_rate=2.0, servers=3).value
    fin = solve("mmck", "mean_number", arrival_rate=2.0, servers=3, capacity=200).value
    assert fin == pytest.approx(inf, rel=1e-12)


# ---------------------------------------------------------------------------------
# stability and bad input
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("mm1", dict(arrival_rate=1.0), "arrival_rate must be < service_rate 1 for stability; got 1"),
        ("mm1", dict(arrival_rate=3.0, service_rate=2.0), "arrival_rate must be < service_rate 2 for stability; got 3"),
        ("mmc", dict(arrival_rate=3.0, servers=3), "arrival_rate must be < total service rate 3 for stability; got 3"),
        ("mmc", dict(arrival_rate=5.0, servers=2, service_rate=2.0),
         "arrival_rate must be < total service rate 4 for stability; got 5"),
    ],
)
def test_unstable_input_raises(name, params, message):
    with pytest.raises(UnstableError) as e:
        solve(name, **params)
    assert str(e.value) == message
    assert isinstance(e.value, ModelError)


def test_overloaded_loss_system_is_fine():
    r = solve("mmck", "blocking_probability", arrival_rate=50.0, servers=2, capacity=4)
    assert 0.9 < r.value < 1


def test_api_errors():
    with pytest.raises(ModelError, match="unknown measure 'blocking_probability' for model mm1"):
        solve("mm1", "blocking_probability", arrival_rate=0.5)
    with pytest.raises(NotApplicableError, match="method 'qbd' does not apply to model mmck"):
        solve("mmck", method="qbd", arrival_rate=0.5, servers=1, capacity=3)
    with pytest.raises(NotApplicableError, match="method 'compensation' does not apply to model mm1"):
        solve("mm1", method="compensation", arrival_rate=0.5)
    with pytest.raises(ModelError, match=r"tol must be in \(0, 1\); got 0"):
        solve("mm1", arrival_rate=0.5, tol=0)
    with pytest.raises(ModelError, match=r"truncation must be an integer >= 1; got 0"):
        solve("mm1", arrival_rate=0.5, method="ctmc", truncation=0)
    with pytest.raises(NotApplicableError, match="truncation applies to infinite models only"):
        solve("mmck", method="ctmc", arrival_rate=1.0, servers=1, capacity=3, truncation=10)
    m = exactq.model("mm1", arrival_rate=0.5)
    with pytest.raises(ModelError, match="already built model"):
        solve(m, arrival_rate=0.6)


def test_result_object():
    r = solve("mm1", arrival_rate=0.5)
    assert r.measure == "mean_number"  # the default measure
    assert float(r) == r.value == pytest.approx(1.0, rel=1e-15)
    assert r.seconds >= 0
    d = r.to_dict()
    assert d["value"] == r.value and d["method"] == "closed-form" and d["measure"] == "mean_number"


# ---------------------------------------------------------------------------------
# truncation is reported
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("tol", [1e-6, 1e-9, 1e-12])
@pytest.mark.parametrize("name, params", [("mm1", dict(arrival_rate=0.8)), ("mmc", dict(arrival_rate=3.5, servers=4))])
def test_automatic_truncation_reports_what_it_did(name, params, tol):
    exact = solve(name, "mean_number", method="closed-form", **params).value
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converged: no accuracy warning
        r = solve(name, "mean_number", method="ctmc", tol=tol, **params)
    info = r.info["truncation"]
    assert info["rule"] == "block"
    assert info["error_estimate_kind"] == "level_difference"
    history = info["history"]
    assert len(history) >= 2
    assert info["level"] == history[-1]["level"]
    assert [h["level"] for h in history] == sorted({h["level"] for h in history})  # grows
    assert history[0]["change"] == math.inf
    for h in history:
        assert set(h) >= {"level", "n_states", "boundary_mass", "change"}
        assert h["n_states"] == h["level"] + 1
    assert info["boundary_mass"] == history[-1]["boundary_mass"] <= tol
    assert r.n_states == info["level"] + 1
    assert r.error_estimate is not None and r.error_estimate >= history[-1]["change"]
    assert r.error_estimate <= tol * abs(r.value)
    assert abs(r.value - exact) <= r.error_estimate + 1e-14 * exact
    assert r.residual is not None and r.residual < 1e-12


@pytest.mark.parametrize("K", [20, 30])
def test_fixed_truncation_reports_level_and_boundary_mass(K):
    rho = 0.5
    with pytest.warns(AccuracyWarning, match=f"truncation {K}: probability mass .* exceeds tol=1e-12"):
        r = solve("mm1", "prob_empty", method="ctmc", tol=1e-12, truncation=K, arrival_rate=rho)
    info = r.info["truncation"]
    assert info["level"] == K and info["rule"] == "block"
    assert info["error_estimate_kind"] == "boundary_sensitivity"
    # boundary state K carries (1 - rho) rho^K / (1 - rho^{K+1})
    assert info["boundary_mass"] == pytest.approx((1 - rho) * rho**K / (1 - rho ** (K + 1)), rel=1e-9)
    assert r.n_states == K + 1
    assert r.value == pytest.approx((1 - rho) / (1 - rho ** (K + 1)), rel=1e-12)
    assert r.error_estimate is not None and r.error_estimate > 0


def test_fixed_truncation_strict_raises():
    with pytest.raises(TruncationError, match="truncation 10: probability mass"):
        solve("mm1", method="ctmc", truncation=10, strict=True, arrival_rate=0.5)


def test_fixed_truncation_with_negligible_boundary_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = solve("mm1", method="ctmc", truncation=80, arrival_rate=0.5)
    assert r.value == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("rho, K", [(0.5, 20), (0.9, 100), (0.9, 200)])
def test_fixed_truncation_error_estimate_covers_the_true_error(rho, K):
    """A result never claims more accuracy than it has: |value - exact| <= error_estimate.

    For M/M/1 blocked at K the truncation error of E[L] is known exactly; the reported
    estimate must not be smaller.
    """
    exact = rho / (1 - rho)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = solve("mm1", "mean_number", method="ctmc", truncation=K, arrival_rate=rho)
    true_error = abs(exact - r.value)
    assert true_error > 1e-12  # a visible truncation error
    assert true_error <= r.error_estimate


def test_verify_on_a_basic_model():
    r = solve("mmc", "mean_number", method="ctmc", verify=True, arrival_rate=2.5, servers=3)
    v = r.info["verify"]
    assert v["agree"] is True and v["dps"] == 50
    assert v["abs_diff"] < 1e-12
    assert v["value_mp"] == pytest.approx(r.value, rel=1e-12)


# ---------------------------------------------------------------------------------
# the exact QBD of M/M/1 and M/M/c (no truncation)
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, params", [c for c in CASES if c[0] != "mmck"],
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES) if n != "mmck"])
def test_qbd_agrees_with_closed_form_for_every_measure(name, params):
    for measure in MEASURES:
        exact = solve(name, measure, method="closed-form", **params)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no truncation, no accuracy warning
            q = solve(name, measure, method="qbd", **params)
        assert q.method == "qbd" and q.error_estimate is None and "truncation" not in q.info
        assert q.value == pytest.approx(exact.value, rel=1e-11, abs=1e-15), measure


def test_qbd_of_mmc_is_the_erlang_c_law():
    """Levels n >= 1 of M/M/c are the states c - 1 + n: R = lambda / (c mu), pi0 = the states below c."""
    m = exactq.model("mmc", arrival_rate=4.5, servers=5)
    from exactq.solvers.qbd import solve_qbd

    q = m.qbd()
    assert q.n_phases == 1 and q.n_boundary_phases == 5 and not m.qbd_truncated
    sol = solve_qbd(q)
    assert sol.R[0, 0] == pytest.approx(4.5 / 5, rel=1e-13)
    a = Fraction(9, 2)
    p0 = 1 / (sum(a**k / math.factorial(k) for k in range(5)) + a**5 / math.factorial(5) * 5 / (5 - a))
    expected = [float(p0 * a**k / math.factorial(k)) for k in range(5)]
    np.testing.assert_allclose(sol.pi0, expected, rtol=1e-12)
    with pytest.raises(ModelError, match="exact QBD: it takes no phase truncation"):
        m.qbd(10)


def test_cli_contract_mmc_qbd(capsys):
    import json

    from exactq.cli import main

    assert main(["solve", "mmc", "arrival_rate=4.5", "service_rate=1", "servers=5", "--method", "qbd",
                 "--measure", "mean_response_time", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    exact = solve("mmc", "mean_response_time", arrival_rate=4.5, servers=5).value
    assert out["method"] == "qbd" and out["value"] == pytest.approx(exact, rel=1e-12)
    assert out["warnings"] == []
