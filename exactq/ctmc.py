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

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from .errors import ModelError
from .statespace import Space, StateSpace
from .truncation import Truncation

__all__ = ["Event", "CTMC", "DTMC", "StationaryDistribution", "build_ctmc", "build_dtmc", "explore", "ORDERINGS"]

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
        from .expr import evaluate

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

    def expect(self, values) -> float:
        """``sum_s pi_s f(s)`` for a per-state array (or a scalar)."""
        return float(self.pi @ np.broadcast_to(np.asarray(values, dtype=float), self.pi.shape))

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


class _KeySet:
    """A growing set of int64 keys held as a few sorted runs (a log-structured merge).

    ``add`` appends a sorted run and merges the last two while the older one is at
    most twice as long, so there are O(log n) runs and every key is merged O(log n)
    times: a breadth-first search of ``r`` rounds costs O(n log² n) in total instead
    of the O(r n) of re-sorting the whole seen set each round (a 2-D chain of 90,601
    states explored in 0.2 s instead of 6.7 s). When every key is below ``universe``
    and that is at most :data:`_BITMAP_KEYS`, a boolean map of the keys replaces the
    runs (one lookup per key).
    """

    def __init__(self, keys: np.ndarray, universe: int | None = None):
        keys = np.unique(keys)
        self.size = len(keys)
        self.bitmap = None
        if universe is not None and universe <= _BITMAP_KEYS:
            self.bitmap = np.zeros(int(universe), dtype=bool)
            self.bitmap[keys] = True
            self.runs = []
        else:
            self.runs = [keys]

    def contains(self, keys: np.ndarray) -> np.ndarray:
        if self.bitmap is not None:
            return self.bitmap[keys]
        found = np.zeros(len(keys), dtype=bool)
        for run in self.runs:
            pos = np.minimum(np.searchsorted(run, keys), len(run) - 1)
            found |= run[pos] == keys
        return found

    def add(self, keys: np.ndarray) -> None:
        """Add keys that are new and sorted (``np.unique`` output)."""
        self.size += len(keys)
        if self.bitmap is not None:
            self.bitmap[keys] = True
            return
        self.runs.append(keys)
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            last = self.runs.pop()
            self.runs[-1] = np.sort(np.concatenate([self.runs[-1], last]), kind="stable")


def explore(
    initial,
    events: Sequence[Event],
    names: Sequence[str],
    *,
    hi,
    lo=None,
    max_states: int = 20_000_000,
) -> StateSpace:
    """Reachable states from ``initial`` by a vectorised breadth-first search.

    Each round applies every event to the whole frontier at once and keeps the new
    targets inside the box ``lo <= x <= hi`` (targets outside are the truncation,
    accounted for later by :func:`build_ctmc`).

    Parameters
    ----------
    initial : (k, d) or (d,) array_like of int
        Start state(s).
    events : sequence of Event
    names : sequence of str
    hi, lo : (d,) array_like of int
        The box that bounds the exploration (``lo`` defaults to 0).
    max_states : int
        Refuse to grow beyond this many states.
    """
    from .errors import TruncationError

    init = np.atleast_2d(np.asarray(initial, dtype=np.int64))
    box = StateSpace(init, names, lo=np.zeros(init.shape[1], np.int64) if lo is None else lo, hi=hi)
    seen = _KeySet(box.keys, universe=int(np.prod(box.radix.astype(float))))
    frontier = box.states
    chunks = [frontier]
    while len(frontier):
        new_rows = []
        for _, rates, targets in _collect(box, frontier, events):
            t = targets[rates > 0]
            if len(t):
                new_rows.append(t)
        if not new_rows:
            break
        cand = np.concatenate(new_rows)
        keys = box._raw_key(cand)
        ok = keys >= 0
        keys, cand = keys[ok], cand[ok]
        keys, first = np.unique(keys, return_index=True)
        fresh = ~seen.contains(keys)
        frontier = cand[first[fresh]]
        if len(frontier):
            seen.add(keys[fresh])
            chunks.append(frontier)
            if seen.size > max_states:
                raise TruncationError(f"state space exceeds max_states={max_states} during exploration")
    return StateSpace(np.concatenate(chunks), names, lo=box.lo, hi=box.hi)
