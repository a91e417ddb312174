"""exactq export and its way back: both formats round-trip to the same chain and the same values.

An export (``--format prism-explicit``: ``.tra/.sta/.lab`` and the rewards' ``.srew/.trew``;
``--format mtx``: ``.mtx`` with the same ``.sta/.lab/.srew/.trew``) of a native model or a
PRISM file is read back by ``exactq check PREFIX.tra|PREFIX.mtx``; the stationary law
(state by state), a time-bounded path property and the reward properties agree with the
original's to 1e-12. Storm, where installed, checks the transition rewards independently.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import exactq
from exactq.cli import main
from exactq.prism import load_explicit, load_prism
from exactq.prism.explicit import read_explicit, read_model, write_explicit, write_mtx
from solvers.stationary import solve_stationary

FILES = Path(__file__).resolve().parents[1] / "prism"
FORMATS = ["prism-explicit", "mtx"]
SUFFIX = {"prism-explicit": ".tra", "mtx": ".mtx"}

# A small ergodic DTMC with state and transition rewards (written for this test).
WALK = """dtmc
module walk
  x : [0..3] init 0;
  [up] x < 3 -> 0.6 : (x'=x+1) + 0.4 : (x'=max(x-1, 0));
  [down] x = 3 -> 0.5 : (x'=2) + 0.5 : true;
endmodule
label "top" = x = 3;
rewards "cost"
  x > 1 : 1;
  [up] true : 0.25;
  [down] true : 2;
endrewards
"""

# A birth-death CTMC whose reward structure has state and transition rewards (for Storm's check).
QUEUE = """ctmc
const int K = 4;
module q
  n : [0..K] init 0;
  [arrive] n < K -> 1.5 : (n'=n+1);
  [serve] n > 0 -> 2 : (n'=n-1);
endmodule
label "full" = n = K;
rewards "busy"
  n > 0 : 1;
  [arrive] true : 0.5;
  [serve] true : 2;
endrewards
"""


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def value_of(capsys, *argv) -> float:
    code, out, err = run(capsys, "check", *argv, "--json")
    assert code == 0, err
    return json.loads(out)["value"]


def close(a: float, b: float, tol: float = 1e-12) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def sta_states(path) -> np.ndarray:
    """The states of a ``.sta`` file, checking PRISM's ``i:(v1,...,vn)`` lines and its lexicographic order."""
    lines = Path(path).read_text().splitlines()[1:]
    assert all(re.fullmatch(rf"{i}:\([^,()]+(,[^,()]+)*\)", line) for i, line in enumerate(lines))
    states = np.array([[int(v) for v in line.split(":")[1].strip("()").replace("true", "1").replace("false", "0")
                        .split(",")] for line in lines])
    assert np.array_equal(states, states[np.lexsort(states.T[::-1])]), "not in PRISM's (lexicographic) order"
    return states


def same_stationary_law(original, back) -> None:
    """Every state of the original is a state of the copy, with the same stationary probability (1e-12)."""
    assert back.n_states == original.n_states
    idx = back.space.index(np.asarray(original.states))
    assert np.all(idx >= 0) and len(np.unique(idx)) == original.n_states
    pi, pi_back = solve_stationary(original).pi, solve_stationary(back).pi
    assert pi.min() >= 0 and abs(pi.sum() - 1) < 1e-12
    assert np.max(np.abs(pi_back[idx] - pi)) <= 1e-12


# ------------------------------------------------------------------------------------------ version
def test_version_prints_the_package_version(capsys):
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    code, out, err = run(capsys, "--version")
    assert code == 0 and err == ""
    m = re.fullmatch(r"exactq (\d+\.\d+\.\d+\S*)\n", out)
    assert m, out
    try:
        installed = version("exactq")
    except PackageNotFoundError:
        installed = exactq.__version__
    assert m.group(1) == installed
    with open(Path(__file__).resolve().parents[2] / "pyproject.toml", "rb") as fh:
        assert tomllib.load(fh)["project"]["version"] == exactq.__version__  # one version, stated twice
    assert run(capsys, "--debug", "--version")[:2] == (0, out)


# ------------------------------------------------------------------------------------------ native models
NATIVE = {
    # a finite CTMC; the blocking probability of M/M/2/4 is also a closed form
    "mmck": (["mmck", "arrival_rate=2", "servers=2", "capacity=4"], None,
             ["S=? [ n = 4 ]", "P=? [ F<=0.8 n = 4 ]"]),
    # an infinite two-queue model, exported at a truncation level
    "jsq": (["jsq", "arrival_rate=1.5", "service_rates=1,2"], 4, ["S=? [ q1 = 4 ]", "P=? [ F<=2 q1 + q2 >= 6 ]"]),
    # a symmetry-lumped chain whose states are not in PRISM's (lexicographic) order
    "power-of-d": (["power-of-d", "servers=3", "d=2", "arrival_rate=0.5"], 3,
                   ["S=? [ x2 = 3 ]", "P=? [ F<=2 x0 + x1 + x2 >= 5 ]"]),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(NATIVE))
def test_a_native_model_round_trips(case, fmt, capsys, tmp_path):
    argv, truncation, queries = NATIVE[case]
    trunc = [] if truncation is None else ["--truncation", truncation]
    prefix = tmp_path / "m"
    code, out, err = run(capsys, "export", *argv, "--format", fmt, "--out", prefix, *trunc)
    assert code == 0, err
    files = out.split()
    assert files[:3] == [f"{prefix}{SUFFIX[fmt]}", f"{prefix}.sta", f"{prefix}.lab"]
    model = exactq.model(argv[0], **dict(a.split("=", 1) for a in argv[1:]))
    original = model.ctmc(truncation)
    assert len(sta_states(f"{prefix}.sta")) == original.n_states
    back = load_explicit(files[0])
    chain = back.built.chain
    assert type(chain).__name__ == "CTMC" and chain.space.names == original.space.names
    same_stationary_law(original, chain)
    if fmt == "mtx":  # the generator as written, diagonal included
        idx = chain.space.index(np.asarray(original.states))
        assert abs(chain.Q[idx][:, idx] - original.Q).max() == 0.0
    for query in queries:
        native = value_of(capsys, *argv, query, *trunc)
        assert close(value_of(capsys, files[0], query), native), query
    if case == "mmck":
        ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=2, servers=2,
                           capacity=4).value
        assert close(value_of(capsys, files[0], "S=? [ n = 4 ]"), ref)


# ------------------------------------------------------------------------------------------ PRISM files
PRISM = {
    # synchronisation; "jobs" has state rewards, "served" transition rewards only
    "jsq2": (FILES / "jsq2.sm", "K=3,lambda=1.8,mu1=1,mu2=1.5",
             ['S=? [ "full" ]', 'P=? [ F<=1.5 "full" ]', 'R{"jobs"}=? [ S ]', 'R{"served"}=? [ S ]',
              'R{"served"}=? [ C<=2 ]', 'R{"served"}=? [ F "full" ]', 'R{"jobs"}=? [ I=1 ]', "R{2}=? [ S ]"]),
    # a boolean variable: true/false in the .sta, a condition in the properties of the copy
    "sync": (FILES / "sync.sm", None, ["S=? [ y & x = 1 ]", "P=? [ F<=0.7 y ]", "S=? [ !y ]"]),
    # a DTMC with state and transition rewards
    "walk": ("walk.pm", None, ['S=? [ "top" ]', 'P=? [ F<=5 "top" ]', 'R{"cost"}=? [ S ]', 'R{"cost"}=? [ C<=4 ]',
                               'R{"cost"}=? [ F "top" ]', 'R{"cost"}=? [ I=3 ]']),
    # an absorbing DTMC (Knuth-Yao die): reachability and the expected number of flips, 11/3
    "dice": (FILES / "dice.pm", None, ["P=? [ F s = 7 & d = 2 ]", 'R{"flips"}=? [ F "done" ]']),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(PRISM))
def test_a_prism_file_round_trips(case, fmt, capsys, tmp_path):
    path, const, props = PRISM[case]
    if case == "walk":
        path = tmp_path / path
        path.write_text(WALK)
    consts = [] if const is None else ["--const", const]
    prefix = tmp_path / "m"
    code, out, err = run(capsys, "export", path, *consts, "--format", fmt, "--out", prefix)
    assert code == 0, err
    files = out.split()
    original_model = load_prism(str(path), const)
    original = original_model.built.chain
    back = load_explicit(files[0])
    chain = back.built.chain
    assert type(chain) is type(original)
    assert list(back.built.rewards) == list(original_model.built.rewards)  # names and order
    if case != "dice":  # dice is absorbing: no unique stationary law
        same_stationary_law(original, chain)
    for prop in props:
        want = exactq.check(original_model, prop).value
        assert close(value_of(capsys, files[0], prop), want), prop
    if case == "dice":
        assert close(value_of(capsys, files[0], 'R{"flips"}=? [ F "done" ]'), 11 / 3)
    assert len(sta_states(tmp_path / "m.sta")) == original.n_states
    if case == "sync":
        assert (tmp_path / "m.sta").read_text().splitlines()[:3] == ["(x,y)", "0:(0,false)", "1:(0,true)"]


def test_transition_rewards_agree_with_storm(capsys, tmp_path):
    """Storm builds the PRISM file itself; exactq reads the export: the transition rewards are not lost."""
    stormpy = pytest.importorskip("stormpy")
    src = tmp_path / "q.sm"
    src.write_text(QUEUE)
    props = ['R{"busy"}=? [ S ]', 'R{"busy"}=? [ C<=1.5 ]', 'R{"busy"}=? [ F "full" ]', 'P=? [ F<=1 "full" ]']
    program = stormpy.parse_prism_program(str(src), prism_compatibility=True)
    parsed = stormpy.parse_properties(";".join(props), program)
    model = stormpy.build_model(program, parsed)
    init = model.initial_states[0]
    for fmt in FORMATS:
        assert run(capsys, "export", src, "--format", fmt, "--out", tmp_path / fmt)[0] == 0
        for prop, p in zip(props, parsed):
            storm = stormpy.model_checking(model, p).get_value(init)
            ours = value_of(capsys, tmp_path / f"{fmt}{SUFFIX[fmt]}", prop)
            assert abs(ours - storm) <= 1e-6 * max(1.0, abs(storm)), (prop, ours, storm)  # Storm's default precision


# ------------------------------------------------------------------------------------------ the files
def test_the_mtx_export_writes_the_sta_it_refers_to(capsys, tmp_path):
    import scipy.io

    code, out, err = run(capsys, "export", "jsq", "arrival_rate=1", "service_rates=1,1", "--truncation", "2",
                         "--format", "mtx", "--out", tmp_path / "q", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["files"] == [str(tmp_path / f"q.{x}") for x in ("mtx", "sta", "lab")] and d["n_states"] == 9
    text = (tmp_path / "q.mtx").read_text()
    assert "generator Q of a CTMC" in text and "states as in q.sta" in text
    assert (tmp_path / "q.sta").read_text().splitlines()[0] == "(q1,q2)"
    states = sta_states(tmp_path / "q.sta")
    assert len(states) == 9
    original = exactq.model("jsq", arrival_rate=1, service_rates="1,1").ctmc(2)
    idx = original.space.index(states)
    Q = scipy.io.mmread(tmp_path / "q.mtx").toarray()
    assert np.array_equal(Q, original.Q.toarray()[np.ix_(idx, idx)])  # row i of the .mtx is state i of the .sta
    lab = (tmp_path / "q.lab").read_text().splitlines()
    assert lab[0] == '0="init" 1="deadlock" 2="full"' and lab[1] == "0: 0"


def test_reward_files_have_prisms_layout(tmp_path):
    model = load_prism(str(FILES / "jsq2.sm"), "K=3,lambda=1.8,mu1=1,mu2=1.5")
    files = write_explicit(model.built.chain, str(tmp_path / "j"), rewards=model.built.rewards)
    assert [Path(f).name for f in files] == ["j.tra", "j.sta", "j.lab", "j.1.srew", "j.2.srew", "j.2.trew"]
    srew = (tmp_path / "j.1.srew").read_text().splitlines()
    assert srew[:3] == ['# Reward structure "jobs"', "# State rewards", "16 15"] and srew[3] == "1 1"
    trew = (tmp_path / "j.2.trew").read_text().splitlines()
    assert trew[:2] == ['# Reward structure "served"', "# Transition rewards"]
    n, m = map(int, trew[2].split())
    assert n == 16 and m == len(trew) - 3
    # the expected transition reward per state is kept: sum_j q_ij r_ij
    files = read_model(str(tmp_path / "j.tra"))
    want = model.built.rewards["served"].transition
    back_idx = files.chain.space.index(np.asarray(model.built.chain.states))
    assert np.max(np.abs(files.rewards["served"].transition[back_idx] - want)) <= 1e-12 * want.max()
    # one unnamed structure: PRISM's header without a name, read back as exactq names it ("#1")
    write_explicit(model.built.chain, str(tmp_path / "u"), rewards={"#1": model.built.rewards["jobs"]})
    assert (tmp_path / "u.srew").read_text().splitlines()[0] == "# Reward structure"
    assert list(read_model(str(tmp_path / "u.tra")).rewards) == ["#1"]


def test_an_export_to_the_same_prefix_leaves_no_stale_reward_files(capsys, tmp_path):
    prefix = tmp_path / "m"
    assert run(capsys, "export", FILES / "jsq2.sm", "--const", "K=3,lambda=1.8,mu1=1,mu2=1.5", "--format",
               "prism-explicit", "--out", prefix)[0] == 0
    assert (tmp_path / "m.2.trew").exists()
    assert run(capsys, "export", "mmck", "arrival_rate=2", "servers=2", "capacity=4", "--format", "prism-explicit",
               "--out", prefix)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lab", "m.sta", "m.tra"]
    assert read_model(str(prefix) + ".tra").rewards == {}


def test_prism_written_files_read_back(tmp_path):
    """PRISM's optional header lines, an action column, and a CTMC whose exit rates are all 1."""
    (tmp_path / "c.tra").write_text("# Transitions (CTMC)\n2 2\n0 1 1 go\n1 0 1 back\n")
    (tmp_path / "c.sta").write_text("# States\n(b)\n0:(false)\n1:(true)\n")
    (tmp_path / "c.lab").write_text('# Labels\n0="init" 1="deadlock" 2="up"\n0: 0\n1: 2\n')
    (tmp_path / "c.srew").write_text("# Reward structure\n# State rewards\n2 1\n1 3.5\n")
    files = read_model(str(tmp_path / "c.tra"))
    assert type(files.chain).__name__ == "CTMC"  # the header says so, though each row sums to 1
    assert files.bool_vars == ("b",) and list(files.rewards) == ["#1"]
    assert files.chain.labels["up"].tolist() == [False, True]
    assert exactq.check(load_explicit(str(tmp_path / "c.tra")), "R=? [ S ]").value == pytest.approx(1.75, rel=1e-12)
    assert exactq.check(load_explicit(str(tmp_path / "c.tra")), "S=? [ b ]").value == pytest.approx(0.5, rel=1e-12)
    # exactq's own .tra has no header (as PRISM's): a unit-rate CTMC says that it reads as a DTMC
    with pytest.warns(UserWarning, match="exit rate 1"):
        write_explicit(files.chain, str(tmp_path / "d"))
    assert type(read_explicit(str(tmp_path / "d.tra"))).__name__ == "DTMC"
    assert type(read_explicit(str(tmp_path / "d.tra"), kind="ctmc")).__name__ == "CTMC"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_mtx(files.chain, str(tmp_path / "d"))  # the mtx says its kind: no warning
    assert type(read_explicit(str(tmp_path / "d.tra"))).__name__ == "DTMC"
    from exactq.prism.explicit import read_mtx

    assert type(read_mtx(str(tmp_path / "d.mtx"))).__name__ == "CTMC"


@pytest.mark.parametrize("name, text, message", [
    ("a.tra", "3 2 4\n0 0 1 1\n", "MDP"),
    ("b.tra", "2 2\n0 1 0.5\n", "announces 2 transitions; the file has 1"),
    ("c.tra", "2 1\n0 5 0.5\n", "outside 0..1"),
    ("d.mtx", "%%MatrixMarket matrix coordinate real general\n2 3 1\n1 1 1.0\n", "square"),
    ("e.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 1 0.5\n", "sum neither"),
    ("f.mtx", "%%MatrixMarket matrix coordinate real general\n% exactq: generator Q of a CTMC\n2 2 2\n1 1 -1.0\n"
              "1 2 2.0\n", "sums to 1, not 0"),
])
def test_a_malformed_file_is_one_line_naming_it(name, text, message, capsys, tmp_path):
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run(capsys, "check", path, "S=? [ s = 0 ]")
    assert code == 2 and err.count("\n") == 1 and err.startswith("exactq: error: ") and str(path) in err, err
    assert message in err, err


def test_a_missing_file_and_parameters_are_refused(capsys, tmp_path):
    code, out, err = run(capsys, "check", tmp_path / "nope.mtx", "S=? [ s = 0 ]")
    assert code == 2 and "cannot read" in err and "nope.mtx" in err, err
    assert run(capsys, "export", "mmck", "arrival_rate=2", "servers=2", "capacity=4", "--format", "mtx", "--out",
               tmp_path / "q")[0] == 0
    code, out, err = run(capsys, "solve", tmp_path / "q.mtx", "n=3")
    assert code == 2 and "has no parameters" in err, err
    code, out, err = run(capsys, "solve", tmp_path / "q.mtx", "--measure", "label:deadlock", "--json")
    assert code == 0 and json.loads(out)["value"] == 0.0, err
