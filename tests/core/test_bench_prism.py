"""bench/prism.py's bookkeeping: the median sample of repeated runs, and issue 20's figures over runs.

The benchmark's timings are not tested here (they are measurements); what turns them into the issue's
figures is: which sample of a repeated case is kept, and over which cases a median is taken.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import prism as prism_bench  # noqa: E402  (bench/prism.py: Storm is imported by its workers only)


def sample(build: float, *checks: float, values=(1.0,)) -> dict:
    return {"build_seconds": build, "results": [{"property": f"p{k}", "value": v, "seconds": c}
                                                for k, (c, v) in enumerate(zip(checks, values))]}


def test_the_median_sample_of_repeats_is_kept_with_every_time():
    runs = [sample(0.5, 0.4), sample(0.1, 0.1), sample(0.2, 0.2)]  # totals 0.9, 0.2, 0.4
    kept = prism_bench.median_sample(runs)
    assert kept["build_seconds"] == 0.2
    assert kept["repeats"] == {"count": 3, "seconds": [0.9, 0.2, 0.4], "values_identical": True}
    # an even count keeps the lower of the two middle samples
    assert prism_bench.median_sample(runs[:2])["build_seconds"] == 0.1
    # values that differ between repeats are flagged, not hidden
    odd = prism_bench.median_sample([sample(0.1, 0.1), sample(0.1, 0.2, values=(2.0,)), sample(0.1, 0.3)])
    assert odd["repeats"]["values_identical"] is False
    # one sample is returned as it is
    assert prism_bench.median_sample([runs[0]]) is runs[0]


def test_a_failed_repeat_is_what_is_kept():
    failed = {"error": "timed out after 60 s", "wall_seconds": 60.0}
    kept = prism_bench.median_sample([sample(0.1, 0.1), failed])
    assert kept["error"] == "timed out after 60 s" and kept["repeats"] == {"count": 2, "failed": 1}


def test_the_process_time_is_the_cli_samples_time():
    cli = [{"process_seconds": t, "results": []} for t in (0.9, 0.7, 0.8)]
    assert prism_bench.median_sample(cli)["process_seconds"] == 0.8


def run(case: str, size: str, states: int, ratio: float, storm: float) -> dict:
    return {"case": case, "size_label": size, "exactq": {"n_states": states},
            "timing": {"ratio_in_process": ratio, "storm_fastest_seconds": storm}}


def test_the_summary_takes_the_issues_population_by_storms_median_time():
    first = {"runs": [run("a", "1", 100, 2.0, 0.01), run("b", "1", 20_000, 0.4, 0.5),
                      run("c", "1", 5_000, 0.6, 0.09), run("d", "1", 50_000, 0.2, 200.0)]}
    second = {"runs": [run("a", "1", 100, 1.0, 0.03), run("b", "1", 20_000, 0.6, 0.7),
                       run("c", "1", 5_000, 0.8, 0.2), run("d", "1", 50_000, 0.4, 150.0)]}
    out = prism_bench.summary([first, second, {"runs": [run("c", "1", 5_000, 0.7, 0.15)]}])
    ratios = {c["case"]: (c["ratio"], c["storm_seconds"], c["runs"]) for c in out["cases"]}
    assert ratios == {"a": (1.5, 0.02, 2), "b": (0.5, 0.6, 2), "c": (0.7, 0.15, 3), "d": (pytest.approx(0.3), 175.0, 2)}
    assert out["all"] == {"cases": 4, "median": pytest.approx(0.6), "max": 1.5}
    assert out["above_10000"]["cases"] == 2
    # Storm's median time decides: c (0.09, 0.2, 0.15 s) is in 0.1-100 s, a (0.02 s) below, d (175 s) above
    in_range = out["storm_0.1_to_100_s"]
    assert in_range["cases"] == 2 and in_range["median"] == pytest.approx(0.6) and in_range["max"] == 0.7
    assert in_range["below_range"] == ["a 1"]
