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


def finite_capacity_asymptotics(rho: float, K: int, service_rate: float = 1.0) -> dict:
    """Asymptotic blocking probability and mean number (see the module docstring)."""
    lam = rho * service_rate
    if K * (2 - rho) / rho >= 3:
        sol = symmetric_jsq(rho / 2)
        block = (1 + rho / 4) * float(sol.probability(K, 0))
        L = sol.measures(service_rate)["mean_number"]
        regime = "rho < 2: infinite-capacity law (compensation) with the corner correction 1 + rho/4"
    else:
        j = np.arange(2 * K)
        logw = j * math.log(2.0 / rho)
        w = np.exp(logw - logw.max())
        p = w / w.sum()
        block = float(p[0])
        L = float(p @ (2 * K - j))
        regime = ("rho - 2 = O(1/K)" if abs(rho - 2) * K < 3 else "rho > 2" if rho > 2 else "rho near 2") + \
            ": free places as a geometric birth-death law, both servers busy"
    return {
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
            "mean_response_time"
        )
    return Result(
        value=values[measure],
        method="asymptotic",
        error_estimate=None,
        seconds=time.perf_counter() - t0,
        info={"regime": values["regime"], "limit_blocking": values["limit_blocking"],
              "accuracy": "asymptotic as capacity -> inf; no error bound (use --method ctmc for the exact value)"},
    )
