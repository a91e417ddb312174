"""Benchmark (not a test): PRISM ``mdp`` files, exactq (in process) against Storm, same run, same files.

The models are our own case studies (tests/prism/mdp_*.nm) scaled up to sizes where
Storm takes 0.1-30 s, written out as PRISM files that both tools read:

``consensus-N-K``  the randomised consensus of tests/prism/mdp_consensus.nm with N
                   processes (the file's second process renamed N-1 times)
``gambler-N``      a gambler with capital 0..N who may bet 1 (winning with p = 0.49) or
                   bet all up to the goal at p = 0.45 (bold play), from capital N/2:
                   ``Pmax`` and ``Pmin`` of the goal, the expected number of bets
``zeroconf-K-N``   tests/prism/mdp_zeroconf.nm with K addresses in use and N probes
                   (a few states; the build and start-up dominate)

Engines, each in a fresh process per (case, engine), the whole check timed (parse,
build, check: what a user waits for), median of ``--repeats``:

``exactq``         ``check_properties`` in process (``load_prism`` + build + check)
``storm_sound``    ``--sound --minmax:method svi --precision 1e-6`` (Storm's sound value
                   iteration; relative precision 1e-6)
``storm_sound9``   the same at precision 1e-9 (exactq's default relative tolerance)
``storm_default``  Storm's defaults (value iteration, not sound)

The ratio is exactq's seconds over ``storm_sound``'s (the target: at most 2). Values are
compared to Storm's sound value (relative 1e-6), and exactq's bounds must enclose it
within Storm's precision.

Known: on ``gambler-2000``, ``R{"bets"}max=? [ F "goal" | "broke" ]``, Storm's sound
engine answers 40963.49 where Storm's exact (rational) engine and its policy iteration
both give 50000 (= exactq's bounds [50000, 50000]; timid play from capital 1000 at drift
-0.02 takes 1000 / 0.02 bets): the row's ``value_match`` false is Storm's error. The
``seconds`` are in process, after the imports (each tool's ``import_seconds`` are reported
apart): until 2026-12-02 both tools' seconds included their imports, which dominated the
tiny ``zeroconf`` case (measured: exactq's imports 0.50-0.59 s, stormpy's 0.07-0.08 s).
The workers run with exactq's bytecode compiled, as on an installed copy (bench/installed.py):
until the same day they recompiled every module imported inside the timed check.

Usage::

    python bench/prism_mdp.py --out bench/results_prism_mdp.json
    python bench/prism_mdp.py --quick
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from installed import precompile, stale_index, worker_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FILES = ROOT / "tests" / "prism"
MARK = "BENCH_RESULT "
STORM_PY = os.environ.get("STORM_PYTHON", "/work/venv/bin/python")


def consensus_text(n: int) -> str:
    """tests/prism/mdp_consensus.nm with ``n`` processes (the second process renamed for the others)."""
    text = (FILES / "mdp_consensus.nm").read_text()
    text = text.replace("const int N = 2;", f"const int N = {n};")
    extra = "\n".join(f"module process{i} = process1 [ pc1=pc{i}, coin1=coin{i} ] endmodule" for i in range(3, n + 1))
    text = text.replace("module process2 = process1 [ pc1=pc2, coin1=coin2 ] endmodule",
                        "module process2 = process1 [ pc1=pc2, coin1=coin2 ] endmodule\n" + extra)
    alls = lambda f: " & ".join(f(i) for i in range(1, n + 1))  # noqa: E731
    text = re.sub(r'label "finished" = .*;', f'label "finished" = {alls(lambda i: f"pc{i}=3")};', text)
    text = re.sub(r'label "all_coins_equal_0" = .*;', f'label "all_coins_equal_0" = {alls(lambda i: f"coin{i}=0")};',
                  text)
    text = re.sub(r'label "all_coins_equal_1" = .*;', f'label "all_coins_equal_1" = {alls(lambda i: f"coin{i}=1")};',
                  text)
    agree = " & ".join(f"coin{i}=coin{i + 1}" for i in range(1, n))
    text = re.sub(r'label "agree" = .*;', f'label "agree" = {agree};', text)
    writes = " | ".join(f"pc{i}=1" for i in range(1, n + 1))
    return text.replace("[] pc1=1 | pc2=1 : 1;", f"[] {writes} : 1;")


def gambler_text(n: int) -> str:
    return f"""// a gambler with capital 0..N: timid (bet 1 at p = 0.49) or bold (bet min(x, N-x) at p = 0.45)
mdp
const int N = {n};
module gambler
  x : [0..N] init {n // 2};
  [timid] x>0 & x<N -> 0.49 : (x'=x+1) + 0.51 : (x'=x-1);
  [bold]  x>0 & x<N -> 0.45 : (x'=min(N, 2*x)) + 0.55 : (x'=max(0, 2*x-N));
  [stop]  x=0 | x=N -> true;
endmodule
label "goal" = x=N;
label "broke" = x=0;
rewards "bets" [timid] true : 1; [bold] true : 1; endrewards
"""


CASES = {
    "consensus-3-8": (lambda: consensus_text(3), "K=8",
                      ['Pmin=? [ F "finished" & "all_coins_equal_1" ]', 'Pmax=? [ F "finished" & !"agree" ]',
                       'R{"steps"}min=? [ F "finished" ]', 'R{"steps"}max=? [ F "finished" ]']),
    "consensus-4-4": (lambda: consensus_text(4), "K=4",
                      ['Pmin=? [ F "finished" & "all_coins_equal_1" ]', 'Pmax=? [ F "finished" & !"agree" ]',
                       'R{"steps"}min=? [ F "finished" ]', 'R{"steps"}max=? [ F "finished" ]']),
    "consensus-4-8": (lambda: consensus_text(4), "K=8",
                      ['Pmax=? [ F "finished" & !"agree" ]', 'R{"steps"}max=? [ F "finished" ]']),
    "gambler-2000": (lambda: gambler_text(2000), "",
                     ['Pmax=? [ F "goal" ]', 'Pmin=? [ F "goal" ]', 'R{"bets"}max=? [ F "goal" | "broke" ]']),
    "zeroconf-8-4": (lambda: (FILES / "mdp_zeroconf.nm").read_text(), "K=8,N=4",
                     ['Pmin=? [ F "error" ]', 'R{"time"}max=? [ F s>=2 ]']),
}
QUICK = ["consensus-3-8", "gambler-2000"]


# ------------------------------------------------------------------------------ workers
def worker_exactq(path: str, consts: str, prop: str) -> dict:
    t = time.perf_counter()
    import exactq.prism.builder  # noqa: F401  (the imports are timed apart, as Storm's: in-process seconds)
    import exactq.prism.mdp_check  # noqa: F401
    import exactq.solvers.mdp  # noqa: F401
    import exactq.solvers.mdp_graph  # noqa: F401
    from exactq.api import check_properties
    from exactq.prism import load_prism

    t0 = time.perf_counter()
    imports = t0 - t
    m = load_prism(path, consts or None)
    r, = check_properties(m, prop)
    return {"seconds": time.perf_counter() - t0, "value": r.value, "lower": r.lower, "upper": r.upper,
            "solver": r.info.get("solver"), "n_states": r.n_states, "build_seconds": r.info.get("build_seconds"),
            "n_choices": r.info.get("n_choices"), "import_seconds": imports}


def worker_storm(path: str, consts: str, prop: str, mode: str) -> dict:
    t = time.perf_counter()
    import stormpy
    from stormpy import developer

    t0 = time.perf_counter()
    imports = t0 - t
    args = {"storm_sound": ["--sound", "--minmax:method", "svi", "--precision", "1e-6"],
            "storm_sound9": ["--sound", "--minmax:method", "svi", "--precision", "1e-9"],
            "storm_default": []}[mode]
    developer.set_from_exploded_string(args)
    env = developer.EnvironmentBuilder.build_environment()
    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    props = stormpy.parse_properties(prop, prog)
    model = stormpy.build_model(prog, props)
    t1 = time.perf_counter()
    r = stormpy.model_checking(model, props[0], only_initial_states=True, environment=env)
    init = model.initial_states[0]
    return {"seconds": time.perf_counter() - t0, "build_seconds": t1 - t0, "value": float(r.get_value_vector()[init]),
            "n_states": model.nr_states, "n_choices": model.nr_choices, "import_seconds": imports}


def run(engine: str, path: str, consts: str, prop: str, timeout: float) -> dict:
    py = sys.executable if engine == "exactq" else STORM_PY
    cmd = [py, __file__, "--worker", engine, path, consts, prop]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT), env=worker_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:g}s"}
    line = [x for x in out.stdout.splitlines() if x.startswith(MARK)]
    if not line:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(line[-1][len(MARK):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--cases")
    ap.add_argument("--worker", nargs="+")
    a = ap.parse_args(argv)
    if a.worker:
        engine, path, consts, prop = a.worker
        res = worker_exactq(path, consts, prop) if engine == "exactq" else worker_storm(path, consts, prop, engine)
        print(MARK + json.dumps(res))
        return 0
    names = a.cases.split(",") if a.cases else (QUICK if a.quick else list(CASES))
    engines = ["exactq", "storm_sound", "storm_sound9", "storm_default"]
    stale = stale_index()
    if stale:
        print(f"bench/prism_mdp.py: {stale}", file=sys.stderr)
        return 2
    bytecode = precompile()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            make, consts, props = CASES[name]
            path = os.path.join(tmp, f"{name}.nm")
            Path(path).write_text(make())
            for prop in props:
                row = {"case": name, "consts": consts, "property": prop}
                for eng in engines:
                    runs = [run(eng, path, consts, prop, a.timeout) for _ in range(a.repeats)]
                    ok = [r for r in runs if "error" not in r]
                    if not ok:
                        row[eng] = {"error": runs[0]["error"]}
                        continue
                    best = dict(ok[-1])
                    best["seconds"] = statistics.median(r["seconds"] for r in ok)
                    best["runs"] = [round(r["seconds"], 4) for r in ok]
                    row[eng] = best
                ex, ss = row.get("exactq", {}), row.get("storm_sound", {})
                if "seconds" in ex and "seconds" in ss:
                    row["ratio_vs_storm_sound"] = ex["seconds"] / ss["seconds"]
                    sv = ss["value"]
                    row["value_match"] = abs(ex["value"] - sv) <= 1e-6 * max(abs(sv), 1e-300) + 1e-13
                    if ex.get("lower") is not None:
                        slack = 1e-6 * abs(sv)  # Storm's precision
                        row["bounds_enclose_storm"] = ex["lower"] - slack <= sv <= ex["upper"] + slack
                if "seconds" in ex and "seconds" in row.get("storm_default", {}):
                    row["ratio_vs_storm_default"] = ex["seconds"] / row["storm_default"]["seconds"]
                rows.append(row)
                print(f"{name:16s} {prop:48s} exactq {ex.get('seconds', float('nan')):7.3f}s "
                      f"storm_sound {ss.get('seconds', float('nan')):7.3f}s ratio "
                      f"{row.get('ratio_vs_storm_sound', float('nan')):5.2f} states {ex.get('n_states')} "
                      f"{ex.get('solver')} match {row.get('value_match')}", flush=True)
    ratios = [r["ratio_vs_storm_sound"] for r in rows if "ratio_vs_storm_sound" in r]
    summary = {"cases": len(rows), "median_ratio_vs_storm_sound": statistics.median(ratios) if ratios else None,
               "max_ratio_vs_storm_sound": max(ratios) if ratios else None,
               "above_2x": sum(1 for x in ratios if x > 2.0),
               "value_mismatches": sum(1 for r in rows if r.get("value_match") is False),
               "bounds_not_enclosing": sum(1 for r in rows if r.get("bounds_enclose_storm") is False)}
    doc = {"benchmark": "prism_mdp", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}, "repeats": a.repeats,
           **bytecode,
           "summary": summary, "rows": rows}
    print(json.dumps(summary))
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
