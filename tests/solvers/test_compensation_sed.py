"""Compensation for SED with two identical Erlang servers (solvers/compensation_sed.py).

phases=1 is the symmetric JSQ series; phases 2..MAX_JUMP the Adan & Wessels (1996)
series (r(r+1)/2 start solutions from SED with instantaneous jockeying). Checked against
the matrix-geometric qbd method (exact in the shorter queue), state by state, by the
balance equations and by the truncated CTMC (dominant product form).
"""

import json

import numpy as np
import pytest

import exactq
from exactq.catalogue import solve_representation, solvers_for
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.representations import QuarterPlaneWalk
from exactq.solvers.compensation import SymmetricSeries, symmetric_series
from exactq.solvers.compensation_sed import (MAX_JUMP, ErlangSeries, _inflows, decay_rates, erlang_series, kernel,
                                             solve_erlang_walk)
from exactq.solvers.qbd import solve_qbd

SED_MEASURES = exactq.catalogue.get_model("sed").WALK_MEASURES


def _measures(sol):
    """Every SED measure from a walk solution (unit service rate), through the model's own mapping."""
    model = exactq.model("sed", arrival_rate=2 * sol.rho, service_rates="1,1", phases=getattr(sol, "phases", 1))
    return {m: model.quarter_plane_measure(m, None, sol).value for m in SED_MEASURES}


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.9, 0.95])
def test_phases_1_agrees_with_truncated_ctmc(rho):
    from exactq.solvers.stationary import solve_stationary as solve_chain

    model = exactq.model("sed", arrival_rate=2 * rho, service_rates="1,1")
    chain = model.ctmc(model.truncation_start(1e-14))  # one chain solve for every measure
    sol = solve_chain(chain)
    for measure in SED_MEASURES:
        comp = exactq.solve("sed", measure, method="compensation", arrival_rate=2 * rho, service_rates="1,1")
        ctmc = model.ctmc_measure(measure, chain, sol)
        assert comp.method == "compensation"
        assert np.allclose(comp.value, ctmc, rtol=1e-9, atol=1e-13), measure
        assert comp.error_estimate < 1e-10 * max(1.0, float(np.max(np.abs(np.atleast_1d(comp.value)))))
        assert comp.info["terms"] > 0 and comp.info["contribution_ratio"] < 1


def test_phases_1_equals_symmetric_jsq_and_scales_with_rate():
    s = symmetric_series(0.7)
    jsq_w = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=1.4, service_rates="1,1")
    r = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=1.4, service_rates="1,1")
    assert r.value == pytest.approx(s.mean_min(), rel=1e-14) and r.value == pytest.approx(jsq_w.value, rel=1e-14)
    assert r.info["phases"] == 1 and "Adan, Wessels & Zijm (1990)" in r.info["construction"]
    r2 = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=2.8, service_rates="2,2")
    assert r2.value == pytest.approx(r.value / 2, rel=1e-13)
    fast = exactq.solve("sed", "mean_number", method="compensation", arrival_rate=1.4, service_rates="1,1",
                        ties="fastest")
    assert fast.value == pytest.approx(s.sums().x + s.sums().y, rel=1e-14)


def test_quarter_plane_and_applicability():
    qp = exactq.model("sed", arrival_rate=3.2, service_rates="2,2", phases=3).quarter_plane()
    # remaining phases, in units of the mean service time: arrivals 3.2 / 2 add 3 phases, phases complete at rate 3
    assert dict(qp.upper) == {(3, 0): 1.6, (-1, 0): 3.0, (0, -1): 3.0}
    assert dict(qp.diagonal) == {(3, 0): 0.8, (0, 3): 0.8, (-1, 0): 3.0, (0, -1): 3.0}
    assert qp.is_symmetric and qp.join_shorter_rates().load == pytest.approx(0.8, rel=1e-15)
    refusal = {s.name: s.refusal(qp) for s in solvers_for(qp)}
    assert refusal["compensation-erlang"] is None and "not 1" in refusal["compensation-symmetric"]
    assert isinstance(solve_representation(qp), ErlangSeries)
    one = exactq.model("sed", arrival_rate=1.6, service_rates="1,1").quarter_plane()
    assert isinstance(solve_representation(one), SymmetricSeries)  # phases=1: the symmetric JSQ walk
    with pytest.raises(NotApplicableError, match="two identical servers.*--method ctmc"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="two identical servers"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,1,1")
    with pytest.raises(NotApplicableError, match=rf"implemented for r <= {MAX_JUMP} .*got r = {MAX_JUMP + 1}; other methods of model sed: ctmc, qbd$"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,1", phases=MAX_JUMP + 1)
    with pytest.raises(NotApplicableError, match="measure"):
        exactq.model("sed", arrival_rate=1.0, service_rates="1,1").quarter_plane_measure(
            "blocking", one, solve_representation(one))
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,1").method == "qbd"


def test_cli():
    ok = _cli("solve", "sed", "arrival_rate=1.6", "service_rates=1,1", "phases=1", "--method", "compensation",
              "--json")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["method"] == "compensation"
    assert out["value"] == pytest.approx(symmetric_series(0.8).mean_min(), rel=1e-12)
    bad = _cli("solve", "sed", "arrival_rate=1.6", "service_rates=1,1", f"phases={MAX_JUMP + 1}", "--method",
               "compensation", "--json")
    assert bad.returncode == 2 and bad.stdout == ""
    err = [line for line in bad.stderr.strip().splitlines() if line.startswith("exactq: error")]
    assert len(err) == 1 and f"r <= {MAX_JUMP}" in err[0]


def _cli(*args):
    """``exactq ARGS`` in process (the installed entry point itself is tested in tests/core/test_cli.py)."""
    import contextlib
    import io
    import types

    from exactq.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_decay_rates_r1_closed_form():
    a, b = decay_rates(0.6, 1)
    assert a == pytest.approx(0.36, rel=1e-12) and b == pytest.approx(0.36 / 2.6, rel=1e-12)


@pytest.mark.parametrize("r,rho", [(2, 0.5), (3, 0.6)])
def test_decay_rates_match_ctmc_ratios(r, rho):
    from exactq.solvers.stationary import solve_stationary as solve_chain

    a, b = decay_rates(rho, r)
    assert abs(kernel(rho, r, a, b)) < 1e-14
    assert 0 < b < a < 1
    K = 30
    chain = exactq.model("sed", arrival_rate=2 * rho, service_rates="1,1", phases=r).ctmc(K)
    sol = solve_chain(chain)
    pi = sol.pi
    P = np.zeros((r * K + 1,) * 2)
    P[chain.states[:, 0], chain.states[:, 1]] = pi
    m, n = 8 * r, 2 * r
    assert P[m + 1, m + 1 + n] / P[m, m + n] == pytest.approx(a, rel=1e-5)
    assert P[m, m + n + 1] / P[m, m + n] == pytest.approx(b, rel=1e-5)


# -- phases >= 2: the Adan & Wessels series ----------------------------------------------------

def _qbd_all(rho, r, width=None):
    """Every measure from one matrix-geometric solve.

    ``width=None``: the width that method="qbd" with tol=1e-13 settles on (several solves);
    otherwise one solve at that phase truncation (81 is at least what tol=1e-13 picks for
    r <= 5, rho <= 0.95; 61 agrees with 81 to 7e-15 relative in every measure there, measured
    for r = 2, 3, 5 and rho = 0.8, 0.9, 0.95, at a twentieth of the time for r = 5).
    """
    kw = dict(arrival_rate=2 * rho, service_rates="1,1", phases=r)
    model = exactq.model("sed", **kw)
    if width is None:
        ref = exactq.solve("sed", "mean_waiting_time", method="qbd", tol=1e-13, **kw)
        width = ref.info["phase_truncation"]
    q = model.qbd(width)
    sol = solve_qbd(q)
    return {ms: model.qbd_measure(ms, q, sol) for ms in SED_MEASURES}


@pytest.mark.parametrize("r", [2, 3, 5])
@pytest.mark.parametrize("rho", [0.2, 0.5, 0.8, 0.9, 0.95])
def test_agrees_with_qbd(r, rho):
    ref = _qbd_all(rho, r, width=61)
    comp = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=2 * rho,
                        service_rates="1,1", phases=r)
    assert comp.method == "compensation"
    assert comp.value == pytest.approx(ref["mean_waiting_time"], rel=1e-9)
    assert 0 < comp.error_estimate < 1e-12 * max(1.0, comp.value)
    assert comp.residual < 1e-12
    info = comp.info
    assert info["terms"] > 0 and 0 < info["contribution_ratio"] < 0.01
    assert info["start_solutions"] == r * (r + 1) // 2 and info["tail_probability"] < 1e-13
    values = _measures(erlang_series(rho, r))
    for measure in SED_MEASURES:
        assert np.allclose(values[measure], ref[measure], rtol=1e-9, atol=0), measure


def test_every_measure_through_solve():
    ref = _qbd_all(0.8, 3)
    for measure in SED_MEASURES:
        comp = exactq.solve("sed", measure, method="compensation", arrival_rate=1.6, service_rates="1,1", phases=3)
        assert np.allclose(comp.value, ref[measure], rtol=1e-9, atol=0), measure
        scale = max(1.0, float(np.max(np.abs(np.atleast_1d(comp.value)))))
        assert 0 < comp.error_estimate < 1e-11 * scale, measure


def test_reference_value_and_scaling():
    r = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=1.0, service_rates="1,1",
                     phases=2)
    assert r.value == pytest.approx(0.29938794, abs=5e-9)
    r2 = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=3.0, service_rates="3,3",
                      phases=2)
    assert r2.value == pytest.approx(r.value / 3, rel=1e-13)
    t = exactq.solve("sed", "mean_response_time", method="compensation", arrival_rate=3.0, service_rates="3,3",
                     phases=2)
    assert t.value == pytest.approx(r2.value + 1 / 3, rel=1e-13)


@pytest.mark.parametrize("r,rho", [(2, 0.5), (3, 0.9), (5, 0.8)])
def test_states_balance_and_sign(r, rho):
    sol = erlang_series(rho, r)
    lam = 2 * rho
    M = 3 * r + 6
    m, n = np.indices((M, M))
    p = sol.min_difference_probability(m, n)
    assert np.all(p > 0)
    # balance of every state on the grid, across the corner / series seam at m + n = N
    for a in range(M - r - 1):
        for b in range(M - r - 1):
            out, ins = _inflows(lam, r, a, b)
            flow = sum(q * p[y] for y, q in ins)
            assert abs(out * p[a, b] - flow) <= 1e-12 * out * p[a, b], (a, b)
    # state by state against the matrix-geometric solution
    model = exactq.model("sed", arrival_rate=lam, service_rates="1,1", phases=r)
    width = 60
    qs = solve_qbd(model.qbd(width))
    P = np.vstack([qs.level_vector(level).reshape(r, width + 1) for level in range(M // r + 1)])[:M, :M]
    assert np.allclose(p, P, rtol=1e-7, atol=1e-14)
    # far from the origin p decays with the dominant product form
    a0, b0 = decay_rates(rho, r)
    p = sol.min_difference_probability
    assert p(6 * r + 1, 2 * r) / p(6 * r, 2 * r) == pytest.approx(a0, rel=1e-4)
    assert p(6 * r, 2 * r + 1) / p(6 * r, 2 * r) == pytest.approx(b0, rel=1e-4)


@pytest.mark.parametrize("r,rho", [(2, 0.5), (4, 0.3)])
def test_part_sums_against_the_pointwise_law(r, rho):
    """The closed-form sums of each part against the law of (x, y) summed on a grid holding all but 1e-15."""
    sol = erlang_series(rho, r)
    M = int(np.log(1e-17) / np.log(sol.diagonal_decay)) + 2 * r
    x, y = np.meshgrid(np.arange(M), np.arange(M), indexing="ij")
    q = sol.probability(x, y)
    assert q.sum() == pytest.approx(1.0, abs=1e-14)
    t = sol.part_sums()
    for part, sel in (("upper", (x >= 1) & (x < y)), ("upper_edge", (x == 0) & (y > 0)),
                      ("diagonal", (x == y) & (x > 0)), ("lower", (y >= 1) & (y < x)), ("origin", (x == 0) & (y == 0))):
        assert t[part].mass == pytest.approx(float(q[sel].sum()), abs=1e-14), part
        assert t[part].x == pytest.approx(float((q * x)[sel].sum()), abs=1e-13), part
        assert t[part].y == pytest.approx(float((q * y)[sel].sum()), abs=1e-13), part


@pytest.mark.parametrize("r", [2, 4, 6])
@pytest.mark.parametrize("rho", [0.01, 0.6, 0.999])
def test_busy_servers_identity(r, rho):
    # E[busy servers] = 2 P(m > 0) + P(m = 0, n > 0) = 2 rho, an exact check of the corner
    sol = erlang_series(rho, r)
    t = sol.part_sums()
    p_wait = 1 - (t["upper_edge"] + t["lower_edge"] + t["origin"]).mass
    busy = 2 * p_wait + (1 - p_wait - t["origin"].mass)
    assert busy == pytest.approx(2 * rho, abs=1e-11)
    assert sum(v.mass for v in sol._part_table().values()) == pytest.approx(1.0, abs=1e-14)  # normalised before the sums


def test_free_corner_size_does_not_matter():
    vals = [erlang_series(0.9, 3, N=N).mean_min() for N in (6, 8, 12)]
    assert vals[0] == pytest.approx(vals[1], rel=1e-13) and vals[2] == pytest.approx(vals[1], rel=1e-13)


def test_errors():
    with pytest.raises(ConvergenceError, match="did not converge"):
        erlang_series(0.5, 3, max_terms=50)
    with pytest.raises(ModelError, match="rho"):
        erlang_series(1.0, 2)
    with pytest.raises(ModelError, match="phases >= 2"):
        erlang_series(0.5, 1)
    with pytest.raises(ModelError, match="N="):
        erlang_series(0.5, 3, N=2)
    with pytest.raises(ModelError, match="kind must be"):
        erlang_series(0.5, 2).error(0.1, kind="variance")
    with pytest.raises(ModelError, match="rho"):  # an unstable walk has no stationary law
        solve_erlang_walk(QuarterPlaneWalk.join_shorter(2.0, (2.0, 2.0), jump=2))


def test_rates_near_the_float_limit():
    """The walk is in units of the mean service time, so 1e308 rates give the load-1/2 values."""
    r = exactq.solve("sed", method="compensation", arrival_rate=1e308, service_rates="1e308,1e308", phases=2)
    assert r.value * 1e308 == pytest.approx(0.29938794, abs=5e-9)
    q = exactq.solve("sed", method="qbd", arrival_rate=1e308, service_rates="1e308,1e308", phases=2)
    assert q.value * 1e308 == pytest.approx(0.29938794, abs=5e-9)
    with pytest.raises(ModelError, match="must be below .* for a CTMC generator"):
        exactq.solve("sed", method="ctmc", arrival_rate=1e308, service_rates="1e308,1e308", phases=2)
