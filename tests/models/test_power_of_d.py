"""Power-of-d at finite n: the lumped chain against independent constructions.

Independent checks: the unlumped chain (one coordinate per server, destinations by
enumerating every sample), two-server JSQ (n = d = 2), the foundation's CTMC builder
on the same truncation, the direct stationary solver, and the rigorous bounds
bracketing the exact value. The method pairs of one model are in
tests/pairs/power_of_d.json; the cross-model checks (JSQ) stay here.
"""

from __future__ import annotations

import json
from math import comb

import numpy as np
import pytest

import exactq
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.models.power_of_d import LUMPED_MAX_SERVERS
from exactq.models.power_of_d_chain import CostSet, enumerate_sorted, lumped_generator, unlumped_generator
from exactq.models.power_of_d_routing import (
    finite_stability_limit,
    group_arrival_probabilities,
    position_probabilities,
)
from exactq.solvers.level_aggregation import stationary_levels
from exactq.solvers.stationary import solve_stationary, stationary
from exactq.statespace import SortedSpace, colex_rank


def pod(**kw):
    return exactq.model("power-of-d", **kw)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "kw, text",
    [
        (dict(servers=2, d=3, arrival_rate=0.5), "d must be <= servers"),
        (dict(servers=4, arrival_rate=0.5, error="independent", eps=1.5), "eps must be >= 0 and <= 1"),
        (dict(servers=4, arrival_rate=0.5, error="independent", eps=-0.1), "eps must be >= 0"),
        (dict(servers=4, arrival_rate=0.5, error="dependent", eps=0.5, g=-1), "g must be >= 0"),
        (dict(servers=4, arrival_rate=1.0), "arrival_rate must be < 1"),
        (dict(servers="inf", arrival_rate=0.7, error="independent", eps=0.75), "1/(eps d)"),
        (dict(servers=2, arrival_rate=0.7, error="independent", eps=0.75), "arrival_rate must be < 0.666667"),
        (dict(servers=4, arrival_rate=0.5, eps=0.2), "eps applies to error=independent or dependent"),
        (dict(servers=4, arrival_rate=0.5, error="independent", eps=0.2, g=1), "g applies to error=dependent"),
        (dict(servers=0, arrival_rate=0.5), "servers must be"),
    ],
)
def test_bad_input_one_line(kw, text):
    with pytest.raises(ModelError) as exc:
        pod(**kw)
    msg = str(exc.value)
    assert text in msg and "\n" not in msg


def test_unstable_is_unstable_error():
    with pytest.raises(UnstableError):
        pod(servers="inf", d=2, arrival_rate=0.9, error="independent", eps=0.75)


def test_missing_arrival_rate_only_needed_for_rates():
    r = exactq.solve("power-of-d", "stability_limit", servers="inf", d=2, error="independent", eps=0.75)
    assert r.value == pytest.approx(2.0 / 3.0, abs=1e-15)
    with pytest.raises(ModelError, match="missing required parameter arrival_rate"):
        exactq.solve("power-of-d", servers=4, d=2)


# ---------------------------------------------------------- routing and ranking
@pytest.mark.parametrize("n, d", [(2, 2), (5, 2), (6, 3), (7, 7)])
def test_position_probabilities_closed_form(n, d):
    p = position_probabilities(n, d)
    want = [comb(n - 1 - i, d - 1) / comb(n, d) for i in range(n)]
    assert np.allclose(p, want, rtol=0, atol=1e-15) and p.sum() == pytest.approx(1.0)
    pw = position_probabilities(n, d, "with")
    assert np.allclose(pw, ((n - np.arange(n)) / n) ** d - ((n - 1 - np.arange(n)) / n) ** d)


@pytest.mark.parametrize(
    "sampling, error, eps, g",
    [("without", "none", 0.0, 0), ("with", "independent", 0.3, 0), ("without", "independent", 0.8, 0),
     ("without", "dependent", 0.6, 1), ("with", "dependent", 0.4, 2), ("without", "dependent", 1.0, 3)],
)
def test_group_probabilities_match_sample_enumeration(sampling, error, eps, g):
    """Lumped group probabilities equal the class sums of the brute-force routing."""
    n, d, K = 4, 3 if sampling == "without" else 2, 5
    states, Q = unlumped_generator(n, d, 1.0 / n, K, sampling, error, eps, g)  # rate n*lam = 1 per server
    srt = np.sort(states, axis=1)
    P = group_arrival_probabilities(srt, n, d, sampling, error, eps, g)
    inside = states.max(axis=1) < K
    strides = (K + 1) ** np.arange(n - 1, -1, -1)
    idx = np.arange(len(states))
    for r in np.flatnonzero(inside)[::7]:
        # brute force: probability that the destination has length v, for each v
        dest = np.array([Q[r, idx[r] + strides[i]] for i in range(n)])
        for b in np.flatnonzero(P[r] > 0):
            v = srt[r, b]
            assert dest[states[r] == v].sum() == pytest.approx(P[r, b], abs=1e-14)
        assert P[r].sum() == pytest.approx(1.0, abs=1e-14)


def test_colex_rank_is_a_bijection_on_the_box():
    n, K = 4, 6
    cost = np.zeros(n)
    cost[-1] = 1.0
    X = enumerate_sorted(cost, K)
    assert len(X) == comb(K + n, n)
    assert np.array_equal(np.sort(colex_rank(X)), np.arange(len(X)))
    assert np.all(np.diff(X, axis=1) >= 0)
    assert np.all(np.diff(X.sum(axis=1)) >= 0)  # sorted by level


def test_enumerate_cost_set_is_exact():
    cost = np.array([-0.3, 0.1, 0.5, 1.4])
    X = enumerate_sorted(cost, 6.5)
    grid = np.indices((12,) * 4).reshape(4, -1).T
    grid = grid[np.all(np.diff(grid, axis=1) >= 0, axis=1)]
    want = grid[grid @ cost <= 6.5 + 1e-9]
    assert len(X) == len(want)
    assert set(map(tuple, X.tolist())) == set(map(tuple, want.tolist()))


# ------------------------------------------------------------------- exact
def test_two_servers_is_jsq():
    lam = 0.9
    r = exactq.solve("power-of-d", servers=2, d=2, arrival_rate=lam, tol=1e-10)
    jsq = exactq.solve("jsq", "mean_response_time", arrival_rate=2 * lam, service_rates="1,1", tol=1e-11)
    assert r.value == pytest.approx(jsq.value, rel=1e-9)
    assert r.value == pytest.approx(1 + 4.47491282, abs=1e-8)  # MODELS.md reference (E[W] + 1)


@pytest.mark.parametrize(
    "n, d, lam, sampling, error, eps, g",
    [(3, 2, 0.7, "without", "none", 0.0, 0), (3, 2, 0.6, "with", "independent", 0.3, 0),
     (3, 3, 0.6, "without", "dependent", 0.5, 1)],
)
def test_lumped_matches_unlumped_chain(n, d, lam, sampling, error, eps, g):
    K = 22
    states, Q = unlumped_generator(n, d, lam, K, sampling, error, eps, g)
    pi = stationary(Q, method="direct").pi
    assert pi[states.max(axis=1) == K].sum() < 1e-7
    EL = float(pi @ states.sum(axis=1))
    r = exactq.solve("power-of-d", "mean_number", servers=n, d=d, arrival_rate=lam, sampling=sampling,
                     error=error, eps=eps, g=g, tol=1e-10)
    assert r.value == pytest.approx(EL, rel=3e-7)
    assert r.error_estimate < 1e-8


def test_lumped_generator_equals_foundation_ctmc_and_solvers_agree():
    """Same truncation, two builders (rank arithmetic vs exactq.ctmc events), three solvers."""
    m = pod(servers=3, d=2, arrival_rate=0.8, error="independent", eps=0.2)
    K = 12
    chain = m.ctmc(K)
    cost = np.array([0.0, 0.0, 1.0])
    space = SortedSpace([3], states=enumerate_sorted(cost, K))
    lc = lumped_generator(space, CostSet(cost, K), n=3, d=2, lam=0.8, error="independent", eps=0.2, rule="block")
    idx = space.index(chain.states)
    assert np.all(idx >= 0)
    Qf = chain.Q.toarray()
    Ql = lc.Q.toarray()[np.ix_(idx, idx)]
    assert np.allclose(Qf, Ql, atol=1e-13)
    assert np.allclose(chain.cut_rate, lc.cut_rate[idx], atol=1e-13)
    pi_direct = stationary(lc.Q, method="direct").pi
    st = stationary_levels(lc.Q, lc.levels, rtol=1e-13)
    assert np.abs(st.pi - pi_direct).max() < 1e-11
    assert st.info["relative_residual"] <= 1e-13
    assert solve_stationary(lc).method == "level-aggregation"  # picked by the declared levels
    via_ctmc = exactq.solve(m, "mean_number", method="ctmc", truncation=K)
    assert via_ctmc.value == pytest.approx(float(st.pi @ lc.levels), rel=1e-10)


@pytest.mark.parametrize("loop_min", [1, 10**9])
def test_level_aggregation_smoother_by_levels_and_by_sweeps_agree_with_the_lu(loop_min, monkeypatch):
    """The smoother's two forms (a product per level on zero-copy row blocks, or compiled sweeps over the two
    triangles) give the same stationary law as the sparse LU."""
    import exactq.solvers.level_aggregation as LA

    monkeypatch.setattr(LA, "LEVEL_LOOP_MIN", loop_min)
    m = exactq.model("power-of-d", servers=3, d=2, arrival_rate=0.8)
    lc = m.level_chain(None, target_states=3_000)
    st = stationary_levels(lc.Q, lc.levels, rtol=1e-13)
    pi_direct = stationary(lc.Q, method="direct").pi
    assert np.abs(st.pi - pi_direct).max() < 1e-11
    assert st.info["relative_residual"] <= 1e-13


def test_exact_reports_its_truncation_history():
    r = exactq.solve("power-of-d", servers=3, d=2, arrival_rate=0.7, tol=1e-8)  # n = 3: a fifth of n = 4's time
    hist = r.info["truncation"]["history"]
    assert len(hist) >= 2 and hist[-1]["n_states"] == r.n_states
    assert r.error_estimate <= 1e-8 * r.value
    t = r.info["truncation"]
    assert t["rule"] == "redirect" and t["level"] is None and t["stopped_by"] == "tol"
    assert [h["kept_set"]["stage"] for h in hist] == list(range(len(hist)))
    assert t["kept_set"]["cost_bound"] == hist[-1]["kept_set"]["cost_bound"]
    assert r.method == "exact/level-aggregation"
    occ = exactq.solve("power-of-d", "occupancy", servers=3, d=2, arrival_rate=0.7, tol=1e-8).value
    assert occ[0] == pytest.approx(0.7, abs=1e-7)  # s_1 = lambda (Little, every server busy w.p. lambda)
    assert sum(occ) == pytest.approx(r.value * 0.7, rel=1e-7)


def test_lower_rule_is_a_lower_bound_and_increases():
    m = pod(servers=4, d=2, arrival_rate=0.8)
    exact = exactq.solve(m, tol=1e-10).value
    vals = []
    previous = None
    for target in (3000, None, None):
        ch = m.level_chain(None, previous, rule="lower", target_states=target)
        assert ch.truncation.rule == "lower"
        st = solve_stationary(ch, rtol=1e-13, previous=previous)
        vals.append(st.expect(ch.levels) / (4 * 0.8))
        previous = (ch.released(), st)
    assert all(v <= exact + 1e-12 for v in vals)
    assert vals[-1] > vals[0] and exact - vals[-1] < 1e-4


# ------------------------------------------------------------------- bounds
@pytest.mark.parametrize("kw", [dict(servers=3, d=2, arrival_rate=0.85),
                                dict(servers=4, d=3, arrival_rate=0.7, error="independent", eps=0.3)])
def test_bounds_bracket_the_exact_value(kw):
    m = pod(**kw)
    exact = exactq.solve(m, tol=1e-7)  # within 1e-7 of the truth; the gap to the lower bound is ~3e-5
    opts = {"lower_states": 20_000, "max_phases": 250}
    b = exactq.solve(m, "mean_response_time", method="bounds", options=opts)
    assert b.method == "bounds/coupling" and b.n_states == b.info["lower"]["n_states"]
    assert b.lower <= exact.value <= b.upper
    assert b.upper - b.lower < 0.05 * exact.value
    assert exact.value - b.lower < 1e-3 * exact.value  # the job-losing truncation is tight
    w = exactq.solve(m, "mean_waiting_time", method="bounds", options=opts)
    assert w.lower == pytest.approx(b.lower - 1, abs=1e-9)


def test_bounds_spread_option_and_its_deprecated_name():
    """The upper QBD's spread is an option of its own; --truncation still works, with a warning."""
    kw = dict(servers=3, d=2, arrival_rate=0.7)
    b = exactq.solve("power-of-d", method="bounds", options={"spread": 3, "lower_states": 8000}, **kw)
    assert b.info["upper"]["profile"] == [3, 3] and b.info["upper"]["phases"] == 10  # C(3 + 2, 2)
    with pytest.warns(DeprecationWarning, match="spread=3"):
        old = exactq.solve("power-of-d", method="bounds", truncation=3, options={"lower_states": 8000}, **kw)
    assert (old.lower, old.upper) == (b.lower, b.upper)
    exact = exactq.solve("power-of-d", tol=1e-9, **kw).value
    assert b.lower <= exact <= b.upper


def test_bounds_refuse_dependent_errors():
    with pytest.raises(NotApplicableError, match="ranks"):
        exactq.solve("power-of-d", method="bounds", servers=3, d=2, arrival_rate=0.5, error="dependent",
                     eps=0.5, g=1)


def test_exact_cost_bound_option_and_its_deprecated_name():
    """A fixed kept set is the option cost_bound; truncation=C (its old name) warns and gives the same."""
    kw = dict(servers=3, d=2, arrival_rate=0.6)
    r = exactq.solve("power-of-d", method="exact", options={"cost_bound": 40}, **kw)
    assert len(r.info["truncation"]["history"]) == 1 and r.info["truncation"]["stopped_by"] == "fixed"
    assert r.info["truncation"]["kept_set"]["cost_bound"] == 40.0
    with pytest.warns(DeprecationWarning, match="cost_bound=40"):
        old = exactq.solve("power-of-d", method="exact", truncation=40, **kw)
    assert old.value == r.value
    adaptive = exactq.solve("power-of-d", tol=1e-10, **kw)
    assert r.value == pytest.approx(adaptive.value, abs=r.error_estimate + 1e-9)


def test_large_n_exact_is_refused_before_building():
    with pytest.raises(NotApplicableError) as exc:
        exactq.solve("power-of-d", servers=500, d=2, arrival_rate=0.9, method="exact")
    msg = str(exc.value)
    assert "servers" in msg and str(LUMPED_MAX_SERVERS) in msg and "500" in msg
    assert "meanfield" in msg and "refined" in msg and "\n" not in msg
    assert exactq.solve("power-of-d", servers=500, d=2, arrival_rate=0.9, method="refined").value > 2.614


@pytest.mark.parametrize("method", ["exact", "meanfield", "refined", "bounds", "ctmc"])
def test_stability_limit_is_the_models_for_every_method(method):
    kw = dict(servers=12, d=3, error="independent", eps=0.9)
    r = exactq.solve("power-of-d", "stability_limit", method=method, **kw)
    assert r.value == finite_stability_limit(12, 3, error="independent", eps=0.9)[0] == pytest.approx(1 / 2.7)
    assert r.method == f"{method}/closed-form" and r.error_estimate == 0.0


def test_infinite_servers_exact_is_the_meanfield_limit():
    r = exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.9, method="exact")
    assert r.method == "meanfield/newton" and "meanfield" in r.info["delegate"]
    assert r.value == pytest.approx(2.614057, abs=5e-7)  # MODELS.md
    with pytest.raises(NotApplicableError, match="finite number of servers"):
        exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.9, method="ctmc")


def test_finite_stability_limit():
    assert finite_stability_limit(2, 2, error="independent", eps=0.75)[0] == pytest.approx(2 / 3)
    assert finite_stability_limit(12, 2, error="independent", eps=0.4)[0] == 1.0
    lim, rule = finite_stability_limit(12, 3, error="independent", eps=0.9)
    assert lim == pytest.approx(1 / (0.9 * 3)) and "drain" in rule


# ---------------------------------------------------------------------- CLI
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


def test_cli_contract():
    out = _cli("solve", "power-of-d", "servers=inf", "d=2", "arrival_rate=0.9", "error=independent",
               "eps=0.25", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["method"].startswith("meanfield") and d["value"] > 2.614
    out = _cli("solve", "power-of-d", "servers=inf", "d=2", "error=independent", "eps=0.75",
               "--measure", "stability_limit", "--json")
    assert json.loads(out.stdout)["value"] == pytest.approx(2 / 3)
    bad = _cli("solve", "power-of-d", "servers=2", "d=3", "arrival_rate=0.5")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "d must be <= servers" in bad.stderr


def test_reproduction_registered():
    from exactq.reproduce import reproduction_names

    assert "power-of-d" in reproduction_names()


def test_reproduction_tables_at_a_tiny_scale(monkeypatch, tmp_path):
    """The reproduction's functions at n = 2, 3 and one load (the full run takes minutes)."""
    from exactq.reproduce import have_matplotlib
    from exactq.reproduce import power_of_d as repro

    monkeypatch.setattr(repro, "SERVERS", (2, 3))
    monkeypatch.setattr(repro, "LOADS", (0.5,))
    monkeypatch.setattr(repro, "SWEEP_SERVERS", (2,))
    servers = repro._servers_table(tol=1e-6, max_states=200_000, bounds_options={"lower_states": 5000,
                                                                                 "max_phases": 40})
    assert [r["n"] for r in servers] == [2, 3] and all(r["stop"] == "tol" for r in servers)
    assert servers[0]["exact"] == pytest.approx(1 + 4.47491282, abs=1e-5)  # MODELS.md: JSQ E[W] + 1
    for r in servers:
        assert r["lower"] <= r["exact"] * (1 + 1e-5) and r["exact"] <= r["upper"] * (1 + 1e-5)
        assert r["meanfield"] == pytest.approx(2.614057, abs=5e-7) and r["mf_rel_error"] < 0
    loads = repro._load_table(tol=1e-6, max_states=200_000)
    assert loads[0]["ratio_n2"] == pytest.approx(loads[0]["exact_n2"] / loads[0]["meanfield"])
    budget = repro._exact(tol=1e-12, max_states=30_000, servers=4, d=2, arrival_rate=0.9)
    assert budget.budget_reached and budget.n_states <= 30_000
    stab = repro._stability_table()
    assert repro._fmt(stab[:2], ["eps", "mf_d2"]).splitlines()[0].split() == ["eps", "mf_d2"]
    if have_matplotlib():
        repro._figures(tmp_path, servers, loads, [], stab)
        assert (tmp_path / "power_of_d_servers.png").stat().st_size > 0
