"""State keys wider than 64 bits: packed words, hashed keys checked against the words, collisions re-seeded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exactq.statespace as ss
from exactq.ctmc import Event, explore, explore_transitions
from exactq.statespace import Packing, StateSpace, hash_words

FAST = settings(max_examples=25, deadline=None)

# 5 variables of 2^20 values and one of 8: 2^103 valuations, two words (60 and 43 bits)
HI = np.array([2**20 - 1] * 5 + [7])
NAMES = [f"v{i}" for i in range(6)]


def _rows(rng, n):
    return np.column_stack([rng.integers(0, h + 1, size=n) for h in HI])


@FAST
@given(st.lists(st.tuples(*[st.integers(0, int(h)) for h in HI]), min_size=1, max_size=40))
def test_packing_round_trips(rows):
    p = Packing(np.zeros(6, np.int64), HI)
    assert p.n_words == 2 and p.word_of.tolist() == [0, 0, 0, 1, 1, 1]
    x = np.array(rows, dtype=np.int64)
    np.testing.assert_array_equal(p.decode(p.words(x)), x)
    assert np.all(p.words(x) >= 0) and np.all(p.words(x) < 2**61)


def test_decoded_rows_are_column_major_and_exact():
    # negative lower bounds, a column of one value, two words: the columns come back contiguous and exact
    lo = np.array([-3, 5, 0, -(2**40), 0])
    hi = np.array([4, 5, 2**40, 2**40, 1])
    p = Packing(lo, hi)
    assert p.n_words == 2
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(a, b + 1, size=500) for a, b in zip(lo.tolist(), hi.tolist())])
    out = p.decode(p.words(x))
    np.testing.assert_array_equal(out, x)
    assert out.flags.f_contiguous and all(out[:, j].flags.c_contiguous for j in range(5))


def test_explored_states_are_decoded_in_key_order():
    # the final rows come from the sorted keys, not from the rows found: the same states, each at its key's place
    events = [Event("a", lambda s: (np.ones(len(s)), s + [2, 0])),
              Event("b", lambda s: ((s[:, 0] > 0).astype(float), s + [-1, 1]))]
    s = explore([0, 0], events, ["x", "y"], lo=[-1, 0], hi=[9, 9])
    assert {tuple(r) for r in s.states.tolist()} == {(x, y) for x in range(10) for y in range(10) if (x + y) % 2 == 0}
    assert np.all(np.diff(s.keys) > 0) and s.states.flags.f_contiguous
    np.testing.assert_array_equal(s.index(s.states), np.arange(s.n_states))


def test_a_single_word_box_keeps_the_mixed_radix_key():
    p = Packing([0, 0], [2, 2])
    assert p.n_words == 1 and p.strides.tolist() == [3, 1]
    s = StateSpace.box(["a", "b"], hi=[2, 2])
    assert not s.wide and s.is_box and int(s.index(np.array([[1, 2]]))[0]) == 5


def test_wide_spaces_index_exactly():
    rng = np.random.default_rng(1)
    states = _rows(rng, 5000)
    states = np.concatenate([states, states[:100]])  # duplicates are dropped
    s = StateSpace(states, NAMES, lo=np.zeros(6, np.int64), hi=HI)
    assert s.wide and s.n_states == 5000 and not s.is_box
    idx = s.index(s.states)
    np.testing.assert_array_equal(idx, np.arange(5000))
    np.testing.assert_array_equal(s.states[s.index(states)], states)
    others = _rows(np.random.default_rng(2), 2000)
    member = {tuple(r) for r in s.states.tolist()}
    expect = np.array([tuple(r) in member for r in others.tolist()])
    assert np.array_equal(s.index(others) >= 0, expect)
    outside = states[:3].copy()
    outside[:, 5] = 8  # beyond hi
    assert np.all(s.index(outside) == -1)


def test_a_collision_at_construction_re_seeds_the_hash(monkeypatch):
    real = hash_words

    def weak(words, seed=0):  # every key collides under seed 0; seeds >= 1 are the real hash
        return np.zeros(len(words), dtype=np.int64) if seed == 0 else real(words, seed)

    monkeypatch.setattr(ss, "hash_words", weak)
    states = _rows(np.random.default_rng(3), 300)
    s = StateSpace(states, NAMES, lo=np.zeros(6, np.int64), hi=HI)
    assert s.seed == 1 and s.n_states == 300
    np.testing.assert_array_equal(s.index(s.states), np.arange(300))


def test_a_collision_during_exploration_restarts_it_with_another_seed(monkeypatch):
    real = hash_words
    calls = {"weak": 0}

    def weak(words, seed=0):
        if seed == 0:
            calls["weak"] += 1
            return (words[:, 0] % 5).astype(np.int64)  # many distinct states share a key
        return real(words, seed)

    monkeypatch.setattr(ss, "hash_words", weak)
    step = np.array([1, 3, 0, 0, 0, 1])

    def expand(states, words):
        t = np.where(states[:, 5:6] < 7, states + step, states)  # 7 steps, then a self-loop
        p = Packing(np.zeros(6, np.int64), HI)
        return [(np.arange(len(states)), np.ones(len(states)), p.words(t))], {}

    ex = explore_transitions(np.zeros((1, 6), np.int64), expand, NAMES, hi=HI, lo=np.zeros(6, np.int64))
    assert calls["weak"] > 0 and ex.space.seed >= 1
    assert ex.space.n_states == 8
    assert sorted(ex.space.states[:, 5].tolist()) == list(range(8))
    np.testing.assert_array_equal(ex.space.index(ex.space.states), np.arange(8))


def test_explore_on_a_wide_box_matches_a_set_based_search():
    # three counters of 2^30 values: the box is 2^90; the reachable set is small
    hi = [2**30 - 1] * 3
    events = [Event("a", lambda s: ((s[:, 0] < 6).astype(float), s + [1, 0, 0])),
              Event("b", lambda s: ((s[:, 1] < s[:, 0]).astype(float), s + [0, 1, 0])),
              Event("c", lambda s: ((s[:, 2] < 2).astype(float), s + [0, 0, 1]))]
    space = explore([0, 0, 0], events, ["x", "y", "z"], hi=hi)
    assert space.wide
    seen, todo = {(0, 0, 0)}, [(0, 0, 0)]
    while todo:
        x = todo.pop()
        for ev in events:
            r, t = ev.fn(np.array([x]))
            t = tuple(int(v) for v in t[0])
            if r[0] > 0 and t not in seen:
                seen.add(t)
                todo.append(t)
    assert {tuple(r) for r in space.states.tolist()} == seen
    np.testing.assert_array_equal(space.index(space.states), np.arange(space.n_states))


def test_a_variable_wider_than_a_key_is_refused_in_one_line():
    from exactq.errors import NotApplicableError

    with pytest.raises(NotApplicableError, match="variable 'big' has .* values, more than a state key holds"):
        Packing([0], [2**62], ["big"])
