"""QBD solver: closed forms (M/M/1, M/E2/1), a truncated CTMC, and a second algorithm."""

import doctest
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import exactq.solvers.qbd as qbd_module
from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ModelError,
    UnstableError,
)
from exactq.solvers.qbd import (
    ALGORITHMS,
    cyclic_reduction,
    logarithmic_reduction,
    mean_drift,
    solve_qbd,
)
from exactq.representations import QBD
from exactq.solvers.stationary import stationary


def random_qbd(m, seed, load=0.7):
    """A random irreducible QBD with m phases whose mean drift is ``load``-stable."""
    rng = np.random.default_rng(seed)
    A0 = rng.uniform(0.0, 1.0, (m, m)) * (rng.uniform(size=(m, m)) < 0.6)
    A2 = rng.uniform(0.0, 1.0, (m, m)) * (rng.uniform(size=(m, m)) < 0.6)
    A1 = rng.uniform(0.0, 1.0, (m, m))
    np.fill_diagonal(A1, 0.0)
    A = A0 + A1 + A2
    np.fill_diagonal(A, 0.0)
    A -= np.diag(A.sum(1))
    d = mean_drift(A0, A1 - np.diag((A0 + A1 + A2).sum(1)), A2)
    A0 *= load * d["down"] / d["up"]  # scale the up rates: up drift = load * down drift
    np.fill_diagonal(A1, 0.0)
    np.fill_diagonal(A1, -(A0.sum(1) + A1.sum(1) + A2.sum(1)))
    return A0, A1, A2


def truncated_generator(A0, A1, A2, B1, B0, B2, levels):
    """Generator of levels 0..levels, the up transitions of the top level suppressed."""
    m, m0 = A1.shape[0], B1.shape[0]
    size = m0 + levels * m
    Q = sp.lil_matrix((size, size))
    Q[:m0, :m0] = B1
    Q[:m0, m0:m0 + m] = B0
    for n in range(1, levels + 1):
        s = m0 + (n - 1) * m
        Q[s:s + m, s:s + m] = A1
        if n == 1:
            Q[s:s + m, :m0] = B2
        else:
            Q[s:s + m, s - m:s] = A2
        if n < levels:
            Q[s:s + m, s + m:s + 2 * m] = A0
        else:
            Q[s:s + m, s:s + m] = A1 + np.diag(A0.sum(1))
    return Q.tocsr()


def assert_invariants(sol, tol=1e-12):
    assert sol.spectral_radius < 1
    assert np.all(sol.R >= 0) and np.all(sol.G >= -1e-15)
    assert sol.g_defect < 1e-12
    assert np.allclose(sol.G.sum(1), 1.0, atol=1e-12)
    assert np.all(sol.pi0 >= 0)
    total = sol.pi0.sum() + sol.pi1 @ np.linalg.solve(np.eye(sol.n_phases) - sol.R, np.ones(sol.n_phases))
    assert total == pytest.approx(1.0, abs=1e-13)
    assert sol.residual < tol
    assert sol.r_residual < 1e-12


def test_doctests():
    assert doctest.testmod(qbd_module).failed == 0


# ---------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_mm1_is_the_scalar_qbd(rho, algorithm):
    lam, mu = 2.0 * rho, 2.0
    sol = solve_qbd(QBD([[lam]], [[-(lam + mu)]], [[mu]]), algorithm=algorithm)
    assert_invariants(sol)
    assert sol.R[0, 0] == pytest.approx(rho, rel=1e-13)
    assert sol.G[0, 0] == pytest.approx(1.0, abs=1e-13)
    assert sol.mean_level() == pytest.approx(rho / (1 - rho), rel=1e-11)
    assert sol.level_variance() == pytest.approx(rho / (1 - rho) ** 2, rel=1e-10)
    n = np.arange(0, 30)
    assert np.allclose(sol.level_distribution(29), (1 - rho) * rho ** n, rtol=1e-11, atol=0)
    assert np.allclose(sol.level_probability(n), (1 - rho) * rho ** n, rtol=1e-11, atol=0)
    assert sol.level_tail(7) == pytest.approx(rho ** 7, rel=1e-11)
    assert sol.level_tail(0) == 1.0
    assert sol.phase_marginal() == pytest.approx([1.0])


def test_me21_general_boundary_matches_pollaczek_khinchine():
    """M/E2/1: level 0 (empty) has one phase, the others two (m0 = 1, m = 2)."""
    lam, r = 0.6, 2.5  # Erlang-2 service with phase rate r: mean 2/r = 0.8
    rho = lam * 2 / r
    A0 = lam * np.eye(2)
    A1 = np.array([[-(lam + r), r], [0.0, -(lam + r)]])
    A2 = np.array([[0.0, 0.0], [r, 0.0]])  # completion; the next job starts in phase 0
    B1 = np.array([[-lam]])
    B0 = np.array([[lam, 0.0]])
    B2 = np.array([[0.0], [r]])
    for algorithm in ALGORITHMS:
        sol = solve_qbd(QBD(A0, A1, A2, B1, B0, B2), algorithm=algorithm)
        assert_invariants(sol)
        assert sol.n_boundary_phases == 1 and sol.n_phases == 2
        assert sol.pi0.sum() == pytest.approx(1 - rho, rel=1e-13)
        cs2 = 0.5  # squared coefficient of variation of Erlang-2
        mean_L = rho + rho ** 2 * (1 + cs2) / (2 * (1 - rho))
        assert sol.mean_level() == pytest.approx(mean_L, rel=1e-12)
        # the phase of the job in service: half the busy time in each phase
        assert sol.phase_marginal(include_level0=False) == pytest.approx([rho / 2, rho / 2], rel=1e-12)
        with pytest.raises(ModelError, match="m0=1"):
            sol.phase_marginal()


# ------------------------------------------------------------- truncated CTMC and a 2nd algorithm
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_qbd_matches_large_truncated_ctmc(seed):
    m = 4
    A0, A1, A2 = random_qbd(m, seed, load=0.6)
    rng = np.random.default_rng(100 + seed)
    # a level-0 block with different (random) local rates, down transitions removed
    B1 = rng.uniform(0.0, 1.0, (m, m))
    np.fill_diagonal(B1, 0.0)
    np.fill_diagonal(B1, -(A0.sum(1) + B1.sum(1)))
    sol = solve_qbd(QBD(A0, A1, A2, B1))
    assert_invariants(sol)
    levels = 200
    assert sol.level_tail(levels) < 1e-14  # the truncation is invisible at this level
    Q = truncated_generator(A0, A1, A2, B1, A0, A2, levels)
    pi = stationary(Q, method="direct").pi.reshape(levels + 1, m)
    for n in (0, 1, 2, 5, 20):
        assert np.allclose(sol.level_vector(n), pi[n], rtol=1e-9, atol=1e-15)
    assert sol.mean_level() == pytest.approx(float(np.arange(levels + 1) @ pi.sum(1)), rel=1e-10)
    assert np.allclose(sol.phase_marginal(), pi.sum(0), rtol=1e-10, atol=1e-15)
    f = lambda n, j: np.where(n == 0, j ** 2, 3.0 * n + j - 1.0)  # noqa: E731
    expected = sum(float(pi[n] @ f(n, np.arange(m))) for n in range(levels + 1))
    assert sol.expect(f) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_logarithmic_and_cyclic_reduction_and_functional_iteration_agree(seed):
    m = 3 + seed % 4
    A0, A1, A2 = random_qbd(m, seed, load=[0.3, 0.8, 0.97][seed % 3])
    G_lr, nit_lr, ok_lr = logarithmic_reduction(A0, A1, A2)
    G_cr, nit_cr, ok_cr = cyclic_reduction(A0, A1, A2)
    assert ok_lr and ok_cr and nit_lr < 30 and nit_cr < 30
    assert np.allclose(G_lr, G_cr, atol=1e-12)
    # natural functional iteration R <- -(A0 + R^2 A2) A1^-1 (Neuts 1981), independent of both
    R = np.zeros((m, m))
    inv = np.linalg.inv(A1)
    for _ in range(200_000):
        R_new = -(A0 + R @ R @ A2) @ inv
        if np.abs(R_new - R).max() < 1e-15:
            break
        R = R_new
    lr = solve_qbd(QBD(A0, A1, A2))
    cr = solve_qbd(QBD(A0, A1, A2), algorithm="cyclic_reduction")
    assert np.allclose(lr.R, R, atol=1e-11)
    assert np.allclose(cr.R, lr.R, atol=1e-12)
    assert cr.mean_level() == pytest.approx(lr.mean_level(), rel=1e-10)
    assert_invariants(lr, tol=1e-12)


def test_expect_agrees_with_expect_affine_and_rejects_nonaffine_rewards():
    A0, A1, A2 = random_qbd(3, 7)
    sol = solve_qbd(QBD(A0, A1, A2))
    j = np.arange(3.0)
    assert sol.expect(lambda n, ph: 2 * n + ph) == pytest.approx(sol.expect_affine(j, j, 2.0))
    assert sol.expect(lambda n, ph: 1.0) == pytest.approx(1.0, abs=1e-13)
    assert sol.expect(lambda n, ph: n) == pytest.approx(sol.mean_level(), rel=1e-13)
    with pytest.raises(ModelError, match="affine"):
        sol.expect(lambda n, ph: n ** 2 + ph)


# ----------------------------------------------------------------------- stability, errors
def test_unstable_qbd_raises_naming_the_drift_condition():
    with pytest.raises(UnstableError, match=r"pi_A A0 1 = 1 must be < pi_A A2 1 = 1"):
        solve_qbd(QBD([[1.0]], [[-2.0]], [[1.0]]))  # M/M/1 with rho = 1
    with pytest.raises(UnstableError, match="drift"):
        solve_qbd(QBD([[1.2]], [[-2.2]], [[1.0]]))
    A0, A1, A2 = random_qbd(4, 3, load=1.05)
    d = mean_drift(A0, A1, A2)
    assert d["irreducible"] and d["drift"] > 0
    with pytest.raises(UnstableError):
        solve_qbd(QBD(A0, A1, A2))


def test_invalid_blocks_are_refused_with_one_line_messages():
    with pytest.raises(ModelError, match="row 0 of A0 \\+ A1 \\+ A2 must sum to 0"):
        solve_qbd(QBD([[0.5]], [[-1.0]], [[0.6]]))
    with pytest.raises(ModelError, match="A0 entries must be >= 0"):
        solve_qbd(QBD([[-0.5]], [[-0.5]], [[1.0]]))
    with pytest.raises(ModelError, match="A2 must have shape"):
        solve_qbd(QBD(np.eye(2), -3 * np.eye(2), [[1.0]]))
    with pytest.raises(ModelError, match="B0 is required"):
        solve_qbd(QBD([[0.5]], [[-1.5]], [[1.0]], B1=[[-1.0, 1.0], [1.0, -1.0]]))
    with pytest.raises(ModelError, match="algorithm must be one of"):
        solve_qbd(QBD([[0.5]], [[-1.5]], [[1.0]]), algorithm="newton")


def test_nonconvergence_warns_or_raises_with_strict():
    A0, A1, A2 = random_qbd(3, 5, load=0.99)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        solve_qbd(QBD(A0, A1, A2), maxiter=1)
    assert any(w.category is ConvergenceWarning and "not stochastic" in str(w.message) for w in caught)
    assert any(w.category is AccuracyWarning and "residual" in str(w.message) for w in caught)
    with pytest.raises(ConvergenceError):
        solve_qbd(QBD(A0, A1, A2), maxiter=1, strict=True)
