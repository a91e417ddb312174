"""Benchmark (not a test): exactq's CTMC build + stationary solve against peers.

The chain is the symmetric two-server join-the-shortest-queue model (arrival_rate
1.8, service rates 1, 1; ties split evenly), truncated to the square
``0 <= q1, q2 <= K`` with the *block* rule (an arrival that would leave the square is
lost). K = 300 has 90,601 states, K = 1000 has 1,002,001.

Compared, each in a fresh subprocess so that the peak resident memory
(``ru_maxrss``) belongs to one configuration:

``exactq``
    What ``exactq solve jsq ... --truncation K`` does, timed by phase: the chain the
    ``ctmc`` method picks (``JSQ.lumped_ctmc(K)``, exact symmetry lumping onto sorted
    queue lengths, (K+1)(K+2)/2 states, when the model offers it for the measure; else
    ``JSQ.ctmc(K)``), then the registered CTMC solver (``solve_representation``) and the model's measure.
``exactq_full``
    The same on the full (K+1)^2-state chain (``JSQ.ctmc(K)``), the chain the peers solve.
``baseline``
    The obvious code: a Python double loop over the states filling triplet lists,
    ``csr_matrix``, then ``scipy.sparse.linalg.spsolve`` on ``Q^T`` with its last
    equation replaced by the normalisation ``sum(pi) = 1``.
``storm_best``
    Storm (through ``stormpy``) on the same rate matrix, handed over with
    ``SparseMatrixBuilder`` (build time = that hand-over plus the model
    construction), property ``R{"L"}=? [ LRA ]`` with the state reward q1 + q2,
    Eigen's SparseLU (``--eqsolver eigen --eigen:method sparselu``).
``storm_default``
    The same with Storm's default settings (what ``storm`` does without solver
    flags: the topological solver over gmm++ GMRES, relative precision 1e-6).
``storm_sound``
    The same with ``stormpy.environments.default(model)``, i.e. what
    ``stormpy.model_checking`` uses when no environment is passed (sound mode).
``storm_bisim``
    What a Storm user does on a symmetric chain: strong bisimulation minimisation
    (``transformations.perform_bisimulation``, preserving the property), then Eigen's
    SparseLU on the quotient; the minimisation counts in the solve time. It is the
    fair peer of exactq's automatic symmetry lumping.
``storm_exact``
    Storm's exact mode: the same chain over rationals (the float64 rates converted
    exactly), solved in rational arithmetic; run only for K <= ``--exact-max-K``.

Also measured: the K = 1500 exactq reference (agreement with K = 1000 to 1e-9), the
command line ``exactq solve jsq arrival_rate=1.8 service_rates=1,1 --json`` (automatic
truncation; wall time including start-up, 5 runs) and the same with
``--truncation 1000``.

Usage::

    python bench/ctmc.py                 # full run: K = 300 and 1000, all peers
    python bench/ctmc.py --quick         # K = 300 only (smoke run)
    python bench/ctmc.py --out bench/results_ctmc.json
    python bench/ctmc.py --show bench/results_ctmc.json   # the table of a saved run

One JSON document goes to stdout (or ``--out``); a short table goes to stderr.
Ratios are ``peer_seconds / exactq_seconds`` from medians measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ARRIVAL_RATE = 1.8
SERVICE_RATES = (1.0, 1.0)
AUTO_VALUE = 9.85484308  # E[L] quoted by the issue for the untruncated chain
AUTO_TOL = 1e-8
PEER_TOL = 1e-6  # a peer value further than this from exactq's is flagged incorrect
REFERENCE_TOL = 1e-9  # K = 1000 vs K = 1500
TARGET_SPEEDUP = 10.0
TARGET_PEAK_BYTES = 2.5e9
TARGET_CLI_SECONDS = 2.0
MARK = "BENCH_RESULT "

STORM_VARIANTS = {
    "storm_best": "Eigen SparseLU (--eqsolver eigen --eigen:method sparselu)",
    "storm_default": "Storm's default settings (topological solver over gmm++ GMRES, precision 1e-6)",
    "storm_sound": "stormpy's default environment (environments.default(model): sound mode)",
    "storm_bisim": "strong bisimulation minimisation, then Eigen SparseLU on the quotient",
    "storm_exact": "exact mode: rational arithmetic on the same chain (rates converted exactly)",
}
LABELS = {
    "exactq": "exactq (default path)",
    "exactq_full": "exactq full chain (no lump)",
    "baseline": "baseline (loop + spsolve)",
    "storm_best": "storm best (eigen sparselu)",
    "storm_default": "storm default",
    "storm_sound": "storm sound (stormpy default)",
    "storm_bisim": "storm bisim + sparselu",
    "storm_exact": "storm exact (rational)",
}


# ----------------------------------------------------------------------------- workers
def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def _emit(result: dict) -> None:
    result["peak_rss_bytes"] = _peak_rss_bytes()
    result["loadavg_1min_at_end"] = os.getloadavg()[0]
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


class _Clock:
    """Wall (perf_counter) and CPU (process_time, all threads) time of a phase."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def peek(self) -> float:
        """Wall seconds since the last lap (without starting a new one)."""
        return time.perf_counter() - self.wall

    def lap(self) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        out = (w - self.wall, c - self.cpu)
        self.wall, self.cpu = w, c
        return out


def _jsq():
    from exactq.models.jsq import JSQ

    return JSQ.create(arrival_rate=ARRIVAL_RATE, service_rates=",".join(f"{r:g}" for r in SERVICE_RATES))


def worker_exactq(K: int, lump: bool = True) -> None:
    """exactq's own path: the chain ``solve_ctmc`` would solve (lumped by symmetry when the
    model offers an exact lumping for the measure, as it does for identical servers), or
    with ``lump=False`` the full (K+1)^2-state chain, the one the peers solve."""
    from exactq.catalogue import solve_representation as solve_chain

    model = _jsq()
    lumped = bool(lump and callable(getattr(model, "lumped_ctmc", None)) and model.lumps("mean_number"))
    build_chain = model.lumped_ctmc if lumped else model.ctmc
    measure_of = model.lumped_measure if lumped else model.ctmc_measure
    rss_start = _peak_rss_bytes()
    clock = _Clock()
    chain = build_chain(K)
    build, build_cpu = clock.lap()
    st = solve_chain(chain)
    solve, solve_cpu = clock.lap()
    value = measure_of("mean_number", chain, st)
    measure, _ = clock.lap()
    mask = chain.boundary_mask()
    info = {k: v for k, v in st.info.items() if isinstance(v, (int, float, str, bool)) or v is None}
    _emit({
        "value": value,
        "chain": "lumped by symmetry (sorted queue lengths)" if lumped else "full (q1, q2)",
        "lumped": lumped,
        "n_states": int(chain.n_states),
        "nnz": int(chain.Q.nnz),
        "build_seconds": build,
        "solve_seconds": solve,
        "build_cpu_seconds": build_cpu,
        "solve_cpu_seconds": solve_cpu,
        "measure_seconds": measure,
        "method": st.method,
        "residual": float(st.residual),
        "pi_min": float(st.pi.min()),
        "pi_sum": float(st.pi.sum()),
        "boundary_mass": float(st.pi[mask].sum()),
        "solver_info": info,
        "rss_before_build_bytes": rss_start,
    })


def worker_export(K: int, path: str) -> None:
    """Write exactq's rate matrix (off-diagonal part of Q), rewards and states to ``path``."""
    import numpy as np
    import scipy.sparse as sp

    model = _jsq()
    chain = model.ctmc(K)
    Q = chain.Q.tocsr()
    R = (Q - sp.diags(Q.diagonal())).tocsr()
    R.eliminate_zeros()
    R.sort_indices()
    np.savez(path, indptr=R.indptr.astype(np.int64), indices=R.indices.astype(np.int64), data=R.data,
             reward=chain.states.sum(axis=1).astype(float), states=chain.states,
             initial=np.array([int(chain.initial)]))
    _emit({"path": path, "n_states": int(chain.n_states), "nnz_offdiagonal": int(R.nnz)})


def baseline_generator(K: int, arrival_rate: float, mu1: float, mu2: float):
    """The obvious builder: loop over the states, append triplets, convert to CSR."""
    import scipy.sparse as sp

    n = (K + 1) * (K + 1)
    rows, cols, vals = [], [], []

    def index(i, j):
        return i * (K + 1) + j

    for i in range(K + 1):
        for j in range(K + 1):
            s = index(i, j)
            out = 0.0
            if i < j:
                arrivals = [((i + 1, j), arrival_rate)]
            elif j < i:
                arrivals = [((i, j + 1), arrival_rate)]
            else:
                arrivals = [((i + 1, j), arrival_rate / 2), ((i, j + 1), arrival_rate / 2)]
            for (a, b), rate in arrivals:
                if a <= K and b <= K:  # block: arrivals beyond the square are lost
                    rows.append(s); cols.append(index(a, b)); vals.append(rate); out += rate
            if i > 0:
                rows.append(s); cols.append(index(i - 1, j)); vals.append(mu1); out += mu1
            if j > 0:
                rows.append(s); cols.append(index(i, j - 1)); vals.append(mu2); out += mu2
            rows.append(s); cols.append(s); vals.append(-out)
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def worker_baseline(K: int, matrix: str | None, mem_limit_gb: float | None) -> None:
    import numpy as np
    import scipy.sparse.linalg as spla

    if mem_limit_gb:
        lim = int(mem_limit_gb * 1e9)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    clock = _Clock()
    Q = baseline_generator(K, ARRIVAL_RATE, *SERVICE_RATES)
    build, build_cpu = clock.lap()
    n = Q.shape[0]
    A = Q.T.tolil()
    A[n - 1, :] = np.ones(n)  # replace the last balance equation by sum(pi) = 1
    A = A.tocsc()
    b = np.zeros(n)
    b[-1] = 1.0
    assemble, assemble_cpu = clock.lap()
    pi = spla.spsolve(A, b)
    spsolve, spsolve_cpu = clock.lap()
    L = np.array([i + j for i in range(K + 1) for j in range(K + 1)], dtype=float)
    value = float(pi @ L)
    out = {
        "value": value,
        "n_states": int(n),
        "nnz": int(Q.nnz),
        "build_seconds": build,
        "solve_seconds": assemble + spsolve,
        "build_cpu_seconds": build_cpu,
        "solve_cpu_seconds": assemble_cpu + spsolve_cpu,
        "assemble_seconds": assemble,
        "spsolve_seconds": spsolve,
        "residual": float(np.abs(pi @ Q).max()),
        "pi_min": float(pi.min()),
        "pi_sum": float(pi.sum()),
    }
    if matrix:  # same chain as exactq's?
        import scipy.sparse as sp

        d = np.load(matrix)
        R = sp.csr_matrix((d["data"], d["indices"], d["indptr"]), shape=(n, n))
        off = (Q - sp.diags(Q.diagonal())).tocsr()
        out["max_abs_diff_vs_exactq_rates"] = float(abs(off - R).max())
        out["diag_matches_row_sums"] = bool(np.allclose(Q.diagonal(), -np.asarray(R.sum(axis=1)).ravel()))
    _emit(out)


def worker_storm(variant: str, matrix: str) -> None:
    import numpy as np
    import stormpy
    import stormpy.info
    from stormpy import datastructures, developer, models

    d = np.load(matrix)
    indptr, indices, data = d["indptr"], d["indices"], d["data"]
    reward, initial = d["reward"], int(d["initial"][0])
    n = len(indptr) - 1
    clock = _Clock()
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    if variant == "storm_exact":
        from fractions import Fraction

        num = stormpy.Rational

        def conv(x):
            f = Fraction(float(x))  # the double's exact value
            return stormpy.Rational(f.numerator) / stormpy.Rational(f.denominator)

        builder = datastructures.SparseMatrixBuilder[num](rows=n, columns=n, entries=len(data))
        for r, c, v in zip(rows.tolist(), indices.tolist(), data.tolist()):
            builder.add_next_value(r, c, conv(v))
        reward_vector = [conv(x) for x in reward.tolist()]
    else:
        num = float
        builder = datastructures.SparseMatrixBuilder[float](rows=n, columns=n, entries=len(data))
        builder.add_next_values(rows.tolist(), indices.tolist(), data.tolist())
        reward_vector = reward.tolist()
    del rows
    rates = builder.build()
    labeling = models.StateLabeling(n)
    labeling.add_label("init")
    labeling.add_label_to_state("init", initial)
    rewards = models.SparseRewardModel[num](optional_state_reward_vector=reward_vector)
    components = models.SparseModelComponents[num](
        transition_matrix=rates, state_labeling=labeling, reward_models={"L": rewards}, rate_transitions=True)
    ctmc = models.SparseCtmc[num](components)
    build, build_cpu = clock.lap()
    if variant in ("storm_best", "storm_bisim"):
        developer.set_from_exploded_string(["--eqsolver", "eigen", "--eigen:method", "sparselu"])
        env = developer.EnvironmentBuilder.build_environment()
    elif variant == "storm_default":
        env = developer.EnvironmentBuilder.build_environment()  # the settings' defaults, as the CLI
    elif variant == "storm_sound":
        env = stormpy.environments.default(ctmc)
    elif variant == "storm_exact":
        env = None  # a rational model is checked exactly
    else:
        raise SystemExit(f"unknown storm variant {variant!r}")
    prop = stormpy.parse_properties('R{"L"}=? [ LRA ]')[0]
    clock.lap()
    extra = {}
    checked, state = ctmc, initial
    if variant == "storm_bisim":
        from stormpy import transformations

        checked = transformations.perform_bisimulation(ctmc, [prop],
                                                       bisimulation_type=transformations.BisimulationType.STRONG)
        state = int(checked.initial_states[0])
        extra = {"quotient_states": int(checked.nr_states), "minimise_seconds": clock.peek()}
    if env is None:
        result = stormpy.model_checking(checked, prop, only_initial_states=True)
    else:
        result = stormpy.model_checking(checked, prop, only_initial_states=True, environment=env)
    solve, solve_cpu = clock.lap()
    _emit({
        **extra,
        "value": float(result.get_value(state)),
        "n_states": int(ctmc.nr_states),
        "nr_transitions": int(ctmc.nr_transitions),
        "build_seconds": build,
        "solve_seconds": solve,
        "build_cpu_seconds": build_cpu,
        "solve_cpu_seconds": solve_cpu,
        "equation_solver": "exact (rational)" if env is None else str(env.solver().get_linear_equation_solver_type()),
        "force_soundness": True if env is None else bool(env.solver().force_soundness),
        "settings": STORM_VARIANTS[variant],
        "property": 'R{"L"}=? [ LRA ]',
        "storm_version": stormpy.info.storm_version(),
    })


# ----------------------------------------------------------------------------- driver
MIN_AVAILABLE_BYTES = 1.5e9  # set from --min-available-gb


def _available_bytes() -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    return float(psutil.virtual_memory().available)


def run_child(cmd: list[str], timeout: float | None) -> dict:
    """Run ``cmd``; wall time, rc, output and the child's own peak RSS (``wait4``).

    The child is killed when it runs past ``timeout`` or when the machine's available
    memory falls below MIN_AVAILABLE_BYTES (the memory guard: other work on a shared
    machine must not meet the OOM killer because of a benchmark).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True)
        timed_out, guarded, done = threading.Event(), threading.Event(), threading.Event()
        lowest = [_available_bytes()]

        def watch():
            while not done.wait(0.5):
                avail = _available_bytes()
                if avail is not None:
                    lowest[0] = min(lowest[0], avail)
                over = timeout is not None and time.perf_counter() - t0 > timeout
                short = avail is not None and avail < MIN_AVAILABLE_BYTES
                if over or short:
                    (timed_out if over else guarded).set()
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    result = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
    return {"rc": proc.returncode, "wall_seconds": wall, "timed_out": timed_out.is_set(),
            "memory_guard": guarded.is_set(), "min_available_bytes": lowest[0],
            "child_peak_rss_bytes": int(usage.ru_maxrss) * 1024, "stdout": stdout, "stderr": stderr,
            "result": result}


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _tail(text: str, n: int = 600) -> str:
    return text[-n:].strip()


MAX_LOAD: float | None = None  # set from --max-load
MAX_LOAD_WAIT = 300.0


def wait_for_quiet() -> float:
    """With ``--max-load``, wait (at most MAX_LOAD_WAIT s) until the 1-min load average is below it."""
    if MAX_LOAD is None:
        return 0.0
    t0 = time.perf_counter()
    while os.getloadavg()[0] >= MAX_LOAD and time.perf_counter() - t0 < MAX_LOAD_WAIT:
        time.sleep(5)
    return time.perf_counter() - t0


def run_worker(args: list[str], timeout: float | None, label: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", *args]
    waited = wait_for_quiet()
    load0 = os.getloadavg()[0]
    _log(f"{label}: {' '.join(args)}  (load {load0:.1f})")
    r = run_child(cmd, timeout)
    rec = dict(r["result"] or {})
    rec["wall_seconds"] = r["wall_seconds"]
    rec["machine_min_available_bytes"] = r["min_available_bytes"]
    rec["loadavg_1min_at_start"] = load0
    if MAX_LOAD is not None:
        rec["waited_for_load_seconds"] = waited
    if r["timed_out"]:
        rec.update({"status": "timeout", "timeout_seconds": timeout})
    elif r["memory_guard"]:
        rec.update({"status": "memory_guard", "error": f"killed when the machine's available memory fell below "
                                                       f"{MIN_AVAILABLE_BYTES / 1e9:g} GB"})
    elif r["rc"] != 0 or r["result"] is None:
        rec.update({"status": "error", "rc": r["rc"], "error": _tail(r["stderr"]) or _tail(r["stdout"])})
    else:
        rec["status"] = "ok"
    # Storm logs its warnings (e.g. non-convergence) on stdout/stderr: keep them.
    warns = [ln.strip() for ln in (r["stdout"] + "\n" + r["stderr"]).splitlines()
             if ("WARN" in ln or "ERROR" in ln) and not ln.startswith(MARK)]
    if warns:
        rec["log_warnings"] = warns[:20]
    if "peak_rss_bytes" not in rec:
        rec["peak_rss_bytes"] = r["child_peak_rss_bytes"]
    if rec["status"] == "ok" and "build_seconds" in rec:
        rec["total_seconds"] = rec["build_seconds"] + rec["solve_seconds"]
        rec["total_cpu_seconds"] = rec["build_cpu_seconds"] + rec["solve_cpu_seconds"]
        _log(f"  -> {rec['total_seconds']:.3f} s (build {rec['build_seconds']:.3f}, solve "
             f"{rec['solve_seconds']:.3f}), cpu {rec['total_cpu_seconds']:.3f} s, peak {rec['peak_rss_bytes'] / 1e6:.0f} MB, value {rec['value']!r}")
    elif rec["status"] != "ok":
        _log(f"  -> {rec['status']}: {rec.get('error', '')[-200:]}")
    return rec


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["status"] == "ok"]
    out = {"repeats": len(runs), "ok": len(ok), "runs": runs}
    if not ok:
        out["status"] = runs[-1]["status"] if runs else "skipped"
        return out
    out["status"] = "ok"
    med = {}
    for key in ("build_seconds", "solve_seconds", "total_seconds", "build_cpu_seconds", "solve_cpu_seconds",
                "total_cpu_seconds", "peak_rss_bytes"):
        med[key] = statistics.median(r[key] for r in ok)
    med["max_peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in ok)
    values = [r["value"] for r in ok]
    med["value"] = statistics.median(values)
    med["value_spread"] = max(values) - min(values)
    out["median"] = med
    return out


def check_peer(entry: dict, reference: float | None) -> None:
    if entry.get("status") != "ok" or reference is None:
        return
    v = entry["median"]["value"]
    diff = abs(v - reference)
    entry["abs_diff_vs_exactq"] = diff
    entry["correct"] = bool(math.isfinite(v) and v >= 0 and diff <= PEER_TOL)
    entry["correct_rule"] = f"value >= 0 and |value - exactq| <= {PEER_TOL:g}"
    # Storm's own stopping rule is a relative precision of 1e-6: say whether a flagged
    # value at least honours that, or is plainly wrong.
    entry["within_relative_1e-6"] = bool(math.isfinite(v) and diff <= 1e-6 * abs(reference))


def machine_info() -> dict:
    import numpy
    import scipy

    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        info["cpu_model"] = names[0] if names else None
    except OSError:
        pass
    try:
        import psutil

        info["cpu_count_physical"] = psutil.cpu_count(logical=False)
        info["memory_total_bytes"] = psutil.virtual_memory().total
    except ImportError:
        info["psutil"] = None
    try:
        import stormpy
        import stormpy.info

        info["stormpy"] = getattr(stormpy, "__version__", None)
        info["storm"] = stormpy.info.storm_long_version()
    except ImportError:
        info["stormpy"] = None
    try:
        import exactq

        info["exactq"] = exactq.__version__
    except Exception as exc:  # noqa: BLE001  (a broken import is worth recording)
        info["exactq"] = f"import failed: {exc}"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain"], capture_output=True, text=True,
                               timeout=10)
        info["git_commit"] = head.stdout.strip() or None
        info["git_dirty_files"] = len([ln for ln in dirty.stdout.splitlines() if ln.strip()])
    except (OSError, subprocess.SubprocessError):
        pass
    info["thread_env"] = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
                          if k in os.environ}
    return info


def exactq_cli() -> list[str]:
    exe = shutil.which("exactq")
    return [exe] if exe else [sys.executable, "-c", "import sys; from exactq.cli import main; sys.exit(main())"]


def run_cli(extra: list[str], runs: int, expected: float | None, tol: float | None, timeout: float) -> dict:
    cmd = exactq_cli() + ["solve", "jsq", f"arrival_rate={ARRIVAL_RATE:g}",
                          "service_rates=" + ",".join(f"{r:g}" for r in SERVICE_RATES), *extra, "--json"]
    shown = "exactq " + " ".join(cmd[len(exactq_cli()):])
    _log(f"cli x{runs}: {shown}")
    records = []
    for _ in range(runs):
        wait_for_quiet()
        r = run_child(cmd, timeout)
        rec = {"wall_seconds": r["wall_seconds"], "rc": r["rc"], "peak_rss_bytes": r["child_peak_rss_bytes"]}
        if r["timed_out"]:
            rec["status"] = "timeout"
        elif r["rc"] != 0:
            rec.update({"status": "error", "error": _tail(r["stderr"]) or _tail(r["stdout"])})
        else:
            try:
                doc = json.loads(r["stdout"])
                rec.update({"status": "ok", "value": doc.get("value"), "method": doc.get("method"),
                            "n_states": doc.get("n_states"), "error_estimate": doc.get("error_estimate"),
                            "warnings": doc.get("warnings")})
            except json.JSONDecodeError:
                rec.update({"status": "error", "error": "output is not JSON: " + _tail(r["stdout"])})
        records.append(rec)
    ok = [r for r in records if r["status"] == "ok"]
    out = {"command": shown, "runs": records}
    if ok:
        out["median_wall_seconds"] = statistics.median(r["wall_seconds"] for r in ok)
        out["max_wall_seconds"] = max(r["wall_seconds"] for r in ok)
        out["value"] = ok[0]["value"]
        out["method"] = ok[0]["method"]
        out["median_peak_rss_bytes"] = statistics.median(r["peak_rss_bytes"] for r in ok)
        if expected is not None:
            out["expected"] = expected
            out["abs_diff_vs_expected"] = abs(ok[0]["value"] - expected)
            out["value_ok"] = bool(out["abs_diff_vs_expected"] <= tol)
        _log(f"  -> median {out['median_wall_seconds']:.3f} s, value {out['value']!r} ({out['method']})")
    else:
        out["status"] = records[-1]["status"] if records else "skipped"
        _log(f"  -> {out['status']}")
    return out


def _ratio(num, den):
    return num / den if num and den else None


def ratios_for(config: dict) -> dict:
    ex = config["peers"].get("exactq", {})
    if ex.get("status") != "ok":
        return {}
    e = ex["median"]
    out = {}
    for name, entry in config["peers"].items():
        if name == "exactq":
            continue
        if entry.get("status") != "ok":
            out[name] = {"status": entry.get("status", "skipped")}
            continue
        p = entry["median"]
        out[name] = {
            f"{name}_seconds / exactq_seconds": _ratio(p["total_seconds"], e["total_seconds"]),
            "cpu_ratio": _ratio(p["total_cpu_seconds"], e["total_cpu_seconds"]),
            "build_ratio": _ratio(p["build_seconds"], e["build_seconds"]),
            "solve_ratio": _ratio(p["solve_seconds"], e["solve_seconds"]),
            "peak_rss_ratio": _ratio(p["peak_rss_bytes"], e["peak_rss_bytes"]),
            "correct": entry.get("correct"),
        }
    return out


def peers_available() -> dict:
    avail = {}
    try:
        import stormpy  # noqa: F401

        avail["stormpy"] = True
    except ImportError as exc:
        avail["stormpy"] = f"not installed ({exc}); Storm peers skipped"
    return avail


def bench_config(K: int, repeat: int, opts, tmpdir: str, storm_ok: bool) -> dict:
    n = (K + 1) ** 2
    cfg: dict = {"K": K, "n_states": n, "repeat": repeat, "peers": {}}
    ex_runs = [run_worker(["exactq", "--K", str(K)], opts.exactq_timeout, f"exactq K={K} #{i + 1}")
               for i in range(repeat)]
    cfg["peers"]["exactq"] = summarize(ex_runs)
    ref = cfg["peers"]["exactq"]["median"]["value"] if cfg["peers"]["exactq"]["status"] == "ok" else None
    if not opts.skip_full:
        full_runs = [run_worker(["exactq_full", "--K", str(K)], opts.exactq_timeout, f"exactq_full K={K} #{i + 1}")
                     for i in range(repeat)]
        cfg["peers"]["exactq_full"] = summarize(full_runs)
        check_peer(cfg["peers"]["exactq_full"], ref)

    need_matrix = (storm_ok and not opts.skip_storm) or not opts.skip_baseline
    matrix = None
    if need_matrix:
        matrix = os.path.join(tmpdir, f"jsq_K{K}.npz")
        exp = run_worker(["export", "--K", str(K), "--matrix", matrix], opts.exactq_timeout, f"export K={K}")
        if exp["status"] != "ok":
            matrix = None

    if opts.skip_baseline:
        cfg["peers"]["baseline"] = {"status": "skipped", "reason": "--skip-baseline"}
    elif K >= 1000 and opts.skip_baseline_large:
        cfg["peers"]["baseline"] = {"status": "skipped", "reason": "--skip-baseline-large"}
    else:
        args = ["baseline", "--K", str(K)] + (["--matrix", matrix] if matrix else [])
        if opts.baseline_mem_gb:
            args += ["--mem-limit-gb", str(opts.baseline_mem_gb)]
        runs = []
        for i in range(repeat):
            runs.append(run_worker(args, opts.baseline_timeout, f"baseline K={K} #{i + 1}"))
            if runs[-1]["status"] != "ok":
                break  # a timeout or memory failure will repeat: do not spend it twice
        cfg["peers"]["baseline"] = summarize(runs)
        check_peer(cfg["peers"]["baseline"], ref)

    for variant in STORM_VARIANTS:
        if opts.skip_storm:
            cfg["peers"][variant] = {"status": "skipped", "reason": "--skip-storm"}
            continue
        if not storm_ok:
            cfg["peers"][variant] = {"status": "skipped", "reason": "stormpy is not installed"}
            continue
        if variant == "storm_sound" and opts.skip_storm_sound:
            cfg["peers"][variant] = {"status": "skipped", "reason": "--skip-storm-sound"}
            continue
        if variant == "storm_exact" and K > opts.exact_max_K:
            cfg["peers"][variant] = {"status": "skipped", "reason": f"exact mode only for K <= {opts.exact_max_K}"}
            continue
        if matrix is None:
            cfg["peers"][variant] = {"status": "skipped", "reason": "matrix export failed"}
            continue
        timeout = opts.storm_sound_timeout if variant == "storm_sound" else opts.storm_timeout
        runs = []
        for i in range(repeat):
            runs.append(run_worker([variant, "--matrix", matrix], timeout, f"{variant} K={K} #{i + 1}"))
            if runs[-1]["status"] != "ok":
                break
        entry = summarize(runs)
        entry["engine"] = STORM_VARIANTS[variant]
        check_peer(entry, ref)
        cfg["peers"][variant] = entry
    if matrix and os.path.exists(matrix):
        os.remove(matrix)
    cfg["ratios"] = ratios_for(cfg)
    return cfg


def targets(doc: dict) -> dict:
    t: dict = {}
    c = doc["configs"].get("1000")
    if c and c["peers"]["exactq"].get("status") == "ok":
        e = c["peers"]["exactq"]["median"]
        sb = c["peers"].get("storm_best", {})
        if sb.get("status") == "ok":
            sp_ = sb["median"]["total_seconds"] / e["total_seconds"]
            sp_cpu = sb["median"]["total_cpu_seconds"] / e["total_cpu_seconds"]
            t["speedup_vs_storm_best_K1000"] = {"value": sp_, "cpu_time_value": sp_cpu,
                                                "target": f">= {TARGET_SPEEDUP:g}", "met": sp_ >= TARGET_SPEEDUP}
            ef = c["peers"].get("exactq_full", {})
            if ef.get("status") == "ok":
                t["speedup_vs_storm_best_K1000_same_full_chain"] = {
                    "value": sb["median"]["total_seconds"] / ef["median"]["total_seconds"],
                    "cpu_time_value": sb["median"]["total_cpu_seconds"] / ef["median"]["total_cpu_seconds"],
                    "note": "exactq without the symmetry lumping, on the 1,002,001-state chain Storm solves"}
        else:
            t["speedup_vs_storm_best_K1000"] = {"status": sb.get("status", "skipped")}
        bi = c["peers"].get("storm_bisim", {})
        if bi.get("status") == "ok":
            sp_b = bi["median"]["total_seconds"] / e["total_seconds"]
            t["speedup_vs_storm_bisim_K1000"] = {
                "value": sp_b, "cpu_time_value": bi["median"]["total_cpu_seconds"] / e["total_cpu_seconds"],
                "target": f">= {TARGET_SPEEDUP:g}", "met": sp_b >= TARGET_SPEEDUP,
                "note": "Storm minimised by strong bisimulation first: the fair peer of exactq's lumping"}
        t["peak_memory_K1000"] = {"bytes": e["max_peak_rss_bytes"], "target": f"< {TARGET_PEAK_BYTES:g} bytes",
                                  "met": e["max_peak_rss_bytes"] < TARGET_PEAK_BYTES}
        ref = doc.get("reference", {})
        if ref.get("status") == "ok":
            diff = abs(e["value"] - ref["median"]["value"])
            t["K1000_vs_K1500"] = {"abs_diff": diff, "target": f"<= {REFERENCE_TOL:g}", "met": diff <= REFERENCE_TOL}
    cli = doc.get("cli_auto")
    if cli and "median_wall_seconds" in cli:
        t["cli_auto"] = {"median_wall_seconds": cli["median_wall_seconds"],
                         "max_wall_seconds": cli["max_wall_seconds"],
                         "target": f"< {TARGET_CLI_SECONDS:g} s and |E[L] - {AUTO_VALUE}| <= {AUTO_TOL:g}",
                         "met": bool(cli["median_wall_seconds"] < TARGET_CLI_SECONDS and cli.get("value_ok"))}
    wrong = [f"K={k} {name}: {entry['median']['value']!r}"
             for k, cfg in doc["configs"].items() for name, entry in cfg["peers"].items()
             if entry.get("correct") is False]
    t["peer_values_flagged_incorrect"] = wrong
    return t


def _fmt_s(x):
    return "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.1f}")


def print_table(doc: dict) -> None:
    w = sys.stderr.write
    for key, cfg in doc["configs"].items():
        ex_n = cfg["peers"].get("exactq", {}).get("runs", [{}])[0].get("n_states")
        lumped = f"; exactq's lumped chain {ex_n:,}" if ex_n and ex_n != cfg["n_states"] else ""
        w(f"\nJSQ K={cfg['K']} ({cfg['n_states']:,} states{lumped}), medians of {cfg['repeat']} run(s)\n")
        w(f"{'':31s}{'build s':>9s}{'solve s':>10s}{'total s':>10s}{'cpu s':>9s}{'peak MB':>9s}  {'E[L]':<20s}"
          f"{'x exactq':>9s}{'cpu x':>7s}\n")
        ex = cfg["peers"].get("exactq", {})
        et = ex["median"]["total_seconds"] if ex.get("status") == "ok" else None
        ec = ex["median"]["total_cpu_seconds"] if ex.get("status") == "ok" else None
        for name, entry in cfg["peers"].items():
            label = LABELS.get(name, name)
            if entry.get("status") != "ok":
                last = entry["runs"][-1] if entry.get("runs") else {}
                extra = entry.get("reason") or (
                    f"after {last.get('timeout_seconds')} s, peak {last.get('peak_rss_bytes', 0) / 1e6:.0f} MB"
                    if entry.get("status") == "timeout" else
                    f"after {last.get('wall_seconds', 0):.0f} s, peak {last.get('peak_rss_bytes', 0) / 1e6:.0f} MB"
                    if entry.get("status") == "memory_guard" else
                    f"after {last.get('wall_seconds', 0):.0f} s, peak {last.get('peak_rss_bytes', 0) / 1e6:.0f} MB, "
                    f"rc {last.get('rc')}: {str(last.get('error', ''))[-70:]}"
                    if entry.get("status") == "error" else "")
                w(f"{label:31s}{entry.get('status', 'skipped'):>9s}  {extra}\n")
                continue
            m = entry["median"]
            ratio = "" if name == "exactq" or not et else f"{m['total_seconds'] / et:9.1f}"
            cratio = "" if name == "exactq" or not ec else f"{m['total_cpu_seconds'] / ec:7.1f}"
            flag = ("" if entry.get("correct", True) else
                    "  off by > 1e-6 (within rel. 1e-6)" if entry.get("within_relative_1e-6") else "  WRONG")
            w(f"{label:31s}{_fmt_s(m['build_seconds']):>9s}{_fmt_s(m['solve_seconds']):>10s}"
              f"{_fmt_s(m['total_seconds']):>10s}{_fmt_s(m['total_cpu_seconds']):>9s}{m['peak_rss_bytes'] / 1e6:9.0f}"
              f"  {m['value']:<20.12f}{ratio:>9s}{cratio:>7s}{flag}\n")
    ref = doc.get("reference")
    if ref and ref.get("status") == "ok":
        m = ref["median"]
        w(f"\nexactq K={ref['K']} reference: {m['value']:.15f} in {m['total_seconds']:.2f} s, "
          f"peak {m['peak_rss_bytes'] / 1e6:.0f} MB\n")
    for key in ("cli_auto", "cli_truncation_as_issued", "cli_truncation"):
        c = doc.get(key)
        if c and "median_wall_seconds" in c:
            w(f"{c['command']}: median {c['median_wall_seconds']:.3f} s wall, E[L] = {c['value']!r} ({c['method']})\n")
        elif c:
            w(f"{c['command']}: {c.get('status')}: {c['runs'][-1].get('error', '') if c['runs'] else ''}\n")
    w("\ntargets:\n")
    for k, v in doc.get("targets", {}).items():
        w(f"  {k}: {json.dumps(v)}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="K = 300 only (smoke run; no K = 1500 reference)")
    ap.add_argument("--K", type=int, nargs="+", default=None, help="truncation levels (default 300 1000)")
    ap.add_argument("--repeat", type=int, default=None, help="repeats per configuration (default 3 for K < 1000, 1 otherwise)")
    ap.add_argument("--skip-storm", action="store_true")
    ap.add_argument("--skip-storm-sound", action="store_true", help="skip stormpy's default (sound) environment")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-baseline-large", action="store_true", help="skip the baseline for K >= 1000")
    ap.add_argument("--skip-full", action="store_true",
                    help="skip exactq on the full (unlumped) chain")
    ap.add_argument("--skip-reference", action="store_true", help="skip the exactq K = 1500 reference")
    ap.add_argument("--skip-cli", action="store_true")
    ap.add_argument("--reference-K", type=int, default=1500)
    ap.add_argument("--cli-runs", type=int, default=5)
    ap.add_argument("--storm-timeout", type=float, default=900.0, help="seconds per Storm run (default 900)")
    ap.add_argument("--storm-sound-timeout", type=float, default=900.0)
    ap.add_argument("--exact-max-K", type=int, default=30, help="largest K for Storm's exact mode (default 30: 15 s at K = 30, rational LU grows fast)")
    ap.add_argument("--baseline-timeout", type=float, default=900.0)
    ap.add_argument("--baseline-mem-gb", type=float, default=None,
                    help="address-space cap of the baseline worker (default: 75%% of the available memory)")
    ap.add_argument("--min-available-gb", type=float, default=1.5,
                    help="kill a run when the machine's available memory falls below this (default 1.5)")
    ap.add_argument("--exactq-timeout", type=float, default=900.0)
    ap.add_argument("--max-load", type=float, default=None,
                    help="before each run wait (up to --max-load-wait s) until the 1-min load average is below this")
    ap.add_argument("--max-load-wait", type=float, default=300.0, help="seconds (default 300)")
    ap.add_argument("--show", default=None, metavar="JSON", help="print the table of a saved result and exit")
    ap.add_argument("--out", default=None, help="write the JSON here instead of stdout")
    # worker mode (internal)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--matrix", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mem-limit-gb", type=float, default=None, help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)

    if opts.worker:
        K = opts.K[0] if opts.K else None
        if opts.worker == "exactq":
            worker_exactq(K)
        elif opts.worker == "exactq_full":
            worker_exactq(K, lump=False)
        elif opts.worker == "export":
            worker_export(K, opts.matrix)
        elif opts.worker == "baseline":
            worker_baseline(K, opts.matrix, opts.mem_limit_gb)
        elif opts.worker in STORM_VARIANTS:
            worker_storm(opts.worker, opts.matrix)
        else:
            ap.error(f"unknown worker {opts.worker!r}")
        return 0

    if opts.show:
        with open(opts.show) as f:
            print_table(json.load(f))
        return 0
    Ks = opts.K or ([300] if opts.quick else [300, 1000])
    global MAX_LOAD, MAX_LOAD_WAIT, MIN_AVAILABLE_BYTES
    MAX_LOAD, MAX_LOAD_WAIT = opts.max_load, opts.max_load_wait
    MIN_AVAILABLE_BYTES = opts.min_available_gb * 1e9
    if opts.baseline_mem_gb is None:
        try:
            import psutil

            vm = psutil.virtual_memory()  # other work on the machine must not be pushed into the OOM killer
            opts.baseline_mem_gb = round(min(0.8 * vm.total, 0.75 * vm.available) / 1e9, 1)
        except ImportError:
            opts.baseline_mem_gb = None
    avail = peers_available()
    storm_ok = avail["stormpy"] is True
    if not storm_ok and not opts.skip_storm:
        _log(f"stormpy {avail['stormpy']}")
    doc: dict = {
        "benchmark": "bench/ctmc.py",
        "model": {"name": "jsq", "arrival_rate": ARRIVAL_RATE, "service_rates": list(SERVICE_RATES),
                  "ties": "random", "truncation": "square 0 <= q1, q2 <= K, block rule (arrivals beyond K lost)",
                  "measure": "E[L] = E[q1 + q2]"},
        "argv": sys.argv[1:] if argv is None else list(argv),
        "machine": machine_info(),
        "peers_available": avail,
        "peer_engines": {"baseline": "Python double loop + triplet lists -> csr_matrix; Q^T with last equation "
                                     "replaced by ones (lil), scipy.sparse.linalg.spsolve (SuperLU, COLAMD)",
                         **STORM_VARIANTS},
        "timing_notes": ("build_seconds: exactq = model.lumped_ctmc(K) (or model.ctmc(K) when the model does not "
                         "lump; exactq_full = model.ctmc(K)); baseline = Python loop to CSR; Storm = hand-over "
                         "of the CSR rate matrix (exported by exactq, not timed) to SparseMatrixBuilder + SparseCtmc. "
                         "solve_seconds: exactq = solve_representation (the stationary CTMC solver); baseline = equation replacement + "
                         "spsolve; Storm = model_checking of R{\"L\"}=? [ LRA ]. peak_rss_bytes = ru_maxrss of "
                         "the worker process (includes the Python interpreter and imports). *_cpu_seconds = "
                         "time.process_time() of the same phases (all threads of the worker): less sensitive "
                         "than wall time to other load on the machine (see the loadavg fields)."),
        "configs": {},
        "loadavg_at_start": list(os.getloadavg()),
    }
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="exactq-bench-") as tmpdir:
        for K in Ks:
            repeat = opts.repeat or (3 if K < 1000 else 1)
            doc["configs"][str(K)] = bench_config(K, repeat, opts, tmpdir, storm_ok)
    if not opts.quick and not opts.skip_reference:
        runs = [run_worker(["exactq", "--K", str(opts.reference_K)], opts.exactq_timeout,
                           f"exactq reference K={opts.reference_K}")]
        doc["reference"] = {"K": opts.reference_K, "n_states": (opts.reference_K + 1) ** 2, **summarize(runs)}
    if not opts.skip_cli:
        doc["cli_auto"] = run_cli([], opts.cli_runs, AUTO_VALUE, AUTO_TOL, 120)
        if not opts.quick and 1000 in Ks:
            ref = doc["configs"]["1000"]["peers"]["exactq"].get("median", {}).get("value")
            # the command verbatim, then with the method named (the automatic choice may
            # prefer a method that takes no truncation)
            doc["cli_truncation_as_issued"] = run_cli(["--truncation", "1000"], 1, ref, 1e-12, opts.exactq_timeout)
            doc["cli_truncation"] = run_cli(["--method", "ctmc", "--truncation", "1000"], 1, ref, 1e-12,
                                            opts.exactq_timeout)
    doc["targets"] = targets(doc)
    doc["total_bench_seconds"] = time.perf_counter() - t_start
    doc["loadavg_at_end"] = list(os.getloadavg())
    text = json.dumps(doc, indent=1, default=str)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text + "\n")
        _log(f"wrote {opts.out}")
    else:
        print(text)
    print_table(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
