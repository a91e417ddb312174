"""Shifted windows (exactq.ctmc._Search._shift) against plain breadth-first rounds, closed forms and Storm.

A shifted window guesses the states of the next rounds of a deep, thin exploration
(the last frontiers moved by a change that recurs every few rounds) and keeps only
those the frontier reaches. Every model here is deep and thin, and built twice: as
it comes (the test checks that shifted windows ran) and with windows off (plain
rounds, one per breadth-first level); the chains must be the same, and their
values those of closed forms or Storm.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import exactq.ctmc as ctmc
from exactq.api import check_properties
from exactq.prism import PrismModelError, PrismWarning, load_prism
from exactq.prism.builder import build_model

from test_prism_case_studies_extra import X  # (the bench's case-study generators, loaded once)


@contextlib.contextmanager
def exploring(windows=True):
    """A list that receives, per shifted window tried, whether it ran; ``windows=False``: plain rounds only."""
    used = []
    original = ctmc._Search._shift

    def counting(self):
        ok = original(self)
        used.append(ok)
        return ok

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ctmc._Search, "_shift", counting)
        if not windows:
            mp.setattr(ctmc, "_THIN_ROUNDS", 10**9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrismWarning)
            yield used


def build(text, consts=None, *, windows=True):
    """``(built, the number of shifted windows that ran)``; ``windows=False``: plain rounds only."""
    with exploring(windows) as used:
        built = build_model(load_prism("m.pm", consts, text=text).info)
    return built, sum(used)


def assert_same_chain(a, b):
    assert np.array_equal(a.chain.states, b.chain.states)
    assert (a.n_transitions, a.n_deadlocks, a.n_nondeterministic) == (b.n_transitions, b.n_deadlocks,
                                                                       b.n_nondeterministic)
    if hasattr(a.chain, "Q"):
        np.testing.assert_allclose(a.chain.Q.toarray(), b.chain.Q.toarray(), rtol=1e-14, atol=0)
        assert np.array_equal(a.chain.jumps, b.chain.jumps)
    else:
        np.testing.assert_allclose(a.chain.P.toarray(), b.chain.P.toarray(), rtol=1e-14, atol=0)
    for name in b.chain.labels:
        assert np.array_equal(a.chain.labels[name], b.chain.labels[name]), name
    for k in b.rewards:
        np.testing.assert_allclose(a.rewards[k].transition, b.rewards[k].transition, rtol=1e-14, atol=0)
        np.testing.assert_array_equal(a.rewards[k].rate(), b.rewards[k].rate())


def brp_text(n, mx):
    text, consts, props = X.brp(n, mx)
    return text, ",".join(f"{k}={v}" for k, v in consts.items()), props


# ------------------------------------------------------------------ the bounded retransmission protocol
@pytest.mark.parametrize("n, mx", [(64, 3), (100, 1)])
def test_brp_builds_the_same_chain_with_shifted_windows_as_with_plain_rounds(n, mx):
    text, consts, _ = brp_text(n, mx)
    fast, shifted = build(text, consts)
    plain, none = build(text, consts, windows=False)
    assert shifted > 0 and none == 0
    assert_same_chain(fast, plain)


def checked_with_windows(name, consts, text, props):
    """Build ``text`` with the shifted windows (asserting that they ran) and check ``props``."""
    with exploring() as used:
        m = load_prism(name, consts, text=text)
        m.built
    assert sum(used) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_properties(m, props)


def test_brp_values_with_shifted_windows_match_the_closed_forms():
    n, mx = 64, 3
    text, consts, props = brp_text(n, mx)
    got = {r.measure: r.value for r in checked_with_windows("brp.pm", consts, text, "\n".join(props))}
    for prop, want in X.brp_closed_forms(n, mx).items():
        assert got[prop] == pytest.approx(want, rel=1e-9), prop


def test_brp_as_an_mdp_builds_the_same_choices_with_shifted_windows():
    text, consts, _ = brp_text(64, 2)
    text = "mdp" + text[len("dtmc"):]
    fast, shifted = build(text, consts)
    plain, _ = build(text, consts, windows=False)
    assert shifted > 0
    assert np.array_equal(fast.chain.space.states, plain.chain.space.states)
    assert np.array_equal(np.asarray(fast.chain.row_groups), np.asarray(plain.chain.row_groups))
    np.testing.assert_allclose(fast.chain.P.toarray(), plain.chain.P.toarray(), rtol=1e-14, atol=0)
    assert fast.n_transitions == plain.n_transitions


def test_brp_with_hashed_keys_builds_the_same_chain():
    # a constant variable of 10^18 values makes the packed state two words (hashed keys)
    text, consts, _ = brp_text(64, 2)
    text = text.replace("module sender", "global pad : [0..1000000000000000000] init 7;\n\nmodule sender")
    fast, shifted = build(text, consts)
    plain, _ = build(text, consts, windows=False)
    assert fast.chain.space.packing.n_words > 1
    assert shifted > 0
    assert_same_chain(fast, plain)


def test_brp_counts_match_storm(tmp_path):
    stormpy = pytest.importorskip("stormpy")
    text, consts, _ = brp_text(128, 4)
    path = tmp_path / "brp.pm"
    path.write_text(text)
    prog, _ = stormpy.instantiate_constants(stormpy.parse_prism_program(str(path), prism_compatibility=True),
                                            consts)
    model = stormpy.build_model(prog)
    built, shifted = build(text, consts)
    assert shifted > 0
    assert (built.n_states, built.n_transitions) == (model.nr_states, model.nr_transitions)


# ------------------------------------------------------------------ models of our own
#: a sender of L chunks in three phases, and a receiver that copies the chunk number (so that the states
#: found are a thin diagonal of their bounding box, where box windows do not pay)
SENDER = """ctmc
const int N = 200;
const int L;
module sender
  ph : [0..2] init 0;
  i : [0..N] init 0;
  [] ph=0 & i<L -> 1 : (ph'=1);
  [go] ph=1 -> 2 : (ph'=2);
  [] ph=2 -> 3 : (ph'=0) & (i'=i+1);
  [] ph=2 -> 0.5 : (ph'=1);
  [] i > 120 -> 1/(120-i) : (ph'=0);
endmodule
module receiver
  got : [0..N] init 0;
  [go] true -> 1.5 : (got'=i);
endmodule
label "last" = i = L;
rewards "chunks" [go] true : 1; ph=2 : 0.25; endrewards
"""


def test_a_sender_receiver_chain_is_the_same_with_shifted_windows():
    fast, shifted = build(SENDER, "L=100")
    plain, _ = build(SENDER, "L=100", windows=False)
    assert shifted > 0
    assert_same_chain(fast, plain)
    # the states: i = 0: ph = 0, 1, 2 with got = 0; 0 < i < L: (ph=0, got=i-1), (ph=1, got=i-1 or, after a
    # retry from ph=2, i), (ph=2, got=i); i = L: (ph=0, got=L-1), a deadlock. 3 + 4 (L - 1) + 1 = 4 L
    assert fast.n_states == 4 * 100 and fast.n_deadlocks == 1


def test_an_error_in_a_state_only_a_shifted_window_guesses_is_not_raised():
    # i never exceeds L = 100; the rate 1/(120-i) is negative beyond 120, in states the windows guess
    built, shifted = build(SENDER, "L=100")
    assert shifted > 0 and int(built.chain.states[:, 1].max()) == 100
    with pytest.raises(PrismModelError, match=r"the rate 1 / \(120 - i\) evaluates to -[0-9.]+ in state "
                                              r"\(ph=\d, i=1[2-5]\d, got=\d+\)"):
        build(SENDER, "L=150")
    with pytest.raises(PrismModelError, match=r"the rate 1 / \(120 - i\) evaluates to -[0-9.]+ in state"):
        build(SENDER, "L=150", windows=False)


def test_a_counter_chain_of_two_phases_against_its_closed_form_and_storm(tmp_path):
    # a DTMC climbing 0..K in two phases per step; each phase goes on with probability p (q) or fails for good
    # (f): K is reached with probability (p q)^K. A second module copies k in the step (a thin diagonal)
    K = 150
    text = f"""dtmc
const double p = 0.99;
const double q = 0.995;
module climb
  ph : [0..1] init 0;
  k : [0..{K}] init 0;
  f : bool init false;
  [] !f & ph=0 & k<{K} -> p : (ph'=1) + 1-p : (f'=true);
  [up] !f & ph=1 -> q : (ph'=0) & (k'=k+1) + 1-q : (f'=true);
endmodule
module copy
  c : [0..{K}] init 0;
  [up] true -> (c'=min(k+1, {K}));
endmodule
label "top" = k={K};
"""
    fast, shifted = build(text)
    plain, _ = build(text, windows=False)
    assert shifted > 0
    assert_same_chain(fast, plain)
    (r,) = checked_with_windows("climb.pm", None, text, 'P=? [ F "top" ]')
    assert r.value == pytest.approx((0.99 * 0.995) ** K, rel=1e-9)
    stormpy = pytest.importorskip("stormpy")
    path = tmp_path / "climb.pm"
    path.write_text(text)
    model = stormpy.build_model(stormpy.parse_prism_program(str(path), prism_compatibility=True))
    assert (fast.n_states, fast.n_transitions) == (model.nr_states, model.nr_transitions)
