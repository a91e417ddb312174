"""Benchmark of the QBD solver (issue 10 targets); not a test.

A random phase-modulated QBD at load 0.99 (dense random blocks, half the entries
nonzero, up rates scaled so that the mean drift pi_A A0 1 = 0.99 pi_A A2 1, all rates
divided by the largest exit rate so that residuals are relative):

* logarithmic reduction at 200 phases (median over repeats) and at 1,000 phases
  (once): wall time of the whole solve (drift test, G, R, sp(R), boundary), with the
  residuals ``||A0 + R A1 + R^2 A2||_inf`` (absolute and relative to ``||A1||_inf``),
  ``max |1 - G 1|`` and the balance residual of the stationary law;
* functional iteration (U-based, the slow reference) at 200 phases: its time,
  iterations and the largest difference of its ``R`` from logarithmic reduction's;
* cyclic reduction at 200 phases, the second quadratic algorithm, for comparison.

Targets (issue 10): 200 phases in about 0.07 s to a residual of 1.6e-15; 1,000
phases in under 15 s with residual <= 1e-13; functional iteration 6-15 s at 200.

Usage: python bench/qbd.py [--phases 200 1000] [--repeat N] [--no-fi] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from exactq.representations import QBD
from exactq.solvers.qbd import mean_drift, solve_qbd

LOAD = 0.99


def random_qbd(m: int, seed: int = 0, load: float = LOAD, density: float = 0.5):
    """Random irreducible continuous-time blocks whose mean drift ratio up/down is ``load``."""
    rng = np.random.default_rng(seed)
    A0 = rng.uniform(0.0, 1.0, (m, m)) * (rng.uniform(size=(m, m)) < density)
    A2 = rng.uniform(0.0, 1.0, (m, m)) * (rng.uniform(size=(m, m)) < density)
    L = rng.uniform(0.0, 1.0, (m, m)) * (rng.uniform(size=(m, m)) < density)
    np.fill_diagonal(L, 0.0)
    d = mean_drift(A0, L - np.diag((A0 + L + A2).sum(1)), A2)
    A0 *= load * d["down"] / d["up"]
    A1 = L - np.diag(A0.sum(1) + L.sum(1) + A2.sum(1))
    u = float(np.abs(np.diag(A1)).max())  # unit largest exit rate: absolute residuals are relative ones
    return A0 / u, A1 / u, A2 / u


def run(m: int, algorithm: str, repeat: int, seed: int = 0) -> dict:
    A0, A1, A2 = random_qbd(m, seed)
    q = QBD(A0, A1, A2)
    times, sol = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        sol = solve_qbd(q, algorithm=algorithm)
        times.append(time.perf_counter() - t0)
    scale = float(np.abs(A1).sum(1).max())
    return {"phases": m, "algorithm": algorithm, "load": LOAD, "seconds": statistics.median(times),
            "repeats": repeat, "nit": sol.nit, "r_residual": sol.r_residual, "r_residual_relative": sol.r_residual / scale,
            "g_defect": sol.g_defect, "balance_residual": sol.residual, "spectral_radius_R": sol.spectral_radius,
            "mean_level": sol.mean_level(), "_R": sol.R}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-fi", action="store_true", help="skip functional iteration (6-15 s at 200 phases)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    results = []
    for m in args.phases:
        lr = run(m, "logarithmic_reduction", args.repeat if m <= 200 else 1)
        results.append(lr)
        print(f"m={m}: logarithmic reduction {lr['seconds']:.3f} s, {lr['nit']} iterations, "
              f"||A0 + R A1 + R^2 A2|| = {lr['r_residual']:.2e} (relative {lr['r_residual_relative']:.2e}), "
              f"balance {lr['balance_residual']:.2e}, sp(R) = {lr['spectral_radius_R']:.6f}", flush=True)
        if m <= 200:
            cr = run(m, "cyclic_reduction", args.repeat)
            cr["max_abs_R_difference_from_lr"] = float(np.abs(cr["_R"] - lr["_R"]).max())
            results.append(cr)
            print(f"m={m}: cyclic reduction {cr['seconds']:.3f} s, R differs by "
                  f"{cr['max_abs_R_difference_from_lr']:.2e}", flush=True)
            if not args.no_fi:
                fi = run(m, "functional_iteration", 1)
                fi["max_abs_R_difference_from_lr"] = float(np.abs(fi["_R"] - lr["_R"]).max())
                fi["ratio_to_lr"] = fi["seconds"] / lr["seconds"]
                results.append(fi)
                print(f"m={m}: functional iteration {fi['seconds']:.2f} s ({fi['nit']} iterations, "
                      f"{fi['ratio_to_lr']:.0f}x logarithmic reduction), R differs by "
                      f"{fi['max_abs_R_difference_from_lr']:.2e}", flush=True)
    for r in results:
        r.pop("_R")
    out = {"benchmark": "qbd", "python": sys.version.split()[0], "numpy": np.__version__,
           "machine": platform.machine(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None, "results": results}
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
