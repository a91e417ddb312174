"""Start-up: the catalogue answers from its index and imports only what a command needs.

The assertions are on what is imported (``sys.modules`` of a fresh interpreter), not
on times; ``bench/startup.py`` measures the times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exactq import catalogue

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

#: heavy dependencies that no JSQ solve needs
HEAVY = ("scipy.stats", "cvxpy", "matplotlib", "mpmath", "dask", "networkx", "pandas", "flint", "scipy.optimize",
         "scipy.sparse.linalg", "scipy.linalg")


def _run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_readme_command_imports_only_its_model_and_solvers():
    got = _run("""
        import io, json, sys, contextlib
        from exactq.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["solve", "jsq", "arrival_rate=1.8", "service_rates=1,1", "--json"])
        print(json.dumps({"rc": rc, "answer": json.loads(buf.getvalue()), "modules": sorted(sys.modules)}))
        """)
    assert got["rc"] == 0
    answer = got["answer"]
    assert answer["method"] == "compensation" and answer["value"] == pytest.approx(9.85484307822, rel=1e-10)
    assert answer["info"]["import_seconds"] >= 0 and answer["seconds"] >= 0
    mods = set(got["modules"])
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY or
                   any(m.startswith(h + ".") for h in HEAVY))
    assert heavy == []
    assert sorted(m for m in mods if m.startswith("exactq.models.")) == ["exactq.models.jsq",
                                                                         "exactq.models.jsq_asymptotic"]
    # the solvers of the compensation method's representation (a quarter-plane walk), nothing else
    assert sorted(m for m in mods if m.startswith("exactq.solvers.")) == [
        "exactq.solvers.compensation", "exactq.solvers.compensation_asym", "exactq.solvers.compensation_sed"]
    assert not any(m.startswith(("exactq.prism", "exactq.reproduce", "exactq.query", "exactq.expr")) for m in mods)


def test_listing_the_models_imports_no_model_module():
    got = _run("""
        import io, json, sys, contextlib
        from exactq.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["models", "--json"])
        print(json.dumps({"rc": rc, "names": [m["name"] for m in json.loads(buf.getvalue())],
                          "modules": sorted(sys.modules)}))
        """)
    assert got["rc"] in (0, None)
    assert {"jsq", "mm1", "power-of-d", "ps-routing", "awp"} <= set(got["names"])
    assert not [m for m in got["modules"] if m.startswith(("exactq.models.", "exactq.solvers.", "scipy.stats"))]


def test_the_committed_index_is_the_modules_index():
    # a module of models/ or solvers/ changed without `python -m exactq.catalogue_index`: regenerate it
    fix = "regenerate the index: python -m exactq.catalogue_index"
    assert catalogue.index_status() == "fresh", fix
    from exactq.catalogue_index import INDEX

    assert catalogue.build_index() == INDEX, fix
    text = Path(catalogue.__file__).with_name("catalogue_index.py").read_text(encoding="utf-8")
    assert catalogue.index_source(INDEX) == text, fix


def test_the_index_describes_what_the_classes_describe():
    from_index = catalogue.describe_models()
    catalogue.load_all()
    builtin = {name for name in catalogue._builtin_index()["models"]}
    from_classes = [catalogue._describe(catalogue._MODELS[n]) for n in sorted(builtin)]
    assert [d for d in from_index if d["name"] in builtin] == from_classes


def test_solvers_keep_their_priority_order_whatever_the_import_order():
    got = _run("""
        import json
        import exactq.solvers.transient_law  # registers its CTMC solver before the stationary module's
        import exactq.solvers.compensation_sed, exactq.solvers.compensation
        from exactq import catalogue
        from exactq.ctmc import CTMC
        from exactq.representations.walk import QuarterPlaneWalk
        ctmc = [s.name for cls in CTMC.__mro__ for s in catalogue._SOLVERS.get(cls, ())]
        class Rep(CTMC):  # solvers_for needs only the type
            def __init__(self):
                pass
        class Walk(QuarterPlaneWalk):
            def __init__(self):
                pass
        print(json.dumps({"registered": ctmc, "ctmc": [s.name for s in catalogue.solvers_for(Rep())],
                          "walk": [s.name for s in catalogue.solvers_for(Walk())],
                          "ctmc_method": [s.requires for s in catalogue.get_method("ctmc")]}))
        """)
    assert got["registered"][0] == "transient"  # the import order differs from a full import's ...
    algorithms = sorted(["bicgstab", "direct", "gmres", "gth", "level-aggregation", "level-reduction", "mpmath",
                         "power"])
    assert got["ctmc"] == ["stationary", *algorithms, "transient"]  # ... the priorities' order does not
    assert got["walk"] == ["compensation-symmetric", "compensation-asymmetric", "compensation-erlang"]
    assert got["ctmc_method"] == ["ctmc", "ctmc_study"]


def test_a_stale_index_is_ignored(monkeypatch):
    monkeypatch.setattr(catalogue, "_INDEX_STATE", [None, "stale: test"])
    assert catalogue.index_status() == "stale: test"
    assert catalogue.get_model("mm1").name == "mm1"
    assert "jsq" in catalogue.model_names() and "ctmc" in catalogue.method_names()
    import exactq

    r = exactq.solve("mm1", "mean_number", arrival_rate=0.5, service_rate=1.0, method="ctmc")
    assert r.value == pytest.approx(1.0, rel=1e-9)


def test_a_changed_source_makes_the_index_stale(monkeypatch):
    real = catalogue._source_digests()
    changed = dict(real, **{"models/jsq.py": "0" * 16})
    monkeypatch.setattr(catalogue, "_INDEX_STATE", [])
    monkeypatch.setattr(catalogue, "_source_digests", lambda: changed)
    assert catalogue.index_status() == "stale: models/jsq.py changed since the index was generated"
