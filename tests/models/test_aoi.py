"""Age of information: the matrix-geometric (QBD) law against the truncated DTMC of (age, phase), the
renewal closed forms, the MODELS.md references, the stochastic ordering and bad input."""

import doctest
import json
import warnings

import numpy as np
import pytest

import exactq
import exactq.models.aoi as aoi
from exactq import solve
from exactq.cli import main
from exactq.errors import ModelError, NotApplicableError
from exactq.models.aoi import decoding_probability

BASE = dict(codeword_bits=10, erasure_prob=0.3, actual_bits=8)
SCHEMES = {
    "actual": dict(scheme="actual"),
    "differential": dict(scheme="differential", differential_bits=4),
    "generalized": dict(scheme="generalized", differential_bits=4, threshold_prob=0.5),
    "periodic": dict(scheme="periodic", differential_bits=4, period=3),
    "markov": dict(scheme="markov", source_matrix="0.9,0.1;0.2,0.8", threshold=2),
    "markov-walk": dict(scheme="markov", threshold=1, actual_bits=6, source_matrix=";".join(
        ",".join(str(x) for x in row) for row in
        [[0.6, 0.3, 0.1, 0, 0], [0.2, 0.5, 0.2, 0.1, 0], [0, 0.2, 0.6, 0.2, 0], [0, 0.1, 0.2, 0.5, 0.2],
         [0, 0, 0.1, 0.3, 0.6]])),
}
MEASURES = ("mean_age", "mean_peak_age", "decoding_failure_probability")


def kw(name, **extra):
    return {**BASE, **SCHEMES[name], **extra}


def quiet_solve(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return solve(*args, **kwargs)


def test_doctests():
    assert doctest.testmod(aoi).failed == 0


# ------------------------------------------------------------------------- references
def test_models_md_references():
    """MODELS.md: n = 10, delta = 0.3, b_A = 8, b_D = 4."""
    for method in ("qbd", "dtmc", "closed-form"):
        assert quiet_solve("aoi", "mean_age", method=method, **kw("actual")).value == pytest.approx(3.11244767,
                                                                                                    abs=5e-9)
        assert quiet_solve("aoi", "mean_peak_age", method=method, **kw("actual")).value == pytest.approx(3.61244767,
                                                                                                         abs=5e-9)
        assert quiet_solve("aoi", "mean_age", method=method, **kw("differential")).value == pytest.approx(
            1.57034321, abs=5e-9)
    q_a = decoding_probability(10, 0.3, 8)
    assert solve("aoi", "mean_age", **kw("actual")).value == pytest.approx(0.5 + 1 / q_a, rel=1e-13)
    assert solve("aoi", "decoding_failure_probability", **kw("actual")).value == pytest.approx(1 - q_a, rel=1e-13)


@pytest.mark.parametrize("args, expected", [
    (["scheme=actual", "codeword_bits=10", "erasure_prob=0.3", "actual_bits=8"], 3.11244767),
    (["scheme=differential", "codeword_bits=10", "erasure_prob=0.3", "actual_bits=8", "differential_bits=4"],
     1.57034321),
    (["scheme=generalized", "codeword_bits=10", "erasure_prob=0.3", "actual_bits=8", "differential_bits=4",
      "threshold_prob=0.5"], None),
    (["scheme=periodic", "codeword_bits=10", "erasure_prob=0.3", "actual_bits=8", "differential_bits=4",
      "period=3"], None),
    (["scheme=markov", "codeword_bits=10", "erasure_prob=0.3", "actual_bits=8", "source_matrix=0.9,0.1;0.2,0.8",
      "threshold=2"], None),
])
def test_cli_contract(args, expected, capsys):
    assert main(["solve", "aoi", *args, "--measure", "mean_age", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "aoi" and out["measure"] == "mean_age" and out["method"] == "qbd"
    assert out["warnings"] == []
    params = dict(a.split("=", 1) for a in args)
    dtmc = quiet_solve("aoi", "mean_age", method="dtmc", tol=1e-12, **params).value
    assert out["value"] == pytest.approx(dtmc, rel=1e-10)
    if expected is not None:
        assert out["value"] == pytest.approx(expected, abs=5e-9)


# -------------------------------------------------------------- QBD against the truncated DTMC
@pytest.mark.parametrize("name", list(SCHEMES))
def test_age_distribution_agrees_with_the_truncated_dtmc(name):
    q = solve("aoi", "age_distribution", method="qbd", **kw(name)).value
    d = quiet_solve("aoi", "age_distribution", method="dtmc", tol=1e-13, **kw(name))
    assert len(q) == len(d.value)
    assert np.max(np.abs(np.array(q) - np.array(d.value))) <= 1e-10
    assert d.info["truncation"]["level"] >= len(q)
    assert 1 - 1e-12 <= sum(q) <= 1.0 + 1e-14  # the list stops where the tail is below tail_tol
    mean = float(np.arange(1, len(q) + 1) @ np.array(q))
    assert mean + 0.5 == pytest.approx(solve("aoi", "mean_age", **kw(name)).value, rel=1e-10)
    for measure in MEASURES:
        a = solve("aoi", measure, method="qbd", **kw(name)).value
        b = quiet_solve("aoi", measure, method="dtmc", tol=1e-12, **kw(name)).value
        assert a == pytest.approx(b, rel=1e-10, abs=1e-13), measure


@pytest.mark.parametrize("name", ["actual", "differential", "generalized"])
@pytest.mark.parametrize("delta", [0.0, 0.1, 0.45])
def test_renewal_closed_form_against_the_qbd(name, delta):
    for measure in MEASURES + ("age_distribution",):
        a = solve("aoi", measure, method="qbd", **kw(name, erasure_prob=delta)).value
        b = solve("aoi", measure, method="closed-form", **kw(name, erasure_prob=delta)).value
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-15, err_msg=measure)


def test_no_erasures_means_a_reset_every_period():
    for name in SCHEMES:
        assert solve("aoi", "mean_age", **kw(name, erasure_prob=0.0)).value == pytest.approx(1.5, rel=1e-14)
        assert solve("aoi", "age_distribution", **kw(name, erasure_prob=0.0)).value == pytest.approx([1.0])


# ------------------------------------------------------------------------- structure
def test_stochastic_ordering_actual_generalized_differential():
    """Age(differential) <=st Age(generalized) <=st Age(actual) (the ITW paper's ordering), checked on the tails."""
    for delta in (0.05, 0.2, 0.3, 0.4):
        for pi in (0.2, 0.5, 0.9):
            laws = [np.array(solve("aoi", "age_distribution", **kw(n, erasure_prob=delta, **extra)).value)
                    for n, extra in (("actual", {}), ("generalized", {"threshold_prob": pi}), ("differential", {}))]
            size = max(len(x) for x in laws)
            tails = [1 - np.cumsum(np.pad(x, (0, size - len(x)))) for x in laws]
            # each list stops where its own tail is below tail_tol = 1e-12: compare to that level
            assert np.all(tails[0] >= tails[1] - 2e-12) and np.all(tails[1] >= tails[2] - 2e-12)
            assert np.any(tails[0] > tails[1] + 1e-6) and np.any(tails[1] > tails[2] + 1e-6)


def test_generalized_interpolates_between_actual_and_differential():
    for measure in MEASURES:
        g0 = solve("aoi", measure, **kw("generalized", threshold_prob=0.0)).value
        g1 = solve("aoi", measure, **kw("generalized", threshold_prob=1.0)).value
        assert g0 == pytest.approx(solve("aoi", measure, **kw("actual")).value, rel=1e-12)
        assert g1 == pytest.approx(solve("aoi", measure, **kw("differential")).value, rel=1e-12)


def test_period_one_is_actual_and_the_markov_source_reduces_to_the_simple_schemes():
    for measure in MEASURES:
        p1 = solve("aoi", measure, **kw("periodic", period=1)).value
        assert p1 == pytest.approx(solve("aoi", measure, **kw("actual")).value, rel=1e-12)
        # a symmetric two-state source with threshold 0: a differential iff the state stays (probability 0.7)
        mk = solve("aoi", measure, scheme="markov", source_matrix="0.7,0.3;0.3,0.7", threshold=0, differential_bits=4,
                   codeword_bits=10, erasure_prob=0.3, actual_bits=8).value
        assert mk == pytest.approx(solve("aoi", measure, **kw("generalized", threshold_prob=0.7)).value, rel=1e-12)
        # a threshold that admits every increment is the differential scheme
        everything = solve("aoi", measure, **kw("markov-walk", threshold=4, differential_bits=4, actual_bits=8)).value
        assert everything == pytest.approx(solve("aoi", measure, **kw("differential")).value, rel=1e-12)


def test_actual_peak_age_is_mean_plus_one_half_and_a_qbd_invariant():
    m = exactq.model("aoi", **kw("markov-walk"))
    from exactq.solvers.qbd import solve_qbd

    sol = solve_qbd(m.age_qbd())
    S, F = m.phase_chain()
    assert np.allclose(sol.R, F, atol=1e-15)  # the rate matrix is the no-reset block
    assert sol.spectral_radius < 1 and sol.residual < 1e-14 and np.all(sol.pi0 >= 0)
    assert np.allclose(S.sum(1) + F.sum(1), 1.0)
    a = solve("aoi", "mean_age", **kw("actual")).value
    assert solve("aoi", "mean_peak_age", **kw("actual")).value == pytest.approx(a + 0.5, rel=1e-13)


def test_optimal_threshold_and_period_are_the_minima_of_separate_solves():
    r = solve("aoi", "optimal_threshold", **kw("markov-walk"))
    table = r.info["mean_age_by_threshold"]
    b_a = 6
    assert sorted(table) == [k for k in range(5) if np.ceil(np.log2(2 * k + 1)) < b_a]
    for k, age in table.items():
        assert age == pytest.approx(solve("aoi", "mean_age", **kw("markov-walk", threshold=k)).value, rel=1e-13)
    assert r.value == min(table, key=table.get) and r.info["mean_age"] == min(table.values())
    p = solve("aoi", "optimal_period", **kw("periodic"))
    ages = p.info["mean_age_by_period"]
    assert len(ages) == 64 and p.value == min(ages, key=ages.get)
    # without feedback differential encoding does not help (the TCOM paper): the best period is 1
    assert p.value == 1
    with pytest.raises(NotApplicableError, match="optimal_period applies to scheme=periodic"):
        solve("aoi", "optimal_period", **kw("actual"))
    with pytest.raises(NotApplicableError, match="use --method qbd"):
        quiet_solve("aoi", "optimal_threshold", method="dtmc", **kw("markov-walk"))
    with pytest.raises(NotApplicableError, match="closed-form applies to schemes"):
        solve("aoi", "mean_age", method="closed-form", **kw("periodic"))


def test_fifty_digit_option_agrees():
    a = solve("aoi", "mean_age", **kw("markov-walk")).value
    b = solve("aoi", "mean_age", options={"dps": 50}, **kw("markov-walk"))
    assert b.info["dps"] == 50 and b.value == pytest.approx(a, rel=1e-13)


def test_the_source_matrix_as_an_array():
    m = exactq.model("aoi", **dict(kw("markov"), source_matrix=np.array([[0.9, 0.1], [0.2, 0.8]])))
    assert m.source_matrix == "0.9,0.1;0.2,0.8"
    assert solve(m, "mean_age").value == pytest.approx(solve("aoi", "mean_age", **kw("markov")).value, rel=1e-15)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, message", [
    (dict(kw("actual"), erasure_prob=1.0), "erasure_prob must be >= 0 and < 1; got 1.0"),
    (dict(kw("actual"), erasure_prob=-0.1), "erasure_prob must be >= 0 and < 1; got -0.1"),
    (dict(kw("actual"), actual_bits=11), "actual_bits must be <= codeword_bits 10; got 11"),
    (kw("differential", differential_bits=8), "differential_bits must be < actual_bits 8; got 8"),
    (kw("periodic", period=0), "period must be >= 1; got 0"),
    (kw("markov", source_matrix="0.9,0.2;0.2,0.8"),
     "source_matrix rows must sum to 1 (a stochastic matrix); row 0 sums to 1.1"),
    (kw("markov", source_matrix="1.1,-0.1;0.2,0.8"), "source_matrix entries must be in [0, 1]"),
    (kw("markov", source_matrix="1,0;0.2,0.8"), "source_matrix must be irreducible"),
    (kw("markov", source_matrix="0.5,0.5;1"), "source_matrix rows must have equal lengths"),
    (kw("markov", source_matrix="a,b;c,d"), "source_matrix must be numbers"),
    (dict(kw("markov"), actual_bits=None), "threshold=2 needs differential_bits = ceil(log2(4 + 1)) = 3, which must "
                                          "be < actual_bits 1"),
    (dict(BASE, scheme="differential"), "scheme=differential needs differential_bits"),
    (kw("actual", period=3), "period does not apply to scheme=actual"),
])
def test_bad_input_is_one_line_naming_the_rule(params, message, capsys):
    with pytest.raises(ModelError) as e:
        exactq.model("aoi", **params)
    assert message in str(e.value) and "\n" not in str(e.value)
    args = [f"{k}={v}" for k, v in params.items() if v is not None]
    assert main(["solve", "aoi", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exactq: error: ") and err.count("\n") == 1


def test_reproduction_runs_and_its_columns_are_consistent(tmp_path):
    """The smoke scale (erasure 0, 0.3, 0.5; the default run's 11 points are the same computation)."""
    from exactq.reproduce import reproduce

    text = reproduce("aoi", tmp_path, scale="smoke")
    assert "optimal threshold" in text and "Stochastic ordering" in text
    data = json.loads((tmp_path / "aoi.json").read_text())
    for row in data["erasure"]:  # the ordering of the means at every erasure probability
        assert row["differential"] <= row["generalized"] + 1e-12 <= row["actual"] + 2e-12
        assert row["actual"] == pytest.approx(0.5 + 1 / decoding_probability(10, row["erasure_prob"], 8), rel=1e-12)
        assert row["optimal_period"] == 1
    ref = [r for r in data["erasure"] if abs(r["erasure_prob"] - 0.3) < 1e-12][0]
    assert ref["differential"] == pytest.approx(1.57034321, abs=5e-9)
    ages = {r["threshold"]: r["mean_age"] for r in data["thresholds"]}
    assert data["optimal_threshold"] == min(ages, key=ages.get)
    assert data["ordering"]["differential<=st generalized"] and data["ordering"]["generalized<=st actual"]
