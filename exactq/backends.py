"""Where the points of a sweep are solved: this process, a local process pool, or Dask.

Every backend runs :func:`run_batch` (each point by :func:`run_point`) on batches of
*tasks* (plain data: the model's name and parameters, measure, method, tol and
options; never a built chain), on one BLAS thread per point, so that the values are
bit-identical across backends. Nothing a point computes reaches another point through
the process: a warm start (``sweep(..., warm_start=True)``) is a level passed in the
task (``task["warm_start"]``), which :func:`run_batch` sets from the point solved
before it in the same batch (the serial backend, from the one solved before it).

Scheduling
----------
* **Most expensive first.** When a point's method is the adaptive truncation driver,
  its cost is predicted by the size of its first truncation level (the method's
  ``size`` and ``start`` settings), and the points are dispatched from the largest
  down, so that the last task to finish is a cheap one.
* **Batches.** Points are grouped so that a task takes about :data:`TARGET_SECONDS`
  (the cost per point, or per predicted state, is learnt from the finished tasks),
  and no batch takes more than its share of the remaining work: millisecond points
  travel in hundreds, one-second points alone.
* **No pool for small work.** The ``processes`` backend first solves points in this
  process for :data:`PROBE_SECONDS`; when the rest would take less than
  :data:`POOL_THRESHOLD_SECONDS` it finishes here, so a pool is started only when it
  pays, and ``processes`` is not slower than ``serial``.

The process pool forks where the platform allows it (the catalogue is loaded once, in
this process), and its workers ignore Ctrl-C, which ends the sweep from here. A worker
whose sweep process dies (``kill -9``) exits quietly: the kernel ends it with the
parent (Linux), and elsewhere it exits after its batch instead of writing to a broken
pipe. The Dask
backend submits the same batches to a ``dask.distributed`` cluster and hands each
finished batch back as it completes.
"""

from __future__ import annotations

import collections
import math
import os
import queue
import time
import warnings
from typing import Any, Callable

from .errors import ModelError

__all__ = ["run_tasks", "run_point", "run_batch", "TARGET_SECONDS", "PROBE_SECONDS", "POOL_THRESHOLD_SECONDS"]

#: the wall time a batch of points aims at
TARGET_SECONDS = 0.25
#: how long the processes backend solves points itself before deciding on a pool
PROBE_SECONDS = 0.05
#: remaining work (predicted seconds) below which no pool is started
POOL_THRESHOLD_SECONDS = 0.5
#: how often the serial backend hands finished rows on (seconds)
FLUSH_SECONDS = 0.25

OnDone = Callable[[list, list], None]


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_tasks(tasks: list[dict], *, backend: str, scheduler: Any = None, workers: int | None = None,
              on_done: OnDone, weights: list[float] | None = None) -> None:
    """Solve ``tasks`` on ``backend``; call ``on_done(indices, rows)`` for each finished batch.

    ``indices`` are positions in ``tasks``; batches finish in any order. ``weights``
    (the tasks' relative costs, :func:`task_weights`) are computed here when not given.
    """
    if not tasks:
        return
    if backend == "serial":
        _serial(tasks, list(range(len(tasks))), on_done)
    elif backend == "processes":
        _processes(tasks, workers or default_workers(), on_done, weights)
    elif backend == "dask":
        _dask(tasks, scheduler, workers, on_done, weights)
    else:
        raise ModelError(f"backend must be one of serial, processes, dask; got {backend!r}")


# ---------------------------------------------------------------------- points
def _one_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


def _plain(x: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists (non-finite floats kept)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def run_point(task: dict) -> dict:
    """Solve one point of a sweep and return its row; a failure is a row with ``status="error"``.

    ``task`` holds only plain data (the model's name and parameters, measure, method,
    tol, method options, the other :func:`exactq.solve` keywords, and optionally
    ``warm_start``, a first truncation level), so that it can be shipped to another
    process or machine.

    Examples
    --------
    M/M/1 at load 1/2 holds one job on average:

    >>> row = run_point({"model": "mm1", "params": {"arrival_rate": 0.5, "service_rate": 1.0},
    ...                  "measure": "mean_number", "method": "closed-form", "tol": 1e-9})
    >>> row["status"], abs(row["value"] - 1.0) < 1e-12
    ('ok', True)
    >>> bad = run_point({"model": "mm1", "params": {"arrival_rate": 2.0, "service_rate": 1.0},
    ...                  "measure": "mean_number", "method": "auto", "tol": 1e-9})
    >>> bad["status"], bad["value"] is None
    ('error', True)
    """
    return _solve_point(task)[0]


def _solve_point(task: dict) -> tuple[dict, int | None]:
    """The row of a point, and the level a neighbour's truncation may start at (the last but one it solved)."""
    from .api import solve
    from .errors import ExactqError

    row: dict = dict(task["params"])
    row.update(measure=task["measure"], method=task["method"], tol=task["tol"], value=None, lower=None, upper=None,
               error_estimate=None, n_states=None, truncation=None, seconds=None, method_used=None)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = solve(task["model"], task["measure"], method=task["method"], tol=task["tol"],
                        options=task.get("options") or None, warm_start=task.get("warm_start"),
                        **(task.get("solve") or {}), **task["params"])
    except ExactqError as exc:
        row.update(seconds=time.perf_counter() - t0, status="error", message=_one_line(str(exc)) or type(exc).__name__)
        return row, None
    except Exception as exc:  # noqa: BLE001 -- a failed point is a row, whatever failed
        row.update(seconds=time.perf_counter() - t0, status="error",
                   message=f"internal error: {type(exc).__name__}: {_one_line(str(exc))}")
        return row, None
    trunc = res.info.get("truncation") if isinstance(res.info, dict) else None
    levels = [h.get("level") for h in (trunc.get("history") or [])] if isinstance(trunc, dict) else []
    warm = levels[-2] if len(levels) >= 2 and isinstance(levels[-2], int) else None  # its change to the last met tol
    row.update(value=_plain(res.value), lower=_plain(res.lower), upper=_plain(res.upper),
               error_estimate=_plain(res.error_estimate), n_states=res.n_states,
               truncation=trunc.get("level") if isinstance(trunc, dict) else None,
               seconds=res.seconds or time.perf_counter() - t0, method_used=res.method, status="ok",
               message="; ".join(f"warning: {_one_line(str(w.message))}" for w in caught) or None)
    return row, warm


def _warm_key(task: dict) -> tuple:
    """The points whose truncations may warm-start each other: same model, measure, method and settings."""
    return (task["model"], task["measure"], task["method"], task["tol"],
            repr(sorted((task.get("options") or {}).items())), repr(sorted((task.get("solve") or {}).items())))


def _solve_in_turn(tasks: list[dict], levels: dict) -> list[dict]:
    """Solve tasks in order; a task asking to be warm (``task["warm"]``) starts where the last of its study stopped.

    ``levels`` (warm key -> level) is the caller's, so the warm levels live in this call, never in the process.
    """
    rows = []
    for task in tasks:
        if task.get("warm"):
            key = _warm_key(task)
            task = dict(task, warm_start=levels.get(key)) if key in levels else task
            row, level = _solve_point(task)
            if level is not None:
                levels[key] = level
        else:
            row = _solve_point(task)[0]
        rows.append(row)
    return rows


def run_batch(tasks: list[dict], *, pinned: bool = False) -> tuple[list[dict], float]:
    """Solve a batch of points on one BLAS thread; return the rows and the wall time.

    This is what every backend runs (a worker process, a Dask worker, or this process),
    so that every backend computes every point the same way. ``pinned``: the caller's
    BLAS pools are limited to one thread already (a pool worker). A warm point starts at
    the level of the point of its study solved before it in this batch.
    """
    t0 = time.perf_counter()
    if pinned:
        rows = _solve_in_turn(tasks, {})
    else:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            rows = _solve_in_turn(tasks, {})
    return rows, time.perf_counter() - t0


# ---------------------------------------------------------------------- costs
def _cost_hint(task: dict) -> float | None:
    """Predicted relative cost of a point: the states of its first truncation level, if known."""
    from .api import model as build, resolve_method
    from .catalogue import check_method_for

    try:
        m = build(task["model"], **task["params"])
        name, _ = resolve_method(m, task["method"])
        spec = check_method_for(m, name)
    except Exception:  # noqa: BLE001 -- an invalid point costs nothing (it fails at once)
        return 0.0
    hooks = spec.protocol.bind(m)
    if spec.driver != "adaptive" or not hooks.infinite:
        return None
    size, start = hooks.size, hooks.start
    if not (callable(size) and callable(start)):
        return None
    try:
        truncation = (task.get("solve") or {}).get("truncation")
        return float(size(int(truncation if truncation is not None else start(task["tol"]))))
    except Exception:  # noqa: BLE001 -- no prediction, no harm
        return None


def task_weights(tasks: list[dict]) -> list[float] | None:
    """Relative costs of the tasks (``None`` when the methods do not predict them): for ETAs and dispatch."""
    return _weights(tasks)


def _weights(tasks: list[dict]) -> list[float] | None:
    """Relative costs of the tasks (``None`` when the methods do not predict them)."""
    first: dict = {}
    for t in tasks:
        first.setdefault(t["method"], t)
    if all(_cost_hint(t) is None for t in first.values()):
        return None
    hints = [_cost_hint(t) for t in tasks]
    known = [h for h in hints if h]
    fill = sorted(known)[len(known) // 2] if known else 1.0
    return [fill if h is None else max(h, 1.0) if h else 1.0 for h in hints]


class _Planner:
    """The dispatch order and the batch sizes (module docstring, *Scheduling*)."""

    def __init__(self, tasks: list[dict], weights: list[float] | None, slots: int):
        self.weights = weights or [1.0] * len(tasks)
        order = sorted(range(len(tasks)), key=lambda i: -self.weights[i]) if weights else list(range(len(tasks)))
        self.order = collections.deque(order)
        self.slots = max(1, slots)
        self.rate: float | None = None  # seconds per unit of weight

    def learn(self, indices: list[int], seconds: float) -> None:
        units = sum(self.weights[i] for i in indices)
        if units <= 0:
            return
        observed = seconds / units
        self.rate = observed if self.rate is None else 0.5 * (self.rate + observed)

    def next_batch(self, from_end: bool = False) -> list[int]:
        if not self.order:
            return []
        pop = self.order.pop if from_end else self.order.popleft
        if self.rate is None:
            return [pop()]
        remaining = self.rate * sum(self.weights[i] for i in self.order)
        budget = max(min(TARGET_SECONDS, remaining / (2 * self.slots)), 0.0)
        batch = [pop()]
        cost = self.rate * self.weights[batch[0]]
        while self.order:
            nxt = self.order[-1] if from_end else self.order[0]
            extra = self.rate * self.weights[nxt]
            if cost + extra > budget:
                break
            batch.append(pop())
            cost += extra
        return batch

    def remaining_seconds(self) -> float:
        return math.inf if self.rate is None else self.rate * sum(self.weights[i] for i in self.order)


# --------------------------------------------------------------------- serial
def _serial(tasks: list[dict], indices: list[int], on_done: OnDone, levels: dict | None = None) -> None:
    from threadpoolctl import threadpool_limits

    levels = {} if levels is None else levels  # warm levels, passed from point to point in this call
    done_i: list[int] = []
    done_r: list[dict] = []
    last = time.perf_counter()
    with threadpool_limits(1):
        for i in indices:
            done_i.append(i)
            done_r.extend(_solve_in_turn([tasks[i]], levels))
            if time.perf_counter() - last >= FLUSH_SECONDS:
                on_done(done_i, done_r)
                done_i, done_r, last = [], [], time.perf_counter()
    if done_i:
        on_done(done_i, done_r)


# ------------------------------------------------------------------ processes
#: the sweep process a pool worker serves (set in the worker by :func:`_init_worker`)
_PARENT_PID: int | None = None


def _exit_with_parent() -> None:
    """Ask the kernel to end this worker when its parent dies (Linux ``PR_SET_PDEATHSIG``; a no-op elsewhere).

    A sweep killed with ``kill -9`` cannot stop its pool; without this the workers
    finish their batch and die on a broken pipe, each printing a traceback.
    """
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1: SIGTERM ends a worker silently
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not Linux
        pass


def _init_worker(parent_pid: int | None = None) -> None:
    import signal

    from threadpoolctl import threadpool_limits

    global _PARENT_PID
    _PARENT_PID = parent_pid
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C ends the sweep in the parent
    _exit_with_parent()
    if parent_pid is not None and os.getppid() != parent_pid:  # the parent died while this one started
        os._exit(0)
    threadpool_limits(1)  # for the worker's life: its batches run pinned (run_batch(..., pinned=True))


def _orphaned() -> bool:
    """Whether this worker's sweep process is gone (then nobody reads its results)."""
    return _PARENT_PID is not None and os.getppid() != _PARENT_PID


def _pool_context():
    import multiprocessing as mp

    return mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()


def _processes(tasks: list[dict], workers: int, on_done: OnDone, weights: list[float] | None = None) -> None:
    from threadpoolctl import threadpool_limits

    from .catalogue import import_seconds

    if weights is None and workers > 1:
        weights = _weights(tasks)
    planner = _Planner(tasks, weights if workers > 1 else None, workers)
    # probe: solve the cheapest points here until the work left is known to pay for a pool (the first
    # point's one-time import of its solver modules is not a cost of every point: it is left out)
    t0, loaded = time.perf_counter(), import_seconds()
    probed: list[int] = []
    rows: list[dict] = []
    levels: dict = {}  # warm levels of the points solved here
    with threadpool_limits(1):
        while planner.order and (time.perf_counter() - t0 - (import_seconds() - loaded) < PROBE_SECONDS
                                 or workers == 1):
            i = planner.order.pop()
            probed.append(i)
            rows.extend(_solve_in_turn([tasks[i]], levels))
            if workers == 1 and time.perf_counter() - t0 >= FLUSH_SECONDS:
                on_done(probed, rows)
                probed, rows, t0, loaded = [], [], time.perf_counter(), import_seconds()
    if probed:
        planner.learn(probed, max(time.perf_counter() - t0 - (import_seconds() - loaded), 0.0))
        on_done(probed, rows)
    if not planner.order:
        return
    if planner.remaining_seconds() < POOL_THRESHOLD_SECONDS:
        _serial(tasks, list(planner.order), on_done, levels)
        return
    slots = min(workers, len(planner.order))
    planner.slots = slots
    results: queue.SimpleQueue = queue.SimpleQueue()
    pool = _pool_context().Pool(processes=slots, initializer=_init_worker, initargs=(os.getpid(),))
    try:
        in_flight = 0
        while planner.order or in_flight:
            while planner.order and in_flight < 2 * slots:
                batch = planner.next_batch()
                pool.apply_async(_pool_batch, (batch, [tasks[i] for i in batch]), callback=results.put,
                                 error_callback=lambda e: results.put(e))
                in_flight += 1
            got = results.get()
            in_flight -= 1
            if isinstance(got, BaseException):
                raise got
            batch, (rows, seconds) = got
            planner.learn(batch, seconds)
            on_done(batch, rows)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _pool_batch(batch: list[int], tasks: list[dict]):
    out = batch, run_batch(tasks, pinned=True)  # the worker's BLAS pools were limited when it started
    if _orphaned():  # the sweep was killed: exit quietly instead of writing to a broken pipe
        os._exit(0)
    return out


# ----------------------------------------------------------------------- dask
def _dask(tasks: list[dict], scheduler: Any, workers: int | None, on_done: OnDone,
          weights: list[float] | None = None) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ModelError("backend dask needs dask.distributed (pip install \"exactq[dask]\")") from None

    cluster = None
    if isinstance(scheduler, Client):
        client, own = scheduler, False
    else:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
            client = Client(cluster)
        elif isinstance(scheduler, str):
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ModelError(f"scheduler {scheduler!r}: cannot connect ({exc})") from None
        else:
            raise ModelError(f"scheduler must be an address tcp://HOST:PORT or a dask Client; got {scheduler!r}")
        own = True
    try:
        slots = max(1, sum(client.nthreads().values()))
        planner = _Planner(tasks, _weights(tasks) if weights is None else weights, slots)
        pending: dict = {}
        ac = as_completed()

        def submit():
            batch = planner.next_batch()
            fut = client.submit(run_batch, [tasks[i] for i in batch], pure=False)
            pending[fut.key] = batch
            ac.add(fut)

        while planner.order and len(pending) < 2 * slots:
            submit()
        for fut in ac:
            batch = pending.pop(fut.key)
            rows, seconds = fut.result()
            planner.learn(batch, seconds)
            on_done(batch, rows)
            while planner.order and len(pending) < 2 * slots:
                submit()
    finally:
        if own:
            client.close()
        if cluster is not None:
            cluster.close()
