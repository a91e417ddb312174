"""The PRISM builder against an independent one-state-at-a-time reference, closed forms and Storm.

The reference below enumerates, state by state in plain Python, every choice of a
PRISM model (each enabled unlabelled command; for each action, every combination of
one enabled command per module of its alphabet) and every combination of their
updates (itertools.product), multiplies the rates or probabilities, merges the
assignments, gives a DTMC state's ``k`` choices ``1/k`` each and a deadlock a
self-loop: the semantics of the PRISM manual, with none of the builder's machinery
(no per-module pair lists, no key arithmetic, no windows).
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings

import numpy as np
import pytest

import exactq
from exactq.budget import BudgetError
from exactq.prism import PrismModelError, PrismWarning, load_prism
from exactq.prism.builder import build_model
from exactq.prism.semantics import EvalContext

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import prism_dtmc_models as dtmc_cases  # noqa: E402
import prism_models as ctmc_cases  # noqa: E402


def load(text, consts=None):
    return load_prism("m.pm", consts, text=text)


def quiet_build(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrismWarning)
        return build_model(model.info)


# ------------------------------------------------------------------ the reference
def _value(c, row):
    v = c.eval(EvalContext(np.asarray(row, dtype=np.int64)[None, :]))
    return np.asarray(v).reshape(-1)[0]


def reference(info):
    """``({(src, dst): weight}, reachable rows, deadlocks)`` of a model, one state at a time."""
    discrete = info.kind == "dtmc"
    choices_of = []  # list of lists of commands (one per module taking part)
    plain = [c for m in info.modules for c in m.commands if c.action is None]
    for a in info.actions:
        parts = [[c for c in m.commands if c.action == a] for m in info.modules if a in m.alphabet]
        choices_of.append(parts)
    start = tuple(v.init for v in info.variables)
    seen, todo, trans, dead = {start}, [start], {}, set()
    rewards = {k: {} for k in range(len(info.rewards))}
    while todo:
        s = todo.pop()
        choices = [[c] for c in plain if _value(c.guard, s)]
        for parts in choices_of:
            enabled = [[c for c in p if _value(c.guard, s)] for p in parts]
            choices += [list(combo) for combo in itertools.product(*enabled)]
        out = {}
        for combo in choices:
            action = combo[0].action
            for k, rs in enumerate(info.rewards):
                r = sum(float(_value(v, s)) for a, g, v in rs.trans_items if (a or None) == action and _value(g, s))
                mass = 1.0
                for c in combo:
                    mass *= sum(1.0 if u.prob is None else float(_value(u.prob, s)) for u in c.updates)
                rewards[k][s] = rewards[k].get(s, 0.0) + r * mass / (len(choices) if discrete else 1.0)
            for ups in itertools.product(*[c.updates for c in combo]):
                w = 1.0
                t = list(s)
                for u in ups:
                    w *= 1.0 if u.prob is None else float(_value(u.prob, s))
                    for j, e in u.assigns:
                        t[j] = int(_value(e, s))
                if w > 0:
                    key = tuple(t)
                    out[key] = out.get(key, 0.0) + (w / len(choices) if discrete else w)
        if not out:
            dead.add(s)
            out[s] = 1.0 if discrete else 0.0
        for t, w in out.items():
            if w > 0 or discrete:
                trans[(s, t)] = w
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return trans, seen, dead, rewards


def assert_matches_reference(model):
    built = quiet_build(model)
    chain = built.chain
    trans, seen, dead, rewards = reference(model.info)
    rows = [tuple(r) for r in chain.states.tolist()]
    assert set(rows) == seen
    index = {r: i for i, r in enumerate(rows)}
    n = len(rows)
    M = np.zeros((n, n))
    for (s, t), w in trans.items():
        M[index[s], index[t]] += w
    if model.info.kind == "dtmc":
        np.testing.assert_allclose(chain.P.toarray(), M, rtol=1e-13, atol=1e-15)
        assert np.allclose(chain.P.sum(axis=1), 1.0)
    else:
        Q = M.copy()
        np.fill_diagonal(Q, 0.0)
        Q -= np.diag(Q.sum(axis=1))
        np.testing.assert_allclose(chain.Q.toarray(), Q, rtol=1e-13, atol=1e-13)
    # PRISM's and Storm's count: distinct (source, target) pairs, self-loops and deadlock loops included
    n_trans = sum(1 for w in trans.values() if w > 0) + (0 if model.info.kind == "dtmc" else len(dead))
    assert built.n_transitions == n_trans
    assert built.n_deadlocks == len(dead)
    assert chain.labels["deadlock"].sum() == len(dead)
    for k, structure in enumerate(built.rewards.values()):  # expected transition rewards per state
        expect = np.array([rewards[k].get(r, 0.0) for r in rows])
        np.testing.assert_allclose(structure.transition, expect, rtol=1e-12, atol=1e-14)
    return built


def random_model(seed: int, kind: str) -> str:
    """A random model: 3 modules of one variable each, shared actions, guards reading other modules."""
    rng = np.random.default_rng(seed)
    lines = [kind, "global g : [0..2] init 0;"]
    for i in range(3):
        lines += [f"module m{i}", f"  x{i} : [0..2] init {int(rng.integers(0, 3))};"]
        for _ in range(int(rng.integers(2, 5))):
            action = rng.choice(["", "", "a", "b"])
            other = (i + 1) % 3
            guard = f"x{i} {rng.choice(['<', '!=', '>=', '='])} {int(rng.integers(0, 3))} & x{other} != " \
                    f"{int(rng.integers(0, 3))}"
            k = int(rng.integers(1, 3))
            shifts = rng.integers(0, 3, size=k)
            if kind == "dtmc":
                probs = rng.dirichlet(np.ones(k)) if k > 1 else [1.0]
            else:
                probs = rng.uniform(0.5, 3.0, size=k)
            ups = []
            for p, sh in zip(probs, shifts):
                assign = f"(x{i}'=mod(x{i}+{int(sh)},3))"
                if not action and rng.random() < 0.3:
                    assign += f"&(g'=mod(g+1,3))"
                ups.append(f"{float(p)!r} : {assign}")
            lines.append(f"  [{action}] {guard} -> {' + '.join(ups)};")
        lines.append("endmodule")
    used = {ln.split("]")[0].strip()[1:] for ln in lines if ln.strip().startswith("[")}
    items = ["[] true : 1;", "x0 = 1 : 3;"] + (["[a] x0 > 0 : 2;"] if "a" in used else []) + \
        (["[b] x1 != 1 : x2 + 0.5;"] if "b" in used else [])
    lines.append(f'rewards "r" {" ".join(items)} endrewards')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["ctmc", "dtmc"])
def test_random_models_match_the_one_state_at_a_time_reference(seed, kind):
    assert_matches_reference(load(random_model(seed, kind)))


def test_synchronised_products_with_several_commands_per_module():
    # module A has 2 enabled [a]-commands, B has 2 (one with 2 updates): 2 x 3 combinations
    text = """ctmc
module A
  x : [0..3] init 0;
  [a] x = 0 -> 2 : (x'=1);
  [a] x = 0 -> 3 : (x'=2);
  [] x > 0 -> 1 : (x'=0);
endmodule
module B
  y : [0..3] init 0;
  [a] y < 3 -> 0.5 : (y'=y+1) + 4 : (y'=3);
  [a] y = 0 -> 1 : true;
  [b] y = 3 -> 1 : (y'=0);
endmodule
module C
  z : bool init false;
  [b] true -> 7 : (z'=!z);
endmodule
"""
    built = assert_matches_reference(load(text))
    Q = built.chain.Q.toarray()
    i = built.chain.space.index(np.array([[0, 0, 0]]))[0]
    j = built.chain.space.index(np.array([[1, 3, 0]]))[0]
    assert Q[i, j] == pytest.approx(2 * 4)


def test_dtmc_choices_are_randomised_uniformly_and_warned():
    # in (x=0, y=0): 2 unlabelled commands + 2 [a]-combinations: 4 choices of 1/4 each (Storm gives the same)
    text = """dtmc
module A
  x : [0..3] init 0;
  [] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [] x=0 -> 1 : (x'=3);
  [a] x=0 -> 1 : (x'=1);
  [a] x=0 -> 1 : (x'=2);
  [] x>0 -> 1 : (x'=x);
endmodule
module B
  y : [0..1] init 0;
  [a] y=0 -> 0.25 : (y'=1) + 0.75 : true;
endmodule
"""
    with pytest.warns(PrismWarning, match=r"1 state of the dtmc enables more than one choice .*4 choices"):
        built = build_model(load(text).info)
    c = built.chain
    row = c.P.toarray()[c.space.index(np.array([[0, 0]]))[0]]
    expect = {(1, 0): 0.5 / 4 + 0.75 / 4, (2, 0): 0.5 / 4 + 0.75 / 4, (3, 0): 0.25, (1, 1): 0.25 / 4,
              (2, 1): 0.25 / 4}
    for state, p in expect.items():
        assert row[c.space.index(np.array([state]))[0]] == pytest.approx(p, abs=1e-15)
    assert built.n_transitions == 10 and built.n_nondeterministic == 1
    assert_matches_reference(load(text))


def test_dtmc_nondeterminism_matches_storm():
    stormpy = pytest.importorskip("stormpy")
    text = random_model(7, "dtmc")  # 66 states, 54 of them with several choices, 3 deadlocks
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"exactq_nondet_{os.getpid()}.pm")
    with open(path, "w") as fh:
        fh.write(text)
    try:
        prog = stormpy.parse_prism_program(path, prism_compatibility=True)
        full = stormpy.build_model(prog)  # with properties, Storm would stop at their target states
        built = quiet_build(load(text))
        assert (built.n_states, built.n_transitions) == (full.nr_states, full.nr_transitions)
        assert built.n_nondeterministic > 0
        props = stormpy.parse_properties("P=? [ F<=3 x2=2 ]", prog)
        m = stormpy.build_model(prog, props)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrismWarning)
            ours = exactq.check(load(text), "P=? [ F<=3 x2=2 ]").value
        theirs = stormpy.model_checking(m, props[0]).get_value(m.initial_states[0])
        assert ours == pytest.approx(theirs, abs=1e-12)
    finally:
        os.remove(path)


def test_an_update_out_of_range_is_an_error_only_where_the_synchronisation_exists():
    # B blocks [a] in every reachable state, so A's out-of-range update is never taken
    ok = """ctmc
module A x : [0..1] init 1; [a] true -> 1 : (x'=x+1); [] true -> 1 : (x'=1-x); endmodule
module B y : [0..1] init 0; [a] y = 1 -> 1 : true; endmodule
"""
    assert quiet_build(load(ok)).n_states == 2
    bad = ok.replace("[a] y = 1", "[a] y = 0")
    with pytest.raises(PrismModelError, match=r"variable 'x' would take the value 2, outside its range \[0..1\], "
                                              r"in state \(x=1, y=0\)"):
        quiet_build(load(bad))


def test_dtmc_probabilities_of_a_command_must_sum_to_one():
    text = "dtmc\nmodule q n : [0..1];\n  [] n = 0 -> 0.5 : (n'=1) + 0.4 : true;\n  [] n = 1 -> (n'=0);\nendmodule\n"
    with pytest.raises(PrismModelError, match="sum to 0.9, not 1, in state"):
        quiet_build(load(text))


def test_a_global_written_by_two_synchronising_modules_is_an_error():
    text = """ctmc
global g : [0..3];
module A x : bool; [a] true -> 1 : (g'=1); endmodule
module B y : bool; [a] true -> 1 : (g'=2); endmodule
"""
    with pytest.raises(PrismModelError, match="variable 'g' is written by more than one module"):
        quiet_build(load(text))


def test_deadlocks_get_self_loops_and_count_as_transitions():
    text = "dtmc\nmodule q n : [0..2];\n  [] n < 2 -> 0.5 : (n'=n+1) + 0.5 : (n'=0);\nendmodule\n"
    with pytest.warns(PrismWarning, match="1 deadlocked state was fixed"):
        built = build_model(load(text).info)
    assert built.n_deadlocks == 1 and built.n_transitions == 5
    assert built.chain.P[2, 2] == 1.0
    assert_matches_reference(load(text))


# ------------------------------------------------------------------ long thin chains (window rounds)
def test_a_long_birth_death_chain_builds_fast_and_matches_its_closed_form():
    # M/M/1/K with K = 100000 in PRISM: 100,001 states one step apart (one BFS round per state without windows)
    K = 100_000
    text = f"""ctmc
module q n : [0..{K}] init 0;
  [] n < {K} -> 1 : (n'=n+1);
  [] n > 0 -> 2 : (n'=n-1);
endmodule
label "full" = n = {K};
"""
    import time

    t0 = time.perf_counter()
    built = quiet_build(load(text))
    assert time.perf_counter() - t0 < 20
    assert built.n_states == K + 1 and built.n_transitions == 2 * K
    Q = built.chain.Q
    assert np.allclose(Q.diagonal()[1:-1], -3.0) and Q[0, 1] == 1.0 and Q[K, K - 1] == 2.0


def test_windows_and_plain_rounds_build_the_same_chain(monkeypatch):
    import exactq.ctmc as ctmc

    text, consts, _ = ctmc_cases.tandem(15)
    with_windows = quiet_build(load(text, "c=15"))
    monkeypatch.setattr(ctmc, "_THIN_ROUNDS", 10**9)
    plain = quiet_build(load(text, "c=15"))
    assert_same_chain(with_windows, plain)


def assert_same_chain(a, b):
    """Two builds of one model agree exactly: states, rates, transitions, jumps and rewards."""
    assert np.array_equal(a.chain.states, b.chain.states)
    assert abs(a.chain.Q - b.chain.Q).max() == 0
    assert a.n_transitions == b.n_transitions
    assert np.array_equal(a.chain.jumps, b.chain.jumps)
    for k in b.rewards:
        np.testing.assert_array_equal(a.rewards[k].rate(), b.rewards[k].rate())


def test_an_error_in_an_unreachable_state_of_a_window_is_not_raised():
    # n never exceeds 500; the rate 1/(600-n) is negative beyond 600, in states a window may look at
    text = """ctmc
module q n : [0..1000] init 0;
  [] n < 500 -> 1 : (n'=n+1);
  [] n > 0 & n <= 500 -> 1 : (n'=n-1);
  [] n > 600 -> 1/(600-n) : (n'=0);
endmodule
"""
    assert quiet_build(load(text)).n_states == 501
    reach = text.replace("n < 500 ->", "n < 700 ->").replace("n <= 500", "n <= 700")
    with pytest.raises(PrismModelError, match=r"the rate 1 / \(600 - n\) evaluates to -1 in state \(n=601\)"):
        quiet_build(load(reach))


def _count_moved(monkeypatch):
    """Make moved windows start whatever the rounds cost, and count those that ran."""
    import exactq.ctmc as ctmc

    monkeypatch.setattr(ctmc, "_MOVED_STATE_SECONDS", 0.0)
    ran = []
    real = ctmc._Search._moved

    def moved(self):
        out = real(self)
        ran.append(out)
        return out

    monkeypatch.setattr(ctmc._Search, "_moved", moved)
    return ran


@pytest.mark.parametrize("case, size", [("mapk_cascade", 2), ("cluster", 8), ("fms", 2)])
def test_moved_windows_and_plain_rounds_build_the_same_chain(monkeypatch, case, size):
    import exactq.ctmc as ctmc
    import prism_models_extra

    text, consts, _ = getattr(prism_models_extra if case == "mapk_cascade" else ctmc_cases, case)(size)
    ran = _count_moved(monkeypatch)
    moved = quiet_build(load_prism("m.sm", consts, text=text))
    assert any(ran)  # the windows ran
    monkeypatch.setattr(ctmc, "_MOVED_AFTER", 10**9)
    del ran[:]
    plain = quiet_build(load_prism("m.sm", consts, text=text))
    assert not ran
    assert_same_chain(moved, plain)


_SIMPLEX = """ctmc
module m
  x : [0..40] init 0; y : [0..40] init 0; z : [0..40] init 0;
  [] x + y + z < 24 -> 1 : (x'=x+1);
  [] x + y + z < 24 -> 2 : (y'=y+1);
  [] x + y + z < 24 -> 3 : (z'=z+1);
  [] x + y + z > 25 -> 25 - x - y - z : (x'=0);
endmodule
"""


def test_an_error_in_an_unreachable_guess_of_a_moved_window_is_not_raised(monkeypatch):
    # the states x + y + z <= 24 are reachable; the moved frontier guesses beyond, where the rate is negative
    import exactq.ctmc as ctmc

    monkeypatch.setattr(ctmc, "_WINDOW_DENSITY", 1e-12)  # no windows over boxes (they would take this chain)
    ran = _count_moved(monkeypatch)
    built = quiet_build(load(_SIMPLEX))
    assert any(ran)
    assert built.n_states == 25 * 26 * 27 // 6  # the lattice points of the simplex x + y + z <= 24
    reach = _SIMPLEX.replace("< 24", "< 30")
    with pytest.raises(PrismModelError, match=r"the rate 25 - x - y - z evaluates to -1 in state"):
        quiet_build(load(reach))


# ------------------------------------------------------------------ budgets and init blocks
def test_exploration_beyond_the_memory_budget_is_one_line(monkeypatch):
    text, consts, _ = dtmc_cases.herman(9)
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", "200KB")
    with pytest.raises(BudgetError) as exc:
        quiet_build(load(text))
    msg = str(exc.value)
    assert "\n" not in msg and "m.pm" in msg and "above the memory budget of 195 KiB" in msg


def test_a_chain_over_a_range_of_1e9_ends_at_the_budget_in_one_line(monkeypatch):
    # a birth-death chain on 0..1e9: windows of doubling size climb it until the budget says no
    text = """ctmc
module m x : [0..1000000000] init 0;
  [] x < 1000000000 -> 1 : (x'=x+1);
  [] x > 0 -> 2 : (x'=x-1);
endmodule
"""
    import time

    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", "60MB")
    t0 = time.perf_counter()
    with pytest.raises(BudgetError) as exc:
        quiet_build(load(text))
    assert time.perf_counter() - t0 < 30
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("m.pm: ") and "above the memory budget of 57.2 MiB" in msg


def test_init_blocks_enumerate_only_what_they_constrain():
    text = """dtmc
const int M = 3;
module a
  x : [0..1000000000];
  y : [0..5];
  z : bool;
  [] x < 5 -> (x'=x+1);
  [] x >= 5 -> true;
endmodule
init x = 0 & y < M & (z | y = 1) endinit
"""
    built = quiet_build(load(text))
    init = built.chain.states[built.chain.labels["init"]].tolist()
    assert init == [[0, 0, 1], [0, 1, 0], [0, 1, 1], [0, 2, 1]]
    assert built.n_states == 24


@pytest.mark.parametrize("block, what", [
    ("init y < 3 endinit", "the 3000000003 initial states of 'init ... endinit'"),
    ("init x + y = 0 endinit", "evaluating 'init ... endinit' on the 6000000006 valuations of x, y"),
])
def test_init_blocks_over_huge_ranges_are_refused_in_one_line_at_once(block, what):
    text = f"""dtmc
module a
  x : [0..1000000000];
  y : [0..5];
  [] true -> true;
endmodule
{block}
"""
    import time

    t0 = time.perf_counter()
    with pytest.raises(BudgetError) as exc:
        quiet_build(load(text))
    assert time.perf_counter() - t0 < 5
    msg = str(exc.value)
    assert "\n" not in msg and what in msg and "above the memory budget" in msg


def test_init_false_is_an_error():
    text = "dtmc\nmodule a x : [0..3]; [] true -> true; endmodule\ninit x > 5 endinit\n"
    with pytest.raises(PrismModelError, match="no valuation of the variables satisfies"):
        quiet_build(load(text))


# ------------------------------------------------------------------ the DTMC case studies: closed forms
def test_herman_three_tokens_take_4abc_over_n_steps():
    # McIver & Morgan (2005): from three tokens at distances a, b, c the expected time is 4abc/N
    text, _, _ = dtmc_cases.herman(5)
    m = load(text)
    lo = exactq.check(m, 'filter(min, R{"steps"}=? [ F "stable" ], "three")').value
    hi = exactq.check(m, 'filter(max, R{"steps"}=? [ F "stable" ], "three")').value
    assert lo == pytest.approx(dtmc_cases.herman_three_tokens(5, 1, 1), rel=1e-9)  # 4*1*1*3/5
    assert hi == pytest.approx(dtmc_cases.herman_three_tokens(5, 1, 2), rel=1e-9)  # 4*1*2*2/5
    built = quiet_build(m)
    # 2^tokens targets per state; the sum over the 2^N rings is the trace of [[2, 1], [1, 2]]^N
    assert built.n_states == 32 and built.n_transitions == 3 ** 5 + 1


@pytest.mark.parametrize("n, k", [(3, 2), (4, 3)])
def test_leader_election_rounds_and_fairness(n, k):
    text, _, _ = dtmc_cases.leader_sync(n, k)
    m = load(text)
    assert exactq.check(m, 'P=? [ F "elected" ]').value == pytest.approx(1.0, abs=1e-12)
    rounds = exactq.check(m, 'R{"rounds"}=? [ F "elected" ]').value
    assert rounds == pytest.approx(dtmc_cases.leader_expected_rounds(n, k), rel=1e-9)
    assert exactq.check(m, 'P=? [ F "leader1" ]').value == pytest.approx(1 / n, rel=1e-9)


def test_crowds_observes_the_initiator_twice_as_the_binomial_law_says():
    text, consts, _ = dtmc_cases.crowds(3, 4)
    m = load(text, "TotalRuns=3")
    value = exactq.check(m, 'P=? [ F "done" & obs0 > 1 ]').value
    assert value == pytest.approx(dtmc_cases.crowds_observed_twice(3, 4), rel=1e-9)


def test_wide_state_keys_build_crowds_beyond_64_bits():
    # 34 honest members observed 0..2 times each: 3^34 * 630 valuations, wider than one 61-bit key
    text, _, _ = dtmc_cases.crowds(2, 34)
    m = load(text, "TotalRuns=2")
    built = quiet_build(m)
    space = built.chain.space
    assert space.wide and space.packing.n_words == 2
    assert np.array_equal(space.index(space.states), np.arange(built.n_states))
    value = exactq.check(m, 'P=? [ F "done" & obs0 > 1 ]').value
    assert value == pytest.approx(dtmc_cases.crowds_observed_twice(2, 34), rel=1e-9)


# ------------------------------------------------------------------ counts and values against Storm
CASES = [
    ("herman", dtmc_cases.herman, (5,)), ("leader_sync", dtmc_cases.leader_sync, (3, 2)),
    ("crowds", dtmc_cases.crowds, (2, 3)), ("crowds_wide", dtmc_cases.crowds, (2, 34)), ("tandem", ctmc_cases.tandem, (5,)),
    ("polling", ctmc_cases.polling, (3,)), ("cluster", ctmc_cases.cluster, (2,)),
    ("embedded", ctmc_cases.embedded, (2,)), ("kanban", ctmc_cases.kanban, (1,)), ("fms", ctmc_cases.fms, (1,)),
]


@pytest.mark.parametrize("name, gen, args", CASES, ids=[c[0] for c in CASES])
def test_state_and_transition_counts_match_storm(name, gen, args, tmp_path):
    stormpy = pytest.importorskip("stormpy")
    text, consts, _ = gen(*args)
    cs = ",".join(f"{k}={v}" for k, v in consts.items())
    path = tmp_path / "m.pm"
    path.write_text(text)
    prog = stormpy.parse_prism_program(str(path), prism_compatibility=True)
    if cs:
        prog, _ = stormpy.instantiate_constants(prog, cs)
    model = stormpy.build_model(prog)
    built = quiet_build(load(text, cs or None))
    assert (built.n_states, built.n_transitions) == (model.nr_states, model.nr_transitions)


SHIFTS = """ctmc
const int K = 2;
formula up = x + 1;
module A
  x : [0..6] init 0;
  y : [-3..3] init 0;
  [] x < 6 -> 1.5 : (x'=up) + 0.5 : (x'=1+x) & (y'=max(y-1, -3));
  [] x >= K -> 2 : (x'=x-K) & (y'=y+1-1);
  [] y < 3 -> 0.25 : (y'=y+1) & (x'=K-min(x, K));
  [s] x > 0 -> 1 : (x'=x - 1 + 0);
endmodule
module B
  z : [0..2] init 0;
  [s] z < 2 -> 3 : (z'=z+1);
  [] z = 2 -> 1 : (z'=0);
endmodule
"""


def test_constant_changes_x_plus_c_build_the_same_chain_as_evaluated_updates():
    """``x' = x + c`` (in any spelling: a formula, ``c + x``, ``x - K``, ``x + 1 - 1``) is applied as one
    change of the packed state without evaluating it; written as ``x*1 + c`` (evaluated state by state) it
    must give the same states, rates and order."""
    fast = quiet_build(load(SHIFTS))
    slow_text = (SHIFTS.replace("formula up = x + 1;", "formula up = x*1 + 1;").replace("(x'=1+x)", "(x'=1+x*1)")
                 .replace("(x'=x-K)", "(x'=x*1-K)").replace("(y'=y+1-1)", "(y'=y*1+1-1)")
                 .replace("(y'=y+1)", "(y'=y*1+1)").replace("(x'=x - 1 + 0)", "(x'=x*1 - 1 + 0)")
                 .replace("(z'=z+1)", "(z'=z*1+1)"))
    assert slow_text.count("*1") == 7
    slow = quiet_build(load(slow_text))
    assert fast.chain.n_states == slow.chain.n_states > 20
    np.testing.assert_array_equal(np.asarray(fast.chain.space.states), np.asarray(slow.chain.space.states))
    assert abs(fast.chain.Q - slow.chain.Q).max() == 0.0
    info = load(SHIFTS).info
    shifts = sorted(e.shift for m in info.modules for c in m.commands for u in c.updates for _, e in u.assigns
                    if e.shift is not None)
    assert shifts == [(0, -2), (0, -1), (0, 1), (0, 1), (1, 0), (1, 1), (2, 1)]


def test_an_update_x_plus_c_out_of_range_in_some_states_is_still_an_error_there():
    text = "ctmc\nmodule A x : [0..3] init 0; [] true -> 1 : (x'=x+2); endmodule\n"
    with pytest.raises(PrismModelError, match=r"variable 'x' would take the value 4, outside its range \[0..3\], "
                                              r"in state \(x=2\)"):
        quiet_build(load(text))
