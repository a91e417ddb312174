"""The PRISM language front end: lexer, parser, errors with positions, refused constructs, semantics."""

from __future__ import annotations

import numpy as np
import pytest

import exactq
from exactq.errors import ModelError, NotApplicableError, QuerySyntaxError
from exactq.prism import PrismModelError, PrismSyntaxError, PrismUnsupportedError, load_prism
from exactq.prism.lexer import Source, tokenize
from exactq.prism.syntax import parse_model_text, parse_properties_text

MM1K = """ctmc
const int K = 3;
module q
  n : [0..K] init 0;
  [] n < K -> 1 : (n'=n+1);
  [] n > 0 -> 2 : (n'=n-1);
endmodule
"""


def load(text, consts=None, **kw):
    return load_prism("m.sm", consts, text=text, **kw)


def one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


# ------------------------------------------------------------------------------ lexer
def test_tokens_carry_line_and_column_and_line_endings_are_all_accepted():
    toks = tokenize(Source("m", "ctmc\r\nmodule m\r  x : [0..2];\nendmodule"))
    x = next(t for t in toks if t.text == "x")
    assert (x.line, x.col) == (3, 3)
    assert [t.text for t in toks if t.kind == "double"] == []
    assert [t.text for t in tokenize(Source("m", "0..2 .5 1e-3 2.5"))][:5] == ["0", "..", "2", ".5", "1e-3"]
    crlf = MM1K.replace("\n", "\r\n")
    mixed = MM1K.replace("\n", "\r", 3)
    for text in (crlf, mixed):
        assert load(text).built.chain.n_states == 4


def test_comments_are_ignored_and_an_open_comment_is_an_error():
    m = load("// head\nctmc /* a\nblock */ module q n:[0..1]; [] n=0 -> 1:(n'=1); [] n=1 -> 1:(n'=0); endmodule")
    assert m.built.chain.n_states == 2
    with pytest.raises(PrismSyntaxError) as exc:
        load("ctmc /* never closed\nmodule q endmodule")
    assert "line 1, column 6" in one_line(exc) and "never closed" in str(exc.value)


# ------------------------------------------------------------------------------ syntax errors
@pytest.mark.parametrize("text, where, fragment", [
    ("ctmc\nmodule q\n  n : [0..2] init 0;\n  [] n < 2 -> 1 : (n'=n+1)\nendmodule\n", "line 5, column 1",
     "expected ';' to end the command after ')'; got 'endmodule'"),
    ("ctmc\nmodule q\n  n : [0..2;\nendmodule\n", "line 3, column 12",
     "expected ']' to close the range after '2'; got ';'"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n < 2 -> (n'=n+1;\nendmodule\n", "line 4, column 22",
     "expected ')' to close the assignment"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n < 2 1 : (n'=n+1);\nendmodule\n", "line 4, column 12",
     "expected '->' after the guard after '2'; got '1'"),
    ("ctmc\nconst int = 3;\n", "line 2, column 11", "expected the constant's name"),
    ("ctmc\nmodul q endmodule\n", "line 2, column 1", "expected a declaration"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n < 2 -> 1 : (n'=n+1) & ;\nendmodule\n", "line 4, column 30",
     "expected an assignment"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] foo(n) -> 1 : (n'=1);\nendmodule\n", "line 4, column 6",
     "unknown function 'foo'"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n < 2 -> 1 : (n'=n+1);\n", "line 5, column 1",
     "expected 'endmodule' to close module 'q'"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n < 2 || n = 0 -> 1 : (n'=n+1);\nendmodule\n", "line 4, column 12",
     "'||' is parallel composition"),
    ("ctmc\nmodule q\n  n : [0..2];\n  [] n # 2 -> 1 : (n'=n+1);\nendmodule\n", "line 4, column 8",
     "unexpected character '#'"),
])
def test_syntax_errors_are_one_line_with_the_position_and_what_was_expected(text, where, fragment):
    with pytest.raises(PrismSyntaxError) as exc:
        load(text)
    msg = one_line(exc)
    assert msg.startswith(f"m.sm, {where}: "), msg
    assert fragment in msg, msg
    assert isinstance(exc.value, QuerySyntaxError) and isinstance(exc.value, exactq.ExactqError)


@pytest.mark.parametrize("prop, col, fragment", [
    ("P=? [ F<=2 n = 3 ", 18, "expected ']' to close the P=? query"),
    ("P=? [ n ]", 7, "expected a path formula"),
    ("S=? [ n > ]", 11, "expected an expression"),
    ("R{x}=? [ S ]", 3, "a reward structure name in quotes"),
    ("T=? [ F<=3 n = 0 ]", 8, "T=? takes an unbounded 'F b'"),
])
def test_property_syntax_errors_give_the_column(prop, col, fragment):
    with pytest.raises(PrismSyntaxError) as exc:
        exactq.check(load(MM1K), prop)
    msg = one_line(exc)
    assert msg.startswith(f"property, column {col}: "), msg
    assert fragment in msg, msg


# ------------------------------------------------------------------------------ refused constructs
@pytest.mark.parametrize("text, where, construct", [
    ("ctmdp\nmodule q n:[0..1]; [] true -> (n'=1); endmodule\n", "line 1, column 1", "model type 'ctmdp'"),
    ("pta\nmodule q n:[0..1]; endmodule\n", "line 1, column 1", "model type 'pta'"),
    ("pomdp\nmodule q n:[0..1]; endmodule\n", "line 1, column 1", "model type 'pomdp'"),
    ("module q\n  n:[0..1];\n  [] n=0 -> (n'=1);\nendmodule\n", "line 1, column 1", "no model type"),
    ("ctmc\nmodule q\n  c : clock;\nendmodule\n", "line 3, column 7", "clock variables"),
    ("ctmc\nmodule q\n  n : int;\nendmodule\n", "line 3, column 7", "unbounded variable type 'int'"),
    ("ctmc\nmodule q\n  invariant true endinvariant\nendmodule\n", "line 3, column 3", "'invariant'"),
    ("ctmc\nobservables n endobservables\n", "line 2, column 1", "'observables'"),
    (MM1K + "module r = q [ n = m ] endmodule\nsystem q ||| r endsystem\n", "line 9, column 10",
     "interleaving operator '|||'"),
    (MM1K + "module r = q [ n = m ] endmodule\nsystem q |[a]| r endsystem\n", "line 9, column 10",
     "restricted synchronisation"),
    (MM1K + "system q / {a} endsystem\n", "line 8, column 10", "action hiding"),
    (MM1K + "system q {a<-b} endsystem\n", "line 8, column 10", "action renaming"),
])
def test_constructs_outside_the_fragment_are_refused_with_one_line_naming_them(text, where, construct):
    with pytest.raises(PrismUnsupportedError) as exc:
        load(text)
    msg = one_line(exc)
    assert msg.startswith(f"m.sm, {where}: "), msg
    assert construct in msg and "outside the supported fragment" in msg, msg
    assert isinstance(exc.value, NotApplicableError)


@pytest.mark.parametrize("prop, construct", [
    ("Pmax=? [ F n = 3 ]", "'Pmax'"),
    ("E [ F n = 3 ]", "the path quantifier 'E"),
    ("P=? [ F G n = 3 ]", "the temporal operator 'G' in a state formula or inside another path formula (LTL)"),
    ("P=? [ a U b U c ]", "a second temporal operator 'U' in one path formula (an LTL formula)"),
    ("P=? [ X<=2 n = 3 ]", "a bound on 'X'"),
    ("multi(P>=0.5 [ F n = 3 ])", "multi-objective"),
    ("R=? [ C<3 ]", "the bound '<...' on C"),
])
def test_property_constructs_outside_the_fragment_are_refused(prop, construct):
    with pytest.raises(PrismUnsupportedError) as exc:
        exactq.check(load(MM1K), prop)
    msg = one_line(exc)
    assert construct in msg, msg


def test_dtmc_local_nondeterminism_is_randomised_uniformly_as_prism_does():
    # PRISM and Storm take each of the k enabled choices with probability 1/k, with a warning
    text = """dtmc
module q
  n : [0..2];
  [] n < 2 -> (n'=n+1);
  [] n = 0 -> (n'=2);
  [] n = 2 -> (n'=0);
endmodule
"""
    from exactq.prism import PrismWarning

    with pytest.warns(PrismWarning, match=r"1 state of the dtmc enables more than one choice \(e.g. \(n=0\): 2"):
        P = load(text).built.chain.P.toarray()
    assert P.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]


def test_dtmc_probabilities_must_sum_to_one():
    text = "dtmc\nmodule q n : [0..1];\n  [] n = 0 -> 0.5 : (n'=1) + 0.4 : true;\n  [] n = 1 -> (n'=0);\nendmodule\n"
    with pytest.raises(PrismModelError) as exc:
        load(text).built
    assert "sum to 0.9, not 1, in state (n=0)" in one_line(exc)


# ------------------------------------------------------------------------------ semantics errors
def test_out_of_range_update_names_the_variable_the_state_and_the_command():
    text = "ctmc\nmodule q\n  n : [0..3] init 0;\n  [] true -> 1 : (n'=n+1);\nendmodule\n"
    with pytest.raises(PrismModelError) as exc:
        load(text).built
    msg = one_line(exc)
    assert "variable 'n' would take the value 4, outside its range [0..3], in state (n=3)" in msg
    assert "the command [] of module q at m.sm, line 4, column 3" in msg


@pytest.mark.parametrize("text, fragment", [
    ("ctmc\nmodule q n : [0..1]; [] n -> 1 : (n'=0); endmodule", "the guard must be bool; got the int"),
    ("ctmc\nmodule q n : [0..1]; [] n=0 -> 1 : (n'=0.5); endmodule", "int variable 'n' is assigned the double"),
    ("ctmc\nmodule q n : [0..1]; [] n=0 -> true : (n'=1); endmodule", "the rate of an update must be a number"),
    ("ctmc\nmodule q n : [0..1]; [] m=0 -> 1 : (n'=1); endmodule", "unknown identifier 'm'"),
    ("ctmc\nmodule q n : [0..1]; [] n=0 -> 1 : (m'=1); endmodule", "assigns 'm', which is not a variable"),
    ("ctmc\nmodule q n : [0..1]; [] n=0 -> 1 : (n'=1); endmodule\nmodule r k : [0..1]; "
     "[] k=0 -> 1 : (n'=1); endmodule", "module r assigns variable 'n' of module q"),
    ("ctmc\nconst int N = 2.5;\nmodule q n : [0..1]; endmodule", "constant 'N' is int; its definition '2.5' is double"),
    ("ctmc\nformula f = g + 1;\nformula g = f;\nmodule q n : [0..1]; [] f > 0 -> 1 : (n'=1); endmodule",
     "defined in terms of itself"),
    ("ctmc\nmodule q n : [0..1]; endmodule\nmodule r = q [ m = k ] endmodule",
     "variable 'n' is declared twice"),
    ("ctmc\nformula f = n;\nmodule q n : [0..1]; [] f=0 -> 1 : (n'=1); endmodule\nmodule r = q [ f = g, n = k ] "
     "endmodule", "formula 'f' cannot be renamed"),
    ("ctmc\nmodule q n : [2..1]; endmodule", "empty range [2..1]"),
    ("ctmc\nmodule q n : [0..1] init 3; endmodule", "initial value 3 of 'n' is outside its range"),
    ("ctmc\nmodule q n : [0..1]; [] n=0 -> -1 : (n'=1); endmodule", "evaluates to -1 in state (n=0)"),
])
def test_semantic_errors_are_one_line_with_the_position(text, fragment):
    with pytest.raises(ModelError) as exc:
        load(text).built
    msg = one_line(exc)
    assert fragment in msg, msg
    assert msg.startswith("m.sm") or "state" in msg, msg


def test_constants_come_from_the_user_in_any_order_and_a_missing_one_is_named():
    text = """ctmc
const double mu = 2 * lambda;   // defined from a constant declared after it
const double lambda;
const int K;
module q n : [0..K]; [] n < K -> lambda : (n'=n+1); [] n > 0 -> mu : (n'=n-1); endmodule
"""
    with pytest.raises(PrismModelError) as exc:
        load(text, "K=3")
    assert "constant lambda has no value; give it with --const lambda=VALUE" in one_line(exc)
    with pytest.raises(PrismModelError, match="constant 'K' is int; give an integer"):
        load(text, "K=3.5,lambda=1")
    with pytest.raises(PrismModelError, match="constant 'mu' is defined in the file .* cannot override it"):
        load(text, "K=3,lambda=1,mu=4")
    m = load(text, {"K": 3, "lambda": 1.0})
    assert dict(m.constants) == {"K": 3, "lambda": 1.0}
    assert exactq.check(m, "S=? [ n = 3 ]").value == pytest.approx(0.5**3 * 0.5 / (1 - 0.5**4), rel=1e-12)


def test_expression_semantics_follow_prism():
    # integer division is real, floor/ceil/round are integers, mod is non-negative, log has a base
    text = """ctmc
const int a = 7;
const double d = a / 2;
const int f = floor(d) + ceil(d) + round(2.5);
const int m = mod(-1, 3);
const double l = log(8, 2);
const int p = pow(2, 3);
const double e = max(1, 2.5, 2) + min(3, 4);
const bool b = a > 3 => (d = 3.5 <=> true) ? true : false;
module q n : [0..1]; endmodule
"""
    c = load(text).info.constants
    assert c["d"] == ("double", 3.5) and c["f"] == ("int", 3 + 4 + 3) and c["m"] == ("int", 2)
    assert c["l"][1] == pytest.approx(3.0) and c["p"] == ("int", 8) and c["e"] == ("double", 5.5)
    assert c["b"] == ("bool", True)


def test_a_parsed_model_keeps_its_structure():
    mf = parse_model_text(MM1K)
    assert mf.type == "ctmc" and [d.name for d in mf.constants] == ["K"]
    cmd = mf.modules[0].commands[0]
    assert str(cmd.guard) == "n < K" and str(cmd.updates[0].assigns[0].expr) == "n + 1"
    pf = parse_properties_text('const int T = 2;\n"a": P=? [ F<=T n = 3 ]\nS=? [ n = 0 ];')
    assert [p.name for p in pf.properties] == ["a", None]
    assert [p.text for p in pf.properties] == ["P=? [ F<=T n = 3 ]", "S=? [ n = 0 ]"]


def test_globals_are_written_by_any_module_and_synchronised_writers_must_not_clash():
    text = """ctmc
global g : [0..2] init 0;
module a [] g < 2 -> 1 : (g'=g+1); endmodule
module b [] g > 0 -> 3 : (g'=g-1); endmodule
"""
    m = load(text)
    assert m.built.chain.Q.toarray().tolist() == [[-1, 1, 0], [3, -4, 1], [0, 3, -3]]
    clash = """ctmc
global g : [0..2] init 0;
module a [s] g < 2 -> 1 : (g'=g+1); endmodule
module b [s] g < 2 -> 1 : (g'=g+1); endmodule
"""
    with pytest.raises(PrismModelError, match="variable 'g' is written by more than one module"):
        load(clash).built


def test_bools_print_as_true_false_and_states_are_in_prisms_order():
    text = ("ctmc\nmodule q b : bool; n : [1..2] init 2;\n"
            "[] !b -> 1 : (b'=true)&(n'=1); [] b -> 1 : (b'=false); endmodule")
    chain = load(text).built.chain
    assert chain.states.tolist() == [[0, 1], [0, 2], [1, 1]]  # lexicographic, as PRISM's .sta
    assert np.flatnonzero(chain.labels["init"]).tolist() == [1]


def test_assignments_without_parentheses_as_prism_reads_them():
    """``0.5 : s'=7 & (d'=3)`` (PRISM's own dice example writes it so): the right side ends at the next assignment."""
    from exactq.prism.syntax import parse_model_text

    m = parse_model_text("dtmc module d s:[0..7]; d:[0..6]; b : bool; "
                         "[] s=4 -> 0.5 : (s'=7) & (d'=2) + 0.5 : s'=7 & (d'=3); [] s=5 -> s'=6; "
                         "[] s=6 -> 1 : b'=s>2 & s<9 & (d'=1); endmodule")
    got = [[(None if u.prob is None else str(u.prob), [(a.var, str(a.expr)) for a in u.assigns]) for u in c.updates]
           for c in m.modules[0].commands]
    assert got == [[("0.5", [("s", "7"), ("d", "2")]), ("0.5", [("s", "7"), ("d", "3")])],
                   [(None, [("s", "6")])],
                   [("1", [("b", "s > 2 & s < 9"), ("d", "1")])]]


def test_a_point_time_bound_f_equals_t():
    """``F=T`` is ``F[T,T]`` (Storm and the PRISM suite's mainframe properties write it)."""
    import math

    import exactq

    m = exactq.load_prism("two.sm", text="ctmc module m s : [0..1]; [] s=0 -> 3 : (s'=1); [] s=1 -> 1 : (s'=0); "
                                         "endmodule")
    a, b = exactq.api.check_properties(m, "P=? [ F=0.5 s=1 ]\nP=? [ F[0.5,0.5] s=1 ]")
    want = 0.75 * (1 - math.exp(-4 * 0.5))  # P(s(t) = 1) of the two-state chain
    assert a.value == pytest.approx(want, rel=1e-12) and b.value == pytest.approx(want, rel=1e-12)
