"""The awp model: presets, the command-line contract, measures, stability and bad input.

Expected numbers are closed forms (MODELS.md "Adaptive window protocols") or the other
method (analytic series against the discretised Kolmogorov equation).
"""

import json
import math
import warnings

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.errors import ModelError, UnstableError
from exactq.models.awp import AWP, HIGHSPEED_EXPONENT, highspeed_increase

GENERAL = ["preset=general", "a=1", "alpha=0", "lam=0.01", "gamma=0", "nu=0.5"]


def cli_json(capsys, *argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["solve", "awp", *argv, "--json"]) in (0, None)
    return json.loads(capsys.readouterr().out)


def test_cli_contract_general(capsys):
    """a(w) = 1, lambda = 0.01, nu = 1/2: E[W] = (a/lam)/(1 - nu) = 200, E[W^2] = 2 (a/lam)^2/((1-nu)(1-nu^2))."""
    d = cli_json(capsys, *GENERAL, "--measure", "mean_window")
    assert d["model"] == "awp" and d["measure"] == "mean_window"
    assert d["value"] == pytest.approx(200.0, rel=1e-12)
    assert d["info"]["stability"]["stable"] is True and d["error_estimate"] < 1e-10
    d = cli_json(capsys, *GENERAL, "--measure", "window_moment", "k=2")
    assert d["value"] == pytest.approx(2 * 100.0**2 / (0.5 * 0.75), rel=1e-12)
    assert d["params"]["k"] == 2.0


@pytest.mark.parametrize("preset", ["newreno", "scalable", "highspeed"])
def test_cli_presets_both_methods_agree(capsys, preset):
    analytic = cli_json(capsys, f"preset={preset}", "loss_prob=0.01", "--measure", "mean_window")
    numerical = cli_json(capsys, f"preset={preset}", "loss_prob=0.01", "--measure", "mean_window",
                         "--method", "numerical")
    assert analytic["method"].startswith("analytic") and numerical["method"].startswith("numerical")
    assert numerical["value"] == pytest.approx(analytic["value"], rel=1e-8)
    assert abs(numerical["value"] - analytic["value"]) <= analytic["error_estimate"] + numerical["error_estimate"]


def test_preset_closed_forms():
    p = 1e-3
    # NewReno: E[W^2] = a / (p (1 - nu)) = 4000... with a = 1, nu = 1/2: 2/p; E[W] ~ 41.4206 (MODELS.md)
    nr = exactq.solve("awp", "mean_window", preset="newreno", loss_prob=p)
    assert nr.value == pytest.approx(41.4206, abs=5e-5)
    assert exactq.solve("awp", "window_moment", preset="newreno", loss_prob=p, k=2).value == pytest.approx(2 / p)
    # Scalable TCP: E[W] = (0.01 / p) / ln(1/0.875)
    sc = exactq.solve("awp", "mean_window", preset="scalable", loss_prob=p)
    assert sc.value == pytest.approx((0.01 / p) / math.log(1 / 0.875), rel=1e-12)
    # throughput is E[W] / rtt
    th = exactq.solve("awp", "throughput", preset="scalable", loss_prob=p, rtt=0.1)
    assert th.value == pytest.approx(sc.value / 0.1, rel=1e-14)


def test_highspeed_response_exponent():
    """S = 1/2 is NewReno's law with a = 0.963: E[W] scales as sqrt(a); S = 1 is Scalable's form."""
    assert highspeed_increase(HIGHSPEED_EXPONENT).exponent == pytest.approx(2 - 1 / 0.835)
    p = 1e-3
    hs = exactq.solve("awp", "mean_window", preset="highspeed", loss_prob=p, response_exponent=0.5)
    nr = exactq.solve("awp", "mean_window", preset="newreno", loss_prob=p)
    assert hs.value == pytest.approx(nr.value * math.sqrt(highspeed_increase(0.5).coefficient), rel=1e-12)
    one = exactq.solve("awp", "mean_window", preset="highspeed", loss_prob=p, response_exponent=1.0)
    assert one.value == pytest.approx(highspeed_increase(1.0).coefficient / p / math.log(2), rel=1e-12)
    # the mean window follows the response function's slope -S in p
    S = HIGHSPEED_EXPONENT
    w = [exactq.solve("awp", "mean_window", preset="highspeed", loss_prob=q).value for q in (1e-4, 1e-6)]
    assert math.log(w[1] / w[0]) / math.log(100) == pytest.approx(S, rel=1e-9)


def test_stable_measure_reports_the_deciding_quantity(capsys):
    d = cli_json(capsys, "preset=general", "a=1", "alpha=2", "lam=1", "gamma=0.5", "nu=0.5", "--measure", "stable")
    assert d["value"] is False
    assert d["info"]["stability"]["quantity"] == "m = gamma + 1 - alpha"
    assert d["info"]["stability"]["value"] == pytest.approx(-0.5)
    d = cli_json(capsys, "preset=newreno", "loss_prob=0.01", "--measure", "stable")
    assert d["value"] is True and d["info"]["stability"]["value"] == pytest.approx(2.0)


@pytest.mark.parametrize("measure", ["mean_window", "throughput", "density", "cdf"])
@pytest.mark.parametrize("method", ["analytic", "numerical"])
def test_unstable_gives_no_number(measure, method):
    kw = dict(preset="general", a=1, alpha=2, lam=1, gamma=0.5, nu=0.5)
    with pytest.raises(UnstableError, match=r"m = gamma \+ 1 - alpha = -0.5"):
        exactq.solve("awp", measure, method=method, **kw)


def test_unstable_is_one_line_on_the_command_line(capsys):
    assert main(["solve", "awp", "preset=general", "a=1", "alpha=1", "lam=0.01", "gamma=0", "nu=0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unstable" in err[0] and "m = gamma + 1 - alpha = 0" in err[0]


@pytest.mark.parametrize("argv, message", [
    (["preset=general", "a=1", "lam=0.01", "nu=1.5"], "nu must be > 0 and < 1; got '1.5'"),
    (["preset=general", "a=1", "lam=0.01", "nu=0"], "nu must be > 0 and < 1; got '0'"),
    (["preset=general", "a=-1", "lam=0.01", "nu=0.5"], "a must be > 0; got '-1'"),
    (["preset=general", "a=1", "lam=-2", "nu=0.5"], "lam must be > 0; got '-2'"),
    (["preset=newreno", "loss_prob=1.5"], "loss_prob must be > 0 and < 1; got '1.5'"),
    (["preset=newreno", "loss_prob=0"], "loss_prob must be > 0 and < 1; got '0'"),
    (["preset=newreno", "loss_prob=0.01", "w_min=10", "w_max=5"], "w_min must be < w_max 5; got 10"),
    (["preset=newreno", "loss_prob=0.01", "w_min=5", "w_max=5"], "w_min must be < w_max 5; got 5"),
    (["preset=newreno"], "missing required parameter loss_prob"),
    (["preset=general", "a=1", "nu=0.5"], "missing required parameter lam"),
    (["preset=newreno", "loss_prob=0.01", "nu=0.7"], "nu applies to preset=general only"),
    (["preset=scalable", "loss_prob=0.01", "response_exponent=0.7"], "response_exponent applies to preset=highspeed"),
    (["preset=tahoe", "loss_prob=0.01"], "preset must be one of newreno, scalable, highspeed, general"),
])
def test_bad_input_is_one_line(capsys, argv, message):
    assert main(["solve", "awp", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_window_moment_needs_k():
    with pytest.raises(ModelError, match="needs the parameter k"):
        exactq.solve("awp", "window_moment", preset="newreno", loss_prob=0.01)


@pytest.mark.parametrize("method", ["analytic", "numerical"])
def test_density_and_cdf_measures(method):
    kw = dict(preset="newreno", loss_prob=1e-3, points=101, method=method)
    f = exactq.solve("awp", "density", **kw)
    F = exactq.solve("awp", "cdf", **kw)
    grid = np.array(f.info["grid"])
    assert grid.size == 101 and grid[0] == 0.0 and F.info["grid"] == f.info["grid"]
    assert F.value[-1] == pytest.approx(1 - 1e-6, abs=1e-9)  # the default grid ends at the 1 - 1e-6 quantile
    # the density integrates to the CDF (Simpson on the grid against the CDF's own quadrature)
    from scipy.integrate import simpson
    assert simpson(f.value, x=grid) == pytest.approx(F.value[-1], abs=1e-5)
    assert f.error_estimate < 1e-9 and F.error_estimate < 1e-8
    custom = exactq.solve("awp", "cdf", preset="newreno", loss_prob=1e-3, points=3, grid_min=10, grid_max=30,
                          method=method)
    assert custom.info["grid"] == [10.0, 20.0, 30.0]
    np.testing.assert_allclose(custom.value, np.interp([10, 20, 30], grid, F.value), atol=2e-3)


def test_auto_method_and_a_ceiling():
    """A ceiling puts an atom at w_max: the numerical method answers, and the atom is reported."""
    m = AWP.create(preset="newreno", loss_prob=1e-3, w_max=40)
    assert m.auto_method() == "numerical"
    r = exactq.solve("awp", "cdf", preset="newreno", loss_prob=1e-3, w_max=40, points=5)
    assert r.method.startswith("numerical") and r.info["grid"][-1] == 40.0 and r.value[-1] == 1.0
    assert 0 < r.info["atom"]["probability"] < 1
    below = exactq.solve("awp", "cdf", preset="newreno", loss_prob=1e-3, w_max=40, points=2, grid_min=39.9999999,
                         grid_max=40)
    assert below.value[0] == pytest.approx(1 - r.info["atom"]["probability"], abs=1e-8)
    with pytest.raises(exactq.NotApplicableError, match="ceiling"):
        exactq.solve("awp", "mean_window", method="analytic", preset="newreno", loss_prob=1e-3, w_max=40)
    unbounded = exactq.solve("awp", "mean_window", preset="newreno", loss_prob=1e-3).value
    capped = exactq.solve("awp", "mean_window", preset="newreno", loss_prob=1e-3, w_max=40).value
    assert capped < unbounded


def test_floor_both_methods():
    kw = dict(preset="newreno", loss_prob=1e-3, w_min=25)
    a = exactq.solve("awp", "mean_window", method="analytic", **kw)
    n = exactq.solve("awp", "mean_window", method="numerical", **kw)
    assert n.value == pytest.approx(a.value, rel=1e-9) and a.value > 41.4206


def test_scalable_constant_losses_stability_region():
    """a(W) = 0.01 W, constant loss rate lam, floor 1: stable iff lam > 0.01 / ln(1/0.875);
    E[W] finite iff the Pareto index kappa > 1, i.e. lam > 0.01 / (1 - 0.875) = 0.08."""
    kw = dict(preset="general", a=0.01, alpha=1, gamma=0, nu=0.875, w_min=1)
    edge = 0.01 / math.log(1 / 0.875)
    assert exactq.solve("awp", "stable", lam=0.99 * edge, **kw).value is False
    assert exactq.solve("awp", "stable", lam=1.01 * edge, **kw).value is True
    heavy = exactq.solve("awp", "mean_window", lam=0.078, **kw)
    assert heavy.value == math.inf and "infinite" in heavy.info["moment"]
    light = exactq.solve("awp", "mean_window", lam=0.2, **kw)
    kappa = light.info["stability"]["details"]["kappa"]
    assert light.value == pytest.approx(kappa / (kappa - 1), rel=1e-12)


def test_models_listing_documents_the_parameters():
    listing = {m["name"]: m for m in exactq.catalogue.describe_models()}["awp"]
    names = [p["name"] for p in listing["parameters"]]
    for name in ("preset", "loss_prob", "response_exponent", "a", "alpha", "lam", "gamma", "nu", "w_min", "w_max",
                 "k"):
        assert name in names
    assert listing["methods"] == ["analytic", "numerical"]
    assert set(listing["measures"]) == {"mean_window", "window_moment", "throughput", "stable", "density", "cdf"}


def test_reproduction_runs_and_its_columns_agree(tmp_path):
    """``exactq reproduce awp`` at the smoke scale (three losses per sweep): the numerical check of every mean,
    the verdicts and orderings."""
    from exactq.reproduce import reproduce

    text = reproduce("awp", tmp_path, scale="smoke")
    assert "Stability of Scalable TCP" in text and "HighSpeed TCP by its response exponent" in text
    data = json.loads((tmp_path / "awp.json").read_text())
    for row in data["mean_window"]:
        for proto in ("newreno", "scalable", "highspeed"):
            assert row[f"{proto}_numerical_rel_diff"] < 1e-8
        assert row["newreno_sqrt_p"] == pytest.approx(data["mean_window"][0]["newreno_sqrt_p"], rel=1e-9)
    for row in data["scalable_stability"]:
        assert row["stable"] == (row["lam/edge"] > 1)
        infinite = row["mean_window"] is not None and math.isinf(row["mean_window"])
        assert infinite == (row["stable"] and row["lam"] <= row["finite_mean_edge"])
        assert (row["mean_window"] is None) == (not row["stable"])
    for row in data["highspeed"]:
        assert row["slope"] == pytest.approx(row["S"], rel=1e-9)
    assert data["highspeed_shape"]["S=0.5 vs newreno"] < 1e-12
    cases = data["ordering"]["cases"]
    assert all(p["verdict"].endswith(p["second"]) for p in cases["floor (per-packet losses)"]["pairs"])
    assert all(p["verdict"].endswith(p["second"]) for p in cases["ceiling (constant-rate losses)"]["pairs"])
    assert cases["ceiling (per-packet losses)"]["pairs"][-1]["verdict"] == "not ordered"
