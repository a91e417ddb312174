"""Progress of long jobs: the job events, the weighted ETA, the status line and the CLI's --progress."""

import io
import sys
import time

import numpy as np
import pytest

from exactq import reproduce as rep
from exactq.cli import main
from exactq.progress import Job, StatusLine, describe_event, status_line, steps


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_every_event_knows_the_totals_from_the_first_point():
    events, clock = [], _Clock()
    job = Job("demo", events.append, clock=clock)
    a = job.stage("first table", [1.0, 2.0])
    b = job.stage("second table", [3.0])
    for _ in a.each(["x", "y"], labels=["x = 1", "x = 2"]):
        clock.now += 1.0
    for _ in b.each(["z"]):
        clock.now += 1.0
    job.close()
    assert all(e["total"] == 3 and e["weight_total"] == 6.0 and e["stages"] == 2 for e in events)
    assert [(e["event"], e["stage_index"], e["item"], e["done"]) for e in events] == [
        ("start", 1, "x = 1", 0), ("done", 1, "x = 1", 1), ("start", 1, "x = 2", 1), ("done", 1, "x = 2", 2),
        ("start", 2, "z", 2), ("done", 2, "z", 3), ("end", None, None, 3)]
    assert events[-1]["elapsed"] == 3.0


def test_the_eta_is_weighted_by_the_points_sizes():
    """Two cheap points done in 1 s each, one eight times larger left: 8 s, not the unweighted 1 s."""
    events, clock = [], _Clock()
    job = Job("demo", events.append, clock=clock)
    stage = job.stage("t", [1.0, 1.0, 8.0])
    it = stage.each([0, 1, 2])
    for i in it:
        if i < 2:
            clock.now += 1.0
        else:
            start = events[-1]
            clock.now += 3.0
            stage.detail("three seconds into the big point")
            mid = events[-1]
            clock.now += 5.0
    assert start["event"] == "start" and start["eta"] == pytest.approx(8.0)
    assert mid["event"] == "detail" and mid["eta"] == pytest.approx(5.0) and not mid["eta_exceeded"]
    assert events[-1]["event"] == "done" and events[-1]["eta"] == pytest.approx(0.0)


def test_an_overrunning_point_is_flagged_and_never_reads_zero_time_left():
    events, clock = [], _Clock()
    job = Job("demo", events.append, clock=clock)
    stage = job.stage("t", [1.0, 1.0, 1.0])
    for i in stage.each([0, 1, 2]):
        clock.now += 1.0 if i == 0 else 0.0
        if i == 1:
            clock.now += 2.5  # predicted 1 s
            stage.detail("still running")
            clock.now += 0.5
    over = [e for e in events if e["event"] == "detail"][0]
    assert over["eta_exceeded"] and over["eta"] == pytest.approx(1.0)  # the point not yet started
    assert "more than 0:01 left" in describe_event(over)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_eta_is_never_off_by_more_than_the_work_left(seed):
    """Costs proportional to the weights up to +-30 %: every ETA after the first point is within the time left."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.1, 10.0, 30)
    costs = weights * rng.uniform(0.7, 1.3, 30)
    events, clock = [], _Clock()
    job = Job("demo", events.append, clock=clock)
    stage = job.stage("t", weights)
    for i in stage.each(range(30)):
        clock.now += costs[i]
    total = costs.sum()
    for e in events:
        if e["eta"] is not None and e["event"] == "done" and e["done"] < 30:
            left = total - e["elapsed"]
            assert abs(e["eta"] - left) <= left


def test_a_stage_must_get_the_points_it_planned():
    job = Job("demo")
    with pytest.raises(ValueError, match="planned 2 points; got 3"):
        list(job.stage("t", [1, 1]).each([1, 2, 3]))
    assert list(steps(None, [1, 2])) == [1, 2]


def test_the_status_line_on_a_terminal_is_rewritten_ticks_and_is_erased():
    term = _Terminal()
    line = StatusLine(term, refresh=0.05)
    assert line.live
    job = Job("demo", line)
    stage = job.stage("slow table", [1.0, 1.0])
    for i in stage.each([0, 1]):
        if i == 1:
            before = term.getvalue()
            time.sleep(0.3)  # no event: the ticker redraws the line (elapsed time moves)
            assert len(term.getvalue()) > len(before)
    job.close()
    line.close()
    out = term.getvalue()
    assert "\n" not in out and "\r" in out and "demo" in out and "slow table" in out
    assert out.endswith("\r") and out.rstrip("\r").endswith(" ")  # erased at the end
    assert line.thread is None


def test_off_a_terminal_it_writes_plain_lines_only_when_asked():
    quiet = io.StringIO()
    assert status_line(None, quiet) is None
    log = io.StringIO()
    line = status_line(True, log)
    assert line is not None and not line.live
    job = Job("demo", line)
    for _ in job.stage("t", [1, 1, 1]).each("abc"):
        pass
    job.close()
    line.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 5  # the stage's start, three points done, the end
    assert lines[-1].startswith("demo 100% [##########] done: 3 points")


@pytest.fixture
def slow_dummy():
    @rep.register_reproduction("dummy-progress", "test: reports two points")
    def with_progress(out_dir, *, scale="default", progress=None):
        job = Job("dummy-progress", progress)
        for _ in job.stage("table", [1.0, 1.0]).each(["a", "b"]):
            pass
        job.close()
        return f"table at scale {scale}"

    @rep.register_reproduction("dummy-silent", "test: no progress parameter")
    def silent(out_dir):
        return "silent table"

    yield
    rep._REPRODUCTIONS.pop("dummy-progress")
    rep._REPRODUCTIONS.pop("dummy-silent")


def test_reproduce_reports_progress_and_wraps_reproductions_that_do_not(slow_dummy):
    events = []
    assert rep.reproduce("dummy-progress", scale="smoke", progress=events.append) == "table at scale smoke"
    assert [e["event"] for e in events] == ["start", "done", "start", "done", "end"]
    events.clear()
    assert rep.reproduce("dummy-silent", progress=events.append) == "silent table"
    assert [(e["event"], e["total"]) for e in events] == [("start", 1), ("done", 1), ("end", 1)]
    with pytest.raises(rep.ModelError, match="scale must be one of smoke, default, full"):
        rep.reproduce("dummy-silent", scale="huge")


def test_cli_progress_goes_to_stderr_on_a_terminal_or_with_the_flag(slow_dummy, capsys, monkeypatch):
    assert main(["reproduce", "dummy-progress"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "table at scale default" and err == ""  # not a terminal: quiet
    assert main(["reproduce", "dummy-progress", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "table at scale default"
    assert "dummy-progress" in err and "done: 2 points" in err and "\r" not in err
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["reproduce", "dummy-progress"]) == 0
    assert "dummy-progress" in term.getvalue() and "\r" in term.getvalue()
    term2 = _Terminal()
    monkeypatch.setattr(sys, "stderr", term2)
    assert main(["reproduce", "dummy-progress", "--no-progress"]) == 0
    assert term2.getvalue() == ""
    assert "table at scale default" in capsys.readouterr().out


def test_certify_reports_its_steps_weighted_and_in_order():
    import exactq

    events = []
    r = exactq.solve("jsq", "mean_response_time", method="ctmc", truncation=30, certify=True, lump=False,
                     arrival_rate=1.5, service_rates="1,2", progress=events.append)
    cert = [e for e in events if e.get("task") == "certify"]
    assert r.lower <= r.value <= r.upper and cert
    assert [e["event"] for e in cert][-1] == "end" and cert[-1]["done"] == cert[-1]["total"]
    done = [e["item"] for e in cert if e["event"] == "done"]
    assert done == [e["item"] for e in cert if e["event"] == "start"]
    assert done[-1].startswith("solve for the error bound") or done[-1] == "solve in ball arithmetic"


def test_certify_of_a_level_chain_names_its_iterative_solves():
    from exactq.solvers.certify import enclose_stationary
    from exactq.solvers.stationary import solve_stationary

    chain = exactq_model_level_chain()
    sol = solve_stationary(chain)
    events = []
    enclose_stationary(chain, sol, progress=events.append)
    items = [e["item"] for e in events if e["event"] == "done"]
    assert items == ["float solution (given)", "set up the level solver", "no refinement (iterative solves)",
                     "solve for the residual bound (A v = 1)", "solve for the error bound (A w = r)"]
    assert events[-1]["weight_done"] == events[-1]["weight_total"]


def exactq_model_level_chain():
    import exactq

    m = exactq.model("power-of-d", servers=3, d=2, arrival_rate=0.7)
    return m.level_chain(None)


def test_solve_progress_flag_off_a_terminal(capsys):
    assert main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "ctmc", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "truncation level" in err and "\r" not in err and "truncation" not in out
    assert main(["solve", "jsq", "arrival_rate=2.4", "service_rates=1,2", "--method", "ctmc"]) == 0
    assert capsys.readouterr().err == ""


def test_the_sweep_reports_before_its_first_point_and_weighs_the_eta():
    """Issue 24: the bar shows at once (a done=0 event) and the ETA weighs points by their cost."""
    from exactq.progress import weighted_eta
    from exactq.sweep import sweep

    events = []
    sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2:0.8:4"}, measure="mean_number", backend="serial",
          progress=events.append, as_frame=False)
    assert events[0]["done"] == 0 and events[0]["total"] == 4 and weighted_eta(events[0]) is None
    assert events[-1]["done"] == 4 and events[-1]["weight_done"] == events[-1]["weight_total"]
    assert weighted_eta(events[-1]) == 0.0
    # a cheap point done, an expensive one left: the ETA scales with the cost left, not the count
    assert weighted_eta({"done": 1, "total": 2, "elapsed": 1.0, "weight_done": 1.0, "weight_total": 11.0}) == 10.0
