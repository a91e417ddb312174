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
``ctmc_size(truncation) -> int`` (optional)
    The number of states a truncation would give, so that oversize chains are
    refused before they are built.
``lumps(measure) -> bool``, ``lumped_ctmc``, ``lumped_measure``, ``lumped_size`` (optional)
    An exactly lumped chain (e.g. by the symmetry of identical servers) with the same
    protocol; used for the measures it serves unless ``lump=False``. Queries always
    use the full chain, whose variables they name.

For infinite models the truncation grows geometrically (x1.5, or x1.125 once the
boundary mass is below ``tol``) until two successive levels agree to ``tol`` (relative) and the probability mass on the states whose
transitions were cut is below ``tol``. The reported ``error_estimate`` is the larger
of the last change and the boundary sensitivity (the change of the measure when the
boundary states are removed from pi and pi renormalised) divided by 1 - r, where r is
the observed decay of the probability mass from one truncation level to the next
(``chain.truncation["levels"]``, the level of each state, defaults to its largest
coordinate): the boundary layer stands for a geometric tail of layers beyond it.
For the M/M/1 queue this gives exactly the true truncation error's order.
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
FINE_GROWTH = 1.125


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
        ordering=getattr(chain, "ordering", "auto"),
    )


def _boundary(chain, pi):
    mask = chain.boundary_mask()
    return mask, float(pi[mask].sum()) if mask.any() else 0.0


def _tail_factor(chain, pi) -> float:
    """1 / (1 - r) with r the mass ratio of the last two truncation levels."""
    levels = chain.truncation.get("levels")
    if levels is None:
        levels = chain.states.max(axis=1)
    top = int(levels.max())
    last = float(pi[levels == top].sum())
    before = float(pi[levels == top - 1].sum())
    r = last / before if before > 0 else 0.0
    return 1.0 / max(1.0 - min(r, 1.0), 1e-3)


def _evaluate(model, measure, chain, pi):
    value = model.ctmc_measure(measure, chain, pi)
    mask, bmass = _boundary(chain, pi)
    sens = 0.0
    if bmass > 0:
        inner = np.where(mask, 0.0, pi)
        total = inner.sum()
        if total > 0.5:
            sens = _diff(value, model.ctmc_measure(measure, chain, inner / total)) * _tail_factor(chain, pi)
        else:
            sens = math.inf
    return value, bmass, sens


class _View:
    """The chain a model offers for a measure: the full one or an exactly lumped one."""

    def __init__(self, model, measure, lump):
        lumped = lump and callable(getattr(model, "lumped_ctmc", None)) and model.lumps(measure)
        self.name = model.name
        self.ctmc = model.lumped_ctmc if lumped else model.ctmc
        self.ctmc_measure = model.lumped_measure if lumped else model.ctmc_measure
        self.ctmc_size = getattr(model, "lumped_size" if lumped else "ctmc_size", None)
        self.lumped = lumped
        self.truncation_start = getattr(model, "truncation_start", None)


def _build(model, level, max_states):
    size = getattr(model, "ctmc_size", None)
    if level is not None and callable(size) and size(level) > max_states:
        raise TruncationError(
            f"truncation {level} gives {size(level):.3g} states, above max_states={max_states}; "
            "lower the truncation or tol, or use another method"
        )
    chain = model.ctmc(level)
    if chain.n_states > max_states:
        raise TruncationError(f"the chain has {chain.n_states} states, above max_states={max_states}")
    return chain


def _floor(err, value):
    """An error estimate is never below the rounding level of the value."""
    return max(err, 4 * np.finfo(float).eps * _norm(value))


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
               strict=False, max_states=MAX_STATES, lump=True, **_ignored):
    """Solve ``measure`` of ``model`` through its CTMC (see the module docstring)."""
    t0 = time.perf_counter()
    infinite = bool(getattr(model, "is_infinite", False))
    info: dict = {"solver": solver}
    view = _View(model, measure, lump)
    if view.lumped:
        info["lumped"] = True
    model_name = model.name
    model = view  # the chain protocol of the chosen view
    if not infinite and truncation is not None:
        raise ModelError(f"truncation applies to infinite models only; model {model_name} is finite")
    if not infinite or truncation is not None:
        chain = _build(model, truncation, max_states)
        st = solve_chain(chain, solver, strict)
        value, bmass, sens = _evaluate(model, measure, chain, st.pi)
        err = _floor(sens, value) if infinite else None
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
            try:
                chain = _build(model, level, max_states)
            except TruncationError:
                last = history[-1] if history else None
                raise TruncationError(
                    f"automatic truncation needs more than max_states={max_states} states for tol={tol:g}"
                    + (f" (last level {last['level']}: change {last['change']:.2e})" if last else
                       f" (first level {level})")
                ) from None
            st = solve_chain(chain, solver, strict)
            value, bmass, sens = _evaluate(model, measure, chain, st.pi)
            change = math.inf if prev is None else _diff(value, prev)
            history.append({"level": level, "n_states": chain.n_states, "boundary_mass": bmass,
                            "change": change, "seconds": st.seconds})
            scale = _norm(value)
            if change <= max(tol * scale, 1e-14 * scale, 1e-300) and bmass <= tol and sens <= tol * max(scale, 1e-300):
                break
            prev = value
            # far from converged: grow by half; once the boundary mass is below tol, a
            # smaller step confirms the value (the estimate also uses the tail factor)
            step = GROWTH if bmass > tol else FINE_GROWTH
            level = max(int(math.ceil(level * step)), level + 4)
        err = _floor(max(change, sens), value)
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
        chain = _build(model, truncation, MAX_STATES)
        res = run(chain)
        if infinite:
            res.info["truncation"] = {"level": int(truncation)}
    else:
        level = int(model.truncation_start(tol))
        prev = None
        while True:
            chain = _build(model, level, MAX_STATES)
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
