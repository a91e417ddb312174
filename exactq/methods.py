"""The generic method drivers: representation -> solver -> the model's measure.

A method (:func:`exactq.catalogue.register_method`) names one of these drivers and
the :class:`~exactq.protocol.Protocol` of the representation it solves: the declared
members a model offers the method (its factory, its measure mapping, a size, a first
level, ...), checked when the model is registered. The drivers know neither models
nor measures, and look no member up by a name of their own: they bind the protocol
to the model (:meth:`~exactq.protocol.Protocol.bind`), call its ``build`` member,
hand the representation to :func:`~exactq.catalogue.solve_representation` (which
picks the registered solver by the representation's type and structure) and pass the
solution to its ``measure`` member, ``measure(measure, representation, solution)``,
which returns the value (or an :class:`~exactq.result.Estimate` with its own error,
bounds and details). Below, ``build`` etc. are the roles of the protocol's members
(for the ``ctmc`` protocol: ``ctmc``, ``ctmc_measure``, ``ctmc_size``,
``truncation_start``, ``is_infinite``, ``ctmc_functional``).

``single``
    One representation, one solve: ``build()``.
``adaptive``
    An infinite model (its ``infinite`` member true) truncated at growing levels by
    the one truncation driver, :func:`exactq.truncation.grow`, from ``start(tol)``:
    ``build(level)``, or ``build(level, previous)`` when the model chooses its own sets
    (setting ``previous``); ``size(level)`` predicts a level's states for the budgets.
    The option ``start_level`` raises the model's first level (a warm start); settings:
    ``growth``, ``previous``, ``lumpable`` (the protocol's variant, a lumped chain,
    where its ``applies(measure)``), ``label``, ``verify``, ``set_options`` (method
    options that fix a kept set the model describes itself, passed to ``build`` as
    keywords, one solve). A finite model is solved once. ``certify`` uses the
    ``functional`` member.
``model``
    The model orchestrates the solves itself (several representations, or formulas
    around one): ``build(measure, context)`` with ``context.solve(rep)``; with
    ``context=False`` in the settings, ``build(measure)`` (closed forms).
``bracket``
    Bounds from comparison systems (:class:`~exactq.representations.bracket.Bracket`)
    built at a comparison parameter: ``build(measure, p)`` (``p=None``: the model's
    first), ``measure(measure, bracket, solution)`` an Estimate with ``lower`` and
    ``upper``. A parameter the model fixes (its ``parameter`` member) gives one
    bracket; otherwise ``p`` grows by ``max(1, p // 4)`` up to ``max_parameter`` until
    the bounds, intersected over every ``p`` tried, are within ``tol`` relative
    (settings: ``max_parameter``, ``verify``, ``label``).

Before any driver runs, a model may answer a measure that needs no solve
(``model.intrinsic_measure(measure)``, e.g. a stability limit) or hand the method to
another one (``model.delegate(method)``, e.g. the exact value of an infinite system
is its mean-field limit); both have defaults on :class:`~exactq.catalogue.Model`
(:data:`exactq.protocol.MODEL_MEMBERS`).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .catalogue import MethodSpec, certify_representation, check_method_for, solve_representation
from .budget import BudgetError, require_states
from .errors import AccuracyWarning, ModelError, NotApplicableError, SolverRefusal, TruncationError
from .result import Estimate, Result
from .truncation import Evaluation, difference, geometric_steps, grow, norm, tail_factor

__all__ = ["run", "Context", "boundary_evaluation"]

#: the 50-digit re-solve of ``verify`` is refused above this many states
VERIFY_MAX_STATES = 200_000
#: no fixed state cap on adaptive truncations: the memory budget (exactq.budget) decides (a method may
#: still set ``max_states`` where its cost is not memory, e.g. the dense QBD's phases)
MAX_STATES = None
#: options that steer an adaptive truncation (not passed to solvers)
ADAPTIVE_CONTROLS = ("progress", "time_limit", "max_states", "start_level", "certify")


@dataclass
class Context:
    """What a model-orchestrated method receives: the solver dispatch and the controls.

    ``solver`` is the method's ``solver`` setting (the registered solver its solves
    use unless the model names another); ``controls`` holds the common controls
    (``tol``, ``strict``) that the method's ``solver_controls`` setting passes on.
    """

    tol: float
    strict: bool
    options: dict = field(default_factory=dict)
    method: str = ""
    solver: str | None = None
    controls: dict = field(default_factory=dict)

    def solve(self, rep: Any, using: str | None = None, **options) -> Any:
        """Solve a representation with the registered solver for its type and structure.

        ``using`` defaults to the method's solver; ``options`` go to the solver after
        the method's ``controls`` (which they override).
        """
        return solve_representation(rep, self.solver if using is None else using, **{**self.controls, **options})


def _as_estimate(v: Any) -> Estimate:
    return v if isinstance(v, Estimate) else Estimate(v)


def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


def run(spec: MethodSpec, model, measure: str, *, tol: float, truncation: int | None, verify: bool,
        strict: bool, options: dict, certify: bool = False) -> Result:
    """Run the method ``spec`` on ``model`` for ``measure`` (module docstring).

    Examples
    --------
    The ``ctmc`` method on M/M/1 at load 1/2 (the adaptive driver grows the truncation
    until the mean number, 1, is reached to ``tol``):

    >>> from exactq.catalogue import check_method_for, get_model
    >>> m = get_model("mm1").create(arrival_rate=0.5, service_rate=1.0)
    >>> spec = check_method_for(m, "ctmc")
    >>> spec.driver, spec.protocol.factory.name
    ('adaptive', 'ctmc')
    >>> r = run(spec, m, "mean_number", tol=1e-9, truncation=None, verify=False, strict=False, options={})
    >>> abs(r.value - 1.0) < 1e-8, r.info["truncation"]["stopped_by"]
    (True, 'tol')
    """
    t0 = time.perf_counter()
    est = model.intrinsic_measure(measure)
    if est is not None:
        est = _as_estimate(est)
        return Result(value=_plain(est.value), method=f"{spec.name}/closed-form",
                      error_estimate=0.0 if est.error is None else est.error, lower=est.lower,
                      upper=est.upper, seconds=time.perf_counter() - t0, info=dict(est.info))
    other = model.delegate(spec.name)
    if other:
        target = check_method_for(model, other)
        if target.driver != "adaptive":  # the truncation's own controls mean nothing to the other method
            options = {k: v for k, v in options.items() if k not in ADAPTIVE_CONTROLS}
        res = run(target, model, measure, tol=tol, truncation=truncation,
                  verify=verify, strict=strict, options=options, certify=certify)
        res.info["delegate"] = f"method {spec.name} is answered by method {other} for this model"
        return res
    driver = _DRIVERS[spec.driver]
    if certify and spec.driver != "adaptive":
        raise NotApplicableError(f"certify applies to the methods that solve a finite chain (ctmc); method "
                                 f"{spec.name!r} was chosen")
    options = dict(options)
    if certify:
        options["certify"] = True
    try:
        result = driver(spec, model, measure, tol=tol, truncation=truncation, verify=verify, strict=strict,
                        options=options)
    except SolverRefusal as exc:
        others = [m for m in type(model).methods if m != spec.name]
        text = str(exc)
        if others and "--method" not in text:  # a solver's refusal: say what else the model offers
            raise NotApplicableError(f"{text}; other methods of model {model.name}: {', '.join(others)}") from exc
        raise
    except (TruncationError, BudgetError) as exc:
        others = [m for m in type(model).methods if m != spec.name]
        text = str(exc)
        if others and "--method" not in text and "other methods" not in text and \
                ("before its first level" in text or isinstance(exc, BudgetError)):  # nothing was solved
            raise type(exc)(f"{text}; other methods of model {model.name}: {', '.join(others)}") from exc
        raise
    result.seconds = time.perf_counter() - t0
    result.measure = result.measure or measure
    return result.require_finite(f"{model.name} {measure}")  # NaN/inf is never passed off as a value


# ---------------------------------------------------------------------------- single
def _single(spec, model, measure, *, tol, truncation, verify, strict, options) -> Result:
    if truncation is not None:
        raise NotApplicableError(f"truncation does not apply to method {spec.name!r}")
    options.pop("lump", None)  # the lumping switch is the adaptive CTMC method's
    hooks = spec.protocol.bind(model)
    rep = hooks.build()
    sol = solve_representation(rep, spec.setting("solver"), **_solver_options(spec, options, tol, strict))
    est = _as_estimate(hooks.measure(measure, rep, sol))
    return _result(spec.setting("label", spec.name), est, sol, rep, {})


def _solver_options(spec, options, tol, strict) -> dict:
    opts = dict(options)
    if "strict" in spec.setting("solver_controls", ("strict",)):
        opts.setdefault("strict", strict)
    if "tol" in spec.setting("solver_controls", ("strict",)):
        opts.setdefault("tol", tol)
    return opts


def _result(label, est: Estimate, sol, rep, info: dict) -> Result:
    info = dict(info)
    info.update(getattr(sol, "info", None) or {})
    info.update(est.info)
    info.pop("pi_mp", None)
    return Result(value=_plain(est.value), method=label, lower=est.lower, upper=est.upper,
                  residual=getattr(sol, "residual", None), error_estimate=est.error,
                  n_states=getattr(rep, "n_states", None), nit=getattr(sol, "nit", None), info=info)


# -------------------------------------------------------------------------- adaptive
def boundary_evaluation(rep, sol, value, measure_of) -> Evaluation:
    """Boundary mass and sensitivity of a value computed from a stationary solution.

    For a chain (``boundary_mask()``, ``layers()``; a solution with ``pi`` and
    ``conditioned``) the sensitivity is the change of the value when the boundary
    states are removed and the rest renormalised, times the tail factor
    (:func:`exactq.truncation.tail_factor`); it is infinite when the boundary holds
    half the mass or more. For a QBD with a phase truncation the boundary mass is the
    mass of the edge phases, and there is no sensitivity.
    """
    if hasattr(sol, "pi") and hasattr(rep, "boundary_mask"):
        mask = rep.boundary_mask()
        if not mask.any():
            return Evaluation(value, 0.0, 0.0)
        bmass = sol.probability(mask)
        if bmass == 0:
            return Evaluation(value, 0.0, 0.0)
        if bmass >= 0.5:
            return Evaluation(value, bmass, float("inf"))
        other = measure_of(sol.conditioned(~mask))
        return Evaluation(value, bmass, difference(value, other) * tail_factor(rep.layers(), sol.pi))
    edge_mass = getattr(sol, "edge_mass", None)
    return Evaluation(value, edge_mass() if callable(edge_mass) else 0.0, None)


def _adaptive(spec, model, measure, *, tol, truncation, verify, strict, options) -> Result:
    info: dict = {}
    hooks = spec.protocol.bind(model)
    lump = options.pop("lump", True)
    chain_hooks = hooks
    if spec.setting("lumpable") and lump and hooks.variant is not None and hooks.variant.applies(measure):
        chain_hooks = hooks.variant  # the exactly lumped chain (identical servers)
        info["lumped"] = True
    build_fn, measure_fn, size = chain_hooks.build, chain_hooks.measure, chain_hooks.size
    # options that fix a kept set the model describes itself (not a level, e.g. a cost bound): they go
    # to the factory as keywords, and the set is solved once
    set_opts = {k: options.pop(k) for k in spec.setting("set_options", ()) if k in options}
    solver_opts = _solver_options(spec, options, tol, strict)
    using = spec.setting("solver")
    if "solver" in spec.options:  # the option names a registered solver of the representation (plug-ins' too)
        info["solver"] = solver_opts.pop("solver", "auto")
        if info["solver"] != "auto":
            using = info["solver"]
    infinite = hooks.infinite
    uses_previous = spec.setting("previous", False)
    progress = solver_opts.pop("progress", None)
    time_limit = solver_opts.pop("time_limit", None)
    certify = solver_opts.pop("certify", False)
    start_level = solver_opts.pop("start_level", None)
    max_states = solver_opts.pop("max_states", spec.setting("max_states", MAX_STATES))

    def build(level, previous):
        if set_opts:
            level = None if truncation is None else level
            return build_fn(level, previous, **set_opts) if uses_previous else build_fn(level, **set_opts)
        return build_fn(level, previous) if uses_previous else build_fn(level)

    def solve(rep, previous):
        opts = dict(solver_opts)
        if uses_previous and previous is not None:
            opts["previous"] = previous
        return solve_representation(rep, using, **opts)

    last: dict = {}

    def evaluate(rep, sol):
        est = _as_estimate(measure_fn(measure, rep, sol))
        last["estimate"] = est
        ev = boundary_evaluation(rep, sol, est.value,
                                 lambda other: _as_estimate(measure_fn(measure, rep, other)).value)
        ev.record.update(est.info.get("record", {}))
        return ev

    if not infinite:
        if truncation is not None:
            if hooks.protocol.member("infinite").name == "is_infinite":
                raise NotApplicableError(f"truncation applies to infinite models only; model {model.name} is finite")
            raise NotApplicableError(f"truncation does not apply to method {spec.name!r} for model {model.name}: its "
                             f"representation is exact, with nothing to truncate")
        if spec.setting("unit", "states") == "states":
            _require_finite_size(model, size)
        rep_final = build(None, None)
        sol_final = solve(rep_final, None)
        est = _as_estimate(measure_fn(measure, rep_final, sol_final))
    else:
        if truncation is not None or set_opts:
            fixed = int(truncation) if truncation is not None else \
                ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in set_opts.items())
            out = grow(build, solve, evaluate, tol=tol, fixed=fixed, size=None if set_opts else size,
                       max_states=max_states, unit=spec.setting("unit", "states"), strict=strict)
        else:
            start = None if uses_previous else int(hooks.start(tol))
            if start is not None and start_level is not None:  # a warm start, e.g. from a sweep's neighbour
                start = max(int(start_level), start)
            growth = spec.setting("growth")
            step = geometric_steps(growth, growth, 1) if growth else None
            out = grow(build, solve, evaluate, tol=tol, start=start, next_level=step, size=size,
                       max_states=max_states, unit=spec.setting("unit", "states"), time_limit=time_limit,
                       strict=strict, progress=progress)
        info.update(out.info)
        rep_final, sol_final = out.representation, out.solution
        est = last["estimate"]
        est = Estimate(out.value, out.error_estimate, est.lower, est.upper, est.info)
    label = spec.setting("label", "{method}/{solver}").format(method=spec.name, solver=getattr(sol_final, "method", ""))
    est.info.pop("record", None)
    if verify and info.get("truncation", {}).get("stopped_by") not in (None, "tol", "fixed"):
        info["verify"] = {"skipped": "the truncation stopped on a budget; the last chain was released"}
    elif verify:
        info["verify"] = _verify(spec, rep_final, est.value, tol, lambda other: _as_estimate(
            measure_fn(measure, rep_final, other)).value)
    if certify:
        est = _certify(model, measure, rep_final, sol_final, est, chain_hooks.functional, info, progress=progress)
    return _result(label, est, sol_final, rep_final, info)


def _require_finite_size(model, size) -> None:
    """A finite model's chain, predicted by its ``size`` hook (``size(None)``), checked against the memory budget."""
    if not callable(size):
        return
    try:
        n = size(None)
    except (TypeError, ValueError, ModelError):  # the model sizes truncations only
        return
    if n is None:
        return
    params = ", ".join(f"{k}={v}" for k, v in model.params().items() if isinstance(v, int) and not
                       isinstance(v, bool) and v > 1)
    require_states(n, f"the chain of {model.name}" + (f" ({params})" if params else ""),
                   hint="lower the size parameters")


def _certify(model, measure, rep, sol, est: Estimate, functional, info: dict, progress=None) -> Estimate:
    """``lower``/``upper`` that provably contain the finite chain's exact value (``certify=True``)."""
    pair = functional(measure, rep) if callable(functional) else None
    if pair is None:
        raise NotApplicableError(f"certify needs the measure as an expectation (or a ratio of two) under the "
                                 f"stationary law; model {model.name} does not give one for {measure}")
    if getattr(rep, "Q", None) is None:
        raise NotApplicableError("certify needs the final chain, which a budget stop released; rerun with a larger "
                                 "budget or a fixed truncation")
    f, g = pair
    enclosure = certify_representation(rep, sol, progress=progress)
    lower, upper = (float(x) for x in enclosure.expectation(f, g))
    truncated = getattr(rep, "truncation", None)
    covers = "the finite chain with the float64 rates as built (rounding included)"
    if truncated is not None:
        covers = (f"the truncated chain (level {truncated.level}, rule {truncated.rule}) with the float64 rates as "
                  "built (rounding included); the truncation error of the infinite model is the error_estimate, "
                  "estimated and not certified")
    info["certificate"] = {"method": enclosure.method, "covers": covers, "lower": lower, "upper": upper,
                           "relative_width": (upper - lower) / max(abs(lower), abs(upper), 1e-300),
                           "seconds": enclosure.seconds,
                           **{k: v for k, v in enclosure.info.items() if isinstance(v, (int, float, str))}}
    return Estimate(est.value, est.error, lower, upper, est.info)


def _verify(spec, rep, value, tol, measure_of) -> dict:
    """Re-solve the final representation with the method's verifying solver and compare."""
    opts = dict(spec.setting("verify", ()))
    if not opts:
        raise NotApplicableError(f"verify does not apply to method {spec.name!r}")
    if getattr(rep, "n_states", 0) > VERIFY_MAX_STATES:
        msg = f"verify skipped: {rep.n_states} states exceed the 50-digit limit of {VERIFY_MAX_STATES}"
        warnings.warn(msg, AccuracyWarning, stacklevel=4)
        return {"skipped": msg}
    sol = solve_representation(rep, spec.setting("solver"), **opts)
    other = measure_of(sol)
    diff = difference(value, other)
    agree = diff <= max(tol * norm(other), 1e-13)
    if not agree:
        warnings.warn(f"verify: float and 50-digit answers differ by {diff:.3e}", AccuracyWarning, stacklevel=4)
    out = {"value_mp": _plain(other), "abs_diff": diff, "agree": bool(agree)}
    for key in ("dps", "mp_relative_residual", "refinement_steps"):
        if key in sol.info:
            out[key] = sol.info[key]
    return out


# ----------------------------------------------------------------------------- model
def _model(spec, model, measure, *, tol, truncation, verify, strict, options) -> Result:
    fn = spec.protocol.bind(model).build
    if not spec.setting("context", True):
        value = fn(measure)
        if isinstance(value, Result):
            return value
        est = _as_estimate(value)
        info = {"arithmetic": "float64",
                "accuracy": "exact formula; rounding error only (it grows near saturation)"}
        info.update(est.info)
        return Result(value=_plain(est.value), method=spec.setting("label", spec.name), lower=est.lower,
                      upper=est.upper, error_estimate=est.error, info=info)
    if truncation is not None and "truncation" not in spec.options:
        raise NotApplicableError(f"truncation does not apply to method {spec.name!r}")
    if truncation is not None:
        options["truncation"] = truncation
    if verify:
        options["verify"] = True
    controls = {k: v for k, v in (("tol", tol), ("strict", strict)) if k in spec.setting("solver_controls", ())}
    value = fn(measure, Context(tol=tol, strict=strict, options=options, method=spec.name,
                                solver=spec.setting("solver"), controls=controls))
    if isinstance(value, Result):
        return value
    est = _as_estimate(value)
    return Result(value=_plain(est.value), method=spec.setting("label", spec.name), lower=est.lower,
                  upper=est.upper, error_estimate=est.error, info=dict(est.info))


# --------------------------------------------------------------------------- bracket
def _bracket(spec, model, measure, *, tol, truncation, verify, strict, options) -> Result:
    hooks = spec.protocol.bind(model)
    name = hooks.protocol.member("parameter").name
    if truncation is not None:
        raise NotApplicableError(f"truncation does not apply to method {spec.name!r} (set {name} instead); "
                                 f"got {truncation!r}")
    options.pop("lump", None)
    build, evaluate = hooks.build, hooks.measure
    opts = _solver_options(spec, options, tol, strict)

    def bounds(p, **extra):
        rep = build(measure, p)
        sol = solve_representation(rep, spec.setting("solver"), **{**opts, **extra})
        return rep, sol, _as_estimate(evaluate(measure, rep, sol))

    fixed = hooks.parameter
    rep, sol, est = bounds(fixed)
    lower, upper = est.lower, est.upper
    info = dict(est.info)
    if fixed is None:  # grow the parameter; every one gives valid bounds, so intersect them
        top, history, previous = spec.setting("max_parameter"), [], math.inf
        while True:
            p = rep.parameter
            history.append({name: p, "lower": est.lower, "upper": est.upper})
            lower, upper = max(lower, est.lower), min(upper, est.upper)
            width, mid = upper - lower, 0.5 * (lower + upper)
            if width <= tol * abs(mid) or (mid == 0 and width <= tol):
                break
            stalled = est.upper - est.lower >= previous
            if stalled or p >= top:
                why = "the width stopped shrinking (rounding margin)" if stalled else f"max {name} {top} reached"
                msg = f"{spec.name}: relative width {width / abs(mid):.2e} at {name} {p} exceeds rtol={tol:g}; {why}"
                if strict:
                    raise TruncationError(msg)
                warnings.warn(msg, AccuracyWarning, stacklevel=4)
                break
            previous = est.upper - est.lower
            rep, sol, est = bounds(min(p + max(1, p // 4), top))
        info = dict(est.info)
        info.update(relative_width=width / abs(mid) if mid else math.inf, history=history, adaptive=True)
    if verify:
        second = dict(spec.setting("verify", ()))
        if not second:
            raise NotApplicableError(f"verify does not apply to method {spec.name!r}")
        _, _, other = bounds(rep.parameter, **second)
        diff = max(abs(other.lower - lower), abs(other.upper - upper))
        info["verify"] = {**{f"second_{k}": v for k, v in second.items()}, "abs_diff": diff,
                          "agree": bool(diff <= 1e-9 * max(1.0, abs(upper)))}
    return Result(value=0.5 * (lower + upper), method=spec.setting("label", spec.name), lower=lower, upper=upper,
                  residual=getattr(sol, "residual", None), error_estimate=0.5 * (upper - lower),
                  nit=getattr(sol, "nit", None), info=info)


_DRIVERS = {"single": _single, "adaptive": _adaptive, "model": _model, "bracket": _bracket}
