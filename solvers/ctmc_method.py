"""The ``ctmc`` method: build the model's (truncated) CTMC, solve it, evaluate the measure.

Models offering this method implement the CTMC protocol:

``ctmc(truncation: int | None) -> CTMC``
    The chain; infinite models truncate each unbounded variable at ``truncation``.
``is_infinite`` (bool attribute)
    Whether a truncation is needed.
``truncation_start(tol) -> int``
    A first truncation level for the adaptive loop.
``ctmc_measure(measure, chain, pi) -> float | list``
    The measure from a stationary vector.

For infinite models the truncation grows geometrically (x1.5) until two successive
levels agree to ``tol`` (relative) and the probability mass on the states whose
transitions were cut is below ``tol``. The reported ``error_estimate`` is the larger
of the last change and the boundary sensitivity (the change of the measure when the
boundary states are removed from pi and pi renormalised), never less.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import AccuracyWarning, ModelError, TruncationError

from .stationary import stationary

__all__ = ["solve_ctmc", "check_query", "solve_chain", "VERIFY_MAX_STATES"]

VERIFY_MAX_STATES = 200_000
MAX_STATES = 6_000_000
GROWTH = 1.5


def _norm(v) -> float:
    return float(np.max(np.abs(np.asarray(v, dtype=float))))


def _diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))


def solve_chain(chain, solver="auto", strict=False):
    """Stationary distribution of a :class:`~exactq.ctmc.CTMC` with its geometry."""
    return stationary(
        chain.Q,
        method=solver,
        strict=strict,
        coords=chain.states,
        jumps=chain.jumps,
        reference=chain.initial,
        describe_state=chain.space.format_state,
    )


def _boundary(chain, pi):
    mask = chain.boundary_mask()
    return mask, float(pi[mask].sum()) if mask.any() else 0.0


def _evaluate(model, measure, chain, pi):
    value = model.ctmc_measure(measure, chain, pi)
    mask, bmass = _boundary(chain, pi)
    sens = 0.0
    if bmass > 0:
        inner = np.where(mask, 0.0, pi)
        total = inner.sum()
        if total > 0.5:
            sens = _diff(value, model.ctmc_measure(measure, chain, inner / total))
        else:
            sens = math.inf
    return value, bmass, sens


def _verify(model, measure, chain, value, tol):
    if chain.n_states > VERIFY_MAX_STATES:
        msg = f"verify skipped: {chain.n_states} states exceed the 50-digit limit of {VERIFY_MAX_STATES}"
        warnings.warn(msg, AccuracyWarning, stacklevel=4)
        return {"skipped": msg}
    st = solve_chain(chain, solver="mpmath")
    v_mp = model.ctmc_measure(measure, chain, st.pi)
    diff = _diff(value, v_mp)
    agree = diff <= max(tol * _norm(v_mp), 1e-13)
    if not agree:
        warnings.warn(f"verify: float and 50-digit answers differ by {diff:.3e}", AccuracyWarning, stacklevel=4)
    return {
        "dps": st.info["dps"],
        "value_mp": v_mp,
        "abs_diff": diff,
        "agree": bool(agree),
        "mp_relative_residual": st.info["mp_relative_residual"],
        "refinement_steps": st.info["refinement_steps"],
    }


@register_method(
    "ctmc",
    requires="ctmc",
    doc="stationary solve of the (truncated) CTMC; truncation grown until the measure converges",
    options=("solver", "tol", "truncation", "verify", "strict"),
)
def solve_ctmc(model, measure, *, solver="auto", tol=1e-9, truncation=None, verify=False,
               strict=False, max_states=MAX_STATES, **_ignored):
    """Solve ``measure`` of ``model`` through its CTMC (see the module docstring)."""
    t0 = time.perf_counter()
    infinite = bool(getattr(model, "is_infinite", False))
    info: dict = {"solver": solver}
    if not infinite and truncation is not None:
        raise ModelError(f"truncation applies to infinite models only; model {model.name} is finite")
    if not infinite or truncation is not None:
        chain = model.ctmc(truncation)
        st = solve_chain(chain, solver, strict)
        value, bmass, sens = _evaluate(model, measure, chain, st.pi)
        err = sens if infinite else None
        if infinite:
            info["truncation"] = {"level": int(truncation), "rule": chain.truncation.get("rule", "block"),
                                  "boundary_mass": bmass, "error_estimate_kind": "boundary_sensitivity"}
            if bmass > tol:
                msg = (f"truncation {truncation}: probability mass {bmass:.3e} on the truncation boundary "
                       f"exceeds tol={tol:g}; the value may be inaccurate")
                if strict:
                    raise TruncationError(msg)
                warnings.warn(msg, AccuracyWarning, stacklevel=3)
    else:
        level = int(model.truncation_start(tol))
        history = []
        prev = None
        while True:
            chain = model.ctmc(level)
            if chain.n_states > max_states:
                last = history[-1] if history else None
                raise TruncationError(
                    f"automatic truncation needs more than max_states={max_states} states for tol={tol:g}"
                    + (f" (last level {last['level']}: change {last['change']:.2e})" if last else "")
                )
            st = solve_chain(chain, solver, strict)
            value, bmass, sens = _evaluate(model, measure, chain, st.pi)
            change = math.inf if prev is None else _diff(value, prev)
            history.append({"level": level, "n_states": chain.n_states, "boundary_mass": bmass,
                            "change": change, "seconds": st.seconds})
            scale = _norm(value)
            if change <= max(tol * scale, 1e-14 * scale, 1e-300) and bmass <= tol and sens <= tol * max(scale, 1e-300):
                break
            prev = value
            level = int(math.ceil(level * GROWTH))
        err = max(change, sens)
        info["truncation"] = {"level": level, "rule": chain.truncation.get("rule", "block"),
                              "boundary_mass": bmass, "error_estimate_kind": "level_difference",
                              "history": history}
    info.update({k: v for k, v in st.info.items() if k != "pi_mp"})
    if verify:
        info["verify"] = _verify(model, measure, chain, value, tol)
    return _result(value, f"ctmc/{st.method}", st, chain, err, info, t0)


def _result(value, method, st, chain, err, info, t0):
    from exactq.result import Result

    if isinstance(value, np.ndarray):
        value = value.tolist()
    return Result(
        value=value,
        method=method,
        residual=st.residual,
        error_estimate=err,
        n_states=chain.n_states,
        nit=st.nit,
        seconds=time.perf_counter() - t0,
        info=info,
    )


def check_query(model, query, *, tol=1e-9, truncation=None, strict=False, solver="auto"):
    """Evaluate a CSL-style query on the model's CTMC (truncated adaptively if infinite)."""
    from exactq.query import check, parse_query

    q = parse_query(query)
    t0 = time.perf_counter()
    infinite = bool(getattr(model, "is_infinite", False))

    def run(chain):
        def stat(Q):
            st = solve_chain(chain, solver, strict)
            return st.pi, {"method": st.method, "residual": st.residual}

        return check(chain, q, stationary=stat)

    if not infinite or truncation is not None:
        if not infinite and truncation is not None:
            raise ModelError(f"truncation applies to infinite models only; model {model.name} is finite")
        chain = model.ctmc(truncation)
        res = run(chain)
        if infinite:
            res.info["truncation"] = {"level": int(truncation)}
    else:
        level = int(model.truncation_start(tol))
        prev = None
        while True:
            chain = model.ctmc(level)
            if chain.n_states > MAX_STATES:
                raise TruncationError(f"automatic truncation needs more than {MAX_STATES} states for tol={tol:g}")
            res = run(chain)
            if prev is not None and abs(res.value - prev) <= max(tol * abs(res.value), 1e-15):
                break
            prev = res.value
            level = int(math.ceil(level * GROWTH))
        res.error_estimate = max(abs(res.value - prev), res.error_estimate or 0.0)
        res.info["truncation"] = {"level": level, "error_estimate_kind": "level_difference"}
    res.measure = query
    res.n_states = chain.n_states
    res.seconds = time.perf_counter() - t0
    return res
