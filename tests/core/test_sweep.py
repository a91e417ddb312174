"""Sweeps: grids, the tidy table, failures as rows, resumption, the three backends, progress."""

from __future__ import annotations

import importlib
import io
import json
import math
import signal
import subprocess
import sys
import time

import pytest

import exactq
from exactq.cli import main
from exactq.errors import ModelError
from exactq.sweep import Study, parse_spec, read_table, write_table

SWEEP = sys.modules["exactq.sweep"]  # the module (exactq.sweep is the function)
BACKENDS = importlib.import_module("exactq.backends")


def mm1_mean(rho):
    return rho / (1 - rho)  # M/M/1: E[N] = rho / (1 - rho)


# ------------------------------------------------------------------------ grids
def test_linear_log_and_explicit_grids():
    assert parse_spec("x", "0.5:0.95:10") == [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert parse_spec("x", "2:2:1") == [2.0]
    assert parse_spec("tol", "1e-2:1e-8:4:log") == [0.01, 1e-4, 1e-6, 1e-8]
    assert parse_spec("x", "1|2.5|inf") == [1, 2.5, "inf"]
    assert parse_spec("service_rates", "1,1|1,2|1,1,1", kind="floats") == ["1,1", "1,2", "1,1,1"]
    assert parse_spec("servers", "2:10:5", kind="int") == [2, 4, 6, 8, 10]
    assert parse_spec("servers", "1:1000:4:log", kind="int") == [1, 10, 100, 1000]
    assert parse_spec("servers", "3:3:2", kind="int") == [3]  # duplicates are dropped


@pytest.mark.parametrize("spec, words", [
    ("1:2", "start:stop:num"), ("1:2:0", "num must be an integer >= 1"), ("1:2:2.5", "num must be"),
    ("a:2:3", "finite numbers"), ("0:1:3:log", "log grid needs start > 0"), ("1:2:3:lin", "start:stop:num:log"),
    ("1||2", "must not be empty"), ("1:2:1", "num = 1 needs start = stop"),
])
def test_malformed_grids_name_the_parameter_and_the_rule(spec, words):
    with pytest.raises(ModelError) as e:
        parse_spec("arrival_rate", spec)
    assert "arrival_rate" in str(e.value) and words in str(e.value)


def test_integer_parameters_need_integer_grids():
    with pytest.raises(ModelError, match="servers is an integer parameter; the grid gives 4.66"):
        parse_spec("servers", "2:10:4", kind="int")


def test_cartesian_grid_last_axis_fastest():
    s = Study("mmc", {"service_rate": 1}, {"servers": "2|3", "arrival_rate": "0.5:1.5:3"})
    pts = [(t["params"]["servers"], t["params"]["arrival_rate"]) for t in s.points()]
    assert pts == [(2, 0.5), (2, 1.0), (2, 1.5), (3, 0.5), (3, 1.0), (3, 1.5)]
    assert s.columns[:3] == ["servers", "arrival_rate", "service_rate"]


@pytest.mark.parametrize("fixed, over, kw, words", [
    ({}, {"arrival_rat": "1|2"}, {}, "unknown parameter 'arrival_rat'"),
    ({"arrival_rate": 1}, {"arrival_rate": "1|2"}, {}, "both fixed"),
    ({"service_rate": 1, "bogus": 2}, {"arrival_rate": "0.5"}, {}, "unknown parameter 'bogus'"),
    ({}, {"arrival_rate": "0.5"}, {"measure": "nope"}, "unknown measure 'nope'"),
    ({}, {"arrival_rate": "0.5"}, {"method": "nope"}, "method 'nope' does not apply"),
    ({}, {}, {}, "at least one swept parameter"),
    ({}, {"arrival_rate": "0.5"}, {"tol": 2}, "tol must be in (0, 1)"),
])
def test_an_invalid_study_is_an_error_before_any_point(fixed, over, kw, words):
    with pytest.raises((ModelError, exactq.NotApplicableError)) as e:
        exactq.sweep("mm1", fixed, over, backend="serial", **kw)
    assert words in str(e.value)


# ------------------------------------------------------------------------ table
def test_table_columns_and_values_against_the_closed_form():
    rows = exactq.sweep("mm1", {"service_rate": 2}, {"arrival_rate": "0.4:1.6:4"}, method="ctmc",
                        backend="serial", as_frame=False)
    assert list(rows[0])[:2] == ["arrival_rate", "service_rate"]
    assert list(rows[0])[2:] == list(SWEEP.TABLE_COLUMNS)
    for r in rows:
        assert r["status"] == "ok" and r["message"] is None and r["method"] == "ctmc"
        assert r["method_used"].startswith("ctmc/") and r["n_states"] > 0 and r["truncation"] >= 1
        assert abs(r["value"] - mm1_mean(r["arrival_rate"] / 2)) <= 1e-8 * r["value"]
        assert r["error_estimate"] < 1e-8 * r["value"] and r["seconds"] > 0


def test_failures_are_rows_and_the_study_goes_on():
    rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5|1.5|-1|0.75"}, backend="serial",
                        as_frame=False)
    assert [r["status"] for r in rows] == ["ok", "error", "error", "ok"]
    assert "arrival_rate" in rows[1]["message"] and "1.5" in rows[1]["message"]
    assert "arrival_rate must be > 0" in rows[2]["message"]
    assert rows[1]["value"] is None and abs(rows[3]["value"] - 3.0) < 1e-12
    assert all("\n" not in r["message"] for r in rows if r["message"])


def test_method_and_measure_can_be_swept():
    rows = exactq.sweep("mm1", {"service_rate": 1, "arrival_rate": 0.5},
                        {"method": "closed-form|ctmc", "measure": "mean_number|prob_empty"}, backend="serial",
                        as_frame=False)
    got = {(r["method"], r["measure"]): r["value"] for r in rows}
    for m in ("closed-form", "ctmc"):
        assert abs(got[(m, "mean_number")] - 1.0) < 1e-9 and abs(got[(m, "prob_empty")] - 0.5) < 1e-9


def test_dataframe_with_pandas_and_dicts_without(monkeypatch):
    pd = pytest.importorskip("pandas")
    frame = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5|0.6"}, backend="serial")
    assert isinstance(frame, pd.DataFrame) and list(frame["arrival_rate"]) == [0.5, 0.6]
    monkeypatch.setitem(sys.modules, "pandas", None)  # pandas not installed
    rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5|0.6"}, backend="serial")
    assert isinstance(rows, list) and rows[0]["status"] == "ok"


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_vector_measures_round_trip(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"q{suffix}"
    rows = exactq.sweep("jsq", {"arrival_rate": 1.5}, {"service_rates": "1,2|1,1,1"}, measure="mean_queue_lengths",
                        method="ctmc", backend="serial", out=out, as_frame=False)
    back = read_table(out)
    assert [r["value"] for r in back] == [r["value"] for r in rows]
    assert len(back[0]["value"]) == 2 and len(back[1]["value"]) == 3
    # the three queues of identical servers hold equally many jobs
    assert max(back[1]["value"]) - min(back[1]["value"]) < 1e-12
    if suffix == ".csv":
        header = out.read_text().splitlines()[0].split(",")
        assert {"value_1", "value_2", "value_3"} <= set(header)
    if suffix == ".json":
        assert isinstance(json.loads(out.read_text())[1]["value"], list)


def test_write_and_read_keep_numbers_text_and_infinities(tmp_path):
    rows = [{"capacity": "inf", "service_rates": "1,2", "value": 1.5, "lower": -math.inf, "status": "ok",
             "message": None, "n_states": 12}]
    for suffix in (".csv", ".json"):
        write_table(tmp_path / f"t{suffix}", rows)
        [back] = read_table(tmp_path / f"t{suffix}")
        assert back["capacity"] == "inf" and back["service_rates"] == "1,2" and back["value"] == 1.5
        assert back["lower"] == -math.inf and back["message"] is None and back["n_states"] == 12
    with pytest.raises(ModelError, match="out must end in"):
        write_table(tmp_path / "t.txt", rows)


# ------------------------------------------------------------------- resumption
def _count_solves(monkeypatch):
    calls = []
    original = BACKENDS._solve_point

    def counting(task):
        calls.append(dict(task["params"]))
        return original(task)

    monkeypatch.setattr(BACKENDS, "_solve_point", counting)
    return calls


def test_resumption_computes_only_the_missing_points(tmp_path, monkeypatch):
    out = tmp_path / "r.csv"
    calls = _count_solves(monkeypatch)
    first = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2|0.4|1.5"}, backend="serial", out=out,
                         as_frame=False)
    assert len(calls) == 3 and [r["status"] for r in first] == ["ok", "ok", "error"]
    calls.clear()
    rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2:0.8:4"}, backend="serial", out=out,
                        as_frame=False)
    # 0.2 and 0.4 are in the file with status ok; 0.6 and 0.8 are new; the failed 1.5 is another study's row
    assert sorted(c["arrival_rate"] for c in calls) == [0.6, 0.8]
    assert [r["arrival_rate"] for r in rows] == [0.2, 0.4, 0.6, 0.8]
    assert all(abs(r["value"] - mm1_mean(r["arrival_rate"])) < 1e-12 for r in rows)
    table = read_table(out)
    assert [r["arrival_rate"] for r in table] == [0.2, 0.4, 0.6, 0.8, 1.5]  # grid order, foreign rows kept
    calls.clear()
    exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2:0.8:4"}, backend="serial", out=out)
    assert calls == []
    exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2:0.8:4"}, backend="serial", out=out, force=True)
    assert len(calls) == 4
    calls.clear()  # a failed point is recomputed, another tol is another point
    exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2|1.5"}, backend="serial", out=out)
    assert [c["arrival_rate"] for c in calls] == [1.5]
    calls.clear()
    exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2"}, backend="serial", out=out, tol=1e-6)
    assert len(calls) == 1


def test_a_killed_sweep_resumed_computes_only_the_missing_points(tmp_path, monkeypatch):
    out = tmp_path / "killed.csv"
    argv = [sys.executable, "-m", "exactq", "sweep", "jsq", "service_rates=1,2", "--over",
            "arrival_rate=2.5:2.8:16", "--method", "ctmc", "--backend", "serial", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists():
            done = len([r for r in read_table(out) if r.get("status") == "ok"])
            if done >= 1:
                break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len([r for r in read_table(out) if r.get("status") == "ok"])
    assert 1 <= done < 16  # killed part-way (16 points: more than one can finish between two polls)
    calls = _count_solves(monkeypatch)
    rows = exactq.sweep("jsq", {"service_rates": "1,2"}, {"arrival_rate": "2.5:2.8:16"}, method="ctmc",
                        backend="serial", out=out, as_frame=False)
    assert len(calls) == 16 - done and all(r["status"] == "ok" for r in rows)
    fresh = exactq.sweep("jsq", {"service_rates": "1,2"}, {"arrival_rate": "2.5:2.8:16"}, method="ctmc",
                         backend="serial", as_frame=False)
    assert [r["value"] for r in rows] == [r["value"] for r in fresh]  # the file keeps every digit


# --------------------------------------------------------------------- backends
STUDY = dict(model="jsq", fixed={"service_rates": "1,2"}, over={"arrival_rate": "1.5:2.7:6|3.5"}, method="ctmc")


def _study(over=None):
    return dict(STUDY, over=over or {"arrival_rate": "1.5|1.74|1.98|2.22|2.46|2.7|3.5"})


def _values(rows):
    return [(r["arrival_rate"], r["status"], r["value"], r["error_estimate"], r["n_states"], r["truncation"])
            for r in rows]


@pytest.fixture(scope="module")
def serial_rows():
    return exactq.sweep(**_study(), backend="serial", as_frame=False)


def test_processes_are_bit_identical_to_serial(serial_rows, monkeypatch):
    monkeypatch.setattr(BACKENDS, "PROBE_SECONDS", 0.0)  # no probe here: every point in the pool
    monkeypatch.setattr(BACKENDS, "POOL_THRESHOLD_SECONDS", 0.0)
    calls = _count_solves(monkeypatch)
    rows = exactq.sweep(**_study(), backend="processes", workers=2, as_frame=False)
    assert calls == []  # every point was solved in a worker
    assert _values(rows) == _values(serial_rows)
    assert serial_rows[-1]["status"] == "error" and "stability" in serial_rows[-1]["message"]


def test_processes_solve_small_work_here(monkeypatch):
    # the threshold raised so that a loaded machine (9 points > 0.5 s) still counts as small work
    monkeypatch.setattr(BACKENDS, "POOL_THRESHOLD_SECONDS", 60.0)
    calls = _count_solves(monkeypatch)
    rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.1:0.9:9"}, backend="processes", workers=2,
                        as_frame=False)
    assert len(calls) == 9 and all(r["status"] == "ok" for r in rows)  # no pool for a few milliseconds


def test_batches_follow_the_learnt_cost():
    planner = BACKENDS._Planner([{}] * 1000, None, 2)
    assert planner.next_batch() == [0]  # nothing known yet: one point
    planner.learn([0], 0.001)
    batch = planner.next_batch()
    assert abs(len(batch) - BACKENDS.TARGET_SECONDS / 0.001) <= 1 and batch[0] == 1
    heavy = BACKENDS._Planner([{}] * 4, [1.0, 8.0, 2.0, 4.0], 2)
    assert list(heavy.order) == [1, 3, 2, 0]  # the most expensive first


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=":0") as c:
        yield c


def test_dask_is_bit_identical_and_streams_rows(serial_rows, cluster, tmp_path):
    out = tmp_path / "d.json"
    seen = []

    def progress(event):
        seen.append((event["done"], len(read_table(out))))

    rows = exactq.sweep(**_study(), backend="dask", scheduler=cluster.scheduler_address, out=out,
                        progress=progress, as_frame=False)
    assert _values(rows) == _values(serial_rows)
    assert seen and all(in_file >= done for done, in_file in seen)  # each finished batch is on disk
    assert _values(read_table(out)) == _values(serial_rows)


def test_dask_cli_with_a_scheduler_address(cluster, tmp_path, capsys):
    out = tmp_path / "c.csv"
    code = main(["sweep", "mm1", "service_rate=1", "--over", "arrival_rate=0.25:0.75:3", "--backend", "dask",
                 "--scheduler", cluster.scheduler_address, "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = read_table(out)
    assert [abs(r["value"] - mm1_mean(r["arrival_rate"])) < 1e-12 for r in rows] == [True] * 3


def test_dask_local_cluster_when_no_address(serial_rows):
    pytest.importorskip("distributed")
    rows = exactq.sweep(**_study({"arrival_rate": "1.5|2.46|3.5"}), backend="dask", workers=1, as_frame=False)
    want = [r for r in serial_rows if r["arrival_rate"] in (1.5, 2.46, 3.5)]
    assert _values(rows) == _values(want)


def test_backend_and_scheduler_rules():
    with pytest.raises(ModelError, match="backend must be one of serial, processes, dask; got 'gpu'"):
        exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5"}, backend="gpu")
    with pytest.raises(ModelError, match="scheduler applies to the dask backend"):
        exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.5"}, backend="serial", scheduler="tcp://x:1")


# -------------------------------------------------------------------------- CLI
def test_cli_exit_status_0_1_2(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", "mm1", "service_rate=1", "--over", "arrival_rate=0.5|0.8", "--out", str(out),
                 "--backend", "serial"]) == 0
    assert "2 points (0 already in" in capsys.readouterr().out
    code = main(["sweep", "mm1", "service_rate=1", "--over", "arrival_rate=0.5|1.2", "--out", str(out),
                 "--backend", "serial"])
    captured = capsys.readouterr()
    assert code == 1 and "error at arrival_rate=1.2" in captured.err and "1 failed" in captured.out
    assert [r["status"] for r in read_table(out)][:2] == ["ok", "error"]  # the table is still written
    for argv, words in [
        (["--over", "arrival_rate=1:2:0"], "num must be an integer"),
        (["--over", "arrival_rat=1|2"], "unknown parameter 'arrival_rat'"),
        (["--over", "arrival_rate"], "--over must look like NAME=SPEC"),
        ([], "at least one --over"),
        (["--over", "arrival_rate=0.5", "--option", "bogus=1", "--method", "ctmc"], "option 'bogus'"),
    ]:
        code = main(["sweep", "mm1", "service_rate=1", *argv, "--out", str(out), "--backend", "serial"])
        err = capsys.readouterr().err
        assert code == 2 and words in err and err.count("\n") == 1
    code = main(["sweep", "mm1", "--over", "arrival_rate=0.5", "--out", str(tmp_path / "s.txt")])
    assert code == 2 and "out must end in .csv, .json, .parquet" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["sweep", "mm1", "service_rate=1", "--over", "arrival_rate=0.1:0.5:5", "--backend", "serial",
                 "--out", str(tmp_path / "p.csv")]) == 0
    assert "sweep" in term.getvalue() and "5/5" in term.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: quiet
    assert main(["sweep", "mm1", "service_rate=1", "--over", "arrival_rate=0.1:0.5:5", "--backend", "serial",
                 "--out", str(tmp_path / "q.csv")]) == 0
    assert sys.stderr.getvalue() == ""


def test_truncation_progress_line_for_a_long_solve(capsys, monkeypatch):
    records = []
    r = exactq.solve("jsq", method="ctmc", arrival_rate=2.4, service_rates="1,2", progress=records.append)
    history = r.info["truncation"]["history"]
    assert [x["level"] for x in records] == [h["level"] for h in history] and len(records) >= 2
    assert all(x["elapsed"] >= 0 and x["n_states"] > 0 for x in records)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "ctmc"]) == 0
    assert f"truncation level {history[0]['level']}: {history[0]['n_states']} states" in term.getvalue()
    term2 = _Terminal()
    monkeypatch.setattr(sys, "stderr", term2)
    assert main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "ctmc", "--json"]) == 0
    assert term2.getvalue() == ""  # quiet under --json
    term3 = _Terminal()
    monkeypatch.setattr(sys, "stderr", term3)
    assert main(["check", "mm1", "arrival_rate=0.5", "service_rate=1", "S=? [ n = 0 ]"]) == 0
    assert "truncation level" in term3.getvalue()


def test_progress_is_not_passed_to_methods_without_a_truncation():
    records = []
    r = exactq.solve("mm1", arrival_rate=0.5, service_rate=1, progress=records.append)
    assert records == [] and abs(r.value - 1.0) < 1e-12


def test_result_html_for_notebooks():
    r = exactq.solve("jsq", method="ctmc", arrival_rate=1.5, service_rates="1,2")
    html = r._repr_html_()
    level = r.info["truncation"]["level"]
    assert "<table>" in html and "mean_number" in html and "ctmc/direct" in html
    assert f"level {level}" in html and "error estimate" in html and f"{r.value:.12g}" in html
    b = exactq.solve("jsq", method="bounds", arrival_rate=1.5, service_rates="1,1")
    assert b.lower <= b.value <= b.upper
    assert f"[{b.lower:.12g}, {b.upper:.12g}]" in b._repr_html_()


def test_a_sweep_leaves_no_worker_behind(monkeypatch):
    monkeypatch.setattr(BACKENDS, "PROBE_SECONDS", 0.0)
    monkeypatch.setattr(BACKENDS, "POOL_THRESHOLD_SECONDS", 0.0)
    rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.1|0.2|0.3"}, backend="processes",
                        workers=2, as_frame=False)
    import multiprocessing

    assert multiprocessing.active_children() == [] and [r["status"] for r in rows] == ["ok"] * 3


def test_warm_start_meets_tol_and_skips_the_small_levels():
    """Each point starts at its neighbour's last but one level: fewer levels, the same answer within tol."""
    kw = dict(model="jsq", fixed={"service_rates": "1,2"}, over={"arrival_rate": "2.0:2.6:4"},
              measure="mean_number", method="ctmc", tol=1e-9, backend="serial", as_frame=False)
    cold = exactq.sweep(**kw)
    warm = exactq.sweep(**kw, warm_start=True)
    assert [r["status"] for r in warm] == ["ok"] * 4
    for c, w in zip(cold, warm):
        assert abs(w["value"] - c["value"]) <= 1e-8 * c["value"]
        assert w["error_estimate"] <= 1e-9 * w["value"]
    # the first point is cold in both; later ones start higher, so they need no more states to stop
    assert warm[0]["truncation"] == cold[0]["truncation"]
    assert all(w["truncation"] >= c["truncation"] for c, w in zip(cold[1:], warm[1:]))


def test_warm_start_hint_is_ignored_without_a_truncation():
    r = exactq.solve("mm1", "mean_number", method="closed-form", arrival_rate=0.5, warm_start=40)
    assert r.value == pytest.approx(1.0, abs=1e-12)
    a = exactq.solve("mm1", "mean_number", method="ctmc", arrival_rate=0.5)
    b = exactq.solve("mm1", "mean_number", method="ctmc", arrival_rate=0.5, warm_start=1)  # below the model's start
    assert a.value == b.value and a.info["truncation"]["history"][0]["level"] == \
        b.info["truncation"]["history"][0]["level"]
