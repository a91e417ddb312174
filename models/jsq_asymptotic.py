"""Large-capacity approximations of the finite-capacity symmetric shortest queue (used by models/jsq.py).

Two queues of capacity K each, servers of rate mu, Poisson arrivals lambda, JSQ with
random ties; an arrival finding both queues full is lost. rho = lambda / mu (relative
to ONE server, as in Yao & Knessl, "On the finite capacity shortest queue problem").
Regimes as K -> infinity:

* rho < 2: blocking is exponentially small. Far from the capacity boundary the
  finite-capacity law coincides with the infinite-capacity one (the compensation
  series of the symmetric walk), and the blocking probability is

      P(block) ~ (1 + rho / 4) p_inf(K, K),

  with p_inf(m, m) the infinite-system probability of both queues holding m jobs.
  The factor 1 + rho/4 accounts for the arrivals the corner state (K, K) cannot
  accept; exactq identified it by matching the exact chains (it holds to six digits
  for K >= 10 when rho <= 1.2, and to 0.2% at rho = 1.9 once K(2 - rho) >= 6; see
  tests/models/test_finite_capacity.py). It is an approximation with a vanishing
  relative error, not one of the paper's expansions, which are not reproduced here.
* rho >= 2 and the critical layer rho - 2 = O(1/K): the system is near full, JSQ keeps
  the queues balanced and both servers busy, so the number of free places j = 2K - N
  is a birth-death process with births 2 mu and deaths lambda on 0..2K-1: with
  r = 2 / rho, P(j) = (1 - r) r^j / (1 - r^(2K)) and P(block) = (1 - r) / (1 - r^(2K))
  -> 1 - 2/rho for rho > 2, = 1/(2K) at rho = 2 (the exact chain gives 0.0250000 at
  K = 20). This beats the M/M/2/2K law of the total (which keeps the empty state)
  at every K tested (:func:`free_places_law`).
* The marginal law of one queue (``queue_length_distributions``): for rho < 2 the
  infinite-capacity law; for rho > 2 (K (rho - 2) / rho >= 1) the exact K -> inf limit
  seen from the full corner, :func:`corner_qbd`: in free places the system becomes two
  queues fed at rate mu each (the services) and drained by one server of rate lambda
  serving the one with more free places (the arrivals), a QBD solved by the generic
  matrix-geometric solver. Its marginal (:func:`corner_marginal`) decays like
  max(4 / rho^2, 1 / rho)^i in the free places i: the two queues empty together below
  rho = 4 and one alone above, the transition at rho = 4 of Yao & Knessl, derived here
  from that limit (the error against the exact chain decays geometrically in K),
  restricted to the capacity and renormalised. Closer to rho = 2 the free places are
  split evenly between the queues (a cruder approximation: total variation 0.01-0.03
  against the exact chain for K = 10..40; the corner limit is better once
  K (rho - 2) / rho >= 1).

The regime is chosen by K (2 - rho) / rho >= 3 (far below capacity) and reported. The
method gives no rigorous error bound.

References
----------
Y. Yao and C. Knessl, "On the finite capacity shortest queue problem", Progress in
Applied Probability (2008); MODELS.md, "Finite capacity".
"""

from __future__ import annotations

import math

import numpy as np

from exactq.errors import NotApplicableError
from exactq.representations import QBD

__all__ = ["far_from_capacity", "free_places_law", "corner_qbd", "corner_marginal", "regime"]


def far_from_capacity(rho: float, K: int) -> bool:
    """Whether the light-load regime applies: ``K (2 - rho) / rho >= 3``.

    Examples
    --------
    >>> far_from_capacity(1.0, 3), far_from_capacity(1.0, 2), far_from_capacity(2.0, 100)
    (True, False, False)
    """
    return K * (2 - rho) / rho >= 3


def regime(rho: float, K: int) -> str:
    """The regime's description as reported in a result's ``info["regime"]``.

    Examples
    --------
    >>> regime(3.0, 10).startswith("rho > 2")
    True
    """
    if far_from_capacity(rho, K):
        return "rho < 2: infinite-capacity law (compensation) with the corner correction 1 + rho/4"
    if K * (rho - 2) / rho >= 1:
        return ("rho > 2: free places as a geometric birth-death law, both servers busy; the marginal "
                "from the full-corner limit (serve-the-longest walk, exact QBD)")
    return ("rho - 2 = O(1/K)" if abs(rho - 2) * K < 3 else "rho near 2") + \
        ": free places as a geometric birth-death law, both servers busy, split evenly"


def free_places_law(rho: float, K: int) -> np.ndarray:
    """``P(j free places)``, ``j = 0..2K-1``: births 2 mu, deaths lambda (both servers busy).

    Geometric with ratio ``2 / rho``, computed in logarithms so that it neither
    overflows nor underflows for any rho, K.

    Examples
    --------
    At rho = 2 the law is uniform, so the blocking probability ``P(0)`` is ``1 / (2K)``:

    >>> round(float(free_places_law(2.0, 20)[0]), 12)
    0.025
    """
    j = np.arange(2 * K)
    logw = j * math.log(2.0 / rho)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def corner_qbd(rho: float, width: int = 60) -> QBD:
    """The K -> inf limit seen from the full corner, for rho > 2, as a QBD.

    In free places (i1, i2) = (K - Q1, K - Q2), near the full corner the system is two
    queues fed by the services (rate mu each) and drained by the arrivals (rate lambda),
    which take a place at the queue with more free places ("serve the longest"), and
    are lost at (0, 0). The boundary i = K is exponentially far for rho > 2, so the law
    of this walk is the limit of the finite system's law near full. Level = min(i1, i2),
    phase = |i1 - i2| <= width (a service at the queue with more free places from
    ``width`` stays at ``width``). Rates relative to mu = 1, lambda = rho.

    Raises
    ------
    NotApplicableError
        ``rho <= 2`` (the walk is not positive recurrent).

    Examples
    --------
    Both queues are full with probability ``1 - 2 / rho`` (the limit blocking probability):

    >>> from exactq.catalogue import solve_representation
    >>> sol = solve_representation(corner_qbd(3.0))
    >>> bool(abs(sol.pi0[0] - (1 - 2 / 3.0)) < 1e-12)
    True
    """
    if not rho > 2:
        raise NotApplicableError(f"the full-corner limit needs rho > 2 (positive recurrent); got rho={rho}")
    w = width + 1
    n = np.arange(1, w)
    A0, A1, A2 = np.zeros((w, w)), np.zeros((w, w)), np.zeros((w, w))
    A0[n, n - 1] += 1.0  # service at the queue with fewer free places: (m + 1, n - 1)
    A1[0, 1] += 2.0  # balanced: a service at either queue, (m, 1)
    A1[n, np.minimum(n + 1, width)] += 1.0  # service at the queue with more free places
    A1[n, n - 1] += rho  # arrival fills a place of the queue with more free places
    A2[0, 1] += rho  # balanced, m > 0: (m - 1, 1)
    A1[np.arange(w), np.arange(w)] = 0.0
    B1 = A1.copy()
    A1[np.arange(w), np.arange(w)] = -(A0.sum(1) + A1.sum(1) + A2.sum(1))
    B1[np.arange(w), np.arange(w)] = -(A0.sum(1) + B1.sum(1))  # at (0, 0) the arrival is lost
    return QBD(A0, A1, A2, B1=B1)


def corner_marginal(sol, imax: int) -> np.ndarray:
    """``P(one queue has i free places)``, ``i = 0..imax``, from the solved :func:`corner_qbd`.

    Decays like max(4 / rho^2, 1 / rho)^i: balanced emptying (both queues lose places,
    (2/rho)^(2i)) below rho = 4, one queue emptying alone while the other stays full
    ((1/rho)^i) above: the transition of the marginal at rho = 4 (Yao & Knessl).

    Examples
    --------
    At rho = 8 one queue empties alone: the marginal decays like ``1 / rho``:

    >>> from exactq.catalogue import solve_representation
    >>> p = corner_marginal(solve_representation(corner_qbd(8.0, width=80)), 60)
    >>> bool(abs(p[60] / p[59] * 8 - 1) < 2e-3)
    True
    """
    w = sol.n_phases
    P = np.empty((imax + 1, w))
    P[0] = sol.pi0
    if imax >= 1:
        P[1] = sol.pi1
        for L in range(2, imax + 1):  # one vector-matrix product per level, not per state
            P[L] = P[L - 1] @ sol.R
    # queue 2 is the one with fewer free places (m) or more (m + n) with probability 1/2 each
    out = P[:, 0] + 0.5 * P[:, 1:].sum(1)
    m, n = np.meshgrid(np.arange(imax + 1), np.arange(1, w), indexing="ij")
    keep = m + n <= imax
    np.add.at(out, (m + n)[keep], 0.5 * P[:, 1:][keep])
    return out
