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


# ---------------------------------------------------------------- plug-ins at arm's length
def _birth_death(rate, size=3):
    space = StateSpace.box(["k"], hi=[size])
    return build_ctmc(space, [Event("up", lambda s: (rate * (s[:, 0] < size), s + 1)),
                              Event("down", lambda s: (1.0 * (s[:, 0] > 0), s - 1))],
                      labels={"top": space.states[:, 0] == size})


def test_a_plugins_own_exception_is_reported_as_its_own(monkeypatch):
    def strict_rate_plugin(rate: float = 1.0):
        if rate < 0:
            raise ValueError(f"rate must be >= 0; got {rate}")
        if rate > 100:
            raise SystemExit(4)  # a plug-in may not end the process
        return _birth_death(rate)

    exactq.register_model(strict_rate_plugin)
    assert exactq.solve("strict-rate-plugin", rate=1.0).value == pytest.approx(0.25, rel=1e-12)
    with pytest.raises(exactq.PluginError) as err:
        exactq.solve("strict-rate-plugin", rate=-1.0)
    assert str(err.value) == "plug-in strict-rate-plugin: ValueError: rate must be >= 0; got -1.0"
    assert isinstance(err.value.__cause__, ValueError)
    with pytest.raises(exactq.PluginError, match="^plug-in strict-rate-plugin: ValueError: rate must be >= 0"):
        exactq.check("strict-rate-plugin", "S=? [ k = 3 ]", rate=-2.0)
    with pytest.raises(exactq.PluginError, match=r"^plug-in strict-rate-plugin: SystemExit: the plug-in called "
                                                 r"sys.exit\(4\)$"):
        exactq.solve("strict-rate-plugin", rate=200.0)

    @dataclass(frozen=True)
    class CheckingPlugin(Model):
        name = "checking-plugin"
        parameters = (Param("x", "float", "a level"),)
        measures = {"top": "probability of the top state"}
        methods = ("ctmc",)
        default_measure = "top"
        x: float

        def check(self):
            if self.x < 0:
                raise ValueError(f"x must be >= 0; got {self.x}")

        def ctmc(self, truncation=None):
            if self.x > 10:
                raise RuntimeError("no chain above 10")
            return _birth_death(self.x)

        def ctmc_measure(self, measure, chain, sol):
            return sol.probability(chain.labels["top"])

    exactq.register_model(CheckingPlugin)
    with pytest.raises(exactq.PluginError, match="^plug-in checking-plugin: ValueError: x must be >= 0; got -1.0$"):
        exactq.model("checking-plugin", x=-1)
    with pytest.raises(exactq.PluginError, match="^plug-in checking-plugin: RuntimeError: no chain above 10$"):
        exactq.solve("checking-plugin", x=11)
    # an exception of exactq's own code while it solves a plug-in's chain is not the plug-in's
    import importlib

    broken = eval(compile("lambda *args, **kwargs: 1 / 0", "<a bug of exactq's>", "eval"))  # not the plug-in's file
    monkeypatch.setattr(importlib.import_module("exactq.methods"), "solve_representation", broken)
    with pytest.raises(ZeroDivisionError):
        exactq.solve("checking-plugin", x=1)


@pytest.mark.parametrize("param", ["name", "measure", "method", "tol", "truncation", "options", "query", "measures",
                                   "ctmc", "value", "delegate"])
def test_a_parameter_named_like_exactqs_own_is_refused(param):
    ns: dict = {}
    exec(f"def clashing_plugin({param}: float = 1.0, rate: float = 1.0):\n    return None\n", ns)
    with pytest.raises(exactq.PluginError) as err:
        exactq.register_model(ns["clashing_plugin"], measures={"top": "k = 3"})
    msg = str(err.value)
    assert msg.startswith(f"plug-in clashing-plugin: parameter {param!r} clashes with ") and "\n" not in msg
    assert "clashing-plugin" not in describe_models_names()


def describe_models_names():
    return [m["name"] for m in describe_models()]


def test_a_model_class_with_a_clashing_field_is_refused():
    @dataclass(frozen=True)
    class TolPlugin(Model):
        name = "tol-plugin"
        parameters = (Param("tol", "float", "a tolerance", default=0.1),)
        measures = {"m": "m"}
        methods = ("ctmc",)
        default_measure = "m"
        tol: float = 0.1

    with pytest.raises(exactq.PluginError, match="^plug-in tol-plugin: parameter 'tol' clashes with a keyword of "
                                                 "exactq.solve"):
        exactq.register_model(TolPlugin)


PLUGINS = {
    "negplug.py": """\
        import math, os
        from exactq.ctmc import Event, build_ctmc
        from exactq.statespace import StateSpace
        open(os.environ["PLUGIN_MARKER"], "w").close()  # imported: the test checks when

        def neg_rate(rate: float = 1.0, size: int = 3):
            \"\"\"A birth-death chain that checks its own rate.\"\"\"
            if rate < 0:
                raise ValueError(f"rate must be >= 0; got {rate}")
            space = StateSpace.box(["k"], hi=[size])
            return build_ctmc(space, [Event("up", lambda s: (rate * (s[:, 0] < size), s + 1)),
                                      Event("down", lambda s: (1.0 * (s[:, 0] > 0), s - 1))],
                              labels={"top": space.states[:, 0] == size})
        """,
    "checkplug.py": """\
        from dataclasses import dataclass
        from exactq.catalogue import Model
        from exactq.ctmc import CTMC
        from exactq.params import Param

        @dataclass(frozen=True)
        class CheckPlugin(Model):
            name = "check-plugin"
            summary = "refuses x < 0 itself"
            parameters = (Param("x", "float", "a level"),)
            measures = {"m": "nothing"}
            methods = ("ctmc",)
            default_measure = "m"
            x: float

            def check(self):
                if self.x < 0:
                    raise ValueError(f"x must be >= 0; got {self.x}")

            def ctmc(self, truncation=None):
                return CTMC.from_generator([[-1.0, 1.0], [1.0, -1.0]])

            def ctmc_measure(self, measure, chain, sol):
                return sol.probability(chain.states[:, 0] == 1)
        """,
    "exitplug.py": "import sys\nsys.exit(3)\n",
    "raiseplug.py": "raise ValueError('bad configuration of the plug-in')\n",
    "clashplug.py": "def clash_plugin(name: str = 'a', rate: float = 1.0):\n    return None\n",
}
ENTRY_POINTS = """\
    [exactq.models]
    neg-rate = negplug:neg_rate
    check-plugin = checkplug:CheckPlugin
    exit-plugin = exitplug
    raise-plugin = raiseplug
    clash-plugin = clashplug:clash_plugin
    """


def _site(tmp_path, name, modules, entry_points):
    site = tmp_path / name
    site.mkdir()
    for fname, text in modules.items():
        (site / fname).write_text(textwrap.dedent(text))
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return site


def _cli(site, tmp_path, *args, **env):
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), **env)
    return subprocess.run([sys.executable, "-m", "exactq", *args], capture_output=True, text=True, env=full,
                          cwd=tmp_path, timeout=120)


def test_installed_plugins_cannot_take_exactq_down(tmp_path):
    site = _site(tmp_path, "armslength", PLUGINS, ENTRY_POINTS)
    marker = tmp_path / "imported"
    env = {"PLUGIN_MARKER": str(marker)}
    # a built-in model loads no plug-in: the one that exits at import cannot end this command
    r = _cli(site, tmp_path, "solve", "mm1", "arrival_rate=0.5", "service_rate=1", "--json", **env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["value"] == pytest.approx(1.0, rel=1e-9) and not marker.exists()
    # listing loads them all: the broken ones are listed as unavailable, the others as models
    r = _cli(site, tmp_path, "models", **env)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    lines = r.stdout.splitlines()
    assert "unavailable: entry point exit-plugin = exitplug could not be loaded (SystemExit: the plug-in called " \
           "sys.exit(3))" in lines
    assert "unavailable: entry point raise-plugin = raiseplug could not be loaded (ValueError: bad configuration " \
           "of the plug-in)" in lines
    assert any(line.startswith("unavailable: entry point clash-plugin = clashplug:clash_plugin could not be loaded "
                               "(PluginError: plug-in clash-plugin: parameter 'name' clashes with ") for line in lines)
    assert "neg-rate: A birth-death chain that checks its own rate." in lines
    assert "check-plugin: refuses x < 0 itself" in lines and any(line.startswith("mm1: M/M/1") for line in lines)
    # a plug-in's own error, at solve time or at construction: one line, exit 2, named as the plug-in's
    # (the commands run one after another in one process: no plug-in's failure ends it)
    cases = [(("solve", "neg-rate", "rate=-1"), "exactq: error: plug-in neg-rate: ValueError: rate must be >= 0; "
                                                "got -1.0"),
             (("solve", "check-plugin", "x=-2"), "exactq: error: plug-in check-plugin: ValueError: x must be >= 0; "
                                                 "got -2.0"),
             (("solve", "neg-rate", "rate=nan"), "exactq: error: rate must be finite; got 'nan'"),
             (("solve", "exit-plugin"), "exactq: error: plug-in exit-plugin: failed to load (SystemExit: the "
                                        "plug-in called sys.exit(3)); entry point exit-plugin = exitplug"),
             (("solve", "clash-plugin"), "exactq: error: plug-in clash-plugin: failed to load (PluginError: plug-in "
                                         "clash-plugin: parameter 'name' clashes with a keyword of exactq.model; "
                                         "rename the parameter); entry point clash-plugin = clashplug:clash_plugin"),
             (("solve", "neg-rate", "rate=1", "--json"), "")]
    script = textwrap.dedent("""\
        import contextlib, io, json, sys
        from exactq.cli import main
        out = []
        for argv in json.loads(sys.argv[1]):
            err, std = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
                rc = main(argv)
            out.append([rc, err.getvalue(), std.getvalue()])
        print(json.dumps(out))
        """)
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), **env)
    r = subprocess.run([sys.executable, "-c", script, json.dumps([list(a) for a, _ in cases])], capture_output=True,
                       text=True, env=full, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for (args, line), (rc, err, out) in zip(cases[:-1], got):
        assert (rc, err.splitlines()) == (2, [line]), args
    rc, err, out = got[-1]
    assert rc in (0, None) and json.loads(out)["value"] == pytest.approx(0.25, rel=1e-12)


def test_a_keyboard_interrupt_in_a_plugin_is_not_swallowed(tmp_path):
    site = _site(tmp_path, "interrupting", {"intplug.py": "raise KeyboardInterrupt\n"},
                 "[exactq.models]\nint-plugin = intplug\n")
    r = _cli(site, tmp_path, "models")
    assert (r.returncode, r.stderr.strip()) == (130, "exactq: interrupted")
    r = _cli(site, tmp_path, "solve", "mm1", "arrival_rate=0.5", "service_rate=1")
    assert r.returncode == 0, r.stderr


def test_a_plugin_may_not_take_a_built_in_models_name():
    def mm1(rate: float = 1.0):
        return _birth_death(rate)

    with pytest.raises(ValueError, match="model name 'mm1' registered twice"):
        exactq.register_model(mm1, measures={"top": "k = 3"})
    assert get_model("mm1").__module__ == "exactq.models.basic"
