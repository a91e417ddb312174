"""Markov decision processes: the representation, the objectives, and the solution type.

An :class:`MDP` is a finite discrete-time Markov decision process in the sparse layout
Storm uses: one row of a CSR matrix per *choice* (a state together with one of its
enabled actions), the rows of a state contiguous and in state order, so that
``row_groups[s]:row_groups[s + 1]`` are the choices of state ``s``. A continuous-time
MDP (exponential rates per choice) becomes one by uniformisation
(:meth:`MDP.from_rates`). Models and a PRISM builder produce an ``MDP``; solvers
(:mod:`exactq.solvers.mdp`, :mod:`exactq.solvers.mdp_average`) take one of the
*objectives* below and return an :class:`MDPSolution`:

===========================  =====================================================
objective                    value from every state
===========================  =====================================================
:class:`Reachability`        ``Pmax`` / ``Pmin`` of ``constraint U target``, or of
                             ``constraint U<=k target`` (``steps=k``)
:class:`TotalReward`         ``Rmax`` / ``Rmin`` of the reward accumulated until the
                             target is reached (``F target``), or over ``k`` steps
                             (``C<=k``)
:class:`LongRunAverage`      the optimal long-run average reward (``LRAmax`` /
                             ``LRAmin``, PRISM's ``R{"r"}max=? [ S ]``), or the
                             value of one given (possibly randomised) scheduler
===========================  =====================================================

Conventions
-----------
* ``P`` has shape ``(n_choices, n_states)``; entries in [0, 1]; every row sums to 1
  (checked to 1e-9 on construction); every state has at least one choice.
* A reward earned in one step from choice ``c`` of state ``s`` is
  ``state_rewards[name][s] + choice_rewards[name][c]`` (either may be absent). In a
  uniformised continuous-time MDP the state rewards are *rates* per unit of time,
  stored per step as ``rate / Lambda`` (``Lambda`` = ``uniformisation_rate``), so that
  totals accumulated until a target are totals over time; long-run averages are
  reported per unit of time (the per-step average times ``Lambda``). Choice rewards
  are earned once per step of the uniformised chain; :meth:`MDP.from_rates` takes
  none.
* A *scheduler* (:class:`Scheduler`) picks one choice per state (deterministic,
  memoryless), or gives every choice a probability (randomised).

References
----------
M. L. Puterman, *Markov Decision Processes*, Wiley, 1994, ch. 8-9 (average reward,
uniformisation of continuous-time models: sec. 11.5).
C. Baier and J.-P. Katoen, *Principles of Model Checking*, MIT Press, 2008, sec. 10.6.
C. Dehnert, S. Junges, J.-P. Katoen, M. Volk, "A Storm is coming", CAV 2017 (the
sparse row-grouped layout).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from ..statespace import Space
from ..truncation import Truncation

__all__ = ["MDP", "Scheduler", "Reachability", "TotalReward", "LongRunAverage", "MDPSolution", "SENSES"]

#: the two optimisation senses
SENSES = ("min", "max")
_ROW_SUM_TOL = 1e-9


def _vector(x, n: int, what: str, dtype=float) -> np.ndarray:
    a = np.asarray(x, dtype=dtype)
    if a.ndim == 0:
        a = np.full(n, a, dtype=dtype)
    a = a.ravel()
    if a.size != n:
        raise ModelError(f"{what} must have {n} entries; got {a.size}")
    if dtype is float and not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.isfinite(a))[0])
        raise ModelError(f"{what} must be finite; entry {bad} is {float(a[bad])!r}")
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class MDP:
    """A finite discrete-time MDP, one sparse row per (state, choice), rows grouped by state.

    Parameters
    ----------
    P : (n_choices, n_states) sparse matrix
        Transition probabilities of every choice; converted to CSR with sorted
        indices.
    row_groups : (n_states + 1,) array_like of int
        ``row_groups[0] = 0``, non-decreasing by at least 1, ``row_groups[-1] =
        n_choices``: the choices of state ``s`` are rows ``row_groups[s]`` to
        ``row_groups[s + 1] - 1``.
    state_rewards : mapping of str to (n_states,) array_like, optional
        Per-step rewards of the states, by name.
    choice_rewards : mapping of str to (n_choices,) array_like, optional
        Per-step rewards of the choices, by name (PRISM's action rewards).
    labels : mapping of str to (n_states,) bool array_like, optional
    actions : (n_choices,) array_like of int, optional
        The action of every choice, an index into ``action_names`` (PRISM's
        ``[act]``; default: the choice's position within its state).
    action_names : sequence of str, optional
        Default ``"0", "1", ...`` up to the largest number of choices of a state.
    space : Space, optional
        The state vectors and variable names (for exports and state expressions).
    initial : int or sequence of int
        The initial state(s).
    uniformisation_rate : float, optional
        ``Lambda`` when the MDP is a uniformised continuous-time MDP (module
        docstring); ``None`` for a discrete-time MDP.
    truncation : Truncation, optional
        How an infinite model was made finite.
    ordering : {"auto", "level", "nested-dissection", "mmd"}
        The fill-reducing ordering the model recommends for the sparse LUs of its
        schedulers' chains (as for :class:`~exactq.ctmc.CTMC`): ``level`` sorts the
        states by the sum of their variables (block-banded factors; best when every
        transition changes that sum by at most one, as the total number of jobs of a
        queueing model), ``nested-dissection`` is geometric on the state vectors,
        ``mmd`` SuperLU's minimum degree; ``auto``: nested dissection for 2,000 states
        or more with a state space, else minimum degree.

    Raises
    ------
    ModelError
        Shapes that do not match, a state without a choice, a negative entry or a
        row whose sum is not 1 (the message names the first offending choice).

    Examples
    --------
    A two-state MDP: state 0 can stay or move to the absorbing state 1.

    >>> P = sp.csr_matrix([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    >>> m = MDP(P, [0, 2, 3], state_rewards={"cost": [1.0, 0.0]})
    >>> m.n_states, m.n_choices, m.choice_counts.tolist(), m.state_of_choice.tolist()
    (2, 3, [2, 1], [0, 0, 1])
    >>> m.reward("cost").tolist()
    [1.0, 1.0, 0.0]
    """

    P: Any
    row_groups: Any
    state_rewards: Mapping[str, Any] = field(default_factory=dict)
    choice_rewards: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, Any] = field(default_factory=dict)
    actions: Any = None
    action_names: Sequence[str] | None = None
    space: Space | None = None
    initial: Any = 0
    uniformisation_rate: float | None = None
    truncation: Truncation | None = None
    ordering: str = "auto"

    def __post_init__(self):
        set_ = object.__setattr__
        P = sp.csr_matrix(self.P, dtype=float, copy=True)
        P.sum_duplicates()
        P.eliminate_zeros()
        P.sort_indices()
        groups = np.asarray(self.row_groups, dtype=np.int64).ravel()
        n_states = groups.size - 1
        n_choices = P.shape[0]
        if n_states < 1:
            raise ModelError("row_groups must have n_states + 1 >= 2 entries")
        if P.shape[1] != n_states:
            raise ModelError(f"P must have one column per state ({n_states}); got shape {P.shape}")
        if groups[0] != 0 or groups[-1] != n_choices:
            raise ModelError(f"row_groups must start at 0 and end at the number of choices {n_choices}; "
                             f"got {int(groups[0])} .. {int(groups[-1])}")
        counts = np.diff(groups)
        if np.any(counts < 1):
            bad = int(np.flatnonzero(counts < 1)[0])
            raise ModelError(f"every state needs at least one choice; state {bad} has none "
                             "(PRISM adds a self-loop at a deadlock)")
        if P.nnz and (P.data.min() < 0 or not np.all(np.isfinite(P.data))):
            bad = int(np.flatnonzero((P.data < 0) | ~np.isfinite(P.data))[0])
            row = int(np.searchsorted(P.indptr, bad, side="right") - 1)
            raise ModelError(f"transition probabilities must be finite and >= 0; choice {row} has "
                             f"{float(P.data[bad]):.12g}")
        sums = np.asarray(P.sum(axis=1)).ravel()
        off = np.abs(sums - 1.0) > _ROW_SUM_TOL
        if np.any(off):
            bad = int(np.flatnonzero(off)[0])
            state = int(np.searchsorted(groups, bad, side="right") - 1)
            raise ModelError(f"the probabilities of every choice must sum to 1; choice {bad} (state {state}) "
                             f"sums to {float(sums[bad]):.12g}")
        set_(self, "P", P)
        groups.flags.writeable = False
        set_(self, "row_groups", groups)
        set_(self, "state_rewards", {str(k): _vector(v, n_states, f"state reward {k!r}")
                                     for k, v in dict(self.state_rewards).items()})
        set_(self, "choice_rewards", {str(k): _vector(v, n_choices, f"choice reward {k!r}")
                                      for k, v in dict(self.choice_rewards).items()})
        set_(self, "labels", {str(k): _vector(v, n_states, f"label {k!r}", dtype=bool)
                              for k, v in dict(self.labels).items()})
        if self.actions is None:
            local = np.arange(n_choices, dtype=np.int64) - np.repeat(groups[:-1], counts)
            set_(self, "actions", _vector(local, n_choices, "actions", dtype=np.int64))
        else:
            set_(self, "actions", _vector(self.actions, n_choices, "actions", dtype=np.int64))
        if self.action_names is None:
            top = int(self.actions.max()) + 1 if n_choices else 0
            set_(self, "action_names", tuple(str(i) for i in range(top)))
        else:
            set_(self, "action_names", tuple(str(a) for a in self.action_names))
            if n_choices and (self.actions.min() < 0 or self.actions.max() >= len(self.action_names)):
                raise ModelError(f"actions must index action_names (0..{len(self.action_names) - 1})")
        if self.space is not None and self.space.n_states != n_states:
            raise ModelError(f"space has {self.space.n_states} states, P {n_states}")
        init = np.atleast_1d(np.asarray(self.initial, dtype=np.int64))
        if init.size == 0 or init.min() < 0 or init.max() >= n_states:
            raise ModelError(f"initial must name states in 0..{n_states - 1}; got {self.initial!r}")
        set_(self, "initial", init if init.size > 1 else int(init[0]))
        from ..ctmc import ORDERINGS

        if self.ordering not in ORDERINGS:
            raise ModelError(f"ordering must be one of {', '.join(ORDERINGS)}; got {self.ordering!r}")
        if self.ordering in ("level", "nested-dissection") and self.space is None:
            raise ModelError(f"ordering {self.ordering!r} needs the state vectors (space)")
        if self.uniformisation_rate is not None:
            lam = float(self.uniformisation_rate)
            if not (math.isfinite(lam) and lam > 0):
                raise ModelError(f"uniformisation_rate must be a finite rate > 0; got {self.uniformisation_rate!r}")
            set_(self, "uniformisation_rate", lam)

    # -- construction from rates -------------------------------------------------------
    @classmethod
    def from_rates(cls, R, row_groups, *, uniformisation_rate: float | None = None,
                   state_reward_rates: Mapping[str, Any] | None = None, **kwargs) -> "MDP":
        """A continuous-time MDP made discrete by uniformisation (Puterman 1994, sec. 11.5).

        Choice ``c`` of state ``s`` moves to ``j != s`` at rate ``R[c, j]`` (entries on
        the diagonal, ``R[c, s]``, are ignored: a jump to the same state changes
        nothing). With ``Lambda >= max_c sum_{j != s} R[c, j]`` the step matrix is
        ``P[c] = R[c] / Lambda`` plus ``1 - exit(c) / Lambda`` on ``s``, and a reward
        *rate* ``w(s)`` becomes ``w(s) / Lambda`` per step. Every stationary scheduler
        then has the same stationary law and the same expected totals in both times;
        long-run averages per unit of time are the per-step ones times ``Lambda``.

        Parameters
        ----------
        R : (n_choices, n_states) sparse matrix of rates >= 0
        row_groups : as for :class:`MDP`
        uniformisation_rate : float, optional
            ``Lambda``; default the largest exit rate (at least one jump per unit of
            time in some state). Must be >= every exit rate.
        state_reward_rates : mapping of str to (n_states,) arrays, optional
            Reward (cost) rates per unit of time.
        **kwargs
            The other fields of :class:`MDP` (``labels``, ``actions``, ``space``, ...).

        Examples
        --------
        One state with two rates to a second one:

        >>> R = sp.csr_matrix([[0.0, 1.0], [0.0, 3.0], [2.0, 0.0]])
        >>> m = MDP.from_rates(R, [0, 2, 3], state_reward_rates={"n": [0.0, 1.0]})
        >>> m.uniformisation_rate, m.P.toarray().round(4).tolist()
        (3.0, [[0.6667, 0.3333], [0.0, 1.0], [0.6667, 0.3333]])
        >>> m.state_rewards["n"].tolist()
        [0.0, 0.3333333333333333]
        """
        R = sp.csr_matrix(R, dtype=float)
        groups = np.asarray(row_groups, dtype=np.int64).ravel()
        n_states = groups.size - 1
        if R.shape != (groups[-1], n_states):
            raise ModelError(f"R must have shape (n_choices, n_states) = ({groups[-1]}, {n_states}); got {R.shape}")
        if R.nnz and (R.data.min() < 0 or not np.all(np.isfinite(R.data))):
            raise ModelError("rates must be finite and >= 0")
        owner = np.repeat(np.arange(n_states), np.diff(groups))
        coo = R.tocoo()
        off = coo.col != owner[coo.row]  # jumps to another state
        rows, cols, rates = coo.row[off], coo.col[off], coo.data[off]
        exit_rate = np.bincount(rows, weights=rates, minlength=R.shape[0])
        top = float(exit_rate.max()) if exit_rate.size else 0.0
        lam = top if uniformisation_rate is None else float(uniformisation_rate)
        if not (math.isfinite(lam) and lam > 0):
            raise ModelError(f"uniformisation_rate must be a finite rate > 0; got {lam!r} (no choice has a rate?)")
        if top > lam * (1 + 1e-12):
            raise ModelError(f"uniformisation_rate must be >= the largest exit rate {top!r}; got {lam!r}")
        stay = np.maximum(1.0 - exit_rate / lam, 0.0)
        all_rows = np.concatenate([rows, np.arange(R.shape[0])])
        all_cols = np.concatenate([cols, owner])
        data = np.concatenate([rates / lam, stay])
        P = sp.csr_matrix((data, (all_rows, all_cols)), shape=R.shape)
        P.eliminate_zeros()
        rewards = {k: np.asarray(v, dtype=float) / lam for k, v in dict(state_reward_rates or {}).items()}
        return cls(P, groups, state_rewards=rewards, uniformisation_rate=lam, **kwargs)

    # -- shape --------------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return int(self.row_groups.size - 1)

    @property
    def n_choices(self) -> int:
        return int(self.P.shape[0])

    @property
    def n_transitions(self) -> int:
        return int(self.P.nnz)

    @property
    def choice_counts(self) -> np.ndarray:
        """(n_states,) number of choices of every state."""
        return np.diff(self.row_groups)

    @property
    def state_of_choice(self) -> np.ndarray:
        """(n_choices,) the state every choice belongs to."""
        cached = self.__dict__.get("_owner")
        if cached is None:
            cached = np.repeat(np.arange(self.n_states, dtype=np.int64), self.choice_counts)
            cached.flags.writeable = False
            object.__setattr__(self, "_owner", cached)
        return cached

    @property
    def is_continuous_time(self) -> bool:
        return self.uniformisation_rate is not None

    @property
    def initial_states(self) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.initial, dtype=np.int64))

    @property
    def states(self) -> np.ndarray | None:
        return None if self.space is None else self.space.states

    # -- rewards and labels -------------------------------------------------------------
    def reward(self, name) -> np.ndarray:
        """(n_choices,) per-step reward of every choice: state part plus choice part.

        ``name`` is a reward name, or an array: ``(n_states,)`` (a state reward) or
        ``(n_choices,)`` (a choice reward).
        """
        if not isinstance(name, str):
            a = np.asarray(name, dtype=float).ravel()
            if a.size == self.n_states and a.size != self.n_choices:
                return a[self.state_of_choice]
            if a.size == self.n_choices:
                return a
            raise ModelError(f"a reward vector must have {self.n_states} (states) or {self.n_choices} (choices) "
                             f"entries; got {a.size}")
        if name not in self.state_rewards and name not in self.choice_rewards:
            known = sorted(set(self.state_rewards) | set(self.choice_rewards))
            raise ModelError(f"unknown reward {name!r}; valid: {', '.join(known) or '(none)'}")
        out = np.zeros(self.n_choices)
        if name in self.state_rewards:
            out += self.state_rewards[name][self.state_of_choice]
        if name in self.choice_rewards:
            out += self.choice_rewards[name]
        return out

    def mask(self, which) -> np.ndarray:
        """(n_states,) bool mask: a label name, a bool array, or an array of state indices."""
        if isinstance(which, str):
            if which not in self.labels:
                raise ModelError(f"unknown label {which!r}; valid: {', '.join(sorted(self.labels)) or '(none)'}")
            return np.asarray(self.labels[which], dtype=bool)
        a = np.asarray(which)
        if a.dtype == bool:
            if a.size != self.n_states:
                raise ModelError(f"a state mask must have {self.n_states} entries; got {a.size}")
            return a.ravel()
        out = np.zeros(self.n_states, dtype=bool)
        out[a.astype(np.int64).ravel()] = True
        return out

    # -- schedulers ---------------------------------------------------------------------
    def induced(self, scheduler: "Scheduler") -> sp.csr_matrix:
        """(n_states, n_states) transition matrix of the Markov chain a scheduler induces."""
        return scheduler.weights_matrix(self) @ self.P

    def induced_reward(self, scheduler: "Scheduler", reward) -> np.ndarray:
        """(n_states,) expected per-step reward of every state under ``scheduler``."""
        return scheduler.weights_matrix(self) @ self.reward(reward)

    def policy_table(self, choice: np.ndarray) -> "Scheduler":
        """The deterministic scheduler taking the (global) choice row ``choice[s]`` in state ``s``."""
        return Scheduler(np.asarray(choice, dtype=np.int64))

    def describe(self) -> dict:
        return {"n_states": self.n_states, "n_choices": self.n_choices, "n_transitions": self.n_transitions,
                "continuous_time": self.is_continuous_time, "uniformisation_rate": self.uniformisation_rate}


@dataclass(frozen=True, eq=False)
class Scheduler:
    """A memoryless scheduler: one choice per state, or a probability on every choice.

    Parameters
    ----------
    choice : (n_states,) array of int, optional
        The global row index (into ``MDP.P``) of the choice taken in every state.
    weights : (n_choices,) array, optional
        A randomised scheduler: the probability of every choice, summing to 1 over
        the choices of each state. Give exactly one of ``choice`` and ``weights``.

    Examples
    --------
    >>> P = sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    >>> m = MDP(P, [0, 2, 3], action_names=["stay", "go"], actions=[0, 1, 0])
    >>> s = Scheduler(np.array([1, 2]))
    >>> m.induced(s).toarray().tolist(), s.action_names(m)
    ([[0.0, 1.0], [0.0, 1.0]], ['go', 'stay'])
    """

    choice: np.ndarray | None = None
    weights: np.ndarray | None = None

    def __post_init__(self):
        if (self.choice is None) == (self.weights is None):
            raise ModelError("a scheduler needs exactly one of choice (one row per state) and weights")

    @property
    def is_deterministic(self) -> bool:
        return self.choice is not None

    def check(self, mdp: MDP) -> None:
        """Raise ``ModelError`` unless the scheduler fits ``mdp``."""
        if self.choice is not None:
            c = np.asarray(self.choice)
            if c.size != mdp.n_states:
                raise ModelError(f"a scheduler needs one choice per state ({mdp.n_states}); got {c.size}")
            lo, hi = mdp.row_groups[:-1], mdp.row_groups[1:]
            bad = (c < lo) | (c >= hi)
            if np.any(bad):
                s = int(np.flatnonzero(bad)[0])
                raise ModelError(f"the scheduler's choice {int(c[s])} in state {s} is not one of that state's "
                                 f"rows {int(lo[s])}..{int(hi[s]) - 1}")
        else:
            w = np.asarray(self.weights, dtype=float)
            if w.size != mdp.n_choices or np.any(w < 0):
                raise ModelError(f"scheduler weights must be {mdp.n_choices} probabilities >= 0")
            sums = np.add.reduceat(w, mdp.row_groups[:-1])
            if np.any(np.abs(sums - 1) > _ROW_SUM_TOL):
                s = int(np.flatnonzero(np.abs(sums - 1) > _ROW_SUM_TOL)[0])
                raise ModelError(f"scheduler weights of state {s} sum to {float(sums[s]):.12g}, not 1")

    def weights_matrix(self, mdp: MDP) -> sp.csr_matrix:
        """(n_states, n_choices) sparse matrix of the choice probabilities in every state."""
        self.check(mdp)
        n, m = mdp.n_states, mdp.n_choices
        if self.choice is not None:
            return sp.csr_matrix((np.ones(n), (np.arange(n), np.asarray(self.choice))), shape=(n, m))
        w = np.asarray(self.weights, dtype=float)
        return sp.csr_matrix((w, (mdp.state_of_choice, np.arange(m))), shape=(n, m))

    def actions(self, mdp: MDP) -> np.ndarray:
        """(n_states,) the action index taken in every state (deterministic schedulers)."""
        if self.choice is None:
            raise ModelError("a randomised scheduler has no single action per state")
        return mdp.actions[np.asarray(self.choice)]

    def action_names(self, mdp: MDP) -> list[str]:
        return [mdp.action_names[a] for a in self.actions(mdp)]

    def to_dict(self, mdp: MDP) -> dict:
        """JSON-ready export: the state vectors (or indices) and the action taken in each.

        ``{"variables": [...], "states": [[...], ...], "actions": [...], "action_names": [...]}``
        with ``actions[i]`` an index into ``action_names`` for state ``states[i]``.
        """
        if mdp.space is not None:
            variables, states = list(mdp.space.names), mdp.space.states.tolist()
        else:
            variables, states = ["index"], [[i] for i in range(mdp.n_states)]
        return {"kind": "deterministic memoryless", "variables": variables, "states": states,
                "actions": self.actions(mdp).tolist(), "action_names": list(mdp.action_names)}

    def write_json(self, mdp: MDP, path) -> None:
        """Write :meth:`to_dict` as JSON to ``path``."""
        with open(path, "w") as fh:
            json.dump(self.to_dict(mdp), fh)


# -- objectives ---------------------------------------------------------------------------
def _sense(sense: str) -> str:
    if sense not in SENSES:
        raise ModelError(f"sense must be one of {', '.join(SENSES)}; got {sense!r}")
    return sense


def _steps(steps) -> int | None:
    if steps is None:
        return None
    if int(steps) != steps or steps < 0:
        raise ModelError(f"steps must be an integer >= 0; got {steps!r}")
    return int(steps)


@dataclass(frozen=True, eq=False)
class Reachability:
    """``Pmax`` or ``Pmin`` of ``constraint U target`` (``F target`` without a constraint).

    Parameters
    ----------
    mdp : MDP
    target : label name, (n_states,) bool mask or state indices
    sense : {"max", "min"}
    constraint : like ``target``, optional
        The states a path may pass through before the target (default: all).
    steps : int, optional
        A step bound ``k`` (``U<=k``): the target within ``k`` steps.
    """

    mdp: MDP
    target: Any
    sense: str = "max"
    constraint: Any = None
    steps: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "sense", _sense(self.sense))
        object.__setattr__(self, "target", self.mdp.mask(self.target))
        if self.constraint is not None:
            object.__setattr__(self, "constraint", self.mdp.mask(self.constraint))
        object.__setattr__(self, "steps", _steps(self.steps))

    @property
    def n_states(self) -> int:
        return self.mdp.n_states

    def describe(self) -> str:
        bound = "" if self.steps is None else f"<={self.steps}"
        return f"P{self.sense} [ {'' if self.constraint is None else 'constraint '}{'U' if self.constraint is not None else 'F'}{bound} target ]"


@dataclass(frozen=True, eq=False)
class TotalReward:
    """``Rmax`` or ``Rmin`` of the reward accumulated until ``target`` (``F``) or over ``steps`` (``C<=k``).

    Parameters
    ----------
    mdp : MDP
    reward : str or array
        A reward name of the MDP, or a ``(n_states,)`` / ``(n_choices,)`` vector. For
        ``F target`` rewards must be >= 0 (PRISM's and Storm's fragment).
    sense : {"max", "min"}
    target : label name, mask or indices, optional
        ``F target``: the reward until the target is first reached (nothing is earned
        in a target state); infinite from states where, under the optimising
        schedulers, the target is missed with positive probability.
    steps : int, optional
        ``C<=k``: the reward of the first ``k`` steps. Give exactly one of
        ``target`` and ``steps``.
    """

    mdp: MDP
    reward: Any
    sense: str = "min"
    target: Any = None
    steps: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "sense", _sense(self.sense))
        if (self.target is None) == (self.steps is None):
            raise ModelError("a total reward needs exactly one of target (F) and steps (C<=k)")
        if self.target is not None:
            object.__setattr__(self, "target", self.mdp.mask(self.target))
        object.__setattr__(self, "steps", _steps(self.steps))
        r = self.mdp.reward(self.reward)
        if self.target is not None and r.size and r.min() < 0:
            raise ModelError(f"rewards until a target must be >= 0; reward {self.reward_name} has {float(r.min()):.12g}")

    @property
    def reward_name(self) -> str:
        return self.reward if isinstance(self.reward, str) else "(vector)"

    @property
    def n_states(self) -> int:
        return self.mdp.n_states


@dataclass(frozen=True, eq=False)
class LongRunAverage:
    """The optimal long-run average reward per unit of time (per step in discrete time).

    Parameters
    ----------
    mdp : MDP
    reward : str or array
        As for :class:`TotalReward` (any sign).
    sense : {"min", "max"}
    scheduler : Scheduler, optional
        Evaluate this scheduler instead of optimising (the long-run average of the
        Markov chain it induces).
    """

    mdp: MDP
    reward: Any
    sense: str = "min"
    scheduler: Scheduler | None = None

    def __post_init__(self):
        object.__setattr__(self, "sense", _sense(self.sense))
        self.mdp.reward(self.reward)  # validates the name or shape
        if self.scheduler is not None:
            self.scheduler.check(self.mdp)

    @property
    def n_states(self) -> int:
        return self.mdp.n_states

    @property
    def truncation(self) -> Truncation | None:
        return self.mdp.truncation


@dataclass
class MDPSolution:
    """Values of an MDP objective from every state, with bounds and the optimal scheduler.

    Attributes
    ----------
    lower, upper : (n_states,) ndarray
        Bounds that enclose the value of every state (``inf`` where it is infinite);
        they hold in exact arithmetic for the algorithm named in ``method``, and the
        floating-point rounding of the last backups (a few units in the last place)
        is not included.
    scheduler : Scheduler or None
        An optimal (for bounded objectives: first-step) scheduler, or the evaluated one.
    method : str
    objective : str
    nit : int
        Iterations (value-iteration sweeps or policy improvements).
    residual : float or None
    info : dict
        Method details: graph precomputation counts, end components, the
        independent check, ...
    bias : (n_states,) ndarray or None
        Long-run average: a relative value (bias) vector ``h`` of the final
        scheduler, ``g + h = r + P h`` (unichain).
    stationary : (n_states,) ndarray or None
        Long-run average, unichain: the stationary law of the final scheduler's chain.
    """

    lower: np.ndarray
    upper: np.ndarray
    scheduler: Scheduler | None
    method: str
    objective: str
    nit: int = 0
    residual: float | None = None
    info: dict = field(default_factory=dict)
    bias: np.ndarray | None = None
    stationary: np.ndarray | None = None

    @property
    def value(self) -> np.ndarray:
        """(n_states,) the midpoint of the bounds (``inf`` where the value is infinite)."""
        lo, hi = np.asarray(self.lower, float), np.asarray(self.upper, float)
        with np.errstate(invalid="ignore"):
            mid = 0.5 * (lo + hi)
        return np.where(np.isinf(lo) & (lo == hi), lo, mid)

    def at(self, state: int) -> tuple[float, float, float]:
        """``(value, lower, upper)`` of one state."""
        return float(self.value[state]), float(self.lower[state]), float(self.upper[state])

    @property
    def width(self) -> float:
        """Largest ``upper - lower`` over the states with a finite value."""
        finite = np.isfinite(self.lower) & np.isfinite(self.upper)
        return float(np.max(self.upper[finite] - self.lower[finite])) if np.any(finite) else 0.0
