"""The command line on PRISM files: exactq check FILE.sm, --props, --const, --json; exactq export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.prism import load_explicit, load_prism
from exactq.prism.explicit import read_explicit

FILES = Path(__file__).resolve().parents[1] / "prism"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_a_prism_file_answers_with_the_usual_json_and_the_build_figures(capsys):
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=5,lambda=1.5",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    for key in ("model", "params", "measure", "method", "value", "lower", "upper", "n_states", "n_transitions",
                "build_seconds", "solve_seconds", "seconds", "warnings"):
        assert key in d, key
    ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                       capacity=5).value
    assert d["value"] == pytest.approx(ref, rel=1e-12)
    assert d["n_states"] == 6 and d["n_transitions"] == 10 and d["method"] == "query/stationary"
    assert d["params"] == {"file": str(FILES / "mmck.sm"), "constants": {"K": "5", "lambda": "1.5"}}
    assert d["build_seconds"] >= 0 and d["solve_seconds"] >= 0


def test_check_with_a_properties_file_gives_one_answer_per_property(capsys):
    code, out, err = run(capsys, "check", FILES / "mmck.sm", "--props", FILES / "mmck.csl", "--const",
                         "K=5,lambda=1.5", "--json")
    assert code == 0, err
    answers = json.loads(out)  # one JSON document: a list, one object per property
    assert [a["name"] for a in answers] == ["block", None, None, None, None]
    assert answers[0]["property"] == "block" and answers[0]["measure"] == 'S=? [ "full" ]'
    assert answers[4]["measure"] == 'P=? [ F<=T "full" ]'
    assert answers[4]["method"] == "query/uniformisation" and answers[4]["error_estimate"] <= 1e-12
    code, out, err = run(capsys, "check", FILES / "mmck.sm", "--props", FILES / "mmck.csl", "--const",
                         "K=5", "--const", "lambda=1.5")
    assert code == 0 and out.count("\n") == 5 and out.startswith('"block": S=? [ "full" ] = ')
    assert "6 states, 10 transitions, build" in out


def test_check_text_output_warnings_and_errors(capsys):
    code, out, err = run(capsys, "check", FILES / "deadlock.sm", 'R{"time"}=? [ F "stuck" ]')
    assert code == 0
    assert err.strip() == "exactq: warning: 1 deadlocked state was fixed by adding a self-loop, as PRISM does " \
                          "(e.g. (s=2))"
    assert out.startswith('R{"time"}=? [ F "stuck" ] = 1.66666666667  (method query/expected_reward, 3 states')
    code, out, err = run(capsys, "check", FILES / "deadlock.sm", 'S=? [ "stuck" ]', "--strict")
    assert code == 2 and err.startswith("exactq: error: state (s=2) is a deadlock") and err.count("\n") == 1
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]')
    assert code == 2 and "constants K, lambda have no value; give them with --const K=VALUE,lambda=VALUE" in err
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ', "--const", "K=5,lambda=1")
    assert code == 2 and err == "exactq: error: property, column 14: expected ']' to close the S=? query after " \
                                "'\"full\"'; got the end of the property\n"
    code, out, err = run(capsys, "check", FILES / "mmck.sm", "--const", "K=5,lambda=1")
    assert code == 2 and "give a PRISM property" in err
    code, out, err = run(capsys, "check", FILES / "mmck.sm", "K=5", 'S=? [ "full" ]')
    assert code == 2 and "give the constants of a PRISM file with --const" in err
    code, out, err = run(capsys, "check", "mm1", "arrival_rate=0.5", "S=? [ n = 0 ]", "--const", "K=3")
    assert code == 2 and "--const, --props and --prop apply to PRISM files" in err
    code, out, err = run(capsys, "check", "mm1")
    assert code == 2 and "give one query" in err
    code, out, err = run(capsys, "check", "missing.sm", "S=? [ true ]")
    assert code == 2 and err.startswith("exactq: error: cannot read the PRISM file missing.sm")


def test_the_native_check_of_a_builtin_model_is_unchanged(capsys):
    code, out, err = run(capsys, "check", "mmck", "arrival_rate=1", "servers=1", "capacity=3", "service_rate=2",
                         "S=? [ n = 3 ]", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["model"] == "mmck" and d["value"] == pytest.approx(0.5**3 * 0.5 / (1 - 0.5**4), rel=1e-12)


def test_export_prism_explicit_and_read_it_back(capsys, tmp_path):
    prefix = tmp_path / "jsq"
    code, out, err = run(capsys, "export", FILES / "jsq2.sm", "--const", "K=3,lambda=1.8,mu1=1,mu2=1.5",
                         "--format", "prism-explicit", "--out", prefix)
    assert code == 0, err
    files = out.split()
    assert files == [f"{prefix}.tra", f"{prefix}.sta", f"{prefix}.lab", f"{prefix}.1.srew", f"{prefix}.2.srew",
                     f"{prefix}.2.trew"]  # "served" has transition rewards only
    sta = (tmp_path / "jsq.sta").read_text().splitlines()
    assert sta[0] == "(q1,q2)" and sta[1] == "0:(0,0)" and len(sta) == 17
    lab = (tmp_path / "jsq.lab").read_text().splitlines()
    assert lab[0] == '0="init" 1="deadlock" 2="full"' and lab[1] == "0: 0" and lab[-1] == "15: 2"
    original = load_prism(FILES / "jsq2.sm", "K=3,lambda=1.8,mu1=1,mu2=1.5").built.chain
    back = read_explicit(str(prefix) + ".tra")
    assert back.states.tolist() == original.states.tolist()
    assert abs(back.Q - original.Q).max() == 0.0
    assert np.array_equal(back.labels["full"], original.labels["full"])
    # the explicit files are a model too, checked with PRISM's properties
    m = load_explicit(str(prefix) + ".tra")
    ref = exactq.solve("jsq", "blocking_probability", method="ctmc", arrival_rate=1.8, service_rates="1,1.5",
                       capacity=3).value
    assert exactq.check(m, 'S=? [ "full" ]').value == pytest.approx(ref, rel=1e-12)
    assert exactq.check(m, "S=? [ q1 = 3 & q2 = 3 ]").value == pytest.approx(ref, rel=1e-12)
    code, out, err = run(capsys, "check", str(prefix) + ".tra", 'S=? [ "full" ]', "--json")
    assert code == 0 and json.loads(out)["value"] == pytest.approx(ref, rel=1e-12)


def test_export_a_builtin_model_and_matrix_market(capsys, tmp_path):
    import scipy.io

    code, out, err = run(capsys, "export", "mmck", "arrival_rate=2", "servers=2", "capacity=4", "--format", "mtx",
                         "--out", tmp_path / "q")
    assert code == 0, err
    assert out.split()[1:] == [str(tmp_path / "q.sta"), str(tmp_path / "q.lab")]  # the states it refers to
    Q = scipy.io.mmread(out.split()[0]).toarray()
    chain = exactq.model("mmck", arrival_rate=2, servers=2, capacity=4).ctmc()
    assert np.array_equal(Q, chain.Q.toarray())
    code, out, err = run(capsys, "export", "mm1", "arrival_rate=0.5", "--format", "prism-explicit", "--out",
                         tmp_path / "mm1")
    assert code == 2 and "model mm1 is infinite; give --truncation N" in err
    code, out, err = run(capsys, "export", "mm1", "arrival_rate=0.5", "--format", "prism-explicit", "--out",
                         tmp_path / "mm1", "--truncation", "10", "--json")
    assert code == 0 and json.loads(out)["n_states"] == 11
    tra = (tmp_path / "mm1.tra").read_text().splitlines()
    assert tra[0] == "11 20" and tra[1] == "0 1 0.5" and tra[2] == "1 0 1"
    back = read_explicit(str(tmp_path / "mm1.tra"))
    pi = exactq.check(load_explicit(str(tmp_path / "mm1.tra")), "S=? [ n = 0 ]").value
    assert back.n_states == 11 and pi == pytest.approx((1 - 0.5) / (1 - 0.5**11), rel=1e-12)
    code, out, err = run(capsys, "export", "mmck", "--format", "tra")
    assert code == 2 and "invalid choice" in err


def test_a_dtmc_round_trips_through_the_explicit_files(tmp_path):
    from exactq.ctmc import DTMC
    from exactq.prism.explicit import write_explicit

    chain = load_prism(FILES / "dice.pm").built.chain
    write_explicit(chain, str(tmp_path / "d"), rewards={})
    back = read_explicit(str(tmp_path / "d.tra"))
    assert isinstance(back, DTMC) and abs(back.P - chain.P).max() == 0.0
    assert exactq.check(load_explicit(str(tmp_path / "d.tra")), "P=? [ F s=7 & d=2 ]").value == \
        pytest.approx(1 / 6, rel=1e-12)


def test_solve_a_prism_file_with_its_constants_as_parameters(capsys):
    code, out, err = run(capsys, "solve", FILES / "mmck.sm", "K=5", "lambda=1.5", "--measure", "label:full",
                         "--verify", "--json")
    assert code == 0, err
    d = json.loads(out)
    ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                       capacity=5).value
    assert d["value"] == pytest.approx(ref, rel=1e-12) and d["info"]["verify"]["agree"]
    code, out, err = run(capsys, "solve", FILES / "mmck.sm", "K=5", "lambda=1.5", "--measure", "nope")
    assert code == 2 and "unknown measure 'nope'" in err and "label:full" in err



def test_check_progress_is_on_stderr_only_when_asked(capsys):
    """Issue 24: a PRISM check shows its build and its properties on stderr with --progress, never on stdout."""
    code, out, err = run(capsys, "check", FILES / "mmck.sm", "--props", FILES / "mmck.csl", "--const",
                         "K=5,lambda=1.5", "--progress", "--json")
    assert code == 0 and isinstance(json.loads(out), list)  # stdout stays one JSON document
    assert "building the chain" in err and "checking properties" in err and "done: 6 points" in err
    code, out, err = run(capsys, "check", FILES / "mmck.sm", 'S=? [ "full" ]', "--const", "K=5,lambda=1.5")
    assert code == 0 and "building the chain" not in err  # off a terminal: nothing unless asked


def test_exploration_reports_its_rounds():
    from exactq.prism import load_prism

    m = load_prism("bd.sm", text="ctmc module q n : [0..20000] init 0; [] n < 20000 -> 1 : (n'=n+1); "
                                 "[] n > 0 -> 2 : (n'=n-1); endmodule")
    lines = []
    import exactq.ctmc as ctmc

    old, ctmc.PROGRESS_SECONDS = ctmc.PROGRESS_SECONDS, 0.0
    try:
        built = m.build(progress=lines.append)
    finally:
        ctmc.PROGRESS_SECONDS = old
    assert built.chain.n_states == 20001 and m.built is built
    assert any(line.startswith("exploring bd.sm:") and "states" in line for line in lines)
    assert lines[-1] == "assembling the chain of bd.sm: 20,001 states"


def test_check_picks_the_linear_solver_of_a_reachability_query_by_its_registered_name(capsys):
    """--option solver=NAME reaches the registry's linear solvers, and an unknown name is one line naming the valid."""
    from exactq.catalogue import solver_names
    from exactq.solvers.linear import LinearSystem

    assert {"linear", "direct", "bicgstab"} <= set(solver_names(LinearSystem, "linear"))
    prop = 'R{"jobs"}=? [ F n=5 ]'  # expected jobs accumulated (per unit time) before the queue is full
    values = {}
    for name in ("bicgstab", "direct"):
        code, out, err = run(capsys, "check", FILES / "mmck.sm", prop, "--const", "K=5,lambda=1", "--option",
                             f"solver={name}", "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["info"]["solver"]["name"] == name and d["info"]["solver"]["why"] == "asked for"
        values[name] = d["value"]
    assert values["bicgstab"] == pytest.approx(values["direct"], rel=1e-12)
    code, out, err = run(capsys, "check", FILES / "mmck.sm", prop, "--const", "K=5,lambda=1", "--option",
                         "solver=bogus")
    assert code == 2 and out == ""
    line, = err.strip().splitlines()
    assert line.startswith("exactq: error: solver must be one of auto") and "linear systems: direct, bicgstab" in line
    assert "got 'bogus'" in line
