"""The CTMC representation and its vectorised builder.

A model describes a continuous-time Markov chain by a :class:`~exactq.statespace.StateSpace`
and a list of :class:`Event` objects. Each event maps the *whole* state array at once to
``(rates, targets)``. :func:`build_ctmc` concatenates all events into COO triplets,
drops zero rates and self-loops, indexes the targets with one vectorised call, and
returns CSR. Targets outside the (truncated) space are never dropped silently: their
rate is accumulated per state in ``cut_rate`` (the truncation rule is *block*: the
transition is suppressed, as if the arrival were lost), and the solvers report the
probability mass that sits on those states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from .statespace import StateSpace

__all__ = ["Event", "CTMC", "build_ctmc", "explore"]

EventFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Event:
    """A named transition type.

    ``fn(states)`` receives the ``(n, d)`` state array and returns ``rates`` of shape
    ``(n,)`` (zero where the event cannot happen) and ``targets`` of shape ``(n, d)``.
    """

    name: str
    fn: EventFn


@dataclass
class CTMC:
    """A finite continuous-time Markov chain with named variables, rewards and labels.

    Attributes
    ----------
    space : StateSpace
        The states (rows of ``space.states``) and their variable names.
    Q : (n, n) scipy.sparse.csr_matrix
        The generator: off-diagonal rates >= 0, rows sum to 0.
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
    truncation : dict
        How the chain was truncated: ``{"level": K, "rule": "block"}`` or empty.
    ordering : str
        Fill-reducing ordering the model recommends for sparse LU (``"auto"``,
        ``"level"``, ``"nested-dissection"`` or ``"mmd"``).
    """

    space: StateSpace
    Q: sp.csr_matrix
    cut_rate: np.ndarray
    jumps: np.ndarray
    rewards: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    initial: int = 0
    constants: dict = field(default_factory=dict)
    truncation: dict = field(default_factory=dict)
    ordering: str = "auto"

    @property
    def n_states(self) -> int:
        return self.space.n_states

    @property
    def states(self) -> np.ndarray:
        return self.space.states

    @property
    def is_truncated(self) -> bool:
        return bool(self.truncation)

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
        """States from which some transition was cut by the truncation."""
        return self.cut_rate > 0


def _collect(space: StateSpace, states: np.ndarray, events: Sequence[Event]):
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


def build_ctmc(
    space: StateSpace,
    events: Sequence[Event],
    *,
    rewards: Mapping[str, np.ndarray] | None = None,
    labels: Mapping[str, np.ndarray] | None = None,
    initial=None,
    constants: Mapping | None = None,
    truncation: Mapping | None = None,
) -> CTMC:
    """Assemble the generator of a CTMC from vectorised events.

    Parameters
    ----------
    space : StateSpace
    events : sequence of Event
    rewards, labels : mapping, optional
        Named state vectors (length ``space.n_states``).
    initial : int or (d,) array_like, optional
        Initial state (an index or a state vector); default: the first state.
    constants : mapping, optional
        Scalars for expressions.
    truncation : mapping, optional
        Description of the truncation (level and rule) when the model is infinite.

    Returns
    -------
    CTMC
        With ``Q`` in CSR form (duplicates summed, zero rates and self-loops dropped).
    """
    states = space.states
    n, d = states.shape
    src_parts, dst_parts, rate_parts = [], [], []
    cut_rate = np.zeros(n)
    jumps = np.zeros(d, dtype=np.int64)
    for _, rates, targets in _collect(space, states, events):
        live = np.flatnonzero(rates > 0)
        if live.size == 0:
            continue
        idx = space.index(targets[live])
        inside = idx >= 0
        if not np.all(inside):
            cut_rate += np.bincount(live[~inside], weights=rates[live[~inside]], minlength=n)
        src = live[inside]
        dst = idx[inside]
        moves = dst != src
        src, dst = src[moves], dst[moves]
        if src.size:
            jumps = np.maximum(jumps, np.abs(targets[src] - states[src]).max(0))
        src_parts.append(src)
        dst_parts.append(dst)
        rate_parts.append(rates[src])
    src = np.concatenate(src_parts) if src_parts else np.zeros(0, np.int64)
    dst = np.concatenate(dst_parts) if dst_parts else np.zeros(0, np.int64)
    val = np.concatenate(rate_parts) if rate_parts else np.zeros(0)
    out = np.bincount(src, weights=val, minlength=n)
    diag = np.arange(n)
    Q = sp.csr_matrix(
        (np.concatenate([val, -out]), (np.concatenate([src, diag]), np.concatenate([dst, diag]))),
        shape=(n, n),
    )
    Q.sum_duplicates()
    if initial is None:
        init = 0
    elif np.ndim(initial) == 0:
        init = int(initial)
        if not 0 <= init < n:
            raise ValueError(f"initial state index {init} is outside 0..{n - 1}")
    else:
        init = int(space.index(np.asarray(initial)[None, :])[0])
        if init < 0:
            raise ValueError(f"initial state {list(initial)} is not in the state space")
    return CTMC(
        space=space,
        Q=Q,
        cut_rate=cut_rate,
        jumps=jumps,
        rewards=dict(rewards or {}),
        labels=dict(labels or {}),
        initial=init,
        constants=dict(constants or {}),
        truncation=dict(truncation or {}),
    )


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
    seen_keys = box.keys.copy()
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
        fresh = ~np.isin(keys, seen_keys, assume_unique=True)
        frontier = cand[first[fresh]]
        if len(frontier):
            seen_keys = np.union1d(seen_keys, keys[fresh])
            chunks.append(frontier)
            if len(seen_keys) > max_states:
                raise TruncationError(f"state space exceeds max_states={max_states} during exploration")
    return StateSpace(np.concatenate(chunks), names, lo=box.lo, hi=box.hi)
