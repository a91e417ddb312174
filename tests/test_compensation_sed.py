"""Compensation for SED with two identical Erlang servers (solvers/compensation_sed.py).

Only phases=1 is solved by a compensation series (it is the symmetric JSQ); phases >= 2
is refused with NotApplicableError. The dominant product form for phases >= 2 is checked
against the truncated CTMC.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

import exactq
from exactq.errors import NotApplicableError
from exactq.solvers.compensation import symmetric_jsq
from exactq.solvers.compensation_sed import SED_MEASURES, _solve, kernel, sed_decay_rates


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.9, 0.95])
def test_phases_1_agrees_with_truncated_ctmc(rho):
    from exactq.solvers.ctmc_method import solve_chain

    model = exactq.model("sed", arrival_rate=2 * rho, service_rates="1,1")
    chain = model.ctmc(model.truncation_start(1e-14))  # one chain solve for every measure
    pi = solve_chain(chain).pi
    for measure in SED_MEASURES:
        comp = exactq.solve("sed", measure, method="compensation", arrival_rate=2 * rho, service_rates="1,1")
        ctmc = model.ctmc_measure(measure, chain, pi)
        assert comp.method == "compensation"
        assert np.allclose(comp.value, ctmc, rtol=1e-9, atol=1e-13), measure
        assert comp.error_estimate < 1e-10 * max(1.0, float(np.max(np.abs(np.atleast_1d(comp.value)))))
        assert comp.info["terms"] > 0 and comp.info["contribution_ratio"] < 1


def test_phases_1_equals_symmetric_jsq_and_scales_with_rate():
    m = symmetric_jsq(0.7).measures()
    r = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=1.4, service_rates="1,1")
    assert r.value == pytest.approx(m["mean_waiting_time"], rel=1e-14)
    r2 = exactq.solve("sed", "mean_waiting_time", method="compensation", arrival_rate=2.8, service_rates="2,2")
    assert r2.value == pytest.approx(r.value / 2, rel=1e-13)
    fast = exactq.solve("sed", "mean_number", method="compensation", arrival_rate=1.4, service_rates="1,1",
                        ties="fastest")
    assert fast.value == pytest.approx(m["mean_number"], rel=1e-14)


def test_quarter_plane_and_applicability():
    qp = exactq.model("sed", arrival_rate=1.6, service_rates="1,1", phases=3).quarter_plane()
    assert qp == {"kind": "erlang-sed", "rho": 0.8, "phases": 3, "service_rate": 1.0}
    with pytest.raises(NotApplicableError, match="two identical servers.*--method ctmc"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="two identical servers"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,1,1")
    with pytest.raises(NotApplicableError, match="phases=1.*--method ctmc"):
        exactq.solve("sed", method="compensation", arrival_rate=1.0, service_rates="1,1", phases=2)
    with pytest.raises(NotApplicableError, match="measure"):
        _solve({"kind": "erlang-sed", "rho": 0.5, "phases": 1, "service_rate": 1.0}, "blocking", 1e-9)
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,1").method == "qbd"


def test_cli():
    ok = subprocess.run([sys.executable, "-m", "exactq", "solve", "sed", "arrival_rate=1.6", "service_rates=1,1",
                         "phases=1", "--method", "compensation", "--json"], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["method"] == "compensation"
    assert out["value"] == pytest.approx(symmetric_jsq(0.8).measures()["mean_waiting_time"], rel=1e-12)
    bad = subprocess.run([sys.executable, "-m", "exactq", "solve", "sed", "arrival_rate=1.6", "service_rates=1,1",
                          "phases=2", "--method", "compensation", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "--method ctmc" in bad.stderr


def test_decay_rates_r1_closed_form():
    a, b = sed_decay_rates(0.6, 1)
    assert a == pytest.approx(0.36, rel=1e-12) and b == pytest.approx(0.36 / 2.6, rel=1e-12)


@pytest.mark.parametrize("r,rho", [(2, 0.5), (3, 0.6)])
def test_decay_rates_match_ctmc_ratios(r, rho):
    from exactq.solvers.ctmc_method import solve_chain

    a, b = sed_decay_rates(rho, r)
    assert abs(kernel(rho, r, a, b)) < 1e-14
    assert 0 < b < a < 1
    K = 30
    chain = exactq.model("sed", arrival_rate=2 * rho, service_rates="1,1", phases=r).ctmc(K)
    pi = solve_chain(chain).pi
    P = np.zeros((r * K + 1,) * 2)
    P[chain.states[:, 0], chain.states[:, 1]] = pi
    m, n = 8 * r, 2 * r
    assert P[m + 1, m + 1 + n] / P[m, m + n] == pytest.approx(a, rel=1e-5)
    assert P[m, m + n + 1] / P[m, m + n] == pytest.approx(b, rel=1e-5)
