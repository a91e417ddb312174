"""Tests of exactq.solvers.transient: Fox–Glynn weights, uniformisation, bounded until."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import expm_multiply
from scipy.stats import poisson

from exactq.errors import ModelError
from exactq.solvers.transient import bounded_until, cumulative_reward, fox_glynn, transient, transient_pair, transient_values


# ----------------------------------------------------------------------------- helpers
def random_generator(n: int, seed: int, density: float = 0.4) -> sp.csr_array:
    """A random CTMC generator with rates in [0.1, 2] (not necessarily irreducible)."""
    rng = np.random.default_rng(seed)
    R = rng.uniform(0.1, 2.0, size=(n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(R, 0.0)
    return sp.csr_array(R - np.diag(R.sum(axis=1)))


def mm1k(lam: float, mu: float, K: int) -> sp.csr_array:
    """M/M/1/K generator on states 0..K."""
    up = np.full(K, lam)
    down = np.full(K, mu)
    Q = sp.diags_array([down, up], offsets=[-1, 1], shape=(K + 1, K + 1)).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    return sp.csr_array(Q)


def mm1k_stationary(rho: float, K: int) -> np.ndarray:
    p = rho ** np.arange(K + 1)
    return p / p.sum()


# ----------------------------------------------------------------------------- Fox–Glynn
@pytest.mark.parametrize("lam", [1e-3, 0.3, 1.0, 10.0, 123.4, 1e4])
@pytest.mark.parametrize("eps", [1e-6, 1e-12])
def test_fox_glynn_matches_scipy_poisson(lam, eps):
    fg = fox_glynn(lam, eps)
    k = np.arange(fg.left, fg.right + 1)
    ref = poisson.pmf(k, lam)
    # weights are conditioned on the window: relative deviation <= lost mass (+ rounding)
    np.testing.assert_allclose(fg.weights, ref, rtol=max(2 * eps, 1e-10), atol=0)
    assert math.isclose(math.fsum(fg.weights), 1.0, rel_tol=1e-14)
    assert fg.left <= math.floor(lam) <= fg.right
    true_lost = poisson.cdf(fg.left - 1, lam) + poisson.sf(fg.right, lam)
    # a rigorous bound, and within the requested eps
    assert true_lost <= fg.total_mass_lost * (1 + 1e-9) + 1e-300
    assert fg.total_mass_lost <= eps
    # the window is tight: dropping either end term would lose more than eps/4 on that side
    mode = math.floor(lam)
    assert fg.right == mode or poisson.sf(fg.right - 1, lam) > eps / 4 * (1 - 1e-9)
    assert fg.left in (0, mode) or poisson.cdf(fg.left, lam) > eps / 4 * (1 - 1e-9)


@pytest.mark.parametrize("lam", [1e5, 1e7])
def test_fox_glynn_large_rate_against_mpmath(lam):
    fg = fox_glynn(lam, 1e-12)
    assert np.all(np.isfinite(fg.weights)) and np.all(fg.weights > 0)
    assert fg.right - fg.left < 20 * math.sqrt(lam)
    idx = np.linspace(0, fg.right - fg.left, 9).astype(int)
    with mpmath.workdps(30):
        for i in idx:
            k = fg.left + int(i)
            exact = mpmath.exp(-mpmath.mpf(lam) + k * mpmath.log(lam) - mpmath.loggamma(k + 1))
            assert fg.weights[i] == pytest.approx(float(exact), rel=1e-11)


def test_fox_glynn_zero_and_invalid():
    fg = fox_glynn(0.0)
    assert (fg.left, fg.right, fg.total_mass_lost) == (0, 0, 0.0)
    np.testing.assert_array_equal(fg.weights, [1.0])
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ModelError, match="rate_time"):
            fox_glynn(bad)
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(ModelError, match="eps"):
            fox_glynn(1.0, bad)


# ----------------------------------------------------------------------------- transient
@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.integers(0, 2**32 - 1), st.floats(0.01, 5.0))
def test_transient_matches_expm_multiply(n, seed, t):
    Q = random_generator(n, seed)
    rng = np.random.default_rng(seed + 1)
    p0 = rng.random(n)
    p0 /= p0.sum()
    p, info = transient(Q, p0, t, eps=1e-12)
    ref = expm_multiply(Q.T * t, p0)
    np.testing.assert_allclose(p, ref, atol=1e-11, rtol=1e-9)
    assert np.all(p >= 0) and math.isclose(p.sum(), 1.0, rel_tol=1e-12)
    assert info["truncated_mass"] <= 1e-12
    if info["fox_glynn"] is not None:  # None: the random chain has no transitions
        assert info["matvecs"] == info["fox_glynn"]["right"]
    if n <= 10:
        dense = p0 @ scipy.linalg.expm(Q.toarray() * t)
        np.testing.assert_allclose(p, dense, atol=1e-11, rtol=1e-9)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**32 - 1), st.floats(0.01, 5.0))
def test_transient_pair_matches_the_exponential_of_the_augmented_generator(n, seed, t):
    """p(t) and its integral from one forward pass, against expm of [[Q, I], [0, 0]] t (whose top right
    block is the integral of exp(Q u) over [0, t]) and against the backward passes read at the start."""
    Q = random_generator(n, seed)
    rng = np.random.default_rng(seed + 2)
    p0 = rng.random(n)
    p0 /= p0.sum()
    p, c, info = transient_pair(Q, p0, t, eps=1e-13)
    big = np.block([[Q.toarray(), np.eye(n)], [np.zeros((n, n)), np.zeros((n, n))]]) * t
    E = scipy.linalg.expm(big)
    np.testing.assert_allclose(p, p0 @ E[:n, :n], atol=1e-11, rtol=1e-9)
    np.testing.assert_allclose(c, p0 @ E[:n, n:], atol=1e-11, rtol=1e-9)
    assert np.all(p >= 0) and math.isclose(p.sum(), 1.0, rel_tol=1e-12) and math.isclose(c.sum(), t, rel_tol=1e-10)
    r = rng.uniform(0.0, 3.0, n)
    back_c, _ = cumulative_reward(Q, r, t, eps=1e-13)
    back_i, _ = transient_values(Q, r, t, eps=1e-13)
    assert float(c @ r) == pytest.approx(float(p0 @ back_c), rel=1e-10, abs=1e-12)
    assert float(p @ r) == pytest.approx(float(p0 @ back_i), rel=1e-10, abs=1e-12)
    assert info["truncated_mass"] <= 1e-13


def test_transient_mm1k_and_convergence_to_stationary():
    lam, mu, K = 1.0, 1.5, 8
    Q = mm1k(lam, mu, K)
    p0 = np.zeros(K + 1)
    p0[0] = 1.0
    for t in (0.1, 1.0, 7.5):
        p, _ = transient(Q, p0, t)
        np.testing.assert_allclose(p, expm_multiply(Q.T * t, p0), atol=1e-12)
        np.testing.assert_allclose(p, p0 @ scipy.linalg.expm(Q.toarray() * t), atol=1e-12)
    p, info = transient(Q, p0, 400.0)
    np.testing.assert_allclose(p, mm1k_stationary(lam / mu, K), atol=1e-10)
    assert info["uniformisation_rate"] == pytest.approx(1.02 * (lam + mu))


def test_transient_two_state_closed_form():
    a, b = 2.0, 0.7
    Q = sp.csr_array([[-a, a], [b, -b]])
    t = np.linspace(0.0, 4.0, 9)
    for ti in t:
        p, _ = transient(Q, [1.0, 0.0], ti)
        assert p[1] == pytest.approx(a / (a + b) * (1 - math.exp(-(a + b) * ti)), abs=1e-13)


def test_transient_t_zero_and_validation():
    Q = mm1k(1.0, 2.0, 3)
    p0 = np.array([0.25, 0.25, 0.5, 0.0])
    p, info = transient(Q, p0, 0.0)
    np.testing.assert_array_equal(p, p0)
    assert info["matvecs"] == 0
    with pytest.raises(ModelError, match="time t"):
        transient(Q, p0, -1.0)
    with pytest.raises(ModelError, match="time t"):
        transient(Q, p0, float("inf"))
    with pytest.raises(ModelError, match="sum to 1"):
        transient(Q, [0.5, 0.0, 0.0, 0.0], 1.0)
    with pytest.raises(ModelError, match=r"p0\[1\]"):
        transient(Q, [1.5, -0.5, 0.0, 0.0], 1.0)
    with pytest.raises(ModelError, match="shape"):
        transient(Q, [1.0, 0.0], 1.0)
    with pytest.raises(ModelError, match="row 0"):
        transient(sp.csr_array([[-1.0, 2.0], [1.0, -1.0]]), [1.0, 0.0], 1.0)
    with pytest.raises(ModelError, match="off-diagonal"):
        transient(sp.csr_array([[1.0, -1.0], [1.0, -1.0]]), [1.0, 0.0], 1.0)
    # a chain without transitions stays put
    p, _ = transient(sp.csr_array((2, 2)), [0.3, 0.7], 5.0)
    np.testing.assert_array_equal(p, [0.3, 0.7])


# ----------------------------------------------------------------------------- bounded until
def test_bounded_until_single_exponential():
    lam = 3.0
    Q = sp.csr_array([[-lam, lam], [0.0, 0.0]])
    for t in (0.0, 0.05, 0.4, 2.0):
        probs, info = bounded_until(Q, [True, True], [False, True], t)
        assert probs[0] == pytest.approx(1 - math.exp(-lam * t), abs=1e-13)
        assert probs[1] == 1.0
        assert info["truncated_mass"] <= 1e-12


def test_bounded_until_competing_exponentials():
    # 0 -> 1 at rate a (target), 0 -> 2 at rate b (a ~left & ~right trap), 2 -> 0 at rate 5
    a, b, t = 1.3, 0.6, 1.7
    Q = sp.csr_array([[-(a + b), a, b], [0.0, 0.0, 0.0], [5.0, 0.0, -5.0]])
    left = np.array([True, False, False])
    right = np.array([False, True, False])
    probs, _ = bounded_until(Q, left, right, t)
    expected = a / (a + b) * (1 - math.exp(-(a + b) * t))
    np.testing.assert_allclose(probs, [expected, 1.0, 0.0], atol=1e-13)


def test_bounded_until_hypoexponential_and_left_restriction():
    lam, mu, t = 2.0, 0.5, 3.0
    Q = sp.csr_array([[-lam, lam, 0.0], [0.0, -mu, mu], [0.0, 0.0, 0.0]])
    right = np.array([False, False, True])
    probs, _ = bounded_until(Q, np.ones(3, bool), right, t)
    expected = 1 - (mu * math.exp(-lam * t) - lam * math.exp(-mu * t)) / (mu - lam)
    assert probs[0] == pytest.approx(expected, abs=1e-13)
    assert probs[1] == pytest.approx(1 - math.exp(-mu * t), abs=1e-13)
    # the path must pass through state 1, which violates `left`
    probs, _ = bounded_until(Q, np.array([True, False, False]), right, t)
    np.testing.assert_allclose(probs, [0.0, 0.0, 1.0], atol=1e-15)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 20), st.integers(0, 2**32 - 1), st.floats(0.05, 4.0))
def test_bounded_until_matches_expm_on_absorbing_chain(n, seed, t):
    Q = random_generator(n, seed)
    rng = np.random.default_rng(seed + 7)
    left = rng.random(n) < 0.7
    right = rng.random(n) < 0.3
    probs, info = bounded_until(Q, left, right, t)
    Qd = Q.toarray()
    Qd[right | ~left] = 0.0
    ref = scipy.linalg.expm(Qd * t) @ right.astype(float)
    np.testing.assert_allclose(probs, ref, atol=1e-11)
    assert np.all((probs >= 0) & (probs <= 1))


def test_bounded_until_validation():
    Q = mm1k(1.0, 2.0, 3)
    with pytest.raises(ModelError, match="right_mask must have shape"):
        bounded_until(Q, np.ones(4, bool), np.ones(3, bool), 1.0)
    with pytest.raises(ModelError, match="boolean mask"):
        bounded_until(Q, np.ones(4, bool), np.full(4, 0.5), 1.0)
    with pytest.raises(ModelError, match="time t"):
        bounded_until(Q, True, np.arange(4) == 3, -0.1)


def test_huge_time_bounds_stop_at_the_unbounded_limit_with_a_bound():
    """P(F<=t full) on M/M/2/5 for t = 1e12: about 1e12 products without steady-state detection."""
    lam, mu, K = 2.0, 1.0, 5
    rates_up = np.full(K, lam)
    rates_down = mu * np.minimum(np.arange(1, K + 1), 2)
    Q = sp.diags_array([rates_down, rates_up], offsets=[-1, 1], shape=(K + 1, K + 1)).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    target = np.arange(K + 1) == K
    probs, info = bounded_until(Q.tocsr(), np.ones(K + 1, bool), target, 1e12)
    assert info["matvecs"] < 10_000 and info["truncated_mass"] <= 1e-12
    assert np.all(np.abs(probs - 1.0) <= info["truncated_mass"])  # the target is reached surely
    d = info["steady_state_detection"]
    assert d["gap_to_limit"] <= 5e-13 and d["poisson_mass_before"] == 0.0
    # a restricted until that may fail: gambler's ruin from state 1, P(n > 0 U n = K) = (1 - r) / (1 - r^K)
    left = np.arange(K + 1) > 0
    p3, info3 = bounded_until(Q.tocsr(), left, target, 1e9)
    down = mu * np.minimum(np.arange(1, K + 1), 2)
    ratios = np.cumprod(down[:-1] / rates_up[1:])  # prod_{j<=i} mu_j / lambda_j for i = 1..K-1
    exact = 1.0 / (1.0 + ratios.sum())
    assert abs(p3[1] - exact) <= info3["truncated_mass"] + 1e-14 and 0 < exact < 1
    assert "steady_state_detection" in info3


@pytest.mark.parametrize("order", ["rows", "columns", "diagonals"])
def test_both_storage_orders_of_the_products_agree_with_expm(order, monkeypatch):
    """The products' storage order is chosen by a timed trial; either order gives the same distribution."""
    import exactq.solvers.transient as tr

    rng = np.random.default_rng(7)
    n = 40
    R = sp.random(n, n, density=0.2, random_state=rng, format="csr") * 3.0
    R.setdiag(0.0)
    R.eliminate_zeros()
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    p0 = np.zeros(n)
    p0[0] = 1.0
    t = 40.0 / (1.02 * float(np.max(-Q.diagonal())))  # about 40 products
    monkeypatch.setattr(tr, "TRIAL_MIN_PRODUCTS", 0)  # a trial even for this short series
    orig = tr._Stepper.__init__

    def init(self, *a, **k):  # then `order`, whichever the trial picked
        orig(self, *a, **k)
        assert self.trial is not None
        if self.order != order:
            if order == "diagonals":
                self.M, self.order, self.kernel = sp.dia_matrix(self.M), order, None
                return
            M = sp.csr_matrix(self.M) if order == "rows" else sp.csc_matrix(self.M)
            self.M, self.order = M, order
            self.kernel = tr._csr_matvec if order == "rows" else tr._csc_matvec

    monkeypatch.setattr(tr._Stepper, "__init__", init)
    p, _ = transient(Q, p0, t)
    exact = expm_multiply((Q * t).T.tocsc(), p0)
    assert np.allclose(p, exact, rtol=0, atol=1e-12)


def test_a_banded_matrix_is_tried_by_diagonals_and_a_scattered_one_is_not():
    import exactq.solvers.transient as tr

    rng = np.random.default_rng(3)
    n = 300
    band = sp.diags([rng.random(n - 2), rng.random(n), rng.random(n - 1)], [-2, 0, 1], format="csr")
    b = rng.random(n)
    step = tr._Stepper(band, b, products=tr.TRIAL_MIN_PRODUCTS)
    assert "diagonals" in step.trial["seconds_per_product"]
    x = rng.random(n)
    assert np.allclose(step(x.copy()), band @ x + b, rtol=1e-15, atol=1e-15)
    scattered = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    assert tr._diagonals(scattered) is None  # on hundreds of diagonals: never stored by them
    assert tr._diagonals(sp.csr_matrix((n, n))) is None


def test_a_limit_that_cannot_be_solved_leaves_the_sum_to_run_to_the_end(monkeypatch):
    """Steady-state detection is an optimisation: when its solve fails, the full Poisson sum answers."""
    import exactq.solvers.transient as tr
    from exactq.errors import ConvergenceError
    from exactq.solvers.transient import transient_values

    Q = sp.csr_array([[-2.0, 2.0], [1.0, -1.0]])
    t = 30_000.0 / 2.04  # rate_time 30,000 > STEADY_STATE_MIN_STEPS: detection on
    ref, _ = transient_values(Q, [0.0, 1.0], t)

    def fail(*a, **k):
        raise ConvergenceError("no stationary solver gave a valid vector (test)")

    monkeypatch.setattr(tr, "long_run_values", fail)
    out, info = transient_values(Q, [0.0, 1.0], t)
    assert info["fox_glynn"] is not None and info["matvecs"] == info["fox_glynn"]["right"]  # summed to the end
    np.testing.assert_allclose(out, 2 / 3, rtol=1e-10)
    np.testing.assert_allclose(out, ref, rtol=1e-10)


def test_a_generator_is_validated_once_but_new_arrays_are_checked_again():
    """as_generator's memo (solvers.transient.validated) returns the first validation's array for the same
    matrix object with the same arrays, and validates again when the matrix is given new arrays or when another
    object with equal contents comes."""
    from exactq.solvers.dtmc import as_stochastic
    from exactq.solvers.transient import as_generator

    Q = sp.csr_array(np.array([[-1.0, 1.0], [2.0, -2.0]]))
    A = as_generator(Q)
    assert as_generator(Q) is A
    bad = Q.copy()
    bad.data = np.array([-1.0, -1.0, 2.0, -2.0])  # new arrays: an off-diagonal entry < 0
    with pytest.raises(ModelError, match="off-diagonal"):
        as_generator(bad)
    Q.data = bad.data  # the validated object itself, given new arrays
    with pytest.raises(ModelError, match="off-diagonal"):
        as_generator(Q)
    P = sp.csr_array(np.array([[0.5, 0.5], [0.0, 1.0]]))
    assert as_stochastic(P) is as_stochastic(P)
    with pytest.raises(ModelError, match="sum to 1"):
        as_stochastic(sp.csr_array(np.array([[0.5, 0.4], [0.0, 1.0]])))
    with pytest.raises(ModelError):
        as_generator(P)  # the stochastic matrix's memo says nothing about it as a generator


CELL = """ctmc
const int N = 3000;
module cell
  calls : [0..N] init 0;
  [] calls < N -> 70 : (calls'=calls+1);
  [] calls > 0 -> calls : (calls'=calls-1);
endmodule
label "busy" = calls >= 80;
rewards "calls" true : calls; endrewards
"""


def test_time_bounded_queries_from_the_initial_state_use_a_finite_state_projection(tmp_path, monkeypatch):
    """An M/M/infinity queue truncated at 3,000 (uniformisation rate ~3,000 on the whole chain) started
    empty: P(F<=t busy), E[calls at t] and E[calls accumulated to t] from the initial state come from the
    few hundred states reached, within their error estimates of expm_multiply on the whole chain (and of
    the closed form E[calls at t] = 70 (1 - e^-t)); a filter, read in every state, is not projected."""
    import exactq
    import exactq.solvers.csl as csl
    from exactq.api import check_properties

    monkeypatch.setattr(csl, "PROJECTION_MIN_WORK", 0.0)  # (the chain is kept small: projected at any cost)
    path = tmp_path / "cell.sm"
    path.write_text(CELL)
    model = exactq.load_prism(str(path))
    Q = sp.csc_matrix(model.built.chain.Q)
    t = 1.0
    p, inst, cum = check_properties(model, 'P=? [ F<=1 "busy" ]\nR{"calls"}=? [ I=1 ]\nR{"calls"}=? [ C<=1 ]')
    for r in (p, inst, cum):
        assert r.info["projection"]["states"] < 1000 and r.error_estimate < 1e-8
    assert inst.value == pytest.approx(70 * (1 - math.exp(-t)), rel=1e-11)
    calls = np.arange(Q.shape[0], dtype=float)
    start = np.zeros(Q.shape[0])
    start[0] = 1.0
    assert abs(inst.value - expm_multiply(Q.T * t, start) @ calls) <= inst.error_estimate + 1e-9
    # P(F<=t busy): the busy states made absorbing, the mass in them at t
    busy = calls >= 80
    Qa = sp.lil_matrix(Q)
    Qa[np.flatnonzero(busy)] = 0.0
    pt = expm_multiply(sp.csc_matrix(Qa).T * t, start)
    assert abs(p.value - pt[busy].sum()) <= p.error_estimate + 1e-12
    # the cumulative reward, as the integral of the mean: 70 (t - 1 + e^-t)
    assert cum.value == pytest.approx(70 * (t - 1 + math.exp(-t)), rel=1e-10)
    f, = check_properties(model, 'filter(max, R{"calls"}=? [ I=1 ], calls=0)')
    assert "projection" not in f.info and f.value == pytest.approx(inst.value, rel=1e-10)


def test_instantaneous_and_cumulative_rewards_at_one_time_share_one_forward_pass(tmp_path):
    """R=? [ I=t ] and R=? [ C<=t ] of any reward structure at one t, read at the single initial state: the
    first query makes the forward pair, the others read it (matvecs 0); every value agrees with the
    backward pass of the whole chain (a filter) within the error estimates, and with the closed forms of
    the M/M/infinity queue started empty (E[calls at t] = 70 (1 - e^-t))."""
    import exactq
    from exactq.api import check_properties

    path = tmp_path / "cell.sm"
    path.write_text(CELL.replace("N = 3000", "N = 300") + 'rewards "busy" calls >= 80 : 1; endrewards\n')
    model = exactq.load_prism(str(path))
    t = 1.0
    texts = ['R{"calls"}=? [ I=1 ]', 'R{"busy"}=? [ I=1 ]', 'R{"calls"}=? [ C<=1 ]', 'R{"busy"}=? [ C<=1 ]']
    results = check_properties(model, "\n".join(texts))
    assert [r.info["forward"]["shared"] for r in results] == [False, True, True, True]
    assert results[0].info["matvecs"] > 0 and all(r.info["matvecs"] == 0 for r in results[1:])
    assert results[0].value == pytest.approx(70 * (1 - math.exp(-t)), rel=1e-11)
    assert results[2].value == pytest.approx(70 * (t - 1 + math.exp(-t)), rel=1e-10)
    for text, r in zip(texts, results):
        whole, = check_properties(model, f"filter(max, {text}, calls=0)")
        assert "forward" not in whole.info
        assert abs(r.value - whole.value) <= r.error_estimate + whole.error_estimate + 1e-12
        assert r.error_estimate <= 1e-8
    other, = check_properties(model, 'R{"calls"}=? [ I=0.5 ]')  # another time bound: a pass of its own
    assert other.info["forward"]["shared"] is False


def test_rewards_at_earlier_times_are_read_from_a_forward_pass_projections(tmp_path, monkeypatch):
    """A forward pass projects its iterates onto every reward structure's vectors: a later I=s or C<=s reward at
    a time whose Fox-Glynn window the pass covers is read from them with no product, with the values of a pass of
    its own (to rounding) and the closed forms of the M/M/infinity queue started empty; a time beyond the pass
    makes a pass of its own."""
    import exactq
    import exactq.solvers.csl as csl
    from exactq.api import check_properties

    monkeypatch.setattr(csl, "FORWARD_RECORD_MIN_STATES", 0)  # (the default records on 10,000 states and more)
    monkeypatch.setattr(csl, "FORWARD_VECTOR_SHARE", 10.0)  # room for both structures (by default nnz/2n: one)
    path = tmp_path / "cell.sm"
    path.write_text(CELL.replace("N = 3000", "N = 300") + 'rewards "busy" calls >= 80 : 1; endrewards\n')
    model = exactq.load_prism(str(path))
    first, = check_properties(model, 'R{"calls"}=? [ C<=1 ]')
    assert first.info["forward"]["shared"] is False and first.info["matvecs"] > 0
    texts = ['R{"calls"}=? [ I=0.5 ]', 'R{"calls"}=? [ C<=0.25 ]', 'R{"busy"}=? [ I=0.75 ]', 'R{"calls"}=? [ I=0.9 ]']
    read = check_properties(model, "\n".join(texts))
    for r in read:
        assert r.info["matvecs"] == 0 and "projections" in r.info["forward"]["rule"]
    assert read[0].value == pytest.approx(70 * (1 - math.exp(-0.5)), rel=1e-11)
    assert read[1].value == pytest.approx(70 * (0.25 - 1 + math.exp(-0.25)), rel=1e-10)
    assert read[3].value == pytest.approx(70 * (1 - math.exp(-0.9)), rel=1e-11)
    for text, r in zip(texts, read):
        own, = check_properties(exactq.load_prism(str(path)), text)
        assert own.info["forward"]["shared"] is False
        assert r.value == pytest.approx(own.value, rel=1e-13, abs=1e-15)
        assert r.error_estimate == pytest.approx(own.error_estimate, rel=1e-12)
    later, = check_properties(model, 'R{"calls"}=? [ I=3 ]')  # beyond the pass: one of its own
    assert later.info["forward"]["shared"] is False and later.info["matvecs"] > 0
    assert later.value == pytest.approx(70 * (1 - math.exp(-3.0)), rel=1e-11)
    # with the default room (one vector on this chain: nnz / 2n < 2) the pass projects the reward asked for only
    monkeypatch.setattr(csl, "FORWARD_VECTOR_SHARE", 0.5)
    model = exactq.load_prism(str(path))
    check_properties(model, 'R{"calls"}=? [ C<=1 ]')
    calls, busy = check_properties(model, 'R{"calls"}=? [ I=0.5 ]\nR{"busy"}=? [ I=0.75 ]')
    assert calls.info["matvecs"] == 0 and busy.info["matvecs"] > 0


def test_a_short_series_keeps_a_matrix_held_by_rows():
    import exactq.solvers.transient as tr

    rng = np.random.default_rng(5)
    n = 200
    M = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    b = rng.random(n)
    x = rng.random(n)
    short = tr._Stepper(M, b, products=tr.KEEP_ROWS_PRODUCTS - 1)
    assert short.order == "rows" and short.M.format == "csr"
    assert np.allclose(short(x.copy()), M @ x + b, rtol=1e-15, atol=1e-15)
    longer = tr._Stepper(M, b, products=tr.KEEP_ROWS_PRODUCTS)  # (as long as a trial's series: the trial decides)
    assert longer.trial is not None and longer.order in ("rows", "columns", "diagonals")
    if longer.order != "diagonals":  # by rows or by columns, each row's terms are added in the same order
        assert np.array_equal(longer(x.copy()), short(x.copy()))
    assert np.allclose(longer(x.copy()), short(x.copy()), rtol=1e-14, atol=1e-15)
    by_columns = tr._Stepper(M.tocsc(), b, products=tr.KEEP_ROWS_PRODUCTS - 1)
    assert by_columns.order == "columns" and np.array_equal(by_columns(x.copy()), short(x.copy()))
    assert tr._Stepper(M.tocsc(), b, products=1).order == "columns"  # held by columns: kept so


@pytest.mark.parametrize("with_b", [False, True])
@pytest.mark.parametrize("products", [1, 100, 5000])  # by rows, by columns, after a trial (diagonals allowed)
def test_a_run_of_steps_makes_the_products_that_single_calls_make(products, with_b):
    """:meth:`_Stepper.steps` against repeated calls and against ``M @ x + b`` in exact arithmetic's stead
    (a dense power series, to rounding), with the buffers left as the calls leave them."""
    import exactq.solvers.transient as tr

    rng = np.random.default_rng(11)
    n = 120
    M = sp.diags([rng.random(n - 1) / 3, rng.random(n) / 3, rng.random(n - 3) / 3], [-1, 0, 3], format="csr")
    b = rng.random(n) if with_b else None
    x0 = rng.random(n)
    one, run = tr._Stepper(M, b, products=products), tr._Stepper(M, b, products=products)
    x = one.start(x0)
    for _ in range(7):
        x = one(x)
    y = run.steps(run.start(x0), 7)
    want = x0.copy()
    for _ in range(7):
        want = M @ want + (0 if b is None else b)
    assert np.array_equal(x, y) and np.allclose(y, want, rtol=1e-14, atol=1e-15)
    assert np.array_equal(one(x), run(y))  # the next call's buffers are as after single calls
    assert run.steps(y, 0) is y


@pytest.mark.parametrize("with_b", [False, True])
def test_long_runs_on_a_small_chain_are_made_by_dense_powers_equal_to_the_products(with_b):
    """A run of thousands of products on a few hundred states goes by the cached M^(2^j) (binary digits of the
    count); the same vector as the products one by one, to rounding, and the buffers stay usable."""
    import exactq.solvers.transient as tr

    rng = np.random.default_rng(5)
    n = 150
    P = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    P = sp.diags(0.9 / np.maximum(np.asarray(P.sum(axis=1)).ravel(), 1e-300)) @ P  # substochastic
    b = rng.random(n) * 0.1 if with_b else None
    x0 = rng.random(n)
    count = 50_000
    fast = tr._Stepper(P.tocsr(), b, products=count)
    y = fast.steps(fast.start(x0), count)
    assert isinstance(fast._powers, list) and len(fast._powers) == count.bit_length()
    plain = tr._Stepper(P.tocsr(), b, products=count)
    plain._powers = False  # the products one by one
    want = plain.steps(plain.start(x0), count)
    assert np.allclose(y, want, rtol=1e-12, atol=1e-300)
    assert np.allclose(fast(y).copy(), plain(want.copy()).copy(), rtol=1e-12, atol=1e-300)  # the next product
    assert fast.steps(y, 3) is not None and fast._powers  # short runs: the products (the powers stay cached)


def test_dense_powers_are_not_used_where_their_cost_is_higher():
    import exactq.solvers.transient as tr

    n = tr.POWER_MAX_STATES + 1
    big = tr._Stepper(sp.identity(n, format="csr") * 0.5, products=100_000)
    big.steps(big.start(np.ones(n)), 1000)
    assert big._powers is False
    short = tr._Stepper(sp.identity(200, format="csr") * 0.5, products=64)
    short.steps(short.start(np.ones(200)), 64)  # 64 products do not repay the squarings
    assert short._powers is False


def test_runs_between_steady_state_checks_are_powers_of_two(monkeypatch):
    """Before the Fox-Glynn window, a series with steady-state detection runs its products from one check to the
    next in runs of DETECT_EVERY (a power of two: one product by the dense M^64, where a run of 63 took six); the
    probability of ``F<=t`` on a slowly absorbing chain matches the matrix exponential."""
    import scipy.linalg

    import exactq.solvers.transient as tr

    n = 40  # a ring of 39 states (rate 1 each way) that leaks into state 39 at rate 0.01 from state 0
    Q = np.zeros((n, n))
    for i in range(n - 1):
        Q[i, (i + 1) % (n - 1)] += 1.0
        Q[i, (i - 1) % (n - 1)] += 1.0
    Q[0, n - 1] = 0.0001
    np.fill_diagonal(Q, -Q.sum(axis=1))
    counts = []
    steps = tr._Stepper.steps
    monkeypatch.setattr(tr._Stepper, "steps", lambda self, x, c: (counts.append(c), steps(self, x, c))[1])
    t = 1.2 * tr.STEADY_STATE_MIN_STEPS  # (a uniformisation rate of 2.05: past the detection's threshold)
    target = np.arange(n) == n - 1
    p, info = tr.bounded_until(sp.csr_array(Q), np.ones(n, bool), target, t)
    want = scipy.linalg.expm(Q * t)[:, n - 1]
    assert np.allclose(p, want, rtol=1e-10, atol=1e-12)
    runs = counts[1:-1]  # (the first run reaches the first check, the last one the window)
    assert len(runs) > 10 and set(runs) == {tr.DETECT_EVERY}
