"""PRISM properties compiled into the queries of :mod:`exactq.query`.

:func:`compile_properties` reads one property or a properties file (constants,
labels and formulas may be declared; ``//`` and ``/* */`` comments and names
``"name": ...`` may appear) against the symbols of a model (its constants, variables,
formulas and labels, and the built-in labels ``"init"`` and ``"deadlock"``) and returns
one :class:`CompiledProperty` per property, whose ``query`` is checked by
:func:`exactq.solvers.csl.check_chain`:

=============================================  ==============================================
``S=? [ φ ]``, Storm's ``LRA=? [ φ ]``         :class:`~exactq.query.SteadyProbability`
``P=? [ φ1 U[I] φ2 ]``                         :class:`~exactq.query.Until` (``F`` is ``true U``)
``P=? [ φ1 W[I] φ2 ]``, ``P=? [ φ1 R[I] φ2 ]``  :class:`~exactq.query.Until` with ``negated``
``P=? [ G[I] φ ]``                             :class:`~exactq.query.Globally`
``P=? [ X φ ]``                                :class:`~exactq.query.Next`
``R{"r"}=? [ S | C | C<=t | I=t | F φ ]``      :class:`~exactq.query.RewardQuery`
``P~p [..]``, ``S~p [..]``, ``R~r [..]``       :class:`~exactq.query.Threshold` (true/false)
``E=? [ e ]``, ``T=? [ F φ ]``                 exactq's native expectation and expected time
``filter(op, prop, states)``                   :class:`~exactq.query.Filter`
any other expression (``1 - P=? [ .. ]``)      :class:`~exactq.query.Formula`
=============================================  ==============================================

A state formula may contain operators (``P=? [ F P>0.9 [ F "x" ] ]``,
``filter(forall, P>=1 [ F "y" ], "init")``): each nested operator is a query of its own,
evaluated in every state by the checker before the formula that contains it
(bottom-up, as PRISM does), and read by the formula as a column of per-state values.
A quoted name that is not a label refers to a named property of the same file.

Time bounds are constant expressions (``T*3600``). In a DTMC they count steps and must
be integers; ``<k`` is ``<=k-1`` and ``>k`` is ``>=k+1`` there (in continuous time the
strict and non-strict bounds give the same probability).

Every property is compiled on its own: one that does not parse, type-check or name
its constants gives a :class:`CompiledProperty` with ``error`` set (and the others
are unaffected). All of this needs only the model's declarations, not its state space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from exactq.errors import ExactqError
from exactq.query import (
    TRUE, ExpectedTime, Filter, Formula, Globally, Next, RewardQuery, SteadyExpectation, SteadyProbability,
    Threshold, Until,
)

from .lexer import PrismModelError, Source, deep_recursion
from .semantics import Compiled, EvalContext, Symbols, compile_expr, evaluate_constants, iter_names
from .syntax import (
    Binary, FilterNode, LabelRef, PathFormula, PropertiesFile, QueryNode, RewardPath, Unary, parse_properties_text,
)

__all__ = ["StateFormula", "CompiledProperty", "PropertyContext", "compile_properties", "property_context",
           "infer_constant_type"]

#: the filter operators whose result is one value (the others are per state)
SINGLE_VALUE_FILTERS = ("min", "max", "count", "sum", "avg", "first", "range", "forall", "exists", "state")


class StateFormula:
    """A compiled PRISM state formula, evaluated on the states of a chain.

    The checker calls :meth:`on_chain`; the variables are the chain's state columns
    (in the model's order) and the built-in labels (``"init"``, ``"deadlock"``, and
    the labels of an explicit ``.lab`` file) the chain's labels. ``deps`` are the
    operators nested in the formula (key -> query); the checker computes their values
    in every state first (``checker.per_state(query)``).
    """

    __slots__ = ("compiled", "text", "names", "deps")

    def __init__(self, compiled: Compiled, text: str, deps: dict | None = None):
        self.compiled, self.text, self.names = compiled, text, frozenset()
        self.deps = deps or {}

    @property
    def type(self) -> str:
        return self.compiled.type

    def on_chain(self, chain, checker=None) -> np.ndarray:
        labels = {k: np.asarray(v, dtype=bool) for k, v in chain.labels.items()}
        if "deadlock" not in labels:
            labels["deadlock"] = np.zeros(chain.n_states, dtype=bool)
        if "init" not in labels:  # a native chain: its initial state (or the support of its initial law)
            labels["init"] = _initial_mask(chain)
        extra = {}
        if self.deps:
            if checker is None:
                raise ExactqError(f"the formula '{self.text}' has nested operators; it is evaluated by the checker")
            extra = {key: checker.per_state(q) for key, q in self.deps.items()}
        named = {k: np.asarray(v) for k, v in getattr(chain, "rewards", {}).items()}  # a native chain's rewards
        space = getattr(chain, "space", None)
        source = space if hasattr(space, "column_at") else np.asarray(chain.states)  # (a column decoded when read)
        ctx = EvalContext(source, labels=labels, extra=extra, named=named)
        return self.compiled.checked(ctx)  # a fault in a state where its term is used is an error, never nan

    def __call__(self, namespace, n=None):  # pragma: no cover - the checker uses on_chain
        raise TypeError("a PRISM state formula is evaluated on a chain (on_chain), not on a namespace")

    def __repr__(self) -> str:
        return f"StateFormula({self.text!r})"


def _initial_mask(chain) -> np.ndarray:
    mask = np.zeros(chain.n_states, dtype=bool)
    init = getattr(chain, "initial", None)
    if init is None:
        return mask
    arr = np.asarray(init)
    if arr.ndim == 0:
        if 0 <= int(arr) < chain.n_states:
            mask[int(arr)] = True
        return mask
    return arr.reshape(-1)[:chain.n_states] > 0 if arr.size == chain.n_states else mask


@dataclass
class CompiledProperty:
    """One property: its name (or None), its source text, the query to check, or the error that stopped it.

    ``index`` is its 1-based position in its file (``--prop N``); ``constants`` the
    values of the constants it was compiled with (an experiment's point).
    """

    name: str | None
    text: str
    query: object
    error: Exception | None = None
    index: int | None = None
    source: str = "property"
    constants: dict = field(default_factory=dict)


def infer_constant_type(value) -> str:
    """The type of a constant given only on the command line: bool, int if integral, else double.

    Examples
    --------
    >>> [infer_constant_type(v) for v in ("true", "10", "1e3", "2.5", 3)]
    ['bool', 'int', 'double', 'double', 'int']
    """
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, float):
        return "double"
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return "bool"
    try:
        int(text)
        return "int"
    except ValueError:
        return "double"


@dataclass
class PropertyContext:
    """Properties to check, parsed (before any model is built), with the declarations they see.

    ``declarations`` merges the properties file's constants, labels and formulas with
    those of the properties given on the command line; ``items`` are the properties
    to answer (``PropertyNode``, with ``error`` set for one that did not parse), each
    with its source (:class:`~exactq.prism.lexer.Source`) and its 1-based index there;
    ``declaration_errors`` the declarations that did not parse.
    """

    declarations: PropertiesFile
    items: list
    declaration_errors: list
    named: dict  # name -> Expr of every named property that parsed

    @property
    def constant_names(self) -> set:
        return {d.name for d in self.declarations.constants}


def property_context(file_text: str | None = None, file_name: str = "properties", cli: tuple = (),
                     select: tuple = ()) -> PropertyContext:
    """Parse a properties file and the properties given on the command line into one context.

    Parameters
    ----------
    file_text, file_name : str, optional
        A properties file (``--props``): its constants, labels, formulas and named
        properties are seen by every property, also those of ``cli``.
    cli : tuple of str
        Properties given on the command line (each may be a small properties text).
    select : tuple of str
        ``--prop`` choices: a property's name, or its 1-based index in the file (in the
        command-line properties when there is no file). Empty: the file's properties
        are answered when no command-line property is given, else only the command
        line's.

    Raises
    ------
    PrismModelError
        For a ``--prop`` that names no property.
    """
    files = []
    if file_text is not None:
        files.append((parse_properties_text(file_text, file_name), file_name, True))
    for k, text in enumerate(cli):
        files.append((parse_properties_text(text, "property"), "property", False))
    decl = PropertiesFile(Source(file_name if file_text is not None else "property", file_text or ""))
    errors = []
    file_items, cli_items = [], []
    for pf, name, is_file in files:
        decl.constants += pf.constants
        for k, v in pf.formulas.items():
            decl.formulas.setdefault(k, v)
        for k, v in pf.labels.items():
            decl.labels.setdefault(k, v)
        errors += [(node, pf.source) for node in pf.errors]
        target = file_items if is_file else cli_items
        target += [(node, pf.source, i + 1) for i, node in enumerate(pf.properties)]
    named = {}
    for node, _, _ in file_items + cli_items:
        if node.name is not None and node.expr is not None:
            named.setdefault(node.name, node.expr)
    pool = file_items if file_text is not None else cli_items
    if select:
        chosen = []
        for s in select:
            s = str(s).strip()
            hit = None
            if s.isdigit():
                k = int(s)
                if not 1 <= k <= len(pool):
                    raise PrismModelError(f"--prop {s}: there are {len(pool)} properties (numbered from 1)")
                hit = pool[k - 1]
            else:
                name = s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s
                hit = next((it for it in pool if it[0].name == name), None)
                if hit is None:
                    names = [it[0].name for it in pool if it[0].name]
                    raise PrismModelError(f"--prop {s}: no property is named {name!r}; named properties: "
                                          f"{', '.join(names) or 'none'}")
            if hit not in chosen:
                chosen.append(hit)
        items = chosen + ([] if file_text is None else cli_items)
    else:
        items = cli_items if cli_items else file_items
    return PropertyContext(decl, items, errors, named)


def compile_properties(text, symbols: Symbols, kind: str, *, constants: dict | None = None,
                       source_name: str = "property", errors: str = "raise") -> tuple[list, set]:
    """Parse and compile PRISM properties against a model's symbols.

    Parameters
    ----------
    text : str or PropertyContext
        One property, the text of a properties file, or a context from
        :func:`property_context`.
    symbols : Symbols
        The model's constants, variables, formulas and labels.
    kind : {"ctmc", "dtmc"}
    constants : dict, optional
        Values of undefined constants of the properties, and of constants declared
        nowhere (property constants whose type is inferred from the value).
    source_name : str
        The name reported in error messages (a file name, or ``property``).
    errors : {"raise", "keep"}
        ``raise``: the first property (or declaration) that fails raises; ``keep``: it
        is returned with its ``error`` set, and the others are still compiled.

    Returns
    -------
    (list of CompiledProperty, set of str)
        The properties, and the names of the given constants that the properties
        (or their declarations) use.

    Raises
    ------
    PrismSyntaxError, PrismUnsupportedError, PrismModelError
        One line with the position (with ``errors="raise"``).
    """
    ctx = text if isinstance(text, PropertyContext) else property_context(None, source_name, (text,)) \
        if source_name == "property" else property_context(text, source_name)
    pf = ctx.declarations
    src = pf.source
    given = dict(constants or {})
    out: list = []
    failed_decls = [CompiledProperty(None, node.text, None, error=node.error, source=where.name)
                    for node, where in ctx.declaration_errors]
    if failed_decls and errors == "raise":
        raise failed_decls[0].error
    own = {d.name for d in pf.constants}
    clash = [d for d in pf.constants if d.name in symbols.constants or d.name in symbols.variables]
    for d in clash:
        err = src.model_error(d.line, d.col, f"constant {d.name!r} of the properties is already a "
                              f"{'constant' if d.name in symbols.constants else 'variable'} of the model")
        if errors == "raise":
            raise err
        failed_decls.append(CompiledProperty(None, f"const {d.name}", None, error=err))
    decls = [d for d in pf.constants if d not in clash]
    formulas = dict(symbols.formulas)
    formulas.update(pf.formulas)
    values, broken = _property_constants(decls, given, symbols, formulas, src)
    for name, err in broken.items():
        if errors == "raise":
            raise err
    declared_anywhere = set(symbols.constants) | set(symbols.variables) | own | set(formulas)
    implicit = {k: v for k, v in given.items() if k not in declared_anywhere}
    implicit_values = {}
    for k, v in implicit.items():
        type_ = infer_constant_type(v)
        implicit_values[k] = (type_, _implicit_value(k, type_, v))
    sym = Symbols(src, constants={**symbols.constants, **implicit_values, **values}, variables=symbols.variables,
                  formulas=formulas, labels={**symbols.labels, **pf.labels},
                  builtin_labels=tuple(dict.fromkeys(("init", "deadlock") + tuple(symbols.builtin_labels))),
                  allow_labels=True, property_refs=dict(ctx.named), in_properties=True, columns=dict(symbols.columns),
                  extensions=True, native=symbols.native)
    used: set = set()
    seen_names: set = set()
    for node, where, index in ctx.items:
        prop = CompiledProperty(node.name, node.text, None, index=index, source=where.name)
        try:
            if node.error is not None:
                raise node.error
            if node.name is not None:
                if node.name in seen_names or node.name in sym.labels:
                    raise src.model_error(node.line, node.col, f'the property name "{node.name}" is used twice '
                                          "(or is a label)")
                seen_names.add(node.name)
            names = _names_used(node.expr, sym)
            for name in names:
                if name in broken:
                    raise broken[name]
            used |= names & set(given)
            with deep_recursion(f"the property {node.text[:40]!r}"):
                prop.query = _Compiler(sym, where, kind).top(node.expr, node.text)
        except ExactqError as exc:
            if errors == "raise":
                raise
            prop.error = exc
        out.append(prop)
    # constants used by the property file's own declarations count as used
    for d in pf.constants:
        if d.expr is None and d.name in given:
            used.add(d.name)
    if not out and not failed_decls:
        err = src.syntax_error(1, 1, "expected a property; got none")
        if errors == "raise":
            raise err
        out.append(CompiledProperty(None, "", None, error=err))
    return failed_decls + out, used


def _implicit_value(name, type_, raw):
    text = str(raw).strip()
    if type_ == "bool":
        return raw if isinstance(raw, bool) else text.lower() == "true"
    if type_ == "int":
        return int(raw) if isinstance(raw, (int, np.integer)) else int(text)
    try:
        v = float(raw) if isinstance(raw, (int, float)) else float(text)
    except ValueError:
        raise PrismModelError(f"--const {name}={raw}: give a number, true or false") from None
    if not math.isfinite(v):
        raise PrismModelError(f"--const {name}={raw}: constant {name!r} must be finite")
    return v


def _names_used(expr, sym: Symbols, _seen=None) -> set:
    """Identifiers a property reads, through formulas, labels and property references (no recursion)."""
    seen = set() if _seen is None else _seen
    out = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        for kind, name, _ in iter_names(e):
            key = (kind, name)
            if key in seen:
                continue
            seen.add(key)
            if kind == "ident":
                out.add(name)
                if name in sym.formulas:
                    stack.append(sym.formulas[name][0])
            elif name in sym.labels:
                stack.append(sym.labels[name][0])
            elif name in sym.property_refs:
                stack.append(sym.property_refs[name])
    return out


def _property_constants(decls: list, given: dict, symbols: Symbols, formulas: dict, src: Source):
    """Values of the properties' constant declarations, each on its own: ``(values, broken)``.

    A declaration whose definition fails (a type error, a cycle) is in ``broken`` with
    its error, and so is every constant defined from it; the others keep their values.
    Undefined constants without a value get ``None`` (an error only where used).
    """
    values: dict = {}
    broken: dict = {}
    pending = list(decls)
    names = {d.name for d in decls}
    while pending:
        progress = False
        for d in list(pending):
            deps = {n for n in (_names_used(d.expr, Symbols(src, formulas=formulas)) if d.expr is not None else ())
                    if n in names and n != d.name}
            if any(n in broken for n in deps):
                bad = next(n for n in deps if n in broken)
                broken[d.name] = broken[bad]
                pending.remove(d)
                progress = True
                continue
            if not deps <= set(values):
                continue
            base = Symbols(src, constants={**symbols.constants, **values}, formulas=formulas)
            try:
                values.update(evaluate_constants([d], {k: v for k, v in given.items() if k == d.name}, base, src,
                                                 required=False))
            except ExactqError as exc:
                broken[d.name] = exc
            pending.remove(d)
            progress = True
        if not progress:
            for d in pending:
                broken[d.name] = src.model_error(d.line, d.col, f"constant {d.name!r} is defined in terms of "
                                                 "itself")
            break
    return values, broken


def _zero_one(c: Compiled, comp, expr, message: str) -> Compiled:
    """An integer state formula read as a condition: 0 and 1 are false and true, another value where used an error."""
    if c.const:
        if c.value in (0, 1):
            return Compiled("bool", c._text, c.line, c.col, value=bool(c.value))
        raise comp.err(expr, message)
    f = c.fn

    def faults(ctx, active, memo):
        if c.faults is not None:
            c.faults(ctx, active, memo)
        v = np.asarray(f(ctx))
        bad = (v != 0) & (v != 1)
        if active is not None:
            bad = bad & active
        if bad.any():
            raise comp.err(expr, message)
    return Compiled("bool", c._text, c.line, c.col, fn=lambda ctx: np.asarray(f(ctx)) != 0, depth=c.depth + 1,
                    faults=faults)


class _Compiler:
    def __init__(self, sym: Symbols, src: Source, kind: str):
        self.sym, self.src, self.kind = sym, src, kind
        self.sym.query_hook = None

    def err(self, node, message: str) -> PrismModelError:
        return self.src.model_error(getattr(node, "line", 1) or 1, getattr(node, "col", 1) or 1, message)

    def unsupported(self, node, message: str):
        return self.src.unsupported(getattr(node, "line", 1) or 1, getattr(node, "col", 1) or 1, message)

    # -- state formulas with nested operators ---------------------------------------------------
    def state(self, expr, role: str, want: str = "bool") -> StateFormula:
        deps: dict = {}
        outer = self.sym.query_hook
        self.sym.query_hook = lambda node: self._nested(node, deps)
        try:
            c = compile_expr(expr, self.sym, source=self.src)
        finally:
            self.sym.query_hook = outer
        if want == "bool" and c.type == "int" and self.sym.extensions:
            c = _zero_one(c, self, expr, f"{role} must be a condition (true or false in each state); '{expr}' is "
                          "numeric")
        if want == "bool" and c.type != "bool":
            raise self.err(expr, f"type error: {role} must be a condition; got the {c.type} expression '{expr}'")
        if want == "num" and c.type == "bool":
            if not self.sym.extensions:
                raise self.err(expr, f"type error: {role} must be a number; got the condition '{expr}'")
            f = c.fn if not c.const else (lambda ctx, v=c.value: v)
            c = Compiled("int", c._text, c.line, c.col, value=None if not c.const else int(c.value),
                         fn=None if c.const else (lambda ctx: np.asarray(f(ctx), dtype=np.int64)),
                         depth=c.depth + 1, faults=c.faults)
        return StateFormula(c, str(expr), deps)

    def _nested(self, node, deps: dict) -> Compiled:
        """An operator inside a state formula: compiled as a query, read as a column of per-state values."""
        if isinstance(node, FilterNode):
            q, type_ = self.filter(node, str(node), nested=True)
        else:
            q = self.query(node, str(node))
            type_ = "bool" if node.is_threshold else "double"
        key = f"q{len(deps)}"
        deps[key] = q
        return Compiled(type_, node, node.line, node.col, fn=lambda ctx, key=key: ctx.extra[key])

    def const(self, expr, role: str, *, allow_negative: bool = False) -> float:
        c = compile_expr(expr, self.sym, source=self.src)
        if not c.const:
            raise self.err(expr, f"{role} must be a constant expression; '{expr}' reads a variable")
        if c.type == "bool":
            raise self.err(expr, f"type error: {role} must be a number; got '{expr}'")
        v = float(c.value)
        if not math.isfinite(v):
            raise self.err(expr, f"{role} must be finite; got {expr} = {v:g}")
        if v < 0 and not allow_negative:
            raise self.err(expr, f"{role} must be >= 0; got {expr} = {v:g}")
        return v

    def time(self, expr, role: str) -> float:
        v = self.const(expr, role)
        if self.kind in ("dtmc", "mdp") and v != int(v):
            raise self.err(expr, f"{role} of a {self.kind} counts steps and must be an integer; got {expr} = {v:g}")
        return v

    def bounds(self, b) -> tuple[float, float | None]:
        if b is None:
            return 0.0, None
        lo = 0.0 if b.lower is None else self.time(b.lower, "the lower time bound")
        hi = None if b.upper is None else self.time(b.upper, "the time bound")
        if self.kind in ("dtmc", "mdp"):
            if b.upper_strict and hi is not None:
                if hi < 1:
                    raise self.err(b.upper, f"the bound '<{b.upper}' admits no step")
                hi -= 1
            if b.lower_strict:
                lo += 1
        if hi is not None and lo > hi:
            raise self.err(b.lower or b.upper, f"the time interval [{lo:g}, {hi:g}] is empty")
        return lo, hi

    # -- properties -------------------------------------------------------------------------
    def top(self, expr, text: str):
        refs = []
        while isinstance(expr, LabelRef) and expr.name not in self.sym.labels \
                and expr.name not in self.sym.builtin_labels and expr.name in self.sym.property_refs:
            if expr.name in refs:
                raise self.err(expr, f'property "{expr.name}" refers to itself ({" -> ".join(refs + [expr.name])})')
            refs.append(expr.name)
            expr = self.sym.property_refs[expr.name]
        if isinstance(expr, FilterNode):
            return self.filter(expr, text)[0]
        if isinstance(expr, QueryNode):
            return self.query(expr, text)
        f = self.state(expr, "the property", want="any")
        return Formula(f, f.type, text)

    def filter(self, node: FilterNode, text: str, nested: bool = False):
        op = node.op
        prop = node.prop
        if isinstance(prop, QueryNode):
            inner = self.query(prop, str(prop))
            ptype = "bool" if prop.is_threshold else "double"
        else:
            f = self.state(prop, "the property of the filter", want="any")
            inner, ptype = Formula(f, f.type, str(prop)), f.type
        if op in ("min", "max", "sum", "avg", "range", "argmin", "argmax") and ptype == "bool":
            raise self.err(prop, f"type error: filter {op} needs a numerical property; '{prop}' is true/false")
        if op in ("count", "forall", "exists") and ptype != "bool":
            raise self.err(prop, f"type error: filter {op} needs a true/false property; '{prop}' is {ptype}")
        states = None if node.states is None else self.state(node.states, "the states of the filter")
        q = Filter(op, inner, states, text)
        if not nested:
            return q, ptype
        if op == "range":
            raise self.err(node, "filter(range, ...) gives an interval, which cannot be used inside an expression")
        type_ = {"count": "int", "forall": "bool", "exists": "bool", "argmin": "bool", "argmax": "bool",
                 "avg": "double"}.get(op, ptype)
        return q, type_

    def query(self, node: QueryNode, text: str):
        opt = getattr(node, "opt", None)
        if self.kind == "mdp":
            if node.op in ("S", "E", "T"):
                raise self.unsupported(node, f"'{node.op}' on an mdp is outside the supported fragment (its value "
                                       "depends on the scheduler); ask Pmin/Pmax, Rmin/Rmax or LRAmin/LRAmax")
            if opt is None and not node.is_threshold:
                raise self.unsupported(node, f"'{node.op}=?' on an mdp is outside the supported fragment: its value "
                                       "depends on the scheduler, so PRISM asks for an optimum over the schedulers: "
                                       f"{node.op}min=? or {node.op}max=?")
        elif opt is not None:
            raise self.unsupported(node, f"'{node.op}{opt}' (an optimum over the schedulers of an MDP) is outside the "
                                   f"supported fragment for Markov chains; use {node.op}=?")
        q = self._query(node, text)
        if opt is not None:
            from .mdp_check import Optimum

            q = Optimum(q, opt, text if not node.is_threshold else f"{node.op}{opt}=? [ {node.body} ]")
        if node.is_threshold:
            what = {"P": "probability", "S": "probability", "R": "reward"}.get(node.op, "value")
            bound = self.const(node.threshold, f"the {what} bound", allow_negative=node.op == "R")
            if what == "probability" and not 0.0 <= bound <= 1.0:
                raise self.err(node.threshold, f"the probability bound must be in [0, 1]; got {node.threshold} = "
                               f"{bound:g}")
            q = Threshold(q, node.relation, bound, text)
        if node.old_filter is not None:
            states_expr, ops = node.old_filter
            states = self.state(states_expr, "the states of the filter")
            op = "state" if not ops else ("range" if set(ops) == {"min", "max"} else ops[0])
            if node.is_threshold and op != "state":
                raise self.err(node, f"the old-style filter {{{ops[0]}}} needs a numerical query; '{node.op}"
                               f"{node.relation}...' is true/false (use filter(forall, ...))")
            return Filter(op, q, states, text)
        return q

    def _query(self, node: QueryNode, text: str):
        op, body = node.op, node.body
        qtext = text if not node.is_threshold else f"{node.op}{getattr(node, 'opt', None) or ''}=? [ {body} ]"
        if op == "S":
            return SteadyProbability(self.state(body, "the argument of S"), qtext)
        if op == "LRA":
            f = self.state(body, "the argument of LRA", want="any")
            return SteadyProbability(f, qtext) if f.type == "bool" else SteadyExpectation(f, qtext)
        if op == "E":
            return SteadyExpectation(self.state(body, "the argument of E=?", "num"), qtext)
        if op == "T":
            return ExpectedTime(self.state(body.target, "the target of T=?"), qtext)
        if op == "P":
            pf: PathFormula = body
            if pf.kind == "X":
                return Next(self.state(pf.right, "the argument of X"), qtext)
            lo, hi = self.bounds(pf.bound)
            if pf.kind == "G":
                return Globally(self.state(pf.right, "the argument of G"), hi, lo, qtext)
            if pf.kind == "F":
                return Until(TRUE, self.state(pf.right, "the target of F"), hi, qtext, lo)
            if pf.kind == "U":
                return Until(self.state(pf.left, "the left side of U"), self.state(pf.right, "the right side of U"),
                             hi, qtext, lo)
            # PRISM's conversions: a W b = !((a & !b) U (!a & !b)), a R b = !(!a U !b)
            a, b = pf.left, pf.right
            if pf.kind == "W":
                left = Binary("&", a, Unary("!", b, b.line, b.col), a.line, a.col)
                right = Binary("&", Unary("!", a, a.line, a.col), Unary("!", b, b.line, b.col), a.line, a.col)
                return Until(self.state(left, "the sides of W"), self.state(right, "the sides of W"), hi, qtext, lo,
                             negated=True)
            left = Unary("!", a, a.line, a.col)
            right = Unary("!", b, b.line, b.col)
            return Until(self.state(left, "the left side of R"), self.state(right, "the right side of R"), hi, qtext,
                         lo, negated=True)
        # R
        rp: RewardPath = body
        reward = node.reward
        if rp.kind == "S":
            return RewardQuery(reward, "steady", text=qtext)
        if rp.kind == "F":
            return RewardQuery(reward, "reachability", target=self.state(rp.target, "the target of R=? [ F b ]"),
                               text=qtext)
        if rp.kind == "C" and rp.time is None:
            return RewardQuery(reward, "total", text=qtext)
        t = self.time(rp.time, "the time bound")
        return RewardQuery(reward, "cumulative" if rp.kind == "C" else "instantaneous", time=t, text=qtext)


