"""Benchmark (not a test): routing to 1,000 processor-sharing servers.

The instance: n = 1000 servers, capacities mu_i ~ U(0.5, 2), holding costs
c_i ~ U(0.5, 3) (numpy seed 1000), work rate rho = load * sum(mu) for the loads
0.8 (every server used), 0.3 (a subset used) and 0.999 (heavy traffic).

Compared for the centralized optimum (K = 1) and the Wardrop equilibrium (K = inf):

``closed_form``
    ``exactq.solvers.routing.water_filling`` on a ``RoutingProblem`` (validation, then sort
    by c/mu and prefix sums, O(n log n)).
``convex``
    ``exactq.solvers.routing.convex_loads`` on the same problem: cvxpy build + DCP check + Clarabel +
    polish + KKT check (warm process: cvxpy already imported). ``solver_seconds`` is
    Clarabel's own time, ``cold_seconds`` the first call in the process (includes
    importing cvxpy).
``scipy_slsqp`` (``--baseline``)
    The obvious generic route: ``scipy.optimize.minimize(method="SLSQP")`` with
    the analytic gradient on the same program (K = 1, load 0.8), at ``--baseline-n``
    servers (default 50) against the convex method at the same size: SLSQP's dense
    quasi-Newton steps take about 6 s at n = 50 and 2 minutes at n = 200 on 2 cores,
    hopeless at n = 1000.

``api`` rows: the price of anarchy and the K = 4 atomic cost of the load-0.8 instance
through ``exactq.solve`` (model, method driver and solver together), both methods.

Targets (issue 5): convex < 2 s, closed form < 10 ms, agreement to 1e-8.

Usage::

    python bench/routing.py                 # JSON on stdout, table on stderr
    python bench/routing.py --baseline      # also time scipy SLSQP at n = 50
    python bench/routing.py --out bench/results/routing.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import statistics
import sys
import time

import numpy as np

import exactq


def _median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _instance(n, load, seed=1000):
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.5, 2.0, n)
    c = rng.uniform(0.5, 3.0, n)
    return mu, c, load * mu.sum()


def _slsqp(mu, c, rho):
    from scipy.optimize import Bounds, LinearConstraint, minimize

    res = minimize(lambda x: np.sum(c * x / (1 - x)), np.full(mu.size, rho / mu.sum()),
                   jac=lambda x: c / (1 - x) ** 2, method="SLSQP",
                   bounds=Bounds(0.0, 1.0 - 1e-12),
                   constraints=[LinearConstraint(mu[None, :], rho, rho)],
                   options={"maxiter": 1000, "ftol": 1e-15})
    return res


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7, help="repeats of the convex solve")
    parser.add_argument("--baseline", action="store_true", help="also time scipy SLSQP")
    parser.add_argument("--baseline-n", type=int, default=50, help="servers for the SLSQP baseline")
    parser.add_argument("--out", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)

    from exactq.representations.routing import RoutingProblem

    t0 = time.perf_counter()
    from exactq.solvers.routing import convex_loads, water_filling

    mu, c, rho = _instance(args.n, 0.8)
    convex_loads(RoutingProblem(mu, c, rho))  # cold call: imports cvxpy and Clarabel
    cold = time.perf_counter() - t0

    rows = []
    for load in (0.8, 0.3, 0.999):
        mu, c, rho = _instance(args.n, load)
        for k in (1, math.inf):
            # the problem is built (and validated) inside each timed call, as the old array API did
            t_closed, exact = _median_seconds(lambda: water_filling(RoutingProblem(mu, c, rho, dispatchers=k)), 201)
            t_convex, cvx = _median_seconds(lambda: convex_loads(RoutingProblem(mu, c, rho, dispatchers=k)),
                                            args.repeats)
            diff = float(np.max(np.abs(cvx.loads - exact.loads)))
            rows.append({
                "load": load,
                "regime": "centralized" if k == 1 else "decentralized",
                "servers_used": len(exact.info["servers_used"]),
                "closed_form_seconds": t_closed,
                "convex_seconds": t_convex,
                "solver_seconds": cvx.info["solve_seconds"],
                "solver_status": cvx.info["status"],
                "ratio_convex_over_closed_form": t_convex / t_closed,
                "max_load_difference": diff,
                "cost_relative_difference": abs(cvx.info["cost"] / exact.info["cost"] - 1),
                "kkt_residual_solver": cvx.info["kkt_residual_solver"],
                "kkt_residual": cvx.info["kkt_residual"],
                "polish_shift": cvx.info["polish_shift"],
                "agree_1e-8": diff <= 1e-8,
            })
    # the same problems through the public API (the model, the method driver, the solver)
    api_rows = []
    mu, c, rho = _instance(args.n, 0.8)
    params = dict(service_rates=mu.tolist(), holding_costs=c.tolist(), work_rate=float(rho), dispatchers=4)
    for measure in ("price_of_anarchy", "cost_atomic"):
        for method, repeats in (("closed-form", 51), ("convex", args.repeats)):
            t_api, res = _median_seconds(lambda: exactq.solve("ps-routing", measure, method=method, **params), repeats)
            api_rows.append({"measure": measure, "method": method, "seconds": t_api, "value": res.value,
                             "residual": res.residual})
    baseline = None
    if args.baseline:
        mu, c, rho = _instance(args.baseline_n, 0.8)
        t_slsqp, res = _median_seconds(lambda: _slsqp(mu, c, rho), 1)
        exact = water_filling(RoutingProblem(mu, c, rho)).loads
        t_convex, _ = _median_seconds(lambda: convex_loads(RoutingProblem(mu, c, rho)), args.repeats)
        baseline = {"method": "scipy SLSQP, analytic gradient", "n": args.baseline_n,
                    "seconds": t_slsqp, "convex_seconds": t_convex,
                    "success": bool(res.success), "iterations": int(res.nit),
                    "max_load_difference": float(np.max(np.abs(res.x - exact))),
                    "ratio_slsqp_over_convex": t_slsqp / t_convex}

    import cvxpy

    doc = {
        "benchmark": "ps-routing, 1,000 servers",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cvxpy": cvxpy.__version__,
        "machine": platform.machine(),
        "n": args.n,
        "repeats_convex": args.repeats,
        "repeats_closed_form": 201,
        "cold_first_call_seconds": cold,
        "targets": {"convex_seconds": 2.0, "closed_form_seconds": 0.010, "agreement": 1e-8},
        "rows": rows,
        "api": api_rows,
        "baseline": baseline,
        "all_targets_met": all(r["convex_seconds"] < 2.0 and r["closed_form_seconds"] < 0.010
                               and r["agree_1e-8"] for r in rows),
    }
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)

    err = sys.stderr
    print(f"\nps-routing, n = {args.n} servers (medians; cold first call {cold:.2f} s)", file=err)
    print(f"{'load':>6} {'regime':<14}{'used':>6}{'closed form':>13}{'convex':>10}{'Clarabel':>10}"
          f"{'ratio':>8}{'max |d rho|':>13}{'raw KKT':>10}", file=err)
    for r in rows:
        print(f"{r['load']:>6} {r['regime']:<14}{r['servers_used']:>6}{r['closed_form_seconds'] * 1e3:>10.3f} ms"
              f"{r['convex_seconds']:>8.3f} s{r['solver_seconds']:>8.3f} s{r['ratio_convex_over_closed_form']:>8.0f}"
              f"{r['max_load_difference']:>13.1e}{r['kkt_residual_solver']:>10.1e}", file=err)
    for r in api_rows:
        print(f"exactq.solve ps-routing {r['measure']:<18}{r['method']:<12}{r['seconds'] * 1e3:9.3f} ms"
              f"  value {r['value']!r}", file=err)
    if baseline:
        print(f"scipy SLSQP (n = {baseline['n']}, load 0.8, optimum): {baseline['seconds']:.2f} s, "
              f"{baseline['ratio_slsqp_over_convex']:.0f}x the convex method, "
              f"max |d rho| {baseline['max_load_difference']:.1e}", file=err)
    print(f"targets met: {doc['all_targets_met']}", file=err)


if __name__ == "__main__":
    main()
