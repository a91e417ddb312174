"""Models given by one finite chain: PRISM files and PRISM explicit files.

:func:`load_prism` reads a PRISM model file and returns a model that offers its chain
as a representation (``ctmc()`` for ``ctmc`` files, ``dtmc()`` for ``dtmc`` files), so
that every CTMC method, ``verify`` and the stationary solvers apply to it
(:func:`exactq.solve`); its measures are the long-run reward rate of each reward
structure (``reward:NAME``) and the long-run probability of each label
(``label:NAME``). :func:`exactq.check` checks PRISM properties on it. The parsed file
(or, for explicit files, the chain read) is a field of the model, not an attribute of
its class.

Plug-in models (``exactq.register_model``) are registered by :mod:`exactq.plugins`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from exactq.catalogue import Model
from exactq.ctmc import DTMC
from exactq.errors import ModelError
from exactq.plugins import _CTMCFactory, _DTMCFactory  # a chain model's factories, shared with function plug-ins

from .lexer import PrismModelError, Source, read_source
from .semantics import Symbols, VarInfo, analyse
from .syntax import parse_model_text

__all__ = ["ChainModel", "PrismModel", "ExplicitModel", "load_prism", "load_explicit", "parse_constants",
           "is_prism_path", "constant_ranges", "expand_ranges", "describe_prism"]

PRISM_SUFFIXES = (".sm", ".prism", ".pm", ".nm", ".smg")
#: a chain's explicit files (exactq export): PRISM's transitions, Matrix Market
EXPLICIT_SUFFIXES = (".tra", ".mtx")


def is_prism_path(text: str) -> bool:
    """Whether a command-line model argument names a PRISM file (by suffix, or an existing file)."""
    return text.endswith(PRISM_SUFFIXES) or text.endswith(EXPLICIT_SUFFIXES) or os.path.isfile(text)


def parse_constants(constants) -> dict:
    """``"N=3,T=10"`` (or a mapping, or None) as a dict of strings or values."""
    if constants is None:
        return {}
    if isinstance(constants, dict):
        return dict(constants)
    out: dict = {}
    items = constants if isinstance(constants, (list, tuple)) else [constants]
    for chunk in items:
        for item in str(chunk).split(","):
            item = item.strip()
            if not item:
                continue
            name, eq, value = item.partition("=")
            if not eq or not name.strip().isidentifier():
                raise ModelError(f"--const must look like NAME=VALUE,NAME=VALUE; got {item!r}")
            if name.strip() in out:
                raise ModelError(f"--const gives {name.strip()} twice")
            out[name.strip()] = value.strip()
    return out


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def constant_ranges(constants) -> tuple[dict, dict]:
    """Split ``--const`` values into single values and PRISM experiment ranges.

    A range is ``lo:step:hi`` or ``lo:hi`` (step 1), as PRISM's ``-const``; its values
    are ``lo, lo+step, ...`` up to ``hi`` (within a relative ``1e-12``), integers when
    ``lo``, ``step`` and ``hi`` are.

    Returns
    -------
    (dict, dict)
        ``name -> value`` of the single values, and ``name -> list of values`` of the
        ranges (in the order given).

    Raises
    ------
    ModelError
        For a malformed range, a step that is not positive, ``lo > hi``, or a range
        too long for the memory budget.

    Examples
    --------
    >>> constant_ranges("N=2:4,T=0:0.5:1,K=3")
    ({'K': '3'}, {'N': [2, 3, 4], 'T': [0.0, 0.5, 1.0]})
    """
    import re

    from exactq.budget import require_memory

    single, ranges = {}, {}
    for name, raw in parse_constants(constants).items():
        text = str(raw).strip()
        if ":" not in text:
            single[name] = raw
            continue
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(re.fullmatch(_NUMBER, p.strip()) for p in parts):
            raise ModelError(f"--const {name}={text}: a range must look like lo:step:hi or lo:hi (numbers)")
        nums = [p.strip() for p in parts]
        lo, hi = nums[0], nums[-1]
        step = nums[1] if len(nums) == 3 else "1"
        integral = all(re.fullmatch(r"[-+]?\d+", v) for v in (lo, step, hi))
        conv = int if integral else float
        a, d, b = conv(lo), conv(step), conv(hi)
        if not all(math.isfinite(float(v)) for v in (a, d, b)):
            raise ModelError(f"--const {name}={text}: the range's ends and step must be finite")
        if d <= 0:
            raise ModelError(f"--const {name}={text}: the step of a range must be > 0; got {step}")
        if a > b:
            raise ModelError(f"--const {name}={text}: the range is empty (lo {lo} > hi {hi})")
        count = int(math.floor((b - a) / d * (1 + 1e-12) + 1e-12)) + 1
        require_memory(count * 64.0, f"--const {name}={text} ({count} values)")
        values = [a + k * d for k in range(count)] if integral else [float(a + k * d) for k in range(count)]
        ranges[name] = values
    return single, ranges


def expand_ranges(ranges: dict):
    """Every combination of the ranges' values (the last name varies fastest), as dicts."""
    import itertools

    names = list(ranges)
    for combo in itertools.product(*(ranges[n] for n in names)):
        yield dict(zip(names, combo))


# ============================================================================ chain models
@dataclass
class Built:
    """A chain with its reward structures and how long it took to build."""

    chain: Any
    rewards: dict
    n_transitions: int
    build_seconds: float
    n_deadlocks: int = 0


class ChainModel(Model):
    """A model given by one finite chain (see the module docstring).

    Subclasses implement :meth:`_build` returning a :class:`Built`.
    """

    chain_model: ClassVar[bool] = True
    #: properties are read in PRISM's syntax (exactq.check)
    prism_properties: ClassVar[bool] = False
    kind: ClassVar[str] = "ctmc"

    def _build(self) -> Built:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @cached_property
    def built(self) -> Built:
        return self._build()

    def _value(self, measure: str, chain, sol) -> float:
        what, _, name = measure.partition(":")
        if what == "reward":
            rs = self.built.rewards[name]
            return sol.expect(rs.rate())
        if what == "label":
            return sol.probability(chain.labels[name])
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover (validated by the API)


def _measures(reward_names, label_names) -> tuple[dict, str]:
    measures = {}
    for r in reward_names:
        measures[f"reward:{r}"] = f'long-run reward rate of structure "{r}" (R{{"{r}"}}=? [ S ])'
    for name in label_names:
        measures[f"label:{name}"] = f'long-run probability of label "{name}" (S=? [ "{name}" ])'
    default = next(iter(measures), "")
    return measures, default


def _chain_class(base: type, name: str, kind: str, measures: dict, default: str, summary: str) -> type:
    """The model class of one file: ``base`` (a frozen dataclass) with the file's name, measures and methods as
    class attributes.

    It adds no field, so it is not run through ``dataclass`` again: it inherits ``base``'s ``__init__``,
    ``__eq__``, ``__hash__`` and ``__repr__`` (which read the instance's own class), and blocks every assignment
    itself (``base``'s frozen ``__setattr__`` blocks only its fields on a subclass). ``dataclass`` would generate
    those five methods again by ``exec`` for every file loaded: 1.0-1.4 ms of a 5.6 ms ``load_prism``.
    """
    attrs = {"name": name, "summary": summary, "kind": kind, "__module__": __name__,
             "__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr}
    if kind == "mdp":  # an MDP file: its properties are checked (exactq check); it offers no chain to solve
        attrs.update(measures={}, default_measure="", methods=(), auto_method=_mdp_not_solved)
        return type(f"{base.__name__}_{_ident(name)}", (base,), attrs)
    mixin = _CTMCFactory if kind == "ctmc" else _DTMCFactory
    attrs.update(measures=measures, default_measure=default, methods=("ctmc",) if kind == "ctmc" else ("dtmc",))
    return type(f"{base.__name__}_{_ident(name)}", (mixin, base), attrs)


def _frozen_setattr(self, name, value):
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _mdp_not_solved(self):
    from exactq.errors import NotApplicableError

    raise NotApplicableError(f"{self.path or self.name} is an mdp: its values depend on the scheduler, so it is "
                             "checked, not solved; ask e.g. exactq check FILE 'Pmax=? [ F \"goal\" ]'")


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


# ------------------------------------------------------------------------- PRISM files
@dataclass(frozen=True)
class PrismModel(ChainModel):
    """A PRISM model file with values for its undefined constants (built on first use)."""

    prism_properties: ClassVar[bool] = True
    path: str = ""
    constants: tuple = ()
    strict: bool = False
    #: the parsed file (a field, not compared: two models of one file with the same constants are equal)
    model_file: Any = field(default=None, compare=False, repr=False)

    def params(self) -> dict:
        return {"file": self.path, "constants": dict(self.constants)}

    @cached_property
    def info(self):
        return analyse(self.model_file, dict(self.constants), extra_constants=set(dict(self.constants)))

    def _build(self, progress=None) -> Built:
        from .builder import build_model

        b = build_model(self.info, strict=self.strict, progress=progress)
        return Built(b.chain, b.rewards, b.n_transitions, b.build_seconds, b.n_deadlocks)

    def build(self, progress=None) -> Built:
        """Build the chain now (``built`` caches it), reporting the exploration to ``progress(text)``."""
        if "built" not in self.__dict__:
            self.__dict__["built"] = self._build(progress)
        return self.__dict__["built"]

    def compile_properties(self, text, source_name: str = "property", *, errors: str = "raise",
                           constants: dict | None = None, check_constants: bool = True) -> list:
        """Compile PRISM properties (one, a properties file's text, or a PropertyContext) against this model.

        Needs only the model's declarations (:attr:`info`), not its chain: properties
        are parsed and type-checked before anything is built. ``constants`` adds
        values for the properties' constants to the model's; ``errors`` as for
        :func:`exactq.prism.properties.compile_properties`. With ``check_constants``
        a given constant that nothing uses is an error (a misspelt name).
        """
        from .properties import compile_properties

        given = dict(self.constants)
        given.update(constants or {})
        props, used = compile_properties(text, self.info.symbols, self.kind, constants=given,
                                         source_name=source_name, errors=errors)
        declared = set(self.info.constants)
        unknown = [k for k in given if k not in declared and k not in used]
        if check_constants and unknown and not any(p.error is not None for p in props):
            raise PrismModelError(f"--const {unknown[0]}: no constant of the model or of the properties, and no "
                                  f"property, uses the name {unknown[0]!r}")
        return props


def load_prism(path: str, constants=None, *, strict: bool = False, text: str | None = None) -> PrismModel:
    """Read a PRISM model file (``ctmc`` or ``dtmc``).

    Parameters
    ----------
    path : str
        The file (``.sm``, ``.prism``, ``.pm``, ...). With ``text``, only its name is used.
    constants : mapping or str, optional
        Values of the undefined constants: ``{"N": 3}`` or ``"N=3,T=10"``. Constants of
        a properties file may be given here too (as PRISM's ``-const``).
    strict : bool
        Deadlocks are errors instead of PRISM's self-loops.
    text : str, optional
        The model's text (instead of reading ``path``).

    Returns
    -------
    PrismModel
        Offers ``ctmc()`` (or ``dtmc()``) with the chain; measures ``reward:NAME`` and
        ``label:NAME``; :func:`exactq.check` checks PRISM properties on it.

    Raises
    ------
    PrismSyntaxError, PrismUnsupportedError, PrismModelError
        One line naming the position (and, for a missing constant, its name).

    Examples
    --------
    An M/M/1/3 queue (arrival 1, service 2): the long-run probability of a full queue
    is ``ρ^3 (1 - ρ) / (1 - ρ^4)`` with ``ρ = 1/2``.

    >>> import exactq
    >>> m = load_prism("mm13.sm", text='''ctmc
    ... const int K = 3;
    ... module queue n : [0..K] init 0;
    ...   [] n < K -> 1 : (n'=n+1);
    ...   [] n > 0 -> 2 : (n'=n-1);
    ... endmodule
    ... label "full" = n = K;''')
    >>> r = exactq.solve(m, "label:full")
    >>> abs(r.value - 0.5**3 * 0.5 / (1 - 0.5**4)) < 1e-12
    True
    """
    if text is None:
        text = read_source(path, "PRISM file")
    name = os.path.basename(str(path)) or "model"
    mf = parse_model_text(text, name)
    return _load(mf, path, parse_constants(constants), strict=strict)


def _load(mf, path: str, given: dict, *, strict: bool = False) -> "PrismModel":
    """The model of a parsed file with these constants (``load_prism`` without the reading and parsing)."""
    name = os.path.basename(str(path)) or "model"
    if any(":" in str(v) for v in given.values()):
        bad = next(k for k, v in given.items() if ":" in str(v))
        raise ModelError(f"--const {bad}={given[bad]}: a range of values is an experiment; give it to 'exactq check' "
                         "(one answer per value), or one value here")
    info = analyse(mf, given, extra_constants=set(given))
    stem = os.path.splitext(name)[0]
    reward_names = [r.name if r.name is not None else f"#{k + 1}" for k, r in enumerate(info.rewards)]
    measures, default = _measures(reward_names, list(info.labels) + ["init", "deadlock"])
    cls = _chain_class(PrismModel, stem, info.kind, measures, default, f"PRISM {info.kind} model {name}")
    model = cls(path=str(path), constants=tuple(sorted(given.items())), strict=strict, model_file=mf)
    model.__dict__["info"] = info
    return model


def describe_prism(path: str, constants=None, *, strict: bool = False, text: str | None = None) -> dict:
    """What a PRISM file declares, and with every constant given, the size of its chain (``exactq models FILE.sm``).

    Returns a JSON-ready dict: ``file``, ``type``, ``constants`` (name, type,
    ``undefined``, value or ``definition``), ``undefined_constants``, ``variables``
    (name, type, module, ``range`` as ``[lo..hi]`` or ``bool``, ``lo``/``hi`` when known,
    ``init``), ``labels`` (the built-in ``init`` and ``deadlock`` included), ``rewards``
    (name, number of state and transition items), ``modules``, ``actions``; and, when
    no constant is missing, ``n_states``, ``n_transitions``, ``n_deadlocks`` and
    ``build_seconds`` (the chain is built).

    Examples
    --------
    >>> d = describe_prism("q.sm", "K=2", text='ctmc const int K; module q n : [0..K]; '
    ...                    '[] n<K -> 1 : (n\\'=n+1); [] n>0 -> 2 : (n\\'=n-1); endmodule label "full" = n=K;')
    >>> d["undefined_constants"], d["variables"][0]["range"], d["n_states"], d["labels"]
    (['K'], '[0..2]', 3, ['full', 'init', 'deadlock'])
    """
    from .syntax import RenamedModuleNode

    if text is None:
        text = read_source(path, "PRISM file")
    name = os.path.basename(str(path)) or "model"
    mf = parse_model_text(text, name)
    given = parse_constants(constants)
    undefined = [d.name for d in mf.constants if d.expr is None]
    missing = [n for n in undefined if n not in given]
    out: dict = {"file": str(path), "type": mf.type}
    info = None
    if not missing:
        model = _load(mf, path, given, strict=strict)
        info = model.info
    consts = []
    for d in mf.constants:
        value = None
        if info is not None and d.name in info.constants:
            value = info.constants[d.name][1]
        elif d.name in given:
            value = given[d.name]
        entry = {"name": d.name, "type": d.type, "undefined": d.expr is None, "value": value}
        if d.expr is not None:
            entry["definition"] = str(d.expr)
        consts.append(entry)
    out["constants"] = consts
    out["undefined_constants"] = undefined
    variables = []
    if info is not None:
        for v in info.variables:
            rng = "bool" if v.type == "bool" else f"[{v.lo}..{v.hi}]"
            init = (bool(v.init) if v.type == "bool" else v.init) if v.init is not None else "init ... endinit"
            variables.append({"name": v.name, "type": v.type, "module": v.module, "range": rng,
                              "lo": v.lo, "hi": v.hi, "init": init})
    else:
        decls = [(d, None) for d in mf.globals]
        written = {m.name: m for m in mf.modules if not isinstance(m, RenamedModuleNode)}
        for m in mf.modules:
            if isinstance(m, RenamedModuleNode):
                base = written.get(m.base)
                ren = {old: new for old, new, _, _ in m.renames}
                for d in (base.decls if base else []):
                    decls.append((type(d)(ren.get(d.name, d.name), d.type, d.lo, d.hi, d.init, d.line, d.col), m.name))
            else:
                decls += [(d, m.name) for d in m.decls]
        for d, owner in decls:
            rng = "bool" if d.type == "bool" else f"[{d.lo}..{d.hi}]"
            init = str(d.init) if d.init is not None else ("init ... endinit" if mf.init is not None else
                                                           ("false" if d.type == "bool" else str(d.lo)))
            variables.append({"name": d.name, "type": d.type, "module": owner, "range": rng, "init": init})
    out["variables"] = variables
    out["labels"] = list(mf.labels) + ["init", "deadlock"]
    out["rewards"] = [{"name": r.name, "state_items": sum(1 for it in r.items if it.action is None),
                       "transition_items": sum(1 for it in r.items if it.action is not None)} for r in mf.rewards]
    out["modules"] = [m.name for m in mf.modules]
    actions: list = []
    for m in mf.modules:
        if not isinstance(m, RenamedModuleNode):
            for c in m.commands:
                if c.action and c.action not in actions:
                    actions.append(c.action)
    out["actions"] = actions if info is None else list(info.actions)
    if info is not None:
        built = model.built
        out.update(n_states=int(built.chain.n_states), n_transitions=int(built.n_transitions),
                   n_deadlocks=int(built.n_deadlocks), build_seconds=float(built.build_seconds))
        if info.kind == "mdp":
            out["n_choices"] = int(built.chain.n_choices)
    else:
        out["missing_constants"] = missing
    return out


# ------------------------------------------------------------------------- explicit files
@dataclass(frozen=True)
class ExplicitModel(ChainModel):
    """A chain read from PRISM's explicit files (``.tra`` with ``.sta``/``.lab``)."""

    prism_properties: ClassVar[bool] = True
    path: str = ""
    #: what was read from the files (fields, not compared): the chain, its reward structures, the variables that
    #: are booleans, and how long reading took
    chain: Any = field(default=None, compare=False, repr=False)
    rewards: dict = field(default_factory=dict, compare=False, repr=False)
    bool_vars: frozenset = field(default=frozenset(), compare=False, repr=False)
    read_seconds: float = field(default=0.0, compare=False, repr=False)

    def params(self) -> dict:
        return {"file": self.path}

    def _build(self) -> Built:
        chain = self.chain
        rewards = dict(self.rewards)
        if isinstance(chain, DTMC):
            n_trans = int(chain.P.nnz)
        else:
            n_trans = int(chain.Q.nnz - np.count_nonzero(chain.Q.diagonal()))
        return Built(chain, rewards, n_trans, self.read_seconds)

    def compile_properties(self, text, source_name: str = "property", *, errors: str = "raise",
                           constants: dict | None = None, check_constants: bool = True) -> list:
        from .properties import compile_properties

        chain = self.built.chain
        src = Source(source_name, text)
        variables = {name: VarInfo(name, "bool" if name in self.bool_vars else "int", int(chain.states[:, k].min()),
                                   int(chain.states[:, k].max()), None, None, k, 1, 1)
                     for k, name in enumerate(chain.space.names)}
        sym = Symbols(src, variables=variables, builtin_labels=tuple(chain.labels))
        return compile_properties(text, sym, self.kind, source_name=source_name, errors=errors,
                                  constants=constants)[0]


def load_explicit(path: str, *, kind: str | None = None) -> ExplicitModel:
    """Read ``path`` (a ``.tra`` or ``.mtx`` file, with the ``.sta``, ``.lab`` and reward files beside it) as a model.

    ``kind`` is inferred when not given, as in :func:`exactq.prism.explicit.read_explicit`
    and :func:`exactq.prism.explicit.read_mtx`; the reward structures of the ``.srew``
    and ``.trew`` files are its ``reward:NAME`` measures and its ``R{"NAME"}`` properties.
    """
    from .explicit import read_model

    t0 = time.perf_counter()
    files = read_model(path, kind=kind)
    chain = files.chain
    kind = "dtmc" if isinstance(chain, DTMC) else "ctmc"
    measures, default = _measures(list(files.rewards), list(chain.labels))
    name = os.path.splitext(os.path.basename(path))[0]
    cls = _chain_class(ExplicitModel, name, kind, measures, default, f"explicit {kind} {os.path.basename(path)}")
    return cls(path=str(path), chain=chain, rewards=dict(files.rewards), bool_vars=frozenset(files.bool_vars),
               read_seconds=time.perf_counter() - t0)

