"""Tests of exactq.solvers.reachability: unbounded until and expected hitting times."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from exactq.errors import ModelError
from exactq.solvers.reachability import expected_time, until_probability


def birth_death(up: float, down: float, N: int, *, absorbing_ends: bool = False) -> sp.csr_array:
    """Birth–death generator on 0..N (up-rate ``up``, down-rate ``down``)."""
    Q = sp.diags_array([np.full(N, down), np.full(N, up)], offsets=[-1, 1], shape=(N + 1, N + 1)).tolil()
    if absorbing_ends:
        Q[0, :] = 0.0
        Q[N, :] = 0.0
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    return sp.csr_array(Q)


def random_generator(n: int, seed: int, density: float = 0.35) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    R = rng.uniform(0.1, 2.0, size=(n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(R, 0.0)
    return sp.csr_array(R - np.diag(R.sum(axis=1)))


def ruin_probability(i: np.ndarray, N: int, up: float, down: float) -> np.ndarray:
    """Probability that the walk started at i hits N before 0."""
    r = down / up
    if r == 1.0:
        return i / N
    return (1 - r**i) / (1 - r**N)


@pytest.mark.parametrize("up, down, N", [(2.0, 1.0, 10), (1.0, 3.0, 7), (1.0, 1.0, 12), (5.0, 0.2, 25)])
def test_gamblers_ruin_closed_form(up, down, N):
    i = np.arange(N + 1)
    expected = ruin_probability(i, N, up, down)
    # absorbing boundaries, path formula F (left = true)
    Q = birth_death(up, down, N, absorbing_ends=True)
    probs, info = until_probability(Q, np.ones(N + 1, bool), i == N)
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-14)
    assert probs[0] == 0.0 and probs[N] == 1.0  # decided exactly by the graph analysis
    assert info["n_prob0"] == 1 and info["n_prob1"] == 1 and info["n_solved"] == N - 1
    assert info["residual"] < 1e-12
    # irreducible M/M/1/N: the same probability as "(q > 0) U (q = N)"
    Q = birth_death(up, down, N)
    probs, _ = until_probability(Q, i > 0, i == N)
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-14)


def test_until_graph_precomputation_exact_zeros_and_ones():
    # 0 <-> 1 -> 2 (target), 1 -> 3 (trap), 4 -> 0 with 4 not in `left`
    Q = sp.csr_array(
        [
            [-1.0, 1.0, 0.0, 0.0, 0.0],
            [1.0, -4.0, 2.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [3.0, 0.0, 0.0, 0.0, -3.0],
        ]
    )
    left = np.array([True, True, False, True, False])
    right = np.arange(5) == 2
    probs, info = until_probability(Q, left, right)
    # from 1: x1 = 1/4 x0 + 2/4, x0 = x1  =>  x1 = 2/3
    np.testing.assert_allclose(probs, [2 / 3, 2 / 3, 1.0, 0.0, 0.0], rtol=1e-14)
    assert probs[3] == 0.0 and probs[4] == 0.0
    # no transitions out of `left` into a probability-0 state: everything is 1
    Q2 = sp.csr_array([[-1.0, 1.0, 0.0], [0.5, -1.5, 1.0], [0.0, 0.0, 0.0]])
    probs, info = until_probability(Q2, np.ones(3, bool), np.arange(3) == 2)
    np.testing.assert_array_equal(probs, [1.0, 1.0, 1.0])
    assert info["n_solved"] == 0
    # empty target: zero everywhere
    probs, _ = until_probability(Q2, np.ones(3, bool), np.zeros(3, bool))
    np.testing.assert_array_equal(probs, 0.0)


@pytest.mark.parametrize("seed", range(12))
def test_until_matches_dense_limit_of_absorbing_chain(seed):
    n = 4 + seed % 9
    Q = random_generator(n, seed)
    rng = np.random.default_rng(100 + seed)
    left = rng.random(n) < 0.75
    right = rng.random(n) < 0.25
    probs, _ = until_probability(Q, left, right)
    # independent method: absorption probabilities as the t -> inf limit of exp(Q' t)
    Qd = Q.toarray()
    Qd[right | ~left] = 0.0
    ref = scipy.linalg.expm(Qd * 2000.0) @ right.astype(float)
    np.testing.assert_allclose(probs, ref, atol=1e-8)


def mm1k_first_passage(lam: float, mu: float, K: int) -> np.ndarray:
    """E[time to reach K] from each state of M/M/1/K, by the level-crossing recursion.

    m_i (time from i to i+1) = 1/lam + (mu/lam) m_{i-1}, m_0 = 1/lam;
    T_i = sum_{j=i}^{K-1} m_j.
    """
    m = np.empty(K)
    m[0] = 1 / lam
    for i in range(1, K):
        m[i] = 1 / lam + (mu / lam) * m[i - 1]
    return np.concatenate([np.cumsum(m[::-1])[::-1], [0.0]])


@pytest.mark.parametrize("lam, mu, K", [(1.0, 2.0, 5), (3.0, 1.0, 20), (0.7, 0.7, 12)])
def test_expected_time_mm1k_first_passage(lam, mu, K):
    Q = birth_death(lam, mu, K)
    times, info = expected_time(Q, np.arange(K + 1) == K)
    np.testing.assert_allclose(times, mm1k_first_passage(lam, mu, K), rtol=1e-11)
    assert info["n_infinite"] == 0 and info["residual"] < 1e-10
    # independent dense solve of -Q_SS x = 1
    Qd = Q.toarray()[:K, :K]
    np.testing.assert_allclose(times[:K], np.linalg.solve(-Qd, np.ones(K)), rtol=1e-11)


def test_expected_time_infinite_where_target_may_be_missed():
    # 0 -> 1 (target) at rate 1, 0 -> 2 (trap) at rate 1, 3 -> 0 at rate 2, 4 isolated
    Q = sp.csr_array(
        [
            [-2.0, 1.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [2.0, 0.0, 0.0, -2.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    times, info = expected_time(Q, np.arange(5) == 1)
    assert times[1] == 0.0
    assert np.all(np.isinf(times[[0, 2, 3, 4]]))
    assert info["n_infinite"] == 4
    # nothing to reach: infinite everywhere
    times, _ = expected_time(Q, np.zeros(5, bool))
    assert np.all(np.isinf(times))


@pytest.mark.parametrize("seed", range(8))
def test_expected_time_random_irreducible(seed):
    n = 5 + seed
    rng = np.random.default_rng(seed)
    R = rng.uniform(0.2, 3.0, size=(n, n))
    np.fill_diagonal(R, 0.0)
    Q = sp.csr_array(R - np.diag(R.sum(axis=1)))
    target = rng.random(n) < 0.3
    target[0] = True
    times, _ = expected_time(Q, target)
    S = ~target
    ref = np.linalg.solve(-Q.toarray()[np.ix_(S, S)], np.ones(S.sum()))
    np.testing.assert_allclose(times[S], ref, rtol=1e-11)
    assert np.all(times[target] == 0.0)


def test_validation():
    Q = birth_death(1.0, 1.0, 3)
    with pytest.raises(ModelError, match="target_mask must have shape"):
        expected_time(Q, np.ones(3, bool))
    with pytest.raises(ModelError, match="rows of Q must sum to 0"):
        until_probability(sp.csr_array([[-1.0, 0.5], [0.0, 0.0]]), True, [False, True])
    with pytest.raises(ModelError, match="square"):
        until_probability(sp.csr_array(np.zeros((2, 3))), True, [False, True])


def _dense_backward_reach(D, sources, movable):
    """The fixed point of ``R = sources | (movable & some edge of D into R)``, densely."""
    want = sources.copy()
    while True:
        grown = want | (movable & D[:, want].any(axis=1))
        if np.array_equal(grown, want):
            return want
        want = grown


def test_backward_reachability_matches_a_dense_fixed_point_on_random_graphs():
    # the predecessor graph (CSC form, entries masked by the movable states) against the fixed point of
    # R = sources | (movable & some positive off-diagonal edge into R), computed densely; zero entries and the
    # diagonal are not edges
    from exactq.solvers.reachability import _backward_reachable, _prob01

    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        Q = sp.random(n, n, density=rng.uniform(0.02, 0.3), random_state=int(rng.integers(1 << 30)), format="csr")
        Q.data[rng.random(Q.data.size) < 0.2] = 0.0
        sources, movable = rng.random(n) < 0.2, rng.random(n) < 0.7
        D = Q.toarray() > 0
        np.fill_diagonal(D, False)
        want = _dense_backward_reach(D, sources, movable)
        assert np.array_equal(_backward_reachable(sp.csr_array(Q), sources, movable), want)
        left = rng.random(n) < 0.8
        no, yes = _prob01(sp.csr_array(Q), left, sources)
        assert not np.any(no & yes) and np.all(yes[sources]) and not np.any(no[sources])


def test_a_generator_keeps_its_diagonal_as_self_loops_and_reaches_the_same_states():
    # a generator's only non-positive entries are its diagonal: the graph takes Q's arrays as they are (self-loops
    # change no reachability and no strong component), with the same answers as the loop-free graph
    from scipy.sparse import csgraph

    from exactq.solvers.reachability import _Predecessors

    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(2, 40))
        R = sp.random(n, n, density=rng.uniform(0.02, 0.3), random_state=int(rng.integers(1 << 30)), format="csr")
        R.setdiag(0.0)
        R.eliminate_zeros()
        Q = sp.csr_array(R - sp.diags(np.asarray(R.sum(axis=1)).ravel()))
        Q.eliminate_zeros()
        g = _Predecessors(Q)
        C = sp.csc_array(Q)
        assert g.indices.size == C.nnz  # nothing dropped
        sources, movable = rng.random(n) < 0.2, rng.random(n) < 0.7
        D = R.toarray() > 0
        want = _dense_backward_reach(D, sources, movable)
        assert np.array_equal(g.restrict(movable).reach(sources), want)
        k, labels = g.components()
        k0, labels0 = csgraph.connected_components(R, directed=True, connection="strong")
        assert k == k0 and np.array_equal(labels[:, None] == labels[None, :], labels0[:, None] == labels0[None, :])


def test_an_ill_conditioned_direct_solve_states_its_bound():
    """A biased gambler's ruin on 0..N (win with p = 0.501, N = 100,000): the reachability system's condition
    grows like N^2 and the LU loses ~3e-9 of P(reach N from N/2), the closed form being
    (1 - (q/p)^(N/2)) / (1 - (q/p)^N). The direct answer now states its certified bound as the error estimate,
    and the bound holds."""
    import warnings

    import exactq
    from exactq.api import check_properties

    n = 100_000
    text = f"""dtmc
const int N = {n};
module walk
  x : [0..N] init {n // 2};
  [] x>0 & x<N -> 0.501 : (x'=x+1) + 0.499 : (x'=x-1);
  [] x=0 | x=N -> true;
endmodule
"""
    r_ratio = 0.499 / 0.501
    exact = (1 - r_ratio ** (n // 2)) / (1 - r_ratio ** n)  # = 1 - 1.4e-87 (1.0 in double)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, = check_properties(exactq.load_prism("walk.pm", text=text), "P=? [ F x=N ]")
    assert r.error_estimate is not None and r.error_estimate < 1e-6
    assert abs(r.value - exact) <= r.error_estimate


def test_kept_index_pointer_matches_the_cumulative_count_with_empty_columns():
    from exactq.solvers.reachability import _kept_indptr

    rng = np.random.default_rng(3)
    for density, share in [(d, s) for d in (0.0, 0.05, 0.5) for s in (0.6, 0.97, 1.0)]:
        # (a share above 7/8 kept counts the dropped entries per column instead)
        M = sp.random(40, 40, density=density, format="csc", random_state=rng)
        M = sp.csc_matrix(M)
        keep = rng.random(M.nnz) < share
        want = np.concatenate([[0], np.cumsum(keep)])[M.indptr]
        got = _kept_indptr(keep, M.indptr)
        assert np.array_equal(got, want)
        # the matrix the kept entries form is the masked one
        kept = sp.csc_matrix((M.data[keep], M.indices[keep], got), shape=M.shape)
        masked = M.copy()
        masked.data = np.where(keep, masked.data, 0.0)
        masked.eliminate_zeros()
        assert (kept != masked).nnz == 0


def test_a_dtmc_self_loop_changes_no_reachability():
    """The reversed graph keeps a stochastic matrix's self-loops; prob0/prob1 are those of the loop-free one."""
    from exactq.solvers.reachability import _prob01

    P = sp.csr_matrix(np.array([[0.5, 0.5, 0.0, 0.0],
                                [0.0, 0.2, 0.3, 0.5],
                                [0.0, 0.0, 1.0, 0.0],
                                [0.0, 0.0, 0.0, 1.0]]))
    left = np.array([True, True, False, False])
    right = np.array([False, False, False, True])
    no, yes = _prob01(P, left, right)
    Q = (P - sp.eye(4)).tocsr()
    no_q, yes_q = _prob01(Q, left, right)
    assert no.tolist() == no_q.tolist() == [False, False, True, False]
    assert yes.tolist() == yes_q.tolist() == [False, False, False, True]



def _absorbing_chain(rng, n_transient, values):
    """A random generator: ``n_transient`` transient states, then one absorbing state per entry of ``values``
    (returned as the value vector). The transient states form three groups: the first third moves only among
    itself and into the absorbing states of ``values[0]``'s value, the second third likewise for the other
    values, the last third anywhere; each state has a path to an absorbing state of its group."""
    values = np.asarray(values, dtype=float)
    na = len(values)
    n = n_transient + na
    group = np.minimum(np.arange(n_transient) * 3 // n_transient, 2)
    first = values == values[0]
    other = ~first if (~first).any() else first  # (one value: both groups end in it)
    allowed = np.ones((n_transient, n), dtype=bool)
    absorbing = np.arange(n) >= n_transient
    for g, ok in ((0, first), (1, other)):
        rows = group == g
        allowed[np.ix_(rows, np.flatnonzero(~absorbing))] = False
        allowed[np.ix_(rows, np.flatnonzero(rows))] = True
        allowed[np.ix_(rows, n_transient + np.flatnonzero(~ok))] = False
    D = np.zeros((n, n))
    D[:n_transient] = np.where(allowed & (rng.random((n_transient, n)) < 0.2), 0.5 + rng.random((n_transient, n)), 0)
    for i in range(n_transient):  # a way out for every transient state, into its group's absorbing states
        ok = first if group[i] == 0 else (other if group[i] == 1 else np.ones(na, bool))
        D[i, n_transient + rng.choice(np.flatnonzero(ok))] += 1.0
    np.fill_diagonal(D, 0.0)
    np.fill_diagonal(D, -D.sum(axis=1))
    v = np.concatenate([np.zeros(n_transient), values])
    return sp.csr_array(D), absorbing, v


@pytest.mark.parametrize("seed", range(6))
def test_absorption_values_settled_by_graph_match_a_dense_solve(seed):
    # the values that graph analysis settles (states reaching absorbing states of one value only) against the
    # full first-step system solved densely (the independent method): every state, settled or not
    from exactq.solvers.reachability import absorption_values

    rng = np.random.default_rng(seed)
    nt = 45
    Q, absorbing, v = _absorbing_chain(rng, nt, [0.0, 2.5, 7.0, 2.5, 0.0, 7.0])
    out, info = absorption_values(Q, absorbing, v)
    D = Q.toarray()
    T = np.flatnonzero(~absorbing)
    want = np.linalg.solve(-D[np.ix_(T, T)], D[np.ix_(T, np.flatnonzero(absorbing))] @ v[absorbing])
    assert np.allclose(out[T], want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(out[absorbing], v[absorbing])
    assert info["n_settled"] >= nt // 3 and info["n_settled"] + info["n_solved"] == nt
    assert np.all(out[:nt // 3] == 0.0)  # the first group ends in value 0 exactly


def test_absorption_with_one_value_solves_nothing():
    from exactq.solvers.reachability import absorption_values

    Q, absorbing, v = _absorbing_chain(np.random.default_rng(7), 30, [3.25] * 4)
    out, info = absorption_values(Q, absorbing, v)
    assert info["n_solved"] == 0 and info["n_settled"] == 30
    assert np.all(out == 3.25)


def test_absorption_with_many_values_still_solves_them():
    # more distinct values than SETTLE_MAX_VALUES: nothing settled by value, the same answer as a dense solve
    from exactq.solvers.reachability import SETTLE_MAX_VALUES, absorption_values

    Q, absorbing, v = _absorbing_chain(np.random.default_rng(3), 25, np.arange(SETTLE_MAX_VALUES + 2.0))
    out, info = absorption_values(Q, absorbing, v)
    assert info["n_settled"] == 0
    D = Q.toarray()
    want = np.linalg.solve(-D[:25, :25], D[:25, 25:] @ v[25:])
    assert np.allclose(out[:25], want, rtol=1e-12, atol=1e-12)


def test_a_component_numbering_that_is_not_topological_orders_no_system(monkeypatch):
    """_Predecessors.block_order checks the chain's numbering of its components on every transition: numbered
    in another order (as another algorithm might), it gives None, and the queries' values are the same (the
    system's own search, or the general solvers)."""
    import scipy.sparse.csgraph as csgraph

    from exactq.solvers.reachability import _Predecessors, expected_time, until_probability

    rng = np.random.default_rng(21)
    n = 300
    rows = np.repeat(np.arange(n - 1), 3)
    cols = np.minimum(rows + rng.integers(1, 30, rows.size), n - 1)  # a DAG towards the absorbing state n - 1
    Q = sp.csr_matrix((rng.random(rows.size) + 0.1, (rows, cols)), shape=(n, n))
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    target = np.arange(n) == n - 1
    left = np.ones(n, dtype=bool)
    want_p, _ = until_probability(Q, left, target)
    want_t, _ = expected_time(Q, target)
    graph = _Predecessors(Q)
    assert graph.block_order(~target) is not None  # Pearce's numbering: a topological order
    real = csgraph.connected_components

    def scrambled(*a, **kw):
        k, labels = real(*a, **kw)
        return k, np.random.default_rng(0).permutation(k)[labels]

    monkeypatch.setattr(csgraph, "connected_components", scrambled)
    graph = _Predecessors(Q)
    assert graph.block_order(~target) is None
    p, _ = until_probability(Q, left, target, graph=graph)
    t, _ = expected_time(Q, target, graph=graph)
    np.testing.assert_allclose(p, want_p, rtol=1e-12)
    np.testing.assert_allclose(t, want_t, rtol=1e-12)


@pytest.mark.parametrize("pays", ["yes", "no", "not after the cut"])
def test_a_system_cut_in_its_block_order_gives_the_answer_in_the_states_order(monkeypatch, pays):
    """With cycles for components, _solve_scaled cuts the system from Q in the chain's block order (no permuted
    copy): the answers and their bounds come back in the states' order and match a dense solve. When the block
    LU does not pay (asked before the cut, or again after it with the system's own entries), the system is in
    the states' order for the general solvers."""
    from exactq.solvers import linear
    from exactq.solvers.reachability import _Predecessors, expected_reward

    rng = np.random.default_rng(44)
    k, s = 120, 3
    n = k * s + 2  # cycles of three states, each leaking into a later cycle or one of two absorbing states
    rows, cols, vals = [], [], []
    for c in range(k):
        for i in range(s):
            rows += [c * s + i, c * s + i]
            cols += [c * s + (i + 1) % s, int(rng.integers((c + 1) * s, n))]
            vals += [1.0 + rng.random(), 0.2 + rng.random()]
    perm = rng.permutation(n)
    R = sp.csr_matrix((vals, (perm[rows], perm[cols])), shape=(n, n))
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    goal = np.arange(n) == perm[n - 1]
    absorbing = goal | (np.arange(n) == perm[n - 2])
    reward = rng.random(n) + 0.5
    if pays == "no":
        monkeypatch.setattr(linear, "block_lu_pays", lambda *a, **kw: False)
    elif pays == "not after the cut":  # in _solve_scaled the bound of the rows' entries says yes, the system's no
        import sys

        asked = {"n": 0}

        def first_yes(*a, **kw):
            if sys._getframe(1).f_code.co_name != "_solve_scaled":
                return False
            asked["n"] += 1
            return asked["n"] % 2 == 1

        monkeypatch.setattr(linear, "block_lu_pays", first_yes)
    graph = _Predecessors(Q)
    p, pinfo = until_probability(Q, np.ones(n, dtype=bool), goal, graph=graph)
    r, rinfo = expected_reward(Q, absorbing, reward, graph=graph)
    D = Q.toarray()
    keep = ~absorbing
    A = -D[np.ix_(keep, keep)]
    want_p, want_r = goal.astype(float), np.zeros(n)
    want_p[keep] = np.linalg.solve(A, D[np.ix_(keep, goal)].sum(axis=1))
    want_r[keep] = np.linalg.solve(A, reward[keep])
    np.testing.assert_allclose(p, want_p, rtol=1e-12)
    np.testing.assert_allclose(r, want_r, rtol=1e-12)
    assert rinfo["n_solved"] == n - 2 and pinfo["n_solved"] > 200  # (both past the small systems' solvers)
    for info in (pinfo, rinfo):
        assert ("block triangular" in info["solver"]["why"]) == (pays == "yes")
    assert np.all(pinfo["lower"] <= want_p + 1e-15) and np.all(want_p <= pinfo["upper"] + 1e-15)
