"""What the tests of the bench's PRISM case studies share (``bench/prism_models_extra.py``,
``bench/prism_heldout.py``): the bench module, a model built at one size, its properties' values,
and Storm's values of the same properties from one child process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path

import exactq
from exactq.api import check_properties

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str):
    """``bench/NAME.py`` as a module (the bench folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_case(cases: dict, name: str, *args):
    """The built model of case ``name`` at size ``args`` (warnings off), and its properties."""
    text, consts, props = cases[name][0](*args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = exactq.load_prism(f"{name}.{'pm' if text.startswith('dtmc') else 'sm'}", consts, text=text)
        m.built
    return m, props


def case_values(m, props) -> dict:
    """Property text -> exactq's value, the whole list checked in one call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {r.measure: r.value for r in check_properties(m, "\n".join(props))}


STORM_SCRIPT = r"""
import json, sys
import stormpy
from stormpy import developer
developer.set_from_exploded_string(["--eqsolver", "eigen", "--eigen:method", "sparselu", "--precision", "1e-12"])
env = developer.EnvironmentBuilder.build_environment()
out = []
for path, consts, props in json.load(sys.stdin):
    prog = stormpy.parse_prism_program(path, prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    parsed = stormpy.parse_properties(";".join(props), prog)
    model = stormpy.build_model(prog, parsed)
    init = model.initial_states[0]
    out.append([model.nr_states] + [stormpy.model_checking(model, q, only_initial_states=True,
                                                           environment=env).get_value(init) for q in parsed])
print(json.dumps(out))
"""


def storm_values(cases: dict, sizes: list, directory) -> dict:
    """``(name, args) -> [number of states, value of each property]`` by Storm, for every case and size of
    ``sizes``, from one child process: Storm's direct solver (Eigen's SparseLU) and a 1e-12 precision (its
    defaults, an iterative solver at a relative 1e-6, would not do for a 1e-9 comparison) are process-wide
    settings, kept out of the test process (tests/core/test_prism_storm.py sets its own)."""
    jobs = []
    for name, args in sizes:
        text, consts, props = cases[name][0](*args)
        path = Path(directory) / f"{name}_{'x'.join(map(str, args))}.prism"
        path.write_text(text)
        jobs.append([str(path), ",".join(f"{k}={v}" for k, v in consts.items()), props])
    proc = subprocess.run([sys.executable, "-c", STORM_SCRIPT], input=json.dumps(jobs), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(zip(sizes, json.loads(proc.stdout.strip().splitlines()[-1])))
