"""Certified enclosures: they contain exact rational values, and the two methods agree."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from exactq.ctmc import CTMC, Event, build_ctmc
from exactq.errors import ConvergenceError, NotApplicableError, ReducibleError
from exactq.solvers.certify import ARB_MAX_STATES, enclose_stationary, enclose_stationary_arb
from exactq.statespace import StateSpace


def mmck_chain(lam, mu, c, K):
    space = StateSpace.box(["n"], hi=[K])
    return build_ctmc(space, [Event("a", lambda s: (np.full(len(s), float(lam)), s + 1)),
                              Event("d", lambda s: (float(mu) * np.minimum(s[:, 0], c), s - 1))])


def mmck_exact(lam, mu, c, K):
    """The stationary law in exact rationals (product form)."""
    lam, mu = Fraction(lam), Fraction(mu)
    p = [Fraction(1)]
    for n in range(1, K + 1):
        p.append(p[-1] * lam / (mu * min(n, c)))
    total = sum(p)
    return [x / total for x in p]


@pytest.mark.parametrize("method", [enclose_stationary, enclose_stationary_arb])
@pytest.mark.parametrize("lam, mu, c, K", [(2, 1, 2, 5), (7, 2, 3, 12), (1, 4, 1, 30), (9, 1, 4, 40)])
def test_enclosure_contains_the_exact_rational_value(method, lam, mu, c, K):
    chain = mmck_chain(lam, mu, c, K)
    p = mmck_exact(lam, mu, c, K)
    e = method(chain)
    n = chain.states[:, 0]
    lo, hi = e.expectation(n)
    exact = sum(k * pk for k, pk in enumerate(p))
    assert Fraction(lo) <= exact <= Fraction(hi)
    assert hi - lo <= 1e-12 * float(exact)
    lo, hi = e.expectation(n == K)  # blocking probability
    assert Fraction(lo) <= p[K] <= Fraction(hi) and hi - lo <= 1e-12
    # a ratio of two expectations: the mean number seen by accepted arrivals' time average (Little)
    lo, hi = e.expectation(n, (n < K).astype(float))
    exact_ratio = exact / (1 - p[K])
    assert Fraction(lo) <= exact_ratio <= Fraction(hi)


def test_the_two_methods_agree_and_the_float_solution_is_inside():
    chain = mmck_chain(3.3, 1.1, 3, 60)
    a, b = enclose_stationary(chain), enclose_stationary_arb(chain)
    f = chain.states[:, 0] ** 2
    (la, ha), (lb, hb) = a.expectation(f), b.expectation(f)
    assert max(la, lb) <= min(ha, hb)  # the intervals overlap
    assert hb - lb <= ha - la  # ball arithmetic is the tighter one here


def test_large_2d_chain_is_certified_tightly():
    """Two-server JSQ truncated at K = 60: width about 1e-12 relative for E[L]."""
    K, lam = 60, 1.5
    space = StateSpace.box(["q1", "q2"], hi=[K, K])
    s = space.states
    to1 = np.where(s[:, 0] < s[:, 1], 1.0, np.where(s[:, 0] == s[:, 1], 0.5, 0.0))
    ev = [Event("a1", lambda x: (lam * to1, x + [1, 0])), Event("a2", lambda x: (lam * (1 - to1), x + [0, 1])),
          Event("d1", lambda x: (1.0 * (x[:, 0] > 0), x - [1, 0])), Event("d2", lambda x: (1.0 * (x[:, 1] > 0), x - [0, 1]))]
    chain = build_ctmc(space, ev)
    e = enclose_stationary(chain)
    lo, hi = e.expectation(s.sum(axis=1))
    assert 0 < (hi - lo) / lo < 1e-10
    with pytest.raises(NotApplicableError, match="dense and limited"):
        enclose_stationary_arb(chain)
    assert chain.n_states > ARB_MAX_STATES


def test_reducible_chain_is_refused():
    Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    chain = CTMC.from_generator(Q)
    with pytest.raises(ReducibleError):
        enclose_stationary(chain)  # the float solve already names the two closed classes

    class Given:  # a float "solution" handed in: the certificate itself must refuse
        pi = np.array([0.0, 0.5, 0.5])

    with pytest.raises(ConvergenceError, match="singular|could not verify"):
        enclose_stationary(chain, Given())


# -- through the API: certify=True on the ctmc method ---------------------------------------------
import exactq  # noqa: E402


def test_certify_through_the_api_contains_the_exact_rational_value():
    r = exactq.solve("mmck", "mean_number", arrival_rate=2, servers=2, capacity=5, certify=True)
    exact = sum(k * pk for k, pk in enumerate(mmck_exact(2, 1, 2, 5)))
    assert r.method.startswith("ctmc/") and Fraction(r.lower) <= exact <= Fraction(r.upper)
    assert r.upper - r.lower <= 1e-12 and r.lower <= r.value <= r.upper
    assert "finite chain" in r.info["certificate"]["covers"]
    b = exactq.solve("mmck", "blocking_probability", arrival_rate=2, servers=2, capacity=5, certify=True)
    assert Fraction(b.lower) <= mmck_exact(2, 1, 2, 5)[5] <= Fraction(b.upper)


def test_certify_jsq_truncated_chain_and_what_it_covers():
    r = exactq.solve("jsq", "mean_response_time", method="ctmc", truncation=60, certify=True, lump=False,
                     arrival_rate=1.5, service_rates="1,1")
    assert r.lower <= r.value <= r.upper and (r.upper - r.lower) / r.value < 1e-10
    assert "truncated chain (level 60" in r.info["certificate"]["covers"]
    with pytest.raises(NotApplicableError, match="expectation"):
        exactq.solve("jsq", "mean_queue_lengths", method="ctmc", truncation=20, certify=True,
                     arrival_rate=1.5, service_rates="1,2")
    with pytest.raises(NotApplicableError, match="certify applies"):
        exactq.solve("jsq", method="compensation", certify=True, arrival_rate=1.5, service_rates="1,1")


# -- chains too large for a sparse LU: the level solver's iterations ----------------------------
def test_level_aggregation_certificate_contains_the_direct_solution():
    """A power-of-d level chain (declared levels): the certificate's solves are iterative, its bound is not."""
    from exactq.solvers.stationary import solve_stationary

    m = exactq.model("power-of-d", servers=4, d=2, arrival_rate=0.8)
    chain = m.level_chain(cost_bound=9.0)
    it = solve_stationary(chain)
    assert it.method == "level-aggregation"
    e = enclose_stationary(chain, it)
    assert e.info["solves"] == "level-aggregation BiCGSTAB" and "lu_nnz" not in e.info
    direct = solve_stationary(chain, solver="direct")  # an independent solve of the same chain
    L = chain.states.sum(axis=1).astype(float)
    lo, hi = e.expectation(L)
    assert lo <= float(direct.pi @ L) <= hi and lo <= float(it.pi @ L) <= hi
    assert (hi - lo) / lo < 1e-9
    for i in (int(np.argmax(direct.pi)), int(np.argmin(direct.pi)), len(L) // 2):  # single states too
        lo, hi = e.expectation((np.arange(len(L)) == i).astype(float))
        assert lo <= direct.pi[i] <= hi


def test_certify_the_exact_method_of_power_of_d():
    r = exactq.solve("power-of-d", "mean_response_time", method="exact", servers=3, d=2, arrival_rate=0.8,
                     tol=1e-7, certify=True)
    c = r.info["certificate"]
    assert r.lower <= r.value <= r.upper and c["relative_width"] < 1e-9
    assert "truncated chain" in c["covers"]
    p = exactq.solve("power-of-d", "p_wait", method="exact", servers=3, d=2, arrival_rate=0.8, tol=1e-7,
                     certify=True)
    assert p.lower <= p.value <= p.upper
    with pytest.raises(NotApplicableError, match="does not give one for occupancy"):
        exactq.solve("power-of-d", "occupancy", method="exact", servers=3, d=2, arrival_rate=0.7, certify=True)
