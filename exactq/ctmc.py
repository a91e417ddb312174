"""The Markov-chain representations (CTMC, DTMC), their vectorised builders and their solution type.

A model describes a continuous-time Markov chain by a state space
(:class:`~exactq.statespace.StateSpace` or :class:`~exactq.statespace.SortedSpace`)
and a list of :class:`Event` objects. Each event maps the *whole* state array at once
to ``(rates, targets)``. :func:`build_ctmc` concatenates all events into COO triplets,
drops zero rates and self-loops, indexes the targets with one vectorised call, and
returns CSR. Targets outside the (truncated) space are never dropped silently: their
rate is accumulated per state in ``cut_rate`` (the truncation rule is *block*: the
transition is suppressed, as if the arrival were lost), and the truncation driver
(:mod:`exactq.truncation`) reports the probability mass that sits on those states.
:func:`build_dtmc` does the same for discrete-time chains, with probabilities.

The stationary law of either kind is a :class:`StationaryDistribution`, the solution
type the stationary solvers return and the models map to their measures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from .errors import ConvergenceError, ModelError, NotApplicableError
from .statespace import Space, StateSpace
from .truncation import Truncation

__all__ = ["Event", "CTMC", "DTMC", "StationaryDistribution", "build_ctmc", "build_dtmc", "explore",
           "explore_transitions", "Explored", "MemoryMeter", "ORDERINGS"]

#: fill-reducing orderings a chain may ask the sparse LU for
ORDERINGS = ("auto", "level", "nested-dissection", "mmd")

EventFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Event:
    """A named transition type.

    ``fn(states)`` receives the ``(n, d)`` state array and returns ``rates`` of shape
    ``(n,)`` (zero where the event cannot happen) and ``targets`` of shape ``(n, d)``.
    """

    name: str
    fn: EventFn


@dataclass(frozen=True)
class CTMC:
    """A finite continuous-time Markov chain with named variables, rewards and labels.

    Attributes
    ----------
    space : Space
        The states (rows of ``space.states``) and their variable names
        (:class:`~exactq.statespace.StateSpace` or :class:`~exactq.statespace.SortedSpace`).
    Q : (n, n) scipy.sparse.csr_matrix
        The generator: off-diagonal rates >= 0, rows sum to 0. ``None`` only in a
        :meth:`released` copy kept to warm-start a larger truncation.
    cut_rate : (n,) ndarray
        Rate of the transitions that left the truncated space and were blocked.
    jumps : (d,) ndarray of int
        The largest change of each variable in one transition (used for orderings).
    rewards, labels : dict of name -> (n,) ndarray
        Extra state functions (numeric and boolean) usable in expressions.
    initial : int
        Index of the initial state (for transient and reachability queries).
    constants : dict
        Scalar names usable in expressions (model parameters such as ``capacity``).
    truncation : Truncation or None
        How an infinite model was made finite (level, rule, layers); ``None`` for a
        finite model.
    ordering : {"auto", "level", "nested-dissection", "mmd"}
        Fill-reducing ordering the model recommends for sparse LU.
    levels : (n,) ndarray of int, optional
        A *level structure*: states sorted by level and every transition changing
        it (e.g. the total number of jobs of a sorted queue-length chain). Declaring
        it lets the stationary solver use level aggregation.
    start : (n,) ndarray, optional
        A positive guess of the stationary vector for iterative solvers.
    boundary : (n,) ndarray of bool, optional
        The states whose transitions the truncation changed, when that is more than
        the cut rate shows (a redirect rule); default ``cut_rate > 0``.
    """

    space: Space
    Q: sp.csr_matrix | None
    cut_rate: np.ndarray
    jumps: np.ndarray
    rewards: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    initial: int = 0
    constants: dict = field(default_factory=dict)
    truncation: Truncation | None = None
    ordering: str = "auto"
    levels: np.ndarray | None = None
    start: np.ndarray | None = None
    boundary: np.ndarray | None = None

    def __post_init__(self):
        n = self.space.n_states
        if self.Q is not None and self.Q.shape != (n, n):
            raise ModelError(f"Q must have shape ({n}, {n}) for {n} states; got {self.Q.shape}")
        for name in ("cut_rate", "levels", "start", "boundary"):
            v = getattr(self, name)
            if v is not None and np.shape(v) != (n,):
                raise ModelError(f"{name} must have one entry per state ({n}); got shape {np.shape(v)}")
        if self.ordering not in ORDERINGS:
            raise ModelError(f"ordering must be one of {', '.join(ORDERINGS)}; got {self.ordering!r}")

    @property
    def n_states(self) -> int:
        return self.space.n_states

    @property
    def states(self) -> np.ndarray:
        return self.space.states

    @property
    def is_truncated(self) -> bool:
        return self.truncation is not None

    def namespace(self) -> dict:
        """Names usable in expressions: variables, rewards, labels and constants."""
        ns: dict = dict(self.constants)
        ns.update(self.space.namespace())
        ns.update(self.rewards)
        ns.update(self.labels)
        return ns

    def evaluate(self, expr: str) -> np.ndarray:
        """Evaluate a state expression (``"q1 + q2 > 5"``) on every state."""
        from .prism.native import evaluate

        return np.broadcast_to(np.asarray(evaluate(expr, self.namespace())), (self.n_states,))

    def boundary_mask(self) -> np.ndarray:
        """States whose transitions the truncation changed (cut, or redirected)."""
        return self.boundary if self.boundary is not None else self.cut_rate > 0

    def layers(self) -> np.ndarray:
        """The truncation layer of each state (default: its largest coordinate)."""
        if self.truncation is not None and self.truncation.layers is not None:
            return self.truncation.layers
        return self.states.max(axis=1)

    def released(self) -> "CTMC":
        """A copy without the generator, kept only to warm-start a larger truncation."""
        return replace(self, Q=None)

    @classmethod
    def from_generator(cls, Q, names: Sequence[str] = ("s",), *, initial: int = 0) -> "CTMC":
        """A chain on states ``0..n-1`` (one variable) from a generator matrix."""
        Q = sp.csr_matrix(Q, dtype=float)
        n = Q.shape[0]
        space = StateSpace(np.arange(n)[:, None], names[:1])
        return cls(space=space, Q=Q, cut_rate=np.zeros(n), jumps=np.ones(1, np.int64), initial=initial)


@dataclass(frozen=True)
class DTMC:
    """A finite discrete-time Markov chain (time in steps).

    Attributes
    ----------
    space : Space
    P : (n, n) scipy.sparse.csr_matrix
        Transition probabilities: entries in [0, 1], rows sum to 1 (a truncated
        chain keeps the probability that left the space as a self-loop, and
        ``cut_prob`` says how much).
    cut_prob : (n,) ndarray
        Probability per step of the transitions that left the truncated space.
    rewards, labels, initial, constants, truncation
        As for :class:`CTMC`.
    """

    space: Space
    P: sp.csr_matrix
    cut_prob: np.ndarray
    rewards: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    initial: int = 0
    constants: dict = field(default_factory=dict)
    truncation: Truncation | None = None

    def __post_init__(self):
        n = self.space.n_states
        if self.P.shape != (n, n):
            raise ModelError(f"P must have shape ({n}, {n}) for {n} states; got {self.P.shape}")

    @property
    def n_states(self) -> int:
        return self.space.n_states

    @property
    def states(self) -> np.ndarray:
        return self.space.states

    def namespace(self) -> dict:
        ns: dict = dict(self.constants)
        ns.update(self.space.namespace())
        ns.update(self.rewards)
        ns.update(self.labels)
        return ns

    def boundary_mask(self) -> np.ndarray:
        return self.cut_prob > 0

    def layers(self) -> np.ndarray:
        if self.truncation is not None and self.truncation.layers is not None:
            return self.truncation.layers
        return self.states.max(axis=1)

    def generator(self) -> sp.csr_matrix:
        """``P - I``: the generator of the chain with unit-rate jumps (same stationary law)."""
        return (self.P - sp.identity(self.n_states, format="csr")).tocsr()


@dataclass(frozen=True)
class StationaryDistribution:
    """The stationary law of a finite chain, with its diagnostics.

    Attributes
    ----------
    pi : (n,) ndarray
        ``pi >= 0``, ``sum(pi) = 1``, zero on transient states.
    method : str
        The stationary solver used (``direct``, ``gmres``, ``gth``, ``level-aggregation``, ...).
    residual : float
        ``max_j |(pi Q)_j|``, computed afresh from ``pi``.
    nit : int or None
        Iterations of an iterative solver.
    seconds : float
    info : dict
        Solver details (ordering, fill, relative residual, ...).
    space : Space, optional
        The states ``pi`` is indexed by (for marginals).

    Examples
    --------
    >>> d = StationaryDistribution(np.array([0.5, 0.25, 0.25]), "gth", 0.0,
    ...                            space=StateSpace(np.array([[0], [1], [2]]), ["n"]))
    >>> d.expect(d.space.column("n")), d.marginal("n").tolist()
    (0.75, [0.5, 0.25, 0.25])
    """

    pi: np.ndarray
    method: str
    residual: float
    nit: int | None = None
    seconds: float = 0.0
    info: dict = field(default_factory=dict)
    space: Space | None = field(default=None, repr=False)

    def __post_init__(self):
        bad = int(np.count_nonzero(~np.isfinite(np.asarray(self.pi, dtype=float))))
        if bad:
            raise ConvergenceError(f"{self.method}: the stationary vector has {bad} non-finite entries; "
                                   "no value can be computed from it")

    def expect(self, values) -> float:
        """``sum_s pi_s f(s)`` for a per-state array (or a scalar), over the states of positive probability.

        A value that is not finite (NaN or infinite) in a state of positive probability
        is an error (it names the state); on states of probability 0 it does not count.
        """
        v = np.broadcast_to(np.asarray(values, dtype=float), self.pi.shape)
        used = self.pi > 0  # pi is finite (checked on construction): no NaN can hide here
        vu = v[used]
        if not np.all(np.isfinite(vu)):
            i = int(np.flatnonzero(used)[np.flatnonzero(~np.isfinite(vu))[0]])
            where = self.space.format_state(i) if self.space is not None else f"state {i}"
            raise ModelError(f"the value is not finite ({vu[~np.isfinite(vu)][0]}) in {where}, which has "
                             f"stationary probability {self.pi[i]:.3g}")
        return float(self.pi[used] @ vu)

    def probability(self, mask) -> float:
        """``P(mask)`` for a boolean per-state array."""
        return float(self.pi[np.asarray(mask, dtype=bool)].sum())

    def marginal(self, name: str, size: int | None = None) -> np.ndarray:
        """The law of one state variable: ``P(X = k)``, ``k = 0..max`` (or ``size - 1``)."""
        col = self.space.column(name)
        return np.bincount(col, weights=self.pi, minlength=0 if size is None else size)

    def moment(self, name: str, k: int = 1) -> float:
        """``E[X^k]`` of one state variable."""
        return self.expect(self.space.column(name).astype(float) ** k)

    def conditioned(self, keep) -> "StationaryDistribution":
        """The law renormalised on the states of ``keep`` (for boundary sensitivities)."""
        pi = np.where(np.asarray(keep, dtype=bool), self.pi, 0.0)
        total = pi.sum()
        if total <= 0:
            raise ModelError("conditioning on a set of zero probability")
        return replace(self, pi=pi / total)


def _collect(space: Space, states: np.ndarray, events: Sequence[Event]):
    """Apply every event to ``states``; yield (event, rates, targets) with rates > 0."""
    n, d = states.shape
    for ev in events:
        rates, targets = ev.fn(states)
        rates = np.broadcast_to(np.asarray(rates, dtype=float), (n,))
        targets = np.asarray(targets, dtype=np.int64)
        if targets.shape != (n, d):
            raise ValueError(f"event {ev.name!r} returned targets of shape {targets.shape}, expected {(n, d)}")
        if np.any(rates < 0) or not np.all(np.isfinite(rates)):
            bad = int(np.flatnonzero((rates < 0) | ~np.isfinite(rates))[0])
            raise ValueError(f"event {ev.name!r} has rate {rates[bad]} in state {states[bad].tolist()}")
        yield ev, rates, targets


def _transitions(space: Space, events: Sequence[Event]):
    """COO triplets of every event's transitions inside the space, the weight that left it, the jumps."""
    states = space.states
    n, d = states.shape
    src_parts, dst_parts, rate_parts = [], [], []
    cut = np.zeros(n)
    jumps = np.zeros(d, dtype=np.int64)
    for _, rates, targets in _collect(space, states, events):
        live = np.flatnonzero(rates > 0)
        if live.size == 0:
            continue
        moved = targets[live]
        idx = space.index(moved)
        inside = idx >= 0
        if not np.all(inside):
            cut += np.bincount(live[~inside], weights=rates[live[~inside]], minlength=n)
        keep = inside & (idx != live)  # inside the space, and not a self-loop
        src, dst = live[keep], idx[keep]
        if src.size:  # in place: the fresh pages of large temporaries cost more than the arithmetic
            moved -= states[live]
            np.abs(moved, out=moved)
            moved[~keep] = 0
            jumps = np.maximum(jumps, moved.max(0))
        src_parts.append(src)
        dst_parts.append(dst)
        rate_parts.append(rates[src])
    src = np.concatenate(src_parts) if src_parts else np.zeros(0, np.int64)
    dst = np.concatenate(dst_parts) if dst_parts else np.zeros(0, np.int64)
    val = np.concatenate(rate_parts) if rate_parts else np.zeros(0)
    return src, dst, val, cut, jumps


def _initial_index(space: Space, initial) -> int:
    n = space.n_states
    if initial is None:
        return 0
    if np.ndim(initial) == 0:
        init = int(initial)
        if not 0 <= init < n:
            raise ValueError(f"initial state index {init} is outside 0..{n - 1}")
        return init
    init = int(space.index(np.asarray(initial)[None, :])[0])
    if init < 0:
        raise ValueError(f"initial state {list(initial)} is not in the state space")
    return init


def build_ctmc(
    space: Space,
    events: Sequence[Event],
    *,
    rewards: Mapping[str, np.ndarray] | None = None,
    labels: Mapping[str, np.ndarray] | None = None,
    initial=None,
    constants: Mapping | None = None,
    truncation: Truncation | None = None,
    **declared,
) -> CTMC:
    """Assemble the generator of a CTMC from vectorised events.

    Parameters
    ----------
    space : Space
    events : sequence of Event
    rewards, labels : mapping, optional
        Named state vectors (length ``space.n_states``).
    initial : int or (d,) array_like, optional
        Initial state (an index or a state vector); default: the first state.
    constants : mapping, optional
        Scalars for expressions.
    truncation : Truncation, optional
        How the chain was truncated when the model is infinite.
    **declared
        The other declared fields of :class:`CTMC` (``ordering``, ``levels``,
        ``start``, ``boundary``).

    Returns
    -------
    CTMC
        With ``Q`` in CSR form (duplicates summed, zero rates and self-loops dropped).

    Examples
    --------
    The M/M/1/2 queue (arrival rate 1, service rate 2):

    >>> space = StateSpace.box(["n"], hi=[2])
    >>> c = build_ctmc(space, [Event("arrival", lambda s: (np.ones(len(s)), s + 1)),
    ...                        Event("departure", lambda s: (2.0 * (s[:, 0] > 0), s - 1))])
    >>> c.Q.toarray().tolist(), c.cut_rate.tolist()
    ([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 2.0, -2.0]], [0.0, 0.0, 1.0])
    """
    n = space.n_states
    src, dst, val, cut_rate, jumps = _transitions(space, events)
    out = np.bincount(src, weights=val, minlength=n)
    diag = np.arange(n)
    Q = sp.csr_matrix(
        (np.concatenate([val, -out]), (np.concatenate([src, diag]), np.concatenate([dst, diag]))),
        shape=(n, n),
    )
    Q.sum_duplicates()
    return CTMC(space=space, Q=Q, cut_rate=cut_rate, jumps=jumps, rewards=dict(rewards or {}),
                labels=dict(labels or {}), initial=_initial_index(space, initial),
                constants=dict(constants or {}), truncation=truncation, **declared)


def build_dtmc(
    space: Space,
    events: Sequence[Event],
    *,
    rewards: Mapping[str, np.ndarray] | None = None,
    labels: Mapping[str, np.ndarray] | None = None,
    initial=None,
    constants: Mapping | None = None,
    truncation: Truncation | None = None,
) -> DTMC:
    """Assemble the transition matrix of a DTMC from vectorised events.

    Each event gives, per state, a *probability* and a target. In every state the
    probabilities must sum to at most 1; the rest (and the probability of targets
    outside a truncated space, reported as ``cut_prob``) stays in the state, unless it
    is below ``1e-12`` (the rounding of probabilities that sum to 1, which must not
    become a transition of the graph).

    Examples
    --------
    A coin that turns heads with probability 0.3 and back with 0.6:

    >>> space = StateSpace.box(["h"], hi=[1])
    >>> c = build_dtmc(space, [Event("up", lambda s: (0.3 * (s[:, 0] == 0), s + 1)),
    ...                        Event("down", lambda s: (0.6 * (s[:, 0] == 1), s - 1))])
    >>> c.P.toarray().tolist()
    [[0.7, 0.3], [0.6, 0.4]]
    """
    n = space.n_states
    src, dst, val, cut, _ = _transitions(space, events)
    out = np.bincount(src, weights=val, minlength=n)
    if np.any(out > 1 + 1e-12):
        i = int(np.argmax(out))
        raise ModelError(f"transition probabilities out of state {space.format_state(i)} sum to {out[i]:.6g} > 1")
    stay = np.clip(1.0 - out, 0.0, None)
    stay[stay <= 1e-12] = 0.0  # rounding (ten updates of 0.1 sum to 1 - 1.1e-16) is not a self-loop
    diag = np.arange(n)
    P = sp.csr_matrix((np.concatenate([val, stay]), (np.concatenate([src, diag]), np.concatenate([dst, diag]))),
                      shape=(n, n))
    P.sum_duplicates()
    return DTMC(space=space, P=P, cut_prob=cut, rewards=dict(rewards or {}), labels=dict(labels or {}),
                initial=_initial_index(space, initial), constants=dict(constants or {}), truncation=truncation)


#: the largest key universe explored with a boolean map of the seen keys (64 MB)
_BITMAP_KEYS = 1 << 26


class MemoryMeter:
    """The bytes a computation holds, checked against the memory budget taken at its start.

    ``need(held, what, transient=...)`` adds ``held`` bytes (kept until the end) and
    checks ``held so far + transient`` against the budget (the machine's available
    memory when the computation began, or ``EXACTQ_MEMORY_BUDGET``); over it, the
    line of :func:`exactq.budget.require_memory` names ``what``. The checks are
    cumulative, so that many small allocations cannot add up past the budget, and
    cheap (the budget is read once).

    Examples
    --------
    >>> m = MemoryMeter()
    >>> m.budget = 1000
    >>> m.need(600, "the first half")
    >>> try:
    ...     m.need(600, "the second half")
    ... except MemoryError as e:
    ...     print(str(e).split(" would")[0])
    the second half
    """

    def __init__(self):
        from .budget import memory_budget

        self.budget = memory_budget()
        self.held = 0.0

    def need(self, held: float, what: str, *, transient: float = 0.0, hint: str = "") -> None:
        from .budget import BudgetError, format_bytes

        total = self.held + float(held) + float(transient)
        if self.budget is not None and not total <= self.budget:
            tail = f"; {hint}" if hint else ""
            raise BudgetError(f"{what} would need about {format_bytes(total)}, above the memory budget of "
                              f"{format_bytes(self.budget)} (EXACTQ_MEMORY_BUDGET changes it){tail}")
        self.held += float(held)


def _unique_first(keys: np.ndarray):
    """The sorted distinct keys and, for each, the index of one occurrence.

    ``np.unique`` without ``return_index`` takes a hashing path in numpy >= 2.3 that
    is 50x slower than sorting on int64 keys, and a stable sort 5x slower than the
    default one; any occurrence serves here (rows with equal keys are equal, or a
    wide box's collision check sees them).
    """
    order = np.argsort(keys)
    sk = keys[order]
    keep = np.ones(len(sk), dtype=bool)
    keep[1:] = sk[1:] != sk[:-1]
    return sk[keep], order[keep]


class _Collision(Exception):
    """Two different states of a wide box share a hashed key (the exploration restarts with another seed)."""


class _KeySet:
    """A growing set of int64 keys: a few sorted runs, or a map over a bounded key universe.

    With single-word keys below ``universe``, once the keys fill 1/64 of it (or at
    once for a universe of at most 2^20), a boolean map (at most
    :data:`_BITMAP_KEYS` keys) or a packed map of bits (up to ``max_bits`` keys)
    replaces the runs and answers a lookup by one gather; a sparser map would cost
    more memory than the runs, and a page fault per key.

    Otherwise the keys are held as sorted runs (a log-structured merge): ``add``
    appends a sorted run and merges the last two while the older one is at most
    twice as long, so there are O(log n) runs and every key is merged O(log n)
    times: a breadth-first search of ``r`` rounds costs O(n log² n) in total instead
    of the O(r n) of re-sorting the whole seen set each round (a 2-D chain of 90,601
    states explored in 0.2 s instead of 6.7 s). With ``words`` (the packed rows of a
    wide box, whose keys are hashes), every run keeps the words beside its keys, and
    a key found with other words raises :class:`_Collision`: membership stays exact.
    """

    def __init__(self, keys: np.ndarray, universe: int | None = None, words: np.ndarray | None = None,
                 max_bits: int = 0):
        keys, first = _unique_first(keys)
        self.size = len(keys)
        self.bitmap = self.bits = None
        self.wide = words is not None
        self.universe = None if self.wide or universe is None else int(universe)
        self.max_bits = max_bits
        self.runs = [(keys, words[first] if self.wide else None)]
        self._densify()

    def _densify(self) -> None:
        """Trade the runs for a map once the keys fill 1/64 of the universe (a map costs 1 or 1/8 byte per key
        of the universe, a run 8 bytes per key; a sparse map also costs a page per key touched)."""
        u = self.universe
        if u is None or not self.runs or (u > 1 << 20 and self.size * 64 < u):
            return
        if u <= _BITMAP_KEYS:
            self.bitmap = np.zeros(u, dtype=bool)
            for keys, _ in self.runs:
                self.bitmap[keys] = True
        elif u <= self.max_bits:
            self.bits = np.zeros((u + 7) // 8, dtype=np.uint8)
            for keys, _ in self.runs:
                self._set_bits(keys)
        else:
            return
        self.runs = []

    def _set_bits(self, keys: np.ndarray) -> None:
        """Set the bits of sorted distinct keys (the bits of one byte are summed, not or-ed: they are distinct)."""
        if len(keys) == 0:
            return
        byte = keys >> 3
        val = np.left_shift(1, keys & 7).astype(np.uint8)
        starts = np.flatnonzero(np.concatenate([[True], byte[1:] != byte[:-1]]))
        self.bits[byte[starts]] |= np.add.reduceat(val, starts).astype(np.uint8)

    def contains(self, keys: np.ndarray, words: np.ndarray | None = None) -> np.ndarray:
        if self.bitmap is not None:
            return self.bitmap[keys]
        if self.bits is not None:
            return ((self.bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1).astype(bool)
        found = np.zeros(len(keys), dtype=bool)
        for run, run_words in self.runs:
            pos = np.minimum(np.searchsorted(run, keys), len(run) - 1)
            hit = run[pos] == keys
            if self.wide and hit.any():
                h = np.flatnonzero(hit)
                if not np.array_equal(run_words[pos[h]], words[h]):
                    raise _Collision
            found |= hit
        return found

    def add(self, keys: np.ndarray, words: np.ndarray | None = None) -> None:
        """Add keys that are new and sorted (``np.unique`` output), with their words for a wide box."""
        self.size += len(keys)
        if self.bitmap is not None:
            self.bitmap[keys] = True
            return
        if self.bits is not None:
            self._set_bits(keys)
            return
        self.runs.append((keys, words))
        if self.universe is not None and self.size * 64 >= self.universe:
            self._densify()
            if not self.runs:
                return
        while len(self.runs) > 1 and len(self.runs[-2][0]) <= 2 * len(self.runs[-1][0]):
            (k2, w2), (k1, w1) = self.runs.pop(), self.runs[-1]
            k = np.concatenate([k1, k2])
            if self.wide:
                order = np.argsort(k)
                self.runs[-1] = (k[order], np.concatenate([w1, w2])[order])
            else:
                k.sort()
                self.runs[-1] = (k, None)


@dataclass
class Explored:
    """The reachable states of a model and, when kept, the transitions found on the way.

    Attributes
    ----------
    space : StateSpace
        The reachable states, sorted by key.
    src, dst : (m,) ndarray of int32 (int64 from 2^31 states on)
        Source and target state (indices into ``space``) of every transition kept
        (empty when the exploration did not keep them). Duplicates are not merged.
    weight : (m,) ndarray of float
        The rate or probability the expander gave each transition.
    order : (n,) ndarray of int64
        ``order[i]`` is the index in ``space`` of the ``i``-th state discovered (the
        order in which the expander saw the states, frontier by frontier).
    extras : dict of name -> (n,) ndarray
        What the expander reported per state, in the order of ``space``.
    rounds : int
        Breadth-first rounds (the depth of the search plus one).
    """

    space: StateSpace
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    order: np.ndarray
    extras: dict
    rounds: int


def explore_transitions(initial, expand, names: Sequence[str], *, hi, lo=None, max_states: int | None = None,
                        keep: bool = True, what: str = "the state space", meter: MemoryMeter | None = None,
                        progress: Callable[[str], None] | None = None) -> Explored:
    """Reachable states and transitions by a breadth-first search over whole frontiers.

    Parameters
    ----------
    initial : (k, d) array_like of int
        The initial states (inside the box).
    expand : callable
        ``expand(states, words) -> (blocks, extras)``: for the ``(f, d)`` frontier
        and its packed rows (``space.packing.words``), an iterable of transition
        blocks ``(src, weight, target_words)`` (``src`` indexes the frontier rows,
        ``weight`` may be None when ``keep`` is false, every target inside the box)
        and a dict of per-frontier-state arrays. The expander may compute the
        targets' words directly from the sources' (a change ``dx`` of column ``j``
        changes word ``packing.word_of[j]`` by ``packing.strides[j] * dx``), without
        forming the target rows. An expander with ``tolerant = True`` and ``jumps``
        (the largest change of each variable seen so far) also takes
        ``tolerant=True``: it then reports the states whose expansion would raise
        in ``extras["_bad"]`` instead of raising, and the search may expand a box
        of states around a thin frontier, or states guessed from a period of the
        frontiers, at once (see :class:`_Search`).
    names : sequence of str
    hi, lo : (d,) array_like of int
        The box (``lo`` defaults to 0).
    max_states : int, optional
        Refuse (:class:`~exactq.errors.TruncationError`) to grow beyond this many states.
    keep : bool
        Keep the transitions (for assembling the chain) or only the states.
    what : str
        What is explored, for the budget messages.
    meter : MemoryMeter, optional
        Shared with the expander, which accounts for the transitions it forms
        (default: a fresh one).
    progress : callable, optional
        ``progress(text)`` receives a line on the search's state (states and
        transitions found, rounds) about every :data:`PROGRESS_SECONDS`.

    Returns
    -------
    Explored

    Notes
    -----
    The memory of each round is predicted and checked against the budget
    (:class:`MemoryMeter`) before it is allocated. A wide box
    (hashed keys, see :class:`~exactq.statespace.StateSpace`) compares the packed
    words on every key match; a collision restarts the search with another seed.
    """
    from .statespace import _MAX_RESEEDS, Packing

    init = np.atleast_2d(np.asarray(initial, dtype=np.int64))
    lo = np.zeros(init.shape[1], np.int64) if lo is None else np.asarray(lo, dtype=np.int64)
    packing = Packing(lo, hi, names)
    if not np.all(packing.inside(init)):
        raise ValueError("states outside the given bounding box")
    meter = MemoryMeter() if meter is None else meter
    held = meter.held
    for seed in range(_MAX_RESEEDS):
        meter.held = held
        try:
            return _search(init, expand, tuple(names), packing, seed, max_states, keep, what, meter, progress)
        except _Collision:
            continue
    raise NotApplicableError(f"state keys collided under {_MAX_RESEEDS} hash seeds; report this as a bug")


#: a search reports its progress (when asked) at most this often
PROGRESS_SECONDS = 0.5
#: a frontier this small, for this many rounds in a row, makes the search try a window (per-round costs dominate)
_THIN_FRONTIER = 512
_THIN_ROUNDS = 4
#: a window may always hold this many states, and at most this many times the states found so far
_WINDOW_MIN = 1 << 16
_WINDOW_GROWTH = 4.0
#: windows are tried only where the states found fill at least 1/_WINDOW_DENSITY of their bounding box
_WINDOW_DENSITY = 8
#: shifted windows: the periods tried, the share of a frontier that must recur shifted, the first number of shifts
_SHIFT_PERIODS = 6
_SHIFT_MATCH = 0.5
_SHIFT_FIRST = 8
#: a shift is tried only when the frontier can move at least this many times along it inside the box
_SHIFT_ROOM = 16
#: bytes a kept transition holds until the end (source, weight, target key)
_KEPT_BYTES = 24
#: moved windows (see _Search._moved): tried once this many rounds in a row had frontiers up to this size (a
#: shallow search ends before: its rounds are few), from the changes of the rows recorded in the rounds before
#: (at most _MOVED_SAMPLE transitions of each)
_MOVED_FRONTIER, _MOVED_AFTER, _MOVED_SAMPLE = 2048, 6, 8192
#: at most this many distinct changes (more: the changes depend on the state, as resets do, and guess poorly)
_MOVED_CHANGES = 256
#: the first number of moves, and the most
_MOVED_FIRST, _MOVED_MOST = 2, 64
#: after this many moved windows in a row that did not pay there are no more; a window holds at most this many
#: times the frontier's states (a MAPK cascade, a repair model, an FMS: 3-10 times, 70-100% of them reached;
#: a NAND multiplexer: 11-750 times, 14-41% reached)
_MOVED_TRIES, _MOVED_SPREAD, _MOVED_FIRST_SPREAD = 1, 16, 12
#: a moved window pays when at least this share of it is reached (a crowds protocol: 36%, a window costs more than
#: the rounds it saves), it stands for at least two rounds, and it took less time than one more than those rounds;
#: and the windows are tried only while the frontier at least doubles in two rounds (a thin protocol that walks
#: along a counter is left to the shifted windows)
_MOVED_DENSITY = 0.7
#: and only while the last plain round took at least this long per state of its frontier (its fixed costs dominate:
#: a repair model's 112 states took 1.2 ms; a protocol's 929 states 0.76 ms, where a window cost ten rounds), and
#: that frontier had at least a quarter of the states of this one (else the time tells little)
_MOVED_STATE_SECONDS = 2e-6
#: at most this many candidate rows formed in one window (rows of the layers times the changes)
_MOVED_ROWS = 1 << 17


class _Search:
    """One breadth-first search (see :func:`explore_transitions`), with windows for thin frontiers.

    A *window round* replaces many rounds of a long, thin search (a counter that
    climbs one step per round): every state of a box around the frontier (extended
    along the variables that change, by ``steps`` times their largest jump) that is
    not yet expanded is expanded at once, with the expander's errors deferred per
    state; the states of the box reachable from the frontier inside it are found by
    a graph search (:func:`scipy.sparse.csgraph.breadth_first_order`) and kept with
    their transitions, the rest is dropped, and the targets outside the box are the
    next frontier. A deferred error of a reachable state is raised as a normal round
    would raise it. The window grows (``steps`` doubles) while most of its states
    are reachable, and shrinks otherwise; the expander opts in by having
    ``tolerant = True`` and ``jumps`` (the largest change of each variable so far).

    Where the states found are too sparse in their bounding box for a box to pay (a
    protocol's chunk counter and a receiver's copy of it), a *shifted window*
    (:meth:`_shift`) expands instead the states of the next rounds guessed from a
    period of the frontiers (the frontier of ``p`` rounds ago moved by a fixed change),
    with the same check: only what the frontier reaches is kept.

    A *moved window* (:meth:`_moved`) guesses the next rounds from the changes of the
    variables that the transitions of the last rounds made: the frontier moved by every
    change seen, ``k`` times over, inside the box. The changes keep the model's
    invariants (a conservation law, one repairman at a time) that a box ignores, so
    the guesses of a chemical cascade or a repair model are mostly reachable (a MAPK
    cascade of 2,172 states: 83-100% of each window kept, 25 rounds down to 12).
    """

    def __init__(self, init, expand, names, packing, seed, max_states, keep, what, meter):
        from .statespace import hash_words

        self.expand, self.names, self.packing, self.seed = expand, names, packing, seed
        self.max_states, self.keep, self.what, self.meter = max_states, keep, what, meter
        self.wide = packing.n_words > 1
        self.d, self.W = init.shape[1], packing.n_words
        self.universe = None if self.wide else float(np.prod(packing.radix.astype(float)))
        self._hash = hash_words
        self.windows = bool(getattr(expand, "tolerant", False)) and getattr(expand, "jumps", None) is not None
        self.steps = 16
        self.thin = 0
        # shifted windows (see _shift): the last thin frontiers (rows, words, keys), shifts per window, back-off
        self.shifts = bool(getattr(expand, "tolerant", False))
        self.history: list = []
        self.shift_k = _SHIFT_FIRST
        self.shift_wait = 0
        self.shift_fails = 0
        self.period_misses = 0
        self.band = None  # after a good shifted window: (the last p frontiers moved as far as it went, the change)
        self.window_rounds = 0
        # moved windows (see _moved): the distinct changes of the rows seen in thin rounds, moves, back-off
        self.moved_on = bool(getattr(expand, "tolerant", False)) and not self.wide
        self.changes = None
        self.moved_thin = 0
        self.round_seconds = None  # the last plain round's time (a moved window must save more than it costs)
        self.round_states = 0  # and the states it expanded
        self.sizes: list = []  # the frontier's sizes two rounds ago, one, and now (moved windows: while it grows)
        self.moved_k = _MOVED_FIRST
        self.moved_paid = False
        self.moved_wait = 0
        self.moved_fails = 0
        words_all = packing.words(init)
        keys_all = self.key_of(words_all)
        keys, first = _unique_first(keys_all)
        if self.wide:
            _check_unique_words(words_all, keys_all, keys, first)
        self.words, self.frontier, self.keys = words_all[first], init[first], keys
        # a packed map of bits over the key universe when it takes at most 1/16 of the budget
        max_bits = 0 if meter.budget is None else int(meter.budget / 16 * 8)
        fits = self.universe is not None and self.universe <= max(_BITMAP_KEYS, max_bits)
        self.seen = _KeySet(keys, universe=int(self.universe) if fits else None,
                            words=self.words if self.wide else None, max_bits=max_bits)
        self._map_counted = False
        self.seen_lo, self.seen_hi = self.frontier.min(axis=0), self.frontier.max(axis=0)
        # the rows of the states found are not kept (only the frontier's): the final array is decoded from their sorted
        # keys (or words)
        self.word_chunks, self.key_chunks = [self.words], [keys]
        self.src_parts, self.weight_parts, self.tkey_parts = [], [], []
        self.extra_parts: dict = {}
        self.n_found = len(self.frontier)
        self.n_kept = 0
        self.base = 0
        self.rounds = 0
        # what stays per state found: its words (here and in the seen set), key, ...; its row only while it is in the
        # frontier (the final rows are decoded from the keys), counted as transient
        self.per_state = 8 * (2 * self.W + 3)
        meter.need(len(self.frontier) * self.per_state, f"{what}: {len(self.frontier)} initial states",
                   transient=len(self.frontier) * 8 * self.d)

    def key_of(self, words: np.ndarray) -> np.ndarray:
        return self._hash(words, self.seed) if self.wide else words[:, 0]

    # -- rounds ------------------------------------------------------------------------
    progress = None

    def run(self) -> Explored:
        last = time.perf_counter()
        while len(self.frontier):
            self.rounds += 1
            self.thin = self.thin + 1 if len(self.frontier) <= _THIN_FRONTIER else 0
            self.moved_thin = self.moved_thin + 1 if len(self.frontier) <= _MOVED_FRONTIER else 0
            if self.progress is not None and time.perf_counter() - last >= PROGRESS_SECONDS:
                last = time.perf_counter()
                self.progress(f"exploring {self.what}: {self.n_found:,} states, {self.n_kept:,} transitions, "
                              f"round {self.rounds}, frontier {len(self.frontier):,}")
            if self.thin:
                self.history.append((self.frontier, self.words, self.keys))
                del self.history[:-_SHIFT_PERIODS - 1]
            else:
                self.history.clear()
            if self.thin >= _THIN_ROUNDS and (self.windows and self._window() or self.shifts and self._shift()):
                self.history.clear()  # the next frontier is no breadth-first level: no period to compare with
                continue
            sizes = self.sizes = [*self.sizes[-2:], len(self.frontier)]
            if self.moved_thin >= _MOVED_AFTER and self.changes is not None and len(self.frontier) >= 2 * sizes[0] \
                    and (self.moved_paid or self._rounds_dear()) and self._moved():
                continue  # (a period of the frontiers, if any, is still found: a moved frontier merely matches less)
            t0, self.round_states = time.perf_counter(), len(self.frontier)
            self._bfs_round()
            self.round_seconds = time.perf_counter() - t0
        return self._finish()

    def _keep(self, src, weight, tkeys) -> None:
        if self.keep:
            self.src_parts.append(src)
            self.weight_parts.append(np.asarray(weight, dtype=float))
            self.tkey_parts.append(tkeys)
            self.n_kept += len(src)

    def _extras(self, extras: dict, sel=None) -> None:
        held = 0
        for name, arr in extras.items():
            if name.startswith("_"):
                continue
            arr = np.asarray(arr)
            arr = arr if sel is None else arr[sel]
            held += 2 * arr.nbytes  # kept, and once more when put in the final order
            self.extra_parts.setdefault(name, []).append(arr)
        if held:
            self.meter.need(held, f"{self.what}: what is recorded per state for {self.base} states")

    def _bfs_round(self) -> None:
        blocks, extras = self.expand(self.frontier, self.words)
        new_keys, new_words, new_rows = [], [], []
        sizes = self.sizes
        record = self.moved_on and self.moved_thin >= _MOVED_AFTER - 1 and len(sizes) == 3 and sizes[-1] >= 2 * sizes[0]
        changes = []
        for block in blocks:
            src, weight, twords = block[:3]
            rows = block[3] if len(block) > 3 else None  # the target rows, when the expander has them
            twords = np.asarray(twords, dtype=np.int64).reshape(-1, self.W)
            tkeys = self.key_of(twords)
            if record and len(src):
                step = -(-len(src) // _MOVED_SAMPLE)
                changes.append(self._changes(np.asarray(src[::step], dtype=np.int64), twords[::step]))
            if self.keep:
                itype = np.int32 if self.base + len(self.frontier) < 2**31 else np.int64
                self._keep(np.asarray(src, dtype=itype) + itype(self.base), weight, tkeys)
            fresh = np.flatnonzero(~self.seen.contains(tkeys, twords if self.wide else None))
            if fresh.size:
                new_keys.append(tkeys[fresh])
                new_words.append((twords, fresh))
                new_rows.append(rows)
        self._extras(extras)
        self.base += len(self.frontier)
        if changes:
            self._record_changes(changes)
        self._discover(new_keys, new_words, new_rows)

    def _changes(self, src: np.ndarray, twords: np.ndarray) -> tuple:
        """The distinct changes of the packed word made by transitions ``src -> twords``, and of the rows (from one
        pair for each: pairs with equal word changes have equal row changes unless a variable wraps, which only
        makes a guess poorer)."""
        dw = twords[:, 0] - self.words[src, 0]
        dw, first = _unique_first(dw)
        moving = dw != 0
        first = first[moving]
        return dw[moving], self.packing.decode(twords[first]) - self.frontier[src[first]]

    def _record_changes(self, changes: list) -> None:
        if self.changes is not None:
            changes = [self.changes, *changes]
        dw, first = _unique_first(np.concatenate([c[0] for c in changes]))
        if len(dw) > _MOVED_CHANGES:
            self.moved_on = False  # the changes depend on the state: moved frontiers would guess poorly
            self.changes = None
        elif len(dw):
            self.changes = dw, np.concatenate([c[1] for c in changes])[first]

    def _discover(self, new_keys: list, new_words: list, new_rows: list | None = None) -> None:
        """The next frontier: the distinct unseen candidates.

        ``new_keys`` holds unseen keys only; ``new_words`` the words they come from,
        as arrays or as ``(words, positions)`` pairs (gathered only for the distinct
        keys); ``new_rows`` the matching rows where the expander gave them.
        """
        if not new_keys:
            self.frontier = self.frontier[:0]
            return
        cand_keys = new_keys[0] if len(new_keys) == 1 else np.concatenate(new_keys)
        keys, first = _unique_first(cand_keys)
        # where each distinct key came from: (block, position in the block's arrays)
        sizes = np.array([len(k) for k in new_keys])
        block = np.searchsorted(np.cumsum(sizes), first, side="right") if len(new_keys) > 1 else None
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        words, rows = [], []
        have_rows = new_rows is not None and all(r is not None for r in new_rows)
        for b, w in enumerate(new_words):
            sel = first if block is None else first[block == b] - offsets[b]
            arr, pos = w if isinstance(w, tuple) else (w, None)
            at = sel if pos is None else pos[sel]
            words.append(arr[at])
            if have_rows:
                rows.append(new_rows[b][at])
        if block is not None:  # back to the order of ``keys``
            back = np.argsort(np.argsort(block, kind="stable"), kind="stable")
            words = np.concatenate(words)[back]
            rows = np.concatenate(rows)[back] if have_rows else None
        else:
            words = words[0]
            rows = rows[0] if have_rows else None
        if self.wide:
            all_words = np.concatenate([(w[0][w[1]] if isinstance(w, tuple) else w) for w in new_words])
            _check_unique_words(all_words, cand_keys, keys, first)
        if rows is None:
            rows = self.packing.decode(words)
        self._add_states(keys, words, rows)
        self.frontier, self.words, self.keys = rows, words, keys

    def _add_states(self, keys, words, rows) -> None:
        from .errors import TruncationError

        self.meter.need(len(keys) * self.per_state, f"{self.what}: {self.n_found + len(keys)} states of {self.d} "
                        f"variables after {self.rounds} rounds of exploration", transient=len(keys) * 8 * self.d)
        self.seen.add(keys, words if self.wide else None)
        if not self._map_counted and (self.seen.bits is not None or self.seen.bitmap is not None):
            self._map_counted = True
            size = len(self.seen.bits if self.seen.bits is not None else self.seen.bitmap)
            self.meter.need(size, f"{self.what}: the map of {self.n_found + len(keys)} seen states over "
                            f"{self.universe:.0f} keys")
        if self.windows:
            self.seen_lo = np.minimum(self.seen_lo, rows.min(axis=0))
            self.seen_hi = np.maximum(self.seen_hi, rows.max(axis=0))
        self.n_found += len(keys)
        if self.max_states is not None and self.n_found > self.max_states:
            raise TruncationError(f"state space exceeds max_states={self.max_states} during exploration")
        self.word_chunks.append(words)
        self.key_chunks.append(keys)

    # -- windows -------------------------------------------------------------------------
    def _window(self) -> bool:
        """One window round (see the class docstring); False when no useful window fits (then a BFS round)."""
        from .budget import BudgetError

        pk, F = self.packing, self.frontier
        jumps = np.asarray(self.expand.jumps, dtype=np.int64)
        if not jumps.any():
            return False
        # windows pay where the states found fill their bounding box (counters, queues in tandem), not where
        # they are a sparse subset of it (many flags and counters that move together)
        seen_box = float(np.prod((self.seen_hi - self.seen_lo + 1).astype(float)))
        if self.n_found * _WINDOW_DENSITY < seen_box:
            return False
        f_lo, f_hi = F.min(axis=0), F.max(axis=0)
        # grow the box where the frontier touches the seen states' box (where new states lie)
        down = np.where(f_lo <= self.seen_lo, jumps, 0)
        up = np.where(f_hi >= self.seen_hi, jumps, 0)
        cap = max(_WINDOW_MIN, _WINDOW_GROWTH * self.n_found)
        steps = self.steps
        while True:
            lo_w = np.maximum(pk.lo, f_lo - steps * down)
            hi_w = np.minimum(pk.hi, f_hi + steps * up)
            size = float(np.prod((hi_w - lo_w + 1).astype(float)))
            if size <= cap or steps == 1:
                break
            steps //= 2
        if size > cap or size <= 2 * len(F):
            return False
        per_trans = self.n_kept / max(self.base, 1)
        per_window_state = 8 * (3 * self.d + 3 * self.W + 8) + per_trans * 80
        while True:  # near the budget, smaller windows (plain rounds would crawl along a thin chain)
            try:
                self.meter.need(0, f"{self.what}: {self.n_found} states and {self.n_kept} transitions found so "
                                f"far, and a window of {size:.0f} states around the frontier",
                                transient=size * per_window_state)
                break
            except BudgetError:
                if steps == 1:
                    raise
                steps //= 2
                lo_w = np.maximum(pk.lo, f_lo - steps * down)
                hi_w = np.minimum(pk.hi, f_hi + steps * up)
                size = float(np.prod((hi_w - lo_w + 1).astype(float)))

        n_w = int(size)
        radix = hi_w - lo_w + 1
        strides = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]]).astype(np.int64)
        idx = np.arange(n_w, dtype=np.int64)
        rows = (idx[:, None] // strides[None, :]) % radix[None, :] + lo_w[None, :]
        del idx
        wwords = pk.words(rows)
        wkeys = self.key_of(wwords)
        fresh = np.flatnonzero(~self.seen.contains(wkeys, wwords if self.wide else None))
        density = self._expand_window(rows[fresh], wwords[fresh], wkeys[fresh])
        if density is None:  # a fault (or the budget) somewhere in the box: take the frontier round by round
            self.windows = False
            return False
        self.steps = steps * 2 if density >= 0.5 else max(1, steps // 2)
        if density < 1 / 16:
            self.windows = False  # the boxes are mostly unreachable here: plain rounds are cheaper
        return True

    def _period(self):
        """``(p, delta)`` when the frontier is, for the most part, the frontier of ``p`` rounds ago moved by ``delta``.

        For every ``p`` the history holds, ``delta`` (a change of the variables, not
        zero) is guessed from the smallest and from the largest packed states of both
        frontiers, and scored by the share of the older frontier that, moved by it, is
        in the newer one (of the larger of the two frontiers); the best score wins (the
        smallest ``p`` among equals) if it is at least :data:`_SHIFT_MATCH`. A change
        that leaves the box within :data:`_SHIFT_ROOM` moves (a retry counter that
        ends at 10) is no long-range period and is not tried. A guess only: what a
        shifted window keeps is checked by expanding it.
        """
        H = self.history
        F, Fw, Fk = H[-1]
        if len(F) == 0:
            return None
        best, best_score = None, _SHIFT_MATCH
        f_ends = self._ends(Fw)
        for p in range(1, len(H)):
            A, Aw, _ = H[-1 - p]
            if min(len(A), len(F)) <= best_score * max(len(A), len(F)):
                continue  # the frontiers' sizes alone rule out a better score
            tried = []
            for fa, aa in zip(f_ends, self._ends(Aw)):
                delta = F[fa] - A[aa]
                if not delta.any() or any(np.array_equal(delta, t) for t in tried):
                    continue
                tried.append(delta)
                inside, w = self.packing.inside_words(A + delta)
                k = self.key_of(w[inside])
                if len(k) == 0:
                    continue
                pos = np.minimum(np.searchsorted(Fk, k), len(Fk) - 1)
                score = np.count_nonzero(Fk[pos] == k) / max(len(A), len(F))
                if score > best_score and self._room(F, delta) >= _SHIFT_ROOM:
                    best, best_score = (p, delta), score
        return best

    @staticmethod
    def _ends(words) -> tuple:
        """The positions of the smallest and the largest packed row (the words compared in order)."""
        if words.shape[1] == 1:
            return int(np.argmin(words[:, 0])), int(np.argmax(words[:, 0]))
        order = np.lexsort(words.T[::-1])
        return int(order[0]), int(order[-1])

    def _room(self, F, delta) -> int:
        """How many times the whole of ``F`` can be moved by ``delta`` and stay in the box."""
        pk = self.packing
        up, down = delta > 0, delta < 0
        room = np.concatenate([(pk.hi[up] - F[:, up].max(axis=0)) // delta[up],
                               (F[:, down].min(axis=0) - pk.lo[down]) // -delta[down]])
        return int(room.min()) if room.size else 0

    def _shift(self) -> bool:
        """A shifted window; False when none applies (then a BFS round).

        Where a thin frontier recurs moved by a fixed change of the variables every
        ``p`` rounds (a protocol that sends chunk after chunk: the same steps for every
        chunk, with the chunk counter one higher), the states of the next ``k p``
        rounds are guessed as the last ``p`` frontiers moved by ``1..k`` times that
        change; the guesses are expanded together with the frontier, and only those the
        frontier reaches are kept (:meth:`_expand_window`), so the guess costs time,
        never correctness. While most guesses are reached, the next window goes on from
        where this one ended (the targets beyond it are the next frontier) with twice
        the shifts; after a poor window the next is tried only after a growing number
        of rounds.
        """
        from .budget import BudgetError

        if self.band is not None:  # the last window was good: guess on from where it ended
            S, delta = self.band
        else:
            if self.shift_wait > 0:
                self.shift_wait -= 1
                return False
            if len(self.history) <= _SHIFT_PERIODS:
                return False
            found = self._period()
            if found is None:  # no period: look again after 1, 2, 4, ... rounds (at most 64)
                self.shift_wait = 1 << self.period_misses
                self.period_misses = min(self.period_misses + 1, 6)
                return False
            self.period_misses = 0
            p, delta = found
            S = np.concatenate([h[0] for h in self.history[-p:]])
        self.band = None
        pk = self.packing
        cap = max(_WINDOW_MIN, _WINDOW_GROWTH * self.n_found)
        k = max(1, min(self.shift_k, int(cap // max(len(S), 1))))
        per_trans = self.n_kept / max(self.base, 1)
        per_state = 8 * (3 * self.d + 3 * self.W + 8) + per_trans * 80
        while True:  # near the budget, fewer shifts, or none (plain rounds)
            try:
                self.meter.need(0, f"{self.what}: {self.n_found} states and {self.n_kept} transitions found so far, "
                                f"and a window of {k * len(S)} states", transient=k * len(S) * (per_state + 8 * self.d))
                break
            except BudgetError:
                if k == 1:
                    return False
                k //= 2
        steps = np.arange(1, k + 1, dtype=np.int64)[:, None, None] * delta[None, None, :]
        rows = (S[None, :, :] + steps).reshape(-1, self.d)
        inside, words = pk.inside_words(rows)
        rows, words = rows[inside], words[inside]
        keys, first = _unique_first(self.key_of(words))
        rows, words = rows[first], words[first]
        fresh = np.flatnonzero(~self.seen.contains(keys, words if self.wide else None))
        if fresh.size == 0:
            self.shift_wait = 1 << min(self.shift_fails, 8)
            self.shift_fails += 1
            return False
        density = self._expand_window(rows[fresh], words[fresh], keys[fresh])
        if density is None:
            self.shifts = False
            return False
        if density >= 0.5:
            self.shift_k = 2 * k
            self.shift_fails = 0
            self.band = S + k * delta, delta
        else:
            self.shift_k = max(1, k // 4)
            self.shift_wait = 1 << min(self.shift_fails, 8)
            self.shift_fails += 1
        return True

    def _rounds_dear(self) -> bool:
        """Whether the last plain round's fixed costs dominated (:data:`_MOVED_STATE_SECONDS`), on a frontier at
        least a quarter of this one."""
        return self.round_seconds is not None and 4 * self.round_states >= len(self.frontier) and \
            self.round_seconds >= _MOVED_STATE_SECONDS * self.round_states

    def _moved(self) -> bool:
        """A moved window (see the class docstring); False when none applies (then a BFS round).

        The candidates are the frontier moved by every recorded change, then those
        moved again, ``k`` times (the layers kept inside the box, distinct, unseen;
        at most ``max(_WINDOW_MIN, _WINDOW_GROWTH * found)`` of them); they are
        expanded with the frontier and only what the frontier reaches is kept
        (:meth:`_expand_window`), so a guess costs time, never correctness. While most
        of a window is kept the next one moves twice as far; after a poor one the
        next waits a growing number of rounds, and two in a row below 1/16 end them.
        """
        from .budget import BudgetError

        if self.moved_wait > 0:
            self.moved_wait -= 1
            return False
        t0 = time.perf_counter()
        D = self.changes[1]
        pk = self.packing
        spread = _MOVED_SPREAD if self.moved_paid else _MOVED_FIRST_SPREAD  # (a first try is cheap if it fails)
        cap = min(max(_WINDOW_MIN, _WINDOW_GROWTH * self.n_found), spread * len(self.frontier))
        per_trans = self.n_kept / max(self.base, 1)
        per_state = 8 * (3 * self.d + 3 * self.W + 8) + per_trans * 80
        try:
            self.meter.need(0, f"{self.what}: {self.n_found} states and {self.n_kept} transitions found so far, "
                            f"and a window of up to {cap:.0f} states", transient=cap * per_state)
        except BudgetError:
            self.moved_on = False
            self.changes = None
            return False
        layer = self.frontier
        rows_l, keys_l = [], []
        held = np.zeros(0, dtype=np.int64)  # the sorted keys of the candidates so far
        formed = 0
        for _ in range(self.moved_k):
            formed += len(layer) * len(D)
            if formed > min(_MOVED_ROWS, 8 * cap):  # (forming and checking the rows is most of a window's cost)
                break
            nxt = (layer[:, None, :] + D[None, :, :]).reshape(-1, self.d)
            inside, w = pk.inside_words(nxt)
            keys, first = _unique_first(w[inside, 0])
            nxt = nxt[inside][first]
            fresh = ~self.seen.contains(keys)
            if len(held):
                pos = np.minimum(np.searchsorted(held, keys), len(held) - 1)
                fresh &= held[pos] != keys
            keys, nxt = keys[fresh], nxt[fresh]
            if len(keys) == 0 or len(held) + len(keys) > cap:
                break
            rows_l.append(nxt)
            keys_l.append(keys)
            held = np.sort(np.concatenate([held, keys]))  # (np.union1d hashes: slower)
            layer = nxt
        if not keys_l:
            self.moved_wait = 1 << min(self.moved_fails, 6)
            self.moved_fails += 1
            return False
        keys = np.concatenate(keys_l)
        rows = np.concatenate(rows_l)
        order = np.argsort(keys)
        keys, rows = keys[order], rows[order]
        density = self._expand_window(rows, keys[:, None], keys)
        seconds = time.perf_counter() - t0
        if density is None:
            self.moved_on = False
            self.changes = None
            return False
        # the rounds the window stood for: its leading layers that the frontier mostly reached; it paid if it took
        # less time than that many plain rounds (timed: the choice changes the speed, never the result)
        depth = 0
        for k in keys_l:
            if 2 * np.count_nonzero(self.seen.contains(k)) < len(k):
                break
            depth += 1
        if density >= _MOVED_DENSITY and depth >= 2 and \
                (self.round_seconds is None or seconds <= (depth + 1) * self.round_seconds):
            self.moved_k = min(2 * self.moved_k, _MOVED_MOST)
            self.moved_fails = 0
            self.moved_paid = True
        else:
            self.moved_k = max(_MOVED_FIRST, self.moved_k // 2)
            self.moved_wait = 1 << min(self.moved_fails, 6)
            self.moved_fails += 1
            if self.moved_fails >= _MOVED_TRIES:
                self.moved_on = False  # the guesses are poor here: plain rounds (and shifted windows) are cheaper
                self.changes = None
        return True

    def _expand_window(self, rows, wwords, wkeys):
        """Expand the frontier and the unseen candidate states ``rows`` at once; keep what the frontier reaches.

        The candidates (distinct, none of them seen) are expanded with the expander's
        errors deferred; the candidates reachable from the frontier through
        transitions inside frontier + candidates are found by a graph search and kept,
        with their transitions, and the targets outside that are not seen yet are the
        next frontier. Every state kept is reachable, and every reachable state not
        kept is reached later from a kept one. Returns the fraction of the expanded
        states that were kept, or None (nothing kept) after a fault or the budget.
        """
        from scipy.sparse.csgraph import breadth_first_order  # (imports scipy.sparse.linalg: only when used)

        from .errors import ExactqError

        F = self.frontier
        nF = len(F)
        C = np.concatenate([F, rows])
        Cw = np.concatenate([self.words, wwords])
        Ck = np.concatenate([self.keys, wkeys])
        del rows, wwords, wkeys
        held = self.meter.held
        try:
            blocks, extras = self.expand(C, Cw, tolerant=True)
            blocks = [(np.asarray(s, dtype=np.int64), w, np.asarray(t, dtype=np.int64).reshape(len(s), self.W))
                      for s, w, t in blocks]
        except ExactqError:
            self.meter.held = held
            return None
        nC = len(C)
        local = []
        k0, k1 = (int(Ck.min()), int(Ck.max())) if not self.wide else (0, -1)
        if not self.wide and k1 - k0 < 4 * nC + 1024:  # a dense table over the keys of the box
            table = np.full(k1 - k0 + 1, -1, dtype=np.int64)
            table[Ck - k0] = np.arange(nC)
            for src, _, twords in blocks:
                tkeys = twords[:, 0]
                off = tkeys - k0
                ok = (off >= 0) & (off <= k1 - k0)
                local.append((tkeys, np.where(ok, table[np.where(ok, off, 0)], -1)))
            del table
        else:
            order_c = np.argsort(Ck)
            sorted_ck = Ck[order_c]
            for src, _, twords in blocks:
                tkeys = self.key_of(twords)
                pos = np.minimum(np.searchsorted(sorted_ck, tkeys), nC - 1)
                hit = sorted_ck[pos] == tkeys
                if self.wide and hit.any():
                    h = np.flatnonzero(hit)
                    if not np.array_equal(Cw[order_c[pos[h]]], twords[h]):
                        raise _Collision
                local.append((tkeys, np.where(hit, order_c[pos], -1)))
        e_src = np.concatenate([b[0] for b in blocks] + [np.full(nF, nC, dtype=np.int64)])
        e_dst = np.concatenate([loc for _, loc in local] + [np.arange(nF, dtype=np.int64)])
        inside = e_dst >= 0
        graph = sp.csr_matrix((np.ones(int(inside.sum()), dtype=np.int8), (e_src[inside], e_dst[inside])),
                              shape=(nC + 1, nC + 1))
        reached = np.zeros(nC + 1, dtype=bool)
        reached[breadth_first_order(graph, nC, directed=True, return_predecessors=False)] = True
        reached = reached[:nC]
        bad = extras.get("_bad")
        if bad is not None and np.any(bad & reached):
            i = int(np.flatnonzero(bad & reached)[0])
            self.expand(C[i:i + 1], Cw[i:i + 1])  # raises the error a round would raise
            raise RuntimeError(f"a deferred error of state {C[i].tolist()} did not recur")  # pragma: no cover
        new_in = np.flatnonzero(reached[nF:]) + nF
        if self.wide or np.any(np.diff(Ck[new_in]) < 0):
            new_in = new_in[np.argsort(Ck[new_in])]  # by key, as the seen set takes them
        disc = np.full(nC, -1, dtype=np.int64)
        disc[:nF] = self.base + np.arange(nF)
        disc[new_in] = self.base + nF + np.arange(len(new_in))
        out_keys, out_words = [], []
        kept_before = self.n_kept
        for (src, weight, twords), (tkeys, loc) in zip(blocks, local):
            live = reached[src]
            if not live.all():
                src, weight, twords, tkeys, loc = src[live], weight[live], twords[live], tkeys[live], loc[live]
            self._keep(disc[src], weight, tkeys)
            out = loc < 0
            if out.any():
                out_keys.append(tkeys[out])
                out_words.append(twords[out])
        # the expander accounted for every transition it formed; only those of reached states are kept
        self.meter.held = held + (self.n_kept - kept_before) * _KEPT_BYTES
        self._extras(extras, np.concatenate([np.arange(nF), new_in]))
        self.base += nF + len(new_in)
        if len(new_in):
            self._add_states(Ck[new_in], Cw[new_in], C[new_in])
        fresh_keys, fresh_words = [], []
        for k, w in zip(out_keys, out_words):
            f = ~self.seen.contains(k, w if self.wide else None)
            if f.any():
                fresh_keys.append(k[f])
                fresh_words.append(w[f])
        self._discover(fresh_keys, fresh_words)
        self.window_rounds += 1
        return (nF + len(new_in)) / nC

    # -- the result ------------------------------------------------------------------------
    @staticmethod
    def _scatter(chunks: list, order: np.ndarray, width: int) -> np.ndarray:
        """The rows of the chunks (in discovery order) at their final positions, freeing each chunk once copied."""
        out = np.empty((len(order), width), dtype=np.int64)
        at = 0
        chunks.reverse()
        while chunks:
            c = chunks.pop()
            out[order[at:at + len(c)]] = c
            at += len(c)
        return out

    def _finish(self) -> Explored:
        n, m = self.n_found, self.n_kept
        d, W = self.d, self.W
        self.meter.need(0, f"{self.what}: assembling {n} states and {m} transitions",
                        transient=n * 8 * (d + W + 4) + m * 8 * 2)
        keys_disc = np.concatenate(self.key_chunks)
        perm = np.argsort(keys_disc)  # final position -> discovery index (the keys are distinct)
        order = np.empty(n, dtype=np.int64)
        order[perm] = np.arange(n, dtype=np.int64)
        sorted_keys = keys_disc[perm]
        del keys_disc
        self.key_chunks = None
        words = self._scatter(self.word_chunks, order, W) if self.wide else None
        self.word_chunks = None
        # the rows in key order are decoded from the keys (one word) or the words when first read (2.6x faster than
        # scattering the discovered rows, 1.3M states of 19 variables), and a column alone when only it is read
        space = StateSpace._presorted(self.names, self.packing, sorted_keys, words, self.seed)
        itype = np.int32 if n < 2**31 else np.int64
        src = np.empty(m, dtype=itype)
        dst = np.empty(m, dtype=itype)
        weight = np.empty(m)
        at = 0
        table = None
        if m and self.universe is not None and self.universe <= max(32 * n, 1 << 22):
            table = np.empty(int(self.universe), dtype=itype)
            table[sorted_keys] = np.arange(n, dtype=itype)
        order_i = order.astype(itype) if m else None
        parts = list(zip(self.src_parts, self.weight_parts, self.tkey_parts))
        self.src_parts = self.weight_parts = self.tkey_parts = None
        parts.reverse()
        while parts:  # fill the final arrays part by part, freeing each part as it is copied
            s, w, k = parts.pop()
            e = at + len(s)
            src[at:e] = order_i[s]
            dst[at:e] = table[k] if table is not None else np.searchsorted(sorted_keys, k)
            weight[at:e] = w
            at = e
        extras = {}
        for name, chunks in self.extra_parts.items():
            arr = np.concatenate(chunks)
            out = np.empty_like(arr)
            out[order] = arr
            extras[name] = out
        return Explored(space, src, dst, weight, order, extras, self.rounds)


def _search(init, expand, names, packing, seed, max_states, keep, what, meter, progress=None) -> Explored:
    search = _Search(init, expand, names, packing, seed, max_states, keep, what, meter)
    search.progress = progress
    return search.run()


def _check_unique_words(words, keys, unique_keys, first) -> None:
    """Raise :class:`_Collision` when rows with the same hashed key have different words."""
    inv = np.searchsorted(unique_keys, keys)
    if not np.array_equal(words, words[first][inv]):
        raise _Collision


def explore(
    initial,
    events: Sequence[Event],
    names: Sequence[str],
    *,
    hi,
    lo=None,
    max_states: int | None = 20_000_000,
) -> StateSpace:
    """Reachable states from ``initial`` by a vectorised breadth-first search.

    Each round applies every event to the whole frontier at once and keeps the new
    targets inside the box ``lo <= x <= hi`` (targets outside are the truncation,
    accounted for later by :func:`build_ctmc`). The search itself is
    :func:`explore_transitions` (any box: wide ones get hashed keys).

    Parameters
    ----------
    initial : (k, d) or (d,) array_like of int
        Start state(s).
    events : sequence of Event
    names : sequence of str
    hi, lo : (d,) array_like of int
        The box that bounds the exploration (``lo`` defaults to 0).
    max_states : int, optional
        Refuse to grow beyond this many states (None: only the memory budget).
    """
    from .statespace import Packing

    init = np.atleast_2d(np.asarray(initial, dtype=np.int64))
    packing = Packing(np.zeros(init.shape[1], np.int64) if lo is None else lo, hi, names)

    def expand(states, words):  # only the states are kept: no sources, no weights
        rows = [targets[rates > 0] for _, rates, targets in _collect(None, states, events)]
        t = np.concatenate(rows) if rows else np.zeros((0, states.shape[1]), np.int64)
        inside, w = packing.inside_words(t)
        if not inside.all():
            t, w = t[inside], w[inside]
        return [(None, None, w, t)], {}

    return explore_transitions(init, expand, names, hi=hi, lo=lo, max_states=max_states, keep=False).space
