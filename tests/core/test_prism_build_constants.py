"""Updates that assign constants (exactq.prism.builder._Builder._constants) against the general path.

The builder takes an update's constant assignments together: the word changes by the
constants' word less the state's digits of those columns (for a run of consecutive
columns, two remainders of the word). Each model here is built twice, with the path
and with every assignment evaluated one by one; the chains must be the same, and
their values those of a hand computation.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import exactq.prism.builder as builder
from exactq.api import check_properties
from exactq.prism import PrismWarning, load_prism
from exactq.prism.builder import build_model


def build(text, *, constants=True):
    """The built model, with the builder's largest jumps per variable (what its windows grow by) as ``.seen``."""
    made = []

    class Recorded(builder._Builder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builder, "_Builder", Recorded)
        if not constants:
            mp.setattr(Recorded, "_constants", lambda self, u: (None, None, None, u.assigns))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrismWarning)  # RESET enables two choices in some states
            out = build_model(load_prism("m.pm", text=text).info)
    out.seen = made[0].jumps.tolist()
    return out


def assert_same(a, b):
    assert np.array_equal(a.chain.states, b.chain.states)
    assert a.n_transitions == b.n_transitions
    M = a.chain.Q if hasattr(a.chain, "Q") else a.chain.P
    N = b.chain.Q if hasattr(b.chain, "Q") else b.chain.P
    np.testing.assert_array_equal(M.toarray(), N.toarray())
    if getattr(a.chain, "jumps", None) is not None:
        assert np.array_equal(a.chain.jumps, b.chain.jumps)
    assert a.seen == b.seen


# constants on the first column, on the last, on runs of consecutive columns and on single
# ones, booleans among them, mixed with x' = x + c and with copies of other variables;
# ranges that do not start at 0; synchronised modules (several parts: the sorted path)
RESET = """
dtmc
module a
  a0 : [2..5] init 2;
  a1 : bool;
  a2 : [-1..3] init 0;
  a3 : [0..4];
  [] a0 < 5 -> 0.5 : (a0'=a0+1) & (a1'=true) & (a2'=3) + 0.5 : (a2'=-1) & (a3'=a3) & (a1'=false);
  [] a0 = 5 -> 0.25 : (a0'=2) & (a1'=false) & (a2'=0) & (a3'=4)
             + 0.75 : (a0'=3) & (a3'=min(a3 + 1, 4));
  [tick] a3 < 4 -> (a3'=a3+1) & (a2'=2);
  [tick] a3 = 4 -> (a3'=0);
endmodule
module b
  b0 : [0..3];
  b1 : [1..2] init 1;
  [tick] true -> 0.5 : (b0'=3) & (b1'=2) + 0.5 : (b0'=mod(b0 + 1, 4)) & (b1'=1);
endmodule
"""


@pytest.mark.parametrize("kind", ["dtmc", "ctmc"])
def test_constant_assignments_build_the_same_chain(kind):
    text = RESET.replace("dtmc", kind)
    fast, slow = build(text), build(text, constants=False)
    assert fast.n_states == slow.n_states > 50
    assert_same(fast, slow)
    assert fast.seen[:4] == [3, 1, 4, 4]  # a0: 5 -> 2, a2: 3 -> -1, a3: 4 -> 0
    if kind == "ctmc":  # the chain's own (nested dissection's separators) as well
        assert fast.chain.jumps is not None and fast.chain.jumps.tolist()[:4] == [3, 1, 4, 4]
    else:
        assert np.allclose(np.asarray(fast.chain.P.sum(axis=1)).ravel(), 1.0)


def test_leader_election_like_picks():
    # each process picks a value in one update, four constants at a time (the case the path was made for)
    text = """
dtmc
const int K = 3;
module c
  ph : [0..2];
  [pick] ph = 0 -> (ph'=1);
  [go] ph = 1 -> (ph'=2);
  [again] ph = 2 -> (ph'=0);
endmodule
module p1
  x1 : [0..K-1]; y1 : [0..K-1]; z1 : [0..K-1]; u1 : bool;
  [pick] true -> 1/3 : (x1'=0) & (y1'=0) & (z1'=0) & (u1'=true) + 1/3 : (x1'=1) & (y1'=1) & (z1'=1) & (u1'=true)
               + 1/3 : (x1'=2) & (y1'=2) & (z1'=2) & (u1'=false);
  [go] true -> (y1'=x2);
  [again] true -> (x1'=0) & (y1'=0) & (z1'=0) & (u1'=false);
endmodule
module p2 = p1 [ x1=x2, y1=y2, z1=z2, u1=u2, x2=x1 ] endmodule
label "same" = ph = 2 & y1 = y2;
"""
    fast, slow = build(text), build(text, constants=False)
    assert_same(fast, slow)
    # after a pick and a pass, y1 = x2 and y2 = x1: equal exactly when both picked the same value
    model = load_prism("m.pm", text=text)
    (r,) = check_properties(model, 'P=? [ F<=2 "same" ]')
    assert r.value == pytest.approx(1 / 3, abs=1e-12)
