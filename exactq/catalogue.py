"""The catalogue: models by name and methods by name.

A model is a frozen dataclass deriving from :class:`Model`, registered with
:func:`register_model`. It declares its parameters (:class:`~exactq.params.Param`),
its measures (name -> one-line description) and the methods it offers, in order of
preference; the first is used by ``method="auto"``.

A method is a function ``fn(model, measure, **options) -> Result`` registered with
:func:`register_method`, together with the representation it needs (the name of a
model method such as ``"ctmc"`` or ``"closed_form"``). The API and the command line
know models and methods only through this catalogue.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from .errors import ModelError, NotApplicableError
from .params import Param, parse_params

__all__ = [
    "Model",
    "MethodSpec",
    "register_model",
    "register_method",
    "get_model",
    "get_method",
    "model_names",
    "method_names",
    "describe_models",
]

_MODELS: dict[str, type] = {}
# a method name may have one implementation per representation (e.g. "closed-form")
_METHODS: dict[str, list["MethodSpec"]] = {}


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
    """A registered solution method."""

    name: str
    fn: Callable[..., Any]
    requires: str
    doc: str
    options: tuple[str, ...] = ()

    def applies_to(self, model: Model) -> bool:
        return model.offers(self.requires)


def register_model(cls: type) -> type:
    """Class decorator: add a model class to the catalogue under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _MODELS and _MODELS[cls.name] is not cls:
        raise ValueError(f"model name {cls.name!r} registered twice")
    unknown = [m for m in cls.methods if m not in _METHODS]
    if unknown:
        raise ValueError(f"model {cls.name!r} offers unregistered methods {unknown}")
    if cls.default_measure and cls.default_measure not in cls.measures:
        raise ValueError(f"model {cls.name!r}: default measure not declared")
    _MODELS[cls.name] = cls
    return cls


def register_method(name: str, *, requires: str, doc: str, options: tuple[str, ...] = ()):
    """Decorator: register ``fn(model, measure, **options) -> Result`` as method ``name``."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        specs = _METHODS.setdefault(name, [])
        for other in specs:
            if other.requires == requires and other.fn is not fn:
                raise ValueError(f"method {name!r} for representation {requires!r} registered twice")
        if not any(other.fn is fn for other in specs):
            specs.append(MethodSpec(name, fn, requires, doc, options))
        return fn

    return deco


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


def _load() -> None:
    # Importing the packages registers their contents (methods first).
    import exactq.solvers  # noqa: F401
    import exactq.models  # noqa: F401


def get_model(name: str) -> type:
    """The model class registered as ``name`` (``ModelError`` naming the valid ones)."""
    _load()
    try:
        return _MODELS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; valid: {', '.join(sorted(_MODELS))}") from None


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
