"""Threshold jockeying / blocking bounds for the symmetric two-server JSQ.

The exact JSQ values below were computed with exactq's compensation method
(Adan, Wessels & Zijm 1990) and agree with the adaptively truncated CTMC
(``method="ctmc"``, ``tol=1e-12``) to 1e-11 relative for rho <= 0.9; at rho = 0.99
the compensation value agrees with a 40-digit mpmath solve of the jockeying QBD at
T = 40 (whose bounds are then 1e-12 wide) to 4e-14. Order of each tuple:
mean_number, mean_waiting_time, mean_response_time, prob_empty; service rates 1, 1,
arrival rate 2 rho. The MODELS.md references are asserted separately.
"""

import doctest
import math

import mpmath as mp
import numpy as np
import pytest

import exactq
import exactq.models.jsq as jsq_module
from exactq.catalogue import solve_representation
from exactq.ctmc import Event, build_ctmc
from exactq.errors import AccuracyWarning, NotApplicableError, TruncationError, UnstableError
from exactq.models.jsq import BOUNDED_MEASURES as MEASURES
from exactq.models.jsq import SYSTEMS, blocking_drift, min_stable_threshold, threshold_measure, threshold_qbd
from exactq.representations import Bracket, BracketSolution
from exactq.solvers.qbd import mean_drift, solve_qbd
from exactq.solvers.stationary import solve_stationary as solve_chain
from exactq.statespace import StateSpace


def solve_threshold_system(lam, mu, T, system, **kw):
    return solve_qbd(threshold_qbd(lam, mu, T, system), **kw)


def threshold_bounds(lam, mu, T, measure, **kw):
    """The bounds method at a fixed threshold, through the public API."""
    return exactq.solve("jsq", measure, method="bounds", threshold=T, arrival_rate=lam,
                        service_rates=f"{mu},{mu}", **kw)


def adaptive_threshold_bounds(lam, mu, measure, rtol, **kw):
    return exactq.solve("jsq", measure, method="bounds", tol=rtol, arrival_rate=lam, service_rates=f"{mu},{mu}", **kw)


ORDER = ("mean_number", "mean_waiting_time", "mean_response_time", "prob_empty")
EXACT = {
    0.1: (0.20354285841439912, 0.017714292071994986, 1.0177142920719955, 0.817530943067269),
    0.2: (0.4263756052067029, 0.06593901301675739, 1.0659390130167572, 0.6631734004919556),
    0.3: (0.6864150314044601, 0.14402505234076704, 1.144025052340767, 0.5304184546597854),
    0.4: (1.0069812823200506, 0.25872660290006316, 1.2587266029000632, 0.41550161172204575),
    0.5: (1.4263207511672409, 0.42632075116724105, 1.4263207511672409, 0.3159674979820108),
    0.6: (2.018132228486765, 0.6817768570723042, 1.6817768570723044, 0.23006964258594012),
    0.7: (2.9514761835483423, 1.1081972739631019, 2.1081972739631016, 0.15648524606093475),
    0.8: (4.729178588220051, 1.9557366176375324, 2.955736617637532, 0.09416477521223661),
    0.9: (9.854843078222874, 4.47491282123493, 5.47491282123493, 0.042245762304966815),
    0.95: (19.92461374404522, 9.48663881265538, 10.48663881265538, 0.019955014863554558),
    0.99: (99.98443147141971, 49.49718761182814, 50.49718761182814, 0.0038078469627394035),
}


def exact(rho, measure):
    return EXACT[rho][ORDER.index(measure)]


def test_reference_values_are_those_of_models_md():
    assert exact(0.9, "mean_waiting_time") == pytest.approx(4.47491282, abs=5e-9)
    assert exact(0.9, "mean_number") == pytest.approx(9.85484308, abs=5e-9)
    assert exact(0.5, "mean_number") == pytest.approx(1.42632075, abs=5e-9)


def test_doctests():
    assert doctest.testmod(jsq_module).failed == 0


# ----------------------------------------------------------------- the modified systems
@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9, 0.97])
def test_jockeying_with_threshold_1_is_mm2(rho):
    sol = solve_threshold_system(2 * rho, 1.0, 1, "jockeying")
    value, _ = threshold_measure(sol, "jockeying", 1, "mean_number", 2 * rho)
    assert value == pytest.approx(2 * rho / (1 - rho ** 2), rel=1e-12)
    p0, _ = threshold_measure(sol, "jockeying", 1, "prob_empty", 2 * rho)
    assert p0 == pytest.approx((1 - rho) / (1 + rho), rel=1e-12)


def _pair_ctmc(lam, mu, T, system, K):
    """The threshold system in (q1, q2) coordinates, truncated at K per queue (block rule)."""
    grid = np.indices((K + 1, K + 1)).reshape(2, -1).T
    space = StateSpace(grid[np.abs(grid[:, 0] - grid[:, 1]) <= T], ["q1", "q2"], lo=[0, 0], hi=[K, K])

    def arrival(i):
        def fn(s):
            other = s[:, 1 - i]
            p = np.where(s[:, i] < other, 1.0, np.where(s[:, i] == other, 0.5, 0.0))
            t = s.copy()
            t[:, i] += 1
            return lam * p, t
        return Event(f"arrival_{i}", fn)

    def departure(i):
        def fn(s):
            t = s.copy()
            t[:, i] -= 1
            shorter_at_threshold = (s[:, 1 - i] - s[:, i] == T) & (s[:, i] > 0)
            rate = mu * (s[:, i] > 0)
            if system == "blocking":
                rate = np.where(shorter_at_threshold, 0.0, rate)
            else:  # one job jockeys from the longer queue: (q_i, q_other - 1)
                t[shorter_at_threshold, i] += 1
                t[shorter_at_threshold, 1 - i] -= 1
            return rate, t
        return Event(f"departure_{i}", fn)

    return build_ctmc(space, [arrival(0), arrival(1), departure(0), departure(1)], initial=[0, 0])


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("T", [1, 2, 4])
def test_qbd_blocks_match_the_system_built_in_queue_coordinates(system, T):
    """An independent construction: the modified system as a CTMC on (q1, q2)."""
    lam, mu = 1.1, 1.0
    chain = _pair_ctmc(lam, mu, T, system, K=70)
    sol = solve_chain(chain)
    pi = sol.pi
    s = chain.states
    assert float(pi[chain.boundary_mask()].sum()) < 1e-13
    total = s.sum(1)
    busy = (s > 0).sum(1)
    if system == "blocking":
        busy = busy - ((np.abs(s[:, 0] - s[:, 1]) == T) & (s.min(1) > 0))
    sol = solve_threshold_system(lam, mu, T, system)
    L, _ = threshold_measure(sol, system, T, "mean_number", lam)
    W, _ = threshold_measure(sol, system, T, "mean_waiting_time", lam)
    P0, _ = threshold_measure(sol, system, T, "prob_empty", lam)
    assert L == pytest.approx(float(pi @ total), rel=1e-10)
    assert W == pytest.approx(float(pi @ (total - busy)) / lam, rel=1e-10)
    assert P0 == pytest.approx(float(pi[total == 0].sum()), rel=1e-10)
    # every job gets exactly its exponential service: E[busy] = lambda / mu
    assert float(pi @ busy) == pytest.approx(lam / mu, rel=1e-10)


def test_min_stable_threshold_agrees_with_the_qbd_drift():
    for lam in (0.5, 1.3, 1.45, 1.8, 1.9, 1.98):
        T_min = min_stable_threshold(lam, 1.0)
        for T in range(1, T_min + 3):
            b = threshold_qbd(lam, 1.0, T, "blocking")
            drift = mean_drift(b.A0, b.A1, b.A2)["drift"]
            assert (drift < 0) == (T >= T_min), (lam, T)
            assert blocking_drift(lam, 1.0, T) == pytest.approx(drift, rel=1e-9, abs=1e-14)
    assert min_stable_threshold(1.41, 1.0) == 1 and min_stable_threshold(1.42, 1.0) == 2
    assert min_stable_threshold(1.8, 1.0) == 2
    # the drift tends to (lambda - 2 mu) / 2, so T grows like log(2 mu - lambda) only
    assert blocking_drift(1.5, 1.0, 60) == pytest.approx((1.5 - 2) / 2, rel=1e-12)
    assert min_stable_threshold(2 - 1e-9, 1.0) < 40
    with pytest.raises(UnstableError, match="unstable for every threshold"):
        min_stable_threshold(2 - 1e-13, 1.0)


def test_unstable_blocking_raises_naming_the_threshold_needed():
    with pytest.raises(UnstableError, match=r"threshold blocking with threshold=1 is unstable at "
                                            r"arrival_rate 1\.8 .*use threshold >= 2"):
        threshold_bounds(1.8, 1.0, 1, "mean_waiting_time")
    with pytest.raises(UnstableError, match="use threshold >= 4"):
        threshold_bounds(1.98, 1.0, 3, "mean_number")
    with pytest.raises(UnstableError, match="arrival_rate must be < total service rate 2"):
        threshold_bounds(2.0, 1.0, 6, "mean_number")
    # the QBD solver's own drift test agrees
    with pytest.raises(UnstableError, match="not positive recurrent"):
        solve_threshold_system(1.8, 1.0, 1, "blocking")


# ------------------------------------------------------------------ the bounds themselves
@pytest.mark.parametrize("rho", sorted(EXACT))
def test_bounds_hold_and_tighten_over_the_grid(rho):
    """lower <= exact <= upper for T = 1..10 and every measure; width decreasing in T."""
    lam = 2 * rho
    T_min = min_stable_threshold(lam, 1.0)
    for measure in MEASURES:
        v = exact(rho, measure)
        slack = 1e-12 * max(1.0, abs(v))  # accuracy of the reference value
        prev_width = math.inf
        for T in range(T_min, 11):
            b = threshold_bounds(lam, 1.0, T, measure)
            assert b.lower - slack <= v <= b.upper + slack, (measure, T, b.lower, v, b.upper)
            lo_sys, up_sys = MEASURES[measure]
            raw = b.info[up_sys]["value"] - b.info[lo_sys]["value"]  # without the rounding margin
            assert raw >= -1e-13 * max(1.0, abs(v))
            if raw > 1e-9 * abs(v):
                assert raw < prev_width, (measure, T)
            prev_width = raw


def test_waiting_time_target_at_rho_09_threshold_6():
    b = threshold_bounds(1.8, 1.0, 6, "mean_waiting_time")
    assert b.lower <= 4.47491282 <= b.upper
    mid = 0.5 * (b.lower + b.upper)
    assert (b.upper - b.lower) / mid < 0.01  # the target; measured 0.66 % (E[L]: 0.54 %)


def _mp_expectation(lam, T, system, dps=40):
    """E[L] of a threshold system by logarithmic reduction in mpmath at ``dps`` digits."""
    with mp.workdps(dps):
        b = threshold_qbd(lam, 1.0, T, system)
        A0, A1, A2, B1 = (mp.matrix(getattr(b, k).tolist()) for k in ("A0", "A1", "A2", "B1"))
        m = T + 1
        eye = mp.eye(m)
        inv = mp.inverse(-A1)
        H, L = inv * A0, inv * A2
        G, Tm = L.copy(), H.copy()
        for _ in range(80):
            iu = mp.inverse(eye - (H * L + L * H))
            H, L = iu * (H * H), iu * (L * L)
            G += Tm * L
            Tm = Tm * H
            if max(abs(1 - sum(G[i, j] for j in range(m))) for i in range(m)) < mp.mpf(10) ** (-dps + 5):
                break
        R = A0 * mp.inverse(-(A1 + A0 * G))
        W = mp.inverse(eye - R)
        one = mp.matrix([1] * m)
        norm = one + R * (W * one)
        M = B1 + R * A2
        for i in range(m):
            M[i, m - 1] = norm[i]
        rhs = mp.matrix([0] * m)
        rhs[m - 1] = 1
        pi0 = mp.lu_solve(M.T, rhs)
        d = mp.matrix(list(range(m)))
        pi1 = pi0.T * R
        return (pi0.T * d)[0] + (pi1 * (W * d + W * (W * (2 * one))))[0]


@pytest.mark.parametrize("lam,T", [(1.8, 4), (1.98, 6), (1.0, 3)])
def test_rounding_error_estimate_covers_a_40_digit_resolve(lam, T):
    for system in SYSTEMS:
        sol = solve_threshold_system(lam, 1.0, T, system)
        value, err = threshold_measure(sol, system, T, "mean_number", lam)
        actual = abs(value - float(_mp_expectation(lam, T, system)))
        assert actual <= err, (system, actual, err)
        assert err < 1e-8 * value


def test_adaptive_threshold_reaches_the_requested_width():
    b = adaptive_threshold_bounds(1.8, 1.0, "mean_waiting_time", rtol=1e-6)
    mid = 0.5 * (b.lower + b.upper)
    assert b.upper - b.lower <= 1e-6 * mid
    assert b.lower <= exact(0.9, "mean_waiting_time") <= b.upper
    assert b.info["history"][0]["threshold"] == 2 and b.info["threshold"] < 30
    assert b.info["adaptive"] and b.info["threshold"] == b.info["history"][-1]["threshold"]
    # the result is the intersection of every threshold's bounds
    assert b.lower == max(h["lower"] for h in b.info["history"])
    assert b.upper == min(h["upper"] for h in b.info["history"])
    steps = [h["threshold"] for h in b.info["history"]]
    assert all(t2 == t1 + max(1, t1 // 4) for t1, t2 in zip(steps, steps[1:]))
    b = adaptive_threshold_bounds(1.98, 1.0, "mean_number", rtol=1e-4)
    assert b.info["history"][0]["threshold"] == 4  # the smallest stable threshold
    assert b.lower <= exact(0.99, "mean_number") <= b.upper


def test_adaptive_threshold_stops_at_the_rounding_floor():
    with pytest.warns(AccuracyWarning, match="stopped shrinking"):
        b = adaptive_threshold_bounds(1.0, 1.0, "mean_number", rtol=1e-14)
    assert b.info["threshold"] < 40
    assert b.lower <= exact(0.5, "mean_number") + 1e-12 and exact(0.5, "mean_number") - 1e-12 <= b.upper
    with pytest.raises(TruncationError):
        adaptive_threshold_bounds(1.0, 1.0, "mean_number", rtol=1e-14, strict=True)


# ------------------------------------------------------------------- the registered method
def test_registered_method_returns_a_bounded_result():
    specs = exactq.catalogue.get_method("bounds")
    assert any(s.requires == "threshold_bracket" and s.driver == "bracket" for s in specs)
    r = threshold_bounds(1.8, 1.0, 6, "mean_waiting_time", verify=True)
    assert r.method == "bounds" and r.measure == "mean_waiting_time"
    assert r.lower <= 4.47491282 <= r.upper
    assert r.value == pytest.approx(0.5 * (r.lower + r.upper))
    assert r.error_estimate == pytest.approx(0.5 * (r.upper - r.lower))
    assert r.info["threshold"] == 6 and r.info["verify"]["agree"]
    assert r.info["verify"]["second_algorithm"] == "cyclic_reduction" and r.info["verify"]["abs_diff"] < 1e-12
    assert r.info["lower_system"] == "threshold jockeying" and r.info["algorithm"] == "logarithmic_reduction"
    assert r.residual < 1e-12 and r.nit == r.info["jockeying"]["nit"] + r.info["blocking"]["nit"]
    d = r.to_dict()
    assert d["lower"] == r.lower and d["info"]["jockeying"]["spectral_radius"] < 1
    # threshold None means "grow T until the width <= tol"
    r = adaptive_threshold_bounds(1.0, 1.0, "mean_number", rtol=1e-8)
    assert r.upper - r.lower <= 1e-8 * r.value
    assert r.lower <= exact(0.5, "mean_number") <= r.upper


def test_the_model_describes_the_bounds_by_a_bracket_of_two_qbds():
    m = exactq.model("jsq", arrival_rate=1.8, service_rates="2,2")
    b = m.threshold_bracket("prob_empty", 3)
    assert isinstance(b, Bracket) and b.parameter == 3 and set(b.systems) == set(SYSTEMS)
    assert b.systems["blocking"].n_phases == 4
    sol = solve_representation(b)
    assert isinstance(sol, BracketSolution) and sol.residual < 1e-12
    est = m.threshold_bracket_measure("prob_empty", b, sol)
    assert est.info["lower_system"] == "threshold blocking"  # prob_empty: the systems swap sides
    p0 = exactq.solve("jsq", "prob_empty", method="compensation", arrival_rate=1.8, service_rates="2,2").value
    assert est.lower <= p0 <= est.upper
    assert m.threshold_bracket("mean_number", None).parameter == max(2, min_stable_threshold(1.8, 2.0))
    # rates in units of mu: the service rate 2 gives the unit-rate QBD at half the arrival rate
    assert np.array_equal(b.systems["jockeying"].A1, threshold_qbd(0.9, 1.0, 3, "jockeying").A1)


def test_registered_method_refuses_what_it_cannot_bound():
    with pytest.raises(NotApplicableError, match="equal service_rates"):
        exactq.solve("jsq", method="bounds", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="exactly 2 servers"):
        exactq.solve("jsq", method="bounds", arrival_rate=1.0, service_rates="1,1,1")
    with pytest.raises(NotApplicableError, match="infinite capacity"):
        exactq.solve("jsq", method="bounds", arrival_rate=1.0, service_rates="1,1", capacity=5)
    with pytest.raises(NotApplicableError, match="p_wait"):
        exactq.solve("jsq", "p_wait", method="bounds", arrival_rate=1.0, service_rates="1,1")
    with pytest.raises(exactq.NotApplicableError, match="truncation"):
        exactq.solve("jsq", method="bounds", arrival_rate=1.0, service_rates="1,1", truncation=100)
    with pytest.raises(UnstableError, match="use threshold >= 2"):
        threshold_bounds(1.8, 1.0, 1, "mean_number")


def test_through_the_public_api():
    r = exactq.solve("jsq", "mean_waiting_time", method="bounds", arrival_rate=1.8,
                     service_rates="1,1", threshold=6)
    assert r.lower <= 4.47491282 <= r.upper


# ------------------------------------------------------- the threshold systems as models
@pytest.mark.parametrize("system", SYSTEMS)
def test_threshold_system_as_a_model_matches_its_queue_coordinate_chain(system):
    """``jsq threshold_system=... --method qbd`` against the independent (q1, q2) chain."""
    lam, mu, T = 1.1, 1.0, 3
    chain = _pair_ctmc(lam, mu, T, system, K=70)
    pi = solve_chain(chain).pi
    total = chain.states.sum(1)
    kw = dict(arrival_rate=lam, service_rates=f"{mu},{mu}", threshold=T, threshold_system=system)
    r = exactq.solve("jsq", "mean_number", **kw)  # auto picks the QBD
    assert r.method == "qbd" and r.error_estimate < 1e-9
    assert r.value == pytest.approx(float(pi @ total), rel=1e-10)
    assert exactq.solve("jsq", "prob_empty", method="qbd", **kw).value == \
        pytest.approx(float(pi[total == 0].sum()), rel=1e-10)
    T_ = exactq.solve("jsq", "mean_response_time", method="qbd", **kw).value
    assert T_ == pytest.approx(r.value / lam, rel=1e-13)  # Little: no arrival is lost


def test_threshold_systems_bracket_jsq_and_match_the_bounds_method():
    kw = dict(arrival_rate=1.8, service_rates="1,1", threshold=6)
    lo = exactq.solve("jsq", method="qbd", threshold_system="jockeying", **kw)
    up = exactq.solve("jsq", method="qbd", threshold_system="blocking", **kw)
    b = exactq.solve("jsq", method="bounds", **kw)
    assert b.lower <= lo.value <= 9.85484308 <= up.value <= b.upper
    assert lo.value - b.lower < 1e-9 and b.upper - up.value < 1e-9


def test_threshold_system_refusals_are_one_line():
    base = dict(arrival_rate=1.8, service_rates="1,1")
    with pytest.raises(exactq.ModelError, match="needs threshold=T"):
        exactq.model("jsq", threshold_system="blocking", **base)
    with pytest.raises(exactq.ModelError, match="two equal service_rates; got 1,2"):
        exactq.model("jsq", arrival_rate=1.8, service_rates="1,2", threshold=3, threshold_system="jockeying")
    with pytest.raises(exactq.ModelError, match="infinite capacity"):
        exactq.model("jsq", threshold=3, threshold_system="jockeying", capacity=10, **base)
    with pytest.raises(UnstableError, match="threshold=1 is unstable .*use threshold >= 2"):
        exactq.model("jsq", threshold=1, threshold_system="blocking", **base)
    with pytest.raises(NotApplicableError, match="solved by method qbd"):
        exactq.solve("jsq", method="ctmc", threshold=3, threshold_system="jockeying", **base)
    with pytest.raises(NotApplicableError, match="solved by method qbd"):
        exactq.solve("jsq", method="compensation", threshold=3, threshold_system="jockeying", **base)
    with pytest.raises(NotApplicableError, match="threshold_system=jockeying or blocking"):
        exactq.solve("jsq", method="qbd", **base)
    with pytest.raises(NotApplicableError, match="not available for a threshold system"):
        exactq.solve("jsq", "p_wait", method="qbd", threshold=3, threshold_system="jockeying", **base)


def test_threshold_system_on_the_command_line(capsys):
    from exactq.cli import main

    code = main(["solve", "jsq", "arrival_rate=1.8", "service_rates=1,1", "threshold=1",
                 "threshold_system=jockeying", "--json"])
    out, err = capsys.readouterr()
    import json

    d = json.loads(out)
    assert code == 0 and d["method"] == "qbd" and d["value"] == pytest.approx(1.8 / 0.19, rel=1e-12)  # M/M/2
    code = main(["solve", "jsq", "arrival_rate=1.8", "service_rates=1,1", "threshold_system=blocking"])
    out, err = capsys.readouterr()
    assert code == 2 and err.strip().count("\n") == 0 and "needs threshold=T" in err
