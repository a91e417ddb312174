"""Benchmark of sweeps (issue 13 targets); not a test. Uses every core: run it on an idle machine.

* 100 points of ``jsq service_rates=1,2 --method ctmc`` over loads 0.5 to 0.95
  (arrival rates 1.5 to 2.85): wall time with ``--backend processes`` against
  ``serial`` (target: at least 1.8x faster on 2 cores), and bit-identical values;
* millisecond points (the compensation series, ``jsq service_rates=1,1`` over
  arrival rates 0.2 to 1.9): ``processes`` must not be slower than ``serial``, for a
  small sweep (no pool pays) and a large one (batches of hundreds of points);
* warm starts (``warm_start=True``) on the first sweep, serial: the time against cold
  starts and the largest relative difference of the values (all within ``tol``).

Each configuration runs in a fresh interpreter that loads the catalogue and then times
the ``exactq.sweep`` call (``--out`` in a temporary folder); the wall time of the whole
process, start-up included, is reported beside it. Usage: python bench/sweep.py [--points N] [--fast-points N ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


DRIVER = """
import json, sys, time
import exactq
exactq.model_names()  # the catalogue load, common to both backends, is not the sweep's
args = json.loads(sys.argv[1])
t0 = time.perf_counter()
rows = exactq.sweep(args["model"], args["fixed"], args["over"], method=args["method"], backend=args["backend"],
                    out=args["out"], force=True, as_frame=False, warm_start=args.get("warm", False))
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def run(backend: str, model: str, fixed: dict, over: dict, method: str, folder: Path,
        warm: bool = False) -> tuple[float, float, list]:
    """(seconds of the sweep call, seconds of the whole process, rows), in a fresh interpreter."""
    out = folder / f"{backend}-{warm}-{abs(hash(json.dumps(over)))}.json"
    spec = {"model": model, "fixed": fixed, "over": over, "method": method, "backend": backend, "out": str(out),
            "warm": warm}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(spec)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{backend} sweep failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"], wall, json.loads(out.read_text())


def compare(name, model, fixed, over, method, folder):
    t_serial, wall_serial, rows_serial = run("serial", model, fixed, over, method, folder)
    t_proc, wall_proc, rows_proc = run("processes", model, fixed, over, method, folder)
    identical = [r["value"] for r in rows_serial] == [r["value"] for r in rows_proc]
    return {"name": name, "points": len(rows_serial), "serial_seconds": t_serial, "processes_seconds": t_proc,
            "speedup": t_serial / t_proc, "serial_process_wall": wall_serial, "processes_process_wall": wall_proc,
            "bit_identical": identical, "solve_seconds_serial": sum(r["seconds"] for r in rows_serial),
            "all_ok": all(r["status"] == "ok" for r in rows_serial + rows_proc)}


def compare_warm(name, model, fixed, over, method, folder):
    """Serial sweeps with and without warm starts: the time, and the largest relative difference."""
    t_cold, _, cold = run("serial", model, fixed, over, method, folder)
    t_warm, _, warm = run("serial", model, fixed, over, method, folder, warm=True)
    diff = max(abs(w["value"] - c["value"]) / abs(c["value"]) for c, w in zip(cold, warm))
    return {"name": name, "points": len(cold), "cold_seconds": t_cold, "warm_seconds": t_warm,
            "speedup": t_cold / t_warm, "max_relative_difference": diff,
            "max_relative_error_estimate": max(r["error_estimate"] / abs(r["value"]) for r in warm),
            "all_ok": all(r["status"] == "ok" for r in cold + warm)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--fast-points", type=int, nargs="*", default=[200, 4000])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = [compare("jsq 1,2 ctmc, loads 0.5-0.95", "jsq", {"service_rates": "1,2"},
                           {"arrival_rate": f"1.5:2.85:{args.points}"}, "ctmc", folder)]
        for n in args.fast_points:
            results.append(compare(f"jsq 1,1 compensation, {n} points", "jsq", {"service_rates": "1,1"},
                                   {"arrival_rate": f"0.2:1.9:{n}"}, "auto", folder))
        warm = compare_warm("jsq 1,2 ctmc, loads 0.5-0.95, serial, warm starts", "jsq", {"service_rates": "1,2"},
                            {"arrival_rate": f"1.5:2.85:{args.points}"}, "ctmc", folder)
    report = {"benchmark": "sweep", "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
              "load_average_at_end": os.getloadavg(), "results": results, "warm_start": warm}
    for r in results:
        print(f"{r['name']}: serial {r['serial_seconds']:.2f} s, processes {r['processes_seconds']:.2f} s, "
              f"speedup {r['speedup']:.2f}x (whole processes {r['serial_process_wall']:.2f} s vs "
              f"{r['processes_process_wall']:.2f} s), bit-identical {r['bit_identical']}")
    print(f"{warm['name']}: cold {warm['cold_seconds']:.2f} s, warm {warm['warm_seconds']:.2f} s, speedup "
          f"{warm['speedup']:.2f}x, largest relative difference {warm['max_relative_difference']:.1e}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
