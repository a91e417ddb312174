"""Native state expressions, read by the PRISM front end (exactq.prism.native): precedence, semantics, errors.

(They were exactq.expr's own parser's; exactq.expr is a deprecated alias now.)
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactq.errors import ModelError, QuerySyntaxError
from exactq.prism.native import Expression, evaluate, parse_expression

NS = {
    "q1": np.array([0, 3, 6, 7, 2]),
    "q2": np.array([0, 0, 1, 0, 2]),
    "x": np.array([1.0, 0.0, 2.0, 0.0, 4.0]),
    "full": np.array([True, False, True, False, False]),
    "K": 3,
}
Q1, Q2, X, FULL = NS["q1"], NS["q2"], NS["x"], NS["full"]


@pytest.mark.parametrize(
    "text, expected",
    [
        # PRISM precedence: comparisons bind tighter than & and |; & tighter than |
        ("q1 > 5 & q2 = 0", (Q1 > 5) & (Q2 == 0)),
        ("q1 > 5 | q2 = 0 & q1 = 0", (Q1 > 5) | ((Q2 == 0) & (Q1 == 0))),
        ("(q1 > 5 | q2 = 0) & q1 = 0", ((Q1 > 5) | (Q2 == 0)) & (Q1 == 0)),
        ("!q1 > 5", ~(Q1 > 5)),
        ("!q1 > 5 & q2 = 1", ~(Q1 > 5) & (Q2 == 1)),
        ("not q2 = 1 and q1 >= 3 or false", (~(Q2 == 1) & (Q1 >= 3))),
        ("q1 == 3 || q2 != 0 && full", (Q1 == 3) | ((Q2 != 0) & FULL)),
        ("full => q1 > 3", ~FULL | (Q1 > 3)),
        ("q2 = 0 => full => q1 > 6", ~(Q2 == 0) | ~FULL | (Q1 > 6)),
        ('"full" <=> q1 = 0 | q1 = 6', FULL == ((Q1 == 0) | (Q1 == 6))),
        ("0 < q1 <= 6", (0 < Q1) & (Q1 <= 6)),
        ("q1 = K", Q1 == 3),
        # arithmetic
        ("q1 + q2 * 2", Q1 + Q2 * 2),
        ("(q1 + q2) * 2", (Q1 + Q2) * 2),
        ("q1 - q2 - 1", Q1 - Q2 - 1),
        ("q1 // 2 + q1 % 4", Q1 // 2 + Q1 % 4),
        ("q1 / 2", Q1 / 2),
        ("-2^2", np.full(5, -4.0)),
        ("2^3^2", np.full(5, 512.0)),
        ("2**-1", np.full(5, 0.5)),
        ("-q1 + +q2", -Q1 + Q2),
        ("1e-3 * q1 + .5", 1e-3 * Q1 + 0.5),
        ("(q1 > 0) + (q2 > 0)", (Q1 > 0).astype(int) + (Q2 > 0).astype(int)),
        # functions
        ("min(q1, q2, K)", np.minimum(np.minimum(Q1, Q2), 3)),
        ("max(q1, 4)", np.maximum(Q1, 4)),
        ("abs(q2 - q1)", np.abs(Q2 - Q1)),
        ("floor(x / 3) + ceil(x / 3)", np.floor(X / 3) + np.ceil(X / 3)),
        ("pow(q1, 2) + mod(q1, 4)", Q1**2.0 + Q1 % 4),
        ("sqrt(x) + exp(0) + log(x + 1)", np.sqrt(X) + 1.0 + np.log(X + 1)),
        # conditional
        ("q1 = 3 ? 1 : 2", np.where(Q1 == 3, 1, 2)),
        ("full ? q1 : q2 > 0 ? 10 : -1", np.where(FULL, Q1, np.where(Q2 > 0, 10, -1))),
        # constants
        ("true", np.ones(5, bool)),
        ("false | full", FULL),
    ],
)
def test_precedence_and_semantics(text, expected):
    got = evaluate(text, NS)
    assert got.shape == (5,)
    np.testing.assert_array_equal(got, expected)
    assert (got.dtype == bool) == (np.asarray(expected).dtype == bool)


def test_short_circuit_guards_division():
    # x = 0 in states 1 and 3, where the division is never used
    np.testing.assert_array_equal(evaluate("x != 0 & q1 / x > 1", NS), (X != 0) & (Q1 / np.where(X == 0, 1, X) > 1))
    np.testing.assert_allclose(evaluate("x > 0 ? q1 / x : 0", NS), np.where(X > 0, Q1 / np.where(X > 0, X, 1), 0))
    np.testing.assert_array_equal(evaluate("x = 0 | q1 / x >= 2", NS), (X == 0) | (Q1 / np.where(X == 0, 1, X) >= 2))
    np.testing.assert_array_equal(evaluate("x != 0 => q1 / x < 5", NS), np.ones(5, bool))


def test_names_equality_and_immutability():
    e = parse_expression("q1 > 5 & (q2 = 0 | full) & min(q1, K) < 2")
    assert e.names == {"q1", "q2", "full", "K"}
    assert parse_expression("q1>5") == parse_expression(" ( q1 > 5 ) ")
    assert hash(parse_expression("q1>5")) == hash(parse_expression("q1 > 5"))
    assert parse_expression("q1 = 5") == parse_expression("q1 == 5")
    assert parse_expression("q1 > 5") != parse_expression("q1 >= 5")
    assert isinstance(e, Expression) and str(e) == e.text
    with pytest.raises(AttributeError):
        e.text = "x"
    assert parse_expression(e) is e


def test_broadcast_and_scalars():
    np.testing.assert_array_equal(evaluate("true", {}, n=3), [True, True, True])
    assert evaluate("1 + 2", {}).shape == ()
    assert float(evaluate("1 + 2", {})) == 3
    # no names read: length taken from the namespace's arrays
    assert evaluate("K + 1", NS).shape == (5,)
    np.testing.assert_array_equal(evaluate("K * 2", NS, n=2), [6, 6])


@pytest.mark.parametrize(
    "text, column, fragment",
    [
        ("q1 > 5 & )", 10, "expected an expression after '&'; got ')'"),
        ("q1 >", 5, "expected an expression after '>'; got end of input"),
        ("(q1 + 2", 8, "expected ')'"),
        ("q1 q2", 4, "got 'q2'"),
        ("q1 $ 2", 4, "unexpected character '$'"),
        ("", 1, "expected an expression"),
        ("3 +* 2", 4, "expected an expression after '+'; got '*'"),
        ("foo(1)", 1, "unknown function 'foo'"),
        ("abs(1, 2)", 1, "function 'abs' takes 1 argument; got 2"),
        ("min()", 1, "takes at least 1 argument; got 0"),
        ("q1 ? 1", 7, "expected ':'"),
        ("max(q1 q2)", 8, "expected ',' or ')'"),
        ("q1 & and", 6, "expected an expression after '&'; got 'and'"),
        # nothing beyond the whitelisted grammar gets through
        ("__import__(os)", 1, "unknown function '__import__'"),
        ("open('f')", 6, "unexpected character \"'\""),
        ("q1.real", 3, "unexpected character '.'"),
        ("q1[0]", 3, "got '['"),
        ("lambda: 1", 7, "got ':'"),
    ],
)
def test_syntax_errors_name_column_and_expectation(text, column, fragment):
    with pytest.raises(QuerySyntaxError) as exc:
        parse_expression(text)
    msg = str(exc.value)
    assert msg.startswith(f"query syntax error at column {column}: "), msg
    assert fragment in msg, msg
    assert exc.value.column == column


def test_unknown_name():
    with pytest.raises(ModelError, match=r"unknown name 'q3' in expression 'q3 > 1'; valid: K, full, q1, q2, x"):
        evaluate("q3 > 1", NS)
    with pytest.raises(ModelError, match=r"did you mean 'q1'\?"):
        evaluate("qq1 > 1", NS)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("q1 / x", "division by zero in expression 'q1 / x': divisor 'x' is 0 in state 1"),
        ("q1 // (q2 - q2)", "division by zero"),
        ("q1 % q2", "divisor 'q2' is 0 in state 0"),
        ("mod(q1, 0)", "division by zero"),
        ("0 ^ -1 + q1", "arithmetic fault"),
        ("log(x)", "'log(x)' is not finite in state 1"),
        ("sqrt(0 - q1)", "not finite in state 1"),
        ("exp(1000 * q1)", "not finite"),
    ],
)
def test_arithmetic_faults_are_errors_not_nan(text, fragment):
    with pytest.raises(ModelError) as exc:
        evaluate(text, NS)
    assert fragment in str(exc.value)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("q1 & q2", "an operand of '&' must be boolean"),
        ("!x", "the operand of '!' must be boolean"),
        ("x ? 1 : 2", "the condition of 'c ? a : b' must be boolean"),
    ],
)
def test_type_errors(text, fragment):
    with pytest.raises(ModelError, match=re.escape(fragment)):
        evaluate(text, NS)


def test_zero_one_integers_act_as_booleans():
    ns = {"busy": np.array([0, 1, 1]), "q": np.array([0, 1, 2])}
    np.testing.assert_array_equal(evaluate("busy & q > 1", ns), [False, False, True])


def test_bad_namespace_values():
    with pytest.raises(ModelError, match="has 2 values; expected 5"):
        evaluate("q1 + y", {"q1": Q1, "y": np.array([1, 2])})
    with pytest.raises(ModelError, match="not numeric"):
        evaluate("s", {"s": np.array(["a", "b"])})
    with pytest.raises(ModelError, match="scalar or a vector"):
        evaluate("m", {"m": np.zeros((2, 2))})


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(-5, 9), min_size=1, max_size=20),
    st.integers(-5, 9),
    st.integers(1, 4),
)
def test_matches_numpy_on_random_states(values, threshold, divisor):
    q1 = np.array(values)
    q2 = q1[::-1].copy()
    ns = {"q1": q1, "q2": q2, "c": threshold, "d": divisor}
    np.testing.assert_array_equal(
        evaluate("q1 > c & q2 = 0 | !(q1 <= q2) & q1 % d = 1", ns),
        ((q1 > threshold) & (q2 == 0)) | (~(q1 <= q2) & (q1 % divisor == 1)),
    )
    np.testing.assert_allclose(
        evaluate("max(q1, q2) - min(q1, q2) + abs(q1 - q2) / d ^ 2 * -1", ns),
        np.maximum(q1, q2) - np.minimum(q1, q2) + np.abs(q1 - q2) / divisor**2.0 * -1,
    )


def test_the_deprecated_module_is_an_alias():
    import importlib
    import sys
    import warnings

    sys.modules.pop("exactq.expr", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("exactq.expr")
    assert any(issubclass(w.category, DeprecationWarning) and "exactq.prism.native" in str(w.message) for w in caught)
    assert old.parse_expression is parse_expression and old.evaluate is evaluate and old.Expression is Expression
    np.testing.assert_array_equal(old.evaluate("0 < q1 <= 6", NS), (0 < Q1) & (Q1 <= 6))
