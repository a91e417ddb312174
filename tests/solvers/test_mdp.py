"""Tests of the MDP representation, its graph algorithms and the reachability / total-reward solvers.

Independent checks: enumeration of every deterministic memoryless scheduler on small
random MDPs (such a scheduler is optimal for reachability and total rewards, Baier &
Katoen 2008, Lemma 10.102 and Theorem 10.105), each scheduler's Markov chain solved
densely with numpy; closed forms (gambler's ruin, geometric trials); and Storm's MDP
engine where stormpy is installed.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactq.errors import ConvergenceError, ConvergenceWarning, ModelError
from exactq.representations.mdp import MDP, Reachability, Scheduler, TotalReward
from exactq.solvers.mdp import reachability, total_reward
from exactq.solvers.mdp_graph import (attractor, maximal_end_components, prob0a, prob0e, prob1a, prob1e)


# ------------------------------------------------------------------------------ helpers
def random_mdp(seed: int, n: int, max_choices: int = 3, density: float = 0.5) -> MDP:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, max_choices + 1, n)
    groups = np.concatenate([[0], np.cumsum(counts)])
    m = int(groups[-1])
    P = np.zeros((m, n))
    for c in range(m):
        k = int(rng.integers(1, max(2, int(density * n)) + 1))
        js = rng.choice(n, size=min(k, n), replace=False)
        w = rng.random(js.size) + 0.05
        P[c, js] = w / w.sum()
    r = rng.random(m) * rng.integers(0, 2, m)  # some zero rewards: zero-reward end components occur
    return MDP(sp.csr_matrix(P), groups, choice_rewards={"r": r}, labels={"t": rng.random(n) < 0.25,
                                                                          "c": rng.random(n) < 0.8})


def all_schedulers(mdp: MDP):
    ranges = [range(mdp.row_groups[s], mdp.row_groups[s + 1]) for s in range(mdp.n_states)]
    for ch in itertools.product(*ranges):
        yield Scheduler(np.array(ch))


def chain_until(P: np.ndarray, target: np.ndarray, constraint: np.ndarray) -> np.ndarray:
    """P(constraint U target) of a Markov chain, densely: graph search, then one solve."""
    can = target.copy()
    while True:
        new = can | (constraint & (P[:, can].sum(axis=1) > 0))
        if np.array_equal(new, can):
            break
        can = new
    x = target.astype(float)
    m = can & ~target
    if m.any():
        x[m] = np.linalg.solve(np.eye(int(m.sum())) - P[np.ix_(m, m)], P[np.ix_(m, target)].sum(axis=1))
    return x


def chain_total(P: np.ndarray, r: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Expected reward until the target, infinite where it is missed with positive probability."""
    p = chain_until(P, target, np.ones(len(target), dtype=bool))
    sure = p > 1 - 1e-12
    x = np.where(sure, 0.0, np.inf)
    m = sure & ~target
    if m.any():
        x[m] = np.linalg.solve(np.eye(int(m.sum())) - P[np.ix_(m, m)], r[m])
    return x


def brute(mdp: MDP, sense: str, value_of) -> np.ndarray:
    opt = np.maximum if sense == "max" else np.minimum
    best = None
    for s in all_schedulers(mdp):
        v = value_of(mdp.induced(s).toarray(), s)
        best = v if best is None else opt(best, v)
    return best


def encloses(sol, ref, rtol=2e-9):
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(sol.lower), fin) and np.array_equal(np.isfinite(sol.upper), fin)
    assert np.all(sol.lower <= sol.upper)
    assert np.all(sol.lower[fin] <= ref[fin] + 1e-12) and np.all(ref[fin] <= sol.upper[fin] + 1e-12)
    assert np.all(sol.upper[fin] - sol.lower[fin] <= rtol * np.maximum(1.0, np.abs(ref[fin])))


# ------------------------------------------------------------------------- representation
def test_mdp_validation_names_the_offending_choice():
    with pytest.raises(ModelError, match="choice 1 .state 0. sums to 0.9"):
        MDP(sp.csr_matrix([[1.0, 0.0], [0.4, 0.5], [0.0, 1.0]]), [0, 2, 3])
    with pytest.raises(ModelError, match="state 1 has none"):
        MDP(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]]), [0, 2, 2])
    with pytest.raises(ModelError, match=">= 0"):
        MDP(sp.csr_matrix([[1.5, -0.5], [0.0, 1.0]]), [0, 1, 2])
    with pytest.raises(ModelError, match="one column per state"):
        MDP(sp.csr_matrix([[1.0], [1.0]]), [0, 1, 2])
    with pytest.raises(ModelError, match="unknown reward 'x'"):
        MDP(sp.csr_matrix([[1.0]]), [0, 1]).reward("x")
    with pytest.raises(ModelError, match="rewards until a target must be >= 0"):
        TotalReward(MDP(sp.csr_matrix([[1.0]]), [0, 1], state_rewards={"r": [-1.0]}), "r", target=[True])
    with pytest.raises(ModelError, match="sense must be one of min, max"):
        Reachability(MDP(sp.csr_matrix([[1.0]]), [0, 1]), [True], "maximum")


def test_uniformisation_keeps_the_stationary_law_and_totals():
    # an M/M/1/3 queue as a one-choice CTMDP: the uniformised chain has the same stationary law
    lam, mu, K = 1.0, 2.0, 3
    rows, cols, rates = [], [], []
    for s in range(K + 1):
        if s < K:
            rows.append(s), cols.append(s + 1), rates.append(lam)
        if s > 0:
            rows.append(s), cols.append(s - 1), rates.append(mu)
    R = sp.csr_matrix((rates, (rows, cols)), shape=(K + 1, K + 1))
    m = MDP.from_rates(R, np.arange(K + 2), state_reward_rates={"n": np.arange(K + 1.0)})
    assert m.uniformisation_rate == lam + mu
    P = m.P.toarray()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    rho = lam / mu
    pi = rho ** np.arange(K + 1)
    pi /= pi.sum()
    np.testing.assert_allclose(pi @ P, pi, atol=1e-15)
    with pytest.raises(ModelError, match="largest exit rate"):
        MDP.from_rates(R, np.arange(K + 2), uniformisation_rate=2.0)


def test_scheduler_checks_and_export(tmp_path):
    m = MDP(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]), [0, 2, 3], action_names=["stay", "go"],
            actions=[0, 1, 0])
    with pytest.raises(ModelError, match="not one of that state's rows"):
        Scheduler(np.array([2, 2])).check(m)
    with pytest.raises(ModelError, match="sum to 0.5"):
        Scheduler(weights=np.array([0.25, 0.25, 1.0])).check(m)
    path = tmp_path / "policy.json"
    Scheduler(np.array([1, 2])).write_json(m, path)
    import json

    data = json.loads(path.read_text())
    assert [data["action_names"][a] for a in data["actions"]] == ["go", "stay"]
    randomised = Scheduler(weights=np.array([0.5, 0.5, 1.0]))
    np.testing.assert_allclose(m.induced(randomised).toarray(), [[0.5, 0.5], [0.0, 1.0]])


# ------------------------------------------------------------------------- graph algorithms
def _gamble():
    # state 0: "safe" -> goal 1 w.p. .5, trap 2 w.p. .5; "risky" -> goal .3, back to 0 .7
    P = sp.csr_matrix([[0, .5, .5], [.7, .3, 0], [0, 1, 0], [0, 0, 1]])
    return MDP(P, [0, 2, 3, 4], labels={"goal": [False, True, False]})


def test_prob01_on_the_gamble():
    m = _gamble()
    goal = m.labels["goal"]
    assert prob0a(m.P, m.row_groups, None, goal).tolist() == [False, False, True]
    assert prob0e(m.P, m.row_groups, None, goal).tolist() == [False, False, True]
    assert prob1e(m.P, m.row_groups, None, goal).tolist() == [True, True, False]
    assert prob1a(m.P, m.row_groups, None, goal).tolist() == [False, True, False]


@pytest.mark.parametrize("seed", range(6))
def test_prob01_agree_with_scheduler_enumeration(seed):
    m = random_mdp(seed, 5, density=0.4)
    t, c = m.labels["t"], m.labels["c"]
    values = np.array([chain_until(m.induced(s).toarray(), t, c) for s in all_schedulers(m)])
    lo, hi = values.min(axis=0), values.max(axis=0)
    assert np.array_equal(prob0a(m.P, m.row_groups, c, t), hi < 1e-14)
    assert np.array_equal(prob0e(m.P, m.row_groups, c, t), lo < 1e-14)
    assert np.array_equal(prob1e(m.P, m.row_groups, c, t), hi > 1 - 1e-12)
    assert np.array_equal(prob1a(m.P, m.row_groups, c, t), lo > 1 - 1e-12)


def test_maximal_end_components_are_closed_connected_and_maximal():
    # 0 <-> 1 through internal choices; 1 may leave to 2; 2 absorbing; 3 leaves to 2 only
    P = sp.csr_matrix([[0, 1.0, 0, 0], [1.0, 0, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 1.0, 0], [0, 0, 0.5, 0.5],
                       [0, 0, 1.0, 0]])
    comp, internal = maximal_end_components(P, [0, 1, 3, 4, 6])
    assert comp.tolist() == [0, 0, 1, -1]
    assert internal.tolist() == [True, True, False, True, False, False]


def test_attractor_reaches_the_target_almost_surely():
    m = random_mdp(3, 6, density=0.3)
    t = m.labels["t"] | (np.arange(6) == 0)
    one, rows = prob1e(m.P, m.row_groups, None, t, with_rows=True)
    reached, choice = attractor(m.P, m.row_groups, t, rows)
    assert np.array_equal(reached, one)
    base = m.row_groups[:-1].copy()
    sched = Scheduler(np.where(choice >= 0, choice, base))
    p = chain_until(m.induced(sched).toarray(), t, np.ones(6, dtype=bool))
    assert np.all(p[one] > 1 - 1e-12)


# ------------------------------------------------------------------------- reachability
def test_gamble_values_and_schedulers():
    m = _gamble()
    hi = reachability(Reachability(m, "goal", "max"))
    lo = reachability(Reachability(m, "goal", "min"))
    assert hi.at(0) == (1.0, 1.0, 1.0) and hi.scheduler.choice[0] == 1  # keep trying
    assert lo.lower[0] <= 0.5 <= lo.upper[0] and lo.scheduler.choice[0] == 0


def test_gamblers_ruin_with_a_stop_choice():
    # a walk on 0..N: in every interior state "bet" (up p, down 1-p) or "stop" (to the absorbing 0);
    # Pmax of reaching N is the ruin closed form (stopping never helps)
    N, p = 10, 0.6
    rows, groups = [], [0]
    for s in range(N + 1):
        if 0 < s < N:
            rows.append({s + 1: p, s - 1: 1 - p})
            rows.append({0: 1.0})
        else:
            rows.append({s: 1.0})
        groups.append(len(rows))
    P = sp.lil_matrix((len(rows), N + 1))
    for i, row in enumerate(rows):
        for j, v in row.items():
            P[i, j] = v
    m = MDP(P.tocsr(), groups, labels={"top": np.arange(N + 1) == N})
    sol = reachability(Reachability(m, "top", "max"), tol=1e-12, method="interval-iteration")
    q = (1 - p) / p
    exact = (1 - q ** np.arange(N + 1)) / (1 - q ** N)
    encloses(sol, exact, rtol=4e-12)
    pi = reachability(Reachability(m, "top", "max"), method="policy-iteration")
    np.testing.assert_allclose(pi.lower, exact, rtol=1e-12)
    low = reachability(Reachability(m, "top", "min"))
    assert np.all(low.upper[:N] == 0.0)  # stop at once: Prob0E settles it without arithmetic


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5), sense=st.sampled_from(["min", "max"]),
       constrained=st.booleans())
def test_reachability_encloses_the_optimum_over_all_schedulers(seed, n, sense, constrained):
    m = random_mdp(seed, n, density=0.45)
    t = m.labels["t"]
    c = m.labels["c"] if constrained else np.ones(n, dtype=bool)
    ref = brute(m, sense, lambda P, s: chain_until(P, t, c))
    problem = Reachability(m, t, sense, constraint=c if constrained else None)
    for method in ("auto", "interval-iteration"):
        encloses(reachability(problem, method=method), ref)
    sol = reachability(problem)
    pi = reachability(problem, method="policy-iteration")
    np.testing.assert_allclose(pi.lower, ref, atol=1e-12)
    # the returned scheduler attains the optimum
    own = chain_until(m.induced(sol.scheduler).toarray(), t, c)
    np.testing.assert_allclose(own, ref, atol=1e-8)


def test_bounded_until_matches_matrix_powers():
    m = random_mdp(11, 5)
    t = m.labels["t"]
    k = 7
    best = None
    for s in all_schedulers(m):
        P = m.induced(s).toarray()
        P[t] = np.eye(5)[t]  # the target absorbs
        v = np.linalg.matrix_power(P, k)[:, t].sum(axis=1)
        best = v if best is None else np.maximum(best, v)
    sol = reachability(Reachability(m, t, "max", steps=k))
    # memoryless schedulers are not optimal for bounded reachability: the optimum is at least theirs
    assert np.all(sol.lower >= best - 1e-12)
    # and equals backward induction written out by hand
    x = t.astype(float)
    for _ in range(k):
        q = m.P @ x
        x = np.where(t, 1.0, np.maximum.reduceat(q, m.row_groups[:-1]))
    np.testing.assert_allclose(sol.lower, x, atol=1e-15)


# ------------------------------------------------------------------------- total rewards
def test_geometric_trials_expected_steps():
    # flip until heads; "fast" coin p = 0.5 costs 2 per flip, "slow" p = 0.2 costs 1: Rmin = min(4, 5) = 4
    P = sp.csr_matrix([[0.5, 0.5], [0.8, 0.2], [0.0, 1.0]])
    m = MDP(P, [0, 2, 3], choice_rewards={"cost": [2.0, 1.0, 0.0]})
    lo = total_reward(TotalReward(m, "cost", "min", target=[False, True]))
    hi = total_reward(TotalReward(m, "cost", "max", target=[False, True]))
    assert lo.lower[0] <= 4.0 <= lo.upper[0] and hi.lower[0] <= 5.0 <= hi.upper[0]
    assert lo.scheduler.choice[0] == 0 and hi.scheduler.choice[0] == 1


def test_zero_reward_end_component_is_collapsed_for_rmin():
    # state 0 may loop for free forever, but Rmin counts only schedulers reaching the target: 5
    P = sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    m = MDP(P, [0, 2, 3], choice_rewards={"cost": [0.0, 5.0, 0.0]})
    sol = total_reward(TotalReward(m, "cost", "min", target=[False, True]))
    assert sol.lower[0] <= 5.0 <= sol.upper[0] and sol.upper[0] - sol.lower[0] < 1e-8
    assert sol.scheduler.choice[0] == 1
    hi = total_reward(TotalReward(m, "cost", "max", target=[False, True]))
    assert hi.lower[0] == np.inf  # some scheduler never reaches the target


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5), sense=st.sampled_from(["min", "max"]))
def test_total_reward_encloses_the_optimum_over_all_schedulers(seed, n, sense):
    m = random_mdp(seed, n, density=0.45)
    t = m.labels["t"]
    ref = brute(m, sense, lambda P, s: chain_total(P, m.induced_reward(s, "r"), t))
    for method in ("auto", "interval-iteration"):
        encloses(total_reward(TotalReward(m, "r", sense, target=t), method=method), ref)
    sol = total_reward(TotalReward(m, "r", sense, target=t))
    pi = total_reward(TotalReward(m, "r", sense, target=t), method="policy-iteration")
    fin = np.isfinite(ref)
    np.testing.assert_allclose(pi.lower[fin], ref[fin], rtol=1e-10, atol=1e-12)
    own = chain_total(m.induced(sol.scheduler).toarray(), m.induced_reward(sol.scheduler, "r"), t)
    np.testing.assert_allclose(own[fin], ref[fin], rtol=1e-7, atol=1e-9)


def test_cumulative_reward_within_k_steps():
    m = random_mdp(4, 4)
    k = 5
    x = np.zeros(4)
    for _ in range(k):
        x = np.minimum.reduceat(m.reward("r") + m.P @ x, m.row_groups[:-1])
    sol = total_reward(TotalReward(m, "r", "min", steps=k))
    np.testing.assert_allclose(sol.lower, x, atol=1e-15)


def test_non_convergence_warns_and_keeps_valid_bounds():
    N, p = 30, 0.5
    P = sp.diags([np.full(N, 1 - p), np.full(N, p)], [-1, 1], shape=(N + 1, N + 1)).tolil()
    P[0, :], P[N, :] = 0, 0
    P[0, 0], P[N, N] = 1, 1
    m = MDP(P.tocsr(), np.arange(N + 2), labels={"top": np.arange(N + 1) == N})
    with pytest.warns(ConvergenceWarning, match="still enclose"):
        sol = reachability(Reachability(m, "top", "max"), maxiter=20, method="interval-iteration")
    exact = np.arange(N + 1) / N
    assert np.all(sol.lower <= exact + 1e-15) and np.all(exact <= sol.upper + 1e-15)
    with pytest.raises(ConvergenceError):
        reachability(Reachability(m, "top", "max"), maxiter=20, strict=True, method="interval-iteration")
    auto = reachability(Reachability(m, "top", "max"))  # policy iteration, verified: no sweeps at all
    assert auto.method == "policy-iteration (verified bounds)"
    assert np.all(auto.lower <= exact + 1e-15) and np.all(exact <= auto.upper + 1e-15)


# ------------------------------------------------------------------------- Storm
def _storm_mdp(m: MDP):
    stormpy = pytest.importorskip("stormpy")
    from stormpy import datastructures, models

    P = m.P.tocsr()
    b = datastructures.SparseMatrixBuilder[float](rows=P.shape[0], columns=m.n_states, entries=P.nnz,
                                                  force_dimensions=False, has_custom_row_grouping=True,
                                                  row_groups=m.n_states)
    rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
    for s in range(m.n_states):
        b.new_row_group(int(m.row_groups[s]))
        lo, hi = P.indptr[m.row_groups[s]], P.indptr[m.row_groups[s + 1]]
        b.add_next_values(rows[lo:hi].tolist(), P.indices[lo:hi].tolist(), P.data[lo:hi].tolist())
    lab = models.StateLabeling(m.n_states)
    for name, mask in {"init": np.arange(m.n_states) == 0, **m.labels}.items():
        lab.add_label(name)
        for s in np.flatnonzero(mask):
            lab.add_label_to_state(name, int(s))
    rew = models.SparseRewardModel[float](optional_state_action_reward_vector=m.reward("r").tolist())
    comp = models.SparseModelComponents[float](transition_matrix=b.build(), state_labeling=lab,
                                               reward_models={"r": rew})
    return stormpy, models.SparseMdp[float](comp)


@pytest.mark.parametrize("seed", [1, 2])
def test_against_storm_sound_value_iteration(seed):
    m = random_mdp(seed, 30, max_choices=3, density=0.1)
    stormpy, smdp = _storm_mdp(m)
    env = stormpy.environments.default(smdp)  # sound mode
    for text, ours in [('Pmax=? [ "c" U "t" ]', reachability(Reachability(m, "t", "max", constraint="c"),
                                                            method="interval-iteration")),
                       ('Pmin=? [ F "t" ]', reachability(Reachability(m, "t", "min"))),
                       ('R{"r"}min=? [ F "t" ]', total_reward(TotalReward(m, "r", "min", target="t"))),
                       ('R{"r"}max=? [ F "t" ]', total_reward(TotalReward(m, "r", "max", target="t")))]:
        res = stormpy.model_checking(smdp, stormpy.parse_properties(text)[0], environment=env)
        theirs = np.array([res.get_value(s) for s in range(m.n_states)])
        fin = np.isfinite(theirs)
        assert np.array_equal(fin, np.isfinite(ours.lower)), text
        # Storm's sound engine stops at relative precision 1e-6
        np.testing.assert_allclose(ours.value[fin], theirs[fin], rtol=2e-6, atol=1e-9, err_msg=text)
