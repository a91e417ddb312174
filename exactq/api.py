"""The public entry points: :func:`model`, :func:`solve` and :func:`check`.

The API knows models and methods only through the catalogue; it never special-cases
a model class.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .catalogue import Model, check_method_for, get_model, import_seconds
from .errors import ModelError, NotApplicableError
from .plugins import guard
from .result import Result

__all__ = ["model", "solve", "check", "check_properties", "stationary_solvers"]


def stationary_solvers() -> list[str]:
    """The stationary solvers of a CTMC in the registry (plug-ins' included, ``family="stationary"``).

    ``method=<one of these>`` means the ``ctmc`` method with that solver; the ``auto``
    choice is the one named ``stationary``.
    """
    from .catalogue import solver_names
    from .ctmc import CTMC

    return [name for name in solver_names(CTMC, "stationary") if name != "stationary"]


def __getattr__(name: str):
    if name == "STATIONARY_SOLVERS":  # deprecated: the registry's names (stationary_solvers())
        import warnings

        warnings.warn("exactq.api.STATIONARY_SOLVERS is deprecated: use exactq.api.stationary_solvers(), the "
                      "registry's names", DeprecationWarning, stacklevel=2)
        return tuple(stationary_solvers())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def model(name: str, **params: Any) -> Model:
    """Build and validate the model registered as ``name``.

    Parameters are given as keywords; strings are parsed as on the command line
    (``service_rates="1,2"``). A plug-in's own failure while it is built is a
    :class:`~exactq.errors.PluginError` naming it.
    """
    cls = get_model(name)
    with guard(cls):
        return cls.create(**params)


def _as_model(m: Model | str, params: dict) -> Model:
    if isinstance(m, Model):
        if params:
            raise ModelError(
                f"parameters {sorted(params)} given with an already built model; "
                "pass a model name instead"
            )
        return m
    return model(m, **params)


def resolve_method(m: Model, method: str) -> tuple[str, dict]:
    """Map the user's ``method`` to a registered method and its extra options."""
    methods = type(m).methods
    if method in ("auto", None, ""):
        return m.auto_method(), {}
    if method in methods:
        return method, {}
    solvers = stationary_solvers() if "ctmc" in methods else []
    if method in solvers:
        return "ctmc", {"solver": method}
    valid = list(methods) + solvers
    raise NotApplicableError(f"method {method!r} does not apply to model {m.name}; valid: {', '.join(valid)}")


def resolve_measure(m: Model, measure: str | None) -> str:
    if measure is None:
        return type(m).default_measure
    if measure not in type(m).measures:
        raise ModelError(
            f"unknown measure {measure!r} for model {m.name}; valid: {', '.join(type(m).measures)}"
        )
    return measure


#: options every method takes as keywords of :func:`solve` itself
COMMON_OPTIONS = ("tol", "truncation", "verify", "strict")


def solve(
    model: Model | str,
    measure: str | None = None,
    *,
    method: str = "auto",
    tol: float = 1e-9,
    truncation: int | None = None,
    verify: bool = False,
    strict: bool = False,
    lump: bool = True,
    options: dict | None = None,
    time_limit: float | None = None,
    certify: bool = False,
    progress: Callable[[dict], None] | None = None,
    warm_start: int | None = None,
    **params: Any,
) -> Result:
    """Compute a performance measure of a model.

    Parameters
    ----------
    model : str or Model
        A model name from the catalogue (``exactq models``) with its parameters as
        keywords, or a model instance.
    measure : str, optional
        One of the model's measures (default: the model's default measure).
    method : str
        ``"auto"`` (the model's preferred method), one of the model's methods, or the
        name of a registered stationary solver (``direct``, ``bicgstab``, ``gmres``,
        ``power``, ``gth``, ``mpmath``, ``level-reduction``, ``level-aggregation``, a
        plug-in's: :func:`stationary_solvers`) for CTMC-based models.
    tol : float
        Target relative accuracy; for infinite models the truncation grows until
        the estimated truncation error is below ``tol``.
    truncation : int, optional
        Fix the truncation level instead of choosing it automatically.
    verify : bool
        Re-solve the chain at 50 digits with mpmath and report the agreement in
        ``result.info["verify"]``.
    strict : bool
        Turn accuracy and convergence warnings into errors.
    lump : bool
        Let the CTMC method solve an exactly lumped chain when the model offers one
        (identical servers: sorted queue lengths); ``False`` solves the full chain.
    options : dict, optional
        Options of the chosen method beyond the common ones (``exactq models`` lists
        them per method), e.g. ``{"solver": "SCS", "polish": False}`` for ``convex``.
    time_limit : float, optional
        Wall-clock seconds for an adaptive truncation (``ctmc``, ``exact``, ``qbd``).
        When it, or the state or memory budget, runs out before ``tol`` is reached,
        the last value is returned with its error estimate and an
        :class:`AccuracyWarning` (``info["truncation"]["stopped_by"]`` names the
        budget); with ``strict=True`` it is a :class:`TruncationError`.
    certify : bool
        Return ``lower`` and ``upper`` that provably contain the exact value of the
        finite (or truncated) chain, floating-point rounding included: ball
        arithmetic for small chains, an a-posteriori M-matrix bound for large ones
        (:mod:`exactq.solvers.certify`); ``info["certificate"]`` says what it covers.
    progress : callable, optional
        Called with each record of an adaptive truncation (``level``, ``n_states``,
        ``change``, ``elapsed``, ...) as it is solved, e.g.
        :class:`exactq.progress.TruncationLine`; methods without a truncation do not
        call it.
    warm_start : int, optional
        A first truncation level to try (a sweep passes its neighbour's last but one
        level). A hint: ignored by methods without an integer-level truncation, and
        never below the model's own first level; the stopping rule is unchanged, so
        the answer is as accurate as without it.

    Returns
    -------
    Result

    Examples
    --------
    >>> r = solve("mm1", "mean_number", arrival_rate=0.5, service_rate=1.0)
    >>> abs(r.value - 1.0) < 1e-12
    True
    """
    m = _as_model(model, params)
    with guard(m):  # a plug-in's own failure is reported as its own (exactq.plugins)
        return _solve(m, measure, method=method, tol=tol, truncation=truncation, verify=verify, strict=strict,
                      lump=lump, options=options, time_limit=time_limit, certify=certify, progress=progress,
                      warm_start=warm_start)


def _solve(m: Model, measure: str | None, *, method: str, tol: float, truncation: int | None, verify: bool,
           strict: bool, lump: bool, options: dict | None, time_limit: float | None, certify: bool,
           progress: Callable[[dict], None] | None, warm_start: int | None) -> Result:
    name = resolve_measure(m, measure)
    if truncation is not None and method in ("auto", None, "") and "ctmc" in type(m).methods:
        method = "ctmc"  # a truncation level asks for the truncated chain
    method_name, extra = resolve_method(m, method)
    spec = check_method_for(m, method_name)

    def verifiable(sp):
        return bool(sp.setting("verify")) or "verify" in sp.options

    def certifiable(sp):  # the model gives the measure as a functional of this method's chain
        return sp.protocol.bind(m).functional is not None

    if ((verify and not verifiable(spec)) or (certify and not certifiable(spec))) and \
            method in ("auto", None, "") and "ctmc" in type(m).methods:
        method_name, spec = "ctmc", check_method_for(m, "ctmc")  # verify re-solves the truncated chain
    from .options import check_controls

    check_controls(tol=tol, truncation=truncation, time_limit=time_limit)  # the one validation of every command
    if truncation is not None and "truncation" not in spec.options:
        raise NotApplicableError(f"truncation applies to the ctmc and qbd methods; method {method_name!r} was chosen "
                         "(pass --method ctmc)")
    if verify and not verifiable(spec):
        raise NotApplicableError(f"verify does not apply to method {method_name!r} (it re-solves the ctmc method's chain "
                         "at 50 digits; pass --method ctmc)")
    if options:
        valid = [o for o in spec.options if o not in COMMON_OPTIONS]
        if spec.driver == "adaptive":
            valid.append("start_level")  # a warm start of the truncation (a sweep's last level)
        for key in options:
            if key not in valid:
                raise NotApplicableError(f"option {key!r} does not apply to method {method_name!r}; "
                                 f"valid: {', '.join(valid) or '(none)'}")
        _check_solver_option(spec, options.get("solver"))
        extra.update(options)
    if time_limit is not None:
        if spec.driver != "adaptive":
            raise NotApplicableError(f"time_limit applies to the adaptive truncation of the ctmc, exact and qbd "
                                     f"methods; method {method_name!r} was chosen")
        extra["time_limit"] = float(time_limit)
    if warm_start is not None and spec.driver == "adaptive" and truncation is None:
        extra.setdefault("start_level", int(warm_start))
    if progress is not None and spec.driver == "adaptive" and not m.delegate(method_name):
        extra["progress"] = progress
    t0 = time.perf_counter()
    if not lump:
        extra["lump"] = False
    from .methods import run

    loading = import_seconds()
    result = run(spec, m, name, tol=tol, truncation=truncation, verify=verify, strict=strict, options=extra,
                 certify=certify)
    result.measure = name
    if not result.seconds:
        result.seconds = time.perf_counter() - t0
    _without_imports(result, import_seconds() - loading)
    return result


def _check_solver_option(spec, name) -> None:
    """An adaptive method's ``solver`` option names a registered stationary solver of its representation."""
    if name is None or spec.driver != "adaptive" or not spec.protocol.representation:
        return
    from .catalogue import solver_names
    from .protocol import _type

    valid = ["auto"] + solver_names(_type(spec.protocol.representation), "stationary")
    if name not in valid:
        raise ModelError(f"stationary solver must be one of {', '.join(valid)}; got {name!r}")


def _without_imports(result: Result, loading: float) -> None:
    """Take the on-demand import of solver modules out of ``result.seconds`` (into ``info``)."""
    if loading > 0:
        result.seconds = max(result.seconds - loading, 0.0)
        result.info["import_seconds"] = loading


def check(model: Model | str, query: str, *, tol: float = 1e-9, truncation: int | None = None,
          strict: bool = False, time_limit: float | None = None, progress: Callable[[dict], None] | None = None,
          **params: Any) -> Result:
    """Evaluate a CSL-style query (``S=? [ q1 > 5 ]``, ``P=? [ F<=10 q1 = 3 ]``, ...).

    The model must offer a CTMC. Infinite models are truncated by the one truncation
    driver (:func:`exactq.truncation.grow`): the level grows until the query's value
    has converged to ``tol`` and the truncation's influence is below ``tol`` (the
    stationary mass on the boundary for ``S=?``/``E=?``; for path queries, the
    probability of reaching the boundary while the formula is undecided, which bounds
    the truncation error), or is fixed at ``truncation``. A budget (``time_limit``,
    states, memory) that runs out returns the last value with a warning, as in
    :func:`solve`. ``progress`` is called with each truncation record, as for
    :func:`solve`.

    A PRISM model (:func:`exactq.load_prism`) takes the query in PRISM's property
    syntax instead, with PRISM's forms (``F[t1,t2]``, ``G<=t``, ``R{"r"}=? [ C<=t ]``,
    filters, ...); see :func:`check_properties`.

    Examples
    --------
    M/M/1/3 with arrival rate 1 and service rate 2, blocking probability
    ``rho^3 (1 - rho) / (1 - rho^4)``:

    >>> r = check("mmck", "S=? [ n = 3 ]", arrival_rate=1, servers=1, capacity=3, service_rate=2)
    >>> abs(r.value - 0.5**3 * 0.5 / (1 - 0.5**4)) < 1e-12
    True
    """
    from .options import check_controls

    check_controls(tol=tol, truncation=truncation, time_limit=time_limit)
    m = _as_model(model, params)
    with guard(m):  # a plug-in's own failure is reported as its own (exactq.plugins)
        return _check(m, query, tol=tol, truncation=truncation, strict=strict, time_limit=time_limit,
                      progress=progress)


def _check(m: Model, query: str, *, tol: float, truncation: int | None, strict: bool, time_limit: float | None,
           progress: Callable[[dict], None] | None) -> Result:
    from exactq.solvers.csl import check_chain
    from exactq.query import parse_query

    from .methods import boundary_evaluation
    from .protocol import get_protocol
    from .truncation import Evaluation, grow

    if m.prism_properties:  # a PRISM (or explicit) model: properties against its own declarations
        if truncation is not None:
            raise NotApplicableError(f"truncation applies to infinite models only; model {m.name} is finite")
        return check_properties(m, query, strict=strict)[0]
    if not m.offers("ctmc"):
        raise NotApplicableError(f"model {m.name} has no CTMC representation; queries need one")
    q = parse_query(query)
    t0 = time.perf_counter()
    hooks = get_protocol("ctmc").bind(m)
    infinite = hooks.infinite
    if not infinite and truncation is not None:
        raise NotApplicableError(f"truncation applies to infinite models only; model {m.name} is finite")

    def solve(chain, previous):
        return check_chain(chain, q, strict=strict)

    def evaluate(chain, answer):
        value = answer.result.value
        if answer.stationary is not None:
            return boundary_evaluation(chain, answer.stationary, value, answer.value_under)
        hit = answer.boundary_probability or 0.0
        return Evaluation(value, hit, hit)

    if not infinite:
        chain = hooks.build(None)
        res = solve(chain, None).result
    else:
        out = grow(lambda level, _prev: hooks.build(level), solve, evaluate, tol=tol,
                   start=None if truncation is not None else int(hooks.start(tol)),
                   fixed=truncation, size=hooks.size, strict=strict, time_limit=time_limit, progress=progress)
        res = out.solution.result
        res.error_estimate = max(out.error_estimate or 0.0, res.error_estimate or 0.0)
        res.info.update(out.info)
        chain = out.representation
    res.measure = query
    res.n_states = chain.n_states
    res.seconds = time.perf_counter() - t0
    return res


def check_properties(model: Model, properties, *, strict: bool = False, eps: float = 1e-12,
                     source_name: str = "property", solver: str = "auto", errors: str = "raise",
                     constants: dict | None = None, check_constants: bool = True) -> list[Result]:
    """Check PRISM properties on a PRISM (or explicit) model: one result per property of ``properties``.

    Every property is parsed and type-checked against the model's declarations before
    the chain is built (a syntax error never costs a build); the chain is built once,
    and each property is then checked on its own.

    Parameters
    ----------
    model : Model
        From :func:`exactq.load_prism` (or :func:`exactq.prism.load_explicit`).
    properties : str or PropertyContext
        One property (``P=? [ F<=T "done" ]``), the text of a properties file, or a
        context from :func:`exactq.prism.properties.property_context` (a file and
        command-line properties, with ``--prop`` choices).
    strict : bool
        Turn accuracy warnings into errors.
    eps : float
        Poisson mass left out of time-bounded computations.
    source_name : str
        The name errors report (a properties file's name).
    solver : str
        A solver of the registry: a stationary solver for the steady-state properties
        (:func:`exactq.solvers.stationary.solve_stationary`), and, where it is one of
        them, the linear-system solver of the reachability and expected-reward systems
        (:func:`exactq.solvers.linear.linear_solvers`); an unknown name is refused in
        one line (:func:`exactq.solvers.csl.check_chain`).
    errors : {"raise", "keep"}
        ``raise``: the first property that fails raises its error. ``keep``: it gives a
        result with ``value`` None, ``method`` ``"error"`` and ``info["error"]`` (one
        line), and the other properties are still answered.
    constants : dict, optional
        Values of the properties' own constants (added to the model's).
    check_constants : bool
        A given constant that neither the model, the properties' declarations nor any
        property uses is an error (a misspelt name); False when the properties are
        checked one at a time.

    Returns
    -------
    list of Result
        ``measure`` is the property's text; ``info`` holds ``property_name``,
        ``property_index``, ``n_transitions``, ``build_seconds`` and ``solve_seconds``
        besides the checker's details; ``n_states`` the number of reachable states.
        The value of a threshold property (``P>=0.9 [ ... ]``) is ``True`` or ``False``.

    Examples
    --------
    >>> import exactq
    >>> m = exactq.load_prism("two.sm", text="ctmc module m s : [0..1]; [] s=0 -> 3 : (s'=1); endmodule")
    >>> r, = check_properties(m, "P=? [ F<=0.5 s=1 ]")
    >>> import math; abs(r.value - (1 - math.exp(-1.5))) < 1e-12
    True
    >>> a, b = check_properties(m, "P>=1 [ F s=1 ]\\n1 - P=? [ F<=0.5 s=1 ]")
    >>> a.value, abs(b.value - math.exp(-1.5)) < 1e-12
    (True, True)
    """
    from exactq.solvers.csl import check_chain

    from .errors import ExactqError
    from .prism.lexer import deep_recursion

    if errors not in ("raise", "keep"):
        raise ModelError(f"errors must be 'raise' or 'keep'; got {errors!r}")
    props = model.compile_properties(properties, source_name, errors=errors, constants=constants,
                                     check_constants=check_constants)
    out: list = []
    if all(p.error is not None for p in props):
        return [_error_result(p) for p in props]
    built = model.built
    state_text = _state_text(model, built.chain)
    cache = built.__dict__.setdefault("solutions", {})  # one stationary solve for all the properties
    for prop in props:
        if prop.error is not None:
            out.append(_error_result(prop))
            continue
        t0 = time.perf_counter()
        try:
            with deep_recursion(f"the property {prop.text[:40]!r}"):  # nested operators are evaluated recursively
                if getattr(model, "kind", None) == "mdp":  # optima over schedulers: exactq.prism.mdp_check
                    from .prism.mdp_check import check_mdp

                    answer = check_mdp(built.chain, prop.query, strict=strict, state_text=state_text)
                else:
                    answer = check_chain(built.chain, prop.query, strict=strict, rewards=built.rewards, eps=eps,
                                         cache=cache, solver=solver, state_text=state_text)
        except ExactqError as exc:
            if errors == "raise":
                raise
            prop.error = exc
            out.append(_error_result(prop))
            continue
        res = answer.result
        res.measure = prop.text
        res.n_states = built.chain.n_states
        res.info.update(property_name=prop.name, property_index=prop.index, n_transitions=built.n_transitions,
                        build_seconds=built.build_seconds, solve_seconds=time.perf_counter() - t0)
        res.seconds = time.perf_counter() - t0
        out.append(res)
    return out


def _error_result(prop) -> Result:
    """A property that could not be answered, as a result: value None, method ``error``, the one line in info."""
    msg = str(prop.error).splitlines()[0] if str(prop.error) else type(prop.error).__name__
    return Result(value=None, method="error", measure=prop.text,
                  info={"error": msg, "property_name": prop.name, "property_index": prop.index})


def _state_text(model, chain):
    """``state_text(i)``: state ``i`` as PRISM prints it, ``(x=1,b=true)`` (booleans by name)."""
    from exactq.statespace import row_reader

    info = getattr(model, "info", None)
    variables = getattr(info, "variables", None)
    names = [v.name for v in variables] if variables else list(getattr(chain.space, "names", ()))
    bools = {v.name for v in variables if v.type == "bool"} if variables else set()
    row_of = row_reader(chain)

    def text(i: int) -> str:
        row = row_of(int(i))
        return "(" + ",".join(f"{nm}={('true' if v else 'false') if nm in bools else int(v)}"
                              for nm, v in zip(names, row)) + ")"
    return text
