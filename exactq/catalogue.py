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
``adaptive``, ``bracket`` or ``model``) with the :class:`~exactq.protocol.Protocol`
of a representation (``"ctmc"``, ``"qbd"``, ...): the typed members a model offers
the method (the representation's factory, the mapping of a solution to a measure,
sizes, first levels), declared in :mod:`exactq.protocol`. :func:`register_model`
checks a model against the protocols of the methods it claims, and a missing member
is one line naming it. The driver builds the representation, has it solved by the
registered solver and lets the model map the solution to the measure. The API and
the command line know models, methods and solvers only through this catalogue.

**Loading.** The catalogue imports nothing it does not need. The generated index
:mod:`exactq.catalogue_index` (committed; regenerate with
``python -m exactq.catalogue_index``) holds every built-in model's description
(what ``exactq models`` prints) and the module that registers each model, method,
solver and certificate, in the order of a full import. A model module is imported
when its model is named, a solver module when one of its methods is chosen or a
representation it solves is solved, and solvers keep the index's order whatever
the order of the imports. The index is used only while the digests of the sources it
was generated from (``models/``, ``solvers/``, this module, :mod:`exactq.params`,
:mod:`exactq.method_table`, :mod:`exactq.protocol`) match the installed files;
otherwise every module is imported as before, so a stale index can make the
catalogue slower, never different. Plug-ins (the ``exactq.models``
entry points, :mod:`exactq.plugins`) are loaded only when a model that is not built
in is named, or when every model is listed.

Examples
--------
A model by name, the implementation of a method it offers, and a representation
solved by the solver registered for its type (the M/M/1/3 queue at arrival rate 1 and
service rate 2: ``P(full) = rho^3 (1 - rho) / (1 - rho^4)``):

>>> cls = get_model("mmck")
>>> m = cls.create(arrival_rate=1, servers=1, capacity=3, service_rate=2)
>>> [spec.requires for spec in get_method("ctmc") if spec.applies_to(m)]
['ctmc']
>>> sol = solve_representation(m.ctmc(None))
>>> bool(abs(sol.pi[3] - 0.5**3 * 0.5 / (1 - 0.5**4)) < 1e-12)
True
>>> sorted(d["name"] for d in describe_models())[:3]
['aoi', 'awp', 'jsq']
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from .errors import ModelError, NotApplicableError, PluginError, SolverRefusal
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
    "solvers_of",
    "solver_names",
    "register_certifier",
    "certify_representation",
    "get_model",
    "get_method",
    "model_names",
    "method_names",
    "describe_models",
    "load_all",
    "build_index",
    "index_status",
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
    #: properties are read in PRISM's syntax against the model's own declarations (PRISM and explicit files)
    prism_properties: ClassVar[bool] = False

    # The members every model has, with their defaults (exactq.protocol.MODEL_MEMBERS); what a model offers
    # each method is declared by that method's protocol (exactq.protocol.PROTOCOLS) and checked at registration.
    #: whether the model is infinite (its chains are truncated and the truncation grown); often a property
    is_infinite = False

    def intrinsic_measure(self, measure: str) -> Any:
        """A measure the model answers without a solve (e.g. a stability limit); ``None``: solve it."""
        return None

    def delegate(self, method: str) -> str | None:
        """Another method that answers ``method`` for this model (e.g. its mean-field limit); ``None``: none."""
        return None

    def auto_method(self) -> str:
        """The method ``method="auto"`` runs: by default the first of :attr:`methods`."""
        return type(self).methods[0]

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
        """Whether the model has the factory of the declared representation ``representation`` (``"ctmc"``)."""
        from .protocol import PROTOCOLS

        protocol = PROTOCOLS.get(representation)
        return protocol is not None and protocol.offered_by(self)


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
    #: the module that registered the method (for the index; not part of its identity)
    module: str = field(default="", compare=False)

    @property
    def protocol(self):
        """What the method needs from a model (:class:`exactq.protocol.Protocol`)."""
        from .protocol import get_protocol

        return get_protocol(self.requires)

    def applies_to(self, model: Model) -> bool:
        return self.protocol.offered_by(model)

    def setting(self, key: str, default: Any = None) -> Any:
        return dict(self.settings).get(key, default)


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: ``fn(representation, **options) -> solution``.

    ``priority`` orders the dispatch (the highest first among those that apply; equal
    priorities by name), ``family`` says what it computes (``"stationary"``,
    ``"transient"``, ...: the names ``--option solver=NAME`` of a method choose from).
    """

    name: str
    representation: type
    fn: Callable[..., Any]
    doc: str
    options: tuple[str, ...] = ()
    applies: Callable[[Any], str | None] | None = None
    priority: int = 0
    family: str = ""

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
    """Class decorator: add a model class to the catalogue under ``cls.name``.

    The methods the class offers must be registered (or listed in the index, whose
    modules are imported when the method is used), and the class must have every
    member the protocol of one of each method's representations requires
    (:func:`exactq.protocol.check_model`: a :class:`~exactq.errors.ModelError`, for a
    plug-in a :class:`~exactq.errors.PluginError`, of one line naming the method and
    the missing member); a model that is not built in (a plug-in) may not name a
    parameter like one of exactq's own keywords or model attributes
    (:func:`exactq.plugins.check_parameter_names`).
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _MODELS and _same_definition(_MODELS[cls.name], cls):
        if not _MODELS[cls.name].__module__.startswith("exactq.") and cls.__module__.startswith("exactq."):
            _MODELS[cls.name] = cls  # the installed module's class wins over a second copy's
        return cls
    builtin = _is_builtin(cls)
    idx = _builtin_index()
    if not builtin and idx is None:
        _load_builtin()  # no usable index: the built-in names are known once their modules are imported
    if cls.name in _MODELS or (not builtin and idx is not None and cls.name in idx["models"]):
        raise ValueError(f"model name {cls.name!r} registered twice")  # (a built-in's, even if not imported yet)
    unknown = [m for m in cls.methods if not _method_known(m)]
    if unknown and idx is None:
        load_solvers()  # no usable index: the methods are known once every solver module is imported
        unknown = [m for m in cls.methods if m not in _METHODS]
    if unknown:
        raise ValueError(f"model {cls.name!r} offers unregistered methods {unknown}")
    if cls.default_measure and cls.default_measure not in cls.measures:
        raise ValueError(f"model {cls.name!r}: default measure not declared")
    if not builtin:
        from .plugins import check_parameter_names

        check_parameter_names(cls)
    why = _protocol_gap(cls)
    if why:
        raise ModelError(f"model {cls.name!r}: {why}") if builtin else PluginError(f"plug-in {cls.name}: {why}")
    _MODELS[cls.name] = cls
    return cls


def _protocol_gap(cls: type) -> str | None:
    """The first method ``cls`` claims whose protocol it does not meet, as one line (``None``: it meets them all)."""
    from .protocol import check_model, get_protocol

    for method in cls.methods:
        protocols = [get_protocol(requires) for requires, _ in _method_meta(method)]
        why = check_model(cls, method, protocols)
        if why:
            return why
    return None


def _method_known(name: str) -> bool:
    if name in _METHODS:
        return True
    idx = _builtin_index()
    return idx is not None and name in idx["methods"]


def _add_method(spec: MethodSpec) -> None:
    specs = _METHODS.setdefault(spec.name, [])
    for other in specs:
        if other.requires == spec.requires:
            if other == spec:  # the same registration (a module imported twice)
                return
            raise ValueError(f"method {spec.name!r} for representation {spec.requires!r} registered twice")
    specs.append(spec)


#: settings that once named model hooks; the protocol declares those members now (exactq.protocol)
_HOOK_SETTINGS = {"evaluate": "measure", "size": "size", "start": "start", "infinite": "infinite",
                  "parameter": "parameter"}


def register_method(name: str, *, requires, doc: str, driver: str, options: tuple[str, ...] = (),
                    **settings) -> None:
    """Register method ``name`` for models offering the representation ``requires``.

    ``requires`` names a declared :class:`~exactq.protocol.Protocol` (``"ctmc"``,
    ``"qbd"``, ...), or is one (a plug-in's, declared here): what the method needs from
    a model, checked when a model claiming the method is registered. ``driver`` is one
    of the generic drivers of :mod:`exactq.methods` (``"single"``, ``"adaptive"``,
    ``"bracket"`` or ``"model"``); it runs the method with ``settings`` (see each
    driver). ``options`` are the keywords the method accepts.

    A setting may not name a model member: the protocol declares those. (Registrations
    written before the protocols existed may still pass ``start``, ``size``,
    ``infinite``, ``evaluate`` or ``parameter`` when they agree with the protocol's
    declaration; they are dropped.)
    """
    from .protocol import Protocol, get_protocol, register_protocol

    if not driver:
        raise ValueError(f"method {name!r} needs a driver")
    protocol = register_protocol(requires) if isinstance(requires, Protocol) else get_protocol(requires)
    if protocol.driver != driver:
        raise ValueError(f"method {name!r}: driver {driver!r} does not run the protocol {protocol.name!r} "
                         f"(its driver is {protocol.driver!r})")
    for key, role in _HOOK_SETTINGS.items():
        if key in settings:
            member = protocol.member(role)
            if member is None or member.name != settings[key]:
                raise ValueError(f"method {name!r}: setting {key}={settings[key]!r} names a model member; the "
                                 f"protocol {protocol.name!r} declares its members (exactq.protocol)")
            del settings[key]
    module = sys._getframe(1).f_globals.get("__name__", "")  # the registering module, for the index
    _add_method(MethodSpec(name, protocol.name, doc, tuple(options), driver, tuple(sorted(settings.items())),
                           module))


def register_solver(representation: type, *, name: str, doc: str, options: tuple[str, ...] = (),
                    applies: Callable[[Any], str | None] | None = None, priority: int = 0, family: str = ""):
    """Decorator: register ``fn(representation, **options) -> solution`` for a representation type.

    ``applies(rep)`` returns ``None`` when the solver can handle ``rep`` and otherwise
    the reason it cannot (a declared structure it needs). Without ``using``,
    :func:`solve_representation` tries the solvers by ``priority``, highest first (equal
    priorities by name): the order of files and imports never matters, and a solver
    with the default priority 0, as a plug-in's is, is chosen only when it is asked for
    (``using``, ``--option solver=NAME``) or when no solver of higher priority applies.
    ``family`` (``"stationary"``, ``"transient"``) groups the solvers a method's
    ``solver`` option chooses from.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        specs = _SOLVERS.setdefault(representation, [])
        for k, s in enumerate(specs):
            if s.name == name:
                if _same_definition(s.fn, fn):
                    if not s.fn.__module__.startswith("exactq.") and fn.__module__.startswith("exactq."):
                        specs[k] = dataclasses.replace(s, fn=fn, applies=applies)  # the installed module's wins
                    return fn
                raise ValueError(f"solver {name!r} for {representation.__name__} registered twice")
        specs.append(SolverSpec(name, representation, fn, doc, tuple(options), applies, int(priority), family))
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
        if old is None or (not old[0].__module__.startswith("exactq.") and fn.__module__.startswith("exactq.")):
            _CERTIFIERS[representation] = (fn, doc)  # the installed module's wins over a second copy's
        return fn

    return deco


def certify_representation(rep: Any, solution: Any = None, *, progress: Callable | None = None) -> Any:
    """The certified enclosure of ``rep``'s solution (``NotApplicableError`` if none is registered).

    ``progress`` (job events of :mod:`exactq.progress`) goes to certifiers that accept it.
    """
    idx = _builtin_index()
    if idx is None:
        load_solvers()
    else:
        _ensure([idx["certifiers"][k] for k in map(_type_key, type(rep).__mro__) if k in idx["certifiers"]])
    for cls in type(rep).__mro__:
        if cls in _CERTIFIERS:
            fn = _CERTIFIERS[cls][0]
            if progress is not None and "progress" in inspect.signature(fn).parameters:
                return fn(rep, solution, progress=progress)
            return fn(rep, solution)
    raise NotApplicableError(f"no certificate is registered for the {type(rep).__name__} representation")


def solvers_for(rep: Any) -> list[SolverSpec]:
    """The solvers registered for the type of ``rep`` (or a base class of it), in the index's order.

    The modules that register solvers for those types are imported here (when the
    index is fresh; otherwise every solver module).
    """
    return solvers_of(type(rep))


def solvers_of(rep_type: type) -> list[SolverSpec]:
    """The solvers registered for a representation type (or a base class of it), in the order they are tried.

    By priority, highest first, then by name (the type's own solvers before those of a
    base class): never by the order of files or imports.
    """
    idx = _builtin_index()
    if idx is None:
        load_solvers()
    out = []
    for cls in rep_type.__mro__:
        entries = idx["solvers"].get(_type_key(cls), []) if idx is not None else []
        _ensure(dict.fromkeys(module for _, module in entries))
        out += sorted(_SOLVERS.get(cls, ()), key=lambda s: (-s.priority, s.name))
    return out


def solver_names(rep_type: type, family: str) -> list[str]:
    """The names of a representation type's solvers of one family (plug-ins' included), in dispatch order."""
    return [s.name for s in solvers_of(rep_type) if s.family == family]


def solve_representation(rep: Any, using: str | None = None, **options) -> Any:
    """Solve ``rep`` with the registered solver named ``using``, or the first one that applies.

    Without ``using`` the solvers are tried by priority (:func:`register_solver`), the
    first whose ``applies`` accepts ``rep`` solves it. ``options`` go to the solver.

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
    for s in specs:  # by priority (solvers_of)
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


def _import_guarded(full: str) -> bool:
    """Import module ``full``; a failure is recorded in :data:`LOAD_ERRORS` and warned about."""
    if full in sys.modules:
        return True
    import time
    import warnings

    t0 = time.perf_counter()
    _IMPORT_SECONDS[1] += 1
    try:
        importlib.import_module(full)
        return True
    except Exception as exc:  # noqa: BLE001 -- any import failure of a plug-in
        LOAD_ERRORS[full] = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"exactq: module {full} could not be loaded ({LOAD_ERRORS[full]})", RuntimeWarning,
                      stacklevel=3)
        return False
    finally:
        _IMPORT_SECONDS[1] -= 1
        if not _IMPORT_SECONDS[1]:  # the outermost import (an import inside one is counted with it)
            _IMPORT_SECONDS[0] += time.perf_counter() - t0


#: [seconds spent importing catalogue modules on demand (see :func:`import_seconds`), imports under way]
_IMPORT_SECONDS = [0.0, 0]


def import_seconds() -> float:
    """Seconds this process has spent importing model and solver modules on demand.

    The API subtracts what a solve spent importing from its ``seconds`` (and reports
    it as ``info["import_seconds"]``), so that the time of a first solve is the time
    of the computation, as it was when everything was imported at start-up.
    """
    return _IMPORT_SECONDS[0]


def import_all(package: str, path) -> None:
    """Import every module of a plug-in package (``exactq.models``, ``exactq.solvers``).

    A module that fails to import is recorded in :data:`LOAD_ERRORS` and reported by a
    warning, so that one broken model does not take the whole catalogue down with it;
    ``exactq models`` lists what could not be loaded, and the test suite asserts that
    nothing is missing.
    """
    import pkgutil

    for name in sorted(m.name for m in pkgutil.iter_modules(path)):
        _import_guarded(f"{package}.{name}")


def load_solvers() -> None:
    """Import the method table (:mod:`exactq.method_table`) and every solver module: every method and solver."""
    import exactq.solvers

    _import_guarded("exactq.method_table")
    import_all(exactq.solvers.__name__, exactq.solvers.__path__)


def _load_builtin() -> None:
    """Import every built-in module: the solvers first (their methods), then the models."""
    load_solvers()
    import exactq.models

    import_all(exactq.models.__name__, exactq.models.__path__)


def load_all() -> None:
    """Import every built-in module and load every plug-in: the whole catalogue."""
    _load_builtin()
    load_entry_points()


_load = load_all  # the name the reproductions (and older code) call


# ------------------------------------------------------------------------------ the index
#: the module holding the generated index (a dict ``INDEX``)
INDEX_MODULE = "exactq.catalogue_index"
#: [index or None, status]: the index once checked against the installed sources
_INDEX_STATE: list = []


def _package_dir(package: str) -> str:
    import os

    mod = importlib.import_module(package)
    return os.path.dirname(os.path.abspath(mod.__file__))


def _source_digests() -> dict[str, str]:
    """``{"models/jsq.py": sha256 prefix, ...}`` of the sources the index is generated from."""
    import hashlib
    import os

    out = {}
    for package, label in (("exactq.models", "models"), ("exactq.solvers", "solvers")):
        folder = _package_dir(package)
        for fname in sorted(os.listdir(folder)):
            if fname.endswith(".py"):
                with open(os.path.join(folder, fname), "rb") as fh:
                    out[f"{label}/{fname}"] = hashlib.sha256(fh.read()).hexdigest()[:16]
    here = os.path.dirname(os.path.abspath(__file__))
    for fname in ("catalogue.py", "params.py", "method_table.py", "protocol.py"):
        with open(os.path.join(here, fname), "rb") as fh:
            out[f"exactq/{fname}"] = hashlib.sha256(fh.read()).hexdigest()[:16]
    return out


def _builtin_index() -> dict | None:
    """The committed index when it was generated from the installed sources, else ``None``."""
    if _INDEX_STATE:
        return _INDEX_STATE[0]
    try:
        index = importlib.import_module(INDEX_MODULE).INDEX
    except (ImportError, AttributeError):
        _INDEX_STATE[:] = [None, "missing"]
        return None
    try:
        digests = _source_digests()
    except OSError as exc:  # sources not installed (bytecode only): import everything instead
        _INDEX_STATE[:] = [None, f"stale: the sources cannot be read ({exc})"]
        return None
    if index.get("sources") != digests:
        old = index.get("sources", {})
        changed = sorted(k for k in set(old) | set(digests) if old.get(k) != digests.get(k))
        _INDEX_STATE[:] = [None, f"stale: {', '.join(changed)} changed since the index was generated"]
        return None
    _INDEX_STATE[:] = [index, "fresh"]
    return index


def index_status() -> str:
    """``"fresh"``, ``"missing"`` or ``"stale: <the files that changed>"`` (the index's state)."""
    _builtin_index()
    return _INDEX_STATE[1]


def _installed_name(module: str) -> str:
    """``solvers.qbd`` (a second copy, as ``pytest --doctest-modules solvers`` imports it) -> ``exactq.solvers.qbd``."""
    head = module.split(".", 1)[0]
    return f"exactq.{module}" if head in ("models", "solvers") else module


@functools.lru_cache(maxsize=None)
def _builtin_dirs() -> tuple[str, ...]:
    import os

    return tuple(os.path.join(_package_dir(p), "") for p in ("exactq", "exactq.models", "exactq.solvers"))


def _is_builtin(obj: Any) -> bool:
    """Whether a class or function is defined in exactq's own files (not a plug-in's)."""
    import os

    mod = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(mod, "__file__", None)
    return bool(path) and os.path.abspath(path).startswith(_builtin_dirs())


def _type_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _collect_index() -> dict:
    """The index of this process's built-in registrations (call in a fresh process: :func:`build_index`)."""
    _INDEX_STATE[:] = [None, "collecting"]  # describe from the registrations, not from an older index
    _load_builtin()
    if LOAD_ERRORS:
        raise RuntimeError(f"cannot index a catalogue with modules that fail to load: {LOAD_ERRORS}")
    models = {}
    for name in sorted(_MODELS):
        cls = _MODELS[name]
        if _is_builtin(cls):
            models[name] = {"module": _installed_name(cls.__module__), "describe": _describe(cls)}
    methods = {name: [{"requires": s.requires, "module": _installed_name(s.module), "options": list(s.options)}
                      for s in specs if s.module and _installed_name(s.module).startswith("exactq.")]
               for name, specs in sorted(_METHODS.items())}
    solvers = {_type_key(rep): [[s.name, _installed_name(s.fn.__module__)] for s in specs if _is_builtin(s.fn)]
               for rep, specs in sorted(_SOLVERS.items(), key=lambda kv: _type_key(kv[0]))}
    certifiers = {_type_key(rep): _installed_name(fn.__module__)
                  for rep, (fn, _) in sorted(_CERTIFIERS.items(), key=lambda kv: _type_key(kv[0])) if _is_builtin(fn)}
    return {"sources": _source_digests(), "models": models,
            "methods": {k: v for k, v in methods.items() if v},
            "solvers": {k: v for k, v in solvers.items() if v}, "certifiers": certifiers}


def build_index() -> dict:
    """The index of the installed sources, generated in a fresh interpreter.

    A fresh process imports every built-in module in the catalogue's own order (the
    solvers, then the models, each package in sorted order), so the order of the
    registrations it records (which the catalogue keeps) does not depend on what this
    process imported before.
    """
    import json
    import os
    import subprocess

    root = os.path.dirname(_package_dir("exactq"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    code = "import json, exactq.catalogue as c; print(json.dumps(c._collect_index()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"generating the catalogue index failed:\n{out.stderr}")
    return json.loads(out.stdout)


_INDEX_HEADER = '''"""The catalogue's index of the built-in models, methods, solvers and certificates (generated).

Do not edit: regenerate with ``python -m exactq.catalogue_index`` after changing a
module of ``models/`` or ``solvers/`` (``tests/core/test_startup.py`` fails until
then, and the catalogue ignores an index whose ``sources`` digests do not match the
installed files). See :mod:`exactq.catalogue`.
"""

# fmt: off
'''

_INDEX_FOOTER = '''
# fmt: on

if __name__ == "__main__":  # python -m exactq.catalogue_index: regenerate this file
    from exactq.catalogue import write_index

    print(write_index())
'''


def index_source(index: dict) -> str:
    """The text of :mod:`exactq.catalogue_index` for ``index``."""
    import pprint

    return _INDEX_HEADER + "INDEX = " + pprint.pformat(index, width=118, sort_dicts=False) + "\n" + _INDEX_FOOTER


def write_index(path: str | None = None) -> str:
    """Regenerate the index file (default: beside this module); return its path."""
    import os

    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogue_index.py")
    text = index_source(build_index())
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    _INDEX_STATE.clear()
    sys.modules.pop(INDEX_MODULE, None)
    return path


def _ensure(modules) -> None:
    """Import the built-in modules named (each once; a failure is recorded in LOAD_ERRORS)."""
    for mod in modules:
        if mod not in sys.modules and mod not in LOAD_ERRORS:
            _import_guarded(mod)


def _ranked(specs, order: list[str], key: Callable[[Any], str]) -> list:
    """``specs`` in the index's order (``order``: names); others (plug-ins') after, as registered."""
    rank = {name: k for k, name in enumerate(order)}
    return sorted(specs, key=lambda s: rank.get(key(s), len(rank)))


# ---------------------------------------------------------------------------- plug-ins
#: the entry-point group of users' plug-in models (a module, a Model subclass or a function)
ENTRY_POINT_GROUP = "exactq.models"


def load_entry_points(group: str = ENTRY_POINT_GROUP, *, names=None, warn: bool = True) -> None:
    """Load the plug-in models installed under the ``exactq.models`` entry points (see :mod:`exactq.plugins`)."""
    from .plugins import load_entry_points as _load_eps

    _load_eps(group, names=names, warn=warn)


# ------------------------------------------------------------------------------ look-ups
def get_model(name: str) -> type:
    """The model class registered as ``name`` (``ModelError`` naming the valid ones).

    A built-in model's module is imported when it is named; a name that is not built
    in loads the plug-in of that name (an entry point), then every plug-in.
    """
    idx = _builtin_index()
    if idx is None:
        _load_builtin()
    elif name in idx["models"]:
        _ensure([idx["models"][name]["module"]])
    if name in _MODELS:
        return _MODELS[name]
    from . import plugins

    plugins.load_entry_points(names=[name], warn=False)
    if name not in _MODELS:
        plugins.load_entry_points(warn=False)
    if name in _MODELS:
        return _MODELS[name]
    available = sorted(set(_MODELS) | set(idx["models"] if idx else ()))
    failed = plugins.failure_of(name)
    if failed:
        raise plugins.PluginError(f"plug-in {name}: {failed}")
    mod = idx["models"][name]["module"] if idx and name in idx["models"] else name.replace("-", "_")
    failed = [f"{m} ({err})" for m, err in LOAD_ERRORS.items() if m == mod or m.rsplit(".", 1)[-1] == mod]
    if failed:  # a model may be unknown only because its module failed to import: say so, with the cause
        raise ModelError(f"model {name!r} is not available: module {'; '.join(failed)} failed to load; "
                         f"available: {', '.join(available) or '(none)'}")
    unavailable = plugins.unavailable()
    tail = f" (plug-ins that failed to load: {', '.join(unavailable)})" if unavailable else ""
    raise ModelError(f"unknown model {name!r}; valid: {', '.join(available)}{tail}")


def get_method(name: str) -> list[MethodSpec]:
    """The implementations registered under ``name`` (one per representation), in the index's order."""
    idx = _builtin_index()
    if idx is None:
        load_solvers()
        entries = []
    else:
        entries = idx["methods"].get(name, [])
        _ensure(dict.fromkeys(e["module"] for e in entries))
    if name not in _METHODS:
        raise ModelError(f"unknown method {name!r}; valid: {', '.join(method_names())}") from None
    return _ranked(_METHODS[name], [e["requires"] for e in entries], lambda s: s.requires)


def is_builtin_model(name: str) -> bool:
    """Whether ``name`` is a built-in model's, by the index (``False`` when the index is not fresh)."""
    idx = _builtin_index()
    return idx is not None and name in idx["models"]


def model_names() -> list[str]:
    """Every model's name: the built-in ones and the plug-ins'."""
    idx = _builtin_index()
    if idx is None:
        load_all()
        return sorted(_MODELS)
    load_entry_points()
    return sorted(set(idx["models"]) | set(_MODELS))


def method_names() -> list[str]:
    idx = _builtin_index()
    if idx is None:
        load_solvers()
        return sorted(_METHODS)
    return sorted(set(idx["methods"]) | set(_METHODS))


def _method_meta(name: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(requires, options)`` of each implementation of method ``name``, without importing it."""
    idx = _builtin_index()
    out = [(e["requires"], tuple(e["options"])) for e in (idx["methods"].get(name, []) if idx else [])]
    known = {r for r, _ in out}
    out += [(s.requires, s.options) for s in _METHODS.get(name, ()) if s.requires not in known]
    return out


def _method_options(cls: type) -> dict:
    """Options beyond tol/truncation/verify/strict of each method the class offers."""
    common = ("tol", "truncation", "verify", "strict")
    out = {}
    for name in cls.methods:
        opts = [o for requires, options in _method_meta(name) if callable(getattr(cls, requires, None))
                for o in options if o not in common]
        if opts:
            out[name] = list(dict.fromkeys(opts))
    return out


def _describe(cls: type) -> dict:
    return {
        "name": cls.name,
        "summary": cls.summary,
        "reference": cls.reference,
        "parameters": [p.describe() for p in cls.parameters],
        "measures": dict(cls.measures),
        "default_measure": cls.default_measure,
        "methods": list(cls.methods),
        "method_options": _method_options(cls),
    }


def describe_models() -> list[dict]:
    """Everything ``exactq models`` prints: parameters, measures, methods per model.

    Built-in models are described from the index (nothing is imported); plug-ins are
    loaded and described from their classes.
    """
    import copy

    idx = _builtin_index()
    if idx is None:
        load_all()
        return [_describe(_MODELS[name]) for name in sorted(_MODELS)]
    load_entry_points()
    out = {name: copy.deepcopy(entry["describe"]) for name, entry in idx["models"].items()}
    for name, cls in _MODELS.items():
        if name not in out:
            out[name] = _describe(cls)
    return [out[name] for name in sorted(out)]


def check_method_for(model: Model, method: str) -> MethodSpec:
    """The spec of ``method`` if ``model`` offers it, else ``NotApplicableError``."""
    specs = [s for s in get_method(method) if s.applies_to(model)]
    if method not in type(model).methods or not specs:
        raise NotApplicableError(
            f"method {method!r} does not apply to model {model.name}; "
            f"valid: {', '.join(type(model).methods)}"
        )
    return specs[0]
