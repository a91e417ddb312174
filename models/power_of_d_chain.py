"""The power-of-d chains: sorted state spaces, truncation costs and generators.

Part of the ``power-of-d`` model (:mod:`exactq.models.power_of_d`): the sorted
queue-length vectors with their closed-form colex ranking, the truncation cost that
decides which states are kept, the symmetry-lumped generator, the unlumped generator
(for checks) and the shape QBD behind the upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from exactq.errors import ModelError, NotApplicableError, TruncationError

from .power_of_d_routing import _groups, group_arrival_probabilities, position_probabilities

__all__ = [
    "enumerate_sorted",
    "colex_rank",
    "SortedSpace",
    "LumpedChain",
    "lumped_generator",
    "fit_cost",
    "default_cost",
    "shape_qbd",
    "choose_profile",
    "unlumped_generator",
]

_COST_SLACK = 1e-9
_MAX_RANK = 2**62


# ============================================================ sorted vectors, ranking
def enumerate_sorted(cost, C, n=None, *, max_states=50_000_000):
    """All sorted vectors ``0 <= x_0 <= ... <= x_{n-1}`` with ``cost . x <= C``.

    Parameters
    ----------
    cost : (n,) float
        Per-position cost; every suffix sum ``sum_{i >= k} cost_i`` must be > 0,
        which makes the set finite.
    C : float
    max_states : int
        Refuse (``TruncationError``) beyond this many states.

    Returns
    -------
    (N, n) int32 array, sorted by total ``L = sum x`` and then by colex rank.

    Notes
    -----
    Prefixes are extended one position at a time, vectorised over all prefixes: a
    prefix with partial cost ``p`` and last value ``v`` admits next values
    ``v' in [v, (C - p) / S_k]`` (``S_k`` the suffix sum), since the cheapest
    completion repeats ``v'``. Every prefix kept has a completion, so intermediate
    arrays never exceed the final size.
    """
    cost = np.asarray(cost, dtype=float)
    n = cost.size if n is None else n
    suffix = np.cumsum(cost[::-1])[::-1]
    if np.any(suffix <= 0):
        raise ModelError("truncation cost must have positive suffix sums (a bounded set)")
    X = np.zeros((1, 0), dtype=np.int32)
    part = np.zeros(1)
    last = np.zeros(1, dtype=np.int64)
    for k in range(n):
        hi = np.floor((C - part) / suffix[k] + _COST_SLACK).astype(np.int64)
        cnt = np.maximum(hi - last + 1, 0)
        total = int(cnt.sum())
        if total > max_states:
            raise TruncationError(f"truncation set exceeds max_states={max_states} (cost bound {C:.4g})")
        rep = np.repeat(np.arange(len(X)), cnt)
        offs = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        v = last[rep] + offs
        X = np.concatenate([X[rep], v[:, None].astype(np.int32)], axis=1)
        part = part[rep] + cost[k] * v
        last = v
    L = X.sum(axis=1, dtype=np.int64)
    r = colex_rank(X)
    order = np.lexsort((r, L))
    small = np.int16 if int(X.max(initial=0)) < 30_000 else np.int32
    return np.ascontiguousarray(X[order], dtype=small)


@lru_cache(maxsize=32)
def _binom_table(vmax: int, n: int) -> np.ndarray:
    """``T[v, k] = C(v, k)`` for ``v <= vmax``, ``k <= n + 1`` (int64, checked)."""
    if math.comb(vmax, min(n + 1, vmax // 2 + 1)) >= _MAX_RANK:
        raise TruncationError(f"sorted-vector ranks overflow 64 bits (values up to {vmax - n})")
    T = np.zeros((vmax + 1, n + 2), dtype=np.int64)
    T[:, 0] = 1
    for k in range(1, n + 2):
        T[1:, k] = np.cumsum(T[:-1, k - 1])  # C(v, k) = sum_{u < v} C(u, k - 1)
    T.flags.writeable = False
    return T


def colex_rank(X) -> np.ndarray:
    """Closed-form rank of sorted vectors: ``sum_i C(x_i + i, i + 1)`` (int64).

    The map ``x -> {x_i + i}`` is a bijection from sorted vectors to strictly
    increasing ones, ranked by the combinatorial number system (colex order), so
    all sorted vectors with entries <= K get the ranks ``0 .. C(K + n, n) - 1``.
    """
    X = np.asarray(X)
    n = X.shape[1]
    vmax = int(X.max(initial=0)) + n + 1
    T = _binom_table(vmax, n)
    c = X.astype(np.int64) + np.arange(n)
    return T[c, np.arange(1, n + 1)].sum(axis=1)


class SortedSpace:
    """A set of sorted queue-length vectors with vectorised indexing.

    Duck-types :class:`exactq.statespace.StateSpace` (``states``, ``names``,
    ``n_states``, ``index``, ``format_state``, ``namespace``, ``column``) so that the
    CTMC machinery and state expressions work on it. States are ordered by total
    ``L`` (the *level*), then by colex rank; ``index`` maps rows to indices by one
    ``searchsorted`` on the ranks.
    """

    def __init__(self, states):
        states = np.asarray(states)
        if states.dtype not in (np.int16, np.int32, np.int64):
            states = states.astype(np.int32)
        self.states = states
        self.states.flags.writeable = False
        n = states.shape[1]
        self.names = tuple(f"x{i}" for i in range(n))
        self.level = states.sum(axis=1, dtype=np.int64)
        self.ranks = colex_rank(states)
        self._order = np.argsort(self.ranks, kind="stable")
        self._sorted_ranks = self.ranks[self._order]
        if np.any(np.diff(self._sorted_ranks) == 0):
            raise ValueError("duplicate states")

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_vars(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return self.n_states

    def lookup(self, ranks) -> np.ndarray:
        """Index of each rank, ``-1`` where it is not a state."""
        ranks = np.asarray(ranks, dtype=np.int64)
        pos = np.searchsorted(self._sorted_ranks, ranks)
        pos = np.minimum(pos, len(self._sorted_ranks) - 1)
        hit = self._sorted_ranks[pos] == ranks
        return np.where(hit, self._order[pos], -1)

    def index(self, rows) -> np.ndarray:
        rows = np.asarray(rows)
        if rows.ndim == 1:
            rows = rows[None, :]
        srt = np.sort(rows, axis=1)
        ok = np.all(rows == srt, axis=1) & np.all(rows >= 0, axis=1)
        if not ok.any():
            return np.full(len(rows), -1, dtype=np.int64)
        vmax = int(self.states.max(initial=0))
        inside = ok & (srt.max(axis=1) <= vmax)
        out = np.full(len(rows), -1, dtype=np.int64)
        if inside.any():
            out[inside] = self.lookup(colex_rank(srt[inside]))
        return out

    def column(self, name: str) -> np.ndarray:
        return self.states[:, self.names.index(name)]

    def format_state(self, i: int) -> str:
        return "(" + ", ".join(str(v) for v in self.states[i]) + ")"

    def namespace(self) -> dict:
        ns = {nm: self.states[:, k] for k, nm in enumerate(self.names)}
        ns["L"] = self.level
        return ns


# ================================================================ truncation costs
def default_cost(n: int, lam: float) -> np.ndarray:
    """Starting truncation cost: ``-log(lambda)`` per job plus ``log 4`` per unit of spread.

    The total number of jobs has a geometric tail of ratio ~lambda (all servers busy:
    a birth-death chain with rates n lambda and n); the spread max - min decays by a
    factor ~4 per unit at moderate loads (measured for d = 2, n = 4..8).
    """
    c = np.full(n, -math.log(lam))
    if n > 1:
        c[-1] += math.log(4.0)
        c[0] -= math.log(4.0)
    return c


def fit_cost(states, pi, *, C=None, cost=None, floor=None) -> np.ndarray:
    """Fit ``-log pi(x) ~ beta + c . x`` by least squares on well-inside states.

    Parameters
    ----------
    states : (N, n) sorted states, pi : (N,) stationary vector of a truncated solve
    C, cost : the truncation that produced ``pi``; states within 3 nats of its boundary
        are left out of the fit (they are distorted by the truncation).
    floor : (n,) suffix-sum floor; the fitted suffix sums are raised to at least it
        (keeps the set bounded and not thinner than the starting cost).

    Returns
    -------
    (n,) cost vector with positive suffix sums.
    """
    X = np.asarray(states, dtype=float)
    n = X.shape[1]
    keep = pi > pi.max() * 1e-14
    if C is not None and cost is not None:
        keep &= X @ cost <= C - 3.0
    keep &= X[:, 0] >= 1 if n > 1 and np.count_nonzero(keep & (X[:, 0] >= 1)) > 4 * n else True
    if np.count_nonzero(keep) <= 2 * n + 2:
        return np.asarray(cost, dtype=float) if cost is not None else default_cost(n, 0.5)
    A = np.column_stack([np.ones(np.count_nonzero(keep)), X[keep]])
    coef, *_ = np.linalg.lstsq(A, -np.log(pi[keep]), rcond=None)
    c = coef[1:]
    suffix = np.cumsum(c[::-1])[::-1]
    if floor is not None:
        suffix = np.maximum(suffix, floor)
    suffix = np.maximum(suffix, 1e-3)
    return np.append(suffix[:-1] - suffix[1:], suffix[-1])


# =========================================================== the lumped generator
@dataclass
class LumpedChain:
    """Generator of the sorted-vector chain on a truncation set, with its diagnostics.

    Attributes
    ----------
    space : SortedSpace
    Q : (N, N) csr_matrix, rows sum to 0
    level : (N,) int64, total jobs L (states are sorted by it)
    lost_rate : (N,) arrival rate lost at the truncation boundary (lower and block rules)
    removal_rate : (N,) rate of departures that also removed jobs (lower rule)
    removed_jobs : (N,) expected number of extra jobs removed per unit time
    cut_rate : (N,) rate of suppressed transitions (block rule: arrivals and departures)
    rule : str
    cost, bound : the truncation ``{x: cost . x <= bound}``
    """

    space: SortedSpace
    Q: sp.csr_matrix
    level: np.ndarray
    lost_rate: np.ndarray
    removal_rate: np.ndarray
    removed_jobs: np.ndarray
    cut_rate: np.ndarray
    redirect_rate: np.ndarray
    rule: str
    cost: np.ndarray
    bound: float

    @property
    def n_states(self) -> int:
        return self.space.n_states

    @property
    def states(self) -> np.ndarray:
        return self.space.states

    def boundary_mask(self) -> np.ndarray:
        return ((self.lost_rate > 0) | (self.removal_rate > 0) | (self.cut_rate > 0)
                | (self.redirect_rate > 0))


def lumped_generator(space: SortedSpace, *, n, d, lam, sampling="without", error="none", eps=0.0,
                     g=0, cost, bound, rule="lower", chunk=500_000) -> LumpedChain:
    """Generator of the sorted queue-length chain restricted to ``{cost . x <= bound}``.

    Parameters
    ----------
    space : SortedSpace
        Exactly the sorted vectors with ``cost . x <= bound`` (:func:`enumerate_sorted`).
    n, d, lam, sampling, error, eps, g : the model (``lam`` per server)
    cost : (n,) float, bound : float
        The truncation set.
    rule : {"lower", "block"}
        ``lower``: arrivals leaving the set are lost, a departure leaving it also
        removes one job from every longest queue until inside (the chain then loses
        jobs only: a pathwise lower bound for position-based routing, module
        docstring). ``block``: every transition leaving the set is suppressed.
    chunk : int
        States processed per vectorised pass (bounds the temporary memory).

    Returns
    -------
    LumpedChain

    Notes
    -----
    Target indices come from rank arithmetic: incrementing the last member ``b`` of
    a tie group keeps the vector sorted and adds ``C(x_b + b, b)`` to the colex rank;
    decrementing the first member ``a`` subtracts ``C(x_a - 1 + a, a)``. No target
    rows are materialised except for the few lower-rule removals.
    """
    if rule not in ("lower", "block", "redirect"):
        raise ModelError(f"rule must be lower, block or redirect; got {rule!r}")
    X_all = space.states
    N = len(X_all)
    cost = np.asarray(cost, dtype=float)
    suffix = np.cumsum(cost[::-1])[::-1]
    vmax = int(X_all.max(initial=0)) + n + 2
    T = _binom_table(vmax, n)
    lost = np.zeros(N)
    removal = np.zeros(N)
    removed = np.zeros(N)
    cut = np.zeros(N)
    redirect = np.zeros(N)
    srcs, dsts, vals = [], [], []
    lim = bound + _COST_SLACK
    for lo in range(0, N, chunk):
        hi = min(N, lo + chunk)
        X = X_all[lo:hi]
        rank = space.ranks[lo:hi]
        cst = X @ cost
        first, last, start, end = _groups(X)
        P = group_arrival_probabilities(X, n, d, sampling, error, eps, g)
        if rule == "redirect":
            # the cheapest tie group to join / to serve, for redirected transitions
            cand = np.where(end, cost[None, :], np.inf)
            alt_up = np.argmin(cand, axis=1)
            ok_up = cst + cand[np.arange(len(X)), alt_up] <= lim
            cand = np.where(start & (X > 0), -cost[None, :], np.inf)
            alt_dn = np.argmin(cand, axis=1)
            ok_dn = cst + cand[np.arange(len(X)), alt_dn] <= lim
            redirect_up = np.zeros(len(X))
            redirect_dn = np.zeros(len(X))
        for b in range(n):
            rows = np.flatnonzero(P[:, b] > 0)
            if rows.size == 0:
                continue
            rate = n * lam * P[rows, b]
            inside = cst[rows] + cost[b] <= lim
            r_in = rows[inside]
            tr = rank[r_in] + T[X[r_in, b].astype(np.int64) + b, b]
            dst = space.lookup(tr)
            if np.any(dst < 0):  # pragma: no cover - guarded by the cost test
                raise AssertionError("truncation set is not closed under its own cost test")
            srcs.append((r_in + lo).astype(np.int32))
            dsts.append(dst.astype(np.int32))
            vals.append(rate[inside])
            r_out, rate_out = rows[~inside], rate[~inside]
            if rule == "redirect" and r_out.size:
                ok = ok_up[r_out]
                np.add.at(redirect_up, r_out[ok], rate_out[ok])
                r_out, rate_out = r_out[~ok], rate_out[~ok]
            if r_out.size:
                np.add.at(cut if rule == "block" else lost, r_out + lo, rate_out)
        if rule == "redirect":
            rows = np.flatnonzero(redirect_up > 0)
            if rows.size:
                al = alt_up[rows]
                srcs.append((rows + lo).astype(np.int32))
                dsts.append(space.lookup(rank[rows] + T[X[rows, al].astype(np.int64) + al, al]).astype(np.int32))
                vals.append(redirect_up[rows])
                redirect[lo + rows] += redirect_up[rows]
        for a in range(n):
            rows = np.flatnonzero(start[:, a] & (X[:, a] > 0))
            if rows.size == 0:
                continue
            rate = (last[rows, a] - a + 1).astype(float)
            inside = cst[rows] - cost[a] <= lim
            r_in = rows[inside]
            tr = rank[r_in] - T[X[r_in, a].astype(np.int64) - 1 + a, a]
            srcs.append((r_in + lo).astype(np.int32))
            dsts.append(space.lookup(tr).astype(np.int32))
            vals.append(rate[inside])
            r_out, rate_out = rows[~inside], rate[~inside]
            if r_out.size == 0:
                continue
            if rule == "block":
                np.add.at(cut, r_out + lo, rate_out)
                continue
            if rule == "redirect":
                ok = ok_dn[r_out]
                np.add.at(redirect_dn, r_out[ok], rate_out[ok])
                r_out, rate_out = r_out[~ok], rate_out[~ok]
                if r_out.size == 0:
                    continue
            rows_x = X[r_out].astype(np.int64)
            rows_x[:, a] -= 1
            c_row = cst[r_out] - cost[a]
            extra = np.zeros(len(rows_x))
            todo = c_row > lim
            while todo.any():
                sub = rows_x[todo]
                t = np.argmax(sub == sub[:, -1:], axis=1)  # first position of the top group
                rows_x[todo] = sub - (np.arange(n)[None, :] >= t[:, None])
                c_row[todo] -= suffix[t]
                extra[todo] += n - t
                todo = c_row > lim
            srcs.append((r_out + lo).astype(np.int32))
            dsts.append(space.lookup(colex_rank(rows_x)).astype(np.int32))
            vals.append(rate_out)
            np.add.at(removal, r_out + lo, rate_out)
            np.add.at(removed, r_out + lo, rate_out * extra)
        if rule == "redirect":
            rows = np.flatnonzero(redirect_dn > 0)
            if rows.size:
                al = alt_dn[rows]
                srcs.append((rows + lo).astype(np.int32))
                dsts.append(space.lookup(rank[rows] - T[X[rows, al].astype(np.int64) - 1 + al, al]).astype(np.int32))
                vals.append(redirect_dn[rows])
                redirect[lo + rows] += redirect_dn[rows]
    # assemble in place: every piece is copied into the final triplets and freed
    total = sum(len(v) for v in vals)
    rows = np.empty(total + N, dtype=np.int32)
    cols = np.empty(total + N, dtype=np.int32)
    data = np.empty(total + N)
    pos = 0
    while vals:
        k = len(vals[0])
        rows[pos:pos + k] = srcs.pop(0)
        cols[pos:pos + k] = dsts.pop(0)
        data[pos:pos + k] = vals.pop(0)
        pos += k
    if np.any(cols[:total] < 0):  # pragma: no cover
        raise AssertionError("a transition target is missing from the truncation set")
    rows[total:] = np.arange(N)
    cols[total:] = np.arange(N)
    data[total:] = -np.bincount(rows[:total], weights=data[:total], minlength=N)
    Q = sp.coo_matrix((data, (rows, cols)), shape=(N, N)).tocsr()  # duplicates are summed
    del rows, cols, data
    Q.sort_indices()
    return LumpedChain(space, Q, space.level, lost, removal, removed, cut, redirect, rule, cost, float(bound))


# ====================================================== shape-QBD (upper bound) and the unlumped chain
def unlumped_generator(n, d, lam, K, sampling="without", error="none", eps=0.0, g=0):
    """Generator of the unlumped chain (one coordinate per server), for tests.

    Every sample (ordered ``d``-tuple with replacement, or ``d``-subset without) is
    enumerated and the destination chosen by the routing rule with uniform ties,
    independently of the lumped formulas. Arrivals to a queue at ``K`` are lost.
    Returns ``(states (K+1)^n x n, Q csr)``; small ``n`` only.
    """
    import itertools

    if (K + 1) ** n > 400_000:
        raise NotApplicableError("the unlumped chain is for small n and K only")
    states = np.indices((K + 1,) * n).reshape(n, -1).T
    N = len(states)
    if sampling == "without":
        samples = list(itertools.combinations(range(n), d))
    else:
        samples = list(itertools.product(range(n), repeat=d))
    weight = 1.0 / len(samples)
    route = np.zeros((N, n))
    for smp in samples:  # loop over the (few) samples, vectorised over states
        q = states[:, list(smp)]
        lo, hi = q.min(axis=1, keepdims=True), q.max(axis=1, keepdims=True)
        short = (q == lo) / (q == lo).sum(axis=1, keepdims=True)
        long_ = (q == hi) / (q == hi).sum(axis=1, keepdims=True)
        if error == "none":
            p_err = np.zeros(N)
        elif error == "independent":
            p_err = np.full(N, eps)
        else:
            p_err = eps * ((hi - lo)[:, 0] <= g)
        share = (1 - p_err)[:, None] * short + p_err[:, None] * long_
        for col, srv in enumerate(smp):
            route[:, srv] += weight * share[:, col]
    strides = (K + 1) ** np.arange(n - 1, -1, -1)
    idx = np.arange(N)
    rows, cols, vals = [], [], []
    for i in range(n):
        ok = states[:, i] < K
        rows.append(idx[ok]); cols.append(idx[ok] + strides[i]); vals.append(n * lam * route[ok, i])
        ok = states[:, i] > 0
        rows.append(idx[ok]); cols.append(idx[ok] - strides[i]); vals.append(np.ones(ok.sum()))
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    keep = v > 0
    r, c, v = r[keep], c[keep], v[keep]
    out = np.bincount(r, weights=v, minlength=N)
    Q = sp.csr_matrix((np.concatenate([v, -out]), (np.concatenate([r, idx]), np.concatenate([c, idx]))),
                      shape=(N, N))
    return states, Q


def enumerate_profile(profile) -> np.ndarray:
    """All nondecreasing ``y_1 <= ... <= y_m`` with ``0 <= y_i <= profile[i]`` (profile nondecreasing)."""
    profile = np.asarray(profile, dtype=np.int64)
    Y = np.zeros((1, 0), dtype=np.int32)
    last = np.zeros(1, dtype=np.int64)
    for k in range(len(profile)):
        cnt = np.maximum(profile[k] - last + 1, 0)
        total = int(cnt.sum())
        rep = np.repeat(np.arange(len(Y)), cnt)
        v = last[rep] + np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        Y = np.concatenate([Y[rep], v[:, None].astype(np.int32)], axis=1)
        last = v
    return Y


def count_profile(profile) -> int:
    """Number of nondecreasing vectors under ``profile`` (dynamic programming on the last value)."""
    profile = [int(v) for v in profile]
    if not profile:
        return 1
    top = max(profile)
    ways = np.zeros(top + 1, dtype=object)
    ways[0] = 1
    for cap in profile:
        ways = np.cumsum(ways)  # last value v' >= v
        ways[cap + 1:] = 0
    return int(ways.sum())


def choose_profile(n, shapes, weights, max_phases, *, mass_tol=1e-14) -> np.ndarray:
    """Greedy profile ``b`` (nondecreasing caps on the differences ``y_1..y_{n-1}``).

    Starting from ``b = 0``, repeatedly raise the cap that adds the most probability
    ``weights`` (a shape distribution, e.g. from a lower-bound solve) per new phase,
    while the number of phases stays within ``max_phases`` and the probability left
    outside exceeds ``mass_tol``.
    """
    Y, inv = np.unique(np.asarray(shapes, dtype=np.int64)[:, 1:], axis=0, return_inverse=True)
    w = np.bincount(inv.ravel(), weights=np.asarray(weights, dtype=float), minlength=len(Y))
    total = w.sum()
    b = np.zeros(n - 1, dtype=np.int64)
    inside = np.all(Y <= b, axis=1)
    count = 1
    while total - w[inside].sum() > mass_tol * total:
        best, best_gain, best_count = None, -1.0, 0
        for i in range(n - 1):
            if i < n - 2 and b[i] + 1 > b[i + 1]:
                continue
            cand = b.copy()
            cand[i] += 1
            c = count_profile(cand)
            if c > max_phases:
                continue
            gain = float(w[~inside & (Y[:, i] <= cand[i]) & np.all(Y <= cand, axis=1)].sum()) / max(c - count, 1)
            if gain > best_gain:
                best, best_gain, best_count = cand, gain, c
        if best is None:
            break
        b, count = best, best_count
        inside = np.all(Y <= b, axis=1)
    return b


def shape_qbd(n, d, lam, profile, sampling="without", error="none", eps=0.0):
    """The upper-bound QBD: level = shortest queue, phase = differences under a profile.

    Phases are the sorted difference vectors ``y = x - x_0`` with ``y_i <= b_i``
    (``profile`` ``b``, nondecreasing; an int ``D`` means the spread bound ``b_i = D``).
    Transitions follow the sorted chain except at the profile, where the system only
    ever *gains* jobs: a departure that would leave the profile (only departures from a
    shortest queue can) is suppressed, and an arrival that would leave it also adds one
    (phantom) job to every shortest queue, which lowers every difference by one and so
    returns inside in one step, keeping the process skip-free in the level. For
    position-based routing the sorted chain is monotone (module docstring), so the
    QBD's number of jobs dominates the true one path by path: its E[L] is an upper bound.

    Returns
    -------
    dict with ``A0, A1, A2, B1`` (dense), ``phases`` (difference vectors, ``y_0 = 0``
    first), ``phase_jobs`` (``sum y``), ``phantom_rate`` (per phase, rate of phantom
    jobs added) and ``profile``.
    """
    if error == "dependent" and eps > 0:
        raise NotApplicableError("the bounding QBD needs position-based routing (error none or independent)")
    prof = np.full(n - 1, int(profile), dtype=np.int64) if np.ndim(profile) == 0 else np.asarray(profile, np.int64)
    Y = enumerate_profile(prof) if n > 1 else np.zeros((1, 0), np.int32)
    Y = np.concatenate([np.zeros((len(Y), 1), np.int32), Y], axis=1)
    m = len(Y)
    ranks = colex_rank(Y[:, 1:]) if n > 1 else np.zeros(1, np.int64)
    order = np.argsort(ranks)
    srank = ranks[order]

    def find(rows):
        rr = colex_rank(rows[:, 1:]) if n > 1 else np.zeros(len(rows), np.int64)
        pos = np.minimum(np.searchsorted(srank, rr), m - 1)
        if np.any(srank[pos] != rr):  # pragma: no cover
            raise AssertionError("phase not found")
        return order[pos]

    def fits(rows):
        return np.all(rows[:, 1:] <= prof, axis=1) if n > 1 else np.ones(len(rows), bool)

    p = position_probabilities(n, d, sampling, error, eps)
    A0 = np.zeros((m, m)); A1 = np.zeros((m, m)); A2 = np.zeros((m, m))
    phantom = np.zeros(m)
    first, last, start, end = _groups(Y)
    cum = np.concatenate([[0.0], np.cumsum(p)])
    rows_idx = np.arange(m)
    for b in range(n):  # an arrival joins the tie group ending at b
        sel = end[:, b]
        if not sel.any():
            continue
        a = first[sel, b]
        rate = n * lam * (cum[b + 1] - cum[a])
        src = rows_idx[sel]
        Z = Y[sel].astype(np.int64)
        Z[:, b] += 1
        Zs = Z - Z.min(axis=1, keepdims=True)
        over = ~fits(Zs)
        if over.any():  # phantom: one more job at every shortest queue
            Zo = Z[over]
            Zo = Zo + (Zo == Zo.min(axis=1, keepdims=True))
            phantom[src[over]] += rate[over] * (Zo.sum(1) - Z[over].sum(1))
            Z[over] = Zo
        newmin = Z.min(axis=1)
        dst = find(Z - newmin[:, None])
        up = newmin > 0
        np.add.at(A0, (src[up], dst[up]), rate[up])
        np.add.at(A1, (src[~up], dst[~up]), rate[~up])
    for a in range(n):  # a departure from the tie group starting at a (levels >= 1: all busy)
        sel = start[:, a]
        rate = (last[sel, a] - a + 1).astype(float)
        src = rows_idx[sel]
        Z = Y[sel].astype(np.int64)
        Z[:, a] -= 1
        down = Z[:, a] < 0
        Zs = np.where(down[:, None], Z + 1, Z)
        ok = fits(Zs)
        dst = find(Zs[ok])
        dn = down[ok]
        np.add.at(A2, (src[ok][dn], dst[dn]), rate[ok][dn])
        np.add.at(A1, (src[ok][~dn], dst[~dn]), rate[ok][~dn])
    np.fill_diagonal(A1, 0.0)
    A1 -= np.diag(A0.sum(1) + A1.sum(1) + A2.sum(1))
    B1 = A1 + np.diag(A2.sum(1))  # level 0: the shortest queues are empty and cannot serve
    return {"A0": A0, "A1": A1, "A2": A2, "B1": B1, "phases": Y, "phase_jobs": Y.sum(1).astype(float),
            "phantom_rate": phantom, "profile": prof.tolist()}
