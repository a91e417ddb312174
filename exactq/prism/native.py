"""exactq's native queries and state expressions, read by the PRISM front end.

There is one expression and property language: PRISM's (:mod:`exactq.prism.syntax`,
:mod:`exactq.prism.semantics`, :mod:`exactq.prism.properties`), with a few extensions
where PRISM gives a construct no meaning of its own. A *native* query (``exactq check
jsq ... 'S=? [ q1 > 5 ]'``, :func:`exactq.check` on a built-in or plug-in model) is
parsed by the same parser and compiled by the same compiler, against the symbols of
the chain it is checked on:

- the chain's **variables** (its state space's columns) as integer variables;
- its **constants** (model parameters such as ``K``) as constants;
- its **rewards** (named per-state vectors) as numbers read by name;
- its **labels** (named per-state booleans) as labels, ``"full"`` or just ``full``;

so every operator, function, filter, threshold and nested operator of a PRISM
property works on a native model, with the chain's initial state as PRISM's
``"init"``. Because the symbols come from the chain, the query is compiled anew for
each chain it is checked on (a truncation level's ``K`` is that level's).

The native dialect differs from a PRISM property only where the native language
always read otherwise, and never where PRISM gives the text another meaning:
``//`` is floor division (so a native query has no comments), ``not``/``and``/``or``
are the words of ``!``/``&``/``|``, and all comparisons share one precedence level
(``0 < q1 <= 3``, ``a = b != c`` are chains). The extensions that both dialects read
are described in :class:`exactq.prism.syntax._Parser` and
:attr:`exactq.prism.semantics.Symbols.extensions` (``0 < s <= 3``, ``s^2``, ``**``,
``%``, ``==``, ``&&``, ``||``, ``abs``, ``sqrt``, ``exp``, ``log(x)``, booleans as 0/1,
faults as errors where the faulty term is used).

Examples
--------
>>> import numpy as np
>>> evaluate("0 < q <= 2 & q % 2 = 0", {"q": np.arange(5)}).tolist()
[False, False, True, False, False]
>>> evaluate("min(q, K) ^ 2 // 3", {"q": np.arange(4), "K": 2}).tolist()
[0.0, 0.0, 1.0, 1.0]
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

import numpy as np

from exactq.errors import ModelError

from .lexer import QuerySource, deep_recursion
from .semantics import EvalContext, Symbols, VarInfo, compile_expr, iter_names
from .syntax import _Parser

__all__ = ["parse_native", "native_symbols", "compile_query", "Expression", "parse_expression", "evaluate"]

#: the operators a native query starts with (for the message of one that starts otherwise)
QUERY_OPERATORS = ("S", "E", "P", "T", "R", "LRA")


def parse_native(text: str, *, what: str = "query"):
    """The syntax tree of a native query (``what="query"``) or state expression (``"expression"``).

    Raises
    ------
    QuerySyntaxError
        ``query syntax error at column N: expected ...`` (a
        :class:`~exactq.prism.lexer.PrismSyntaxError`).
    """
    if not isinstance(text, str):
        raise ModelError(f"{what} must be a string; got {type(text).__name__}")
    src = QuerySource("query", text)
    with deep_recursion(f"the {what} {text[:40]!r}"):
        p = _Parser(src, native=True)
        first = p.peek()
        if what == "query":
            if first.kind == "eof":
                raise p.error("one of S=?, E=?, P=?, T=?, R=?, LRA=?, a threshold or filter(...)")
            if first.kind == "ident" and first.text not in QUERY_OPERATORS and p.at("=", k=1) and p.at("?", k=2):
                raise p.error("one of S=?, E=?, P=?, T=?, R=?, LRA=? (the query operators)")
        elif first.kind == "eof":
            raise p.error("an expression")
        node = p.expression()
        if p.peek().kind != "eof":
            if what == "query" and p.prev_text() == "]":
                raise p.error("the end of the query")
            raise p.error(f"an operator or the end of the {what}")
    return node, src


def _type_of(value) -> str | None:
    """``bool``, ``int`` or ``double`` for a scalar, ``None`` for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "double"
    return None


def _array_type(arr: np.ndarray) -> str:
    return "bool" if arr.dtype == bool else ("int" if arr.dtype.kind in "iu" else "double")


def native_symbols(chain, src) -> Symbols:
    """The symbols of a native chain: variables, constants, rewards (by name) and labels (quoted or bare).

    A name in several of them means what it meant in the native language: a label
    before a reward, a reward before a variable, a variable before a constant.
    """
    owner: dict[str, str] = {}
    for name, value in (getattr(chain, "constants", None) or {}).items():
        if _type_of(value) is not None:
            owner[name] = "constant"
    names = list(getattr(chain.space, "names", ()))
    for name in names:
        owner[name] = "variable"
    for name in (getattr(chain, "rewards", None) or {}):
        owner[name] = "reward"
    for name in (getattr(chain, "labels", None) or {}):
        owner[name] = "label"
    states = chain.states
    variables = {}
    for k, name in enumerate(names):
        if owner.get(name) == "variable":
            col = states[:, k]
            lo, hi = (int(col.min()), int(col.max())) if col.size else (0, 0)
            variables[name] = VarInfo(name, "int", lo, hi, None, None, k, 1, 1)
    constants = {name: (_type_of(v), v.item() if isinstance(v, np.generic) else v)
                 for name, v in (chain.constants or {}).items() if owner.get(name) == "constant"}
    columns = {name: _array_type(np.asarray(v)) for name, v in (chain.rewards or {}).items()
               if owner.get(name) == "reward"}
    labels = tuple(dict.fromkeys([name for name in chain.labels if owner.get(name) == "label"] + ["init", "deadlock"]))
    return Symbols(src, constants=constants, variables=variables, builtin_labels=labels, allow_labels=True,
                   in_properties=True, columns=columns, extensions=True, native=True)


def compile_query(node, src, chain):
    """The query of a parsed native property, compiled against ``chain``'s symbols (:mod:`exactq.query` classes)."""
    from exactq.ctmc import DTMC

    from .properties import _Compiler

    sym = native_symbols(chain, src)
    kind = "dtmc" if isinstance(chain, DTMC) else "ctmc"
    with deep_recursion(f"the query {src.text[:40]!r}"):
        return _Compiler(sym, src, kind).top(node, src.text.strip())


# ------------------------------------------------------------------------------ expressions
class Expression:
    """A parsed native state expression (``q1 > 5 & q2 = 0``), callable on a namespace of per-state values.

    ``text`` is the source, ``names`` the free names it reads; two expressions are
    equal when their syntax trees print the same (``q1>5`` equals ``( q1 > 5 )``,
    ``q1 == 5`` equals ``q1 = 5``).
    """

    __slots__ = ("text", "tree", "names", "_ordered", "_key", "_src")

    def __init__(self, text: str):
        tree, src = parse_native(text, what="expression")
        ordered = tuple(dict.fromkeys(name for _, name, _ in _names_in_order(tree)))
        for attr, value in (("text", text), ("tree", tree), ("names", frozenset(ordered)), ("_ordered", ordered),
                            ("_key", str(tree)), ("_src", src)):
            object.__setattr__(self, attr, value)

    def __setattr__(self, name, value):
        raise AttributeError("Expression is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def __call__(self, namespace: Mapping[str, Any], n: int | None = None) -> np.ndarray:
        """The values on every state (see :func:`evaluate`)."""
        return _evaluate(self, namespace, n)


def _names_in_order(tree):
    """Free names (identifiers and quoted labels) in order of first appearance, left to right."""
    out = list(iter_names(tree))
    out.sort(key=lambda item: (getattr(item[2], "line", 0), getattr(item[2], "col", 0)))
    return out


def parse_expression(text) -> Expression:
    """Parse a native state expression (``Expression`` as it is)."""
    return text if isinstance(text, Expression) else Expression(text)


def evaluate(expression, namespace: Mapping[str, Any], n: int | None = None) -> np.ndarray:
    """Evaluate a native state expression on every state.

    Parameters
    ----------
    expression : str or Expression
    namespace : mapping of str to (n,) ndarray or scalar
        Values of the names: arrays (one entry per state, all of one length) are read
        per state, scalars are constants.
    n : int, optional
        The number of states; the result is broadcast to ``(n,)``. By default the length
        of the arrays the expression reads (or of any array in ``namespace``); with no
        arrays at all the result is 0-d.

    Returns
    -------
    ndarray
        Boolean for conditions, numeric otherwise; a fresh array.

    Raises
    ------
    QuerySyntaxError
        For a malformed expression.
    ModelError
        For an unknown name, values of the wrong shape or type, a type error, or an
        arithmetic fault (division by zero, a value that is not finite, a number used
        as a boolean that is not 0 or 1) in a state where the faulty term is used.
    """
    return _evaluate(parse_expression(expression), namespace, n)


def _evaluate(expr: Expression, namespace: Mapping[str, Any], n: int | None) -> np.ndarray:
    missing = [name for name in expr._ordered if name not in namespace]
    if missing:
        name = missing[0]
        valid = sorted(str(k) for k in namespace)
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = ", ".join(valid[:30]) + (", ..." if len(valid) > 30 else "")
        raise ModelError(f"unknown name {name!r} in expression {expr.text!r}{hint}; valid: {shown or '(none)'}")
    length = None if n is None else int(n)
    columns, constants, named = {}, {}, {}
    for name in expr._ordered:
        arr = np.asarray(namespace[name])
        if arr.dtype.kind not in "biuf":
            raise ModelError(f"name {name!r} in expression {expr.text!r} is not numeric or boolean; got dtype "
                             f"{arr.dtype}")
        if arr.ndim > 1:
            raise ModelError(f"name {name!r} in expression {expr.text!r} must be a scalar or a vector over states; "
                             f"got shape {arr.shape}")
        if arr.ndim == 1:
            if length is None:
                length = arr.shape[0]
            elif arr.shape[0] != length:
                raise ModelError(f"name {name!r} in expression {expr.text!r} has {arr.shape[0]} values; expected "
                                 f"{length} (one per state)")
            columns[name] = _array_type(arr)
            named[name] = arr.astype(np.int64) if arr.dtype.kind == "u" else arr
        else:
            value = arr.item()
            constants[name] = (_type_of(value), value)
    if length is None:
        length = next((len(v) for v in namespace.values() if isinstance(v, np.ndarray) and v.ndim == 1), None)
    rows = 1 if length is None else length
    sym = Symbols(expr._src, constants=constants, columns=columns, in_properties=True, extensions=True,
                  native=True)
    compiled = compile_expr(expr.tree, sym, source=expr._src)
    values = compiled.checked(EvalContext(np.zeros((rows, 0), dtype=np.int64), named=named))
    if length is None:
        return np.array(values[0])
    return np.array(values)
