"""The fast paths of the MDP graph code agree with the plain algorithms they replace: the padded-gather
backup with numpy's reduceat, and Prob1E with its trimming worklist with the plain nested fixpoint
(Baier & Katoen 2008, Alg. 46) on random MDPs and on a gambler's-ruin chain (where the plain loop
removed one state per round)."""

import numpy as np
import scipy.sparse as sp

from exactq.solvers.mdp_graph import RowStructure, _backward, backup, prob0a, prob1e


def _random_mdp(rng, n, seed):
    counts = rng.integers(1, 4, n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    m = int(counts.sum())
    P = sp.random(m, n, density=min(1.0, 2.5 / n), random_state=seed, format="csr")
    P.data[:] = rng.random(P.data.size)
    P = sp.csr_matrix(P + sp.csr_matrix((np.full(m, 0.1), (np.arange(m), rng.integers(0, n, m))), shape=(m, n)))
    P = sp.csr_matrix(sp.diags_array(1.0 / np.asarray(P.sum(axis=1)).ravel()) @ P)
    return P, np.append(starts, m)


def test_the_padded_backup_equals_reduceat():
    rng = np.random.default_rng(5)
    for seed in range(40):
        n = int(rng.integers(1, 60))
        P, groups = _random_mdp(rng, n, seed)
        b = rng.random(P.shape[0])
        for v in (rng.random(n), rng.random((n, 2))):
            for sense, op in (("max", np.maximum), ("min", np.minimum)):
                best, q = backup(P, b, v, groups[:-1], sense)
                assert np.array_equal(best, op.reduceat(q, groups[:-1], axis=0))


def _prob1e_plain(P, groups, target):
    st = RowStructure(P, groups)
    constraint = np.ones(st.n_states, dtype=bool)
    U = ~prob0a(P, groups, constraint, target, structure=st)
    while True:
        stay = st.all_successors(U[st.nnz_col]) & U[st.owner]
        R = _backward(st.state_graph(rows=stay, reverse=True), target & U, U & ~target)
        if np.array_equal(R, U):
            return U
        U = R


def test_prob1e_equals_the_plain_fixpoint_on_random_mdps():
    rng = np.random.default_rng(7)
    for seed in range(60):
        n = int(rng.integers(2, 40))
        P, groups = _random_mdp(rng, n, seed)
        target = rng.random(n) < 0.2
        assert np.array_equal(prob1e(P, groups, None, target), _prob1e_plain(P, groups, target))


def test_prob1e_on_a_gamblers_ruin_keeps_only_the_goal():
    N = 3000  # bet 1 (p = 0.49) or bet boldly (p = 0.45); 0 and N absorb
    x = np.arange(1, N)
    rows, cols, vals = [], [], []
    groups = [0]
    r = 0
    for s in range(N + 1):  # the test builds its model with a plain loop; the solver under test does not
        if s in (0, N):
            rows.append(r), cols.append(s), vals.append(1.0)
            r += 1
        else:
            rows += [r, r, r + 1, r + 1]
            cols += [s + 1, s - 1, min(N, 2 * s), max(0, 2 * s - N)]
            vals += [0.49, 0.51, 0.45, 0.55]
            r += 2
        groups.append(r)
    P = sp.csr_matrix((vals, (rows, cols)), shape=(r, N + 1))
    target = np.zeros(N + 1, dtype=bool)
    target[N] = True
    one = prob1e(P, np.array(groups), None, target)
    assert one.tolist() == target.tolist()
    assert x.size == N - 1
