"""Benchmark (not a test): the awp model's stationary window law, analytic against numerical.

For each preset (newreno, scalable, highspeed) at the loss probabilities 1e-2, 1e-3 and
1e-5:

``mean``
    ``E[W]`` by the analytic q-series and by the numerical Kolmogorov solution through
    :func:`exactq.solve` (model, method driver, solver), their relative difference and
    each method's own error estimate (target: agreement to 1e-8).
``density``
    The stationary density on 1,000 grid points (from 0 to the 1 - 1e-6 quantile) via
    ``exactq.solve(..., "density", points=1000)`` (target: under 1 s), for both methods,
    and the largest difference of the two densities relative to the peak.

Times are medians of ``--repeats`` calls in a warm process (the catalogue imported).

Usage::

    python bench/awp.py                 # JSON on stdout, a table on stderr
    python bench/awp.py --out bench/results_awp.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
import sys
import time
import warnings

import numpy as np

import exactq

PRESETS = ("newreno", "scalable", "highspeed")
LOSSES = (1e-2, 1e-3, 1e-5)


def _median_seconds(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _solve(measure, method, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("awp", measure, method=method, **params)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--out", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)
    _solve("mean_window", "analytic", preset="newreno", loss_prob=1e-3)  # warm: catalogue and imports

    rows = []
    for preset in PRESETS:
        for p in LOSSES:
            kw = dict(preset=preset, loss_prob=p)
            ta, a = _median_seconds(lambda: _solve("mean_window", "analytic", **kw), args.repeats)
            tn, n = _median_seconds(lambda: _solve("mean_window", "numerical", **kw), args.repeats)
            # one grid for both methods: the analytic 1 - 1e-6 quantile
            grid_max = max(_solve("density", "analytic", points=2, **kw).info["grid"])
            grid = dict(points=args.points, grid_min=0.0, grid_max=grid_max)
            tda, da = _median_seconds(lambda: _solve("density", "analytic", **grid, **kw), args.repeats)
            tdn, dn = _median_seconds(lambda: _solve("density", "numerical", **grid, **kw), args.repeats)
            fa, fn = np.asarray(da.value), np.asarray(dn.value)
            rows.append({
                "preset": preset, "loss_prob": p,
                "mean_analytic": a.value, "mean_numerical": n.value,
                "mean_relative_difference": abs(n.value - a.value) / a.value,
                "mean_error_estimate_analytic": a.error_estimate, "mean_error_estimate_numerical": n.error_estimate,
                "mean_seconds_analytic": ta, "mean_seconds_numerical": tn,
                "numerical_levels": n.info.get("levels"), "numerical_nodes": n.info.get("nodes"),
                "density_points": int(fa.size),
                "density_seconds_analytic": tda, "density_seconds_numerical": tdn,
                "density_max_difference_over_peak": float(np.max(np.abs(fa - fn)) / fa.max()),
                "density_under_1s": max(tda, tdn) < 1.0,
                "agree_1e-8": abs(n.value - a.value) <= 1e-8 * a.value,
            })
    out = {
        "benchmark": "awp",
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeats": args.repeats,
        "rows": rows,
        "worst_mean_relative_difference": max(r["mean_relative_difference"] for r in rows),
        "slowest_density_seconds": max(max(r["density_seconds_analytic"], r["density_seconds_numerical"])
                                       for r in rows),
    }
    for r in rows:
        print(f"{r['preset']:>9} p={r['loss_prob']:<7g} E[W]={r['mean_analytic']:<14.10g} "
              f"rel.diff={r['mean_relative_difference']:.1e}  density {r['density_points']} pts: "
              f"analytic {r['density_seconds_analytic']:.3f} s, numerical {r['density_seconds_numerical']:.3f} s, "
              f"max diff/peak {r['density_max_difference_over_peak']:.1e}", file=sys.stderr)
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
