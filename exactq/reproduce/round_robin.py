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
from exactq.reproduce import format_table, have_matplotlib, new_figure, register_reproduction

__all__ = ["reproduce_round_robin"]


def _solve(measure: str, method: str = "auto", **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("round-robin", measure, method=method, **params)


def _policies(loads, failures, n: int = 4) -> list[dict]:
    rows = []
    for g in failures:
        avail = 1.0 / (1.0 + g)  # repair rate 1
        for rho in loads:
            lam = rho * n * avail  # rho: the load of a processor relative to its available capacity
            kw = dict(servers=n, arrival_rate=lam, failure_rate=g, repair_rate=1.0 if g else None)
            rr = _solve("mean_response_time", "qbd", **kw).value
            rnd = _solve("mean_response_time", "qbd", policy="random", **kw).value
            rows.append({"failure_rate": g, "load": rho, "round_robin": rr, "random": rnd,
                         "gain_%": 100.0 * (rnd - rr) / rnd})
    return rows


def _dispatch(sizes, loads) -> list[dict]:
    rows = []
    for n in sizes:
        for rho in loads:
            kw = dict(servers=n, arrival_rate=rho * n)
            c = _solve("mean_response_time", "qbd", **kw).value
            d = _solve("mean_response_time", "qbd", dispatch="distributed", **kw).value
            r = _solve("mean_response_time", "qbd", policy="random", **kw).value
            rows.append({"servers": n, "load": rho, "central": c, "distributed": d, "random": r,
                         "central_better_%": 100.0 * (d - c) / d})
    return rows


def _completion(times, k: int = 4) -> list[dict]:
    rows = []
    for t in times:
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
def reproduce_round_robin(out_dir: Path | None, full: bool = False) -> str:
    loads = np.round(np.linspace(0.1, 0.9, 9 if full else 5), 3)
    policies = _policies(loads, (0.0, 0.1, 0.5))
    dispatch = _dispatch(range(2, 6), (0.5, 0.8, 0.95))
    completion = _completion(np.linspace(0.5, 10.0, 20 if full else 8))
    ordered = all(r["central_round_robin"] >= r["distributed_round_robin"] - 1e-12
                  and r["distributed_round_robin"] >= r["random"] - 1e-12 for r in completion)
    text = [
        "E[T] of round-robin and random routing, n = 4 processors, repair rate 1; load = Lambda / (n mu "
        "availability); exact per-processor QBD",
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
        data = {"policies": policies, "dispatch": dispatch, "completion": completion,
                "completion_ordered": ordered}
        (out_dir / "round_robin.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, policies, dispatch, completion)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, policies, dispatch, completion) -> None:
    fig = new_figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for g in sorted({r["failure_rate"] for r in policies}):
        rows = [r for r in policies if r["failure_rate"] == g]
        x = [r["load"] for r in rows]
        line, = ax.plot(x, [r["round_robin"] for r in rows], marker="o", label=f"round-robin, failure {g:g}")
        ax.plot(x, [r["random"] for r in rows], ls="--", color=line.get_color(), label=f"random, failure {g:g}")
    ax.set_xlabel("load per available capacity")
    ax.set_ylabel("E[T]")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "round_robin_policies.png", dpi=120)

    fig = new_figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for rho in sorted({r["load"] for r in dispatch}):
        rows = [r for r in dispatch if r["load"] == rho]
        ax.plot([r["servers"] for r in rows], [r["central_better_%"] for r in rows], marker="o", label=f"load {rho:g}")
    ax.set_xlabel("processors n")
    ax.set_ylabel("distributed E[T] above central (%)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "round_robin_dispatch.png", dpi=120)

    fig = new_figure(figsize=(6, 4))
    ax = fig.add_subplot()
    t = [r["t"] for r in completion]
    for key in ("central_round_robin", "distributed_round_robin", "random"):
        ax.plot(t, [r[key] for r in completion], marker="o", ms=3, label=key.replace("_", " "))
    ax.set_xlabel("t")
    ax.set_ylabel("P(D_4 <= t)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "round_robin_completion.png", dpi=120)
