"""Benchmark (not a test): stationary solves of the lumped speed-aware JSQ chain.

The lumped chain of ``speed-aware`` (counts k, k; speeds 2, 1; SA-JSQ; arrival rate
0.6 per server; per-queue truncation K) has one coordinate per server, so for N >= 4
the library's ``direct`` solver cannot use its geometric nested dissection (dimension
<= 3) and falls back on SuperLU's MMD ordering of A^T + A, which fills in badly.
Compared on the same generator, in one run:

``direct``
    ``exactq.solvers.stationary.stationary(Q, method="direct")`` (what ``auto`` picks);
``bfs_levels``
    the same reduced system ordered by breadth-first distance from the reference
    state (for these chains: by total number of jobs, so the matrix is block
    tridiagonal) and factorised by SuperLU with ``permc_spec="NATURAL"``; this is the
    ordering proposed for ``stationary`` when the coordinates have more than 3
    dimensions;
``power``
    ``stationary(Q, method="power")``.

Each reports seconds, LU non-zeros (where there is an LU), the relative residual and
E[T]. Ratios are ``direct_seconds / other_seconds``.

``fluid`` (every run): the median time of one ``exactq.solve(..., method="fluid")``
call through the public API (three classes, speeds 2, 1, 0.5, fractions 0.2, 0.5,
0.3, arrival rate 0.45 per server), for one policy per dispatch rule, with and
without ``verify`` (the independent re-solve: HiGHS, ``scipy.optimize.root``).

Usage::

    python bench/speed_aware.py            # k = 3 (27,225 states) and k = 4 (245,025)
    python bench/speed_aware.py --quick    # k = 3 only
    python bench/speed_aware.py --out bench/results/speed_aware.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import shortest_path

import exactq
from exactq.ctmc import StationaryDistribution
from exactq.solvers.stationary import _reduced_system, stationary


def _bfs_level_solve(Q, ref):
    t0 = time.perf_counter()
    n = Q.shape[0]
    dist = shortest_path(abs(Q), unweighted=True, indices=[ref], directed=False)[0]
    order = np.lexsort((np.arange(n), dist))
    B, b, perm = _reduced_system(Q, ref, order)
    lu = spla.splu(B, permc_spec="NATURAL", diag_pivot_thresh=0.0, options=dict(SymmetricMode=True))
    x = lu.solve(b)
    pi = np.empty(n)
    pi[perm] = x
    pi[ref] = 1.0
    pi /= pi.sum()
    return pi, time.perf_counter() - t0, int(lu.L.nnz + lu.U.nnz)


def run_case(k, K, *, with_direct=True):
    m = exactq.model("speed-aware", speeds="2,1", counts=f"{k},{k}", arrival_rate=0.6, policy="sa-jsq")
    t0 = time.perf_counter()
    chain = m.ctmc(K)
    build = time.perf_counter() - t0
    Q = chain.Q
    qmax = float((-Q.diagonal()).max())
    ref = int(np.argmax(-Q.diagonal()))
    out = {"k": k, "K": K, "n_states": chain.n_states, "nnz": int(Q.nnz), "build_seconds": build}

    def record(name, pi, seconds, lu_nnz=None):
        sol = StationaryDistribution(pi, name, float(np.abs(Q.T @ pi).max()))
        out[name] = {"seconds": seconds, "lu_nnz": lu_nnz,
                     "relative_residual": float(np.abs(Q.T @ pi).sum() / qmax),
                     "mean_response_time": m.ctmc_measure("mean_response_time", chain, sol)}

    if with_direct:
        t = time.perf_counter()
        st = stationary(Q, method="direct")
        record("direct", st.pi, time.perf_counter() - t, st.info.get("lu_nnz"))
    pi, sec, nnz = _bfs_level_solve(Q, ref)
    record("bfs_levels", pi, sec, nnz)
    t = time.perf_counter()
    st = stationary(Q, method="power")
    record("power", st.pi, time.perf_counter() - t)
    if with_direct:
        out["ratio_direct_over_bfs_levels"] = out["direct"]["seconds"] / out["bfs_levels"]["seconds"]
        out["ratio_direct_over_power"] = out["direct"]["seconds"] / out["power"]["seconds"]
    return out


def fluid_timings(repeats=51):
    """Median seconds of one ``method="fluid"`` solve through the API, per policy (three classes)."""
    params = dict(speeds="2,1,0.5", fractions="0.2,0.5,0.3", arrival_rate=0.45)
    rows = []
    for policy in ("sa-jsq", "jsq", "random"):
        for verify in (False, True):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                r = exactq.solve("speed-aware", "mean_response_time", method="fluid", policy=policy, verify=verify,
                                 **params)
                times.append(time.perf_counter() - t0)
            rows.append({"policy": policy, "verify": verify, "seconds": float(np.median(times)), "value": r.value,
                         "method": r.method})
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out")
    args = p.parse_args(argv)
    cases = [run_case(3, 8)]
    if not args.quick:
        # MMD on 245,025 states does not finish in minutes: not run
        cases.append(run_case(4, 8, with_direct=False))
    fluid = fluid_timings()
    doc = {"benchmark": "speed-aware lumped chain, stationary solve; fluid method per call", "cases": cases,
           "fluid": fluid}
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        print(text)
    for c in cases:
        parts = [f"k={c['k']} K={c['K']} n={c['n_states']}"]
        for name in ("direct", "bfs_levels", "power"):
            if name in c:
                parts.append(f"{name} {c[name]['seconds']:.2f}s")
        print("  ".join(parts), file=sys.stderr)
    for f in fluid:
        print(f"fluid {f['policy']:7s} verify={f['verify']!s:5s} {f['seconds'] * 1e3:.3f} ms  E[T] = {f['value']!r}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
