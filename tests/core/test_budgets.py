"""Budgets end in answers (issue 14): a time limit returns the last value with its estimate and a warning."""

import math

import pytest

import exactq
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, TruncationError

JSQ = dict(arrival_rate=2.9, service_rates="1,2")  # load 0.967: many levels to 1e-12


def test_time_limit_returns_the_last_value_with_its_estimate_and_a_warning():
    full = exactq.solve("jsq", method="ctmc", tol=1e-12, **JSQ)
    with pytest.warns(AccuracyWarning, match="stopped by time_limit before reaching tol=1e-12"):
        r = exactq.solve("jsq", method="ctmc", tol=1e-12, time_limit=1e-3, **JSQ)
    t = r.info["truncation"]
    assert t["stopped_by"] == "time_limit"
    assert len(t["history"]) < len(full.info["truncation"]["history"])
    # the value of the last level solved, with an honest (here: no better than its last change) estimate
    assert r.value == t["history"][-1]["value"] and r.error_estimate > 1e-12
    assert abs(r.value - full.value) <= max(r.error_estimate, 1e-9) * 10 or math.isinf(r.error_estimate)


def test_strict_time_limit_is_an_error():
    with pytest.raises(TruncationError, match="time_limit"):
        exactq.solve("jsq", method="ctmc", tol=1e-12, time_limit=1e-3, strict=True, **JSQ)


def test_model_chosen_sets_are_predicted_before_they_are_solved():
    """power-of-d grows cost sets (no integer level): the next set's time is predicted once it is built."""
    kw = dict(servers=6, d=2, arrival_rate=0.95, tol=1e-10)
    with pytest.warns(AccuracyWarning, match="stopped by time_limit"):
        r = exactq.solve("power-of-d", time_limit=1.0, **kw)
    assert r.info["truncation"]["stopped_by"] == "time_limit" and math.isfinite(r.value)
    assert r.seconds < 10.0  # the set predicted to overrun is not solved


def test_time_limit_is_validated_and_only_for_adaptive_methods():
    with pytest.raises(ModelError, match="time_limit must be a number of seconds > 0; got -1"):
        exactq.solve("jsq", method="ctmc", time_limit=-1, **JSQ)
    with pytest.raises(NotApplicableError, match="time_limit applies to the adaptive truncation"):
        exactq.solve("mm1", method="closed-form", arrival_rate=0.5, time_limit=5)


def test_time_limit_on_the_command_line(capsys):
    from exactq.cli import main

    code = main(["solve", "jsq", "arrival_rate=2.9", "service_rates=1,2", "--method", "ctmc", "--tol", "1e-12",
                 "--time-limit", "0.001", "--json"])
    out, err = capsys.readouterr()
    import json

    d = json.loads(out)
    assert code == 0 and "stopped by time_limit" in err and "stopped by time_limit" in d["warnings"][0]
    assert d["info"]["truncation"]["stopped_by"] == "time_limit"
    code = main(["solve", "jsq", "arrival_rate=2.9", "service_rates=1,2", "--method", "ctmc", "--tol", "1e-12",
                 "--time-limit", "0.001", "--strict"])
    out, err = capsys.readouterr()
    assert code != 0 and err.count("\n") == 1 and err.startswith("exactq: error:")
