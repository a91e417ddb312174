"""Values are finite or they are not values (issue 21 item 4), and methods agree on stability.

Each fix is checked against an independent value: a closed form, a second method, or
the same quadrature in another arithmetic.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import pytest

import exactq
from exactq.errors import AccuracyWarning, NonFiniteError, NotApplicableError
from exactq.result import Result


# ------------------------------------------------------------------------- the one check
def test_nan_is_never_a_value_and_inf_only_with_a_reason(monkeypatch):
    MM1 = type(exactq.model("mm1", arrival_rate=0.5))  # the class the catalogue registered

    monkeypatch.setattr(MM1, "closed_form", lambda self, measure: float("nan"))
    with pytest.raises(NonFiniteError, match="mm1 mean_number: method closed-form gave nan"):
        exactq.solve("mm1", "mean_number", method="closed-form", arrival_rate=0.5)
    assert Result(value=[1.0, math.inf], method="m").nonfinite() == "component 2 is inf"
    assert Result(value=math.inf, method="m", info={"infinite": "a Pareto tail"}).nonfinite() is None
    assert Result(value=True, method="m").nonfinite() is None


def test_a_divergent_moment_is_infinite_with_its_reason():
    """Pareto tail of index kappa <= 1: E[W] is infinite in exact arithmetic, and the result says why."""
    kw = dict(preset="general", a=0.01, alpha=1, gamma=0, nu=0.875, w_min=1, lam=0.078)
    r = exactq.solve("awp", "mean_window", **kw)
    assert r.value == math.inf and "Pareto tail" in r.info["infinite"]


# --------------------------------------------------------------------------- awp moments
AIMD = dict(preset="general", a=1.0, lam=1.0)


def aimd_moment(n: int, nu: float, digits: int = 50):
    """AIMD with constant-rate losses: E[W^n] = n! (a/lam)^n / prod_{k<=n} (1 - nu^k), in mpmath."""
    with mpmath.workdps(digits):
        nu = mpmath.mpf(nu)
        return mpmath.factorial(n) / mpmath.fprod(1 - nu**k for k in range(1, n + 1))


@pytest.mark.parametrize("method", ["analytic", "numerical"])
def test_a_moment_beyond_float64_is_refused_with_its_value(method):
    with pytest.raises(NonFiniteError, match=r"E\[W\^200\].* beyond the float64 range") as info:
        exactq.solve("awp", "window_moment", method=method, nu=0.5, k=200, **AIMD)
    if method == "analytic":  # the mpmath value is in the message
        assert mpmath.nstr(aimd_moment(200, 0.5), 6) in str(info.value)


def test_kolmogorov_moments_in_log_space_match_the_float_sum():
    """The log-sum-exp of the trapezoid sum equals the float sum where the latter does not overflow."""
    from exactq.representations.pdmp import PDMP, PowerLaw
    from solvers import pdmp_kolmogorov

    captured = {}
    real = pdmp_kolmogorov._KolmogorovMesh.solve

    def keep(self, ell):
        level = real(self, ell)
        captured.setdefault("level", level)
        return level

    pdmp_kolmogorov._KolmogorovMesh.solve = keep
    try:
        sol = pdmp_kolmogorov.solve_kolmogorov(PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.5))
    finally:
        pdmp_kolmogorov._KolmogorovMesh.solve = real
    level = captured["level"]
    for k in (1.0, 5.0, 20.0, 60.0):
        assert level.log_moment(k) == pytest.approx(math.log(level.moment(k)), rel=1e-12, abs=1e-12)
    # and the solution's moments agree with the closed form where the window resolves them
    assert sol.moment(5) == pytest.approx(float(aimd_moment(5, 0.5)), rel=1e-8)


@pytest.mark.parametrize("nu", [0.99, 0.999])
def test_the_q_series_near_one_against_the_closed_form_and_the_numerical_method(nu):
    """nu = 0.99 used to end in mpmath's NoConvergence, 0.999 in an OverflowError."""
    for n in (1, 2):
        r = exactq.solve("awp", "window_moment", method="analytic", nu=nu, k=n, **AIMD)
        assert r.value == pytest.approx(float(aimd_moment(n, nu)), rel=1e-10) and r.error_estimate < 1e-8 * r.value
    numerical = exactq.solve("awp", "mean_window", method="numerical", nu=nu, **AIMD).value
    assert numerical == pytest.approx(1 / (1 - nu), rel=1e-7)


def test_q_too_close_to_one_keeps_the_moments_of_order_j_m():
    """nu = 0.999999: the finite product gives E[W] = (a/lam)/(1 - nu) and E[W^3]; other orders are refused."""
    nu = 0.999999
    mean = exactq.solve("awp", "mean_window", nu=nu, **AIMD)
    assert mean.value == pytest.approx(1 / (1 - nu), rel=1e-12) and mean.info["law"].startswith("finite product")
    third = exactq.solve("awp", "window_moment", nu=nu, k=3, **AIMD).value
    assert third == pytest.approx(float(aimd_moment(3, nu)), rel=1e-10)
    with pytest.raises(NotApplicableError, match="not a multiple of m = 1.*use --method numerical"):
        exactq.solve("awp", "window_moment", nu=nu, k=2.5, **AIMD)
    with pytest.raises(NotApplicableError, match="density and the CDF.*use --method numerical"):
        exactq.solve("awp", "density", nu=nu, **AIMD)


# ---------------------------------------------------------------------- aoi: one stability
AOI = dict(scheme="actual", codeword_bits=10, actual_bits=8)


def test_aoi_methods_agree_on_stability_near_certain_erasure():
    """q_A = 4.5e-47: the model is positive recurrent; the chains cannot hold 1 - q_A and say so, alike."""
    from models.aoi import decoding_probability

    q = decoding_probability(10, 0.999999, 8)
    closed = exactq.solve("aoi", method="closed-form", erasure_prob=0.999999, **AOI).value
    assert closed == pytest.approx(0.5 + 1 / q, rel=1e-12)  # actual updates only: 1/2 + 1/q_A
    lines = []
    for method in ("qbd", "dtmc"):
        with pytest.raises(NotApplicableError, match="below the float64 resolution") as info:
            exactq.solve("aoi", method=method, erasure_prob=0.999999, **AOI)
        lines.append(str(info.value).replace(method, "METHOD"))
        assert "positive recurrent" in str(info.value) and "--method closed-form" in str(info.value)
    assert lines[0] == lines[1]


def test_aoi_chains_warn_where_they_resolve_q_a_coarser_than_tol():
    """erasure_prob = 0.97 (q_A = 2.8e-11): the QBD's mean age is off by ~1e-6 relative; it now says so."""
    closed = exactq.solve("aoi", method="closed-form", erasure_prob=0.97, **AOI).value
    with pytest.warns(AccuracyWarning, match="resolves it to a relative"):
        qbd = exactq.solve("aoi", method="qbd", erasure_prob=0.97, **AOI).value
    q = 1 / (closed - 0.5)
    assert abs(qbd - closed) <= 10 * 2.2e-16 / q * closed  # within the warned accuracy eps / q_A
    with pytest.raises(NotApplicableError, match="resolves it to a relative"):
        exactq.solve("aoi", method="qbd", erasure_prob=0.97, strict=True, **AOI)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a resolvable q_A: no warning, the methods agree
        a = exactq.solve("aoi", method="qbd", erasure_prob=0.3, **AOI).value
        b = exactq.solve("aoi", method="closed-form", erasure_prob=0.3, **AOI).value
    assert a == pytest.approx(b, rel=1e-12)


def test_aoi_underflowing_q_a_is_refused_by_its_log_value():
    from models.aoi import _log_decoding_probability, decoding_probability

    assert _log_decoding_probability(10, 0.3, 8) == pytest.approx(math.log(decoding_probability(10, 0.3, 8)),
                                                                 rel=1e-13)
    with pytest.raises(NonFiniteError, match=r"q_A = 10\^-1404.* beyond the float64 range"):
        exactq.solve("aoi", method="closed-form", scheme="actual", codeword_bits=2000, actual_bits=1000,
                     erasure_prob=0.99)
    p = exactq.solve("aoi", "decoding_failure_probability", method="closed-form", scheme="actual",
                     codeword_bits=2000, actual_bits=1000, erasure_prob=0.99).value
    assert p == 1.0  # 1 - q_A, q_A = 1e-1404: the double nearest
