"""``exactq reproduce optimal-dispatch``: how far JSQ, SED and speed-aware JSQ are from the optimum.

The speed-aware seed paper (Bhambay & Mukhopadhyay, Performance Evaluation 2022) notes
that a delay-optimal dispatching scheme for heterogeneous servers is an open problem.
For a small system it is computable: the optimal policy of the continuous-time MDP on
the queue lengths (model ``optimal-dispatch``), with its exact long-run average number
in the system bracketed by span bounds. This reproduction tabulates, against the load
``rho = arrival_rate / sum(service_rates)``, the relative excess of each heuristic's
mean number in system over the optimum, for

* two servers of rates (2, 1) without a capacity limit (the infinite system, by
  truncations grown until the optimum has converged to ``tol``), and
* three servers of rates (3, 2, 1) with capacity 20 per queue (9,261 states; the
  heuristics are evaluated on the same truncated system, and the blocking probability
  of the optimal policy says how much the capacity matters),

and draws the switching curve of the two-server optimum (for each length of the slow
queue, the length of the fast queue from which the optimum sends an arrival to the
slow server) at several loads, against SED's rule (the slow server once
``(q1 + 1)/2 > (q2 + 1)/1``). Every
heuristic is evaluated exactly on the same model (the Markov chain of its randomised
scheduler), so the gaps are exact numbers, not simulation estimates.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import exactq
from exactq.progress import Job, Stage, steps
from exactq.reproduce import format_table, have_matplotlib, register_reproduction

__all__ = ["dispatch_table", "reproduce_optimal_dispatch", "SYSTEMS", "LOADS"]

#: (service rates, capacity) of the systems in the table; capacity None: the infinite system
SYSTEMS = (((2.0, 1.0), None), ((3.0, 2.0, 1.0), 20))
LOADS = (0.3, 0.5, 0.7, 0.8, 0.9)
#: the loads of the switching-curve figure (two servers)
CURVE_LOADS = (0.5, 0.7, 0.9)
#: the systems and loads of each scale (``smoke``: seconds, for the figure tests; ``full``: 4 servers too)
SCALES = {
    "smoke": ((((2.0, 1.0), 12), ((3.0, 2.0, 1.0), 6)), (0.5, 0.9)),
    "default": (SYSTEMS, LOADS),
    "full": ((((2.0, 1.0), None), ((3.0, 2.0, 1.0), 30), ((4.0, 2.0, 1.0), 12)), LOADS),
}


def dispatch_table(systems=SYSTEMS, loads=LOADS, *, tol: float = 1e-8, stage: Stage | None = None) -> list[dict]:
    """One row per (system, load): the optimum, its bounds, each heuristic's value and gap.

    Parameters
    ----------
    systems : sequence of (rates, capacity)
        ``capacity=None`` solves the infinite system by growing truncations.
    loads : sequence of float
        ``rho = arrival_rate / sum(rates)``, below 1 for the infinite system.
    tol : float
        Relative tolerance (the truncation's, for the infinite system).
    stage : Stage, optional
        Progress of the points (:mod:`exactq.progress`).

    Returns
    -------
    list of dict
    """
    rows = []
    points = [(rates, capacity, rho) for rates, capacity in systems for rho in loads]
    labels = [f"{len(r)} servers, capacity {'inf' if c is None else c}, rho = {rho:g}" for r, c, rho in points]
    for rates, capacity, rho in steps(stage, points, labels):
        total = sum(rates)
        kw = dict(arrival_rate=rho * total, service_rates=",".join(f"{r:g}" for r in rates))
        if capacity is not None:
            kw["capacity"] = capacity
        t0 = time.perf_counter()
        r = exactq.solve("optimal-dispatch", "mean_number", tol=tol, **kw)
        seconds = time.perf_counter() - t0
        h = r.info["heuristics"]
        trunc = r.info.get("truncation")
        rows.append({
            "servers": len(rates), "rates": list(rates), "rho": rho, "arrival_rate": kw["arrival_rate"],
            "capacity": capacity if capacity is not None else "inf",
            "level": trunc["level"] if trunc else capacity, "n_states": r.n_states,
            "optimum": r.value, "lower": r.lower, "upper": r.upper, "error_estimate": r.error_estimate,
            "jsq": h["jsq"]["value"], "sed": h["sed"]["value"], "sa_jsq": h["sa_jsq"]["value"],
            "gap_jsq": h["jsq"]["gap"], "gap_sed": h["sed"]["gap"], "gap_sa_jsq": h["sa_jsq"]["gap"],
            "switching_curve": r.info["policy"].get("switching_curve"),
            "monotone": r.info["policy"].get("switching_curve_monotone"),
            "seconds": seconds,
        })
    return rows


def _sed_curve(rates, K):
    """SED's switching curve for two servers: the smallest ``q1`` with ``(q1 + 1)/mu1 > (q2 + 1)/mu2``.

    That is ``floor(mu1 (q2 + 1) / mu2)``, for ``q2 = 0 .. K-1`` (``None`` from ``K`` on);
    at equality SED splits the arrivals evenly.

    >>> _sed_curve((2.0, 1.0), 7)
    [2, 4, 6, None, None, None, None]
    """
    import numpy as np

    mu1, mu2 = rates
    q1 = np.floor(mu1 * (np.arange(K) + 1) / mu2).astype(int)
    return [int(v) if v < K else None for v in q1]


def _cost(rates, capacity) -> float:
    """Predicted relative cost of one point (the states of the system; the infinite one grows to ~60 levels)."""
    return float((capacity if capacity is not None else 60) + 1) ** len(rates)


@register_reproduction("optimal-dispatch", "gaps of JSQ, SED and SA-JSQ to the optimal dynamic policy (an MDP), "
                                           "2 and 3 heterogeneous servers; the two-server switching curve")
def reproduce_optimal_dispatch(out_dir: Path | None, full: bool = False, *, scale: str | None = None,
                               progress=None) -> str:
    """Compute the table (and, with ``out_dir``, write the JSON and the figures); return it as text.

    ``scale``: ``"smoke"`` (two small systems, two loads: seconds), ``"default"`` or ``"full"``
    (also four servers); ``full=True`` is ``scale="full"``.
    """
    t0 = time.perf_counter()
    scale = scale or ("full" if full else "default")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}; got {scale!r}")
    systems, loads = SCALES[scale]
    job = Job("optimal-dispatch", progress)
    stage = job.stage("optimal policy and heuristics", [_cost(r, c) for r, c in systems for _ in loads])
    rows = dispatch_table(systems, loads, stage=stage)
    two = next(((r, c) for r, c in systems if len(r) == 2), None)
    curve_loads = [rho for rho in CURVE_LOADS if two is not None and scale != "smoke"] or list(loads)
    missing = [rho for rho in curve_loads if not any(r["rates"] == list(two[0]) and r["rho"] == rho for r in rows)]
    extra = job.stage("switching curves", [_cost(*two)] * len(missing)) if missing else None
    job_rows = {rho: None for rho in missing}
    for rho in steps(extra, missing, [f"rho = {rho:g}" for rho in missing]):
        kw = {} if two[1] is None else {"capacity": two[1]}
        r = exactq.solve("optimal-dispatch", "mean_number", arrival_rate=rho * sum(two[0]),
                         service_rates=",".join(f"{v:g}" for v in two[0]), tol=1e-8, **kw)
        job_rows[rho] = {"switching_curve": r.info["policy"]["switching_curve"],
                         "level": (r.info.get("truncation") or {}).get("level", two[1]),
                         "monotone": r.info["policy"]["switching_curve_monotone"]}
    job.close()
    cols = ["servers", "rho", "capacity", "n_states", "optimum", "gap_jsq", "gap_sed", "gap_sa_jsq", "seconds"]
    text = ["Optimal dynamic dispatching: mean number in system E*[L] and the relative excess "
            "(E_h[L] - E*[L]) / E*[L] of each heuristic h" + (" [smoke scale: small systems]" if scale == "smoke"
                                                              else ""),
            format_table(rows, cols, width=10, digits=5)]
    curves = {}
    for rho in curve_loads:  # the two-server rows of the table carry their switching curves
        row = next((r for r in rows if r["rates"] == list(two[0]) and r["rho"] == rho), None) or job_rows[rho]
        curves[rho] = {"curve": row["switching_curve"], "level": row["level"], "monotone": row["monotone"]}
    text.append("Switching curve, rates (2, 1): for q2 = 0, 1, ... the smallest q1 sending an arrival to the slow "
                "server")
    for rho, c in curves.items():
        text.append(f"  rho = {rho}: {c['curve'][:12]}  (monotone: {c['monotone']})")
    text.append(f"  SED sends there from q1 = {_sed_curve((2.0, 1.0), 40)[:12]}  (None in a curve: not below the "
                "truncation level)")
    seconds = time.perf_counter() - t0
    text.append(f"({seconds:.1f} s)")
    if out_dir is not None:
        data = {"scale": scale, "rows": rows, "switching_curves": {str(k): v for k, v in curves.items()},
                "sed_curve": _sed_curve((2.0, 1.0), 40), "seconds": seconds,
                "notes": "gaps on the same (truncated) model as the optimum; capacity inf: truncations grown to "
                         "tol 1e-8 relative"}
        (out_dir / "optimal_dispatch.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, rows, curves)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, rows, curves) -> list[str]:
    """The switching-curve and gap figures; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import integer_axis, new_axes, save

    problems = []
    fig, ax = new_axes(figsize=(5.6, 4.2))
    for rho, c in curves.items():
        pts = [(q2, q1) for q2, q1 in enumerate(c["curve"][:16]) if q1 is not None]
        if pts:
            ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=f"optimal, rho = {rho}")
    sed = [(q2, q1) for q2, q1 in enumerate(_sed_curve((2.0, 1.0), 40)[:16]) if q1 is not None]
    ax.step([p[0] for p in sed], [p[1] for p in sed], where="post", ls="--", color="k", label="SED")
    ax.set_xlabel("q2 (slow server, rate 1)")
    ax.set_ylabel("q1 (fast, rate 2) where the slow one is chosen")
    ax.set_title("Two servers (rates 2, 1): the optimal switching curve", fontsize=9)
    integer_axis(ax, "x")
    integer_axis(ax, "y")
    problems += save(fig, out_dir / "optimal_dispatch_switching_curve.png")
    servers = sorted({r["servers"] for r in rows})
    fig, axes = new_axes(1, len(servers), figsize=(4.4 * len(servers), 3.8), squeeze=False)
    for ax, count in zip(axes[0], servers):
        sub = [r for r in rows if r["servers"] == count]
        for h, label in (("gap_jsq", "JSQ"), ("gap_sed", "SED"), ("gap_sa_jsq", "SA-JSQ")):
            ax.plot([r["rho"] for r in sub], [100 * r[h] for r in sub], marker="o", label=label)
        ax.set_title(f"rates {tuple(sub[0]['rates'])}, capacity {sub[0]['capacity']}", fontsize=9)
        ax.set_xlabel("load rho")
        ax.set_ylabel("excess over the optimum (%)")
    problems += save(fig, out_dir / "optimal_dispatch_gaps.png")
    return problems
