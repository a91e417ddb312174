"""QBD solver: closed forms (M/M/1, M/E2/1, M/M/1 with catastrophes, discrete-time walks), truncated
CTMCs, a second and a third algorithm (cyclic reduction, functional iteration) and the 50-digit path."""

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
    NotApplicableError,
    UnstableError,
)
from exactq.solvers.qbd import (
    ALGORITHMS,
    cyclic_reduction,
    functional_iteration,
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


# ------------------------------------------------------------------- functional iteration
@pytest.mark.parametrize("variant", ["u-based", "traditional"])
@pytest.mark.parametrize("seed", [0, 4])
def test_functional_iteration_is_slow_and_agrees_with_the_reductions(seed, variant):
    A0, A1, A2 = random_qbd(5, seed, load=0.95)
    G_lr, nit_lr, _ = logarithmic_reduction(A0, A1, A2)
    G_fi, nit_fi, ok = functional_iteration(A0, A1, A2, variant=variant)
    assert ok and nit_fi > 10 * nit_lr  # linear against quadratic convergence
    assert np.allclose(G_fi, G_lr, atol=1e-12)
    fi = solve_qbd(QBD(A0, A1, A2), algorithm="functional_iteration")
    assert fi.algorithm == "functional_iteration" and fi.nit == functional_iteration(A0, A1, A2)[1]
    assert_invariants(fi)
    with pytest.raises(ModelError, match="variant must be one of u-based, traditional; got 'natural'"):
        functional_iteration(A0, A1, A2, variant="natural")


def test_functional_iteration_stops_at_maxiter_with_a_warning():
    A0, A1, A2 = random_qbd(3, 2, load=0.9)
    with pytest.warns(ConvergenceWarning, match="functional_iteration: G is not stochastic"):
        solve_qbd(QBD(A0, A1, A2), algorithm="functional_iteration", maxiter=5)
    with pytest.raises(ModelError, match="maxiter must be an integer >= 1; got 0"):
        solve_qbd(QBD(A0, A1, A2), maxiter=0)


# ------------------------------------------------------------------------ moments, tail
@pytest.mark.parametrize("rho", [0.3, 0.9])
def test_level_moments_of_the_geometric_law(rho):
    sol = solve_qbd(QBD([[rho]], [[-(1 + rho)]], [[1.0]]))
    n = np.arange(4000, dtype=float)
    p = (1 - rho) * rho ** n
    for k in range(0, 5):
        assert sol.level_moment(k) == pytest.approx(float(p @ n ** k), rel=1e-10)
    assert sol.level_moment(2) - sol.mean_level() ** 2 == pytest.approx(sol.level_variance(), rel=1e-10)
    assert sol.tail_decay_rate == pytest.approx(rho, rel=1e-13)
    with pytest.raises(ModelError, match="moment order k must be >= 0; got -1"):
        sol.level_moment(-1)


def test_moments_and_tail_decay_against_the_truncated_ctmc():
    m = 4
    A0, A1, A2 = random_qbd(m, 11, load=0.8)
    sol = solve_qbd(QBD(A0, A1, A2))
    levels = 400
    Q = truncated_generator(A0, A1, A2, A1 + np.diag(A2.sum(1)), A0, A2, levels)
    law = stationary(Q, method="direct").pi.reshape(levels + 1, m).sum(1)
    n = np.arange(levels + 1, dtype=float)
    for k in (1, 2, 3):
        assert sol.level_moment(k) == pytest.approx(float(law @ n ** k), rel=1e-9)
    # P(N >= n + 1) / P(N >= n) tends to sp(R)
    ratio = sol.level_tail(201) / sol.level_tail(200)
    assert ratio == pytest.approx(sol.tail_decay_rate, rel=1e-8)
    assert sol.tail_decay_rate == pytest.approx(max(abs(np.linalg.eigvals(sol.R))), rel=1e-14)


# ------------------------------------------------------------------------------- resets
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("lam, mu, nu", [(0.5, 1.0, 0.2), (2.0, 1.0, 0.5)])
def test_mm1_with_catastrophes_is_geometric(lam, mu, nu, algorithm):
    """M/M/1 whose queue is cleared at rate nu: pi_n = (1 - r) r^n with mu r^2 - (lam + mu + nu) r + lam = 0.

    Stable for every lam (even lam > mu): the resets, not the drift, make it recurrent.
    """
    s = lam + mu + nu
    r = (s - np.sqrt(s * s - 4 * lam * mu)) / (2 * mu)
    q = QBD([[lam]], [[-s]], [[mu]], B1=[[-lam]], reset=[[nu]])
    assert q.has_reset
    sol = solve_qbd(q, algorithm=algorithm)
    assert sol.residual < 1e-13 and sol.g_residual < 1e-12
    assert sol.R[0, 0] == pytest.approx(r, rel=1e-12)
    assert sol.G[0, 0] < 1  # a reset can come first: G is substochastic
    n = np.arange(40)
    assert np.allclose(sol.level_distribution(39), (1 - r) * r ** n, rtol=1e-10, atol=0)
    assert sol.mean_level() == pytest.approx(r / (1 - r), rel=1e-11)


def test_reset_qbd_matches_a_truncated_ctmc():
    m, m0 = 3, 2
    rng = np.random.default_rng(5)
    A0 = rng.uniform(0, 1, (m, m))
    A2 = rng.uniform(0, 1, (m, m))
    Z = rng.uniform(0, 0.3, (m, m0))
    A1 = rng.uniform(0, 1, (m, m))
    np.fill_diagonal(A1, 0.0)
    np.fill_diagonal(A1, -(A0.sum(1) + A1.sum(1) + A2.sum(1) + Z.sum(1)))
    B1 = rng.uniform(0, 1, (m0, m0))
    np.fill_diagonal(B1, 0.0)
    B0 = rng.uniform(0, 1, (m0, m))
    np.fill_diagonal(B1, -(B1.sum(1) + B0.sum(1)))
    B2 = rng.uniform(0, 1, (m, m0))
    B2 *= (A2.sum(1) / B2.sum(1))[:, None]  # B2 1 = A2 1
    sol = solve_qbd(QBD(A0, A1, A2, B1=B1, B0=B0, B2=B2, reset=Z))
    levels = 150
    size = m0 + levels * m
    Q = np.zeros((size, size))
    Q[:m0, :m0], Q[:m0, m0:m0 + m] = B1, B0
    for n in range(1, levels + 1):
        s = m0 + (n - 1) * m
        Q[s:s + m, s:s + m] = A1
        Q[s:s + m, :m0] += Z
        if n == 1:
            Q[s:s + m, :m0] += B2
        else:
            Q[s:s + m, s - m:s] = A2
        if n < levels:
            Q[s:s + m, s + m:s + 2 * m] = A0
        else:
            Q[s:s + m, s:s + m] += np.diag(A0.sum(1))
    pi = stationary(sp.csr_matrix(Q), method="direct").pi
    assert np.allclose(sol.pi0, pi[:m0], rtol=1e-10, atol=1e-16)
    law = np.concatenate([[pi[:m0].sum()], pi[m0:].reshape(levels, m).sum(1)])
    assert np.allclose(sol.level_distribution(30), law[:31], rtol=1e-9, atol=1e-16)
    assert sol.mean_level() == pytest.approx(float(np.arange(levels + 1) @ law), rel=1e-10)


def test_discrete_time_reset_counter_is_geometric():
    """Up with probability p, back to 0 otherwise: P(N = n) = (1 - p) p^n (the age of information's shape)."""
    p = 0.4
    sol = solve_qbd(QBD([[p]], [[0.0]], [[0.0]], B1=[[1 - p]], B2=[[0.0]], reset=[[1 - p]], time="discrete"))
    assert np.allclose(sol.level_distribution(25), (1 - p) * p ** np.arange(26), rtol=1e-13, atol=0)
    assert sol.R[0, 0] == pytest.approx(p, rel=1e-15) and sol.G[0, 0] == 0.0


def test_discrete_time_birth_death_is_geometric():
    p, q = 0.2, 0.5
    sol = solve_qbd(QBD([[p]], [[1 - p - q]], [[q]], time="discrete"))
    r = p / q
    assert np.allclose(sol.level_distribution(30), (1 - r) * r ** np.arange(31), rtol=1e-12, atol=0)
    assert_invariants(sol)


def test_reset_blocks_are_validated():
    with pytest.raises(ModelError, match=r"row 0 of A0 \+ A1 \+ A2 \+ reset must sum to 0"):
        QBD([[0.5]], [[-1.5]], [[1.0]], B1=[[-0.5]], reset=[[0.2]])
    with pytest.raises(ModelError, match="reset must have shape"):
        QBD([[0.5]], [[-1.7]], [[1.0]], reset=[[0.1, 0.1]])
    with pytest.raises(ModelError, match="reset entries must be >= 0"):
        QBD([[0.5]], [[-1.3]], [[1.0]], B1=[[-0.5]], reset=[[-0.2]])
    assert not QBD([[0.5]], [[-1.5]], [[1.0]], reset=[[0.0]]).has_reset


# ----------------------------------------------------------------------- 50 digits
@pytest.mark.parametrize("time_kind", ["continuous", "discrete"])
def test_fifty_digit_path_confirms_the_float_solution(time_kind):
    m = 6
    A0, A1, A2 = random_qbd(m, 8, load=0.97)
    if time_kind == "discrete":
        u = float(np.abs(np.diag(A1)).max()) * 1.05
        A0, A1, A2 = A0 / u, np.eye(m) + A1 / u, A2 / u
    q = QBD(A0, A1, A2, time=time_kind)
    f = solve_qbd(q)
    h = solve_qbd(q, dps=50)
    assert h.mp["dps"] == 50 and h.algorithm == "logarithmic_reduction+mpmath50"
    assert h.mp["r_residual"] < 1e-45 and h.mp["g_residual"] < 1e-45
    assert h.mp["r_change"] == pytest.approx(float(np.abs(f.R - h.R).max()), abs=1e-30)
    assert h.mp["r_change"] < 1e-12  # the float solution was right to about 1e-14
    assert np.allclose(f.R, h.R, atol=1e-12) and np.allclose(f.pi0, h.pi0, rtol=1e-10)
    assert h.mean_level() == pytest.approx(f.mean_level(), rel=1e-10)
    assert_invariants(h)
    assert {"dps", "mp_r_residual", "mp_r_change"} <= set(h.info)
    import mpmath

    with mpmath.workdps(50):  # the mpmath law is normalised to 50 digits
        W1 = np.asarray(h.mp["W"]).sum(axis=1)
        total = h.mp["pi0"].sum() + (h.mp["pi0"] @ h.mp["R0"]) @ W1
        assert abs(total - 1) < mpmath.mpf(10) ** -45


def test_fifty_digit_path_with_a_reset_and_a_smaller_boundary():
    """M/M/1 with catastrophes again, with R at 50 digits against the quadratic's root at 50 digits."""
    import mpmath

    lam, mu, nu = 0.5, 1.0, 0.25
    h = solve_qbd(QBD([[lam]], [[-(lam + mu + nu)]], [[mu]], B1=[[-lam]], reset=[[nu]]), dps=50)
    with mpmath.workdps(60):
        s = mpmath.mpf(lam) + mu + nu
        r = (s - mpmath.sqrt(s * s - 4 * mpmath.mpf(lam) * mu)) / (2 * mu)
        assert abs(h.mp["R"][0, 0] - r) < mpmath.mpf(10) ** -48
        assert abs(h.mp["pi0"][0] - (1 - r)) < mpmath.mpf(10) ** -45


def test_fifty_digit_path_refuses_large_or_bad_requests():
    A0, A1, A2 = random_qbd(qbd_module.MP_MAX_PHASES + 1, 1)
    with pytest.raises(NotApplicableError, match="applies to QBDs with at most 64 phases; got 65"):
        solve_qbd(QBD(A0, A1, A2), dps=50)
    with pytest.raises(ModelError, match=r"dps must be an integer in \[16, 1000\]; got 8"):
        solve_qbd(QBD([[0.5]], [[-1.5]], [[1.0]]), dps=8)


def test_the_drift_message_gives_the_drift():
    with pytest.raises(UnstableError, match=r"mean drift pi_A A0 1 - pi_A A2 1 = 0.2 must be < 0"):
        solve_qbd(QBD([[1.2]], [[-2.2]], [[1.0]]))
