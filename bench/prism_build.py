"""Benchmark (not a test): building PRISM models, exactq against Storm in the same run.

The models are the DTMC case studies of ``bench/prism_dtmc_models.py`` (Herman's
self-stabilising ring, synchronous leader election, crowds) and the CTMC case
studies of ``bench/prism_models.py`` (tandem, polling, cluster, embedded, kanban,
fms), all written for exactq from their published descriptions. For every model and
size, each tool builds the model ``--repeat`` times (default 3), each time in a fresh
subprocess (so that its peak resident memory is its own), the tools alternating:

``exactq``
    ``exactq.load_prism(path, constants)`` and the build: parse, analyse, explore
    and assemble the chain (in-process seconds; ``build_only`` is the build
    without the parse). The libraries (exactq, scipy.sparse.csgraph) are imported
    before the clock starts, as Storm's are by ``import stormpy``.
``storm``
    ``stormpy.build_model(stormpy.parse_prism_program(path, prism_compatibility=True))``
    (with ``instantiate_constants`` for the undefined constants): Storm's sparse
    engine, every label and reward structure.

Reported per model and size: both tools' state and transition counts (they must be
equal: exactq counts transitions as (source, target) pairs with self-loops, as
PRISM and Storm do), the median seconds of each tool, the ratio
``exactq / storm`` (the target is <= 2 everywhere) and the peak memory.

Usage::

    python bench/prism_build.py --quick                  # the two smallest sizes of each case
    python bench/prism_build.py --cases herman --sizes 13,15
    python bench/prism_build.py --out bench/results_prism_build.json
    python bench/prism_build.py --show bench/results_prism_build.json

One JSON document goes to stdout (or ``--out``); a table goes to stderr.
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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import prism_dtmc_models  # noqa: E402
import prism_models  # noqa: E402

MARK = "BENCH_RESULT "

#: name -> (generator, quick sizes, full sizes, size names); sizes are argument tuples
CASES = dict(prism_dtmc_models.CASES)
CASES.update({
    "tandem": (prism_models.tandem, ((31,), (127,)), ((31,), (127,), (255,)), ("c",)),
    "polling": (prism_models.polling, ((5,), (8,)), ((5,), (8,), (10,)), ("N",)),
    "cluster": (prism_models.cluster, ((8,), (16,)), ((8,), (16,), (32,)), ("N",)),
    "embedded": (prism_models.embedded, ((2,), (8,)), ((2,), (8,), (32,)), ("MAX_COUNT",)),
    "kanban": (prism_models.kanban, ((1,), (2,)), ((1,), (2,), (3,)), ("t",)),
    "fms": (prism_models.fms, ((2,), (3,)), ((2,), (3,), (4,)), ("n",)),
})


def _emit(out: dict) -> None:
    out["peak_rss_bytes"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    sys.stdout.write(MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


def _model_file(case: str, size: tuple, directory: str) -> tuple[str, str]:
    text, constants, _ = CASES[case][0](*size)
    ext = ".pm" if text.startswith("dtmc") else ".sm"
    path = os.path.join(directory, f"{case}_{'_'.join(map(str, size))}{ext}")
    with open(path, "w") as fh:
        fh.write(text)
    return path, ",".join(f"{k}={v}" for k, v in constants.items())


# ----------------------------------------------------------------------------- workers
def worker_exactq(path: str, consts: str) -> None:
    import warnings

    import scipy.sparse.csgraph  # noqa: F401  (the library is loaded before timing, as ``import stormpy`` is)

    import exactq
    import exactq.prism.builder as builder

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = exactq.load_prism(path, consts or None)
        info = model.info
        t1 = time.perf_counter()
        built = builder.build_model(info)
    t2 = time.perf_counter()
    _emit({"n_states": int(built.n_states), "n_transitions": int(built.n_transitions), "seconds": t2 - t0,
           "build_only": t2 - t1, "warnings": [str(w.message) for w in caught]})


def worker_storm(path: str, consts: str) -> None:
    import stormpy
    import stormpy.info

    t0 = time.perf_counter()
    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    model = stormpy.build_model(prog)
    t1 = time.perf_counter()
    _emit({"n_states": int(model.nr_states), "n_transitions": int(model.nr_transitions), "seconds": t1 - t0,
           "storm_version": stormpy.info.storm_version()})


def run_worker(args: list, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["wall_seconds"] = time.perf_counter() - t0
            return out
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit {proc.returncode}: {tail}"}


# ----------------------------------------------------------------------------- driver
def summarise(entry: dict) -> None:
    for tool in ("exactq", "storm"):
        runs = [r for r in entry[tool + "_runs"] if "error" not in r]
        if runs:
            s = {"median_seconds": statistics.median(r["seconds"] for r in runs),
                 "n_states": runs[0]["n_states"], "n_transitions": runs[0]["n_transitions"],
                 "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs)}
            if tool == "exactq":
                s["median_build_only"] = statistics.median(r["build_only"] for r in runs)
            entry[tool] = s
        else:
            entry[tool] = {"error": entry[tool + "_runs"][0]["error"] if entry[tool + "_runs"] else "not run"}
    ex, st = entry["exactq"], entry["storm"]
    if "median_seconds" in ex and "median_seconds" in st:
        entry["ratio"] = ex["median_seconds"] / st["median_seconds"]
        entry["counts_agree"] = (ex["n_states"], ex["n_transitions"]) == (st["n_states"], st["n_transitions"])


def table(doc: dict) -> str:
    lines = [f"{'case':12} {'size':>8} {'states':>9} {'transitions':>12} {'exactq s':>9} {'storm s':>9} "
             f"{'ratio':>6} {'counts':>7} {'MiB ex/st':>11}"]
    for e in doc["runs"]:
        ex, st = e.get("exactq", {}), e.get("storm", {})
        size = ",".join(map(str, e["size"]))
        n = ex.get("n_states", st.get("n_states", "-"))
        t = ex.get("n_transitions", st.get("n_transitions", "-"))
        fmt = lambda d, k: format(d[k], ".3g") if k in d else "-"  # noqa: E731
        mem = (f"{ex.get('peak_rss_bytes', 0) / 2**20:.0f}/{st.get('peak_rss_bytes', 0) / 2**20:.0f}")
        ratio = e.get("ratio")
        err = "; ".join(f"{k}: {d['error']}" for k, d in (("exactq", ex), ("storm", st)) if "error" in d)
        lines.append(f"{e['case']:12} {size:>8} {n:>9} {t:>12} {fmt(ex, 'median_seconds'):>9} "
                     f"{fmt(st, 'median_seconds'):>9} {'-' if ratio is None else format(ratio, '.2f'):>6} "
                     f"{str(e.get('counts_agree', '-')):>7} {mem:>11}" + (f"  [{err}]" if err else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest sizes of each case")
    ap.add_argument("--cases", help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--sizes", help="sizes of one case: 13,15 or 4x6,6x4 for two parameters")
    ap.add_argument("--repeat", type=int, default=3, help="builds per tool (the median is reported)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per build")
    ap.add_argument("--out")
    ap.add_argument("--show")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        w = json.loads(args.worker)
        (worker_exactq if w[0] == "exactq" else worker_storm)(*w[1:])
        return 0
    if args.show:
        with open(args.show) as fh:
            print(table(json.load(fh)))
        return 0
    cases = args.cases.split(",") if args.cases else list(CASES)
    doc = {"benchmark": "bench/prism_build.py", "date": _dt.datetime.now().isoformat(timespec="seconds"),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count(), "loadavg_1min_at_start": os.getloadavg()[0]},
           "command": " ".join([os.path.basename(sys.executable), "bench/prism_build.py"] + (argv or sys.argv[1:])),
           "repeat": args.repeat, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            gen, quick, full, names = CASES[case]
            if args.sizes:
                sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
            else:
                sizes = quick if args.quick else full
            for size in sizes:
                path, consts = _model_file(case, size, tmp)
                entry = {"case": case, "size": list(size), "parameters": list(names), "constants": consts,
                         "exactq_runs": [], "storm_runs": [], "loadavg_1min": os.getloadavg()[0]}
                for _ in range(args.repeat):  # alternate, so that both tools see the same machine
                    for tool in ("exactq", "storm"):
                        entry[tool + "_runs"].append(run_worker([tool, path, consts], args.timeout))
                summarise(entry)
                doc["runs"].append(entry)
                print(table({"runs": [entry]}).splitlines()[-1], file=sys.stderr, flush=True)
    doc["machine"]["loadavg_1min_at_end"] = os.getloadavg()[0]
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    print(table(doc), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
