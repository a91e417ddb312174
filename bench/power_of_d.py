"""Benchmark (not a test): power-of-d, exact finite n and the mean-field fixed point.

Measured, each heavy case in a fresh subprocess so that the peak resident memory
(``ru_maxrss``) belongs to one configuration:

``target``
    Exact E[T] of power-of-2 at n = 12, lambda = 0.9 with an estimated truncation error
    below 1e-6 (``tol = 3.4e-7`` relative): wall time, peak memory, states and nonzeros
    of every truncation stage, and where the time goes (enumeration + generator
    build vs the level-aggregation solve). One run (it takes minutes); the stage
    table shows the convergence that certifies the value.
``push``
    The same at lambda = 0.95 and 0.99 under a state budget: how far the method
    reaches (the last change, the extrapolated error) and why it stops.
``reach``
    Largest n solvable to 1e-6 within 3 million states at lambda = 0.95 and 0.99.
``solver``
    The stationary solve of one fixed chain (n = 4, lambda = 0.9, ~40 000 states):
    the level-aggregation solver against exactq's sparse LU (``stationary(direct)``)
    and ILU-GMRES (``stationary(gmres)``), medians of 3 runs, as ratios.
``meanfield``
    The mean-field fixed point (Newton + stability report) for a grid of
    (d, eps, g, lambda) including near-critical loads: median and maximum time over
    repeats, and the error against closed forms where they exist (no errors:
    Mitzenmacher; eps = 1/2, d = 2: random routing).

Usage::

    python bench/power_of_d.py                 # everything (about 15-25 minutes)
    python bench/power_of_d.py --quick         # solver + meanfield + n = 8 target
    python bench/power_of_d.py --out bench/results_power_of_d.json

One JSON document goes to stdout (or ``--out``); a short table goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------ workers
def _worker_exact(n, tol, max_states, **kw):
    lam = kw["lambda"]
    import warnings

    import exactq
    from exactq.catalogue import check_method_for
    from exactq.methods import run

    m = exactq.model("power-of-d", servers=n, d=2, arrival_rate=lam)
    stages = []
    t0 = time.perf_counter()
    out = {"n": n, "lambda": lam, "tol": tol, "max_states": max_states}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run(check_method_for(m, "exact"), m, "mean_response_time", tol=tol, truncation=None, verify=False,
                    strict=False, options={"max_states": max_states, "progress": lambda rec: stages.append(dict(rec))})
        stopped = r.info["truncation"]["stopped_by"]
        out.update({"value": r.value, "error_estimate": r.error_estimate, "n_states": r.n_states,
                    "stopped_by": stopped, "ok": stopped == "tol"})
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        out.update({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    out["seconds"] = time.perf_counter() - t0
    out["stages"] = stages
    out["build_seconds"] = sum(s["build_seconds"] for s in stages)
    out["solve_seconds"] = sum(s["solve_seconds"] for s in stages)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _worker_solver():
    import exactq
    from exactq.solvers.level_aggregation import stationary_levels
    from exactq.solvers.stationary import stationary

    m = exactq.model("power-of-d", servers=4, d=2, arrival_rate=0.9)
    ch = m.level_chain(None, target_states=40_000)
    out = {"n_states": ch.n_states, "nnz": int(ch.Q.nnz)}
    ref = None
    for name, fn in (("level_aggregation", lambda: stationary_levels(ch.Q, ch.levels, x0=ch.start).pi),
                     ("gmres", lambda: stationary(ch.Q, method="gmres").pi),
                     ("direct", lambda: stationary(ch.Q, method="direct").pi)):
        times = []
        for _ in range(3 if name != "direct" else 1):
            t0 = time.perf_counter()
            pi = fn()
            times.append(time.perf_counter() - t0)
        EL = float(pi @ ch.levels)
        ref = EL if ref is None else ref
        out[name] = {"median_seconds": statistics.median(times), "runs": len(times), "EL": EL,
                     "abs_diff_vs_level_aggregation": abs(EL - ref)}
    base = out["level_aggregation"]["median_seconds"]
    for name in ("gmres", "direct"):
        out[name]["ratio_vs_level_aggregation"] = out[name]["median_seconds"] / base
    return out


def _worker_meanfield(repeats):
    import exactq
    from exactq.solvers.meanfield import occupancy_fixed_point

    cases = []
    for d in (2, 3, 5):
        for lam in (0.5, 0.9, 0.99, 0.999):
            cases.append(dict(d=d, arrival_rate=lam))
            for eps in (0.1, 1.0 / d, 0.9):
                if eps * d * lam < 1 or eps * d <= 1:
                    cases.append(dict(d=d, arrival_rate=lam, error="independent", eps=eps))
                for g in (1, 3):
                    cases.append(dict(d=d, arrival_rate=lam, error="dependent", eps=eps, g=g))
    cases.append(dict(d=2, arrival_rate=0.666, error="independent", eps=0.75))  # near 1/(eps d)
    rows = []
    for kw in cases:
        pop = exactq.model("power-of-d", servers="inf", **kw).population()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fp = occupancy_fixed_point(pop)
            times.append(time.perf_counter() - t0)
        lam, d = kw["arrival_rate"], kw["d"]
        ET = fp.total() / lam
        ref = None
        if kw.get("error") is None:
            ref = sum(lam ** ((d ** j - d) / (d - 1)) for j in range(1, 80))
        elif kw.get("error") == "independent" and d == 2 and abs(kw["eps"] - 0.5) < 1e-15:
            ref = 1.0 / (1.0 - lam)
        rows.append({**kw, "ET": ET, "K": fp.K, "median_ms": 1e3 * statistics.median(times),
                     "max_ms": 1e3 * max(times), "residual": fp.residual, "stable": fp.stable,
                     "abs_error_vs_closed_form": None if ref is None else abs(ET - ref)})
    return {"cases": rows, "repeats": repeats,
            "median_ms_over_cases": statistics.median(r["median_ms"] for r in rows),
            "worst_median_ms": max(r["median_ms"] for r in rows),
            "worst_closed_form_error": max(r["abs_error_vs_closed_form"] or 0.0 for r in rows)}


def _run_sub(args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"ok": False, "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed",
                "args": args}
    return json.loads(p.stdout)


def _dispatch(spec):
    kind = spec.pop("kind")
    if kind == "exact":
        return _worker_exact(**spec)
    if kind == "solver":
        return _worker_solver()
    if kind == "meanfield":
        return _worker_meanfield(**spec)
    raise SystemExit(f"unknown worker {kind}")


# ---------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--only", choices=("solver", "meanfield", "target", "push", "reach"), action="append",
                    help="run only these parts (repeatable)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_dispatch(json.loads(args.worker)), default=str))
        return 0
    t0 = time.time()
    res = {"date": _dt.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
           "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_at_start": os.getloadavg()}
    only = set(args.only or ("solver", "meanfield", "target") + (() if args.quick else ("push", "reach")))
    if "solver" in only:
        res["solver"] = _run_sub({"kind": "solver"})
    if "meanfield" in only:
        res["meanfield"] = _run_sub({"kind": "meanfield", "repeats": 5 if args.quick else 21})
    if "target" in only:
        if args.quick:
            res["target"] = _run_sub({"kind": "exact", "n": 8, "lambda": 0.9, "tol": 3.4e-7,
                                      "max_states": 3_000_000})
        else:
            res["target"] = _run_sub({"kind": "exact", "n": 12, "lambda": 0.9, "tol": 3.4e-7,
                                      "max_states": 8_000_000})
    if "push" in only:
        res["push"] = [_run_sub({"kind": "exact", "n": 12, "lambda": lam, "tol": 1e-6, "max_states": 6_000_000})
                       for lam in (0.95, 0.99)]
    if "reach" in only:
        reach = []
        for lam in (0.95, 0.99):
            for n in (4, 6, 8, 10):
                r = _run_sub({"kind": "exact", "n": n, "lambda": lam, "tol": 1e-6, "max_states": 3_000_000})
                reach.append({k: r.get(k) for k in ("n", "lambda", "ok", "value", "error_estimate", "n_states",
                                                    "seconds", "peak_rss_mb", "error")})
                if not r.get("ok"):
                    break
        res["reach"] = reach
    res["total_seconds"] = time.time() - t0
    text = json.dumps(res, indent=1, default=str)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        print(text)
    t = res.get("target", {})
    print(f"target n={t.get('n')} lambda={t.get('lambda')}: E[T]={t.get('value')} err={t.get('error_estimate')} "
          f"states={t.get('n_states')} {t.get('seconds', 0):.1f}s (build {t.get('build_seconds', 0):.1f}s, "
          f"solve {t.get('solve_seconds', 0):.1f}s) peak {t.get('peak_rss_mb', 0):.0f} MB", file=sys.stderr)
    s = res.get("solver", {})
    if "level_aggregation" in s:
        print(f"solver ({s['n_states']} states): level-aggregation {s['level_aggregation']['median_seconds']:.2f}s, "
              f"gmres x{s['gmres']['ratio_vs_level_aggregation']:.1f}, direct x{s['direct']['ratio_vs_level_aggregation']:.1f}",
              file=sys.stderr)
    mf = res.get("meanfield")
    if mf:
        print(f"meanfield: median {mf['median_ms_over_cases']:.2f} ms, worst median {mf['worst_median_ms']:.2f} ms, "
              f"worst closed-form error {mf['worst_closed_form_error']:.1e}", file=sys.stderr)
    for p in res.get("push", []):
        print(f"push lambda={p.get('lambda')}: ok={p.get('ok')} value={p.get('value')} err={p.get('error_estimate')} "
              f"{p.get('error', '')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
