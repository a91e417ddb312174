"""A small CSL-style query language over CTMCs, and its checker.

Queries (whitespace-insensitive; expressions as in :mod:`exactq.expr`):

=========================  ======================================================
``S=? [ b ]``              steady-state probability of the condition ``b``
``E=? [ e ]``              steady-state expectation of the numeric expression ``e``
``P=? [ F<=t b ]``         probability of reaching ``b`` within time ``t``
``P=? [ a U<=t b ]``       probability of reaching ``b`` within ``t`` through ``a``
``P=? [ F b ]``            probability of ever reaching ``b``
``P=? [ a U b ]``          probability of ever reaching ``b`` through ``a``
``T=? [ F b ]``            expected time to reach ``b`` (``inf`` if it may be missed)
=========================  ======================================================

``F b`` is ``true U b``; ``F<t`` is accepted as ``F<=t`` (the same probability in
continuous time). ``P=?`` and ``T=?`` are reported for the chain's initial state.

:func:`parse_query` turns the text into one of the frozen dataclasses
:class:`SteadyProbability`, :class:`SteadyExpectation`, :class:`Until`,
:class:`ExpectedTime`. They are evaluated on a chain by the model-checking algorithms
beside the other solvers, :func:`exactq.solvers.csl.check_chain`; :func:`exactq.check`
runs them on a model, truncating infinite ones adaptively.

PRISM's property forms (:mod:`exactq.prism.properties` reads them, in PRISM's syntax,
on PRISM models) use the same classes and a few more: :class:`Until` with a lower
bound (``F[t1,t2]``, ``F>=t``, ``a U[t1,t2] b``) or negated (``a W b`` and ``a R b``
are complements of an until), :class:`Globally` (``G<=t``), :class:`Next` (``X``),
:class:`RewardQuery` (``R{"r"}=? [ S | C | C<=t | I=t | F b ]``, on the
:class:`RewardStructure` of a chain), :class:`Threshold` (``P>=0.9 [ ... ]``: true or
false per state), :class:`Formula` (arithmetic over nested operators,
``1 - P=? [ ... ]``) and :class:`Filter` (``filter(op, prop, states)``). The native
language parsed here is unchanged.

References
----------
.. [BHHK03] C. Baier, B. Haverkort, H. Hermanns and J.-P. Katoen, "Model-checking
   algorithms for continuous-time Markov chains", IEEE Transactions on Software
   Engineering 29(6):524–541, 2003.
.. [KNP11] M. Kwiatkowska, G. Norman and D. Parker, "PRISM 4.0: verification of
   probabilistic real-time systems", CAV 2011 (the property syntax followed here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Union

from .errors import ModelError
from .expr import Expression, Token, describe_token, parse_expression, parse_fragment, syntax_error, tokenize

__all__ = [
    "Query",
    "SteadyProbability",
    "SteadyExpectation",
    "Until",
    "ExpectedTime",
    "Globally",
    "Next",
    "RewardQuery",
    "Filter",
    "Threshold",
    "Formula",
    "RewardStructure",
    "REWARD_KINDS",
    "FILTER_OPS",
    "parse_query",
    "TRUE",
]

TRUE = parse_expression("true")


@dataclass(frozen=True)
class SteadyProbability:
    """``S=? [ expr ]``: long-run probability that the condition ``expr`` holds."""

    expr: Expression
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "steady_probability"

    def __str__(self) -> str:
        return self.text or f"S=? [ {self.expr.text} ]"


@dataclass(frozen=True)
class SteadyExpectation:
    """``E=? [ expr ]``: long-run expectation of the numeric expression ``expr``."""

    expr: Expression
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "steady_expectation"

    def __str__(self) -> str:
        return self.text or f"E=? [ {self.expr.text} ]"


@dataclass(frozen=True)
class Until:
    """``P=? [ left U[lower_bound, time_bound] right ]`` (``time_bound`` None: unbounded above).

    ``P=? [ F b ]`` parses to ``Until(true, b, None)``; ``F>=t b`` has ``lower_bound = t``
    and ``time_bound = None``. In a DTMC the bounds count steps. With ``negated`` the
    value is ``1 - P(left U right)``: PRISM's weak until and release,
    ``a W b = !((a & !b) U (!a & !b))`` and ``a R b = !(!a U !b)``, bounds included.
    """

    left: Expression
    right: Expression
    time_bound: float | None = None
    text: str = field(default="", compare=False)
    lower_bound: float = 0.0
    negated: bool = False
    kind: ClassVar[str] = "until"

    @property
    def is_bounded(self) -> bool:
        return self.time_bound is not None

    def __str__(self) -> str:
        if self.text:
            return self.text
        bound = "" if self.time_bound is None else f"<={self.time_bound:g}"
        if self.lower_bound:
            bound = f">={self.lower_bound:g}" if self.time_bound is None else \
                f"[{self.lower_bound:g},{self.time_bound:g}]"
        if self.left == TRUE:
            return f"P=? [ F{bound} {self.right.text} ]"
        return f"P=? [ {self.left.text} U{bound} {self.right.text} ]"


@dataclass(frozen=True)
class ExpectedTime:
    """``T=? [ F target ]``: expected time to reach ``target``."""

    target: Expression
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "expected_time"

    def __str__(self) -> str:
        return self.text or f"T=? [ F {self.target.text} ]"


@dataclass(frozen=True)
class Globally:
    """``P=? [ G[lower_bound, time_bound] expr ]``: ``expr`` holds throughout the interval.

    Checked as ``1 - P=? [ F[lower_bound, time_bound] !expr ]``.
    """

    expr: Expression
    time_bound: float | None = None
    lower_bound: float = 0.0
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "globally"

    def __str__(self) -> str:
        return self.text or f"P=? [ G {self.expr.text} ]"


@dataclass(frozen=True)
class Next:
    """``P=? [ X expr ]``: the next state (after one jump) satisfies ``expr``."""

    expr: Expression
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "next"

    def __str__(self) -> str:
        return self.text or f"P=? [ X {self.expr.text} ]"


#: the reward formulas of :class:`RewardQuery` (``total``: PRISM's ``C``, the reward of the whole path)
REWARD_KINDS = ("steady", "cumulative", "instantaneous", "reachability", "total")


@dataclass(frozen=True)
class RewardQuery:
    """``R{"reward"}=? [ S ]``, ``[ C<=time ]``, ``[ C ]``, ``[ I=time ]`` or ``[ F target ]``.

    ``reward`` names a reward structure (``None``: the first one); ``kind`` is one of
    :data:`REWARD_KINDS`. In a DTMC ``time`` counts steps.
    """

    reward: str | None
    kind_of: str
    time: float | None = None
    target: Expression | None = None
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "reward"

    def __post_init__(self):
        if self.kind_of not in REWARD_KINDS:
            raise ModelError(f"reward formula must be one of {', '.join(REWARD_KINDS)}; got {self.kind_of!r}")

    def __str__(self) -> str:
        if self.text:
            return self.text
        r = "" if self.reward is None else f'{{"{self.reward}"}}'
        body = {"steady": "S", "cumulative": f"C<={self.time:g}" if self.time is not None else "C",
                "instantaneous": f"I={self.time:g}" if self.time is not None else "I",
                "reachability": f"F {self.target.text if self.target is not None else ''}",
                "total": "C"}[self.kind_of]
        return f"R{r}=? [ {body} ]"


#: the operators of :class:`Filter` (PRISM's): one value (min ... state), or per state (argmin, argmax, print)
FILTER_OPS = ("min", "max", "avg", "sum", "first", "state", "range", "count", "forall", "exists", "argmin", "argmax",
              "print", "printall")


@dataclass(frozen=True)
class Filter:
    """``filter(op, prop, states)``: ``op`` over the per-state values of ``prop`` on ``states``.

    ``query`` is a query or a :class:`Formula`; ``states`` None means every state.
    ``argmin``/``argmax`` give the set of states where the minimum/maximum is reached,
    ``print``/``printall`` the values themselves (a filter that only reports them).
    PRISM's default for a property without a filter is the value at the single
    initial state (``state`` over ``"init"``), the ``range`` over several initial
    states, and ``forall`` over the initial states for a true/false property.
    """

    op: str
    query: object
    states: Expression | None = None
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "filter"

    def __post_init__(self):
        if self.op not in FILTER_OPS:
            raise ModelError(f"filter operator must be one of {', '.join(FILTER_OPS)}; got {self.op!r}")

    def __str__(self) -> str:
        return self.text or f"filter({self.op}, {self.query})"


@dataclass(frozen=True)
class Threshold:
    """``P~p [ ... ]``, ``S~p [ ... ]``, ``R~r [ ... ]``: per state, whether ``query``'s value compares with ``bound``.

    ``relation`` is one of ``<``, ``<=``, ``>``, ``>=``. Probability bounds 0 and 1 are
    decided by graph analysis (the states with probability exactly 0 or 1), never by
    comparing a rounded value (PRISM's precomputation).
    """

    query: object
    relation: str
    bound: float
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "threshold"

    def __post_init__(self):
        if self.relation not in ("<", "<=", ">", ">="):
            raise ModelError(f"a threshold relation must be one of <, <=, >, >=; got {self.relation!r}")

    def __str__(self) -> str:
        return self.text or f"{self.query} {self.relation} {self.bound:g}"


@dataclass(frozen=True, eq=False)
class Formula:
    """A state formula or arithmetic expression over nested queries (``1 - P=? [ ... ]``), per state.

    ``expr`` is evaluated by the checker (``expr.on_chain(chain, checker)``); ``type`` is
    ``bool``, ``int`` or ``double``.
    """

    expr: object
    type: str
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "formula"

    def __str__(self) -> str:
        return self.text or str(self.expr)


@dataclass(frozen=True, eq=False)
class RewardStructure:
    """A reward structure of a chain, as the ``R`` operator needs it.

    Attributes
    ----------
    name : str
    state : (n,) ndarray
        The reward earned per unit time in each state (per step in a DTMC); what
        ``I=t`` averages.
    transition : (n,) ndarray or None
        The expected reward of the transitions out of each state, per unit time (the
        sum over transitions of rate times reward; per step in a DTMC). ``S``, ``C<=t``
        and ``F b`` add it to ``state``; ``I=t`` does not (PRISM's semantics).
    """

    name: str
    state: object
    transition: object = None

    def rate(self):
        """State plus transition reward: what ``S``, ``C`` and ``F`` accumulate."""
        return self.state if self.transition is None else self.state + self.transition


Query = Union[SteadyProbability, SteadyExpectation, Until, ExpectedTime, Globally, Next, RewardQuery, Filter, Threshold,
              Formula]

_OPERATORS = ("S", "E", "P", "T")


class _QueryParser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def column(self, tok: Token | None) -> int:
        return tok.pos + 1 if tok is not None else len(self.text) + 1

    def fail(self, expected: str, *, after: str | None = None, tok: Token | None | bool = False):
        tok = self.peek() if tok is False else tok
        where = f" after {after!r}" if after else ""
        return syntax_error(self.column(tok), f"expected {expected}{where}; got {describe_token(tok)}", self.text)

    def expect(self, text: str, after: str | None) -> Token:
        tok = self.peek()
        if tok is None or tok.text != text or tok.kind not in ("op", "name"):
            raise self.fail(repr(text), after=after)
        self.i += 1
        return tok

    # ------------------------------------------------------------------------
    def parse(self) -> Query:
        tok = self.peek()
        if tok is None or tok.kind != "name" or tok.text not in _OPERATORS:
            raise self.fail("one of S=?, E=?, P=?, T=?")
        self.i += 1
        op = tok.text
        eq = self.peek()
        if eq is None or eq.text != "=" or self.peek(1) is None or self.peek(1).text != "?":
            bad = eq if (eq is None or eq.text != "=") else self.peek(1)
            if bad is not None and bad.text in ("<", "<=", ">", ">="):
                raise syntax_error(self.column(bad), f"only numerical queries '{op}=?' are supported; "
                                   f"got the threshold {bad.text!r}", self.text)
            raise self.fail("'=?'", after=op, tok=bad)
        self.i += 2
        self.expect("[", f"{op}=?")
        start = self.i
        close = next((j for j in range(start, len(self.tokens))
                      if self.tokens[j].kind == "op" and self.tokens[j].text == "]"), None)
        stop = len(self.tokens) if close is None else close
        opener = next((j for j in range(start, stop)
                       if self.tokens[j].kind == "op" and self.tokens[j].text == "["), None)
        if opener is not None:
            raise syntax_error(self.tokens[opener].pos + 1, "unexpected '[' inside the query brackets "
                               "(interval bounds such as 'F[0,t]' are not supported; write 'F<=t')", self.text)
        if close is None:
            self.i = len(self.tokens)
            raise self.fail("']' to close the query", after=self.tokens[-1].text)
        if close + 1 < len(self.tokens):
            raise self.fail("the end of the query", after="]", tok=self.tokens[close + 1])
        inner = self.tokens[start:close]
        end = self.tokens[close]
        if op == "S":
            return SteadyProbability(self.expression(inner, "[", end), self.text)
        if op == "E":
            return SteadyExpectation(self.expression(inner, "[", end), self.text)
        if op == "T":
            if not inner or inner[0].kind != "name" or inner[0].text != "F":
                raise self.fail("'F' (T=? [ F b ])", after="[", tok=inner[0] if inner else end)
            bound, rest = self.bound(inner[1:], end, "F")
            if bound is not None:
                raise syntax_error(inner[1].pos + 1, "T=? takes an unbounded 'F b'; got a time bound", self.text)
            return ExpectedTime(self.expression(rest, "F", end), self.text)
        # P=?
        if inner and inner[0].kind == "name" and inner[0].text == "F":
            bound, rest = self.bound(inner[1:], end, "F")
            after = "F" if bound is None else _fmt_bound(bound, inner)
            return Until(TRUE, self.expression(rest, after, end), bound, self.text)
        depth = 0
        split = []
        for j, tk in enumerate(inner):
            if tk.kind == "op" and tk.text == "(":
                depth += 1
            elif tk.kind == "op" and tk.text == ")":
                depth -= 1
            elif depth == 0 and tk.kind == "name" and tk.text in ("U", "F"):
                split.append(j)
        if not split:
            raise self.fail("a path formula 'F b', 'F<=t b', 'a U b' or 'a U<=t b'", after="[",
                            tok=inner[0] if inner else end)
        j = split[0]
        if inner[j].text == "F":
            raise syntax_error(inner[j].pos + 1, "'F' must start the path formula (P=? [ F b ])", self.text)
        if len(split) > 1:
            raise syntax_error(inner[split[1]].pos + 1, f"nested path formulas are not supported; got a second "
                               f"{inner[split[1]].text!r}", self.text)
        left = self.expression(inner[:j], "[", inner[j])
        bound, rest = self.bound(inner[j + 1:], end, "U")
        after = "U" if bound is None else _fmt_bound(bound, inner[j:])
        return Until(left, self.expression(rest, after, end), bound, self.text)

    def bound(self, toks: list[Token], end: Token, op: str) -> tuple[float | None, list[Token]]:
        """An optional ``<=t`` after ``F``/``U``; returns (bound, remaining tokens)."""
        if not toks or toks[0].kind != "op" or toks[0].text not in ("<=", "<", ">", ">=", "=", "==", "["):
            return None, toks
        cmp = toks[0]
        if cmp.text not in ("<=", "<"):
            raise syntax_error(cmp.pos + 1, f"only upper time bounds are supported ('{op}<=t'); got {cmp.text!r}",
                               self.text)
        nxt = toks[1] if len(toks) > 1 else end
        if nxt.kind == "op" and nxt.text == "-" and len(toks) > 2 and toks[2].kind == "num":
            raise syntax_error(nxt.pos + 1, f"time bound must be >= 0; got '-{toks[2].text}'", self.text)
        if nxt.kind != "num":
            raise syntax_error(nxt.pos + 1, f"expected a number >= 0 (the time bound) after {cmp.text!r}; "
                               f"got {describe_token(nxt)}", self.text)
        value = float(nxt.text)
        if not math.isfinite(value):
            raise syntax_error(nxt.pos + 1, f"time bound must be finite; got {nxt.text!r}", self.text)
        return value, toks[2:]

    def expression(self, toks: list[Token], after: str, end: Token) -> Expression:
        if not toks:
            raise syntax_error(end.pos + 1, f"expected an expression after {after!r}; got {end.text!r}", self.text)
        s, e = toks[0].pos, toks[-1].end
        return parse_fragment(self.text[s:e], offset=s, after=after, end_text=end.text, end_column=end.pos + 1,
                              full_text=self.text)


def _fmt_bound(bound: float, toks: list[Token]) -> str:
    """The text of the number token of a bound (for 'after ...' in messages)."""
    return toks[2].text if len(toks) > 2 else f"{bound:g}"


def parse_query(text: str) -> Query:
    """Parse a CSL-style query.

    Parameters
    ----------
    text : str
        E.g. ``"S=? [ q1 > 5 ]"``, ``"P=? [ F<=10 q1 = 3 ]"``, ``"T=? [ F full ]"``.

    Returns
    -------
    SteadyProbability, SteadyExpectation, Until or ExpectedTime
        A frozen dataclass; ``str(query)`` is the text.

    Raises
    ------
    QuerySyntaxError
        With the 1-based column and what was expected, e.g.
        ``query syntax error at column 1: expected one of S=?, E=?, P=?, T=?; got 'X'``.

    Examples
    --------
    >>> q = parse_query("P=? [ q1 < 3 U<=2.5 q1 = 3 ]")
    >>> q.time_bound, q.left.text, q.right.text
    (2.5, 'q1 < 3', 'q1 = 3')
    >>> parse_query("P=? [ F q = 0 ]") == parse_query("P=?[true U q=0]")
    True
    """
    if isinstance(text, (SteadyProbability, SteadyExpectation, Until, ExpectedTime, Globally, Next, RewardQuery,
                         Filter, Threshold, Formula)):
        return text
    if not isinstance(text, str):
        raise ModelError(f"query must be a string; got {type(text).__name__}")
    return _QueryParser(text).parse()
