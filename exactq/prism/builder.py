"""Vectorised construction of the Markov chain of a PRISM model.

Every *choice* of the model becomes one or more :class:`~exactq.ctmc.Event` objects:
an unlabelled command is a choice of its own; for an action ``a``, every combination
of one ``a``-command from each module that has ``a`` in its alphabet is a choice
(PRISM's synchronisation: the guard is the conjunction of the guards, and the rate of
a synchronised transition is the product of the components' rates; several enabled
combinations add up). An event is one combination of updates of a choice; it
evaluates the guards, rates and updates on the whole array of states at once with
numpy, and returns the rate and the target of every state.

The reachable states are found by :func:`exactq.ctmc.explore` (a breadth-first search
over whole frontiers) from the initial state (or the states of ``init ... endinit``),
and the chain is assembled by :func:`~exactq.ctmc.build_ctmc` (or
:func:`~exactq.ctmc.build_dtmc`); the same pass over the events records which states
have a transition, the expected transition rewards and, for a DTMC, how many choices
each state has. No loop runs over states.

PRISM's semantics are kept where it matters:

* a state with no transition (a *deadlock*) gets a self-loop, with a warning giving
  the number of such states (``strict``: an error naming one);
* an update that leaves a variable's range is an error naming the variable, the
  state and the command;
* a DTMC state in which more than one choice is enabled (local nondeterminism, which
  PRISM would randomise) is refused, naming the state and the commands; the
  probabilities of each command must sum to 1.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace

import numpy as np

from exactq.ctmc import CTMC, DTMC, Event, build_ctmc, build_dtmc, explore
from exactq.errors import ModelError
from exactq.query import RewardStructure

from .lexer import PrismModelError, warn
from .semantics import EvalContext, ModelInfo

__all__ = ["BuiltModel", "build_model", "MAX_EVENTS", "MAX_INIT_DOMAIN"]

#: refuse models whose synchronisations expand to more events than this
MAX_EVENTS = 200_000
#: ``init ... endinit`` is evaluated on every valuation of the variables up to this many
MAX_INIT_DOMAIN = 100_000_000
#: probabilities of a DTMC command must sum to 1 within this
PROB_TOL = 1e-6


@dataclass
class BuiltModel:
    """A built PRISM model.

    Attributes
    ----------
    chain : CTMC or DTMC
        With ``labels`` (the model's, ``"init"`` and ``"deadlock"``), ``rewards`` (the
        state rewards of each structure) and ``constants``.
    info : ModelInfo
    rewards : dict of str -> RewardStructure
        In the order of the file (unnamed structures are ``"#1"``, ``"#2"``, ...).
    n_transitions : int
        Distinct transitions between different states (CTMC) or nonzero
        probabilities (DTMC, self-loops included).
    n_deadlocks : int
    build_seconds : float
    """

    chain: CTMC | DTMC
    info: ModelInfo
    rewards: dict
    n_transitions: int
    n_deadlocks: int
    build_seconds: float

    @property
    def n_states(self) -> int:
        return self.chain.n_states


@dataclass(frozen=True, eq=False)
class _Choice:
    index: int
    action: str | None
    commands: tuple

    def describe(self, src) -> str:
        return " with ".join(c.where(src) for c in self.commands)


class _Recorder:
    """What the building pass learns about every state besides the transitions."""

    def __init__(self, n: int, n_rewards: int, discrete: bool):
        self.enabled = np.zeros(n, dtype=bool)
        self.trans = [np.zeros(n) for _ in range(n_rewards)]
        self.discrete = discrete
        if discrete:
            self.choices = np.zeros(n, dtype=np.int32)
            self.last_choice = np.full(n, -1, dtype=np.int64)
            self.prob = np.zeros(n)


class _Builder:
    def __init__(self, info: ModelInfo, strict: bool):
        self.info = info
        self.src = info.source
        self.strict = strict
        self.discrete = info.kind == "dtmc"
        self.lo = np.array([v.lo for v in info.variables], dtype=np.int64)
        self.hi = np.array([v.hi for v in info.variables], dtype=np.int64)
        self.names = info.names
        self._ctx_states = None
        self._ctx = None
        self.record: _Recorder | None = None
        self.record_states = None
        self.choices = self._choices()
        self.events = self._events()

    # -- structure ---------------------------------------------------------------------
    def _choices(self) -> list:
        out = []
        for m in self.info.modules:
            for c in m.commands:
                if c.action is None:
                    out.append(_Choice(len(out), None, (c,)))
        for a in self.info.actions:
            parts = [[c for c in m.commands if c.action == a] for m in self.info.modules if a in m.alphabet]
            count = int(np.prod([len(p) for p in parts]))
            if count > MAX_EVENTS:
                raise PrismModelError(f"{self.src.name}: the synchronisation on [{a}] has {count} combinations of "
                                      f"commands, above the limit of {MAX_EVENTS}")
            for combo in itertools.product(*parts):
                out.append(_Choice(len(out), a, tuple(combo)))
        return out

    def _events(self) -> list:
        events = []
        for ch in self.choices:
            for k, ups in enumerate(itertools.product(*[c.updates for c in ch.commands])):
                if len(events) >= MAX_EVENTS:
                    raise PrismModelError(f"{self.src.name}: the model expands to more than {MAX_EVENTS} update "
                                          "combinations")
                events.append(Event(f"{ch.action or ''}:{ch.index}:{k}", self._event_fn(ch, ups, k)))
        return events

    # -- evaluation --------------------------------------------------------------------
    def context(self, states: np.ndarray) -> EvalContext:
        if states is not self._ctx_states:
            self._ctx_states, self._ctx = states, EvalContext(states)
        return self._ctx

    def rows_of(self, ctx: EvalContext, ch: _Choice):
        key = ("choice", ch.index)
        hit = ctx.memo.get(key)
        if hit is not None:
            return hit
        mask = None
        for c in ch.commands:
            gk = ("guard", id(c))
            g = ctx.memo.get(gk)
            if g is None:
                g = ctx.memo[gk] = c.guard.full(ctx)
            mask = g if mask is None else (mask & g)
        rows = np.flatnonzero(mask)
        hit = ctx.memo[key] = (rows, ctx.subset(rows))
        return hit

    def _event_fn(self, ch: _Choice, ups: tuple, k: int):
        builder = self
        assigns = [(j, e) for u in ups for (j, e) in u.assigns]
        written = [j for j, _ in assigns]
        clash = len(set(written)) < len(written)
        cols = np.array(sorted(set(written)), dtype=np.int64)
        lo_w, hi_w = self.lo[cols], self.hi[cols]
        probs = [u.prob for u in ups if u.prob is not None]
        discrete = self.discrete

        def fn(states: np.ndarray):
            ctx = builder.context(states)
            rows, sub = builder.rows_of(ctx, ch)
            n = states.shape[0]
            rates = np.zeros(n)
            if rows.size == 0:
                return rates, states
            m = rows.size
            with np.errstate(all="ignore"):
                r = None
                for p in probs:
                    v = p.eval(sub)
                    r = v if r is None else r * v
                values = [(j, e.eval(sub)) for j, e in assigns]
            r = np.full(m, 1.0) if r is None else np.broadcast_to(np.asarray(r, dtype=float), (m,))
            lo_r, hi_r = r.min(), r.max()
            if not (lo_r >= 0 and np.isfinite(hi_r) and (not discrete or hi_r <= 1 + 1e-12)):
                builder._check_rates(r, rows, states, ch, ups)
            new = states[rows]
            for j, v in values:
                new[:, j] = v
            if cols.size:
                block = new[:, cols]
                out = (block < lo_w) | (block > hi_w)
                if out.any():
                    builder._range_error(out & (r > 0)[:, None], new, cols, rows, states, ch)
            if clash and hi_r > 0:
                j = next(j for j in written if written.count(j) > 1)
                i = int(rows[np.flatnonzero(r > 0)[0]])
                raise PrismModelError(f"variable {builder.names[j]!r} is written by more than one module in "
                                      f"{ch.describe(builder.src)}, in state {builder.state_text(states[i])}")
            targets = np.empty_like(states)
            targets[rows] = new
            rates[rows] = r
            if builder.record is not None and states is builder.record_states:
                builder._note(ch, k, rows, r, sub)
            return rates, targets

        return fn

    def _range_error(self, bad, new, cols, rows, states, ch) -> None:
        if not bad.any():
            return
        b, c = (int(x[0]) for x in np.nonzero(bad))
        j = int(cols[c])
        var = self.info.variables[j]
        raise PrismModelError(f"variable {var.name!r} would take the value {int(new[b, j])}, outside its range "
                              f"[{var.lo}..{var.hi}], in state {self.state_text(states[rows[b]])} by "
                              f"{ch.describe(self.src)}")

    def _check_rates(self, r, rows, states, ch, ups) -> None:
        bad = ~np.isfinite(r) | (r < 0) | ((r > 1 + 1e-12) if self.discrete else False)
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            what = "probability" if self.discrete else "rate"
            expr = " * ".join(str(u.prob.text) for u in ups if u.prob is not None) or "1"
            raise PrismModelError(f"the {what} {expr} evaluates to {r[b]:g} in state "
                                  f"{self.state_text(states[rows[b]])} ({ch.describe(self.src)}); a {what} must be "
                                  f"finite, >= 0{' and <= 1' if self.discrete else ''}")

    def _note(self, ch: _Choice, k: int, rows, r, sub) -> None:
        rec = self.record
        rec.enabled[rows[r > 0]] = True
        for s, rs in enumerate(self.info.rewards):
            acc = None
            for action, guard, value in rs.trans_items:
                if (action or None) != ch.action:
                    continue
                with np.errstate(all="ignore"):
                    g = guard.full(sub)
                    v = np.where(g, value.full(sub), 0.0)
                if not np.all(np.isfinite(v)):
                    b = int(np.flatnonzero(~np.isfinite(v))[0])
                    raise PrismModelError(f"the transition reward '{value.text}' is not finite in state "
                                          f"{self.state_text(self.record_states[rows[b]])}")
                acc = v if acc is None else acc + v
            if acc is not None:
                rec.trans[s][rows] += r * acc  # rows are distinct (flatnonzero)
        if rec.discrete:
            if k == 0:
                rec.choices[rows] += 1
                rec.last_choice[rows] = ch.index
            rec.prob[rows] += r

    def state_text(self, row) -> str:
        parts = []
        for v, x in zip(self.info.variables, row):
            parts.append(f"{v.name}={'true' if x else 'false'}" if v.type == "bool" else f"{v.name}={int(x)}")
        return "(" + ", ".join(parts) + ")"

    # -- initial states ----------------------------------------------------------------
    def initial_states(self) -> np.ndarray:
        info = self.info
        if info.init is None:
            return np.array([[v.init for v in info.variables]], dtype=np.int64)
        radix = (self.hi - self.lo + 1).astype(object)
        total = 1
        for r in radix:
            total *= int(r)
        if total > MAX_INIT_DOMAIN:
            raise PrismModelError(f"{self.src.name}: 'init ... endinit' would be evaluated on {total} valuations of "
                                  f"the variables, above the limit of {MAX_INIT_DOMAIN}; give initial values in the "
                                  "variable declarations instead")
        radix = radix.astype(np.int64)
        strides = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]]).astype(np.int64)
        found = []
        step = 1 << 20
        for start in range(0, total, step):  # chunks of the variable domain, not states
            idx = np.arange(start, min(total, start + step), dtype=np.int64)
            states = (idx[:, None] // strides[None, :]) % radix[None, :] + self.lo[None, :]
            ok = info.init.full(EvalContext(states))
            if ok.any():
                found.append(states[ok])
        if not found:
            raise PrismModelError(f"{self.src.name}: no valuation of the variables satisfies 'init ... endinit'")
        return np.concatenate(found)


def build_model(info: ModelInfo, *, strict: bool = False, max_states: int = 20_000_000) -> BuiltModel:
    """Build the chain of an analysed PRISM model (see the module docstring).

    Parameters
    ----------
    info : ModelInfo
        From :func:`exactq.prism.semantics.analyse`.
    strict : bool
        Deadlocks are an error (naming a deadlocked state) instead of a warning.
    max_states : int
        Refuse to explore beyond this many states.

    Returns
    -------
    BuiltModel

    Raises
    ------
    PrismModelError
        For an out-of-range update, a negative or non-finite rate, local
        nondeterminism in a DTMC, probabilities not summing to 1, or (``strict``) a
        deadlock.
    """
    t0 = time.perf_counter()
    b = _Builder(info, strict)
    init = b.initial_states()
    space = explore(init, b.events, b.names, hi=b.hi, lo=b.lo, max_states=max_states)
    n = space.n_states
    states = space.states
    init_mask = np.zeros(n, dtype=bool)
    init_idx = space.index(init)
    init_mask[init_idx] = True
    ctx = EvalContext(states)
    state_rewards = {}
    keys = []
    for k, rs in enumerate(info.rewards):
        key = rs.name if rs.name is not None else f"#{k + 1}"
        keys.append(key)
        acc = np.zeros(n)
        for guard, value in rs.state_items:
            with np.errstate(all="ignore"):
                v = np.where(guard.full(ctx), value.full(ctx), 0.0)
            if not np.all(np.isfinite(v)):
                i = int(np.flatnonzero(~np.isfinite(v))[0])
                raise PrismModelError(f"the state reward '{value.text}' of reward structure {key!r} is not finite "
                                      f"in state {b.state_text(states[i])}")
            acc = acc + v
        state_rewards[key] = acc
    constants = {k: v for k, (_, v) in info.constants.items() if v is not None}
    first = int(init_idx[0])
    b.record = _Recorder(n, len(info.rewards), b.discrete)
    b.record_states = states
    try:
        if b.discrete:
            try:
                chain = build_dtmc(space, b.events, rewards=state_rewards, initial=first, constants=constants)
            except ModelError:
                _check_dtmc(b, states)
                raise
            _check_dtmc(b, states)
        else:
            chain = build_ctmc(space, b.events, rewards=state_rewards, initial=first, constants=constants)
    finally:
        rec, b.record, b.record_states = b.record, None, None
        b._ctx_states = b._ctx = None
    dead = ~rec.enabled
    n_dead = int(dead.sum())
    if n_dead:
        i = int(np.flatnonzero(dead)[0])
        if strict:
            raise PrismModelError(f"state {b.state_text(states[i])} is a deadlock (no command is enabled); "
                                  f"{n_dead} deadlocked state{'s' if n_dead > 1 else ''} in all (strict mode)")
        warn(f"{n_dead} deadlocked state{'s were' if n_dead > 1 else ' was'} fixed by adding a self-loop, as PRISM "
             f"does (e.g. {b.state_text(states[i])})")
    label_ctx = EvalContext(states, labels={"init": init_mask, "deadlock": dead})
    labels = {"init": init_mask, "deadlock": dead}
    for name, c in info.labels.items():
        labels[name] = c.full(label_ctx)
    chain = replace(chain, labels=labels)
    structures = {}
    for k, key in enumerate(keys):
        structures[key] = RewardStructure(key, state_rewards[key], rec.trans[k])
    if b.discrete:
        n_trans = int(chain.P.nnz)
    else:
        Q = chain.Q
        n_trans = int(Q.nnz - np.count_nonzero(Q.diagonal()))
    return BuiltModel(chain, info, structures, n_trans, n_dead, time.perf_counter() - t0)


def _check_dtmc(b: _Builder, states: np.ndarray) -> None:
    rec = b.record
    many = rec.choices > 1
    if many.any():
        i = int(np.flatnonzero(many)[0])
        ctx = EvalContext(states[i:i + 1])
        on = [ch for ch in b.choices if b.rows_of(ctx, ch)[0].size]
        raise PrismModelError(
            f"local nondeterminism in a dtmc: state {b.state_text(states[i])} enables {len(on)} choices ("
            + "; ".join(ch.describe(b.src) for ch in on[:3]) + "); PRISM would pick one uniformly at random, "
            "exactq refuses it (make the guards disjoint, or synchronise the modules)")
    one = rec.choices == 1
    off = one & (np.abs(rec.prob - 1.0) > PROB_TOL)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        ch = b.choices[int(rec.last_choice[i])]
        raise PrismModelError(f"the probabilities of {ch.describe(b.src)} sum to {rec.prob[i]:.12g}, not 1, in state "
                              f"{b.state_text(states[i])}")
