"""Benchmark (not a test): the linear-system solvers chosen by predicted cost, against Storm.

The shapes of issue 20's targets: steady state of Kanban (t=3, 58,400 states), FMS (n=5,
39,350 states: this repository's simplified FMS), cyclic polling (12 stations, 73,728
states), and an expected reachability reward on a two-level phosphorylation cascade
(a reaction-network CTMC written here, N=24: 105,625 states). Each case runs in a fresh
subprocess (its own peak memory), ``--repeat`` times; the JSON has every time and the
medians:

``exactq``
    ``load_prism`` and the build, then :func:`exactq.api.check_properties` on the
    property (in-process ``time.perf_counter`` around the check only, and the build
    separately); the solver exactq chose and why, its error estimate.
``storm``
    stormpy 2.x in the same run: ``build_model`` then ``model_checking`` with Storm's
    default environment (relative precision 1e-6), check time only.

Usage::

    python bench/linear.py --out bench/results_linear.json
    python bench/linear.py --cases kanban --repeat 1
    python bench/linear.py --storm-repeat 1      # Storm's default solver is slow on polling (about a minute)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CASCADE = """ctmc
// a two-level phosphorylation cascade (a reaction-network CTMC written for exactq's solver benchmarks)
const int N;
module level1
  a1 : [0..N] init N;
  b1 : [0..N] init 0;
  [] a1>0 -> 1.0*a1 : (a1'=a1-1)&(b1'=b1+1);
  [] b1>0 -> 0.8*b1 : (b1'=b1-1);
  [] a1+b1<N -> 0.3*(N-a1-b1) : (b1'=b1+1);
  [] b1>0 -> 0.2*b1 : (a1'=a1+1)&(b1'=b1-1);
endmodule
module level2
  a2 : [0..N] init N;
  b2 : [0..N] init 0;
  [] a2>0 & a1+b1<N -> 0.05*a2*(N-a1-b1) : (a2'=a2-1)&(b2'=b2+1);
  [] b2>0 & a1+b1<N -> 0.05*b2*(N-a1-b1) : (b2'=b2-1);
  [] a2+b2<N -> 0.1*(N-a2-b2) : (b2'=b2+1);
  [] b2>0 -> 0.1*b2 : (a2'=a2+1)&(b2'=b2-1);
endmodule
rewards "active" true : N-a2-b2; endrewards
"""


def _cases():
    sys.path.insert(0, HERE)
    import prism_models as pm

    kan, kc, kp = pm.kanban(3)
    fms, fc, fp = pm.fms(5)
    pol, pc, pp = pm.polling(12)
    return {
        "kanban": (kan, kc, 'R{"throughput"}=? [ S ]'),
        "fms": (fms, fc, 'R{"productivity"}=? [ S ]'),
        "polling": (pol, pc, pp[0]),
        "cascade": (CASCADE, {"N": 24}, 'R{"active"}=? [ F a2=0 & b2=0 ]'),
    }


def worker(tool: str, name: str) -> dict:
    import resource
    import time

    text, consts, prop = _cases()[name]
    if tool == "exactq":
        import exactq
        from exactq.api import check_properties

        t0 = time.perf_counter()
        m = exactq.load_prism(f"{name}.sm", consts, text=text)
        m.ctmc()
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        r, = check_properties(m, prop)
        check = time.perf_counter() - t0
        st = r.info.get("stationary", {})
        solver = st.get("solver") or r.info.get("solver") or {}
        out = {"states": r.n_states, "value": r.value, "build_s": build, "check_s": check,
               "error_estimate": r.error_estimate, "solver": solver.get("name"), "why": solver.get("why"),
               "iterations": solver.get("iterations")}
    else:
        import stormpy

        with tempfile.NamedTemporaryFile("w", suffix=".sm", delete=False) as fh:
            fh.write(text)
        prog = stormpy.parse_prism_program(fh.name, prism_compatibility=True)
        prog, _ = stormpy.instantiate_constants(prog, ",".join(f"{k}={v}" for k, v in consts.items()))
        props = stormpy.parse_properties(prop, prog)
        t0 = time.perf_counter()
        model = stormpy.build_model(prog, props)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = stormpy.model_checking(model, props[0], only_initial_states=True)
        check = time.perf_counter() - t0
        value = res.get_value(model.initial_states[0])
        out = {"states": model.nr_states, "value": float(value), "build_s": build, "check_s": check}
        os.unlink(fh.name)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="kanban,fms,polling,cascade")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--storm-repeat", type=int, default=None, help="repeats of Storm (default --repeat)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out")
    ap.add_argument("--worker", nargs=2)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(*a.worker)))
        return
    results = {}
    for name in a.cases.split(","):
        for tool in ("exactq", "storm"):
            runs = []
            for _ in range(a.repeat if tool == "exactq" or a.storm_repeat is None else a.storm_repeat):
                try:
                    p = subprocess.run([sys.executable, __file__, "--worker", tool, name], capture_output=True,
                                       text=True, timeout=a.timeout,
                                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
                    runs.append(json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else
                                {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode})
                except subprocess.TimeoutExpired:
                    runs.append({"error": f"timeout {a.timeout} s"})
            ok = [r for r in runs if "error" not in r]
            summary = {"runs": runs}
            if ok:
                summary.update(median_check_s=statistics.median(r["check_s"] for r in ok),
                               median_build_s=statistics.median(r["build_s"] for r in ok),
                               peak_rss_mb=max(r["peak_rss_mb"] for r in ok), value=ok[0]["value"],
                               states=ok[0]["states"])
            results.setdefault(name, {})[tool] = summary
            print(name, tool, {k: v for k, v in summary.items() if k != "runs"}, file=sys.stderr, flush=True)
        e, s = results[name].get("exactq", {}), results[name].get("storm", {})
        if "value" in e and "value" in s:
            results[name]["relative_difference"] = abs(e["value"] - s["value"]) / max(abs(s["value"]), 1e-300)
            results[name]["check_ratio_exactq_over_storm"] = e["median_check_s"] / s["median_check_s"]
    doc = {"benchmark": "bench/linear.py", "machine": f"{os.cpu_count()} cores (shared with other sessions)",
           "results": results}
    text = json.dumps(doc, indent=1)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
