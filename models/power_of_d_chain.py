"""The power-of-d chains: truncation sets, the lumped generator and the shape QBD.

Part of the ``power-of-d`` model (:mod:`exactq.models.power_of_d`). The sorted
queue-length vectors live in the one sorted space of the library,
:class:`exactq.statespace.SortedSpace` (ranked in closed form by
:func:`exactq.statespace.colex_rank`); this module chooses which of them a
truncation keeps (the cost set :class:`CostSet`), builds the symmetry-lumped
generator on it as a :class:`~exactq.ctmc.CTMC` with declared structure (levels,
start vector, boundary), the unlumped generator (for checks) and the job-gaining
shape QBD behind the upper bound (:class:`ShapeQBD`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from exactq.ctmc import CTMC
from exactq.errors import ModelError, NotApplicableError, TruncationError
from exactq.representations import QBD
from exactq.statespace import SortedSpace, binomial_table, colex_rank
from exactq.truncation import Truncation

from .power_of_d_routing import _groups, group_arrival_probabilities, position_probabilities

__all__ = [
    "enumerate_sorted",
    "CostSet",
    "lumped_generator",
    "fit_cost",
    "default_cost",
    "ShapeQBD",
    "shape_qbd",
    "enumerate_profile",
    "count_profile",
    "choose_profile",
    "unlumped_generator",
]

_COST_SLACK = 1e-9


# ============================================================ the kept set and its states
@dataclass(frozen=True)
class CostSet:
    """The kept set of a power-of-d truncation: ``{x sorted: cost . x <= bound}``.

    Not an integer level (``Truncation.level`` is ``None``); the model grows it stage
    by stage from the previous solution.

    Attributes
    ----------
    cost : tuple of float
        Per-position cost (every suffix sum > 0, so the set is finite).
    bound : float
        The cost bound ``C`` (in nats of the fitted ``-log pi``).
    stage : int
        0 for the first set, then 1, 2, ...
    counts : tuple of (float, int)
        ``(bound, states)`` of the stages since the cost was last fitted (the growth
        of the count with the bound sets the next step).

    Examples
    --------
    >>> k = CostSet((0.5, 1.0), 2.0)
    >>> k.describe()["cost_bound"], k.contains(np.array([[0, 1], [1, 2]])).tolist()
    (2.0, [True, False])
    """

    cost: tuple
    bound: float
    stage: int = 0
    counts: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "cost", tuple(float(c) for c in self.cost))
        object.__setattr__(self, "bound", float(self.bound))
        if np.any(np.cumsum(self.cost[::-1]) <= 0):
            raise ModelError("the truncation cost must have positive suffix sums (a bounded set)")

    @property
    def cost_vector(self) -> np.ndarray:
        return np.asarray(self.cost)

    def contains(self, X) -> np.ndarray:
        """Whether each sorted row is in the set."""
        return np.asarray(X) @ self.cost_vector <= self.bound + _COST_SLACK

    def describe(self) -> dict:
        """The JSON-ready description reported in ``info["truncation"]["kept_set"]``."""
        return {"cost_bound": self.bound, "cost": list(self.cost), "stage": self.stage,
                "states_by_bound": [list(c) for c in self.counts]}


def enumerate_sorted(cost, C, *, max_states=50_000_000) -> np.ndarray:
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
    (N, n) int16 (or int32) array, sorted by total ``L = sum x`` and then by colex rank:
    the order a :class:`~exactq.statespace.SortedSpace` subset keeps, and the level
    order of the level-aggregation solver.

    Notes
    -----
    Prefixes are extended one position at a time, vectorised over all prefixes: a
    prefix with partial cost ``p`` and last value ``v`` admits next values
    ``v' in [v, (C - p) / S_k]`` (``S_k`` the suffix sum), since the cheapest
    completion repeats ``v'``. Every prefix kept has a completion, so intermediate
    arrays never exceed the final size.

    Examples
    --------
    With cost ``(0, 1)`` and ``C = 2`` the set is every sorted pair with entries
    ``<= 2``, ``C(2 + 2, 2) = 6`` states:

    >>> enumerate_sorted([0.0, 1.0], 2).tolist()
    [[0, 0], [0, 1], [1, 1], [0, 2], [1, 2], [2, 2]]
    """
    cost = np.asarray(cost, dtype=float)
    n = cost.size
    suffix = np.cumsum(cost[::-1])[::-1]
    if np.any(suffix <= 0):
        raise ModelError("truncation cost must have positive suffix sums (a bounded set)")
    X = np.zeros((1, 0), dtype=np.int32)
    part = np.zeros(1)
    last = np.zeros(1, dtype=np.int64)
    for k in range(n):  # one vectorised pass per position
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
    order = np.lexsort((colex_rank(X), X.sum(axis=1, dtype=np.int64)))
    small = np.int16 if int(X.max(initial=0)) < 30_000 else np.int32
    return np.ascontiguousarray(X[order], dtype=small)


def default_cost(n: int, lam: float) -> np.ndarray:
    """Starting truncation cost: ``-log(lambda)`` per job plus ``log 4`` per unit of spread.

    The total number of jobs has a geometric tail of ratio ~lambda (all servers busy:
    a birth-death chain with rates n lambda and n); the spread max - min decays by a
    factor ~4 per unit at moderate loads (measured for d = 2, n = 4..8).

    Examples
    --------
    >>> c = default_cost(3, 0.5); bool(np.allclose(c, np.log([2 / 4, 2, 2 * 4])))
    True
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
    states : (N, n) sorted states
    pi : (N,) stationary vector of a truncated solve
    C, cost : the truncation that produced ``pi``; states within 3 nats of its boundary
        are left out of the fit (they are distorted by the truncation).
    floor : (n,) suffix-sum floor; the fitted suffix sums are raised to at least it
        (keeps the set bounded and not thinner than the starting cost).

    Returns
    -------
    (n,) cost vector with positive suffix sums.

    Examples
    --------
    A law that is exactly ``pi(x) ~ exp(-c . x)`` gives back ``c``:

    >>> X = enumerate_sorted([0.0, 1.0], 12).astype(float)
    >>> pi = np.exp(-(X @ [0.2, 0.7])); pi /= pi.sum()
    >>> bool(np.allclose(fit_cost(X, pi), [0.2, 0.7]))
    True
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
def lumped_generator(space: SortedSpace, kept: CostSet, *, n, d, lam, sampling="without", error="none", eps=0.0,
                     g=0, rule="lower", chunk=500_000) -> CTMC:
    """Generator of the sorted queue-length chain restricted to a cost set, as a CTMC.

    Parameters
    ----------
    space : SortedSpace
        Exactly the sorted vectors of ``kept`` (:func:`enumerate_sorted`), in its order.
    kept : CostSet
        The truncation set.
    n, d, lam, sampling, error, eps, g : the model (``lam`` per server)
    rule : {"redirect", "lower", "block"}
        ``redirect``: an arrival leaving the set joins the cheapest tie group inside,
        a departure leaving it happens at the cheapest busy group (no job is lost).
        ``lower``: arrivals leaving the set are lost, a departure leaving it also
        removes one job from every longest queue until inside (the chain only loses
        jobs: a pathwise lower bound for position-based routing, see the model's
        docstring). ``block``: every transition leaving the set is suppressed.
    chunk : int
        States processed per vectorised pass (bounds the temporary memory).

    Returns
    -------
    CTMC
        With ``levels`` (the total number of jobs, by which the states are sorted),
        ``start`` (``exp(-cost . x)``, the positive guess of the iterative solver),
        ``boundary`` (the states the rule touched), ``cut_rate`` (rate lost or
        suppressed), rewards ``L``, ``lost_rate`` (arrivals lost) and
        ``removed_jobs`` (extra jobs removed per unit time, lower rule), and
        ``truncation = Truncation(None, rule, kept_set=kept)``.

    Notes
    -----
    Target indices come from rank arithmetic (:meth:`SortedSpace.lookup`):
    incrementing the last member ``b`` of a tie group keeps the vector sorted and adds
    ``C(x_b + b, b)`` to the colex rank; decrementing the first member ``a`` subtracts
    ``C(x_a - 1 + a, a)``. No target rows are materialised except for the few
    lower-rule removals.

    Examples
    --------
    One server (``n = d = 1``) kept up to 20 jobs is the M/M/1/20 queue; the states
    are the queue lengths 0..20 and the arrival rate is ``n lambda``:

    >>> X = enumerate_sorted([1.0], 20)
    >>> c = lumped_generator(SortedSpace([1], states=X), CostSet([1.0], 20), n=1, d=1, lam=0.5, rule="block")
    >>> float(c.Q[0, 1]), float(c.Q[1, 0]), float(c.cut_rate[-1]), int(c.levels[-1])
    (0.5, 1.0, 0.5, 20)
    """
    if rule not in ("lower", "block", "redirect"):
        raise ModelError(f"rule must be lower, block or redirect; got {rule!r}")
    X_all = space.states
    N = len(X_all)
    cost = kept.cost_vector
    suffix = np.cumsum(cost[::-1])[::-1]
    T = binomial_table(int(X_all.max(initial=0)) + n, n)
    ranks = space.ranks
    lost = np.zeros(N)
    removal = np.zeros(N)
    removed = np.zeros(N)
    cut = np.zeros(N)
    redirect = np.zeros(N)
    most_removed = 0
    srcs, dsts, vals = [], [], []
    lim = kept.bound + _COST_SLACK
    for lo in range(0, N, chunk):  # chunks of states, vectorised within
        hi = min(N, lo + chunk)
        X = X_all[lo:hi]
        rank = ranks[lo:hi]
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
        for b in range(n):  # arrivals joining the tie group that ends at position b
            rows = np.flatnonzero(P[:, b] > 0)
            if rows.size == 0:
                continue
            rate = n * lam * P[rows, b]
            inside = cst[rows] + cost[b] <= lim
            r_in = rows[inside]
            dst = space.lookup(rank[r_in] + T[X[r_in, b].astype(np.int64) + b, b])
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
        for a in range(n):  # departures from the tie group that starts at position a
            rows = np.flatnonzero(start[:, a] & (X[:, a] > 0))
            if rows.size == 0:
                continue
            rate = (last[rows, a] - a + 1).astype(float)
            inside = cst[rows] - cost[a] <= lim
            r_in = rows[inside]
            srcs.append((r_in + lo).astype(np.int32))
            dsts.append(space.lookup(rank[r_in] - T[X[r_in, a].astype(np.int64) - 1 + a, a]).astype(np.int32))
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
            passes = 0
            while todo.any():  # remove one job from every longest queue until inside
                sub = rows_x[todo]
                t = np.argmax(sub == sub[:, -1:], axis=1)  # first position of the top group
                rows_x[todo] = sub - (np.arange(n)[None, :] >= t[:, None])
                c_row[todo] -= suffix[t]
                extra[todo] += n - t
                todo = c_row > lim
                passes += 1
            most_removed = max(most_removed, passes)
            srcs.append((r_out + lo).astype(np.int32))
            dsts.append(space.index(rows_x).astype(np.int32))
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
    del ranks
    Q = _assemble(srcs, dsts, vals, N)
    L = X_all.sum(axis=1, dtype=np.int64)
    cst = X_all @ cost
    return CTMC(space=space, Q=Q, cut_rate=cut + lost, jumps=np.full(n, 1 + most_removed, dtype=np.int64),
                rewards={"L": L.astype(float), "lost_rate": lost, "removed_jobs": removed},
                constants={"n": n, "arrival_rate": lam},
                truncation=Truncation(None, rule, "cost of the sorted queue lengths", kept_set=kept),
                ordering="level", levels=L, start=np.exp(-(cst - cst.min())),
                boundary=(lost > 0) | (removal > 0) | (cut > 0) | (redirect > 0))


def _assemble(srcs: list, dsts: list, vals: list, N: int) -> sp.csr_matrix:
    """CSR generator from the transition pieces, copied into the final triplets and freed one by one."""
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
    return Q


# ================================================================= the unlumped chain
def unlumped_generator(n, d, lam, K, sampling="without", error="none", eps=0.0, g=0):
    """Generator of the unlumped chain (one coordinate per server), for checks.

    Every sample (ordered ``d``-tuple with replacement, or ``d``-subset without) is
    enumerated and the destination chosen by the routing rule with uniform ties,
    independently of the lumped formulas. Arrivals to a queue at ``K`` are lost.
    Returns ``(states (K+1)^n x n, Q csr)``; small ``n`` only.

    Examples
    --------
    Two servers with d = 2 and room for one job each: from the empty state the arrival
    (rate ``2 lambda``) joins either server with probability 1/2:

    >>> states, Q = unlumped_generator(2, 2, 0.5, 1)
    >>> states.tolist(), Q[0].toarray().tolist()
    ([[0, 0], [0, 1], [1, 0], [1, 1]], [[-1.0, 0.5, 0.5, 0.0]])
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
    if not np.all(np.isfinite(v)):  # a NaN rate would be dropped by the filter below
        raise ModelError(f"power-of-d chain: {int(np.count_nonzero(~np.isfinite(v)))} transition rates are not finite")
    keep = v > 0
    r, c, v = r[keep], c[keep], v[keep]
    out = np.bincount(r, weights=v, minlength=N)
    Q = sp.csr_matrix((np.concatenate([v, -out]), (np.concatenate([r, idx]), np.concatenate([c, idx]))),
                      shape=(N, N))
    return states, Q


# ====================================================== the shape QBD (upper bound)
def enumerate_profile(profile) -> np.ndarray:
    """All nondecreasing ``y_1 <= ... <= y_m`` with ``0 <= y_i <= profile[i]`` (profile nondecreasing).

    Examples
    --------
    >>> enumerate_profile([1, 2]).tolist()
    [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2]]
    """
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
    """Number of nondecreasing vectors under ``profile`` (dynamic programming on the last value).

    Examples
    --------
    Under the flat profile ``(D, ..., D)`` (``m`` entries) there are ``C(D + m, m)``:

    >>> count_profile([3, 3, 3]) == 20   # C(6, 3)
    True
    """
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

    Examples
    --------
    Two servers whose difference is 0, 1 or 2 with some mass each: the cap grows to 2
    (three phases), or stops at 1 when only two phases are allowed:

    >>> shapes = np.array([[0, 0], [0, 1], [0, 2]]); w = np.array([0.5, 0.3, 0.2])
    >>> choose_profile(2, shapes, w, 10).tolist(), choose_profile(2, shapes, w, 2).tolist()
    ([2], [1])
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


@dataclass(frozen=True)
class ShapeQBD:
    """The job-gaining QBD of :func:`shape_qbd` with what the bound needs beside the blocks.

    Attributes
    ----------
    qbd : QBD
        Level = shortest queue, phase = the sorted differences to it under the profile.
    phases : (m, n) ndarray of int
        The difference vectors ``y`` (``y_0 = 0``), in phase order.
    phantom_rate : (m,) ndarray
        Per phase, the rate of phantom jobs the profile adds.
    profile : tuple of int
        The caps ``b_1 <= ... <= b_{n-1}`` on the differences.
    """

    qbd: QBD
    phases: np.ndarray
    phantom_rate: np.ndarray
    profile: tuple

    @property
    def phase_jobs(self) -> np.ndarray:
        """``sum_i y_i`` per phase: jobs above ``n`` times the level."""
        return self.phases.sum(axis=1).astype(float)


def shape_qbd(n, d, lam, profile, sampling="without", error="none", eps=0.0) -> ShapeQBD:
    """The upper-bound QBD: level = shortest queue, phase = differences under a profile.

    Phases are the sorted difference vectors ``y = x - x_0`` with ``y_i <= b_i``
    (``profile`` ``b``, nondecreasing; an int ``D``, the *spread*, means ``b_i = D``).
    Transitions follow the sorted chain except at the profile, where the system only
    ever *gains* jobs: a departure that would leave the profile (only departures from a
    shortest queue can) is suppressed, and an arrival that would leave it also adds one
    (phantom) job to every shortest queue, which lowers every difference by one and so
    returns inside in one step, keeping the process skip-free in the level. For
    position-based routing the sorted chain is monotone (the model's docstring), so
    the QBD's number of jobs dominates the true one path by path: its E[L] is an upper
    bound.

    Returns
    -------
    ShapeQBD

    Examples
    --------
    Two servers, d = 2 (JSQ) with spread 1: from equal queues (phase 0) an arrival
    (rate ``2 lambda``) opens a difference of one and a departure (rate 2) lowers the
    level; from a difference of one the arrival joins the shorter queue and raises the
    level, and the shorter queue's departure, which would open a difference of two, is
    suppressed:

    >>> s = shape_qbd(2, 2, 0.4, 1)
    >>> s.qbd.A0.tolist(), s.qbd.A2.tolist(), s.phase_jobs.tolist()
    ([[0.0, 0.0], [0.8, 0.0]], [[0.0, 2.0], [0.0, 0.0]], [0.0, 1.0])
    """
    if error == "dependent" and eps > 0:
        raise NotApplicableError("the bounding QBD needs position-based routing (error none or independent)")
    prof = np.full(n - 1, int(profile), dtype=np.int64) if np.ndim(profile) == 0 else np.asarray(profile, np.int64)
    Y = enumerate_profile(prof) if n > 1 else np.zeros((1, 0), np.int32)
    Y = np.concatenate([np.zeros((len(Y), 1), np.int32), Y], axis=1)
    m = len(Y)
    phase_space = SortedSpace([n - 1], states=Y[:, 1:]) if n > 1 else None

    def find(rows):
        if phase_space is None:
            return np.zeros(len(rows), np.int64)
        idx = phase_space.index(rows[:, 1:])
        if np.any(idx < 0):  # pragma: no cover
            raise AssertionError("phase not found")
        return idx

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
    return ShapeQBD(QBD(A0, A1, A2, B1=B1), Y, phantom, tuple(int(v) for v in prof))
