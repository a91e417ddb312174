"""Meaning of a parsed PRISM file: constants, formulas, renaming, types, and vectorised evaluation.

:func:`analyse` turns a :class:`~exactq.prism.syntax.ModelFile` into a
:class:`ModelInfo`: the variables (globals first, then each module's, in the order of
the file, as PRISM orders them), the modules with their commands, the reward
structures and labels, all with their expressions *compiled* into vectorised
evaluators (:class:`Compiled`).

The steps follow PRISM's own (``ModulesFile.tidyUp``): formulas are expanded first
(they are macros, so a renamed module sees the renamed variables of its formulas),
then modules defined by renaming are copied with a simultaneous substitution of the
renamed identifiers and actions, then constants are evaluated in dependency order
(undefined ones come from the user), then every identifier is resolved and every
expression type-checked (``int``, ``double``, ``bool``: ``/`` is real division,
``floor``/``ceil``/``round`` are integers, ``mod`` is the non-negative integer
remainder, ``log(x, b)`` the logarithm to base ``b``).

A compiled expression is evaluated on an :class:`EvalContext`: the columns of a whole
array of states (one integer column per variable). Constants are folded at compile
time, so an evaluation is a few numpy operations on whole columns, never a loop over
states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .lexer import MAX_NESTING, PrismModelError, Source, deep_recursion
from .syntax import (
    Assign, Binary, Call, Chain, CommandNode, Comparison, Expr, FilterNode, Ident, Ite, LabelRef, Literal, ModelFile,
    ModuleNode, QueryNode, RenamedModuleNode, Unary, UpdateNode, VarDecl,
)

__all__ = ["Compiled", "EvalContext", "Symbols", "ModelInfo", "analyse", "compile_expr", "evaluate_constants",
           "expand_formulas", "iter_names"]


# ============================================================================ evaluation
class EvalContext:
    """The columns of an array of states, with a memo of evaluated sub-expressions.

    Parameters
    ----------
    states : (n, d) ndarray of int, or a space
        One row per state, one column per variable (booleans as 0/1); or a space whose
        columns are decoded one at a time (``n_states`` and ``column_at(j)``, as
        :class:`~exactq.statespace.StateSpace`), so that only the columns read are made.
    labels : mapping, optional
        Per-state boolean arrays of built-in labels (``"init"``, ``"deadlock"``).
    extra : mapping, optional
        Per-state values of the operators nested in a property (``P>0.9 [ ... ]`` inside a
        state formula), computed by the checker before the formula is evaluated.
    named : mapping, optional
        Per-state values of a native chain's rewards and labels, read by name
        (:attr:`Symbols.columns`).
    """

    __slots__ = ("states", "n", "_cols", "_bools", "labels", "memo", "extra", "named", "_column")

    def __init__(self, states, labels=None, extra=None, named=None):
        if isinstance(states, np.ndarray):
            self.states, self._column = states, None
            self.n = states.shape[0]
        else:  # a space: its columns, one at a time
            self.states, self._column = None, states.column_at
            self.n = states.n_states
        self._cols: dict = {}
        self._bools: dict = {}
        self.labels = labels or {}
        self.memo: dict = {}
        self.extra = extra or {}
        self.named = named or {}

    def col(self, j: int) -> np.ndarray:
        c = self._cols.get(j)
        if c is None:
            c = self._cols[j] = np.ascontiguousarray(self.states[:, j] if self._column is None else self._column(j))
        return c

    def bcol(self, j: int) -> np.ndarray:
        c = self._bools.get(j)
        if c is None:
            c = self._bools[j] = self.col(j) != 0
        return c

    def subset(self, rows: np.ndarray) -> "EvalContext":
        """The context of the rows ``rows`` (columns gathered lazily)."""
        sub = _SubContext(self, rows)
        return sub


class _SubContext(EvalContext):
    __slots__ = ("parent", "rows")

    def __init__(self, parent: EvalContext, rows: np.ndarray):
        self.parent, self.rows = parent, rows
        self.states = None
        self.n = len(rows)
        self._cols, self._bools, self.memo = {}, {}, {}
        self.labels = {k: v[rows] for k, v in parent.labels.items()}
        self.extra = {k: (v[rows] if np.ndim(v) else v) for k, v in parent.extra.items()}
        self.named = {k: (v[rows] if np.ndim(v) else v) for k, v in parent.named.items()}

    def col(self, j: int) -> np.ndarray:
        c = self._cols.get(j)
        if c is None:
            c = self._cols[j] = self.parent.col(j)[self.rows]
        return c


class Compiled:
    """A type-checked expression: a folded constant or a vectorised function of the state columns.

    ``eval(ctx)`` returns a Python scalar (constant) or an ``(ctx.n,)`` array; ``full(ctx)``
    always returns an array. ``text`` is the expression's source form (made on first use:
    a deep tree is not printed at every level while it is compiled).
    """

    __slots__ = ("type", "_text", "line", "col", "value", "fn", "depth", "faults", "shift")

    def __init__(self, type: str, text, line: int, col: int, value: object = None, fn: object = None,  # noqa: A002
                 depth: int = 0, faults=None):
        self.type, self._text, self.line, self.col, self.value, self.fn = type, text, line, col, value, fn
        #: ``(j, c)`` when the value is the integer state column ``j`` plus the integer constant ``c`` (``x``,
        #: ``x + 1``, ``x - K``): an update ``x' = x + c`` changes ``x`` by ``c`` in every state, which the
        #: builder applies without evaluating it (:meth:`exactq.prism.builder._Builder._pairs`)
        self.shift = None
        self.depth = depth  # nested calls of the evaluation: deep ones get room for their recursion
        #: properties and native queries: ``faults(ctx, active, memo)`` raises for an arithmetic fault (a division by
        #: zero, a value that is not finite, a number used as a boolean that is not 0 or 1) in a state where the
        #: faulty term is used (``active``: a mask, or None for every state); None when no term can fault
        self.faults = faults

    @property
    def text(self) -> str:
        if not isinstance(self._text, str):
            self._text = str(self._text)
        return self._text

    def __repr__(self) -> str:
        return f"Compiled({self.type!r}, {self.text!r})"

    @property
    def const(self) -> bool:
        return self.fn is None

    def eval(self, ctx: EvalContext):
        if self.fn is None:
            return self.value
        if self.depth < 200:  # the common case: no guard to pay for
            return self.fn(ctx)
        with deep_recursion("the expression"):
            return self.fn(ctx)

    def full(self, ctx: EvalContext) -> np.ndarray:
        v = self.eval(ctx)
        dtype = bool if self.type == "bool" else (np.int64 if self.type == "int" else float)
        if np.ndim(v) == 0:
            return np.full(ctx.n, v, dtype=dtype)
        return np.asarray(v, dtype=dtype)

    def checked(self, ctx: EvalContext) -> np.ndarray:
        """``full(ctx)``, after checking that no term used in a state faults there (short-circuit semantics).

        In ``a & b`` the operand ``b`` matters only where ``a`` holds, in ``c ? x : y`` each
        branch only where it is chosen: a division by zero (or another fault) elsewhere is
        not an error, and where it matters it is one :class:`PrismModelError` naming the term
        and the first such state, never a silent ``nan`` or ``inf``.
        """
        if self.faults is not None:
            with np.errstate(all="ignore"):
                if self.depth < 200:
                    self.faults(ctx, None, {})
                else:
                    with deep_recursion("the expression"):
                        self.faults(ctx, None, {})
        with np.errstate(all="ignore"):
            return self.full(ctx)


_NP_TYPE = {"int": np.int64, "double": np.float64, "bool": np.bool_}


def _num_type(*types: str) -> str:
    return "int" if all(t == "int" for t in types) else "double"


# ============================================================================ symbols
@dataclass
class VarInfo:
    name: str
    type: str
    lo: int
    hi: int
    init: object  # int, or None when an init...endinit block gives the initial states
    module: str | None
    index: int
    line: int
    col: int


@dataclass
class Symbols:
    """What identifiers mean: constants (values), variables (columns), formulas and labels (expressions)."""

    source: Source
    constants: dict = field(default_factory=dict)  # name -> (type, value)
    variables: dict = field(default_factory=dict)  # name -> VarInfo
    formulas: dict = field(default_factory=dict)  # name -> (Expr, line, col)
    labels: dict = field(default_factory=dict)  # name -> (Expr, line, col)
    builtin_labels: tuple = ()
    allow_labels: bool = False
    #: properties only: compiles a query or filter nested in an expression (see exactq.prism.properties)
    query_hook: object = None
    #: properties only: the named properties a reference "name" may expand to (name -> Expr)
    property_refs: dict = field(default_factory=dict)
    #: the symbols of properties (an unknown name may be a constant that --const should give)
    in_properties: bool = False
    #: per-state values read by name from ``EvalContext.named`` (a native chain's rewards and labels): name -> type
    columns: dict = field(default_factory=dict)
    #: the extensions of properties and native queries: booleans count as 0/1 in arithmetic and comparisons,
    #: integers 0/1 act as booleans, %, //, ^, abs, sqrt, exp, log(x), bare label names; faults are checked
    extensions: bool = False
    #: native queries and expressions (exactq.query): their error messages
    native: bool = False

    def error(self, node, message: str) -> PrismModelError:
        return self.source.model_error(getattr(node, "line", 0) or 1, getattr(node, "col", 0) or 1, message)


def compile_expr(expr: Expr, sym: Symbols, *, source: Source | None = None, _stack=()) -> Compiled:
    """Type-check and compile an expression (formulas expanded, constants folded).

    Raises
    ------
    PrismModelError
        For an unknown identifier, a type error or a constant fault (division by zero),
        naming the position.

    Examples
    --------
    >>> from exactq.prism.syntax import parse_model_text
    >>> from exactq.prism.lexer import Source
    >>> src = Source("m", "")
    >>> sym = Symbols(src, constants={"N": ("int", 4)},
    ...               variables={"x": VarInfo("x", "int", 0, 9, 0, "M", 0, 1, 1)})
    >>> e = parse_model_text("ctmc module M x:[0..9]; [] x < N -> x/2 : (x'=x+1); endmodule").modules[0]
    >>> g = compile_expr(e.commands[0].guard, sym)
    >>> g.type, g.full(EvalContext(np.array([[3], [4]]))).tolist()
    ('bool', [True, False])
    """
    src = source or sym.source
    with deep_recursion(f"the expression at {src.at(getattr(expr, 'line', 1) or 1, getattr(expr, 'col', 1) or 1)}"):
        return _Compiler(sym, src, _stack, top=expr).compile(expr)


class _Compiler:
    """Type-checks and compiles one expression (see :func:`compile_expr`).

    Under :attr:`Symbols.extensions` (properties and native queries) the compiler also
    coerces booleans used as numbers to 0/1 and integers used as booleans (checked to
    be 0 or 1 where used), compiles ``%``, ``//``, ``^`` and the extended functions, and
    attaches to each term that can fault the check :meth:`Compiled.checked` runs.
    """

    def __init__(self, sym: Symbols, src: Source, stack, top=None):
        self.sym, self.src, self.stack = sym, src, tuple(stack)
        self.ext = sym.extensions
        self.native = sym.native
        self._top = top  # the expression fault messages name (its text made on first use)

    @property
    def whole(self) -> str:
        if self.native:
            return self.src.text.strip()
        if not isinstance(self._top, str):
            self._top = str(self._top)
        return self._top

    def sub(self, stack) -> "_Compiler":
        return _Compiler(self.sym, self.src, stack, self._top)

    def err(self, node, message: str) -> PrismModelError:
        return self.src.model_error(node.line or 1, node.col or 1, message)

    def const(self, node, type_: str, value) -> Compiled:
        return Compiled(type_, node, node.line, node.col, value=value)

    def compile(self, node: Expr) -> Compiled:
        if isinstance(node, Literal):
            return self.const(node, node.type, node.value)
        if isinstance(node, Ident):
            return self.ident(node)
        if isinstance(node, LabelRef):
            return self.label(node)
        if isinstance(node, Unary):
            return self.unary(node)
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Chain):
            return self.chain(node)
        if isinstance(node, Comparison):
            return self.comparison(node)
        if isinstance(node, Ite):
            return self.ite(node)
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, (QueryNode, FilterNode)):
            if self.sym.query_hook is None:
                raise self.err(node, f"the query '{node}' can only be used in a property, not in the model")
            return self.sym.query_hook(node)
        raise self.err(node, f"unsupported expression {node}")  # pragma: no cover

    def ident(self, node: Ident) -> Compiled:
        name = node.name
        sym = self.sym
        if name in sym.variables:
            v = sym.variables[name]
            j = v.index
            if v.type == "bool":
                return Compiled("bool", name, node.line, node.col, fn=lambda ctx, j=j: ctx.bcol(j))
            out = Compiled("int", name, node.line, node.col, fn=lambda ctx, j=j: ctx.col(j))
            out.shift = (j, 0)
            return out
        if name in sym.constants:
            type_, value = sym.constants[name]
            if value is None:
                raise self.err(node, f"constant {name!r} has no value; give it with --const {name}=VALUE")
            return self.const(node, type_, value)
        if name in sym.formulas:
            if name in self.stack:
                raise self.err(node, f"formula {name!r} is defined in terms of itself "
                               f"({' -> '.join(self.stack + (name,))})")
            if len(self.stack) >= MAX_NESTING:
                raise PrismModelError(f"formula {self.stack[0]!r} expands formulas nested deeper than {MAX_NESTING} "
                                      f"levels ({self.stack[0]} -> {self.stack[1]} -> ... -> {name})")
            expr = sym.formulas[name][0]
            inner = self.sub(self.stack + (name,)).compile(expr)
            return inner
        if name in sym.columns:
            return Compiled(sym.columns[name], name, node.line, node.col, fn=lambda ctx, name=name: ctx.named[name])
        if self.ext and sym.allow_labels and (name in sym.labels or name in sym.builtin_labels):
            return self.label(LabelRef(name, node.line, node.col))  # an extension: a label by its bare name
        if self.native:
            pool = sorted(set(sym.variables) | set(sym.constants) | set(sym.columns) | set(sym.labels)
                          | set(sym.builtin_labels))
            close = __import__("difflib").get_close_matches(name, pool, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            shown = ", ".join(pool[:30]) + (", ..." if len(pool) > 30 else "")
            raise self.err(node, f"unknown name {name!r} in expression {self.whole!r}{hint}; valid: "
                           f"{shown or '(none)'}")
        hint = _hint(name, sym)
        if not hint and sym.in_properties:
            hint = f" (a constant that only the properties use is given with --const {name}=VALUE)"
        raise self.err(node, f"unknown identifier {name!r}" + hint)

    def label(self, node: LabelRef) -> Compiled:
        sym = self.sym
        name = node.name
        if name in sym.columns:  # a native chain's label (or reward), quoted
            return self.ident(Ident(name, node.line, node.col))
        if not sym.allow_labels:
            raise self.err(node, f'the label "{name}" cannot be used here (labels are for properties)')
        if name in sym.labels:
            key = "label:" + name
            if key in self.stack:
                raise self.err(node, f'label "{name}" is defined in terms of itself')
            return self.sub(self.stack + (key,)).compile(sym.labels[name][0])
        if name in sym.builtin_labels:
            return Compiled("bool", node, node.line, node.col, fn=lambda ctx, name=name: ctx.labels[name])
        if name in sym.property_refs:
            key = "property:" + name
            if key in self.stack:
                raise self.err(node, f'property "{name}" refers to itself '
                               f"({' -> '.join(k.split(':', 1)[1] for k in self.stack if k.startswith('property:'))}"
                               f" -> {name})")
            return self.sub(self.stack + (key,)).compile(sym.property_refs[name])
        known = sorted(set(sym.labels) | set(sym.builtin_labels) | set(sym.property_refs))
        raise self.err(node, f'unknown label "{name}"; valid: {", ".join(chr(34) + k + chr(34) for k in known)}')

    # -- types ---------------------------------------------------------------------
    def need(self, c: Compiled, type_: str, node, role: str) -> None:
        if c.type != type_:
            raise self.err(node, f"type error: {role} must be {type_}; got the {c.type} expression '{c.text}'")

    def need_num(self, c: Compiled, node, role: str) -> Compiled:
        """``c`` as a number: a boolean counts as 0/1 under the extensions, else is a type error."""
        if c.type != "bool":
            return c
        if not self.ext:
            raise self.err(node, f"type error: {role} must be a number; got the bool expression '{c.text}'")
        if c.const:
            return self.const(node, "int", int(bool(c.value)))
        f = c.fn
        return Compiled("int", c._text, c.line, c.col, fn=lambda ctx: np.asarray(f(ctx), dtype=np.int64),
                        depth=c.depth + 1, faults=c.faults)

    def need_bool(self, c: Compiled, node, role: str, native_role: str | None = None) -> Compiled:
        """``c`` as a condition: under the extensions an integer 0/1 acts as a boolean (checked where used)."""
        if c.type == "bool":
            return c
        role_n = native_role or role
        if self.ext and c.type == "int":
            if c.const:
                if c.value in (0, 1):
                    return self.const(node, "bool", bool(c.value))
                raise self.err(node, f"{role_n} must be boolean; got the number '{c.text}' in expression "
                               f"{self.whole!r}")
            f, whole = c.fn, self.whole

            def own(ctx, active, memo, c=c, node=node):
                v = _value(c, ctx, memo)
                _fail(self, node, _used((v != 0) & (v != 1), active), f"{role_n} must be boolean; got the number "
                      f"'{c.text}' in expression {whole!r}", where=False)
            return Compiled("bool", c._text, c.line, c.col, fn=lambda ctx: np.asarray(f(ctx)) != 0,
                            depth=c.depth + 1, faults=_seq(c.faults, own))
        if self.native:
            raise self.err(node, f"{role_n} must be boolean; got the number '{c.text}' in expression {self.whole!r}")
        raise self.err(node, f"type error: {role} must be bool; got the {c.type} expression '{c.text}'")

    def unary(self, node: Unary) -> Compiled:
        a = self.compile(node.arg)
        if node.op == "!":
            a = self.need_bool(a, node, "the operand of '!'")
            return self.fold(node, "bool", np.logical_not, a)
        a = self.need_num(a, node, "the operand of unary '-'")
        return self.fold(node, a.type, np.negative, a)

    def fold(self, node, type_: str, op, *args: Compiled, own=None, logic: str | None = None) -> Compiled:
        """Apply a numpy ufunc-like ``op`` to the operands, folding when all are constant.

        ``own(out, ctx, active, memo)`` checks this term's own faults; ``logic`` (``&``,
        ``|``, ``=>``) makes the operands' checks short-circuit.
        """
        if all(a.const for a in args):
            with np.errstate(all="ignore"):
                v = op(*[a.value for a in args])
            return self.const(node, type_, _scalar(v, type_, self, node))
        fns = [a.fn if not a.const else (lambda ctx, v=a.value: v) for a in args]
        depth = 2 + max(a.depth for a in args)
        if len(fns) == 1:
            f0 = fns[0]
            out = Compiled(type_, node, node.line, node.col, fn=lambda ctx: op(f0(ctx)), depth=depth)
        elif len(fns) == 2:
            f0, f1 = fns
            out = Compiled(type_, node, node.line, node.col, fn=lambda ctx: op(f0(ctx), f1(ctx)), depth=depth)
        else:
            out = Compiled(type_, node, node.line, node.col, fn=lambda ctx: op(*[f(ctx) for f in fns]), depth=depth)
        if logic is not None:
            out.faults = _logic_faults(logic, list(args))
        else:
            out.faults = _seq(*[a.faults for a in args], None if own is None else (lambda ctx, act, memo: own(
                out, args, ctx, act, memo)))
        return out

    def binary(self, node: Binary) -> Compiled:
        return self._binary(node, node.op, self.compile(node.left), self.compile(node.right), node.left, node.right)

    def _coerce(self, node, op: str, a: Compiled, b: Compiled, left, right):
        """The operands of ``a op b`` as the operator needs them (the extensions' coercions)."""
        native_role = f"an operand of '{op}'"
        if op in ("&", "|", "=>") or (op == "<=>" and (not self.ext or (a.type == "bool") == (b.type == "bool"))):
            a = self.need_bool(a, left, f"the left operand of '{op}'", native_role)
            b = self.need_bool(b, right, f"the right operand of '{op}'", native_role)
        elif op in ("=", "!=", "<=>"):
            if self.ext and (a.type == "bool") != (b.type == "bool"):
                a, b = self.need_num(a, left, ""), self.need_num(b, right, "")
        elif op in ("<", "<=", ">", ">=", "+", "-", "*", "/", "%", "//", "^"):
            a = self.need_num(a, left, f"the left operand of '{op}'")
            b = self.need_num(b, right, f"the right operand of '{op}'")
        return a, b

    def _binary(self, node, op: str, a: Compiled, b: Compiled, left, right) -> Compiled:
        """Type-check and compile ``a op b``."""
        a, b = self._coerce(node, op, a, b, left, right)
        f, type_ = self._operator(node, "=" if op == "<=>" and a.type != "bool" else op, a, b, left, right)
        if op in ("&", "|", "=>"):
            return self.fold(node, type_, f, a, b, logic=op)
        if self.ext and op in ("/", "//", "%") and b.const and b.value == 0 and a.const:
            raise self.err(node, self._division_message(right))
        out = self.fold(node, type_, f, a, b, own=self._own_faults(node, op, right))
        if op in ("+", "-") and not out.const and type_ == "int":
            out.shift = _shifted(a, op, b)
        return out

    def _division_message(self, divisor) -> str:
        return f"division by zero in expression {self.whole!r}: divisor '{divisor}' is 0"

    def _own_faults(self, node, op: str, divisor=None):
        """The fault check of one term (extensions only): a zero divisor where used, a non-finite result."""
        divides = op in ("/", "//", "%", "mod")
        finite = op in ("+", "-", "*", "/", "^", "//", "%", "sqrt", "exp", "log", "pow", "mod")
        if not self.ext or not (divides or finite):
            return None
        whole = self.whole

        def own(out, args, ctx, active, memo):
            operands = [_value(a, ctx, memo) for a in args]
            if divides:
                d = operands[-1]
                zero = _used(np.asarray(d) == 0, active)
                _fail(self, node, zero, f"division by zero in expression {whole!r}: divisor '{divisor}' is 0")
            if finite and out.type == "double":
                r = _value(out, ctx, memo)
                bad = ~np.isfinite(r)
                for x in operands:
                    x = np.asarray(x)
                    if x.dtype.kind == "f":
                        bad = bad & np.isfinite(x)
                _fail(self, node, _used(bad, active), f"arithmetic fault in expression {whole!r}: '{node}' is not "
                      "finite", tail=" (division by zero, overflow or invalid argument)")
        return own

    def chain(self, node: Chain) -> Compiled:
        """A flat run ``e0 op1 e1 op2 e2 ...``, evaluated left to right by one function (no nested calls)."""
        acc = self.compile(node.first)
        left = node.first
        head = None
        steps = []  # (elementwise op, Compiled operand, op, operand node) after the constant prefix, folded
        logic = node.rest[0][0] if node.rest[0][0] in ("&", "|") else None  # a run of one precedence level
        for op, e in node.rest:
            c = self.compile(e)
            if head is None and acc.const and c.const:
                acc = self._binary(node, op, acc, c, left, e)
                continue
            acc_c, c = self._coerce(node, op, acc if head is None else _TypeOnly(acc.type), c, left, e)
            if head is None:
                acc = acc_c
            f, type_ = self._operator(node, op, _TypeOnly(acc_c.type), c, left, e)
            if head is None:
                head = acc
            steps.append((f, c, op, e))
            acc = Compiled(type_, node, node.line, node.col, fn=_typed_only)
        if head is None:
            return self.const(node, acc.type, acc.value)
        p0 = head.fn if not head.const else (lambda ctx, v=head.value: v)
        fns = [(f, c.fn if not c.const else (lambda ctx, v=c.value: v)) for f, c, _, _ in steps]

        def run(ctx):
            value = p0(ctx)
            for f, g in fns:
                value = f(value, g(ctx))
            return value
        depth = 2 + max([head.depth] + [c.depth for _, c, _, _ in steps])
        out = Compiled(acc.type, node, node.line, node.col, fn=run, depth=depth)
        if acc.type == "int":  # x + 1 - K: the column and one constant
            shift = head.shift
            for _, c, op, _ in steps:
                shift = _shift_by(shift, op, c)
            out.shift = shift
        if self.ext:
            out.faults = self._chain_faults(node, head, steps, logic)
        return out

    def _chain_faults(self, node, head: Compiled, steps: list, logic: str | None):
        parts = [head] + [c for _, c, _, _ in steps]
        if logic in ("&", "|"):
            return _logic_faults(logic, parts)
        if not any(p.faults for p in parts) and not any(op in ("/", "//", "%", "+", "-", "*", "^")
                                                         for _, _, op, _ in steps):
            return None
        whole = self.whole

        def faults(ctx, active, memo):
            for p in parts:
                if p.faults is not None:
                    p.faults(ctx, active, memo)
            value = _value(head, ctx, memo)
            text = str(node.first)
            for f, c, op, e in steps:
                x = _value(c, ctx, memo)
                text = f"{text} {op} {e}"
                if op in ("/", "//", "%"):
                    _fail(self, node, _used(np.asarray(x) == 0, active), f"division by zero in expression "
                          f"{whole!r}: divisor '{e}' is 0")
                new = f(value, x)
                if np.asarray(new).dtype.kind == "f":
                    bad = ~np.isfinite(new)
                    for y in (value, x):
                        y = np.asarray(y)
                        if y.dtype.kind == "f":
                            bad = bad & np.isfinite(y)
                    _fail(self, node, _used(bad, active), f"arithmetic fault in expression {whole!r}: '{text}' is "
                          "not finite", tail=" (division by zero, overflow or invalid argument)")
                value = new
        return faults

    def comparison(self, node: Comparison) -> Compiled:
        """``e0 < e1 <= e2 ...``: the conjunction of the pairwise comparisons (each operand evaluated once)."""
        items = [(None, node.first)] + list(node.rest)
        compiled = [self.compile(e) for _, e in items]
        out = None
        for k in range(1, len(items)):
            op, e = items[k]
            pair = self._binary(node, op, compiled[k - 1], compiled[k], items[k - 1][1], e)
            out = pair if out is None else self.fold(node, "bool", np.logical_and, out, pair)
        return out

    def _operator(self, node, op: str, a, b, left, right):
        if op in ("&", "|", "=>", "<=>"):
            self.need(a, "bool", left, f"the left operand of '{op}'")
            self.need(b, "bool", right, f"the right operand of '{op}'")
            f = {"&": np.logical_and, "|": np.logical_or,
                 "=>": lambda x, y: np.logical_or(np.logical_not(x), y), "<=>": np.equal}[op]
            return f, "bool"
        if op in ("=", "!="):
            if (a.type == "bool") != (b.type == "bool"):
                raise self.err(node, f"type error: '{op}' compares the {a.type} '{a.text}' with the {b.type} "
                               f"'{b.text}'")
            return (np.equal if op == "=" else np.not_equal), "bool"
        if a.type == "bool" or b.type == "bool":
            self.need_num(a, left, f"the left operand of '{op}'")
            self.need_num(b, right, f"the right operand of '{op}'")
        if op in ("<", "<=", ">", ">="):
            return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op], "bool"
        if op == "/":
            return (lambda x, y: np.true_divide(x, y)), "double"
        if op == "//":
            return (lambda x, y: np.floor_divide(x, np.where(np.asarray(y) == 0, 1, y))), _num_type(a.type, b.type)
        if op == "%":
            return (lambda x, y: np.mod(x, np.where(np.asarray(y) == 0, 1, y))), _num_type(a.type, b.type)
        if op == "^":
            return (lambda x, y: np.power(np.asarray(x, dtype=float), y)), "double"
        return {"+": np.add, "-": np.subtract, "*": np.multiply}[op], _num_type(a.type, b.type)

    def ite(self, node: Ite) -> Compiled:
        c, a, b = self.compile(node.cond), self.compile(node.then), self.compile(node.other)
        c = self.need_bool(c, node.cond, "the condition of 'c ? a : b'")
        if (a.type == "bool") != (b.type == "bool"):
            if not self.ext:
                raise self.err(node, f"type error: the branches of 'c ? a : b' are {a.type} and {b.type}")
            a, b = self.need_num(a, node.then, ""), self.need_num(b, node.other, "")
        type_ = "bool" if a.type == "bool" else _num_type(a.type, b.type)
        if c.const:
            chosen = a if c.value else b
            if chosen.type != type_ and type_ == "double":
                return self.fold(node, "double", lambda x: np.asarray(x, dtype=float), chosen)
            return chosen
        out = self.fold(node, type_, np.where, c, a, b)
        if out.fn is not None and any(x.faults for x in (c, a, b)):
            out.faults = _ite_faults(c, a, b)
        return out

    def call(self, node: Call) -> Compiled:
        name = node.fn
        args = [self.compile(a) for a in node.args]
        args = [self.need_num(a, node.args[k], f"argument {k + 1} of {name}()") for k, a in enumerate(args)]
        if name in ("min", "max"):
            f = np.minimum if name == "min" else np.maximum
            type_ = _num_type(*(a.type for a in args))
            out = args[0]
            if len(args) == 1:
                return out
            for a in args[1:]:
                out = self.fold(node, type_, f, out, a)
            return out
        if name in ("floor", "ceil", "round"):
            f = {"floor": np.floor, "ceil": np.ceil, "round": lambda x: np.floor(np.add(x, 0.5))}[name]
            if args[0].type == "int":
                return args[0]
            return self.fold(node, "int", lambda x: _to_int(f(x)), args[0])
        if name == "abs":
            return self.fold(node, args[0].type, np.abs, args[0])
        if name in ("sqrt", "exp") or (name == "log" and len(args) == 1):
            f = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log}[name]
            return self.fold(node, "double", lambda x: f(np.asarray(x, dtype=float)), args[0],
                             own=self._own_faults(node, name))
        if name == "pow":
            if args[0].type == "int" and args[1].type == "int":
                def ipow(x, y, node=node):
                    if np.any(np.asarray(y) < 0):
                        raise self.err(node, f"pow({node.args[0]}, {node.args[1]}) has a negative integer "
                                       "exponent")
                    return np.power(x, y)
                return self.fold(node, "int", ipow, *args)
            return self.fold(node, "double", lambda x, y: np.power(np.asarray(x, dtype=float), y), *args,
                             own=self._own_faults(node, "pow"))
        if name == "mod":
            if self.ext:
                type_ = _num_type(args[0].type, args[1].type)
                if all(a.const for a in args) and args[1].value == 0:
                    raise self.err(node, self._division_message(node.args[1]))
                return self.fold(node, type_, lambda x, y: np.mod(x, np.where(np.asarray(y) == 0, 1, y)), *args,
                                 own=self._own_faults(node, "mod", node.args[1]))
            for k, a in enumerate(args):
                if a.type != "int":
                    raise self.err(node.args[k], f"type error: argument {k + 1} of mod() must be int; got the "
                                   f"{a.type} expression '{a.text}'")

            def imod(x, y, node=node):
                if np.any(np.asarray(y) == 0):
                    raise self.err(node, f"mod({node.args[0]}, {node.args[1]}): modulo by zero")
                return np.mod(x, y)
            return self.fold(node, "int", imod, *args)
        if name == "log":
            return self.fold(node, "double", lambda x, b: np.log(np.asarray(x, dtype=float)) / np.log(b), *args,
                             own=self._own_faults(node, "log"))
        raise self.err(node, f"unknown function {name!r}")  # pragma: no cover (the parser checks)


def _shift_by(shift: tuple[int, int] | None, op: str, c) -> tuple[int, int] | None:
    """``shift`` (a column plus a constant, :attr:`Compiled.shift`) after ``+ c`` or ``- c`` for an integer
    constant operand ``c``; None when either is not so."""
    if shift is None or op not in ("+", "-") or not (c.const and c.type == "int") \
            or not isinstance(c.value, (int, np.integer)) or isinstance(c.value, bool):
        return None
    j, k = shift
    return j, (k + int(c.value) if op == "+" else k - int(c.value))


def _shifted(a, op: str, b) -> tuple[int, int] | None:
    """``(j, c)`` of ``a + b`` or ``a - b`` when one is a column plus a constant and the other an integer
    constant (``K - x`` is not: it negates the column), else None (see :attr:`Compiled.shift`)."""
    return _shift_by(a.shift, op, b) or (_shift_by(b.shift, op, a) if op == "+" else None)


class _TypeOnly:
    """An operand known only by its type (inside a Chain, the running value)."""

    __slots__ = ("type",)
    const = False
    faults = None
    text = "(the running value)"

    def __init__(self, type_: str):
        self.type = type_


# -- fault checks (properties and native queries) ------------------------------------------
def _value(c: Compiled, ctx: EvalContext, memo: dict) -> np.ndarray:
    """``c``'s values on ``ctx``, once per check."""
    key = id(c)
    v = memo.get(key)
    if v is None:
        v = memo[key] = c.full(ctx)
    return v


def _used(mask, active):
    mask = np.asarray(mask)
    return mask if active is None else (mask & active)


def _fail(comp: "_Compiler", node, bad, message: str, *, tail: str = "", where: bool = True) -> None:
    """Raise ``message`` (with the first state where ``bad``, when ``where``) if any state is bad."""
    bad = np.asarray(bad)
    if not bad.any():
        return
    state = f" in state {int(np.flatnonzero(bad)[0])}" if where and bad.ndim else ""
    raise comp.err(node, f"{message}{state}{tail}")


def _seq(*checks):
    """The checks in turn (None when there are none)."""
    checks = [c for c in checks if c is not None]
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]

    def run(ctx, active, memo):
        for c in checks:
            c(ctx, active, memo)
    return run


def _logic_faults(op: str, parts: list):
    """Short circuit: in ``a & b`` the checks of ``b`` run only where ``a`` holds (``|``: where it fails)."""
    if not any(p.faults for p in parts):
        return None

    def run(ctx, active, memo):
        open_ = active
        for k, p in enumerate(parts):
            if p.faults is not None:
                p.faults(ctx, open_, memo)
            if k + 1 < len(parts):
                v = np.asarray(_value(p, ctx, memo), dtype=bool)
                keep = v if op in ("&", "=>") else ~v
                open_ = keep if open_ is None else (open_ & keep)
    return run


def _ite_faults(c: Compiled, a: Compiled, b: Compiled):
    def run(ctx, active, memo):
        if c.faults is not None:
            c.faults(ctx, active, memo)
        t = np.asarray(_value(c, ctx, memo), dtype=bool)
        if a.faults is not None:
            a.faults(ctx, _used(t, active), memo)
        if b.faults is not None:
            b.faults(ctx, _used(~t, active), memo)
    return run


def _typed_only(ctx):  # pragma: no cover - a placeholder carrying a type inside Chain compilation
    raise AssertionError("a type placeholder was evaluated")


def _to_int(x):
    a = np.asarray(x)
    if a.ndim == 0:
        return int(a) if np.isfinite(a) else a
    return a.astype(np.int64)


def _scalar(v, type_: str, comp: _Compiler, node):
    """A folded constant as a Python scalar; a constant fault is an error at its position."""
    v = np.asarray(v)
    if type_ == "bool":
        return bool(v)
    if type_ == "int":
        return int(v)
    f = float(v)
    if not math.isfinite(f):
        if comp.ext:
            raise comp.err(node, f"arithmetic fault in expression {comp.whole!r}: '{node}' is not finite (division "
                           "by zero, overflow or invalid argument)")
        raise comp.err(node, f"the constant expression '{node}' is not finite (division by zero or overflow)")
    return f


def _hint(name: str, sym: Symbols) -> str:
    import difflib

    pool = list(sym.variables) + list(sym.constants) + list(sym.formulas) + list(sym.columns)
    close = difflib.get_close_matches(name, pool, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ============================================================================ formulas, renaming
def expand_formulas(expr, formulas: dict, src: Source, _stack=()):
    """``expr`` with every formula identifier replaced by the formula's (expanded) body."""
    if isinstance(expr, Ident):
        if expr.name in formulas:
            if expr.name in _stack:
                raise src.model_error(expr.line, expr.col, f"formula {expr.name!r} is defined in terms of itself "
                                      f"({' -> '.join(_stack + (expr.name,))})")
            if len(_stack) >= MAX_NESTING:
                raise src.model_error(expr.line, expr.col, f"formula {expr.name!r} expands formulas nested deeper "
                                      f"than {MAX_NESTING} levels")
            return expand_formulas(formulas[expr.name][0], formulas, src, _stack + (expr.name,))
        return expr
    return _map_children(expr, lambda e: expand_formulas(e, formulas, src, _stack))


def _map_children(expr, f):
    if isinstance(expr, (Literal, Ident, LabelRef)) or expr is None:
        return expr
    if isinstance(expr, Unary):
        return Unary(expr.op, f(expr.arg), expr.line, expr.col)
    if isinstance(expr, Binary):
        return Binary(expr.op, f(expr.left), f(expr.right), expr.line, expr.col)
    if isinstance(expr, Chain):
        return Chain(f(expr.first), [(op, f(e)) for op, e in expr.rest], expr.line, expr.col)
    if isinstance(expr, Comparison):
        return Comparison(f(expr.first), [(op, f(e)) for op, e in expr.rest], expr.line, expr.col)
    if isinstance(expr, Ite):
        return Ite(f(expr.cond), f(expr.then), f(expr.other), expr.line, expr.col)
    if isinstance(expr, Call):
        return Call(expr.fn, [f(a) for a in expr.args], expr.line, expr.col)
    return expr


def _rename_expr(expr, mapping: dict):
    if isinstance(expr, Ident):
        return Ident(mapping.get(expr.name, expr.name), expr.line, expr.col)
    return _map_children(expr, lambda e: _rename_expr(e, mapping))


def _rename_module(base: ModuleNode, node: RenamedModuleNode, mapping: dict) -> ModuleNode:
    ren = lambda e: None if e is None else _rename_expr(e, mapping)  # noqa: E731
    decls = [VarDecl(mapping.get(d.name, d.name), d.type, ren(d.lo), ren(d.hi), ren(d.init), d.line, d.col)
             for d in base.decls]
    commands = []
    for c in base.commands:
        ups = [UpdateNode(ren(u.prob), [Assign(mapping.get(a.var, a.var), ren(a.expr), a.line, a.col)
                                        for a in u.assigns], u.line, u.col) for u in c.updates]
        action = None if c.action is None else mapping.get(c.action, c.action)
        commands.append(CommandNode(action, ren(c.guard), ups, c.line, c.col, node.name))
    return ModuleNode(node.name, decls, commands, node.line, node.col)


# ============================================================================ constants
def evaluate_constants(decls: list, given: dict, sym: Symbols, src: Source, *, required: bool = True) -> dict:
    """Values of constant declarations (in dependency order), undefined ones from ``given``.

    Returns name -> (type, value); a value is ``None`` only when ``required`` is False and
    the constant has no value (an unused property constant).
    """
    table = {d.name: d for d in decls}
    out: dict = {}
    state: dict = {}

    def value_of(name, at):
        if name in out:
            return out[name]
        d = table[name]
        if state.get(name) == "busy":
            raise src.model_error(d.line, d.col, f"constant {name!r} is defined in terms of itself")
        state[name] = "busy"
        if d.expr is None:
            if name in given:
                v = _coerce_given(name, d.type, given[name], src, d)
            elif required:
                missing = [n for n, dd in table.items() if dd.expr is None and n not in given]
                raise src.model_error(d.line, d.col, f"constant{'s' if len(missing) > 1 else ''} "
                                      f"{', '.join(missing)} {'have' if len(missing) > 1 else 'has'} no value; "
                                      f"give {'them' if len(missing) > 1 else 'it'} with --const "
                                      f"{','.join(m + '=VALUE' for m in missing)}")
            else:
                v = None
        else:
            if name in given:
                raise src.model_error(d.line, d.col, f"constant {name!r} is defined in the file ({d.expr}); "
                                      "--const cannot override it")
            # the dependencies first
            for dep in _idents(d.expr):
                if dep in table and dep not in out:
                    value_of(dep, d)
            local = Symbols(src, constants={**sym.constants, **out}, formulas=sym.formulas)
            c = compile_expr(d.expr, local)
            if not c.const:
                raise src.model_error(d.line, d.col, f"the definition of constant {name!r} is not constant "
                                      f"('{d.expr}' reads a variable)")
            v = _coerce_defined(name, d.type, c, src, d)
        out[name] = (d.type, v)
        state[name] = "done"
        return out[name]

    for d in decls:
        value_of(d.name, d)
    return out


def _idents(expr) -> list:
    return [name for kind, name, _ in iter_names(expr) if kind == "ident"]


def iter_names(expr):
    """Every identifier and quoted name in an expression or property, without recursion.

    Yields ``(kind, name, node)`` with ``kind`` ``"ident"`` or ``"label"``; walks into
    queries (bodies, bounds, thresholds, old-style filters) and filters.
    """
    from .syntax import Bound, PathFormula, RewardPath

    stack = [expr]
    while stack:
        e = stack.pop()
        if e is None:
            continue
        if isinstance(e, Ident):
            yield "ident", e.name, e
        elif isinstance(e, LabelRef):
            yield "label", e.name, e
        elif isinstance(e, Unary):
            stack.append(e.arg)
        elif isinstance(e, Binary):
            stack += [e.right, e.left]
        elif isinstance(e, (Chain, Comparison)):
            stack += [x for _, x in reversed(e.rest)] + [e.first]
        elif isinstance(e, Ite):
            stack += [e.other, e.then, e.cond]
        elif isinstance(e, Call):
            stack += list(reversed(e.args))
        elif isinstance(e, QueryNode):
            stack += [e.threshold, e.body]
            if e.old_filter is not None:
                stack.append(e.old_filter[0])
        elif isinstance(e, FilterNode):
            stack += [e.states, e.prop]
        elif isinstance(e, PathFormula):
            stack += [e.right, e.left, e.bound]
        elif isinstance(e, RewardPath):
            stack += [e.target, e.time]
        elif isinstance(e, Bound):
            stack += [e.upper, e.lower]


def _coerce_defined(name, type_, c: Compiled, src, d):
    if type_ == "bool":
        if c.type != "bool":
            raise src.model_error(d.line, d.col, f"type error: constant {name!r} is bool; its definition is "
                                  f"{c.type}")
        return bool(c.value)
    if c.type == "bool":
        raise src.model_error(d.line, d.col, f"type error: constant {name!r} is {type_}; its definition is bool")
    if type_ == "int":
        if c.type != "int":
            raise src.model_error(d.line, d.col, f"type error: constant {name!r} is int; its definition "
                                  f"'{d.expr}' is double (declare it 'const double')")
        return int(c.value)
    return float(c.value)


def _coerce_given(name, type_, raw, src, d):
    text = str(raw).strip()
    if type_ == "bool":
        if isinstance(raw, bool):
            return raw
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise PrismModelError(f"--const {name}={raw}: constant {name!r} is bool; give true or false")
    if type_ == "int":
        if isinstance(raw, (int, np.integer)) and not isinstance(raw, bool):
            return int(raw)
        try:
            return int(text)
        except ValueError:
            raise PrismModelError(f"--const {name}={raw}: constant {name!r} is int; give an integer") from None
    try:
        v = float(raw) if isinstance(raw, (int, float)) else float(text)
    except ValueError:
        raise PrismModelError(f"--const {name}={raw}: constant {name!r} is double; give a number") from None
    if not math.isfinite(v):
        raise PrismModelError(f"--const {name}={raw}: constant {name!r} must be finite")
    return v


# ============================================================================ the model
@dataclass
class UpdateInfo:
    prob: Compiled | None
    assigns: list  # (var index, Compiled)
    line: int
    col: int


@dataclass
class CommandInfo:
    module: str
    action: str | None
    guard: Compiled
    updates: list
    line: int
    col: int
    text: str

    def where(self, src: Source) -> str:
        act = f"[{self.action}]" if self.action else "[]"
        return f"the command {act} of module {self.module} at {src.at(self.line, self.col)}"


@dataclass
class ModuleInfo:
    name: str
    commands: list
    alphabet: list


@dataclass
class RewardInfo:
    name: str | None
    state_items: list  # (guard, value)
    trans_items: list  # (action or "", guard, value)


@dataclass
class ModelInfo:
    """A PRISM model ready to be built (see the module docstring)."""

    source: Source
    kind: str
    variables: list
    modules: list
    actions: list
    rewards: list
    labels: dict  # name -> Compiled
    init: Compiled | None
    constants: dict  # name -> (type, value)
    symbols: Symbols
    undefined: tuple = ()

    @property
    def names(self) -> list:
        return [v.name for v in self.variables]


def analyse(mf: ModelFile, constants: dict | None = None, *, extra_constants=()) -> ModelInfo:
    """Check and compile a parsed model file (see the module docstring).

    ``constants`` gives values to the undefined constants; ``extra_constants`` names
    given constants that belong to a properties file (so they are not reported as
    unknown here).
    """
    with deep_recursion(f"the model {mf.source.name}"):
        return _analyse(mf, constants, extra_constants)


def _analyse(mf: ModelFile, constants, extra_constants) -> ModelInfo:
    src = mf.source
    given = dict(constants or {})
    if mf.type is None:
        first = mf.modules[0] if mf.modules else None
        line, col = (first.line, first.col) if first else (1, 1)
        raise src.unsupported(line, col, "the file names no model type; PRISM then reads it as an MDP, which is "
                              "outside the supported fragment: put 'ctmc' or 'dtmc' at the top")
    if not mf.modules:
        raise src.model_error(1, 1, "the model has no module")
    # constants -------------------------------------------------------------------------
    names_seen: dict = {}

    def claim(name, what, line, col):
        if name in names_seen:
            raise src.model_error(line, col, f"{what} {name!r} clashes with the {names_seen[name]} of the same name")
        names_seen[name] = what

    for d in mf.constants:
        claim(d.name, "constant", d.line, d.col)
    for name, (_, line, col) in mf.formulas.items():
        claim(name, "formula", line, col)
    unknown = [k for k in given if k not in {d.name for d in mf.constants} and k not in extra_constants]
    if unknown:
        undefined = [d.name for d in mf.constants if d.expr is None]
        raise PrismModelError(f"--const {unknown[0]}: the model has no constant {unknown[0]!r}"
                              f" (undefined constants: {', '.join(undefined) or 'none'})")
    base_sym = Symbols(src, formulas=mf.formulas)
    const_values = evaluate_constants(mf.constants, {k: v for k, v in given.items()
                                                     if k in {d.name for d in mf.constants}}, base_sym, src)
    # formulas and renaming -------------------------------------------------------------
    expand = lambda e: None if e is None else expand_formulas(e, mf.formulas, src)  # noqa: E731
    plain: dict = {}
    modules: list = []
    written = {m.name: m for m in mf.modules if isinstance(m, ModuleNode)}  # a base may come later in the file
    for m in mf.modules:
        if isinstance(m, ModuleNode):
            mod = _expanded(m, expand)
        else:
            base = plain.get(m.base)
            if base is None and m.base in written:
                base = _expanded(written[m.base], expand)
            if base is None:
                raise src.model_error(m.line, m.col, f"module {m.name!r} renames module {m.base!r}, which is not "
                                      "defined")
            mapping = {}
            for old, new, line, col in m.renames:
                if old in mapping:
                    raise src.model_error(line, col, f"identifier {old!r} is renamed twice in module {m.name!r}")
                if old in mf.formulas:
                    raise src.model_error(line, col, f"formula {old!r} cannot be renamed (formulas are expanded "
                                          "before module renaming)")
                mapping[old] = new
            mod = _rename_module(base, m, mapping)
        if mod.name in plain:
            raise src.model_error(m.line, m.col, f"module {mod.name!r} is defined twice")
        plain[mod.name] = mod
        modules.append(mod)
    # variables -------------------------------------------------------------------------
    sym = Symbols(src, constants=const_values, formulas={})
    variables: list = []
    decls = [(d, None) for d in mf.globals] + [(d, m.name) for m in modules for d in m.decls]
    owner_of: dict = {}
    for d, owner in decls:
        if d.name in owner_of:
            other = owner_of[d.name]
            where = "a global" if other is None else f"module {other}"
            raise src.model_error(d.line, d.col, f"variable {d.name!r} is declared twice (in {where} and in "
                                  f"{'a global' if owner is None else 'module ' + owner}); a renamed module must "
                                  "rename every local variable")
        if d.name in const_values or d.name in mf.formulas:
            raise src.model_error(d.line, d.col, f"variable {d.name!r} clashes with the "
                                  f"{'constant' if d.name in const_values else 'formula'} of the same name")
        owner_of[d.name] = owner
        if d.type == "bool":
            lo, hi = 0, 1
        else:
            lo = _const_int(d.lo, sym, src, f"the lower bound of {d.name}")
            hi = _const_int(d.hi, sym, src, f"the upper bound of {d.name}")
            if lo > hi:
                raise src.model_error(d.line, d.col, f"variable {d.name!r} has the empty range [{lo}..{hi}]")
        init = None
        if d.init is not None:
            if mf.init is not None:
                raise src.model_error(d.line, d.col, f"variable {d.name!r} has an initial value and the model has "
                                      "an 'init ... endinit' block; use one or the other")
            c = compile_expr(d.init, sym)
            if not c.const:
                raise src.model_error(d.line, d.col, f"the initial value of {d.name!r} must be constant")
            if d.type == "bool":
                if c.type != "bool":
                    raise src.model_error(d.line, d.col, f"type error: the initial value of bool variable "
                                          f"{d.name!r} is {c.type}")
                init = int(bool(c.value))
            else:
                if c.type != "int":
                    raise src.model_error(d.line, d.col, f"type error: the initial value of int variable "
                                          f"{d.name!r} is {c.type}")
                init = int(c.value)
                if not lo <= init <= hi:
                    raise src.model_error(d.line, d.col, f"the initial value {init} of {d.name!r} is outside its "
                                          f"range [{lo}..{hi}]")
        elif mf.init is None:
            init = lo
        variables.append(VarInfo(d.name, d.type, lo, hi, init, owner, len(variables), d.line, d.col))
    sym.variables = {v.name: v for v in variables}
    # commands --------------------------------------------------------------------------
    minfo: list = []
    actions: list = []
    for m in modules:
        commands = []
        alphabet: list = []
        for c in m.commands:
            commands.append(_command(c, m.name, sym, src, mf.type))
            if c.action is not None and c.action not in alphabet:
                alphabet.append(c.action)
            if c.action is not None and c.action not in actions:
                actions.append(c.action)
        minfo.append(ModuleInfo(m.name, commands, alphabet))
    # system ----------------------------------------------------------------------------
    if mf.system is not None:
        listed = [n for n, _, _ in mf.system]
        for name, line, col in mf.system:
            if name not in plain:
                raise src.model_error(line, col, f"system names module {name!r}, which is not defined")
            if listed.count(name) > 1:
                raise src.model_error(line, col, f"system names module {name!r} twice")
        missing = [m.name for m in modules if m.name not in listed]
        if missing:
            _, line, col = mf.system[0]
            raise src.model_error(line, col, f"system leaves out module{'s' if len(missing) > 1 else ''} "
                                  f"{', '.join(missing)}; every module must appear once")
    # rewards, labels, init -------------------------------------------------------------
    rewards = []
    names = set()
    for r in mf.rewards:
        if r.name is not None:
            if r.name in names:
                raise src.model_error(r.line, r.col, f'reward structure "{r.name}" is defined twice')
            names.add(r.name)
        state_items, trans_items = [], []
        for it in r.items:
            g = expand_formulas(it.guard, mf.formulas, src)
            v = expand_formulas(it.value, mf.formulas, src)
            gc, vc = compile_expr(g, sym), compile_expr(v, sym)
            if gc.type != "bool":
                raise src.model_error(it.line, it.col, f"type error: the guard of a reward item must be bool; got "
                                      f"'{gc.text}'")
            if vc.type == "bool":
                raise src.model_error(it.line, it.col, f"type error: a reward must be a number; got '{vc.text}'")
            if it.action is None:
                state_items.append((gc, vc))
            else:
                if it.action and it.action not in actions:
                    raise src.model_error(it.line, it.col, f"the reward item's action {it.action!r} labels no "
                                          f"command (actions: {', '.join(actions) or 'none'})")
                trans_items.append((it.action, gc, vc))
        rewards.append(RewardInfo(r.name, state_items, trans_items))
    label_sym = Symbols(src, constants=const_values, variables=sym.variables, formulas=mf.formulas,
                        labels=mf.labels, builtin_labels=("init", "deadlock"), allow_labels=True)
    labels = {}
    for name, (expr, line, col) in mf.labels.items():
        c = compile_expr(expr, label_sym)
        if c.type != "bool":
            raise src.model_error(line, col, f'type error: label "{name}" must be bool; got the {c.type} '
                                  f"expression '{c.text}'")
        labels[name] = c
    init = None
    if mf.init is not None:
        init = compile_expr(expand_formulas(mf.init, mf.formulas, src), sym)
        if init.type != "bool":
            raise src.model_error(mf.init.line, mf.init.col, "type error: 'init ... endinit' must be bool")
    label_sym.constants = const_values
    return ModelInfo(src, mf.type, variables, minfo, actions, rewards, labels, init, const_values, label_sym)


def _expanded(m: ModuleNode, expand) -> ModuleNode:
    """A copy of module ``m`` with its formulas expanded."""
    return ModuleNode(m.name, [VarDecl(d.name, d.type, expand(d.lo), expand(d.hi), expand(d.init), d.line, d.col)
                               for d in m.decls],
                      [CommandNode(c.action, expand(c.guard),
                                   [UpdateNode(expand(u.prob), [Assign(a.var, expand(a.expr), a.line, a.col)
                                                                for a in u.assigns], u.line, u.col)
                                    for u in c.updates], c.line, c.col, c.module) for c in m.commands],
                      m.line, m.col)


def _const_int(expr, sym, src, role) -> int:
    c = compile_expr(expr, sym)
    if not c.const:
        raise src.model_error(expr.line, expr.col, f"{role} must be constant; got '{expr}'")
    if c.type != "int":
        raise src.model_error(expr.line, expr.col, f"type error: {role} must be int; got the {c.type} '{expr}'")
    return int(c.value)


def _command(c: CommandNode, module: str, sym: Symbols, src: Source, kind: str) -> CommandInfo:
    guard = compile_expr(c.guard, sym)
    if guard.type != "bool":
        raise src.model_error(c.guard.line, c.guard.col, f"type error: the guard must be bool; got the {guard.type} "
                              f"expression '{guard.text}'")
    updates = []
    what = "rate" if kind == "ctmc" else "probability"
    for u in c.updates:
        prob = None
        if u.prob is not None:
            prob = compile_expr(u.prob, sym)
            if prob.type == "bool":
                raise src.model_error(u.prob.line, u.prob.col, f"type error: the {what} of an update must be a "
                                      f"number; got the bool expression '{prob.text}'")
        assigns = []
        seen = set()
        for a in u.assigns:
            v = sym.variables.get(a.var)
            if v is None:
                raise src.model_error(a.line, a.col, f"the update assigns {a.var!r}, which is not a variable" +
                                      _hint(a.var, sym))
            if v.module is not None and v.module != module:
                raise src.model_error(a.line, a.col, f"module {module} assigns variable {a.var!r} of module "
                                      f"{v.module}; only the owning module may write it")
            if a.var in seen:
                raise src.model_error(a.line, a.col, f"variable {a.var!r} is assigned twice in one update")
            seen.add(a.var)
            e = compile_expr(a.expr, sym)
            if v.type == "bool" and e.type != "bool":
                raise src.model_error(a.line, a.col, f"type error: bool variable {a.var!r} is assigned the {e.type} "
                                      f"expression '{e.text}'")
            if v.type == "int" and e.type != "int":
                raise src.model_error(a.line, a.col, f"type error: int variable {a.var!r} is assigned the {e.type} "
                                      f"expression '{e.text}'")
            assigns.append((v.index, e))
        updates.append(UpdateInfo(prob, assigns, u.line, u.col))
    text = f"[{c.action or ''}] {c.guard} -> " + " + ".join(
        (f"{u.prob} : " if u.prob is not None else "") + (" & ".join(f"({a.var}'={a.expr})" for a in u.assigns)
                                                          or "true") for u in c.updates)
    return CommandInfo(module, c.action, guard, updates, c.line, c.col, text)
