"""Progress reports: a status line for long jobs, a bar for sweeps, a line for long truncations.

The library reports progress only through callbacks (``progress=`` of
:func:`exactq.solve`, :func:`exactq.check`, :func:`exactq.sweep` and
:func:`exactq.reproduce.reproduce`); the objects here are such callbacks, which the
command line passes when its standard error is a terminal (or when ``--progress``
asks for them). They write to the stream they are given, never to standard output.

:class:`Job` and :class:`Stage`
    The producer side for a job made of planned, weighted points (a reproduction's
    tables, a certificate's solves): it sends *job events* to a callback.
:class:`StatusLine`
    The consumer for job events (and truncation records): one line rewritten in place
    on a terminal, refreshed every second; plain lines elsewhere.
:class:`TruncationLine`
    For one long solve: the adaptive truncation's level, states, last change and
    elapsed time on one line that is rewritten in place, and cleared at the end.
:func:`sweep_bar`
    For a sweep: a tqdm bar with the points done, the failures and an ETA.

Job events
----------
A job event is a dict with

``task``
    The job (``"power-of-d"``, ``"certify"``).
``event``
    ``"start"`` (a point begins), ``"done"`` (a point ended), ``"detail"`` (news from
    inside the running point, in ``detail``) or ``"end"`` (the job finished).
``stage``, ``stage_index``, ``stages``
    The part running (a table's title), its number (from 1) and how many there are.
``item``
    The point running or just done (``"n = 7"``), or None.
``done``, ``total``
    Points done and planned, over all stages (every stage is planned before the first
    point runs, so ``total`` is known from the first event).
``weight``, ``weight_done``, ``weight_total``
    The running point's predicted cost and the sums over the points done and planned
    (any unit: only ratios matter).
``elapsed``, ``eta``, ``eta_exceeded``
    Seconds since the job started; the estimated seconds left, or None before the
    first point with a weight has finished; ``eta_exceeded`` is True when the running
    point has already taken longer than its weight predicted (``eta`` then counts only
    the points not yet started, and is a lower bound).
``time``
    The clock at the event (``time.perf_counter()``), so that a display can count the
    ETA down between events.

The ETA is the weighted rate of the points done, ``elapsed_at_last_done / weight_done``
seconds per unit, times the weight left, less what the running point has used of its
own share: when the weights are proportional to the true costs it is exact, and it
never reads zero while a point with a positive weight is still running within its
prediction.
"""

from __future__ import annotations

import math
import shutil
import sys
import threading
import time
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

__all__ = ["Job", "Stage", "steps", "StatusLine", "status_line", "TruncationLine", "SweepBar", "sweep_bar",
           "is_terminal", "describe_record", "describe_event", "format_seconds"]


def is_terminal(stream: IO | None = None) -> bool:
    """Whether ``stream`` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def describe_record(record: dict) -> str:
    """One line for a truncation record (``level``, ``n_states``, ``change``, ``elapsed``).

    Examples
    --------
    >>> describe_record({"level": 40, "n_states": 1681, "change": 2.5e-07, "elapsed": 1.25})
    'truncation level 40: 1681 states, last change 2.50e-07, 1.2 s'
    >>> describe_record({"level": 25, "n_states": 676, "change": float("inf"), "elapsed": 0.01})
    'truncation level 25: 676 states, first level, 0.0 s'
    """
    parts = []
    level = record.get("level")
    head = "truncation" if level is None else f"truncation level {level}"
    if record.get("n_states") is not None:
        parts.append(f"{record['n_states']} states")
    elif record.get("phases") is not None:
        parts.append(f"{record['phases']} phases")
    change = record.get("change")
    if change is None or (isinstance(change, float) and not math.isfinite(change)):
        parts.append("first level")
    else:
        parts.append(f"last change {change:.2e}")
    if record.get("elapsed") is not None:
        parts.append(f"{record['elapsed']:.1f} s")
    return f"{head}: {', '.join(parts)}"


class TruncationLine:
    """A progress callback for :func:`exactq.solve`: one line, rewritten at each level.

    Job events (``certify=True`` reports its solves as the job ``certify``) are shown
    with :func:`describe_event`.

    Parameters
    ----------
    stream : file, optional
        Where the line goes (default: standard error).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> line = TruncationLine(out)
    >>> line({"level": 10, "n_states": 121, "change": 1e-3, "elapsed": 0.5})
    >>> line.close()
    >>> out.getvalue().count("truncation level 10: 121 states")
    1
    """

    def __init__(self, stream: IO | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.width = 0

    def __call__(self, record: dict) -> None:
        # a job event (e.g. the certificate's solves after the truncation) gets the status-line text
        text = describe_event(record) if "task" in record else describe_record(record)
        pad = max(self.width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def close(self) -> None:
        """Erase the line (the result is printed in its place)."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class SweepBar:
    """A progress callback for :func:`exactq.sweep`: a tqdm bar with an ETA.

    ``total`` is learnt from the first report (the points left to compute after
    resumption); failures are shown beside the bar.
    """

    def __init__(self, stream: IO | None = None, desc: str = "sweep"):
        self.stream = sys.stderr if stream is None else stream
        self.desc = desc
        self.bar: Any = None

    def __call__(self, event: dict) -> None:
        if self.bar is None:
            from tqdm import tqdm

            tqdm.monitor_interval = 0  # no monitor thread (the process pool forks)
            # tqdm's own ETA counts points as equal; ours (weighted_eta) weighs them by their cost
            self.bar = tqdm(total=event["total"], file=self.stream, desc=self.desc, unit="point",
                            dynamic_ncols=True, leave=False,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        self.bar.update(event["done"] - self.bar.n)
        post = {"eta": format_seconds(weighted_eta(event))}
        if event.get("failed"):
            post["failed"] = event["failed"]
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def weighted_eta(event: dict) -> float | None:
    """Seconds left from a sweep event: elapsed time per unit of cost done, times the cost left.

    ``weight_done``/``weight_total`` are the predicted costs of the points (their
    first truncation's states); without them every point weighs 1. None before the
    first point is done (no rate known yet).

    Examples
    --------
    >>> weighted_eta({"done": 9, "total": 10, "elapsed": 9.0, "weight_done": 9.0, "weight_total": 27.0})
    18.0
    >>> weighted_eta({"done": 0, "total": 10, "elapsed": 0.5}) is None
    True
    """
    done = event.get("weight_done", event.get("done", 0))
    total = event.get("weight_total", event.get("total", 0))
    if not done or event.get("elapsed") is None:
        return None
    return max(float(event["elapsed"]) * (total - done) / done, 0.0)


def sweep_bar(enabled: bool | None = None, stream: IO | None = None) -> SweepBar | None:
    """A :class:`SweepBar` when ``enabled`` (default: when ``stream`` is a terminal), else ``None``."""
    if enabled is None:
        enabled = is_terminal(stream)
    return SweepBar(stream) if enabled else None


def format_seconds(seconds: float | None) -> str:
    """``m:ss`` (or ``h:mm:ss``) for a duration; ``?`` for None.

    Examples
    --------
    >>> format_seconds(5.4), format_seconds(83), format_seconds(3725), format_seconds(None)
    ('0:05', '1:23', '1:02:05', '?')
    """
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(max(seconds, 0.0)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Stage:
    """One planned part of a :class:`Job`: its points' predicted costs (weights).

    Made by :meth:`Job.stage`; iterate over the points with :meth:`each`.
    """

    def __init__(self, job: "Job", title: str, weights: Sequence[float], labels: Sequence[str] | None):
        self.job = job
        self.title = title
        self.weights = [max(float(w), 0.0) for w in weights]
        if labels is not None and len(labels) != len(self.weights):
            raise ValueError(f"stage {title!r}: {len(labels)} labels for {len(self.weights)} weights")
        self.labels = None if labels is None else [str(x) for x in labels]

    def each(self, items: Iterable, labels: Sequence[str] | None = None) -> Iterator:
        """Yield ``items``, reporting each as a point of this stage (start and done).

        ``items`` must have as many entries as the stage has weights; ``labels`` (or
        the stage's own) name the points, else ``str(item)``.
        """
        items = list(items)
        if len(items) != len(self.weights):
            raise ValueError(f"stage {self.title!r} planned {len(self.weights)} points; got {len(items)}")
        labels = labels if labels is not None else self.labels
        for i, item in enumerate(items):
            self.job._start(self, self.weights[i], labels[i] if labels is not None else str(item))
            yield item
            self.job._done()

    def detail(self, record: dict | str) -> None:
        """Forward news from inside the running point: a truncation record or a line of text."""
        self.job._detail(record)


class Job:
    """A job of planned, weighted points that reports job events (module docstring) to a callback.

    Plan every stage first (:meth:`stage`), then run the points through
    :meth:`Stage.each`; :meth:`close` sends the final event. With ``callback=None``
    nothing is reported (and nothing is timed beyond a clock read per point).

    Parameters
    ----------
    task : str
        The job's name, in every event.
    callback : callable, optional
        Receives each event (a dict; module docstring).
    clock : callable, optional
        Seconds (default ``time.perf_counter``); tests pass a fake clock.

    Examples
    --------
    Two points of weights 1 and 3: after the first took 2 s, the ETA is 3 x 2 = 6 s.

    >>> events, now = [], [0.0]
    >>> job = Job("demo", events.append, clock=lambda: now[0])
    >>> stage = job.stage("table", [1.0, 3.0], labels=["a", "b"])
    >>> for item in stage.each(["a", "b"]):
    ...     now[0] += 2.0 if item == "a" else 6.0
    >>> job.close()
    >>> [(e["event"], e["item"], e["eta"]) for e in events]
    [('start', 'a', None), ('done', 'a', 6.0), ('start', 'b', 6.0), ('done', 'b', 0.0), ('end', None, 0.0)]
    """

    def __init__(self, task: str, callback: Callable[[dict], None] | None = None, *,
                 clock: Callable[[], float] = time.perf_counter):
        self.task = task
        self.callback = callback
        self.clock = clock
        self.stages: list[Stage] = []
        self.t0 = clock()
        self.done = 0
        self.weight_done = 0.0
        self.t_done = 0.0  # elapsed at the last point done
        self.current: tuple[Stage, float, str, float] | None = None
        self.closed = False

    def stage(self, title: str, weights: Sequence[float], labels: Sequence[str] | None = None) -> Stage:
        """Plan a stage of ``len(weights)`` points with these predicted costs."""
        s = Stage(self, title, weights, labels)
        self.stages.append(s)
        return s

    @property
    def total(self) -> int:
        return sum(len(s.weights) for s in self.stages)

    @property
    def weight_total(self) -> float:
        return sum(sum(s.weights) for s in self.stages)

    def eta(self, now: float | None = None) -> tuple[float | None, bool]:
        """Seconds left (None before any weight is done) and whether the running point overran."""
        if self.weight_done <= 0:
            return None, False
        now = self.clock() if now is None else now
        rate = self.t_done / self.weight_done
        left = self.weight_total - self.weight_done
        if self.current is None:
            return rate * left, False
        _, w, _, started = self.current
        own = rate * w - (now - started)  # what the running point has left of its predicted share
        if own < 0:
            return rate * (left - w), True
        return rate * (left - w) + own, False

    def _emit(self, event: str, point: tuple | None = None, **extra) -> None:
        """Send one event; ``point`` is (stage, weight, label) of the point it is about."""
        if self.callback is None:
            return
        now = self.clock()
        point = point or (self.current[:3] if self.current else None)
        stage, weight, item = point if point else (None, 0.0, None)
        if stage is None and event != "end":
            upcoming = self._stage_at()
            stage = self.stages[upcoming] if upcoming < len(self.stages) else None
        eta, exceeded = self.eta(now)
        self.callback({"task": self.task, "event": event,
                       "stage": stage.title if stage is not None else None,
                       "stage_index": self.stages.index(stage) + 1 if stage is not None else None,
                       "stages": len(self.stages), "item": item, "done": self.done, "total": self.total,
                       "weight": weight, "weight_done": self.weight_done, "weight_total": self.weight_total,
                       "elapsed": now - self.t0, "eta": eta, "eta_exceeded": exceeded, "time": now, **extra})

    def _stage_at(self) -> int:
        """The index of the stage the next point belongs to (``len(stages)`` when all are done)."""
        k = self.done
        for i, s in enumerate(self.stages):
            if k < len(s.weights):
                return i
            k -= len(s.weights)
        return len(self.stages)

    def _start(self, stage: Stage, weight: float, label: str) -> None:
        self.current = (stage, weight, label, self.clock())
        self._emit("start")

    def _done(self) -> None:
        if self.current is None:
            return
        point = self.current[:3]
        self.current = None
        self.done += 1
        self.weight_done += point[1]
        self.t_done = self.clock() - self.t0
        self._emit("done", point)

    def _detail(self, record: dict | str) -> None:
        text = record if isinstance(record, str) else describe_record(record)
        self._emit("detail", detail=text)

    def close(self) -> None:
        """Send the ``end`` event (once)."""
        if not self.closed:
            self.closed = True
            self.current = None
            self._emit("end")


def steps(stage: Stage | None, items: Iterable, labels: Sequence[str] | None = None) -> Iterator:
    """``stage.each(items, labels)``, or plain iteration when there is no stage (no progress asked).

    >>> list(steps(None, [1, 2]))
    [1, 2]
    """
    return stage.each(items, labels) if stage is not None else iter(items)


def describe_event(event: dict, now: float | None = None) -> str:
    """One line for a job event; ``now`` (a clock reading) counts the ETA down since the event.

    Examples
    --------
    >>> e = {"task": "power-of-d", "event": "start", "stage": "E[T] against n", "stage_index": 1, "stages": 4,
    ...      "item": "n = 9", "done": 7, "total": 40, "weight_done": 30.0, "weight_total": 100.0,
    ...      "elapsed": 83.0, "eta": 130.0, "eta_exceeded": False, "time": 10.0}
    >>> describe_event(e)
    'power-of-d  30% [###-------] 1/4 E[T] against n: n = 9 (8/40) | 1:23 elapsed, about 2:10 left'
    >>> describe_event(e, now=20.0).endswith('1:33 elapsed, about 2:00 left')
    True
    """
    since = 0.0 if now is None or event.get("time") is None else max(now - event["time"], 0.0)
    total_w = event.get("weight_total") or 0.0
    frac = min(max(event.get("weight_done", 0.0) / total_w, 0.0), 1.0) if total_w > 0 else \
        (event["done"] / event["total"] if event.get("total") else 0.0)
    if event.get("event") == "end" and event.get("done") == event.get("total"):
        frac = 1.0
    bar = "#" * int(frac * 10) + "-" * (10 - int(frac * 10))
    head = f"{event['task']} {int(frac * 100):3d}% [{bar}]"
    if event.get("event") == "end":
        return f"{head} done: {event['done']} points in {format_seconds(event['elapsed'])}"
    where = ""
    if event.get("stage"):
        where = f" {event['stage_index']}/{event['stages']} {event['stage']}"
    if event.get("item") is not None:
        running = event.get("event") in ("start", "detail")
        where += f": {event['item']} ({event['done'] + (1 if running else 0)}/{event['total']})"
    eta = event.get("eta")
    if eta is None:
        left = "estimating time left"
    elif event.get("eta_exceeded") or (eta - since <= 0 and event.get("event") in ("start", "detail")):
        left = (f"more than {format_seconds(max(eta - since, 0.0))} left" if eta - since > 0 else
                "the running point takes longer than predicted")
    else:
        left = f"about {format_seconds(max(eta - since, 0.0))} left"
    text = f"{head}{where} | {format_seconds(event['elapsed'] + since)} elapsed, {left}"
    if event.get("detail"):
        text += f" | {event['detail']}"
    return text


class StatusLine:
    """A progress callback for job events (and truncation records): one status line on ``stream``.

    On a terminal (``live=True``) the line is rewritten in place, cut to the terminal's
    width and refreshed every second by a daemon thread (elapsed time and ETA keep
    moving during a long point); :meth:`close` erases it. Elsewhere (``live=False``,
    e.g. ``--progress`` into a log file) it writes one line per point done and per
    stage, and news from inside a point at most every ``every`` seconds.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> line = StatusLine(out, live=False)
    >>> job = Job("demo", line)
    >>> for x in job.stage("table", [1, 1]).each(["a", "b"]):
    ...     pass
    >>> job.close(); line.close()
    >>> out.getvalue().count("\\n"), "demo 100% [##########] done: 2 points" in out.getvalue()
    (4, True)
    """

    def __init__(self, stream: IO | None = None, *, live: bool | None = None, every: float = 10.0,
                 refresh: float = 1.0):
        self.stream = sys.stderr if stream is None else stream
        self.live = is_terminal(self.stream) if live is None else bool(live)
        self.every = every
        self.refresh = refresh
        self.width = 0
        self.last: dict | None = None
        self.last_detail = -math.inf
        self.last_stage = None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def _text(self, event: dict, now: float | None = None) -> str:
        if "task" in event:
            return describe_event(event, now)
        return describe_record(event)

    def _write_live(self, text: str) -> None:
        cols = shutil.get_terminal_size((100, 20)).columns - 1
        if len(text) > cols:
            text = text[:max(cols - 3, 0)] + "..."
        pad = max(self.width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def __call__(self, event: dict) -> None:
        with self.lock:
            if self.live:
                self.last = event
                self._write_live(self._text(event))
                if self.thread is None and self.refresh and "task" in event and event.get("event") != "end":
                    self.thread = threading.Thread(target=self._tick, daemon=True, name="exactq-progress")
                    self.thread.start()
                return
            kind = event.get("event")
            now = time.monotonic()
            if kind == "detail" and now - self.last_detail < self.every:
                return
            if kind == "start" and event.get("stage") == self.last_stage:
                return  # a line per point done, and one when a stage begins
            self.last_stage = event.get("stage", self.last_stage)
            if kind == "detail":
                self.last_detail = now
            self.stream.write(self._text(event) + "\n")
            self.stream.flush()

    def _tick(self) -> None:
        while not self.stop.wait(self.refresh):
            with self.lock:
                if self.last is not None and "task" in self.last and self.last.get("event") != "end":
                    self._write_live(self._text(self.last, time.perf_counter()))

    def close(self) -> None:
        """Stop refreshing and erase the line (a terminal) so that the result prints in its place."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
            self.thread = None
        with self.lock:
            if self.live and self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width = 0


def status_line(enabled: bool | None = None, stream: IO | None = None) -> StatusLine | None:
    """A :class:`StatusLine` on ``stream`` (default standard error) when ``enabled``, else None.

    ``enabled=None`` means: when ``stream`` is a terminal. ``enabled=True`` off a
    terminal gives plain lines (``live=False``).
    """
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = is_terminal(stream)
    return StatusLine(stream) if enabled else None
