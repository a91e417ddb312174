"""exactq against Storm's exact engine (stormpy, where installed) on our own PRISM MDP files.

Storm builds the same models (states, choices and transitions counted alike) and
answers with rational arithmetic; exactq's value must be within 1e-6 (relative) of
Storm's exact value and its ``lower``/``upper`` must enclose it; true/false answers
agree exactly. Properties Storm does not parse (bounded ``G``) are compared in
test_mdp_check.py by closed forms.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from exactq.api import check_properties
from exactq.prism import load_prism

stormpy = pytest.importorskip("stormpy")

FILES = Path(__file__).resolve().parent

CASES = {
    ("mdp_dice.nm", "q=0.7"): [
        'Pmax=? [ F "seven" ]', 'Pmin=? [ F "seven" ]', 'Pmax=? [ F "double" ]', 'R{"flips"}min=? [ F "done" ]',
        'R{"flips"}max=? [ F "done" ]', 'Pmax=? [ F<=6 "done" ]', 'Pmin=? [ F<=8 "done" ]',
        'R{"biased"}max=? [ C<=5 ]', 'P>=0.05 [ F "seven" ]', 'Pmin=? [ X s1=1 ]', 'Pmax=? [ G !"seven" ]',
        'LRAmax=? [ s1=7 ]'],
    ("mdp_consensus.nm", "K=2"): [
        'Pmin=? [ F "finished" ]', 'Pmin=? [ F "finished" & "all_coins_equal_1" ]',
        'Pmax=? [ F "finished" & !"agree" ]', 'R{"steps"}max=? [ F "finished" ]', 'R{"steps"}min=? [ F "finished" ]',
        'Pmin=? [ F<=20 "finished" ]', 'R{"writes"}max=? [ C<=30 ]', 'P>=1 [ F "finished" ]',
        'Pmax=? [ !"finished" U counter=1 ]', 'LRAmin=? [ counter>=4 ]', 'R{"steps"}max=? [ S ]', 'R{"steps"}min=? [ I=3 ]'],
    ("mdp_zeroconf.nm", "K=4,N=3"): [
        'Pmin=? [ F "error" ]', 'Pmax=? [ F "error" ]', 'R{"time"}min=? [ F s>=2 ]', 'R{"time"}max=? [ F s>=2 ]',
        'R{"cost"}min=? [ F s>=2 ]', 'Pmax=? [ F<=6 "configured" ]', 'Pmin=? [ !"error" U "configured" ]',
        'P<=0.05 [ F "error" ]', 'Pmax=? [ "configured" W "error" ]'],
    ("mdp_csma.nm", ""): [
        'Pmin=? [ F "both_sent" ]', 'Pmax=? [ F<=12 "both_sent" ]', 'Pmax=? [ F "max_backoff" ]',
        'R{"slots"}min=? [ F "both_sent" ]', 'R{"frames_waiting"}min=? [ F "both_sent" ]',
        'R{"slots"}max=? [ C<=10 ]', 'LRAmax=? [ "both_sent" ]', 'R{"frames_waiting"}max=? [ S ]'],
}
#: Storm does not read W: PRISM's conversion a W b = !((a & !b) U (!a & !b)), the opposite optimum
STORM_TEXT = {'Pmax=? [ "configured" W "error" ]': ('Pmin=? [ ("configured" & !"error") U (!"configured" & !"error") ]',
                                                   True)}


@functools.lru_cache(maxsize=None)
def storm(name: str, consts: str):
    prog = stormpy.parse_prism_program(str(FILES / name), prism_compatibility=True)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    texts = [STORM_TEXT.get(p, (p, False))[0] for p in CASES[(name, consts)]]
    props = stormpy.parse_properties(";".join(texts), prog)
    model = stormpy.build_model[stormpy.Rational](prog, props)
    init = model.initial_states[0]
    out = []
    for p in props:
        r = stormpy.model_checking(model, p, only_initial_states=False)
        if r.is_quantitative():
            v = r.get_value_vector()[init]
            out.append(float("inf") if str(v) == "inf" else float(v))
        else:
            out.append(int(init) in {int(i) for i in r.get_truth_values_vector()})
    return (model.nr_states, model.nr_choices, model.nr_transitions), out


@pytest.mark.parametrize("name, consts", list(CASES))
def test_the_model_is_storms(name, consts):
    (ns, nc, nt), _ = storm(name, consts)
    mdp = load_prism(str(FILES / name), consts).built.chain
    assert (mdp.n_states, mdp.n_choices, mdp.P.nnz) == (ns, nc, nt)


@pytest.mark.parametrize("name, consts", list(CASES))
def test_values_match_storms_exact_engine_and_the_bounds_enclose_them(name, consts):
    _, want = storm(name, consts)
    m = load_prism(str(FILES / name), consts)
    got = check_properties(m, "\n".join(CASES[(name, consts)]))
    for prop, r, w in zip(CASES[(name, consts)], got, want):
        negated = STORM_TEXT.get(prop, (prop, False))[1]
        if isinstance(w, bool):
            assert r.value is w, prop
            continue
        if negated:
            w = 1.0 - w
        assert abs(r.value - w) <= 1e-6 * max(1.0, abs(w)), (prop, r.value, w)
        slack = 8 * np.finfo(float).eps * max(1.0, abs(w))
        assert r.lower - slack <= w <= r.upper + slack, (prop, r.lower, w, r.upper)
