"""PRISM models built by exactq against exactq's own models, closed forms and hand-built chains.

The model files are in tests/prism/, written for these tests (none is copied from the
PRISM benchmark suite or QVBS).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import exactq
from exactq.api import check_properties
from exactq.prism import PrismModelError, PrismWarning, load_prism

FILES = Path(__file__).resolve().parents[1] / "prism"


def values(model, *props):
    return [r.value for r in check_properties(model, "\n".join(props))]


# ----------------------------------------------------------------------- against exactq's models
@pytest.mark.parametrize("K, lam, mu1, mu2", [(3, 1.8, 1.0, 1.0), (6, 1.5, 1.0, 1.5), (4, 2.5, 2.0, 0.7)])
def test_a_prism_jsq_with_finite_capacity_equals_the_jsq_model(K, lam, mu1, mu2):
    m = load_prism(FILES / "jsq2.sm", dict(K=K, **{"lambda": lam}, mu1=mu1, mu2=mu2))
    mean, block, q1, q2 = values(m, 'R{"jobs"}=? [ S ]', 'S=? [ "full" ]', "E=? [ q1 ]", "E=? [ q2 ]")
    params = dict(arrival_rate=lam, service_rates=f"{mu1},{mu2}", capacity=K)
    assert mean == pytest.approx(exactq.solve("jsq", "mean_number", method="ctmc", **params).value, rel=1e-12)
    assert block == pytest.approx(exactq.solve("jsq", "blocking_probability", method="ctmc", **params).value,
                                  rel=1e-12)
    lengths = exactq.solve("jsq", "mean_queue_lengths", method="ctmc", **params).value
    assert [q1, q2] == pytest.approx(lengths, rel=1e-12)
    # the throughput of the transition rewards is what is not lost
    served, = values(m, 'R{"served"}=? [ S ]')
    assert served == pytest.approx(lam * (1 - block), rel=1e-12)


@pytest.mark.parametrize("K, lam", [(5, 1.5), (9, 3.0), (2, 0.4)])
def test_a_prism_mmck_equals_the_mmck_model_and_its_closed_form(K, lam):
    m = load_prism(FILES / "mmck.sm", {"K": K, "lambda": lam})
    res = check_properties(m, (FILES / "mmck.csl").read_text(), source_name="mmck.csl")
    got = {r.info["property_name"] or r.measure: r.value for r in res}
    params = dict(arrival_rate=lam, servers=2, capacity=K, service_rate=1.0)
    for measure, prop in [("blocking_probability", "block"), ("mean_number", 'R{"jobs"}=? [ S ]'),
                          ("mean_queue_length", 'R{"queue"}=? [ S ]')]:
        for method in ("closed-form", "ctmc"):
            ref = exactq.solve("mmck", measure, method=method, **params).value
            assert got[prop] == pytest.approx(ref, rel=1e-12, abs=1e-15), (measure, method)
    assert got['R{"accepted"}=? [ S ]'] == pytest.approx(lam * (1 - got["block"]), rel=1e-12)
    p_wait = exactq.solve("mmck", "p_wait", method="closed-form", **params).value
    waiting, = values(m, 'S=? [ "waiting" ]')
    assert waiting / (1 - got["block"]) == pytest.approx(p_wait, rel=1e-12)


# ----------------------------------------------------------------------- hand-built chains
def test_synchronised_rates_are_products_and_enabled_combinations_add_up():
    chain = load_prism(FILES / "sync.sm").built.chain
    index = {tuple(s): i for i, s in enumerate(chain.states.tolist())}
    n = len(index)
    Q = np.zeros((n, n))

    def add(src, dst, rate):
        if src != dst:
            Q[index[src], index[dst]] += rate

    for (x, y) in index:
        if not y:  # [go]: module b must take part, so only when !y
            for cmd_rate, x2, enabled in ((3, x + 1, x < 2), (2, 2, x == 0)):
                if enabled:
                    add((x, y), (x2, 1), cmd_rate * 0.5)
                    add((x, y), (x2, 0), cmd_rate * 0.25)
        if x == 2:
            add((x, y), (0, y), 1)
        if y:
            add((x, y), (x, 0), 4)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    assert np.allclose(chain.Q.toarray(), Q, rtol=0, atol=1e-15)


def test_a_renamed_module_is_the_module_written_out_with_the_new_names():
    a = load_prism(FILES / "renamed.sm").built.chain
    b = load_prism(FILES / "renamed_copy.sm").built.chain
    assert a.space.names == b.space.names == ("p1", "p2")
    assert a.states.tolist() == b.states.tolist()
    assert (a.Q != b.Q).nnz == 0 and a.Q.nnz == b.Q.nnz


def test_transition_and_state_rewards_against_hand_computation():
    # from s=0: to 1 at rate 2, to 2 (absorbing) at rate 1; from 1 back at rate 3
    with pytest.warns(PrismWarning, match="1 deadlocked state was fixed"):
        m = load_prism(FILES / "deadlock.sm")
        m.built
    t_absorb, visits, p = values(m, 'R{"time"}=? [ F "stuck" ]', 'R{"visits1"}=? [ F "stuck" ]',
                                 'P=? [ F<=1 "stuck" ]')
    assert t_absorb == pytest.approx(5 / 3, rel=1e-12)  # T0 = 1/3 + 2/3 (1/3 + T0)
    assert visits == pytest.approx(3.0, rel=1e-12)  # leaves 0 a geometric(1/3) number of times
    import scipy.linalg

    Qd = m.built.chain.Q.toarray()
    assert p == pytest.approx(scipy.linalg.expm(Qd)[0, 2], abs=1e-12)
    # C<=t of the time reward is t; I=t of it is 1
    c, i = values(m, 'R{"time"}=? [ C<=2.5 ]', 'R{"time"}=? [ I=2.5 ]')
    assert c == pytest.approx(2.5, rel=1e-12) and i == pytest.approx(1.0, rel=1e-12)


def test_deadlocks_self_loop_with_a_warning_or_are_an_error_in_strict_mode():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = load_prism(FILES / "deadlock.sm").built
    assert [str(w.message) for w in caught if issubclass(w.category, PrismWarning)] == [
        "1 deadlocked state was fixed by adding a self-loop, as PRISM does (e.g. (s=2))"]
    assert built.n_deadlocks == 1 and np.flatnonzero(built.chain.labels["deadlock"]).tolist() == [2]
    assert not built.chain.Q[2].toarray().any()  # absorbing
    with pytest.raises(PrismModelError, match=r"state \(s=2\) is a deadlock .* 1 deadlocked state in all"):
        load_prism(FILES / "deadlock.sm", strict=True).built
    with pytest.warns(PrismWarning):
        p, = values(load_prism(FILES / "deadlock.sm"), 'P=? [ F "deadlock" ]')
    assert p == pytest.approx(1.0, abs=1e-14)


def test_a_dtmc_die_of_knuth_and_yao():
    m = load_prism(FILES / "dice.pm")
    faces = values(m, *[f'P=? [ F s=7 & d={k} ]' for k in range(1, 7)])
    assert faces == pytest.approx([1 / 6] * 6, rel=1e-12)
    flips, = values(m, 'R{"flips"}=? [ F "done" ]')
    assert flips == pytest.approx(11 / 3, rel=1e-12)
    P = m.built.chain.P.toarray()
    done = m.built.chain.labels["done"]
    for k in range(0, 8):
        pk, = values(m, f'P=? [ F<={k} "done" ]')
        assert pk == pytest.approx(np.linalg.matrix_power(P, k)[0, done].sum(), abs=1e-14)
    assert values(m, 'P=? [ F<=3 "done" ]')[0] == pytest.approx(0.75, abs=1e-15)  # 6 of the 8 paths of 3 flips
    with pytest.raises(exactq.ModelError, match="counts steps and must be an integer"):
        values(m, 'P=? [ F<=2.5 "done" ]')


def test_several_initial_states_give_prisms_range():
    m = load_prism(FILES / "multi_init.sm")
    r, = check_properties(m, "P=? [ F<=1 k=3 ]")
    assert "range over the 2 initial states" in r.info["filter"]
    per_state = [check_properties(m, f"filter(state, P=? [ F<=1 k=3 ], k={k})")[0].value for k in (1, 2)]
    assert r.value == pytest.approx(sorted(per_state), abs=1e-15)
    Q = m.built.chain.Q.toarray()
    Q[3] = 0
    import scipy.linalg

    E = scipy.linalg.expm(Q)
    assert per_state == pytest.approx([E[1, 3], E[2, 3]], abs=1e-12)


def test_the_chain_offers_every_ctmc_method_and_verify():
    m = load_prism(FILES / "mmck.sm", "K=6,lambda=1.5")
    ref = exactq.solve("mmck", "blocking_probability", method="closed-form", arrival_rate=1.5, servers=2,
                       capacity=6).value
    for method in ("auto", "ctmc", "direct", "gth", "gmres", "mpmath"):
        r = exactq.solve(m, "label:full", method=method)
        assert r.value == pytest.approx(ref, rel=1e-10), method
    r = exactq.solve(m, "reward:jobs", verify=True)
    assert r.info["verify"]["agree"] and r.n_states == 7
    assert set(type(m).measures) == {"reward:jobs", "reward:queue", "reward:accepted", "label:full",
                                     "label:waiting", "label:init", "label:deadlock"}


def test_dtmc_files_use_the_dtmc_method():
    # a reflecting random walk on 0..4 (up 0.3, down 0.5): pi_k proportional to 0.6^k
    text = """dtmc
module w k : [0..4];
  [] k=0 -> 0.3 : (k'=1) + 0.7 : true;
  [] k>0 & k<4 -> 0.3 : (k'=k+1) + 0.5 : (k'=k-1) + 0.2 : true;
  [] k=4 -> 0.5 : (k'=3) + 0.5 : true;
endmodule
label "top" = k = 4;
rewards "k" true : k; endrewards
"""
    m = load_prism("walk.pm", text=text)
    assert type(m).methods == ("dtmc",) and m.offers("dtmc") and not m.offers("ctmc")
    pi = 0.6 ** np.arange(5) / (0.6 ** np.arange(5)).sum()
    r = exactq.solve(m, "label:top", verify=True)
    assert r.value == pytest.approx(pi[4], rel=1e-12) and r.info["verify"]["agree"]
    assert exactq.solve(m, "reward:k").value == pytest.approx(pi @ np.arange(5), rel=1e-12)
    # a reducible dtmc (the die's six absorbing faces) is refused by the stationary method, with the reason
    with pytest.raises(exactq.ReducibleError, match="6 closed classes"):
        exactq.solve(load_prism(FILES / "dice.pm"), "label:done")
    # ... while S=? weights the closed classes by the probability of reaching them, as PRISM does
    s6, = values(load_prism(FILES / "dice.pm"), "S=? [ d = 6 ]")
    assert s6 == pytest.approx(1 / 6, rel=1e-12)


def test_the_builder_handles_a_few_hundred_thousand_states_quickly():
    # a tandem of two queues with blocking, 2c^2 + 3c + 1 states (no loop over states anywhere)
    text = """ctmc
const int c;
module a sc : [0..c]; ph : [1..2];
  [] sc<c -> 4*c : (sc'=sc+1);
  [route] sc>0 & ph=1 -> 1.8 : (sc'=sc-1);
  [] sc>0 & ph=1 -> 0.2 : (ph'=2);
  [route] sc>0 & ph=2 -> 2 : (ph'=1)&(sc'=sc-1);
endmodule
module b sm : [0..c]; [route] sm<c -> 1 : (sm'=sm+1); [] sm>0 -> 4 : (sm'=sm-1); endmodule
"""
    import time

    c = 200
    t0 = time.process_time()
    built = load_prism("t.sm", {"c": c}, text=text).built
    assert built.chain.n_states == 2 * c * c + 3 * c + 1
    assert time.process_time() - t0 < 30
    assert math.isclose(sp.csr_matrix(built.chain.Q).sum(), 0.0, abs_tol=1e-6)


@pytest.mark.parametrize("name, constants", [("dice.pm", None), ("mdp_dice.nm", {"q": "0.5"})])
def test_a_loaded_model_is_a_frozen_dataclass_of_its_own_class(name, constants):
    """load_prism's per-file class adds no field and is not run through dataclass() again: the instance still
    compares, hashes, prints and is replaced as a dataclass, and refuses every assignment, a new name as well."""
    import dataclasses

    m = load_prism(FILES / name, constants)
    assert dataclasses.is_dataclass(m) and [f.name for f in dataclasses.fields(m)] == ["path", "constants",
                                                                                      "strict", "model_file"]
    assert repr(m).startswith(type(m).__name__ + "(path=")
    assert m == dataclasses.replace(m) and hash(m) == hash(dataclasses.replace(m))
    assert dataclasses.replace(m, strict=True).strict is True
    for change in (lambda: setattr(m, "path", "x"), lambda: setattr(m, "anything", 1), lambda: delattr(m, "path")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()


def test_the_builders_matrices_are_trusted_and_equal_to_their_validation():
    """The builder records its generator (a CTMC) and transition matrix (a DTMC) as validated, so the checks do
    not read them again; validating them anyway gives the same arrays."""
    from exactq.solvers.dtmc import _as_stochastic
    from exactq.solvers.transient import _as_generator, is_trusted, trust

    ctmc = load_prism(FILES / "mmck.sm", "K=5,lambda=1.5").built.chain
    dtmc = load_prism(FILES / "dice.pm").built.chain
    assert is_trusted("generator Q", ctmc.Q) and is_trusted("stochastic P", dtmc.P)
    for M, check in ((ctmc.Q, _as_generator), (dtmc.P, _as_stochastic)):
        np.testing.assert_array_equal(check(M, "M").toarray(), M.toarray())
    assert not trust("generator Q", sp.coo_matrix(ctmc.Q))  # only a canonical CSR matrix is recorded


LOOSE = ("{kind}\nmodule m\n  s : [0..2] init 0;\n  [] s=0 -> 0.4999999 : (s'=1) + 0.5 : (s'=2);\n"
         "  [] s=1 -> 0.3 : (s'=0) + 0.7000004 : (s'=2);\n  [] s=2 -> true;\nendmodule\n")


def test_probabilities_summing_to_1_only_within_prisms_tolerance_are_normalised_with_a_warning(tmp_path):
    """PRISM and Storm accept a state whose probabilities sum to 1 within a tolerance; such rows are divided by
    their sums (with a warning naming the largest gap), so that every check answers, for the normalised chain:
    P(F s=2) from s=0 solves x0 = a x1 + b, x1 = c x0 + d by hand."""
    from exactq.solvers.dtmc import _as_stochastic
    from exactq.solvers.transient import is_trusted

    loose = tmp_path / "loose.pm"
    loose.write_text(LOOSE.format(kind="dtmc"))
    with pytest.warns(PrismWarning, match=r"probabilities of 2 states sum to 1 only within 1e-06 "
                                          r"\(the largest gap 4e-07, in state \(s=1\)\)"):
        model = load_prism(loose)
        P = model.built.chain.P
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert is_trusted("stochastic P", P)
    np.testing.assert_array_equal(_as_stochastic(P, "P").toarray(), P.toarray())
    a, b = 0.4999999 / 0.9999999, 0.5 / 0.9999999      # s=0 -> 1, s=0 -> 2
    c, d = 0.3 / 1.0000004, 0.7000004 / 1.0000004     # s=1 -> 0, s=1 -> 2
    x0 = (a * d + b) / (1 - a * c)
    reach, = values(model, "P=? [ F s=2 ]")
    assert reach == pytest.approx(x0, rel=1e-14)
    # the MDP of the same file: one choice per state, the same value; rows within 1e-9 are kept as given
    mdp_file = tmp_path / "loose_mdp.nm"
    mdp_file.write_text(LOOSE.format(kind="mdp"))
    with pytest.warns(PrismWarning, match="probabilities of 2 choices sum to 1 only within"):
        mdp = load_prism(mdp_file)
        mdp.built
    hi, = values(mdp, "Pmax=? [ F s=2 ]")
    assert hi == pytest.approx(x0, rel=1e-12)
    exact = tmp_path / "exact.pm"
    exact.write_text(LOOSE.format(kind="dtmc").replace("0.4999999", "0.5").replace("0.7000004", "0.7"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrismWarning)
        P = load_prism(exact).built.chain.P
    assert P[0, 1] == 0.5 and P[1, 2] == 0.7


def test_probabilities_outside_prisms_tolerance_are_still_refused(tmp_path):
    bad = tmp_path / "bad.pm"
    bad.write_text(LOOSE.format(kind="dtmc").replace("0.4999999", "0.499998"))
    with pytest.raises(PrismModelError, match=r"sum to 0\.999998, not 1, in state \(s=0\)"):
        load_prism(bad).built
