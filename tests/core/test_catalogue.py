"""Plug-in loading, method options and their command-line form."""

import json
import sys

import pytest

import exactq
from exactq import catalogue
from exactq.cli import main
from exactq.errors import NotApplicableError


def test_every_plugin_module_loads():
    catalogue._load()
    assert catalogue.LOAD_ERRORS == {}


def test_a_broken_module_is_reported_not_fatal(tmp_path, monkeypatch):
    pkg = tmp_path / "exq_plugins_demo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("VALUE = 1\n")
    (pkg / "bad.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(catalogue, "LOAD_ERRORS", {})
    with pytest.warns(RuntimeWarning, match="exq_plugins_demo.bad could not be loaded"):
        catalogue.import_all("exq_plugins_demo", [str(pkg)])
    assert catalogue.LOAD_ERRORS == {"exq_plugins_demo.bad": "RuntimeError: boom"}
    assert sys.modules["exq_plugins_demo.good"].VALUE == 1


def test_method_options_are_listed_and_validated(capsys):
    desc = {m["name"]: m for m in catalogue.describe_models()}
    assert desc["ps-routing"]["method_options"] == {"convex": ["solver", "solver_tol", "polish"]}
    assert desc["mm1"]["method_options"].get("ctmc") == ["solver"]
    with pytest.raises(NotApplicableError, match="option 'foo' does not apply to method 'convex'; valid: solver"):
        exactq.solve("ps-routing", method="convex", service_rates="2,1", work_rate=1.5, options={"foo": 1})
    a = exactq.solve("ps-routing", method="convex", service_rates="2,1", work_rate=1.5,
                     options={"solver": "SCS", "polish": True})
    b = exactq.solve("ps-routing", method="closed-form", service_rates="2,1", work_rate=1.5)
    assert a.value == pytest.approx(b.value, rel=1e-9)
    assert a.info["centralized"]["solver"] == "SCS"


def test_cli_option_flag(capsys):
    assert main(["solve", "mm1", "arrival_rate=0.5", "service_rate=1", "--method", "ctmc", "--option",
                 "solver=gth", "--json"]) in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == pytest.approx(1.0, rel=1e-9)
    assert main(["solve", "mm1", "arrival_rate=0.5", "service_rate=1", "--method", "ctmc", "--option",
                 "polish=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "option 'polish' does not apply to method 'ctmc'" in err[0]
