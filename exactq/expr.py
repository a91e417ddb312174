"""Safe state expressions in PRISM-like syntax, evaluated vectorised over all states.

An expression such as ``q1 > 5 & q2 = 0`` or ``min(q1, q2) + (busy ? 1 : 0)`` is
tokenised by a small regular-expression lexer and parsed by a recursive-descent
parser with PRISM's operator precedence into a tree of nodes from Python's
:mod:`ast` module (``BinOp``, ``Compare``, ``BoolOp``, ``UnaryOp``, ``IfExp``,
``Call``, ``Name``, ``Constant``). The tree is evaluated by walking it with numpy;
nothing is ever passed to :func:`eval` or :func:`compile`, and only the node types
above (with the operators and functions listed below) can occur.

Syntax, from the loosest to the tightest binding:

============================  =====================================================
``c ? a : b``                 conditional (right associative)
``a => b``                    implication (right associative)
``a <=> b``                   equivalence
``a | b``, ``a || b``, ``or``  disjunction
``a & b``, ``a && b``, ``and`` conjunction
``!a``, ``not a``             negation
``< <= > >= = == !=``         comparisons; ``=`` is PRISM's equality; chains such
                              as ``0 < q1 <= 3`` mean ``0 < q1 & q1 <= 3``
``+ -``                       addition, subtraction
``* / // %``                  multiplication, true division, floor division, modulo
``-a``, ``+a``                unary signs
``a ^ b``, ``a ** b``         power (right associative; ``-2^2`` is ``-4``)
============================  =====================================================

Atoms are numbers (``3``, ``2.5``, ``1e-3``), ``true``/``false``, names of state
variables, rewards, labels and constants (a label may also be written quoted, as in
PRISM: ``"full"``), parenthesised expressions, and calls of ``min``, ``max``
(one or more arguments), ``abs``, ``floor``, ``ceil``, ``sqrt``, ``exp``, ``log``
(one argument), ``pow`` and ``mod`` (two arguments).

Evaluation is per state with short-circuit semantics: in ``a & b`` the operand
``b`` only matters where ``a`` holds, in ``c ? x : y`` each branch only where it is
selected; arithmetic faults (division by zero, ``0 ^ -1``, ``log(0)``, overflow) are
reported only when they happen in a state where the faulty term is used, and then as
a :class:`~exactq.errors.ModelError` naming the expression and the first such state,
never as a silent ``nan`` or ``inf``. Booleans used in arithmetic count as 0/1
(``(q1 > 0) + (q2 > 0)`` counts busy queues); numbers used as booleans must be
integers equal to 0 or 1.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .errors import ModelError, QuerySyntaxError

__all__ = ["Expression", "parse_expression", "evaluate", "FUNCTIONS"]

#: Functions callable in expressions: name -> (minimum, maximum number of arguments).
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "min": (1, None),
    "max": (1, None),
    "abs": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "sqrt": (1, 1),
    "exp": (1, 1),
    "log": (1, 1),
    "pow": (2, 2),
    "mod": (2, 2),
}

_KEYWORDS = {"true", "false", "and", "or", "not"}

_TOKEN_RE = re.compile(
    r"""
     (?P<ws>\s+)
    |(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    |(?P<name>[A-Za-z_][A-Za-z_0-9]*)
    |(?P<label>"[A-Za-z_][A-Za-z_0-9]*")
    |(?P<op><=>|=>|<=|>=|==|!=|\*\*|//|&&|\|\||[-+*/%^<>=!&|()\[\],?:])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    """One lexical token: ``kind`` in {num, name, label, op}; ``pos``/``end`` 0-based."""

    kind: str
    text: str
    pos: int
    end: int


def syntax_error(column: int, message: str, text: str | None = None) -> QuerySyntaxError:
    """Build the one-line :class:`QuerySyntaxError` (``column`` is 1-based)."""
    err = QuerySyntaxError(f"query syntax error at column {column}: {message}")
    err.offset = column
    err.text = text
    err.column = column
    return err


def tokenize(text: str, offset: int = 0) -> list[Token]:
    """Split ``text`` into tokens (whitespace dropped).

    ``offset`` is added to the reported column of an unexpected character (used when
    ``text`` is a slice of a longer query); token positions stay relative to ``text``.
    """
    tokens: list[Token] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise syntax_error(offset + pos + 1, f"unexpected character {text[pos]!r}", text)
        kind = m.lastgroup
        if kind != "ws":
            tokens.append(Token(kind, m.group(), pos, m.end()))
        pos = m.end()
    return tokens


def describe_token(tok: Token | None, end_text: str | None = None) -> str:
    """``'x'`` for a token, ``end of input`` (or the given terminator) at the end."""
    if tok is None:
        return f"{end_text!r}" if end_text else "end of input"
    return repr(tok.text)


_BINOPS = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "//": ast.FloorDiv,
    "%": ast.Mod,
    "^": ast.Pow,
    "**": ast.Pow,
}
_CMPOPS = {
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "=": ast.Eq,
    "==": ast.Eq,
    "!=": ast.NotEq,
}


class _Parser:
    """Recursive-descent parser producing :mod:`ast` nodes with source spans.

    ``offset`` (0-based) is where ``text`` starts in the text shown to the user;
    ``after`` is the token before ``text`` there and ``end_text``/``end_column`` the
    token that follows it (both only for error messages).
    """

    def __init__(self, text: str, *, offset: int = 0, after: str | None = None,
                 end_text: str | None = None, end_column: int | None = None,
                 full_text: str | None = None):
        self.text = text
        self.offset = offset
        self.after = after
        self.end_text = end_text
        self.end_column = end_column
        self.full_text = full_text if full_text is not None else text
        self.tokens = tokenize(text, offset)
        self.i = 0

    # -- token helpers -------------------------------------------------------
    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def at(self, *texts: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind in ("op", "name") and tok.text in texts

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def error(self, expected: str) -> QuerySyntaxError:
        tok = self.peek()
        prev = self.tokens[self.i - 1].text if self.i > 0 else self.after
        if tok is not None:
            column = self.offset + tok.pos + 1
        elif self.end_column is not None:
            column = self.end_column
        else:
            column = self.offset + len(self.text) + 1
        where = f" after {prev!r}" if prev else ""
        return syntax_error(column, f"expected {expected}{where}; got {describe_token(tok, self.end_text)}",
                            self.full_text)

    def _span(self, node: ast.AST, start: int, end: int) -> ast.AST:
        node.lineno = node.end_lineno = 1
        node.col_offset = start
        node.end_col_offset = end
        return node

    # -- grammar ---------------------------------------------------------------
    def parse(self) -> ast.Expression:
        if not self.tokens:
            raise self.error("an expression")
        node = self.ternary()
        if self.peek() is not None:
            end = f"{self.end_text!r}" if self.end_text else "the end of the expression"
            raise self.error(f"an operator or {end}")
        return ast.Expression(body=node)

    def ternary(self) -> ast.expr:
        cond = self.implies()
        if self.at("?"):
            self.advance()
            body = self.ternary()
            if not self.at(":"):
                raise self.error("':' of the conditional 'c ? a : b'")
            self.advance()
            orelse = self.ternary()
            return self._span(ast.IfExp(test=cond, body=body, orelse=orelse), cond.col_offset,
                              orelse.end_col_offset)
        return cond

    def implies(self) -> ast.expr:
        left = self.iff()
        if self.at("=>"):
            self.advance()
            right = self.implies()
            neg = self._span(ast.UnaryOp(op=ast.Not(), operand=left), left.col_offset, left.end_col_offset)
            # a => b  is  !a | b, with b only evaluated where a holds (short circuit)
            return self._span(ast.BoolOp(op=ast.Or(), values=[neg, right]), left.col_offset,
                              right.end_col_offset)
        return left

    def iff(self) -> ast.expr:
        left = self.disjunction()
        while self.at("<=>"):
            self.advance()
            right = self.disjunction()
            left = self._span(ast.Compare(left=left, ops=[ast.Eq()], comparators=[right]),
                              left.col_offset, right.end_col_offset)
        return left

    def _boolop(self, ops: tuple[str, ...], op: ast.boolop, sub) -> ast.expr:
        first = sub()
        values = [first]
        while self.at(*ops):
            self.advance()
            values.append(sub())
        if len(values) == 1:
            return first
        return self._span(ast.BoolOp(op=op, values=values), first.col_offset, values[-1].end_col_offset)

    def disjunction(self) -> ast.expr:
        return self._boolop(("|", "||", "or"), ast.Or(), self.conjunction)

    def conjunction(self) -> ast.expr:
        return self._boolop(("&", "&&", "and"), ast.And(), self.negation)

    def negation(self) -> ast.expr:
        if self.at("!", "not"):
            tok = self.advance()
            operand = self.negation()
            return self._span(ast.UnaryOp(op=ast.Not(), operand=operand), tok.pos, operand.end_col_offset)
        return self.comparison()

    def comparison(self) -> ast.expr:
        left = self.additive()
        ops: list[ast.cmpop] = []
        comparators: list[ast.expr] = []
        while self.at(*_CMPOPS):
            ops.append(_CMPOPS[self.advance().text]())
            comparators.append(self.additive())
        if not ops:
            return left
        return self._span(ast.Compare(left=left, ops=ops, comparators=comparators), left.col_offset,
                          comparators[-1].end_col_offset)

    def _binary(self, ops: tuple[str, ...], sub) -> ast.expr:
        left = sub()
        while self.at(*ops):
            op = _BINOPS[self.advance().text]()
            right = sub()
            left = self._span(ast.BinOp(left=left, op=op, right=right), left.col_offset, right.end_col_offset)
        return left

    def additive(self) -> ast.expr:
        return self._binary(("+", "-"), self.multiplicative)

    def multiplicative(self) -> ast.expr:
        return self._binary(("*", "/", "//", "%"), self.unary)

    def unary(self) -> ast.expr:
        if self.at("-", "+"):
            tok = self.advance()
            operand = self.unary()
            op = ast.USub() if tok.text == "-" else ast.UAdd()
            return self._span(ast.UnaryOp(op=op, operand=operand), tok.pos, operand.end_col_offset)
        return self.power()

    def power(self) -> ast.expr:
        base = self.atom()
        if self.at("^", "**"):
            self.advance()
            exponent = self.unary()
            return self._span(ast.BinOp(left=base, op=ast.Pow(), right=exponent), base.col_offset,
                              exponent.end_col_offset)
        return base

    def atom(self) -> ast.expr:
        tok = self.peek()
        if tok is None:
            raise self.error("an expression")
        if tok.kind == "num":
            self.advance()
            text = tok.text
            value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
            return self._span(ast.Constant(value=value), tok.pos, tok.end)
        if tok.kind == "label":
            self.advance()
            return self._span(ast.Name(id=tok.text[1:-1], ctx=ast.Load()), tok.pos, tok.end)
        if tok.kind == "name" and tok.text not in ("and", "or", "not"):
            self.advance()
            if tok.text in ("true", "false"):
                return self._span(ast.Constant(value=tok.text == "true"), tok.pos, tok.end)
            if self.at("("):
                return self.call(tok)
            return self._span(ast.Name(id=tok.text, ctx=ast.Load()), tok.pos, tok.end)
        if tok.text == "(":
            self.advance()
            inner = self.ternary()
            if not self.at(")"):
                raise self.error("')'")
            close = self.advance()
            return self._span(inner, tok.pos, close.end)
        raise self.error("an expression")

    def call(self, name: Token) -> ast.expr:
        if name.text not in FUNCTIONS:
            raise syntax_error(self.offset + name.pos + 1,
                               f"unknown function {name.text!r}; valid: {', '.join(sorted(FUNCTIONS))}",
                               self.full_text)
        self.advance()  # "("
        args: list[ast.expr] = []
        if not self.at(")"):
            args.append(self.ternary())
            while self.at(","):
                self.advance()
                args.append(self.ternary())
        if not self.at(")"):
            raise self.error("',' or ')'")
        close = self.advance()
        lo, hi = FUNCTIONS[name.text]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            noun = "argument" if want in ("1", "at least 1") else "arguments"
            raise syntax_error(self.offset + name.pos + 1,
                               f"function {name.text!r} takes {want} {noun}; got {len(args)}", self.full_text)
        node = ast.Call(func=ast.Name(id=name.text, ctx=ast.Load()), args=args, keywords=[])
        return self._span(node, name.pos, close.end)


def _free_names(tree: ast.AST) -> tuple[str, ...]:
    """Names read by the tree, in order of first appearance (function names excluded)."""
    seen: dict[str, None] = {}

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            seen.setdefault(node.id, None)
        elif isinstance(node, ast.Call):
            for a in node.args:
                walk(a)
        else:
            for child in ast.iter_child_nodes(node):
                walk(child)

    walk(tree)
    return tuple(seen)


class Expression:
    """A parsed state expression.

    Attributes
    ----------
    text : str
        The source text.
    tree : ast.Expression
        The syntax tree (nodes of :mod:`ast`, spans relative to ``text``).
    names : frozenset of str
        The free names (variables, rewards, labels, constants) it reads.

    Two expressions are equal when their trees are (``q1>5`` equals ``q1 > 5``).
    Call the expression with a namespace to evaluate it on every state.
    """

    __slots__ = ("text", "tree", "names", "_ordered_names", "_key")

    def __init__(self, text: str, tree: ast.Expression):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "tree", tree)
        ordered = _free_names(tree)
        object.__setattr__(self, "_ordered_names", ordered)
        object.__setattr__(self, "names", frozenset(ordered))
        object.__setattr__(self, "_key", ast.dump(tree))

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

    def __call__(self, namespace: Mapping[str, object], n: int | None = None) -> np.ndarray:
        """Evaluate on every state.

        Parameters
        ----------
        namespace : mapping of str to (n,) ndarray or scalar
            Values of the names; arrays (one entry per state) must have equal length,
            scalars broadcast.
        n : int, optional
            Number of states; the result is broadcast to shape ``(n,)``. By default the
            length of the arrays the expression reads (or of any array in
            ``namespace`` if it reads none); with no arrays at all the result is 0-d.

        Returns
        -------
        ndarray
            Boolean for conditions, numeric otherwise; a fresh array.

        Raises
        ------
        ModelError
            For an unknown name, arrays of unequal length, a boolean operator applied
            to a number, or an arithmetic fault (division by zero, ...) in a state
            where the faulty term is used.
        """
        missing = [name for name in self._ordered_names if name not in namespace]
        if missing:
            name = missing[0]
            valid = sorted(str(k) for k in namespace)
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            shown = ", ".join(valid[:30]) + (", ..." if len(valid) > 30 else "")
            raise ModelError(f"unknown name {name!r} in expression {self.text!r}{hint}; "
                             f"valid: {shown or '(none)'}")
        values: dict[str, np.ndarray] = {}
        length = None if n is None else int(n)
        for name in self._ordered_names:
            arr = np.asarray(namespace[name])
            if arr.dtype.kind not in "biuf":
                raise ModelError(f"name {name!r} in expression {self.text!r} is not numeric or boolean; "
                                 f"got dtype {arr.dtype}")
            if arr.ndim > 1:
                raise ModelError(f"name {name!r} in expression {self.text!r} must be a scalar or a "
                                 f"vector over states; got shape {arr.shape}")
            if arr.ndim == 1:
                if length is None:
                    length = arr.shape[0]
                elif arr.shape[0] != length:
                    raise ModelError(f"name {name!r} in expression {self.text!r} has {arr.shape[0]} "
                                     f"values; expected {length} (one per state)")
            if arr.dtype.kind == "u":
                arr = arr.astype(np.int64)
            values[name] = arr
        if length is None:
            for v in namespace.values():
                if isinstance(v, np.ndarray) and v.ndim == 1:
                    length = v.shape[0]
                    break
        result = _Evaluator(self.text, values, length).run(self.tree.body)
        if length is not None:
            return np.array(np.broadcast_to(result, (length,)))
        return np.array(result)


def parse_expression(text: str) -> Expression:
    """Parse a PRISM-like state expression.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"q1 > 5 & q2 = 0"`` (see the module docstring for the
        syntax and precedence).

    Returns
    -------
    Expression
        Callable on a namespace; ``.names`` lists the names it reads.

    Raises
    ------
    QuerySyntaxError
        With the 1-based column and what was expected, e.g.
        ``query syntax error at column 10: expected an expression after '&'; got ')'``.

    Examples
    --------
    >>> import numpy as np
    >>> e = parse_expression("q1 > 1 & q2 = 0")
    >>> sorted(e.names)
    ['q1', 'q2']
    >>> e({"q1": np.array([0, 2, 3]), "q2": np.array([0, 0, 1])}).tolist()
    [False, True, False]
    """
    if isinstance(text, Expression):
        return text
    if not isinstance(text, str):
        raise ModelError(f"expression must be a string; got {type(text).__name__}")
    return parse_fragment(text)


def parse_fragment(text: str, *, offset: int = 0, after: str | None = None, end_text: str | None = None,
                   end_column: int | None = None, full_text: str | None = None) -> Expression:
    """Parse ``text`` that sits at ``offset`` inside a longer query (error columns refer to it)."""
    tree = _Parser(text, offset=offset, after=after, end_text=end_text, end_column=end_column,
                   full_text=full_text).parse()
    return Expression(text, tree)


def evaluate(expression: str | Expression, namespace: Mapping[str, object], n: int | None = None) -> np.ndarray:
    """Parse (if needed) and evaluate an expression on every state.

    Parameters
    ----------
    expression : str or Expression
        The expression.
    namespace : mapping of str to (n,) ndarray or scalar
        Values of the names.
    n : int, optional
        Broadcast the result to shape ``(n,)``.

    Returns
    -------
    ndarray

    Raises
    ------
    QuerySyntaxError, ModelError
        See :func:`parse_expression` and :meth:`Expression.__call__`.

    Examples
    --------
    >>> import numpy as np
    >>> evaluate("min(q1, q2) ^ 2", {"q1": np.array([1, 3]), "q2": np.array([2, 2])}).tolist()
    [1.0, 4.0]
    """
    return parse_expression(expression)(namespace, n)


# ---------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------

_UNARY_FUNCS = {
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
}

_CMP_FUNCS = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}


class _Evaluator:
    """Walks a whitelisted :mod:`ast` tree with numpy, tracking where terms are used.

    ``active`` is ``None`` (every state) or a boolean ``(n,)`` mask of the states in
    which the current sub-expression's value matters (short circuit, conditionals).
    """

    def __init__(self, text: str, values: Mapping[str, np.ndarray], n: int | None):
        self.text = text
        self.values = values
        self.n = n

    def source(self, node: ast.AST) -> str:
        return self.text[node.col_offset:node.end_col_offset]

    def run(self, node: ast.expr) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.eval(node, None)

    # -- helpers -------------------------------------------------------------
    def first_state(self, mask: np.ndarray) -> str:
        mask = np.asarray(mask)
        if mask.ndim == 0 or self.n is None:
            return ""
        return f" in state {int(np.flatnonzero(np.broadcast_to(mask, (self.n,)))[0])}"

    def used(self, mask: np.ndarray, active: np.ndarray | None) -> np.ndarray:
        return mask if active is None else (mask & active)

    def numeric(self, node: ast.expr, active) -> np.ndarray:
        v = self.eval(node, active)
        return v.astype(np.int64) if v.dtype == bool else v

    def boolean(self, node: ast.expr, active, role: str) -> np.ndarray:
        v = self.eval(node, active)
        if v.dtype == bool:
            return v
        if v.dtype.kind in "iu":
            bad = self.used((v != 0) & (v != 1), active)
            if not np.any(bad):
                return v.astype(bool)
        raise ModelError(f"{role} must be boolean; got the number {self.source(node)!r} in expression "
                         f"{self.text!r}")

    def check_finite(self, node: ast.expr, result: np.ndarray, operands: list[np.ndarray], active) -> None:
        if result.dtype.kind != "f":
            return
        bad = ~np.isfinite(result)
        for op in operands:
            if op.dtype.kind == "f":
                bad = bad & np.isfinite(op)
        bad = self.used(bad, active)
        if np.any(bad):
            raise ModelError(f"arithmetic fault in expression {self.text!r}: {self.source(node)!r} is not "
                             f"finite{self.first_state(bad)} (division by zero, overflow or invalid argument)")

    # -- dispatch ------------------------------------------------------------
    def eval(self, node: ast.expr, active) -> np.ndarray:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return np.asarray(node.value, dtype=bool)
            if isinstance(node.value, int):
                return np.asarray(node.value, dtype=np.int64)
            if isinstance(node.value, float):
                return np.asarray(node.value, dtype=float)
        elif isinstance(node, ast.Name):
            return self.values[node.id]
        elif isinstance(node, ast.BinOp):
            return self.binop(node, active)
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return np.logical_not(self.boolean(node.operand, active, "the operand of '!'"))
            v = self.numeric(node.operand, active)
            if isinstance(node.op, ast.USub):
                return np.negative(v)
            if isinstance(node.op, ast.UAdd):
                return v
        elif isinstance(node, ast.BoolOp):
            return self.boolop(node, active)
        elif isinstance(node, ast.Compare):
            return self.compare(node, active)
        elif isinstance(node, ast.IfExp):
            test = self.boolean(node.test, active, "the condition of 'c ? a : b'")
            yes = self.eval(node.body, self.used(test, active))
            no = self.eval(node.orelse, self.used(~test, active))
            if (yes.dtype == bool) != (no.dtype == bool):
                yes, no = yes.astype(np.int64) if yes.dtype == bool else yes, \
                    no.astype(np.int64) if no.dtype == bool else no
            return np.where(test, yes, no)
        elif isinstance(node, ast.Call):
            return self.call(node, active)
        raise ModelError(f"unsupported construct {type(node).__name__} in expression {self.text!r}")

    def binop(self, node: ast.BinOp, active) -> np.ndarray:
        a = self.numeric(node.left, active)
        b = self.numeric(node.right, active)
        op = node.op
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
            zero = self.used(b == 0, active)
            if np.any(zero):
                raise ModelError(f"division by zero in expression {self.text!r}: divisor "
                                 f"{self.source(node.right)!r} is 0{self.first_state(zero)}")
        if isinstance(op, ast.Add):
            r = np.add(a, b)
        elif isinstance(op, ast.Sub):
            r = np.subtract(a, b)
        elif isinstance(op, ast.Mult):
            r = np.multiply(a, b)
        elif isinstance(op, ast.Div):
            r = np.true_divide(a, b)
        elif isinstance(op, ast.FloorDiv):
            r = np.floor_divide(a, np.where(b == 0, 1, b))
        elif isinstance(op, ast.Mod):
            r = np.mod(a, np.where(b == 0, 1, b))
        elif isinstance(op, ast.Pow):
            r = np.power(a.astype(float), b)
        else:
            raise ModelError(f"unsupported operator in expression {self.text!r}")
        self.check_finite(node, r, [a, b], active)
        return r

    def boolop(self, node: ast.BoolOp, active) -> np.ndarray:
        is_and = isinstance(node.op, ast.And)
        role = "an operand of '&'" if is_and else "an operand of '|'"
        acc = self.boolean(node.values[0], active, role)
        for sub in node.values[1:]:
            # the next operand matters only where the result is still open
            still_open = acc if is_and else ~acc
            v = self.boolean(sub, self.used(still_open, active), role)
            acc = np.logical_and(acc, v) if is_and else np.logical_or(acc, v)
        return acc

    def compare(self, node: ast.Compare, active) -> np.ndarray:
        left = self.eval(node.left, active)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, active)
            if (left.dtype == bool) != (right.dtype == bool):
                left = left.astype(np.int64) if left.dtype == bool else left
                right = right.astype(np.int64) if right.dtype == bool else right
            r = _CMP_FUNCS[type(op)](left, right)
            result = r if result is None else np.logical_and(result, r)
            left = right
        return result

    def call(self, node: ast.Call, active) -> np.ndarray:
        name = node.func.id
        args = [self.numeric(a, active) for a in node.args]
        if name in ("min", "max"):
            r = args[0]
            f = np.minimum if name == "min" else np.maximum
            for a in args[1:]:
                r = f(r, a)
            return r
        if name == "pow":
            r = np.power(args[0].astype(float), args[1])
        elif name == "mod":
            zero = self.used(args[1] == 0, active)
            if np.any(zero):
                raise ModelError(f"division by zero in expression {self.text!r}: divisor "
                                 f"{self.source(node.args[1])!r} is 0{self.first_state(zero)}")
            r = np.mod(args[0], np.where(args[1] == 0, 1, args[1]))
        else:
            x = args[0]
            if name in ("sqrt", "exp", "log"):
                x = x.astype(float)
            r = _UNARY_FUNCS[name](x)
        self.check_finite(node, r, args, active)
        return r
