"""Vectorised construction of the Markov chain of a PRISM model.

The chain is found and assembled in one breadth-first search over whole frontiers
(:func:`exactq.ctmc.explore_transitions`). For a frontier of states, the
transitions are formed *per synchronisation*, with array operations only:

* the **unlabelled commands** of every module interleave: each enabled command
  contributes its updates (one entry per state, command and update);
* an **action** ``a`` synchronises every module that has ``a`` in its alphabet.
  For each such module, the guards of its ``a``-commands are evaluated once on the
  frontier and its enabled (command, update) pairs are listed per state, sorted by
  state (a CSR-like list: the probability or rate of the pair, and the change it
  makes to the state's packed key). A state where some module has no enabled
  pair blocks ``a``; elsewhere the transitions are the cartesian product of the
  modules' lists, formed as index arithmetic: transition ``t`` of a state with
  ``c_1, ..., c_M`` pairs takes pair ``(t // (c_{m+1} ... c_M)) % c_m`` of module
  ``m``; its weight is the product of the pairs' (PRISM: the rate of a
  synchronised transition is the product of the components' rates), its target
  key the source key plus the pairs' key changes (each module writes its own
  variables, so the changes add up).

The cost is proportional to the number of transitions produced (and of pairs
listed), not to the number of syntactic combinations of commands: a ring of 13
processes with 3 update combinations each is 3^13 combinations in the source, and
2^tokens transitions per state in the chain. The transitions of a frontier are
formed in chunks whose memory is predicted and checked against the budget
(:func:`exactq.budget.require_memory`) before they are allocated.

PRISM's semantics (and Storm's, which follows PRISM's here) are kept where they
matter:

* a state with no transition (a *deadlock*) gets a self-loop, with a warning giving
  the number of such states (``strict``: an error naming one);
* an update that leaves a variable's range is an error naming the variable, the
  state and the command (checked where the transition exists: a synchronisation a
  module blocks is never formed);
* updates of probability or rate 0 make no transition;
* in a DTMC, the probabilities of every enabled command must sum to 1; a state
  where ``k > 1`` *choices* are enabled (an enabled unlabelled command is one
  choice, an action one choice per combination of enabled commands of its
  modules) takes each with probability ``1/k``, as PRISM and Storm do, with a
  warning giving the number of such states;
* the number of transitions counts distinct (source, target) pairs, self-loops
  included (those a command makes, and those added to deadlocks), as PRISM and
  Storm report it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from exactq.budget import require_memory
from exactq.ctmc import CTMC, DTMC, MemoryMeter, explore_transitions
from exactq.query import RewardStructure

from .lexer import PrismModelError, warn
from .semantics import EvalContext, ModelInfo

__all__ = ["BuiltModel", "build_model"]

#: probabilities of a DTMC command must sum to 1 within this
PROB_TOL = 1e-6
#: transitions formed in one chunk of the synchronisation product
CHUNK_TRANSITIONS = 1 << 21
#: the key of the frontier's words in an evaluation context's memo (and the prefix of what _Builder._fields caches)
_WORDS = "_builder_words"
#: bytes kept per transition (source, weight, target key) and used while forming a chunk
_KEPT_PER_TRANSITION = 24
_WORK_PER_TRANSITION = 96
#: an mdp also records per transition its probability, choice and group (see _Builder._record)
_MDP_PER_TRANSITION = 20


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
        Distinct (source, target) pairs with a positive rate or probability,
        self-loops included (those of commands and those added to deadlocks): the
        count PRISM and Storm report.
    n_deadlocks : int
    build_seconds : float
    n_nondeterministic : int
        DTMC states with several enabled choices (each taken with probability 1/k).
    """

    chain: CTMC | DTMC
    info: ModelInfo
    rewards: dict
    n_transitions: int
    n_deadlocks: int
    build_seconds: float
    n_nondeterministic: int = 0

    @property
    def n_states(self) -> int:
        return self.chain.n_states


class _Part:
    """One module's commands in one synchronisation (or all the unlabelled commands)."""

    __slots__ = ("commands",)

    def __init__(self, commands):
        self.commands = list(commands)


class _Group:
    """The unlabelled commands (``action`` None, one part) or one action and its modules (one part each)."""

    __slots__ = ("action", "parts")

    def __init__(self, action, parts):
        self.action, self.parts = action, parts


class _Pairs:
    """The enabled (command, update) pairs of one part on a frontier, sorted by state.

    ``rows``, ``prob`` and ``dword`` (the change of the packed key) per pair;
    ``count``/``start`` the CSR-like offsets per frontier state; ``ncmd`` the enabled
    commands per state; ``bad`` the pairs that leave a range and ``segments`` the
    (command, update, rows) of every pair list, for the error messages and checks;
    ``psum`` the (command, rows, sum of probabilities) of a DTMC.
    """

    __slots__ = ("rows", "prob", "dword", "count", "start", "ncmd", "bad", "segments", "psum", "rank")


class _Builder:
    def __init__(self, info: ModelInfo, strict: bool):
        self.info = info
        self.src = info.source
        self.strict = strict
        self.mdp = info.kind == "mdp"
        self.discrete = info.kind in ("dtmc", "mdp")
        # an mdp: every transition formed is recorded here (its probability, its choice within its state, its
        # group), and the search keeps only its index (the weight it sees): see _record
        self.t_prob, self.t_choice, self.t_group = [], [], []
        self.t_count = 0
        self.lo = np.array([v.lo for v in info.variables], dtype=np.int64)
        self.hi = np.array([v.hi for v in info.variables], dtype=np.int64)
        self.span = (self.hi - self.lo).tolist()  # the widest jump each variable can make
        self.names = info.names
        self.groups = self._groups()
        # transition-reward items by action ("" for the unlabelled commands)
        self.trans_items = []
        for rs in info.rewards:
            by = {}
            for action, guard, value in rs.trans_items:
                by.setdefault(action or None, []).append((guard, value))
            self.trans_items.append(by)
        self.packing = None
        self._plans = {}  # id(update) -> its constant assignments, taken together (narrow packing; see _constants)
        self._arange = None
        self._bad = None
        self.shared = {}  # action -> the columns written by more than one of its modules
        for g in self.groups:
            if g.action is None:
                continue
            writes = [{j for c in part.commands for u in c.updates for j, _ in u.assigns} for part in g.parts]
            shared = set()
            for i in range(len(writes)):
                for k in range(i + 1, len(writes)):
                    shared |= writes[i] & writes[k]
            self.shared[g.action] = sorted(shared)

    def _groups(self) -> list:
        groups = []
        plain = [c for m in self.info.modules for c in m.commands if c.action is None]
        if plain:
            groups.append(_Group(None, [_Part(plain)]))
        for a in self.info.actions:
            parts = [_Part([c for c in m.commands if c.action == a]) for m in self.info.modules if a in m.alphabet]
            groups.append(_Group(a, parts))
        return groups

    # -- pairs of one part -------------------------------------------------------------
    def _pairs(self, part: _Part, ctx: EvalContext, n: int, sort: bool, guards=None) -> _Pairs:
        """List the part's enabled (command, update) pairs on the frontier (sorted by state if ``sort``; ``guards``:
        the commands' guards on the frontier, when evaluated already)."""
        pk = self.packing
        W = pk.n_words
        narrow = W == 1
        rows_l, prob_l, dk_l, rank_l = [], [], [], []
        mdp = self.mdp
        bad, segments, psums = [], [], []
        ncmd = np.zeros(n, dtype=np.int64)
        jumps = self.jumps
        span = self.span
        lo, hi, strides = self.lo, self.hi, pk.strides
        word_of = pk.word_of
        discrete = self.discrete
        # (expand runs under np.errstate(all="ignore"): non-finite rates and out-of-range values are checked here)
        for ci, c in enumerate(part.commands):
            g = c.guard.eval(ctx) if guards is None else guards[ci]
            if type(g) is not np.ndarray or not g.ndim:
                if not g:
                    continue
                rows, sub = self._all_rows(n), ctx
                rank = ncmd.copy() if mdp else None  # the command's position among the enabled ones of its state
                ncmd += 1
            else:
                rows = np.flatnonzero(g)
                if rows.size == 0:
                    continue
                sub = ctx if rows.size == n else ctx.subset(rows)
                rank = ncmd[rows] if mdp else None
                ncmd += g
            m = rows.size
            psum = 0.0
            for ui, u in enumerate(c.updates):
                p = 1.0 if u.prob is None else u.prob.eval(sub)
                vector_p = type(p) is np.ndarray and p.ndim > 0
                if not vector_p:
                    p = float(p)
                    if not (p >= 0 and p < math.inf and (not discrete or p <= 1 + 1e-12)):
                        p = self._rate_error(np.full(m, p), rows, ctx, c, u)
                        vector_p = True
                else:
                    if p.dtype != np.float64:
                        p = p.astype(float)
                    top = p.max()
                    if not (p.min() >= 0 and top < math.inf and (not discrete or top <= 1 + 1e-12)):
                        p = self._rate_error(p, rows, ctx, c, u)
                psum = psum + p
                if not vector_p:
                    if p == 0:
                        continue
                    live = None
                else:
                    live = p > 0
                    if live.all():
                        live = None
                    elif not live.any():
                        continue
                dk = None
                moved = 0  # the words' change from the updates x' = x + c (narrow packing), one number
                out_any = None
                assigns = u.assigns
                if narrow:
                    plan = self._plans.get(id(u))
                    if plan is None:
                        plan = self._plans[id(u)] = self._constants(u)
                    if plan[0] is not None:
                        # x'_j = v_j for constants v_j: the word changes by sum (v_j - x_j) stride_j, the constant
                        # sum (v_j - lo_j) stride_j less the state's own (cached per subset: a command's updates
                        # share it)
                        const, key, fixed, assigns = plan
                        dk = const - self._fields(sub, key)
                        if jumps is not None and m:
                            for j, v in fixed:
                                if jumps[j] < span[j]:  # (a jump as wide as the range: no other can be wider)
                                    cmin, cmax = self._range(sub, j, live)
                                    jumps[j] = max(jumps[j], v - cmin, cmax - v)
                for j, e in assigns:
                    lo_j, hi_j = lo[j], hi[j]
                    shift = e.shift
                    if narrow and shift is not None and shift[0] == j:
                        # x' = x + c: the change is c in every state, inside the range unless the column's
                        # extreme leaves it (then the general path below finds which states do)
                        c = shift[1]
                        if not c:
                            continue
                        col = sub.col(j)
                        if (col.max() + c <= hi_j) if c > 0 else (col.min() + c >= lo_j):
                            if jumps is not None and abs(c) > jumps[j]:
                                jumps[j] = abs(c)
                            moved += c * int(strides[j])
                            continue
                    v = e.eval(sub)
                    if type(v) is not np.ndarray or not v.ndim:
                        v = int(v)
                        if lo_j <= v <= hi_j:
                            dx = v - sub.col(j)
                        else:
                            out_any = np.ones(m, dtype=bool)
                            dx = np.zeros(m, dtype=np.int64)
                    else:
                        if v.dtype != np.int64:
                            v = v.astype(np.int64)
                        if v.min() < lo_j or v.max() > hi_j:  # (two reductions; the mask only when some are out)
                            out = (v < lo_j) | (v > hi_j)
                            out_any = out if out_any is None else (out_any | out)
                            dx = np.where(out, 0, v - sub.col(j))
                        else:
                            dx = v - sub.col(j)
                    if jumps is not None and m and jumps[j] < span[j]:
                        d = dx if live is None else dx[live]
                        if d.size:
                            jumps[j] = max(jumps[j], int(d.max()), -int(d.min()))
                    if narrow:
                        step = dx * strides[j] if strides[j] != 1 else dx
                        dk = step if dk is None else dk + step
                    else:
                        if dk is None:
                            dk = np.zeros((m, W), dtype=np.int64)
                        dk[:, word_of[j]] += dx * strides[j]
                if dk is None:  # 'true' (a self-loop), or only changes by constants
                    dk = np.full(m, moved, dtype=np.int64) if narrow else np.zeros((m, W), dtype=np.int64)
                elif moved:
                    dk = dk + moved
                if live is None:
                    r, q, d = rows, (np.full(m, p) if not vector_p else p), dk
                    if mdp:
                        rank_l.append(rank)
                else:
                    r, q, d = rows[live], p[live], dk[live]
                    if mdp:
                        rank_l.append(rank[live])
                    if out_any is not None:
                        out_any = out_any[live]
                rows_l.append(r)
                prob_l.append(q)
                dk_l.append(d)
                segments.append((ci, ui, r))
                if out_any is not None and out_any.any():
                    bad.append((ci, ui, r, out_any))
            if discrete:
                psums.append((ci, rows, psum))
        out = _Pairs()
        out.rank = None
        if len(rows_l) == 1:
            out.rows, out.prob, out.dword = rows_l[0], prob_l[0], dk_l[0]
            if mdp:
                out.rank = rank_l[0]
        elif rows_l:
            out.rows = np.concatenate(rows_l)
            out.prob = np.concatenate(prob_l)
            out.dword = np.concatenate(dk_l)
            if mdp:
                out.rank = np.concatenate(rank_l)
            if sort:
                # each command's rows are ascending: a stable sort (timsort) merges the runs, 5x faster than the
                # default introsort (leader_sync N=6, K=6: 0.76 s of a 1.3 s build), and keeps the commands' order.
                # (A counting sort, each segment's places read and bumped in turn, was no faster: 1.04x the time)
                order = np.argsort(out.rows, kind="stable")
                out.rows, out.prob, out.dword = out.rows[order], out.prob[order], out.dword[order]
                if mdp:
                    out.rank = out.rank[order]
        else:
            out.rows = np.zeros(0, np.int64)
            out.prob = np.zeros(0)
            out.dword = np.zeros(0 if narrow else (0, W), np.int64)
            if mdp:
                out.rank = np.zeros(0, np.int64)
        out.count = np.bincount(out.rows, minlength=n)
        out.start = None  # (the offsets per state, made by _product for the groups that have transitions)
        out.ncmd = ncmd
        out.bad = bad
        out.segments = segments
        out.psum = psums
        return out

    def _constants(self, u) -> tuple:
        """An update's assignments of constants inside their ranges, taken together (narrow packing only).

        Returns ``(const, key, fixed, rest)``: the word of the constants, ``sum (v_j - lo_j)
        stride_j``; the runs of consecutive columns they assign (``key``, for
        :meth:`_fields`); the pairs ``(j, v_j)``; and the other assignments. ``const`` is
        None when the update assigns no constant. On leader_sync N=6, K=6 (each process's
        pick assigns four constants in each of six updates) this took the whole build from
        0.43 to 0.38 s (interleaved, median of 7); crowds TotalRuns=5, CrowdSize=10 from
        0.104 to 0.092 s.
        """
        lo, hi, strides, radix = self.lo, self.hi, self.packing.strides, self.packing.radix
        fixed, rest = [], []
        for j, e in u.assigns:
            if e.fn is None and lo[j] <= int(e.value) <= hi[j]:
                fixed.append((j, int(e.value)))
            else:
                rest.append((j, e))
        if not fixed:
            return None, None, None, u.assigns
        fixed.sort()
        const = sum((v - int(lo[j])) * int(strides[j]) for j, v in fixed)
        runs, start = [], 0
        cols = [j for j, _ in fixed]
        for k in range(1, len(cols) + 1):
            if k == len(cols) or cols[k] != cols[k - 1] + 1:
                a, b = cols[start], cols[k - 1]  # columns a..b: the word's digits between these moduli
                runs.append((int(strides[a]) * int(radix[a]), int(strides[b]), a, b))
                start = k
        return const, tuple(runs), fixed, rest

    def _words(self, ctx) -> np.ndarray:
        """The (narrow) words of the context's states."""
        w = ctx.memo.get(_WORDS)
        if w is None:
            w = ctx.memo[_WORDS] = self._words(ctx.parent)[ctx.rows]
        return w

    def _fields(self, ctx, runs: tuple) -> np.ndarray:
        """``sum (x_j - lo_j) stride_j`` over the columns of ``runs`` in the context's states (cached)."""
        key = (_WORDS, runs)
        out = ctx.memo.get(key)
        if out is None:
            for top, bottom, a, b in runs:
                if a == b:  # one column: its digit times its stride
                    part = ctx.col(a) - self.lo[a]
                    if bottom != 1:
                        part = part * bottom
                else:  # consecutive columns: the word modulo the stride above them, less the digits below
                    w = self._words(ctx)
                    part = w % top if a else w
                    if bottom != 1:
                        part = part - w % bottom
                out = part if out is None else out + part
            ctx.memo[key] = out
        return out

    def _range(self, ctx, j: int, live) -> tuple:
        """The least and the largest value of column ``j`` in the context's states (among ``live``)."""
        if live is not None:
            c = ctx.col(j)[live]
            return int(c.min()), int(c.max())
        key = (_WORDS, "range", j)
        out = ctx.memo.get(key)
        if out is None:
            c = ctx.col(j)
            out = ctx.memo[key] = (int(c.min()), int(c.max()))
        return out

    def _all_rows(self, n: int) -> np.ndarray:
        if self._arange is None or len(self._arange) < n:
            self._arange = np.arange(max(n, 1024), dtype=np.int64)
        return self._arange[:n]

    # -- one frontier --------------------------------------------------------------------
    #: the search may expand whole boxes of states with the errors deferred (see exactq.ctmc._Search)
    tolerant = True

    def __call__(self, states: np.ndarray, words: np.ndarray, tolerant: bool = False):
        self._bad = np.zeros(len(states), dtype=bool) if tolerant else None
        with np.errstate(all="ignore"):  # non-finite rates and rewards are checked, not warned about
            blocks, extras = self.expand(states, words)
            if tolerant:
                blocks = list(blocks)  # the checks inside the generator run now, while errors are deferred
                extras["_bad"] = self._bad
        self._bad = None
        return blocks, extras

    def _defer(self, rows) -> bool:
        """Mark ``rows`` as failing (tolerant mode) and return True, or return False (then the caller raises)."""
        if self._bad is None:
            return False
        self._bad[rows] = True
        return True

    def expand(self, states: np.ndarray, words: np.ndarray):
        n = len(states)
        ctx = EvalContext(states)
        if self.packing.n_words == 1:
            ctx.memo[_WORDS] = words[:, 0]
        plans = []
        choices = np.zeros(n, dtype=np.int64)
        enabled = np.zeros(n, dtype=bool)
        for g in self.groups:
            pairs = self._group_pairs(g, ctx, n)
            if pairs is None:  # a module of the synchronisation has no enabled command on this frontier
                plans.append((g, None, None, None))
                continue
            if g.action is None:
                active = pairs[0].count > 0
                nchoice = pairs[0].ncmd
                guarded = nchoice > 0
            else:
                active = np.ones(n, dtype=bool)
                nchoice = np.ones(n, dtype=np.int64)
                for pr in pairs:
                    active &= pr.count > 0
                    nchoice = nchoice * pr.ncmd
                guarded = nchoice > 0  # every module has an enabled command: the synchronisation exists
            enabled |= active
            offset = choices.copy() if self.mdp else None  # an mdp: the group's first choice in every state
            choices += nchoice
            self._check_pairs(g, pairs, guarded, states)
            plans.append((g, pairs, active, offset))
        scale = None
        if self.discrete and not self.mdp and np.any(choices > 1):
            scale = 1.0 / np.maximum(choices, 1)
        trans = [np.zeros(n) for _ in self.info.rewards]
        for g, pairs, active, _ in plans:
            if pairs is None or not active.any() or self.mdp:  # (an mdp: transition rewards per choice, build_model)
                continue
            self._rewards(g, pairs, active, ctx, trans, scale)
        extras = {"enabled": enabled, "choices": choices}
        for k, t in enumerate(trans):
            extras[f"trans{k}"] = t
        return self._blocks(plans, words, scale, n), extras

    def _blocks(self, plans, words, scale, n):
        """The transition blocks of a frontier, chunk by chunk (a generator)."""
        W = self.packing.n_words
        for gi, (g, pairs, active, offset) in enumerate(plans):
            if pairs is None:
                continue
            if len(pairs) == 1:
                pr = pairs[0]  # every pair is a transition of its own
                src = pr.rows
                if len(src) == 0:
                    continue
                self._budget(len(src), n)
                w = pr.prob * scale[src] if scale is not None else pr.prob
                if self.mdp:  # the choice of a pair: its command's rank among the enabled commands of the state
                    w = self._record(w, offset[src] + pr.rank, gi)
                yield src, w, (words[src, 0] if W == 1 else words[src]) + pr.dword
                continue
            rows = np.flatnonzero(active)
            if rows.size == 0:
                continue
            counts = [pr.count[rows] for pr in pairs]
            total_f = np.ones(rows.size)
            for c in counts:
                total_f *= c
            self._budget(float(total_f.sum()), n)
            per_row = np.ones(rows.size, dtype=np.int64)
            for c in counts:
                per_row *= c
            ends = np.cumsum(per_row)
            lo = 0
            while lo < rows.size:  # chunks of rows with about CHUNK_TRANSITIONS transitions
                done = ends[lo - 1] if lo else 0
                hi = int(np.searchsorted(ends, done + CHUNK_TRANSITIONS, side="right"))
                hi = max(hi, lo + 1)
                block = self._product(rows[lo:hi], per_row[lo:hi], pairs, words, scale, W)
                if self.mdp:
                    src, weight, target, local = block
                    block = src, self._record(weight, offset[src] + local, gi), target
                yield block
                lo = hi

    def _group_pairs(self, g: _Group, ctx: EvalContext, n: int):
        """The pairs of each part of ``g``, or None when one part has no enabled command in any state of the
        frontier: then the synchronisation exists nowhere, has no transitions, and nothing of it is checked (the
        checks are where it exists), so no update of any part is evaluated, nor the guards of the parts after it.

        On the cyclic polling server with N = 10, 276 of 1,080 part evaluations had no enabled command; the
        builds of synchronous leader election (N = 5, K = 4) took 0.7x the time and polling's 0.93x.
        """
        parts = g.parts
        if len(parts) == 1:
            return [self._pairs(parts[0], ctx, n, False)]
        guards = []
        for part in parts:
            gs = [c.guard.eval(ctx) for c in part.commands]
            if not any(x.any() if type(x) is np.ndarray and x.ndim else x for x in gs):
                return None
            guards.append(gs)
        return [self._pairs(part, ctx, n, True, gs) for part, gs in zip(parts, guards)]

    def _record(self, prob: np.ndarray, choice: np.ndarray, group: int) -> np.ndarray:
        """Keep an mdp's transitions (probability, choice within the state, group) and return their indices.

        The search keeps (source, weight, target) per transition; an mdp's weight is the
        transition's index here (exact in a float below 2^53), so that its choice and
        probability are found again after the search (:func:`build_model`), whichever
        transitions the search keeps.
        """
        m = len(prob)
        self.t_prob.append(np.asarray(prob, dtype=float))
        self.t_choice.append(np.asarray(choice, dtype=np.int64))
        self.t_group.append(np.full(m, group, dtype=np.int32))
        ids = np.arange(self.t_count, self.t_count + m, dtype=float)
        self.t_count += m
        return ids

    def _product(self, rows, per_row, pairs, words, scale, W):
        """The synchronised transitions of ``rows``: the cartesian product of the parts' pairs.

        Built one module at a time: each partial transition is repeated once per pair
        of the next module in its state (``np.repeat``), so the work is the sum of
        the partial products' sizes, at most twice the final count when modules
        branch, and one gather per module that does not branch.
        """
        src = rows
        weight = np.ones(len(rows))
        target = words[rows, 0].copy() if W == 1 else words[rows].copy()
        local = np.zeros(len(rows), dtype=np.int64) if self.mdp else None  # an mdp: the combination's number
        # modules that do not branch on these rows first, while the partial product is small
        order = sorted(range(len(pairs)), key=lambda m: int(pairs[m].count[rows].max()))
        for m in order:
            pr = pairs[m]
            if pr.start is None:
                pr.start = np.cumsum(pr.count) - pr.count
            cnt = pr.count[src]
            dword = pr.dword  # (pairs,) with one word, (pairs, W) with several
            if cnt.max() == 1:
                e = pr.start[src]
            else:
                total = int(cnt.sum())
                first = np.cumsum(cnt) - cnt
                e = np.repeat(pr.start[src] - first, cnt)
                e += np.arange(total, dtype=np.int64)
                src, weight = np.repeat(src, cnt), np.repeat(weight, cnt)
                target = np.repeat(target, cnt, axis=0)
            weight *= pr.prob[e]
            target += dword[e]
            if local is not None:  # mixed radix over the modules' enabled commands: one choice per combination
                if cnt.max() != 1:
                    local = np.repeat(local, cnt)
                local = local * pr.ncmd[src] + pr.rank[e]
        if scale is not None:
            weight *= scale[src]
        if local is not None:
            return src, weight, target, local
        return src, weight, target

    def _budget(self, transitions: float, n: int) -> None:
        """Account for the transitions about to be formed (kept) and the work of one chunk (transient)."""
        self.meter.need(transitions * (_KEPT_PER_TRANSITION + (_MDP_PER_TRANSITION if self.mdp else 0)),
                        f"{self.src.name}: the states and transitions explored so far and the next "
                        f"{transitions:.0f} transitions (out of {n} states)",
                        transient=min(transitions, CHUNK_TRANSITIONS) * _WORK_PER_TRANSITION)

    # -- checks --------------------------------------------------------------------------
    def _check_pairs(self, g: _Group, pairs, guarded, states) -> None:
        """Ranges and (DTMC) probability sums, where the group's choices exist (``guarded``)."""
        for part, pr in zip(g.parts, pairs):
            for ci, ui, rows, out in pr.bad:
                on = out & guarded[rows]
                if on.any() and not self._defer(rows[on]):
                    k = int(np.flatnonzero(on)[0])
                    self._range_error(part.commands[ci], ui, states[rows[k]], g)
            for ci, rows, psum in pr.psum:
                off = np.abs(np.asarray(psum) - 1.0) > PROB_TOL
                if off.any():
                    off = np.broadcast_to(off, rows.shape) & guarded[rows]
                    if off.any() and not self._defer(rows[off]):
                        b = int(np.flatnonzero(off)[0])
                        c = part.commands[ci]
                        total = float(np.broadcast_to(psum, rows.shape)[b])
                        raise PrismModelError(f"the probabilities of {c.where(self.src)} sum to {total:.12g}, "
                                              f"not 1, in state {self.state_text(states[rows[b]])}")
        if g.action is not None and len(pairs) > 1 and self.shared[g.action]:
            self._check_clash(g, pairs, guarded, states)

    def _check_clash(self, g: _Group, pairs, active, states) -> None:
        """A variable (a global) written by two modules in one synchronised transition is an error."""
        for j in self.shared[g.action]:
            writers = []
            for part, pr in zip(g.parts, pairs):
                w = np.zeros(len(states), dtype=bool)
                for ci, ui, rows in pr.segments:
                    if any(jj == j for jj, _ in part.commands[ci].updates[ui].assigns):
                        w[rows] = True
                writers.append(w)
            both = (np.sum(writers, axis=0) > 1) & active
            if both.any() and not self._defer(both):
                i = int(np.flatnonzero(both)[0])
                mods = [c.commands[0].module for c, w in zip(g.parts, writers) if w[i]]
                raise PrismModelError(f"variable {self.names[j]!r} is written by more than one module ("
                                      f"{', '.join(mods)}) in the synchronisation [{g.action}], in state "
                                      f"{self.state_text(states[i])}")

    def _range_error(self, c, ui: int, row, g: _Group) -> None:
        ctx = EvalContext(row[None, :])
        for j, e in c.updates[ui].assigns:
            v = int(np.asarray(e.eval(ctx)).reshape(-1)[0])
            var = self.info.variables[j]
            if not var.lo <= v <= var.hi:
                raise PrismModelError(f"variable {var.name!r} would take the value {v}, outside its range "
                                      f"[{var.lo}..{var.hi}], in state {self.state_text(row)} by "
                                      f"{c.where(self.src)}")
        raise AssertionError("no out-of-range assignment found")  # pragma: no cover

    def _rate_error(self, p, rows, ctx, c, u) -> np.ndarray:
        """Raise for the first bad rate or probability (tolerant mode: defer, and return them zeroed)."""
        bad = ~np.isfinite(p) | (p < 0) | ((p > 1 + 1e-12) if self.discrete else False)
        if self._defer(rows[bad]):
            return np.where(bad, 0.0, p)
        b = int(np.flatnonzero(bad)[0])
        what = "probability" if self.discrete else "rate"
        raise PrismModelError(f"the {what} {u.prob.text} evaluates to {p[b]:g} in state "
                              f"{self.state_text(ctx.states[rows[b]])} ({c.where(self.src)}); a {what} must be "
                              f"finite, >= 0{' and <= 1' if self.discrete else ''}")

    # -- rewards ---------------------------------------------------------------------------
    def _rewards(self, g: _Group, pairs, active, ctx: EvalContext, trans, scale) -> None:
        """Expected transition rewards: per state, the group's reward times its total weight."""
        if not any(g.action in by for by in self.trans_items):
            return
        if g.action is None:
            mass = np.bincount(pairs[0].rows, weights=pairs[0].prob, minlength=ctx.n)
        else:
            mass = np.where(active, 1.0, 0.0)
            for pr in pairs:
                mass = mass * np.bincount(pr.rows, weights=pr.prob, minlength=ctx.n)
        if scale is not None:
            mass = mass * scale
        for s, by in enumerate(self.trans_items):
            items = by.get(g.action)
            if not items:
                continue
            acc = np.zeros(ctx.n)
            with np.errstate(all="ignore"):
                for guard, value in items:
                    acc += np.where(guard.full(ctx), value.full(ctx), 0.0)
            on = mass > 0
            if not np.all(np.isfinite(acc[on])) and not self._defer(on & ~np.isfinite(acc)):
                b = int(np.flatnonzero(on & ~np.isfinite(acc))[0])
                raise PrismModelError(f"the transition reward of [{g.action or ''}] is not finite in state "
                                      f"{self.state_text(ctx.states[b])}")
            trans[s] += np.where(on, mass * acc, 0.0)

    def state_text(self, row) -> str:
        parts = []
        for v, x in zip(self.info.variables, row):
            parts.append(f"{v.name}={'true' if x else 'false'}" if v.type == "bool" else f"{v.name}={int(x)}")
        return "(" + ", ".join(parts) + ")"

    # -- initial states ----------------------------------------------------------------
    def initial_states(self) -> np.ndarray:
        """The initial state, or the states of ``init ... endinit``.

        The block is split into its top-level conjuncts: a conjunct comparing one
        variable with a constant (``x = 0``, ``y <= 3``) narrows that variable's
        range; the other conjuncts are grouped by the variables they read, and each
        group is evaluated on every valuation of its variables (in chunks) within
        their narrowed ranges; variables the block does not read take every value
        of their range. The sizes are checked against the memory budget first.
        """
        info = self.info
        if info.init is None:
            return np.array([[v.init for v in info.variables]], dtype=np.int64)
        d = len(self.lo)
        lo, hi = self.lo.copy(), self.hi.copy()
        groups = []  # (columns, compiled conjunct)
        for clause in _conjuncts(info.init, info.symbols):
            if clause.const:
                if not clause.value:
                    raise PrismModelError(f"{self.src.name}: 'init ... endinit' is false for every state")
                continue
            cols = _referenced_columns(clause, self.lo)
            narrowed = _interval(clause, info.symbols, info.variables)
            if narrowed is not None:
                j, a, b = narrowed
                lo[j], hi[j] = max(lo[j], a), min(hi[j], b)
                continue
            groups.append((cols, clause))
        if np.any(lo > hi):
            raise PrismModelError(f"{self.src.name}: no valuation of the variables satisfies 'init ... endinit'")
        # merge conjuncts that share variables (connected components)
        comps = []
        for cols, clause in groups:
            cols = set(cols)
            merged = [c for c in comps if c[0] & cols]
            for c in merged:
                comps.remove(c)
                cols |= c[0]
            comps.append((cols, [cl for c in merged for cl in c[1]] + [clause]))
        covered = set().union(*[c for c, _ in comps]) if comps else set()
        free = [j for j in range(d) if j not in covered]
        count = 1
        for j in free:  # the free variables' ranges first: they may be huge, and cost nothing to count
            count *= int(hi[j] - lo[j] + 1)
        parts = []  # (columns, satisfying values)
        for cols, clauses in comps:
            cols = sorted(cols)
            vals = self._satisfying(cols, clauses, lo, hi)
            count *= len(vals)
            parts.append((cols, vals))
        require_memory(float(count) * 8 * (d + 2), f"{self.src.name}: the {count} initial states of 'init ... "
                       "endinit'", hint="constrain the variables there, or give initial values in the declarations")
        parts += [([j], np.arange(lo[j], hi[j] + 1, dtype=np.int64)[:, None]) for j in free]
        init = lo[None, :].copy()
        for cols, vals in parts:  # the product of the parts, one part at a time
            k = len(vals)
            init = np.repeat(init, k, axis=0)
            init[:, cols] = np.tile(vals, (len(init) // k, 1))
        return init

    def _satisfying(self, cols, clauses, lo, hi) -> np.ndarray:
        """The valuations of ``cols`` (within ``lo..hi``) that satisfy every conjunct of ``clauses``."""
        radix = [int(hi[j] - lo[j] + 1) for j in cols]
        domain = 1
        for r in radix:
            domain *= r
        names = ", ".join(self.names[j] for j in cols)
        require_memory(float(domain) * 8 * (len(cols) + 2),
                       f"{self.src.name}: evaluating 'init ... endinit' on the {domain} valuations of {names}",
                       hint="constrain fewer variables together, or give initial values in the declarations")
        sub_radix = np.array(radix, dtype=np.int64)
        strides = np.concatenate([np.cumprod(sub_radix[::-1])[::-1][1:], [1]]).astype(np.int64)
        found = []
        step = 1 << 20
        for start in range(0, domain, step):  # chunks of the variables' domain, not states
            idx = np.arange(start, min(domain, start + step), dtype=np.int64)
            states = np.repeat(lo[None, :], len(idx), axis=0)
            for k, j in enumerate(cols):
                states[:, j] = (idx // strides[k]) % sub_radix[k] + lo[j]
            ctx = EvalContext(states)
            ok = np.ones(len(idx), dtype=bool)
            for clause in clauses:
                ok &= np.broadcast_to(clause.full(ctx), (len(idx),))
            if ok.any():
                found.append(states[ok][:, cols])
        if not found:
            raise PrismModelError(f"{self.src.name}: no valuation of the variables satisfies 'init ... endinit'")
        return np.concatenate(found)


def _conjuncts(init, symbols) -> list:
    """The top-level conjuncts of a compiled ``init`` block, compiled (the block itself if it cannot be split)."""
    from . import syntax
    from .semantics import compile_expr

    try:
        node = syntax.parse_model_text(f"dtmc\nmodule _m endmodule\ninit {init.text} endinit\n").init
    except Exception:  # noqa: BLE001 - the text of a compiled block always parses; if not, do not split
        return [init]
    chain = getattr(syntax, "Chain", None)  # a flat run of one operator: a & b & c
    out, stack = [], [node]
    while stack:
        e = stack.pop()
        if isinstance(e, syntax.Binary) and e.op == "&":
            stack += [e.right, e.left]
            continue
        if chain is not None and isinstance(e, chain) and all(op == "&" for op, _ in e.rest):
            stack += [x for _, x in reversed(e.rest)] + [e.first]
            continue
        try:
            c = compile_expr(e, symbols)
        except PrismModelError:
            return [init]
        if c.type != "bool":
            return [init]
        out.append(c)
    return out


def _interval(clause, symbols, variables):
    """``(j, lo, hi)`` when the conjunct compares one variable with a constant, else None."""
    from .semantics import compile_expr
    from .syntax import Binary, Ident, parse_model_text

    try:
        node = parse_model_text(f"dtmc\nmodule _m endmodule\ninit {clause.text} endinit\n").init
    except Exception:  # noqa: BLE001
        return None
    if not (isinstance(node, Binary) and node.op in ("=", "<", "<=", ">", ">=")):
        return None
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
    left, op, right = node.left, node.op, node.right
    if not isinstance(left, Ident):
        left, right, op = right, left, flip[op]
    var = next((v for v in variables if isinstance(left, Ident) and v.name == left.name), None)
    if var is None:
        return None
    try:
        c = compile_expr(right, symbols)
    except PrismModelError:
        return None
    if not c.const or c.type == "bool" and var.type != "bool":
        return None
    x = float(c.value)
    if op == "=":
        if x != int(x):
            return var.index, 1, 0  # no integer value: empty
        return var.index, int(x), int(x)
    if op == "<":
        return var.index, var.lo, int(np.ceil(x)) - 1
    if op == "<=":
        return var.index, var.lo, int(np.floor(x))
    if op == ">":
        return var.index, int(np.floor(x)) + 1, var.hi
    return var.index, int(np.ceil(x)), var.hi


class _Recorder(EvalContext):
    """An evaluation context of one state that records the columns an expression reads."""

    __slots__ = ("seen",)

    def __init__(self, row: np.ndarray):
        super().__init__(np.asarray(row, dtype=np.int64)[None, :])
        self.seen = set()

    def col(self, j: int) -> np.ndarray:
        self.seen.add(j)
        return super().col(j)


def _referenced_columns(expr, row: np.ndarray) -> list:
    """The variables (columns) a compiled expression reads.

    Every operator of a compiled expression is evaluated on whole columns (both
    branches of ``c ? a : b`` included), so one evaluation on any state (here
    ``row``) reads them all.
    """
    rec = _Recorder(row)
    with np.errstate(all="ignore"):
        try:
            expr.eval(rec)
        except PrismModelError:  # a fault at this state (e.g. mod by 0): assume every variable
            return list(range(len(row)))
    return sorted(rec.seen)


def build_model(info: ModelInfo, *, strict: bool = False, max_states: int | None = None,
                progress=None) -> BuiltModel:
    """Build the chain of an analysed PRISM model (see the module docstring).

    Parameters
    ----------
    info : ModelInfo
        From :func:`exactq.prism.semantics.analyse`.
    strict : bool
        Deadlocks are an error (naming a deadlocked state) instead of a warning.
    max_states : int, optional
        Refuse to explore beyond this many states (default: only the memory budget,
        checked before every large allocation).
    progress : callable, optional
        ``progress(text)``: a line on the exploration about every half second (for a
        status line; the library prints nothing itself).

    Returns
    -------
    BuiltModel

    Raises
    ------
    PrismModelError
        For an out-of-range update, a negative or non-finite rate, probabilities not
        summing to 1, or (``strict``) a deadlock.
    exactq.budget.BudgetError
        When the states or transitions would not fit in the memory budget.
    """
    t0 = time.perf_counter()
    b = _Builder(info, strict)
    init = b.initial_states()
    from exactq.statespace import Packing

    b.packing = Packing(b.lo, b.hi, b.names)
    b.jumps = np.zeros(len(b.lo), dtype=np.int64)
    b.meter = MemoryMeter()
    ex = explore_transitions(init, b, b.names, hi=b.hi, lo=b.lo, max_states=max_states,
                             what=f"{info.source.name}", meter=b.meter, progress=progress)
    if progress is not None:
        progress(f"assembling the chain of {info.source.name}: {ex.space.n_states:,} states")
    space = ex.space
    n = space.n_states
    init_mask = np.zeros(n, dtype=bool)
    init_mask[space.index(init)] = True
    dead = ~ex.extras["enabled"]
    n_dead = int(dead.sum())
    if n_dead:
        i = int(np.flatnonzero(dead)[0])
        if strict:
            raise PrismModelError(f"state {b.state_text(space.row(i))} is a deadlock (no command is enabled); "
                                  f"{n_dead} deadlocked state{'s' if n_dead > 1 else ''} in all (strict mode)")
        warn(f"{n_dead} deadlocked state{'s were' if n_dead > 1 else ' was'} fixed by adding a self-loop, as PRISM "
             f"does (e.g. {b.state_text(space.row(i))})")
    choices = ex.extras["choices"]
    if b.mdp:
        return _assemble_mdp(b, info, ex, init, init_mask, dead, t0)
    n_multi = int(np.count_nonzero(choices > 1)) if b.discrete else 0
    if n_multi:
        i = int(np.flatnonzero(choices > 1)[0])
        row, k = space.row(i), int(choices[i])
        warn(f"{n_multi} state{'s' if n_multi > 1 else ''} of the dtmc enable{'' if n_multi > 1 else 's'} more than "
             f"one choice (e.g. {b.state_text(row)}: {k} choices); as PRISM and Storm do, each of the k enabled "
             "choices is taken with probability 1/k")
    # the matrix: duplicates summed, self-loops kept for the count
    b.meter.need(0, f"{info.source.name}: the matrix of {n} states and {len(ex.src)} transitions",
                 transient=len(ex.src) * 40.0 + n * 32.0)
    R = sp.coo_matrix((ex.weight, (ex.src, ex.dst)), shape=(n, n))
    ex.weight = ex.src = ex.dst = None
    R = R.tocsr()  # sums duplicates
    R.sum_duplicates()
    R.eliminate_zeros()
    n_trans = int(R.nnz) + n_dead
    keys, state_rewards = _state_rewards(b, info, space)
    constants = {k: v for k, (_, v) in info.constants.items() if v is not None}
    first = int(space.index(init[:1])[0])
    from exactq.solvers.dtmc import PROBABILITY_MAX, ROW_SUM_TOL
    from exactq.solvers.transient import trust

    if b.discrete:
        if n_dead:
            R = (R + sp.csr_matrix((np.ones(n_dead), (np.flatnonzero(dead), np.flatnonzero(dead))),
                                   shape=(n, n))).tocsr()
        R.sum_duplicates()
        # the commands' probabilities were checked as they were formed (each in [0, 1], summing to 1 within
        # PROB_TOL); rows within PROB_TOL only are normalised (with a warning), so every row sums to 1 within
        # as_stochastic's ROW_SUM_TOL and the check's validation is not repeated
        sums = _normalise_rows(R, b, space, np.arange(n), "state")
        if np.all(np.abs(sums - 1.0) <= ROW_SUM_TOL) and float(R.data.max(initial=0.0)) <= PROBABILITY_MAX:
            trust("stochastic P", R)
        chain = DTMC(space=space, P=R, cut_prob=np.zeros(n), rewards=state_rewards, initial=first,
                     constants=constants)
    else:
        out = np.asarray(R.sum(axis=1)).ravel()
        Q = (R - sp.diags(out, format="csr")).tocsr()
        Q.sum_duplicates()
        if np.all(np.isfinite(out)):  # (rates checked finite and >= 0 as they were formed; rows sum to 0 here)
            trust("generator Q", Q)
        chain = CTMC(space=space, Q=Q, cut_rate=np.zeros(n), jumps=_jumps(R, space), rewards=state_rewards,
                     initial=first, constants=constants)
    label_ctx = EvalContext(space, labels={"init": init_mask, "deadlock": dead})
    labels = {"init": init_mask, "deadlock": dead}
    for name, c in info.labels.items():
        labels[name] = np.broadcast_to(c.full(label_ctx), (n,)).copy()
    chain = replace(chain, labels=labels)
    structures = {}
    for k, key in enumerate(keys):
        structures[key] = RewardStructure(key, state_rewards[key], ex.extras[f"trans{k}"])
    return BuiltModel(chain, info, structures, n_trans, n_dead, time.perf_counter() - t0, n_multi)


def _jumps(R: sp.csr_matrix, space) -> np.ndarray:
    """The largest change of each variable in one transition of ``R`` (for the LU orderings)."""
    n = R.shape[0]
    out = np.zeros(space.n_vars, dtype=np.int64)
    per_row = max(1, R.nnz // max(n, 1))
    step = max(1, (1 << 22) // per_row)
    for a in range(0, n, step):  # blocks of rows (about 4M transitions each), one column at a time
        b = min(n, a + step)
        lo, hi = R.indptr[a], R.indptr[b]
        r = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(R.indptr[a:b + 1]))
        c = R.indices[lo:hi]
        for j in range(space.n_vars):
            x = space.column_at(j)
            out[j] = max(out[j], int(np.abs(x[c] - x[r]).max(initial=0)))
    return out


def _normalise_rows(P, b: "_Builder", space, owner: np.ndarray, kind: str) -> np.ndarray:
    """Divide the rows of ``P`` (CSR, in place) that sum to 1 only within PRISM's :data:`PROB_TOL` by their sums;
    returns the rows' sums after that.

    PRISM and Storm accept a state whose probabilities sum to 1 within a tolerance (PRISM's ``-sumroundoff``,
    1e-5) and use them as given. The solvers here take a stochastic matrix (rows within ``ROW_SUM_TOL`` = 1e-9 of
    1), so such a row is normalised instead, with a warning that names the largest gap: the values are then those
    of the normalised chain, which differs from the file's in those rows by at most that gap. ``owner[r]`` is the
    state of row ``r``, and ``kind`` names a row (a DTMC's rows are its states; an MDP's are its choices).
    """
    from exactq.solvers.dtmc import ROW_SUM_TOL

    sums = np.asarray(P.sum(axis=1)).ravel()
    gap = np.abs(sums - 1.0)
    off = gap > ROW_SUM_TOL
    if not off.any():
        return sums
    scale = np.where(off, 1.0 / np.where(off, sums, 1.0), 1.0)
    P.data *= np.repeat(scale, np.diff(P.indptr))
    worst = int(np.argmax(gap))
    k = int(np.count_nonzero(off))
    many = k > 1
    warn(f"the probabilities of {k} {kind}{'s' if many else ''} sum to 1 only within {PROB_TOL:g} (the largest gap "
         f"{float(gap[worst]):.3g}, in state {b.state_text(space.row(owner[worst]))}); {'they were' if many else 'it was'} "
         f"divided by {'their sums' if many else 'its sum'}, so the values are those of the normalised chain")
    return np.asarray(P.sum(axis=1)).ravel()


def _state_rewards(b: "_Builder", info: ModelInfo, space) -> tuple[list, dict]:
    ctx = EvalContext(space)  # (only the columns the rewards read are decoded)
    n = space.n_states
    out, keys = {}, []
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
                                      f"in state {b.state_text(space.row(i))}")
            acc = acc + v
        out[key] = acc
    return keys, out


def _assemble_mdp(b: "_Builder", info: ModelInfo, ex, init, init_mask, dead, t0) -> BuiltModel:
    """The MDP of an ``mdp`` file: one row per (state, enabled choice), rows grouped by state (Storm's layout).

    A choice is an enabled unlabelled command, or one combination of enabled commands
    (one per module of its alphabet) of a synchronising action; its row holds the
    product of the commands' update probabilities. A deadlock state gets one choice,
    a self-loop (PRISM's and Storm's fix). A transition reward ``[a] g : r`` is earned
    by every choice of action ``a`` (``[] g : r`` by the unlabelled ones) from a state
    satisfying ``g``; the state rewards are per step.
    """
    from exactq.representations.mdp import MDP

    space = ex.space
    n = space.n_states
    ids = ex.weight.astype(np.int64)
    ex.weight = None
    # gather each kept transition's probability, choice and group from the builder's records
    b.meter.need(0, f"{info.source.name}: the matrix of {n} states and {len(ids)} transitions",
                 transient=len(ids) * 48.0 + n * 32.0)
    prob = np.concatenate(b.t_prob)[ids] if b.t_prob else np.zeros(0)
    b.t_prob = None
    local = np.concatenate(b.t_choice)[ids] if b.t_choice else np.zeros(0, np.int64)
    b.t_choice = None
    group = np.concatenate(b.t_group)[ids] if b.t_group else np.zeros(0, np.int32)
    b.t_group = None
    counts = np.asarray(ex.extras["choices"], dtype=np.int64).copy()
    counts[dead] = 1
    row_groups = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=row_groups[1:])
    n_choices = int(row_groups[-1])
    src = np.asarray(ex.src, dtype=np.int64)
    row = row_groups[src] + local
    dead_idx = np.flatnonzero(dead)
    n_groups = len(b.groups)
    choice_group = np.full(n_choices, n_groups, dtype=np.int64)  # n_groups: a deadlock's self-loop
    choice_group[row] = group
    rows = np.concatenate([row, row_groups[dead_idx]])
    cols = np.concatenate([np.asarray(ex.dst, dtype=np.int64), dead_idx])
    vals = np.concatenate([prob, np.ones(dead_idx.size)])
    ex.src = ex.dst = None
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n_choices, n))
    P.sum_duplicates()
    P.eliminate_zeros()
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    _normalise_rows(P, b, space, owner, "choice")
    keys, state_rewards = _state_rewards(b, info, space)
    choice_rewards = {}
    for k, key in enumerate(keys):
        by = b.trans_items[k]
        if not by:
            continue
        acc = np.zeros(n_choices)
        for gi, g in enumerate(b.groups):
            items = by.get(g.action)
            if not items:
                continue
            c = np.flatnonzero(choice_group == gi)
            if c.size == 0:
                continue
            ctx = EvalContext(space).subset(owner[c])
            part = np.zeros(c.size)
            with np.errstate(all="ignore"):
                for guard, value in items:
                    part += np.where(guard.full(ctx), value.full(ctx), 0.0)
            if not np.all(np.isfinite(part)):
                i = int(np.flatnonzero(~np.isfinite(part))[0])
                raise PrismModelError(f"the transition reward of [{g.action or ''}] is not finite in state "
                                      f"{b.state_text(space.row(owner[c[i]]))}")
            acc[c] = part
        choice_rewards[key] = acc
    label_ctx = EvalContext(space, labels={"init": init_mask, "deadlock": dead})
    labels = {"init": init_mask, "deadlock": dead}
    for name, c in info.labels.items():
        labels[name] = np.broadcast_to(c.full(label_ctx), (n,)).copy()
    init_idx = np.flatnonzero(init_mask)
    names = [g.action or "" for g in b.groups] + ["(deadlock)"]
    mdp = MDP(P, row_groups, state_rewards=state_rewards, choice_rewards=choice_rewards, labels=labels,
              actions=choice_group, action_names=names, space=space,
              initial=int(init_idx[0]) if init_idx.size == 1 else init_idx)
    structures = {key: {"state": state_rewards[key], "choice": choice_rewards.get(key)} for key in keys}
    return BuiltModel(mdp, info, structures, int(P.nnz), int(dead_idx.size), time.perf_counter() - t0, 0)
