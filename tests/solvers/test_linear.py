"""Solver choice by predicted LU cost, BiCGSTAB with a Gauss-Seidel preconditioner, and
the a-posteriori error bounds of iterative answers (issue 20, item 1).

Every iterative answer is compared with a sparse LU (or mpmath) on the same system, and
its stated bound must hold: ``lower <= direct <= upper`` for reachability probabilities
and rewards, ``||pi_iterative - pi_direct||_1 <= error_bound_l1`` for steady states.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import exactq
from exactq.api import check_properties
from exactq.budget import BudgetError
from exactq.ctmc import CTMC
from exactq.solvers import linear
from exactq.solvers.linear import GaussSeidel, choose, error_bound, predict_lu, solve_iterative, solve_mmatrix
from exactq.solvers.ordering import nested_dissection
from exactq.solvers.reachability import expected_reward, until_probability
from exactq.solvers.stationary import stationary


def grid_generator(shape, up=1.0, down=1.5):
    """Independent birth-death coordinates on a box: a lattice chain with unit jumps."""
    Q = None
    for k, size in enumerate(shape):
        B = sp.diags([np.full(size - 1, down), np.full(size - 1, up)], [-1, 1], format="lil")
        B.setdiag(-np.asarray(B.sum(axis=1)).ravel())
        term = sp.identity(1)
        for j, s in enumerate(shape):
            term = sp.kron(term, B if j == k else sp.identity(s))
        Q = term if Q is None else Q + term
    coords = np.stack(np.unravel_index(np.arange(int(np.prod(shape))), shape), axis=1)
    return sp.csr_matrix(Q), coords


def product_form(shape, up=1.0, down=1.5):
    law = np.ones(1)
    for s in shape:
        g = (up / down) ** np.arange(s)
        law = np.outer(law, g / g.sum()).ravel()
    return law


# ------------------------------------------------------------------ prediction
def test_nested_dissection_prediction_does_not_exceed_the_real_fill_on_a_box():
    Q, coords = grid_generator((80, 80))
    pred = predict_lu(Q, coords=coords, jumps=np.array([1, 1]))
    assert pred.kind == "nested dissection"
    perm = nested_dissection(coords, np.array([1, 1]))
    A = (-Q)[perm][:, perm].tocsc() + sp.identity(Q.shape[0], format="csc")  # nonsingular, same pattern
    lu = spla.splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.0, options=dict(SymmetricMode=True))
    assert pred.nnz <= lu.nnz  # the separator blocks are dense in the factor
    assert pred.nnz >= 0.2 * lu.nnz  # and they are most of it


def test_envelope_prediction_bounds_the_fill_in_its_own_ordering():
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    rng = np.random.default_rng(3)
    n = 6000
    rows = np.repeat(np.arange(n), 3)
    cols = (rows + rng.integers(1, 40, rows.size)) % n
    A = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    A = (sp.diags(np.asarray(A.sum(axis=1)).ravel() + np.asarray(A.sum(axis=0)).ravel() + 1.0) - A).tocsr()
    pred = predict_lu(A)
    assert pred.kind == "envelope"
    S = (abs(A) + abs(A).T).tocsr()
    perm = reverse_cuthill_mckee(S, symmetric_mode=True)
    lu = spla.splu(A[perm][:, perm].tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                   options=dict(SymmetricMode=True))
    assert lu.nnz <= pred.nnz


def restarting_rounds(depth=11, branching=2, p_done=0.3):
    """``I - P`` of a DTMC whose rounds restart from one state: a tree numbered breadth first (each state moves to
    its children with equal probability), whose leaves end (``p_done``, not a state of the system) or restart at the
    root, as a synchronous leader election does."""
    n = (branching ** (depth + 1) - 1) // (branching - 1)
    parent = (np.arange(1, n) - 1) // branching
    rows = [parent, np.arange(n - branching ** depth, n)]
    cols = [np.arange(1, n), np.zeros(branching ** depth, np.int64)]
    vals = [np.full(n - 1, 1.0 / branching), np.full(branching ** depth, 1.0 - p_done)]
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    return (sp.identity(n, format="csr") - P).tocsr()


def symbolic_lu_nnz(A: np.ndarray) -> int:
    """Entries of L + U of an LU without pivoting, by the elimination game on the pattern."""
    M = A != 0
    for k in range(M.shape[0]):
        M[k + 1:, k + 1:] |= np.outer(M[k + 1:, k], M[k, k + 1:])
    return int(M.sum())


@pytest.mark.parametrize("seed", range(4))
def test_feedback_prediction_bounds_the_fill_with_the_feedback_states_last(seed):
    rng = np.random.default_rng(seed)
    n, k = 70, 3
    hubs = rng.choice(n, k, replace=False)
    forward = np.triu(rng.random((n, n)) < 0.04, 1)  # a random acyclic part in index order
    back = np.zeros((n, n), bool)
    back[rng.integers(0, n, 12), rng.choice(hubs, 12)] = True  # and transitions back into the k hubs only
    pattern = (forward | np.tril(back, -1)).astype(float)
    A = np.diag(pattern.sum(axis=1) + 1.0) - pattern
    pred = linear._feedback(sp.csr_matrix(A))  # (predict_lu calls systems this small "small" and predicts nothing)
    assert pred is not None and pred.kind == "feedback"
    rest = np.setdiff1d(np.arange(n), hubs)
    order = np.concatenate([rest, np.sort(hubs)])
    fill = symbolic_lu_nnz(A[np.ix_(order, order)])
    assert fill <= np.count_nonzero(A) + k * n  # the bound for these hubs
    assert pred.nnz <= np.count_nonzero(A) + k * n  # the prediction found as few feedback states or fewer
    assert pred.nnz >= np.count_nonzero(A)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("transpose", [False, True])
def test_the_bordered_solve_with_the_feedback_states_last_is_the_dense_solve(seed, transpose):
    rng = np.random.default_rng(seed)
    n = 90
    hubs = rng.choice(n, 4, replace=False)
    P = np.triu(rng.random((n, n)) < 0.05, 1) * rng.random((n, n))
    back = rng.integers(0, n, 15)
    P[back, rng.choice(hubs, 15)] += rng.random(15)
    np.fill_diagonal(P, 0.0)
    P /= P.sum(axis=1, keepdims=True) + 0.2  # substochastic: I - P is a nonsingular M-matrix
    A = np.eye(n) - P
    if transpose:
        A = A.T.copy()
    b = rng.random(n)
    x, info = linear._solve_bordered(sp.csr_matrix(A), b, {})
    want = np.linalg.solve(A, b)
    assert np.abs(x - want).max() <= 1e-13 * np.abs(want).max()
    assert np.all(np.abs(x - want) <= info["bound_vector"] + 1e-15)
    assert "feedback states last" in info["solver"]["how"]


def test_a_system_of_restarting_rounds_is_predicted_by_its_feedback_state_and_solved_by_the_lu():
    A = restarting_rounds()
    n = A.shape[0]
    pred = predict_lu(A)
    assert pred.kind == "feedback" and "1 feedback states" in pred.how
    lu = spla.splu(A.tocsc())
    assert lu.nnz <= 3 * pred.nnz  # SuperLU's COLAMD fills about as little: 2.1x here (the envelope predicts 590x)
    name, why = choose(A, trial=True)
    assert name == "direct" and "(feedback)" in why["why"]
    b = np.where(np.asarray(A.sum(axis=1)).ravel() > 0.1, 0.3, 0.0)  # the leaves end with probability 0.3
    x, info = solve_mmatrix(A, b)
    assert info["solver"]["name"] == "direct" and info["solver"]["prediction"].startswith("feedback")
    assert "1 feedback states last" in info["solver"]["how"]  # the bordered triangular solves
    y, _ = solve_mmatrix(A, b, solver="bicgstab")
    assert np.allclose(x, 1.0) and np.abs(x - y).max() <= 1e-12  # every round ends with probability 1
    assert info["error_bound"] <= 1e-12


def test_a_large_system_with_one_feedback_state_is_solved_by_triangular_solves_before_any_iteration(monkeypatch):
    """At 65,535 unknowns the LU's prediction (SuperLU's per-column work) sends the system to a BiCGSTAB trial, but the
    bordered solve makes three triangular solves and no factorisation: it runs first, with no iteration, and agrees
    with BiCGSTAB (the independent method) within both bounds."""
    import exactq.solvers.linear as lin

    A = restarting_rounds(depth=15)
    assert choose(A, trial=True)[0] == "bicgstab"  # what the solver took before
    b = np.where(np.asarray(A.sum(axis=1)).ravel() > 0.1, 0.3, 0.0)
    calls = []
    real = lin.solve_iterative
    monkeypatch.setattr(lin, "solve_iterative", lambda *a, **k: calls.append(1) or real(*a, **k))
    x, info = solve_mmatrix(A, b)
    assert not calls and info["solver"]["name"] == "direct" and "3 triangular solves" in info["solver"]["why"]
    y, yinfo = solve_mmatrix(A, b, solver="bicgstab")
    assert np.abs(x - y).max() <= info["error_bound"] + yinfo["error_bound"] and info["error_bound"] <= 1e-12
    assert np.allclose(x, 1.0)


def test_choose_takes_the_lu_for_a_band_and_bicgstab_for_a_six_dimensional_box():
    Q, _ = grid_generator((20000,))
    name, why = choose(Q)
    assert name == "direct" and "predicted LU" in why["why"]
    Q6, c6 = grid_generator((5,) * 6)
    name, why = choose(Q6, coords=c6, jumps=np.ones(6, np.int64))
    assert name == "bicgstab"
    assert "predicted LU" in why["why"] and why["predicted_lu_nnz"] > 10 * Q6.nnz


def test_a_lower_bound_from_the_first_levels_decides_as_the_whole_dissection_does():
    """choose() measures the dissection's first levels first: when their separators alone put the LU above the
    iterative estimate, that lower bound is reported ("at least", below the whole prediction) and the choice is
    the whole prediction's; when they do not, the whole dissection is made and reported as before."""
    import exactq.solvers.linear as L
    from exactq.solvers.ordering import separator_sizes

    Q6, c6 = grid_generator((5,) * 6)
    jumps = np.ones(6, np.int64)
    whole: list = []
    nested_dissection(c6, jumps, separators=whole)
    first = separator_sizes(c6, jumps, L.PROBE_LEVELS)
    assert len(first) == L.PROBE_LEVELS
    assert all(np.array_equal(a, b) for a, b in zip(first, whole))
    full = predict_lu(Q6, coords=c6, jumps=jumps)
    probe = predict_lu(Q6, coords=c6, jumps=jumps, enough_flops=1.0)
    assert "at least" in probe.how and "at least" not in full.how
    assert probe.flops <= full.flops and probe.nnz <= full.nnz
    name, why = choose(Q6, coords=c6, jumps=jumps)
    assert name == "bicgstab" and "at least" in why["prediction"]
    assert predict_lu(Q6, coords=c6, jumps=jumps, enough_flops=10 * full.flops).how == full.how
    Q2, c2 = grid_generator((60, 60))  # an LU that wins: the whole dissection is reported
    name, why = choose(Q2, coords=c2, jumps=np.array([1, 1]))
    assert name == "direct" and "at least" not in why["prediction"]


def test_an_explicit_direct_solve_over_the_budget_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("EXACTQ_MEMORY_BUDGET", "1MB")
    Q6, c6 = grid_generator((5,) * 6)
    with pytest.raises(BudgetError) as e:
        stationary(Q6, method="direct", coords=c6, jumps=np.ones(6, np.int64))
    msg = str(e.value)
    assert "\n" not in msg and "sparse LU" in msg and "solver=bicgstab" in msg


# ------------------------------------------------------------------ iterative solves and their bounds
def test_gauss_seidel_preconditioner_is_the_lower_triangle():
    A = sp.csr_matrix(np.array([[4.0, -1.0, 0.0], [-2.0, 5.0, -1.0], [0.0, -3.0, 6.0]]))
    r = np.array([1.0, 2.0, 3.0])
    M = np.tril(A.toarray())
    np.testing.assert_allclose(GaussSeidel(A).solve(r), np.linalg.solve(M, r), rtol=1e-14)
    np.testing.assert_allclose(GaussSeidel(A).solve(r, trans=True), np.linalg.solve(M.T, r), rtol=1e-14)


def test_error_bound_holds_for_a_perturbed_solution():
    A = sp.csr_matrix(np.array([[1.0, -0.5, 0.0], [-0.3, 1.0, -0.6], [0.0, -0.2, 1.0]]))
    b = np.array([0.5, 0.1, 0.8])
    exact = np.linalg.solve(A.toarray(), b)
    approx = exact + np.array([1e-6, -2e-6, 5e-7])
    bound, info = error_bound(A, approx, b)
    assert info["certificate_gamma"] > 0
    assert np.all(np.abs(approx - exact) <= bound)


def test_bicgstab_steady_state_against_the_product_form_and_its_bound():
    shape = (12, 12, 12)
    Q, coords = grid_generator(shape)
    exact = product_form(shape)
    it = stationary(Q, method="bicgstab", coords=coords, jumps=np.ones(3, np.int64))
    lu = stationary(Q, method="direct", coords=coords, jumps=np.ones(3, np.int64))
    assert it.method == "bicgstab" and it.info["solver"]["name"].startswith("bicgstab")
    assert it.info["relative_residual"] < 1e-12
    np.testing.assert_allclose(it.pi, exact, rtol=1e-9, atol=0)
    np.testing.assert_allclose(lu.pi, exact, rtol=1e-10, atol=0)
    assert np.abs(it.pi - exact).sum() <= it.info["error_bound_l1"] < 1e-8
    assert np.abs(lu.pi - exact).sum() <= lu.info["error_bound_l1"]  # the direct solve states it too


def test_a_loose_certificate_that_is_none_goes_on_to_the_tighter_residual(monkeypatch):
    """The steady state's certificate vector m is first solved loosely; when it is no certificate
    (A^T m >= g 1 fails: made so here by refusing the first vector) the solve goes on from it to the tighter
    residual, its iterations are counted, and the bound still holds."""
    from exactq.solvers import stationary as st_mod

    shape = (10, 10, 10)
    Q, coords = grid_generator(shape)
    exact = product_form(shape)
    loose = stationary(Q, method="bicgstab", coords=coords, jumps=np.ones(3, np.int64))
    real, seen = st_mod._l1_bound, []

    def refuse_first(B, x, b, m):
        seen.append(float(np.abs(m).max()))
        return np.inf if len(seen) == 1 else real(B, x, b, m)

    monkeypatch.setattr(st_mod, "_l1_bound", refuse_first)
    forced = stationary(Q, method="bicgstab", coords=coords, jumps=np.ones(3, np.int64))
    assert len(seen) == 2  # the loose vector, then the one solved on from it
    for it in (loose, forced):
        assert np.abs(it.pi - exact).sum() <= it.info["error_bound_l1"] < 1e-8
    assert forced.info["solver"]["certificate_iterations"] > loose.info["solver"]["certificate_iterations"]
    assert forced.info["error_bound_l1"] == pytest.approx(loose.info["error_bound_l1"], rel=0.5)


def test_auto_picks_bicgstab_by_prediction_and_says_why():
    shape = (5,) * 6  # 15,625 states: the LU's separator blocks make it costly
    Q, coords = grid_generator(shape)
    st = stationary(Q, coords=coords, jumps=np.ones(6, np.int64))
    assert st.method == "bicgstab"
    assert "predicted LU work" in st.info["solver"]["why"]
    np.testing.assert_allclose(st.pi, product_form(shape), rtol=1e-9, atol=0)


def _kanban(t):
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location("prism_models", pathlib.Path(__file__).parents[2] / "bench" /
                                                  "prism_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text, consts, props = mod.kanban(t)
    return exactq.load_prism("kanban.sm", consts, text=text).ctmc()


def test_bicgstab_on_a_kanban_chain_agrees_with_the_lu():
    chain = _kanban(2)  # 4,600 states, 12 variables
    jumps = chain.jumps
    it = stationary(chain.Q, method="bicgstab", coords=chain.states, jumps=jumps, reference=chain.initial)
    lu = stationary(chain.Q, method="direct", coords=chain.states, jumps=jumps, reference=chain.initial)
    np.testing.assert_allclose(it.pi, lu.pi, rtol=1e-9, atol=1e-15)
    assert np.abs(it.pi - lu.pi).sum() <= it.info["error_bound_l1"] + lu.info["error_bound_l1"]


CASCADE = """ctmc
const int N;
module level1
  a1 : [0..N] init N;
  b1 : [0..N] init 0;
  [] a1>0 -> 1.0*a1 : (a1'=a1-1)&(b1'=b1+1);
  [] b1>0 -> 0.8*b1 : (b1'=b1-1);
  [] a1+b1<N -> 0.3*(N-a1-b1) : (b1'=b1+1);
  [] b1>0 -> 0.2*b1 : (a1'=a1+1)&(b1'=b1-1);
endmodule
module level2
  a2 : [0..N] init N;
  b2 : [0..N] init 0;
  [] a2>0 & a1+b1<N -> 0.05*a2*(N-a1-b1) : (a2'=a2-1)&(b2'=b2+1);
  [] b2>0 & a1+b1<N -> 0.05*b2*(N-a1-b1) : (b2'=b2-1);
  [] a2+b2<N -> 0.1*(N-a2-b2) : (b2'=b2+1);
  [] b2>0 -> 0.1*b2 : (a2'=a2+1)&(b2'=b2-1);
endmodule
rewards "active" true : N-a2-b2; endrewards
"""


@pytest.fixture(scope="module")
def cascade():
    return exactq.load_prism("cascade.sm", {"N": 8}, text=CASCADE).ctmc()  # 2,025 states


def test_reachability_interval_contains_the_direct_answer(cascade):
    Q = cascade.Q
    S = cascade.states
    left = S[:, 2] > 0
    right = (S[:, 2] == 0) & (S[:, 3] <= 2)
    p_it, info_it = until_probability(Q, left, right, solver="bicgstab")
    p_lu, info_lu = until_probability(Q, left, right, solver="direct")
    assert info_it["solver"]["name"] == "bicgstab" and info_lu["solver"]["name"] == "direct"
    assert info_it["method"] == "graph+bicgstab" and info_lu["method"] == "graph+spsolve"
    assert np.all(info_it["lower"] <= p_lu) and np.all(p_lu <= info_it["upper"])
    assert float((info_it["upper"] - info_it["lower"]).max()) < 1e-9
    np.testing.assert_allclose(p_it, p_lu, rtol=0, atol=1e-10)


def test_expected_reward_bound_contains_the_direct_answer(cascade):
    S = cascade.states
    target = (S[:, 2] == 0) & (S[:, 3] == 0)
    r = (8 - S[:, 2] - S[:, 3]).astype(float)
    v_it, info_it = expected_reward(cascade.Q, target, r, solver="bicgstab")
    v_lu, _ = expected_reward(cascade.Q, target, r, solver="direct")
    finite = np.isfinite(v_lu)
    assert np.all(np.abs(v_it[finite] - v_lu[finite]) <= info_it["error_bound"])
    assert info_it["error_estimate"] == info_it["error_bound"] < 1e-6 * float(v_lu[finite].max())


def test_check_reports_the_solver_and_its_error_estimate(cascade):
    m = exactq.load_prism("cascade.sm", {"N": 8}, text=CASCADE)
    r, = check_properties(m, 'R{"active"}=? [ F a2=0 & b2=0 ]')
    v_lu, _ = expected_reward(cascade.Q, (cascade.states[:, 2] == 0) & (cascade.states[:, 3] == 0),
                              (8 - cascade.states[:, 2] - cascade.states[:, 3]).astype(float), solver="direct")
    assert r.value == pytest.approx(float(v_lu[cascade.initial]), rel=1e-9)
    assert r.info["solver"]["name"] in ("direct", "bicgstab") and r.info["solver"]["why"]


def test_auto_falls_back_to_the_lu_when_bicgstab_fails(monkeypatch):
    Q, _ = grid_generator((6000,))
    A = sp.identity(Q.shape[0], format="csr") - (Q - sp.diags(Q.diagonal())) / (1.0 + float((-Q.diagonal()).max()))
    b = np.ones(A.shape[0])

    def stuck(A, b, **kw):
        return np.zeros_like(b), {"iterations": 1, "status": 1}

    monkeypatch.setattr(linear, "solve_iterative", stuck)
    monkeypatch.setattr(linear, "choose", lambda *a, **k: ("bicgstab", {"why": "test"}))
    x, info = solve_mmatrix(A, b)
    assert info["solver"]["name"] == "direct" and "so the LU after all" in info["solver"]["why"]
    np.testing.assert_allclose(A @ x, b, rtol=0, atol=1e-12)


def test_solve_iterative_counts_and_converges():
    n = 3000
    A = sp.diags([-np.full(n - 1, 0.4), np.ones(n), -np.full(n - 1, 0.5)], [-1, 0, 1], format="csr")
    b = np.linspace(0, 1, n)
    x, info = solve_iterative(A, b, rtol=1e-14)
    assert info["status"] == 0 and info["iterations"] > 0
    ref = spla.spsolve(A.tocsc(), b)  # the stopping test is normwise: entries agree relative to the largest
    np.testing.assert_allclose(x, ref, rtol=1e-11, atol=1e-12 * np.abs(ref).max())


def test_from_generator_chains_use_the_same_choice():
    Q, _ = grid_generator((6000,))
    st = exactq.solvers.stationary.solve_stationary(CTMC.from_generator(Q, ["n"]))
    assert st.info["solver"]["name"] == "direct"
    np.testing.assert_allclose(st.pi, product_form((6000,)), rtol=1e-8, atol=1e-300)


def test_bicgstab_redoes_an_improbable_reference_from_its_answer_with_a_certificate(monkeypatch):
    """An improbable reference is redone warm (few iterations), the first certificate skipped, the last stated."""
    import exactq.solvers.stationary as stmod

    n, lam, mu = 16, 0.3, 1.0  # birth-death chain: pi_i proportional to 0.3^i
    up, down = np.full(n - 1, lam), np.full(n - 1, mu)
    Q = sp.diags([down, -np.r_[up, 0.0] - np.r_[0.0, down], up], [-1, 0, 1], format="csr")
    exact = 0.3 ** np.arange(n)
    exact /= exact.sum()
    # a flat mass estimate keeps the given reference, the last state (probability 1.4e-8 of the first)
    monkeypatch.setattr(stmod._MassSweeps, "settled", lambda self, *a, **k: np.ones(self.n))
    st = stationary(Q, method="bicgstab", reference=n - 1)
    assert len(st.info["recovery"]) == 1 and "improbable" in st.info["recovery"][0]["why"]
    assert st.info["solver"]["iterations"] <= 5  # started from the first answer
    bound = st.info["error_bound_l1"]
    assert np.abs(st.pi - exact).sum() <= bound < 1e-9
    np.testing.assert_allclose(st.pi[:8], exact[:8], rtol=1e-9)


@pytest.mark.parametrize("s, reverse", [(5, False), (5, True), (40, False)])
def test_a_system_of_small_strongly_connected_components_is_solved_in_block_triangular_order(s, reverse, monkeypatch):
    """Many small cycles chained one after another: the same x as spsolve, solved block by block (blocks of 5:
    inverted in batches; of 40: SuperLU in the block order). ``reverse`` numbers the components the other way
    round (Pearce's numbering may come out either way): the order and the sizes must follow."""
    import scipy.sparse.csgraph as csgraph

    from exactq.solvers.linear import block_triangular_order

    if reverse:
        real = csgraph.connected_components

        def flipped(*a, **kw):
            k, labels = real(*a, **kw)
            return k, k - 1 - labels

        monkeypatch.setattr(csgraph, "connected_components", flipped)
    rng = np.random.default_rng(3)
    k = 400 if s == 5 else 50  # cycles of s or s - 2 states (alternately); each cycle leaks into a later one
    size = np.where(np.arange(k) % 2 == 0, s, s - 2)
    first = np.concatenate([[0], np.cumsum(size)])
    n = int(first[-1])
    rows, cols, vals = [], [], []
    for c in range(k):  # (a loop over the blocks of this test's matrix, not a solver path)
        base, m = int(first[c]), int(size[c])
        for i in range(m):
            rows.append(base + i), cols.append(base + (i + 1) % m), vals.append(-0.5)
            if c + 1 < k:
                rows.append(base + i), cols.append(int(rng.integers(first[c + 1], n))), vals.append(-0.3)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n)) + sp.eye(n, format="csr")
    perm = rng.permutation(n)  # hide the order
    A = A[perm][:, perm].tocsr()
    b = rng.random(n)
    order, sizes = block_triangular_order(A)
    assert sizes.max() == s and sizes.size == k
    blocks = np.repeat(np.arange(k), sizes)  # the block of each position of the order (sizes in that order)
    P = A[order][:, order].tocoo()
    above = P.col > P.row
    assert np.all(blocks[P.row[above]] == blocks[P.col[above]])  # upper entries only inside diagonal blocks
    x, info = solve_mmatrix(A, b)
    assert info["solver"]["name"] == "direct" and "block triangular" in info["solver"]["why"]
    exact = spla.spsolve(A.tocsc(), b)
    np.testing.assert_allclose(x, exact, rtol=1e-12)
    assert np.all(np.abs(x - exact) <= info["bound_vector"] + 1e-15)
    # one strongly connected component: the general choice
    C = sp.csr_matrix(np.eye(300) - 0.4 * np.roll(np.eye(300), 1, axis=1) - 0.4 * np.roll(np.eye(300), -1, axis=1))
    assert block_triangular_order(C) is None
    _, info = solve_mmatrix(C, np.ones(300))
    assert "block triangular" not in info["solver"]["why"]


def _hidden_acyclic_system(rng, n: int, *, per_row: int, reach: int, weight: float):
    """``I - W`` with ``per_row`` entries of each row in the ``reach`` unknowns after it (weights below
    ``weight``): acyclic, its order hidden by a random permutation ``perm`` (returned with it)."""
    rows = np.repeat(np.arange(n), per_row)
    cols = rows + rng.integers(1, reach, rows.size)  # every unknown depends on later ones only
    keep = cols < n
    A = sp.csr_matrix((-weight * rng.random(int(keep.sum())), (rows[keep], cols[keep])), shape=(n, n)) + \
        sp.eye(n, format="csr")
    perm = rng.permutation(n)
    return A[perm][:, perm].tocsr(), perm


def test_an_acyclic_system_is_solved_by_the_triangular_solve_with_its_certificate(monkeypatch):
    """Every component one state (a DAG, as nand's or a counter's transient part): no factorisation at all, the
    triangular solve gives spsolve's x, and the certificate's bound holds; SuperLU is never called."""
    rng = np.random.default_rng(11)
    n = 3000
    A, _ = _hidden_acyclic_system(rng, n, per_row=4, reach=60, weight=0.2)
    b = rng.random(n)
    exact = spla.spsolve(A.tocsc(), b)
    import exactq.solvers.linear as L

    def no_lu(*a, **k):
        raise AssertionError("SuperLU was called on a triangular system")

    monkeypatch.setattr(L.spla, "splu", no_lu)
    kept = A.copy()
    x, info = solve_mmatrix(A, b)
    assert "block triangular" in info["solver"]["why"] and info["solver"]["lu_nnz"] == A.nnz
    # the triangle is scaled in place: in a copy of its own (the reverse order's rows), never in the caller's A
    assert (A != kept).nnz == 0 and np.array_equal(A.indices, kept.indices)
    np.testing.assert_allclose(x, exact, rtol=1e-12)
    assert np.all(np.abs(x - exact) <= info["bound_vector"] + 1e-15)


@pytest.mark.parametrize("sweeps", [True, False])
def test_a_known_acyclic_order_is_swept_without_a_search_or_a_permuted_copy(sweeps, monkeypatch):
    """The caller's block order (the chain's components): with blocks of one state the rows are swept in that
    order (PyAMG's indexed sweep), with no search for components and no SuperLU; without the sweeps the permuted
    triangle of the general path gives the same x. Both against spsolve, with the certificate's bound."""
    import exactq.solvers.linear as L

    if not sweeps:
        monkeypatch.setattr(L, "_SWEEPS", [None])
    elif L.compiled_indexed_sweep() is None:
        pytest.skip("no PyAMG indexed sweep")
    rng = np.random.default_rng(17)
    n = 2000
    A, perm = _hidden_acyclic_system(rng, n, per_row=3, reach=40, weight=0.3)
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.arange(n)
    order = inverse[::-1].copy()  # the last original unknown first: A[order][:, order] is lower triangular
    b = rng.random(n)
    exact = spla.spsolve(A.tocsc(), b)

    def no_search(*a, **k):
        raise AssertionError("searched for components the caller gave")

    monkeypatch.setattr(L, "block_triangular_order", no_search)
    if sweeps:
        monkeypatch.setattr(L.spla, "splu", no_search)
        monkeypatch.setattr(L, "_permuted", no_search)  # swept in place
    kept = A.copy()
    x, info = solve_mmatrix(A, b, blocks=(order, np.ones(n, dtype=np.int64)))
    assert "block triangular" in info["solver"]["why"] and info["solver"]["lu_nnz"] == A.nnz
    assert (A != kept).nnz == 0 and np.array_equal(A.indices, kept.indices)  # the caller's A untouched
    np.testing.assert_allclose(x, exact, rtol=1e-12)
    assert np.all(np.abs(x - exact) <= info["bound_vector"] + 1e-15)


def test_the_chains_components_order_each_restricted_system():
    """_Predecessors.block_order: the chain's strong components (cycles chained one after another, numbered in
    a hidden order) restricted to any set of unknowns put that system in block lower triangular form, blocks
    no larger than the chain's; one component gives None."""
    from exactq.solvers.reachability import _Predecessors

    rng = np.random.default_rng(8)
    k, s = 60, 4
    n = k * s
    rows, cols = [], []
    for c in range(k):  # (this test's chain: cycles of s states, each leaking into a later cycle)
        for i in range(s):
            rows += [c * s + i]
            cols += [c * s + (i + 1) % s]
            if c + 1 < k:
                rows += [c * s + i]
                cols += [int(rng.integers((c + 1) * s, n))]
    P = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    perm = rng.permutation(n)
    P = P[perm][:, perm].tocsr()
    Q = (P - sp.diags(np.asarray(P.sum(axis=1)).ravel())).tocsr()
    graph = _Predecessors(Q)
    for trial in range(5):
        states = rng.random(n) < (1.0 if trial == 0 else 0.6)
        idx = np.flatnonzero(states)
        found = graph.block_order(states)
        order, sizes = found
        assert np.array_equal(np.sort(order), np.arange(idx.size)) and sizes.sum() == idx.size
        assert sizes.max() <= s
        blocks = np.repeat(np.arange(sizes.size), sizes)
        T = (-Q[idx][:, idx])[order][:, order].tocoo()
        above = T.col > T.row
        assert np.all(blocks[T.row[above]] == blocks[T.col[above]])
    ring = sp.csr_matrix(np.roll(np.eye(5), 1, axis=1) - np.eye(5))
    assert _Predecessors(ring).block_order(np.ones(5, dtype=bool)) is None


# ------------------------------------------------------------------ the bounded BiCGSTAB trial before a costly LU
def test_a_costly_predicted_lu_is_preceded_by_a_bounded_bicgstab_trial(monkeypatch):
    Q, coords = grid_generator((60, 60))
    jumps = np.array([1, 1])
    name, details = choose(Q, coords=coords, jumps=jumps)
    assert name == "direct"  # without the trial: the LU
    monkeypatch.setattr(linear, "TRIAL_MIN_SECONDS", 0.0)
    name, details = choose(Q, coords=coords, jumps=jumps, trial=True)
    assert name == "bicgstab" and details["trial_iterations"] >= linear.TRIAL_MIN_ITERATIONS
    assert "BiCGSTAB first" in details["why"]
    it = stationary(Q, coords=coords, jumps=jumps)
    lu = stationary(Q, method="direct", coords=coords, jumps=jumps)
    assert it.method == "bicgstab" and "recovery" not in it.info and "BiCGSTAB first" in it.info["solver"]["why"]
    exact = product_form((60, 60))
    assert np.abs(lu.pi - exact).sum() <= 1e-13
    assert np.abs(it.pi - exact).sum() <= it.info["error_bound_l1"] + 1e-15  # the stated bound holds
    assert it.info["error_bound_l1"] < 1e-10


def test_a_failed_trial_ends_in_the_lu_without_a_warning(monkeypatch):
    import warnings

    Q, coords = grid_generator((60, 60))
    jumps = np.array([1, 1])
    monkeypatch.setattr(linear, "TRIAL_MIN_SECONDS", 0.0)
    monkeypatch.setattr(linear, "TRIAL_MIN_ITERATIONS", 1)
    monkeypatch.setattr(linear, "TRIAL_BUDGET", 0.0)  # one iteration: BiCGSTAB cannot converge
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = stationary(Q, coords=coords, jumps=jumps)
    assert st.method == "direct" and st.info["recovery"][-1]["to"] == "direct"
    np.testing.assert_allclose(st.pi, product_form((60, 60)), rtol=1e-9)
    # the same trial on a reachability system: the LU after the failed iterations, the value checked
    A = sp.identity(Q.shape[0], format="csr") - (Q - sp.diags(Q.diagonal())) / (1.0 + float((-Q.diagonal()).max()))
    b = np.full(A.shape[0], 0.5 / (1.0 + float((-Q.diagonal()).max())))
    x, info = solve_mmatrix(A, b, coords=coords, jumps=jumps)
    assert info["solver"]["name"] == "direct" and "so the LU after all" in info["solver"]["why"]
    np.testing.assert_allclose(A @ x, b, rtol=0, atol=1e-12)


def test_the_mass_estimate_is_the_symmetric_gauss_seidel_sweeps():
    # the estimate's SuperLU triangular solves against a dense re-derivation of the same sweeps
    from exactq.solvers.stationary import _mass_estimate

    Q, _ = grid_generator((12, 9), up=1.3, down=0.7)
    QT = Q.T.toarray()
    d = -np.diag(QT)
    low, up = np.tril(QT, -1), np.triu(QT, 1)
    x = np.full(Q.shape[0], 1.0 / Q.shape[0])
    for _ in range(3):
        y = np.linalg.solve(np.diag(d) - low, up @ x)
        y /= y.max()
        x = np.linalg.solve(np.diag(d) - up, low @ y)
        x /= x.max()
    np.testing.assert_allclose(_mass_estimate(sp.csr_matrix(Q)), x, rtol=1e-12)


def test_jacobi_first_keeps_jacobi_where_it_converges_and_upgrades_where_it_does_not():
    from exactq.solvers.linear import JACOBI_ITERATIONS, JacobiFirst

    n = 4000
    # strongly diagonally dominant: Jacobi converges within its trial
    easy = sp.diags([-np.full(n - 1, 0.2), np.ones(n), -np.full(n - 1, 0.3)], [-1, 0, 1], format="csr")
    b = np.linspace(0.0, 1.0, n)
    prec = JacobiFirst(easy)
    x, info = solve_iterative(easy, b, rtol=1e-14, prec=prec)
    assert info["status"] == 0 and info["preconditioner"] == "jacobi" and info["iterations"] <= JACOBI_ITERATIONS
    np.testing.assert_allclose(x, spla.spsolve(easy.tocsc(), b), rtol=1e-11)
    # a nearly singular birth-death M-matrix: Jacobi stalls, Gauss-Seidel takes over from its iterate
    hard = sp.diags([-np.full(n - 1, 0.5), np.full(n, 1.0 + 1e-3), -np.full(n - 1, 0.5)], [-1, 0, 1], format="csr")
    prec = JacobiFirst(hard)
    x, info = solve_iterative(hard, b, rtol=1e-13, prec=prec)
    assert info["preconditioner"] == "symmetric-gauss-seidel" and info["iterations"] > JACOBI_ITERATIONS
    ref = spla.spsolve(hard.tocsc(), b)
    assert info["status"] == 0
    np.testing.assert_allclose(x, ref, rtol=1e-9)
    # the certificate of the answer holds whichever preconditioner ran
    bound, _ = error_bound(hard, x, b, prec=prec)
    assert np.all(np.abs(x - ref) <= bound + 1e-9 * np.abs(ref))


def test_a_jacobi_trial_that_has_nearly_converged_goes_on_with_jacobi():
    from exactq.solvers.linear import JACOBI_EXTENSION, JACOBI_ITERATIONS, JacobiFirst, _jacobi_extension

    n = 4000
    b = np.linspace(0.0, 1.0, n)
    # off-diagonal 0.4: Jacobi needs about 25 iterations, more than its trial, at a steady rate
    A = sp.diags([-np.full(n - 1, 0.4), np.ones(n), -np.full(n - 1, 0.4)], [-1, 0, 1], format="csr")
    prec = JacobiFirst(A)
    x, info = solve_iterative(A, b, rtol=1e-14, prec=prec)
    assert info["status"] == 0 and info["preconditioner"] == "jacobi"
    assert JACOBI_ITERATIONS < info["iterations"] <= JACOBI_ITERATIONS + JACOBI_EXTENSION + 2
    assert np.linalg.norm(A @ x - b) <= 1e-13 * np.linalg.norm(b)
    np.testing.assert_allclose(x, spla.spsolve(A.tocsc(), b), rtol=1e-11)
    # the projection: a residual 1e-12 after 20 iterations from 1 reaches 1e-14 in 4 more at that rate
    assert _jacobi_extension(1.0, 1e-12, 20, 1e-14) == 4 + 2
    assert _jacobi_extension(1.0, 1e-2, 20, 1e-14) is None  # 120 more: Gauss-Seidel
    assert _jacobi_extension(1.0, 2.0, 20, 1e-14) is None  # diverging
    assert _jacobi_extension(1.0, float("nan"), 20, 1e-14) is None


def test_block_triangular_order_asks_its_acceptance_before_verifying():
    from exactq.solvers.linear import block_triangular_order

    A = sp.csr_matrix([[1.0, -0.5, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 1.0]])
    seen = []
    assert block_triangular_order(A, accept=lambda s: seen.append(sorted(s.tolist())) or False) is None
    assert seen == [[1, 1, 1]]
    order, sizes = block_triangular_order(A, accept=lambda s: True)
    want = block_triangular_order(A)
    assert np.array_equal(order, want[0]) and np.array_equal(sizes, want[1])


# ------------------------------------------------------------------ triangular solves without a factorisation
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("backend", ["sweep", "gstrs", "splu"])
def test_triangle_solves_both_ways_with_each_backend(lower, backend, monkeypatch):
    """Triangle against dense solves, M and M^T: by PyAMG's compiled Gauss-Seidel sweep; without it (a PyAMG
    with another binding) by SuperLU's private gstrs on the triangle; without that (an older or newer SciPy)
    by SuperLU's factorisation of the triangle."""
    import exactq.solvers.linear as L

    monkeypatch.setattr(L, "_SWEEPS", [] if backend == "sweep" else [None])
    monkeypatch.setattr(L, "_GSTRS", [] if backend == "gstrs" else [False])
    rng = np.random.default_rng(5)
    n = 400
    dense = np.tril(rng.random((n, n)) * (rng.random((n, n)) < 0.02), k=-1) * -1.0 + np.diag(rng.random(n) + 0.5)
    M = sp.csr_matrix(dense if lower else dense.T)
    T = L.Triangle(M, lower=lower)
    assert (T._sweep is not None) == (backend == "sweep")
    assert (T._fallback is not None) == (backend == "splu")
    b = rng.random(n)
    for _ in range(2):  # the transposed solve's rows are made once and kept
        np.testing.assert_allclose(T.solve(b), np.linalg.solve(M.toarray(), b), rtol=1e-12)
        np.testing.assert_allclose(T.solve(b, trans="T"), np.linalg.solve(M.toarray().T, b), rtol=1e-12)
    keep, data = b.copy(), M.data.copy()
    T.solve(b)
    assert np.array_equal(b, keep)  # the right-hand side is not overwritten
    assert np.array_equal(M.data, data)  # nor the matrix (not owned)
    with pytest.raises(ZeroDivisionError):
        L.Triangle(sp.csr_matrix(np.tril(np.ones((3, 3)), k=-1)), lower=True)


def test_pyamg_sweep_loads_alone_and_by_the_plain_import(monkeypatch):
    """The sweep comes from PyAMG's extension module alone (without the package's 37 ms __init__), and from the
    plain import when the package cannot be found that way; both solve the same lower triangle."""
    import importlib.util
    import sys

    import exactq.solvers.linear as L

    pytest.importorskip("pyamg")
    M = sp.csr_matrix(np.array([[2.0, 0.0], [-1.0, 4.0]]))
    ip, ix = M.indptr.astype(np.intc), M.indices.astype(np.intc)
    alone = L._pyamg_sweep()
    x = np.zeros(2)
    alone(ip, ix, M.data, x, np.array([2.0, 3.0]), 0, 2, 1)
    np.testing.assert_allclose(x, [1.0, 1.0], rtol=1e-15)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    plain = L._pyamg_sweep()
    assert "pyamg" in sys.modules  # this one came from the package's import
    y = np.zeros(2)
    plain(ip, ix, M.data, y, np.array([2.0, 3.0]), 0, 2, 1)
    np.testing.assert_array_equal(x, y)


def test_triangle_sweep_sums_duplicate_entries_without_changing_the_callers_matrix():
    """A CSR with a repeated entry (as a COO conversion can leave it) solves with the entries summed; the
    caller's arrays are copied first, not summed in place."""
    import exactq.solvers.linear as L

    if not L._sweeps_work():
        pytest.skip("no PyAMG sweep")
    M = sp.csr_matrix((np.array([1.0, 1.0, -1.0, 2.0]), np.array([0, 0, 0, 1]), np.array([0, 2, 4])), shape=(2, 2))
    keep = (M.data.copy(), M.indices.copy())
    x = L.Triangle(M, lower=True).solve(np.array([2.0, 1.0]))
    np.testing.assert_allclose(x, [1.0, 1.0], rtol=1e-15)  # [[2, 0], [-1, 2]] x = [2, 1]
    assert np.array_equal(M.data, keep[0]) and np.array_equal(M.indices, keep[1])


ZEROCONF = """dtmc
const int N;
const double q = 20000/65024;
module host
  s : [0..2] init 0;        // 0 picking an address, 1 probing it, 2 configured
  taken : bool init false;   // the address picked is someone else's
  k : [0..N] init 0;         // probes sent so far
  [pick] s=0 -> q : (s'=1) & (taken'=true) & (k'=0) + 1-q : (s'=1) & (taken'=false) & (k'=0);
  [probe] s=1 & k<N & taken -> 0.1 : (k'=k+1) + 0.9 : (s'=0);
  [probe] s=1 & k<N & !taken -> (k'=k+1);
  [done] s=1 & k=N -> (s'=2);
  [stay] s=2 -> true;
endmodule
rewards "probes" [probe] true : 1; endrewards
"""


@pytest.mark.parametrize("n", [256, 512])
def test_bicgstab_that_converges_only_by_its_recurrence_is_not_believed(n):
    """Zeroconf's expected number of probes (a DTMC with an arrow of returns to the picking state): BiCGSTAB
    reported convergence by its recursively updated residual while the true one was 385 (N = 256: 622.6 for
    256.5, N = 512: a negative expected reward). The true residual is now checked; the answer must match the
    closed form (probes per attempt / the probability that an attempt ends configured) to 1e-9."""
    q, loss = 20000 / 65024, 0.1
    fail = q * (1 - loss ** n)
    exact = ((1 - q) * n + q * sum(loss ** i for i in range(n))) / (1 - fail)
    m = exactq.load_prism("zeroconf.pm", {"N": n}, text=ZEROCONF)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no accuracy warning either
        r, = check_properties(m, 'R{"probes"}=? [ F s=2 ]')
    assert abs(r.value - exact) <= 1e-9 * exact
    assert r.error_estimate is None or r.error_estimate <= 1e-6 * exact



def test_krylov_loops_of_long_vectors_run_blas_on_one_thread_and_restore_it():
    """_blas_single_thread finds the BLAS libraries by name (not threadpoolctl's scan of every library) and
    sets them to one thread inside the block only; short vectors set nothing."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from exactq.solvers.linear import BLAS_THREADED_LENGTH, _blas_single_thread

    before = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}
    with _blas_single_thread(BLAS_THREADED_LENGTH + 1):
        inside = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()
                  if i["user_api"] == "blas"}
    after = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}
    assert set(inside) == set(before) and all(v == 1 for v in inside.values())
    assert after == before
    with _blas_single_thread(BLAS_THREADED_LENGTH):
        assert {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"} == before


def test_a_positive_right_hand_side_certifies_the_answer_itself(monkeypatch):
    """Expected steps (b = 1): the bound comes from x itself, with no second solve, and holds; a wide spread of b
    solves for the certificate vector as before."""
    import exactq.solvers.linear as lin

    n = 2000
    A = sp.diags([-np.full(n - 1, 0.45), np.ones(n), -np.full(n - 1, 0.45)], [-1, 0, 1], format="csr")
    b = np.ones(n)
    exact = spla.spsolve(A.tocsc(), b)
    x = exact * (1 + 1e-9 * np.sin(np.arange(n)))
    calls = []
    real = lin.solve_iterative
    monkeypatch.setattr(lin, "solve_iterative", lambda *a, **k: calls.append(1) or real(*a, **k))
    bound, info = lin.error_bound(A, x, b)
    assert not calls and info["certificate_gamma"] > 0
    assert np.all(np.abs(x - exact) <= bound)
    b2 = np.where(np.arange(n) % 2 == 0, 1.0, 1e3)  # spread 1000 > SELF_CERTIFICATE_SPREAD
    exact2 = spla.spsolve(A.tocsc(), b2)
    bound2, _ = lin.error_bound(A, exact2 * (1 + 1e-9), b2)
    assert calls and np.all(np.abs(exact2 * 1e-9) <= bound2)


@pytest.mark.parametrize("first", [1e-2, 0.9])
def test_a_loose_certificate_vector_still_bounds_the_error(monkeypatch, first):
    """error_bound solves A v = 1 loosely first (BOUND_VECTOR_RTOL), and on to the tighter residual from there when
    that v is no certificate: the bound holds either way (checked against a direct solve, the independent method) and
    is within a quarter of the bound from the exact v = A^-1 1 (7% here at 1e-2)."""
    import exactq.solvers.linear as lin

    rng = np.random.default_rng(4)
    n = 3000  # a random walk on a line that leaves it only at both ends: a nonsingular M-matrix I - P whose rows
    p = rng.uniform(0.3, 0.7, n)  # sum to 0 inside (so v = 1, or a poor v, is no certificate)
    A = sp.diags([-(1 - p[1:]), np.ones(n), -p[:-1]], [-1, 0, 1], format="csr")
    b = np.where(rng.random(n) < 0.01, 1.0, 0.0)
    exact = spla.spsolve(A.tocsc(), b)
    x = exact * (1 + 1e-9 * np.sin(np.arange(n)))
    rtols = []
    real = lin.solve_iterative
    monkeypatch.setattr(lin, "solve_iterative", lambda *a, **k: rtols.append(k["rtol"]) or real(*a, **k))
    monkeypatch.setattr(lin, "BOUND_VECTOR_RTOL", (first, 1e-6))
    bound, info = lin.error_bound(A, x, b)
    assert info["certificate_gamma"] > 0 and np.all(np.abs(x - exact) <= bound)
    tight = (info["residual_inf"] / 1.0) * spla.spsolve(A.tocsc(), np.ones(n))  # v = A^-1 1, g = 1
    assert np.all(bound <= 1.25 * tight + 1e-300) and rtols[0] == first
    if first == 0.9:  # a residual of 90% leaves some (A v)_i <= 0: no certificate, so on to 1e-6
        assert rtols == [0.9, 1e-6]


@pytest.mark.parametrize("wide", [False, True])
def test_scale_rows_in_place_equals_the_diagonal_product(wide):
    rng = np.random.default_rng(7)
    A = sp.random(60, 45, density=0.15, format="csr", random_state=rng)  # (some rows empty at this density)
    if wide:  # 64-bit index arrays, as SciPy keeps them beyond 2^31 entries
        A = sp.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape)
        A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    scale = rng.normal(size=60)
    expected = (sp.diags(scale) @ A).toarray()
    data = A.data
    linear.scale_rows(A, scale)
    assert A.data is data  # in place, no copy
    np.testing.assert_array_equal(A.toarray(), expected)


def test_the_loops_of_small_blas_calls_run_on_one_blas_thread(monkeypatch):
    """GTH (a dger a step) and the uniformisation series (a daxpy a product) ask for one BLAS thread with the
    size of their calls: with both cores of a 2-core machine busy, 160-state GTH took 550 ms on threaded BLAS
    against 2.2 ms on one thread. Small calls ask nothing of threadpoolctl (the sizes decide)."""
    from exactq.solvers import transient
    from exactq.solvers.linear import gth

    asked = []
    real = linear._blas_single_thread

    def spy(n=None):
        asked.append(n)
        return real(n)

    monkeypatch.setattr(linear, "_blas_single_thread", spy)
    Q = grid_generator((12, 14))[0].toarray()
    pi = gth(Q)
    assert asked == [168 * 168] and np.isclose(pi.sum(), 1.0)
    asked.clear()
    walk, _ = grid_generator((5,))
    p, _ = transient.transient(walk, np.eye(5)[0], 2.0)
    assert asked == [5] and np.allclose(p, scipy.linalg.expm(2.0 * walk.toarray())[0], rtol=1e-10)
