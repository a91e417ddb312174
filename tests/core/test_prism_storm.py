"""exactq against Storm (stormpy, where installed) on the property forms both read, on exactq's own test files.

Storm runs with its exact sparse LU and a 1e-12 precision; values agree to 1e-9
relative for steady-state properties and 1e-6 otherwise, true/false answers exactly.
Forms Storm does not parse (W, R, bounded G) are compared through PRISM's conversions
to until. Storm's filters are not compared (stormpy's ``model_checking`` evaluates the
formula inside them), nor rewards at deadlocks (Storm gives a deadlock state reward 0
in ``I=t``; exactq keeps PRISM's value).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from exactq.api import check_properties
from exactq.prism import load_prism

stormpy = pytest.importorskip("stormpy")

FILES = Path(__file__).resolve().parents[1] / "prism"

CTMC_CASES = [
    'P=? [ F<=1.5 "full" ]', 'P>=0.5 [ F<=1.5 "full" ]', 'P>=1 [ F "full" ]', 'P=? [ n<3 U<=2 "full" ]',
    'P=? [ F[0.5,1.5] "full" ]', 'P=? [ n>=1 U[0.5,1.5] "full" ]', 'P=? [ F>=0.7 "empty" ]', 'P=? [ X n=2 ]',
    'S=? [ "full" ]', 'S=? [ b ]', 'R{"jobs"}=? [ S ]', 'R{"mixed"}=? [ S ]', 'R{"mixed"}=? [ C<=1.7 ]',
    'R{"mixed"}=? [ I=1.7 ]', 'R{"jobs"}=? [ F "full" ]', 'R{"arrivals"}=? [ F b ]', 'R{"jobs"}=? [ C ]',
    'R{"until_flag"}=? [ C ]', 'P=? [ F P>0.9 [ F<=0.5 "full" ] ]', 'S>=0.1 [ "full" ]', 'R{"jobs"}<=2 [ C<=1 ]',
    'P=? [ F<=100 "full" ]', 'R{"jobs"}=? [ I=100 ]', 'R{"mixed"}=? [ C<=100 ]',
    ('P=? [ G<=2 !"full" ]', 'P=? [ F<=2 "full" ]', lambda x: 1 - x),
    ('P=? [ n<3 W<=2 "full" ]', 'P=? [ (n<3 & !"full") U<=2 (!(n<3) & !"full") ]', lambda x: 1 - x),
    ('P=? [ "empty" R<=1 n<4 ]', 'P=? [ !"empty" U<=1 !(n<4) ]', lambda x: 1 - x),
]
DTMC_CASES = [
    'P=? [ F<=5 "top" ]', 'P=? [ F<6 "top" ]', 'P=? [ F[3,7] "top" ]', 'P=? [ X k=1 ]', 'P>=1 [ F "top" ]',
    'P>0 [ F<=3 "top" ]', 'P>0 [ F<=4 "top" ]', 'R{"pos"}=? [ I=7 ]', 'R{"pos"}=? [ I=1000000 ]',
    'R{"pos"}=? [ I=1000001 ]', 'R{"pos"}=? [ C<=9 ]', 'R{"pos"}=? [ C<=1000001 ]', 'R{"pos"}=? [ S ]',
    'S=? [ "top" ]', 'R{"pos"}=? [ F "top" ]', 'P=? [ F<=100000 "top" ]',
    ('P=? [ k<3 W<=6 "top" ]', 'P=? [ (k<3 & !"top") U<=6 (!(k<3) & !"top") ]', lambda x: 1 - x),
]


@functools.lru_cache(maxsize=1)
def exact_environment():
    from stormpy import developer

    developer.set_from_exploded_string(["--eqsolver", "eigen", "--eigen:method", "sparselu", "--precision",
                                        "1e-12"])  # settable once per process
    return developer.EnvironmentBuilder.build_environment()


def storm_values(path, props):
    env = exact_environment()
    prog = stormpy.parse_prism_program(str(path), prism_compatibility=True)
    parsed = stormpy.parse_properties(";".join(props), prog)
    model = stormpy.build_model(prog, parsed)
    init = model.initial_states[0]
    out = []
    for prop in parsed:
        r = stormpy.model_checking(model, prop, only_initial_states=False, environment=env)
        qualitative = r.is_qualitative() if callable(r.is_qualitative) else r.is_qualitative
        out.append(bool(r.get_truth_values_vector()[init]) if qualitative else float(r.get_value(init)))
    return out


@pytest.mark.parametrize("name, cases", [("bd.sm", CTMC_CASES), ("walk.pm", DTMC_CASES)])
def test_exactq_agrees_with_storm(name, cases):
    pairs = [c if isinstance(c, tuple) else (c, c, None) for c in cases]
    mine = check_properties(load_prism(FILES / name), "\n".join(a for a, _, _ in pairs))
    theirs = storm_values(FILES / name, [b for _, b, _ in pairs])
    for (prop, _, f), r, s in zip(pairs, mine, theirs):
        s = f(s) if f else s
        if isinstance(s, bool):
            assert r.value is s, prop
        elif math.isinf(s):
            assert r.value == s, prop
        else:
            steady = "[ S ]" in prop or prop.startswith("S")
            assert r.value == pytest.approx(s, rel=1e-9 if steady else 1e-6, abs=1e-12), prop
