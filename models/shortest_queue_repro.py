"""``exactq reproduce shortest-queue``: the tables and figures of the shortest-queue papers.

* JSQ mean waiting time versus load: compensation series (Adan, Wessels & Zijm 1990),
  truncated CTMC, and the cost-structure bounds of van Houtum et al. (1998) side by side;
  the jockeying identity (threshold 1 = M/M/2) as a check.
* SED routing to Erlang servers (Adan & Wessels 1996): E[W] for r = 1, 2, 3.
* Finite capacity (Yao & Knessl): blocking probability versus K and rho, exact against
  the large-K approximations, and the marginal law of one queue across rho = 4.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import exactq
from exactq.reproduce import have_matplotlib, register_reproduction

__all__ = ["reproduce_shortest_queue"]

JSQ_LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
SED_LOADS = (0.5, 0.7, 0.9)
FC_LOADS = (1.0, 1.5, 2.0, 2.5, 4.0)
FC_CAPACITIES = (5, 10, 20, 40)


def _has_bounds() -> bool:
    return "bounds" in type(exactq.model("jsq", arrival_rate=1, service_rates="1,1")).methods


def _jsq_table(threshold: int = 6) -> list[dict]:
    rows = []
    bounds = _has_bounds()
    for rho in JSQ_LOADS:
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


def _sed_table() -> list[dict]:
    rows = []
    for rho in SED_LOADS:
        row = {"rho": rho}
        for r in (1, 2, 3):
            row[f"EW_r{r}"] = exactq.solve("sed", "mean_waiting_time", arrival_rate=2 * rho,
                                           service_rates="1,1", phases=r).value
        rows.append(row)
    return rows


def _finite_table() -> list[dict]:
    rows = []
    for rho in FC_LOADS:
        for K in FC_CAPACITIES:
            kw = dict(arrival_rate=rho, service_rates="1,1", capacity=K)
            ex = exactq.solve("jsq", "blocking_probability", **kw).value
            ap = exactq.solve("jsq", "blocking_probability", method="asymptotic", **kw).value
            rows.append({"rho": rho, "K": K, "block_exact": ex, "block_asymptotic": ap,
                         "relative_error": abs(ap / ex - 1) if ex > 0 else 0.0})
    return rows


def _marginals(K: int = 20, loads=(3.0, 4.0, 5.0)) -> dict:
    """P(Q2 = n) of the finite system for loads around rho = 4 (exact chain)."""
    from exactq.solvers.ctmc_method import solve_chain

    out = {}
    for rho in loads:
        m = exactq.model("jsq", arrival_rate=rho, service_rates="1,1", capacity=K)
        chain = m.ctmc()
        pi = solve_chain(chain).pi
        out[str(rho)] = np.bincount(chain.states[:, 1], weights=pi, minlength=K + 1).tolist()
    return out


def _fmt(rows: list[dict], cols: list[str]) -> str:
    head = "  ".join(f"{c:>16}" for c in cols)
    lines = [head]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{v:>16.10g}" if isinstance(v, float) else f"{v!s:>16}")
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _bounds_vs_threshold(rho: float = 0.9, thresholds=range(1, 11)) -> list[dict]:
    rows = []
    for T in thresholds:
        try:
            b = exactq.solve("jsq", "mean_waiting_time", method="bounds", threshold=T,
                             arrival_rate=2 * rho, service_rates="1,1")
            rows.append({"T": T, "lower": b.lower, "upper": b.upper})
        except exactq.ExactqError as e:  # an unstable modified system at small T
            rows.append({"T": T, "lower": None, "upper": None, "note": str(e)})
    return rows


@register_reproduction("shortest-queue", "JSQ by compensation/CTMC/bounds, SED for Erlang servers, finite capacity")
def reproduce_shortest_queue(out_dir: Path | None) -> str:
    jsq = _jsq_table()
    sed = _sed_table()
    fc = _finite_table()
    marg = _marginals()
    cols = ["rho", "EW_compensation", "EW_ctmc", "ctmc_states"] + (["EW_lower", "EW_upper"] if _has_bounds() else [])
    text = [
        "Symmetric JSQ, two unit-rate servers, arrivals 2 rho: mean waiting time E[W] (excluding service)",
        _fmt(jsq, cols),
        "",
        "SED routing, two identical Erlang-r servers of mean 1, arrivals 2 rho: E[W]",
        _fmt(sed, ["rho", "EW_r1", "EW_r2", "EW_r3"]),
        "",
        "Finite capacity K per queue, rho = lambda/mu: blocking probability, exact chain vs large-K approximation",
        _fmt(fc, ["rho", "K", "block_exact", "block_asymptotic", "relative_error"]),
    ]
    bt = _bounds_vs_threshold() if _has_bounds() else []
    if bt:
        text += ["", "Bounds on E[W] at rho = 0.9 versus threshold T", _fmt(bt, ["T", "lower", "upper"])]
    if out_dir is not None:
        data = {"jsq": jsq, "sed": sed, "finite_capacity": fc, "marginals_K20": marg, "bounds_vs_T": bt}
        (out_dir / "shortest_queue.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, marg, bt)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, marg: dict, bt: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for rho, p in marg.items():
        ax.semilogy(range(len(p)), p, marker=".", label=f"rho = {rho}")
    ax.set_xlabel("n (jobs at queue 2)")
    ax.set_ylabel("P(Q2 = n)")
    ax.set_title("Finite capacity K = 20: marginal across rho = 4")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "finite_capacity_marginal.png", dpi=120)
    plt.close(fig)
    pts = [r for r in bt if r.get("lower") is not None]
    if pts:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        T = [r["T"] for r in pts]
        exact = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=1.8,
                             service_rates="1,1").value
        ax.semilogy(T, [(exact - r["lower"]) / exact for r in pts], "o-", label="exact - lower (jockeying)")
        ax.semilogy(T, [(r["upper"] - exact) / exact for r in pts], "s-", label="upper - exact (blocking)")
        ax.set_xlabel("threshold T")
        ax.set_ylabel("relative distance to exact E[W]")
        ax.set_title("JSQ bounds at rho = 0.9")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "jsq_bounds.png", dpi=120)
        plt.close(fig)
