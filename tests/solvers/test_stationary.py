"""Stationary distributions: every method on one shared case registry, against independent
references (closed forms, a dense numpy solve of the augmented system, and an mpmath
LU solve at 30 digits), plus the structural cases (reducible, transient, bad input,
non-convergence) and the two fill-reducing orderings.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactq
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ConvergenceError, ConvergenceWarning, ModelError, ReducibleError
from exactq.solvers.ordering import nested_dissection
from exactq.solvers.stationary import GTH_MAX_STATES, ND_MIN_STATES, stationary
from exactq.solvers.structure import communicating_classes
from exactq.statespace import StateSpace

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

METHODS = ("direct", "gmres", "power", "gth", "mpmath")
MP_MAX_STATES = 25  # the 30-digit mpmath reference
DENSE_MAX_STATES = 60  # the dense LAPACK reference (every registry case this small has one)


# ---------------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------------
def dense_reference(Q) -> np.ndarray:
    """Least-squares solve of the augmented system [Q^T; 1^T] pi = [0; 1]."""
    A = np.asarray(Q.toarray() if sp.issparse(Q) else Q, dtype=float)
    n = A.shape[0]
    M = np.vstack([A.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(M, b, rcond=None)[0]


def mp_reference(Q, dps: int = 30) -> list:
    """mpmath LU solve at ``dps`` digits of Q^T pi = 0 with the last equation replaced by sum(pi) = 1.

    The float entries of Q are converted exactly, so this is the exact answer of the
    same chain up to 30 digits.
    """
    A = np.asarray(Q.toarray() if sp.issparse(Q) else Q, dtype=float)
    n = A.shape[0]
    with mpmath.workdps(dps):
        M = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                M[i, j] = mpmath.mpf(float(A[j, i]))
        for j in range(n):
            M[n - 1, j] = mpmath.mpf(1)
        b = mpmath.matrix([0] * (n - 1) + [1])
        x = mpmath.lu_solve(M, b)
        return [x[i] for i in range(n)]


def birth_death(lams, mus):
    """Generator of the birth-death chain with rates lams[k] (k -> k+1), mus[k] (k+1 -> k)."""
    n = len(lams) + 1
    Q = np.zeros((n, n))
    for k, (lam, mu) in enumerate(zip(lams, mus)):
        Q[k, k + 1] = lam
        Q[k + 1, k] = mu
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


def birth_death_exact(lams, mus) -> np.ndarray:
    """Product form pi_k ∝ prod_{j<k} lam_j / mu_j, in exact rational arithmetic."""
    w = [Fraction(1)]
    for lam, mu in zip(lams, mus):
        w.append(w[-1] * Fraction(lam) / Fraction(mu))
    total = sum(w)
    return np.array([float(x / total) for x in w])


def cycle(rates):
    """The cycle 0 -> 1 -> ... -> n-1 -> 0; pi_i ∝ 1 / rate_i."""
    n = len(rates)
    Q = np.zeros((n, n))
    for i, r in enumerate(rates):
        Q[i, (i + 1) % n] = r
    np.fill_diagonal(Q, -Q.sum(axis=1))
    w = [1 / Fraction(r) for r in rates]
    total = sum(w)
    return Q, np.array([float(x / total) for x in w])


def random_generator(n: int, density: float, seed: int, spread: float = 1.0) -> np.ndarray:
    """Irreducible random generator: a random Hamiltonian cycle plus random extra rates."""
    rng = np.random.default_rng(seed)
    A = np.where(rng.random((n, n)) < density, 10 ** rng.uniform(-spread, spread, (n, n)), 0.0)
    p = rng.permutation(n)
    A[p, np.roll(p, -1)] = 10 ** rng.uniform(-spread, spread, n)
    np.fill_diagonal(A, 0.0)
    return _dyadic_generator(A)


def _dyadic_generator(A: np.ndarray) -> np.ndarray:
    """Round the rates to multiples of 2^-20 so that float row sums are exact.

    Then the float matrix is *exactly* a generator, and the 30-digit reference solves
    the very chain the solvers see (otherwise which equation is dropped matters at the
    level of the rounding of the diagonal).
    """
    unit = 2.0**-20
    A = np.where(A > 0, np.maximum(np.round(A / unit), 1.0) * unit, 0.0)
    np.fill_diagonal(A, 0.0)
    np.fill_diagonal(A, -A.sum(axis=1))
    assert np.all(A.sum(axis=1) == 0.0)
    return A


# ---------------------------------------------------------------------------------
# the shared case registry
# ---------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    Q: np.ndarray
    exact: np.ndarray | None = None


def _cases() -> list[Case]:
    cases = [Case("two-state", np.array([[-1.0, 1.0], [2.0, -2.0]]), np.array([2 / 3, 1 / 3]))]
    # all rates are dyadic rationals: the float generators are exact (rows sum to 0 exactly)
    lam, mu = Fraction(3, 4), Fraction(1)
    cases.append(Case("mm1-K10", birth_death([float(lam)] * 10, [float(mu)] * 10),
                      birth_death_exact([lam] * 10, [mu] * 10)))
    # M/M/3/20 with lambda = 5/2
    lams = [Fraction(5, 2)] * 20
    mus = [Fraction(min(k + 1, 3)) for k in range(20)]
    cases.append(Case("mm3-K20", birth_death([float(x) for x in lams], [float(x) for x in mus]),
                      birth_death_exact(lams, mus)))
    # a birth-death chain with irregular rational rates
    rng = np.random.default_rng(7)
    lams = [Fraction(int(a), 8) for a in rng.integers(1, 40, 24)]
    mus = [Fraction(int(a), 8) for a in rng.integers(1, 40, 24)]
    cases.append(Case("birth-death-irregular", birth_death([float(x) for x in lams], [float(x) for x in mus]),
                      birth_death_exact(lams, mus)))
    # a long birth-death chain (above the gth/direct switch of auto)
    lams = [Fraction(7, 8)] * 299
    mus = [Fraction(1)] * 299
    cases.append(Case("mm1-K299", birth_death([float(x) for x in lams], [float(x) for x in mus]),
                      birth_death_exact(lams, mus)))
    rates = [Fraction(int(a), 4) for a in np.random.default_rng(3).integers(2, 9, 20)]
    Q, exact = cycle(rates)
    cases.append(Case("cycle-20", Q, exact))
    cases.append(Case("random-dense-12", random_generator(12, 1.0, seed=1)))
    cases.append(Case("random-sparse-25", random_generator(25, 0.1, seed=2)))
    cases.append(Case("random-sparse-60", random_generator(60, 0.05, seed=3)))
    return cases


CASES = _cases()


def _tolerances(method):
    """(atol, rtol) for comparing pi with a reference.

    Power iteration stops on the residual, ||pi Q||_1 / q <= 1e-12, which bounds the
    absolute error of its entries (about 1e-9 here) but not the relative error of the
    small ones: it is held to an absolute tolerance only.
    """
    return (1e-8, 0.0) if method == "power" else (1e-12, 1e-10)


def assert_invariants(st_, Q):
    pi = st_.pi
    assert pi.shape == (Q.shape[0],)
    assert np.all(pi >= 0)
    assert abs(pi.sum() - 1.0) < 1e-12
    residual = float(np.abs(sp.csr_matrix(Q).T @ pi).max())
    assert st_.residual == pytest.approx(residual, rel=1e-6, abs=1e-300)
    q = float((-np.diag(np.asarray(Q.toarray() if sp.issparse(Q) else Q))).max())
    assert residual <= 1e-11 * q
    assert st_.info["relative_residual"] <= 1e-11


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_method_agrees_with_the_references(case, method):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no convergence warning on the registry
        result = stationary(sp.csr_matrix(case.Q), method=method)
    assert result.method == method
    assert_invariants(result, case.Q)
    atol, rtol = _tolerances(method)
    if case.Q.shape[0] <= DENSE_MAX_STATES:
        np.testing.assert_allclose(result.pi, dense_reference(case.Q), rtol=0, atol=atol)
    if case.exact is not None:
        np.testing.assert_allclose(result.pi, case.exact, rtol=rtol, atol=0 if rtol else atol)
    if case.Q.shape[0] <= MP_MAX_STATES:
        ref = np.array([float(x) for x in mp_reference(case.Q)])
        np.testing.assert_allclose(result.pi, ref, rtol=rtol, atol=0 if rtol else atol)


@pytest.mark.parametrize("case", [c for c in CASES if c.Q.shape[0] <= MP_MAX_STATES], ids=lambda c: c.name)
def test_mpmath_method_agrees_with_a_30_digit_lu_solve(case):
    result = stationary(sp.csr_matrix(case.Q), method="mpmath")
    ref = mp_reference(case.Q, dps=30)
    pi_mp = result.info["pi_mp"]
    with mpmath.workdps(30):
        worst = max(abs(a - b) / b for a, b in zip(pi_mp, ref))
    assert worst < mpmath.mpf(10) ** -25
    assert result.info["dps"] == 50 and result.info["mp_relative_residual"] < 1e-40


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_auto_picks_gth_for_small_and_direct_for_large_chains(case):
    result = stationary(sp.csr_matrix(case.Q))
    assert result.method == ("gth" if case.Q.shape[0] <= 200 else "direct")
    reference = case.exact if case.exact is not None else dense_reference(case.Q)
    np.testing.assert_allclose(result.pi, reference, rtol=0, atol=1e-12)


@FAST
@given(
    n=st.integers(2, 60),
    density=st.sampled_from([0.0, 0.05, 0.2, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    method=st.sampled_from(METHODS),
)
def test_random_irreducible_generators(n, density, seed, method):
    Q = random_generator(n, density, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = stationary(sp.csr_matrix(Q), method=method)
    assert_invariants(result, Q)
    atol, rtol = _tolerances(method)
    np.testing.assert_allclose(result.pi, dense_reference(Q), rtol=0, atol=atol)
    if n <= MP_MAX_STATES:
        ref = np.array([float(x) for x in mp_reference(Q)])
        np.testing.assert_allclose(result.pi, ref, rtol=rtol, atol=0 if rtol else atol)


@FAST
@given(n=st.integers(2, 40), seed=st.integers(0, 2**32 - 1))
def test_stiff_chains_elimination_methods(n, seed):
    """Rates over 8 decades: gth (subtraction-free) and the LU-based methods stay accurate.

    Power iteration is left out on purpose: its convergence rate is the spectral gap of
    the uniformised chain, which is tiny here (it warns instead, see below).
    """
    Q = random_generator(n, 0.2, seed, spread=4.0)
    ref = np.array([float(x) for x in mp_reference(Q)]) if n <= MP_MAX_STATES else dense_reference(Q)
    for method in ("gth", "direct", "mpmath"):
        result = stationary(sp.csr_matrix(Q), method=method)
        assert np.all(result.pi >= 0) and abs(result.pi.sum() - 1) < 1e-12
        if n <= MP_MAX_STATES:
            np.testing.assert_allclose(result.pi, ref, rtol=1e-8, atol=0)
        else:
            np.testing.assert_allclose(result.pi, ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", ("direct", "gmres", "mpmath"))
def test_the_dropped_equation_does_not_matter(method):
    Q = sp.csr_matrix(random_generator(15, 0.3, seed=11))
    base = stationary(Q, method=method).pi
    for ref in (0, 7, 14):
        np.testing.assert_allclose(stationary(Q, method=method, reference=ref).pi, base, rtol=1e-11)


def test_one_state_chain():
    result = stationary(sp.csr_matrix([[0.0]]))
    assert result.pi.tolist() == [1.0] and result.residual == 0.0


def test_dense_input_is_accepted():
    result = stationary(np.array([[-1.0, 1.0], [2.0, -2.0]]))
    np.testing.assert_allclose(result.pi, [2 / 3, 1 / 3], rtol=1e-15)


# ---------------------------------------------------------------------------------
# orderings: nested dissection against minimum degree
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "servers, level",
    [("1,1", 60), ("1,2", 55), ("1,1,1", 13)],  # 3721, 3136 and 2744 states (2-D and 3-D lattices)
)
def test_nested_dissection_path_agrees_with_the_mmd_path(servers, level):
    m = exactq.model("jsq", arrival_rate=1.5, service_rates=servers)
    chain = m.ctmc(level)
    assert chain.n_states >= ND_MIN_STATES
    nd = stationary(chain.Q, method="direct", coords=chain.states, jumps=chain.jumps)
    mmd = stationary(chain.Q, method="direct", coords=None)
    assert nd.info["ordering"] == "nested-dissection"
    assert mmd.info["ordering"] == "MMD_AT_PLUS_A"
    assert_invariants(nd, chain.Q)
    np.testing.assert_allclose(nd.pi, mmd.pi, rtol=1e-10, atol=1e-300)
    mp = stationary(chain.Q, method="mpmath", coords=chain.states, jumps=chain.jumps)
    assert mp.info["ordering"] == "nested-dissection"
    np.testing.assert_allclose(nd.pi, mp.pi, rtol=1e-10, atol=1e-300)


def test_nested_dissection_with_longer_jumps():
    """Batch arrivals of 2 and diagonal moves: separators two layers thick."""
    space = StateSpace.box(["x", "y"], hi=[49, 49])
    events = [
        Event("batch", lambda s: (np.full(len(s), 0.6), s + [2, 0])),
        Event("move", lambda s: (1.0 * (s[:, 0] > 0), s + [-1, 1])),
        Event("leave", lambda s: (1.3 * (s[:, 1] > 0), s + [0, -1])),
        Event("jump", lambda s: (0.2 * (s[:, 1] > 1), s + [1, -2])),
    ]
    chain = build_ctmc(space, events)
    assert chain.jumps.tolist() == [2, 2]
    nd = stationary(chain.Q, method="direct", coords=chain.states, jumps=chain.jumps)
    mmd = stationary(chain.Q, method="direct")
    assert nd.info["ordering"] == "nested-dissection"
    np.testing.assert_allclose(nd.pi, mmd.pi, rtol=1e-9, atol=1e-300)


def test_small_chains_keep_minimum_degree():
    chain = exactq.model("jsq", arrival_rate=1.0, service_rates="1,1").ctmc(20)
    assert chain.n_states < ND_MIN_STATES
    result = stationary(chain.Q, method="direct", coords=chain.states, jumps=chain.jumps)
    assert result.info["ordering"] == "MMD_AT_PLUS_A"


@FAST
@given(
    points=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=300, unique=True),
    jumps=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    leaf=st.integers(1, 20),
)
def test_nested_dissection_is_a_permutation(points, jumps, leaf):
    coords = np.array(points)
    perm = nested_dissection(coords, np.array(jumps), leaf_size=leaf)
    assert sorted(perm.tolist()) == list(range(len(points)))


def test_nested_dissection_orders_halves_before_their_separator():
    coords = np.arange(101)[:, None]
    perm = nested_dissection(coords, np.array([1]), leaf_size=4)
    sep = perm[-1]  # the top separator, one point thick, comes last
    assert 40 <= sep <= 60
    pos = np.empty_like(perm)
    pos[perm] = np.arange(len(perm))
    left = pos[coords[:, 0] < sep]
    right = pos[coords[:, 0] > sep]
    assert left.max() < right.min()  # the left half entirely before the right half


def test_nested_dissection_never_splits_a_direction_without_jumps():
    coords = np.array([(x, y) for x in range(40) for y in range(5)])
    perm = nested_dissection(coords, np.array([0, 1]), leaf_size=2)
    assert sorted(perm.tolist()) == list(range(len(coords)))
    # only y can be split, so the top separator (ordered last) is one whole row y = const
    last = coords[perm[-40:]]
    assert len(set(last[:, 1].tolist())) == 1


# ---------------------------------------------------------------------------------
# structure: reducible chains, transient states
# ---------------------------------------------------------------------------------
def _two_closed_classes():
    # {0, 1} closed, {3, 4} closed, 2 transient (leads to both)
    Q = np.zeros((5, 5))
    Q[0, 1], Q[1, 0] = 1.0, 2.0
    Q[3, 4], Q[4, 3] = 1.5, 0.5
    Q[2, 0], Q[2, 4] = 1.0, 1.0
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


@pytest.mark.parametrize("method", ("auto",) + METHODS)
def test_reducible_chain_raises_naming_a_state_in_each_closed_class(method):
    with pytest.raises(ReducibleError) as e:
        stationary(sp.csr_matrix(_two_closed_classes()), method=method, describe_state=lambda i: f"<s{i}>")
    msg = str(e.value)
    assert "2 closed classes" in msg
    assert "<s0>" in msg or "<s1>" in msg
    assert "<s3>" in msg or "<s4>" in msg
    assert "<s2>" not in msg  # the transient state is in no closed class


def test_reducible_message_lists_at_most_five_classes():
    blocks = [np.array([[-1.0, 1.0], [1.0, -1.0]])] * 7
    Q = sp.block_diag(blocks, format="csr")
    with pytest.raises(ReducibleError, match=r"7 closed classes, containing state 0, state 2, state 4, "
                                             r"state 6, state 8 and 2 more"):
        stationary(Q)


def test_reducible_error_is_an_exactq_error():
    with pytest.raises(exactq.ExactqError):
        stationary(sp.csr_matrix(_two_closed_classes()))


def _transient_then_closed(absorbing: bool):
    """States 0, 2, 4 transient; closed class {1, 3} (or the absorbing state 3, with 1 transient)."""
    Q = np.zeros((5, 5))
    Q[0, 2], Q[0, 4] = 1.0, 0.5
    Q[2, 4], Q[2, 1] = 2.0, 1.0
    Q[4, 0], Q[4, 3] = 1.0, 3.0
    if absorbing:  # 1 becomes transient too
        Q[1, 3] = 1.0
        closed_pi = {3: 1.0}
    else:
        Q[1, 3], Q[3, 1] = 1.0, 3.0
        closed_pi = {1: 0.75, 3: 0.25}
    np.fill_diagonal(Q, -Q.sum(axis=1))
    exact = np.zeros(5)
    for i, p in closed_pi.items():
        exact[i] = p
    return Q, exact


@pytest.mark.parametrize("method", ("auto",) + METHODS)
@pytest.mark.parametrize("absorbing", [False, True], ids=["closed-pair", "absorbing-state"])
def test_transient_states_get_zero_probability(method, absorbing):
    Q, exact = _transient_then_closed(absorbing)
    result = stationary(sp.csr_matrix(Q), method=method, coords=np.arange(5)[:, None], jumps=np.array([1]))
    np.testing.assert_allclose(result.pi, exact, rtol=1e-12, atol=0)
    transient = exact == 0
    assert result.pi[transient].tolist() == [0.0] * int(transient.sum())
    assert result.info["transient_states"] == int(transient.sum())
    assert result.residual < 1e-12


@FAST
@given(
    n=st.integers(1, 25),
    edges=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=60),
)
def test_communicating_classes_against_networkx(n, edges):
    edges = [(a % n, b % n) for a, b in edges if a % n != b % n]
    Q = np.zeros((n, n))
    for a, b in edges:
        Q[a, b] = 1.0
    np.fill_diagonal(Q, -Q.sum(axis=1))
    cls = communicating_classes(sp.csr_matrix(Q))
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    comps = list(nx.strongly_connected_components(g))
    assert cls.n_classes == len(comps)
    assert cls.is_irreducible == (len(comps) == 1)
    cond = nx.condensation(g, comps)
    sinks = [cond.nodes[c]["members"] for c in cond.nodes if cond.out_degree(c) == 0]
    assert sorted(cls.representatives.tolist()) == sorted(min(s) for s in sinks)
    assert set(np.flatnonzero(cls.recurrent_mask).tolist()) == set().union(*sinks)
    for comp in comps:  # same partition
        assert len({int(cls.labels[i]) for i in comp}) == 1


# ---------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------
def _named(i):
    return f"(q1={i})"


@pytest.mark.parametrize(
    "Q, match",
    [
        (np.array([[-1.0, 1.0, 0.0], [1.0, -0.5, -0.5], [0.0, 1.0, -1.0]]),
         r"negative off-diagonal rate -0.5 in \(q1=1\)"),
        (np.array([[-1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 2.0, -1.0]]),
         r"rows must sum to 0; row of \(q1=2\) sums to 1.000e\+00"),
        (np.array([[-1.0, 1.5], [2.0, -2.0]]), r"row of \(q1=0\) sums to 5.000e-01"),
        (np.array([[-1.0, 1.0], [np.nan, -2.0]]), r"non-finite rate in \(q1=1\)"),
        (np.array([[-np.inf, np.inf], [1.0, -1.0]]), r"non-finite rate in \(q1=0\)"),
    ],
)
def test_non_generators_raise_model_error_naming_the_state(Q, match):
    with pytest.raises(ModelError, match=match):
        stationary(sp.csr_matrix(Q), describe_state=_named)


def test_non_generator_default_state_names():
    Q = np.array([[-1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [-0.25, 0.0, 0.25]])
    with pytest.raises(ModelError, match=r"negative off-diagonal rate -0.25 in state 2"):
        stationary(sp.csr_matrix(Q))


def test_shape_and_method_errors():
    with pytest.raises(ModelError, match="square"):
        stationary(sp.csr_matrix(np.zeros((2, 3))))
    with pytest.raises(ModelError, match="non-empty"):
        stationary(sp.csr_matrix((0, 0)))
    with pytest.raises(ModelError, match=r"stationary method must be one of .*; got 'lu'"):
        stationary(sp.csr_matrix([[-1.0, 1.0], [1.0, -1.0]]), method="lu")


def test_gth_refuses_large_chains():
    n = GTH_MAX_STATES + 1
    Q = sp.csr_matrix(birth_death([1.0] * (n - 1), [2.0] * (n - 1)))
    with pytest.raises(ModelError, match=f"gth is dense and limited to {GTH_MAX_STATES} states"):
        stationary(Q, method="gth")


# ---------------------------------------------------------------------------------
# non-convergence: an error with strict=True, a warning otherwise, never silent
# ---------------------------------------------------------------------------------
def _slow_chain():
    return sp.csr_matrix(birth_death([0.95] * 59, [1.0] * 59))


def test_power_strict_with_tiny_maxiter_raises():
    with pytest.raises(ConvergenceError, match="power iteration did not reach rtol"):
        stationary(_slow_chain(), method="power", maxiter=1, strict=True)


def test_power_non_strict_warns():
    with pytest.warns(ConvergenceWarning, match="power iteration did not reach rtol=1e-12 in 1 iterations"):
        result = stationary(_slow_chain(), method="power", maxiter=1)
    assert result.nit is not None and result.nit >= 1
    assert result.info["relative_residual"] > 1e-12  # and the residual says so


def test_power_converges_given_room():
    Q = _slow_chain()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = stationary(Q, method="power", rtol=1e-13)
    np.testing.assert_allclose(result.pi, birth_death_exact([Fraction(19, 20)] * 59, [1] * 59),
                               rtol=1e-8, atol=0)
    assert result.nit > 0


def test_convergence_error_is_an_exactq_error():
    with pytest.raises(exactq.ExactqError):
        stationary(_slow_chain(), method="power", maxiter=1, strict=True)


def test_rotated_nested_dissection_only_for_unit_steps():
    """JSQ moves one step along an axis: ordered in (x + y, y - x); Erlang SED jumps r phases: axes."""
    from exactq.solvers.stationary import _rotated_unit_lattice

    jsq = exactq.model("jsq", arrival_rate=1.5, service_rates="1,2").ctmc(60)
    rot = _rotated_unit_lattice(jsq.Q, jsq.states)
    assert rot is not None
    np.testing.assert_array_equal(rot[:, 0], jsq.states.sum(1))
    sed = exactq.model("sed", arrival_rate=1.5, service_rates="1,1", phases=2).ctmc(30)
    assert _rotated_unit_lattice(sed.Q, sed.states) is None
    three = exactq.model("jsq", arrival_rate=1.5, service_rates="1,1,1").ctmc(8)
    assert _rotated_unit_lattice(three.Q, three.states) is None


def test_gth_where_the_unnormalised_vector_overflows():
    """Birth-death chain, up-rate 1e4 x the down-rate: pi_k proportional to 1e4^k overflows double long before
    state 150 (1e600), so GTH's triangular back substitution overflows and the rescaled loop answers; the
    closed form pi_k = r^k (1 - r) / (1 - r^n) with r = 1e-4 read from the top state."""
    from exactq.solvers.linear import gth

    n, up, down = 150, 1e4, 1.0
    Q = np.zeros((n, n))
    i = np.arange(n - 1)
    Q[i, i + 1] = up
    Q[i + 1, i] = down
    np.fill_diagonal(Q, -Q.sum(axis=1))
    pi = gth(Q)
    r = down / up
    k = np.arange(n)[::-1]  # distance from the top state
    with np.errstate(under="ignore"):
        exact = r ** k * (1 - r) / (1 - r ** n)
    assert np.all(np.isfinite(pi)) and np.all(pi >= 0) and abs(pi.sum() - 1) < 1e-14
    big = exact > 1e-200
    assert np.max(np.abs(pi[big] - exact[big]) / exact[big]) < 1e-13


def test_gth_agrees_entrywise_with_an_mpmath_solve_on_a_random_chain_with_tiny_probabilities():
    """GTH's rank-one updates (BLAS dger on column-major blocks) against a 40-digit mpmath solve of pi Q = 0, on
    a random chain whose rates span twelve orders of magnitude (entries from 1e-13 to 1)."""
    from exactq.solvers.linear import gth

    rng = np.random.default_rng(7)
    n = 30
    R = np.where(rng.random((n, n)) < 0.2, 10.0 ** rng.uniform(-12, 0, (n, n)), 0.0)
    R[np.arange(n), (np.arange(n) + 1) % n] += 1e-6  # a cycle: irreducible
    np.fill_diagonal(R, 0.0)
    Q = R - np.diag(R.sum(axis=1))
    pi = gth(Q)
    with mpmath.workdps(40):
        A = mpmath.matrix(Q.T.tolist())
        for j in range(n):
            A[n - 1, j] = 1
        b = mpmath.matrix([0] * (n - 1) + [1])
        exact = np.array([float(v) for v in mpmath.lu_solve(A, b)])
    assert exact.min() < 1e-6 * exact.max()  # tiny probabilities are present
    assert np.max(np.abs(pi - exact) / exact) < 1e-12


def test_nested_dissection_is_made_once_for_the_same_states():
    """The stationary solver asks for one ordering twice (to predict the fill, to factorise): the second call returns
    the first's ordering and separators (a private copy), and an array changed in place is ordered afresh."""
    from exactq.solvers import ordering

    K = 60
    x, y = np.meshgrid(np.arange(K), np.arange(K))
    c = np.stack([x.ravel(), y.ravel()], axis=1)
    s1, s2 = [], []
    p1 = ordering.nested_dissection(c, np.array([1, 1]), separators=s1)
    p1[0] = -1  # the caller's copy: the cache is not touched by it
    p2 = ordering.nested_dissection(c, np.array([1, 1]), separators=s2)
    fresh = ordering._dissect(c, np.array([1, 1]), 32, [])
    assert np.array_equal(p2, fresh) and len(s1) == len(s2) and all(np.array_equal(a, b) for a, b in zip(s1, s2))
    c[:, 0] = c[:, 0][::-1]  # the same array object, other contents
    assert np.array_equal(ordering.nested_dissection(c, np.array([1, 1])), ordering._dissect(c, np.array([1, 1]), 32, []))
    assert not np.array_equal(ordering.nested_dissection(c, np.array([2, 1])), p2)  # other jumps: another ordering


def test_classes_given_by_the_caller_are_used_as_found():
    """stationary(classes=...) (a model checker passes the classes it found) answers as without them: the
    same vector on a chain with transient states, the same refusal of a reducible one."""
    from exactq.errors import ReducibleError
    from exactq.solvers.structure import communicating_classes

    Q = sp.csr_matrix(np.array([[-2.0, 1.0, 1.0, 0.0], [0.0, -1.0, 1.0, 0.0], [0.0, 3.0, -3.0, 0.0],
                                [0.0, 0.0, 1.0, -1.0]]))
    given = stationary(Q, classes=communicating_classes(Q))
    np.testing.assert_array_equal(given.pi, stationary(Q).pi)
    assert given.info["transient_states"] == 2
    R = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ReducibleError):
        stationary(R, classes=communicating_classes(R))


def test_the_reduced_system_cut_from_csr_arrays_is_the_coo_one():
    """B = Q^T less the reference's row and column, b = -Q[ref, others]: the in-place cut of a canonical CSR
    (every reference, explicit zeros included) against the COO construction a CSC input takes."""
    from exactq.solvers.stationary import _reduced_system

    rng = np.random.default_rng(12)
    for n in (2, 7, 40):
        M = sp.random(n, n, density=0.3, random_state=rng, format="csr")
        M.setdiag(0.0)
        M.eliminate_zeros()
        Q = (M - sp.diags(np.asarray(M.sum(axis=1)).ravel())).tocsr()
        Q.data[::5] = 0.0  # explicit zeros stay entries, in both constructions
        for ref in range(n):
            B, b, perm = _reduced_system(Q, ref, None)
            B2, b2, perm2 = _reduced_system(sp.csc_matrix(Q), ref, None)
            assert B.format == "csc" and B.nnz == B2.nnz
            assert (B != B2).nnz == 0 and np.array_equal(b, b2) and np.array_equal(perm, perm2)
            keep = np.delete(np.arange(n), ref)
            np.testing.assert_array_equal(B.toarray(), Q.toarray().T[np.ix_(keep, keep)])


def test_a_chain_without_coordinates_is_factorised_in_minimum_degree_order():
    """The "mmd" ordering (no coordinates, or fewer than ND_MIN_STATES states) is SuperLU's minimum degree on
    A^T + A, not the chain's own order: a 2-D walk numbered at random fills 10x less than in its own order, and
    its stationary vector is the product form's (a reversible walk with symmetric rates: uniform)."""
    import scipy.sparse.linalg as spla

    from exactq.solvers.stationary import _factor, _reduced_system, stationary

    rng = np.random.default_rng(4)
    k = 40
    n = k * k
    idx = np.arange(n).reshape(k, k)
    rows = np.concatenate([idx[:, :-1].ravel(), idx[:, 1:].ravel(), idx[:-1, :].ravel(), idx[1:, :].ravel()])
    cols = np.concatenate([idx[:, 1:].ravel(), idx[:, :-1].ravel(), idx[1:, :].ravel(), idx[:-1, :].ravel()])
    perm = rng.permutation(n)
    M = sp.csr_matrix((np.ones(rows.size), (perm[rows], perm[cols])), shape=(n, n))
    Q = (M - sp.diags(np.asarray(M.sum(axis=1)).ravel())).tocsr()
    lu, B, b, order, info = _factor(Q, 0, None, None)
    assert info["ordering"] == "MMD_AT_PLUS_A"
    natural = spla.splu(_reduced_system(Q, 0, None)[0], permc_spec="NATURAL", diag_pivot_thresh=0.0,
                        options=dict(SymmetricMode=True))
    assert lu.nnz * 5 < natural.nnz
    st = stationary(Q, method="direct")
    np.testing.assert_allclose(st.pi, np.full(n, 1.0 / n), rtol=1e-11)
