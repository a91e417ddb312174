"""The queries of the one property language, and :func:`parse_query` for exactq's native ones.

Every query, on a native model (``exactq check jsq ... 'S=? [ q1 > 5 ]'``) or on a
PRISM file, is read by the PRISM front end (:mod:`exactq.prism`): PRISM's property
language for CTMCs and DTMCs with a few extensions, and for a native model the
chain's variables, constants, rewards and labels as its symbols
(:mod:`exactq.prism.native`). The common forms:

=========================  ======================================================
``S=? [ b ]``              steady-state probability of the condition ``b``
``E=? [ e ]``              steady-state expectation of the numeric expression ``e``
``P=? [ F<=t b ]``         probability of reaching ``b`` within time ``t``
``P=? [ a U<=t b ]``       probability of reaching ``b`` within ``t`` through ``a``
``P=? [ F b ]``            probability of ever reaching ``b``
``P=? [ a U b ]``          probability of ever reaching ``b`` through ``a``
``T=? [ F b ]``            expected time to reach ``b`` (``inf`` if it may be missed)
=========================  ======================================================

and PRISM's others: ``F[t1,t2]``, ``F>=t``, ``G``, ``X``, ``W``, ``R`` (release),
``R{"r"}=? [ S | C | C<=t | I=t | F b ]``, Storm's ``LRA``, thresholds
(``P>=0.9 [ ... ]``: true or false, probability 0 and 1 decided on the graph), nested
operators, arithmetic over numerical operators (``1 - P=? [ ... ]``) and every
filter (``filter(op, prop, states)``). ``F<t`` is ``F<=t`` in continuous time.
``P=?`` and ``T=?`` are reported for the chain's initial state.

Expressions have PRISM's operators and functions and these extensions, read in
both dialects where PRISM gives them no meaning: comparison chains (``0 < s <= 3``),
``^`` and ``**`` (power, right associative, ``-2^2`` is -4), ``%`` (modulo), ``==``,
``&&``, ``||``, unary ``+``, ``abs``, ``sqrt``, ``exp``, ``log(x)`` (natural), booleans
counting 0/1 in arithmetic, integers 0/1 acting as booleans; a division by zero (or
another arithmetic fault) in a state where the term is used is an error, never a
silent ``nan``. A native query also reads ``//`` (floor division), ``not``, ``and``,
``or``, and a label by its bare name.

The classes below are what a property compiles to (:mod:`exactq.prism.properties`),
and what :func:`exactq.solvers.csl.check_chain` checks: :class:`SteadyProbability`,
:class:`SteadyExpectation`, :class:`Until` (with a lower bound, or ``negated`` for
``W`` and ``R``), :class:`ExpectedTime`, :class:`Globally`, :class:`Next`,
:class:`RewardQuery` (on a chain's :class:`RewardStructure`), :class:`Threshold`,
:class:`Formula` and :class:`Filter`. :func:`parse_query` reads a native query's
text into a :class:`NativeQuery`, which is compiled against a chain's symbols when it
is checked on that chain (:meth:`NativeQuery.bind`).

References
----------
.. [BHHK03] C. Baier, B. Haverkort, H. Hermanns and J.-P. Katoen, "Model-checking
   algorithms for continuous-time Markov chains", IEEE Transactions on Software
   Engineering 29(6):524–541, 2003.
.. [KNP11] M. Kwiatkowska, G. Norman and D. Parker, "PRISM 4.0: verification of
   probabilistic real-time systems", CAV 2011 (the property syntax followed here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Union

import numpy as np

from .errors import ModelError

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
    "NativeQuery",
    "TRUE",
]


#: a compiled state formula (:class:`exactq.prism.properties.StateFormula`): ``on_chain(chain, checker)``, ``text``
StateExpr = object


class _True:
    """The condition ``true`` (the left side of ``F b``, which is ``true U b``)."""

    text = "true"
    type = "bool"
    names = frozenset()
    deps: dict = {}

    def on_chain(self, chain, checker=None) -> np.ndarray:
        return np.ones(chain.n_states, dtype=bool)

    def __eq__(self, other) -> bool:
        return isinstance(other, _True) or getattr(other, "text", None) == "true"

    def __hash__(self) -> int:
        return hash("true")

    def __repr__(self) -> str:
        return "TRUE"


TRUE = _True()


@dataclass(frozen=True)
class SteadyProbability:
    """``S=? [ expr ]``: long-run probability that the condition ``expr`` holds."""

    expr: StateExpr
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "steady_probability"

    def __str__(self) -> str:
        return self.text or f"S=? [ {self.expr.text} ]"


@dataclass(frozen=True)
class SteadyExpectation:
    """``E=? [ expr ]``: long-run expectation of the numeric expression ``expr``."""

    expr: StateExpr
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

    left: StateExpr
    right: StateExpr
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

    target: StateExpr
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "expected_time"

    def __str__(self) -> str:
        return self.text or f"T=? [ F {self.target.text} ]"


@dataclass(frozen=True)
class Globally:
    """``P=? [ G[lower_bound, time_bound] expr ]``: ``expr`` holds throughout the interval.

    Checked as ``1 - P=? [ F[lower_bound, time_bound] !expr ]``.
    """

    expr: StateExpr
    time_bound: float | None = None
    lower_bound: float = 0.0
    text: str = field(default="", compare=False)
    kind: ClassVar[str] = "globally"

    def __str__(self) -> str:
        return self.text or f"P=? [ G {self.expr.text} ]"


@dataclass(frozen=True)
class Next:
    """``P=? [ X expr ]``: the next state (after one jump) satisfies ``expr``."""

    expr: StateExpr
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
    target: StateExpr | None = None
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
    states: StateExpr | None = None
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

class NativeQuery:
    """A native query, parsed; :meth:`bind` compiles it against a chain's symbols.

    ``text`` is the query as given; ``kind`` the kind of its top operator (that of the
    query classes: ``steady_probability``, ``until``, ..., ``filter``, ``formula``). Two
    native queries are equal when their syntax trees print the same (``P=?[F<=3 x>1]``
    equals ``P =? [ F <= 3 x > 1 ]``).
    """

    __slots__ = ("text", "node", "source", "_key")

    def __init__(self, text: str, node, source):
        self.text, self.node, self.source = text, node, source
        self._key = str(node)

    @property
    def kind(self) -> str:
        from .prism.syntax import FilterNode, QueryNode

        node = self.node
        if isinstance(node, FilterNode):
            return "filter"
        if not isinstance(node, QueryNode):
            return "formula"
        if node.is_threshold:
            return "threshold"
        if node.op == "P":
            return {"X": "next", "G": "globally"}.get(node.body.kind, "until")
        return {"S": "steady_probability", "E": "steady_expectation", "T": "expected_time", "R": "reward",
                "LRA": "steady_probability"}[node.op]

    def bind(self, chain) -> "Query":
        """The query compiled against ``chain``'s variables, constants, rewards and labels."""
        from .prism.native import compile_query

        return compile_query(self.node, self.source, chain)

    def __eq__(self, other) -> bool:
        return isinstance(other, NativeQuery) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"NativeQuery({self.text!r})"


_QUERY_TYPES = (SteadyProbability, SteadyExpectation, Until, ExpectedTime, Globally, Next, RewardQuery, Filter,
                Threshold, Formula, NativeQuery)


def parse_query(text: str) -> "NativeQuery | Query":
    """Parse a native query (a query already parsed or compiled is returned as it is).

    The text is read by the PRISM front end in its native dialect
    (:mod:`exactq.prism.native`); the names it reads are resolved when it is checked on
    a chain (:meth:`NativeQuery.bind`), so a syntax error is found here, before any
    chain is built, and an unknown name when the first chain is.

    Parameters
    ----------
    text : str
        E.g. ``"S=? [ q1 > 5 ]"``, ``"P=? [ F<=10 q1 = 3 ]"``, ``"T=? [ F full ]"``,
        ``"P>=0.9 [ F[1,2] q = 0 ]"``, ``"filter(max, P=? [ F q = 3 ], q < 2)"``.

    Returns
    -------
    NativeQuery

    Raises
    ------
    QuerySyntaxError
        With the 1-based column and what was expected, e.g.
        ``query syntax error at column 1: expected one of S=?, E=?, P=?, T=?, R=?, LRA=?, a threshold or
        filter(...); got 'X'``.

    Examples
    --------
    >>> q = parse_query("P=? [ q1 < 3 U<=2.5 q1 = 3 ]")
    >>> q.kind, str(q)
    ('until', 'P=? [ q1 < 3 U<=2.5 q1 = 3 ]')
    >>> parse_query("P=? [ F q = 0 ]") == parse_query("P=?[F q=0]")
    True
    >>> from exactq.ctmc import CTMC
    >>> chain = CTMC.from_generator([[-1.0, 1.0], [2.0, -2.0]], ["q1"])
    >>> b = q.bind(chain)
    >>> type(b).__name__, b.time_bound, b.left.text
    ('Until', 2.5, 'q1 < 3')
    """
    if isinstance(text, _QUERY_TYPES):
        return text
    if not isinstance(text, str):
        raise ModelError(f"query must be a string; got {type(text).__name__}")
    from .prism.native import parse_native

    node, source = parse_native(text, what="query")
    return NativeQuery(text, node, source)
