"""The bad inputs users hit (issue 21): each ends cleanly, in one to three lines, or is a finite answer.

Every input runs through ``exactq.cli.main`` in this process, under a 60 s alarm and a
4 GiB memory budget (``EXACTQ_MEMORY_BUDGET``): the exit status is 2, stderr has one to
three lines naming the problem, and neither a traceback nor ``internal error`` appears.
The inputs whose answer is legitimate give a finite value and exit 0.
"""

from __future__ import annotations

import json
import math
import os
import signal

import pytest

from exactq.cli import main

BUDGET = "4GiB"
LIMIT_S = 60

SMALL_CHAIN = ["check", "mmck", "arrival_rate=1", "servers=1", "capacity=3", "service_rate=2", "S=? [ n = 3 ]"]
AOI = ["aoi", "scheme=actual", "codeword_bits=10", "actual_bits=8", "erasure_prob=0.999999"]
MM1_SWEEP = ["sweep", "mm1", "--over", "arrival_rate=0.1:0.5:3", "--quiet", "--backend", "serial"]

#: (argv, a phrase the one-line error must contain); {tmp} is a fresh folder, {file} a plain file in it,
#: {ragged}, {dup}, {unrelated}, {prism} files prepared by the fixture
BAD = [
    # hangs and MemoryErrors: the size is predicted before anything is built
    (["sweep", "mm1", "--over", "arrival_rate=0.1:0.5:10000", "--over", "service_rate=1:2:10000", "--out",
      "{tmp}/g.csv", "--quiet"], "1e+08 points"),
    (["sweep", "mm1", "--over", "arrival_rate=0.1:0.5:100000", "--over", "service_rate=1:2:80000", "--out",
      "{tmp}/g.csv", "--quiet"], "8e+09 points"),
    (["solve", "round-robin", "servers=4", "arrival_rate=1", "k=1000000", "t=1", "--measure", "completion_time_cdf"],
     "memory budget"),
    (["solve", "mph1", "arrival_rate=0.5", "scv=1e6", "--method", "ctmc"], "memory budget"),
    (["solve", "round-robin", "servers=64", "arrival_rate=1", "phases=50", "dispatch=distributed"], "phases"),
    (["solve", "round-robin", "servers=64", "arrival_rate=1", "phases=50", "dispatch=distributed", "--method", "ctmc"],
     "memory budget"),
    (["solve", "mmck", "arrival_rate=1", "servers=1", "capacity=100000000", "service_rate=2", "--method", "ctmc"],
     "capacity=100000000"),
    (["export", "jsq", "arrival_rate=1", "service_rates=1,1", "--format", "mtx", "--truncation", "100000", "--out",
      "{tmp}/j"], "--truncation 100000"),
    # I/O: missing folders, a file where a folder should be
    (["export", "mm1", "arrival_rate=0.5", "--format", "mtx", "--truncation", "10", "--out", "{tmp}/missing/x"],
     "does not exist"),
    (["export", "mm1", "arrival_rate=0.5", "--format", "prism-explicit", "--truncation", "10", "--out",
      "{file}/x"], "is not a folder"),
    (MM1_SWEEP + ["--out", "{tmp}/missing/s.csv"], "does not exist"),
    (MM1_SWEEP + ["--out", "{file}/s.csv"], "is not a folder"),
    (["plot", "{tmp}/none.csv", "--x", "a", "--out", "{tmp}/p.png"], "does not exist"),
    # the shared controls, one validation for every command
    (SMALL_CHAIN + ["--tol", "0"], "tol must be in (0, 1); got 0.0"),
    (SMALL_CHAIN + ["--tol", "-1"], "tol must be in (0, 1); got -1.0"),
    (SMALL_CHAIN + ["--tol", "2"], "tol must be in (0, 1); got 2.0"),
    (SMALL_CHAIN + ["--tol", "nan"], "tol must be in (0, 1); got nan"),
    (["check", "mm1", "arrival_rate=0.5", "S=? [ n = 3 ]", "--tol", "0"], "tol must be in (0, 1)"),
    (["check", "{prism}", "P=? [ F<=0.5 s=1 ]", "--tol", "-1"], "tol must be in (0, 1); got -1.0"),
    (["solve", "{prism}", "--tol", "2"], "tol must be in (0, 1); got 2.0"),
    (MM1_SWEEP + ["--out", "{tmp}/t.csv", "--time-limit", "0"], "time_limit must be a number of seconds > 0"),
    (MM1_SWEEP + ["--out", "{tmp}/t.csv", "--truncation", "0"], "truncation must be an integer >= 1; got 0"),
    (MM1_SWEEP + ["--out", "{tmp}/t.csv", "--tol", "2"], "tol must be in (0, 1)"),
    (["sweep", "mm1", "--over", "arrival_rate=0.1:0.5:3", "--quiet", "--out", "{tmp}/t.csv", "--workers", "0"],
     "workers must be an integer >= 1; got 0"),
    (["solve", "mm1", "arrival_rate=0.5", "--time-limit", "inf", "--method", "ctmc"], "time_limit must be"),
    # values that are not finite numbers
    (["solve", "awp", "a=1", "lam=1", "nu=0.5", "k=200", "--measure", "window_moment"], "beyond the float64 range"),
    (["solve", "awp", "a=1", "lam=1", "nu=0.5", "k=200", "--measure", "window_moment", "--method", "numerical"],
     "beyond the float64 range"),
    (["solve"] + AOI, "below the float64 resolution"),
    (["solve"] + AOI + ["--method", "dtmc"], "below the float64 resolution"),
    (["solve", "aoi", "scheme=actual", "codeword_bits=2000", "actual_bits=1000", "erasure_prob=0.99", "--method",
      "closed-form"], "underflows float64"),
    # tables: not overwritten, not mixed; plots: not ambiguous
    (MM1_SWEEP + ["--out", "{unrelated}"], "not a sweep table of this study"),
    (["plot", "{ragged}", "--x", "a", "--out", "{tmp}/r.png"], "line 3 has 1 field"),
    (["plot", "{dup}", "--x", "a", "--out", "{tmp}/d.png"], "'value' appears twice"),
]

#: inputs with a legitimate answer: (argv, the exact value or a check of it)
GOOD = [
    (["solve", "awp", "a=1", "lam=1", "nu=0.999999", "--json"], lambda v: abs(v / 1e6 - 1) < 1e-9),
    (["solve"] + AOI + ["--method", "closed-form", "--json"], lambda v: 2.2e46 < v < 2.3e46 and math.isfinite(v)),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n4,5,6\n")
    (tmp_path / "dup.csv").write_text("a,value,value\n1,1,2\n")
    (tmp_path / "unrelated.csv").write_text("junk,stuff\nx,y\n")
    (tmp_path / "two.sm").write_text("ctmc\nmodule m\n s : [0..1];\n [] s=0 -> 3 : (s'=1);\n [] s=1 -> 1 : (s'=0);\n"
                                     "endmodule\n")
    return {"tmp": str(tmp_path), "file": str(tmp_path / "a_file"), "ragged": str(tmp_path / "ragged.csv"),
            "dup": str(tmp_path / "dup.csv"), "unrelated": str(tmp_path / "unrelated.csv"),
            "prism": str(tmp_path / "two.sm")}


def _run(argv, files, capsys, monkeypatch):
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", BUDGET)

    def too_long(signum, frame):
        raise TimeoutError(f"{argv} ran past {LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(LIMIT_S)
    try:
        code = main([a.format(**files) for a in argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, phrase", BAD, ids=[" ".join(a[:2] + a[-2:]) for a, _ in BAD])
def test_bad_input_ends_in_one_to_three_lines(argv, phrase, files, capsys, monkeypatch):
    if argv[0] == "plot":
        pytest.importorskip("matplotlib")
    code, out, err = _run(argv, files, capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert 1 <= len(lines) <= 3, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines[-1].startswith("exactq: error: "), err
    assert phrase.format(**files) in err, (phrase, err)


@pytest.mark.parametrize("argv, check", GOOD, ids=[" ".join(a[:3]) for a, _ in GOOD])
def test_legitimate_answer_is_a_finite_value(argv, check, files, capsys, monkeypatch):
    code, out, err = _run(argv, files, capsys, monkeypatch)
    assert code == 0, err
    value = json.loads(out)["value"]
    assert isinstance(value, float) and math.isfinite(value) and check(value), value


def test_internal_error_stays_for_genuine_bugs(capsys, monkeypatch):
    """A bug (here a TypeError planted in the solve) is still reported as exactq's own, exit 3."""
    import exactq.api

    def bug(*args, **kwargs):
        raise TypeError("planted")

    monkeypatch.setattr(exactq.api, "solve", bug)
    assert main(["solve", "mm1", "arrival_rate=0.5"]) == 3
    assert "internal error: TypeError: planted" in capsys.readouterr().err


@pytest.mark.parametrize("fault", [OverflowError("(34, 'Numerical result out of range')"), ZeroDivisionError("x"),
                                   MemoryError(), RecursionError("maximum recursion depth exceeded"),
                                   UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "invalid continuation byte"),
                                   PermissionError(13, "Permission denied", "/ro/out.csv")],
                         ids=lambda e: type(e).__name__)
def test_the_last_line_of_defence_names_the_input(fault, capsys, monkeypatch):
    """Faults of the input that no check caught are one line naming it, never an internal error."""
    import exactq.api

    def fails(*args, **kwargs):
        raise fault

    monkeypatch.setattr(exactq.api, "solve", fails)
    code = main(["solve", "mm1", "arrival_rate=0.5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("exactq: error: "), err
    assert "internal error" not in err
    assert ("/ro/out.csv" in err) if isinstance(fault, OSError) else ("exactq solve mm1 arrival_rate=0.5" in err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_named(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for argv in (["export", "mm1", "arrival_rate=0.5", "--format", "mtx", "--truncation", "5", "--out",
                      str(ro / "x")], MM1_SWEEP + ["--out", str(ro / "s.csv")]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and str(ro) in err and "not writable" in err, err
    finally:
        ro.chmod(0o755)


def test_read_only_folder_is_named_even_for_root(tmp_path, capsys, monkeypatch):
    """As above, with the permission refused by ``os.access`` (root is never refused by chmod)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(ro) and mode & os.W_OK
                        else real(p, mode, **kw))
    for argv in (["export", "mm1", "arrival_rate=0.5", "--format", "mtx", "--truncation", "5", "--out",
                  str(ro / "x")], MM1_SWEEP + ["--out", str(ro / "s.csv")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(ro) in err and "not writable" in err, err


def test_a_write_that_fails_midway_names_the_file(tmp_path, monkeypatch):
    """The table writer turns an OSError of the file system (disk full, a folder gone) into a FileError."""
    import builtins

    from exactq.errors import FileError
    from exactq.sweep import write_table

    real_open = builtins.open

    def full(path, *args, **kwargs):
        if str(path).endswith(".tmp"):
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full)
    with pytest.raises(FileError, match="cannot write .*t.csv.*No space left on device"):
        write_table(tmp_path / "t.csv", [{"a": 1}])


@pytest.mark.parametrize("control, value, message", [
    ("tol", 2.0, "tol must be in (0, 1); got 2.0"), ("tol", float("nan"), "tol must be in (0, 1); got nan"),
    ("time_limit", 0, "time_limit must be a number of seconds > 0; got 0"),
    ("truncation", 0, "truncation must be an integer >= 1; got 0"),
    ("truncation", 2.5, "truncation must be an integer >= 1; got 2.5")])
def test_one_validation_for_every_entry_point(control, value, message, tmp_path):
    """solve, check (a model and a PRISM file) and sweep refuse a shared control alike, before any work."""
    import exactq
    from exactq.errors import ModelError

    prism = exactq.load_prism("two.sm", text="ctmc module m s : [0..1]; [] s=0 -> 3 : (s'=1); endmodule")
    calls = [lambda: exactq.solve("mm1", arrival_rate=0.5, method="ctmc", **{control: value}),
             lambda: exactq.check("mm1", "S=? [ n = 0 ]", arrival_rate=0.5, **{control: value}),
             lambda: exactq.check(prism, "P=? [ F<=0.5 s=1 ]", **{control: value}),
             lambda: exactq.sweep("mm1", {}, {"arrival_rate": "0.2|0.4"}, backend="serial", **{control: value})]
    for call in calls:
        with pytest.raises(ModelError) as info:
            call()
        assert str(info.value) == message
