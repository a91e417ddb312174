"""``exactq reproduce shortest-queue``: the tables and figures of the shortest-queue papers.

* JSQ mean waiting time versus load: compensation series (Adan, Wessels & Zijm 1990),
  truncated CTMC, and the cost-structure bounds of van Houtum et al. (1998) side by side;
  the jockeying identity (threshold 1 = M/M/2) as a check.
* The asymmetric JSQ (Adan, Wessels & Zijm 1991): compensation against the CTMC.
* SED routing to Erlang servers (Adan & Wessels 1996): E[W] for r = 1, 2, 3 by the
  matrix-geometric method, the compensation series and the truncated CTMC.
* Finite capacity (Yao & Knessl): blocking probability versus K and rho, exact against
  the large-K approximations, and the marginal law of one queue at loads around rho = 4
  (where the decay rate of the large-K corner limit changes form).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import exactq
from exactq.progress import Job, Stage, steps
from exactq.reproduce import format_table, have_matplotlib, register_reproduction

__all__ = ["reproduce_shortest_queue"]

JSQ_LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
SED_LOADS = (0.5, 0.7, 0.9)
FC_LOADS = (1.0, 1.5, 2.0, 2.5, 4.0)
FC_CAPACITIES = (5, 10, 20, 40)
BOUND_THRESHOLDS = tuple(range(1, 11))
#: the grids of ``scale="smoke"`` (a check of every table and figure in seconds, not the paper's values)
SMOKE = {"jsq": (0.5, 0.9), "asym": (0.5,), "sed": (0.5,), "fc_loads": (1.0, 4.0), "fc_capacities": (5, 10),
         "thresholds": (1, 2, 3)}
DEFAULT = {"jsq": JSQ_LOADS, "asym": (0.5, 0.8, 0.9, 0.95), "sed": SED_LOADS, "fc_loads": FC_LOADS,
           "fc_capacities": FC_CAPACITIES, "thresholds": BOUND_THRESHOLDS}
#: the progress ETA's cost model, fitted to one default run: seconds per point ``base + c / (1 - rho)^2``
#: (the truncated chains grow like the queue-length tail; SED at rho = 0.5, 0.7, 0.9: 0.5, 1.2, 10 s)
COST = {"jsq": (0.04, 0.0029), "asym": (0.05, 0.009), "sed": (0.1, 0.1), "finite": (0.01, 0.0),
        "marginals": (0.03, 0.0), "bounds": (0.03, 0.0)}


def _cost(table: str, rho: float = 0.0) -> float:
    base, c = COST[table]
    return base + c / max(1.0 - rho, 1e-3) ** 2


def _has_bounds() -> bool:
    return "bounds" in type(exactq.model("jsq", arrival_rate=1, service_rates="1,1")).methods


def _jsq_table(threshold: int = 6, *, loads=JSQ_LOADS, stage: Stage | None = None) -> list[dict]:
    rows = []
    bounds = _has_bounds()
    for rho in steps(stage, loads, [f"rho = {r:g}" for r in loads]):
        kw = dict(arrival_rate=2 * rho, service_rates="1,1")
        comp = exactq.solve("jsq", "mean_waiting_time", method="compensation", **kw)
        ctmc = exactq.solve("jsq", "mean_waiting_time", method="ctmc", **kw)
        row = {"rho": rho, "EW_compensation": comp.value, "EW_ctmc": ctmc.value,
               "ctmc_states": ctmc.n_states}
        if bounds:
            b = exactq.solve("jsq", "mean_waiting_time", method="bounds", threshold=threshold, **kw)
            row.update({"EW_lower": b.lower, "EW_upper": b.upper})
        rows.append(row)
    return rows


def _asymmetric_table(rates=(1.0, 2.0), *, loads=(0.5, 0.8, 0.9, 0.95), stage: Stage | None = None) -> list[dict]:
    """Asymmetric JSQ (Adan, Wessels & Zijm 1991): compensation vs CTMC, ties random and fastest."""
    rows = []
    for rho in steps(stage, loads, [f"rho = {r:g}" for r in loads]):
        kw = dict(arrival_rate=rho * sum(rates), service_rates=",".join(map(str, rates)))
        row = {"rho": rho}
        for ties in ("random", "fastest"):
            comp = exactq.solve("jsq", "mean_waiting_time", method="compensation", ties=ties, **kw)
            ctmc = exactq.solve("jsq", "mean_waiting_time", method="ctmc", ties=ties, **kw)
            row[f"EW_{ties}_comp"] = comp.value
            row[f"EW_{ties}_ctmc"] = ctmc.value
            row[f"terms_{ties}"] = comp.info.get("terms")
        rows.append(row)
    return rows


def _sed_table(*, loads=SED_LOADS, stage: Stage | None = None) -> list[dict]:
    """E[W] by the matrix-geometric method (exact in the shorter queue) and the box-truncated CTMC."""
    rows = []
    for rho in steps(stage, loads, [f"rho = {r:g}" for r in loads]):
        row = {"rho": rho}
        for r in (1, 2, 3):
            kw = dict(arrival_rate=2 * rho, service_rates="1,1", phases=r)
            row[f"EW_r{r}"] = exactq.solve("sed", "mean_waiting_time", method="qbd", **kw).value
            row[f"ctmc_r{r}"] = exactq.solve("sed", "mean_waiting_time", method="ctmc", **kw).value
            row[f"comp_r{r}"] = exactq.solve("sed", "mean_waiting_time", method="compensation", **kw).value
        rows.append(row)
    return rows


def _finite_table(*, loads=FC_LOADS, capacities=FC_CAPACITIES, stage: Stage | None = None) -> list[dict]:
    rows = []
    points = [(rho, K) for rho in loads for K in capacities]
    for rho, K in steps(stage, points, [f"rho = {r:g}, K = {K}" for r, K in points]):
        kw = dict(arrival_rate=rho, service_rates="1,1", capacity=K)
        ex = exactq.solve("jsq", "blocking_probability", **kw).value
        ap = exactq.solve("jsq", "blocking_probability", method="asymptotic", **kw).value
        rows.append({"rho": rho, "K": K, "block_exact": ex, "block_asymptotic": ap,
                     "relative_error": abs(ap / ex - 1) if ex > 0 else 0.0})
    return rows


def _marginals(K: int = 20, loads=(3.0, 4.0, 5.0), *, stage: Stage | None = None) -> dict:
    """P(Q2 = n) of the finite system for loads around rho = 4: exact chain and the corner limit."""
    out = {}
    for rho in steps(stage, loads, [f"rho = {r:g}" for r in loads]):
        kw = dict(arrival_rate=rho, service_rates="1,1", capacity=K)
        out[str(rho)] = {
            "exact": exactq.solve("jsq", "queue_length_distributions", method="ctmc", **kw).value[1],
            "asymptotic": exactq.solve("jsq", "queue_length_distributions", method="asymptotic", **kw).value[1],
        }
    return out


def _marginal_rows(marg: dict, K: int = 20, i: int = 8) -> list[dict]:
    rows = []
    for rho, d in marg.items():
        ex, ap = np.array(d["exact"]), np.array(d["asymptotic"])
        r = float(rho)
        rows.append({"rho": r, "decay_exact": ex[K - i - 1] / ex[K - i], "decay_asymptotic": ap[K - i - 1] / ap[K - i],
                     "max(4/rho^2,1/rho)": max(4 / r**2, 1 / r), "max_abs_error": float(np.abs(ex - ap).max())})
    return rows


def _fmt(rows: list[dict], cols: list[str]) -> str:
    return format_table(rows, cols, width=16, digits=10)


def _bounds_vs_threshold(rho: float = 0.9, thresholds=BOUND_THRESHOLDS, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    for T in steps(stage, thresholds, [f"T = {t}" for t in thresholds]):
        try:
            b = exactq.solve("jsq", "mean_waiting_time", method="bounds", threshold=T,
                             arrival_rate=2 * rho, service_rates="1,1")
            rows.append({"T": T, "lower": b.lower, "upper": b.upper})
        except exactq.ExactqError as e:  # an unstable modified system at small T
            rows.append({"T": T, "lower": None, "upper": None, "note": str(e)})
    return rows


@register_reproduction("shortest-queue", "JSQ by compensation/CTMC/bounds, SED for Erlang servers, finite capacity")
def reproduce_shortest_queue(out_dir: Path | None, *, scale: str = "default", progress=None) -> str:
    """The tables (and, with ``out_dir`` and matplotlib, the figures) of the shortest-queue papers.

    ``scale="smoke"`` computes every table on a few points (module constants ``SMOKE``);
    ``full`` is the default run.

    Examples
    --------
    The jockeying identity it reports (threshold 1 = M/M/2, E[L] = 2 rho / (1 - rho^2)):

    >>> r = exactq.solve("jsq", "mean_number", method="bounds", threshold=1, arrival_rate=1.0, service_rates="1,1")
    >>> bool(r.lower <= 1.42632075 <= r.upper and abs(r.info["jockeying"]["value"] - 1 / 0.75) < 1e-12)
    True
    """
    g = SMOKE if scale == "smoke" else DEFAULT
    bounds = _has_bounds()
    job = Job("shortest-queue", progress)
    st = {"jsq": job.stage("symmetric JSQ: compensation, CTMC, bounds", [_cost("jsq", r) for r in g["jsq"]]),
          "asym": job.stage("asymmetric JSQ", [_cost("asym", r) for r in g["asym"]]),
          "sed": job.stage("SED routing to Erlang servers", [_cost("sed", r) for r in g["sed"]]),
          "fc": job.stage("finite capacity: blocking",
                          [_cost("finite")] * (len(g["fc_loads"]) * len(g["fc_capacities"]))),
          "marg": job.stage("finite capacity: marginal law", [_cost("marginals")] * 3)}
    if bounds:
        st["bt"] = job.stage("JSQ bounds against the threshold", [_cost("bounds")] * len(g["thresholds"]))
    jsq = _jsq_table(loads=g["jsq"], stage=st["jsq"])
    asym = _asymmetric_table(loads=g["asym"], stage=st["asym"])
    sed = _sed_table(loads=g["sed"], stage=st["sed"])
    fc = _finite_table(loads=g["fc_loads"], capacities=g["fc_capacities"], stage=st["fc"])
    marg = _marginals(stage=st["marg"])
    bt = _bounds_vs_threshold(thresholds=g["thresholds"], stage=st["bt"]) if bounds else []
    job.close()
    cols = ["rho", "EW_compensation", "EW_ctmc", "ctmc_states"] + (["EW_lower", "EW_upper"] if bounds else [])
    text = [
        "Symmetric JSQ, two unit-rate servers, arrivals 2 rho: mean waiting time E[W] (excluding service)"
        + (" [smoke scale: a few points only]" if scale == "smoke" else ""),
        _fmt(jsq, cols),
        "",
        "Asymmetric JSQ, rates 1 and 2, arrivals 3 rho: E[W], compensation (binary tree of product forms) "
        "vs CTMC",
        _fmt(asym, ["rho", "EW_random_comp", "EW_random_ctmc", "EW_fastest_comp", "EW_fastest_ctmc",
                    "terms_random"]),
        "",
        "SED routing, two identical Erlang-r servers of mean 1, arrivals 2 rho: E[W] by the matrix-geometric "
        "method (qbd), the compensation series (comp) and the truncated CTMC",
        _fmt(sed, ["rho"] + [f"{k}_r{r}" for r in (1, 2, 3) for k in ("EW", "comp", "ctmc")]),
        "",
        "Finite capacity K per queue, rho = lambda/mu: blocking probability, exact chain vs large-K approximation",
        _fmt(fc, ["rho", "K", "block_exact", "block_asymptotic", "relative_error"]),
        "",
        "Finite capacity K = 20: decay P(Q = K-9)/P(Q = K-8) of one queue's marginal across rho = 4, exact chain "
        "vs the full-corner limit",
        _fmt(_marginal_rows(marg), ["rho", "decay_exact", "decay_asymptotic", "max(4/rho^2,1/rho)",
                                    "max_abs_error"]),
    ]
    if bt:
        text += ["", "Bounds on E[W] at rho = 0.9 versus threshold T", _fmt(bt, ["T", "lower", "upper"])]
    if out_dir is not None:
        data = {"scale": scale, "jsq": jsq, "asymmetric_jsq": asym, "sed": sed, "finite_capacity": fc,
                "marginals_K20": marg, "bounds_vs_T": bt}
        (out_dir / "shortest_queue.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, marg, bt)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, marg: dict, bt: list[dict]) -> list[str]:
    """The marginal-law and bounds figures; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import integer_axis, new_axes, save

    problems = []
    fig, ax = new_axes(figsize=(6.4, 4.2))
    for rho, d in marg.items():
        line, = ax.semilogy(range(len(d["exact"])), d["exact"], marker="o", ms=4, linestyle="none",
                            label=f"rho = {float(rho):g}")
        ax.semilogy(range(len(d["asymptotic"])), d["asymptotic"], "-", color=line.get_color(), linewidth=0.9)
    ax.set_xlabel("n, jobs at queue 2")
    ax.set_ylabel("P(Q2 = n)")
    ax.set_title("Two shortest-queue servers, capacity K = 20 each, overloaded (rho = lambda / mu):\n"
                 "the law of one queue, exact chain (dots) against the large-K corner limit (lines)", fontsize=9)
    integer_axis(ax, "x")
    problems += save(fig, out_dir / "finite_capacity_marginal.png")
    pts = [r for r in bt if r.get("lower") is not None]
    if pts:
        fig, ax = new_axes(figsize=(6.4, 4.2))
        T = [r["T"] for r in pts]
        exact = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=1.8,
                             service_rates="1,1").value
        ax.semilogy(T, [(exact - r["lower"]) / exact for r in pts], "o-", label="exact - lower bound (jockeying)")
        ax.semilogy(T, [(r["upper"] - exact) / exact for r in pts], "s-", label="upper bound - exact (blocking)")
        ax.set_xlabel("threshold T of the modified systems")
        ax.set_ylabel("relative distance to the exact E[W]")
        ax.set_title("Two shortest-queue servers at rho = 0.9: how fast the threshold\nbounds on the mean wait "
                     "close in on the exact value (compensation series)", fontsize=9)
        integer_axis(ax, "x")
        problems += save(fig, out_dir / "jsq_bounds.png")
    return problems
