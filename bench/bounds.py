"""Benchmark (not a test): width and cost of the threshold bounds for symmetric JSQ.

For rho in {0.5, 0.8, 0.9, 0.95, 0.99} (two servers of rate 1, arrival rate 2 rho)
and thresholds T = 1..20, 25, 30, 40, the ``bounds`` method (``exactq.solve(...,
method="bounds", threshold=T)``: the model's bracket of two QBDs with T + 1 phases,
solved by logarithmic reduction) gives lower/upper bounds on E[W] (waiting time, service
excluded) and E[L]. Recorded per (rho, T, measure): the bounds, the relative width
``(upper - lower) / midpoint``, whether the exact value lies inside, and the median
wall time of one ``bounds`` solve at that threshold. Also: the smallest stable threshold of
the blocking system, the smallest T with relative width below 1 % and below 1e-6,
and as baselines measured in the same run the exact value by the compensation
method and by the adaptively truncated CTMC (``tol=1e-9``), with the time ratios
``baseline_seconds / bounds_seconds`` (at T = 6).

Target (issue 3): T = 6 at rho = 0.9 gives a relative width below 1 %.

Usage::

    python bench/bounds.py                       # JSON to stdout, a table to stderr
    python bench/bounds.py --out bench/results_bounds.json
    python bench/bounds.py --quick               # rho = 0.9 only, no CTMC baseline
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
import sys
import time

import numpy as np
import scipy

import exactq
from exactq.errors import UnstableError
from exactq.models.jsq import min_stable_threshold

RHOS = (0.5, 0.8, 0.9, 0.95, 0.99)
THRESHOLDS = tuple(range(1, 21)) + (25, 30, 40)
MEASURES = ("mean_waiting_time", "mean_number")


def _median_time(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(rhos, thresholds, repeat, ctmc_baseline):
    doc = {
        "benchmark": "threshold jockeying/blocking bounds, symmetric two-server JSQ",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "machine": platform.machine(),
        "repeat": repeat,
        "cases": [],
    }
    for rho in rhos:
        lam = 2 * rho
        case = {"rho": rho, "arrival_rate": lam, "service_rates": [1.0, 1.0],
                "min_stable_threshold": min_stable_threshold(lam, 1.0), "measures": {}}
        for measure in MEASURES:
            t_comp, comp = _median_time(
                lambda: exactq.solve("jsq", measure, method="compensation", arrival_rate=lam,
                                     service_rates="1,1"), repeat)
            exact = float(comp.value)
            rows = []
            for T in thresholds:
                try:
                    secs, b = _median_time(lambda: exactq.solve("jsq", measure, method="bounds", threshold=T,
                                                                arrival_rate=lam, service_rates="1,1"), repeat)
                except UnstableError as e:
                    rows.append({"threshold": T, "unstable": str(e)})
                    continue
                mid = 0.5 * (b.lower + b.upper)
                rows.append({
                    "threshold": T, "lower": b.lower, "upper": b.upper,
                    "relative_width": (b.upper - b.lower) / mid,
                    "contains_exact": bool(b.lower <= exact <= b.upper),
                    "seconds": secs,
                })
            ok = [r for r in rows if "relative_width" in r]

            def first_below(x):
                hit = [r["threshold"] for r in ok if r["relative_width"] < x]
                return hit[0] if hit else None

            entry = {
                "exact": exact,
                "exact_method": "compensation",
                "compensation_seconds": t_comp,
                "rows": rows,
                "threshold_for_1_percent": first_below(0.01),
                "threshold_for_1e-6": first_below(1e-6),
            }
            t6 = next((r["seconds"] for r in ok if r["threshold"] == 6), None)
            if t6:
                entry["ratio_compensation_over_bounds_T6"] = t_comp / t6
            if ctmc_baseline and rho <= 0.95:
                t_ctmc, ctmc = _median_time(
                    lambda: exactq.solve("jsq", measure, method="ctmc", arrival_rate=lam,
                                         service_rates="1,1", tol=1e-9), 1)
                entry["ctmc_seconds"] = t_ctmc
                entry["ctmc_value"] = float(ctmc.value)
                if t6:
                    entry["ratio_ctmc_over_bounds_T6"] = t_ctmc / t6
            case["measures"][measure] = entry
        doc["cases"].append(case)
    t9 = [r for c in doc["cases"] if c["rho"] == 0.9
          for r in c["measures"]["mean_waiting_time"]["rows"] if r["threshold"] == 6]
    if t9:
        doc["target"] = {"rho": 0.9, "threshold": 6, "measure": "mean_waiting_time",
                         "relative_width": t9[0]["relative_width"], "goal": 0.01,
                         "met": bool(t9[0]["relative_width"] < 0.01)}
    return doc


def table(doc):
    lines = []
    for c in doc["cases"]:
        lines.append(f"rho = {c['rho']}  (blocking stable for T >= {c['min_stable_threshold']})")
        lines.append(f"  {'T':>3} " + " ".join(f"{m:>26}" for m in MEASURES) + f" {'ms/call':>9}")
        by_t = {}
        for m in MEASURES:
            for r in c["measures"][m]["rows"]:
                by_t.setdefault(r["threshold"], {})[m] = r
        for T, rs in by_t.items():
            cells = []
            for m in MEASURES:
                r = rs[m]
                if "unstable" in r:
                    cells.append(f"{'unstable':>26}")
                else:
                    verdict = "ok" if r["contains_exact"] else "FAIL"
                    cells.append(f"{r['relative_width']:>17.3e} {verdict:>8}")
            secs = rs[MEASURES[0]].get("seconds")
            lines.append(f"  {T:>3} " + " ".join(cells) + (f" {1e3 * secs:>9.2f}" if secs else ""))
        for m in MEASURES:
            e = c["measures"][m]
            extra = "".join(f", {k} {e[k]:.1f}" for k in ("ratio_compensation_over_bounds_T6",
                                                        "ratio_ctmc_over_bounds_T6") if k in e)
            lines.append(f"  {m}: exact {e['exact']:.10g}; T for 1%: {e['threshold_for_1_percent']}, "
                         f"for 1e-6: {e['threshold_for_1e-6']}{extra}")
    if "target" in doc:
        t = doc["target"]
        lines.append(f"target rho=0.9, T=6, E[W]: relative width {t['relative_width']:.3%} "
                     f"({'met' if t['met'] else 'NOT met'}, goal < 1%)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    ap.add_argument("--quick", action="store_true", help="rho = 0.9 only, no CTMC baseline")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rhos = (0.9,) if args.quick else RHOS
    doc = run(rhos, THRESHOLDS, args.repeat, ctmc_baseline=not args.quick)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    print(table(doc), file=sys.stderr)


if __name__ == "__main__":
    main()
