"""Speed-aware JSQ/JIQ (exactq.models.speed_aware) and the fluid method (exactq.solvers.fluid).

Independent checks:
* the lumped chain against the unlumped per-server chain (the ``jsq`` model, and a
  chain built here with a separately written routing rule) at the same truncation;
* random routing against the M/M/1 closed form;
* exact flow-balance and Little identities of the truncated chain;
* the fluid linear program in closed form against ``scipy.optimize.linprog``;
* Stolyar's JIQ fixed point against the fluid ODE integrated by ``solve_ivp``;
* exact finite-N values approaching the fluid limit as N grows.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import exactq
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.models.speed_aware import (
    SpeedAware,
    SpeedAwareLimit,
    speed_aware_routing,
)
from exactq.representations.routing import LinearProgram, RootProblem
from exactq.solvers.fluid import greedy_fill, solve_bracketed, solve_linprog, solve_system
from exactq.solvers.stationary import solve_stationary as solve_chain
from exactq.statespace import StateSpace

POLICIES = ("sa-jsq", "jsq", "sa-jiq", "jiq", "random")


def test_routing_rules():
    mu = np.array([2.0, 2.0, 1.0])
    q = np.array([[1, 0, 0], [1, 1, 1], [2, 1, 1]])
    sa_jsq = speed_aware_routing(q, mu, "sa-jsq")
    assert sa_jsq.tolist() == [[0, 1, 0], [0.5, 0.5, 0], [0, 1, 0]]
    jsq = speed_aware_routing(q, mu, "jsq")
    assert np.allclose(jsq, [[0, 0.5, 0.5], [1 / 3] * 3, [0, 0.5, 0.5]])
    jiq = speed_aware_routing(q, mu, "jiq")
    assert np.allclose(jiq, [[0, 0.5, 0.5], [1 / 3] * 3, [1 / 3] * 3])
    sa_jiq = speed_aware_routing(q, mu, "sa-jiq")
    assert np.allclose(sa_jiq, [[0, 1, 0], [1 / 3] * 3, [1 / 3] * 3])
    for pol in POLICIES:
        assert np.allclose(speed_aware_routing(q, mu, pol).sum(1), 1.0)


# -- lumped chain against unlumped chains ------------------------------------------------------


@pytest.mark.parametrize("counts,rates,ties,policy", [
    ("1,1", "2,1", "fastest", "sa-jsq"),
    ("1,1", "2,1", "random", "jsq"),
    ("2,1", "2,2,1", "fastest", "sa-jsq"),
    ("2,1", "2,2,1", "random", "jsq"),
])
def test_lumped_matches_jsq_model(counts, rates, ties, policy):
    lam = 0.7
    n = sum(int(c) for c in counts.split(","))
    a = exactq.solve("speed-aware", speeds="2,1", counts=counts, arrival_rate=lam, policy=policy, tol=1e-10)
    b = exactq.solve("jsq", "mean_response_time", arrival_rate=n * lam, service_rates=rates, ties=ties,
                     tol=1e-10)
    assert a.value == pytest.approx(b.value, rel=1e-8)
    assert a.error_estimate < 1e-8


def _unlumped_routing(q, mu, policy):
    """Per-server routing written independently of speed_aware_routing (loops over speed groups)."""
    n, N = q.shape
    if policy == "random":
        return np.full((n, N), 1.0 / N)
    cand = q == (q.min(1, keepdims=True) if "jsq" in policy else 0)
    if policy.startswith("sa-"):
        chosen = np.zeros_like(cand)
        done = np.zeros(n, dtype=bool)
        for v in sorted(set(mu.tolist()), reverse=True):
            sel = cand & (mu == v)[None, :]
            take = sel.any(1) & ~done
            chosen[take] = sel[take]
            done |= take
        cand = chosen
    out = np.full((n, N), 1.0 / N)
    has = cand.any(1)
    out[has] = cand[has] / cand[has].sum(1, keepdims=True)
    return out


def _unlumped(mu, lam_total, policy, K):
    N = len(mu)
    space = StateSpace.box([f"q{i}" for i in range(N)], hi=[K] * N)
    R = _unlumped_routing(space.states, mu, policy)
    unit = np.eye(N, dtype=np.int64)
    events = [Event(f"a{i}", lambda s, i=i: (lam_total * R[:, i], s + unit[i])) for i in range(N)]
    events += [Event(f"d{i}", lambda s, i=i: (mu[i] * (s[:, i] > 0), s - unit[i])) for i in range(N)]
    chain = build_ctmc(space, events, initial=np.zeros(N, np.int64))
    sol = solve_chain(chain)
    pi = sol.pi
    s = chain.states
    accepted = lam_total - pi @ chain.cut_rate
    return {"mean_response_time": (pi @ s.sum(1)) / accepted, "per_server": pi @ s,
            "busy": pi @ (s > 0)}


@pytest.mark.parametrize("policy", POLICIES)
def test_lumped_matches_independent_unlumped_chain_at_equal_truncation(policy):
    # truncation is symmetric within a class, so the truncated chains lump exactly
    counts, speeds, lam, K = (2, 2), (2.0, 1.0), 0.6, 5
    mu = np.repeat(speeds, counts)
    ref = _unlumped(mu, lam * mu.size, policy, K)
    m = exactq.model("speed-aware", speeds=speeds, counts=counts, arrival_rate=lam, policy=policy)
    chain = m.ctmc(K)
    sol = solve_chain(chain)
    assert m.ctmc_measure("mean_response_time", chain, sol) == pytest.approx(ref["mean_response_time"], rel=1e-11)
    per_class = [ref["per_server"][:2].mean(), ref["per_server"][2:].mean()]
    assert m.ctmc_measure("mean_queue_lengths", chain, sol) == pytest.approx(per_class, rel=1e-10)
    busy = [ref["busy"][:2].mean(), ref["busy"][2:].mean()]
    assert m.ctmc_measure("busy_fractions", chain, sol) == pytest.approx(busy, rel=1e-10)


def test_random_routing_is_mm1_at_every_server():
    lam = 0.25
    r = exactq.solve("speed-aware", speeds="2,1", counts="2,1", arrival_rate=lam, policy="random", tol=1e-8)
    exact = (2 / 3) / (2 - lam) + (1 / 3) / (1 - lam)
    assert r.value == pytest.approx(exact, rel=1e-8)
    q = exactq.solve("speed-aware", "mean_queue_lengths", speeds="2,1", counts="2,1", arrival_rate=lam,
                     policy="random", tol=1e-8)
    assert q.value == pytest.approx([0.125 / 0.875, 0.25 / 0.75], rel=1e-7)
    f = exactq.solve("speed-aware", speeds="2,1", counts="2,1", arrival_rate=lam, policy="random", method="fluid")
    assert f.value == pytest.approx(exact, rel=1e-14)


@pytest.mark.parametrize("policy", POLICIES)
def test_flow_balance_and_little_identities(policy):
    # exact in the truncated chain: accepted arrivals to class j = completions of class j,
    # and E[T] - E[W] = sum_j dispatch_j / mu_j (mean service time)
    m = exactq.model("speed-aware", speeds="3,1", counts="2,1", arrival_rate=0.5, policy=policy)
    chain = m.ctmc(6)
    sol = solve_chain(chain)
    pi = sol.pi
    mu = np.array([3.0, 1.0])
    counts = np.array([2, 1])
    disp = np.array(m.ctmc_measure("dispatch_fractions", chain, sol))
    busy = np.array(m.ctmc_measure("busy_fractions", chain, sol))
    accepted = 3 * 0.5 - pi @ chain.cut_rate
    assert disp.sum() == pytest.approx(1.0, abs=1e-14)
    assert disp * accepted == pytest.approx(mu * busy * counts, rel=1e-10)
    ET = m.ctmc_measure("mean_response_time", chain, sol)
    EW = m.ctmc_measure("mean_waiting_time", chain, sol)
    assert ET - EW == pytest.approx(float(disp @ (1 / mu)), rel=1e-10)
    shares = m.ctmc_measure("busy_shares", chain, sol)
    assert shares == pytest.approx(busy * counts / 3, rel=1e-12)
    p_wait = m.ctmc_measure("p_wait", chain, sol)
    assert 0 < p_wait < 1
    assert abs(pi.sum() - 1) < 1e-12 and pi.min() >= -1e-15


def test_speed_aware_beats_plain_policies_at_finite_n():
    kw = dict(speeds="2,1", counts="2,2", arrival_rate=0.6, tol=1e-7, method="power")
    v = {p: exactq.solve("speed-aware", policy=p, **kw).value for p in POLICIES if p != "random"}
    v["random"] = 0.5 / (2 - 0.6) + 0.5 / (1 - 0.6)  # M/M/1 at every server
    assert v["sa-jsq"] < v["jsq"] < v["random"]
    assert v["sa-jsq"] < v["sa-jiq"] < v["jiq"]


def test_exact_values_approach_the_fluid_limit_as_n_grows():
    lam = 0.6
    fluid = {p: exactq.solve("speed-aware", speeds="2,1", fractions="0.5,0.5", arrival_rate=lam,
                             policy=p).value for p in ("sa-jsq", "jsq")}
    assert fluid["sa-jsq"] == pytest.approx(0.5, rel=1e-14)  # all jobs on the fast class
    for p in ("sa-jsq", "jsq"):
        vals = [exactq.solve("speed-aware", speeds="2,1", counts=f"{k},{k}", arrival_rate=lam, policy=p,
                             tol=1e-7, method="power").value for k in (1, 2, 3)]
        gaps = np.array(vals) - fluid[p]
        assert np.all(gaps > 0) and np.all(np.diff(gaps) < 0)
    # the plain-JSQ gap shrinks fast: 0.196, 0.059, 0.022 (geometric), anchors from this library
    assert vals[2] == pytest.approx(0.735505, abs=2e-6)


# -- the fluid limit ------------------------------------------------------------------------------


def test_fluid_reference_example():
    m = SpeedAware(speeds=(2.0, 1.0), fractions=(0.5, 0.5), arrival_rate=1.2)
    x = greedy_fill(m.fluid_program()).x
    assert x == pytest.approx([0.5, 0.2], abs=1e-15)
    r = exactq.solve("speed-aware", speeds="2,1", counts="inf", fractions="0.5,0.5", arrival_rate=1.2,
                     verify=True)
    assert r.value == pytest.approx(0.58333333, abs=5e-9)
    assert r.info["verify"]["agree"]
    shares = exactq.solve("speed-aware", "busy_shares", speeds="2,1", fractions="0.5,0.5", arrival_rate=1.2)
    assert shares.value == pytest.approx([0.5, 0.2], abs=1e-15)


def test_fill_fastest_first_matches_linprog_on_random_instances():
    rng = np.random.default_rng(4)
    for _ in range(40):
        J = int(rng.integers(1, 6))
        mu = rng.choice([0.5, 1.0, 2.0, 3.0], size=J) * rng.uniform(0.9, 1.1, size=J) ** rng.integers(0, 2)
        gamma = rng.dirichlet(np.ones(J))
        lam = float(rng.uniform(0.01, 0.999) * gamma @ mu)
        lp = LinearProgram(np.ones(J), mu[None, :], [lam], gamma)
        assert lp.is_knapsack
        x = greedy_fill(lp).x
        y = solve_linprog(lp)
        assert y.status == 0 and y.residual < 1e-12
        assert x.sum() == pytest.approx(y.x.sum(), rel=1e-9, abs=1e-12)
        assert mu @ x == pytest.approx(lam, rel=1e-13)
        assert np.all(x >= 0) and np.all(x <= gamma * (1 + 1e-15))


def test_idle_uniform_fixed_point_is_the_limit_of_the_fluid_ode():
    from scipy.integrate import solve_ivp

    mu, gamma, lam = np.array([2.0, 1.0, 0.5]), np.array([0.2, 0.5, 0.3]), 0.9
    m = SpeedAware(speeds=tuple(mu), fractions=tuple(gamma), arrival_rate=lam, policy="jiq")
    root = solve_bracketed(m.idle_equation())
    idle = root.x
    x = lam * gamma / (lam + mu * idle)
    info = {"residual": root.residual}
    # the J balance equations solved as a system agree with the scalar root
    assert solve_system(m.balance_equations()).x == pytest.approx(x, abs=1e-13)

    def rhs(_t, y):  # arrivals to a uniformly chosen idle server, no waiting
        return lam * (gamma - y) / np.sum(gamma - y) - mu * y

    sol = solve_ivp(rhs, (0, 200), np.zeros(3), rtol=1e-11, atol=1e-13, method="LSODA")
    assert sol.y[:, -1] == pytest.approx(x, abs=1e-8)
    assert idle == pytest.approx(np.sum(gamma - x), abs=1e-15)
    assert info["residual"] < 1e-14
    r = exactq.solve("speed-aware", speeds=mu, fractions=gamma, arrival_rate=lam, policy="jiq", verify=True)
    assert r.value == pytest.approx(x.sum() / lam, rel=1e-14)
    assert r.info["verify"]["agree"]
    # JSQ with uniform ties has the same limit as JIQ
    r2 = exactq.solve("speed-aware", speeds=mu, fractions=gamma, arrival_rate=lam, policy="jsq")
    assert r2.value == r.value


def test_fluid_homogeneous_and_speed_aware_order():
    p = exactq.solve("speed-aware", speeds="1", fractions="1", arrival_rate=0.7, policy="jiq")
    assert p.value == pytest.approx(1.0, rel=1e-14) and p.info["idle_fraction"] == pytest.approx(0.3)
    assert p.method == "fluid/idle-uniform" and p.residual < 1e-15
    kw = dict(speeds="3,1", fractions="0.25,0.75", arrival_rate=1.0)
    sa = exactq.solve("speed-aware", policy="sa-jiq", **kw).value
    plain = exactq.solve("speed-aware", policy="jiq", **kw).value
    assert sa < plain
    assert sa == pytest.approx((0.25 + 0.25) / 1.0)  # fast class full (0.75 work), slow takes 0.25
    d = exactq.solve("speed-aware", "dispatch_fractions", policy="sa-jiq", **kw).value
    assert d == pytest.approx([0.75, 0.25])


def test_fluid_method_on_finite_counts_uses_their_fractions():
    a = exactq.solve("speed-aware", speeds="2,1", counts="3,3", arrival_rate=1.2, method="fluid")
    b = exactq.solve("speed-aware", speeds="2,1", fractions="0.5,0.5", arrival_rate=1.2)
    assert a.value == b.value
    n = exactq.solve("speed-aware", "mean_number", speeds="2,1", counts="3,3", arrival_rate=1.2, method="fluid")
    assert n.value == pytest.approx(6 * 0.7)


# -- validation and the command line ------------------------------------------------------------


def test_the_fluid_solvers_refuse_what_they_do_not_fit():
    from exactq.catalogue import solve_representation
    from exactq.errors import NotApplicableError

    two_rows = LinearProgram([1.0, 1.0], [[1.0, 0.0], [0.0, 1.0]], [0.5, 0.5], [1.0, 1.0])
    assert not two_rows.is_knapsack
    with pytest.raises(NotApplicableError, match="one equality row"):
        solve_representation(two_rows, "greedy-fill")
    assert solve_representation(two_rows).x == pytest.approx([0.5, 0.5])  # HiGHS applies
    with pytest.raises(ModelError, match="feasible"):
        greedy_fill(LinearProgram([1.0], [[2.0]], [3.0], [1.0]))
    with pytest.raises(ModelError, match="sign change"):
        solve_bracketed(RootProblem(lambda v: v + 1.0, bracket=(0.0, 1.0)))
    with pytest.raises(ModelError, match="exactly one of bracket"):
        RootProblem(lambda v: v)
    with pytest.raises(NotApplicableError, match="starting point"):
        solve_representation(RootProblem(lambda v: v, bracket=(-1.0, 1.0)), "hybr")


def test_limit_instances_offer_only_the_fluid_method():
    m = exactq.model("speed-aware", speeds="2,1", fractions="0.5,0.5", arrival_rate=1.2)
    assert type(m) is SpeedAwareLimit and isinstance(m, SpeedAware)
    assert exactq.model("speed-aware", speeds="2,1", counts="inf", fractions="0.5,0.5",
                        arrival_rate=1.2) == m
    with pytest.raises(NotApplicableError, match="valid: fluid"):
        exactq.solve(m, method="ctmc")
    with pytest.raises(ModelError, match="mean_number_per_server"):
        exactq.solve(m, "mean_number")
    finite = SpeedAware(speeds=(2.0, 1.0), arrival_rate=0.6, counts=(3, 3))
    assert type(finite) is SpeedAware and finite.counts == (3, 3)
    import dataclasses

    back = dataclasses.replace(m, counts=(1, 1), fractions=None)
    assert type(back) is SpeedAware and back.gamma.tolist() == [0.5, 0.5]
    assert back.ctmc_size(4) == back.ctmc(4).n_states == 25


@pytest.mark.parametrize("params,message", [
    (dict(speeds="2,1", counts="3,3", arrival_rate=1.5), "< mean speed sum_j gamma_j speeds_j = 1.5"),
    (dict(speeds="2,1", counts="1,1", arrival_rate=1.0, policy="random"), "< slowest speed 1"),
    (dict(speeds="2,1", fractions="0.5,0.5", arrival_rate=1.0, policy="random"), "< slowest speed 1"),
    (dict(speeds="2,1", counts="3", arrival_rate=0.5), "one entry per class"),
    (dict(speeds="2,1", counts="0,1", arrival_rate=0.5), "counts must be >= 1"),
    (dict(speeds="2,1", counts="inf", arrival_rate=0.5), "needs fractions"),
    (dict(speeds="2,1", arrival_rate=0.5), "give counts"),
    (dict(speeds="2,1", counts="1,1", fractions="0.5,0.5", arrival_rate=0.5), "not both"),
    (dict(speeds="2,1", fractions="0.5,0.4", arrival_rate=0.5), "sum to 1"),
    (dict(speeds="2,1", counts="1,1", arrival_rate=0.5, policy="jbt"), "policy must be one of"),
])
def test_bad_parameters_give_one_line_errors(params, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        exactq.model("speed-aware", **params)
    assert "\n" not in str(e.value)
    if "speed" in message and "<" in message:
        assert isinstance(e.value, UnstableError)


def test_cli_solve_json_finite_and_limit():
    out = _cli("solve", "speed-aware", "speeds=2,1", "counts=2,2", "arrival_rate=0.6", "policy=sa-jsq", "--measure",
               "mean_response_time", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["model"] == "speed-aware" and d["params"]["counts"] == [2, 2]
    assert d["value"] == pytest.approx(0.645159, abs=2e-6)
    out = _cli("solve", "speed-aware", "speeds=2,1", "counts=inf", "fractions=0.5,0.5", "arrival_rate=1.2", "--json")
    d = json.loads(out.stdout)
    assert d["params"]["counts"] == "inf" and d["method"] == "fluid/priority"
    assert d["value"] == pytest.approx(0.58333333, abs=5e-9)
    bad = _cli("solve", "speed-aware", "speeds=2,1", "counts=1,1", "arrival_rate=2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "stability" in bad.stderr


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


def test_reproduction_table_small():
    from exactq.reproduce.speed_aware import speed_aware_table

    rows = speed_aware_table(ks=(1, 2), loads=(0.6,), policies=("sa-jsq", "random"), tol=1e-6)
    got = {(r["policy"], r["k"]): r for r in rows}
    assert got[("sa-jsq", 2)]["exact"] == pytest.approx(0.645159, abs=2e-6)
    assert got[("sa-jsq", 2)]["fluid"] == pytest.approx(0.5)
    assert got[("random", 1)]["method"].startswith("closed form")
    assert got[("sa-jsq", 1)]["exact"] > got[("sa-jsq", 2)]["exact"] > got[("sa-jsq", 2)]["fluid"]
