"""Benchmark of sweeps (issue 13 targets); not a test. Uses every core: run it on an idle machine.

* 100 points of ``jsq service_rates=1,2 --method ctmc`` over loads 0.5 to 0.95
  (arrival rates 1.5 to 2.85): wall time with ``--backend processes`` against
  ``serial`` (target: at least 1.8x faster on 2 cores), and bit-identical values;
* millisecond points (the compensation series, ``jsq service_rates=1,1`` over
  arrival rates 0.2 to 1.9): ``processes`` must not be slower than ``serial``, for a
  small sweep (no pool pays) and a large one (batches of hundreds of points).

Each configuration runs in a fresh process (``python -m exactq sweep ...`` with
``--out`` in a temporary folder), so that both backends pay the same start-up and
catalogue load. Usage: python bench/sweep.py [--points N] [--fast-points N ...] [--out FILE]
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


def run(backend: str, model_args: list[str], over: str, method: str | None, folder: Path) -> tuple[float, list]:
    out = folder / f"{backend}-{abs(hash((over, method)))}.json"
    argv = [sys.executable, "-m", "exactq", "sweep", *model_args, "--over", over, "--backend", backend, "--out",
            str(out), "--quiet", "--force"]
    if method:
        argv += ["--method", method]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return seconds, json.loads(out.read_text())


def compare(name, model_args, over, method, folder):
    t_serial, rows_serial = run("serial", model_args, over, method, folder)
    t_proc, rows_proc = run("processes", model_args, over, method, folder)
    identical = [r["value"] for r in rows_serial] == [r["value"] for r in rows_proc]
    return {"name": name, "points": len(rows_serial), "serial_seconds": t_serial, "processes_seconds": t_proc,
            "speedup": t_serial / t_proc, "bit_identical": identical,
            "solve_seconds_serial": sum(r["seconds"] for r in rows_serial),
            "all_ok": all(r["status"] == "ok" for r in rows_serial + rows_proc)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--fast-points", type=int, nargs="*", default=[200, 4000])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = [compare("jsq 1,2 ctmc, loads 0.5-0.95", ["jsq", "service_rates=1,2"],
                           f"arrival_rate=1.5:2.85:{args.points}", "ctmc", folder)]
        for n in args.fast_points:
            results.append(compare(f"jsq 1,1 compensation, {n} points", ["jsq", "service_rates=1,1"],
                                   f"arrival_rate=0.2:1.9:{n}", None, folder))
    report = {"benchmark": "sweep", "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
              "load_average_at_end": os.getloadavg(), "results": results}
    for r in results:
        print(f"{r['name']}: serial {r['serial_seconds']:.2f} s, processes {r['processes_seconds']:.2f} s, "
              f"speedup {r['speedup']:.2f}x, bit-identical {r['bit_identical']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
