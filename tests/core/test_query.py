"""Tests of exactq.query (the CSL-style language) and exactq.solvers.csl (checking it on a chain)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from exactq.errors import ModelError, NotApplicableError, QuerySyntaxError
from exactq.ctmc import CTMC
from exactq.query import (
    TRUE,
    ExpectedTime,
    SteadyExpectation,
    SteadyProbability,
    Until,
    parse_query,
)
from exactq.result import Result
from exactq.solvers.csl import check_chain
from exactq.statespace import StateSpace


def check(chain, query, **kw):
    return check_chain(chain, query, **kw).result


def chain_of(Q, name, *, labels=None, constants=None, initial=0):
    """A CTMC on states 0..n-1 of one variable ``name`` from a generator."""
    Q = sp.csr_matrix(Q, dtype=float)
    n = Q.shape[0]
    return CTMC(space=StateSpace(np.arange(n)[:, None], [name]), Q=Q, cut_rate=np.zeros(n),
                jumps=np.ones(1, np.int64), labels=labels or {}, constants=constants or {}, initial=initial)


def mm1k_chain(lam=1.0, mu=2.0, K=6, initial=0):
    Q = sp.diags_array([np.full(K, mu), np.full(K, lam)], offsets=[-1, 1], shape=(K + 1, K + 1)).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    q = np.arange(K + 1)
    return chain_of(Q, "q", labels={"full": q == K}, constants={"K": K}, initial=initial)


# ----------------------------------------------------------------------------- parsing
def names_chain():
    """A two-state chain with the variables, label and constant the parsing tests name."""
    Q = sp.csr_matrix([[-1.0, 1.0], [2.0, -2.0]])
    states = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [6, 1, 1, 0, 1, 2, 1, 1]])
    space = StateSpace(states, ["q1", "q2", "a", "b", "c", "q", "x", "y"])
    return CTMC(space=space, Q=Q, cut_rate=np.zeros(2), jumps=np.ones(8, np.int64), constants={"K": 6},
                labels={"full": np.array([False, True])})


def test_parse_each_kind():
    chain = names_chain()
    q = parse_query("S=? [ q1 > 5 & q2 = 0 ]").bind(chain)
    assert isinstance(q, SteadyProbability) and q.expr.type == "bool" and q.expr.text == "q1 > 5 & q2 = 0"
    q = parse_query("E=?[q1+q2]").bind(chain)
    assert isinstance(q, SteadyExpectation) and q.expr.on_chain(chain).tolist() == [0, 7]
    q = parse_query("P=? [ F<=10 q1 = K ]").bind(chain)
    assert isinstance(q, Until) and q.time_bound == 10.0 and q.left == TRUE
    q = parse_query("P=? [ a U<=2.5 b ]").bind(chain)
    assert (q.left.text, q.right.text, q.time_bound) == ("a", "b", 2.5)
    q = parse_query("P=? [ (a | c) U (b & !a) ]").bind(chain)
    assert q.time_bound is None and not q.is_bounded and q.left.on_chain(chain).tolist() == [False, True]
    text = "T=? [ F q = 0 ]"
    q = parse_query(text)
    assert q.kind == "expected_time" and str(q) == text
    q = q.bind(chain)
    assert isinstance(q, ExpectedTime) and q.target.on_chain(chain).tolist() == [True, False]
    assert q.kind == "expected_time" and str(q) == text
    # PRISM's forms are native queries too
    assert [parse_query(t).kind for t in ("P>=0.9 [ F q = 0 ]", "P=? [ G<=2 a ]", "P=? [ X a ]", 'R{"r"}=? [ S ]',
                                          "filter(max, P=? [ F a ], b)", "1 - P=? [ F a ]")] == [
        "threshold", "globally", "next", "reward", "filter", "formula"]
    q = parse_query("P=? [ F[1,2.5] full ]").bind(chain)
    assert (q.lower_bound, q.time_bound) == (1.0, 2.5)


def test_parse_whitespace_insensitive_and_equivalences():
    chain = names_chain()
    assert parse_query("P=?[F<=3 x>1]") == parse_query("  P =?  [ F <= 3   x > 1 ]  ")
    assert parse_query("S=? [ q1 == 5 ]") == parse_query("S=? [ q1 = 5 ]")
    f, u = parse_query("P=? [ F b ]").bind(chain), parse_query("P=? [ true U b ]").bind(chain)
    assert f.left == u.left == TRUE and f.time_bound == u.time_bound is None
    assert parse_query("P=? [ F<2 b ]").bind(chain).time_bound == parse_query("P=? [ F<=2 b ]").bind(chain).time_bound
    assert parse_query("P=? [ F<=1e1 b ]").bind(chain).time_bound == 10.0
    assert parse_query("P=? [ F<=K b ]").bind(chain).time_bound == 6.0  # a bound may name the chain's constants
    q = parse_query("S=? [ x ]")
    assert parse_query(q) is q


@pytest.mark.parametrize(
    "text, column, fragment",
    [
        ("X=? [ a ]", 1, "expected one of S=?, E=?, P=?, T=?, R=?, LRA=? (the query operators); got 'X'"),
        ("", 1, "expected one of S=?, E=?, P=?, T=?, R=?, LRA=?, a threshold or filter(...); got end of input"),
        ("S [ a ]", 3, "expected '=?' or a threshold ('>=0.9', '<0.1') after 'S'; got '['"),
        ("S=? a ]", 5, "expected '[' after 'S=?'; got 'a'"),
        ("S=? [ a", 8, "expected ']'"),
        ("S=? [ a ] b", 11, "expected the end of the query after ']'; got 'b'"),
        ("S=? [ ]", 7, "expected an expression after '['; got ']'"),
        ("S=? [ q1 > 5 & ) ]", 16, "expected an expression after '&'; got ')'"),
        ("S=? [ q1 + ]", 12, "expected an expression after '+'; got ']'"),
        ("P=? [ a U<= ]", 13, "expected an expression after '<='; got ']'"),
        ("P=? [ F<=3 ]", 12, "expected an expression after '3'; got ']'"),
        ("P=? [ a ]", 7, "expected a path formula"),
        ("P=? [ U b ]", 7, "expected an expression after '['; got 'U'"),
        ("T=? [ b ]", 7, "expected 'F'"),
        ("T=? [ F<=3 b ]", 8, "T=? takes an unbounded 'F b'"),
        ("E=? [ q1 # 2 ]", 10, "unexpected character '#'"),
        ("S=? [ q1 > 5 // 2 ]", 6, ""),  # '//' is floor division in a native query, not a comment: it parses
    ],
)
def test_syntax_errors(text, column, fragment):
    if not fragment:
        assert parse_query(text).kind == "steady_probability"
        return
    with pytest.raises(QuerySyntaxError) as exc:
        parse_query(text)
    msg = str(exc.value)
    assert msg.startswith(f"query syntax error at column {column}: "), msg
    assert fragment in msg, msg


@pytest.mark.parametrize("text, error, fragment", [
    ("P=? [ F<=-1 b ]", ModelError, "query, column 10: the time bound must be >= 0; got -1 = -1"),
    ("P=? [ F<=t b ]", ModelError, "query, column 10: unknown name 't'"),
    ("P=? [ a U b U c ]", NotApplicableError, "a second temporal operator 'U' in one path formula"),
    ("P>1.5 [ F b ]", ModelError, "the probability bound must be in [0, 1]"),
    ("S=? [ q1 / 2 ]", ModelError, "type error: the argument of S must be a condition; got the double expression"),
])
def test_errors_once_bound_to_a_chain(text, error, fragment):
    with pytest.raises(error) as exc:
        parse_query(text).bind(names_chain())
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- checking
def test_steady_state_queries_closed_forms():
    lam, mu, K = 1.0, 2.0, 6
    rho = lam / mu
    chain = mm1k_chain(lam, mu, K)
    pi = rho ** np.arange(K + 1) * (1 - rho) / (1 - rho ** (K + 1))
    r = check(chain, "S=? [ q = K ]")
    assert isinstance(r, Result) and r.method == "query/stationary"
    assert r.value == pytest.approx(pi[K], rel=1e-12)
    assert r.residual < 1e-12 and r.n_states == K + 1 and r.measure == "S=? [ q = K ]"
    assert check(chain, 'S=? [ "full" ]').value == pytest.approx(pi[K], rel=1e-12)
    r = check(chain, "E=? [ q ]")
    assert r.value == pytest.approx(float(np.arange(K + 1) @ pi), rel=1e-12)
    r = check(chain, "E=? [ q > 0 ? 1 : 0 ]")  # utilisation = 1 - pi_0
    assert r.value == pytest.approx(1 - pi[0], rel=1e-12)


def test_the_one_stationary_solver_is_used_and_info_kept_small():
    chain = mm1k_chain()
    for solver in ("gth", "direct", "gmres"):
        r = check(chain, "S=? [ q = 0 ]", solver=solver)
        assert r.info["stationary"]["method"] == solver and r.residual < 1e-12
        assert r.value == pytest.approx(0.5 * (1 - 0.5) / (1 - 0.5**7) / 0.5, rel=1e-10)


def test_time_bounded_until_against_expm():
    lam, mu, K, t = 1.5, 1.0, 5, 2.0
    chain = mm1k_chain(lam, mu, K, initial=1)
    r = check(chain, "P=? [ F<=2 q = K ]")
    Qd = chain.Q.toarray()
    Qd[K] = 0.0
    ref = scipy.linalg.expm(Qd * t)[1, K]
    assert r.method == "query/uniformisation"
    assert r.value == pytest.approx(ref, abs=1e-12)
    assert r.error_estimate <= 1e-12
    assert r.info["kind"] == "until" and r.info["time_bound"] == 2.0
    assert set(r.info["fox_glynn"]) >= {"left", "right", "total_mass_lost"}
    # bounded until through q >= 1: states with q = 0 are absorbing failures
    r = check(chain, "P=? [ q >= 1 U<=2 q = K ]")
    Qd = chain.Q.toarray()
    Qd[[0, K]] = 0.0
    assert r.value == pytest.approx(scipy.linalg.expm(Qd * t)[1, K], abs=1e-12)
    # tighter eps is honoured
    assert check(chain, "P=? [ F<=2 q = K ]", eps=1e-6).error_estimate <= 1e-6


def test_unbounded_until_and_reachability():
    up, down, K = 1.0, 2.0, 6
    chain = mm1k_chain(up, down, K, initial=2)
    r = check(chain, "P=? [ F q = K ]")
    assert r.value == pytest.approx(1.0, abs=1e-15) and r.method == "query/reachability"
    r = check(chain, "P=? [ q > 0 U q = K ]")
    ratio = down / up
    assert r.value == pytest.approx((1 - ratio**2) / (1 - ratio**K), rel=1e-12)
    assert r.residual < 1e-12


def test_expected_time_query():
    lam, mu, K = 1.0, 2.0, 4
    chain = mm1k_chain(lam, mu, K, initial=0)
    r = check(chain, "T=? [ F q = K ]")
    m = [1 / lam]
    for _ in range(1, K):
        m.append(1 / lam + mu / lam * m[-1])
    assert r.value == pytest.approx(sum(m), rel=1e-12)
    assert r.method == "query/expected_time" and r.info["reached_surely"] is True
    # a trap makes the expectation infinite
    Q = sp.csr_array([[-2.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    trap = chain_of(Q, "s")
    r = check(trap, "T=? [ F s = 1 ]")
    assert math.isinf(r.value) and r.info["reached_surely"] is False
    assert check(trap, "P=? [ F s = 1 ]").value == pytest.approx(0.5, rel=1e-14)
    json.dumps(r.to_dict())


def test_initial_distribution_and_result_is_json_ready():
    chain = mm1k_chain(initial=np.array([0.5, 0.5, 0, 0, 0, 0, 0]))
    r0 = check(mm1k_chain(initial=0), "P=? [ F<=1 q = 2 ]").value
    r1 = check(mm1k_chain(initial=1), "P=? [ F<=1 q = 2 ]").value
    r = check(chain, "P=? [ F<=1 q = 2 ]")
    assert r.value == pytest.approx(0.5 * (r0 + r1), rel=1e-14)
    d = r.to_dict()
    json.dumps(d)
    # no per-state vectors anywhere in info
    def sizes(x):
        if isinstance(x, dict):
            return max([0] + [sizes(v) for v in x.values()])
        return len(x) if isinstance(x, (list, tuple)) else 0
    assert sizes(d["info"]) == 0


def test_check_errors():
    chain = mm1k_chain()
    with pytest.raises(ModelError, match="must be a condition"):
        check(chain, "S=? [ q + 1 ]")
    with pytest.raises(ModelError, match="unknown name 'q2'"):
        check(chain, "E=? [ q2 ]")
    with pytest.raises(ModelError, match="the target of F must be a condition"):
        check(chain, "P=? [ F q ]")
    with pytest.raises(QuerySyntaxError):
        check(chain, "S=? [ q > ]")
    with pytest.raises(ModelError, match=r"chain.initial must be a state index in \[0, 7\)"):
        check(mm1k_chain(initial=9), "P=? [ F q = 1 ]")
