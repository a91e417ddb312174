"""Budgets end in answers (issue 14): a time limit returns the last value with its estimate and a warning."""

import math

import pytest

import exactq
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, TruncationError

JSQ = dict(arrival_rate=2.9, service_rates="1,2")  # load 0.967: many levels to 1e-12


def test_time_limit_returns_the_last_value_with_its_estimate_and_a_warning():
    full = exactq.solve("jsq", method="ctmc", tol=1e-12, **JSQ)
    with pytest.warns(AccuracyWarning, match="stopped by time_limit before reaching tol=1e-12"):
        r = exactq.solve("jsq", method="ctmc", tol=1e-12, time_limit=1e-3, **JSQ)
    t = r.info["truncation"]
    assert t["stopped_by"] == "time_limit"
    assert len(t["history"]) < len(full.info["truncation"]["history"])
    # the value of the last level solved, with an honest (here: no better than its last change) estimate
    assert r.value == t["history"][-1]["value"] and r.error_estimate > 1e-12
    assert abs(r.value - full.value) <= max(r.error_estimate, 1e-9) * 10 or math.isinf(r.error_estimate)


def test_strict_time_limit_is_an_error():
    with pytest.raises(TruncationError, match="time_limit"):
        exactq.solve("jsq", method="ctmc", tol=1e-12, time_limit=1e-3, strict=True, **JSQ)


def test_model_chosen_sets_are_predicted_before_they_are_solved():
    """power-of-d grows cost sets (no integer level): the next set's time is predicted once it is built."""
    kw = dict(servers=6, d=2, arrival_rate=0.95, tol=1e-10)
    with pytest.warns(AccuracyWarning, match="stopped by time_limit"):
        r = exactq.solve("power-of-d", time_limit=1.0, **kw)
    assert r.info["truncation"]["stopped_by"] == "time_limit" and math.isfinite(r.value)
    assert r.seconds < 10.0  # the set predicted to overrun is not solved


def test_time_limit_is_validated_and_only_for_adaptive_methods():
    with pytest.raises(ModelError, match="time_limit must be a number of seconds > 0; got -1"):
        exactq.solve("jsq", method="ctmc", time_limit=-1, **JSQ)
    with pytest.raises(NotApplicableError, match="time_limit applies to the adaptive truncation"):
        exactq.solve("mm1", method="closed-form", arrival_rate=0.5, time_limit=5)


def test_time_limit_on_the_command_line(capsys):
    from exactq.cli import main

    code = main(["solve", "jsq", "arrival_rate=2.9", "service_rates=1,2", "--method", "ctmc", "--tol", "1e-12",
                 "--time-limit", "0.001", "--json"])
    out, err = capsys.readouterr()
    import json

    d = json.loads(out)
    assert code == 0 and "stopped by time_limit" in err and "stopped by time_limit" in d["warnings"][0]
    assert d["info"]["truncation"]["stopped_by"] == "time_limit"
    code = main(["solve", "jsq", "arrival_rate=2.9", "service_rates=1,2", "--method", "ctmc", "--tol", "1e-12",
                 "--time-limit", "0.001", "--strict"])
    out, err = capsys.readouterr()
    assert code != 0 and err.count("\n") == 1 and err.startswith("exactq: error:")


# ---------------------------------------------------------------------------------------------
# memory: predicted before allocating (issue 21 item 1)
# ---------------------------------------------------------------------------------------------
def test_the_first_level_is_priced_before_it_is_built(monkeypatch):
    """Under a small memory budget the truncation stops before its first level, in one line naming the budget."""
    from exactq.budget import CHAIN_BYTES_PER_STATE

    m = exactq.model("jsq", **JSQ)
    start = m.truncation_start(1e-12)
    need = m.ctmc_size(start) * CHAIN_BYTES_PER_STATE
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", str(int(need * 0.9)))
    with pytest.raises(TruncationError, match=r"stopped before its first level: level \d+ .* above the memory budget"):
        exactq.solve("jsq", method="ctmc", tol=1e-12, **JSQ)


def test_a_memory_budget_that_runs_out_returns_the_last_value(monkeypatch):
    """Room for the first level, not the next: the last value, its estimate and a warning naming memory."""
    from exactq.budget import CHAIN_BYTES_PER_STATE

    m = exactq.model("jsq", **JSQ)
    start = m.truncation_start(1e-12)
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", str(int(m.ctmc_size(start) * CHAIN_BYTES_PER_STATE * 1.2)))
    with pytest.warns(AccuracyWarning, match="stopped by memory"):
        r = exactq.solve("jsq", method="ctmc", tol=1e-12, **JSQ)
    t = r.info["truncation"]
    assert t["stopped_by"] == "memory" and len(t["history"]) == 1 and t["level"] == start
    assert math.isfinite(r.value) and r.error_estimate > 0
    with pytest.raises(TruncationError, match="stopped by memory"):
        exactq.solve("jsq", method="ctmc", tol=1e-12, strict=True, **JSQ)


def test_fixed_truncations_finite_chains_and_exports_are_priced(monkeypatch, tmp_path, capsys):
    from exactq.budget import BudgetError
    from exactq.cli import main

    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", "1GiB")
    with pytest.raises(BudgetError, match=r"the chain at truncation 100000 \(1e\+10 states"):
        exactq.solve("jsq", method="ctmc", truncation=100_000, arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(BudgetError, match=r"the chain of mmck \(capacity=100000000\): 1e\+08 states"):
        exactq.solve("mmck", method="ctmc", arrival_rate=1, servers=1, capacity=10**8)
    assert exactq.solve("mmck", method="ctmc", arrival_rate=1, servers=1, capacity=50).n_states == 51
    assert main(["export", "jsq", "arrival_rate=1", "service_rates=1,1", "--format", "mtx", "--truncation",
                 "100000", "--out", str(tmp_path / "j")]) == 2
    assert "1e+10 states would need" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was written


def test_size_predictions_need_not_build_what_they_count():
    """round-robin counts its distributed arrival phases by a binomial coefficient and its completion counter."""
    m = exactq.model("round-robin", servers=64, arrival_rate=1.0, dispatch="distributed", phases=50)
    assert m.qbd_size() == math.comb(127, 64) * 50
    small = exactq.model("round-robin", servers=2, arrival_rate=1.0, k=5, t=1.0)
    built = small.joint_ctmc(6, counter=True)
    assert built.n_states <= small.ctmc_size(6, counter=True)  # a bound of the reachable states
    assert small.ctmc_size(6, counter=True) == 6 * small.ctmc_size(6)


def test_mph1_starts_its_truncation_where_its_tail_decays():
    """The decay rate sp(R) from the explicit R agrees with the QBD solver's R (an independent iteration)."""
    import numpy as np

    from exactq.catalogue import solve_representation

    for scv in (0.2, 1.0, 4.0, 100.0):
        m = exactq.model("mph1", arrival_rate=0.5, scv=scv)
        R = solve_representation(m.qbd(), None).R
        assert m.decay_rate() == pytest.approx(float(np.abs(np.linalg.eigvals(R)).max()), rel=1e-10)
    heavy = exactq.model("mph1", arrival_rate=0.5, scv=1e6)
    assert heavy.truncation_start(1e-9) > 1e7  # log(1e-9) / log(1 - 1.3e-6): the hang was a 1e7-level chain
    # and the start still gives the ctmc value of a moderate case (against Pollaczek-Khinchine)
    r = exactq.solve("mph1", "mean_number", method="ctmc", arrival_rate=0.5, scv=4.0, tol=1e-8)
    pk = exactq.solve("mph1", "mean_number", method="closed-form", arrival_rate=0.5, scv=4.0).value
    assert abs(r.value - pk) <= 1e-7 * pk


def test_the_process_limit_counts_in_the_budget():
    """``ulimit -v`` (RLIMIT_AS) lowers what the budget may plan, in a subprocess."""
    import subprocess
    import sys

    code = ("import resource; lim = 3 * 2**30; resource.setrlimit(resource.RLIMIT_AS, (lim, lim)); "
            "from exactq.budget import available_memory; print(available_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in __import__("os").environ.items() if k != "EXACTQ_MEMORY_BUDGET"})
    assert out.returncode == 0, out.stderr
    assert 0 < int(out.stdout) < 3 * 2**30


def test_the_sweep_grid_is_priced_from_its_lengths_before_it_is_built(monkeypatch):
    import sys
    import time

    from exactq.budget import BudgetError

    Study = sys.modules["exactq.sweep"].Study
    t0 = time.perf_counter()
    with pytest.raises(BudgetError, match=r"the sweep's grid \(100000 x 80000 = 8e\+09 points"):
        Study("mm1", {}, {"arrival_rate": "0.1:0.5:100000", "service_rate": "1:2:80000"})
    assert time.perf_counter() - t0 < 5  # nothing materialised
    study = Study("mm1", {}, {"arrival_rate": "0.1:0.5:3", "service_rate": "1|2"})
    points = study.points()
    assert not isinstance(points, list) and study.size == 6 and len(list(points)) == 6


_FAULTS = """
import resource, sys
import numpy as np
import exactq, exactq.budget
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(1 << 20); del a            # 8 MB: the first one is fresh memory either way
f0 = faults()
for _ in range(10):
    a = np.ones(1 << 20); del a
print(exactq.budget._TUNED[0], faults() - f0)
"""


def _allocator_run(env_value):
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("EXACTQ_MALLOC_TUNING", None)
    if env_value is not None:
        env["EXACTQ_MALLOC_TUNING"] = env_value
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    tuned, faults = out.stdout.split()
    return tuned == "True", int(faults)


def test_the_allocator_keeps_freed_arrays_for_reuse_unless_told_not_to():
    import os

    if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
        pytest.skip("mallopt is glibc's")
    tuned, faults = _allocator_run(None)
    untuned, faults_default = _allocator_run("0")
    assert tuned and not untuned
    # 10 arrays of 2048 pages each: tuned, they reuse the first one's pages (0 faults measured); glibc's
    # defaults trim and fault some of them in again (495 measured, glibc 2.36)
    assert faults < 256 and faults <= faults_default, (faults, faults_default)
