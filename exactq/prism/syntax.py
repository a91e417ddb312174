"""The syntax tree of PRISM model and property files, and the recursive-descent parser.

The grammar is the Markov-chain fragment of the PRISM language (the PRISM manual,
"The PRISM Language" and "Property Specification"):

* model type ``ctmc``/``stochastic`` or ``dtmc``/``probabilistic``;
* ``const`` (``int``, ``double``, ``bool``, untyped = ``int``; with or without a value),
  ``global`` variables, ``formula``, ``label``, ``init ... endinit``;
* modules with bounded integer and boolean variables and guarded commands
  ``[act] guard -> r1 : (x'=e) & (y'=f) + r2 : ... ;``, module renaming
  ``module M2 = M1 [ x1 = x2, a = b ] endmodule``;
* ``rewards "name" ... endrewards`` with state and action items;
* ``system M1 || M2 || ... endsystem`` (plain parallel composition only);
* expressions with PRISM's precedence: ``? :``, ``=>``, ``<=>``, ``|``, ``&``, ``!``,
  ``= !=``, ``< <= > >=``, ``+ -``, ``* /``, unary ``-``; the functions ``min``,
  ``max``, ``floor``, ``ceil``, ``round``, ``pow``, ``mod``, ``log``. Runs of one
  precedence level (``a + b - c + ...``, ``g1 | g2 | ...``) are one flat
  :class:`Chain` node, so that generated files with thousands of terms are no deeper
  than their parentheses.

Properties (the PRISM manual's property pages, for CTMCs and DTMCs):

* ``P=? [ path ]`` and ``P~p [ path ]`` (``~`` one of ``< <= > >=``) with the path
  formulas ``X φ``, ``F φ``, ``G φ``, ``φ1 U φ2``, ``φ1 W φ2`` (weak until), ``φ1 R φ2``
  (release) and the bounds ``<=t``, ``<t``, ``>=t``, ``>t``, ``[t1,t2]`` on all but
  ``X``; a bound is an expression of constants, and ``U<=T (n=N)`` reads ``T`` as a
  constant and ``(n=N)`` as the operand (PRISM has no user functions);
* ``S=? [ φ ]``, ``S~p [ φ ]``; ``R{"r"}=? [ ... ]``, ``R{"r"}~r [ ... ]`` (also ``R=?``,
  the first structure, and ``R{2}``) with ``S``, ``C`` (total), ``C<=t``, ``I=t``,
  ``F φ`` and Storm's ``LRA``; Storm's ``LRA=? [ φ ]``; the exactq-native ``E=? [ e ]``
  and ``T=? [ F φ ]``;
* state formulas with nested operators (``P=? [ F P>0.9 [ F "x" ] ]``) and arithmetic
  over numerical operators (``1 - P=? [ ... ]``, ``R{"a"}=? [ S ] + R{"b"}=? [ S ]``);
* ``filter(op, prop, states)`` with every operator of the manual (``min``, ``max``,
  ``argmin``, ``argmax``, ``count``, ``sum``/``+``, ``avg``, ``first``, ``range``,
  ``forall``/``&``, ``exists``/``|``, ``print``, ``printall``, ``state``) anywhere in a
  property, and the old form ``P=? [ F φ {"init"}{max} ]``;
* names ``"name": ...``, references ``"name"`` to a named property, and
  ``const``/``label``/``formula`` declarations in properties files.

``mdp`` (``nondeterministic``) models take the optima over schedulers ``Pmin=?``/``Pmax=?``,
``Rmin=?``/``Rmax=?`` (also ``R{"r"}max=?``) and Storm's ``LRAmin=?``/``LRAmax=?``
(:mod:`exactq.prism.mdp_check`).

Constructs that PRISM accepts but that are outside this fragment (model types pta,
pomdp, ...; clocks, invariants, observables; ``|||``, ``|[a]|``, hiding and
renaming in ``system``; ``Smin``/``Smax``; LTL path formulas such as ``F G φ``;
``multi(...)``; CTL ``A``/``E``) are refused with
:class:`~exactq.prism.lexer.PrismUnsupportedError`, one line naming the construct and
its position. Nesting deeper than :data:`~exactq.prism.lexer.MAX_NESTING` levels is
one line with its position, never a ``RecursionError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lexer import MAX_NESTING, PrismSyntaxError, PrismUnsupportedError, Source, Token, deep_recursion, tokenize

#: the tokens an operand alone may be (:meth:`_Parser.ternary`'s shortcut) and the tokens after it that end
#: an expression at every operator level (the eof token's text is "")
_OPERAND_KINDS = frozenset(("int", "double", "string", "ident"))
_CLOSERS = frozenset((")", "]", ",", ";", ":", "}", "..", "->", ""))
_WORD_OPERATORS = frozenset(("not", "and", "or"))  # (native queries' operators: the full descent reports them)

__all__ = [
    "Expr", "Literal", "Ident", "LabelRef", "Unary", "Binary", "Comparison", "Chain", "Ite", "Call",
    "Bound", "PathFormula", "RewardPath", "QueryNode", "FilterNode",
    "ConstDecl", "VarDecl", "Assign", "UpdateNode", "CommandNode", "ModuleNode", "RenamedModuleNode",
    "RewardItem", "RewardsNode", "ModelFile", "PropertyNode", "PropertiesFile",
    "parse_model_text", "parse_properties_text", "parse_native", "FUNCTIONS", "EXTENDED_FUNCTIONS",
    "FILTER_OPERATORS", "NATIVE_WORDS",
]

#: PRISM's filter operators (aliases: ``+`` is ``sum``, ``&`` is ``forall``, ``|`` is ``exists``)
FILTER_OPERATORS = ("min", "max", "argmin", "argmax", "count", "sum", "avg", "first", "range", "forall", "exists",
                    "print", "printall", "state")
_FILTER_ALIAS = {"+": "sum", "&": "forall", "|": "exists"}

#: functions of PRISM expressions: name -> (min, max) number of arguments (None: any)
FUNCTIONS = {"min": (1, None), "max": (1, None), "floor": (1, 1), "ceil": (1, 1), "round": (1, 1),
             "pow": (2, 2), "mod": (2, 2), "log": (2, 2)}
#: the functions of properties and native queries: PRISM's, and abs, sqrt, exp, and log(x) (natural)
EXTENDED_FUNCTIONS = {**FUNCTIONS, "abs": (1, 1), "sqrt": (1, 1), "exp": (1, 1), "log": (1, 2)}
#: words that are operators in native queries (``not``, ``and``, ``or``)
NATIVE_WORDS = ("not", "and", "or")

SUPPORTED_TYPES = {"ctmc": "ctmc", "stochastic": "ctmc", "dtmc": "dtmc", "probabilistic": "dtmc", "mdp": "mdp",
                   "nondeterministic": "mdp"}
UNSUPPORTED_TYPES = {"pta", "pomdp", "popta", "ctmdp", "smg", "csg", "tsg", "lts",
                     "idtmc", "imdp", "ipomdp"}
RESERVED = {
    "bool", "clock", "const", "ctmc", "double", "dtmc", "endinit", "endinvariant", "endmodule", "endobservables",
    "endrewards", "endsystem", "endplayer", "false", "formula", "global", "init", "int", "invariant", "label",
    "mdp", "module", "nondeterministic", "observable", "observables", "player", "probabilistic", "pta", "pomdp",
    "popta", "rewards", "stochastic", "system", "true", "filter", "func", "rate",
}


# ============================================================================ expressions
class Expr:
    """Base of expression nodes; ``line``/``col`` locate the node's first token."""

    __slots__ = ("line", "col")
    prec = 100

    def _wrap(self, child: "Expr", strict: bool = False) -> str:
        s = str(child)
        return f"({s})" if child.prec < self.prec or (strict and child.prec == self.prec) else s


class Literal(Expr):
    __slots__ = ("value", "type")

    def __init__(self, value, type_: str, line: int = 0, col: int = 0):
        self.value, self.type, self.line, self.col = value, type_, line, col

    def __str__(self):
        if self.type == "bool":
            return "true" if self.value else "false"
        return repr(self.value) if self.type == "double" else str(self.value)


class Ident(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str, line: int = 0, col: int = 0):
        self.name, self.line, self.col = name, line, col

    def __str__(self):
        return self.name


class LabelRef(Expr):
    """A quoted label ``"name"`` (or a property name in a properties file)."""

    __slots__ = ("name",)

    def __init__(self, name: str, line: int = 0, col: int = 0):
        self.name, self.line, self.col = name, line, col

    def __str__(self):
        return f'"{self.name}"'


class Unary(Expr):
    __slots__ = ("op", "arg", "prec")

    def __init__(self, op: str, arg: Expr, line: int = 0, col: int = 0):
        self.op, self.arg, self.line, self.col = op, arg, line, col
        self.prec = 7 if op == "!" else 12

    def __str__(self):
        return f"{self.op}{self._wrap(self.arg)}"


_BINARY_PREC = {"=>": 2, "<=>": 3, "|": 4, "&": 5, "=": 8, "!=": 8, "<": 9, "<=": 9, ">": 9, ">=": 9,
                "+": 10, "-": 10, "*": 11, "/": 11, "%": 11, "//": 11, "^": 13}


class Binary(Expr):
    __slots__ = ("op", "left", "right", "prec")

    def __init__(self, op: str, left: Expr, right: Expr, line: int = 0, col: int = 0):
        self.op, self.left, self.right, self.line, self.col = op, left, right, line, col
        self.prec = _BINARY_PREC[op]

    def __str__(self):
        if self.op == "^":  # right associative
            return f"{self._wrap(self.left, strict=True)} ^ {self._wrap(self.right)}"
        return f"{self._wrap(self.left)} {self.op} {self._wrap(self.right, strict=True)}"


class Comparison(Expr):
    """A chain of comparisons ``e0 op1 e1 op2 e2 ...``: ``e0 op1 e1 & e1 op2 e2 & ...`` (an extension).

    In PRISM ``0 < s <= 3`` would compare a boolean with a number (a type error); in
    properties and native queries it is the chain ``0 < s & s <= 3``. ``rest`` is a list
    of ``(op, expr)``.
    """

    __slots__ = ("first", "rest", "prec")

    def __init__(self, first: Expr, rest: list, line: int = 0, col: int = 0):
        self.first, self.rest, self.line, self.col = first, rest, line, col
        self.prec = max(_BINARY_PREC[op] for op, _ in rest)

    def __str__(self):
        return " ".join([self._wrap(self.first, strict=True)] + [f"{op} {self._wrap(e, strict=True)}"
                                                                 for op, e in self.rest])


class Chain(Expr):
    """A run of left-associative operators of one precedence level: ``first op1 e1 op2 e2 ...``.

    ``rest`` is a list of ``(op, expr)``; the value is computed left to right, as
    PRISM does (``a - b + c`` is ``(a - b) + c``).
    """

    __slots__ = ("first", "rest", "prec")

    def __init__(self, first: Expr, rest: list, line: int = 0, col: int = 0):
        self.first, self.rest, self.line, self.col = first, rest, line, col
        self.prec = _BINARY_PREC[rest[0][0]]

    def __str__(self):
        parts = [self._wrap(self.first)]
        for op, e in self.rest:
            parts.append(f"{op} {self._wrap(e, strict=True)}")
        return " ".join(parts)


def _chain(first: Expr, rest: list) -> Expr:
    """One Binary for a single operator, a flat Chain for more."""
    if not rest:
        return first
    if len(rest) == 1:
        op, right = rest[0]
        return Binary(op, first, right, first.line, first.col)
    return Chain(first, rest, first.line, first.col)


def _comparison(first: Expr, rest: list) -> Expr:
    """One Binary for a single comparison, a :class:`Comparison` chain for more."""
    if not rest:
        return first
    if len(rest) == 1:
        op, right = rest[0]
        return Binary(op, first, right, first.line, first.col)
    return Comparison(first, rest, first.line, first.col)


class Ite(Expr):
    __slots__ = ("cond", "then", "other")
    prec = 1

    def __init__(self, cond: Expr, then: Expr, other: Expr, line: int = 0, col: int = 0):
        self.cond, self.then, self.other, self.line, self.col = cond, then, other, line, col

    def __str__(self):
        return f"{self._wrap(self.cond, strict=True)} ? {self._wrap(self.then)} : {self._wrap(self.other)}"


class Call(Expr):
    __slots__ = ("fn", "args")

    def __init__(self, fn: str, args: list, line: int = 0, col: int = 0):
        self.fn, self.args, self.line, self.col = fn, args, line, col

    def __str__(self):
        return f"{self.fn}({', '.join(str(a) for a in self.args)})"


# ----------------------------------------------------------------------------- properties
@dataclass
class Bound:
    """A time (or step) bound: ``<=u``, ``<u``, ``>=l``, ``>l``, ``[l,u]`` or ``=t``."""

    lower: Expr | None = None
    upper: Expr | None = None
    lower_strict: bool = False
    upper_strict: bool = False
    text: str = ""

    def __str__(self):
        return self.text


@dataclass
class PathFormula:
    """``F φ``, ``G φ``, ``X φ``, ``φ1 U φ2``, ``φ1 W φ2``, ``φ1 R φ2`` (``left`` None for F, G, X).

    ``bound`` is None for an unbounded formula.
    """

    kind: str
    left: Expr | None
    right: Expr
    bound: Bound | None
    line: int = 0
    col: int = 0

    def __str__(self):
        b = str(self.bound) if self.bound else ""
        if self.left is None:
            return f"{self.kind}{b} {self.right}"
        return f"{self.left} {self.kind}{b} {self.right}"


@dataclass
class RewardPath:
    """``S``, ``C`` (total), ``C<=t``, ``I=t`` or ``F φ`` inside ``R=? [ ... ]``."""

    kind: str
    time: Expr | None = None
    target: Expr | None = None
    line: int = 0
    col: int = 0

    def __str__(self):
        if self.kind == "S":
            return "S"
        if self.kind == "C":
            return "C" if self.time is None else f"C<={self.time}"
        if self.kind == "I":
            return f"I={self.time}"
        return f"F {self.target}"


class QueryNode(Expr):
    """``P=? [ path ]``, ``S=? [ φ ]``, ``R{"r"}=? [ ... ]``, ``E=? [ e ]``, ``T=? [ F φ ]``, ``LRA=? [ φ ]``.

    ``relation`` is ``"=?"`` for a numerical query, or one of ``< <= > >=`` with the
    threshold expression ``threshold`` (``P>=0.9 [ ... ]``: true or false per state).
    """

    __slots__ = ("op", "reward", "body", "old_filter", "relation", "threshold", "opt", "_str")

    def __init__(self, op: str, body, reward=None, old_filter=None, line: int = 0, col: int = 0, relation="=?",
                 threshold=None, opt=None):
        self.op, self.body, self.reward, self.old_filter, self.line, self.col = op, body, reward, old_filter, line, col
        self.relation, self.threshold = relation, threshold
        self.opt = opt  # "min" or "max": an optimum over the schedulers of an MDP (Pmax=?, R{"r"}min=?, LRAmax=?)
        self._str = None

    @property
    def is_threshold(self) -> bool:
        return self.relation != "=?"

    def __str__(self):  # cached: nested queries are printed once, not once per level
        if self._str is None:
            self._str = self._format()
        return self._str

    def _format(self):
        r = "" if self.reward is None else (f'{{"{self.reward}"}}' if isinstance(self.reward, str)
                                            else f"{{{self.reward}}}")
        rel = "=?" if self.relation == "=?" else f"{self.relation}{self.threshold}"
        tail = ""
        if self.old_filter is not None:
            states, ops = self.old_filter
            tail = f" {{{states}}}" + "".join(f"{{{o}}}" for o in ops)
        return f"{self.op}{r}{self.opt or ''}{rel} [ {self.body}{tail} ]"


class FilterNode(Expr):
    """``filter(op, prop, states)`` (``op`` one of :data:`FILTER_OPERATORS`, aliases resolved)."""

    __slots__ = ("op", "prop", "states", "_str")

    def __init__(self, op: str, prop: Expr, states: Expr | None, line: int = 0, col: int = 0):
        self.op, self.prop, self.states, self.line, self.col = op, prop, states, line, col
        self._str = None

    def __str__(self):
        if self._str is None:
            tail = "" if self.states is None else f", {self.states}"
            self._str = f"filter({self.op}, {self.prop}{tail})"
        return self._str


# ============================================================================ model files
@dataclass
class ConstDecl:
    name: str
    type: str
    expr: Expr | None
    line: int
    col: int


@dataclass
class VarDecl:
    name: str
    type: str  # "int" or "bool"
    lo: Expr | None
    hi: Expr | None
    init: Expr | None
    line: int
    col: int


@dataclass
class Assign:
    var: str
    expr: Expr
    line: int
    col: int


@dataclass
class UpdateNode:
    prob: Expr | None
    assigns: list
    line: int
    col: int


@dataclass
class CommandNode:
    action: str | None
    guard: Expr
    updates: list
    line: int
    col: int
    module: str = ""


@dataclass
class ModuleNode:
    name: str
    decls: list
    commands: list
    line: int
    col: int


@dataclass
class RenamedModuleNode:
    name: str
    base: str
    renames: list  # (old, new, line, col)
    line: int
    col: int


@dataclass
class RewardItem:
    action: str | None  # None: a state item; "": unlabelled transitions; else the action
    guard: Expr
    value: Expr
    line: int
    col: int


@dataclass
class RewardsNode:
    name: str | None
    items: list
    line: int
    col: int


@dataclass
class ModelFile:
    source: Source
    type: str | None = None
    type_pos: tuple = (1, 1)
    constants: list = field(default_factory=list)
    globals: list = field(default_factory=list)
    formulas: dict = field(default_factory=dict)  # name -> (expr, line, col)
    labels: dict = field(default_factory=dict)  # name -> (expr, line, col)
    modules: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    init: Expr | None = None
    system: list | None = None  # module names in the system, with positions


@dataclass
class PropertyNode:
    """One property of a file (``expr`` None and ``error`` set when it did not parse)."""

    name: str | None
    expr: Expr | None
    text: str
    line: int
    col: int
    error: Exception | None = None


@dataclass
class PropertiesFile:
    source: Source
    constants: list = field(default_factory=list)
    formulas: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    properties: list = field(default_factory=list)
    #: declarations (const, label, formula) that did not parse: PropertyNode with ``error`` set
    errors: list = field(default_factory=list)


# ============================================================================ the parser
class _Parser:
    """The recursive-descent parser of model files, properties and native queries.

    ``properties`` parses properties, with the extensions where PRISM has no meaning of
    its own: comparison chains (``0 < s <= 3``), ``^`` and ``**`` (power), ``%``, ``==``,
    ``&&``, ``||``, unary ``+``, and the functions ``abs``, ``sqrt``, ``exp``, ``log(x)``.
    ``native`` reads exactq's native queries, which add ``//`` (floor division; no
    comments), the words ``not``, ``and``, ``or``, and one precedence level for every
    comparison (as the native language always had).
    """

    def __init__(self, source: Source, properties: bool = False, native: bool = False):
        self.src = source
        self.native = native
        self.ext = properties or native
        self.toks = tokenize(source, native=native)
        self.i = 0
        self.properties = properties or native
        self.functions = EXTENDED_FUNCTIONS if self.ext else FUNCTIONS
        self.query_depth = 0  # inside the brackets of a query (where F, G, X, U, W, R are operators)
        self.depth = 0  # nesting levels, at most MAX_NESTING
        self.in_bound = False  # parsing a time bound or threshold: 'T (' is the constant T, not a call

    # -- tokens ----------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        if not k:  # (self.i never passes the eof token)
            return self.toks[self.i]
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def at(self, *texts: str, k: int = 0) -> bool:
        tok = self.toks[self.i] if not k else self.toks[min(self.i + k, len(self.toks) - 1)]
        return tok.text in texts and tok.kind in ("op", "ident")

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            return self.next()
        return None

    def prev_line(self) -> int:
        return self.toks[self.i - 1].line if self.i > 0 else 0

    def prev_text(self) -> str:
        return self.toks[self.i - 1].text if self.i > 0 else ""

    def error(self, expected: str, tok: Token | None = None, after: str | None = None):
        tok = tok or self.peek()
        prev = self.prev_text() if after is None else after
        where = f" after {prev!r}" if prev else ""
        got = tok.describe() if tok.kind != "eof" else self.src.end_text()
        return self.src.syntax_error(tok.line, tok.col, f"expected {expected}{where}; got {got}")

    def expect(self, text: str, expected: str | None = None) -> Token:
        if self.at(text):
            return self.next()
        raise self.error(expected or repr(text))

    def ident(self, what: str = "an identifier") -> Token:
        tok = self.peek()
        if tok.kind != "ident":
            raise self.error(what)
        if tok.text in RESERVED:
            raise self.src.syntax_error(tok.line, tok.col, f"expected {what}; got the keyword {tok.text!r}")
        return self.next()

    def string(self, what: str) -> Token:
        tok = self.peek()
        if tok.kind != "string":
            raise self.error(what)
        return self.next()

    def unsupported(self, tok: Token, message: str):
        return self.src.unsupported(tok.line, tok.col, message)

    # -- nesting -------------------------------------------------------------------
    def enter(self, tok: Token) -> None:
        """One level deeper (parentheses, an operator's operand, a query, a filter): at most MAX_NESTING."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.src.syntax_error(tok.line, tok.col, f"nesting deeper than {MAX_NESTING} levels (parentheses, "
                                        "operators, queries); simplify the expression")

    def leave(self) -> None:
        self.depth -= 1

    # -- expressions -------------------------------------------------------------
    def expression(self) -> Expr:
        return self.ternary()

    def ternary(self) -> Expr:
        # a lone operand (a literal, a name, a label) before a token that no operator level takes (the ')' of
        # a call, the ';' of an update): every level below would hand it up unchanged, so it is read directly
        # (half the operands of a model file; each skipped level is a call and a look-ahead)
        toks, i = self.toks, self.i
        if toks[i].kind in _OPERAND_KINDS and i + 1 < len(toks) and toks[i + 1].text in _CLOSERS \
                and toks[i + 1].kind in ("op", "eof") and toks[i].text not in _WORD_OPERATORS:
            return self.atom()
        cond = self.implies()
        if self.at("?"):
            tok = self.next()
            self.enter(tok)
            try:
                then = self.ternary()
                self.expect(":", "':' of the conditional 'c ? a : b'")
                other = self.ternary()
            finally:
                self.leave()
            return Ite(cond, then, other, cond.line, cond.col)
        return cond

    def implies(self) -> Expr:
        left = self.iff()
        if self.at("=>"):
            tok = self.next()
            self.enter(tok)
            try:
                right = self.implies()
            finally:
                self.leave()
            return Binary("=>", left, right, left.line, left.col)
        return left

    def iff(self) -> Expr:
        left = self.disjunction()
        rest = []
        while self.at("<=>"):
            self.next()
            rest.append(("<=>", self.disjunction()))
        return _chain(left, rest)

    def _word(self, *texts: str) -> bool:
        """An operator (or, in native queries, its word: ``and``, ``or``, ``not``) is next."""
        tok = self.peek()
        if tok.kind == "op":
            return tok.text in texts
        return self.native and tok.kind == "ident" and tok.text in texts

    def disjunction(self) -> Expr:
        left = self.conjunction()
        rest = []
        ops = ("|", "||", "or") if self.ext else ("|",)
        while self._word(*ops):
            self.next()
            rest.append(("|", self.conjunction()))
        if self.at("||") and not self.in_system:
            tok = self.peek()
            raise self.src.syntax_error(tok.line, tok.col, "'||' is parallel composition (system ... endsystem); "
                                        "disjunction is '|'")
        return _chain(left, rest)

    in_system = False

    #: inside the right side of an assignment written without parentheses (``s'=7 & (d'=3)``): a ``&``
    #: that is followed by another assignment ends the right side
    bare_assignment = False

    def conjunction(self) -> Expr:
        left = self.negation()
        rest = []
        ops = ("&", "&&", "and") if self.ext else ("&",)
        while self._word(*ops) and not (self.bare_assignment and self._assignment_at(1)):
            self.next()
            rest.append(("&", self.negation()))
        return _chain(left, rest)

    def negation(self) -> Expr:
        if self._word("!", "not"):
            tok = self.next()
            self.enter(tok)
            try:
                return Unary("!", self.negation(), tok.line, tok.col)
            finally:
                self.leave()
        return self.comparison() if self.native else self.equality()

    def comparison(self) -> Expr:
        """Native queries: every comparison on one level, chains as conjunctions (``0 < q1 <= 3``)."""
        left = self.additive()
        rest = []
        while self.at("<", "<=", ">", ">=", "=", "==", "!="):
            op = self.next().text
            rest.append(("=" if op == "==" else op, self.additive()))
        return _comparison(left, rest)

    def equality(self) -> Expr:
        left = self.relational()
        ops = ("=", "!=", "==") if self.ext else ("=", "!=")
        while self.at(*ops):
            op = self.next().text
            left = Binary("=" if op == "==" else op, left, self.relational(), left.line, left.col)
        return left

    def relational(self) -> Expr:
        left = self.additive()
        rest = []
        while self.at("<", "<=", ">", ">="):
            op = self.next().text
            rest.append((op, self.additive()))
            if not self.ext:  # PRISM: left associative (a chain is a type error there)
                op, right = rest.pop()
                left = Binary(op, left, right, left.line, left.col)
        return _comparison(left, rest)

    def additive(self) -> Expr:
        left = self.multiplicative()
        rest = []
        while self.at("+", "-"):
            op = self.next().text
            rest.append((op, self.multiplicative()))
        return _chain(left, rest)

    def multiplicative(self) -> Expr:
        left = self.unary()
        rest = []
        ops = ("*", "/", "%", "//") if self.ext else ("*", "/")
        while self.at(*ops):
            op = self.next().text
            rest.append((op, self.unary()))
        return _chain(left, rest)

    def unary(self) -> Expr:
        if self.at("-") or (self.ext and self.at("+")):
            tok = self.next()
            self.enter(tok)
            try:
                arg = self.unary()
            finally:
                self.leave()
            if tok.text == "+":
                return arg
            if isinstance(arg, Literal) and arg.type != "bool":
                return Literal(-arg.value, arg.type, tok.line, tok.col)
            return Unary("-", arg, tok.line, tok.col)
        return self.power() if self.ext else self.atom()

    def power(self) -> Expr:
        """``a ^ b``, ``a ** b`` (an extension): right associative, tighter than unary minus (``-2^2`` is -4)."""
        base = self.atom()
        if self.at("^", "**"):
            tok = self.next()
            self.enter(tok)
            try:
                exponent = self.unary()
            finally:
                self.leave()
            return Binary("^", base, exponent, base.line, base.col)
        return base

    def _starts_operand(self, k: int) -> bool:
        """Whether the token ``k`` ahead can start the operand of a temporal operator (or its bound)."""
        t = self.peek(k)
        if t.kind in ("string", "int", "double"):
            return True
        if t.kind == "ident":
            return t.text not in ("U", "W", "R")
        return t.kind == "op" and t.text in ("(", "!", "<=", "<", ">=", ">", "[", "-", "=")  # F=t: the point [t,t]

    def atom(self) -> Expr:
        tok = self.peek()
        if tok.kind == "int":
            self.next()
            return Literal(int(tok.text), "int", tok.line, tok.col)
        if tok.kind == "double":
            self.next()
            return Literal(float(tok.text), "double", tok.line, tok.col)
        if tok.kind == "string":
            self.next()
            return LabelRef(tok.text[1:-1], tok.line, tok.col)
        if tok.kind == "ident":
            if tok.text in ("true", "false"):
                self.next()
                return Literal(tok.text == "true", "bool", tok.line, tok.col)
            if self.properties:
                if self._is_query_start():
                    return self.query()
                if tok.text == "filter" and self.at("(", k=1):
                    return self.filter()
                if tok.text in ("A", "E") and self.at("[", k=1):
                    raise self.unsupported(tok, f"the path quantifier '{tok.text} [ ... ]' (CTL) is outside the "
                                           "supported fragment; use P>0 [ ... ] or P>=1 [ ... ]")
                if tok.text == "multi" and self.at("(", k=1):
                    raise self.unsupported(tok, "multi-objective queries 'multi(...)' are outside the supported "
                                           "fragment (they concern MDPs)")
                if self.query_depth and tok.text in ("F", "G", "X") and self._starts_operand(1):
                    raise self.unsupported(tok, f"the temporal operator '{tok.text}' in a state formula or inside "
                                           "another path formula (LTL) is outside the supported fragment: "
                                           "P=? [ ... ] takes one temporal operator, whose operands are state "
                                           "formulas")
            if tok.text == "func" and self.at("(", k=1):
                raise self.unsupported(tok, "'func(...)' is outside the supported fragment; write the function "
                                       "directly, e.g. min(a, b)")
            if self.native and tok.text in NATIVE_WORDS:
                raise self.error("an expression")
            if self.at("(", k=1) and tok.text in self.functions:
                return self.call()
            if self.at("(", k=1) and not self.in_bound:
                self.next()
                raise self.src.syntax_error(tok.line, tok.col, f"unknown function {tok.text!r}; valid: "
                                            f"{', '.join(sorted(self.functions))} (PRISM has no user-defined "
                                            "functions)")
            if tok.text in RESERVED:
                raise self.src.syntax_error(tok.line, tok.col, f"expected an expression; got the keyword "
                                            f"{tok.text!r}")
            self.next()
            return Ident(tok.text, tok.line, tok.col)
        if self.at("("):
            tok = self.next()
            self.enter(tok)
            bound, self.in_bound = self.in_bound, False
            try:
                inner = self.expression()
                self.expect(")", "')'")
            finally:
                self.leave()
                self.in_bound = bound
            return inner
        raise self.error("an expression")

    def call(self) -> Expr:
        name = self.next()
        self.next()  # "("
        self.enter(name)
        bound, self.in_bound = self.in_bound, False
        try:
            args = [] if self.at(")") else [self.expression()]
            while args and self.accept(","):
                args.append(self.expression())
            self.expect(")", "',' or ')'")
        finally:
            self.leave()
            self.in_bound = bound
        lo, hi = self.functions[name.text]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise self.src.syntax_error(name.line, name.col, f"function {name.text!r} takes {want} argument"
                                        f"{'' if want in ('1', 'at least 1') else 's'}; got {len(args)}")
        return Call(name.text, args, name.line, name.col)

    # -- properties --------------------------------------------------------------
    def _is_query_start(self) -> bool:
        tok = self.peek()
        if tok.text in ("Pmin", "Pmax", "Rmin", "Rmax", "Smin", "Smax"):
            return self.at("=", "<", "<=", ">", ">=", "{", "[", k=1)
        if tok.text in ("LRAmin", "LRAmax"):
            return self.at("=", k=1) and self.at("?", k=2)
        nxt = self.peek(1)
        if self.native and tok.text in ("P", "S", "R", "E", "T", "LRA") and self.at("[", k=1):
            return True  # a query without its '=?' (the error says so)
        if tok.text in ("E", "T", "LRA"):  # exactq's and Storm's numerical queries: only '=?'
            return self.at("=", k=1) and self.at("?", k=2)
        if tok.text not in ("P", "S", "R"):
            return False
        return nxt.kind == "op" and nxt.text in ("=", "<", "<=", ">", ">=", "{")

    def query(self) -> Expr:
        tok = self.next()
        op = tok.text
        opt = None
        if op in ("Smin", "Smax"):
            raise self.unsupported(tok, f"'{op}' (a long-run probability optimised over the schedulers of an MDP) "
                                   f"is outside the supported fragment; ask LRA{op[1:]}=? [ phi ]")
        if op in ("Pmin", "Pmax", "Rmin", "Rmax", "LRAmin", "LRAmax"):
            op, opt = op[:-3], op[-3:]
        reward = None
        if op == "R" and self.at("{"):
            self.next()
            rt = self.peek()
            if rt.kind == "string":
                reward = self.next().text[1:-1]
            elif rt.kind == "int":
                reward = int(self.next().text)
            else:
                raise self.error('a reward structure name in quotes, e.g. R{"time"}, or its number')
            self.expect("}", "'}'")
            if self.at("{"):
                raise self.unsupported(self.peek(), "a second '{...}' after R{...} is outside the supported "
                                       "fragment")
        if op == "R" and opt is None and self.at("min", "max"):
            opt = self.next().text
        relation, threshold = "=?", None
        if self.at("=") and self.at("?", k=1):
            self.next()
            self.next()
        elif self.at("<", "<=", ">", ">="):
            rel = self.next()
            if op in ("E", "T", "LRA"):
                raise self.src.syntax_error(rel.line, rel.col, f"'{op}' takes no threshold; ask '{op}=?'")
            relation = rel.text
            bound, self.in_bound = self.in_bound, True
            try:
                threshold = self.additive()
            finally:
                self.in_bound = bound
        else:
            raise self.error("'=?' or a threshold ('>=0.9', '<0.1')", after=self.prev_text())
        if not self.at("["):
            raise self.error("'['", after=f"{op}{'=?' if relation == '=?' else relation + ' ' + str(threshold)}")
        self.next()
        self.enter(tok)
        self.query_depth += 1
        bound, self.in_bound = self.in_bound, False
        try:
            if op == "P":
                body = self.path_formula()
            elif op == "R":
                body = self.reward_path()
            elif op == "T":
                ftok = self.peek()
                if not self.at("F"):
                    raise self.error("'F' (T=? [ F b ])")
                self.next()
                if self.at("<=", "<", ">=", ">", "[", "="):
                    raise self.src.syntax_error(ftok.line, ftok.col + 1, "T=? takes an unbounded 'F b'; got a "
                                                "time bound")
                body = RewardPath("F", target=self.expression(), line=ftok.line, col=ftok.col)
            else:  # S, E, LRA
                body = self.expression()
                if self.at("U", "W", "R") or (self.at("F", "G", "X") and self._starts_operand(1)):
                    t = self.peek()
                    raise self.src.syntax_error(t.line, t.col, f"'{op}' takes a state formula; the path operator "
                                                f"{t.text!r} belongs in P=? [ ... ]")
            old = self.old_filter()
        finally:
            self.query_depth -= 1
            self.in_bound = bound
            self.leave()
        self.expect("]", f"']' to close the {op}{'=?' if relation == '=?' else relation} query")
        return QueryNode(op, body, reward, old, tok.line, tok.col, relation=relation, threshold=threshold, opt=opt)

    def old_filter(self):
        if not self.at("{"):
            return None
        self.next()
        states = self.expression()
        self.expect("}", "'}'")
        ops = []
        while self.at("{"):
            self.next()
            if not self.at("min", "max"):
                raise self.error("'min' or 'max' in an old-style filter")
            ops.append(self.next().text)
            self.expect("}", "'}'")
        return states, ops

    def bound(self) -> Bound | None:
        start = self.i
        if self.at("<=", "<"):
            strict = self.next().text == "<"
            b = Bound(upper=self.bound_value(), upper_strict=strict)
        elif self.at(">=", ">"):
            strict = self.next().text == ">"
            b = Bound(lower=self.bound_value(), lower_strict=strict)
        elif self.at("="):
            self.next()
            e = self.bound_value()
            b = Bound(lower=e, upper=e)
        elif self.at("["):
            self.next()
            lo = self.expression()
            self.expect(",", "',' between the two ends of the interval")
            hi = self.expression()
            self.expect("]", "']' to close the interval")
            b = Bound(lower=lo, upper=hi)
        else:
            return None
        b.text = "".join(t.text for t in self.toks[start:self.i])
        return b

    def bound_value(self) -> Expr:
        """A bound: an expression of constants, ending before the state formula that follows.

        ``T (x)`` is the constant ``T`` and the operand ``(x)``: an identifier followed by
        ``(`` is a call only for PRISM's built-in functions.
        """
        bound, self.in_bound = self.in_bound, True
        try:
            return self.additive()
        finally:
            self.in_bound = bound

    def _no_second_temporal(self) -> None:
        if self.peek().line > self.prev_line() and self._starts_item(self.i):
            return  # a new property on the next line: the caller reports the missing ']'
        if self.at("U", "W", "R") or (self.at("F", "G", "X") and self._starts_operand(1)):
            t = self.peek()
            raise self.unsupported(t, f"a second temporal operator {t.text!r} in one path formula (an LTL formula) "
                                   "is outside the supported fragment")

    def path_formula(self) -> PathFormula:
        tok = self.peek()
        if self.at("F", "G", "X") and self._starts_operand(1):
            kind = self.next().text
            b = None
            if kind != "X":
                b = self.bound()
            elif self.at("<=", "<", ">=", ">", "[", "="):
                t = self.peek()
                raise self.unsupported(t, "a bound on 'X' is outside the supported fragment (X is one step)")
            right = self.expression()
            self._no_second_temporal()
            return PathFormula(kind, None, right, b, tok.line, tok.col)
        if self.at("U", "W", "R"):
            raise self.error("an expression", after="[")
        left = self.expression()
        op = self.peek()
        if not self.at("U", "W", "R"):
            raise self.error("a path formula 'F b', 'F<=t b', 'G b', 'X b', 'a U b', 'a W b' or 'a R b'", tok=tok,
                             after="[")
        self.next()
        b = self.bound()
        right = self.expression()
        self._no_second_temporal()
        return PathFormula(op.text, left, right, b, tok.line, tok.col)

    def reward_path(self) -> RewardPath:
        tok = self.peek()
        if self.at("S"):
            self.next()
            return RewardPath("S", line=tok.line, col=tok.col)
        if self.at("C"):
            self.next()
            if self.at("<="):
                self.next()
                return RewardPath("C", time=self.bound_value(), line=tok.line, col=tok.col)
            if self.at("<", ">", ">=", "[", "="):
                t = self.peek()
                raise self.unsupported(t, f"the bound '{t.text}...' on C is outside the supported fragment; use C<=t "
                                       "or C (the total reward)")
            return RewardPath("C", line=tok.line, col=tok.col)
        if self.at("I"):
            self.next()
            self.expect("=", "'=' (I=t)")
            return RewardPath("I", time=self.bound_value(), line=tok.line, col=tok.col)
        if self.at("F"):
            self.next()
            if self.at("<=", "<", ">=", ">", "["):
                raise self.unsupported(self.peek(), "a time bound on 'F' inside R=? is outside the supported "
                                       "fragment; use C<=t")
            target = self.expression()
            self._no_second_temporal()
            return RewardPath("F", target=target, line=tok.line, col=tok.col)
        if tok.kind == "ident" and tok.text == "LRA":
            self.next()
            return RewardPath("S", line=tok.line, col=tok.col)
        raise self.error("a reward formula 'S', 'C', 'C<=t', 'I=t', 'F b' or 'LRA'", after="[")

    def filter(self) -> Expr:
        tok = self.next()
        self.next()  # "("
        optok = self.peek()
        if optok.kind == "ident" or (optok.kind == "op" and optok.text in ("+", "&", "|")):
            op = _FILTER_ALIAS.get(optok.text, optok.text)
            if op not in FILTER_OPERATORS:
                raise self.src.syntax_error(optok.line, optok.col, f"unknown filter operator {optok.text!r}; valid: "
                                            f"{', '.join(FILTER_OPERATORS)}, +, &, |")
            self.next()
        else:
            raise self.error(f"a filter operator ({', '.join(FILTER_OPERATORS)})")
        self.expect(",", "',' after the filter operator")
        self.enter(tok)
        bound, self.in_bound = self.in_bound, False
        depth, self.query_depth = self.query_depth, 0
        try:
            prop = self.expression()
            states = None
            if self.accept(","):
                states = self.expression()
            self.expect(")", "')' to close the filter")
        finally:
            self.leave()
            self.in_bound = bound
            self.query_depth = depth
        return FilterNode(op, prop, states, tok.line, tok.col)

    # -- model files --------------------------------------------------------------
    def model_file(self) -> ModelFile:
        mf = ModelFile(self.src)
        while self.peek().kind != "eof":
            tok = self.peek()
            t = tok.text if tok.kind == "ident" else None
            if t in SUPPORTED_TYPES or t in UNSUPPORTED_TYPES:
                self.next()
                if t in UNSUPPORTED_TYPES:
                    raise self.unsupported(tok, f"the model type {t!r} is outside the supported fragment: exactq "
                                           "solves Markov chains ('ctmc' or 'dtmc') and MDPs ('mdp')")
                if mf.type is not None:
                    raise self.src.syntax_error(tok.line, tok.col, f"the model type is given twice ({t!r})")
                mf.type, mf.type_pos = SUPPORTED_TYPES[t], (tok.line, tok.col)
            elif t == "const":
                mf.constants.append(self.const_decl())
            elif t == "global":
                self.next()
                mf.globals.append(self.var_decl())
            elif t == "formula":
                self.formula(mf.formulas)
            elif t == "label":
                self.label(mf.labels)
            elif t == "module":
                mf.modules.append(self.module())
            elif t == "rewards":
                mf.rewards.append(self.rewards())
            elif t == "init":
                self.next()
                if mf.init is not None:
                    raise self.src.syntax_error(tok.line, tok.col, "a second 'init ... endinit' block")
                mf.init = self.expression()
                self.expect("endinit", "'endinit'")
            elif t == "system":
                if mf.system is not None:
                    raise self.unsupported(tok, "a second 'system ... endsystem' block is outside the supported "
                                           "fragment")
                mf.system = self.system()
            elif t in ("observables", "observable"):
                raise self.unsupported(tok, f"'{t}' (a partially observable model) is outside the supported fragment")
            elif t == "player":
                raise self.unsupported(tok, "'player' (a stochastic game) is outside the supported fragment")
            else:
                raise self.error("a declaration (const, global, formula, label, module, rewards, init, system) "
                                 "or the model type", after="")
        return mf

    def const_decl(self) -> ConstDecl:
        self.next()  # const
        type_ = "int"
        if self.at("int", "double", "bool"):
            type_ = self.next().text
        name = self.ident("the constant's name")
        expr = None
        if self.accept("="):
            expr = self.expression()
        self.expect(";", "';' to end the constant declaration")
        return ConstDecl(name.text, type_, expr, name.line, name.col)

    def var_decl(self) -> VarDecl:
        name = self.ident("a variable name")
        self.expect(":", "':' after the variable name")
        tok = self.peek()
        lo = hi = None
        if self.at("["):
            self.next()
            lo = self.expression()
            self.expect("..", "'..' between the bounds of the range")
            hi = self.expression()
            self.expect("]", "']' to close the range")
            type_ = "int"
        elif self.at("bool"):
            self.next()
            type_ = "bool"
        elif self.at("int", "double"):
            raise self.unsupported(tok, f"the unbounded variable type '{tok.text}' is outside the supported "
                                   "fragment; give a range [lo..hi]")
        elif self.at("clock"):
            raise self.unsupported(tok, "clock variables (a PTA) are outside the supported fragment")
        else:
            raise self.error("a range '[lo..hi]' or 'bool'")
        init = None
        if self.accept("init"):
            init = self.expression()
        self.expect(";", "';' to end the variable declaration")
        return VarDecl(name.text, type_, lo, hi, init, name.line, name.col)

    def formula(self, table: dict) -> None:
        self.next()
        name = self.ident("the formula's name")
        self.expect("=", "'=' after the formula's name")
        expr = self.expression()
        self.expect(";", "';' to end the formula")
        if name.text in table:
            raise self.src.syntax_error(name.line, name.col, f"formula {name.text!r} is defined twice")
        table[name.text] = (expr, name.line, name.col)

    def label(self, table: dict) -> None:
        self.next()
        name = self.string('the label\'s name in quotes, e.g. label "done" = ...')
        self.expect("=", "'=' after the label's name")
        expr = self.expression()
        self.expect(";", "';' to end the label")
        key = name.text[1:-1]
        if key in table or key in ("init", "deadlock"):
            raise self.src.syntax_error(name.line, name.col, f"label {name.text} is defined twice (\"init\" and "
                                        "\"deadlock\" are built in)")
        table[key] = (expr, name.line, name.col)

    def module(self):
        start = self.next()
        name = self.ident("the module's name")
        if self.accept("="):
            base = self.ident("the name of the module to rename")
            self.expect("[", "'[' to start the renaming")
            renames = []
            while True:
                old = self.ident("an identifier to rename")
                self.expect("=", "'=' in the renaming 'old = new'")
                new = self.ident("the new name")
                renames.append((old.text, new.text, old.line, old.col))
                if not self.accept(","):
                    break
            self.expect("]", "']' or ',' in the renaming")
            self.expect("endmodule", "'endmodule'")
            return RenamedModuleNode(name.text, base.text, renames, start.line, start.col)
        decls, commands = [], []
        while not self.at("endmodule"):
            tok = self.peek()
            if tok.kind == "eof":
                raise self.error(f"'endmodule' to close module {name.text!r}")
            if self.at("["):
                commands.append(self.command(name.text))
            elif self.at("invariant"):
                raise self.unsupported(tok, "'invariant' (a PTA) is outside the supported fragment")
            elif tok.kind == "ident" and self.at(":", k=1):
                decls.append(self.var_decl())
            else:
                raise self.error("a variable declaration 'x : [lo..hi];', a command '[] guard -> ...;' or "
                                 "'endmodule'")
        self.next()
        return ModuleNode(name.text, decls, commands, start.line, start.col)

    def command(self, module: str) -> CommandNode:
        start = self.next()  # [
        action = None
        if not self.at("]"):
            action = self.ident("an action name or ']'").text
        self.expect("]", "']' to close the action")
        guard = self.expression()
        self.expect("->", "'->' after the guard")
        updates = [self.update()]
        while self.accept("+"):
            updates.append(self.update())
        self.expect(";", "';' to end the command")
        return CommandNode(action, guard, updates, start.line, start.col, module)

    def _at_assignment(self) -> bool:
        return self._assignment_at(0)

    def _assignment_at(self, k: int) -> bool:
        """An assignment starts ``k`` tokens ahead: ``(x'=...)``, or ``x'=...`` without parentheses."""
        if self.at("(", k=k):
            return self.peek(k + 1).kind == "ident" and self.at("'", k=k + 2)
        return self.peek(k).kind == "ident" and self.at("'", k=k + 1)

    def update(self) -> UpdateNode:
        tok = self.peek()
        prob = None
        if not (self._at_assignment() or (self.at("true") and self.at(";", "+", k=1))):
            prob = self.expression()
            self.expect(":", "':' after the rate (or probability) of the update")
        return UpdateNode(prob, self.assignments(), tok.line, tok.col)

    def assignments(self) -> list:
        if self.at("true"):
            self.next()
            return []
        out = [self.assignment()]
        while self.accept("&"):
            out.append(self.assignment())
        return out

    def assignment(self) -> Assign:
        if not self._at_assignment():
            raise self.error("an assignment \"(x'=e)\" or 'true'")
        if not self.at("("):  # x'=e without parentheses (PRISM accepts it): e ends at '&' before the next one
            var = self.next()
            self.next()  # '
            self.expect("=", "'=' in the assignment")
            bare, self.bare_assignment = self.bare_assignment, True
            try:
                expr = self.expression()
            finally:
                self.bare_assignment = bare
            return Assign(var.text, expr, var.line, var.col)
        self.next()
        var = self.next()
        self.next()  # '
        self.expect("=", "'=' in the assignment")
        bare, self.bare_assignment = self.bare_assignment, False
        try:
            expr = self.expression()
        finally:
            self.bare_assignment = bare
        self.expect(")", "')' to close the assignment")
        return Assign(var.text, expr, var.line, var.col)

    def rewards(self) -> RewardsNode:
        start = self.next()
        name = None
        if self.peek().kind == "string":
            name = self.next().text[1:-1]
        items = []
        while not self.at("endrewards"):
            tok = self.peek()
            if tok.kind == "eof":
                raise self.error("'endrewards'")
            action = None
            if self.at("["):
                self.next()
                action = ""
                if not self.at("]"):
                    action = self.ident("an action name or ']'").text
                self.expect("]", "']' to close the action")
            guard = self.expression()
            self.expect(":", "':' between the guard and the reward")
            value = self.expression()
            self.expect(";", "';' to end the reward item")
            items.append(RewardItem(action, guard, value, tok.line, tok.col))
        self.next()
        return RewardsNode(name, items, start.line, start.col)

    def system(self) -> list:
        start = self.next()
        if self.peek().kind == "string":
            raise self.unsupported(self.peek(), "named 'system' blocks are outside the supported fragment")
        names = []
        self.in_system = True
        try:
            self.sys_parallel(names)
        finally:
            self.in_system = False
        self.expect("endsystem", "'||' or 'endsystem'")
        return names or [("", start.line, start.col)]

    def sys_parallel(self, names: list) -> None:
        self.sys_atom(names)
        while True:
            tok = self.peek()
            if self.at("||"):
                self.next()
                self.sys_atom(names)
            elif self.at("|||"):
                raise self.unsupported(tok, "the interleaving operator '|||' in 'system' is outside the supported "
                                       "fragment (only plain parallel composition '||')")
            elif self.at("|") and self.at("[", k=1):
                raise self.unsupported(tok, "restricted synchronisation '|[...]|' in 'system' is outside the "
                                       "supported fragment (only plain parallel composition '||')")
            elif self.at("/"):
                raise self.unsupported(tok, "action hiding '/{...}' in 'system' is outside the supported fragment")
            elif self.at("{"):
                raise self.unsupported(tok, "action renaming '{a<-b}' in 'system' is outside the supported fragment")
            else:
                return

    def sys_atom(self, names: list) -> None:
        tok = self.peek()
        if self.at("("):
            self.next()
            self.sys_parallel(names)
            self.expect(")", "')'")
            return
        if tok.kind == "string":
            raise self.unsupported(tok, "references to named systems are outside the supported fragment")
        name = self.ident("a module name")
        names.append((name.text, name.line, name.col))

    # -- properties files ----------------------------------------------------------
    def properties_file(self) -> PropertiesFile:
        """Every declaration and property; one that does not parse is kept with its error, and the rest still parse.

        After an error the parser resumes at the next ``;``, or at the next line that
        starts outside any bracket the failed item opened (or starts a new declaration,
        a named property or a query).
        """
        pf = PropertiesFile(self.src)
        lines = self.src.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        while self.peek().kind != "eof":
            tok = self.peek()
            if self.accept(";"):
                continue
            start = first_i = self.i
            is_decl = tok.kind == "ident" and tok.text in ("const", "formula", "label")
            name = None
            try:
                if is_decl:
                    {"const": lambda: pf.constants.append(self.const_decl()),
                     "formula": lambda: self.formula(pf.formulas),
                     "label": lambda: self.label(pf.labels)}[tok.text]()
                    continue
                if tok.kind == "string" and self.at(":", k=1):
                    name = self.next().text[1:-1]
                    self.next()
                    first_i = self.i
                first = self.peek()
                self.depth = self.query_depth = 0
                expr = self.expression()
                end = self.toks[self.i - 1]
                if not (self.accept(";") or self.peek().kind == "eof" or self.peek().line > end.line):
                    raise self.error("';' or a new line after the property")
                text = _slice(lines, first, end)
                pf.properties.append(PropertyNode(name, expr, text, first.line, first.col))
            except (PrismSyntaxError, PrismUnsupportedError) as exc:
                stop = self._resume(start)
                first = self.toks[min(first_i, stop - 1)]
                last = self.toks[max(stop - 1, first_i)]
                if last.kind == "op" and last.text == ";" and stop - 1 > first_i:
                    last = self.toks[stop - 2]
                text = _slice(lines, first, last) if last.kind != "eof" else first.text
                node = PropertyNode(name, None, text, first.line, first.col, error=exc)
                (pf.errors if is_decl else pf.properties).append(node)
                self.i = stop
        return pf

    def _resume(self, start: int) -> int:
        """Where to continue after an item starting at token ``start`` failed to parse."""
        depth = 0
        j = start
        n = len(self.toks)
        while j < n and self.toks[j].kind != "eof":
            t = self.toks[j]
            if j > start:
                prev = self.toks[j - 1]
                if prev.kind == "op" and prev.text == ";" and depth <= 0:
                    return j
                if t.line > prev.line and (depth <= 0 or self._starts_item(j)):
                    return j
            if t.kind == "op" and t.text in ("(", "[", "{"):
                depth += 1
            elif t.kind == "op" and t.text in (")", "]", "}"):
                depth -= 1
            j += 1
        return j

    def _starts_item(self, j: int) -> bool:
        t = self.toks[j]
        nxt = self.toks[min(j + 1, len(self.toks) - 1)]
        if t.kind == "ident" and t.text in ("const", "formula", "label", "filter", "P", "S", "R", "E", "T", "LRA",
                                            "Pmin", "Pmax", "Rmin", "Rmax", "LRAmin", "LRAmax"):
            return True
        return t.kind == "string" and nxt.kind == "op" and nxt.text == ":"


def _slice(lines: list, first: Token, last: Token) -> str:
    """The source text from the first to the last token (joined with spaces across lines)."""
    if first.line == last.line:
        return lines[first.line - 1][first.col - 1:last.col - 1 + len(last.text)]
    parts = [lines[first.line - 1][first.col - 1:]]
    parts += [lines[k].strip() for k in range(first.line, last.line - 1)]
    parts.append(lines[last.line - 1][:last.col - 1 + len(last.text)].strip())
    return " ".join(p.strip() for p in parts if p.strip())


def parse_model_text(text: str, name: str = "model") -> ModelFile:
    """Parse the text of a PRISM model file (see the module docstring for the fragment).

    Examples
    --------
    >>> m = parse_model_text("ctmc module q n : [0..2] init 0; [] n<2 -> 1.5 : (n'=n+1); endmodule")
    >>> m.type, m.modules[0].name, str(m.modules[0].commands[0].updates[0].prob)
    ('ctmc', 'q', '1.5')
    """
    with deep_recursion(f"the model {name}"):
        return _Parser(Source(name, text)).model_file()


def parse_properties_text(text: str, name: str = "property") -> PropertiesFile:
    """Parse one property or a properties file (constants, labels, formulas, named properties).

    Examples
    --------
    >>> pf = parse_properties_text('const double T = 2; "up": P=? [ F<=T "done" ];')
    >>> [p.name for p in pf.properties], pf.properties[0].text
    (['up'], 'P=? [ F<=T "done" ]')
    """
    with deep_recursion(f"the properties {name}"):
        return _Parser(Source(name, text), properties=True).properties_file()
