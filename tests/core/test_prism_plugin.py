"""Plug-in models: exactq.register_model at run time, the exactq.models entry points, and the tutorial."""

from __future__ import annotations

import doctest
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import exactq
from exactq.catalogue import Model, describe_models, get_model
from exactq.ctmc import Event, build_ctmc
from exactq.params import Param
from exactq.statespace import StateSpace

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial_plugin.md"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def test_a_function_returning_a_ctmc_becomes_a_model():
    def birth_death_plugin(up: float = 1.0, down: float = 2.0, size: int = 3):
        """A birth-death chain on 0..size."""
        space = StateSpace.box(["k"], hi=[size])
        return build_ctmc(space, [Event("up", lambda s: (up * (s[:, 0] < size), s + 1)),
                                  Event("down", lambda s: (down * (s[:, 0] > 0), s - 1))],
                          labels={"top": space.states[:, 0] == size})
    out = exactq.register_model(birth_death_plugin, measures={"top": "k = 3", "mean": "k"})
    assert out is birth_death_plugin
    cls = get_model("birth-death-plugin")
    assert [p.name for p in cls.parameters] == ["up", "down", "size"] and cls.default_measure == "top"
    rho = 0.5
    pi = rho ** np.arange(4) / (rho ** np.arange(4)).sum()
    assert exactq.solve("birth-death-plugin", "top").value == pytest.approx(pi[3], rel=1e-12)
    assert exactq.solve("birth-death-plugin", "mean", verify=True).value == pytest.approx(pi @ np.arange(4), rel=1e-12)
    assert exactq.solve("birth-death-plugin", "top", up="1", down="1").value == pytest.approx(0.25, rel=1e-12)
    assert exactq.check("birth-death-plugin", "P=? [ F<=1 k = 3 ]").value > 0
    listed = {m["name"]: m for m in describe_models()}["birth-death-plugin"]
    assert listed["summary"] == "A birth-death chain on 0..size." and listed["methods"] == ["ctmc"]
    # without measures, the chain's rewards and labels (built once at the defaults) are the measures
    exactq.register_model(birth_death_plugin, name="birth-death-labels")
    assert list(get_model("birth-death-labels").measures) == ["top"]
    with pytest.raises(exactq.ModelError, match="needs an annotation"):
        exactq.register_model(lambda x: None, name="bad-plugin")


def test_a_model_class_is_registered_at_run_time():
    @dataclass(frozen=True)
    class TwoStatePlugin(Model):
        name = "two-state-plugin"
        summary = "an on/off source"
        parameters = (Param("on", "float", "rate of switching on", low=0, low_open=True),
                      Param("off", "float", "rate of switching off", default=1.0, low=0, low_open=True))
        measures = {"p_on": "probability of being on"}
        methods = ("ctmc",)
        default_measure = "p_on"
        on: float
        off: float = 1.0

        def ctmc(self, truncation=None):
            space = StateSpace.box(["x"], hi=[1])
            return build_ctmc(space, [Event("on", lambda s: (self.on * (s[:, 0] == 0), s + 1)),
                                      Event("off", lambda s: (self.off * (s[:, 0] == 1), s - 1))])

        def ctmc_measure(self, measure, chain, sol):
            return sol.probability(chain.states[:, 0] == 1)

    assert exactq.register_model(TwoStatePlugin) is TwoStatePlugin
    assert exactq.solve("two-state-plugin", on=3.0).value == pytest.approx(3 / 4, rel=1e-12)
    with pytest.raises(exactq.ModelError, match="on must be > 0"):
        exactq.solve("two-state-plugin", on=-1)


def _pycon_source(block: str) -> str:
    return "\n".join(line[4:] for line in block.splitlines() if line.startswith((">>> ", "... ")))


def test_the_tutorials_examples_run(tmp_path, monkeypatch):
    page = TUTORIAL.read_text()
    blocks = [(kind, text) for kind, text in FENCE.findall(page)]
    assert sum(kind == "pycon" for kind, _ in blocks) >= 3
    monkeypatch.chdir(tmp_path)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    namespace: dict = {"__name__": "tutorial_plugin"}
    for kind, text in blocks:
        if kind != "pycon":
            continue
        test = parser.get_doctest(text, namespace, "tutorial_plugin", str(TUTORIAL), 0)
        out = io.StringIO()
        result = runner.run(test, out=out.write, clear_globs=False)
        assert result.failed == 0, out.getvalue()
        namespace.update(test.globs)
    # the model of the tutorial is about 30 lines
    first = next(text for kind, text in blocks if kind == "pycon")
    assert 20 <= len(_pycon_source(first).splitlines()) <= 35


def test_entry_points_install_plugins_and_a_broken_one_is_reported(tmp_path):
    page = TUTORIAL.read_text()
    first = next(text for kind, text in FENCE.findall(page) if kind == "pycon")
    source = _pycon_source(first)
    body = source[source.index("def tandem_blocking"):source.index("_ = exactq.register_model")]
    site = tmp_path / "site"
    site.mkdir()
    (site / "mypkg_tandem.py").write_text(
        "import numpy as np\nimport exactq\nfrom exactq.ctmc import Event, build_ctmc, explore\n\n"
        '@exactq.register_model(measures={"mean_jobs": "n1 + n2", "loss": "n1 = K", "blocked": "n1 > 0 & n2 = K"})\n'
        + body)
    (site / "mypkg_broken.py").write_text("import missing_dependency_of_the_plugin\n")
    dist = site / "mypkg_tandem-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg-tandem\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [exactq.models]
        tandem-blocking = mypkg_tandem:tandem_blocking
        broken-plugin = mypkg_broken
        """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "exactq", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)

    r = cli("solve", "tandem-blocking", "K=5", "--measure", "loss", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == "tandem-blocking" and d["n_states"] == 36
    prism = textwrap.dedent("""\
        ctmc
        const int K = 5;
        module q1 n1 : [0..K]; [] n1 < K -> 1.0 : (n1'=n1+1); [move] n1 > 0 -> 2.0 : (n1'=n1-1); endmodule
        module q2 n2 : [0..K]; [move] n2 < K -> 1 : (n2'=n2+1); [] n2 > 0 -> 1.5 : (n2'=n2-1); endmodule
        """)
    ref = exactq.check(exactq.load_prism("t.sm", text=prism), "S=? [ n1 = K ]").value
    assert d["value"] == pytest.approx(ref, rel=1e-12)
    r = cli("models")
    assert r.returncode == 0
    assert "unavailable: entry point broken-plugin = mypkg_broken could not be loaded (ModuleNotFoundError: " \
           "No module named 'missing_dependency_of_the_plugin')" in r.stdout
    assert "tandem-blocking: Two queues in tandem with room for K jobs each" in r.stdout
    r = cli("solve", "broken-plugin")
    assert r.returncode == 2 and "failed to load" in r.stderr and "missing_dependency_of_the_plugin" in r.stderr
    assert r.stderr.count("exactq: error") == 1
