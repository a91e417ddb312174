"""Plug-in models, kept at arm's length: registration, entry points, and their errors.

A **plug-in** is a user's model in the catalogue: a :class:`~exactq.catalogue.Model`
subclass, or a plain function whose keyword parameters are the model's and which
returns a :class:`~exactq.ctmc.CTMC` (or a :class:`~exactq.ctmc.DTMC`), added at run
time by :func:`register` (``exactq.register_model``) or installed under the
``exactq.models`` entry-point group (:func:`load_entry_points`).

A plug-in's code runs beside exactq's, so its failures are reported as its own:

- an entry point that fails to import, raises, or calls ``sys.exit`` while it is
  loaded is recorded as unavailable (:data:`exactq.catalogue.LOAD_ERRORS`, listed by
  ``exactq models``) and cannot take other commands down: entry points are loaded
  only when a model that is not built in is named, or when every model is listed
  (``KeyboardInterrupt`` is never swallowed);
- an exception raised by the plug-in's code while a model is built, validated or
  solved (a traceback that passes through the plug-in's files) becomes a
  :class:`~exactq.errors.PluginError`, ``plug-in NAME: ExceptionType: message``
  (:class:`guard`), never exactq's internal error;
- a parameter named like one of exactq's own keywords (of :func:`exactq.model`,
  :func:`exactq.solve`, :func:`exactq.check`), a column of a sweep's table, or an
  attribute a model has for exactq (``name``, ``measures``, ``ctmc``, ...) is refused
  at registration (:func:`check_parameter_names`).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import time
from functools import cached_property, lru_cache
from typing import Any, Callable, ClassVar

from .catalogue import Model
from .errors import ExactqError, ModelError, PluginError
from .params import REQUIRED, Param

__all__ = ["register", "function_model", "FunctionModel", "load_entry_points", "guard", "check_parameter_names",
           "reserved_names", "PluginError", "ENTRY_POINT_GROUP"]

#: the entry-point group of users' plug-in models (a module, a Model subclass or a function)
ENTRY_POINT_GROUP = "exactq.models"

#: members of the models given by one finite chain (PRISM and explicit files) that the API reads besides the
#: protocols' (exactq.protocol): a plug-in parameter may not take their names either
CHAIN_MODEL_MEMBERS = ("compile_properties", "info")


def describe_exception(exc: BaseException) -> str:
    """``ExceptionType: first line of the message`` (``SystemExit`` says it was an exit)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the plug-in called sys.exit({exc.code!r})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# ------------------------------------------------------------------------ reserved names
@lru_cache(maxsize=None)
def _keywords() -> dict[str, str]:
    """exactq's own keywords: name -> where (``exactq.solve``, ...)."""
    import importlib

    api = importlib.import_module("exactq.api")
    sweep = importlib.import_module("exactq.sweep")  # the module (``exactq.sweep`` is also the function)
    out: dict[str, str] = {}
    for fn in (api.model, api.solve, api.check):  # the model's parameters are their **params
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                out.setdefault(p.name, f"a keyword of exactq.{fn.__name__}")
    for column in sweep.TABLE_COLUMNS:  # a sweep's table has a column per parameter beside these
        out.setdefault(column, "a column of exactq.sweep's tables")
    return out


def reserved_names() -> dict[str, str]:
    """Every name a plug-in parameter may not take: name -> what it clashes with."""
    from .protocol import MODEL_MEMBERS, PROTOCOLS, members_of

    out = dict(_keywords())
    for cls in (Model, FunctionModel, _CTMCFactory, _DTMCFactory):
        for attr in dir(cls):
            if not attr.startswith("__"):
                out.setdefault(attr, f"the model attribute {attr!r}")
    for member in MODEL_MEMBERS:
        out.setdefault(member.name, f"the model member {member.name!r} (exactq.protocol)")
    for name, protocol in sorted(PROTOCOLS.items()):
        for member in members_of(protocol):
            out.setdefault(member.name, f"the model member {member.name!r} of the {name} protocol (exactq.protocol)")
    for name in CHAIN_MODEL_MEMBERS:
        out.setdefault(name, f"the model member {name!r} of PRISM-file models")
    return out


def check_parameter_names(cls_or_names, model_name: str | None = None) -> None:
    """Refuse parameter names that clash with exactq's own (one line naming the first clash).

    ``cls_or_names`` is a model class (its declared parameters and dataclass fields) or
    a list of parameter names (of a plug-in function, before its class exists).
    """
    if isinstance(cls_or_names, type):
        cls = cls_or_names
        model_name = model_name or cls.name
        names = [n for p in cls.parameters for n in (p.name, *(a.name for a in getattr(p, "aliases", ())))]
        if dataclasses.is_dataclass(cls):
            names += [f.name for f in dataclasses.fields(cls)]
    else:
        names = list(cls_or_names)
    reserved = reserved_names()
    for n in dict.fromkeys(names):
        if n in reserved or n.startswith("__"):
            what = reserved.get(n, "a Python special name")
            raise PluginError(f"plug-in {model_name}: parameter {n!r} clashes with {what}; rename the parameter")


# ------------------------------------------------------------------------------ the guard
def plugin_files(cls: type) -> tuple[str, ...]:
    """The files (and package folders) of a plug-in model's code; ``()`` for a built-in model."""
    from . import catalogue

    objs = [cls]
    fn = getattr(cls, "_function", None)
    if callable(fn):
        objs.append(fn)
    out: list[str] = []
    for obj in objs:
        if catalogue._is_builtin(obj):
            continue
        code = getattr(obj, "__code__", None)
        if code is not None:
            out.append(code.co_filename)
        mod = sys.modules.get(getattr(obj, "__module__", "") or "")
        path = getattr(mod, "__file__", None)
        if path:
            out.append(os.path.abspath(path))
            top = sys.modules.get((mod.__name__ or "").split(".")[0])
            top_path = getattr(top, "__file__", None)
            if top is not mod and top_path and os.path.basename(top_path) == "__init__.py":
                out.append(os.path.join(os.path.dirname(os.path.abspath(top_path)), ""))
        elif code is None and isinstance(obj, type):  # a class defined in a doctest or at the prompt
            for member in vars(obj).values():
                member_code = getattr(getattr(member, "__func__", member), "__code__", None)
                if member_code is not None:
                    out.append(member_code.co_filename)
    return tuple(dict.fromkeys(out))


def _passes_through(tb, files: tuple[str, ...]) -> bool:
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        full = name if name.startswith("<") else os.path.abspath(name)
        if any(full == f or (f.endswith(os.sep) and full.startswith(f)) for f in files):
            return True
        tb = tb.tb_next
    return False


class guard:
    """Context manager: an exception from a plug-in model's own code becomes a :class:`PluginError`.

    Exceptions whose traceback passes through the plug-in's files (its module, or its
    package) are the plug-in's: ``plug-in NAME: ExceptionType: message``, chained to
    the original. exactq's own errors (:class:`~exactq.errors.ExactqError`) pass
    unchanged, as do ``KeyboardInterrupt`` and every exception of a built-in model. A
    ``SystemExit`` raised by the plug-in is reported the same way, never obeyed.

    Examples
    --------
    >>> def sketchy(rate: float = 1.0):
    ...     if rate < 0:
    ...         raise ValueError(f"rate {rate} is negative")
    >>> sketchy.__module__ = "my_plugin"  # a plug-in's module (a doctest's code counts as exactq's own)
    >>> Sketchy = function_model(sketchy, measures={"m": "k"})
    >>> try:
    ...     with guard(Sketchy):
    ...         Sketchy(rate=-1.0).built
    ... except PluginError as exc:
    ...     print(exc)
    plug-in sketchy: ValueError: rate -1.0 is negative
    """

    def __init__(self, model: Any):
        self.cls = model if isinstance(model, type) else type(model)

    def __enter__(self) -> "guard":
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        if exc is None or isinstance(exc, (ExactqError, KeyboardInterrupt, GeneratorExit)):
            return False
        if not isinstance(exc, (Exception, SystemExit)):
            return False
        files = plugin_files(self.cls)
        if not files or not _passes_through(tb, files):
            return False
        raise PluginError(f"plug-in {self.cls.name}: {describe_exception(exc)}") from exc


# ----------------------------------------------------------------------------- entry points
#: entry points already loaded (``"entry point NAME = VALUE"``)
_DONE: set[str] = set()
#: entry-point name -> (its key, "ExceptionType: message") for those that failed
_FAILED: dict[str, tuple[str, str]] = {}


def _entry_points(group: str) -> list:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def load_entry_points(group: str = ENTRY_POINT_GROUP, *, names=None, warn: bool = True) -> None:
    """Load the plug-ins installed under the ``exactq.models`` entry points (each once).

    An entry point may name a module (importing it registers its models), a
    :class:`Model` subclass, or a function returning a CTMC (registered under the
    entry point's name by :func:`register`). ``names`` loads only the entry points of
    those names. One that fails (an exception, or ``sys.exit``, while it is imported or
    registered) is recorded in :data:`exactq.catalogue.LOAD_ERRORS` (reported by a
    warning when ``warn``); the models it registered before failing are removed.
    """
    import types
    import warnings

    from . import catalogue

    for ep in _entry_points(group):
        if names is not None and ep.name not in names:
            continue
        key = f"entry point {ep.name} = {ep.value}"
        if key in _DONE:
            continue
        _DONE.add(key)
        before = set(catalogue._MODELS)
        try:
            obj = ep.load()
            if not isinstance(obj, types.ModuleType) and not getattr(obj, "__exactq_model__", None):
                register(obj, name=None if isinstance(obj, type) else ep.name)
        except KeyboardInterrupt:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 -- any failure of a plug-in, an exit included
            for added in set(catalogue._MODELS) - before:
                del catalogue._MODELS[added]
            err = describe_exception(exc)
            catalogue.LOAD_ERRORS[key] = err
            _FAILED[ep.name] = (key, err)
            if warn:
                warnings.warn(f"exactq: plug-in {key} could not be loaded ({err})", RuntimeWarning, stacklevel=2)


def failure_of(name: str) -> str | None:
    """Why the plug-in (entry point) ``name`` is unavailable, or ``None``."""
    if name not in _FAILED:
        return None
    key, err = _FAILED[name]
    return f"failed to load ({err}); {key}"


def unavailable() -> list[str]:
    """The names of the entry points that failed to load."""
    return sorted(_FAILED)


# ------------------------------------------------------------------------- function models
_KIND_OF = {int: "int", float: "float", bool: "bool", str: "str"}


@dataclasses.dataclass
class BuiltChain:
    """A plug-in's chain with its reward structures and how long it took to build."""

    chain: Any
    rewards: dict
    n_transitions: int
    build_seconds: float


class _CTMCFactory:
    def ctmc(self, truncation=None):
        """The model's CTMC (finite: ``truncation`` must be None)."""
        if truncation is not None:
            raise ModelError(f"model {self.name} is finite; truncation does not apply")
        return self.built.chain

    def ctmc_measure(self, measure, chain, sol):
        return self._value(measure, chain, sol)


class _DTMCFactory:
    def dtmc(self, truncation=None):
        """The model's DTMC (finite: ``truncation`` must be None)."""
        if truncation is not None:
            raise ModelError(f"model {self.name} is finite; truncation does not apply")
        return self.built.chain

    def dtmc_measure(self, measure, chain, sol):
        return self._value(measure, chain, sol)


class FunctionModel(Model):
    """A plug-in model made from a function returning a CTMC or DTMC (see :func:`register`)."""

    chain_model: ClassVar[bool] = True
    prism_properties: ClassVar[bool] = False
    kind: ClassVar[str] = "ctmc"
    _function: ClassVar[Callable] = None
    _expressions: ClassVar[dict] = {}

    @cached_property
    def built(self) -> BuiltChain:
        import numpy as np

        from .ctmc import CTMC, DTMC
        from .query import RewardStructure

        t0 = time.perf_counter()
        chain = type(self)._function(**self.params())
        want = CTMC if self.kind == "ctmc" else DTMC
        if not isinstance(chain, want):
            raise PluginError(f"plug-in {self.name}: the function must return a {want.__name__}; got "
                              f"{type(chain).__name__}")
        rewards = {k: RewardStructure(k, np.asarray(v, dtype=float)) for k, v in chain.rewards.items()}
        return BuiltChain(chain, rewards, int(chain.Q.nnz) if self.kind == "ctmc" else int(chain.P.nnz),
                          time.perf_counter() - t0)

    def _value(self, measure: str, chain, sol) -> float:
        import numpy as np

        values = np.asarray(chain.evaluate(type(self)._expressions[measure]))
        return sol.probability(values) if values.dtype == bool else sol.expect(values.astype(float))


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def _param_of(p: inspect.Parameter, fname: str) -> Param:
    ann = p.annotation
    if isinstance(ann, str):
        ann = {"int": int, "float": float, "bool": bool, "str": str}.get(ann, ann)
    kind = _KIND_OF.get(ann) if ann is not inspect.Parameter.empty else None
    default = REQUIRED if p.default is inspect.Parameter.empty else p.default
    if kind is None and default is not REQUIRED:
        kind = _KIND_OF.get(type(default))
    if kind is None:
        raise ModelError(f"plug-in {fname}: parameter {p.name!r} needs an annotation (int, float, bool, str) or a "
                         "default value")
    if kind == "float" and default is not REQUIRED and isinstance(default, int):
        default = float(default)
    return Param(p.name, kind, f"parameter {p.name} of {fname}", default=default)


def _returns_dtmc(ret: Any) -> bool:
    return ret == "DTMC" or (isinstance(ret, type) and ret.__name__ == "DTMC" and ret.__module__ == "exactq.ctmc")


def function_model(fn: Callable, *, name: str | None = None, measures: dict | None = None,
                   summary: str | None = None, kind: str | None = None) -> type:
    """The model class of a plug-in function ``fn(**params) -> CTMC`` (see :func:`register`)."""
    model_name = name or fn.__name__.replace("_", "-")
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise ModelError(f"plug-in {fn.__name__}: parameter {p.name!r} must be a plain keyword parameter")
        params.append(_param_of(p, fn.__name__))
    check_parameter_names([p.name for p in params], model_name)
    if kind is None:
        kind = "dtmc" if _returns_dtmc(sig.return_annotation) else "ctmc"
    exprs: dict
    if measures is None:
        if any(p.default is REQUIRED for p in params):
            raise ModelError(f"plug-in {fn.__name__}: give measures={{name: expression}} (it has required parameters, "
                             "so its rewards and labels cannot be listed in advance)")
        try:
            chain = fn()
        except KeyboardInterrupt:
            raise
        except ExactqError:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 -- the plug-in's own failure, reported as its own
            raise PluginError(f"plug-in {model_name}: building the chain at the default parameters (to list its "
                              f"rewards and labels) failed: {describe_exception(exc)}") from exc
        exprs = {k: k for k in list(getattr(chain, "rewards", {})) + list(getattr(chain, "labels", {}))}
        if not exprs:
            raise ModelError(f"plug-in {fn.__name__}: the chain has no rewards or labels; give measures={{name: "
                             "expression}}")
    else:
        exprs = {str(k): str(v) for k, v in dict(measures).items()}
    fields = [(p.name, Any, dataclasses.field(default=None if p.default is REQUIRED else p.default))
              for p in params]
    doc = (fn.__doc__ or "").strip().splitlines()
    mixin = _CTMCFactory if kind == "ctmc" else _DTMCFactory
    cls = dataclasses.make_dataclass(
        f"Plugin_{_ident(model_name)}", fields, bases=(mixin, FunctionModel), frozen=True,
        namespace={"name": model_name, "summary": summary or (doc[0] if doc else f"plug-in model {model_name}"),
                   "reference": f"plug-in: {fn.__module__}.{fn.__qualname__}", "parameters": tuple(params),
                   "measures": {k: f"stationary mean of {v}" for k, v in exprs.items()},
                   "default_measure": next(iter(exprs)), "methods": ("ctmc",) if kind == "ctmc" else ("dtmc",),
                   "kind": kind, "_function": staticmethod(fn), "_expressions": exprs})
    cls.__module__ = getattr(fn, "__module__", __name__)
    return cls


def register(obj=None, *, name: str | None = None, measures: dict | None = None, summary: str | None = None):
    """Add a user's model to the catalogue at run time (``exactq.register_model``).

    Parameters
    ----------
    obj : Model subclass or callable
        A :class:`~exactq.catalogue.Model` subclass (registered as it is), or a
        function ``fn(**params) -> CTMC`` whose keyword parameters, with annotations
        ``int``/``float``/``bool``/``str`` or defaults, become the model's parameters.
        Without ``obj``, returns a decorator.
    name : str, optional
        The model's name (default: the function's name with ``_`` as ``-``).
    measures : dict of str -> str, optional
        Measure name -> expression of the chain's variables, rewards and labels
        (``"q1 + q2"``, ``"q2 = K"``); its stationary mean (a probability for a
        condition) is the measure. Default: the chain's rewards and labels, by name.
    summary : str, optional

    Returns
    -------
    The object given (so that it can be used as a decorator).

    Raises
    ------
    ValueError
        If the name is already taken by another model.
    PluginError
        If a parameter is named like one of exactq's own keywords or model attributes
        (``name``, ``measure``, ``method``, ``tol``, ...), or the function fails when
        it is called at its defaults to list its rewards and labels.

    Examples
    --------
    >>> def clash(name: str = "x", rate: float = 1.0):
    ...     ...
    >>> register(clash)
    Traceback (most recent call last):
    ...
    exactq.errors.PluginError: plug-in clash: parameter 'name' clashes with a keyword of exactq.model; rename the parameter
    """
    if obj is None:
        return lambda o: register(o, name=name, measures=measures, summary=summary)
    from . import catalogue

    if isinstance(obj, type) and issubclass(obj, Model):
        catalogue.register_model(obj)
        return obj
    if not callable(obj):
        raise ModelError(f"register_model needs a Model subclass or a function; got {type(obj).__name__}")
    cls = function_model(obj, name=name, measures=measures, summary=summary)
    catalogue.register_model(cls)
    try:
        obj.__exactq_model__ = cls.name  # an entry point naming this function needs no second registration
    except (AttributeError, TypeError):
        pass
    return obj
