"""Mean-field fixed points, their stability, and the refined (1/n) correction.

Independent checks: the closed forms of Mitzenmacher / VDK (no errors), random routing
(d = 2, eps = 1/2), the scalar recursion of the independent-error fixed point, the two
limits of dependent errors (g = 0: no errors; g large: independent errors), the
stability limit 1/(eps d), and the 1/n coefficient of the exact finite-n chains
against the refined mean field.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dataclasses

import exactq
from exactq.catalogue import solve_representation
from exactq.errors import ModelError, UnstableError
from exactq.representations import FixedPoint, Population, RefinedFixedPoint
from exactq.solvers.meanfield import occupancy_fixed_point, solve_refined


def pop(**kw):
    return exactq.model("power-of-d", **kw).population()


@pytest.mark.parametrize("lam, d", [(0.9, 2), (0.5, 2), (0.99, 2), (0.95, 3), (0.7, 5)])
def test_no_errors_closed_form(lam, d):
    fp = occupancy_fixed_point(pop(servers="inf", d=d, arrival_rate=lam))
    k = np.arange(1, len(fp.s) + 1)
    want = lam ** ((d ** k.astype(float) - 1) / (d - 1))
    assert np.allclose(fp.s, want, rtol=1e-12, atol=1e-300)
    ET = sum(lam ** ((d ** j - d) / (d - 1)) for j in range(1, 60))
    assert fp.total() / lam == pytest.approx(ET, rel=1e-13)
    assert fp.stable and fp.spectral_abscissa < 0


def test_models_md_reference_values():
    r = exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.9)
    assert r.value == pytest.approx(2.614057, abs=5e-7)
    q = exactq.solve("power-of-d", "mean_queue_length", servers="inf", d=2, arrival_rate=0.9)
    assert q.value == pytest.approx(2.352652, abs=5e-7)
    assert r.error_estimate < 1e-12


@pytest.mark.parametrize("lam", [0.3, 0.9, 0.99])
def test_random_routing_identity(lam):
    fp = occupancy_fixed_point(pop(servers="inf", d=2, arrival_rate=lam, error="independent", eps=0.5))
    k = np.arange(1, len(fp.s) + 1)
    assert np.allclose(fp.s, lam ** k, rtol=1e-12)
    assert (fp.total()) / lam == pytest.approx(1 / (1 - lam), rel=1e-12)
    assert fp.tail_ratio == pytest.approx(lam)


@pytest.mark.parametrize("lam, d, eps", [(0.9, 2, 0.25), (0.6, 2, 0.75), (0.9, 3, 0.3), (0.2, 4, 1.0)])
def test_independent_errors_scalar_recursion(lam, d, eps):
    fp = occupancy_fixed_point(pop(servers="inf", d=d, arrival_rate=lam, error="independent", eps=eps))
    s, x = [lam], lam
    for _ in range(len(fp.s) - 1):
        x = lam * ((1 - eps) * x ** d - eps * math.expm1(d * math.log1p(-x)))  # 1-(1-x)^d, no cancellation
        s.append(x)
    assert np.allclose(fp.s, s, rtol=1e-11, atol=1e-300)
    # the tail closure: s_{k+1}/s_k -> lambda eps d
    assert fp.tail_ratio == pytest.approx(lam * eps * d)
    assert fp.s[-1] / fp.s[-2] == pytest.approx(lam * eps * d, rel=1e-6)


def test_dependent_errors_limits():
    base = dict(servers="inf", d=2, arrival_rate=0.8)
    none = exactq.solve("power-of-d", **base).value
    g0 = exactq.solve("power-of-d", error="dependent", eps=0.7, g=0, **base).value
    assert g0 == pytest.approx(none, rel=1e-13)  # span 0: the longest is the shortest
    ind = exactq.solve("power-of-d", error="independent", eps=0.3, **base).value
    big = exactq.solve("power-of-d", error="dependent", eps=0.3, g=40, **base).value
    assert big == pytest.approx(ind, rel=1e-10)  # every span is <= 40 where s is not 0
    g1 = exactq.solve("power-of-d", error="dependent", eps=0.3, g=1, **base).value
    assert none < g1 < ind


def test_dependent_fixed_point_is_a_zero_of_the_drift():
    p = pop(servers="inf", d=3, arrival_rate=0.95, error="dependent", eps=0.9, g=2)
    fp = occupancy_fixed_point(p)
    f = p.drift(fp.s, fp.tail_ratio)
    assert np.abs(f).max() < 1e-14
    assert np.all(np.diff(fp.s) < 0) and fp.stable
    J = p.jacobian(fp.s, fp.tail_ratio).toarray()
    assert np.allclose(fp.jacobian.toarray(), J, rtol=0, atol=1e-15)  # the solution carries it
    eps = 1e-7
    v = np.zeros(len(fp.s))
    v[2] = 1.0
    fd = (p.drift(fp.s + eps * v, fp.tail_ratio) - p.drift(fp.s - eps * v, fp.tail_ratio)) / (2 * eps)
    assert np.allclose(J[:, 2], fd, atol=1e-7)
    lead = np.linalg.eigvals(J[:fp.eig_block, :fp.eig_block])
    assert np.max(lead.real) == pytest.approx(np.max(fp.eigenvalues.real), abs=1e-12)


def test_stability_limit_and_region():
    r = exactq.solve("power-of-d", "stability_limit", servers="inf", d=2, error="independent", eps=0.75)
    assert r.value == pytest.approx(2 / 3)
    r = exactq.solve("power-of-d", "stability_limit", servers="inf", d=3, error="independent", eps=0.3)
    assert r.value == 1.0  # eps <= 1/d
    # a proper fixed point exists just below the limit ...
    below = exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.999 * 2 / 3, error="independent",
                         eps=0.75)
    assert math.isfinite(below.value) and below.value > 10
    # ... and not at or above it (the model refuses; the solver would too)
    with pytest.raises(UnstableError):
        exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=2 / 3, error="independent", eps=0.75)
    p = pop(servers="inf", d=2, arrival_rate=0.5, error="independent", eps=0.75)
    with pytest.raises(UnstableError, match="tail ratio"):  # the solver's own test: r = 0.7 * 1.5 >= 1
        occupancy_fixed_point(dataclasses.replace(p, arrival_rate=0.7))


def test_refined_is_the_meanfield_at_infinity():
    a = exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.8, method="refined").value
    b = exactq.solve("power-of-d", servers="inf", d=2, arrival_rate=0.8).value
    assert a == b


@pytest.mark.parametrize("sampling", ["with", "without"])
def test_refined_matches_the_exact_one_over_n_term(sampling):
    """n (E_n[T] - E_inf[T]) = b + c/n + O(1/n^2): the refined mean field predicts b."""
    lam = 0.4
    kw = dict(d=2, arrival_rate=lam, sampling=sampling)
    mf = exactq.solve("power-of-d", servers="inf", **kw).value
    ns = np.array([5.0, 7.0, 9.0])
    scaled = np.array([n * (exactq.solve("power-of-d", servers=int(n), tol=1e-11, **kw).value - mf) for n in ns])
    A = np.column_stack([np.ones(3), 1 / ns, 1 / ns ** 2])
    b = np.linalg.solve(A, scaled)[0]
    ref = exactq.solve("power-of-d", servers=9, method="refined", **kw).value
    assert 9 * (ref - mf) == pytest.approx(b, rel=0.01)


def test_refined_correction_structure():
    p = pop(servers=10, d=2, arrival_rate=0.9)
    ref = solve_refined(p)
    assert isinstance(ref, RefinedFixedPoint) and ref.lyapunov_residual < 1e-12
    V = ref.V
    assert V[0] == pytest.approx(0.0, abs=1e-9)  # s_1 = lambda at every n (work conservation)
    assert V.sum() > 0  # finite systems queue more than the limit
    assert np.allclose(ref.s, occupancy_fixed_point(p).s + V / 10, rtol=0, atol=1e-15)
    assert ref.drift_term > 0  # sampling without replacement has a 1/n drift term
    assert solve_refined(dataclasses.replace(p, power_correction=None)).drift_term == 0.0


def test_solvers_dispatch_on_the_population():
    p = pop(servers=8, d=2, arrival_rate=0.7)
    assert isinstance(solve_representation(p), FixedPoint)  # the fixed point is the default solver
    assert isinstance(solve_representation(p, "refined"), RefinedFixedPoint)


@pytest.mark.parametrize("kw, text", [
    (dict(arrival_rate=0.0), "arrival_rate must be a finite number > 0"),
    (dict(arrival_rate=0.5, servers=2.5), "servers must be an integer >= 1 or inf"),
    (dict(arrival_rate=0.5, bandwidth=-1), "bandwidth must be an integer >= 0"),
    (dict(arrival_rate=0.5, power_correction=lambda w: w), "power_correction needs power"),
    (dict(arrival_rate=0.5, tail_map=3), "tail_map must be callable"),
])
def test_population_validates_its_fields(kw, text):
    with pytest.raises(ModelError, match=text):
        Population(dispatch=lambda s, power=None: s ** 2, **kw)


def test_meanfield_speed_and_accuracy_target():
    """Any (d, eps, g, lambda): well below 50 ms per fixed point (bench/ measures it)."""
    import time

    cases = [dict(d=2, arrival_rate=0.99), dict(d=3, arrival_rate=0.9, error="dependent", eps=0.8, g=3),
             dict(d=2, arrival_rate=0.66, error="independent", eps=0.75)]
    for kw in cases:
        p = pop(servers="inf", **kw)
        t0 = time.perf_counter()
        fp = occupancy_fixed_point(p)
        assert time.perf_counter() - t0 < 1.0
        assert fp.residual < 1e-13
