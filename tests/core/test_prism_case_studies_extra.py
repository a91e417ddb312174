"""The case studies of bench/prism_models_extra.py (written for exactq) against independent computations.

MAPK cascade: the same CTMC built from the reaction list alone (mass action, no PRISM),
solved with scipy. Bounded retransmission, NAND multiplexing and the dice: closed forms.
Every property of every model against Storm when stormpy is installed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import exactq
from exactq.errors import ExactqError
from prism_bench_support import bench_module, case_values, load_case, storm_values

X = bench_module("prism_models_extra")


def load(name, *args):
    return load_case(X.CASES, name, *args)


values = case_values


def test_every_generator_gives_constants_and_properties():
    for name, (gen, quick, full, pnames) in X.CASES.items():
        for size in quick + full:
            assert len(size) == len(pnames), name
        text, consts, props = gen(*quick[0])
        assert text.split()[0] in ("ctmc", "dtmc") and props, name
        assert set(consts) <= set(pnames), name


# ----------------------------------------------------------------------------- MAPK cascade
@pytest.fixture(scope="module", params=[1, 2])
def mapk(request):
    n = request.param
    m, props = load("mapk_cascade", n)
    states, Q, species = X.mapk_reactions(n)
    return n, m, props, states, Q, species


def test_mapk_state_count_as_the_reaction_network(mapk):
    n, m, _, states, Q, _ = mapk
    assert m.built.chain.n_states == len(states)
    assert abs(Q.sum(axis=1)).max() < 1e-9  # a generator


def test_mapk_values_against_the_reaction_network_solved_by_scipy(mapk):
    n, m, props, states, Q, species = mapk
    got = values(m, props)
    S = np.array(states, dtype=float)
    kpp = S[:, species.index("kpp")]
    kpt_bound = S[:, species.index("kpp_kpt")]
    full = kpp == n
    N = Q.shape[0]
    # steady state: pi Q = 0, sum pi = 1 (one equation replaced), by a direct solve
    A = sp.vstack([Q.T.tocsr()[:-1], sp.csr_matrix(np.ones((1, N)))]).tocsc()
    b = np.zeros(N)
    b[-1] = 1.0
    pi = spla.spsolve(A, b)
    assert np.abs(pi @ Q).max() < 1e-12 and pi.min() > -1e-15
    assert got["S=? [ kpp = N ]"] == pytest.approx(pi[full].sum(), rel=1e-9)
    assert got['R{"activated"}=? [ S ]'] == pytest.approx(pi @ kpp, rel=1e-9)
    # expected time to full activation: solve -Q_tt h = 1 on the states before it
    t = ~full
    h = spla.spsolve((-Q[t][:, t]).tocsc(), np.ones(t.sum()))
    assert got['R{"time"}=? [ F kpp = N ]'] == pytest.approx(h[0], rel=1e-9)  # state 0 is the initial one
    # P(F<=5 full): the target made absorbing, the transient distribution at 5 by expm_multiply
    Qa = sp.lil_matrix(Q)
    Qa[np.flatnonzero(full)] = 0
    p0 = np.zeros(N)
    p0[0] = 1.0
    p5 = spla.expm_multiply(Qa.T.tocsr() * 5.0, p0)
    assert got["P=? [ F<=5 kpp = N ]"] == pytest.approx(p5[full].sum(), rel=1e-7, abs=1e-12)
    # expected number of MAPK-PP at time 5, on the chain itself
    q5 = spla.expm_multiply(Q.T.tocsr() * 5.0, p0)
    assert got['R{"activated"}=? [ I=5 ]'] == pytest.approx(q5 @ kpp, rel=1e-7)
    # P(no MAPK-PP bound to its phosphatase until full activation): a linear system on the allowed states
    ok = (kpt_bound == 0) & ~full
    rhs = np.asarray(Q[ok][:, full].sum(axis=1)).ravel()
    x = spla.spsolve((-Q[ok][:, ok]).tocsc(), rhs) if ok.any() else np.zeros(0)
    assert got["P=? [ kpp_kpt = 0 U kpp = N ]"] == pytest.approx(x[np.flatnonzero(ok).tolist().index(0)], rel=1e-9)


# ----------------------------------------------------------------------------- bounded retransmission
@pytest.mark.parametrize("n, mx", [(16, 2), (5, 1)])
def test_brp_against_closed_forms(n, mx):
    m, props = load("brp", n, mx)
    got = values(m, props)
    for prop, want in X.brp_closed_forms(n, mx).items():
        assert got[prop] == pytest.approx(want, rel=1e-9), prop
    assert 0 < got['P=? [ F<=4*N srep=3 ]'] <= got['S=? [ srep=3 ]'] + 1e-15  # bounded <= eventual


# ----------------------------------------------------------------------------- NAND multiplexing
@pytest.mark.parametrize("n, k", [(5, 1), (10, 2)])
def test_nand_against_the_stagewise_binomial_hypergeometric_recursion(n, k):
    m, props = load("nand", n, k)
    got = values(m, props)
    stage1, final = X.nand_output_distribution(n, k)
    z = np.arange(n + 1)
    assert final.sum() == pytest.approx(1.0, abs=1e-12)
    reliable = final[z / n < 0.1].sum()
    assert got['P=? [ F "reliable" ]'] == pytest.approx(reliable, rel=1e-9)
    assert got['S=? [ "reliable" ]'] == pytest.approx(reliable, rel=1e-9)  # every run ends in an absorbing state
    assert got['R{"error_fraction"}=? [ F fin ]'] == pytest.approx((z / n) @ final, rel=1e-9)
    assert got["P=? [ F<=N+1 stage=2 & xl>=N-1 ]"] == pytest.approx(stage1[n - 1:].sum(), rel=1e-9)
    assert got['R{"gates"}=? [ C<=N ]'] == pytest.approx(n, rel=1e-12)  # one gate per step in the first stage


# ----------------------------------------------------------------------------- cell
def test_cell_against_the_product_form_and_expm():
    n = 50
    m, props = load("cell", n)
    got = values(m, props)
    pi = X.cell_stationary(n)
    k = np.arange(n + 1)
    lam = np.where(k < 0.8 * n, X.CELL_NEW + X.CELL_HANDOFF, np.where(k < n, X.CELL_HANDOFF, 0.0))
    assert got['S=? [ "full" ]'] == pytest.approx(pi[n], rel=1e-9)
    assert got['S=? [ "guarded" ]'] == pytest.approx(pi[k >= 0.8 * n].sum(), rel=1e-9)
    assert got['R{"calls"}=? [ S ]'] == pytest.approx(pi @ k, rel=1e-9)
    assert got['R{"admitted"}=? [ S ]'] == pytest.approx(pi @ lam, rel=1e-9)  # action rewards weighted by rate
    Q = sp.diags([lam[:-1], X.CELL_MU * k[1:]], [1, -1], shape=(n + 1, n + 1)).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    p0 = np.zeros(n + 1)
    p0[0] = 1.0
    half = spla.expm_multiply(Q.T.tocsr() * 0.5, p0)
    assert got['R{"calls"}=? [ I=0.5 ]'] == pytest.approx(half @ k, rel=1e-9)
    Qa = Q.copy()
    Qa[np.flatnonzero(k >= 0.8 * n)] = 0
    assert got['P=? [ F<=1 "guarded" ]'] == pytest.approx(
        spla.expm_multiply(Qa.T.tocsr(), p0)[k >= 0.8 * n].sum(), rel=1e-8, abs=1e-12)


# ----------------------------------------------------------------------------- dice
def test_knuth_yao_die_closed_forms():
    m, props = load("dice", 0)
    got = values(m, props)
    assert got['P=? [ F "shown" & face=1 ]'] == pytest.approx(1 / 6, rel=1e-12)
    assert got['P=? [ F "shown" & face=6 ]'] == pytest.approx(1 / 6, rel=1e-12)
    assert got['R{"flips"}=? [ F "shown" ]'] == pytest.approx(11 / 3, rel=1e-12)
    assert got['P=? [ F<=3 "shown" ]'] == pytest.approx(X.knuth_yao_done_within(3), rel=1e-12)
    assert got['P=? [ F<=5 "shown" ]'] == pytest.approx(15 / 16, rel=1e-12)
    assert got["S=? [ face=3 ]"] == pytest.approx(1 / 6, rel=1e-12)  # six absorbing faces, one bottom SCC each


def test_repeated_die_long_run_on_a_periodic_chain():
    m, props = load("dice", 1)
    got = values(m, props)
    # every cycle has an even length (period 2): the long-run fractions are the stationary distribution's
    assert got['S=? [ "shown" ]'] == pytest.approx(3 / 14, rel=1e-12)
    assert got['S=? [ "shown" & face=1 ]'] == pytest.approx(1 / 28, rel=1e-12)
    assert got['R{"flips"}=? [ S ]'] == pytest.approx(11 / 14, rel=1e-12)


def test_two_dice_synchronised():
    m, props = load("two_dice", 0)
    got = values(m, props)
    for k in (7, 2, 10):
        assert got[f"P=? [ F done & f1+f2={k} ]"] == pytest.approx((6 - abs(k - 7)) / 36, rel=1e-12)
    assert got['R{"flips"}=? [ F "done" ]'] == pytest.approx(22 / 3, rel=1e-12)
    assert got['P=? [ F<=6 "done" ]'] == pytest.approx(X.knuth_yao_done_within(6) ** 2, rel=1e-12)
    assert got["S=? [ done & f1=f2 ]"] == pytest.approx(1 / 6, rel=1e-12)


def test_two_dice_interleaved_as_prism_resolves_local_choices():
    text, consts, props = X.two_dice(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = exactq.load_prism("two_dice.pm", consts, text=text)
            m.built
    except ExactqError as e:
        if "local nondeterminism" in str(e):
            pytest.skip("this builder refuses a DTMC's local choices (PRISM takes each with equal probability)")
        raise
    got = values(m, props)
    assert got["P=? [ F done & f1+f2=7 ]"] == pytest.approx(1 / 6, rel=1e-12)
    assert got['R{"flips"}=? [ F "done" ]'] == pytest.approx(22 / 3, rel=1e-12)
    # six steps, each given to one die or the other with probability 1/2: both done only with 3 each
    assert got['P=? [ F<=6 "done" ]'] == pytest.approx(math.comb(6, 3) / 64 * X.knuth_yao_done_within(3) ** 2,
                                                       rel=1e-12)


# ----------------------------------------------------------------------------- against Storm
STORM_SIZES = [("mapk_cascade", (2,)), ("brp", (16, 2)), ("nand", (10, 2)), ("cell", (50,)), ("dice", (0,)),
               ("dice", (1,)), ("two_dice", (0,))]


@pytest.fixture(scope="module")
def storm(tmp_path_factory):
    """Storm's values of every property of STORM_SIZES (prism_bench_support.storm_values; the state count first)."""
    pytest.importorskip("stormpy")
    return storm_values(X.CASES, STORM_SIZES, tmp_path_factory.mktemp("storm"))


@pytest.mark.parametrize("name, args", STORM_SIZES)
def test_every_property_against_storm(name, args, storm):
    m, props = load(name, *args)
    got = values(m, props)
    for prop, want in zip(props, storm[(name, args)][1:]):
        assert got[prop] == pytest.approx(want, rel=1e-9, abs=1e-12), prop
