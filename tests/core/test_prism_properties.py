"""PRISM's property forms, checked on small chains against matrix exponentials and linear algebra.

Every value is computed a second, independent way: ``scipy.linalg.expm`` (of the
generator, made absorbing where the semantics says so, or of an augmented matrix for
the accumulated reward), ``numpy.linalg.solve`` for reachability and expected
rewards, matrix powers for a DTMC, or a closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

import exactq
from exactq.api import check_properties
from exactq.prism import PrismModelError, load_prism

BIRTH_DEATH = """ctmc
// a birth-death chain on 0..4 (up 1.5, down 2 per job), with a reward and labels
const double up = 1.5;
const double down = 2;
module q
  n : [0..4] init 1;
  [arrive] n < 4 -> up : (n'=n+1);
  [leave] n > 0 -> down * n : (n'=n-1);
endmodule
label "full" = n = 4;
label "empty" = n = 0;
rewards "jobs" true : n; endrewards
rewards "arrivals" [arrive] true : 1; endrewards
rewards "mixed" n > 1 : 0.5; [leave] n = 1 : 3; [arrive] true : n; endrewards
"""
UP, DOWN = 1.5, 2.0


@pytest.fixture(scope="module")
def bd():
    m = load_prism("bd.sm", text=BIRTH_DEATH)
    Q = m.built.chain.Q.toarray()
    return m, Q


def value(model, prop):
    return check_properties(model, prop)[0].value


def absorbing(Q, mask):
    A = Q.copy()
    A[np.asarray(mask)] = 0.0
    return A


def test_steady_state_and_rewards_against_the_product_form(bd):
    m, Q = bd
    k = np.arange(5)
    w = np.array([UP**j / (math.factorial(j) * DOWN**j) for j in k])
    pi = w / w.sum()
    assert value(m, 'S=? [ "full" ]') == pytest.approx(pi[4], rel=1e-12)
    assert value(m, 'R{"jobs"}=? [ S ]') == pytest.approx(pi @ k, rel=1e-12)
    assert value(m, "R=? [ S ]") == pytest.approx(pi @ k, rel=1e-12)  # the first structure
    assert value(m, 'R{"arrivals"}=? [ S ]') == pytest.approx(UP * (1 - pi[4]), rel=1e-12)
    mixed_rate = 0.5 * (k > 1) + 3 * DOWN * (k == 1) + UP * k * (k < 4)
    assert value(m, 'R{"mixed"}=? [ S ]') == pytest.approx(pi @ mixed_rate, rel=1e-12)
    assert value(m, "E=? [ n * n ]") == pytest.approx(pi @ k**2, rel=1e-12)


@pytest.mark.parametrize("t", [0.0, 0.3, 2.0])
def test_time_bounded_until_forms_against_expm(bd, t):
    m, Q = bd
    k = np.arange(5)
    full = k == 4
    E = scipy.linalg.expm(absorbing(Q, full) * t)
    assert value(m, f'P=? [ F<={t} "full" ]') == pytest.approx(E[1, 4], abs=1e-12)
    assert value(m, f'P=? [ F<{t} "full" ]') == pytest.approx(E[1, 4], abs=1e-12)  # same in continuous time
    # n >= 1 U<=t full: the empty state is a failure
    E = scipy.linalg.expm(absorbing(Q, full | (k == 0)) * t)
    assert value(m, f'P=? [ n >= 1 U<={t} "full" ]') == pytest.approx(E[1, 4], abs=1e-12)
    # G<=t !full = 1 - F<=t full
    E = scipy.linalg.expm(absorbing(Q, full) * t)
    assert value(m, f'P=? [ G<={t} !"full" ]') == pytest.approx(1 - E[1, 4], abs=1e-12)


def test_interval_and_lower_bounds_against_expm(bd):
    m, Q = bd
    k = np.arange(5)
    full = k == 4
    t1, t2 = 0.4, 1.1
    # F[t1,t2] full: anywhere until t1, then reach full within t2 - t1
    second = scipy.linalg.expm(absorbing(Q, full) * (t2 - t1))[:, 4]
    expected = scipy.linalg.expm(Q * t1)[1] @ second
    assert value(m, f'P=? [ F[{t1},{t2}] "full" ]') == pytest.approx(expected, abs=1e-12)
    # a U[t1,t2] b with a = n <= 3: the first phase kills the paths that leave a (here: reach full)
    a = k <= 3
    second = scipy.linalg.expm(absorbing(Q, full | ~a) * (t2 - t1))[:, 4]
    first = scipy.linalg.expm(absorbing(Q, ~a) * t1)[1]
    assert value(m, f'P=? [ n <= 3 U[{t1},{t2}] "full" ]') == pytest.approx(first @ (second * a), abs=1e-12)
    # F>=t full: the chain is irreducible, so full is reached after t with probability 1
    assert value(m, 'P=? [ F>=0.7 "full" ]') == pytest.approx(1.0, abs=1e-12)
    # G[t1,t2] !full = 1 - F[t1,t2] full
    assert value(m, f'P=? [ G[{t1},{t2}] !"full" ]') == pytest.approx(
        1 - value(m, f'P=? [ F[{t1},{t2}] "full" ]'), abs=1e-14)
    with pytest.raises(PrismModelError, match="interval"):
        value(m, 'P=? [ F[2,1] "full" ]')


def test_unbounded_until_next_and_expected_values_against_linear_algebra(bd):
    m, Q = bd
    k = np.arange(5)
    # n >= 1 U full from n = 1: gambler's ruin on the embedded chain
    T = [1, 2, 3]
    A = -Q[np.ix_(T, T)]
    b = Q[T, 4]
    x = np.linalg.solve(A, b)
    assert value(m, 'P=? [ n >= 1 U "full" ]') == pytest.approx(x[0], rel=1e-12)
    assert value(m, 'P=? [ F "full" ]') == pytest.approx(1.0, abs=1e-14)
    # X full from n = 1: jump probability 0 (the neighbours are 0 and 2)
    assert value(m, 'P=? [ X n = 2 ]') == pytest.approx(UP / (UP + DOWN), rel=1e-12)
    # R{"jobs"}=? [ F full ]: -Q_SS x = r_S on the non-target states
    S = [0, 1, 2, 3]
    x = np.linalg.solve(-Q[np.ix_(S, S)], k[S].astype(float))
    assert value(m, 'R{"jobs"}=? [ F "full" ]') == pytest.approx(x[1], rel=1e-12)
    x = np.linalg.solve(-Q[np.ix_(S, S)], np.ones(4))
    assert value(m, 'T=? [ F "full" ]') == pytest.approx(x[1], rel=1e-12)
    # transition rewards count in F: the expected number of arrivals before full
    rate = UP * (k < 4)
    x = np.linalg.solve(-Q[np.ix_(S, S)], rate[S])
    assert value(m, 'R{"arrivals"}=? [ F "full" ]') == pytest.approx(x[1], rel=1e-12)


def test_cumulative_and_instantaneous_rewards_against_expm(bd):
    m, Q = bd
    k = np.arange(5, dtype=float)
    t = 1.7
    # C<=t: the integral of exp(Q u) r over [0, t], from the augmented matrix [[Q, r], [0, 0]]
    rate = k
    aug = np.zeros((6, 6))
    aug[:5, :5], aug[:5, 5] = Q, rate
    assert value(m, f'R{{"jobs"}}=? [ C<={t} ]') == pytest.approx(scipy.linalg.expm(aug * t)[1, 5], rel=1e-11)
    # C<=t counts the transition rewards (rate times reward); I=t does not
    mixed_state = 0.5 * (k > 1)
    mixed_rate = mixed_state + 3 * DOWN * (k == 1) + UP * k * (k < 4)
    aug[:5, 5] = mixed_rate
    assert value(m, f'R{{"mixed"}}=? [ C<={t} ]') == pytest.approx(scipy.linalg.expm(aug * t)[1, 5], rel=1e-11)
    E = scipy.linalg.expm(Q * t)
    assert value(m, f'R{{"mixed"}}=? [ I={t} ]') == pytest.approx(E[1] @ mixed_state, rel=1e-11)
    assert value(m, f'R{{"jobs"}}=? [ I={t} ]') == pytest.approx(E[1] @ k, rel=1e-11)


def test_an_infinite_expected_reward_says_so():
    text = """ctmc
module m s : [0..2];
  [] s = 0 -> 1 : (s'=1) + 1 : (s'=2);
  [] s = 1 -> 1 : (s'=0);
  [] s = 2 -> 1 : true;   // a trap that never reaches s = 1 again
endmodule
rewards "r" true : 1; endrewards
"""
    m = load_prism("trap.sm", text=text)
    r, = check_properties(m, 'R{"r"}=? [ F s = 1 ]')
    assert math.isinf(r.value) and "probability < 1" in r.info["infinite"]
    assert r.to_dict()["value"] == "inf"
    assert value(m, "P=? [ F s = 1 ]") == pytest.approx(0.5, rel=1e-14)


def test_time_bounds_are_constant_expressions_and_properties_files_declare_constants(bd):
    m, Q = bd
    props = """// a properties file
const double T;
const int k = 2;
"half": P=? [ F<=T/2 n = k ];
label "big" = n >= 3;
P=? [ F<=T "big" ]
"""
    m2 = load_prism("bd.sm", "T=1.2", text=BIRTH_DEATH)
    a, b = check_properties(m2, props, source_name="bd.props")
    assert a.info["property_name"] == "half"
    E = scipy.linalg.expm(absorbing(Q, np.arange(5) == 2) * 0.6)
    assert a.value == pytest.approx(E[1, 2], abs=1e-12)
    big = np.arange(5) >= 3
    E = scipy.linalg.expm(absorbing(Q, big) * 1.2)
    assert b.value == pytest.approx(E[1, big].sum(), abs=1e-12)
    with pytest.raises(PrismModelError, match="line 4, column 18: constant 'T' has no value; give it with --const T=VALUE"):
        check_properties(m, props, source_name="bd.props")
    with pytest.raises(PrismModelError, match="no constant of the model or of the properties, and no property, uses the name 'X'"):
        check_properties(load_prism("bd.sm", "X=3", text=BIRTH_DEATH), 'S=? [ "full" ]')


def test_filters(bd):
    m, Q = bd
    t = 0.8
    E = scipy.linalg.expm(absorbing(Q, np.arange(5) == 4) * t)
    per_state = E[:, 4]
    assert value(m, f'filter(max, P=? [ F<={t} "full" ])') == pytest.approx(per_state.max(), abs=1e-12)
    assert value(m, f'filter(min, P=? [ F<={t} "full" ], n < 4)') == pytest.approx(per_state[:4].min(), abs=1e-12)
    assert value(m, f'filter(avg, P=? [ F<={t} "full" ])') == pytest.approx(per_state.mean(), abs=1e-12)
    assert value(m, f'filter(+, P=? [ F<={t} "full" ], n <= 1)') == pytest.approx(per_state[:2].sum(), abs=1e-12)
    assert value(m, f'filter(state, P=? [ F<={t} "full" ], n = 3)') == pytest.approx(per_state[3], abs=1e-12)
    assert value(m, f'filter(range, P=? [ F<={t} "full" ], n >= 2)') == pytest.approx(
        [per_state[2:].min(), per_state[2:].max()], abs=1e-12)
    assert value(m, f'P=? [ F<={t} "full" {{n = 2}} ]') == pytest.approx(per_state[2], abs=1e-12)  # old style
    assert value(m, f'P=? [ F<={t} "full" {{n >= 1}}{{max}} ]') == pytest.approx(per_state[1:].max(), abs=1e-12)
    with pytest.raises(exactq.ModelError, match="exactly one state; 5 satisfy"):
        value(m, f'filter(state, P=? [ F<={t} "full" ])')
    assert value(m, 'filter(first, S=? [ "full" ], "init")') == pytest.approx(value(m, 'S=? [ "full" ]'))


def test_a_dtmc_counts_steps():
    text = """dtmc
module w k : [0..3] init 0;
  [] k < 3 -> 0.5 : (k'=k+1) + 0.5 : (k'=max(k-1, 0));
  [] k = 3 -> 1 : (k'=3);
endmodule
rewards "steps" k < 3 : 1; endrewards
rewards "pos" true : k; endrewards
"""
    m = load_prism("w.pm", text=text)
    P = m.built.chain.P.toarray()
    top = np.arange(4) == 3
    for n in (0, 1, 4, 7):
        Pn = np.linalg.matrix_power(P, n)
        assert value(m, f"P=? [ F<={n} k = 3 ]") == pytest.approx(Pn[0, 3], abs=1e-14)
        assert value(m, f'R{{"pos"}}=? [ I={n} ]') == pytest.approx(Pn[0] @ np.arange(4), abs=1e-13)
        cum = sum(np.linalg.matrix_power(P, i)[0] @ (np.arange(4) < 3) for i in range(n))
        assert value(m, f'R{{"steps"}}=? [ C<={n} ]') == pytest.approx(cum, abs=1e-13)
    # F<k is F<=k-1 in steps, F>k is F>=k+1
    assert value(m, "P=? [ F<4 k = 3 ]") == pytest.approx(value(m, "P=? [ F<=3 k = 3 ]"), abs=1e-15)
    # F[2,5] k = 3 from 0: reach 3 at a step in 2..5 (3 absorbs, so this is F<=5)
    assert value(m, "P=? [ F[2,5] k = 3 ]") == pytest.approx(np.linalg.matrix_power(P, 5)[0, 3], abs=1e-14)
    # k <= 1 U[2,4] k >= 2: at steps 0, 1 stay <= 1, then reach >= 2 by step 4 through k <= 1
    low = np.arange(4) <= 1
    A = P.copy()
    A[~low] = 0
    A[~low, np.flatnonzero(~low)] = 1  # targets absorb in the second phase
    second = np.linalg.matrix_power(A, 2)[:, ~low].sum(axis=1)
    K = P * low[:, None]
    first = np.linalg.matrix_power(K, 2)[0]
    assert value(m, "P=? [ k <= 1 U[2,4] k >= 2 ]") == pytest.approx(first @ second, abs=1e-14)
    # expected steps to the top: 1 + ... by the linear system
    S = [0, 1, 2]
    x = np.linalg.solve(np.eye(3) - P[np.ix_(S, S)], np.ones(3))
    assert value(m, 'R{"steps"}=? [ F k = 3 ]') == pytest.approx(x[0], rel=1e-12)
    assert value(m, "T=? [ F k = 3 ]") == pytest.approx(x[0], rel=1e-12)
    assert value(m, "P=? [ X k = 1 ]") == pytest.approx(0.5, rel=1e-15)
    assert top.sum() == 1
