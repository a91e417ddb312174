"""The vectorised CTMC builder, against a generator assembled by hand one state at a time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactq.ctmc import CTMC, Event, build_ctmc, explore
from exactq.statespace import StateSpace

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def reference_generator(space: StateSpace, events):
    """Dense Q, cut rate and largest jumps, built with plain Python loops."""
    n, d = space.states.shape
    where = {tuple(r): i for i, r in enumerate(space.states.tolist())}
    Q = np.zeros((n, n))
    cut = np.zeros(n)
    jumps = np.zeros(d, dtype=int)
    for i, row in enumerate(space.states.tolist()):
        for ev in events:
            rate, target = ev.fn(np.array([row], dtype=np.int64))
            rate = float(np.broadcast_to(np.asarray(rate, dtype=float), (1,))[0])
            t = tuple(int(v) for v in np.asarray(target)[0])
            if rate == 0:
                continue
            j = where.get(t)
            if j is None:
                cut[i] += rate
            elif j != i:
                Q[i, j] += rate
                jumps = np.maximum(jumps, np.abs(np.array(t) - np.array(row)))
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q, cut, jumps


def _make_event(jump, var, coef, const, cond_var, threshold):
    """rate = const + coef * x[var] where x[cond_var] >= threshold, else 0."""
    jump = np.asarray(jump, dtype=np.int64)

    def fn(s):
        rate = (const + coef * s[:, var]) * (s[:, cond_var] >= threshold)
        return rate.astype(float), s + jump

    return Event(f"e{tuple(jump.tolist())}", fn)


event_spec = st.tuples(
    st.tuples(st.integers(-2, 2), st.integers(-2, 2)),
    st.integers(0, 1),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from([0.0, 0.25, 3.0]),
    st.integers(0, 1),
    st.integers(0, 2),
)


@FAST
@given(
    specs=st.lists(event_spec, min_size=1, max_size=5),
    hi=st.tuples(st.integers(0, 5), st.integers(0, 5)),
    thin=st.booleans(),
)
def test_builder_matches_a_hand_built_generator(specs, hi, thin):
    events = [_make_event(*spec) for spec in specs]
    space = StateSpace.box(["x", "y"], hi=list(hi))
    if thin and space.n_states > 2:  # a non-box space: drop every third state
        keep = space.states[np.arange(space.n_states) % 3 != 1]
        space = StateSpace(keep, ["x", "y"], lo=[0, 0], hi=list(hi))
    chain = build_ctmc(space, events)
    Q_ref, cut_ref, jumps_ref = reference_generator(space, events)
    assert isinstance(chain.Q, sp.csr_matrix)
    assert chain.Q.shape == (space.n_states, space.n_states)
    np.testing.assert_allclose(chain.Q.toarray(), Q_ref, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(chain.cut_rate, cut_ref, rtol=1e-14, atol=0)
    assert chain.jumps.tolist() == jumps_ref.tolist()
    _assert_generator(chain)


def _assert_generator(chain: CTMC) -> None:
    Q = chain.Q.toarray()
    off = Q - np.diag(np.diag(Q))
    assert (off >= 0).all()
    np.testing.assert_allclose(Q.sum(axis=1), 0.0, atol=1e-12)
    # no stored zero rates off the diagonal
    coo = chain.Q.tocoo()
    offdiag = coo.row != coo.col
    assert (coo.data[offdiag] > 0).all()


def birth_death_events(lam=2.0, mu=1.0):
    return [
        Event("arrival", lambda s: (np.full(len(s), lam), s + 1)),
        Event("departure", lambda s: (mu * (s[:, 0] > 0), s - 1)),
    ]


def test_birth_death_chain_rows_cut_rate_and_jumps():
    space = StateSpace.box(["n"], hi=[4])
    chain = build_ctmc(space, birth_death_events(), truncation={"level": 4, "rule": "block"})
    Q = chain.Q.toarray()
    expected = np.array(
        [
            [-2, 2, 0, 0, 0],
            [1, -3, 2, 0, 0],
            [0, 1, -3, 2, 0],
            [0, 0, 1, -3, 2],
            [0, 0, 0, 1, -1],  # the arrival out of state 4 is cut, not kept on the diagonal
        ],
        dtype=float,
    )
    np.testing.assert_array_equal(Q, expected)
    np.testing.assert_array_equal(chain.cut_rate, [0, 0, 0, 0, 2.0])
    assert chain.boundary_mask().tolist() == [False, False, False, False, True]
    assert chain.jumps.tolist() == [1]
    assert chain.is_truncated and chain.truncation == {"level": 4, "rule": "block"}
    assert chain.n_states == 5
    _assert_generator(chain)


def test_departure_from_zero_with_positive_rate_is_cut_not_dropped():
    space = StateSpace.box(["n"], hi=[2])
    leaky = [Event("down", lambda s: (np.full(len(s), 1.5), s - 1))]
    chain = build_ctmc(space, leaky)
    np.testing.assert_array_equal(chain.cut_rate, [1.5, 0, 0])
    np.testing.assert_array_equal(chain.Q.toarray(), [[0, 0, 0], [1.5, -1.5, 0], [0, 1.5, -1.5]])


def test_self_loops_are_dropped():
    space = StateSpace.box(["n"], hi=[3])
    base = build_ctmc(space, birth_death_events())
    loop = Event("stay", lambda s: (np.full(len(s), 7.0), s.copy()))
    with_loop = build_ctmc(space, birth_death_events() + [loop])
    np.testing.assert_array_equal(with_loop.Q.toarray(), base.Q.toarray())
    np.testing.assert_array_equal(with_loop.cut_rate, base.cut_rate)
    assert with_loop.jumps.tolist() == base.jumps.tolist()


def test_duplicate_targets_are_summed():
    space = StateSpace.box(["n"], hi=[3])
    split = [
        Event("up_a", lambda s: (np.full(len(s), 1.25), s + 1)),
        Event("up_b", lambda s: (np.full(len(s), 0.75), s + 1)),
        Event("down", lambda s: (1.0 * (s[:, 0] > 0), s - 1)),
    ]
    merged = build_ctmc(space, birth_death_events(lam=2.0))
    chain = build_ctmc(space, split)
    np.testing.assert_allclose(chain.Q.toarray(), merged.Q.toarray(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(chain.cut_rate, merged.cut_rate)
    assert chain.Q.has_canonical_format


def test_zero_rates_add_nothing():
    space = StateSpace.box(["n"], hi=[3])
    dead = Event("never", lambda s: (np.zeros(len(s)), s + 5))  # also far outside: must not be cut
    chain = build_ctmc(space, birth_death_events() + [dead])
    base = build_ctmc(space, birth_death_events())
    np.testing.assert_array_equal(chain.Q.toarray(), base.Q.toarray())
    np.testing.assert_array_equal(chain.cut_rate, base.cut_rate)


def test_scalar_rate_is_broadcast():
    space = StateSpace.box(["n"], hi=[2])
    chain = build_ctmc(space, [Event("up", lambda s: (3.0, s + 1))])
    np.testing.assert_array_equal(chain.Q.toarray(), [[-3, 3, 0], [0, -3, 3], [0, 0, 0]])
    np.testing.assert_array_equal(chain.cut_rate, [0, 0, 3.0])


def test_largest_jumps_per_variable():
    space = StateSpace.box(["a", "b"], hi=[4, 4])
    events = [
        Event("batch", lambda s: (np.ones(len(s)), s + [3, 0])),
        Event("swap", lambda s: (np.ones(len(s)), s + [-1, 2])),
        Event("too_far", lambda s: (np.ones(len(s)), s + [0, 9])),  # always cut: no jump recorded
    ]
    chain = build_ctmc(space, events)
    assert chain.jumps.tolist() == [3, 2]


def test_jsq_like_chain_on_an_explored_space():
    """A non-box reachable space (x + 2y even) built through explore, then assembled."""
    events = [
        Event("a", lambda s: (np.ones(len(s)), s + [2, 0])),
        Event("b", lambda s: (0.5 * (s[:, 0] > 0), s + [-1, 1])),
        Event("c", lambda s: (1.5 * (s[:, 1] > 0), s + [1, -1])),
    ]
    space = explore([0, 0], events, ["x", "y"], hi=[6, 6])
    chain = build_ctmc(space, events)
    Q_ref, cut_ref, jumps_ref = reference_generator(space, events)
    np.testing.assert_allclose(chain.Q.toarray(), Q_ref, atol=1e-15)
    np.testing.assert_allclose(chain.cut_rate, cut_ref)
    assert cut_ref.sum() > 0
    _assert_generator(chain)


# ---------------------------------------------------------------------------------
# metadata and the initial state
# ---------------------------------------------------------------------------------
def test_rewards_labels_constants_and_namespace():
    space = StateSpace.box(["n"], hi=[3])
    reward = np.arange(4.0) ** 2
    label = np.array([True, False, False, True])
    chain = build_ctmc(space, birth_death_events(), rewards={"sq": reward}, labels={"edge": label},
                       constants={"K": 3})
    assert chain.rewards["sq"] is reward and chain.labels["edge"] is label
    ns = chain.namespace()
    assert ns["K"] == 3 and ns["n"].tolist() == [0, 1, 2, 3] and ns["sq"] is reward
    assert not chain.is_truncated and chain.truncation is None
    assert chain.states is space.states


@pytest.mark.parametrize("initial, index", [(None, 0), (2, 2), (np.int64(3), 3), ([1], 1), (np.array([3]), 3)])
def test_initial_state_as_index_or_vector(initial, index):
    space = StateSpace.box(["n"], hi=[3])
    assert build_ctmc(space, birth_death_events(), initial=initial).initial == index


def test_initial_state_vector_not_in_space():
    space = StateSpace.box(["n"], hi=[3])
    with pytest.raises(ValueError, match=r"initial state \[7\] is not in the state space"):
        build_ctmc(space, birth_death_events(), initial=[7])


@pytest.mark.parametrize("initial", [4, 10, -1])
def test_initial_state_index_out_of_range_is_refused(initial):
    """An index that names no state must not be accepted silently."""
    space = StateSpace.box(["n"], hi=[3])
    with pytest.raises(ValueError):
        build_ctmc(space, birth_death_events(), initial=initial)


# ---------------------------------------------------------------------------------
# bad events
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "event, match",
    [
        (Event("neg", lambda s: (np.where(s[:, 0] == 2, -1.0, 1.0), s + 1)), r"event 'neg' has rate -1.0 in state \[2\]"),
        (Event("nan", lambda s: (np.full(len(s), np.nan), s + 1)), r"event 'nan' has rate nan in state \[0\]"),
        (Event("inf", lambda s: (np.full(len(s), np.inf), s + 1)), r"event 'inf' has rate inf in state \[0\]"),
        (Event("shape", lambda s: (np.ones(len(s)), s[:, :0])), r"event 'shape' returned targets of shape \(4, 0\)"),
        (Event("rows", lambda s: (np.ones(len(s)), s[:2] + 1)), r"event 'rows' returned targets of shape \(2, 1\)"),
        (Event("flat", lambda s: (np.ones(len(s)), s[:, 0] + 1)), r"event 'flat' returned targets of shape \(4,\)"),
    ],
)
def test_bad_events_raise_naming_the_event(event, match):
    space = StateSpace.box(["n"], hi=[3])
    with pytest.raises(ValueError, match=match):
        build_ctmc(space, [event])


def test_bad_rate_vector_length_raises():
    space = StateSpace.box(["n"], hi=[3])
    with pytest.raises(ValueError):
        build_ctmc(space, [Event("short", lambda s: (np.ones(len(s) - 1), s + 1))])


def test_events_cannot_mutate_the_state_array():
    space = StateSpace.box(["n"], hi=[3])

    def inplace(s):
        s += 1
        return np.ones(len(s)), s

    with pytest.raises(ValueError):
        build_ctmc(space, [Event("inplace", inplace)])
    assert space.states.ravel().tolist() == [0, 1, 2, 3]


def test_builder_is_vectorised_one_call_per_event():
    calls = []
    space = StateSpace.box(["a", "b"], hi=[9, 9])

    def fn(s):
        calls.append(len(s))
        return np.ones(len(s)), s + [1, 0]

    build_ctmc(space, [Event("right", fn)])
    assert calls == [100]


def test_all_states_of_a_product_space_are_indexed_consistently():
    # three independent M/M/1/2 queues: Q is the Kronecker sum of three 3x3 generators
    space = StateSpace.box(["a", "b", "c"], hi=[2, 2, 2])
    events = []
    for k, (lam, mu) in enumerate([(1.0, 2.0), (0.5, 1.0), (3.0, 4.0)]):
        unit = np.eye(3, dtype=np.int64)[k]
        events.append(Event(f"up{k}", lambda s, lam=lam, k=k, unit=unit: (lam * (s[:, k] < 2), s + unit)))
        events.append(Event(f"dn{k}", lambda s, mu=mu, k=k, unit=unit: (mu * (s[:, k] > 0), s - unit)))
    chain = build_ctmc(space, events)
    gens = []
    for lam, mu in [(1.0, 2.0), (0.5, 1.0), (3.0, 4.0)]:
        gens.append(np.array([[-lam, lam, 0], [mu, -lam - mu, lam], [0, mu, -mu]]))
    eye = np.eye(3)
    kron_sum = (np.kron(np.kron(gens[0], eye), eye) + np.kron(np.kron(eye, gens[1]), eye)
                + np.kron(np.kron(eye, eye), gens[2]))
    np.testing.assert_allclose(chain.Q.toarray(), kron_sum, atol=1e-15)
    assert list(itertools.chain.from_iterable(chain.states[:4].tolist())) == [0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 1, 0]
