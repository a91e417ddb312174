"""Large-capacity approximations for the finite-capacity symmetric shortest queue.

Two queues of capacity K each, servers of rate mu, Poisson arrivals lambda, JSQ with
random ties; an arrival finding both queues full is lost. rho = lambda / mu (relative
to ONE server, as in Yao & Knessl, "On the finite capacity shortest queue problem").
Regimes as K -> infinity:

* rho < 2: blocking is exponentially small. Far from the capacity boundary the
  finite-capacity law coincides with the infinite-capacity one (computed by the
  compensation series), and the blocking probability is

      P(block) ~ (1 + rho / 4) p_inf(K, 0),

  with p_inf(m, 0) the infinite-system probability of both queues holding m jobs.
  The factor 1 + rho/4 accounts for the arrivals the corner state (K, K) cannot
  accept; exactq identified it by matching the exact chains (it holds to six digits
  for K >= 10 when rho <= 1.2, and to 0.2% at rho = 1.9 once K(2 - rho) >= 6; see
  tests/test_finite_capacity.py). It is an approximation with a vanishing relative
  error, not one of the paper's expansions, which are not reproduced here.
* rho >= 2 and the critical layer rho - 2 = O(1/K): the system is near full, JSQ keeps
  the queues balanced and both servers busy, so the number of free places j = 2K - N
  is a birth-death process with births 2 mu and deaths lambda on 0..2K-1: with
  r = 2 / rho, P(j) = (1 - r) r^j / (1 - r^(2K)) and P(block) = (1 - r) / (1 - r^(2K))
  -> 1 - 2/rho for rho > 2, = 1/(2K) at rho = 2 (the exact chain gives 0.0250000 at
  K = 20). This beats the M/M/2/2K law of the total (which keeps the empty state)
  at every K tested.

* The marginal law of one queue (``queue_length_distributions``): for rho < 2 the
  infinite-capacity law (compensation); for rho > 2 (K (rho - 2) / rho >= 1) the exact
  K -> inf limit seen from the full corner, :func:`corner_walk`: in free places the
  system becomes two queues fed at rate mu each (the services) and drained by one
  server of rate lambda serving the one with more free places (the arrivals), solved
  as a QBD. Its marginal decays like max(4 / rho^2, 1 / rho)^i in the free places i:
  the two queues empty together below rho = 4 and one alone above, the transition at
  rho = 4 of Yao & Knessl, derived here from that limit (the error against the exact
  chain decays geometrically in K; tests/test_finite_capacity.py), restricted to the
  capacity and renormalised. Closer to rho = 2 the free places are split evenly
  between the queues (a cruder approximation: total variation 0.01-0.03 against the
  exact chain for K = 10..40; the corner limit is better once K (rho - 2) / rho >= 1).

The regime is chosen by K (2 - rho) / rho >= 3 (far below capacity) and reported.
The method gives no rigorous error bound: ``error_estimate`` is None and the result's
``info`` says so; use ``--method ctmc`` for the exact value.
"""

from __future__ import annotations

import math
import time

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import NotApplicableError
from exactq.result import Result

from .compensation import symmetric_jsq

__all__ = ["finite_capacity_asymptotics", "total_birth_death"]


def total_birth_death(rho: float, K: int) -> np.ndarray:
    """Law of the total number of jobs, 0..2K, with departures min(N, 2) mu (M/M/2/2K).

    Computed in logarithms so that it neither overflows nor underflows for any rho, K.
    """
    n = np.arange(2 * K + 1)
    logw = n * math.log(rho) - np.maximum(n - 1, 0) * math.log(2.0)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def corner_walk(rho: float, width: int = 60):
    """The K -> inf limit seen from the full corner, for rho > 2 (a QBD, solved exactly).

    In free places (i1, i2) = (K - Q1, K - Q2), near the full corner the system is two
    queues fed by the services (rate mu each) and drained by the arrivals (rate lambda),
    which take a place at the queue with more free places ("serve the longest"), and
    are lost at (0, 0). The boundary i = K is exponentially far for rho > 2, so the law
    of this walk is the limit of the finite system's law near full. Level = min(i1, i2),
    phase = |i1 - i2| <= width (a service at the queue with more free places from
    ``width`` stays at ``width``). Rates relative to mu = 1, lambda = rho.

    Returns the :class:`~exactq.solvers.qbd.QBDSolution`.
    """
    from exactq.representations import QBD

    from .qbd import solve_qbd

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
    return solve_qbd(QBD(A0, A1, A2, B1=B1), strict=True)


def corner_marginal(rho: float, imax: int, width: int = 60) -> np.ndarray:
    """``P(one queue has i free places)``, i = 0..imax, in the full-corner limit (rho > 2).

    Decays like max(4 / rho^2, 1 / rho)^i: balanced emptying (both queues lose places,
    (2/rho)^(2i)) below rho = 4, one queue emptying alone while the other stays full
    ((1/rho)^i) above: the transition of the marginal at rho = 4 (Yao & Knessl).
    """
    sol = corner_walk(rho, width)
    w = width + 1
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


def finite_capacity_asymptotics(rho: float, K: int, service_rate: float = 1.0) -> dict:
    """Asymptotic blocking probability and mean number (see the module docstring)."""
    lam = rho * service_rate
    k = np.arange(K + 1)
    if K * (2 - rho) / rho >= 3:
        sol = symmetric_jsq(rho / 2)
        block = (1 + rho / 4) * float(sol.probability(K, 0))
        L = sol.measures(service_rate)["mean_number"]
        marginal = sol.joint(k[:, None], k[None, :]).sum(axis=1)  # the infinite law, other queue <= K
        regime = "rho < 2: infinite-capacity law (compensation) with the corner correction 1 + rho/4"
    else:
        j = np.arange(2 * K)
        logw = j * math.log(2.0 / rho)
        w = np.exp(logw - logw.max())
        p = w / w.sum()
        block = float(p[0])
        L = float(p @ (2 * K - j))
        if K * (rho - 2) / rho >= 1:
            # P(Q = K - i) = P(i free places), renormalised on i <= K (the capacity boundary)
            marginal = corner_marginal(rho, K)[::-1].copy()
            marginal /= marginal.sum()
            regime = ("rho > 2: free places as a geometric birth-death law, both servers busy; the marginal "
                      "from the full-corner limit (serve-the-longest walk, exact QBD)")
        else:
            # balanced split of j free places: floor(j/2) and ceil(j/2), each queue either with prob 1/2
            marginal = np.zeros(K + 1)
            np.add.at(marginal, K - j // 2, 0.5 * p)
            np.add.at(marginal, K - (j + 1) // 2, 0.5 * p)
            regime = ("rho - 2 = O(1/K)" if abs(rho - 2) * K < 3 else "rho near 2") + \
                ": free places as a geometric birth-death law, both servers busy, split evenly"
    return {
        "queue_length_distributions": [marginal.tolist(), marginal.tolist()],
        "blocking_probability": block,
        "mean_number": L,
        "mean_response_time": L / (lam * (1 - block)),
        "regime": regime,
        "limit_blocking": max(0.0, 1 - 2 / rho),
    }


@register_method(
    "asymptotic",
    requires="finite_capacity_walk",
    doc="large-capacity approximations of the finite symmetric shortest queue (regimes rho<2, ~2, >2)",
)
def solve_asymptotic(model, measure, **_ignored) -> Result:
    """Asymptotic method for models offering ``finite_capacity_walk()``."""
    t0 = time.perf_counter()
    walk = model.finite_capacity_walk()
    values = finite_capacity_asymptotics(walk["rho"], walk["capacity"], walk["service_rate"])
    if measure not in values:
        raise NotApplicableError(
            f"measure {measure!r} has no asymptotic approximation; valid: blocking_probability, mean_number, "
            "mean_response_time, queue_length_distributions"
        )
    return Result(
        value=values[measure],
        method="asymptotic",
        error_estimate=None,
        seconds=time.perf_counter() - t0,
        info={"regime": values["regime"], "limit_blocking": values["limit_blocking"],
              "accuracy": "asymptotic as capacity -> inf; no error bound (use --method ctmc for the exact value)"},
    )
