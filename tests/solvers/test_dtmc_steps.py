"""Step-bounded DTMC analysis (exactq.solvers.dtmc) against an independent dense computation.

``P(left U<=k right)`` is the last entry of the dense recursion ``x_{i+1} = 1_right + 1_{left & !right} P x_i``
written here with numpy alone; the solver's restriction to the states that reach ``right`` within ``k`` steps
(a bounded backward search, the rest merged into two absorbing states) must give the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from exactq.solvers import dtmc
from exactq.solvers.dtmc import step_bounded_until


def dense_bounded_until(P, left, right, k):
    x = right.astype(float)
    go = (left & ~right).astype(float)
    for _ in range(k):
        x = right + go * (P @ x)
    return x


def random_chain(rng, n):
    P = rng.random((n, n)) * (rng.random((n, n)) < 3.0 / n)
    P[np.arange(n), rng.integers(0, n, n)] += 0.1
    return P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("share", [0.5, 1.0])  # 1.0: every chain takes the restricted path
def test_restricted_step_iteration_matches_the_dense_recursion(monkeypatch, share):
    monkeypatch.setattr(dtmc, "NEAR_SHARE", share)
    rng = np.random.default_rng(7)
    restricted = 0
    for _ in range(150):
        n = int(rng.integers(2, 50))
        k = int(rng.integers(0, 2 * n))
        P = random_chain(rng, n)
        left, right = rng.random(n) < 0.8, rng.random(n) < 0.1
        got, info = step_bounded_until(sp.csr_array(P), left, right, k)
        restricted += "states_iterated" in info
        want = dense_bounded_until(P, left, right, k)
        assert np.all(got >= 0) and np.all(got <= 1 + 1e-15)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert restricted > 0


def test_a_long_walk_iterates_only_the_states_near_the_target():
    """A biased walk on 0..100,000 started in the middle: within 1,000 steps only the 1,000 states below the
    target level can reach it; the value there is the same as by the whole chain's recursion."""
    n, k, goal = 100_001, 1000, 50_500
    i = np.arange(1, n - 1)
    P = sp.csr_array((np.r_[0.501 * np.ones(n - 2), 0.499 * np.ones(n - 2), 1.0, 1.0],
                      (np.r_[i, i, 0, n - 1], np.r_[i + 1, i - 1, 0, n - 1])), shape=(n, n))
    left, right = np.ones(n, bool), np.arange(n) >= goal
    x, info = step_bounded_until(P, left, right, k)
    assert info["states_iterated"] == k
    lo = goal - k - 5  # the states that matter, and a margin that stays 0
    Ploc = P[lo:goal + 1][:, lo:goal + 1].toarray()
    Ploc[-1] = 0.0
    Ploc[-1, -1] = 1.0
    want = dense_bounded_until(Ploc, np.ones(Ploc.shape[0], bool), np.arange(Ploc.shape[0]) == Ploc.shape[0] - 1, k)
    np.testing.assert_allclose(x[lo:goal + 1], want, rtol=1e-12, atol=1e-300)
    assert np.all(x[:goal - k] == 0) and np.all(x[goal:] == 1)


def _walk(n: int, p: float = 0.45) -> sp.csr_array:
    """A random walk on 0..n-1 (up p, down 1-p, reflecting ends): far more states than a short bound reaches."""
    up = np.full(n - 1, p)
    down = np.full(n - 1, 1 - p)
    P = sp.diags_array([down, up], offsets=[-1, 1], shape=(n, n)).tolil()
    P[0, 0], P[n - 1, n - 1] = 1 - p, p
    return P.tocsr()


@pytest.mark.parametrize("kind", ["cumulative", "instantaneous", "killed"])
def test_values_from_the_initial_states_iterate_only_the_states_they_reach(kind):
    """With sources, the iteration runs on the states reachable within k steps: the same values there as
    the whole chain's (to rounding), NaN elsewhere, and fewer states iterated."""
    from exactq.solvers.dtmc import step_cumulative, step_values

    n, k = 5000, 40
    P = _walk(n)
    r = np.sin(np.arange(n)) ** 2
    src = np.zeros(n, dtype=bool)
    src[[2500, 2510]] = True
    keep = np.arange(n) % 7 != 3
    if kind == "cumulative":
        full, _ = step_cumulative(P, r, k)
        part, info = step_cumulative(P, r, k, sources=src)
    elif kind == "instantaneous":
        full, _ = step_values(P, r, k)
        part, info = step_values(P, r, k, sources=src)
    else:
        full, _ = step_values(P, r, k, keep=keep)
        part, info = step_values(P, r, k, keep=keep, sources=src)
    assert info["states_iterated"] == 2 * k + 1 + 10
    np.testing.assert_allclose(part[src], full[src], rtol=1e-13, atol=1e-15)
    assert np.isnan(part[0]) and np.isnan(part[-1])
    # a bound that reaches most of the chain iterates on all of it (no NaN)
    whole, winfo = step_cumulative(_walk(60), r[:60], 50, sources=np.eye(60, dtype=bool)[30])
    assert "states_iterated" not in winfo and np.all(np.isfinite(whole))


WALK = """dtmc
const int N = 4000;
module walk
  x : [0..N] init 2000;
  [] x>0 & x<N -> 0.45 : (x'=x+1) + 0.55 : (x'=x-1);
  [] x=0 -> 0.45 : (x'=1) + 0.55 : (x'=0);
  [] x=N -> 0.45 : (x'=N) + 0.55 : (x'=N-1);
endmodule
rewards "pos" true : x; endrewards
"""


def test_a_step_bounded_reward_query_reads_its_value_from_the_restricted_iteration(tmp_path):
    """R=? [ C<=k ] and [ I=k ] from the initial state iterate on the 2k+1 states it reaches, and agree with
    the distribution pushed forward k steps (an independent computation) and with a filter's whole-chain
    iteration."""
    import exactq
    from exactq.api import check_properties

    path = tmp_path / "walk.pm"
    path.write_text(WALK)
    model = exactq.load_prism(str(path))
    k, x0 = 25, 2000
    dist = np.zeros(4001)
    dist[x0] = 1.0
    cum = 0.0
    for _ in range(k):  # the law of x after each step, from x0 (no boundary within k steps)
        cum += dist @ np.arange(4001)
        nxt = np.zeros_like(dist)
        nxt[1:] += 0.45 * dist[:-1]
        nxt[:-1] += 0.55 * dist[1:]
        dist = nxt
    inst = dist @ np.arange(4001)
    c, i = check_properties(model, f'R{{"pos"}}=? [ C<={k} ]\nR{{"pos"}}=? [ I={k} ]')
    assert c.value == pytest.approx(cum, rel=1e-13) and i.value == pytest.approx(inst, rel=1e-13)
    assert c.info["states_iterated"] == i.info["states_iterated"] == 2 * k + 1
    f, = check_properties(model, f'filter(max, R{{"pos"}}=? [ C<={k} ], x={x0})')
    assert "states_iterated" not in f.info and f.value == pytest.approx(cum, rel=1e-13)


@pytest.mark.parametrize("levels", [1, 3, dtmc.SEARCH_LEVELS])
@pytest.mark.parametrize("seed", range(6))
def test_the_depth_bounded_search_finds_the_states_a_shortest_path_search_finds(seed, levels, monkeypatch):
    """:func:`dtmc._within_depth` (a search by levels, the deeper levels in one shortest-path call) against
    SciPy's unweighted Dijkstra with a limit from a virtual root."""
    from scipy.sparse.csgraph import dijkstra

    monkeypatch.setattr(dtmc, "SEARCH_LEVELS", levels)

    rng = np.random.default_rng(seed)
    n = 60
    A = sp.random(n, n, density=0.04, random_state=rng, format="csr")
    A.data[rng.random(A.nnz) < 0.1] = 0.0  # stored zeros are no edges
    A = sp.csr_array(A)
    starts = rng.random(n) < 0.05
    starts[0] = True
    allowed = rng.random(n) < 0.8
    for k in (0, 1, 2, 5, 8, n):
        got = dtmc._within_depth(A, starts, k, allowed=allowed)
        # the reference: edges into allowed states only, from a virtual root joined to the starts
        rows = np.repeat(np.arange(n), np.diff(A.indptr))
        e = (A.data > 0) & allowed[A.indices]
        G = sp.csr_array((np.ones(int(e.sum()) + int(starts.sum())),
                          (np.r_[rows[e], np.full(starts.sum(), n)], np.r_[A.indices[e], np.flatnonzero(starts)])),
                         shape=(n + 1, n + 1))
        want = np.isfinite(dijkstra(G, indices=n, unweighted=True, limit=k + 1.5)[:n])
        assert np.array_equal(got, want)
        found = int(np.count_nonzero(want & allowed))
        assert dtmc._within_depth(A, starts, k, allowed=allowed, cap=found) is not None
        if found:
            assert dtmc._within_depth(A, starts, k, allowed=allowed, cap=found - 1) is None
