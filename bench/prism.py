"""Benchmark (not a test): PRISM-language case studies, exactq against Storm in the same run.

The models are the classic case studies, written for exactq from their published
descriptions (none is a copy of the PRISM benchmark suite's files):

- ``bench/prism_models.py``: the CTMCs tandem queue, cyclic server polling,
  workstation cluster, embedded control system, kanban, flexible manufacturing;
- ``bench/prism_dtmc_models.py`` (when present): the DTMCs Herman's ring, synchronous
  leader election, crowds;
- ``bench/prism_models_extra.py``: the MAPK cascade (CTMC), bounded retransmission,
  NAND multiplexing and Knuth-Yao dice (DTMCs);
- ``bench/prism_heldout.py``: held-out case studies that exactq was never tuned on, the
  CTMCs central server (Buzen), peer-to-peer file distribution and a multi-rate Erlang loss
  system, the DTMCs gambler's ruin and zeroconf (results in bench/results_prism_heldout.md),

at growing sizes (the "full" sizes of each file reach those at which Storm's default engine
takes about 0.1-100 s, the range of issue 20; 12-15 of the 40, by the machine's speed, are
smaller, Storm under 0.1 s, and show the fixed costs of a check; ``--summary`` reports both
populations). Each configuration runs in a fresh subprocess (so that its peak resident memory is
its own) with a timeout:

``exactq``
    ``exactq.load_prism`` + the build (explore and assemble the chain), then
    :func:`exactq.api.check_properties` for every property: in-process seconds.
``exactq_cli``
    The whole process a user runs, ``exactq check FILE --props FILE.props --const ...
    --json`` (start-up, parse, build, every property): wall seconds and the peak resident
    memory of that process.
``storm_best``
    stormpy 2.x: ``parse_prism_program(prism_compatibility=True)``, constants,
    ``build_model`` (the sparse engine), then ``model_checking`` with Storm's direct
    linear solver, Eigen's SparseLU (``--eqsolver eigen --eigen:method sparselu``), and
    ``--precision 1e-12`` for the transient ones: the "exact-LU" reference values.
``storm_default``
    The same build with Storm's default environment (what ``storm`` does without
    flags: topological / gmm++ iterative solvers, relative precision 1e-6).
``storm_precise`` (only when asked for)
    Storm's default engine with ``--precision 1e-12``: the like-for-like comparison of
    the iterative solvers (exactq's run to the rounding level); recorded, not counted in
    the ratios, whose peers are the two variants above.

Reported per case and size: state and transition counts of every tool, build seconds,
check seconds per property and in total, every value, their relative difference to
storm_best (the target is 1e-9), peak memory, and the time ratios of issue 20: exactq's
in-process time (build + every property) against the faster of the two Storm variants
(build + every property), and the same for the whole process.

Usage::

    python bench/prism.py --quick                 # the two smallest sizes of each case (minutes)
    python bench/prism.py --cases tandem --sizes 511,700 --timeout 290
    python bench/prism.py --cases brp --sizes 64x5,256x10
    python bench/prism.py --out bench/results_prism.json
    python bench/prism.py --show bench/results_prism.json
    python bench/prism.py --summary bench/results_prism.json bench/results_prism_repeats.json
    python bench/prism.py --repeat 3 --variants exactq,storm_default   # each case 3 times, interleaved: medians

One JSON document goes to stdout (or ``--out``); a table goes to stderr. The workers run with
exactq's bytecode compiled first, as on an installed copy (bench/installed.py; until 2026-12-02
every worker recompiled the modules it imported, inside the timed check).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from installed import precompile, stale_index, worker_env  # noqa: E402

MARK = "BENCH_RESULT "
AGREE_RTOL = 1e-9
#: two values this close agree whatever their relative difference: a probability of 0 against a peer's rounding
#: error (cell 10000's S=? ["guarded"]: exactq 0, Storm's sparse LU 9.5e-17, once read as a relative difference of 1)
AGREE_ATOL = 1e-15
VARIANTS = ("exactq", "exactq_cli", "storm_best", "storm_default")
#: run only when asked for (--variants): Storm's default engine at --precision 1e-12
EXTRA_VARIANTS = ("storm_precise",)
SOURCES = ("prism_models", "prism_dtmc_models", "prism_models_extra", "prism_heldout")


def _load_cases() -> dict:
    """Every case study of the SOURCES files, as name -> (generator, quick sizes, full sizes, parameter
    names, source), sizes as tuples of the generator's arguments (prism_models.py gives one int)."""
    import importlib

    cases = {}
    for source in SOURCES:
        try:
            mod = importlib.import_module(source)
        except ModuleNotFoundError as e:
            if e.name != source:
                raise
            continue                      # bench/prism_dtmc_models.py not there yet
        for name, (gen, quick, full, pnames) in mod.CASES.items():
            if name in cases:
                raise ValueError(f"case {name!r} is defined by both {cases[name][4]} and {source}")
            tup = lambda sizes: tuple(sz if isinstance(sz, tuple) else (sz,) for sz in sizes)  # noqa: E731
            names = (pnames,) if isinstance(pnames, str) else tuple(pnames)
            cases[name] = (gen, tup(quick), tup(full), names, source)
    return cases


CASES = _load_cases()


def _label(size: tuple) -> str:
    return "x".join(str(v) for v in size) if size else "-"


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _emit(out: dict) -> None:
    out["peak_rss_bytes"] = _peak_rss()
    sys.stdout.write(MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


def _model_file(case: str, size: tuple, directory: str) -> tuple[str, str, list]:
    gen = CASES[case][0]
    text, constants, props = gen(*size)
    dtmc = text.lstrip().startswith(("dtmc", "probabilistic"))
    path = os.path.join(directory, f"{case}_{_label(size)}.{'pm' if dtmc else 'sm'}")
    with open(path, "w") as fh:
        fh.write(text)
    consts = ",".join(f"{k}={v}" for k, v in constants.items())
    return path, consts, props


# ----------------------------------------------------------------------------- workers
def worker_exactq(path: str, consts: str, props: list) -> None:
    import warnings

    import exactq
    import exactq.errors
    import exactq.prism.builder  # noqa: F401  (imports are not part of the build)
    import exactq.prism.properties  # noqa: F401  (nor of the first property's check)
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
        try:
            res, = check_properties(model, p)
        except exactq.errors.ExactqError as e:    # one refused property does not lose the others
            results.append({"property": p, "value": None, "seconds": time.perf_counter() - t1, "error": str(e)})
            continue
        results.append({"property": p, "value": res.value, "seconds": time.perf_counter() - t1,
                        "method": res.method, "error_estimate": res.error_estimate,
                        "stationary": res.info.get("stationary", {}).get("method")})
    out = {"n_states": int(built.chain.n_states), "n_transitions": int(built.n_transitions), "build_seconds": build,
           "results": results, "warnings": [str(w.message) for w in caught]}
    failed = [r for r in results if "error" in r]
    if failed:
        out["error"] = f"{len(failed)} of {len(results)} properties refused: {failed[0]['error'][:200]}"
    _emit(out)


def worker_exactq_cli(path: str, consts: str, props: list) -> None:
    """The whole process: ``exactq check FILE --props FILE --const ... --json``, its wall time and peak memory."""
    exe = os.path.join(os.path.dirname(sys.executable), "exactq")
    if not os.path.exists(exe):
        exe = "exactq"
    pfile = path + ".props"
    with open(pfile, "w") as fh:
        fh.write("\n".join(props) + "\n")
    cmd = [exe, "check", path, "--props", pfile, "--json"] + (["--const", consts] if consts else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env())
    wall = time.perf_counter() - t0
    child_rss = int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
    out = {"command": " ".join(os.path.basename(c) if c in (path, pfile) else c for c in cmd), "exit_status":
           proc.returncode, "process_seconds": wall, "process_peak_rss_bytes": child_rss}
    try:                                  # one JSON document (a list for a file's properties) ...
        doc = json.loads(proc.stdout)
        docs = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:          # ... or, before issue 19 item 4, one object per line
        docs = []
        for line in proc.stdout.splitlines():
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if proc.returncode != 0 or len(docs) != len(props):
        err = [line for line in proc.stderr.splitlines() if line.strip()]
        out["error"] = f"exit {proc.returncode}: {(err or ['(no message)'])[0][:300]}"
    out["results"] = [{"property": p, "value": d.get("value"), "seconds": d.get("seconds")}
                      for p, d in zip(props, docs) if isinstance(d, dict)]
    _emit(out)


def _filter_parts(prop: str):
    """``filter(op, P, states)`` -> (op, P, states), else None. Storm's ``model_checking`` answers a
    property's formula without its filter, so the filter is applied here over Storm's per-state values."""
    text = prop.strip()
    if not text.startswith("filter(") or not text.endswith(")"):
        return None
    parts, depth, cur = [], 0, ""
    for ch in text[len("filter("):-1]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return (parts[0], parts[1], parts[2] if len(parts) > 2 else "true") if len(parts) >= 2 else None


def worker_storm(path: str, consts: str, props: list, variant: str) -> None:
    import numpy as np
    import stormpy
    import stormpy.info
    from stormpy import developer

    t0 = time.perf_counter()
    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    texts = []                            # what Storm checks: each property, or a filter's two parts
    for p in props:
        f = _filter_parts(p)
        texts += [f[1], f[2]] if f else [p]
    parsed = stormpy.parse_properties(";".join(texts), prog)
    model = stormpy.build_model(prog, parsed)
    build = time.perf_counter() - t0
    if variant == "storm_best":
        developer.set_from_exploded_string(["--eqsolver", "eigen", "--eigen:method", "sparselu",
                                            "--precision", "1e-12"])
    elif variant == "storm_precise":
        # Storm's default engine held to exactq's precision (its default stops at 1e-6, relative): not one of
        # issue 20's peers, the like-for-like comparison of the iterative solvers
        developer.set_from_exploded_string(["--precision", "1e-12"])
    env = developer.EnvironmentBuilder.build_environment()
    inits = list(model.initial_states)
    init = inits[0]

    def per_state(q):
        r = stormpy.model_checking(model, q, only_initial_states=False, environment=env)
        if r.is_quantitative():
            return np.array(r.get_value_vector(), dtype=float)
        sat = np.zeros(model.nr_states, dtype=bool)
        sat[np.fromiter((int(i) for i in r.get_truth_values_vector()), dtype=np.int64)] = True
        return sat

    results, k = [], 0
    for p in props:
        t1 = time.perf_counter()
        f = _filter_parts(p)
        if f:
            v, sel = per_state(parsed[k]), per_state(parsed[k + 1])
            k += 2
            ops = {"min": np.min, "max": np.max, "sum": np.sum, "avg": np.mean, "count": np.sum,
                   "forall": np.all, "exists": np.any}
            v = ops[f[0]](v[sel]) if f[0] in ops and sel.any() else None
            how = f"filter {f[0]} over {int(sel.sum())} states"
        else:
            r = stormpy.model_checking(model, parsed[k], only_initial_states=len(inits) == 1, environment=env)
            k += 1
            v = r.get_value(init) if r.is_quantitative() else init in set(r.get_truth_values_vector())
            how = "the initial state" if len(inits) == 1 else f"the first of {len(inits)} initial states"
        v = bool(v) if isinstance(v, (bool, np.bool_)) else (None if v is None else float(v))
        results.append({"property": p, "value": v, "seconds": time.perf_counter() - t1, "value_for": how})
    _emit({"n_states": int(model.nr_states), "n_transitions": int(model.nr_transitions), "build_seconds": build,
           "results": results, "storm_version": stormpy.info.storm_version(),
           "equation_solver": str(env.solver().get_linear_equation_solver_type())})


def run_worker(args: list, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(args)]
    t0 = time.perf_counter()
    # its own session, so that a timeout also ends what the worker started (the exactq_cli worker's
    # `exactq check` outlived its worker and kept a core busy through the next cases before 2026-12-02)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=worker_env(),
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timed out after {timeout:g} s", "wall_seconds": time.perf_counter() - t0}
    proc = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["wall_seconds"] = time.perf_counter() - t0
            return out
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit {proc.returncode}: {tail}", "wall_seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- driver
def _sample_seconds(out: dict) -> float | None:
    """A sample's time: the whole process for exactq_cli, else the in-process build and every property."""
    return out.get("process_seconds") if "process_seconds" in out else _total(out)


def _values(out: dict) -> list:
    return [r.get("value") for r in out.get("results", [])]


def median_sample(samples: list) -> dict:
    """The sample of median time (the lower of the two middle ones for an even count), with ``repeats``: every
    sample's time and whether all gave the same values. A sample that failed (a timeout, an error) is returned as
    it is: the variant is not run again after it."""
    if len(samples) == 1:
        return samples[0]
    failed = [s for s in samples if "error" in s or _sample_seconds(s) is None]
    if failed:
        return {**failed[0], "repeats": {"count": len(samples), "failed": len(failed)}}
    ranked = sorted(samples, key=_sample_seconds)
    chosen = ranked[(len(ranked) - 1) // 2]
    return {**chosen, "repeats": {"count": len(samples), "seconds": [_sample_seconds(s) for s in samples],
                                  "values_identical": all(_values(s) == _values(samples[0]) for s in samples)}}


def _rel(a, b) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


def _total(out: dict) -> float | None:
    """Build + every property's check, in process; None when the variant failed."""
    if "results" not in out or "build_seconds" not in out or "error" in out:
        return None
    return out["build_seconds"] + sum(r["seconds"] for r in out["results"])


def compare(entry: dict) -> None:
    ex, best = entry.get("exactq", {}), entry.get("storm_best", {})
    times = {"exactq_seconds": _total(ex), "storm_best_seconds": _total(best),
             "storm_default_seconds": _total(entry.get("storm_default", {})),
             **({"storm_precise_seconds": _total(entry["storm_precise"])} if "storm_precise" in entry else {}),
             "exactq_process_seconds": entry.get("exactq_cli", {}).get("process_seconds")
             if "error" not in entry.get("exactq_cli", {}) else None,
             "exactq_peak_rss_bytes": ex.get("peak_rss_bytes"),
             "exactq_process_peak_rss_bytes": entry.get("exactq_cli", {}).get("process_peak_rss_bytes")}
    storms = [t for t in (times["storm_best_seconds"], times["storm_default_seconds"]) if t is not None]
    times["storm_fastest_seconds"] = min(storms) if storms else None
    for k, num in (("ratio_in_process", "exactq_seconds"), ("ratio_process", "exactq_process_seconds")):
        a, b = times[num], times["storm_fastest_seconds"]
        times[k] = a / b if a is not None and b else None    # < 1: exactq faster than Storm's faster variant
    entry["timing"] = times
    if "results" not in ex or "results" not in best:
        return
    rows = []
    worst = 0.0
    others = {v: {r["property"]: r["value"] for r in entry.get(v, {}).get("results", [])}
              for v in ("exactq_cli", "storm_default")}
    for a, b in zip(ex["results"], best["results"]):
        d = _rel(a["value"], b["value"])
        absd = abs(a["value"] - b["value"]) if d is not None else None
        close = absd is not None and absd <= AGREE_ATOL
        rows.append({"property": a["property"], "exactq": a["value"], "storm_best": b["value"], "rel_diff": d,
                     "abs_diff": absd, "agree": d is not None and (d <= AGREE_RTOL or close),
                     "exactq_cli": others["exactq_cli"].get(a["property"]),
                     "storm_default": others["storm_default"].get(a["property"]),
                     "storm_default_rel_diff": _rel(others["storm_default"].get(a["property"]), b["value"])})
        if d is not None and not close:
            worst = max(worst, d)
    entry["agreement"] = {"max_rel_diff": worst, "rtol": AGREE_RTOL, "atol": AGREE_ATOL,
                          "all_agree": all(r["agree"] for r in rows),
                          "properties": rows}
    steady = next((k for k, p in enumerate(entry["properties"]) if "[ S ]" in p or p.startswith("S=?")), None)
    if steady is not None:
        te = ex["build_seconds"] + ex["results"][steady]["seconds"]
        ts = best["build_seconds"] + best["results"][steady]["seconds"]
        entry["steady_state_total"] = {"property": entry["properties"][steady], "exactq_seconds": te,
                                       "storm_best_seconds": ts, "speedup": ts / te if te > 0 else None}


def _f(x, spec=".3g") -> str:
    return "-" if x is None else format(x, spec)


def table(doc: dict) -> str:
    lines = [f"{'case':12} {'size':>7} {'states':>9} {'build s ex/storm':>17} {'S total s ex/storm':>19} "
             f"{'total s ex/cli/best/dflt':>27} {'ratio':>6} {'peak MB':>8} {'max rel diff':>12}"]
    for e in doc["runs"]:
        ex, st = e.get("exactq", {}), e.get("storm_best", {})
        n = ex.get("n_states", st.get("n_states", "-"))
        b = f"{_f(ex.get('build_seconds'))}/{_f(st.get('build_seconds'))}"
        tot = e.get("steady_state_total", {})
        s = f"{_f(tot.get('exactq_seconds'))}/{_f(tot.get('storm_best_seconds'))}"
        tm = e.get("timing", {})
        t = "/".join(_f(tm.get(k)) for k in ("exactq_seconds", "exactq_process_seconds", "storm_best_seconds",
                                              "storm_default_seconds"))
        rss = ex.get("peak_rss_bytes")
        agr = e.get("agreement", {}).get("max_rel_diff")
        err = "; ".join(f"{v}: {e[v]['error']}" for v in VARIANTS if "error" in e.get(v, {}))
        size = e.get("size_label", e.get("size"))
        lines.append(f"{e['case']:12} {size!s:>7} {n!s:>9} {b:>17} {s:>19} {t:>27} "
                     f"{_f(tm.get('ratio_in_process'), '.2f'):>6} {_f(rss and rss / 2**20, '.0f'):>8} "
                     f"{_f(agr, '.1e'):>12}" + (f"  [{err}]" if err else ""))
    return "\n".join(lines)


def summary(docs: list) -> dict:
    """Issue 20's figures over runs of the same cases (several documents: repeats): per case and size the
    median of the per-run ratios (exactq in process / the faster Storm variant of the same run, each run
    pairing measurements made together), then the median and maximum over all cases, over the cases
    above :data:`TARGET_STATES` states (and the cases above 1 there), and over the cases in the issue's
    size range (:data:`STORM_RANGE`: Storm's best in-process time, its median over the runs, between 0.1
    and 100 s; issue 20 item 5 asks for the case studies "at the sizes where Storm takes 0.1-100 s", and its
    median target is over those cases)."""
    import statistics

    per: dict = {}
    for doc in docs:
        for e in doc["runs"]:
            tm = e.get("timing", {})
            r = tm.get("ratio_in_process")
            if r is None:
                continue
            n = e.get("exactq", {}).get("n_states")
            key = (e["case"], e.get("size_label", e.get("size")))
            row = per.setdefault(key, {"states": n, "ratios": [], "storm": []})
            row["ratios"].append(r)
            row["storm"].append(tm.get("storm_fastest_seconds"))
    cases = [{"case": c, "size": s, "states": v["states"], "runs": len(v["ratios"]),
              "ratio": statistics.median(v["ratios"]),
              "storm_seconds": statistics.median(t for t in v["storm"] if t is not None)}
             for (c, s), v in per.items()]
    big = [c for c in cases if c["states"] and c["states"] > TARGET_STATES]
    lo, hi = STORM_RANGE
    in_range = [c for c in cases if lo <= c["storm_seconds"] <= hi]

    def stats(rows):
        return {"cases": len(rows), "median": statistics.median(r["ratio"] for r in rows) if rows else None,
                "max": max((r["ratio"] for r in rows), default=None)}
    return {"all": stats(cases), f"above_{TARGET_STATES}": stats(big),
            "storm_0.1_to_100_s": {**stats(in_range),
                                   "below_range": sorted(f"{c['case']} {c['size']}" for c in cases
                                                         if c["storm_seconds"] < lo)},
            "above_1": [(c["case"], c["size"], round(c["ratio"], 3)) for c in big if c["ratio"] > 1],
            "above_2": [(c["case"], c["size"], round(c["ratio"], 3)) for c in cases if c["ratio"] > 2],
            "cases": cases}


#: issue 20's bar: every case above this many states at or below Storm's best
TARGET_STATES = 10_000
#: issue 20 item 5: the case studies "at the sizes where Storm takes 0.1-100 s" (Storm's best, in process, seconds);
#: the full sizes also hold smaller ones (Storm under 0.1 s), which show the fixed costs of a check
STORM_RANGE = (0.1, 100.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest sizes of each case")
    ap.add_argument("--cases", help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--list", action="store_true", help="the case studies, their sources and sizes")
    ap.add_argument("--sizes", help="comma-separated sizes (with one case); several parameters as 64x5")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steady-only", action="store_true",
                    help="check only the steady-state properties (S=?, R=? [ S ]): the big sizes")
    ap.add_argument("--first-steady", action="store_true", help="check only the first steady-state property")
    ap.add_argument("--append", metavar="FILE", help="add the runs to this JSON document (created if missing)")
    ap.add_argument("--timeout", type=float, default=290.0, help="seconds per worker")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every variant of a case this many times, interleaved, and keep each variant's median "
                         "sample (an odd number; the others' times are kept in the variant's 'repeats')")
    ap.add_argument("--out")
    ap.add_argument("--show")
    ap.add_argument("--summary", nargs="+", metavar="FILE",
                    help="issue 20's figures over these documents (repeats: the median ratio per case)")
    ap.add_argument("--stale-index", action="store_true",
                    help="measure even when the catalogue index does not match the sources (refused otherwise)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1; got {args.repeat}")
    if args.worker:
        w = json.loads(args.worker)
        if w[0] == "exactq":
            worker_exactq(*w[1:])
        elif w[0] == "exactq_cli":
            worker_exactq_cli(*w[1:])
        else:
            worker_storm(*w[1:], w[0])
        return 0
    if args.list:
        for name, (gen, quick, full, pnames, source) in CASES.items():
            print(f"{name:13} {source:19} {','.join(pnames):12} quick {' '.join(map(_label, quick)):14} "
                  f"full {' '.join(map(_label, full))}")
        return 0
    if args.show:
        with open(args.show) as fh:
            print(table(json.load(fh)))
        return 0
    if args.summary:
        docs = []
        for path in args.summary:
            with open(path) as fh:
                docs.append(json.load(fh))
        out = summary(docs)
        for c in out.pop("cases"):
            print(f"{c['case']:13} {c['size']!s:>8} {c['states'] or '-':>9} runs {c['runs']}  ratio {c['ratio']:.2f}"
                  f"  Storm {c['storm_seconds']:.3g} s")
        print(json.dumps(out))
        return 0
    cases = args.cases.split(",") if args.cases else list(CASES)
    variants = args.variants.split(",")
    stale = stale_index()
    if stale and any(v.startswith("exactq") for v in variants) and not args.stale_index:
        print(f"bench/prism.py: {stale} (or pass --stale-index to measure it so)", file=sys.stderr)
        return 2
    doc = {"benchmark": "bench/prism.py", "date": _dt.datetime.now().isoformat(timespec="seconds"),
           "catalogue_index": stale or "fresh",
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count(), "loadavg_1min_at_start": os.getloadavg()[0]},
           "command": " ".join([os.path.basename(sys.executable), "bench/prism.py"] + (argv or sys.argv[1:])),
           **precompile(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            gen, quick, full, pnames, source = CASES[case]
            sizes = ([tuple(int(v) for v in sz.split("x")) for sz in args.sizes.split(",")] if args.sizes
                     else (quick if args.quick else full))
            for size in sizes:
                path, consts, props = _model_file(case, size, tmp)
                if args.steady_only or args.first_steady:
                    props = [p for p in props if "[ S ]" in p or p.startswith("S=?")]
                if args.first_steady:
                    props = props[:1]
                entry = {"case": case, "source": f"bench/{source}.py",
                         "size": size[0] if len(size) == 1 else list(size), "size_label": _label(size),
                         "parameter": pnames[0] if len(pnames) == 1 else list(pnames), "constants": consts,
                         "properties": props}
                samples: dict = {v: [] for v in variants}
                for k in range(args.repeat):
                    # interleaved rounds, the order reversed every other round: a slow minute of the machine
                    # falls on both tools' samples, and the median sample of each leaves it out
                    for v in (variants if k % 2 == 0 else variants[::-1]):
                        if samples[v] and "error" in samples[v][-1]:
                            continue  # a timeout or failure is not run again
                        samples[v].append(run_worker([v, path, consts, props], args.timeout))
                for v in variants:
                    entry[v] = median_sample(samples[v])
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
