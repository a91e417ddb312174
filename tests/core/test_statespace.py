"""State spaces (sorting, deduplication, vectorised indexing) and reachable-set exploration.

References are computed independently in the tests: a Python dict for indexing, the
mixed-radix formula for boxes, ``np.unique`` for sorting, and a networkx breadth-first
search over a hand-built graph for :func:`exactq.ctmc.explore`.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactq.ctmc import Event, explore
from exactq.errors import NotApplicableError, TruncationError
from exactq.statespace import SortedSpace, StateSpace, colex_rank

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------------
# boxes
# ---------------------------------------------------------------------------------
def test_docstring_example():
    s = StateSpace.box(["q1", "q2"], hi=[2, 2])
    assert s.n_states == len(s) == 9
    assert int(s.index(np.array([[1, 2]]))[0]) == 5


@FAST
@given(
    lo=st.lists(st.integers(-3, 3), min_size=1, max_size=3),
    widths=st.lists(st.integers(0, 4), min_size=3, max_size=3),
)
def test_box_indexing_is_the_mixed_radix_rank(lo, widths):
    d = len(lo)
    lo = np.array(lo)
    hi = lo + np.array(widths[:d])
    names = [f"x{i}" for i in range(d)]
    s = StateSpace.box(names, hi=hi, lo=lo)
    assert s.is_box
    expected_states = list(itertools.product(*[range(a, b + 1) for a, b in zip(lo, hi)]))
    assert s.states.tolist() == [list(t) for t in expected_states]  # lexicographic order
    assert s.n_states == len(expected_states)
    assert np.array_equal(s.index(s.states), np.arange(s.n_states))
    # the rank of an arbitrary row, by hand: sum_k (x_k - lo_k) * prod_{j > k} (hi_j - lo_j + 1)
    radix = hi - lo + 1
    for row in expected_states[:: max(1, len(expected_states) // 7)]:
        rank = 0
        for k in range(d):
            rank = rank * radix[k] + (row[k] - lo[k])
        assert s.index(np.array([row]))[0] == rank


def test_box_rows_outside_get_minus_one():
    s = StateSpace.box(["a", "b"], hi=[2, 3])
    rows = np.array([[1, 2], [3, 0], [-1, 0], [2, 3], [0, 4], [2, -1], [10**12, 0]])
    assert s.index(rows).tolist() == [6, -1, -1, 11, -1, -1, -1]


def test_one_dimensional_input_becomes_one_column():
    s = StateSpace([2, 0, 1, 2], ["n"])
    assert s.states.tolist() == [[0], [1], [2]]
    assert s.is_box
    assert s.index([[1], [3], [-1]]).tolist() == [1, -1, -1]


# ---------------------------------------------------------------------------------
# arbitrary sets: sorting, deduplication, indexing
# ---------------------------------------------------------------------------------
rows_strategy = st.lists(
    st.tuples(st.integers(-5, 9), st.integers(0, 6), st.integers(-2, 2)), min_size=1, max_size=40
)


@FAST
@given(rows=rows_strategy, queries=st.lists(st.tuples(st.integers(-7, 11), st.integers(-2, 8),
                                                        st.integers(-3, 3)), max_size=30))
def test_sorted_dedup_and_vectorised_index_against_a_dict(rows, queries):
    s = StateSpace(np.array(rows), ["a", "b", "c"])
    unique = np.unique(np.array(rows), axis=0)  # lexicographic = key order
    assert np.array_equal(s.states, unique)
    assert s.n_states == len(unique)
    assert s.is_box == (len(unique) == int(np.prod(unique.max(0) - unique.min(0) + 1)))
    where = {tuple(r): i for i, r in enumerate(unique.tolist())}
    q = np.array(queries + rows, dtype=np.int64).reshape(-1, 3)
    got = s.index(q)
    assert got.dtype.kind == "i" and got.shape == (len(q),)
    assert got.tolist() == [where.get(tuple(r), -1) for r in q.tolist()]
    assert np.array_equal(s.index(s.states), np.arange(s.n_states))


def test_non_box_space_indexing():
    s = StateSpace([[3, 1], [0, 0], [3, 1], [1, 5]], ["x", "y"])
    assert not s.is_box
    assert s.states.tolist() == [[0, 0], [1, 5], [3, 1]]
    assert s.index([[3, 1], [1, 5], [0, 0], [1, 1], [9, 9], [-1, 0]]).tolist() == [2, 1, 0, -1, -1, -1]


def test_explicit_bounding_box_and_negative_coordinates():
    s = StateSpace([[-2, 0], [1, 1]], ["x", "y"], lo=[-3, 0], hi=[2, 2])
    assert s.lo.tolist() == [-3, 0] and s.hi.tolist() == [2, 2]
    assert not s.is_box
    assert s.index([[-2, 0], [1, 1], [0, 0], [-4, 0], [3, 1]]).tolist() == [0, 1, -1, -1, -1]


def test_empty_query():
    s = StateSpace([[0, 1], [2, 2]], ["x", "y"])
    assert s.index(np.zeros((0, 2), dtype=np.int64)).shape == (0,)


def test_states_are_read_only():
    s = StateSpace.box(["a"], hi=[3])
    with pytest.raises(ValueError):
        s.states[0, 0] = 7


def test_format_state_column_and_namespace():
    s = StateSpace([[3, 0], [0, 2]], ["q1", "q2"])
    assert s.format_state(0) == "(q1=0, q2=2)"
    assert s.format_state(1) == "(q1=3, q2=0)"
    assert s.column("q2").tolist() == [2, 0]
    ns = s.namespace()
    assert set(ns) == {"q1", "q2"} and ns["q1"].tolist() == [0, 3]
    assert s.n_vars == 2 and s.names == ("q1", "q2")


@FAST
@given(st.integers(1, 6), st.booleans(), st.data())
def test_an_explored_space_decodes_its_rows_and_columns_when_read(d, wide, data):
    """A space built from its keys alone (what an exploration makes) decodes a column, a row, or all the rows
    on demand; each equals the rows of the space built from the same states, in a narrow box and in a wide one
    (several words), with negative lower corners, and after some columns were decoded alone."""
    import exactq.statespace as ss

    top = 2**40 if wide else 9
    lo = np.array(data.draw(st.lists(st.integers(-5, 0), min_size=d, max_size=d)), dtype=np.int64)
    hi = lo + np.array(data.draw(st.lists(st.integers(0, top), min_size=d, max_size=d)), dtype=np.int64)
    n = data.draw(st.integers(1, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    X = (lo + (rng.random((n, d)) * (hi - lo + 1)).astype(np.int64)).astype(np.int64)
    full = StateSpace(X, [f"x{j}" for j in range(d)], lo=lo, hi=hi)
    lazy = StateSpace._presorted(full.names, full.packing, full.keys, getattr(full, "_words", None), full.seed)
    assert lazy.n_states == full.n_states and "_states" in lazy.__dict__ and lazy.__dict__["_states"] is None
    first = data.draw(st.lists(st.integers(0, d - 1), max_size=d))
    for j in first:  # some columns alone first, as the checks read them
        np.testing.assert_array_equal(lazy.column_at(j), full.states[:, j])
    i = data.draw(st.integers(0, full.n_states - 1))
    np.testing.assert_array_equal(lazy.row(i), full.states[i])
    assert lazy.format_state(i) == full.format_state(i)
    np.testing.assert_array_equal(lazy.row(-1), full.states[-1])
    with pytest.raises(IndexError):
        lazy.row(full.n_states)
    import pickle

    again = pickle.loads(pickle.dumps(lazy))  # (a Dask worker's copy: the keys, not the decoded columns)
    assert again._columns == {} and again.__dict__["_states"] is None
    np.testing.assert_array_equal(again.column_at(0), full.states[:, 0])
    assert lazy.__dict__["_states"] is None  # none of that decoded every row
    old = ss.DECODE_BLOCK
    ss.DECODE_BLOCK = 7  # several blocks per column
    try:
        np.testing.assert_array_equal(lazy.states, full.states)
    finally:
        ss.DECODE_BLOCK = old
    assert lazy.states.flags.f_contiguous and not lazy.states.flags.writeable
    np.testing.assert_array_equal(lazy.column("x0"), full.states[:, 0])


def test_a_prism_checks_decode_only_the_columns_they_read(tmp_path):
    """A PRISM DTMC's build and checks decode the variables its labels and properties name, not every row."""
    from exactq.api import check_properties
    from exactq.prism import load_prism

    f = tmp_path / "walk.pm"
    f.write_text("dtmc\nmodule m\n  x : [0..20] init 0;\n  y : [0..3] init 0;\n  z : [0..2] init 0;\n"
                 "  [] x<20 -> 0.5 : (x'=x+1) + 0.5 : (y'=mod(y+1, 4));\n  [] x=20 -> (z'=min(z+1, 2));\n"
                 "endmodule\nlabel \"end\" = z=2;\n")
    model = load_prism(f)
    space = model.built.chain.space
    value, = (r.value for r in check_properties(model, 'P=? [ F "end" ]'))
    assert value == 1.0
    assert space.__dict__["_states"] is None and set(space._columns) == {2}  # z, for the label
    y3, = (r.value for r in check_properties(model, "P=? [ F y=3 & x=20 ]"))
    assert space.__dict__["_states"] is None and set(space._columns) == {0, 1, 2}
    assert 0 < y3 < 1
    np.testing.assert_array_equal(space.states[:, 2], space.column_at(2))  # all the rows, when asked


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(states=[[1, 2]], names=["a"]), ValueError, "2 columns but 1 names"),
        (dict(states=np.zeros((0, 2)), names=["a", "b"]), ValueError, "at least one state"),
        (dict(states=[[5, 5]], names=["a", "b"], lo=[0, 0], hi=[3, 3]), ValueError, "outside the given bounding box"),
        (dict(states=[[0, 0]], names=["a", "b"], hi=[2**62, 0]), NotApplicableError, "more than a state key holds"),
    ],
)
def test_construction_errors(kwargs, exc, match):
    states = kwargs.pop("states")
    names = kwargs.pop("names")
    with pytest.raises(exc, match=match):
        StateSpace(states, names, **kwargs)


# ---------------------------------------------------------------------------------
# explore: the reachable set, against networkx on a hand-built graph
# ---------------------------------------------------------------------------------
def _make_event(jump, cond_var, modulus, residue, rate):
    jump = np.asarray(jump, dtype=np.int64)

    def fn(s):
        on = (s[:, cond_var] % modulus) != residue
        return rate * on.astype(float), s + jump

    return Event(f"jump{tuple(jump.tolist())}", fn)


event_spec = st.tuples(
    st.tuples(st.integers(-2, 2), st.integers(-2, 2)),  # jump
    st.integers(0, 1),  # variable in the condition
    st.integers(2, 3),  # modulus
    st.integers(0, 3),  # residue (>= modulus: always on)
    st.sampled_from([0.0, 0.5, 2.0]),  # rate (0: the event never fires)
)


def _reference_reachable(initial, events, hi):
    """Hand-built transition graph on the box, one state at a time, and a BFS."""
    g = nx.DiGraph()
    box = list(itertools.product(range(hi[0] + 1), range(hi[1] + 1)))
    g.add_nodes_from(box)
    for x in box:
        row = np.array([x], dtype=np.int64)
        for ev in events:
            rate, target = ev.fn(row)
            t = tuple(int(v) for v in np.asarray(target)[0])
            if float(np.asarray(rate).ravel()[0]) > 0 and all(0 <= t[k] <= hi[k] for k in range(2)):
                g.add_edge(x, t)
    reached = set()
    for s in initial:
        reached |= {s} | nx.descendants(g, s)
    return reached


@FAST
@given(
    specs=st.lists(event_spec, min_size=1, max_size=4),
    hi=st.tuples(st.integers(0, 7), st.integers(0, 7)),
    start=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=2),
)
def test_explore_reaches_exactly_the_reachable_set(specs, hi, start):
    events = [_make_event(*spec) for spec in specs]
    start = sorted({(min(a, hi[0]), min(b, hi[1])) for a, b in start})
    space = explore(np.array(start), events, ["x", "y"], hi=list(hi))
    expected = _reference_reachable(start, events, hi)
    assert {tuple(r) for r in space.states.tolist()} == expected
    assert space.n_states == len(expected)
    # the result is a proper, indexable state space over the exploration box
    assert np.array_equal(space.index(space.states), np.arange(space.n_states))
    assert space.lo.tolist() == [0, 0] and space.hi.tolist() == list(hi)


def test_explore_finds_a_parity_constrained_set():
    # x += 2, or move one unit from x to y: x + 2y stays even, so half of the box is unreachable
    events = [
        Event("a", lambda s: (np.ones(len(s)), s + [2, 0])),
        Event("b", lambda s: ((s[:, 0] > 0).astype(float), s + [-1, 1])),
    ]
    space = explore([0, 0], events, ["x", "y"], hi=[5, 5])
    assert not space.is_box
    got = {tuple(r) for r in space.states.tolist()}
    assert got == {(x, y) for x in range(6) for y in range(6) if (x + y) % 2 == 0}
    assert got == _reference_reachable([(0, 0)], events, (5, 5))


def test_explore_with_lower_corner_and_several_initial_states():
    events = [Event("up", lambda s: (np.ones(len(s)), s + 1))]
    space = explore([[-3], [5]], events, ["n"], lo=[-3], hi=[6])
    assert space.states.ravel().tolist() == [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6]


def test_explore_refuses_to_grow_beyond_max_states():
    events = [
        Event("r", lambda s: (np.ones(len(s)), s + [1, 0])),
        Event("u", lambda s: (np.ones(len(s)), s + [0, 1])),
    ]
    with pytest.raises(TruncationError, match="max_states=50"):
        explore([0, 0], events, ["x", "y"], hi=[20, 20], max_states=50)
    assert explore([0, 0], events, ["x", "y"], hi=[20, 20], max_states=441).n_states == 441


def test_explore_initial_state_outside_the_box_is_an_error():
    with pytest.raises(ValueError):
        explore([9, 0], [], ["x", "y"], hi=[5, 5])


# -- sorted spaces (queue-length multisets per server class) ---------------------------------


@pytest.mark.parametrize("size,level", [(1, 4), (2, 3), (3, 5), (4, 2), (5, 1)])
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_sorted_space_holds_every_multiset_in_rank_order(size, level, order):
    s = SortedSpace([size], level=level, order=order)
    ref = sorted(tuple(sorted(c, reverse=order == "descending"))
                 for c in itertools.combinations_with_replacement(range(level + 1), size))
    assert sorted(map(tuple, s.states.tolist())) == ref
    assert s.n_states == math.comb(level + size, size)
    assert np.array_equal(s.index(s.states), np.arange(s.n_states))
    asc = s.states if order == "ascending" else s.states[:, ::-1]
    assert np.array_equal(colex_rank(asc), np.arange(s.n_states))  # the index is the colex rank


def test_sorted_space_rejects_unsorted_and_out_of_range_rows():
    s = SortedSpace([3], level=2, order="descending")
    rows = np.array([[0, 1, 0], [3, 0, 0], [2, 2, -1], [2, 2, 2]])
    assert s.index(rows).tolist() == [-1, -1, -1, math.comb(5, 3) - 1]


def test_sorted_space_product_over_classes_round_trip_and_size():
    s = SortedSpace([3, 2], level=4, order="descending")
    assert s.n_states == math.comb(7, 3) * math.comb(6, 2)
    assert np.array_equal(s.index(s.states), np.arange(s.n_states))
    assert s.index(np.array([[0, 1, 0, 0, 0], [5, 0, 0, 0, 0]])).tolist() == [-1, -1]
    assert s.format_state(s.n_states - 1) == "(class1=[4, 4, 4], class2=[4, 4])"
    with pytest.raises(NotApplicableError, match="above the limit"):
        SortedSpace([10, 10], level=30, max_states=1_000_000)


def test_sorted_space_subset_keeps_the_given_order():
    full = SortedSpace([3], level=4)
    keep = full.states[full.states.sum(axis=1) <= 5]
    order = np.lexsort((colex_rank(keep), keep.sum(axis=1)))  # by total, as level aggregation needs
    sub = SortedSpace([3], states=keep[order])
    assert np.array_equal(sub.index(sub.states), np.arange(sub.n_states))
    assert np.all(np.diff(sub.states.sum(axis=1)) >= 0)
    assert sub.index([[0, 0, 6], [0, 2, 1], [1, 2, 3]]).tolist() == [-1, -1, -1]
    with pytest.raises(ValueError, match="duplicate"):
        SortedSpace([3], states=np.vstack([keep, keep[:1]]))
