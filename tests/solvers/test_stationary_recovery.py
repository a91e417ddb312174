"""No wrong number from a stationary solve (issue 19, item 1).

Chains whose stationary mass sits 1,000 levels away from the reference (initial) state,
with rates that make the unnormalised solution ``pi / pi[ref]`` overflow a double
(``10^999``), solved by every method and checked against their closed-form geometric
laws; solves forced to produce NaN must recover (and say so in ``info["recovery"]``)
or raise, never return a value.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import exactq
from exactq.api import check_properties
from exactq.ctmc import CTMC, StationaryDistribution
from exactq.errors import ConvergenceError, ModelError
from exactq.solvers import level_aggregation, stationary as stationary_module
from exactq.solvers.csl import check_chain
from exactq.solvers.level_aggregation import stationary_levels
from exactq.solvers.stationary import NoValidVector, check_stationary, solve_stationary, stationary


def birth_death(n: int, up: float, down: float) -> sp.csr_matrix:
    Q = sp.diags([np.full(n - 1, down), np.full(n - 1, up)], [-1, 1], format="lil")
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    return Q.tocsr()


def geometric(n: int, ratio: float) -> np.ndarray:
    """``pi_i ~ ratio^i`` on 0..n-1, computed from the top (no overflow)."""
    p = np.exp((np.arange(n) - (n - 1.0)) * math.log(ratio))
    return p / p.sum()


PHASES = np.array([[-1.0, 1.0, 0.0], [0.5, -1.5, 1.0], [0.0, 2.0, -2.0]])
PHASE_LAW = np.array([0.25, 0.5, 0.25])  # PHASE_LAW @ PHASES = 0


def level_and_phase(levels: int, ratio: float):
    """A level birth-death chain (up ``ratio``, down 1) times an independent 3-phase chain.

    Product form: ``pi(x, y) = geometric(x) * PHASE_LAW[y]``. Returns Q, coordinates, law.
    """
    Q = (sp.kron(birth_death(levels, ratio, 1.0), sp.identity(3)) + sp.kron(sp.identity(levels), PHASES)).tocsr()
    coords = np.stack(np.unravel_index(np.arange(3 * levels), (levels, 3)), axis=1)
    return Q, coords, np.outer(geometric(levels, ratio), PHASE_LAW).ravel()


def assert_law(st, exact, atol=1e-14):
    """Invariants, and the closed form (``atol``; power iteration stops on its residual, 1e-12)."""
    assert np.all(np.isfinite(st.pi)) and np.all(st.pi >= 0)
    assert abs(st.pi.sum() - 1.0) < 1e-12
    assert st.info["relative_residual"] < 1e-12
    np.testing.assert_allclose(st.pi, exact, rtol=0, atol=atol)
    top = np.argmax(exact)
    assert st.pi[top] == pytest.approx(exact[top], rel=100 * atol)


# ------------------------------------------------------------------ mass far away
OVERFLOWING = [(1000, 10.0), (1000, 2.5), (300, 1e3)]  # ratio^(n-1) > 1e308 in every case


@pytest.mark.parametrize("n, ratio", OVERFLOWING)
@pytest.mark.parametrize("method", ["direct", "gmres", "mpmath", "power"])
def test_birth_death_with_the_mass_far_from_the_reference(n, ratio, method):
    assert (n - 1) * math.log10(ratio) > 308  # pi / pi[0] overflows a double
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recovered, not merely warned about
        st = stationary(birth_death(n, ratio, 1.0), method=method, reference=0)
    assert st.method == method
    assert_law(st, geometric(n, ratio), atol=1e-9 if method == "power" else 1e-14)
    if method != "power":  # the referenced methods changed their reference, and say so
        steps = st.info["recovery"]
        assert steps[0]["from"] == f"{method}, reference state 0"
        assert steps[-1]["to"] == f"{method}, reference state {n - 1}"
        assert all(s["why"] for s in steps)


def test_gth_does_not_overflow_when_the_mass_is_far_from_state_0():
    n, ratio = 400, 10.0
    st = stationary(birth_death(n, ratio, 1.0), method="gth")
    assert "recovery" not in st.info  # rescaled back substitution: nothing to recover from
    assert_law(st, geometric(n, ratio))


def test_level_reduction_overflow_is_rescaled():
    # 1,000 levels of 3 phases, the mass at the top level: before, the level recursion
    # overflowed and returned NaN for 2,074 of the 3,000 states
    Q, coords, exact = level_and_phase(1000, 10.0)
    st = stationary(Q, method="level-reduction", coords=coords, jumps=np.array([1, 1]))
    assert st.method == "level-reduction" and "recovery" not in st.info
    assert_law(st, exact)


def test_level_reduction_falls_back_when_a_level_is_singular():
    # one level of 64 states where leaving needs 63 steps against a drift of 2: its
    # sparse part is singular in double precision; the direct solver takes over
    n = 4096
    Q = birth_death(n, 2.0, 1.0)
    st = stationary(Q, method="level-reduction", coords=(np.arange(n) // 64)[:, None], reference=0)
    assert st.method == "direct"
    assert st.info["recovery"][0]["from"] == "level-reduction"
    assert "singular" in st.info["recovery"][0]["why"]
    assert_law(st, geometric(n, 2.0))


@pytest.mark.parametrize("method", ["direct", "gmres"])  # mpmath: the same factor (5 s at 3,000 states)
def test_two_dimensional_chain_with_the_mass_1000_levels_away(method):
    Q, coords, exact = level_and_phase(1000, 10.0)
    st = stationary(Q, method=method, reference=0, coords=coords, jumps=np.array([1, 1]))
    assert_law(st, exact)
    assert st.info["recovery"][-1]["to"].endswith(f"reference state {int(np.argmax(exact))}")


def test_level_aggregation_changes_reference_when_the_iterate_overflows(monkeypatch):
    n, ratio = 1000, 10.0
    real = level_aggregation._iterate
    calls = []

    def overflow_first(sysm, x0, reference, *args):
        calls.append(reference)
        pi, x, nit, restarts, res = real(sysm, x0, reference, *args)
        if len(calls) == 1:  # what the reference state far from the mass does to x = pi / pi[ref]
            x = np.where(np.arange(n) > 600, np.inf, np.arange(n) + 1.0)
            return np.full(n, np.nan), x, nit, restarts, math.inf
        return pi, x, nit, restarts, res

    monkeypatch.setattr(level_aggregation, "_iterate", overflow_first)
    st = stationary_levels(birth_death(n, ratio, 1.0), np.arange(n), reference=0)
    assert calls[0] == 0 and len(calls) == 2
    assert st.info["recovery"][0]["from"] == "level-aggregation, reference state 0"
    assert_law(st, geometric(n, ratio))


# ------------------------------------------------------------------ forced failures
def _nan_solve(*args, **kwargs):
    n = args[0].shape[0]
    x = np.ones(n)
    x[n // 2:] = np.nan
    return x, {}


def test_a_nan_producing_direct_solve_recovers_with_another_method(monkeypatch):
    monkeypatch.setattr(stationary_module, "_direct", _nan_solve)
    n, ratio = 300, 1.05
    st = stationary(birth_death(n, ratio, 1.0), method="direct")
    assert st.method == "gth"
    assert any(r["to"] == "gth" and "not finite" in r["why"] for r in st.info["recovery"])
    assert_law(st, geometric(n, ratio))


def test_no_value_comes_out_of_a_solve_that_only_gives_nan(monkeypatch):
    monkeypatch.setattr(stationary_module, "_direct", _nan_solve)
    monkeypatch.setattr(stationary_module, "_gth", lambda A: np.full(A.shape[0], np.nan))
    Q = birth_death(300, 1.05, 1.0)
    with pytest.raises(ConvergenceError, match="no stationary solver gave a valid vector"):
        stationary(Q, strict=False)  # not even a warning: there is no value to give
    chain = CTMC.from_generator(Q, ["x"])
    with pytest.raises(NoValidVector):
        solve_stationary(chain)
    with pytest.raises(ConvergenceError):
        check_chain(chain, "S=? [ x >= 290 ]")


def test_check_properties_raises_instead_of_printing_zero(monkeypatch):
    monkeypatch.setattr(stationary_module, "_direct", _nan_solve)
    monkeypatch.setattr(stationary_module, "_gth", lambda A: np.full(A.shape[0], np.nan))
    m = exactq.load_prism("bd.sm", text=PRISM_BIRTH_DEATH.replace("999", "299"))
    with pytest.raises(ConvergenceError):
        check_properties(m, "S=? [ x >= 290 ]")


def test_check_stationary_names_each_problem():
    Q = birth_death(3, 1.0, 1.0)
    assert check_stationary(Q, None, tol=1e-12)[:2] == (None, "the solve failed")
    assert "not finite" in check_stationary(Q, np.array([1.0, np.nan, 1.0]), tol=1e-12)[1]
    assert "negative" in check_stationary(Q, np.array([1.0, -0.5, 1.0]), tol=1e-12)[1]
    assert "zero vector" in check_stationary(Q, np.zeros(3), tol=1e-12)[1]
    pi, problem, rel = check_stationary(Q, np.array([1.0, 2.0, 1.0]), tol=1e-12)
    assert pi is not None and "relative residual" in problem and rel > 0.1
    pi, problem, rel = check_stationary(Q, np.array([1e300, 1e300, 1e300]), tol=1e-12)  # sum overflows
    np.testing.assert_allclose(pi, 1 / 3, rtol=1e-15)
    assert problem is None
    pi, problem, _ = check_stationary(Q, np.array([1.0, 1.0, -1e-14]), tol=1.0)  # rounding noise
    assert problem is None and pi[2] == 0.0 and pi.sum() == 1.0


def test_a_stationary_distribution_cannot_hold_nan():
    with pytest.raises(ConvergenceError, match="non-finite"):
        StationaryDistribution(np.array([0.5, np.nan]), "direct", 0.0)


def test_expect_ignores_zero_probability_states_and_refuses_infinite_values():
    d = StationaryDistribution(np.array([0.5, 0.5, 0.0]), "gth", 0.0)
    assert d.expect(np.array([1.0, 3.0, np.inf])) == 2.0  # inf * 0 would have been NaN
    with pytest.raises(ModelError, match="not finite"):
        d.expect(np.array([np.inf, 1.0, 1.0]))


# ------------------------------------------------------------------ the user's view
PRISM_BIRTH_DEATH = """ctmc
module m
  x : [0..999] init 0;
  [] x<999 -> 10 : (x'=x+1);
  [] x>0 -> 1 : (x'=x-1);
endmodule
rewards "x"
  true : x;
endrewards
"""


def test_prism_steady_state_with_the_mass_far_from_the_initial_state():
    m = exactq.load_prism("bd.sm", text=PRISM_BIRTH_DEATH)
    law = geometric(1000, 10.0)
    s, r = check_properties(m, 'S=? [ x>=990 ]\nR{"x"}=? [ S ]')
    assert s.value == pytest.approx(law[990:].sum(), rel=1e-12)
    assert r.value == pytest.approx(float(np.arange(1000) @ law), rel=1e-12)
    # it says what it did: the mass sweeps, run until their largest entry settles, moved the reference state
    # away from the improbable initial one before the LU (three sweeps did not, and a recovery redid the LU)
    st = s.info["stationary"]
    assert "x=0" in st["solver"]["reference"] and "mass sweeps" in st["solver"]["reference"]
    assert not st.get("recovery")


PRISM_LEVEL_PHASE = """ctmc
module m
  x : [0..999] init 0;
  y : [0..2] init 0;
  [] x<999 -> 10 : (x'=x+1);
  [] x>0 -> 1 : (x'=x-1);
  [] y=0 -> 1 : (y'=1);
  [] y=1 -> 0.5 : (y'=0);
  [] y=1 -> 1 : (y'=2);
  [] y=2 -> 2 : (y'=1);
endmodule
rewards "x"
  true : x;
endrewards
"""


def test_prism_two_dimensional_steady_state_against_the_product_form():
    m = exactq.load_prism("lp.sm", text=PRISM_LEVEL_PHASE)
    gx = geometric(1000, 10.0)
    s, r, y = check_properties(m, 'S=? [ x>=995 & y=1 ]\nR{"x"}=? [ S ]\nS=? [ y=2 ]')
    assert s.value == pytest.approx(gx[995:].sum() * PHASE_LAW[1], rel=1e-12)
    assert r.value == pytest.approx(float(np.arange(1000) @ gx), rel=1e-12)
    assert y.value == pytest.approx(PHASE_LAW[2], rel=1e-12)


def _loss_network(C):
    """A multi-rate Erlang loss system (three classes needing 1, 2 and 4 of C channels; Kaufman 1981): the
    generator on {n : n1 + 2 n2 + 4 n3 <= C}, and its product-form law pi(n) ~ prod rho_k^n_k / n_k!."""
    import itertools
    import math

    b, mu = np.array([1, 2, 4]), np.array([1.0, 0.5, 2.0])
    lam = np.array([0.3, 0.1, 0.1]) * C * mu
    states = np.array([s for s in itertools.product(*(range(C // k + 1) for k in b)) if s @ b <= C])
    index = {tuple(s): i for i, s in enumerate(states)}
    rows, cols, rates = [], [], []
    for i, s in enumerate(states):
        for k in range(3):
            up = s.copy()
            up[k] += 1
            if up @ b <= C:
                rows.append(i), cols.append(index[tuple(up)]), rates.append(lam[k])
            if s[k] > 0:
                down = s.copy()
                down[k] -= 1
                rows.append(i), cols.append(index[tuple(down)]), rates.append(s[k] * mu[k])
    n = len(states)
    R = sp.csr_matrix((rates, (rows, cols)), shape=(n, n))
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    logw = states @ np.log(lam / mu) - np.array([sum(math.lgamma(v + 1) for v in s) for s in states])
    w = np.exp(logw - logw.max())
    return Q, states, w / w.sum()


def test_a_poor_first_reference_state_is_recovered_from_without_running_the_iteration_limit():
    """A heavily loaded loss network (C = 90, 17,296 states): three Gauss-Seidel sweeps point at a state of
    probability ~1e-13 of the largest, and BiCGSTAB from it stagnates at a relative residual ~1e-2. The solve
    stops on the stagnation, takes the reference from a deeper estimate, and must give the product form."""
    import time

    Q, states, exact = _loss_network(90)
    t0 = time.perf_counter()
    r = stationary(Q, coords=states, jumps=np.ones(3, dtype=np.int64))
    seconds = time.perf_counter() - t0
    big = exact > 1e-12
    assert np.max(np.abs(r.pi[big] - exact[big]) / exact[big]) < 1e-9
    assert np.abs(r.pi - exact).sum() < 1e-10
    assert len(r.info.get("recovery", [])) <= 3, r.info.get("recovery")
    assert seconds < 60  # (generous: a stagnating run used to go on for minutes at larger C)


@pytest.mark.parametrize("n", [1, 2, 7, 200])
@pytest.mark.parametrize("compiled", [True, False])
def test_the_mass_sweeps_are_gauss_seidel_half_sweeps_of_the_transposed_generator(n, compiled, monkeypatch):
    """:class:`_MassSweeps`' half sweeps, by PyAMG's compiled sweep over -Q^T or by the four triangles cut from
    Q^T (without it), against dense solves: forward (D - L) y = U x, backward (D - U) y = L x, and the solve of
    x itself where the right-hand side is zero (x = e_0 has U x = 0)."""
    import exactq.solvers.linear as L
    from exactq.solvers.stationary import _MassSweeps

    if not compiled:
        monkeypatch.setattr(L, "_SWEEPS", [None])
    rng = np.random.default_rng(n)
    R = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    R.setdiag(0)
    R.eliminate_zeros()
    Q = sp.csr_matrix(R - sp.diags(np.asarray(R.sum(axis=1)).ravel() + 1.0))
    s = _MassSweeps(Q)
    assert (s._sweep is not None) == compiled
    QT = Q.T.toarray()
    Dm = np.diag(-np.diag(QT))
    low, up = np.tril(QT, -1), np.triu(QT, 1)
    for x in (rng.random(n), np.eye(n)[0]):
        halves = s._halves(x)
        y1 = next(halves)
        rhs = up @ x
        want = np.linalg.solve(Dm - low, rhs if rhs.any() else x)
        np.testing.assert_allclose(y1, want, rtol=1e-12, atol=1e-14)
        x1 = y1 / y1.max()
        y2 = halves.send(x1)
        rhs = low @ x1
        np.testing.assert_allclose(y2, np.linalg.solve(Dm - up, rhs if rhs.any() else x1), rtol=1e-12, atol=1e-14)
    x = rng.random(n)
    assert np.all(np.isfinite(s.run(x, 2)))
