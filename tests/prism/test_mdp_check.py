"""PRISM mdp files: the built MDP, the optima over schedulers and their bounds, against independent methods.

The case studies are our own files (tests/prism/mdp_*.nm), written from the protocols'
published descriptions. Independent checks: every deterministic memoryless scheduler
of a small instance enumerated, its Markov chain solved by the DTMC solvers of
:mod:`exactq.solvers.reachability` (the optimum over them is the MDP's optimum for
reachability and total rewards, Puterman 1994, thm. 7.1.9); policy iteration against
interval iteration; closed forms. Storm's exact engine is in test_mdp_storm.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from exactq.api import check_properties
from exactq.cli import main
from exactq.errors import ExactqError
from exactq.prism import load_prism
from exactq.representations.mdp import MDP, Reachability, Scheduler, TotalReward
from exactq.solvers.mdp import reachability, total_reward
from exactq.solvers.reachability import expected_reward, until_probability

FILES = Path(__file__).resolve().parent
GAMBLE = """mdp
module g
  s : [0..2] init 0;
  [safe]  s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
  [risky] s=0 -> 0.3 : (s'=1) + 0.7 : (s'=0);
  [stop]  s>0 -> true;
endmodule
label "win" = s=1;
rewards "bets" [safe] true : 1; [risky] true : 1; endrewards
rewards "wait" s=0 : 2; endrewards
"""


def load(name, consts=None):
    return load_prism(str(FILES / name), consts)


def answer(model, prop):
    r, = check_properties(model, prop)
    return r


def enclose(r, exact, rel=1e-9):
    """The result's value is within rel of exact, and its bounds enclose exact (to a few ulps)."""
    assert r.lower is not None and r.upper is not None
    slack = 8 * np.finfo(float).eps * max(1.0, abs(exact))
    assert r.lower - slack <= exact <= r.upper + slack, (r.lower, exact, r.upper)
    assert abs(r.value - exact) <= rel * max(1.0, abs(exact)), (r.value, exact)


# ------------------------------------------------------------------------------ the built MDP
def test_the_mdp_has_one_row_per_state_and_enabled_choice():
    m = load_prism("g.nm", text=GAMBLE)
    mdp = m.built.chain
    assert isinstance(mdp, MDP)
    assert mdp.n_states == 3 and mdp.choice_counts.tolist() == [2, 1, 1]
    names = [mdp.action_names[a] for a in mdp.actions]
    assert names == ["safe", "risky", "stop", "stop"]
    assert np.allclose(np.asarray(mdp.P.sum(axis=1)).ravel(), 1.0)
    # transition rewards sit on the choices of their action, state rewards on the states
    assert mdp.choice_rewards["bets"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert mdp.state_rewards["wait"].tolist() == [2.0, 0.0, 0.0]
    assert mdp.reward("wait").tolist() == [2.0, 2.0, 0.0, 0.0]


def test_a_synchronised_action_makes_one_choice_per_combination_of_enabled_commands():
    # two modules with two enabled [a]-commands each: 4 choices, each the product of its commands' updates
    text = """mdp
module m1 x : [0..2] init 0;
  [a] x=0 -> (x'=1);
  [a] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
endmodule
module m2 y : [0..2] init 0;
  [a] y=0 -> (y'=1);
  [a] y=0 -> 0.25 : (y'=2) + 0.75 : (y'=1);
  [] y=0 -> (y'=2);
endmodule
"""
    mdp = load_prism("s.nm", text=text).built.chain
    s0 = int(np.flatnonzero((mdp.states == [0, 0]).all(axis=1))[0])
    lo, hi = mdp.row_groups[s0], mdp.row_groups[s0 + 1]
    assert hi - lo == 5  # one unlabelled command and 2 x 2 combinations of [a]
    rows = mdp.P[lo:hi].toarray()
    got = sorted(tuple(np.round(r[r > 0], 6)) for r in rows)
    # the combinations' distributions over the targets: products of the modules' update probabilities
    want = sorted([(1.0,), (1.0,), (0.75, 0.25), (0.5, 0.5), (0.375, 0.125, 0.375, 0.125)])
    assert sorted(tuple(sorted(g)) for g in got) == sorted(tuple(sorted(w)) for w in want)
    assert np.allclose(rows.sum(axis=1), 1.0)


def test_a_synchronisation_one_module_never_enables_adds_no_choice_and_keeps_the_others_actions():
    # [dead] is enabled in m1 at x = 2 but never in m2 (y stays 0): the builder skips the group on every frontier,
    # and the choices of the actions after it keep their names; the chain is that of the file without [dead]
    text = """mdp
module m1 x : [0..2] init 0;
  [dead] x=2 -> (x'=0);
  [go] x<2 -> 0.5 : (x'=x+1) + 0.5 : true;
  [stay] true -> true;
endmodule
module m2 y : [0..1] init 0;
  [dead] y=1 -> (y'=0);
  [go] true -> true;
endmodule
"""
    mdp = load_prism("s.nm", text=text).built.chain
    plain = load_prism("p.nm", text=text.replace("[dead] x=2 -> (x'=0);", "")
                       .replace("[dead] y=1 -> (y'=0);", "")).built.chain
    names = [mdp.action_names[a] for a in mdp.actions]
    assert names == [plain.action_names[a] for a in plain.actions] == ["go", "stay", "go", "stay", "stay"]
    assert mdp.choice_counts.tolist() == [2, 2, 1]
    assert (mdp.P != plain.P).nnz == 0 and np.array_equal(mdp.states, plain.states)


def test_deadlocks_get_one_self_loop_choice_as_in_prism():
    text = "mdp\nmodule m x : [0..1] init 0;\n  [go] x=0 -> (x'=1);\nendmodule\n"
    with pytest.warns(Warning, match="deadlocked state"):
        built = load_prism("d.nm", text=text).built
    mdp = built.chain
    assert built.n_deadlocks == 1 and mdp.n_choices == 2
    s1 = int(np.flatnonzero(mdp.states[:, 0] == 1)[0])
    assert mdp.P[mdp.row_groups[s1]].toarray().ravel()[s1] == 1.0


def test_models_lists_the_choices(capsys):
    code = main(["models", str(FILES / "mdp_zeroconf.nm"), "--const", "K=4,N=2", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    import json

    d = json.loads(out)
    mdp = load("mdp_zeroconf.nm", "K=4,N=2").built.chain
    assert d["type"] == "mdp" and d["n_states"] == mdp.n_states and d["n_choices"] == mdp.n_choices
    assert d["n_transitions"] == mdp.P.nnz


# ------------------------------------------------------------------------------ closed forms
def test_the_gamble_in_closed_form():
    m = load_prism("g.nm", text=GAMBLE)
    enclose(answer(m, 'Pmax=? [ F "win" ]'), 1.0)  # keep taking the risky bet: it wins surely
    enclose(answer(m, 'Pmin=? [ F "win" ]'), 0.5)
    enclose(answer(m, 'R{"bets"}min=? [ F s>0 ]'), 1.0)
    enclose(answer(m, 'R{"bets"}max=? [ F s>0 ]'), 1 / 0.3)  # geometric number of risky bets
    enclose(answer(m, 'R{"wait"}max=? [ F s>0 ]'), 2 / 0.3)
    enclose(answer(m, 'Pmax=? [ F<=3 "win" ]'), 1 - 0.7**2 * 0.5)  # risky twice, then safe with one step left
    enclose(answer(m, 'Pmin=? [ X s=0 ]'), 0.0)
    enclose(answer(m, 'Pmax=? [ X s=0 ]'), 0.7)
    enclose(answer(m, 'Pmin=? [ G s=0 ]'), 0.0)
    enclose(answer(m, 'Pmax=? [ G<=2 s=0 ]'), 0.7**2)
    enclose(answer(m, 'R{"wait"}max=? [ C<=3 ]'), 2 * (1 + 0.7 + 0.49))
    enclose(answer(m, 'R{"wait"}max=? [ I=2 ]'), 2 * 0.49)
    # long-run: the gamble ends in s=1 or s=2 (reward 0) surely; the fraction of time in "win" is
    # at most 1 (risky forever) and at least 0.5 (safe at once)
    enclose(answer(m, 'LRAmax=? [ "win" ]'), 1.0)
    enclose(answer(m, 'LRAmin=? [ "win" ]'), 0.5)
    enclose(answer(m, 'R{"wait"}max=? [ S ]'), 0.0)


def test_the_dice_with_fair_coins_only_are_knuth_yaos():
    # with q = 1/2 both coins are fair: every scheduler throws two fair dice, 11/3 flips each
    m = load("mdp_dice.nm", "q=0.5")
    for sense in ("min", "max"):
        enclose(answer(m, f'P{sense}=? [ F "seven" ]'), 1 / 6)
        enclose(answer(m, f'P{sense}=? [ F "double" ]'), 1 / 6)
        enclose(answer(m, f'R{{"flips"}}{sense}=? [ F "done" ]'), 22 / 3)


# ------------------------------------------------------------------------------ enumerated schedulers
def _schedulers(mdp):
    counts = mdp.choice_counts
    multi = np.flatnonzero(counts > 1)
    base = mdp.row_groups[:-1].copy()
    assert np.prod(counts[multi].astype(float)) <= 4096, "too many schedulers for this test"
    for pick in itertools.product(*[range(int(counts[s])) for s in multi]):
        choice = base.copy()
        choice[multi] += np.asarray(pick, dtype=np.int64)
        yield Scheduler(choice)


def _per_scheduler(mdp, target, reward=None, left=None):
    """Per scheduler: the probability of (left U target), or the expected reward until target, from the start."""
    init = int(mdp.initial_states[0])
    out = []
    for s in _schedulers(mdp):
        Q = (mdp.induced(s) - sp.identity(mdp.n_states)).tocsr()
        if reward is None:
            left_mask = np.ones(mdp.n_states, bool) if left is None else left
            p, _ = until_probability(Q, left_mask, target)
            out.append(float(p[init]))
        else:
            r = mdp.induced_reward(s, reward)
            p, _ = until_probability(Q, np.ones(mdp.n_states, bool), target)
            if p[init] < 1 - 1e-12:  # the target may be missed: infinite (PRISM)
                out.append(np.inf)
                continue
            v, _ = expected_reward(Q, target, r)
            out.append(float(v[init]))
    return np.array(out)


@pytest.mark.parametrize("consts", ["K=4,N=2", "K=8,N=3"])
def test_zeroconf_optima_are_the_best_and_worst_deterministic_schedulers(consts):
    m = load("mdp_zeroconf.nm", consts)
    mdp = m.built.chain
    err = mdp.mask("error")
    ok = mdp.mask("configured")
    p = _per_scheduler(mdp, err)
    enclose(answer(m, 'Pmax=? [ F "error" ]'), p.max())
    enclose(answer(m, 'Pmin=? [ F "error" ]'), p.min())
    u = _per_scheduler(mdp, ok, left=~err)
    enclose(answer(m, 'Pmin=? [ !"error" U "configured" ]'), u.min())
    done = mdp.labels["configured"] | err
    for name in ("time", "cost"):
        t = _per_scheduler(mdp, done, reward=name)
        enclose(answer(m, f'R{{"{name}"}}min=? [ F s>=2 ]'), t.min())
        enclose(answer(m, f'R{{"{name}"}}max=? [ F s>=2 ]'), t.max())


def test_an_infinite_expected_reward_says_so():
    # every throw ends, but "double" may be missed under every scheduler: the reward until it is infinite
    m = load("mdp_dice.nm", "q=0.7")
    r = answer(m, 'R{"flips"}min=? [ F "double" ]')
    assert r.value == np.inf and r.lower == np.inf and "infinite" in r.info


# ------------------------------------------------------------------------------ policy iteration vs interval iteration
@pytest.mark.parametrize("name, consts, target", [
    ("mdp_consensus.nm", "K=2", "finished"), ("mdp_dice.nm", "q=0.7", "seven"), ("mdp_zeroconf.nm", "K=6,N=4", "error"),
])
def test_policy_iteration_and_interval_iteration_agree(name, consts, target):
    mdp = load(name, consts).built.chain
    for sense in ("min", "max"):
        a = reachability(Reachability(mdp, target, sense), method="interval-iteration")
        b = reachability(Reachability(mdp, target, sense), method="policy-iteration")
        assert np.all(a.lower <= b.value + 1e-12) and np.all(b.value <= a.upper + 1e-12)
    rew = next(iter(mdp.state_rewards))
    goal = mdp.mask(target) if name != "mdp_consensus.nm" else mdp.mask("finished")
    if name == "mdp_dice.nm":
        goal = mdp.mask("done")
    for sense in ("min", "max"):
        a = total_reward(TotalReward(mdp, rew, sense, target=goal), method="interval-iteration")
        b = total_reward(TotalReward(mdp, rew, sense, target=goal), method="policy-iteration")
        fin = np.isfinite(b.value)
        assert np.array_equal(fin, np.isfinite(a.lower))
        assert np.all(a.lower[fin] <= b.value[fin] * (1 + 1e-9) + 1e-12)
        assert np.all(b.value[fin] <= a.upper[fin] * (1 + 1e-9) + 1e-12)


def test_consensus_decides_surely_and_its_bounds_are_ordered():
    m = load("mdp_consensus.nm", "K=2")
    r = answer(m, 'Pmin=? [ F "finished" ]')
    assert r.value == 1.0 and r.lower == r.upper == 1.0
    assert answer(m, 'P>=1 [ F "finished" ]').value is True  # decided by graph analysis (prob1)
    lo = answer(m, 'Pmin=? [ F "finished" & "all_coins_equal_1" ]')
    hi = answer(m, 'Pmax=? [ F "finished" & "all_coins_equal_1" ]')
    assert 0 <= lo.lower <= lo.value <= lo.upper <= hi.lower <= hi.value <= hi.upper <= 1
    assert lo.info["solver"] and lo.method == "mdp/reachability"
    # the two decisions mirror each other (the protocol is symmetric in heads and tails)
    enclose(answer(m, 'Pmin=? [ F "finished" & "all_coins_equal_0" ]'), lo.value, rel=1e-8)
    # bounded forms: monotone in the bound, below the unbounded optimum
    vals = [answer(m, f'Pmax=? [ F<={k} "finished" ]').value for k in (10, 20, 40)]
    assert vals[0] <= vals[1] <= vals[2] <= 1.0


# ------------------------------------------------------------------------------ thresholds, nesting, filters
def test_thresholds_quantify_over_all_schedulers():
    m = load("mdp_zeroconf.nm", "K=4,N=3")
    pmin = answer(m, 'Pmin=? [ F "error" ]').value
    pmax = answer(m, 'Pmax=? [ F "error" ]').value
    mid = 0.5 * (pmin + pmax)
    assert answer(m, f'P>={mid} [ F "error" ]').value is False  # Pmin < mid
    assert answer(m, f'P<={mid} [ F "error" ]').value is False  # Pmax > mid
    assert answer(m, f'P>={pmin * 0.99} [ F "error" ]').value is True
    assert answer(m, f'P<={pmax * 1.01} [ F "error" ]').value is True
    assert answer(m, f'Pmax>={mid} [ F "error" ]').value is True  # an explicit optimum is taken as written
    rmin = answer(m, 'R{"time"}min=? [ F s>=2 ]').value
    assert answer(m, f'R{{"time"}}>={rmin * 0.99} [ F s>=2 ]').value is True
    assert answer(m, f'R{{"time"}}>={rmin * 1.01} [ F s>=2 ]').value is False


def test_nested_operators_and_filters():
    m = load("mdp_zeroconf.nm", "K=4,N=3")
    mdp = m.built.chain
    inner = reachability(Reachability(mdp, "error", "max"))
    # filter(max, ...) over the probing states equals the per-state values' maximum
    r = answer(m, 'filter(max, Pmax=? [ F "error" ], s=1)')
    sel = mdp.states[:, 0] == 1
    assert r.value == pytest.approx(inner.value[sel].max(), rel=1e-9)
    assert r.lower <= inner.upper[sel].max() and inner.lower[sel].max() <= r.upper
    n = answer(m, 'filter(count, Pmax<=0.05 [ F "error" ], true)')
    assert n.value == int(np.count_nonzero(inner.value <= 0.05))
    # a nested threshold: the probability of reaching the states from which an error is likely
    risky = inner.value > 0.1
    nested = answer(m, 'Pmax=? [ F Pmax>0.1 [ F "error" ] ]')
    want = reachability(Reachability(mdp, risky, "max")).value[mdp.initial_states[0]]
    assert nested.value == pytest.approx(want, abs=1e-9)
    one_minus = answer(m, '1 - Pmax=? [ F "error" ]')
    assert one_minus.value == pytest.approx(1 - inner.value[mdp.initial_states[0]], abs=1e-12)


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("prop, words", [
    ('P=? [ F "error" ]', "Pmin=? or Pmax=?"),
    ('R{"time"}=? [ F s>=2 ]', "Rmin=? or Rmax=?"),
    ('S=? [ "error" ]', "'S' on an mdp"),
    ('Smax=? [ "error" ]', "'Smax'"),
    ('Pmax=? [ F>=2 "error" ]', "lower step bound"),
    ('Pmax=? [ "error" U[1,3] "configured" ]', "lower step bound"),
    ('R{"time"}max=? [ C ]', "total reward"),
    ('R{"nope"}max=? [ F s>=2 ]', 'unknown reward structure "nope"'),
    ('Pmax=? [ F<=1.5 "error" ]', "counts steps"),
])
def test_outside_the_fragment_is_one_line_and_exit_2(capsys, prop, words):
    code = main(["check", str(FILES / "mdp_zeroconf.nm"), prop, "--const", "K=4,N=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("exactq: error: ") and "\n" not in err and words in err, err
    assert "Traceback" not in err and "internal error" not in err


def test_optima_on_a_markov_chain_and_solve_on_an_mdp_are_refused():
    m = load_prism("c.sm", text="dtmc\nmodule m x : [0..1] init 0;\n [] x=0 -> (x'=1);\n [] x=1 -> true;\nendmodule\n")
    with pytest.raises(ExactqError, match="'Pmax'"):
        answer(m, "Pmax=? [ F x=1 ]")
    import exactq

    with pytest.raises(ExactqError, match="checked, not solved"):
        exactq.solve(load("mdp_zeroconf.nm", "K=4,N=3"))


def test_the_json_answer_has_the_chain_checks_fields(capsys):
    code = main(["check", str(FILES / "mdp_zeroconf.nm"), 'Pmax=? [ F "error" ]', "--const", "K=4,N=3", "--json"])
    import json

    d = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("measure", "value", "lower", "upper", "error_estimate", "n_states", "n_transitions", "info"):
        assert key in d
    assert d["lower"] <= d["value"] <= d["upper"]
    assert d["info"]["solver"] and d["info"]["n_choices"] > d["n_states"] - 1
    m = load("mdp_zeroconf.nm", "K=4,N=3")
    mdp = m.built.chain
    assert d["value"] == pytest.approx(_per_scheduler(mdp, mdp.mask("error")).max(), rel=1e-9)


def test_a_verified_policy_iteration_names_its_certificate_and_its_width():
    m = load_prism(str(Path(__file__).parent / "mdp_consensus.nm"), "K=2")
    r, = check_properties(m, 'Pmax=? [ F "finished" & !"agree" ]')
    assert r.info["solver"] == "policy-iteration (verified bounds)"
    assert r.info["certificate"].startswith(("relative", "defect"))
    assert 0 <= r.info["certificate_width"] and r.info["certificate_width"] >= r.upper - r.lower - 1e-300
    assert r.lower <= r.value <= r.upper and r.upper - r.lower <= 1e-9 * r.value
