"""Linear level reduction against independent solves: GTH (subtraction-free dense
elimination), the sparse LU with a 50-digit refinement, and the compensation series of
the infinite JSQ model; plus the structure test that decides when it applies.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from exactq.solvers.level_reduction import (
    plan_level_reduction,
    stationary_level_reduction,
)
from exactq.solvers.stationary import stationary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactq
from exactq.errors import NotApplicableError

FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def level_chain(sizes, up_rows, seed, density=0.3, spread=0.0):
    """A random irreducible block-tridiagonal generator; level ``b`` moves up only from
    its last ``up_rows[b]`` states. Rates are ``10 ** U(-spread, spread)``.
    """
    rng = np.random.default_rng(seed)
    start = np.concatenate([[0], np.cumsum(sizes)])
    n = int(start[-1])
    rows, cols = [], []
    for b, m in enumerate(sizes):
        idx = np.arange(start[b], start[b + 1])
        if m > 1:  # a cycle keeps each level connected; random extra entries inside the level
            rows += list(idx)
            cols += list(np.roll(idx, -1))
            extra = rng.random((m, m)) < density
            r, c = np.nonzero(extra)
            rows += list(idx[r])
            cols += list(idx[c])
        if b + 1 < len(sizes):
            src = idx[m - up_rows[b]:]
            nxt = np.arange(start[b + 1], start[b + 2])
            rows += list(src)
            cols += list(rng.choice(nxt, len(src)))
        if b > 0:  # every state may fall, and the first one always does
            prev = np.arange(start[b - 1], start[b])
            fall = np.flatnonzero(rng.random(m) < 0.5)
            fall = np.union1d(fall, [0])
            rows += list(idx[fall])
            cols += list(rng.choice(prev, len(fall)))
    rows, cols = np.array(rows), np.array(cols)
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    rates = 10.0 ** rng.uniform(-spread, spread, len(rows))
    Q = sp.csr_matrix((rates, (rows, cols)), shape=(n, n))
    Q.sum_duplicates()
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    levels = np.repeat(np.arange(len(sizes)), sizes)
    return Q, levels


def gth(Q):
    return stationary(Q, method="gth").pi


@FAST
@given(
    sizes=st.lists(st.integers(1, 9), min_size=2, max_size=7),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.0, 0.2, 0.6]),
    spread=st.sampled_from([0.0, 3.0]),
    data=st.data(),
)
def test_random_level_chains_agree_with_gth(sizes, seed, density, spread, data):
    up = [data.draw(st.integers(1, m)) for m in sizes[:-1]] + [0]
    Q, levels = level_chain(sizes, up, seed, density, spread)
    plan, why = plan_level_reduction(Q, levels, min_states_per_level=1, max_dense_work=np.inf)
    assert plan is not None, why
    pi, info = stationary_level_reduction(Q, plan)
    ref = gth(Q)
    assert np.all(pi >= 0) and abs(pi.sum() - 1) < 1e-13
    np.testing.assert_allclose(pi, ref, rtol=1e-9, atol=0)
    assert np.abs(Q.T @ pi).max() <= 1e-12 * np.abs(Q.diagonal()).max()
    assert info["levels"] == len(sizes) and info["upward_states"] == sum(up)


def test_wide_levels_take_the_sparse_lu_and_agree_with_gth():
    """Bandwidth above BAND_MAX inside a level: the SuperLU path, with 40 states per level."""
    Q, levels = level_chain([40, 40, 40, 40], [2, 3, 1, 0], seed=7, density=0.2, spread=2.0)
    plan, _ = plan_level_reduction(Q, levels, min_states_per_level=1, max_dense_work=np.inf)
    pi, info = stationary_level_reduction(Q, plan)
    assert info["banded_levels"] < 3  # the random levels are wider than BAND_MAX
    np.testing.assert_allclose(pi, gth(Q), rtol=1e-9, atol=0)


@pytest.mark.parametrize("servers, lumped, K", [("1,1", True, 150), ("1,1", False, 80), ("1,2", False, 80),
                                                ("1,1,1", True, 30)])
def test_jsq_chains_agree_with_the_refined_lu(servers, lumped, K):
    m = exactq.model("jsq", arrival_rate=1.5, service_rates=servers)
    chain = m.lumped_ctmc(K) if lumped else m.ctmc(K)
    lr = stationary(chain.Q, coords=chain.states, jumps=chain.jumps)
    assert lr.method == "level-reduction"
    assert lr.info["upward_states"] == K  # JSQ: the longest queue grows only from the all-equal state
    mp = stationary(chain.Q, method="mpmath", coords=chain.states, jumps=chain.jumps)
    np.testing.assert_allclose(lr.pi, mp.pi, rtol=1e-11, atol=1e-300)
    assert lr.info["relative_residual"] <= 1e-15


def test_jsq_mean_matches_the_compensation_series():
    """The truncated chain at K = 300 (ρ^300 tail) against the series of the infinite model."""
    m = exactq.model("jsq", arrival_rate=1.8, service_rates="1,1")
    chain = m.lumped_ctmc(300)
    sol = stationary(chain.Q, coords=chain.states, jumps=chain.jumps)
    assert sol.method == "level-reduction"
    mean = float(sol.pi @ chain.states.sum(axis=1))
    series = exactq.solve("jsq", arrival_rate=1.8, service_rates="1,1", measure="mean_number",
                          method="compensation").value
    assert mean == pytest.approx(series, rel=1e-12)


def test_structure_test_says_why_it_does_not_apply():
    n = 300
    Q = sp.diags([np.full(n - 2, 1.0), np.full(n - 1, 2.0)], [2, -1], format="csr")  # jumps of two
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    plan, why = plan_level_reduction(Q, np.arange(n), min_states_per_level=1)
    assert plan is None and "skips a level" in why
    plan, why = plan_level_reduction(Q, np.arange(n) // 10)
    assert plan is None and "states per level" in why
    n = 400  # levels of 100 states and a fall of 150 states, which skips one
    Q = sp.diags([np.ones(n - 1), np.ones(n - 150)], [1, -150], format="csr")
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    with pytest.raises(NotApplicableError, match="level-reduction .* skips a level"):
        stationary(Q, method="level-reduction", coords=np.arange(n)[:, None] // 100)
    with pytest.raises(NotApplicableError, match="coordinates"):
        stationary(Q, method="level-reduction")


def test_many_upward_states_keep_the_sparse_lu():
    """Power-of-d style: an arrival can join a longest queue from most states."""
    Q, levels = level_chain([60] * 6, [60] * 5 + [0], seed=3, density=0.05)
    plan, why = plan_level_reduction(Q, levels, min_states_per_level=1)
    assert plan is None and "move up" in why
    sol = stationary(Q, coords=levels[:, None], jumps=np.ones(1, np.int64))
    assert sol.method == "direct"

