"""Start-up of the command line, as whole processes (issue 20 item 4).

The target: ``exactq solve jsq arrival_rate=1.8 service_rates=1,1`` (the README's
first command), as a whole process, within 2x the wall time of
``python -c "import numpy, scipy.sparse"`` measured in the same run. Every command is
run ``--repeat`` times (default 5), the commands interleaved round by round (as
hyperfine's alternating runs), and the medians compared. ``--before PYTHON`` adds the
same commands run by another interpreter (e.g. one whose exactq is the main branch's)
for the ratio before/after.

    python bench/startup.py [--repeat 5] [--before /work/venv/bin/python] [--out bench/results_startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "import numpy, scipy.sparse": ["-c", "import numpy, scipy.sparse"],
    "exactq solve jsq arrival_rate=1.8 service_rates=1,1": ["-m", "exactq", "solve", "jsq", "arrival_rate=1.8",
                                                            "service_rates=1,1"],
    "exactq solve mm1 arrival_rate=0.5 service_rate=1": ["-m", "exactq", "solve", "mm1", "arrival_rate=0.5",
                                                         "service_rate=1"],
    "exactq models": ["-m", "exactq", "models"],
}


#: a folder without an exactq/ in it: ``python -m exactq`` finds each interpreter's installed exactq
_NEUTRAL = os.path.abspath(os.sep)


def _wall(python: str, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([python, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=_NEUTRAL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{python} {' '.join(args)} failed: {r.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _exactq_of(python: str) -> str:
    code = "import exactq, os; print(os.path.dirname(os.path.dirname(exactq.__file__)))"
    root = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=_NEUTRAL).stdout.strip()
    head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"{root} @ {head.stdout.strip() or '?'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", help="another Python whose exactq to time beside this one")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results_startup.json"))
    args = ap.parse_args()
    runs = {("after", k): [] for k in COMMANDS}
    if args.before:
        runs.update({("before", k): [] for k in COMMANDS if k.startswith("exactq")})
    for _ in range(1):  # compile the bytecode once, untimed
        for (who, name) in runs:
            _wall(args.before if who == "before" else sys.executable, COMMANDS[name])
    for _ in range(args.repeat):
        for (who, name), walls in runs.items():
            walls.append(_wall(args.before if who == "before" else sys.executable, COMMANDS[name]))
    med = {f"{who}: {name}": statistics.median(w for w, _ in ws) for (who, name), ws in runs.items()}
    cpu = {f"{who}: {name}": statistics.median(c for _, c in ws) for (who, name), ws in runs.items()}
    base, base_cpu = med["after: import numpy, scipy.sparse"], cpu["after: import numpy, scipy.sparse"]
    out = {
        "what": "whole-process seconds (wall, and CPU = user + system), medians of interleaved runs",
        "repeat": args.repeat,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": list(os.getloadavg())},
        "after": _exactq_of(sys.executable),
        "before": _exactq_of(args.before) if args.before else None,
        "median_wall_seconds": med,
        "median_cpu_seconds": cpu,
        "wall_ratio_to_numpy_scipy_sparse": {k: v / base for k, v in med.items()},
        "cpu_ratio_to_numpy_scipy_sparse": {k: v / base_cpu for k, v in cpu.items()},
        "all_runs_wall_cpu": {f"{who}: {name}": ws for (who, name), ws in runs.items()},
    }
    if args.before:
        out["wall_before_over_after"] = {name: med[f"before: {name}"] / med[f"after: {name}"]
                                         for name in COMMANDS if name.startswith("exactq")}
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for k, v in med.items():
        print(f"wall {v:7.3f} s {v / base:5.2f}x   cpu {cpu[k]:7.3f} s {cpu[k] / base_cpu:5.2f}x   {k}")


if __name__ == "__main__":
    main()
