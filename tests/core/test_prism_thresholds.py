"""PRISM's threshold operators, nested operators, arithmetic over queries, W and R, total reward, every filter.

Each value is checked against a second computation on the same generator: matrix
exponentials (``scipy.linalg.expm``), dense linear solves, matrix powers, or a closed
form; true/false answers against the definition evaluated on those values, and the
exact 0/1 cases against cases where rounding makes the numbers lie.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from exactq.api import check_properties
from exactq.errors import AccuracyWarning
from exactq.prism import PrismModelError, PrismUnsupportedError, load_prism

FILES = Path(__file__).resolve().parents[1] / "prism"


@pytest.fixture(scope="module")
def bd():
    m = load_prism(FILES / "bd.sm")
    chain = m.built.chain
    Q = chain.Q.toarray()
    names = list(chain.space.names)
    n = chain.states[:, names.index("n")]
    b = chain.states[:, names.index("b")].astype(bool)
    return m, Q, n, b, int(chain.initial)


def values(model, props):
    return [r.value for r in check_properties(model, "\n".join(props))]


def value(model, prop):
    return check_properties(model, prop)[0].value


def absorbing(Q, mask):
    A = Q.copy()
    A[np.asarray(mask)] = 0.0
    return A


def reach(Q, left, right):
    """P(left U right) by a dense solve on the states that can still go either way."""
    n = Q.shape[0]
    x = right.astype(float)
    # states with a path to right through left, not yet in right
    can = right.copy()
    for _ in range(n):
        can = can | (left & ((Q > 0) @ can.astype(float) > 0))
    maybe = can & ~right & left
    idx = np.flatnonzero(maybe)
    if idx.size:
        A = -Q[np.ix_(idx, idx)]
        rhs = Q[np.ix_(idx, np.flatnonzero(right))].sum(axis=1)
        x[idx] = np.linalg.solve(A, rhs)
    return x


def test_thresholds_are_true_or_false_and_match_the_values(bd):
    m, Q, n, b, s0 = bd
    full = n == 4
    t = 1.5
    p = scipy.linalg.expm(absorbing(Q, full) * t)[:, full].sum(axis=1)
    got = values(m, [f'P>=0.5 [ F<={t} "full" ]', f'P<0.5 [ F<={t} "full" ]', f'P>0.01 [ F<={t} "full" ]',
                     f'P<=0.01 [ F<={t} "full" ]'])
    assert got == [bool(p[s0] >= 0.5), bool(p[s0] < 0.5), bool(p[s0] > 0.01), bool(p[s0] <= 0.01)]
    assert all(isinstance(v, bool) for v in got)
    # the steady-state threshold: the flag set for good puts the chain in the b=true class
    k = np.arange(5)
    w = np.array([1.5**j / (math.factorial(j) * 2.0**j) for j in k])
    pi_full = w[4] / w.sum()
    assert values(m, [f'S<{pi_full * 1.01} [ "full" ]', f'S>{pi_full * 1.01} [ "full" ]']) == [True, False]
    # reward thresholds, with the value from expm of the augmented matrix
    aug = np.zeros((Q.shape[0] + 1, Q.shape[0] + 1))
    aug[:-1, :-1], aug[:-1, -1] = Q, n
    c = scipy.linalg.expm(aug * 1.0)[s0, -1]
    assert values(m, [f'R{{"jobs"}}<={c * 1.001} [ C<=1 ]', f'R{{"jobs"}}>{c * 1.001} [ C<=1 ]']) == [True, False]
    with pytest.raises(PrismModelError, match=r"the probability bound must be in \[0, 1\]; got 1.5 = 1.5"):
        value(m, 'P>=1.5 [ F "full" ]')


def test_probability_one_and_zero_are_decided_by_the_graph_not_by_rounding():
    m = load_prism(FILES / "tenths.pm")
    P = m.built.chain.P.toarray()
    # ten updates of 0.1: the event is sure, its floating-point sum is not 1
    assert value(m, 'P=? [ F<=1 "done" ]') == pytest.approx(1.0, abs=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)  # decided by the graph: nothing to warn about
        assert values(m, ['P>=1 [ F<=1 "done" ]', 'P<1 [ F<=1 "done" ]', 'P>=1 [ F "done" ]']) == [True, False, True]
        # the ladder's top is reached with probability 1e-400: 0.0 in floating point, positive all the same
        assert value(m, 'P=? [ F "top" ]') == 0.0
        assert values(m, ['P>0 [ F "top" ]', 'P<=0 [ F "top" ]', 'P>0 [ F<=402 "top" ]',
                          'P>0 [ F<=401 "top" ]']) == [True, False, True, False]
    # independently: the top is 402 steps away (1 + 1 + 400) on the transition graph
    from scipy.sparse.csgraph import shortest_path

    dist = shortest_path(m.built.chain.P, unweighted=True, indices=int(m.built.chain.initial))
    assert dist[m.built.chain.labels["top"]].min() == 402
    assert sum(P[0, 1:11].tolist()) != 1.0  # the rounding the graph analysis must not be fooled by


def test_a_comparison_within_the_error_of_the_bound_warns(bd):
    m, Q, n, b, s0 = bd
    p = value(m, 'P=? [ F<=1 "full" ]')
    with pytest.warns(AccuracyWarning, match="within its error"):
        r, = check_properties(m, f'P>={p * (1 + 1e-14)} [ F<=1 "full" ]')
    assert r.value is False or r.value is True


def test_nested_operators_are_evaluated_per_state_bottom_up(bd):
    m, Q, n, b, s0 = bd
    full = n == 4
    inner = scipy.linalg.expm(absorbing(Q, full) * 0.5)[:, full].sum(axis=1)
    good = inner > 0.3
    assert good.any() and not good.all()
    outer = reach(Q, np.ones(len(n), dtype=bool), good)
    assert value(m, 'P=? [ F P>0.3 [ F<=0.5 "full" ] ]') == pytest.approx(outer[s0], rel=1e-12)
    # a nested steady-state operator inside a filter, and a nested filter inside an expression
    assert value(m, 'filter(forall, P>=1 [ F "empty" ], !b)') is True
    assert value(m, 'filter(count, P>0.3 [ F<=0.5 "full" ])') == int(good.sum())
    assert value(m, 'filter(count, P>0.3 [ F<=0.5 "full" ]) / 2') == pytest.approx(good.sum() / 2)
    # per-state nesting under until: n < 3 U (P>0.3 [...])
    assert value(m, 'P=? [ n < 3 U P>0.3 [ F<=0.5 "full" ] ]') == pytest.approx(
        reach(Q, n < 3, good)[s0], rel=1e-12)


def test_arithmetic_over_numerical_queries(bd):
    m, Q, n, b, s0 = bd
    full = n == 4
    p = scipy.linalg.expm(absorbing(Q, full) * 1.0)[s0, full].sum()
    r = check_properties(m, '1 - P=? [ F<=1 "full" ]')[0]
    assert r.value == pytest.approx(1 - p, abs=1e-12) and r.method == "query/formula"
    assert [part["method"] for part in r.info["parts"]] == ["query/uniformisation"]
    jobs, arrivals = values(m, ['R{"jobs"}=? [ S ]', 'R{"arrivals"}=? [ S ]'])
    assert value(m, 'R{"jobs"}=? [ S ] + R{"arrivals"}=? [ S ]') == pytest.approx(jobs + arrivals, rel=1e-14)
    s_full = value(m, 'S=? [ "full" ]')
    assert value(m, 'P=? [ F<=1 "full" ] / S=? [ "full" ]') == pytest.approx(p / s_full, rel=1e-11)
    assert value(m, 'P=? [ F<=1 "full" ] > 0.5 | S=? [ "full" ] < 1') is True


def test_weak_until_release_and_unbounded_globally_against_their_definitions(bd):
    m, Q, n, b, s0 = bd
    N = len(n)
    a, target = n < 3, n == 4
    # a W b = (a U b) | G a; here G a has probability 0 (the chain is never stuck in a), so W = U
    assert value(m, 'P=? [ n<3 W "full" ]') == pytest.approx(reach(Q, a, target)[s0], abs=1e-14)
    # a W<=t b = 1 - P((a & !b) U<=t (!a & !b))
    bad = ~a & ~target
    E = scipy.linalg.expm(absorbing(Q, bad | ~(a & ~target)) * 2.0)
    assert value(m, 'P=? [ n<3 W<=2 "full" ]') == pytest.approx(1 - E[s0, bad].sum(), abs=1e-12)
    # a R b = 1 - P(!a U !b): "empty" R n<4, the chain stays below 4 until (and when) it empties
    notb = ~(n < 4)
    E = scipy.linalg.expm(absorbing(Q, notb | (n == 0)) * 1.0)
    assert value(m, 'P=? [ "empty" R<=1 n<4 ]') == pytest.approx(1 - E[s0, notb].sum(), abs=1e-12)
    assert value(m, 'P=? [ "empty" R n<4 ]') == pytest.approx(1 - reach(Q, n != 0, notb)[s0], rel=1e-12)
    # G b unbounded: the flag is false at the start, so G b fails; G !"full" fails as full is reached surely
    assert values(m, ['P=? [ G b ]', 'P=? [ G !"full" ]', 'P=? [ G true ]']) == [0.0, 0.0, 1.0]
    assert N == 10


def test_total_reward_is_finite_only_where_the_reward_stops(bd):
    m, Q, n, b, s0 = bd
    # until_flag earns 1 per unit time while b is false: the expected time to set the flag
    idx = np.flatnonzero(~b)
    t = np.linalg.solve(-Q[np.ix_(idx, idx)], np.ones(idx.size))
    r = check_properties(m, 'R{"until_flag"}=? [ C ]')[0]
    assert r.value == pytest.approx(t[list(idx).index(s0)], rel=1e-12)
    assert value(m, 'R{"until_flag"}=? [ F b ]') == pytest.approx(r.value, rel=1e-12)
    # jobs are earned for ever in the closed class b=true: infinite, and said so
    r = check_properties(m, 'R{"jobs"}=? [ C ]')[0]
    assert math.isinf(r.value) and "infinite" in r.info["infinite"]


def test_lra_and_reward_lra_are_the_steady_state(bd):
    m, Q, n, b, s0 = bd
    assert values(m, ['LRA=? [ "full" ]', 'R{"jobs"}=? [ LRA ]']) == pytest.approx(
        values(m, ['S=? [ "full" ]', 'R{"jobs"}=? [ S ]']), rel=1e-15)


def test_every_filter_operator_against_the_per_state_values(bd):
    m, Q, n, b, s0 = bd
    full = n == 4
    per = scipy.linalg.expm(absorbing(Q, full) * 0.8)[:, full].sum(axis=1)
    low = n < 3
    prop = 'P=? [ F<=0.8 "full" ]'
    got = values(m, [f"filter(min, {prop}, n<3)", f"filter(max, {prop}, n<3)", f"filter(sum, {prop}, n<3)",
                     f"filter(+, {prop}, n<3)", f"filter(avg, {prop}, n<3)", f"filter(first, {prop}, n<3)",
                     f"filter(range, {prop}, n<3)", f"filter(state, {prop}, n=2 & !b)",
                     f'filter(count, P>0.1 [ F<=0.8 "full" ])', f'filter(forall, P>0.001 [ F<=0.8 "full" ])',
                     f'filter(exists, P>0.99 [ F<=0.8 "full" ], n<3)', f'filter(&, P>0.001 [ F<=0.8 "full" ])',
                     f'filter(|, P>0.99 [ F<=0.8 "full" ])'])
    sel = per[low]
    first = per[np.flatnonzero(low)[0]]
    two = per[(n == 2) & ~b][0]
    expected = [sel.min(), sel.max(), sel.sum(), sel.sum(), sel.mean(), first, [sel.min(), sel.max()], two,
                int((per > 0.1).sum()), bool((per > 0.001).all()), bool((per[low] > 0.99).any()),
                bool((per > 0.001).all()), bool((per > 0.99).any())]
    for g, e in zip(got, expected):
        assert g == pytest.approx(e, rel=1e-11, abs=1e-14)
    # argmin/argmax list their states; the value is PRISM's default over them (forall over the initial state)
    r = check_properties(m, f"filter(argmax, {prop}, n<4)")[0]
    best = np.flatnonzero((per == per[n < 4].max()) & (n < 4))
    assert r.info["states"] == [f"(n={int(n[i])},b={'true' if b[i] else 'false'})" for i in best]
    assert r.value is bool(s0 in best)
    r = check_properties(m, f"filter(print, {prop}, n>=3)")[0]
    shown = [i for i in range(len(n)) if n[i] >= 3 and per[i] != 0]
    assert [s for s, _ in r.info["printed"]] == [f"(n={int(n[i])},b={'true' if b[i] else 'false'})" for i in shown]
    assert [v for _, v in r.info["printed"]] == pytest.approx([per[i] for i in shown], abs=1e-12)
    assert r.value == pytest.approx(per[s0], abs=1e-12)
    assert len(check_properties(m, f"filter(printall, {prop})")[0].info["printed"]) == len(n)
    with pytest.raises(PrismModelError, match="filter count needs a true/false property"):
        value(m, f"filter(count, {prop})")
    with pytest.raises(PrismModelError, match="range.*cannot be used inside an expression"):
        value(m, f"1 + filter(range, {prop})")


def test_property_references_and_constants_only_the_property_uses(bd):
    m, Q, n, b, s0 = bd
    props = '''"p": P=? [ F<=T "full" ];
"q": 1 - "p";
"q"
"p" > 0.5
'''
    full = n == 4
    p = scipy.linalg.expm(absorbing(Q, full) * 0.7)[s0, full].sum()
    got = [r.value for r in check_properties(m, props, constants={"T": "0.7"})]
    assert got == pytest.approx([p, 1 - p, 1 - p, p > 0.5], abs=1e-12)
    with pytest.raises(PrismModelError, match=r'refers to itself \(b -> a -> b\)'):
        value(m, '"a": 1 - "b";\n"b": "a" + 1;\n"a"')
    with pytest.raises(PrismModelError, match="unknown identifier 'T'.*--const T=VALUE"):
        value(m, 'P=? [ F<=T "full" ]')


def test_time_bounds_followed_by_a_parenthesised_operand(bd):
    m, Q, n, b, s0 = bd
    got = [r.value for r in check_properties(m, 'P=? [ F<=T (n=4) ]\nP=? [ n<4 U<=T (n=4) ]\nP=? [ F<=T*2 ("full") ]',
                                              constants={"T": "0.6"})]
    full = n == 4
    E = scipy.linalg.expm(absorbing(Q, full) * 0.6)
    assert got[:2] == pytest.approx([E[s0, full].sum()] * 2, abs=1e-12)
    assert got[2] == pytest.approx(scipy.linalg.expm(absorbing(Q, full) * 1.2)[s0, full].sum(), abs=1e-12)
    with pytest.raises(Exception, match="unknown function 'foo'"):
        value(m, "S=? [ foo(n) > 1 ]")


def test_dtmc_thresholds_and_step_bounds_against_matrix_powers():
    m = load_prism(FILES / "walk.pm")
    P = m.built.chain.P.toarray()
    k = m.built.chain.states[:, 0]
    top = k == 4
    A = P.copy()
    A[top] = 0
    A[top, np.flatnonzero(top)] = 1
    for steps in (3, 4, 9):
        p = np.linalg.matrix_power(A, steps)[0, top].sum()
        assert value(m, f'P=? [ F<={steps} "top" ]') == pytest.approx(p, abs=1e-14)
        assert value(m, f'P>0 [ F<={steps} "top" ]') is bool(p > 0)
    assert values(m, ['P>=1 [ F "top" ]', 'P>=1 [ X k=1 ]', 'P>0 [ X k=2 ]']) == [True, True, False]


def test_constructs_outside_the_fragment_name_themselves(bd):
    m = bd[0]
    for prop, words in [("Pmin=? [ F n=4 ]", "'Pmin'"), ("P=? [ F G n=4 ]", "(LTL)"),
                        ("P=? [ X<=1 n=4 ]", "a bound on 'X'"), ("multi(P>=0.1 [ F n=4 ])", "multi-objective")]:
        pattern = r"column \d+: .*" + words.replace("(", r"\(").replace(")", r"\)")
        with pytest.raises(PrismUnsupportedError, match=pattern):
            value(m, prop)
