"""PRISM files on the command line as PRISM runs them: -const (ranges too), properties files, --prop, errors.

The values are checked against matrix exponentials of the built generator and the
M/M/c/K closed form; the structure of the answers (one JSON document, one line per
failing property, exit status 2) against the README's contract.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import exactq
from exactq.cli import main
from exactq.prism import load_prism

FILES = Path(__file__).resolve().parents[1] / "prism"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def p_full(T: float, K: int = 4) -> float:
    """P(F<=T full) from the initial state of bd.sm, by expm (the flag does not change n's law)."""
    m = load_prism(FILES / "bd.sm")
    chain = m.built.chain
    Q = chain.Q.toarray()
    n = chain.states[:, list(chain.space.names).index("n")]
    A = Q.copy()
    A[n == K] = 0
    return float(scipy.linalg.expm(A * T)[chain.initial, n == K].sum())


def test_a_constant_only_the_property_uses_and_its_inferred_type(capsys):
    code, out, err = run(capsys, "check", FILES / "bd.sm", 'P=? [ F<=T "full" ]', "--const", "T=2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert isinstance(d, dict) and d["measure"] == 'P=? [ F<=T "full" ]' and d["name"] is None and d["property"] is None
    assert d["value"] == pytest.approx(p_full(2.0), abs=1e-12)
    # U<=T (expr): T is the constant, (n=4) the operand
    code, out, err = run(capsys, "check", FILES / "bd.sm", "P=? [ n<4 U<=T (n=4) ]", "--const", "T=0.5", "--json")
    assert code == 0, err and json.loads(out)["value"] == pytest.approx(p_full(0.5), abs=1e-12)
    code, out, err = run(capsys, "check", FILES / "bd.sm", 'P=? [ F<=T "full" ]', "--const", "T=2,X=1")
    assert code == 2 and err == ("exactq: error: --const X: no constant of the model or of the properties, and no "
                                 "property, uses the name 'X'\n")


def test_ranges_answer_one_result_per_value_and_rebuild_for_model_constants(capsys):
    code, out, err = run(capsys, "check", FILES / "bd.sm", 'P=? [ F<=T "full" ]', "--const", "T=0:0.5:1.5", "--json")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["constants"] for d in docs] == [{"T": 0.0}, {"T": 0.5}, {"T": 1.0}, {"T": 1.5}]
    assert [d["value"] for d in docs] == pytest.approx([p_full(t) for t in (0.0, 0.5, 1.0, 1.5)], abs=1e-12)
    # a model constant's range rebuilds the model: M/M/2/K against the closed form, K = 3..5
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=3:5,lambda=1.5",
                         "--json")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["n_states"] for d in docs] == [4, 5, 6]
    for d, K in zip(docs, (3, 4, 5)):
        ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                           capacity=K).value
        assert d["constants"] == {"K": K} and d["value"] == pytest.approx(ref, rel=1e-12)
    code, out, err = run(capsys, "check", FILES / "bd.sm", 'P=? [ F<=T "full" ]', "--const", "T=0:1")
    assert code == 0 and out.splitlines()[0].startswith("T=0: P=? [ F<=T \"full\" ] = 0  (")
    assert out.splitlines()[1].startswith("T=1: ")
    for bad, words in [("T=1:0:2", "the step of a range must be > 0"), ("T=3:1", "the range is empty"),
                       ("T=a:b", "a range must look like lo:step:hi or lo:hi")]:
        code, out, err = run(capsys, "check", FILES / "bd.sm", 'P=? [ F<=T "full" ]', "--const", bad)
        assert code == 2 and words in err and err.count("\n") == 1


def test_every_property_of_a_file_is_answered_independently(capsys):
    code, out, err = run(capsys, "check", FILES / "bd.sm", "--props", FILES / "experiment.csl", "--const", "T=1",
                         "--json")
    assert code == 2  # two of the six failed
    docs = json.loads(out)
    assert [d.get("name") for d in docs] == ["reach", "sure", None, "broken", None, None]
    reach, sure, busy, broken, jobs, nope = docs
    assert reach["value"] == pytest.approx(p_full(1.0), abs=1e-12) and sure["value"] is True
    assert "error" in broken and broken["measure"].startswith('P=? [ F<=T "full"')
    assert "expected ']' to close the P=? query" in broken["error"]
    assert nope["error"].startswith("experiment.csl, line 9, column 7: unknown label \"nope\"")
    assert isinstance(jobs["value"], float) and "error" not in busy
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("exactq: error: ") for line in lines)


def test_prop_picks_properties_by_name_or_number_and_a_command_line_property_sees_the_file(capsys):
    code, out, err = run(capsys, "check", FILES / "bd.sm", "--props", FILES / "experiment.csl", "--const", "T=1",
                         "--prop", "reach", "--prop", "3", "--json")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["name"] for d in docs] == ["reach", None] and docs[1]["measure"] == 'P=? [ F<=T "busy" ]'
    # the file's constant T, label "busy" and named property "reach" are visible on the command line
    code, out, err = run(capsys, "check", FILES / "bd.sm", '1 - "reach"', 'P=? [ F<=T "busy" ]', "--props",
                         FILES / "experiment.csl", "--const", "T=1", "--json")
    assert code == 0, err
    a, b = json.loads(out)
    assert a["value"] == pytest.approx(1 - p_full(1.0), abs=1e-12) and b["value"] == docs[1]["value"]
    code, out, err = run(capsys, "check", FILES / "bd.sm", "--props", FILES / "experiment.csl", "--prop", "nope")
    assert code == 2 and "--prop nope: no property is named 'nope'; named properties: reach, sure, broken" in err
    code, out, err = run(capsys, "check", FILES / "bd.sm", "--props", FILES / "experiment.csl", "--prop", "9")
    assert code == 2 and "--prop 9: there are 6 properties (numbered from 1)" in err


def test_properties_are_checked_before_the_model_is_built(capsys, monkeypatch):
    import exactq.prism.builder as builder

    def no_build(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(builder, "build_model", no_build)
    code, out, err = run(capsys, "check", FILES / "bd.sm", "P=? [ F<=2 n = ]", "S=? [ m = 1 ]", 'S=? [ "x" ]')
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "exactq: error: property, column 16: expected an expression after '='; got ']'",
        "exactq: error: property, column 7: unknown identifier 'm' (a constant that only the properties use is "
        "given with --const m=VALUE)",
        "exactq: error: property, column 7: unknown label \"x\"; valid: \"deadlock\", \"empty\", \"full\", \"init\"",
    ]


def test_method_and_solver_options_reach_the_stationary_solver(capsys):
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=5,lambda=1.5",
                         "--option", "solver=gmres", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["info"]["stationary"]["method"] == "gmres"
    ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                       capacity=5).value
    assert d["value"] == pytest.approx(ref, rel=1e-9)
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=5,lambda=1.5",
                         "--option", "solver=nonsense")
    assert code == 2 and err.count("\n") == 1 and "nonsense" in err
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=5,lambda=1.5",
                         "--method", "qbd")
    assert code == 2 and "--method must be auto, ctmc or dtmc for a PRISM file" in err


def test_solve_a_prism_file_with_const_and_the_deprecated_form(capsys):
    ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                       capacity=5).value
    code, out, err = run(capsys, "solve", FILES / "mmck.sm", "--const", "K=5,lambda=1.5", "--measure", "label:full",
                         "--json")
    assert code == 0 and err == "" and json.loads(out)["value"] == pytest.approx(ref, rel=1e-12)
    code, out, err = run(capsys, "solve", FILES / "mmck.sm", "K=5", "lambda=1.5", "--measure", "label:full",
                         "--json")
    assert code == 0 and json.loads(out)["value"] == pytest.approx(ref, rel=1e-12)
    assert "deprecated: give a PRISM file's constants with --const K=5,lambda=1.5" in err
    assert any("deprecated" in w for w in json.loads(out)["warnings"])


def test_models_describes_a_prism_file(capsys):
    code, out, err = run(capsys, "models", FILES / "mmck.sm", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["undefined_constants"] == ["K", "lambda"] and "n_states" not in d
    assert [v["name"] for v in d["variables"]] == ["n"] and d["variables"][0]["range"] == "[0..K]"
    assert d["labels"] == ["full", "waiting", "init", "deadlock"]
    assert [r["name"] for r in d["rewards"]] == ["jobs", "queue", "accepted"]
    code, out, err = run(capsys, "models", FILES / "mmck.sm", "--const", "K=7,lambda=1", "--json")
    d = json.loads(out)
    chain = load_prism(FILES / "mmck.sm", "K=7,lambda=1").built
    assert (d["n_states"], d["n_transitions"]) == (8, 14) == (chain.chain.n_states, chain.n_transitions)
    assert d["variables"][0]["range"] == "[0..7]" and d["constants"][0]["value"] == 7
    code, out, err = run(capsys, "models", FILES / "mmck.sm", "--const", "K=7,lambda=1")
    assert code == 0 and "8 states, 14 transitions" in out and "undefined constants: K (int) = 7" in out
    assert np.isfinite(d["build_seconds"])
