"""Steady state by bottom strongly connected components (issue 20, item 2).

The checker's long-run queries on a chain with several closed classes solve each class
alone and weight it by the probability of reaching it from the initial state, as PRISM
and Storm do; with one closed class and transient states only the class is solved.
Checked against the closed forms of a gambler's-ruin start feeding two birth-death classes.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from exactq.ctmc import CTMC
from exactq.solvers.csl import check_chain


def two_classes(k=300, ratio=1.2):
    """States 0..2 transient (start 1: down to class A at rate 1, up to class B at rate 2, with 0 and 2
    as the entrances); class A: a birth-death chain of k states (up ratio, down 1); class B: two states."""
    n = 3 + k + 2
    Q = sp.lil_matrix((n, n))
    Q[1, 0], Q[1, 2] = 1.0, 2.0
    Q[0, 3], Q[2, 3 + k] = 5.0, 5.0  # the entrances lead into A (state 3) and into B (state 3 + k)
    for i in range(3, 3 + k - 1):
        Q[i, i + 1], Q[i + 1, i] = ratio, 1.0
    Q[3 + k, 4 + k], Q[4 + k, 3 + k] = 1.0, 3.0
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    g = ratio ** np.arange(k)
    pa = g / g.sum()
    pb = np.array([0.75, 0.25])
    return sp.csr_matrix(Q), pa, pb


def test_several_closed_classes_are_weighted_by_their_reach_probabilities():
    k = 300
    Q, pa, pb = two_classes(k)
    chain = CTMC.from_generator(Q, ["s"], initial=1)
    top_of_a = np.zeros(Q.shape[0], bool)
    top_of_a[3 + k - 1] = True
    a = check_chain(chain, "S=? [ s = %d ]" % (3 + k - 1))
    assert a.result.value == pytest.approx(pa[-1] / 3, rel=1e-12)  # P(reach A) = 1/3
    assert a.result.info["closed_classes"] == 2
    b = check_chain(chain, "S=? [ s = %d ]" % (4 + k))
    assert b.result.value == pytest.approx(pb[1] * 2 / 3, rel=1e-12)
    f = np.arange(Q.shape[0], dtype=float)
    e = check_chain(chain, "E=? [ s ]")
    expect = (pa @ f[3:3 + k]) / 3 + (pb @ f[3 + k:]) * 2 / 3
    assert e.result.value == pytest.approx(expect, rel=1e-12)


def test_one_closed_class_with_transient_states_solves_the_class_alone():
    k = 300
    Q, pa, _ = two_classes(k)
    Q = Q.tolil()
    Q[2, 3 + k] = 0.0
    Q[2, 3] = 5.0  # B is now unreachable from the transient part, but still closed: drop it
    keep = np.arange(3 + k)
    Q = Q.tocsr()[keep][:, keep].tolil()
    Q.setdiag(0.0)
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    chain = CTMC.from_generator(sp.csr_matrix(Q), ["s"], initial=1)
    a = check_chain(chain, "S=? [ s = %d ]" % (3 + k - 1))
    assert a.result.value == pytest.approx(pa[-1], rel=1e-12)
    assert a.stationary.info["transient_states"] == 3
    assert np.all(a.stationary.pi[:3] == 0)
