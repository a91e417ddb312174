"""Declared, validated model parameters.

A model lists its parameters as :class:`Param` objects. ``Param.parse`` accepts
either Python values or command-line strings (lists comma separated, ``inf``) and
returns the canonical value, or raises :class:`~exactq.errors.ModelError` with
one line naming the parameter, the rule and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .errors import ModelError

__all__ = ["Param", "REQUIRED", "parse_params"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

_KINDS = ("float", "int", "floats", "ints", "choice", "bool", "int_or_inf", "float_or_inf", "str")


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

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}")

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

    def describe(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "doc": self.doc,
            "required": self.default is REQUIRED,
            "default": None if self.default is REQUIRED else _jsonable(self.default),
            "rule": self.rule,
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


def parse_params(model_name: str, params: Sequence[Param], raw: dict) -> dict:
    """Parse a raw ``{name: value}`` mapping against declared parameters.

    Unknown names and missing required parameters raise ``ModelError``.
    """
    known = {p.name: p for p in params}
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise ModelError(
            f"unknown parameter {unknown[0]!r} for model {model_name}; "
            f"valid: {', '.join(known) or '(none)'}"
        )
    out = {}
    for p in params:
        if p.name in raw and raw[p.name] is not None:
            out[p.name] = p.parse(raw[p.name])
        elif p.default is REQUIRED:
            rule = f" ({p.rule})" if p.rule else ""
            raise ModelError(f"missing required parameter {p.name} for model {model_name}: {p.doc}{rule}")
        else:
            out[p.name] = p.default
    return out


Validator = Callable[[dict], None]
