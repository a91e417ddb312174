"""Declared parameters: parsing from strings and Python values, and the error messages.

Every error names the parameter, the rule and the offending value in one line
(STYLE.md rule 14): ``arrival_rate must be > 0; got '-1'``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactq
from exactq.errors import ExactqError, ModelError, UnstableError
from exactq.models.basic import MM1
from exactq.models.jsq import JSQ
from exactq.params import REQUIRED, Param, parse_params

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

RATE = Param("arrival_rate", "float", "Poisson arrival rate", low=0.0, low_open=True)
RATES = Param("service_rates", "floats", "rate of each server", low=0.0, low_open=True, min_len=2)
SERVERS = Param("servers", "int", "number of servers", low=1)
SIZES = Param("sizes", "ints", "buffer sizes", low=0, min_len=1)
CAPACITY = Param("capacity", "int_or_inf", "jobs per queue", default=math.inf, low=1)
HORIZON = Param("horizon", "float_or_inf", "time horizon", default=math.inf, low=0.0)
PROB = Param("epsilon", "float", "error probability", default=0.0, low=0.0, high=1.0, high_open=True)
TIES = Param("ties", "choice", "tie breaking", default="random", choices=("random", "fastest"))
FLAG = Param("with_replacement", "bool", "sample with replacement", default=False)
LABEL = Param("label", "str", "a free-form label", default="")


def assert_one_line_naming(exc: BaseException, name: str, rule: str, raw) -> None:
    msg = str(exc)
    assert "\n" not in msg
    assert msg.startswith(f"{name} must be "), msg
    assert rule in msg, msg
    assert msg.endswith(f"got {raw!r}"), msg


# ---------------------------------------------------------------------------------
# valid values, from strings and from Python values
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "param, raw, expected",
    [
        (RATE, "1.5", 1.5),
        (RATE, " 2 ", 2.0),
        (RATE, "1e-3", 1e-3),
        (RATE, 3, 3.0),
        (RATE, 0.25, 0.25),
        (RATE, np.float64(0.5), 0.5),
        (SERVERS, "4", 4),
        (SERVERS, "4.0", 4),
        (SERVERS, "1e3", 1000),
        (SERVERS, 7, 7),
        (SERVERS, 7.0, 7),
        (SERVERS, np.int64(3), 3),
        (RATES, "1,2", (1.0, 2.0)),
        (RATES, " 1 , 2.5 ,3 ", (1.0, 2.5, 3.0)),
        (RATES, [1, 2], (1.0, 2.0)),
        (RATES, (0.5, 4.0), (0.5, 4.0)),
        (RATES, np.array([1.0, 2.0]), (1.0, 2.0)),
        (SIZES, "0,3", (0, 3)),
        (SIZES, 5, (5,)),
        (SIZES, [2, 4.0], (2, 4)),
        (CAPACITY, "inf", math.inf),
        (CAPACITY, "Infinity", math.inf),
        (CAPACITY, "oo", math.inf),
        (CAPACITY, math.inf, math.inf),
        (CAPACITY, "5", 5),
        (CAPACITY, 5, 5),
        (HORIZON, "inf", math.inf),
        (HORIZON, "2.5", 2.5),
        (HORIZON, 0, 0.0),
        (PROB, "0", 0.0),
        (PROB, "0.999", 0.999),
        (TIES, "fastest", "fastest"),
        (TIES, " Random ", "random"),
        (FLAG, True, True),
        (FLAG, False, False),
        (FLAG, "yes", True),
        (FLAG, "on", True),
        (FLAG, "1", True),
        (FLAG, 1, True),
        (FLAG, "FALSE", False),
        (FLAG, "off", False),
        (FLAG, 0, False),
        (LABEL, "anything at all", "anything at all"),
        (LABEL, 12, "12"),
    ],
)
def test_valid_values_parse_to_canonical_form(param, raw, expected):
    value = param.parse(raw)
    assert value == expected
    assert type(value) is type(expected)


def test_int_kinds_return_python_ints_and_float_kinds_python_floats():
    assert type(SERVERS.parse("3")) is int
    assert all(type(v) is int for v in SIZES.parse("1,2"))
    assert type(RATE.parse(np.float32(0.5))) is float
    assert all(type(v) is float for v in RATES.parse(np.array([1, 2])))
    assert isinstance(RATES.parse([1, 2]), tuple)


@FAST
@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_positive_floats_round_trip_from_repr_and_value(x):
    assert RATE.parse(repr(x)) == x
    assert RATE.parse(x) == x


@FAST
@given(st.integers(min_value=1, max_value=2**31))
def test_ints_round_trip_from_string_and_value(k):
    assert SERVERS.parse(str(k)) == k
    assert SERVERS.parse(k) == k
    assert CAPACITY.parse(str(k)) == k


@FAST
@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=2, max_size=8))
def test_float_lists_round_trip_comma_separated(xs):
    assert RATES.parse(",".join(repr(x) for x in xs)) == tuple(xs)
    assert RATES.parse(xs) == tuple(xs)


def test_large_integers_are_not_rounded_through_float():
    """An integer parameter must keep its exact value (no silent float rounding)."""
    n = 2**53 + 1
    assert SERVERS.parse(str(n)) == n
    assert SERVERS.parse(n) == n


# ---------------------------------------------------------------------------------
# invalid values: one message naming parameter, rule and value
# ---------------------------------------------------------------------------------
def test_the_documented_message_shape():
    with pytest.raises(ModelError) as e:
        RATE.parse("-1")
    assert str(e.value) == "arrival_rate must be > 0; got '-1'"


@pytest.mark.parametrize(
    "param, raw, rule",
    [
        (RATE, "-1", "> 0"),
        (RATE, "0", "> 0"),
        (RATE, 0.0, "> 0"),
        (RATE, -2.5, "> 0"),
        (RATE, "abc", "a number"),
        (RATE, "", "a number"),
        (RATE, None, "a number"),
        (RATE, True, "a number"),
        (RATE, [1.0], "a number"),
        (RATE, "nan", "finite"),
        (RATE, "inf", "finite"),
        (RATE, math.inf, "finite"),
        (SERVERS, "0", ">= 1"),
        (SERVERS, -3, ">= 1"),
        (SERVERS, "2.5", "an integer"),
        (SERVERS, 2.5, "an integer"),
        (SERVERS, "two", "an integer"),
        (SERVERS, "inf", "an integer"),
        (SERVERS, False, "a number"),
        (CAPACITY, "0", ">= 1"),
        (CAPACITY, "5.5", "an integer or inf"),
        (CAPACITY, "-inf", "an integer or inf"),
        (CAPACITY, -math.inf, "an integer or inf"),
        (CAPACITY, "lots", "an integer or inf"),
        (HORIZON, "-1", ">= 0"),
        (HORIZON, "x", "a number or inf"),
        (PROB, "1", ">= 0 and < 1"),
        (PROB, "-0.1", ">= 0 and < 1"),
        (PROB, 1.5, ">= 0 and < 1"),
        (TIES, "slowest", "one of random, fastest"),
        (TIES, 3, "one of random, fastest"),
        (FLAG, "maybe", "true or false"),
        (FLAG, 2, "true or false"),
        (RATES, "1", "a list of at least 2 values"),
        (RATES, "", "a list of at least 2 values"),
        (RATES, 3.0, "a list of at least 2 values"),
        (RATES, [1.0], "a list of at least 2 values"),
    ],
)
def test_invalid_values_raise_one_line_naming_parameter_rule_value(param, raw, rule):
    with pytest.raises(ModelError) as e:
        param.parse(raw)
    assert_one_line_naming(e.value, param.name, rule, raw)


@pytest.mark.parametrize(
    "raw, bad, rule",
    [("1,-2", "-2", "> 0"), ("1,0", "0", "> 0"), ("1,x", "x", "a number"), ([1.0, -1.0], -1.0, "> 0")],
)
def test_list_element_errors_name_the_parameter_and_the_bad_element(raw, bad, rule):
    with pytest.raises(ModelError) as e:
        RATES.parse(raw)
    assert_one_line_naming(e.value, "service_rates", rule, bad)


@FAST
@given(st.floats(max_value=0.0, allow_nan=False, allow_infinity=False))
def test_every_nonpositive_rate_is_rejected_with_its_value(x):
    with pytest.raises(ModelError) as e:
        RATE.parse(repr(x))
    assert_one_line_naming(e.value, "arrival_rate", "> 0", repr(x))


@FAST
@given(st.floats(min_value=1.0, max_value=1e9))
def test_closed_and_open_upper_bounds(x):
    with pytest.raises(ModelError) as e:
        PROB.parse(x)
    assert_one_line_naming(e.value, "epsilon", "< 1", x)
    closed = Param("p", "float", "", low=0.0, high=1.0)
    if x == 1.0:
        assert closed.parse(x) == 1.0
    else:
        with pytest.raises(ModelError, match=r"^p must be >= 0 and <= 1; got "):
            closed.parse(x)


def test_infinity_respects_a_finite_upper_bound():
    """``inf`` is a value like any other: a parameter bounded above must refuse it."""
    bounded = Param("horizon", "float_or_inf", "time horizon", low=0.0, high=10.0)
    assert bounded.parse("10") == 10.0
    with pytest.raises(ModelError) as e:
        bounded.parse("inf")
    assert_one_line_naming(e.value, "horizon", "<= 10", "inf")


def test_errors_belong_to_the_exception_tree():
    with pytest.raises(ExactqError):
        RATE.parse("-1")
    with pytest.raises(ValueError):  # ModelError is also a ValueError
        RATE.parse("-1")


# ---------------------------------------------------------------------------------
# rules and descriptions
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "param, rule",
    [
        (RATE, "> 0"),
        (SERVERS, ">= 1"),
        (PROB, ">= 0 and < 1"),
        (RATES, "a list of 2+ values, each > 0"),
        (SIZES, "a list of 1+ values, each >= 0"),
        (TIES, "one of random, fastest"),
        (FLAG, ""),
        (LABEL, ""),
        (Param("x", "float", "", low=0.5, high=2.0), ">= 0.5 and <= 2"),
    ],
)
def test_rule_text(param, rule):
    assert param.rule == rule


def test_describe_is_json_ready():
    d = CAPACITY.describe()
    assert d == {"name": "capacity", "kind": "int_or_inf", "doc": "jobs per queue", "required": False,
                 "default": "inf", "rule": ">= 1", "scope": None, "scope_doc": "", "aliases": []}
    d = RATES.describe()
    assert d["required"] is True and d["default"] is None
    assert Param("r", "floats", "", default=(1.0, 2.0)).describe()["default"] == [1.0, 2.0]


def test_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown parameter kind 'weird'"):
        Param("x", "weird", "")


def test_params_are_immutable():
    with pytest.raises(Exception):
        RATE.low = 5.0  # type: ignore[misc]


# ---------------------------------------------------------------------------------
# parse_params: unknown, missing, defaults
# ---------------------------------------------------------------------------------
PARAMS = (RATE, RATES, TIES, CAPACITY)


def test_parse_params_fills_defaults_and_parses_strings():
    out = parse_params("jsq", PARAMS, {"arrival_rate": "1.5", "service_rates": "1,2"})
    assert out == {"arrival_rate": 1.5, "service_rates": (1.0, 2.0), "ties": "random", "capacity": math.inf}


def test_parse_params_treats_none_as_not_given():
    out = parse_params("jsq", PARAMS, {"arrival_rate": 1, "service_rates": [1, 1], "capacity": None})
    assert out["capacity"] == math.inf
    with pytest.raises(ModelError, match="missing required parameter arrival_rate"):
        parse_params("jsq", PARAMS, {"arrival_rate": None, "service_rates": [1, 1]})


def test_unknown_parameter_is_named_with_the_valid_ones():
    with pytest.raises(ModelError) as e:
        parse_params("jsq", PARAMS, {"arrival_rate": 1, "service_rates": "1,1", "arival_rate": 2})
    msg = str(e.value)
    assert msg.startswith("unknown parameter 'arival_rate' for model jsq")
    assert "valid: arrival_rate, service_rates, ties, capacity" in msg
    assert "\n" not in msg


def test_missing_parameter_is_named_with_its_rule():
    with pytest.raises(ModelError) as e:
        parse_params("jsq", PARAMS, {"arrival_rate": 1})
    msg = str(e.value)
    assert msg.startswith("missing required parameter service_rates for model jsq")
    assert "a list of 2+ values, each > 0" in msg


def test_model_without_parameters_reports_none_valid():
    with pytest.raises(ModelError, match=r"valid: \(none\)"):
        parse_params("empty", (), {"x": 1})


# ---------------------------------------------------------------------------------
# the same rules through the public API
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, params, start",
    [
        ("jsq", {"arrival_rate": "-1", "service_rates": "1,1"}, "arrival_rate must be > 0; got '-1'"),
        ("jsq", {"arrival_rate": 1, "service_rates": "1"}, "service_rates must be a list of at least 2"),
        ("jsq", {"arrival_rate": 1, "service_rates": "1,1", "capacity": "0"}, "capacity must be >= 1; got '0'"),
        ("jsq", {"arrival_rate": 1, "service_rates": "1,1", "ties": "x"}, "ties must be one of random, fastest"),
        ("jsq", {"arrival_rate": 1, "service_rates": "1,1", "foo": 1}, "unknown parameter 'foo' for model jsq"),
        ("jsq", {"service_rates": "1,1"}, "missing required parameter arrival_rate for model jsq"),
        ("mmc", {"arrival_rate": 1, "servers": "1.5"}, "servers must be an integer; got '1.5'"),
        ("mmck", {"arrival_rate": 1, "servers": 3, "capacity": 2}, "capacity must be >= servers 3; got 2"),
        ("mm1", {"arrival_rate": 1, "service_rate": "0"}, "service_rate must be > 0; got '0'"),
    ],
)
def test_model_construction_errors(name, params, start):
    with pytest.raises(ModelError) as e:
        exactq.model(name, **params)
    assert str(e.value).startswith(start), str(e.value)


def test_stability_is_checked_at_construction_and_names_the_rule():
    with pytest.raises(UnstableError) as e:
        exactq.model("jsq", arrival_rate=2.5, service_rates="1,1")
    assert str(e.value) == "arrival_rate must be < total service rate 2 for stability; got 2.5"
    with pytest.raises(UnstableError, match=r"^arrival_rate must be < service_rate 1 for stability; got 1$"):
        exactq.model("mm1", arrival_rate=1.0)


def test_model_params_are_canonical():
    m = exactq.model("jsq", arrival_rate="1.5", service_rates="1,2", capacity="inf", ties="FASTEST")
    assert m.params() == {"arrival_rate": 1.5, "service_rates": (1.0, 2.0), "ties": "fastest",
                          "capacity": math.inf, "threshold": None,
                          "threshold_system": "none"}
    assert exactq.model("mmc", arrival_rate=1, servers="2").params() == {
        "arrival_rate": 1.0, "servers": 2, "service_rate": 1.0}


def test_unknown_model_names_the_valid_ones():
    with pytest.raises(ModelError) as e:
        exactq.model("jsqq", arrival_rate=1)
    msg = str(e.value)
    assert msg.startswith("unknown model 'jsqq'; valid: ")
    for name in ("jsq", "mm1", "mmc", "mmck"):
        assert name in msg


def test_required_sentinel_repr():
    assert repr(REQUIRED) == "REQUIRED"


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda: MM1(arrival_rate=-1.0), "arrival_rate"),
        (lambda: MM1(arrival_rate=0.5, service_rate=math.nan), "service_rate"),
        (lambda: JSQ(arrival_rate=0.5, service_rates=(1.0,)), "service_rates"),
    ],
    ids=["mm1-negative-rate", "mm1-nan-rate", "jsq-one-server"],
)
def test_direct_construction_checks_every_parameter_rule(build, name):
    """``Model(...)`` with canonical values is public (``solve`` accepts model instances), and
    the catalogue says ``check`` runs then: a value that ``create`` refuses must not slip
    through and come out of ``solve`` as a number, a NaN or a ZeroDivisionError."""
    with pytest.raises(ModelError) as e:
        build()
    assert str(e.value).startswith(f"{name} must be "), str(e.value)
