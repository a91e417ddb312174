"""Tables are not overwritten or mixed, torn rows are recomputed, plots do not hide gaps (issue 21 item 6)."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

import exactq
from exactq.cli import main
from exactq.errors import ModelError
from exactq.sweep import read_table

MM1 = dict(model="mm1", fixed={"service_rate": 1}, over={"arrival_rate": "0.2:0.8:4"}, backend="serial",
           as_frame=False)


def _same(rows_a, rows_b):
    """Row by row, every column but the wall time."""
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in rows_a]
    return strip == [{k: v for k, v in r.items() if k != "seconds"} for r in rows_b]


# ------------------------------------------------------------------------- a foreign table
def test_a_foreign_table_is_refused_and_force_overwrites_it(tmp_path):
    out = tmp_path / "t.csv"
    out.write_text("junk,stuff\nx,y\n")
    with pytest.raises(ModelError, match=r"not a sweep table of this study \(missing columns: arrival_rate, "
                                         r"service_rate, .*; foreign columns: junk, stuff\)"):
        exactq.sweep(**MM1, out=out)
    assert out.read_text() == "junk,stuff\nx,y\n"  # untouched
    with pytest.warns(UserWarning, match="it is overwritten"):
        rows = exactq.sweep(**MM1, out=out, force=True)
    assert _same(read_table(out), rows) and "junk" not in out.read_text()


def test_a_table_of_the_same_study_is_extended(tmp_path):
    """Another grid of the same study (same columns) adds its points; the earlier rows stay."""
    out = tmp_path / "t.csv"
    exactq.sweep(**MM1, out=out)
    exactq.sweep(**dict(MM1, over={"arrival_rate": "0.9"}), out=out)
    assert sorted(r["arrival_rate"] for r in read_table(out)) == [0.2, 0.4, 0.6, 0.8, 0.9]


# ---------------------------------------------------------------------------- torn rows
@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_torn_last_row_is_dropped_and_recomputed(tmp_path, suffix):
    out = tmp_path / f"t{suffix}"
    full = exactq.sweep(**MM1, out=out)
    text = out.read_text()
    cut = text.rstrip("\n]").rfind("\n")  # in the middle of the last row
    out.write_text(text[:cut + 12])
    with pytest.warns(UserWarning, match="its last row was torn"):
        again = exactq.sweep(**MM1, out=out)
    assert _same(again, full) and _same(read_table(out), full)


def test_a_damaged_row_inside_the_table_is_an_error_naming_it(tmp_path):
    out = tmp_path / "t.csv"
    exactq.sweep(**MM1, out=out)
    lines = out.read_text().splitlines(keepends=True)
    lines[2] = "0.4,1\n"
    out.write_text("".join(lines))
    with pytest.raises(ModelError, match="line 3 has 2 fields, the header 15; the table is damaged"):
        exactq.sweep(**MM1, out=out)


# --------------------------------------------------------------------- a killed sweep
KILLED = ["sweep", "jsq", "service_rates=1,2", "--over", "arrival_rate=0.5:2.8:16", "--method", "ctmc", "--tol",
          "1e-11", "--backend", "processes", "--workers", "2", "--quiet"]


def test_a_killed_processes_sweep_is_quiet_and_resumes_to_the_uninterrupted_table(tmp_path):
    """SIGKILL of the parent mid-run: no worker traceback, no worker left; the resume matches row by row."""
    out = tmp_path / "killed.csv"
    proc = subprocess.Popen([sys.executable, "-m", "exactq", *KILLED, "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 4:  # the header and a few rows: the pool is running
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    err = proc.communicate(timeout=60)[1]  # returns once every writer of the pipe (the workers too) is gone
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    done = len(read_table(out))
    assert 1 <= done < 16
    # a torn last row, as a kill during a write leaves it
    text = out.read_text()
    out.write_text(text[:len(text) - 7])
    code = main([*KILLED[:-5], "--backend", "serial", "--quiet", "--out", str(out)])
    assert code == 0
    resumed = read_table(out)
    fresh = exactq.sweep("jsq", {"service_rates": "1,2"}, {"arrival_rate": "0.5:2.8:16"}, method="ctmc", tol=1e-11,
                         backend="serial", as_frame=False)
    assert len(resumed) == 16 and _same(resumed, fresh)  # bit-identical values, every column


def test_workers_exit_with_their_parent():
    """The pool's initializer asks the kernel to end a worker with its parent (no orphan finishing a batch)."""
    code = ("import os, time; import exactq.backends as b; r, w = os.pipe(); pid = os.fork()\n"
            "if pid == 0:\n"
            "    null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1); os.dup2(null, 2)\n"
            "    b._init_worker(os.getppid()); os.write(w, b'1'); time.sleep(30); os._exit(3)\n"
            "os.read(r, 1); print(pid, flush=True); os._exit(0)\n")  # the parent dies once the worker is set up
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout)
    for _ in range(200):  # the parent exited at once; its child must follow within moments
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the worker outlived its parent")


# ------------------------------------------------------------------------------ plots
def test_plot_breaks_lines_at_gaps_and_warns(tmp_path):
    pytest.importorskip("matplotlib")
    from exactq.plotting import plot_table

    table = tmp_path / "g.csv"
    table.write_text("a,value,status\n1,1.0,ok\n2,nan,ok\n3,3.0,ok\n4,inf,ok\n5,5.0,ok\n6,6.0,error\n")
    with pytest.warns(UserWarning) as caught:
        fig = plot_table(str(table), x="a")
    text = " | ".join(str(w.message) for w in caught)
    assert "2 rows with status ok left out" in text and "1 row whose status is not ok" in text
    x, y = fig.axes[0].get_lines()[0].get_data()
    assert list(x) == [1, 2, 3, 4, 5] and math.isnan(y[1]) and math.isnan(y[3]) and list(y[[0, 2, 4]]) == [1, 3, 5]


def test_plot_refuses_ragged_and_ambiguous_tables(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    pd = pytest.importorskip("pandas")
    from exactq.plotting import plot_table

    ragged = tmp_path / "r.csv"
    ragged.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ModelError, match="line 3 has 1 field, the header 2"):
        plot_table(str(ragged), x="a", y="b")
    dup = tmp_path / "d.csv"
    with open(dup, "w", newline="") as fh:
        csv.writer(fh).writerows([["a", "value", "value"], [1, 1, 2]])
    with pytest.raises(ModelError, match="column 'value' appears twice"):
        plot_table(str(dup), x="a")
    frame = pd.DataFrame([[1, 1, 2]], columns=["a", "value", "value"])
    with pytest.raises(ModelError, match="two columns named 'value'"):
        plot_table(frame, x="a")
    assert main(["plot", str(dup), "--x", "a", "--out", str(tmp_path / "d.png")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_json_table_reader_keeps_every_row_it_can(tmp_path):
    """A JSON table torn inside its last row: the other rows are read, the torn one is dropped with a warning."""
    out = tmp_path / "t.json"
    rows = exactq.sweep(**MM1, out=out)
    text = out.read_text()
    out.write_text(text[:text.rfind("{") + 9])
    with pytest.warns(UserWarning, match="its last row was torn"):
        back = read_table(out)
    assert _same(back, rows[:-1])
    json.loads(json.dumps(back))
