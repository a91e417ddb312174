"""The classic case studies of bench/prism_models.py (written for exactq) build and check at small sizes.

State counts are compared with closed forms where the structure gives one, steady-state
values between two stationary solvers, and a transient value with a matrix exponential.
The comparison with Storm is the benchmark's (bench/prism.py), not a test.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import exactq
from exactq.api import check_properties
from exactq.solvers.stationary import solve_stationary

BENCH = Path(__file__).resolve().parents[2] / "bench" / "prism_models.py"


def _cases():
    spec = importlib.util.spec_from_file_location("prism_models", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CASES


CASES = _cases()


def build(case, size):
    text, consts, props = CASES[case][0](size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the embedded system's failed states are deadlocks
        m = exactq.load_prism(f"{case}.sm", consts, text=text)
        m.built
    return m, props


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_case_study_builds_and_checks_every_property(case):
    size = CASES[case][1][0]
    m, props = build(case, size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_properties(m, "\n".join(props))
    assert len(results) == len(props)
    for r in results:
        assert np.all(np.isfinite(np.atleast_1d(r.value))), r.measure
        if r.method in ("query/uniformisation",) and r.measure.startswith("P"):
            assert -1e-12 <= r.value <= 1 + 1e-12
    chain = m.built.chain
    assert chain.n_states == m.built.chain.Q.shape[0]


@pytest.mark.parametrize("c", [3, 10, 31])
def test_tandem_state_count(c):
    m, _ = build("tandem", c)
    assert m.built.chain.n_states == 2 * c * c + 3 * c + 1  # ph = 2 only with a job in the first queue


@pytest.mark.parametrize("n", [3, 5, 7])
def test_polling_state_count(n):
    m, _ = build("polling", n)
    assert m.built.chain.n_states == 3 * n * 2 ** (n - 1)  # the server serves only a station with a job


@pytest.mark.parametrize("case, size", [("tandem", 10), ("polling", 5), ("cluster", 4), ("kanban", 1),
                                        ("fms", 2), ("cluster", 16)])
def test_steady_state_of_the_case_studies_by_two_solvers(case, size):
    m, props = build(case, size)
    chain = m.built.chain
    a = solve_stationary(chain, solver="direct")
    b = solve_stationary(chain, solver="gth" if chain.n_states <= 800 else "gmres")
    assert np.abs(a.pi - b.pi).max() <= 1e-12 * max(1.0, a.pi.max())
    steady = [p for p in props if "[ S ]" in p or p.startswith("S=?")]
    first = check_properties(m, steady[0])[0]
    assert first.residual < 1e-12


def test_a_transient_property_of_the_tandem_against_expm():
    m, _ = build("tandem", 10)
    chain = m.built.chain
    Q = chain.Q.toarray()
    full = chain.states[:, 0] == 10
    Q[full] = 0
    E = scipy.linalg.expm(Q * 0.25)
    got = check_properties(m, "P=? [ F<=0.25 sc=c ]")[0].value
    assert got == pytest.approx(E[chain.initial, full].sum(), abs=1e-12)


def test_the_tandem_lu_takes_a_likely_reference_without_a_redo():
    """Its largest exit rate is an improbable state (~1e-9 of the largest entry at c = 31): three
    Gauss-Seidel sweeps spot it before the LU, which runs once, and GTH agrees."""
    m, _ = build("tandem", 20)
    Q = m.built.chain.Q
    from exactq.solvers.stationary import stationary

    st = stationary(Q)
    assert st.method == "direct" and "recovery" not in st.info
    g = stationary(Q, method="gth")
    assert np.abs(st.pi - g.pi).max() <= 1e-12 * g.pi.max()
    assert st.pi.min() >= 0 and abs(st.pi.sum() - 1) < 1e-12
