"""The PRISM front end never ends in a RecursionError, a decoding error or a hang.

Deep nesting gives one line with its position (or an answer below the limit), long
flat chains of operators are no deeper than their parentheses, a Latin-1 file is read
with a warning naming the byte, and huge time bounds on rewards finish by steady-state
detection with the values of closed forms and of matrix powers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from exactq.api import check_properties
from exactq.cli import main
from exactq.prism import PrismModelError, PrismSyntaxError, PrismWarning, load_prism
from exactq.prism.lexer import MAX_NESTING

FILES = Path(__file__).resolve().parents[1] / "prism"
BASE = "ctmc\nmodule m x : [0..3]; [] x<3 -> 1 : (x'=x+1); [] x>0 -> 2 : (x'=x-1); endmodule\n"
PI = np.array([1, 1 / 2, 1 / 4, 1 / 8]) / (15 / 8)  # the birth-death chain's stationary law


def one(model, prop):
    return check_properties(model, prop)[0].value


@pytest.fixture(scope="module")
def small():
    return load_prism("base.sm", text=BASE)


@pytest.mark.parametrize("build", [
    lambda k: "S=? [ " + "(" * k + "x=1" + ")" * k + " ]",
    lambda k: "S=? [ " + "!" * k + "(x=1) ]",
    lambda k: "S=? [ " + "-" * k + "x < 0 ]",
    lambda k: "P=? [ F " + "P>0.1 [ F " * k + "x=1" + " ]" * k + " ]",
    lambda k: "S=? [ " + "x=1 ? 1 : " * k + "0 > 0 ]",
])
def test_nesting_beyond_the_limit_is_one_line_with_its_position(small, build):
    with pytest.raises(PrismSyntaxError, match=rf"column \d+: nesting deeper than {MAX_NESTING} levels"):
        one(small, build(MAX_NESTING + 5))


def test_nesting_just_below_the_limit_answers(small):
    assert one(small, "S=? [ " + "(" * 900 + "x=1" + ")" * 900 + " ]") == pytest.approx(PI[1], rel=1e-13)
    assert one(small, "S=? [ " + "!" * 900 + "(x=1) ]") == pytest.approx(PI[1], rel=1e-13)  # an even number
    assert one(small, "P=? [ F " + "P>0.1 [ F " * 60 + "x=3" + " ]" * 60 + " ]") == 1.0


def test_long_flat_chains_are_not_deep(small):
    k = 5 * MAX_NESTING
    assert one(small, "S=? [ " + " + ".join(["x"] * k) + f" = {k} ]") == pytest.approx(PI[1], rel=1e-13)
    assert one(small, "S=? [ " + " | ".join(f"x={i % 2}" for i in range(k)) + " ]") == \
        pytest.approx(PI[0] + PI[1], rel=1e-13)
    m = load_prism("flat.sm", text=BASE + 'label "a" = ' + " & ".join(["x<3"] * k) + ";\n")
    assert one(m, 'S=? [ "a" ]') == pytest.approx(1 - PI[3], rel=1e-13)
    # left to right, as PRISM: 1 - 1 - 1 ... and 64 / 2 / 2 ...
    assert one(small, "S=? [ " + "10" + " - 1" * 10 + " = 0 ]") == 1.0
    assert one(small, "S=? [ 64" + " / 2" * 6 + " = 1 ]") == 1.0


def test_formula_chains_and_model_nesting(tmp_path):
    chain = "".join(f"formula f{i} = f{i - 1} + 1;\n" for i in range(1, 600))
    m = load_prism("f.sm", text=BASE + "formula f0 = x;\n" + chain)
    assert one(m, "S=? [ f599 = 600 ]") == pytest.approx(PI[1], rel=1e-13)
    deep = "".join(f"formula f{i} = f{i - 1} + 1;\n" for i in range(1, MAX_NESTING + 10))
    with pytest.raises(PrismModelError, match="expands formulas nested deeper than"):
        load_prism("g.sm", text=BASE + "formula f0 = x;\n" + deep + f"label \"z\" = f{MAX_NESTING + 9} > 0;\n")
    path = tmp_path / "deep.sm"
    path.write_text(BASE + 'label "a" = ' + "(" * 5000 + "x=1" + ")" * 5000 + ";\n")
    code = main(["check", str(path), 'S=? [ "a" ]'])
    assert code == 2


def test_a_latin1_file_is_read_with_a_warning_naming_the_byte(tmp_path, capsys):
    path = tmp_path / "latin.sm"
    path.write_bytes(("// r\xe9sum\xe9 du mod\xe8le\n" + BASE).encode("latin-1"))
    with pytest.warns(PrismWarning, match=r"not UTF-8 \(byte 0xe9 at line 1, column 5\); read as Latin-1"):
        m = load_prism(path)
    assert one(m, "S=? [ x = 0 ]") == pytest.approx(PI[0], rel=1e-13)
    props = tmp_path / "p.csl"
    props.write_bytes('// caf\xe9\nS=? [ x = 0 ]\n'.encode("latin-1"))
    code = main(["check", str(path), "--props", str(props)])
    out = capsys.readouterr()
    assert code == 0 and out.err.count("read as Latin-1") == 2 and "S=? [ x = 0 ] = " in out.out


def test_huge_bounds_on_a_ctmc_finish_with_the_long_run_values():
    text = BASE.replace("endmodule", "endmodule\nrewards \"r\" true : x; [] x=0 : 5; endrewards")
    m = load_prism("r.sm", text=text)
    rate = PI @ np.arange(4) + 5 * 1 * PI[0]  # the action reward counts per transition (rate 1 out of x=0)
    r, = check_properties(m, "R=? [ I=1e9 ]")
    assert r.value == pytest.approx(PI @ np.arange(4), rel=1e-12)  # I counts the state reward only
    assert r.info["steady_state_detection"]["steps"] < 10_000 and r.error_estimate < 1e-11
    c, = check_properties(m, "R=? [ C<=1e9 ]")
    assert c.value == pytest.approx(rate * 1e9, rel=1e-9)
    # the transient part is exact: C<=t - t * rate converges, checked against expm of the augmented matrix at t=40
    Q = m.built.chain.Q.toarray()
    r_rate = m.built.rewards["r"].rate()
    aug = np.zeros((5, 5))
    aug[:4, :4], aug[:4, 4] = Q, r_rate
    offset = scipy.linalg.expm(aug * 40.0)[0, 4] - 40.0 * rate
    assert c.value - 1e9 * rate == pytest.approx(offset, abs=2e-5)
    assert c.error_estimate < 1e-4 and c.info["steady_state_detection"]["steady_from_time"] < 1e4
    p, = check_properties(m, "P=? [ F<=1e12 x=3 ]")
    assert p.value == pytest.approx(1.0, abs=1e-12)


def test_huge_bounds_on_a_periodic_dtmc_keep_the_parity():
    m = load_prism(FILES / "walk.pm")
    P = m.built.chain.P.toarray()
    pos = m.built.chain.states[:, 0].astype(float)
    rate = m.built.rewards["pos"].rate()
    aug = np.zeros((6, 6))
    aug[:5, :5], aug[:5, 5], aug[5, 5] = P, rate, 1.0
    for k in (10**6, 10**6 + 1):
        r, = check_properties(m, f"R=? [ I={k} ]")
        assert r.value == pytest.approx(np.linalg.matrix_power(P, k)[0] @ pos, rel=1e-9)
        assert r.info["steady_state_detection"]["period"] == 2
        c, = check_properties(m, f"R=? [ C<={k} ]")
        assert c.value == pytest.approx(np.linalg.matrix_power(aug, k)[0, 5], rel=1e-9)
    # the two parities differ: the walk alternates between even and odd positions for ever
    even, odd = (one(m, f"R=? [ I={k} ]") for k in (10**6, 10**6 + 1))
    assert abs(even - odd) > 0.1
    assert one(m, 'P=? [ F<=1000000 "top" ]') == pytest.approx(1.0, abs=1e-12)
    assert math.isfinite(one(m, 'P=? [ F>=1000000 k=0 ]'))
