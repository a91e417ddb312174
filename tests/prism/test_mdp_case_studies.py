"""The FireWire and WLAN case studies (our own files, issue 23) against Storm and against hand derivations.

tests/prism/mdp_firewire.nm (IEEE 1394 root contention) and tests/prism/mdp_wlan.nm (two
stations of 802.11 DCF) are written from the protocols' published descriptions; each
file's comment says what it models. Every transition of either file is one time step
(one synchronised action), so ``F<=k`` bounds the time.

Where stormpy is importable: the built MDPs are Storm's (states, choices, transitions),
exactq's values are within 1e-6 (relative) of Storm's exact (rational) engine, and
exactq's bounds enclose both that and Storm's sound value iteration at 1e-9. Without
Storm: policy iteration against interval iteration, bounded properties monotone in the
bound and below the unbounded optimum, ``Pmin <= Pmax``, every deterministic scheduler
of a small instance enumerated, and closed forms derived by hand in the comments.
"""

from __future__ import annotations

import functools
import itertools
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from test_mdp_check import _schedulers

from exactq.api import check_properties
from exactq.prism import load_prism
from exactq.representations.mdp import Reachability, TotalReward
from exactq.solvers.mdp import reachability, total_reward
from exactq.solvers.reachability import expected_reward, until_probability

FILES = Path(__file__).resolve().parent
FIREWIRE = "mdp_firewire.nm"
WLAN = "mdp_wlan.nm"

#: (file, constants) -> the properties compared with Storm
CASES = {
    (FIREWIRE, "delay=2"): [
        'Pmin=? [ F "done" ]', 'Pmax=? [ F "done" ]', 'Pmax=? [ F<=8 "done" ]', 'Pmax=? [ F<=9 "done" ]',
        'Pmin=? [ F<=12 "done" ]', 'Pmin=? [ F<=25 "done" ]', 'Pmax=? [ F<=25 "done" ]',
        'Pmax=? [ !"contention" U<=12 "done" ]', 'Pmin=? [ !"contention" U<=30 "done" ]',
        'R{"time"}min=? [ F "done" ]', 'R{"time"}max=? [ F "done" ]', 'R{"restarts"}max=? [ F "done" ]',
        'Pmax=? [ F rounds=2 ]', 'P>=1 [ F "done" ]'],
    (FIREWIRE, "delay=3"): [
        'Pmin=? [ F "done" ]', 'Pmax=? [ F<=9 "done" ]', 'Pmin=? [ F<=13 "done" ]', 'Pmin=? [ F<=40 "done" ]',
        'Pmax=? [ !"contention" U<=30 "done" ]', 'R{"time"}min=? [ F "done" ]', 'R{"time"}max=? [ F "done" ]'],
    (FIREWIRE, "delay=5"): [
        'Pmin=? [ F "done" ]', 'Pmax=? [ F "done" ]', 'Pmax=? [ F<=30 "done" ]', 'R{"time"}min=? [ F "done" ]',
        'R{"time"}max=? [ F "done" ]', 'P>=1 [ F "done" ]'],
    (WLAN, "MAX_BACKOFF=2"): [
        'Pmin=? [ F "both_sent" ]', 'Pmax=? [ F<=7 "both_sent" ]', 'Pmax=? [ F<=15 "both_sent" ]',
        'Pmin=? [ F<=15 "both_sent" ]', 'Pmax=? [ F<=30 "both_sent" ]', 'Pmin=? [ F<=30 "both_sent" ]',
        'Pmax=? [ F "collision_max" ]', 'Pmin=? [ F "collision_max" ]', 'Pmax=? [ !"collision" U<=20 "both_sent" ]',
        'R{"slots"}min=? [ F "both_sent" ]', 'R{"slots"}max=? [ F "both_sent" ]',
        'R{"collisions"}min=? [ F "both_sent" ]', 'R{"collisions"}max=? [ F "both_sent" ]'],
    (WLAN, "MAX_BACKOFF=0"): [
        'Pmin=? [ F "both_sent" ]', 'Pmax=? [ F "both_sent" ]', 'Pmax=? [ F<=20 "both_sent" ]',
        'R{"slots"}min=? [ F "both_sent" ]', 'R{"slots"}max=? [ F "both_sent" ]',
        'R{"collisions"}min=? [ F "both_sent" ]', 'P>=1 [ F "both_sent" ]'],
}


def load(name, consts):
    return load_prism(str(FILES / name), consts)


def answer(model, prop):
    r, = check_properties(model, prop)
    return r


def file_constants(name):
    """The file's defined integer constants (``const int NAME = <number>;``), for the derivations below."""
    return {k: int(v) for k, v in re.findall(r"const int (\w+) = (\d+);", (FILES / name).read_text())}


def ordered(r):
    assert r.lower is not None and r.upper is not None
    assert r.lower <= r.value <= r.upper, (r.lower, r.value, r.upper)


def enclose(r, exact, rel=1e-9):
    """The value is within rel of exact and the bounds enclose exact (to a few ulps)."""
    ordered(r)
    exact = float(exact)
    if np.isinf(exact):
        assert r.value == exact and r.lower == exact, (r.value, r.lower, r.upper)
        return
    slack = 8 * np.finfo(float).eps * max(1.0, abs(exact))
    assert r.lower - slack <= exact <= r.upper + slack, (r.lower, exact, r.upper)
    assert abs(r.value - exact) <= rel * max(1.0, abs(exact)), (r.value, exact)


# ------------------------------------------------------------------------------ Storm
@functools.lru_cache(maxsize=None)
def storm(name, consts):
    """Storm's model sizes, its exact values and its sound value iteration's values (1e-9) for CASES[(name, consts)]."""
    stormpy = pytest.importorskip("stormpy")
    from stormpy import developer

    prog = stormpy.parse_prism_program(str(FILES / name), prism_compatibility=True)
    prog, _ = stormpy.instantiate_constants(prog, consts)
    props = stormpy.parse_properties(";".join(CASES[(name, consts)]), prog)
    exact_model = stormpy.build_model[stormpy.Rational](prog, props)
    float_model = stormpy.build_model(prog, props)
    env = stormpy.Environment()  # a local environment: Storm's global settings stay as they were
    env.solver().force_soundness = True
    mm = env.solver().min_max()
    mm.method = developer.MinMaxMethod.SOUND_VALUE_ITERATION
    mm.precision = stormpy.Rational(1e-9)
    mm.relative_termination_criterion = True
    exact, sound = [], []
    for p in props:
        r = stormpy.model_checking(exact_model, p, only_initial_states=False)
        init = exact_model.initial_states[0]
        if r.is_quantitative():
            v = r.get_value_vector()[init]
            exact.append(float("inf") if str(v) == "inf" else Fraction(str(v)))
            s = stormpy.model_checking(float_model, p, only_initial_states=False, environment=env)
            sound.append(float(s.get_value_vector()[float_model.initial_states[0]]))
        else:
            exact.append(int(init) in {int(i) for i in r.get_truth_values_vector()})
            sound.append(None)
    sizes = (exact_model.nr_states, exact_model.nr_choices, exact_model.nr_transitions)
    assert sizes == (float_model.nr_states, float_model.nr_choices, float_model.nr_transitions)
    return sizes, exact, sound


@pytest.mark.parametrize("name, consts", list(CASES))
def test_the_model_is_storms(name, consts):
    (ns, nc, nt), _, _ = storm(name, consts)
    mdp = load(name, consts).built.chain
    assert (mdp.n_states, mdp.n_choices, mdp.P.nnz) == (ns, nc, nt)


@pytest.mark.parametrize("name, consts", list(CASES))
def test_values_match_storms_exact_engine_and_the_bounds_enclose_storms_sound_value(name, consts):
    _, exact, sound = storm(name, consts)
    got = check_properties(load(name, consts), "\n".join(CASES[(name, consts)]))
    assert len(got) == len(exact)
    for prop, r, w, s in zip(CASES[(name, consts)], got, exact, sound):
        if isinstance(w, bool):
            assert r.value is w, prop
            continue
        if w == float("inf"):
            assert r.value == np.inf and r.lower == np.inf, (prop, r.value, r.lower)
            assert s == np.inf, (prop, s)
            continue
        w = float(w)
        assert abs(r.value - w) <= 1e-6 * max(1.0, abs(w)), (prop, r.value, w)
        slack = 8 * np.finfo(float).eps * max(1.0, abs(w))
        assert r.lower - slack <= w <= r.upper + slack, (prop, r.lower, w, r.upper)
        # Storm's sound engine answers within its relative precision of the value, which exactq's bounds enclose
        ss = 1e-9 * abs(s) + slack
        assert r.lower - ss <= s <= r.upper + ss, (prop, r.lower, s, r.upper)


# ------------------------------------------------------------------------------ the built MDPs
@pytest.mark.parametrize("name, consts", [(FIREWIRE, f"delay={d}") for d in (1, 3, 5)]
                         + [(WLAN, f"MAX_BACKOFF={b}") for b in (0, 1, 2)])
def test_the_files_need_no_deadlock_fix_and_every_choice_is_a_distribution(name, consts):
    built = load(name, consts).built
    mdp = built.chain
    assert built.n_deadlocks == 0  # every state has an enabled [tick] / [slot] in every module
    assert np.all(mdp.choice_counts >= 1)
    assert np.allclose(np.asarray(mdp.P.sum(axis=1)).ravel(), 1.0, atol=1e-12)
    # every module takes part in every transition: one action name only
    assert {mdp.action_names[a] for a in np.unique(mdp.actions)} == {"tick" if name == FIREWIRE else "slot"}


# ------------------------------------------------------------------------------ policy iteration vs interval iteration
@pytest.mark.parametrize("name, consts, targets, goal, rewards", [
    (FIREWIRE, "delay=2", ["done", "contention"], "done", ["time", "restarts"]),
    (FIREWIRE, "delay=4", ["done", "contention"], "done", ["time"]),
    (WLAN, "MAX_BACKOFF=2", ["both_sent", "collision_max", "collision"], "both_sent", ["slots", "collisions"]),
])
def test_policy_iteration_and_interval_iteration_agree(name, consts, targets, goal, rewards):
    mdp = load(name, consts).built.chain
    for target, sense in itertools.product(targets, ("min", "max")):
        a = reachability(Reachability(mdp, target, sense), method="interval-iteration")
        b = reachability(Reachability(mdp, target, sense), method="policy-iteration")
        assert np.all(a.lower <= a.upper)
        assert np.all(a.lower <= b.value + 1e-12) and np.all(b.value <= a.upper + 1e-12), (target, sense)
    for rew, sense in itertools.product(rewards, ("min", "max")):
        a = total_reward(TotalReward(mdp, rew, sense, target=mdp.mask(goal)), method="interval-iteration")
        b = total_reward(TotalReward(mdp, rew, sense, target=mdp.mask(goal)), method="policy-iteration")
        fin = np.isfinite(b.value)
        assert np.array_equal(fin, np.isfinite(a.lower))
        assert np.all(a.lower[fin] <= b.value[fin] * (1 + 1e-9) + 1e-12), (rew, sense)
        assert np.all(b.value[fin] <= a.upper[fin] * (1 + 1e-9) + 1e-12), (rew, sense)


# ------------------------------------------------------------------------------ bounded against unbounded
@pytest.mark.parametrize("name, consts, target, ks", [
    (FIREWIRE, "delay=2", '"done"', (0, 6, 8, 9, 12, 15, 20, 30, 45)),
    (FIREWIRE, "delay=4", '"done"', (5, 10, 11, 14, 20, 35)),
    (WLAN, "MAX_BACKOFF=2", '"both_sent"', (3, 6, 7, 9, 12, 16, 24, 40)),
    (WLAN, "MAX_BACKOFF=2", '"collision_max"', (1, 5, 8, 12, 20)),
])
def test_bounded_probabilities_grow_with_the_bound_up_to_the_unbounded_ones(name, consts, target, ks):
    m = load(name, consts)
    props = [f"P{s}=? [ F<={k} {target} ]" for s in ("min", "max") for k in ks]
    props += [f"P{s}=? [ F {target} ]" for s in ("min", "max")]
    res = check_properties(m, "\n".join(props))
    for r in res:
        ordered(r)
    n = len(ks)
    lo, hi, lo_inf, hi_inf = res[:n], res[n:2 * n], res[-2], res[-1]
    for seq, top in ((lo, lo_inf), (hi, hi_inf)):
        vals = [r.value for r in seq]
        assert all(a <= b + 1e-12 for a, b in zip(vals, vals[1:])), vals
        assert vals[-1] <= top.upper + 1e-12
    for a, b in zip(lo + [lo_inf], hi + [hi_inf]):
        assert a.lower <= b.upper + 1e-12 and a.value <= b.value + 1e-12
    # and the bounded until with a weaker left side is a bounded F
    r = answer(m, f"Pmax=? [ true U<={ks[-1]} {target} ]")
    assert r.value == pytest.approx(hi[-1].value, abs=1e-12)


# ------------------------------------------------------------------------------ FireWire closed forms
def _firewire_forms(d):
    """Hand-derived values of mdp_firewire.nm at delay d (the file's wait bounds a..b fast, c..e slow).

    Timeline of a round: the coins take one step; a node waits w steps (a <= w <= b fast,
    c <= w <= e slow), sends at time 1 + w, its request arrives at 1 + w + d, and the
    election is the step after: done at 2 + w + d. A node whose request arrives while the
    other waits wins; the other's send is blocked at the arrival. Both sent before an
    arrival (|w1 - w2| < d): the round ends when both have arrived, at 1 + max(w) + d, and
    the next round starts there. With d <= c - b, differing coins always elect (the slow
    node cannot send before the fast one's request arrives); equal coins elect iff the
    scheduler lets the second node wait d past the first (needs d <= the range's width),
    and may always collide instead (both send together).
    """
    k = file_constants(FIREWIRE)
    a, b, c, e = k["fast_min"], k["fast_max"], k["slow_min"], k["slow_max"]
    assert 1 <= d <= c - b and 1 + 2 * a + d > b  # the derivation's assumptions
    f = Fraction
    ff, ss = d <= b - a, d <= e - c  # equal fast / equal slow coins can elect
    out = {
        "first": 2 + a + d,  # the earliest election
        # at the earliest time: a fast node sends at once and the other waits (slow, or fast with room for d)
        "pmax_first": f(1, 2) + f(1, 4) * ff,
        # differing coins elect by 2 + b + d whatever the scheduler; equal coins may collide, and the next
        # round's election comes after 1 + a + d + 2 + a + d > 2 + b + d
        "pmin_latest_first_round": f(1, 2),
        "pmin_first_round": f(1, 2),
        "pmax_first_round": f(1, 2) + f(1, 4) * ff + f(1, 4) * ss,
        # two contentions take equal coins twice (the scheduler collides whenever it can)
        "pmax_two_rounds": f(1, 4),
    }
    # Rmin: elect as early as possible; where equal coins cannot elect, collide as early as possible:
    # R = 1/2 (2+a+d) + 1/4 X_ff + 1/4 X_ss, X = 2+a+d (or 2+c+d) when electing, 1+a+d+R (1+c+d+R) when not
    const, q = f(1, 2) * (2 + a + d), f(0)
    for can, w in ((ff, a), (ss, c)):
        if can:
            const += f(1, 4) * (2 + w + d)
        else:
            const, q = const + f(1, 4) * (1 + w + d), q + f(1, 4)
    out["rmin"] = const / (1 - q)
    # Rmax: differing coins: the fast node sends at b (elected at 2+b+d); equal coins: both send at the latest
    # together (a round of 1+b+d or 1+e+d, then again), which beats any election (at most 2+max(w)).
    # R = 1/2 (2+b+d) + 1/4 (1+b+d+R) + 1/4 (1+e+d+R)
    out["rmax"] = (f(1, 2) * (2 + b + d) + f(1, 4) * (1 + b + d) + f(1, 4) * (1 + e + d)) / f(1, 2)
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_firewire_elects_surely_and_its_deadlines_in_closed_form(d):
    m = load(FIREWIRE, f"delay={d}")
    want = _firewire_forms(d)
    k = file_constants(FIREWIRE)
    b = k["fast_max"]
    r = answer(m, 'Pmin=? [ F "done" ]')
    assert r.value == 1.0 and r.lower == r.upper == 1.0  # graph analysis: every scheduler elects
    assert answer(m, 'P>=1 [ F "done" ]').value is True
    first = want["first"]
    # a deadline before the earliest possible election: probability 0 under every scheduler
    enclose(answer(m, f'Pmax=? [ F<={first - 1} "done" ]'), 0)
    enclose(answer(m, f'Pmax=? [ F<={first} "done" ]'), want["pmax_first"])
    enclose(answer(m, f'Pmin=? [ F<={first} "done" ]'), 0)  # the fast node may wait longer
    enclose(answer(m, f'Pmin=? [ F<={2 + b + d - 1} "done" ]'), 0)
    enclose(answer(m, f'Pmin=? [ F<={2 + b + d} "done" ]'), want["pmin_latest_first_round"])
    enclose(answer(m, 'Pmin=? [ !"contention" U<=40 "done" ]'), want["pmin_first_round"])
    enclose(answer(m, 'Pmax=? [ !"contention" U<=40 "done" ]'), want["pmax_first_round"])
    enclose(answer(m, 'Pmax=? [ F rounds=2 ]'), want["pmax_two_rounds"])
    enclose(answer(m, 'R{"time"}min=? [ F "done" ]'), want["rmin"])
    enclose(answer(m, 'R{"time"}max=? [ F "done" ]'), want["rmax"])


def test_firewire_with_a_delay_longer_than_the_gap_may_never_elect():
    # delay 5 > slow_min - fast_max = 4: the fast node sends at fast_max, the slow one at slow_min before the
    # request arrives, so every round can be made a contention: Pmin = 0 and the expected time is infinite for
    # that scheduler; an eager fast node still wins with probability 1/2 per round, so Pmax = 1
    k = file_constants(FIREWIRE)
    d = k["slow_min"] - k["fast_max"] + 1
    m = load(FIREWIRE, f"delay={d}")
    r = answer(m, 'Pmin=? [ F "done" ]')
    assert r.value == 0.0 and r.lower == r.upper == 0.0
    assert answer(m, 'P>=1 [ F "done" ]').value is False
    r = answer(m, 'Pmax=? [ F "done" ]')
    assert r.value == 1.0 and r.lower == r.upper == 1.0
    enclose(answer(m, 'R{"time"}max=? [ F "done" ]'), np.inf)
    assert "infinite" in answer(m, 'R{"time"}max=? [ F "done" ]').info
    enclose(answer(m, 'Pmax=? [ F rounds=2 ]'), 1)
    rmin = answer(m, 'R{"time"}min=? [ F "done" ]')
    ordered(rmin)
    assert np.isfinite(rmin.value) and rmin.value >= 2 + k["fast_min"] + d


# ------------------------------------------------------------------------------ WLAN closed forms
def _collision_chances(max_backoff, cw_min):
    """Per backoff stage: the chance the next attempt collides (min scheduler, max scheduler).

    Both stations are always in the same stage (they collide together) and count down from
    the same slot. Counters drawn uniformly from a window W: equal counters collide whatever
    the scheduler (1/W); counters one apart collide iff the later station misses the
    earlier one's first slot (the scheduler's choice), so the max scheduler collides with
    probability (W + 2 (W - 1)) / W^2; two or more apart never collide.
    """
    out = []
    for k in range(max_backoff + 1):
        w = cw_min * 2**k
        out.append((Fraction(1, w), Fraction(w + 2 * (w - 1), w * w)))
    return out


def _expected_collisions(p):
    """Expected collisions until both frames are sent, p[k] the chance an attempt at stage k collides."""
    top = p[-1]
    if top == 1:
        return float("inf")
    e = top / (1 - top)  # the top stage repeats
    for q in reversed(p[:-1]):
        e = q * (1 + e)
    return e


@pytest.mark.parametrize("bmax", [0, 1, 2])
def test_wlan_in_closed_form(bmax):
    k = file_constants(WLAN)
    cw, tx = k["CW_MIN"], k["TX"]
    assert cw == 2  # the first-attempt derivations below use a window of 2
    m = load(WLAN, f"MAX_BACKOFF={bmax}")
    # earliest both sent: the draw takes slot 1, a station with counter 0 starts at boundary 1, transmits and is
    # acknowledged by 2 + TX; the other (counter 1, decremented at boundary 1, sensing at 2) starts at 2 + TX and
    # is done at 3 + 2 TX. Counters {0, 1} have probability 1/2; the other station may also miss the sensing.
    first = 3 + 2 * tx
    enclose(answer(m, f'Pmax=? [ F<={first - 1} "both_sent" ]'), 0)
    enclose(answer(m, f'Pmax=? [ F<={first} "both_sent" ]'), Fraction(1, 2))
    enclose(answer(m, f'Pmin=? [ F<={first} "both_sent" ]'), 0)
    # a collision at all: the max scheduler always collides at stage 0 (window 2); the min scheduler only when the
    # counters are equal (1/2); otherwise the first station's success leaves the other alone
    enclose(answer(m, 'Pmax=? [ F "collision" ]'), 1)
    enclose(answer(m, 'Pmin=? [ F "collision" ]'), Fraction(1, 2))
    chances = _collision_chances(bmax, cw)
    # the top stage: reached by colliding at every stage below it
    pmax_top = np.prod([hi for _, hi in chances[:-1]]) if bmax else 1
    enclose(answer(m, 'Pmax=? [ F "collision_max" ]'), Fraction(pmax_top))
    # both sent surely iff the top window lets the counters be two apart (W >= 3): MAX_BACKOFF >= 1
    r = answer(m, 'Pmin=? [ F "both_sent" ]')
    assert r.value == r.lower == r.upper == (1.0 if bmax >= 1 else 0.0)
    assert answer(m, 'P>=1 [ F "both_sent" ]').value is (bmax >= 1)
    enclose(answer(m, 'R{"collisions"}min=? [ F "both_sent" ]'), _expected_collisions([lo for lo, _ in chances]))
    enclose(answer(m, 'R{"collisions"}max=? [ F "both_sent" ]'), _expected_collisions([hi for _, hi in chances]))
    if bmax == 0:
        enclose(answer(m, 'R{"slots"}max=? [ F "both_sent" ]'), np.inf)


# ------------------------------------------------------------------------------ enumerated schedulers
def test_wlan_optima_are_the_best_and_worst_deterministic_schedulers():
    # MAX_BACKOFF = 1: a few vulnerable-slot choices; each memoryless deterministic scheduler's Markov chain
    # solved by the DTMC solvers; the MDP's optima are the extremes over them (Puterman 1994, thm. 7.1.9)
    m = load(WLAN, "MAX_BACKOFF=1")
    mdp = m.built.chain
    init = int(mdp.initial_states[0])
    sent, top = mdp.mask("both_sent"), mdp.mask("collision_max")
    every = np.ones(mdp.n_states, bool)
    p_top, slots, cols = [], [], []
    for s in _schedulers(mdp):
        Q = (mdp.induced(s) - sp.identity(mdp.n_states)).tocsr()
        p_top.append(float(until_probability(Q, every, top)[0][init]))
        p, _ = until_probability(Q, every, sent)
        assert p[init] == pytest.approx(1.0, abs=1e-12)  # Pmin = 1: every scheduler sends both
        slots.append(float(expected_reward(Q, sent, mdp.induced_reward(s, "slots"))[0][init]))
        cols.append(float(expected_reward(Q, sent, mdp.induced_reward(s, "collisions"))[0][init]))
    assert len(slots) > 1
    enclose(answer(m, 'Pmax=? [ F "collision_max" ]'), max(p_top))
    enclose(answer(m, 'Pmin=? [ F "collision_max" ]'), min(p_top))
    enclose(answer(m, 'R{"slots"}min=? [ F "both_sent" ]'), min(slots))
    enclose(answer(m, 'R{"slots"}max=? [ F "both_sent" ]'), max(slots))
    enclose(answer(m, 'R{"collisions"}min=? [ F "both_sent" ]'), min(cols))
    enclose(answer(m, 'R{"collisions"}max=? [ F "both_sent" ]'), max(cols))
