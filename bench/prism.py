"""Benchmark (not a test): PRISM-language case studies, exactq against Storm in the same run.

The models are the classic CTMC case studies, written for exactq from their published
descriptions (``bench/prism_models.py``: tandem queue, cyclic server polling,
workstation cluster, embedded control system, kanban, flexible manufacturing), at
growing sizes. Each configuration runs in a fresh subprocess (so that its peak
resident memory is its own) with a timeout:

``exactq``
    ``exactq.load_prism`` + the build (explore and assemble the chain), then
    :func:`exactq.api.check_properties` for every property (sparse LU with nested
    dissection for the steady state, uniformisation with Fox-Glynn for the transient
    ones).
``storm_best``
    stormpy 2.x: ``parse_prism_program(prism_compatibility=True)``, constants,
    ``build_model`` (the sparse engine), then ``model_checking`` with Storm's best
    linear solver for these chains, Eigen's SparseLU (``--eqsolver eigen
    --eigen:method sparselu``), and ``--precision 1e-12`` for the transient ones: the
    "exact-LU" reference values.
``storm_default``
    The same build with Storm's default environment (what ``storm`` does without
    flags: gmm++ GMRES / topological, relative precision 1e-6).

Reported per case and size: state and transition counts of both tools, build
seconds, check seconds per property and in total, both values, their relative
difference (the target is 1e-9 against storm_best), and the speed ratio of
"build + steady-state check" (the target: exactq faster than storm_best at about
10^6 states).

Usage::

    python bench/prism.py --quick                 # two small sizes per case (about a minute)
    python bench/prism.py --cases tandem --sizes 511,700 --timeout 290
    python bench/prism.py --out bench/results_prism.json
    python bench/prism.py --show bench/results_prism.json

One JSON document goes to stdout (or ``--out``); a table goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from prism_models import CASES  # noqa: E402

MARK = "BENCH_RESULT "
AGREE_RTOL = 1e-9
VARIANTS = ("exactq", "storm_best", "storm_default")


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _emit(out: dict) -> None:
    out["peak_rss_bytes"] = _peak_rss()
    sys.stdout.write(MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


def _model_file(case: str, size: int, directory: str) -> tuple[str, str, list]:
    gen = CASES[case][0]
    text, constants, props = gen(size)
    path = os.path.join(directory, f"{case}_{size}.sm")
    with open(path, "w") as fh:
        fh.write(text)
    consts = ",".join(f"{k}={v}" for k, v in constants.items())
    return path, consts, props


# ----------------------------------------------------------------------------- workers
def worker_exactq(path: str, consts: str, props: list) -> None:
    import warnings

    import exactq
    import exactq.prism.builder  # noqa: F401  (imports are not part of the build)
    import exactq.solvers.csl  # noqa: F401
    from exactq.api import check_properties
    from exactq.catalogue import _load

    _load()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = exactq.load_prism(path, consts or None)
        built = model.built
    build = time.perf_counter() - t0
    results = []
    for p in props:
        t1 = time.perf_counter()
        res, = check_properties(model, p)
        results.append({"property": p, "value": res.value, "seconds": time.perf_counter() - t1,
                        "method": res.method, "error_estimate": res.error_estimate,
                        "stationary": res.info.get("stationary", {}).get("method")})
    _emit({"n_states": int(built.chain.n_states), "n_transitions": int(built.n_transitions), "build_seconds": build,
           "results": results, "warnings": [str(w.message) for w in caught]})


def worker_storm(path: str, consts: str, props: list, variant: str) -> None:
    import stormpy
    import stormpy.info
    from stormpy import developer

    t0 = time.perf_counter()
    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    parsed = stormpy.parse_properties(";".join(props), prog)
    model = stormpy.build_model(prog, parsed)
    build = time.perf_counter() - t0
    if variant == "storm_best":
        developer.set_from_exploded_string(["--eqsolver", "eigen", "--eigen:method", "sparselu",
                                            "--precision", "1e-12"])
    env = developer.EnvironmentBuilder.build_environment()
    init = model.initial_states[0]
    results = []
    for p, prop in zip(props, parsed):
        t1 = time.perf_counter()
        r = stormpy.model_checking(model, prop, only_initial_states=True, environment=env)
        results.append({"property": p, "value": float(r.get_value(init)), "seconds": time.perf_counter() - t1})
    _emit({"n_states": int(model.nr_states), "n_transitions": int(model.nr_transitions), "build_seconds": build,
           "results": results, "storm_version": stormpy.info.storm_version(),
           "equation_solver": str(env.solver().get_linear_equation_solver_type())})


def run_worker(args: list, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s", "wall_seconds": time.perf_counter() - t0}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["wall_seconds"] = time.perf_counter() - t0
            return out
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit {proc.returncode}: {tail}", "wall_seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- driver
def _rel(a, b) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


def compare(entry: dict) -> None:
    ex, best = entry.get("exactq", {}), entry.get("storm_best", {})
    if "results" not in ex or "results" not in best:
        return
    rows = []
    worst = 0.0
    for a, b in zip(ex["results"], best["results"]):
        d = _rel(a["value"], b["value"])
        absd = abs(a["value"] - b["value"]) if d is not None else None
        rows.append({"property": a["property"], "exactq": a["value"], "storm_best": b["value"], "rel_diff": d,
                     "abs_diff": absd, "agree": d is not None and d <= AGREE_RTOL})
        if d is not None:
            worst = max(worst, d)
    entry["agreement"] = {"max_rel_diff": worst, "rtol": AGREE_RTOL, "all_agree": all(r["agree"] for r in rows),
                          "properties": rows}
    steady = next((k for k, p in enumerate(entry["properties"]) if "[ S ]" in p or p.startswith("S=?")), None)
    if steady is not None:
        te = ex["build_seconds"] + ex["results"][steady]["seconds"]
        ts = best["build_seconds"] + best["results"][steady]["seconds"]
        entry["steady_state_total"] = {"property": entry["properties"][steady], "exactq_seconds": te,
                                       "storm_best_seconds": ts, "speedup": ts / te if te > 0 else None}


def table(doc: dict) -> str:
    lines = [f"{'case':9} {'size':>5} {'states':>9} {'build s (ex/storm)':>19} {'S total s (ex/storm)':>21} "
             f"{'speedup':>7} {'max rel diff':>12}"]
    for e in doc["runs"]:
        ex, st = e.get("exactq", {}), e.get("storm_best", {})
        n = ex.get("n_states", st.get("n_states", "-"))
        b = f"{ex.get('build_seconds', float('nan')):.3g}/{st.get('build_seconds', float('nan')):.3g}"
        tot = e.get("steady_state_total", {})
        s = f"{tot.get('exactq_seconds', float('nan')):.3g}/{tot.get('storm_best_seconds', float('nan')):.3g}"
        sp = tot.get("speedup")
        agr = e.get("agreement", {}).get("max_rel_diff")
        err = "; ".join(f"{v}: {e[v]['error']}" for v in VARIANTS if "error" in e.get(v, {}))
        lines.append(f"{e['case']:9} {e['size']:>5} {n:>9} {b:>19} {s:>21} "
                     f"{'-' if sp is None else format(sp, '.2f'):>7} {'-' if agr is None else format(agr, '.1e'):>12}"
                     + (f"  [{err}]" if err else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest sizes of each case")
    ap.add_argument("--cases", help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--sizes", help="comma-separated sizes (with one case)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steady-only", action="store_true",
                    help="check only the steady-state properties (S=?, R=? [ S ]): the big sizes")
    ap.add_argument("--first-steady", action="store_true", help="check only the first steady-state property")
    ap.add_argument("--append", metavar="FILE", help="add the runs to this JSON document (created if missing)")
    ap.add_argument("--timeout", type=float, default=290.0, help="seconds per worker")
    ap.add_argument("--out")
    ap.add_argument("--show")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        w = json.loads(args.worker)
        if w[0] == "exactq":
            worker_exactq(*w[1:])
        else:
            worker_storm(*w[1:], w[0])
        return 0
    if args.show:
        with open(args.show) as fh:
            print(table(json.load(fh)))
        return 0
    cases = args.cases.split(",") if args.cases else list(CASES)
    variants = args.variants.split(",")
    doc = {"benchmark": "bench/prism.py", "date": _dt.datetime.now().isoformat(timespec="seconds"),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count(), "loadavg_1min_at_start": os.getloadavg()[0]},
           "command": " ".join([os.path.basename(sys.executable), "bench/prism.py"] + (argv or sys.argv[1:])),
           "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            gen, quick, full, pname = CASES[case]
            sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (quick if args.quick else full)
            for size in sizes:
                path, consts, props = _model_file(case, size, tmp)
                if args.steady_only or args.first_steady:
                    props = [p for p in props if "[ S ]" in p or p.startswith("S=?")]
                if args.first_steady:
                    props = props[:1]
                entry = {"case": case, "size": size, "parameter": pname, "constants": consts, "properties": props}
                for v in variants:
                    wargs = [v, path, consts, props]
                    entry[v] = run_worker(wargs, args.timeout)
                compare(entry)
                doc["runs"].append(entry)
                print(table({"runs": [entry]}).splitlines()[-1], file=sys.stderr, flush=True)
    doc["machine"]["loadavg_1min_at_end"] = os.getloadavg()[0]
    if args.append:
        old = {"benchmark": doc["benchmark"], "runs": [], "invocations": []}
        if os.path.exists(args.append):
            with open(args.append) as fh:
                old = json.load(fh)
        old.setdefault("invocations", []).append({k: doc[k] for k in ("date", "machine", "command")})
        old["runs"].extend(doc["runs"])
        doc = old
        args.out = args.append
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
