"""Rigorous lower and upper bounds on E[L] of a finite randomized load balancer.

The representation ``model.finite_bounds()`` (plain data and callables) offers two
*bounding chains* of the sorted queue-length process, valid when the routing depends
on the ranks of the sampled queues only (power-of-d without errors or with
independent errors):

* ``lower_chain(previous, target_states)``: a finite truncation in which jobs are
  only ever *lost* (arrivals leaving the set are dropped; a departure leaving it also
  removes jobs from the longest queues). Coupling arrivals and departures by rank,
  the sorted chain is monotone for componentwise order, so the truncated system stays
  below the true one path by path and its E[L] is a lower bound. It is solved by
  :func:`~exactq.solvers.level_aggregation.stationary_levels`.
* ``upper_qbd(spread)``: a level-independent QBD (level = shortest queue, phase =
  the differences to it under caps ``y_i <= b_i``) in which jobs are only ever *gained* at the
  spread boundary (departures suppressed, phantom jobs added to the shortest queues);
  by the same coupling its E[L] is an upper bound. It has no level truncation: the
  matrix-geometric solution of :func:`~exactq.solvers.qbd.solve_qbd` covers all
  levels.

This is the structure of the threshold bounds for JSQ (Adan, van Houtum & van der Wal
1994; van Houtum, Zijm, Adan & Wessels 1998) — the lower bound loses (their
*jockeying*: the difference cannot exceed T) and the upper bound blocks (their
*threshold blocking*) — with the proofs replaced by the sample-path coupling, which
covers any rank-based routing. The finite-regime bounds of Ciucu & Poloczek (ICDCS
2016) "borrow ideas for analyzing JSQ" in the same way; only their abstract is
available to us, so their exact construction is not reproduced.

The arithmetic is float64: both chains are solved to relative residual ~1e-12 and the
bounds are widened by :data:`ROUNDING` (1e-10 relative) to cover that rounding.

References
----------
I. J. B. F. Adan, G. J. van Houtum, J. van der Wal, "Upper and lower bounds for the
waiting time in the symmetric shortest queue system", Ann. Oper. Res. 48, 1994.
G. J. van Houtum, W. H. M. Zijm, I. J. B. F. Adan, J. Wessels, "Bounds for performance
characteristics: a systematic approach via cost structures", Stochastic Models 14,
1998. F. Ciucu, F. Poloczek, "Randomized load balancing in finite regimes", ICDCS 2016.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import AccuracyWarning, NotApplicableError, UnstableError
from exactq.result import Result

from .level_aggregation import _warm_start, stationary_levels
from exactq.representations import QBD

from .qbd import solve_qbd

__all__ = ["solve_finite_bounds", "lower_bound", "upper_bound"]

LOWER_STATES = 100_000
MAX_PHASES = 700
#: relative widening of both bounds for the rounding of the float64 solves
ROUNDING = 1e-10


def _get(data, name, default=None):
    return data.get(name, default) if isinstance(data, dict) else getattr(data, name, default)


def lower_bound(rep, *, target_states: int = LOWER_STATES, strict: bool = False) -> dict:
    """E[L] of the job-losing truncation (a lower bound), with its diagnostics.

    A first small set with the default cost is solved to fit the truncation cost;
    the bound uses the fitted set of about ``target_states`` states.
    """
    chain0 = _get(rep, "lower_chain")(None, target_states=max(2000, target_states // 8))
    st0 = stationary_levels(chain0.Q, chain0.level, x0=chain0.guess, rtol=1e-12, strict=strict)
    chain = _get(rep, "lower_chain")((chain0, st0.pi), target_states=target_states)
    st = stationary_levels(chain.Q, chain.level, x0=_warm_start(chain, (chain0, st0.pi)), rtol=1e-12,
                           strict=strict)
    EL = float(st.pi @ chain.level)
    loss = float(st.pi @ (chain.lost_rate + chain.removed_jobs))
    return {"EL": EL, "n_states": chain.n_states, "loss_rate": loss, "residual": st.residual,
            "pi": st.pi, "chain": chain, "first_stage_EL": float(st0.pi @ chain0.level)}


def upper_bound(rep, *, profile, strict: bool = False) -> dict:
    """E[L] of the job-gaining QBD (an upper bound; ``inf`` when that QBD is unstable)."""
    n = int(_get(rep, "servers"))
    q = _get(rep, "upper_qbd")(profile)
    try:
        sol = solve_qbd(QBD(q["A0"], q["A1"], q["A2"], B1=q["B1"]), strict=strict)
    except UnstableError as exc:
        return {"EL": math.inf, "profile": q["profile"], "phases": len(q["phases"]), "unstable": str(exc)}
    jobs = q["phase_jobs"]
    EL = sol.expect_affine(jobs, jobs, np.full(len(jobs), float(n)))
    phantom = sol.expect_affine(q["phantom_rate"], q["phantom_rate"], np.zeros(len(jobs)))
    return {"EL": float(EL), "profile": q["profile"], "phases": len(q["phases"]), "residual": sol.residual,
            "spectral_radius": sol.spectral_radius, "phantom_job_rate": float(phantom)}


@register_method(
    "bounds",
    requires="finite_bounds",
    doc="rigorous lower/upper bounds at finite n: a job-losing truncation and a job-gaining "
        "spread-threshold QBD (sample-path coupling; rank-based routing)",
    options=("truncation", "strict"),
)
def solve_finite_bounds(model, measure, *, tol=1e-9, truncation=None, verify=False, strict=False,
                        lower_states=LOWER_STATES, max_phases=MAX_PHASES, **_ignored) -> Result:
    """Bound ``measure`` between the two bounding chains (module docstring).

    ``truncation`` sets a spread threshold D for the upper QBD (default: a profile of
    caps on the sorted differences chosen greedily from the lower-bound solution, with
    at most ``max_phases`` phases, 700 by default). ``value`` is the midpoint and ``error_estimate`` the
    half-width; ``lower <= exact <= upper`` is guaranteed (up to float64 rounding).
    """
    t0 = time.perf_counter()
    if measure == "stability_limit":
        res = model.stability_result("bounds/closed-form")
        res.seconds = time.perf_counter() - t0
        return res
    rep = model.finite_bounds()
    if not _get(rep, "position_based"):
        raise NotApplicableError("bounds need routing that depends on queue ranks only (error none or "
                                 "independent); load-dependent errors break the monotone coupling")
    conv = _get(rep, "from_mean_number")
    conv(measure, 0.0)  # raises for measures that are not monotone in E[L]
    lo = lower_bound(rep, target_states=lower_states, strict=strict)
    profile = truncation if truncation is not None else _get(rep, "profile_for")(lo["chain"], lo["pi"], max_phases)
    up = upper_bound(rep, profile=profile, strict=strict)
    # widen by ROUNDING (relative) for the float64 solves of both chains
    lower = conv(measure, lo["EL"] * (1.0 - ROUNDING))
    upper = conv(measure, up["EL"] * (1.0 + ROUNDING))
    if upper < lower:  # pragma: no cover - would be a bug
        raise AssertionError(f"upper bound {upper} below lower bound {lower}")
    if math.isfinite(upper):
        value, err = 0.5 * (lower + upper), 0.5 * (upper - lower)
    else:
        value, err = lower, math.inf
        warnings.warn(f"the upper-bound QBD with profile {up['profile']} is unstable; only the lower bound "
                      "is finite", AccuracyWarning, stacklevel=3)
    info = {"lower": {k: v for k, v in lo.items() if k not in ("pi", "chain")},
            "upper": up, "guarantee": "lower <= exact <= upper by sample-path coupling (float64 rounding aside)"}
    return Result(value=value, method="bounds/coupling", lower=lower, upper=upper, error_estimate=err,
                  residual=lo["residual"], n_states=lo["n_states"], seconds=time.perf_counter() - t0, info=info)
