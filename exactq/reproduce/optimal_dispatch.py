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
from exactq.reproduce import format_table, have_matplotlib, new_figure, register_reproduction

__all__ = ["dispatch_table", "reproduce_optimal_dispatch", "SYSTEMS", "LOADS"]

#: (service rates, capacity) of the systems in the table; capacity None: the infinite system
SYSTEMS = (((2.0, 1.0), None), ((3.0, 2.0, 1.0), 20))
LOADS = (0.3, 0.5, 0.7, 0.8, 0.9)
#: the loads of the switching-curve figure (two servers)
CURVE_LOADS = (0.5, 0.7, 0.9)


def dispatch_table(systems=SYSTEMS, loads=LOADS, *, tol: float = 1e-8) -> list[dict]:
    """One row per (system, load): the optimum, its bounds, each heuristic's value and gap.

    Parameters
    ----------
    systems : sequence of (rates, capacity)
        ``capacity=None`` solves the infinite system by growing truncations.
    loads : sequence of float
        ``rho = arrival_rate / sum(rates)``, below 1 for the infinite system.
    tol : float
        Relative tolerance (the truncation's, for the infinite system).

    Returns
    -------
    list of dict
    """
    rows = []
    for rates, capacity in systems:
        total = sum(rates)
        for rho in loads:
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


@register_reproduction("optimal-dispatch", "gaps of JSQ, SED and SA-JSQ to the optimal dynamic policy (an MDP), "
                                           "2 and 3 heterogeneous servers; the two-server switching curve")
def reproduce_optimal_dispatch(out_dir: Path | None, full: bool = False) -> str:
    """Compute the table (and, with ``out_dir``, write the JSON and the figures); return it as text."""
    t0 = time.perf_counter()
    systems = SYSTEMS if not full else (((2.0, 1.0), None), ((3.0, 2.0, 1.0), 30), ((4.0, 2.0, 1.0), 12))
    rows = dispatch_table(systems, LOADS)
    cols = ["servers", "rho", "capacity", "n_states", "optimum", "gap_jsq", "gap_sed", "gap_sa_jsq", "seconds"]
    text = ["Optimal dynamic dispatching: mean number in system E*[L] and the relative excess "
            "(E_h[L] - E*[L]) / E*[L] of each heuristic h",
            format_table(rows, cols, width=10, digits=5)]
    curves = {}
    for rho in CURVE_LOADS:  # the two-server rows of the table carry their switching curves
        row = next((r for r in rows if r["rates"] == [2.0, 1.0] and r["rho"] == rho), None)
        if row is None:
            r = exactq.solve("optimal-dispatch", "mean_number", arrival_rate=rho * 3.0, service_rates="2,1",
                             tol=1e-8)
            row = {"switching_curve": r.info["policy"]["switching_curve"], "level": r.info["truncation"]["level"],
                   "monotone": r.info["policy"]["switching_curve_monotone"]}
        curves[rho] = {"curve": row["switching_curve"], "level": row["level"], "monotone": row["monotone"]}
    text.append("Switching curve, rates (2, 1): for q2 = 0, 1, ... the smallest q1 sending an arrival to the slow "
                "server")
    for rho, c in curves.items():
        text.append(f"  rho = {rho}: {c['curve'][:12]}  (monotone: {c['monotone']})")
    text.append(f"  SED sends there from q1 = {_sed_curve((2.0, 1.0), 40)[:12]}  (None in a curve: not below the truncation level)")
    seconds = time.perf_counter() - t0
    text.append(f"({seconds:.1f} s)")
    if out_dir is not None:
        data = {"rows": rows, "switching_curves": {str(k): v for k, v in curves.items()},
                "sed_curve": _sed_curve((2.0, 1.0), 40), "seconds": seconds,
                "notes": "gaps on the same (truncated) model as the optimum; capacity inf: truncations grown to "
                         "tol 1e-8 relative"}
        (out_dir / "optimal_dispatch.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, rows, curves)
    return "\n".join(text)


def _figures(out_dir: Path, rows, curves) -> None:
    fig = new_figure(figsize=(5, 4))
    ax = fig.add_subplot()
    for rho, c in curves.items():
        pts = [(q2, q1) for q2, q1 in enumerate(c["curve"][:16]) if q1 is not None]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=f"optimal, rho = {rho}")
    sed = _sed_curve((2.0, 1.0), 40)[:16]
    ax.step(range(len(sed)), [v if v is not None else float("nan") for v in sed], where="post", ls="--", color="k",
            label="SED")
    ax.set_xlabel("q2 (slow server, rate 1)")
    ax.set_ylabel("q1 (fast, rate 2) where the slow one is chosen")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "optimal_dispatch_switching_curve.png", dpi=120)
    servers = sorted({r["servers"] for r in rows})
    fig = new_figure(figsize=(4 * len(servers), 3.5))
    for k, count in enumerate(servers):
        ax = fig.add_subplot(1, len(servers), k + 1)
        sub = [r for r in rows if r["servers"] == count]
        for h, label in (("gap_jsq", "JSQ"), ("gap_sed", "SED"), ("gap_sa_jsq", "SA-JSQ")):
            ax.plot([r["rho"] for r in sub], [100 * r[h] for r in sub], marker="o", label=label)
        ax.set_title(f"rates {tuple(sub[0]['rates'])}, capacity {sub[0]['capacity']}")
        ax.set_xlabel("load rho")
        ax.set_ylabel("excess over the optimum (%)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "optimal_dispatch_gaps.png", dpi=120)
