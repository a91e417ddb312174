"""The model protocol: what a model offers each method, declared once and checked at registration.

A method (``--method ctmc``) runs one of the generic drivers of :mod:`exactq.methods`
over a *representation* the model describes itself by. What the driver needs from the
model for that representation is a :class:`Protocol`: a table of typed
:class:`Member` declarations, each with its *role* (what the driver calls it:
``build``, ``measure``, ``size``, ``start``, ...), the model attribute that plays it,
its signature, and whether it is required, optional, or required only when the model
can be infinite. :data:`PROTOCOLS` holds the built-in ones by name (the name of the
representation factory, ``"ctmc"``, ``"qbd"``, ...); :func:`register_protocol` adds a
plug-in's.

:func:`exactq.catalogue.register_model` checks a model class against the protocols of
the methods it claims (:func:`check_model`): a missing member is one line naming the
model, the method and the member with its signature, when the class is registered,
never an ``AttributeError`` at solve time. The drivers never look a hook up by a
name of their own: they call :meth:`Protocol.bind`, which resolves the declared
members of one model into a :class:`Hooks` object (``hooks.build(level)``,
``hooks.measure(measure, rep, solution)``, ``hooks.size``, ``hooks.start``, ...).

Members every model has, with their defaults, are declared on
:class:`~exactq.catalogue.Model` itself (:data:`MODEL_MEMBERS`): ``is_infinite``,
``intrinsic_measure``, ``delegate``, ``auto_method``.

Examples
--------
>>> p = PROTOCOLS["ctmc"]
>>> [m.name for m in p.members if m.need == "required"]
['ctmc', 'ctmc_measure']
>>> from dataclasses import dataclass
>>> from exactq.catalogue import Model
>>> @dataclass(frozen=True)
... class Half(Model):
...     name = "half"
...     methods = ("ctmc",)
...     def ctmc(self, truncation=None): ...
>>> [m.name for m in p.missing(Half)]
['ctmc_measure']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Member", "Protocol", "Hooks", "PROTOCOLS", "MODEL_MEMBERS", "register_protocol", "get_protocol",
           "check_model", "members_of", "NEEDS", "contract_table", "write_contract"]

#: how much a member is needed: always, never (a default applies), when the model can be infinite, or together
#: with the variant's factory (a lumped chain's members come with ``lumped_ctmc``)
NEEDS = ("required", "optional", "if infinite", "with variant")


@dataclass(frozen=True)
class Member:
    """One declared member of a protocol.

    Attributes
    ----------
    role : str
        What the driver calls it: ``build`` (the representation factory), ``measure``
        (solution -> the measure's value), ``size`` (states of a level, predicted),
        ``start`` (the first truncation level for ``tol``), ``infinite`` (whether the
        representation is truncated and grown), ``functional`` (the measure as a linear
        functional, for ``certify``), ``parameter`` (the model's fixed comparison
        parameter), ``applies`` (whether a variant applies to a measure).
    name : str
        The model attribute that plays the role.
    signature : str
        Its call signature (or type, for an attribute), as the docs print it.
    doc : str
        One line.
    need : str
        One of :data:`NEEDS`.
    kind : {"method", "attribute"}
        A callable, or a value (``is_infinite`` may be a property).
    default : object
        The value of an absent optional attribute (methods: ``None``, i.e. not offered).
    """

    role: str
    name: str
    signature: str
    doc: str
    need: str = "required"
    kind: str = "method"
    default: Any = None

    def __post_init__(self):
        if self.need not in NEEDS:
            raise ValueError(f"member {self.name}: need must be one of {', '.join(NEEDS)}; got {self.need!r}")
        if self.kind not in ("method", "attribute"):
            raise ValueError(f"member {self.name}: kind must be 'method' or 'attribute'; got {self.kind!r}")

    @property
    def declaration(self) -> str:
        """``ctmc(truncation=None) -> CTMC`` or ``is_infinite: bool``."""
        return f"{self.name}{self.signature}" if self.kind == "method" else f"{self.name}: {self.signature}"

    def present(self, cls: type) -> bool:
        value = getattr(cls, self.name, None)
        return callable(value) if self.kind == "method" else hasattr(cls, self.name)


@dataclass
class Hooks:
    """A model's members resolved for one protocol: what a driver calls (absent optional members are ``None``)."""

    protocol: "Protocol"
    build: Callable[..., Any]
    measure: Callable[..., Any] | None = None
    size: Callable[..., Any] | None = None
    start: Callable[[float], int] | None = None
    infinite: bool = False
    functional: Callable[..., Any] | None = None
    parameter: Any = None
    applies: Callable[[str], bool] | None = None
    #: the variant's hooks (a lumped chain), when the model offers it
    variant: "Hooks | None" = None


@dataclass(frozen=True)
class Protocol:
    """What a representation's methods need from a model: a table of :class:`Member`.

    ``name`` is the representation's name (that of its factory); ``driver`` the driver
    of :mod:`exactq.methods` that uses it; ``variant`` an optional second protocol the
    driver may use instead (the lumped chain of identical servers), chosen per measure
    by the variant's ``applies`` member.
    """

    name: str
    driver: str
    doc: str
    members: tuple[Member, ...]
    variant: "Protocol | None" = None
    #: the representation type the factory returns (``module.Class``), whose registered solvers solve it;
    #: empty for a model that orchestrates its own solves
    representation: str = ""

    def __post_init__(self):
        roles = [m.role for m in self.members]
        if roles.count("build") != 1:
            raise ValueError(f"protocol {self.name}: exactly one member must have the role 'build'")
        if len(set(roles)) != len(roles):
            raise ValueError(f"protocol {self.name}: a role is declared twice")

    @property
    def factory(self) -> Member:
        """The member that builds the representation."""
        return next(m for m in self.members if m.role == "build")

    def member(self, role: str) -> Member | None:
        return next((m for m in self.members if m.role == role), None)

    def offered_by(self, cls_or_model: Any) -> bool:
        """Whether a model (class or instance) has this protocol's factory."""
        return self.factory.present(cls_or_model if isinstance(cls_or_model, type) else type(cls_or_model))

    def _can_be_infinite(self, cls: type) -> bool:
        flag = self.member("infinite")
        if flag is None:
            return False
        value = getattr(cls, flag.name, flag.default)
        return value is not False and value is not None  # a property, or True: the model may be infinite

    def missing(self, cls: type) -> list[Member]:
        """The members ``cls`` lacks (the variant's too, when ``cls`` has the variant's factory)."""
        out = []
        for m in self.members:
            if m.present(cls):
                continue
            if m.need == "required" or (m.need == "if infinite" and self._can_be_infinite(cls)):
                out.append(m)
        if self.variant is not None and self.variant.offered_by(cls):
            out += [m for m in self.variant.members if m.need in ("required", "with variant") and not m.present(cls)]
        return out

    def bind(self, model: Any) -> Hooks:
        """The model's members for this protocol (its variant's too, when offered)."""
        hooks = Hooks(self, build=self._get(model, self.factory))
        for m in self.members:
            if m.role != "build":
                setattr(hooks, m.role, self._get(model, m))
        hooks.infinite = bool(hooks.infinite)
        if self.variant is not None and self.variant.offered_by(model):
            hooks.variant = self.variant.bind(model)
        return hooks

    @staticmethod
    def _get(model: Any, m: Member) -> Any:
        # the one place a member is read, by its declared name
        return getattr(model, m.name, m.default)


def _m(role, name, signature, doc, need="required", kind="method", default=None) -> Member:
    return Member(role, name, signature, doc, need, kind, default)


def _chain_protocol(name: str, rep: str, *, variant: Protocol | None = None, functional: bool = True,
                    representation: str = "") -> Protocol:
    members = [
        _m("build", name, "(truncation: int | None = None)",
           f"the {rep}, truncated at the level (None: a finite model)"),
        _m("measure", f"{name}_measure", "(measure, chain, solution) -> value or Estimate",
           "the measure from the stationary solution"),
        _m("infinite", "is_infinite", "bool", "whether the chain is truncated (and the truncation grown)",
           need="optional", kind="attribute", default=False),
        _m("start", "truncation_start", "(tol: float) -> int", "the first truncation level for tol",
           need="if infinite"),
        _m("size", f"{name}_size", "(truncation) -> int", "the states of a level (predicted before it is built)",
           need="optional"),
    ]
    if functional:
        members.append(_m("functional", f"{name}_functional", "(measure, chain) -> (f, g) or None",
                          "the measure as (f . pi) / (g . pi), for certify", need="optional"))
    return Protocol(name, "adaptive", f"a {rep} grown by the truncation driver", tuple(members), variant,
                    representation)


_LUMPED = Protocol("lumped_ctmc", "adaptive", "an exactly lumped CTMC (identical servers), used per measure",
                   representation="exactq.ctmc.CTMC", members=(
    _m("build", "lumped_ctmc", "(truncation: int | None = None)", "the lumped chain"),
    _m("measure", "lumped_measure", "(measure, chain, solution) -> value or Estimate",
       "the measure on the lumped chain", need="with variant"),
    _m("applies", "lumps", "(measure) -> bool", "whether the lumped chain gives this measure", need="with variant"),
    _m("size", "lumped_size", "(truncation) -> int", "the states of a lumped level", need="optional"),
    _m("functional", "lumped_functional", "(measure, chain) -> (f, g) or None", "certify on the lumped chain",
       need="optional"),
))


def _single(name: str, rep: str, representation: str) -> Protocol:
    return Protocol(name, "single", f"one {rep}, solved once", (
        _m("build", name, "()", f"the {rep}"),
        _m("measure", f"{name}_measure", "(measure, representation, solution) -> value or Estimate",
           "the measure from the solution"),
    ), representation=representation)


def _orchestrated(name: str, signature: str, doc: str) -> Protocol:
    return Protocol(name, "model", doc, (_m("build", name, signature, "the model orchestrates its own solves"),))


#: the built-in protocols, by name
PROTOCOLS: dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> Protocol:
    """Declare a protocol (a plug-in's representation); the same declaration twice is one."""
    old = PROTOCOLS.get(protocol.name)
    if old is not None and old != protocol:
        raise ValueError(f"protocol {protocol.name!r} declared twice, differently")
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str | Protocol) -> Protocol:
    """The protocol of a representation factory (``ValueError`` naming the declared ones)."""
    if isinstance(name, Protocol):
        return name
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"no protocol is declared for the representation {name!r}; declared: "
                         f"{', '.join(sorted(PROTOCOLS))} (exactq.protocol.register_protocol)") from None


for _p in (
    _chain_protocol("ctmc", "CTMC", variant=_LUMPED, representation="exactq.ctmc.CTMC"),
    _chain_protocol("dtmc", "DTMC", functional=False, representation="exactq.ctmc.DTMC"),
    Protocol("qbd", "adaptive", "a QBD, exact in the level; its phase truncated and grown where the model has one", (
        _m("build", "qbd", "(width: int | None = None) -> QBD", "the QBD (width: the phase truncation)"),
        _m("measure", "qbd_measure", "(measure, qbd, solution) -> value or Estimate", "the measure from the solution"),
        _m("infinite", "qbd_truncated", "bool", "whether the phase is truncated (and grown)", need="optional",
           kind="attribute", default=False),
        _m("start", "qbd_start", "(tol: float) -> int", "the first phase truncation for tol", need="if infinite"),
        _m("size", "qbd_size", "(width) -> int", "phases per level at a width", need="optional"),
    ), representation="exactq.representations.qbd.QBD"),
    Protocol("level_chain", "adaptive", "a CTMC on a kept set the model fits from the previous level", (
        _m("build", "level_chain", "(level=None, previous=None, *, cost_bound=None) -> CTMC",
           "the chain of the next kept set (from the previous level's chain and solution)"),
        _m("measure", "level_chain_measure", "(measure, chain, solution) -> value or Estimate",
           "the measure from the stationary solution"),
        _m("infinite", "is_infinite", "bool", "whether the kept set is truncated (and grown)", need="optional",
           kind="attribute", default=False),
        _m("functional", "level_chain_functional", "(measure, chain) -> (f, g) or None", "certify", need="optional"),
    ), representation="exactq.ctmc.CTMC"),
    _single("quarter_plane", "QuarterPlaneWalk", "exactq.representations.walk.QuarterPlaneWalk"),
    _single("population", "Population", "exactq.representations.population.Population"),
    _single("pdmp", "PDMP", "exactq.representations.pdmp.PDMP"),
    _single("renewal_queue", "RenewalQueue", "exactq.representations.qbd.RenewalQueue"),
    Protocol("threshold_bracket", "bracket", "comparison systems whose measures bound the model's", (
        _m("build", "threshold_bracket", "(measure, threshold: int | None) -> Bracket",
           "the comparison systems at a threshold (None: the model's first)"),
        _m("measure", "threshold_bracket_measure", "(measure, bracket, solution) -> Estimate",
           "lower and upper bounds from the solved systems"),
        _m("parameter", "threshold", "int | None", "a fixed threshold (None: grown until the width is below tol)",
           need="optional", kind="attribute"),
    ), representation="exactq.representations.bracket.Bracket"),
    _orchestrated("closed_form", "(measure) -> value or Estimate", "the model's closed-form expressions"),
    _orchestrated("asymptotic", "(measure, context) -> value or Estimate", "large-parameter approximations"),
    _orchestrated("finite_bounds", "(measure, context) -> Result", "bounds the model assembles from several solves"),
    _orchestrated("fluid", "(measure, context) -> Result", "the fluid limit the model assembles"),
    _orchestrated("routing", "(measure, context) -> Result", "routing problems the model assembles"),
    _orchestrated("qbd_study", "(measure, context) -> Result", "QBDs the model describes itself by, orchestrated"),
    _orchestrated("optimal", "(measure, context) -> Result", "the model's MDP (or its growing truncations), solved "
                  "to an optimal policy with bounds on its value"),
    _orchestrated("ctmc_study", "(measure, context) -> Result", "chains the model orchestrates (stationary or "
                  "transient by measure)"),
):
    register_protocol(_p)


#: the members every model has (declared on :class:`~exactq.catalogue.Model` with these defaults)
MODEL_MEMBERS: tuple[Member, ...] = (
    _m("infinite", "is_infinite", "bool", "whether the model is infinite (its chains are truncated); default False",
       need="optional", kind="attribute", default=False),
    _m("intrinsic", "intrinsic_measure", "(measure) -> value, Estimate or None",
       "a measure answered without a solve (a stability limit); default None", need="optional"),
    _m("delegate", "delegate", "(method) -> str or None",
       "another method that answers this one for the model; default None", need="optional"),
    _m("auto", "auto_method", "() -> str", "the method of --method auto; default the first of methods",
       need="optional"),
)


def members_of(protocol: Protocol) -> list[Member]:
    """The protocol's members and its variant's (for the docs' contract table)."""
    return list(protocol.members) + (list(protocol.variant.members) if protocol.variant is not None else [])


def check_model(cls: type, method: str, protocols: list[Protocol]) -> str | None:
    """Why ``cls`` cannot offer ``method`` (one line, without the model's name), or ``None`` when it can.

    ``protocols`` are those of the method's implementations: the class must have the
    factory of one of them, and every member that protocol requires of it.

    Examples
    --------
    >>> class Bare:
    ...     name = "bare"
    >>> check_model(Bare, "analytic", [PROTOCOLS["pdmp"]])
    "method 'analytic' needs one of its representations: pdmp()"
    """
    offered = [p for p in protocols if p.offered_by(cls)]
    if not offered:
        wants = " or ".join(p.factory.declaration for p in protocols) or "(no implementation)"
        return f"method {method!r} needs one of its representations: {wants}"
    for p in offered:
        if not p.missing(cls):
            return None
    p = offered[0]
    lack = p.missing(cls)
    names = ", ".join(m.declaration for m in lack)
    return (f"method {method!r} through {p.factory.name}() needs {'the member' if len(lack) == 1 else 'the members'} "
            f"{names}")


# ------------------------------------------------------------------------------ the contract table
#: the markers of the generated table in docs/architecture.md
CONTRACT_BEGIN = "<!-- contract table: generated from the registry by exactq.protocol.contract_table; do not edit -->"
CONTRACT_END = "<!-- end of the contract table -->"


def _code(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _members_text(protocol: Protocol, lumpable: bool) -> str:
    required = [m.name for m in protocol.members if m.need == "required"]
    infinite = [m.name for m in protocol.members if m.need == "if infinite"]
    optional = [m.name for m in protocol.members if m.need == "optional"]
    parts = [_code(required)]
    if infinite:
        parts.append(f"if infinite: {_code(infinite)}")
    if optional:
        parts.append(f"optional: {_code(optional)}")
    v = protocol.variant
    if lumpable and v is not None:
        parts.append(f"lumped variant: {_code(m.name for m in v.members if m.need != 'optional')} "
                     f"(optional {_code(m.name for m in v.members if m.need == 'optional')})")
    return "; ".join(parts)


def _type(path: str):
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def contract_table() -> str:
    """The contract of exactq's own methods, as the Markdown table of ``docs/architecture.md``.

    One row per implementation of a method: the driver, the representation, the model
    members its protocol needs, and the solvers that accept the representation with
    their priorities (in the order the dispatch tries them), or the one the method
    fixes. Built from the
    registrations (every built-in model and solver module is imported), so the page
    cannot drift from the code: ``tests/core/test_protocol.py`` compares the two, and
    :func:`write_contract` rewrites the page's table.
    """
    from . import catalogue

    catalogue._load_builtin()
    lines = ["| method | driver | representation | the model's members (exactq.protocol) | solvers |",
             "|---|---|---|---|---|"]
    for name in sorted(catalogue._METHODS):
        for spec in catalogue.get_method(name):
            if not catalogue._installed_name(spec.module).startswith("exactq."):
                continue  # a plug-in's method
            p = spec.protocol
            if p.representation:
                rep_type = _type(p.representation)
                rep = f"`{rep_type.__name__}`"
                fixed = spec.setting("solver")
                solvers = [s for s in catalogue.solvers_of(rep_type) if catalogue._is_builtin(s.fn)]
                solver_text = f"`{fixed}` (the method's)" if fixed else \
                    ", ".join(f"`{s.name}` ({s.priority})" for s in solvers)
            else:
                fixed = spec.setting("solver")
                rep = "the model's own"
                solver_text = "the model's `context.solve`" + (f" (by default `{fixed}`)" if fixed else "")
            members = _members_text(p, bool(spec.setting("lumpable")))
            lines.append(f"| `{name}` | {spec.driver} | {rep} (`{p.name}`) | {members} | {solver_text} |")
    return "\n".join(lines) + "\n"


def write_contract(path: str) -> bool:
    """Rewrite the generated table of a page (between its markers); ``True`` when it changed."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    head, sep, rest = text.partition(CONTRACT_BEGIN)
    _, sep2, tail = rest.partition(CONTRACT_END)
    if not sep or not sep2:
        raise ValueError(f"{path} has no contract table markers ({CONTRACT_BEGIN!r} ... {CONTRACT_END!r})")
    new = f"{head}{CONTRACT_BEGIN}\n{contract_table()}{CONTRACT_END}{tail}"
    if new != text:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(new)
    return new != text


if __name__ == "__main__":  # python -m exactq.protocol PAGE: rewrite the page's contract table
    import sys

    for page in sys.argv[1:]:
        print(f"{page}: {'rewritten' if write_contract(page) else 'up to date'}")
