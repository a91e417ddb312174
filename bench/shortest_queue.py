"""Benchmark of the shortest-queue family (issue 3 targets); not a test.

* compensation vs the automatically truncated CTMC for the symmetric JSQ E[L] at
  rho = 0.95, both at tol = 1e-12 (medians over repeats, ratio in the same run);
* SED with Erlang-3 servers at rho = 0.9: exact E[L] to 1e-8, wall time, truncated CTMC,
  the matrix-geometric (qbd) method and the compensation series;
* bounds with T = 6 at rho = 0.9: relative width;
* the asymmetric JSQ (rates 1, 2, rho = 0.9): compensation vs the truncated CTMC.

Usage: python bench/shortest_queue.py [--repeat N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import exactq


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    kw = dict(arrival_rate=1.9, service_rates="1,1")
    t_comp, comp = timed(lambda: exactq.solve("jsq", method="compensation", tol=1e-12, **kw), 50 * args.repeat)
    t_ctmc, ctmc = timed(lambda: exactq.solve("jsq", method="ctmc", tol=1e-12, **kw), args.repeat)
    akw = dict(arrival_rate=2.7, service_rates="1,2")
    t_acomp, acomp = timed(lambda: exactq.solve("jsq", method="compensation", tol=1e-12, **akw), 10 * args.repeat)
    t_actmc, actmc = timed(lambda: exactq.solve("jsq", method="ctmc", tol=1e-12, **akw), args.repeat)
    sed_kw = dict(arrival_rate=1.8, service_rates="1,1", phases=3, tol=1e-9)
    t_sed, sed = timed(lambda: exactq.solve("sed", "mean_number", method="ctmc", **sed_kw), max(1, args.repeat // 2))
    t_sq, sq = timed(lambda: exactq.solve("sed", "mean_number", method="qbd", **sed_kw), args.repeat)
    t_sc, sc = timed(lambda: exactq.solve("sed", "mean_number", method="compensation", **sed_kw), args.repeat)
    t_b, b = timed(lambda: exactq.solve("jsq", "mean_waiting_time", method="bounds", threshold=6,
                                        arrival_rate=1.8, service_rates="1,1"), 20 * args.repeat)
    exact_w = exactq.solve("jsq", "mean_waiting_time", method="compensation", arrival_rate=1.8,
                           service_rates="1,1").value
    res = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
        "jsq_rho095_EL": {
            "compensation": {"seconds_median": t_comp, "value": comp.value, "error_estimate": comp.error_estimate},
            "ctmc_auto": {"seconds_median": t_ctmc, "value": ctmc.value, "error_estimate": ctmc.error_estimate,
                          "n_states": ctmc.n_states, "level": ctmc.info["truncation"]["level"]},
            "speedup_compensation_over_ctmc": t_ctmc / t_comp,
            "abs_difference": abs(comp.value - ctmc.value),
        },
        "asymmetric_jsq_rates12_rho09_EL": {
            "compensation": {"seconds_median": t_acomp, "value": acomp.value,
                             "error_estimate": acomp.error_estimate, "terms": acomp.info.get("terms")},
            "ctmc_auto": {"seconds_median": t_actmc, "value": actmc.value, "error_estimate": actmc.error_estimate,
                          "n_states": actmc.n_states},
            "speedup_compensation_over_ctmc": t_actmc / t_acomp,
            "abs_difference": abs(acomp.value - actmc.value),
        },
        "sed_erlang3_rho09_EL": {
            "ctmc": {"seconds_median": t_sed, "value": sed.value, "error_estimate": sed.error_estimate,
                     "n_states": sed.n_states},
            "qbd": {"seconds_median": t_sq, "value": sq.value, "error_estimate": sq.error_estimate,
                    "phases_per_level": sq.info["phases_per_level"]},
            "compensation": {"seconds_median": t_sc, "value": sc.value, "error_estimate": sc.error_estimate,
                             "terms": sc.info.get("terms")},
            "speedup_qbd_over_ctmc": t_sed / t_sq,
            "speedup_compensation_over_ctmc": t_sed / t_sc,
            "abs_difference_compensation_qbd": abs(sc.value - sq.value),
            "abs_difference": abs(sq.value - sed.value),
            "target_seconds": 10,
        },
        "bounds_T6_rho09_EW": {"seconds_median": t_b, "lower": b.lower, "upper": b.upper, "exact": exact_w,
                               "relative_width": (b.upper - b.lower) / exact_w, "target_relative_width": 0.01,
                               "brackets": b.lower <= exact_w <= b.upper},
    }
    text = json.dumps(res, indent=1)
    if args.out:
        open(args.out, "w").write(text)
    print(text)
    j = res["jsq_rho095_EL"]
    print(f"compensation {t_comp * 1e3:.3f} ms vs ctmc {t_ctmc:.3f} s: {j['speedup_compensation_over_ctmc']:.0f}x; "
          f"|diff| {j['abs_difference']:.1e}", file=sys.stderr)
    a = res["asymmetric_jsq_rates12_rho09_EL"]
    print(f"asymmetric JSQ (1,2) rho=0.9: compensation {t_acomp * 1e3:.2f} ms vs ctmc {t_actmc:.3f} s: "
          f"{a['speedup_compensation_over_ctmc']:.0f}x; |diff| {a['abs_difference']:.1e}", file=sys.stderr)
    print(f"SED r=3 rho=0.9: ctmc {t_sed:.2f} s ({sed.n_states} states), qbd {t_sq:.3f} s, "
          f"compensation {t_sc:.3f} s, E[L]={sq.value:.10f}, |qbd-ctmc| {abs(sq.value - sed.value):.1e}, "
          f"|comp-qbd| {abs(sc.value - sq.value):.1e}", file=sys.stderr)
    print(f"bounds T=6 rho=0.9: width {res['bounds_T6_rho09_EW']['relative_width']:.2%}", file=sys.stderr)


if __name__ == "__main__":
    main()
