"""The ``qbd`` method for SED with two identical Erlang servers (exact in the shorter queue).

Independent checks: the box-truncated CTMC of models/sed.py (other coordinates, other
truncation, sparse LU), the compensation series for r = 1 (symmetric JSQ), and the
MODELS.md reference value r = 2, rho = 0.5: E[W] = 0.29938794.
"""

import json
import warnings

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, UnstableError
from exactq.solvers.qbd import solve_qbd

MEASURES = ("mean_number", "mean_waiting_time", "mean_response_time", "p_wait", "prob_empty")


@pytest.mark.parametrize("r, rho, measures", [(1, 0.3, MEASURES), (2, 0.5, MEASURES), (2, 0.85, MEASURES[:2]),
                                               (3, 0.7, MEASURES[1:2]), (5, 0.3, MEASURES[3:])])
def test_qbd_equals_truncated_ctmc(r, rho, measures):
    for measure in measures:
        q = exactq.solve("sed", measure, method="qbd", tol=1e-11, arrival_rate=2 * rho, service_rates="1,1",
                         phases=r)
        c = exactq.solve("sed", measure, method="ctmc", tol=1e-11, arrival_rate=2 * rho, service_rates="1,1",
                         phases=r)
        assert q.value == pytest.approx(c.value, rel=1e-9, abs=1e-12), measure
        assert q.error_estimate is not None and q.error_estimate < 1e-9


def test_reference_value_and_queue_lengths():
    r = exactq.solve("sed", "mean_waiting_time", method="qbd", arrival_rate=1.0, service_rates="1,1", phases=2)
    assert r.value == pytest.approx(0.29938794, abs=5e-9)
    L = exactq.solve("sed", "mean_number", method="qbd", arrival_rate=1.0, service_rates="1,1", phases=2).value
    q = exactq.solve("sed", "mean_queue_lengths", method="qbd", arrival_rate=1.0, service_rates="1,1",
                     phases=2).value
    assert q == pytest.approx([L / 2, L / 2], rel=1e-14)
    # Little: E[L] = lambda E[T]
    T = exactq.solve("sed", "mean_response_time", method="qbd", arrival_rate=1.0, service_rates="1,1",
                     phases=2).value
    assert L == pytest.approx(1.0 * T, rel=1e-10)


@pytest.mark.parametrize("rho", [0.2, 0.9, 0.97])
def test_one_phase_is_the_compensation_series(rho):
    q = exactq.solve("jsq", "mean_number", method="compensation", arrival_rate=2 * rho, service_rates="1,1")
    s = exactq.solve("sed", "mean_number", method="qbd", tol=1e-12, arrival_rate=2 * rho, service_rates="1,1")
    assert s.value == pytest.approx(q.value, rel=1e-10)


def test_rate_scaling():
    a = exactq.solve("sed", "mean_waiting_time", method="qbd", arrival_rate=1.4, service_rates="1,1", phases=3)
    b = exactq.solve("sed", "mean_waiting_time", method="qbd", arrival_rate=2.8, service_rates="2,2", phases=3)
    assert b.value == pytest.approx(a.value / 2, rel=1e-11)


def test_qbd_invariants():
    m = exactq.model("sed", arrival_rate=1.8, service_rates="1,1", phases=3)
    q = m.qbd(40)
    for name in ("A0", "A1", "A2", "B0", "B1", "B2"):
        X = getattr(q, name)
        off = X - np.diag(np.diag(X)) if X.shape[0] == X.shape[1] else X
        assert off.min() >= 0, name
    assert np.allclose((q.A0 + q.A1 + q.A2).sum(1), 0)
    assert np.allclose((q.B0 + q.B1).sum(1), 0)
    sol = solve_qbd(q)
    exp = {name: sol.expect_affine(*t) for name, t in m.qbd_rewards(q).items()}
    exp["edge_mass"] = sol.edge_mass()
    assert sol.spectral_radius < 1
    assert sol.residual < 1e-12
    dist = sol.level_distribution(400)
    assert dist.min() >= 0 and dist.sum() == pytest.approx(1, abs=1e-12)
    assert 0 < exp["empty"] < exp["busy_short"] < 1
    assert exp["edge_mass"] < 1e-12


def test_error_estimate_brackets_the_change_to_a_wider_truncation():
    kw = dict(arrival_rate=1.9, service_rates="1,1", phases=2)
    loose = exactq.solve("sed", "mean_number", method="qbd", tol=1e-5, **kw)
    tight = exactq.solve("sed", "mean_number", method="qbd", tol=1e-13, **kw)
    assert abs(loose.value - tight.value) <= 10 * loose.error_estimate + 1e-13


def test_auto_method_picks_qbd_for_identical_pairs_only():
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,1", phases=2).method == "qbd"
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,2").method.startswith("ctmc")
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,1,1").method.startswith("ctmc")
    # verify re-solves the truncated chain, so auto then takes the ctmc method
    assert exactq.solve("sed", arrival_rate=1.0, service_rates="1,1", phases=2, verify=True).method \
        .startswith("ctmc")


def test_bad_input():
    with pytest.raises(NotApplicableError, match="two identical servers"):
        exactq.solve("sed", method="qbd", arrival_rate=1.0, service_rates="1,2")
    with pytest.raises(UnstableError, match="arrival_rate"):
        exactq.solve("sed", method="qbd", arrival_rate=2.0, service_rates="1,1")
    with pytest.raises(exactq.NotApplicableError, match="verify"):
        exactq.solve("sed", method="qbd", arrival_rate=1.0, service_rates="1,1", verify=True)
    with pytest.raises(ModelError, match="phase truncation must be >= phases"):
        exactq.solve("sed", method="qbd", arrival_rate=1.0, service_rates="1,1", phases=4, truncation=2)


def test_fixed_truncation_warns_that_the_error_is_not_estimated():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = exactq.solve("sed", method="qbd", arrival_rate=1.0, service_rates="1,1", phases=2, truncation=30)
    assert r.error_estimate is None and r.info["phase_truncation"] == 30
    assert any(issubclass(x.category, AccuracyWarning) and "not estimated" in str(x.message) for x in w)


def test_cli(capsys):
    rc = main(["solve", "sed", "arrival_rate=1.6", "service_rates=1,1", "phases=2", "--measure",
               "mean_waiting_time", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, None) and out["method"] == "qbd"
    ref = exactq.solve("sed", "mean_waiting_time", method="ctmc", tol=1e-11, arrival_rate=1.6,
                       service_rates="1,1", phases=2).value
    assert out["value"] == pytest.approx(ref, rel=1e-9)
    assert out["error_estimate"] < 1e-8
