"""``exactq reproduce power-of-d``: exact finite systems next to their mean-field limits.

Seeds 001 (power-of-d with load-comparison errors; Bhambay & Mukhopadhyay) and the
last paper of 004 (Ciucu & Poloczek, "Randomized load balancing in finite regimes",
ICDCS 2016: "the existing exact but asymptotic results can be largely misleading in
finite regimes, e.g. by more than 100% in the case of 12 servers"). Tables:

1. E[T] for n = 2..12 servers at lambda = 0.9, d = 2: the exact finite value (lumped
   chain), the refined mean field (Gast & Van Houdt), the mean field, and the rigorous
   bounds (job-losing truncation, job-gaining QBD).
2. The load sweep at n = 2, 4, 6: exact vs mean field for lambda up to 0.99 where the
   exact chain is feasible (the ratio shows how wrong the limit is at finite n).
3. Error sweeps (mean field, d = 2, lambda = 0.9 and 0.99): independent errors for
   eps up to the stability limit and dependent errors (g = 1, 2) for all eps, with the
   exact n = 6 value for comparison.
4. The stability region: the largest lambda against eps, mean field and n = 4, 12.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

import exactq
from exactq.errors import ExactqError
from exactq.reproduce import have_matplotlib, new_figure, register_reproduction

__all__ = ["reproduce_power_of_d"]

SERVERS = tuple(range(2, 13))
LOADS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
SWEEP_SERVERS = (2, 4, 6)
MAX_STATES = 2_000_000


def _solve(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("power-of-d", **kw)


def _exact(*, tol, max_states=MAX_STATES, **kw):
    """The exact method within a state budget; past it, the last stage and its change."""
    from types import SimpleNamespace

    from exactq.catalogue import check_method_for
    from exactq.errors import TruncationError
    from exactq.methods import run

    model = exactq.model("power-of-d", **kw)
    stages = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = run(check_method_for(model, "exact"), model, "mean_response_time", tol=tol, truncation=None,
                      verify=False, strict=False, options={"max_states": max_states, "progress": stages.append})
        except TruncationError:  # a budget ran out (before the first stage, or under strict rules)
            if not stages:
                raise
            res = None
    if res is not None and res.info.get("truncation", {}).get("stopped_by", "tol") in ("tol", "fixed"):
        return res
    last = stages[-1]  # a budget stopped the growth: the last stage, with its change as the error
    return SimpleNamespace(value=last["value"], error_estimate=last["change"], n_states=last["n_states"],
                           seconds=sum(s["build_seconds"] + s["solve_seconds"] for s in stages),
                           budget_reached=True)


#: (tolerance, state budget) of the exact solves per table: the default run takes two to
#: three minutes on one laptop core; ``--full`` is the paper-scale run (10 minutes or more).
SCALE = {
    False: {"servers": (1e-4, 2_000_000), "loads": (1e-5, 400_000), "errors": (1e-4, 100_000)},
    True: {"servers": (1e-6, 6_000_000), "loads": (1e-6, MAX_STATES), "errors": (1e-5, 1_000_000)},
}


def _budget(ex) -> str:
    return "budget" if getattr(ex, "budget_reached", False) else "tol"


def _servers_table(lam=0.9, d=2, *, tol=1e-6, max_states=6_000_000) -> list[dict]:
    mf = _solve(servers="inf", d=d, arrival_rate=lam).value
    rows = []
    for n in SERVERS:
        kw = dict(servers=n, d=d, arrival_rate=lam)
        ex = _exact(tol=tol, max_states=max_states, **kw)
        ref = _solve(method="refined", **kw)
        try:
            b = _solve(method="bounds", **kw)
            lo, up = b.lower, b.upper
        except ExactqError:
            lo, up = None, None
        rows.append({"n": n, "exact": ex.value, "exact_error": ex.error_estimate, "stop": _budget(ex),
                     "states": ex.n_states,
                     "refined": ref.value, "meanfield": mf, "lower": lo, "upper": up,
                     "mf_rel_error": (mf - ex.value) / ex.value, "refined_rel_error": (ref.value - ex.value) / ex.value,
                     "seconds": ex.seconds})
    return rows


def _load_table(d=2, *, tol=1e-6, max_states=MAX_STATES) -> list[dict]:
    rows = []
    for lam in LOADS:
        mf = _solve(servers="inf", d=d, arrival_rate=lam).value
        row = {"lambda": lam, "meanfield": mf}
        for n in SWEEP_SERVERS:
            ex = _exact(servers=n, d=d, arrival_rate=lam, tol=tol, max_states=max_states)
            row[f"exact_n{n}"] = ex.value
            row[f"error_n{n}"] = ex.error_estimate
            row[f"ratio_n{n}"] = ex.value / mf
        rows.append(row)
    return rows


def _error_table(d=2, *, tol=1e-5, max_states=1_000_000) -> list[dict]:
    rows = []
    for lam in (0.9, 0.99):
        lim = 1.0 / (d * lam)
        for eps in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
            row = {"lambda": lam, "eps": eps}
            if eps < lim or eps * d <= 1.0:
                kw = dict(servers="inf", d=d, arrival_rate=lam, error="independent" if eps else "none")
                if eps:
                    kw["eps"] = eps
                row["independent_mf"] = _solve(**kw).value
            else:
                row["independent_mf"] = math.inf
            for g in (1, 2):
                kw = dict(servers="inf", d=d, arrival_rate=lam, error="dependent" if eps else "none")
                if eps:
                    kw.update(eps=eps, g=g)
                row[f"dependent_g{g}_mf"] = _solve(**kw).value
            if lam == 0.9:
                for name, err in (("independent_n6", "independent"), ("dependent_g1_n6", "dependent")):
                    kw = dict(servers=6, d=d, arrival_rate=lam, error=err if eps else "none")
                    if eps:
                        kw["eps"] = eps
                        if err == "dependent":
                            kw["g"] = 1
                    try:
                        ex = _exact(tol=tol, max_states=max_states, **kw)
                        row[name] = ex.value
                        row[name + "_error"] = ex.error_estimate
                    except ExactqError:  # unstable at n = 6
                        row[name] = math.inf
            rows.append(row)
    return rows


def _stability_table() -> list[dict]:
    rows = []
    for eps in np.round(np.linspace(0.0, 1.0, 11), 2):
        row = {"eps": float(eps)}
        for d in (2, 3, 5):
            kw = dict(d=d, error="independent" if eps else "none")
            if eps:
                kw["eps"] = float(eps)
            row[f"mf_d{d}"] = _solve(servers="inf", measure="stability_limit", **kw).value
            for n in (4, 12):
                row[f"n{n}_d{d}"] = _solve(servers=n, measure="stability_limit", **kw).value if d <= n else None
        rows.append(row)
    return rows


def _fmt(rows, cols) -> str:
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            if math.isinf(v):
                return "inf"
            return f"{v:.6g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
        return str(v)

    table = [cols] + [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in table)


def _axes():
    fig = new_figure(figsize=(6, 4))
    return fig, fig.subplots()


def _save(fig, ax, path: Path, xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _figures(out: Path, servers, loads, errors, stab) -> None:
    fig, ax = _axes()
    n = [r["n"] for r in servers]
    ax.plot(n, [r["exact"] for r in servers], "ko-", label="exact (lumped CTMC)")
    ax.plot(n, [r["refined"] for r in servers], "s--", label="refined mean field")
    ax.plot(n, [r["meanfield"] for r in servers], ":", label="mean field (n = inf)")
    lo = [r["lower"] for r in servers]
    up = [r["upper"] if r["upper"] is not None and math.isfinite(r["upper"]) else np.nan for r in servers]
    ax.plot(n, lo, "v", label="lower bound")
    ax.plot(n, up, "^", label="upper bound")
    ax.set_title("power-of-2, lambda = 0.9")
    _save(fig, ax, out / "power_of_d_servers.png", "servers n", "E[T]")

    fig, ax = _axes()
    for lam in (0.9, 0.99):
        rr = [r for r in errors if r["lambda"] == lam]
        eps = [r["eps"] for r in rr]
        ax.semilogy(eps, [r["independent_mf"] if math.isfinite(r["independent_mf"]) else np.nan for r in rr],
                    "o-", label=f"independent, lambda={lam}")
        ax.semilogy(eps, [r["dependent_g1_mf"] for r in rr], "s--", label=f"dependent g=1, lambda={lam}")
    _save(fig, ax, out / "power_of_d_errors.png", "eps", "E[T] (mean field)")

    fig, ax = _axes()
    eps = [r["eps"] for r in stab]
    for d in (2, 3, 5):
        ax.plot(eps, [r[f"mf_d{d}"] for r in stab], "-", label=f"mean field, d={d}")
        ax.plot(eps, [r[f"n4_d{d}"] for r in stab], "x", label=f"n=4, d={d}")
    _save(fig, ax, out / "power_of_d_stability.png", "eps (independent errors)", "largest stable lambda")


@register_reproduction("power-of-d", "power-of-d at finite n: exact vs refined vs mean field vs bounds; "
                                     "load-comparison errors; stability region")
def reproduce_power_of_d(out_dir: Path | None, full: bool = False) -> str:
    """The four tables (module docstring) as text; JSON and figures into ``out_dir``.

    Examples
    --------
    The stability table's mean-field column is the closed form ``1/(eps d)`` for
    ``eps > 1/d`` (Bhambay & Mukhopadhyay), here at eps = 0.8, d = 2:

    >>> row = [r for r in _stability_table() if r["eps"] == 0.8][0]
    >>> row["mf_d2"] == 1 / (0.8 * 2), row["mf_d5"] == 1 / (0.8 * 5)
    (True, True)
    """
    scale = SCALE[bool(full)]
    servers = _servers_table(tol=scale["servers"][0], max_states=scale["servers"][1])
    loads = _load_table(tol=scale["loads"][0], max_states=scale["loads"][1])
    errors = _error_table(tol=scale["errors"][0], max_states=scale["errors"][1])
    stab = _stability_table()
    text = [
        f"Power-of-2, lambda = 0.9: E[T] exact (finite n; relative tolerance {scale['servers'][0]:g}, state budget "
        f"{scale['servers'][1]:,}; stop = tol or budget) vs refined mean field vs mean field, and rigorous bounds"
        + ("" if full else "\n(default scale; `exactq reproduce power-of-d --full` solves to 1e-6 with 6M states)"),
        _fmt(servers, ["n", "exact", "exact_error", "stop", "states", "refined", "meanfield", "lower", "upper",
                       "mf_rel_error", "refined_rel_error"]),
        "",
        "E[T] against the load: exact at n = 2, 4, 6 vs the mean field (ratio = exact / mean field; error =",
        f"estimated truncation error; past {scale['loads'][1]:,} states the last truncation and its change are shown)",
        _fmt(loads, ["lambda", "meanfield"] + [f"{k}_n{n}" for n in SWEEP_SERVERS
                                               for k in ("exact", "error", "ratio")]),
        "",
        "Load-comparison errors, d = 2: E[T] of the mean field (independent: inf beyond 1/(eps d)) and exact n = 6",
        f"(n = 6 within {scale['errors'][1]:,} states: near the stability limit the long-queue tail is heavy and "
        "the error grows)",
        _fmt(errors, ["lambda", "eps", "independent_mf", "dependent_g1_mf", "dependent_g2_mf",
                      "independent_n6", "independent_n6_error", "dependent_g1_n6", "dependent_g1_n6_error"]),
        "",
        "Stability region, independent errors: largest lambda (mean field: 1/(eps d) for eps > 1/d)",
        _fmt(stab, ["eps"] + [f"{k}_d{d}" for d in (2, 3, 5) for k in ("mf", "n4", "n12")]),
    ]
    if out_dir is not None:
        data = {"servers": servers, "loads": loads, "errors": errors, "stability": stab}
        (out_dir / "power_of_d.json").write_text(json.dumps(data, indent=1, default=str))
        if have_matplotlib():
            _figures(out_dir, servers, loads, errors, stab)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)
