"""The defect certificate of MDP policy iteration (issue 23), and what the gambler's-ruin MDP exposed on the way.

Policy iteration's values ``x`` become bounds ``x -/+ w`` where ``w`` is a super-solution of
the defect MDP (:func:`exactq.solvers.mdp.defect_bracket`); it must hold where the relative
slack ``(1 +/- d) x`` cannot (a choice better by an absolute ulp in a state with one-step
value 0). Independent checks: closed forms of random walks evaluated in mpmath at 40 digits
(the stored float probabilities taken exactly), bold play's binary-digit formula (Dubins &
Savage), enumeration of every deterministic scheduler on small random MDPs, Storm where
stormpy is installed, and the plain (round-by-round) graph fixpoints the worklists replace.
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from test_mdp import brute, chain_total, chain_until, encloses, random_mdp
from test_mdp_graph_fast import _prob1e_plain, _random_mdp

import exactq.solvers.linear as linear
import exactq.solvers.mdp as M
from exactq.errors import ConvergenceError, ConvergenceWarning
from exactq.representations.mdp import MDP, Reachability, TotalReward
from exactq.solvers.mdp_graph import RowStructure, greedy, maximal_end_components, prob0a, prob1e


# ------------------------------------------------------------------------------ models
def gambler(N, choices, stop="zero"):
    """Capital 0..N, goal N; every interior state has the given choices, each a list of (move, probability)
    with move an array of successor states per interior state, then (optionally) ``stop``: to 0 ("zero") or a
    self-loop ("loop"). 0 and N absorb."""
    s = np.arange(1, N)
    n = N - 1
    rows_of = [c for c in choices] + ([[(np.zeros(n, dtype=np.int64) if stop == "zero" else s, 1.0)]] if stop else [])
    k = len(rows_of)
    R, C, V = [np.array([0])], [np.array([0])], [np.array([1.0])]
    for j, choice in enumerate(rows_of):
        for move, prob in choice:
            R.append(1 + k * np.arange(n) + j)
            C.append(np.asarray(move, dtype=np.int64))
            V.append(np.broadcast_to(np.asarray(prob, dtype=float), (n,)))
    R.append(np.array([k * n + 1])), C.append(np.array([N])), V.append(np.array([1.0]))
    P = sp.csr_matrix((np.concatenate(V), (np.concatenate(R), np.concatenate(C))), shape=(k * n + 2, N + 1))
    groups = np.concatenate([[0, 1], 1 + k * np.arange(1, n + 1), [k * n + 2]])
    return MDP(P, groups, labels={"goal": np.arange(N + 1) == N})


def bet_one(N, p):
    s = np.arange(1, N)
    return [(s + 1, p), (s - 1, 1.0 - p)]


def bold(N, p):
    s = np.arange(1, N)
    stake = np.minimum(s, N - s)
    return [(s + stake, p), (s - stake, 1.0 - p)]


def walk_exact(N, up, down, jump=0.0):
    """mpmath (40 digits): x_0 = 0, x_N = 1, x_s = up x_{s+1} + down x_{s-1} + jump (the stored floats exactly)."""
    with mpmath.workdps(40):
        u, d, j = mpmath.mpf(up), mpmath.mpf(down), mpmath.mpf(jump)
        c = j / (1 - u - d) if j else mpmath.mpf(0)
        disc = mpmath.sqrt(1 - 4 * u * d)
        l1, l2 = (1 - disc) / (2 * u), (1 + disc) / (2 * u)
        # x_s = c + A l1^s + B l2^s with x_0 = 0 and x_N = 1
        A, B = mpmath.lu_solve(mpmath.matrix([[1, 1], [l1 ** N, l2 ** N]]), mpmath.matrix([-c, 1 - c]))
        x = np.array([float(c + A * l1 ** s + B * l2 ** s) for s in range(N + 1)])
    x[0], x[N] = 0.0, 1.0  # the boundary values themselves (not their 1e-40 cancellations)
    return x


def bold_exact(N, p):
    """Bold play's value for N = 2^k: f(x) = sum_i b_i p prod_{j<i} (p if b_j = 0 else 1 - p), x = 0.b1b2..."""
    k = int(np.log2(N))
    assert 2 ** k == N
    s = np.arange(N + 1)
    bits = (s[:, None] >> np.arange(k - 1, -1, -1)[None, :]) & 1
    w = np.where(bits == 1, 1.0 - p, p)
    prefix = np.concatenate([np.ones((N + 1, 1)), np.cumprod(w, axis=1)[:, :-1]], axis=1)
    f = (bits * p * prefix).sum(axis=1)
    f[N] = 1.0
    return f


def reduced(m, target, sense):
    """The reduced model of :func:`exactq.solvers.mdp.reachability` (graph precomputation, MECs for max)."""
    st = RowStructure(m.P, m.row_groups)
    c = np.ones(m.n_states, dtype=bool)
    if sense == "max":
        zero = prob0a(m.P, m.row_groups, c, target, structure=st)
        one = prob1e(m.P, m.row_groups, c, target, structure=st, zero_max=zero)
    else:
        zero = M.prob0e(m.P, m.row_groups, c, target, structure=st)
        one = M.prob1a(m.P, m.row_groups, c, target, structure=st, zero_min=zero)
    maybe = ~zero & ~one
    red = M.reduce_to(m, st, maybe, np.ones(m.n_choices, dtype=bool), one.astype(float),
                      collapse=np.ones(m.n_choices, dtype=bool) if sense == "max" else None)
    return red, maybe


def lifted(red, maybe, v, one):
    out = one.astype(float)
    out[maybe] = v[red.klass[maybe]]
    return out


# --------------------------------------------------------------- the certificate itself
def test_an_absolute_defect_beats_the_relative_slack_and_the_defect_certificate_absorbs_it():
    # bet 1 at p = 511/1024, or the same bet with 2^-50 of the loss moved to the goal (better by ~1e-15
    # absolute, under policy iteration's switching threshold where the value is above ~0.3), or stop (to 0).
    # The second bet is optimal everywhere (it beats the first by 2^-50 (1 - x_{s-1}) > 0); the stored
    # probabilities are exact binary fractions, so the closed form below is the stored model's value
    N, p, eps = 2000, 511 / 1024, 2.0 ** -50
    s = np.arange(1, N)
    m = gambler(N, [bet_one(N, p), [(s + 1, p), (s - 1, 1 - p - eps), (np.full(N - 1, N), eps)]])
    goal = m.labels["goal"]
    exact = walk_exact(N, p, 1 - p - eps, eps)
    red, maybe = reduced(m, goal, "max")
    x, choice, _ = M.policy_iteration(red, "max", red.starts.copy())
    assert np.any(choice == red.starts)  # the first bet kept somewhere: an absolute defect remains
    best, _ = M.backup(red.Q, red.b, x, red.starts, "max")
    assert np.max(best - x) > 0
    assert M.verified_bracket(red, "max", x, 1e-9) is None  # the old path: no relative slack verifies
    L, U, details = M.defect_bracket(red, "max", x, choice)
    lo, hi = lifted(red, maybe, L, goal), lifted(red, maybe, U, goal)
    assert np.all(lo <= exact) and np.all(exact <= hi)
    # the width: the gap x* - x (~2e-10 relative here) plus the rounding allowance of every step (~1e-15 x per
    # step, over ~1e5 expected steps, both sides)
    assert np.all(hi - lo <= 5e-9 * exact + 1e-300)
    # and through the solver: verified bounds (whichever certificate), no interval iteration, at a tolerance
    # above the floor the rounding of double precision leaves over ~1e5 expected steps (~3e-9 relative here)
    sol = M.reachability(Reachability(m, "goal", "max"), tol=5e-9)
    assert sol.method == "policy-iteration (verified bounds)"
    encloses(sol, exact, rtol=1e-8)
    assert np.all(sol.upper - sol.lower <= 1e-8 * exact)


def test_the_relative_certificate_is_padded_by_what_rounding_leaves_unproven_and_encloses_the_value():
    # until 2026-12-02 verified_bracket accepted F(U) <= U + 8 eps |U| as F(U) <= U: over ~1e5 expected steps
    # that let U sit ~2.5e-13 (relative) below the value here (a strict xfail recorded it). Now the allowance and
    # the backup's rounding are absorbed by w >= a + max_c Q_c w (one solve per side, the kept LU reused)
    N, p, eps = 2000, 511 / 1024, 2.0 ** -50
    s = np.arange(1, N)
    m = gambler(N, [bet_one(N, p), [(s + 1, p), (s - 1, 1 - p - eps), (np.full(N - 1, N), eps)]])
    exact = walk_exact(N, p, 1 - p - eps, eps)
    sol = M.reachability(Reachability(m, "goal", "max"), tol=1e-8)
    assert sol.info["certificate"].startswith("relative")
    assert np.all(sol.lower <= exact) and np.all(exact <= sol.upper)
    # the pad is what it costs: of the order of eps times the expected steps, not more
    assert sol.info["certificate_relative_width"] <= 1e-8
    # the unpadded bracket (the old answer) excludes the value: the pad is needed, not decoration
    red, maybe = reduced(m, m.labels["goal"], "max")
    bare = []
    real = M._pad
    M_pad = lambda red, sense, L, U, choice: bare.append((L, U)) or real(red, sense, L, U, choice)  # noqa: E731
    import unittest.mock as mock
    with mock.patch.object(M, "_pad", M_pad):
        M.reachability(Reachability(m, "goal", "max"), tol=1e-8)
    L, U = bare[0]
    hi = lifted(red, maybe, U, m.labels["goal"])
    assert np.any(hi < exact)


@pytest.mark.parametrize("stop", ["zero", "loop"])
def test_gambler_of_8193_states_with_bold_bets_and_a_stop_choice(stop):
    # bet 1 (p = 0.49), bold (p = 0.45) or stop; the optimum dominates both pure strategies' closed forms, and
    # the returned scheduler's chain, solved apart (scipy's LU on the induced DTMC), attains the bounds
    N = 8192
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)], stop=stop)
    sol = M.reachability(Reachability(m, "goal", "max"))
    assert sol.method == "policy-iteration (verified bounds)"
    assert sol.info["certificate"].startswith(("defect", "relative"))
    assert np.all(sol.upper - sol.lower <= 2e-9 * sol.upper)
    q = 0.51 / 0.49
    timid = np.expm1(np.arange(N + 1) * np.log(q)) / np.expm1(N * np.log(q))
    boldv = bold_exact(N, 0.45)
    tol = 1e-12 * np.maximum(timid, boldv)
    assert np.all(sol.upper >= np.maximum(timid, boldv) - tol)
    assert np.all(sol.lower[1:N] > 0)
    Pc = m.induced(sol.scheduler).tocsr()
    inner = np.arange(1, N)
    A = sp.identity(N - 1, format="csc") - Pc[inner][:, inner].tocsc()
    v = spla.spsolve(A, Pc[inner][:, [N]].toarray().ravel())
    np.testing.assert_allclose(v, sol.value[inner], rtol=1e-9)


def test_gambler_pmin_polishes_the_policy_in_states_of_value_1e_minus_36():
    # without a stop choice Pmin is bet 1 almost everywhere; at capital 1 bold (stake 1 at p = 0.45) is 8 %
    # lower than bet 1 (p = 0.49) but only ~1e-37 absolute, under policy iteration's absolute threshold
    N = 2000
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)], stop=None)
    sol = M.reachability(Reachability(m, "goal", "min"))
    assert sol.method == "policy-iteration (verified bounds)"
    inner = np.arange(1, N)
    assert np.all(sol.upper[inner] - sol.lower[inner] <= 2e-9 * sol.upper[inner])
    assert sol.scheduler.choice[1] == m.row_groups[1] + 1  # bold at capital 1
    # bet 1 everywhere (its closed form in mpmath) is one scheduler: Pmin lies below it, by 8 % at capital 1
    bet = walk_exact(N, 0.49, 0.51)
    assert np.all(sol.lower <= bet * (1 + 1e-12))
    assert sol.upper[1] < 0.95 * bet[1]


def _reachability_forced(m, sense, monkeypatch, improvements=None):
    """reachability with the relative certificate switched off and policy iteration after one sweep."""
    monkeypatch.setattr(M, "verified_bracket", lambda *a, **k: None)
    monkeypatch.setattr(M, "AUTO_SWEEPS", 1)
    if improvements is not None:
        monkeypatch.setattr(M, "DEFECT_IMPROVEMENTS", improvements)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return M.reachability(Reachability(m, m.labels["t"], sense), tol=1e-10)


@pytest.mark.parametrize("seed", range(12))
def test_defect_certificate_on_random_mdps_matches_scheduler_enumeration(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 6))
    m = random_mdp(seed, n, density=0.45)
    t = m.labels["t"]
    used = []
    for sense in ("max", "min"):
        ref = brute(m, sense, lambda P, s: chain_until(P, t, np.ones(n, dtype=bool)))
        sol = _reachability_forced(m, sense, monkeypatch)
        encloses(sol, ref, rtol=2e-9)
        used.append(sol.info.get("certificate", sol.method))
    for sense in ("max", "min"):
        ref = brute(m, sense, lambda P, s: chain_total(P, m.reward("r")[s.choice], t))
        monkeypatch.setattr(M, "verified_bracket", lambda *a, **k: None)
        monkeypatch.setattr(M, "AUTO_SWEEPS", 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            sol = M.total_reward(TotalReward(m, "r", sense, target=t), tol=1e-10)
        encloses(sol, ref, rtol=2e-8)
        used.append(sol.info.get("certificate", sol.method))
    # where policy iteration ran at all, the certificate that verified it was the defect one
    assert all(u.startswith("defect") or u == "interval-iteration" for u in used)


def _leaky(rng, n, seed):
    """A random sparse MDP whose every choice also fails (to the absorbing state n) with probability 1/20."""
    P, groups = _random_mdp(rng, n, seed)
    P = sp.vstack([sp.hstack([0.95 * P, sp.csr_matrix(np.full((P.shape[0], 1), 0.05))]),
                   sp.csr_matrix(([1.0], ([0], [n])), shape=(1, n + 1))]).tocsr()
    t = np.append(rng.random(n) < 0.1, False)
    return MDP(P, np.append(groups, groups[-1] + 1), labels={"t": t})


def test_defect_certificate_holds_on_larger_random_mdps_against_interval_iteration(monkeypatch):
    rng = np.random.default_rng(100)
    for seed in range(3):
        m = _leaky(rng, 80, seed)
        for sense in ("max", "min"):
            ref = M.reachability(Reachability(m, m.labels["t"], sense), method="interval-iteration", tol=1e-12)
            sol = _reachability_forced(m, sense, monkeypatch)
            assert sol.info.get("certificate", "").startswith("defect")
            # two enclosures of the same value overlap, and the certificate's is the tighter
            assert np.all(np.maximum(sol.lower, ref.lower) <= np.minimum(sol.upper, ref.upper) + 1e-15)
            assert sol.width <= 2e-10


def _storm_reach(m, target, sense):
    stormpy = pytest.importorskip("stormpy")
    from stormpy import datastructures, models

    P = m.P.tocsr()
    n, groups = m.n_states, m.row_groups
    b = datastructures.SparseMatrixBuilder[float](rows=P.shape[0], columns=n, entries=P.nnz, force_dimensions=False,
                                                  has_custom_row_grouping=True, row_groups=n)
    for s in range(n):  # the reference is built state by state; the solver under test is not
        b.new_row_group(int(groups[s]))
        for r in range(int(groups[s]), int(groups[s + 1])):
            lo, hi = P.indptr[r], P.indptr[r + 1]
            for j, v in zip(P.indices[lo:hi].tolist(), P.data[lo:hi].tolist()):
                b.add_next_value(r, j, v)
    lab = models.StateLabeling(n)
    lab.add_label("t")
    for s in np.flatnonzero(target).tolist():
        lab.add_label_to_state("t", s)
    mdp = models.SparseMdp[float](models.SparseModelComponents[float](transition_matrix=b.build(), state_labeling=lab))
    res = stormpy.model_checking(mdp, stormpy.parse_properties(f'P{sense}=? [ F "t" ]')[0])
    return np.asarray(res.get_values(), dtype=float) if hasattr(res, "get_values") else \
        np.array([res.get_value(s) for s in range(n)])


def test_defect_certificate_agrees_with_storm(monkeypatch):
    rng = np.random.default_rng(200)
    for seed in range(2):
        m = _leaky(rng, 60, seed)
        for sense in ("max", "min"):
            want = _storm_reach(m, m.labels["t"], sense)
            sol = _reachability_forced(m, sense, monkeypatch)
            assert sol.info.get("certificate", "").startswith("defect")
            slack = 1e-6 * np.maximum(want, 1e-12)  # Storm's default precision
            assert np.all(sol.lower <= want + slack) and np.all(want - slack <= sol.upper)


def _long_detour():
    """State 0: ``exit`` (goal or fail, 1/2 each: value 1/2) or ``detour`` (to 1 or fail, 1/2 each); state 1 stays
    with probability 1 - 2^-10 and else reaches the goal or fails, its value 1 - ~1e-14: the detour is worse
    by ~5e-15, but it lasts ~1,000 steps, so its accumulated margins beat that and the defect MDP's best
    policy detours where policy iteration's exits. 2 = goal, 3 = fail."""
    stay = 1 - 2.0 ** -10
    fail = 2.0 ** -56
    goal = 2.0 ** -10 - fail
    P = sp.csr_matrix(np.array([[0, 0, .5, .5], [0, .5, 0, .5], [0, stay, goal, fail], [0, 0, 1, 0], [0, 0, 0, 1]]))
    m = MDP(P, [0, 2, 3, 4, 5], labels={"t": np.array([False, False, True, False])})
    with mpmath.workdps(40):
        v1 = mpmath.mpf(goal) / (1 - mpmath.mpf(stay))
        exact = np.array([0.5, float(v1), 1.0, 0.0])
    return m, exact


def test_a_failed_check_of_the_defect_mdp_improves_or_falls_back_cleanly(monkeypatch):
    m, exact = _long_detour()
    red, maybe = reduced(m, m.labels["t"], "max")
    x, choice, _ = M.policy_iteration(red, "max", red.starts.copy())
    assert M.defect_bracket(red, "max", x, choice, improvements=0) is None  # the check fails, no improvement
    L, U, details = M.defect_bracket(red, "max", x, choice)
    assert details["improvements"] >= 1
    lo, hi = lifted(red, maybe, L, m.labels["t"]), lifted(red, maybe, U, m.labels["t"])
    assert np.all(lo <= exact) and np.all(exact <= hi)
    # through the solver, with no improvement allowed: interval iteration takes over, and says why
    sol = _reachability_forced(m, "max", monkeypatch, improvements=0)
    assert sol.method == "interval-iteration"
    assert "could not be verified" in sol.info["policy_iteration"]
    encloses(sol, exact, rtol=2e-9)


# --------------------------------------------------------------- the linear solves of policy iteration
def test_a_policy_solve_that_does_not_converge_goes_to_the_lu_never_to_a_value(monkeypatch):
    # the 100,001-state gambler's one-off "Pmax = 1.0": a BiCGSTAB asked for by name handed back its last
    # iterate as the answer, which policy iteration used and method="policy-iteration" clipped into [0, 1]
    N = 200
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)])
    exact = M.reachability(Reachability(m, "goal", "max"), method="interval-iteration", tol=1e-12)
    monkeypatch.setattr(M, "POLICY_LU_ALWAYS", 0)
    monkeypatch.setattr(linear, "choose", lambda A, **k: ("bicgstab", {"why": "forced"}))

    def junk(A, b, **k):
        return np.full(A.shape[0], 7.0), {"iterations": 3, "status": 1, "seconds": 0.0}

    monkeypatch.setattr(linear, "solve_iterative", junk)
    # the iterate is never used: the policy's system goes to the sparse LU, and the bounds are right
    sol = M.reachability(Reachability(m, "goal", "max"), method="policy-iteration")
    assert np.all(np.maximum(sol.lower, exact.lower) <= np.minimum(sol.upper, exact.upper) + 1e-15)
    # and where that LU is over the memory budget: an error, not a value; auto goes on by interval iteration
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", "1KB")
    with pytest.raises(ConvergenceError, match="BiCGSTAB did not converge"):
        M.reachability(Reachability(m, "goal", "max"), method="policy-iteration")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sol = M.reachability(Reachability(m, "goal", "max"))  # auto: interval iteration instead
    assert sol.method == "interval-iteration" and "not used" in sol.info["policy_iteration"]
    assert np.all(np.maximum(sol.lower, exact.lower) <= np.minimum(sol.upper, exact.upper) + 1e-15)


def test_a_tiny_right_hand_side_is_solved_to_relative_accuracy(monkeypatch):
    # scipy's BiCGSTAB breakdown test is absolute (rho < eps^2): a residual of 1e-20 to refine came back as 0
    N = 300
    m = gambler(N, [bet_one(N, 0.49)], stop=None)
    red, _ = reduced(m, m.labels["goal"], "max")
    choice = red.starts.copy()
    direct = M._solve_policy(red, choice, red.b[choice] * 1e-20)
    monkeypatch.setattr(M, "POLICY_LU_ALWAYS", 0)
    monkeypatch.setattr(linear, "choose", lambda A, **k: ("bicgstab", {"why": "forced"}))
    x = M._solve_policy(red, choice, red.b[choice] * 1e-20)
    np.testing.assert_allclose(x, direct, rtol=1e-6)  # BiCGSTAB's accuracy is norm-wise: 1e-8 at 1e-26
    assert np.max(x) > 0


def _probe_prediction(A, **k):
    # what choose() says of consensus N=4's policy systems: BiCGSTAB, the envelope bound 30x above the real LU
    return "bicgstab", {"why": "predicted LU work above an iterative solve's", "prediction": "envelope: forced",
                        "predicted_lu_seconds": 0.8, "predicted_lu_bytes": 1e6}


@pytest.mark.parametrize("keep", [1.0, 0.0])
def test_the_first_large_policy_system_is_factorised_and_timed_and_that_decides_for_the_rest(keep, monkeypatch):
    N = 400
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)])
    exact = M.reachability(Reachability(m, "goal", "max"), method="interval-iteration", tol=1e-12)
    monkeypatch.setattr(M, "POLICY_LU_ALWAYS", 0)
    monkeypatch.setattr(M, "POLICY_LU_KEEP", keep)
    monkeypatch.setattr(linear, "choose", _probe_prediction)
    calls = []
    real = linear.solve_mmatrix
    monkeypatch.setattr(linear, "solve_mmatrix", lambda *a, **k: calls.append(1) or real(*a, **k))
    solves = []
    real_policy = M._solve_policy
    monkeypatch.setattr(M, "_solve_policy", lambda *a, **k: solves.append(1) or real_policy(*a, **k))
    monkeypatch.setattr(M, "AUTO_SWEEPS", 1)  # policy iteration from a poor start: several policies
    sol = M.reachability(Reachability(m, "goal", "max"), method="auto")
    why = sol.info["policy_solver"]
    assert why.startswith("the first policy's LU took") and why.endswith(
        ("the LU for the policies' systems" if keep else "BiCGSTAB for the policies' systems"))
    assert len(solves) >= 2
    assert len(calls) == (0 if keep else len(solves) - 1)  # kept: no BiCGSTAB at all; not: all after the probe
    assert np.all(np.maximum(sol.lower, exact.lower) <= np.minimum(sol.upper, exact.upper) + 1e-15)
    assert sol.info["certificate_relative_width"] <= 1e-9


def test_no_probe_where_the_envelope_bound_is_over_the_memory_budget(monkeypatch):
    N = 400
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)])
    monkeypatch.setattr(M, "POLICY_LU_ALWAYS", 0)
    monkeypatch.setattr(linear, "choose", lambda A, **k: (_probe_prediction(A)[0], {
        **_probe_prediction(A)[1], "predicted_lu_bytes": 1e15}))
    sol = M.reachability(Reachability(m, "goal", "max"), method="policy-iteration")
    red, _ = reduced(m, m.labels["goal"], "max")
    assert red.policy_lu is None
    M._solve_policy(red, red.starts.copy())
    assert red.policy_lu is False and "predicted LU work" in red.policy_why
    assert np.all(sol.lower >= 0) and np.all(sol.upper <= 1)


def test_rmax_leaves_a_hopeless_optimistic_guess_for_policy_iteration_early():
    # the expected number of bets of timid play from the middle of a 2,000 gambler: value iteration's change
    # decays at ~1 - 1e-5 per sweep, so the guess-and-verify start is given up after a few rate checks
    N = 2000
    m = gambler(N, [bet_one(N, 0.49)], stop=None)
    reward = np.zeros(m.n_choices)
    reward[1:-1] = 1.0
    sol = M.total_reward(TotalReward(m, reward, "max", target=(np.arange(N + 1) == 0) | (np.arange(N + 1) == N)))
    assert sol.info["sweeps"] < M.AUTO_SWEEPS
    assert sol.method.startswith("policy-iteration")
    # closed form of the expected duration of a biased walk (Feller, vol. 1, XIV.3): z/(q-p) - N/(q-p) (1-(q/p)^z)/(1-(q/p)^N)
    p, q = mpmath.mpf(0.49), 1 - mpmath.mpf(0.49)
    z = N // 2
    d = z / (q - p) - N / (q - p) * (1 - (q / p) ** z) / (1 - (q / p) ** N)
    assert sol.lower[z] <= float(d) * (1 + 1e-12) and float(d) * (1 - 1e-12) <= sol.upper[z]
    assert sol.upper[z] - sol.lower[z] <= 1e-9 * float(d)


# --------------------------------------------------------------- the graph worklists
def _mec_plain(P, groups, states, rows):
    """de Alfaro (1997), Alg. 3.1, one wave of pruning per round of components (the loop the worklist replaced)."""
    import scipy.sparse.csgraph as csgraph

    st = RowStructure(P, groups)
    alive, live = states.copy(), rows & states[st.owner]
    while True:
        live &= st.all_successors(alive[st.nnz_col])
        alive &= st.any_per_state(live)
        live &= alive[st.owner]
        _, labels = csgraph.connected_components(st.state_graph(rows=live), directed=True, connection="strong")
        labels = np.where(alive, labels, -1)
        keep = live & st.all_successors(labels[st.nnz_col] == labels[st.owner[st.nnz_row]])
        still = alive & st.any_per_state(keep)
        if np.array_equal(keep, live) and np.array_equal(still, alive):
            return labels, live
        live, alive = keep, still


def _with_self_loops(rng, P, groups):
    """Every state gets an extra self-loop choice with probability 1/2 (PRISM's deadlock fix, a gambler's stop)."""
    n = groups.size - 1
    add = rng.random(n) < 0.5
    rows = []
    for s in range(n):
        rows.append(P[groups[s]:groups[s + 1]])
        if add[s]:
            rows.append(sp.csr_matrix(([1.0], ([0], [s])), shape=(1, n)))
    counts = np.diff(groups) + add
    return sp.vstack(rows).tocsr(), np.concatenate([[0], np.cumsum(counts)])


def _same_partition(a, b):
    if not np.array_equal(a < 0, b < 0):
        return False
    pairs = set(zip(a[a >= 0].tolist(), b[b >= 0].tolist()))
    return len(pairs) == len(set(a[a >= 0].tolist())) == len(set(b[b >= 0].tolist()))


def test_mec_worklist_and_prob1e_equal_the_plain_algorithms_with_self_loops():
    rng = np.random.default_rng(23)
    for seed in range(60):
        n = int(rng.integers(2, 40))
        P, groups = _random_mdp(rng, n, seed)
        if seed % 2:
            P, groups = _with_self_loops(rng, P, groups)
        states = rng.random(n) < 0.8
        rows = rng.random(P.shape[0]) < 0.8
        comp, internal = maximal_end_components(P, groups, states=states, rows=rows)
        comp0, internal0 = _mec_plain(P, groups, states, rows)
        assert _same_partition(comp, comp0) and np.array_equal(internal, internal0)
        target = rng.random(n) < 0.2
        assert np.array_equal(prob1e(P, groups, None, target), _prob1e_plain(P, groups, target))


def test_a_gambler_with_a_stop_loop_in_every_state_has_one_end_component_per_state():
    N = 20_000  # the plain loops took one round per state here: minutes
    m = gambler(N, [bet_one(N, 0.49), bold(N, 0.45)], stop="loop")
    maybe = np.ones(N + 1, dtype=bool)
    maybe[[0, N]] = False
    comp, internal = maximal_end_components(m.P, m.row_groups, states=maybe)
    assert np.array_equal(np.sort(comp[maybe]), np.arange(N - 1))
    assert np.array_equal(internal, M.RowStructure(m.P, m.row_groups).self_loops & maybe[np.repeat(
        np.arange(N + 1), np.diff(m.row_groups))])
    goal = m.labels["goal"]
    assert prob1e(m.P, m.row_groups, None, goal).tolist() == goal.tolist()
