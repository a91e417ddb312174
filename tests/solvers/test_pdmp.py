"""The PDMP solvers: the q-series, the Kolmogorov discretisation, stability and CDF comparison.

Every expected number is a closed form (Altman et al. 2005; MODELS.md "Adaptive window
protocols") or the other, independent solver.
"""

import math
import warnings

import mpmath
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

from exactq.catalogue import solve_representation
from exactq.errors import AccuracyWarning, ModelError, NotApplicableError, UnstableError
from exactq.representations.pdmp import PDMP, CDFPair, PowerLaw, StabilityVerdict
from exactq.solvers.pdmp import compare_cdfs, stability
from exactq.solvers.pdmp_kolmogorov import solve_kolmogorov
from exactq.solvers.pdmp_series import _phi, series_moment, solve_series

HS_A = (2 / 3) * 1e-3 * 38 ** (1 / 0.835)
HS_ALPHA = 2 - 1 / 0.835


def newreno(p=1e-3, **kw):
    return PDMP(PowerLaw(1.0), PowerLaw(p, 1.0), nu=0.5, **kw)


def both(rep):
    return solve_series(rep), solve_kolmogorov(rep)


# ------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("a, lam, nu", [(1.0, 1.0, 0.5), (2.0, 0.01, 0.7), (0.5, 3.0, 0.2)])
def test_aimd_constant_rate_moments(a, lam, nu):
    """E[W^n] = n! (a/lam)^n / prod_{k<=n} (1 - nu^k): series to 1e-12, Kolmogorov to 1e-9."""
    rep = PDMP(PowerLaw(a), PowerLaw(lam), nu=nu)
    exact, numeric = both(rep)
    for n in (1, 2, 3, 4):
        closed = math.factorial(n) * (a / lam) ** n / math.prod(1 - nu**k for k in range(1, n + 1))
        assert exact.moment(n) == pytest.approx(closed, rel=1e-12)
        assert numeric.moment(n) == pytest.approx(closed, rel=1e-9)


def test_linear_increase_window_proportional_losses_second_moment():
    """Losses at rate lam W, linear increase a: E[W^2] = a / (lam (1 - nu)) exactly."""
    for a, lam, nu in ((1.0, 1e-3, 0.5), (3.0, 0.02, 0.8)):
        exact, numeric = both(PDMP(PowerLaw(a), PowerLaw(lam, 1.0), nu=nu))
        assert exact.moment(2) == pytest.approx(a / (lam * (1 - nu)), rel=1e-13)
        assert numeric.moment(2) == pytest.approx(a / (lam * (1 - nu)), rel=1e-9)


def test_scalable_mean():
    """Multiplicative increase a W with losses lam W: E[W] = (a/lam) / ln(1/nu)."""
    a, lam, nu = 0.01, 1e-4, 0.875
    exact, numeric = both(PDMP(PowerLaw(a, 1.0), PowerLaw(lam, 1.0), nu=nu))
    closed = (a / lam) / math.log(1 / nu)
    assert exact.mean() == pytest.approx(closed, rel=1e-13)
    assert numeric.mean() == pytest.approx(closed, rel=1e-9)


def test_newreno_reference_value():
    """MODELS.md: NewReno at p = 0.001 has E[W] ~ 41.4206 (a discretised Kolmogorov equation)."""
    exact, numeric = both(newreno())
    assert exact.mean() == pytest.approx(41.4206, abs=5e-5)
    assert numeric.mean() == pytest.approx(exact.mean(), rel=1e-10)
    assert exact.moment_estimate(1)[1] < 1e-12


def test_series_moment_closed_forms_at_high_precision():
    with mpmath.workdps(40):
        v = series_moment(1, 0, 1, 0, 0.5, 3, dps=40)
        assert abs(v - mpmath.mpf(6) / (mpmath.mpf(1) / 2 * mpmath.mpf(3) / 4 * mpmath.mpf(7) / 8)) < 1e-35
    with pytest.raises(ModelError, match="m = gamma"):
        series_moment(1, 2, 1, 0, 0.5, 1)


def test_phi_is_continuous_through_its_removable_singularities():
    """Phi(s) = Gamma(s) (q^s; q)_inf is entire: the closed form at s = 0, -1 matches nearby values."""
    with mpmath.workdps(40):
        q = mpmath.mpf("0.6")
        for s0 in (0, -1, -2):
            mid, left, right = _phi(s0, q), _phi(s0 - mpmath.mpf("1e-15"), q), _phi(s0 + mpmath.mpf("1e-15"), q)
            assert abs(left - mid) < 1e-13 * abs(mid) and abs(right - mid) < 1e-13 * abs(mid)
        assert abs(_phi(0, q) - mpmath.log(1 / q) * mpmath.qp(q)) < 1e-35


def test_negative_and_fractional_moments_agree():
    rep = PDMP(PowerLaw(2.0, 0.5), PowerLaw(0.3, 0.3), nu=0.7)
    exact, numeric = both(rep)
    for k in (-1.0, 0.5, 2.5):
        assert numeric.moment(k) == pytest.approx(exact.moment(k), rel=1e-9)


# -------------------------------------------------------------- the two solvers agree
PRESET_LIKE = {
    "newreno": newreno(),
    "scalable": PDMP(PowerLaw(0.01, 1.0), PowerLaw(1e-3, 1.0), nu=0.875),
    "highspeed": PDMP(PowerLaw(HS_A, HS_ALPHA), PowerLaw(1e-3, 1.0), nu=0.5),
    "superlinear": PDMP(PowerLaw(1.0, 1.5), PowerLaw(1.0, 1.0), nu=0.6),
}


@pytest.mark.parametrize("name", sorted(PRESET_LIKE))
def test_density_and_cdf_agree_on_a_grid(name):
    exact, numeric = both(PRESET_LIKE[name])
    x = np.linspace(0, 4 * exact.mean(), 301)
    fe, ee = exact.density_estimate(x)
    fn, en = numeric.density_estimate(x)
    assert np.max(np.abs(fe - fn)) <= 1e-9 * fe.max()
    assert np.all(np.abs(fe - fn) <= ee + en + 1e-14 * fe.max())
    Fe, Fn = exact.cdf(x), numeric.cdf(x)
    assert np.max(np.abs(Fe - Fn)) < 1e-9
    assert np.all(np.diff(Fe) >= -1e-15) and Fe[0] == 0.0
    # the density integrates to the CDF
    assert quad(lambda v: exact.density([v])[0], 0, x[150], limit=200)[0] == pytest.approx(Fe[150], abs=1e-11)
    assert exact.quantile(0.5) == pytest.approx(numeric.quantile(0.5), rel=1e-9)


def test_series_switches_to_mpmath_where_the_float_series_cancels():
    """q = 0.95: sum |c_n| ~ 1e7; the densities still agree with the Kolmogorov solution."""
    rep = PDMP(PowerLaw(0.02, 1.0), PowerLaw(1e-3, 1.0), nu=0.95)
    exact, numeric = both(rep)
    assert exact.info["series_cancellation"] > 1e6 and "mpmath" in exact.info["arithmetic"]
    x = np.linspace(1, 3 * exact.mean(), 40)
    assert np.max(np.abs(exact.density(x) - numeric.density(x))) < 1e-9 * exact.density(x).max()
    assert exact.mean() == pytest.approx((0.02 / 1e-3) / math.log(1 / 0.95), rel=1e-12)


# ------------------------------------------------------------------ the discretisation
def test_kolmogorov_converges_at_second_order():
    """The trapezoidal rule: the error of E[W] falls by 4 per mesh halving before extrapolation."""
    for rep, exact in ((PDMP(PowerLaw(1.0), PowerLaw(0.01), nu=0.5), 200.0),
                       (PRESET_LIKE["highspeed"], solve_series(PRESET_LIKE["highspeed"]).mean())):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)  # tol=1e-15 is not meant to be met
            sol = solve_kolmogorov(rep, max_levels=4, tol=1e-15, points_per_decrease=8)
        errors = np.abs(np.array(sol.info["first_moment_by_level"]) - exact)
        ratios = errors[:-1] / errors[1:]
        assert np.all((ratios > 3.6) & (ratios < 4.4)), ratios
        assert abs(sol.mean() - exact) < 1e-3 * errors[-1]  # Richardson removes the h^2, h^4, ... terms


def test_kolmogorov_refines_until_tol():
    loose = solve_kolmogorov(newreno(), tol=1e-4)
    tight = solve_kolmogorov(newreno(), tol=1e-12)
    assert loose.info["levels"] <= tight.info["levels"]
    assert tight.info["converged"] and tight.moment_estimate(1)[1] <= 1e-12 * tight.mean()


def test_kolmogorov_warns_or_raises_when_tol_is_not_met():
    rep = PDMP(PowerLaw(1.0), PowerLaw(0.01), nu=0.5)
    with pytest.warns(AccuracyWarning, match="not tol"):
        solve_kolmogorov(rep, tol=1e-15, max_levels=3, points_per_decrease=4)
    with pytest.raises(Exception, match="not tol"):
        solve_kolmogorov(rep, tol=1e-15, max_levels=3, points_per_decrease=4, strict=True)


def test_kolmogorov_options_are_validated():
    with pytest.raises(ModelError, match="points_per_decrease"):
        solve_kolmogorov(newreno(), points_per_decrease=2)
    with pytest.raises(ModelError, match="max_levels"):
        solve_kolmogorov(newreno(), max_levels=2)


# ------------------------------------------------------------------------ window bounds
def test_floor_conditions_the_unbounded_law():
    """Above w_min the level-crossing equation is unchanged: the law is f / P(W >= w_min)."""
    w0 = 30.0
    free = solve_series(newreno())
    exact, numeric = both(newreno(w_min=w0))
    tail = 1 - free.cdf([w0])[0]
    assert exact.info["unbounded_tail_probability"] == pytest.approx(tail, rel=1e-10)
    x = np.array([30.0, 45.0, 80.0])
    np.testing.assert_allclose(exact.density(x), free.density(x) / tail, rtol=1e-9)
    for k in (1, 2):
        assert numeric.moment(k) == pytest.approx(exact.moment(k), rel=1e-9)
    assert exact.cdf([w0 - 1e-9])[0] == 0.0


def _drift_balance(rep, sol):
    """E[a(W); W < w_max] and E[lambda(W) (W - d(W))] (the mean window does not drift).

    20-point Gauss-Legendre on 400 geometric panels with the density's breakpoints
    nu^j w_max as panel ends (an independent quadrature of the solver's density).
    """
    lo, hi = sol.info["window_range"]
    edges = set(np.geomspace(lo, hi, 400))
    if sol.atom is not None:
        edges |= {float(rep.d(hi)), float(rep.d(rep.d(hi))), float(rep.d(rep.d(rep.d(hi))))}
    edges = np.array(sorted(e for e in edges if lo <= e <= hi))
    gx, gw = np.polynomial.legendre.leggauss(20)
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * (edges[1:] - edges[:-1])
    v = (mid[:, None] + half[:, None] * gx[None, :]).ravel()
    weights = (half[:, None] * gw[None, :]).ravel() * sol.density(v)
    floor = rep.w_min or 0.0
    up = float(weights @ rep.a(v))
    down = float(weights @ (rep.loss(v) * (v - np.maximum(rep.d(v), floor))))
    if sol.atom is not None:
        w, p = sol.atom
        down += float(rep.loss(w)) * (w - max(float(rep.d(w)), floor)) * p
    return up, down


@pytest.mark.parametrize("kw", [dict(w_max=30.0), dict(w_max=60.0), dict(w_max=60.0, w_min=10.0)])
def test_ceiling_balances_the_drift(kw):
    rep = newreno(**kw)
    sol = solve_kolmogorov(rep)
    up, down = _drift_balance(rep, sol)
    assert up == pytest.approx(down, rel=1e-8)
    lo_mass = sol.cdf([kw["w_max"] * (1 - 1e-12)])[0]
    assert lo_mass + sol.atom[1] == pytest.approx(1.0, abs=1e-10)


def test_larger_floors_are_stochastically_larger():
    """The floored law is the unbounded one conditioned on W >= w_min: increasing in w_min."""
    x = np.linspace(0, 200, 401)
    floors = [solve_series(newreno(w_min=w)).cdf(x) for w in (5.0, 20.0, 40.0)]
    for small, large in zip(floors[:-1], floors[1:]):
        order = compare_cdfs(CDFPair(x, small, large, tol=1e-9))
        assert order.first_smaller and not order.second_smaller


def test_larger_ceilings_are_stochastically_larger_with_constant_rate_losses():
    """Losses independent of W: a lower ceiling is pathwise lower (same loss epochs), so W_{w_max}
    is stochastically increasing in w_max, up to the unbounded law."""
    rep = lambda **kw: PDMP(PowerLaw(1.0), PowerLaw(0.05), nu=0.5, **kw)  # noqa: E731
    x = np.linspace(0, 150, 301)
    laws = [solve_kolmogorov(rep(w_max=w)).cdf(x) for w in (10.0, 20.0, 40.0)] + [solve_series(rep()).cdf(x)]
    for small, large in zip(laws[:-1], laws[1:]):
        order = compare_cdfs(CDFPair(x, small, large, tol=1e-9))
        assert order.first_smaller and not order.second_smaller
    assert solve_kolmogorov(rep(w_max=1000.0)).mean() == pytest.approx(solve_series(rep()).mean(), rel=1e-9)


def test_a_ceiling_need_not_order_the_law_when_losses_grow_with_the_window():
    """Losses p W: a window held at w_max = 80 is lost less often than one above it, so near
    w_max the capped law has more mass above x than the unbounded one, although it is smaller in
    the bulk. The comparison reports where the order holds; the drift balance confirms the law."""
    x = np.linspace(0, 200, 401)
    capped = solve_kolmogorov(newreno(w_max=80.0))
    up, down = _drift_balance(newreno(w_max=80.0), capped)
    assert up == pytest.approx(down, rel=1e-8)
    order = compare_cdfs(CDFPair(x, capped.cdf(x), solve_series(newreno()).cdf(x), tol=1e-9))
    assert order.verdict() == "not ordered" and order.largest_violation > 1e-3
    assert order.regions[0][0] == 0.0 and order.regions[-1] == (80.0, 200.0)
    assert not order.first_smaller_at[(x > 70) & (x < 80)].any()


def test_series_refuses_a_ceiling_and_general_profiles():
    with pytest.raises(NotApplicableError, match="ceiling"):
        solve_series(newreno(w_max=50.0))
    general = PDMP(lambda w: 1.0 + 0 * w, PowerLaw(1e-3, 1.0), nu=0.5)
    with pytest.raises(NotApplicableError, match="power law"):
        solve_series(general)
    # dispatch by declared structure: the series first where it applies, else the general solver
    assert solve_representation(newreno()).method == "q-series"
    assert solve_representation(newreno(w_max=50.0)).method == "kolmogorov"
    assert solve_representation(general).method == "kolmogorov"


# --------------------------------------------------------------------- general decrease
def test_additive_decrease_with_a_floor_is_exponential():
    """d(w) = w - beta with a floor: f(x) = kappa e^(-kappa (x - w_min)), a kappa = lam (1 - e^(-kappa beta))."""
    a, lam, beta, w0 = 1.0, 0.2, 10.0, 5.0
    rep = PDMP(PowerLaw(a), PowerLaw(lam), decrease=lambda w: w - beta, decrease_inverse=lambda x: x + beta,
               w_min=w0)
    v = stability(rep)
    assert v.stable and not v.exact and v.value == pytest.approx(lam * beta / a, rel=1e-3)
    sol = solve_kolmogorov(rep)
    kappa = brentq(lambda k: a * k - lam * (1 - math.exp(-k * beta)), 1e-9, 10)
    assert sol.info["history"].startswith("degree-5")
    assert sol.mean() == pytest.approx(w0 + 1 / kappa, rel=1e-9)
    x = np.array([6.0, 20.0, 50.0])
    np.testing.assert_allclose(sol.density(x), kappa * np.exp(-kappa * (x - w0)), rtol=1e-7)


def test_decrease_given_as_a_callable_matches_the_multiplicative_one():
    """The same NewReno process with d(w) = w / 2 as an opaque map (inverse by bisection)."""
    rep = PDMP(PowerLaw(1.0), PowerLaw(1e-3, 1.0), decrease=lambda w: 0.5 * w)
    assert not rep.is_power_law
    np.testing.assert_allclose(rep.d_inverse(np.array([3.0, 7.0])), [6.0, 14.0], rtol=1e-14)
    assert solve_kolmogorov(rep).mean() == pytest.approx(solve_series(newreno()).mean(), rel=1e-9)


# ---------------------------------------------------------------------------- stability
def test_stability_of_power_laws():
    assert stability(newreno()).stable and stability(newreno()).quantity == "m = gamma + 1 - alpha"
    v = stability(PDMP(PowerLaw(1.0, 2.0), PowerLaw(1.0, 0.5), nu=0.5))
    assert not v.stable and v.value == pytest.approx(-0.5) and "m > 0" in v.rule
    assert not stability(PDMP(PowerLaw(1.0, 1.0), PowerLaw(1.0), nu=0.5)).stable  # m = 0, no bound
    both_bounds = PDMP(PowerLaw(1.0, 2.0), PowerLaw(1.0, 0.5), nu=0.5, w_min=1.0, w_max=10.0)
    assert stability(both_bounds).stable
    assert not stability(PDMP(PowerLaw(1.0, 2.0), PowerLaw(1.0, 0.5), nu=0.5, w_max=10.0)).stable
    assert not stability(PDMP(PowerLaw(1.0, 2.0), PowerLaw(1.0, 0.5), nu=0.5, w_min=1.0)).stable


def test_scalable_with_constant_losses_and_a_floor_is_pareto():
    """m = 0 with w_min: stable iff lam ln(1/nu) > a; Pareto tail index kappa + alpha - 1."""
    a, nu, w0 = 0.01, 0.875, 1.0
    edge = a / math.log(1 / nu)
    assert not stability(PDMP(PowerLaw(a, 1.0), PowerLaw(0.99 * edge), nu=nu, w_min=w0)).stable
    lam = 0.1
    rep = PDMP(PowerLaw(a, 1.0), PowerLaw(lam), nu=nu, w_min=w0)
    v = stability(rep)
    kappa = brentq(lambda k: a * k - lam * (1 - nu**k), 1e-6, 1e3)
    assert v.stable and v.details["tail_index"] == pytest.approx(kappa, rel=1e-12)
    exact, numeric = both(rep)
    assert exact.method == "q-series/pareto"
    assert exact.mean() == pytest.approx(kappa / (kappa - 1) * w0, rel=1e-12)
    assert numeric.mean() == pytest.approx(exact.mean(), rel=1e-8)
    assert exact.moment(kappa + 0.5) == math.inf
    # a heavier tail: the mean is infinite; the numerical solution says it cannot bound it
    heavy = PDMP(PowerLaw(a, 1.0), PowerLaw(0.078), nu=nu, w_min=w0)
    assert solve_series(heavy).mean() == math.inf
    with pytest.warns(AccuracyWarning, match="tail"):
        assert solve_kolmogorov(heavy).moment_estimate(1)[1] == math.inf


def test_m_zero_with_a_ceiling():
    """lam ln(1/nu) < a: the window is pushed to the ceiling; near 0 the density is ~ x^(kappa - alpha)."""
    a, nu = 0.01, 0.875
    stable = PDMP(PowerLaw(a, 1.0), PowerLaw(0.05), nu=nu, w_max=1000.0)
    v = stability(stable)
    kappa = brentq(lambda k: a * k - 0.05 * (nu**-k - 1), 1e-6, 100)
    assert v.stable and v.details["kappa"] == pytest.approx(kappa, rel=1e-10)
    sol = solve_kolmogorov(stable)
    up, down = _drift_balance(stable, sol)
    assert up == pytest.approx(down, rel=1e-7)
    # far below nu * w_max the density is a power (the other roots of the characteristic
    # equation die out; much lower, rounding in G - H dominates the tiny density)
    x = np.array([100.0, 200.0])
    f = sol.density(x)
    assert math.log(f[1] / f[0]) / math.log(2.0) == pytest.approx(kappa - 1.0, rel=1e-6)
    assert not stability(PDMP(PowerLaw(a, 1.0), PowerLaw(0.09), nu=nu, w_max=1000.0)).stable


def test_unstable_solutions_carry_only_the_verdict():
    rep = PDMP(PowerLaw(1.0, 2.0), PowerLaw(1.0, 0.5), nu=0.5)
    for sol in both(rep):
        assert not sol.is_stable
        with pytest.raises(UnstableError, match=r"m = gamma \+ 1 - alpha = -0.5"):
            sol.mean()
        with pytest.raises(UnstableError):
            sol.density([1.0])


def test_general_profiles_get_an_asymptotic_verdict():
    v = stability(PDMP(lambda w: 1.0 + 0 * w, lambda w: 1e-3 * w, nu=0.5))
    assert v.stable and not v.exact
    v = stability(PDMP(lambda w: w**2, lambda w: np.sqrt(w), nu=0.5))
    assert not v.stable and "large w" in v.quantity


# --------------------------------------------------------------------- the representation
def test_representation_validation():
    with pytest.raises(ModelError, match="nu must be > 0 and < 1"):
        PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=1.5)
    with pytest.raises(ModelError, match="exactly one of nu"):
        PDMP(PowerLaw(1.0), PowerLaw(1.0))
    with pytest.raises(ModelError, match="w_min must be < w_max"):
        PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.5, w_min=5, w_max=2)
    with pytest.raises(ModelError, match="coefficient must be > 0"):
        PowerLaw(-1.0)
    with pytest.raises(ModelError, match="increase a"):
        PDMP(lambda w: w - 10.0, PowerLaw(1.0), nu=0.5)
    with pytest.raises(ModelError, match="vectorised"):
        PDMP(lambda w: 1.0, PowerLaw(1.0), nu=0.5)
    with pytest.raises(ModelError, match="decrease d"):
        PDMP(PowerLaw(1.0), PowerLaw(1.0), decrease=lambda w: 2 * w)
    assert StabilityVerdict(True, "m", 2.0, "m > 0").to_info()["stable"] is True


def test_compare_cdfs_reports_where_the_order_holds():
    x = np.linspace(0, 4, 9)
    F = 1 - np.exp(-x)
    G = np.clip(x / 2, 0, 1)  # crosses F once
    out = compare_cdfs(CDFPair(x, F, G))
    assert out.verdict() == "not ordered" and not out.first_smaller and not out.second_smaller
    assert out.regions == [(0.0, 1.5)]  # F >= G up to the crossing between 1.5 and 2
    assert out.largest_violation == pytest.approx(np.max(G - F))
    same = compare_cdfs(CDFPair(x, F, F + 1e-13, tol=1e-12))
    assert same.verdict() == "equal"
    with pytest.raises(ModelError, match="CDF"):
        CDFPair(x, F[::-1], F)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert solve_representation(CDFPair(x, F, F)).first_smaller
