"""Declared, validated model parameters.

A model lists its parameters as :class:`Param` objects. ``Param.parse`` accepts
either Python values or command-line strings (lists comma separated, ``inf``) and
returns the canonical value, or raises :class:`~exactq.errors.ModelError` with
one line naming the parameter, the rule and the value.

A rate parameter states its **scope** (:data:`SCOPES`): ``total`` (the whole
system's rate, all servers together) or ``per-server`` (one server's rate; for an
arrival rate the system's total is the number of servers times it). ``exactq
models`` prints the scope beside the rule, so ``arrival_rate`` of ``jsq`` (total)
and of ``power-of-d`` (per server) cannot be confused. An :class:`Alias` is a
second name for a parameter whose scope is in the name (``total_arrival_rate``,
``arrival_rate_per_server``); it is converted to the parameter's own scope with
the parameter's ``count`` (the number of servers), so the old names keep working
unchanged and the new ones mean the same thing in every model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from .errors import ModelError

__all__ = ["Param", "Alias", "Count", "ARRIVAL_RATE_ALIASES", "REQUIRED", "SCOPES", "parse_params", "param_table",
           "check_names"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

_KINDS = ("float", "int", "floats", "ints", "choice", "bool", "int_or_inf", "float_or_inf", "str")

#: the scopes a rate parameter may declare, with the phrase ``exactq models`` prints
SCOPES = {
    "total": "total over all servers",
    "per-server": "per server",
}


@dataclass(frozen=True)
class Count:
    """The number of servers, read from the other parameters (a Param's ``count``).

    ``Count("servers")`` is the value of ``servers``, ``Count("service_rates",
    "len")`` the length of that list, ``Count(how="one")`` a single server.
    """

    param: str = ""
    how: str = "value"

    def __post_init__(self):
        if self.how not in ("value", "len", "one") or (self.how != "one") != bool(self.param):
            raise ValueError(f"bad Count({self.param!r}, {self.how!r})")

    @property
    def doc(self) -> str:
        return {"value": self.param, "len": f"len({self.param})", "one": "1"}[self.how]

    def __call__(self, values: dict) -> float:
        if self.how == "one":
            return 1
        v = values.get(self.param)
        if v is None:
            return None
        return len(v) if self.how == "len" else v


@dataclass(frozen=True)
class Alias:
    """A second name of a parameter, whose scope is part of the name.

    Parameters
    ----------
    name : str
        The alias, e.g. ``total_arrival_rate``.
    scope : str
        The alias's own scope (a key of :data:`SCOPES`). When it differs from the
        parameter's scope the value is converted with the parameter's ``count``:
        a ``total`` alias of a ``per-server`` parameter is divided by the number of
        servers, a ``per-server`` alias of a ``total`` parameter multiplied by it.
    """

    name: str
    scope: str

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r} of alias {self.name!r}; valid: {', '.join(SCOPES)}")

    def describe(self, target: "Param") -> dict:
        if self.scope == target.scope:
            how = f"the same as {target.name}"
        elif target.count_doc == "1":
            how = f"the same as {target.name}, one server"
        elif self.scope == "total":
            how = f"{target.name} = {self.name} / {target.count_doc}"
        else:
            how = f"{target.name} = {target.count_doc} x {self.name}"
        return {"name": self.name, "scope": self.scope, "doc": how}


#: the two aliases of every model's arrival rate: the scope is in the name, the same in every model
ARRIVAL_RATE_ALIASES = (Alias("total_arrival_rate", "total"), Alias("arrival_rate_per_server", "per-server"))


@dataclass(frozen=True)
class Param:
    """One model parameter.

    Parameters
    ----------
    name : str
        The keyword used in the API and on the command line.
    kind : str
        One of ``float``, ``int``, ``floats`` (list), ``ints`` (list), ``choice``,
        ``bool``, ``int_or_inf``, ``float_or_inf``, ``str``.
    doc : str
        One-line description (shown by ``exactq models``).
    default : any
        Default value, or ``REQUIRED``.
    low, high : float or None
        Inclusive bounds (``low_open``/``high_open`` make them strict).
    choices : tuple of str
        Allowed values for ``choice``.
    min_len : int
        Minimum list length for list kinds.
    scope : str or None
        For a rate: ``total`` or ``per-server`` (a key of :data:`SCOPES`), shown by
        ``exactq models`` beside the rule; ``None`` for a parameter that is not a
        rate of servers or of the system.
    count : Count or callable or None
        ``count(values) -> number of servers`` from the other parsed parameters
        (``inf`` for a limit without a finite number, ``None`` when not given),
        needed by an alias whose scope differs from ``scope``; it may raise
        ``ModelError``. Usually a :class:`Count`.
    count_doc : str
        How the number of servers is read from the parameters, e.g. ``servers``
        or ``len(service_rates)`` (in the listing and in messages); taken from a
        :class:`Count` when not given.
    aliases : tuple of Alias
        Further names of this parameter (:class:`Alias`).
    """

    name: str
    kind: str
    doc: str
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    min_len: int = 1
    scope: str | None = None
    count: Callable[[dict], float] | None = field(default=None, compare=False, repr=False)
    count_doc: str = ""
    aliases: tuple = ()

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}")
        if not self.count_doc and isinstance(self.count, Count):
            object.__setattr__(self, "count_doc", self.count.doc)
        if self.scope is not None and self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r} of parameter {self.name!r}; valid: {', '.join(SCOPES)}")
        for a in self.aliases:
            if not isinstance(a, Alias):
                raise ValueError(f"aliases of parameter {self.name!r} must be Alias objects; got {a!r}")
            if self.scope is None:
                raise ValueError(f"parameter {self.name!r} has aliases but no scope")
            if a.scope != self.scope and (self.count is None or not self.count_doc):
                raise ValueError(f"alias {a.name!r} ({a.scope}) of {self.name!r} ({self.scope}) needs "
                                 "the parameter's count and count_doc")

    # -- description -------------------------------------------------------
    @property
    def rule(self) -> str:
        """Human-readable validity rule, e.g. ``> 0`` or ``one of random, fastest``."""
        parts = []
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.low is not None:
            parts.append(("> " if self.low_open else ">= ") + _fmt(self.low))
        if self.high is not None:
            parts.append(("< " if self.high_open else "<= ") + _fmt(self.high))
        rule = " and ".join(parts)
        if self.kind in ("floats", "ints"):
            rule = f"a list of {self.min_len}+ values" + (f", each {rule}" if rule else "")
        return rule

    @property
    def scope_doc(self) -> str:
        """The scope as ``exactq models`` prints it (``""`` without a scope)."""
        if self.scope is None:
            return ""
        text = SCOPES[self.scope]
        if self.scope == "per-server" and self.count_doc and self.count_doc != "1":
            text += f", the total is {self.count_doc} x {self.name}"
        return text

    def describe(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "doc": self.doc,
            "required": self.default is REQUIRED,
            "default": None if self.default is REQUIRED else _jsonable(self.default),
            "rule": self.rule,
            "scope": self.scope,
            "scope_doc": self.scope_doc,
            "aliases": [a.describe(self) for a in self.aliases],
        }

    # -- parsing -----------------------------------------------------------
    def parse(self, raw: Any) -> Any:
        """Return the canonical value of ``raw`` or raise ``ModelError``."""
        k = self.kind
        if k in ("floats", "ints"):
            items = _split(raw, self.name)
            if len(items) < self.min_len:
                raise ModelError(
                    f"{self.name} must be a list of at least {self.min_len} values; got {raw!r}"
                )
            scalar = "float" if k == "floats" else "int"
            return tuple(self._scalar(v, scalar) for v in items)
        if k == "choice":
            v = str(raw).strip().lower()
            if v not in self.choices:
                raise ModelError(f"{self.name} must be one of {', '.join(self.choices)}; got {raw!r}")
            return v
        if k == "bool":
            if isinstance(raw, bool):
                return raw
            v = str(raw).strip().lower()
            if v in ("1", "true", "yes", "on"):
                return True
            if v in ("0", "false", "no", "off"):
                return False
            raise ModelError(f"{self.name} must be true or false; got {raw!r}")
        if k == "str":
            return str(raw)
        return self._scalar(raw, k)

    def _scalar(self, raw: Any, kind: str) -> Any:
        if isinstance(raw, bool):
            raise ModelError(f"{self.name} must be a number; got {raw!r}")
        text = str(raw).strip() if isinstance(raw, str) else raw
        if kind in ("int_or_inf", "float_or_inf") and (
            (isinstance(text, str) and text.lower() in ("inf", "infinity", "oo"))
            or (isinstance(text, float) and math.isinf(text) and text > 0)
        ):
            self._check_range(math.inf, raw)
            return math.inf
        try:
            if kind in ("int", "int_or_inf"):
                if isinstance(text, (int, np.integer)):
                    value: Any = int(text)
                else:
                    try:
                        value = int(str(text))  # exact for any size
                    except ValueError:
                        f = float(text)
                        if not f.is_integer():
                            raise ValueError from None
                        value = int(f)
            else:
                value = float(text)
        except (TypeError, ValueError, OverflowError):
            what = "an integer" if kind in ("int", "int_or_inf") else "a number"
            if kind.endswith("_or_inf"):
                what += " or inf"
            raise ModelError(f"{self.name} must be {what}; got {raw!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ModelError(f"{self.name} must be finite; got {raw!r}")
        self._check_range(value, raw)
        return value

    def _check_range(self, value: float, raw: Any) -> None:
        bad = False
        if self.low is not None:
            bad |= value <= self.low if self.low_open else value < self.low
        if self.high is not None:
            bad |= value >= self.high if self.high_open else value > self.high
        if bad:
            rule = self.rule.split(", each ")[-1]
            raise ModelError(f"{self.name} must be {rule}; got {raw!r}")


def _split(raw: Any, name: str) -> list:
    if isinstance(raw, str):
        items = [p.strip() for p in raw.split(",")]
        if items and items[-1] == "":
            items.pop()  # a trailing comma is harmless
        if any(i == "" for i in items):
            raise ModelError(f"{name} must be a comma-separated list without empty items; got {raw!r}")
        return items
    if isinstance(raw, (list, tuple)):
        return list(raw)
    try:
        return list(raw)  # numpy arrays
    except TypeError:
        return [raw]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def param_table(params: Sequence[Param]) -> dict:
    """``{name: Param}`` of the declared parameters and of their aliases.

    An alias maps to a copy of its parameter under the alias's name (same kind and
    rule), which is what a caller needs to parse a value given under that name
    (e.g. a sweep's axis ``--over total_arrival_rate=...``).
    """
    out = {p.name: p for p in params}
    for p in params:
        for a in p.aliases:
            out[a.name] = replace(p, name=a.name, scope=a.scope, aliases=())
    return out


def check_names(params: Sequence[Param], names) -> None:
    """Refuse a parameter given under more than one of its names (``ModelError``)."""
    names = set(names)
    for p in params:
        given = [n for n in (p.name, *(a.name for a in p.aliases)) if n in names]
        if len(given) > 1:
            raise ModelError(f"give {p.name} under one name only; got {' and '.join(given)}")


def parse_params(model_name: str, params: Sequence[Param], raw: dict, *, known: dict | None = None) -> dict:
    """Parse a raw ``{name: value}`` mapping against declared parameters.

    Unknown names and missing required parameters raise ``ModelError``. A value
    given under an :class:`Alias` is parsed by its parameter's rule (the message
    names the alias) and converted to the parameter's scope; ``known`` are values
    the caller parses itself, visible to the parameters' ``count``.

    Examples
    --------
    Two servers, one of them an alias whose total is split over them:

    >>> p = Param("arrival_rate", "float", "arrival rate per server", low=0.0, low_open=True,
    ...           scope="per-server", count=Count("servers"), aliases=(Alias("total_arrival_rate", "total"),))
    >>> n = Param("servers", "int", "number of servers", low=1)
    >>> parse_params("m", (n, p), {"servers": "4", "total_arrival_rate": "3"})
    {'servers': 4, 'arrival_rate': 0.75}
    >>> parse_params("m", (n, p), {"servers": 4, "arrival_rate": 0.75})
    {'servers': 4, 'arrival_rate': 0.75}
    """
    known_names = {p.name: p for p in params}
    alias_of = {a.name: (p, a) for p in params for a in p.aliases}
    if len(alias_of) != sum(len(p.aliases) for p in params) or set(alias_of) & set(known_names):
        raise ValueError(f"model {model_name}: an alias repeats a parameter's name or another alias")
    unknown = [k for k in raw if k not in known_names and k not in alias_of]
    if unknown:
        also = f"; also {', '.join(alias_of)}" if alias_of else ""
        raise ModelError(
            f"unknown parameter {unknown[0]!r} for model {model_name}; "
            f"valid: {', '.join(known_names) or '(none)'}{also}"
        )
    check_names(params, [k for k, v in raw.items() if v is not None])
    via = {alias_of[k][0].name: k for k, v in raw.items() if k in alias_of and v is not None}
    out = {}
    for p in params:
        if p.name in via:
            out[p.name] = None  # converted below, once the values that count the servers are parsed
            continue
        if p.name in raw and raw[p.name] is not None:
            out[p.name] = p.parse(raw[p.name])
        elif p.default is REQUIRED:
            rule = f" ({p.rule})" if p.rule else ""
            alt = f" (or give {' or '.join(a.name for a in p.aliases)})" if p.aliases else ""
            raise ModelError(f"missing required parameter {p.name} for model {model_name}: {p.doc}{rule}{alt}")
        else:
            out[p.name] = p.default
    for p in params:
        if p.name in via:
            name = via[p.name]
            out[p.name] = _from_alias(p, alias_of[name][1], raw[name], {**out, **(known or {})})
    return out


def _from_alias(p: Param, alias: Alias, raw: Any, values: dict) -> Any:
    """The value of ``p`` given as ``alias=raw``: parsed by ``p``'s rule, converted to ``p``'s scope."""
    value = replace(p, name=alias.name, aliases=()).parse(raw)
    if alias.scope == p.scope:
        return value
    n = p.count(values)
    if n is None or not math.isfinite(n):
        raise ModelError(f"{alias.name} needs a finite number of servers ({p.count_doc} = {_fmt_count(n)}); "
                         f"give {p.name} ({SCOPES[p.scope]}) instead")
    converted = value / n if alias.scope == "total" else value * n
    try:
        return p.parse(converted)
    except ModelError as e:
        raise ModelError(f"{alias.name}={raw!r} gives {p.name} = {converted!r} with {p.count_doc} = "
                         f"{_fmt_count(n)}: {e}") from None


def _fmt_count(n: Any) -> str:
    if n is None:
        return "not given"
    return "inf" if isinstance(n, float) and math.isinf(n) else str(n)


Validator = Callable[[dict], None]
