"""The command line: listing, solving, the JSON contract, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import exactq
from exactq.cli import main

CONTRACT = ("model", "params", "measure", "method", "value", "lower", "upper", "n_states", "seconds")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------
# exactq models
# ---------------------------------------------------------------------------------
def test_models_lists_every_core_model_with_parameters_measures_methods(capsys):
    code, out, err = run(capsys, "models")
    assert code == 0 and err == ""
    for name, params, measures, methods in [
        ("jsq", ["arrival_rate", "service_rates", "ties", "capacity"], ["mean_number", "blocking_probability"],
         ["ctmc"]),
        ("mm1", ["arrival_rate", "service_rate"], ["mean_number", "prob_empty"], ["closed-form", "ctmc"]),
        ("mmc", ["arrival_rate", "servers", "service_rate"], ["p_wait", "mean_waiting_time"], ["closed-form", "ctmc"]),
        ("mmck", ["arrival_rate", "servers", "capacity"], ["blocking_probability"], ["closed-form", "ctmc"]),
    ]:
        [block] = [b for b in out.split("\n\n") if b.startswith(f"{name}: ")]
        assert "parameters:" in block and "measures:" in block and "methods:" in block
        for p in params:
            assert f"    {p} (" in block
        for m in measures:
            assert f"    {m}" in block
        methods_line = [line for line in block.splitlines() if line.startswith("  methods: ")][0]
        for m in methods:
            assert m in methods_line
    assert "arrival_rate (float, required; > 0; total over all servers" in out  # the scope follows the rule
    assert "capacity (int_or_inf, default inf; >= 1)" in out
    assert "mean_number (default)" in out


def test_models_json_parses_and_matches_the_catalogue(capsys):
    code, out, err = run(capsys, "models", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    by_name = {m["name"]: m for m in data}
    assert {"jsq", "mm1", "mmc", "mmck"} <= set(by_name)
    assert [m["name"] for m in data] == exactq.model_names()
    jsq = by_name["jsq"]
    assert set(jsq) >= {"name", "summary", "reference", "parameters", "measures", "default_measure", "methods"}
    params = {p["name"]: p for p in jsq["parameters"]}
    assert params["capacity"]["default"] == "inf" and params["capacity"]["required"] is False
    assert params["arrival_rate"]["required"] is True and params["arrival_rate"]["rule"] == "> 0"
    assert "ctmc" in jsq["methods"] and jsq["default_measure"] == "mean_number"
    assert by_name["mmck"]["measures"]["blocking_probability"]


def test_models_one_name(capsys):
    code, out, _ = run(capsys, "models", "mmck", "--json")
    assert code == 0
    assert [m["name"] for m in json.loads(out)] == ["mmck"]
    code, out, err = run(capsys, "models", "nope")
    assert code == 2 and out == ""
    assert err.startswith("exactq: error: unknown model 'nope'")


# ---------------------------------------------------------------------------------
# exactq solve
# ---------------------------------------------------------------------------------
def test_solve_json_contract(capsys):
    code, out, err = run(capsys, "solve", "jsq", "arrival_rate=1.8", "service_rates=1,1", "--json")
    assert code == 0 and err == ""
    assert out.count("\n") == 1  # one object on one line
    d = json.loads(out)
    for key in CONTRACT:
        assert key in d, key
    assert d["model"] == "jsq"
    assert d["params"] == {"arrival_rate": 1.8, "service_rates": [1.0, 1.0], "ties": "random", "capacity": "inf",
                           "threshold": None, "threshold_system": "none"}
    assert d["measure"] == "mean_number"
    assert d["value"] == pytest.approx(9.85484308, abs=1e-8)
    assert d["lower"] is None and d["upper"] is None
    assert isinstance(d["method"], str) and d["method"]
    assert d["seconds"] >= 0
    assert d["warnings"] == []


def test_solve_json_ctmc_details(capsys):
    code, out, _ = run(capsys, "solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--method", "ctmc", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["method"].startswith("ctmc/")
    assert d["value"] == pytest.approx(1.42632075, abs=1e-8)
    t = d["info"]["truncation"]
    # identical servers: the symmetry-lumped chain of sorted queue lengths
    assert d["info"]["lumped"] and d["n_states"] == (t["level"] + 1) * (t["level"] + 2) // 2
    assert t["history"][0]["change"] == "inf"  # JSON has no infinity: spelled out
    assert d["error_estimate"] <= 1e-8


def test_solve_plain_output(capsys):
    code, out, err = run(capsys, "solve", "mm1", "arrival_rate=0.5")
    assert code == 0 and err == ""
    assert out.startswith("mm1 mean_number = 1  (method closed-form")


def test_solve_with_measure_method_and_list_value(capsys):
    code, out, _ = run(capsys, "solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--measure",
                       "mean_queue_lengths", "--method", "gth", "--truncation", "20", "--tol", "0.5", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["method"] == "ctmc/gth" and d["measure"] == "mean_queue_lengths"
    assert len(d["value"]) == 2 and d["value"][0] == pytest.approx(d["value"][1], rel=1e-12)
    assert d["n_states"] == 231  # sorted pairs 0 <= s1 <= s2 <= 20 (lumped by symmetry)
    code, out, _ = run(capsys, "solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--method", "gth",
                       "--truncation", "20", "--tol", "0.5", "--no-lump", "--json")
    assert json.loads(out)["n_states"] == 441


def test_warnings_go_to_stderr_and_into_the_json(capsys):
    argv = ["solve", "mm1", "arrival_rate=0.5", "--method", "ctmc", "--truncation", "10"]
    code, out, err = run(capsys, *argv)
    assert code == 0
    assert err.startswith("exactq: warning: truncation 10: probability mass")
    assert out.startswith("mm1 mean_number = ")
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0 and err.startswith("exactq: warning: truncation 10: probability mass")
    d = json.loads(out)  # stdout is only the JSON
    assert len(d["warnings"]) == 1 and "truncation 10" in d["warnings"][0]


def test_strict_turns_the_truncation_warning_into_an_error(capsys):
    code, out, err = run(capsys, "solve", "mm1", "arrival_rate=0.5", "--method", "ctmc", "--truncation", "10",
                         "--strict")
    assert code == 2 and out == ""
    assert err.startswith("exactq: error: truncation 10: probability mass")


def test_verify_flag(capsys):
    code, out, _ = run(capsys, "solve", "mmck", "arrival_rate=2", "servers=2", "capacity=5", "--method", "ctmc",
                       "--verify")
    assert code == 0
    assert "verify: 50-digit re-solve agrees to" in out and "(ok)" in out
    code, out, _ = run(capsys, "solve", "mmck", "arrival_rate=2", "servers=2", "capacity=5", "--method", "ctmc",
                       "--verify", "--json")
    assert json.loads(out)["info"]["verify"]["agree"] is True


# ---------------------------------------------------------------------------------
# bad input: exit 2, exactly one line on stderr, naming the parameter
# ---------------------------------------------------------------------------------
BAD = [
    (["solve", "mg1", "arrival_rate=1"], ["unknown model 'mg1'", "jsq", "mm1"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "servers=2"], ["unknown parameter 'servers'", "valid:"]),
    (["solve", "jsq", "arrival_rate=-1", "service_rates=1,1"], ["arrival_rate must be > 0; got '-1'"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,-1"], ["service_rates must be > 0; got '-1'"]),
    (["solve", "jsq", "arrival_rate=2.5", "service_rates=1,1"],
     ["arrival_rate must be < total service rate 2 for stability; got 2.5"]),
    (["solve", "mm1", "arrival_rate=1"], ["arrival_rate must be < service_rate 1 for stability; got 1"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--measure", "throughput"],
     ["unknown measure 'throughput'", "mean_number"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--method", "simulation"],
     ["method 'simulation' does not apply to model jsq", "valid:"]),
    (["solve", "jsq", "arrival_rate", "service_rates=1,1"], ["key=value", "'arrival_rate'"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "=3"], ["key=value", "'=3'"]),
    (["solve", "jsq", "arrival_rate=1", "arrival_rate=2", "service_rates=1,1"], ["arrival_rate given twice"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--tol", "abc"], ["--tol", "'abc'"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--tol", "2"], ["tol must be in (0, 1); got 2.0"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--tol", "0"], ["tol must be in (0, 1); got 0.0"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--truncation", "x"], ["--truncation", "'x'"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--truncation", "0"], ["truncation must be"]),
    (["solve", "jsq", "service_rates=1,1"], ["missing required parameter arrival_rate"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1"], ["service_rates must be a list of at least 2"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "capacity=0"], ["capacity must be >= 1; got '0'"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "ties=slowest"], ["ties must be one of random, fastest"]),
    (["solve", "jsq", "arrival_rate=1", "service_rates=1,1", "--measure", "blocking_probability", "--method",
      "ctmc"], ["blocking_probability needs a finite capacity"]),
    (["solve", "mmck", "arrival_rate=1", "servers=3", "capacity=2"], ["capacity must be >= servers 3; got 2"]),
    (["solve", "mmc", "arrival_rate=1", "servers=2.5"], ["servers must be an integer; got '2.5'"]),
    (["solve"], ["required", "model"]),
    (["frobnicate"], ["invalid choice", "frobnicate"]),
    ([], ["required", "command"]),
]


@pytest.mark.parametrize("argv, needles", BAD, ids=[" ".join(a) or "(nothing)" for a, _ in BAD])
def test_bad_input_exits_2_with_one_line(capsys, argv, needles):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("exactq: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_near_critical_load_is_a_clean_error_not_an_internal_one(capsys):
    """A load so close to 1 that the truncation cannot reach tol must be a one-line user error
    (TruncationError, exit 2), not an out-of-memory crash reported as an internal error (exit 3)."""
    with pytest.raises(exactq.TruncationError):
        exactq.solve("jsq", arrival_rate=1.9999999, service_rates="1,1", method="ctmc")
    code, out, err = run(capsys, "solve", "jsq", "arrival_rate=1.9999999", "service_rates=1,1", "--method", "ctmc")
    assert code == 2, err
    assert err.startswith("exactq: error: ") and err.count("\n") == 1


# ---------------------------------------------------------------------------------
# the installed console script
# ---------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("exactq") is None, reason="the exactq console script is not installed")
def test_console_script_exit_status():
    exe = shutil.which("exactq")
    bad = subprocess.run([exe, "solve", "jsq", "arrival_rate=3", "service_rates=1,1"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "exactq: error: arrival_rate must be < total service rate 2 for stability; got 3"]
    good = subprocess.run([exe, "solve", "mm1", "arrival_rate=0.5", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["value"] == pytest.approx(1.0, rel=1e-12)


def test_internal_errors_are_one_line_with_exit_3_unless_debug(capsys, monkeypatch):
    import exactq.api

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(exactq.api, "solve", boom)
    code, out, err = run(capsys, "solve", "mm1", "arrival_rate=0.5")
    assert code == 3 and out == ""
    assert err == "exactq: internal error: RuntimeError: boom (rerun with --debug for the traceback)\n"
    with pytest.raises(RuntimeError, match="boom"):
        main(["--debug", "solve", "mm1", "arrival_rate=0.5"])


@pytest.mark.parametrize("argv", [
    ["check", "mmck", "arrival_rate=1", "servers=1", "capacity=3", "service_rate=2", "S=? [ n = 3 ]"],
    ["check", "mmck", "S=? [ n = 3 ]", "arrival_rate=1", "servers=1", "capacity=3", "service_rate=2"],
    ["check", "mmck", "arrival_rate=1", "S=? [ n = 3 ]", "--tol", "1e-8", "servers=1", "capacity=3",
     "service_rate=2"],
])
def test_check_takes_the_query_before_or_after_the_parameters(capsys, argv):
    """Issue 24: a query is recognisable (``=?``, a bracket, a filter), so its place does not matter."""
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["measure"] == "S=? [ n = 3 ]" and d["value"] == pytest.approx(1 / 15, rel=1e-12)
    assert d["params"] == {"arrival_rate": 1.0, "servers": 1, "capacity": 3, "service_rate": 2.0}


def test_check_without_a_query_or_with_two_is_one_line(capsys):
    assert main(["check", "mmck", "arrival_rate=1", "servers=1", "capacity=3", "service_rate=2"]) == 2
    assert "give one query" in capsys.readouterr().err
    assert main(["check", "mmck", "S=? [ n = 3 ]", "S=? [ n = 2 ]", "arrival_rate=1", "servers=1", "capacity=3",
                 "service_rate=2"]) == 2
    assert "one query per check" in capsys.readouterr().err
