"""The catalogue: models, methods and solvers by name.

A **model** is a frozen dataclass deriving from :class:`Model`, registered with
:func:`register_model`. It declares its parameters (:class:`~exactq.params.Param`),
its measures (name -> one-line description) and the methods it offers, in order of
preference; the first is used by ``method="auto"``.

A **solver** is a function ``fn(representation, **options) -> solution`` registered
with :func:`register_solver` for a representation type (``CTMC``, ``QBD``, ...),
optionally with an ``applies(representation)`` test of the structure it needs.
:func:`solve_representation` dispatches on the representation's type and declared
structure, never on a model's name.

A **method** is what a user names (``--method qbd``): registered with
:func:`register_method`, it pairs a *driver* of :mod:`exactq.methods` (``single``,
``adaptive`` or ``model``) with the model's representation *factory* (the name of a
model method such as ``"ctmc"`` or ``"qbd"``). The driver builds the representation,
has it solved by the registered solver and lets the model map the solution to the
measure (``<factory>_measure``). The API and the command line know models, methods
and solvers only through this catalogue.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from .errors import ModelError, NotApplicableError, SolverRefusal
from .params import Param, parse_params

__all__ = [
    "Model",
    "MethodSpec",
    "SolverSpec",
    "register_model",
    "register_method",
    "register_solver",
    "solve_representation",
    "solvers_for",
    "register_certifier",
    "certify_representation",
    "get_model",
    "get_method",
    "model_names",
    "method_names",
    "describe_models",
]

_MODELS: dict[str, type] = {}
# a method name may have one implementation per representation (e.g. "closed-form")
_METHODS: dict[str, list["MethodSpec"]] = {}
# representation type -> the solvers registered for it, in registration order
_SOLVERS: dict[type, list["SolverSpec"]] = {}


class Model:
    """Base class of every model: validated parameters, declared measures and methods.

    Subclasses are frozen dataclasses whose fields are exactly the declared
    parameters, and set the class attributes below. Construct with
    ``Cls.create(**raw)`` (parses strings, fills defaults, checks every rule) or
    directly with canonical values (then ``check`` runs in ``__post_init__``).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    parameters: ClassVar[tuple[Param, ...]] = ()
    measures: ClassVar[dict[str, str]] = {}
    methods: ClassVar[tuple[str, ...]] = ()
    default_measure: ClassVar[str] = ""

    def __post_init__(self) -> None:
        # every declared rule holds however the model was built (create() or directly);
        # values are stored in canonical form (tuples for lists, floats for rates)
        for p in self.parameters:
            value = getattr(self, p.name)
            if value is None and p.default is None:  # an optional parameter left out
                continue
            object.__setattr__(self, p.name, p.parse(value))
        self.check()

    def check(self) -> None:
        """Cross-parameter rules (stability, list lengths). Raise ``ModelError``."""

    @classmethod
    def create(cls, **raw: Any) -> "Model":
        """Parse and validate raw keyword values (strings allowed) into a model."""
        values = parse_params(cls.name, cls.parameters, raw)
        return cls(**values)

    def params(self) -> dict:
        """The canonical parameter values, as a plain dictionary."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def offers(self, representation: str) -> bool:
        """Whether the model can describe itself through ``representation``."""
        return callable(getattr(self, representation, None))


@dataclass(frozen=True)
class MethodSpec:
    """A registered solution method.

    ``requires`` is the model's representation factory (``"ctmc"``, ``"qbd"``, ...);
    ``driver`` names the generic driver of :mod:`exactq.methods` that runs it, with
    its ``settings``.
    """

    name: str
    requires: str
    doc: str
    options: tuple[str, ...] = ()
    driver: str = "single"
    settings: tuple = ()

    def applies_to(self, model: Model) -> bool:
        return model.offers(self.requires)

    def setting(self, key: str, default: Any = None) -> Any:
        return dict(self.settings).get(key, default)


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: ``fn(representation, **options) -> solution``."""

    name: str
    representation: type
    fn: Callable[..., Any]
    doc: str
    options: tuple[str, ...] = ()
    applies: Callable[[Any], str | None] | None = None

    def refusal(self, rep: Any) -> str | None:
        """Why the solver does not apply to ``rep`` (``None`` when it does)."""
        return None if self.applies is None else self.applies(rep)


def _same_definition(a: Any, b: Any) -> bool:
    """The same function or class, possibly imported twice under two module names.

    ``pytest --doctest-modules solvers`` imports ``solvers/qbd.py`` as ``solvers.qbd``
    beside the installed ``exactq.solvers.qbd``; the second copy's registrations are
    the first one's, not a clash.
    """
    if a is b:
        return True
    key = lambda f: (getattr(f, "__module__", "").rsplit(".", 1)[-1], getattr(f, "__qualname__", None))  # noqa: E731
    return key(a) == key(b)


def register_model(cls: type) -> type:
    """Class decorator: add a model class to the catalogue under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _MODELS and _same_definition(_MODELS[cls.name], cls):
        if not _MODELS[cls.name].__module__.startswith("exactq.") and cls.__module__.startswith("exactq."):
            _MODELS[cls.name] = cls  # the installed module's class wins over a second copy's
        return cls
    if cls.name in _MODELS:
        raise ValueError(f"model name {cls.name!r} registered twice")
    unknown = [m for m in cls.methods if m not in _METHODS]
    if unknown:
        raise ValueError(f"model {cls.name!r} offers unregistered methods {unknown}")
    if cls.default_measure and cls.default_measure not in cls.measures:
        raise ValueError(f"model {cls.name!r}: default measure not declared")
    _MODELS[cls.name] = cls
    return cls


def _add_method(spec: MethodSpec) -> None:
    specs = _METHODS.setdefault(spec.name, [])
    for other in specs:
        if other.requires == spec.requires:
            if other == spec:  # the same registration (a module imported twice)
                return
            raise ValueError(f"method {spec.name!r} for representation {spec.requires!r} registered twice")
    specs.append(spec)


def register_method(name: str, *, requires: str, doc: str, driver: str, options: tuple[str, ...] = (),
                    **settings) -> None:
    """Register method ``name`` for models offering the representation factory ``requires``.

    ``driver`` is one of the generic drivers of :mod:`exactq.methods` (``"single"``,
    ``"adaptive"``, ``"bracket"`` or ``"model"``); it runs the method with
    ``settings`` (see each driver). ``options`` are the keywords the method accepts.
    """
    if not driver:
        raise ValueError(f"method {name!r} needs a driver")
    _add_method(MethodSpec(name, requires, doc, tuple(options), driver, tuple(sorted(settings.items()))))


def register_solver(representation: type, *, name: str, doc: str, options: tuple[str, ...] = (),
                    applies: Callable[[Any], str | None] | None = None):
    """Decorator: register ``fn(representation, **options) -> solution`` for a representation type.

    ``applies(rep)`` returns ``None`` when the solver can handle ``rep`` and otherwise
    the reason it cannot (a declared structure it needs); solvers registered first
    are preferred.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        specs = _SOLVERS.setdefault(representation, [])
        for s in specs:
            if s.name == name:
                if _same_definition(s.fn, fn):
                    return fn
                raise ValueError(f"solver {name!r} for {representation.__name__} registered twice")
        specs.append(SolverSpec(name, representation, fn, doc, tuple(options), applies))
        return fn

    return deco


#: representation type -> (fn(rep, solution) -> enclosure, doc): the certificates of ``certify=True``
_CERTIFIERS: dict[type, tuple[Callable[..., Any], str]] = {}


def register_certifier(representation: type, *, doc: str):
    """Decorator: register ``fn(rep, solution) -> enclosure`` as the certificate for a representation type.

    The enclosure has ``expectation(f, g=None) -> (lower, upper)``, an interval that
    provably contains ``(f . pi) / (g . pi)`` for the exact stationary law of ``rep``.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        old = _CERTIFIERS.get(representation)
        if old is not None and not _same_definition(old[0], fn):
            raise ValueError(f"a certifier for {representation.__name__} registered twice")
        _CERTIFIERS.setdefault(representation, (fn, doc))
        return fn

    return deco


def certify_representation(rep: Any, solution: Any = None, *, progress: Callable | None = None) -> Any:
    """The certified enclosure of ``rep``'s solution (``NotApplicableError`` if none is registered).

    ``progress`` (job events of :mod:`exactq.progress`) goes to certifiers that accept it.
    """
    _load()
    for cls in type(rep).__mro__:
        if cls in _CERTIFIERS:
            fn = _CERTIFIERS[cls][0]
            if progress is not None and "progress" in inspect.signature(fn).parameters:
                return fn(rep, solution, progress=progress)
            return fn(rep, solution)
    raise NotApplicableError(f"no certificate is registered for the {type(rep).__name__} representation")


def solvers_for(rep: Any) -> list[SolverSpec]:
    """The solvers registered for the type of ``rep`` (or a base class of it)."""
    _load()
    return [s for cls in type(rep).__mro__ for s in _SOLVERS.get(cls, ())]


def solve_representation(rep: Any, using: str | None = None, **options) -> Any:
    """Solve ``rep`` with the registered solver named ``using``, or the first one that applies.

    Solvers that declare a structure they need (``applies``) and accept ``rep`` are
    tried before the general ones, in registration order. ``options`` go to the
    solver.

    Raises
    ------
    NotApplicableError
        No solver is registered for the representation's type, the named one is not,
        or none applies to its structure (the message gives each solver's reason).
    """
    specs = solvers_for(rep)
    kind = type(rep).__name__
    if not specs:
        raise SolverRefusal(f"no solver is registered for the {kind} representation")
    if using is not None:
        named = [s for s in specs if s.name == using]
        if not named:
            raise SolverRefusal(f"solver {using!r} does not apply to a {kind}; valid: "
                                f"{', '.join(s.name for s in specs)}")
        why = named[0].refusal(rep)
        if why:
            raise SolverRefusal(f"solver {using!r} does not apply to this {kind}: {why}")
        return _run_solver(named[0], rep, options)
    reasons = []
    for s in sorted(specs, key=lambda s: s.applies is None):  # declared structure first
        why = s.refusal(rep)
        if why is None:
            return _run_solver(s, rep, options)
        reasons.append(f"{s.name}: {why}")
    raise SolverRefusal(f"no registered solver applies to this {kind} ({'; '.join(reasons)})")


def _run_solver(spec: SolverSpec, rep: Any, options: dict) -> Any:
    """Run a solver; a limit it finds itself (NotApplicableError) is a refusal of this representation."""
    try:
        return spec.fn(rep, **options)
    except SolverRefusal:
        raise
    except NotApplicableError as exc:
        raise SolverRefusal(str(exc)) from exc


#: module name -> "ExceptionType: message" for plug-in modules that failed to import
LOAD_ERRORS: dict[str, str] = {}


def import_all(package: str, path) -> None:
    """Import every module of a plug-in package (``exactq.models``, ``exactq.solvers``).

    A module that fails to import is recorded in :data:`LOAD_ERRORS` and reported by a
    warning, so that one broken model does not take the whole catalogue down with it;
    ``exactq models`` lists what could not be loaded, and the test suite asserts that
    nothing is missing.
    """
    import importlib
    import pkgutil
    import warnings

    for name in sorted(m.name for m in pkgutil.iter_modules(path)):
        full = f"{package}.{name}"
        try:
            importlib.import_module(full)
        except Exception as exc:  # noqa: BLE001 -- any import failure of a plug-in
            LOAD_ERRORS[full] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"exactq: module {full} could not be loaded ({LOAD_ERRORS[full]})", RuntimeWarning,
                          stacklevel=2)


def load_solvers() -> None:
    """Import the solver package, which registers every solver and method."""
    import exactq.solvers  # noqa: F401


def _load() -> None:
    # Importing the packages registers their contents (methods first).
    load_solvers()
    import exactq.models  # noqa: F401

    load_entry_points()


#: the entry-point group of users' plug-in models (a module, a Model subclass or a function)
ENTRY_POINT_GROUP = "exactq.models"
_ENTRY_POINTS_LOADED: list = []


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> None:
    """Load the plug-in models installed under the ``exactq.models`` entry-point group (once).

    An entry point may name a module (importing it registers its models), a
    :class:`Model` subclass, or a function returning a CTMC (registered under the
    entry point's name by :func:`exactq.register_model`). One that fails is recorded in
    :data:`LOAD_ERRORS` and reported by a warning, like a built-in module.
    """
    if group in _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED.append(group)
    import types
    import warnings
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        key = f"entry point {ep.name} = {ep.value}"
        try:
            obj = ep.load()
            if not isinstance(obj, types.ModuleType) and not getattr(obj, "__exactq_model__", None):
                from exactq.prism.models import register

                register(obj, name=None if isinstance(obj, type) else ep.name)
        except Exception as exc:  # noqa: BLE001 -- any failure of a plug-in
            LOAD_ERRORS[key] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"exactq: plug-in {key} could not be loaded ({LOAD_ERRORS[key]})", RuntimeWarning,
                          stacklevel=2)


def get_model(name: str) -> type:
    """The model class registered as ``name`` (``ModelError`` naming the valid ones)."""
    _load()
    try:
        return _MODELS[name]
    except KeyError:
        pass
    if LOAD_ERRORS:
        # a model may be unknown only because its module failed to import: say so, with the cause
        mod = name.replace("-", "_")
        failed = [f"{m} ({err})" for m, err in LOAD_ERRORS.items() if m.rsplit(".", 1)[-1] == mod] or \
            [f"{m} ({err})" for m, err in LOAD_ERRORS.items()]
        raise ModelError(f"model {name!r} is not available: plug-in module {'; '.join(failed)} failed to load; "
                         f"available: {', '.join(sorted(_MODELS)) or '(none)'}")
    raise ModelError(f"unknown model {name!r}; valid: {', '.join(sorted(_MODELS))}")


def get_method(name: str) -> list[MethodSpec]:
    """The implementations registered under ``name`` (one per representation)."""
    _load()
    try:
        return list(_METHODS[name])
    except KeyError:
        raise ModelError(f"unknown method {name!r}; valid: {', '.join(sorted(_METHODS))}") from None


def model_names() -> list[str]:
    _load()
    return sorted(_MODELS)


def method_names() -> list[str]:
    _load()
    return sorted(_METHODS)


def _method_options(cls: type) -> dict:
    """Options beyond tol/truncation/verify/strict of each method the class offers."""
    common = ("tol", "truncation", "verify", "strict")
    out = {}
    for name in cls.methods:
        opts = [o for spec in _METHODS.get(name, ()) if callable(getattr(cls, spec.requires, None))
                for o in spec.options if o not in common]
        if opts:
            out[name] = list(dict.fromkeys(opts))
    return out


def describe_models() -> list[dict]:
    """Everything ``exactq models`` prints: parameters, measures, methods per model."""
    _load()
    out = []
    for name in sorted(_MODELS):
        cls = _MODELS[name]
        out.append(
            {
                "name": name,
                "summary": cls.summary,
                "reference": cls.reference,
                "parameters": [p.describe() for p in cls.parameters],
                "measures": dict(cls.measures),
                "default_measure": cls.default_measure,
                "methods": list(cls.methods),
                "method_options": _method_options(cls),
            }
        )
    return out


def check_method_for(model: Model, method: str) -> MethodSpec:
    """The spec of ``method`` if ``model`` offers it, else ``NotApplicableError``."""
    specs = [s for s in get_method(method) if s.applies_to(model)]
    if method not in type(model).methods or not specs:
        raise NotApplicableError(
            f"method {method!r} does not apply to model {model.name}; "
            f"valid: {', '.join(type(model).methods)}"
        )
    return specs[0]
