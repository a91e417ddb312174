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
