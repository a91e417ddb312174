"""Models given by one finite chain: PRISM files, PRISM explicit files, and plug-in functions.

:func:`load_prism` reads a PRISM model file and returns a model that offers its chain
as a representation (``ctmc()`` for ``ctmc`` files, ``dtmc()`` for ``dtmc`` files), so
that every CTMC method, ``verify`` and the stationary solvers apply to it
(:func:`exactq.solve`); its measures are the long-run reward rate of each reward
structure (``reward:NAME``) and the long-run probability of each label
(``label:NAME``). :func:`exactq.check` checks PRISM properties on it.

:func:`register` (``exactq.register_model``) adds a user's model to the catalogue at
run time: a :class:`~exactq.catalogue.Model` subclass (a dataclass with a ``ctmc()``
built from events), or a plain function whose keyword parameters (with annotations or
defaults) are the model's parameters and which returns a
:class:`~exactq.ctmc.CTMC`; its measures are named expressions of the chain's
variables, rewards and labels, averaged over the stationary law.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, ClassVar

import numpy as np

from exactq.catalogue import Model
from exactq.ctmc import CTMC, DTMC
from exactq.errors import ModelError
from exactq.params import REQUIRED, Param
from exactq.query import RewardStructure

from .lexer import PrismModelError, Source
from .semantics import Symbols, VarInfo, analyse
from .syntax import parse_model_text

__all__ = ["ChainModel", "PrismModel", "ExplicitModel", "load_prism", "load_explicit", "register", "parse_constants",
           "is_prism_path"]

PRISM_SUFFIXES = (".sm", ".prism", ".pm", ".nm", ".smg")


def is_prism_path(text: str) -> bool:
    """Whether a command-line model argument names a PRISM file (by suffix, or an existing file)."""
    return text.endswith(PRISM_SUFFIXES) or text.endswith(".tra") or os.path.isfile(text)


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

    @property
    def is_infinite(self) -> bool:
        return False

    def _value(self, measure: str, chain, sol) -> float:
        what, _, name = measure.partition(":")
        if what == "reward":
            rs = self.built.rewards[name]
            return sol.expect(rs.rate())
        if what == "label":
            return sol.probability(chain.labels[name])
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover (validated by the API)


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


def _measures(reward_names, label_names) -> tuple[dict, str]:
    measures = {}
    for r in reward_names:
        measures[f"reward:{r}"] = f'long-run reward rate of structure "{r}" (R{{"{r}"}}=? [ S ])'
    for name in label_names:
        measures[f"label:{name}"] = f'long-run probability of label "{name}" (S=? [ "{name}" ])'
    default = next(iter(measures), "")
    return measures, default


def _chain_class(base: type, name: str, kind: str, measures: dict, default: str, summary: str) -> type:
    mixin = _CTMCFactory if kind == "ctmc" else _DTMCFactory
    attrs = {"name": name, "summary": summary, "measures": measures, "default_measure": default,
             "methods": ("ctmc",) if kind == "ctmc" else ("dtmc",), "kind": kind, "__module__": __name__}
    cls = type(f"{base.__name__}_{_ident(name)}", (mixin, base), attrs)
    return dataclass(frozen=True)(cls)


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

    def params(self) -> dict:
        return {"file": self.path, "constants": dict(self.constants)}

    @cached_property
    def info(self):
        return analyse(self._model_file, dict(self.constants), extra_constants=set(dict(self.constants)))

    def _build(self) -> Built:
        from .builder import build_model

        b = build_model(self.info, strict=self.strict)
        return Built(b.chain, b.rewards, b.n_transitions, b.build_seconds, b.n_deadlocks)

    def compile_properties(self, text: str, source_name: str = "property") -> list:
        """Compile PRISM properties (one, or a properties file's text) against this model."""
        from .properties import compile_properties

        given = dict(self.constants)
        props, used = compile_properties(text, self.info.symbols, self.kind, constants=given,
                                         source_name=source_name)
        declared = set(self.info.constants)
        unknown = [k for k in given if k not in declared and k not in used]
        if unknown:
            raise PrismModelError(f"--const {unknown[0]}: neither the model nor the properties declare a constant "
                                  f"{unknown[0]!r}")
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
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ModelError(f"cannot read the PRISM file {path}: {exc.strerror or exc}") from None
    name = os.path.basename(str(path)) or "model"
    mf = parse_model_text(text, name)
    given = parse_constants(constants)
    info = analyse(mf, given, extra_constants=set(given))
    stem = os.path.splitext(name)[0]
    reward_names = [r.name if r.name is not None else f"#{k + 1}" for k, r in enumerate(info.rewards)]
    measures, default = _measures(reward_names, list(info.labels) + ["init", "deadlock"])
    cls = _chain_class(PrismModel, stem, info.kind, measures, default, f"PRISM {info.kind} model {name}")
    cls._model_file = mf
    model = cls(path=str(path), constants=tuple(sorted(given.items())), strict=strict)
    model.__dict__["info"] = info
    return model


# ------------------------------------------------------------------------- explicit files
@dataclass(frozen=True)
class ExplicitModel(ChainModel):
    """A chain read from PRISM's explicit files (``.tra`` with ``.sta``/``.lab``)."""

    prism_properties: ClassVar[bool] = True
    path: str = ""

    def params(self) -> dict:
        return {"file": self.path}

    def _build(self) -> Built:
        chain = self._chain
        rewards = {k: RewardStructure(k, np.asarray(v, dtype=float)) for k, v in chain.rewards.items()}
        if isinstance(chain, DTMC):
            n_trans = int(chain.P.nnz)
        else:
            n_trans = int(chain.Q.nnz - np.count_nonzero(chain.Q.diagonal()))
        return Built(chain, rewards, n_trans, self._seconds)

    def compile_properties(self, text: str, source_name: str = "property") -> list:
        from .properties import compile_properties

        chain = self.built.chain
        src = Source(source_name, text)
        variables = {name: VarInfo(name, "int", int(chain.states[:, k].min()), int(chain.states[:, k].max()), None,
                                   None, k, 1, 1) for k, name in enumerate(chain.space.names)}
        sym = Symbols(src, variables=variables, builtin_labels=tuple(chain.labels))
        return compile_properties(text, sym, self.kind, source_name=source_name)[0]


def load_explicit(path: str, *, kind: str | None = None) -> ExplicitModel:
    """Read ``path`` (a ``.tra`` file, with the ``.sta`` and ``.lab`` beside it) as a model.

    ``kind`` is inferred when not given (``dtmc`` when every row sums to 1), as in
    :func:`exactq.prism.explicit.read_explicit`.
    """
    from .explicit import read_explicit

    t0 = time.perf_counter()
    chain = read_explicit(path, kind=kind)
    kind = "dtmc" if isinstance(chain, DTMC) else "ctmc"
    measures, default = _measures([], list(chain.labels))
    name = os.path.splitext(os.path.basename(path))[0]
    cls = _chain_class(ExplicitModel, name, kind, measures, default, f"explicit {kind} {os.path.basename(path)}")
    cls._chain = chain
    cls._seconds = time.perf_counter() - t0
    return cls(path=str(path))


# ============================================================================ plug-ins
# The plug-in registration lives in exactq.plugins (a core module: loading a plug-in needs no PRISM parser);
# these names stay importable from here.
from exactq.plugins import FunctionModel, function_model, register  # noqa: E402,F401
