"""PRISM properties compiled into the queries of :mod:`exactq.query`.

:func:`compile_properties` reads one property or a properties file (constants,
labels and formulas may be declared; ``//`` and ``/* */`` comments and names
``"name": ...`` may appear) against the symbols of a model (its constants, variables,
formulas and labels, and the built-in labels ``"init"`` and ``"deadlock"``) and returns
one :class:`CompiledProperty` per property, whose ``query`` is checked by
:func:`exactq.solvers.csl.check_chain`:

=============================  ==============================================
``S=? [ φ ]``                  :class:`~exactq.query.SteadyProbability`
``P=? [ φ1 U[I] φ2 ]``         :class:`~exactq.query.Until` (``F`` is ``true U``)
``P=? [ G[I] φ ]``             :class:`~exactq.query.Globally`
``P=? [ X φ ]``                :class:`~exactq.query.Next`
``R{"r"}=? [ S | C<=t | I=t | F φ ]``  :class:`~exactq.query.RewardQuery`
``E=? [ e ]``, ``T=? [ F φ ]``  exactq's native expectation and expected time
``filter(op, prop, states)``   :class:`~exactq.query.Filter`
=============================  ==============================================

Time bounds are constant expressions (``T*3600``). In a DTMC they count steps and must
be integers; ``<k`` is ``<=k-1`` and ``>k`` is ``>=k+1`` there (in continuous time the
strict and non-strict bounds give the same probability).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactq.query import (
    TRUE, ExpectedTime, Filter, Globally, Next, RewardQuery, SteadyExpectation, SteadyProbability, Until,
)

from .lexer import PrismModelError, Source
from .semantics import Compiled, EvalContext, Symbols, compile_expr, evaluate_constants, expand_formulas
from .syntax import FilterNode, LabelRef, PathFormula, PropertiesFile, QueryNode, RewardPath, parse_properties_text

__all__ = ["StateFormula", "CompiledProperty", "compile_properties"]

_FILTER_ALIASES = {"+": "sum", "avg": "avg", "min": "min", "max": "max", "sum": "sum", "first": "first",
                   "state": "state", "range": "range"}


class StateFormula:
    """A compiled PRISM state formula, evaluated on the states of a chain.

    The checker calls :meth:`on_chain`; the variables are the chain's state columns
    (in the model's order) and the built-in labels (``"init"``, ``"deadlock"``, and
    the labels of an explicit ``.lab`` file) the chain's labels.
    """

    __slots__ = ("compiled", "text", "names")

    def __init__(self, compiled: Compiled, text: str):
        self.compiled, self.text, self.names = compiled, text, frozenset()

    @property
    def type(self) -> str:
        return self.compiled.type

    def on_chain(self, chain) -> np.ndarray:
        labels = {k: np.asarray(v, dtype=bool) for k, v in chain.labels.items()}
        if "deadlock" not in labels:
            labels["deadlock"] = np.zeros(chain.n_states, dtype=bool)
        return self.compiled.full(EvalContext(np.asarray(chain.states), labels=labels))

    def __call__(self, namespace, n=None):  # pragma: no cover - the checker uses on_chain
        raise TypeError("a PRISM state formula is evaluated on a chain (on_chain), not on a namespace")

    def __repr__(self) -> str:
        return f"StateFormula({self.text!r})"


@dataclass
class CompiledProperty:
    """One property: its name (or None), its source text and the query to check."""

    name: str | None
    text: str
    query: object


def compile_properties(text: str, symbols: Symbols, kind: str, *, constants: dict | None = None,
                       source_name: str = "property") -> tuple[list, set]:
    """Parse and compile PRISM properties against a model's symbols.

    Parameters
    ----------
    text : str
        One property, or the text of a properties file.
    symbols : Symbols
        The model's constants, variables, formulas and labels.
    kind : {"ctmc", "dtmc"}
    constants : dict, optional
        Values of undefined constants of the properties file.
    source_name : str
        The name reported in error messages (a file name, or ``property``).

    Returns
    -------
    (list of CompiledProperty, set of str)
        The properties, and the names of the given constants the file used.

    Raises
    ------
    PrismSyntaxError, PrismUnsupportedError, PrismModelError
        One line with the position.
    """
    pf: PropertiesFile = parse_properties_text(text, source_name)
    src = pf.source
    given = dict(constants or {})
    own = {d.name for d in pf.constants}
    clash = [d for d in pf.constants if d.name in symbols.constants or d.name in symbols.variables]
    if clash:
        d = clash[0]
        raise src.model_error(d.line, d.col, f"constant {d.name!r} of the properties is already a "
                              f"{'constant' if d.name in symbols.constants else 'variable'} of the model")
    formulas = dict(symbols.formulas)
    formulas.update(pf.formulas)
    base = Symbols(src, constants=dict(symbols.constants), formulas=formulas)
    values = evaluate_constants(pf.constants, {k: v for k, v in given.items() if k in own}, base, src)
    sym = Symbols(src, constants={**symbols.constants, **values}, variables=symbols.variables, formulas=formulas,
                  labels={**symbols.labels, **pf.labels},
                  builtin_labels=tuple(dict.fromkeys(("init", "deadlock") + tuple(symbols.builtin_labels))),
                  allow_labels=True)
    named = {}
    out = []
    for p in pf.properties:
        expr = p.expr
        if isinstance(expr, LabelRef) and expr.name in named:
            q = named[expr.name]
        else:
            q = _Compiler(sym, src, kind).top(expr, p.text)
        if p.name is not None:
            if p.name in named or p.name in sym.labels:
                raise src.model_error(p.line, p.col, f'the property name "{p.name}" is used twice (or is a label)')
            named[p.name] = q
        out.append(CompiledProperty(p.name, p.text, q))
    if not out:
        raise src.syntax_error(1, 1, "expected a property; got none")
    return out, own & set(given)


class _Compiler:
    def __init__(self, sym: Symbols, src: Source, kind: str):
        self.sym, self.src, self.kind = sym, src, kind

    def err(self, node, message: str) -> PrismModelError:
        return self.src.model_error(getattr(node, "line", 1) or 1, getattr(node, "col", 1) or 1, message)

    def state(self, expr, role: str, want: str = "bool") -> StateFormula:
        c = compile_expr(expand_formulas(expr, self.sym.formulas, self.src), self.sym, source=self.src)
        if want == "bool" and c.type != "bool":
            raise self.err(expr, f"type error: {role} must be a condition; got the {c.type} expression '{expr}'")
        if want == "num" and c.type == "bool":
            raise self.err(expr, f"type error: {role} must be a number; got the condition '{expr}'")
        return StateFormula(c, str(expr))

    def const(self, expr, role: str) -> float:
        c = compile_expr(expand_formulas(expr, self.sym.formulas, self.src), self.sym, source=self.src)
        if not c.const:
            raise self.err(expr, f"{role} must be a constant expression; '{expr}' reads a variable")
        if c.type == "bool":
            raise self.err(expr, f"type error: {role} must be a number; got '{expr}'")
        v = float(c.value)
        if v < 0:
            raise self.err(expr, f"{role} must be >= 0; got {expr} = {v:g}")
        if self.kind == "dtmc" and v != int(v):
            raise self.err(expr, f"{role} of a dtmc counts steps and must be an integer; got {expr} = {v:g}")
        return v

    def bounds(self, b) -> tuple[float, float | None]:
        if b is None:
            return 0.0, None
        lo = 0.0 if b.lower is None else self.const(b.lower, "the lower time bound")
        hi = None if b.upper is None else self.const(b.upper, "the time bound")
        if self.kind == "dtmc":
            if b.upper_strict and hi is not None:
                if hi < 1:
                    raise self.err(b.upper, f"the bound '<{b.upper}' admits no step")
                hi -= 1
            if b.lower_strict:
                lo += 1
        if hi is not None and lo > hi:
            raise self.err(b.lower or b.upper, f"the time interval [{lo:g}, {hi:g}] is empty")
        return lo, hi

    def top(self, expr, text: str):
        if isinstance(expr, FilterNode):
            op = _FILTER_ALIASES.get(expr.op)
            if op is None:
                raise self.src.unsupported(expr.line, expr.col, f"the filter operator {expr.op!r} is outside the "
                                           "supported fragment (min, max, avg, sum, first, state, range)")
            if not isinstance(expr.prop, QueryNode):
                raise self.err(expr.prop, "the property inside filter(...) must be a query (P=?, S=?, R=?, E=?, T=?)")
            inner = self.query(expr.prop, str(expr.prop))
            states = None if expr.states is None else self.state(expr.states, "the states of the filter")
            return Filter(op, inner, states, text)
        if isinstance(expr, QueryNode):
            return self.query(expr, text)
        raise self.err(expr, "a property must be a query (P=?, S=?, R=?, E=?, T=?), optionally inside "
                       f"filter(...); got '{expr}'")

    def query(self, node: QueryNode, text: str):
        q = self._query(node, text)
        if node.old_filter is not None:
            states_expr, ops = node.old_filter
            states = self.state(states_expr, "the states of the filter")
            op = "state" if not ops else ("range" if set(ops) == {"min", "max"} else ops[0])
            return Filter(op, q, states, text)
        return q

    def _query(self, node: QueryNode, text: str):
        op, body = node.op, node.body
        if op == "S":
            return SteadyProbability(self.state(body, "the argument of S=?"), text)
        if op == "E":
            return SteadyExpectation(self.state(body, "the argument of E=?", "num"), text)
        if op == "T":
            return ExpectedTime(self.state(body.target, "the target of T=?"), text)
        if op == "P":
            pf: PathFormula = body
            if pf.kind == "X":
                return Next(self.state(pf.right, "the argument of X"), text)
            lo, hi = self.bounds(pf.bound)
            if pf.kind == "G":
                return Globally(self.state(pf.right, "the argument of G"), hi, lo, text)
            left = TRUE if pf.left is None else self.state(pf.left, "the left side of U")
            right = self.state(pf.right, "the target of the path formula")
            return Until(left, right, hi, text, lo)
        # R
        rp: RewardPath = body
        reward = node.reward
        if rp.kind == "S":
            return RewardQuery(reward, "steady", text=text)
        if rp.kind == "F":
            return RewardQuery(reward, "reachability", target=self.state(rp.target, "the target of R=? [ F b ]"),
                               text=text)
        t = self.const(rp.time, "the time bound")
        return RewardQuery(reward, "cumulative" if rp.kind == "C" else "instantaneous", time=t, text=text)
