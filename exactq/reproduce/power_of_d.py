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
from exactq.progress import Job, Stage, steps
from exactq.reproduce import have_matplotlib, register_reproduction

__all__ = ["reproduce_power_of_d"]

SERVERS = tuple(range(2, 13))
LOADS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
SWEEP_SERVERS = (2, 4, 6)
MAX_STATES = 2_000_000


def _solve(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("power-of-d", **kw)


def _exact(*, tol, max_states=MAX_STATES, stage: Stage | None = None, **kw):
    """The exact method within a state budget; past it, the last stage and its change.

    ``stage`` (a progress stage) receives the truncation's records as details.
    """
    from types import SimpleNamespace

    from exactq.catalogue import check_method_for
    from exactq.errors import TruncationError
    from exactq.methods import run

    model = exactq.model("power-of-d", **kw)
    stages = []

    def record(r):
        stages.append(r)
        if stage is not None:
            stage.detail(r)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = run(check_method_for(model, "exact"), model, "mean_response_time", tol=tol, truncation=None,
                      verify=False, strict=False, options={"max_states": max_states, "progress": record})
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


#: (tolerance, state budget) of the exact solves per table: the default run takes about five
#: minutes of one core (measured: README); ``--full`` is the paper-scale run (much longer);
#: ``smoke`` exercises every table and figure in seconds (its numbers are not the paper's)
SCALE = {
    "smoke": {"servers": (1e-3, 20_000), "loads": (1e-3, 20_000), "errors": (1e-2, 3_000)},
    "default": {"servers": (1e-4, 2_000_000), "loads": (1e-5, 400_000), "errors": (1e-4, 100_000)},
    "full": {"servers": (1e-6, 6_000_000), "loads": (1e-6, MAX_STATES), "errors": (1e-5, 1_000_000)},
}
SCALE[False], SCALE[True] = SCALE["default"], SCALE["full"]  # the former keys
#: the grids per scale (servers, loads, load-sweep servers, error probabilities, stability eps)
GRIDS = {
    "smoke": {"servers": (3, 4), "loads": (0.5, 0.9), "sweep": (2,), "eps": (0.0, 0.5, 1.0), "stability": 3,
              "bounds": {"lower_states": 5000, "max_phases": 40}},
    "default": {"servers": None, "loads": None, "sweep": None, "eps": tuple(np.round(np.linspace(0, 1, 11), 2)),
                "stability": 11, "bounds": None},
}
GRIDS["full"] = GRIDS["default"]


def _budget(ex) -> str:
    return "budget" if getattr(ex, "budget_reached", False) else "tol"


# -- predicted costs (only the progress ETA uses them) ------------------------------------------
def _predicted_states(n: int, lam: float, tol: float, max_states: int) -> float:
    """A rough size of the exact method's last truncation, capped by the budget (for the ETA only).

    Fitted to the default run's tables: the first set holds about 15,000 x 1.33^(n - 2)
    states; beyond it the set grows like depth^1.3 x 1.6^n, ``depth = log(tol) / log(lambda)``
    the queue length at which the geometric tail falls below the tolerance (n = 4: 41k
    states at lambda = 0.95, 329k at 0.99, tol 1e-5; n = 12: 455k at 0.9, tol 1e-4).
    Within a factor of about 2.5 of the measured sizes.
    """
    depth = math.log(tol) / math.log(min(max(lam, 1e-3), 0.9999))
    first = 15_000.0 * 1.33 ** (n - 2)
    return float(min(max_states, max(first, 36.0 * 1.6 ** (n - 4) * depth ** 1.3)))


def _exact_cost(n: int, lam: float, tol: float, max_states: int) -> float:
    """Predicted seconds of one exact solve: ~0.18 s at 15k states, growing like states^1.33 (measured)."""
    return 0.18 * (_predicted_states(n, lam, tol, max_states) / 15_000.0) ** 1.33


def _servers_table(lam=0.9, d=2, *, tol=1e-6, max_states=6_000_000, stage: Stage | None = None,
                   servers=None, bounds_options=None) -> list[dict]:
    mf = _solve(servers="inf", d=d, arrival_rate=lam).value
    rows = []
    servers = SERVERS if servers is None else servers
    for n in steps(stage, servers, [f"n = {n}" for n in servers]):
        kw = dict(servers=n, d=d, arrival_rate=lam)
        ex = _exact(tol=tol, max_states=max_states, stage=stage, **kw)
        ref = _solve(method="refined", **kw)
        try:
            b = _solve(method="bounds", options=bounds_options, **kw)
            lo, up = b.lower, b.upper
        except ExactqError:
            lo, up = None, None
        rows.append({"n": n, "exact": ex.value, "exact_error": ex.error_estimate, "stop": _budget(ex),
                     "states": ex.n_states,
                     "refined": ref.value, "meanfield": mf, "lower": lo, "upper": up,
                     "mf_rel_error": (mf - ex.value) / ex.value, "refined_rel_error": (ref.value - ex.value) / ex.value,
                     "seconds": ex.seconds})
    return rows


def _load_table(d=2, *, tol=1e-6, max_states=MAX_STATES, stage: Stage | None = None, loads=None,
                servers=None) -> list[dict]:
    rows = []
    loads = LOADS if loads is None else loads
    servers = SWEEP_SERVERS if servers is None else servers
    points = [(lam, n) for lam in loads for n in servers]
    row: dict = {}
    for lam, n in steps(stage, points, [f"lambda = {lam:g}, n = {n}" for lam, n in points]):
        if row.get("lambda") != lam:
            row = {"lambda": lam, "meanfield": _solve(servers="inf", d=d, arrival_rate=lam).value}
            rows.append(row)
        ex = _exact(servers=n, d=d, arrival_rate=lam, tol=tol, max_states=max_states, stage=stage)
        row[f"exact_n{n}"] = ex.value
        row[f"error_n{n}"] = ex.error_estimate
        row[f"ratio_n{n}"] = ex.value / row["meanfield"]
        row[f"states_n{n}"] = ex.n_states
        row[f"seconds_n{n}"] = ex.seconds
    return rows


def _error_points(d=2, eps_grid=None) -> list[tuple[float, float]]:
    eps_grid = GRIDS["default"]["eps"] if eps_grid is None else eps_grid
    return [(lam, float(eps)) for lam in (0.9, 0.99) for eps in eps_grid]


def _error_table(d=2, *, tol=1e-5, max_states=1_000_000, stage: Stage | None = None, eps_grid=None) -> list[dict]:
    rows = []
    points = _error_points(d, eps_grid)
    for lam, eps in steps(stage, points, [f"lambda = {lam:g}, eps = {eps:g}" for lam, eps in points]):
        lim = 1.0 / (d * lam)
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
                    ex = _exact(tol=tol, max_states=max_states, stage=stage, **kw)
                    row[name] = ex.value
                    row[name + "_error"] = ex.error_estimate
                    row[name + "_states"] = ex.n_states
                    row[name + "_seconds"] = ex.seconds
                except ExactqError:  # unstable at n = 6
                    row[name] = math.inf
        rows.append(row)
    return rows


def _independent_stable_n6(lam: float, eps: float, d: int = 2) -> bool:
    if not eps:
        return True
    return lam < _solve(servers=6, d=d, error="independent", eps=eps, measure="stability_limit").value


def _error_cost(lam: float, eps: float, d: int, tol: float, max_states: int) -> float:
    """Predicted seconds of one error-table row: the exact n = 6 solves at lambda = 0.9 (mean field: ~0)."""
    if lam != 0.9:
        return 0.05
    cost = 0.05 + _exact_cost(6, lam, tol, max_states)  # dependent errors (g = 1): stable for every eps
    if _independent_stable_n6(lam, eps, d):
        cost += _exact_cost(6, lam, tol, max_states)
    return cost


def _stability_table(eps_values=None, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    grid = np.round(np.linspace(0.0, 1.0, 11), 2) if eps_values is None else eps_values
    for eps in steps(stage, grid, [f"eps = {float(e):g}" for e in grid]):
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


def _figures(out: Path, servers, loads, errors, stab) -> list[str]:
    """The three figures into ``out``; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import finite_or_nan, integer_axis, new_axes, save

    problems = []
    fig, ax = new_axes(figsize=(6.4, 4.2))
    n = [r["n"] for r in servers]
    ax.plot(n, finite_or_nan(r["exact"] for r in servers), "ko-", label="exact (lumped CTMC)")
    ax.plot(n, finite_or_nan(r["refined"] for r in servers), "s--", label="refined mean field")
    ax.plot(n, finite_or_nan(r["meanfield"] for r in servers), ":", label="mean field (n = infinity)")
    ax.plot(n, finite_or_nan(r["lower"] for r in servers), "v", label="rigorous lower bound")
    ax.plot(n, finite_or_nan(r["upper"] for r in servers), "^", label="rigorous upper bound")
    ax.set_xlabel("servers n")
    ax.set_ylabel("mean response time E[T]")
    ax.set_title("Power-of-2 dispatching, arrival rate 0.9 per server:\nfinite n against its mean-field limit",
                 fontsize=10)
    integer_axis(ax, "x")
    problems += save(fig, out / "power_of_d_servers.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    for lam, color in ((0.9, "C0"), (0.99, "C3")):
        rr = [r for r in errors if r["lambda"] == lam]
        eps = [r["eps"] for r in rr]
        ax.semilogy(eps, finite_or_nan(r["independent_mf"] for r in rr), "o-", color=color,
                    label=f"independent, load {lam:g}")
        ax.semilogy(eps, finite_or_nan(r["dependent_g1_mf"] for r in rr), "s--", color=color,
                    label=f"dependent (g = 1), load {lam:g}")
    ax.set_xlabel("error probability eps (a sample's queue length is misread)")
    ax.set_ylabel("mean response time E[T] (mean field)")
    ax.set_title("Power-of-2 with load-comparison errors, n = infinity:\nindependent errors make the system "
                 "unstable beyond eps = 1/(2 load)", fontsize=10)
    problems += save(fig, out / "power_of_d_errors.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    eps = [r["eps"] for r in stab]
    for d, color in ((2, "C0"), (3, "C1"), (5, "C2")):
        ax.plot(eps, finite_or_nan(r[f"mf_d{d}"] for r in stab), "-", color=color, label=f"mean field, d = {d}")
        ax.plot(eps, finite_or_nan(r[f"n4_d{d}"] for r in stab), "x", color=color, label=f"n = 4 servers, d = {d}")
    ax.set_xlabel("error probability eps (independent errors)")
    ax.set_ylabel("largest stable arrival rate per server")
    ax.set_title("Power-of-d with independent load-comparison errors: the stability region\n"
                 "(n = 4 cannot sample d = 5 servers)", fontsize=10)
    problems += save(fig, out / "power_of_d_stability.png")
    return problems


#: seconds of each point of the default run's tables, measured in one run (a loaded 2-core machine, 1,222 s
#: in all): the ETA's weights at the default scale. The size model below put the servers table's rows
#: (exact, refined and bounds) 10x too cheap against the error table's; the bounds dominate at small n.
MEASURED_SECONDS = {
    "servers": (4.45, 11.56, 23.99, 22.23, 40.84, 55.73, 74.68, 53.62, 62.26, 65.74, 106.99),
    "loads": (1.26, 3.11, 6.38, 0.99, 4.24, 8.40, 0.84, 5.05, 8.97, 0.90, 9.08, 23.25, 2.43, 16.30, 61.90, 2.30,
              52.50, 48.88),
    "errors": (44.28, 59.27, 75.87, 58.07, 57.20, 62.79, 23.62, 22.11, 13.63, 13.40, 12.62) + (0.02,) * 11,
    "stability": (0.01,) * 11,
}


def _plan(job: Job, scale: str, grids: dict) -> dict[str, Stage]:
    """Every table as a stage of points weighted by predicted seconds (the ETA's cost model).

    At the default scale the weights are :data:`MEASURED_SECONDS`; at other scales the
    size model (:func:`_exact_cost`, :func:`_error_cost`), with the bounds at ~0.2 n s.
    """
    sc = SCALE[scale]
    measured = MEASURED_SECONDS if scale == "default" else {}
    tol, budget = sc["servers"]
    servers = grids["servers"]
    stages = {"servers": job.stage("E[T] against n (exact, refined, bounds)",
                                   measured.get("servers") or
                                   [_exact_cost(n, 0.9, tol, budget) + 0.3 + 0.2 * n for n in servers])}
    tol, budget = sc["loads"]
    stages["loads"] = job.stage("E[T] against the load (exact n = 2, 4, 6)",
                                measured.get("loads") or
                                [_exact_cost(n, lam, tol, budget) for lam in grids["loads"] for n in grids["sweep"]])
    tol, budget = sc["errors"]
    stages["errors"] = job.stage("load-comparison errors (mean field, exact n = 6)",
                                 measured.get("errors") or
                                 [_error_cost(lam, eps, 2, tol, budget) for lam, eps in _error_points(2, grids["eps"])])
    stages["stability"] = job.stage("stability region", measured.get("stability") or [0.01] * grids["stability"])
    return stages


@register_reproduction("power-of-d", "power-of-d at finite n: exact vs refined vs mean field vs bounds; "
                                     "load-comparison errors; stability region")
def reproduce_power_of_d(out_dir: Path | None, full: bool = False, *, scale: str | None = None, progress=None) -> str:
    """The four tables (module docstring) as text; JSON and figures into ``out_dir``.

    Examples
    --------
    The stability table's mean-field column is the closed form ``1/(eps d)`` for
    ``eps > 1/d`` (Bhambay & Mukhopadhyay), here at eps = 0.8, d = 2:

    >>> row = [r for r in _stability_table() if r["eps"] == 0.8][0]
    >>> row["mf_d2"] == 1 / (0.8 * 2), row["mf_d5"] == 1 / (0.8 * 5)
    (True, True)
    """
    scale = scale or ("full" if full else "default")  # full=True: the former switch, kept
    sc = SCALE[scale]
    g = GRIDS[scale]
    grids = {"servers": g["servers"] or SERVERS, "loads": g["loads"] or LOADS, "sweep": g["sweep"] or SWEEP_SERVERS,
             "eps": g["eps"], "stability": g["stability"]}
    job = Job("power-of-d", progress)
    st = _plan(job, scale, grids)
    servers = _servers_table(tol=sc["servers"][0], max_states=sc["servers"][1], stage=st["servers"],
                             servers=grids["servers"], bounds_options=g["bounds"])
    loads = _load_table(tol=sc["loads"][0], max_states=sc["loads"][1], stage=st["loads"], loads=grids["loads"],
                        servers=grids["sweep"])
    errors = _error_table(tol=sc["errors"][0], max_states=sc["errors"][1], stage=st["errors"], eps_grid=grids["eps"])
    stab = _stability_table(np.round(np.linspace(0.0, 1.0, grids["stability"]), 2), stage=st["stability"])
    job.close()
    sweep = grids["sweep"]
    text = [
        f"Power-of-2, lambda = 0.9: E[T] exact (finite n; relative tolerance {sc['servers'][0]:g}, state budget "
        f"{sc['servers'][1]:,}; stop = tol or budget) vs refined mean field vs mean field, and rigorous bounds"
        + {"default": "\n(default scale; `exactq reproduce power-of-d --full` solves to 1e-6 with 6M states)",
           "smoke": "\n(smoke scale: a quick check of the pipeline, not the paper's values)"}.get(scale, ""),
        _fmt(servers, ["n", "exact", "exact_error", "stop", "states", "refined", "meanfield", "lower", "upper",
                       "mf_rel_error", "refined_rel_error"]),
        "",
        f"E[T] against the load: exact at n = {', '.join(map(str, sweep))} vs the mean field (ratio = exact / mean "
        "field; error =",
        f"estimated truncation error; past {sc['loads'][1]:,} states the last truncation and its change are shown)",
        _fmt(loads, ["lambda", "meanfield"] + [f"{k}_n{n}" for n in sweep for k in ("exact", "error", "ratio")]),
        "",
        "Load-comparison errors, d = 2: E[T] of the mean field (independent: inf beyond 1/(eps d)) and exact n = 6",
        f"(n = 6 within {sc['errors'][1]:,} states: near the stability limit the long-queue tail is heavy and "
        "the error grows)",
        _fmt(errors, ["lambda", "eps", "independent_mf", "dependent_g1_mf", "dependent_g2_mf",
                      "independent_n6", "independent_n6_error", "dependent_g1_n6", "dependent_g1_n6_error"]),
        "",
        "Stability region, independent errors: largest lambda (mean field: 1/(eps d) for eps > 1/d)",
        _fmt(stab, ["eps"] + [f"{k}_d{d}" for d in (2, 3, 5) for k in ("mf", "n4", "n12")]),
    ]
    if out_dir is not None:
        data = {"scale": scale, "servers": servers, "loads": loads, "errors": errors, "stability": stab}
        (out_dir / "power_of_d.json").write_text(json.dumps(data, indent=1, default=str))
        if have_matplotlib():
            _figures(out_dir, servers, loads, errors, stab)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)
