"""``exactq reproduce round-robin``: load balancing on homogeneous unreliable processors (seed 002).

Liu & Righter (INRIA RR-2659, 1995; Operations Research 46(4), 1998) prove that
round-robin routing stochastically minimises the ``k``-th task completion time and
minimises response times among workload-balancing policies, with failures and repairs
independent of the state, and that one central round-robin controller beats the best
distributed system. Three parts, computed with the ``round-robin`` model:

* **Round-robin against random** across loads and failure rates (``n = 4``, repair
  rate 1): ``E[T]`` from the exact per-processor QBD, and the gain of round-robin.
* **Central against distributed round-robin** (how much better central is): ``E[T]``
  for ``n = 2..5`` at three loads.
* **The k-th completion time** from an empty start (``n = 2``, ``Lambda = 1``,
  ``k = 4``): ``P(D_k <= t)`` for central round-robin, distributed round-robin and
  random routing from the transient law of the joint chain; round-robin's CDF lies
  above the others.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

import exactq
from exactq.progress import Job, Stage, steps
from exactq.reproduce import format_table, have_matplotlib, register_reproduction

__all__ = ["reproduce_round_robin"]


def _solve(measure: str, method: str = "auto", **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("round-robin", measure, method=method, **params)


#: seconds per point of each table in one default run (the progress ETA's cost model)
COST = {"policies": 0.04, "dispatch": 0.07, "completion": 1.0}
FAILURES = (0.0, 0.1, 0.5)
SIZES = (2, 3, 4, 5)
DISPATCH_LOADS = (0.5, 0.8, 0.95)


def _policies(loads, failures, n: int = 4, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    points = [(g, rho) for g in failures for rho in loads]
    for g, rho in steps(stage, points, [f"failure rate {g:g}, load {rho:g}" for g, rho in points]):
        avail = 1.0 / (1.0 + g)  # repair rate 1
        lam = rho * n * avail  # rho: the load of a processor relative to its available capacity
        kw = dict(servers=n, arrival_rate=lam, failure_rate=g, repair_rate=1.0 if g else None)
        rr = _solve("mean_response_time", "qbd", **kw).value
        rnd = _solve("mean_response_time", "qbd", policy="random", **kw).value
        rows.append({"failure_rate": g, "load": rho, "round_robin": rr, "random": rnd,
                     "gain_%": 100.0 * (rnd - rr) / rnd})
    return rows


def _dispatch(sizes, loads, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    points = [(n, rho) for n in sizes for rho in loads]
    for n, rho in steps(stage, points, [f"n = {n}, load {rho:g}" for n, rho in points]):
        kw = dict(servers=n, arrival_rate=rho * n)
        c = _solve("mean_response_time", "qbd", **kw).value
        d = _solve("mean_response_time", "qbd", dispatch="distributed", **kw).value
        r = _solve("mean_response_time", "qbd", policy="random", **kw).value
        rows.append({"servers": n, "load": rho, "central": c, "distributed": d, "random": r,
                     "central_better_%": 100.0 * (d - c) / d})
    return rows


def _completion(times, k: int = 4, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    for t in steps(stage, times, [f"t = {float(t):.3g}" for t in times]):
        kw = dict(servers=2, arrival_rate=1.0, k=k, t=float(t), tol=1e-10)
        rows.append({"t": float(t),
                     "central_round_robin": _solve("completion_time_cdf", "ctmc", **kw).value,
                     "distributed_round_robin": _solve("completion_time_cdf", "ctmc", dispatch="distributed",
                                                       **kw).value,
                     "random": _solve("completion_time_cdf", "ctmc", policy="random", **kw).value})
    return rows


def _fmt(rows: list[dict], cols: list[str]) -> str:
    return format_table(rows, cols, width=23, digits=8)


@register_reproduction("round-robin", "round-robin to unreliable processors: against random routing, central "
                                      "against distributed, and the k-th completion time")
def reproduce_round_robin(out_dir: Path | None, full: bool = False, *, scale: str | None = None,
                          progress=None) -> str:
    """The three tables (module docstring); ``scale="smoke"`` takes two loads, sizes and times."""
    scale = scale or ("full" if full else "default")  # full=True: the former switch, kept
    smoke = scale == "smoke"
    loads = np.round(np.linspace(0.1, 0.9, {"full": 9, "smoke": 2}.get(scale, 5)), 3)
    failures = (0.0, 0.5) if smoke else FAILURES
    sizes, dloads = ((2, 3), (0.5, 0.95)) if smoke else (SIZES, DISPATCH_LOADS)
    times = np.linspace(0.5, 10.0, {"full": 20, "smoke": 2}.get(scale, 8))
    job = Job("round-robin", progress)
    st = [job.stage("round-robin against random", [COST["policies"]] * (len(loads) * len(failures))),
          job.stage("central against distributed", [COST["dispatch"]] * (len(sizes) * len(dloads))),
          job.stage("k-th completion time", [COST["completion"]] * len(times))]
    policies = _policies(loads, failures, stage=st[0])
    dispatch = _dispatch(sizes, dloads, stage=st[1])
    completion = _completion(times, stage=st[2])
    job.close()
    ordered = all(r["central_round_robin"] >= r["distributed_round_robin"] - 1e-12
                  and r["distributed_round_robin"] >= r["random"] - 1e-12 for r in completion)
    text = [
        "E[T] of round-robin and random routing, n = 4 processors, repair rate 1; load = Lambda / (n mu "
        "availability); exact per-processor QBD" + (" [smoke scale: a few points only]" if smoke else ""),
        _fmt(policies, ["failure_rate", "load", "round_robin", "random", "gain_%"]),
        "",
        "Central against distributed round-robin (reliable processors): E[T] and how much better central is",
        _fmt(dispatch, ["servers", "load", "central", "distributed", "random", "central_better_%"]),
        "",
        f"P(D_4 <= t), the 4th task completion from an empty start (n = 2, Lambda = 1, mu = 1; joint chain, "
        f"uniformisation); central RR >= distributed RR >= random everywhere: {ordered}",
        _fmt(completion, ["t", "central_round_robin", "distributed_round_robin", "random"]),
    ]
    if out_dir is not None:
        data = {"scale": scale, "policies": policies, "dispatch": dispatch, "completion": completion,
                "completion_ordered": ordered}
        (out_dir / "round_robin.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, policies, dispatch, completion)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, policies, dispatch, completion) -> list[str]:
    """The three figures; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import integer_axis, new_axes, save

    problems = []
    fig, ax = new_axes(figsize=(6.4, 4.2))
    for g in sorted({r["failure_rate"] for r in policies}):
        rows = [r for r in policies if r["failure_rate"] == g]
        x = [r["load"] for r in rows]
        line, = ax.plot(x, [r["round_robin"] for r in rows], marker="o", label=f"round-robin, failure rate {g:g}")
        ax.plot(x, [r["random"] for r in rows], ls="--", color=line.get_color(), label=f"random, failure rate {g:g}")
    ax.set_xlabel("load per available capacity, Lambda / (n mu availability)")
    ax.set_ylabel("mean response time E[T]")
    ax.set_yscale("log")
    ax.set_title("Routing to 4 unreliable processors (repair rate 1): round-robin\nagainst random routing, exact "
                 "per-processor QBDs", fontsize=9)
    problems += save(fig, out_dir / "round_robin_policies.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    for rho in sorted({r["load"] for r in dispatch}):
        rows = [r for r in dispatch if r["load"] == rho]
        ax.plot([r["servers"] for r in rows], [r["central_better_%"] for r in rows], marker="o", label=f"load {rho:g}")
    ax.set_xlabel("processors n")
    ax.set_ylabel("distributed E[T] above central (%)")
    ax.set_title("One central round-robin dispatcher against independent ones\n(reliable processors): how much "
                 "longer jobs stay without central control", fontsize=9)
    integer_axis(ax, "x")
    problems += save(fig, out_dir / "round_robin_dispatch.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    t = [r["t"] for r in completion]
    for key in ("central_round_robin", "distributed_round_robin", "random"):
        ax.plot(t, [r[key] for r in completion], marker="o", ms=3, label=key.replace("_", " "))
    ax.set_xlabel("time t from an empty start")
    ax.set_ylabel("P(D_4 <= t)")
    ax.set_title("The 4th task completion time D_4 (2 processors, arrival rate 1):\nround-robin completes "
                 "stochastically earliest", fontsize=9)
    problems += save(fig, out_dir / "round_robin_completion.png")
    return problems
