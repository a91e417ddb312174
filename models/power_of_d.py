"""Power-of-d (supermarket) load balancing, with load-comparison errors.

``n`` unit-rate FCFS servers, Poisson arrivals of rate ``n * lambda``; each arrival
samples ``d`` servers (without replacement by default) and joins the shortest sampled
queue, ties uniform. With *independent* errors (probability ``eps``) the job joins
the LONGEST sampled queue instead; with *dependent* errors the error (probability
``eps``) can only happen when max - min of the sampled queue lengths is <= ``g``.
Queue lengths count the job in service; E[T] = E[L] / (n lambda) by Little.

Three descriptions of the same system, each used by a different method:

* **Lumped CTMC** (``level_chain``, method ``exact``): by symmetry the sorted
  queue-length vector ``x_0 <= ... <= x_{n-1}`` is a Markov chain. An arrival joins
  the server in ascending position ``i`` (ties resolved by position) with a
  probability that depends only on ``i`` for error-free and independent-error
  routing, e.g. ``C(n-1-i, d-1)/C(n, d)`` without replacement; an arrival that joins
  a tie group increments its *last* member and a departure from a group decrements its
  *first* member, which keeps the vector sorted. Sorted vectors are ranked in closed
  form by the combinatorial number system (``rank(x) = sum_i C(x_i + i, i + 1)``),
  so every target index is found by one vectorised ``searchsorted``; transitions
  change the total ``L`` by +-1 (or more downwards under the lower rule), which the
  level-aggregation solver (:mod:`exactq.solvers.level_aggregation`) exploits.
  The state set is ``{x sorted: c . x <= C}`` for a cost vector ``c`` fitted to the
  log-probabilities of a smaller solve (a linear model of ``-log pi`` is accurate to
  a few nats: at n = 6 and 8 the set needed for a given mass is within 10% of the
  ideal one, the states sorted by probability), so the kept states are nearly the
  most probable ones.
* **Population process** (``population``, methods ``meanfield`` and ``refined``):
  the occupancy fractions ``s_k`` (servers with >= k jobs) with drift
  ``ds_k/dt = lambda (A_{k-1}(s) - A_k(s)) - (s_k - s_{k+1})``, ``A_j`` the
  probability that the destination has >= j jobs (Mitzenmacher 2001; Vvedenskaya,
  Dobrushin & Karpelevich 1996; Bhambay & Mukhopadhyay 2023/2024 for the errors).
* **Bounding chains** (``finite_bounds``, method ``bounds``): a truncated lumped
  chain that only ever loses jobs (a lower bound) and a level-independent QBD (level =
  shortest queue, phase = the queue-length differences under caps) that only ever
  gains jobs (an upper bound); see :func:`shape_qbd` and
  :mod:`exactq.solvers.lb_bounds`.

Truncation
----------
The kept set ``{x: c . x <= C}`` is enumerated prefix by prefix (vectorised) and the
cost ``c`` is refitted once from a first solve with the default cost; each further
stage raises ``C`` so that the state count about doubles. Two boundary rules:

* ``redirect`` (method ``exact``): an arrival that would leave the set joins the
  cheapest tie group instead, a departure that would leave it happens at the cheapest
  busy group. No job is lost, so the total number of jobs keeps its true dynamics
  and the truncation error is small (at n = 12, lambda = 0.9 it falls by ~7x per
  doubling of the set). The ``exact`` method estimates it from successive stages.
* ``lower`` (method ``bounds``): arrivals that would leave the set are lost; a
  departure that would leave it also removes one job from every longest queue until
  inside. For routing that depends on positions only (``error`` none or
  independent) the sorted chain is *monotone*: coupling arrivals and departures by
  position, ``x <= y`` (componentwise, sorted) is preserved by every event, so the
  truncated system stays below the true one path by path and its E[L] is a rigorous
  lower bound (slower to converge: each lost job lowers L for a long time).

References
----------
M. Mitzenmacher, "The power of two choices in randomized load balancing", IEEE TPDS
12(10), 2001. N. D. Vvedenskaya, R. L. Dobrushin, F. I. Karpelevich, "Queueing system
with selection of the shortest of two queues: an asymptotic approach", Probl. Inf.
Transm. 32(1), 1996. A. Bhambay, A. Mukhopadhyay et al., "The power of two choices
with load comparison errors", MobiHoc 2023, and the power-of-d version, Performance
Evaluation 2024. F. Ciucu, F. Poloczek, "Randomized load balancing in finite regimes",
ICDCS 2016. N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM
Meas. Anal. Comput. Syst. 1(2), 2017 (SIGMETRICS 2018). W. Winston, "Optimality of the
shortest line discipline", J. Appl. Probab. 14, 1977.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc
from exactq.errors import ModelError, NotApplicableError, TruncationError, UnstableError
from exactq.params import Param
from exactq.statespace import StateSpace

__all__ = [
    "PowerOfD",
    "window_probability",
    "group_arrival_probabilities",
    "position_probabilities",
    "finite_stability_limit",
    "meanfield_stability_limit",
    "enumerate_sorted",
    "colex_rank",
    "SortedSpace",
    "lumped_generator",
    "fit_cost",
    "default_cost",
    "shape_qbd",
    "choose_profile",
    "unlumped_generator",
    "dispatch_tail",
]

_COST_SLACK = 1e-9
_MAX_RANK = 2**62


# ============================================================================ routing
def window_probability(n: int, d: int, sampling: str, width):
    """Probability that all ``d`` sampled servers fall in a given set of ``width`` servers.

    ``C(width, d) / C(n, d)`` without replacement, ``(width / n)^d`` with
    replacement; vectorised over ``width`` (negative widths count as 0).
    """
    width = np.maximum(np.asarray(width), 0)
    if sampling == "with":
        return (width / n) ** d
    table = _window_table(n, d)
    return table[np.minimum(width, n)]


@lru_cache(maxsize=64)
def _window_table(n: int, d: int) -> np.ndarray:
    total = math.comb(n, d)
    t = np.array([math.comb(m, d) / total for m in range(n + 1)])
    t.flags.writeable = False
    return t


def _groups(X: np.ndarray):
    """First and last position of each entry's tie group, for sorted rows ``X``."""
    n = X.shape[1]
    pos = np.arange(n)
    start = np.ones(X.shape, dtype=bool)
    start[:, 1:] = X[:, 1:] != X[:, :-1]
    end = np.ones(X.shape, dtype=bool)
    end[:, :-1] = X[:, :-1] != X[:, 1:]
    first = np.maximum.accumulate(np.where(start, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    return first, last, start, end


def group_arrival_probabilities(X, n, d, sampling, error, eps, g):
    """Probability that an arrival joins each tie group, for sorted states ``X``.

    Parameters
    ----------
    X : (N, n) int array, rows sorted ascending
    n, d : int
    sampling : {"without", "with"}
    error : {"none", "independent", "dependent"}
    eps : float
    g : int

    Returns
    -------
    (N, n) float array
        Entry ``[r, b]`` is the probability that the arrival joins the tie group
        whose LAST position is ``b`` (zero where ``b`` is not the end of a group);
        rows sum to 1.

    Notes
    -----
    With ``W(m)`` = P(all samples within a given set of ``m`` positions)
    (:func:`window_probability`) and a group occupying positions ``[a, b]``:
    P(shortest sample in the group) = W(n - a) - W(n - 1 - b);
    P(longest sample in the group) = W(b + 1) - W(a). Dependent errors
    (Bhambay & Mukhopadhyay) restrict the error to samples with span <= g:
    P(shortest in group, span <= g) = W(u - a + 1) - W(u - b) with ``u`` the last
    position of value <= x_b + g, and symmetrically for the longest with ``w`` the
    first position of value >= x_b - g.
    """
    X = np.asarray(X)
    first, _, _, end = _groups(X)
    if error != "dependent" or eps == 0.0 or g == 0 or d == 1:
        # position-based: group probability = difference of cumulative position probabilities
        err = "independent" if error == "independent" else "none"
        cum = np.concatenate([[0.0], np.cumsum(position_probabilities(n, d, sampling, err, eps))])
        return np.where(end, cum[1:][None, :] - cum[first], 0.0)
    b = np.broadcast_to(np.arange(n), X.shape)
    a = first
    W = lambda m: window_probability(n, d, sampling, m)  # noqa: E731
    p_min = W(n - a) - W(n - 1 - b)
    if True:
        u = np.empty_like(X)
        w = np.empty_like(X)
        for j in range(n):  # n vectorised passes over all states
            col = X[:, j:j + 1]
            u[:, j] = (X <= col + g).sum(axis=1) - 1
            w[:, j] = (X < col - g).sum(axis=1)
        p_min_span = W(u - a + 1) - W(u - b)
        p_max_span = W(b - w + 1) - W(a - w)
        p = p_min + eps * (p_max_span - p_min_span)
    return np.where(end, p, 0.0)


def position_probabilities(n, d, sampling="without", error="none", eps=0.0):
    """Probability that an arrival joins ascending position ``i`` (ties by position).

    Defined for routing that depends on positions only (``error`` none or
    independent): ``(1 - eps) P(min sample at i) + eps P(max sample at i)``. Without
    replacement P(min at i) = ``C(n-1-i, d-1)/C(n, d)``.
    """
    if error == "dependent" and eps > 0 and d > 1:
        raise NotApplicableError("dependent errors depend on the queue lengths, not on positions only")
    i = np.arange(n)
    W = lambda m: window_probability(n, d, sampling, m)  # noqa: E731
    p = W(n - i) - W(n - 1 - i)
    if error == "independent" and eps > 0:
        p = (1.0 - eps) * p + eps * (W(i + 1) - W(i))
    return p


def finite_stability_limit(n, d, sampling="without", error="none", eps=0.0):
    """Largest per-server arrival rate for which the n-server system is stable.

    For position-based routing the fluid (top-k) condition: whenever the ``k``
    longest queues are much longer than the others they receive rate
    ``n lambda P_k``, with ``P_k`` the probability that the arrival joins one of the
    ``k`` top positions, and must drain: ``n lambda P_k < k`` for ``k = 1..n``
    (``k = n`` gives ``lambda < 1``). Without errors ``P_k <= k/n``, so the limit is 1.
    With dependent errors, long queues differ by more than ``g`` from short ones, so
    the error cannot favour them and the limit is 1 as well.

    Returns
    -------
    limit : float
    rule : str
        One line describing the binding constraint.
    """
    if error != "independent" or eps == 0.0:
        return 1.0, "lambda < 1 (total service capacity)"
    p = position_probabilities(n, d, sampling, error, eps)
    tops = np.cumsum(p[::-1])  # P(join one of the k top positions), k = 1..n
    k = np.arange(1, n + 1)
    lim = k / (n * tops)
    j = int(np.argmin(lim))
    if lim[j] >= 1.0:
        return 1.0, "lambda < 1 (total service capacity)"
    return float(lim[j]), (f"the {j + 1} longest queue(s) must drain: "
                           f"{n} lambda P(join top {j + 1}) < {j + 1}")


def meanfield_stability_limit(d, error="none", eps=0.0):
    """Stability limit of the mean-field fixed point (n = infinity).

    Independent errors: the tail of the fixed point decays with ratio
    ``lambda eps d``, so lambda < 1/(eps d) when eps > 1/d (Bhambay & Mukhopadhyay);
    otherwise (and for dependent errors) lambda < 1.
    """
    if error == "independent" and eps * d > 1.0:
        return 1.0 / (eps * d), f"lambda < 1/(eps d) = {1.0 / (eps * d):.6g} (independent errors, eps > 1/d)"
    return 1.0, "lambda < 1"


# ================================================================== mean-field dispatch
def dispatch_tail(s_full, d, error="none", eps=0.0, g=0, power=None):
    """``A_j``: probability that an arrival joins a queue with >= j jobs (mean field).

    Parameters
    ----------
    s_full : (..., K + 1 + g) array (real or complex)
        ``s_0 = 1, s_1, ..., s_K`` followed by ``g`` closure values beyond ``K``.
    d, error, eps, g : routing parameters
    power : callable, optional
        ``w -> P(all d samples fall in a set holding fraction w of the servers)``;
        default ``w**d`` (sampling with replacement, the limit). The refined method
        passes the 1/n correction of sampling without replacement through it.

    Returns
    -------
    (..., K + 1) array: ``A_0 = 1, A_1, ..., A_K``.

    Notes
    -----
    Sampled lengths are i.i.d. with P(>= j) = s_j. Shortest: P(min >= j) = s_j^d.
    Longest: P(max >= j) = 1 - (1 - s_j)^d. Dependent errors add
    ``eps P(min < j <= max, max - min <= g)`` to the shortest-queue term, which is a
    sum over the minimum m in [j - g, j - 1] of window probabilities
    ``psi(s_m - s_{m+g+1}) - psi(s_{m+1} - s_{m+g+1}) - psi(s_m - s_j) + psi(s_{m+1} - s_j)``.
    """
    psi = power if power is not None else (lambda w: w ** d)
    K = s_full.shape[-1] - 1 - (g if error == "dependent" else 0)
    s = s_full[..., :K + 1]
    A = psi(s)
    if error == "independent" and eps > 0:
        if power is None:  # 1 - (1 - s)^d without cancellation for small s
            with np.errstate(divide="ignore", invalid="ignore"):
                longest = -np.expm1(d * np.log1p(-s))
            longest = np.where(s == 1.0, 1.0, longest)
        else:
            longest = 1.0 - psi(1.0 - s)
        A = (1.0 - eps) * A + eps * longest
    elif error == "dependent" and eps > 0 and g > 0:
        extra = np.zeros_like(A)
        j = np.arange(K + 1)
        for off in range(1, g + 1):  # the minimum sits at m = j - off
            m = j - off
            ok = m >= 0
            mm = np.where(ok, m, 0)
            sm, sm1 = s_full[..., mm], s_full[..., mm + 1]
            top = s_full[..., mm + g + 1]
            sj = s_full[..., j]
            term = psi(sm - top) - psi(sm1 - top) - psi(sm - sj) + psi(sm1 - sj)
            extra = extra + np.where(ok, term, 0.0)
        A = A + eps * extra
    return A


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


# ================================================================== measures on states
def _state_measure(measure, states, pi, *, n, lam, d, sampling, error, eps, g):
    """A measure from a distribution ``pi`` over sorted states (lumped or truncated)."""
    L = states.sum(axis=1, dtype=np.int64).astype(float)
    EL = float(pi @ L)
    if measure in MEAN_MEASURES:
        return _from_mean_number(measure, EL, n, lam)
    if measure == "occupancy":
        kmax = int(states.max(initial=0))
        counts = np.zeros(kmax + 1)
        for i in range(n):  # one pass per position
            counts += np.bincount(states[:, i], weights=pi, minlength=kmax + 1)
        s = (counts[::-1].cumsum()[::-1] / n)[1:]
        keep = np.flatnonzero(s >= 1e-12)
        return s[: keep[-1] + 1 if keep.size else 1].tolist()
    if measure == "p_wait":
        total = 0.0
        for lo in range(0, len(states), 500_000):
            X = states[lo:lo + 500_000]
            P = group_arrival_probabilities(X, n, d, sampling, error, eps, g)
            total += float(pi[lo:lo + 500_000] @ (P * (X > 0)).sum(axis=1))
        return total
    raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover


_MEASURES = {
    "mean_response_time": "E[T] = E[L] / (n lambda), sojourn time including service",
    "mean_waiting_time": "E[W] = E[T] - 1, time in queue excluding service",
    "mean_number": "E[L], mean total number of jobs (finite servers)",
    "mean_queue_length": "mean number of jobs per server, E[L] / n",
    "p_wait": "probability that an arrival joins a busy server",
    "occupancy": "s_k, mean fraction of servers with >= k jobs, k = 1, 2, ... (list, down to 1e-12)",
    "stability_limit": "largest per-server arrival rate lambda for which the system is stable",
}


@register_model
@dataclass(frozen=True)
class PowerOfD(Model):
    """Power-of-d load balancing with optional load-comparison errors (module docstring)."""

    name = "power-of-d"
    summary = ("n unit-rate servers, arrivals n*lambda, join the shortest of d sampled queues "
               "(with independent or load-dependent comparison errors); exact finite n or mean field")
    reference = ("Mitzenmacher, IEEE TPDS 12(10) 2001; Bhambay & Mukhopadhyay et al., MobiHoc 2023 and "
                 "Perf. Eval. 2024; Ciucu & Poloczek, ICDCS 2016; Gast & Van Houdt, SIGMETRICS 2018")
    parameters = (
        Param("servers", "int_or_inf", "number of servers n (inf: the mean-field limit)", low=1),
        Param("d", "int", "servers sampled per arrival", default=2, low=1),
        Param("arrival_rate", "float", "arrival rate per server lambda (total n*lambda); "
              "optional for stability_limit", default=None, low=0.0, low_open=True),
        Param("sampling", "choice", "sampling of the d servers", default="without", choices=("without", "with")),
        Param("error", "choice", "load-comparison errors", default="none",
              choices=("none", "independent", "dependent")),
        Param("eps", "float", "error probability (the job joins the longest sampled queue)",
              default=0.0, low=0.0, high=1.0),
        Param("g", "int", "dependent errors: possible only when max - min of the sampled queues <= g",
              default=0, low=0),
    )
    measures = _MEASURES
    methods = ("exact", "meanfield", "refined", "bounds", "ctmc")
    default_measure = "mean_response_time"

    servers: float
    d: int = 2
    arrival_rate: float | None = None
    sampling: str = "without"
    error: str = "none"
    eps: float = 0.0
    g: int = 0

    # ------------------------------------------------------------------ validation
    def check(self):
        if self.error == "none" and self.eps != 0.0:
            raise ModelError(f"eps applies to error=independent or dependent; got eps={self.eps:g} with error=none")
        if self.error != "dependent" and self.g != 0:
            raise ModelError(f"g applies to error=dependent only; got g={self.g} with error={self.error}")
        if self.is_finite and self.d > self.servers:
            raise ModelError(f"d must be <= servers ({int(self.servers)}); got d={self.d}")
        if self.arrival_rate is not None:
            limit, rule = self.stability_limit()
            if self.arrival_rate >= limit:
                raise UnstableError(
                    f"arrival_rate must be < {limit:.6g} for stability ({rule}); got {self.arrival_rate:g}")

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.servers)

    @property
    def n(self) -> int:
        if not self.is_finite:
            raise NotApplicableError("this computation needs a finite number of servers; got servers=inf")
        return int(self.servers)

    @property
    def is_position_based(self) -> bool:
        """Routing depends on the ranks of the sampled queues only (monotone sorted chain)."""
        return self.error != "dependent" or self.eps == 0.0 or self.g == 0 or self.d == 1

    def stability_limit(self) -> tuple[float, str]:
        """``(limit, rule)``: finite n (:func:`finite_stability_limit`) or the mean field."""
        if self.is_finite:
            return finite_stability_limit(int(self.servers), self.d, self.sampling, self.error, self.eps)
        return meanfield_stability_limit(self.d, self.error, self.eps)

    def _lam(self, measure: str) -> float:
        if self.arrival_rate is None:
            raise ModelError(f"missing required parameter arrival_rate for model power-of-d: needed for {measure}")
        return float(self.arrival_rate)

    def _routing(self) -> dict:
        return dict(d=self.d, sampling=self.sampling, error=self.error, eps=self.eps, g=self.g)

    def stability_result(self, method: str):
        from exactq.result import Result

        limit, rule = self.stability_limit()
        return Result(value=limit, method=method, error_estimate=0.0, info={"rule": rule})

    # ------------------------------------------------------------ population (mean field)
    def population(self) -> dict:
        """The occupancy representation for :mod:`exactq.solvers.meanfield`.

        In the limit the ``d`` sampled lengths are i.i.d. with P(>= j) = s_j (with or
        without replacement alike); the ``power_correction`` is the 1/n term of
        sampling without replacement, ``C(nw, d)/C(n, d) - w^d``.
        """
        d, err, eps, g = self.d, self.error, self.eps, self.g
        dep = err == "dependent" and eps > 0 and g > 0
        lam = self.arrival_rate
        limit, rule = meanfield_stability_limit(d, err, eps)
        if err == "independent":
            slope = (1.0 - eps) * (d == 1) + eps * d
            tail_map = lambda x: (1.0 - eps) * x ** d - eps * math.expm1(d * math.log1p(-x)) if x < 1 else 1.0  # noqa: E731,E501
        else:
            slope = 1.0 if d == 1 else 0.0
            tail_map = None if dep else (lambda x: x ** d)
        corr = None
        if self.sampling == "without" and self.is_finite and d > 1:
            corr = lambda w: 0.5 * d * (d - 1) * (w ** d - w ** (d - 1))  # noqa: E731
        return {
            "arrival_rate": lam,
            "service_rate": 1.0,
            "servers": self.servers,
            "dispatch": lambda s, power=None: dispatch_tail(s, d, err, eps, g, power),
            "power": lambda w: w ** d,
            "power_correction": corr,
            "closure": g if dep else 0,
            "bandwidth": g if dep else 0,
            "tail_slope": slope,
            "tail_map": tail_map,
            "stability_limit": limit,
            "stability_rule": rule,
        }

    def population_measure(self, measure, s, tail_sum=0.0):
        """A measure at occupancy ``s = (s_1, s_2, ...)`` (fixed point or refined)."""
        lam = self._lam(measure)
        total = float(np.sum(s) + tail_sum)
        if measure == "mean_queue_length":
            return total
        if measure == "mean_response_time":
            return total / lam
        if measure == "mean_waiting_time":
            return total / lam - 1.0
        if measure == "mean_number":
            return self.n * total
        if measure == "p_wait":
            full = np.concatenate([[1.0], s, np.zeros(self.g + 2)])
            return float(dispatch_tail(full, self.d, self.error, self.eps, self.g)[1])
        if measure == "occupancy":
            s = np.asarray(s)
            keep = np.flatnonzero(s >= 1e-12)
            return s[: keep[-1] + 1 if keep.size else 1].tolist()
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover

    def population_measure_error(self, measure, fp):
        """Error estimate of a measure at the fixed point: the last Newton step."""
        lam = self._lam(measure)
        if measure in ("mean_response_time", "mean_waiting_time"):
            return fp.step / lam
        if measure == "mean_queue_length":
            return fp.step
        if measure == "mean_number":
            return self.n * fp.step
        return fp.step

    # ------------------------------------------------------------- lumped level chain
    def exact_delegate(self):
        """With infinitely many servers the exact value is the mean-field limit."""
        return None if self.is_finite else "meanfield"

    def truncation_schedule(self, tol):
        """First set ~2500 n states (default cost, at most 40 000); the fitted cost then
        triples the count; afterwards the bound grows so that the count doubles per stage
        (the step in nats is estimated from the last two stages; 1.5 nats at first)."""
        return {"start_states": int(min(40_000, 2_500 * self.n)), "first_growth": 3.0, "step": 1.5, "growth": 2.0}

    def default_cost(self) -> np.ndarray:
        return default_cost(self.n, self._lam("the exact chain"))

    def level_chain(self, truncation=None, previous=None, *, rule="redirect", target_states=None):
        """The sorted chain on ``{x: cost . x <= bound}`` (module docstring).

        Parameters
        ----------
        truncation : float, optional
            The bound, with the default cost (:func:`default_cost`) unless
            ``previous`` carries a fitted one.
        previous : (LumpedChain, pi), optional
            The last truncation and its solution: the next set uses the cost fitted to
            ``-log pi`` (:func:`fit_cost`), with a bound that multiplies the state count
            by about ``first_growth`` on the first fit and then adds ``step`` nats.
        rule : {"redirect", "lower", "block"}
            Boundary rule. ``redirect`` (default for ``exact``): an arrival leaving the
            set joins the cheapest tie group, a departure leaving it happens at the
            cheapest busy group (the number of jobs evolves as in the true system);
            ``lower``: jobs are lost (a rigorous lower bound for position-based
            routing); ``block``: transitions are suppressed.
        target_states : int, optional
            Without ``truncation``: choose the bound for about this many states.
        """
        n, lam = self.n, self._lam("the exact chain")
        sched = self.truncation_schedule(None)
        cost = self.default_cost()
        stage = 0
        if previous is not None:
            pchain, ppi = previous
            stage = pchain.stage + 1
            counts = list(getattr(pchain, "counts", []))
            if np.array_equal(pchain.cost, cost):
                cost = fit_cost(pchain.states, ppi, C=pchain.bound, cost=pchain.cost,
                                floor=0.5 * np.cumsum(cost[::-1])[::-1])
                target_states = int(sched["first_growth"] * pchain.n_states)
                truncation = None
                counts = []
            else:
                cost = pchain.cost
                step = sched["step"]
                if len(counts) >= 2 and counts[-1][1] > counts[-2][1]:
                    # states grow ~exponentially in the bound: aim at x growth per stage
                    slope = math.log(counts[-1][1] / counts[-2][1]) / (counts[-1][0] - counts[-2][0])
                    step = min(max(math.log(sched["growth"]) / slope, 0.5), 8.0)
                truncation = pchain.bound + step
        if truncation is None:
            target = target_states or sched["start_states"]
            truncation = _bound_for(cost, target)
        X = enumerate_sorted(cost, float(truncation))
        space = SortedSpace(X)
        chain = lumped_generator(space, n=n, lam=lam, cost=cost, bound=float(truncation), rule=rule,
                                 **self._routing())
        chain.stage = stage
        chain.counts = (counts if previous is not None else []) + [(float(truncation), len(X))]
        chain.guess = np.exp(-(X @ cost - (X @ cost).min()))
        return chain

    def level_measure(self, measure, chain, pi):
        return _state_measure(measure, chain.states, pi, n=self.n, lam=self._lam(measure), **self._routing())

    # -------------------------------------------------- CTMC for the foundation (small n)
    @property
    def is_infinite(self) -> bool:
        return True

    def truncation_start(self, tol: float) -> int:
        lam = self._lam("the ctmc method")
        return int(math.ceil(math.log(tol) / math.log(lam) / max(1, self.n - 1))) + 6

    def ctmc(self, truncation=None):
        """Sorted chain with every queue <= ``truncation`` (block rule), as an exactq CTMC."""
        n, lam = self.n, self._lam("the ctmc method")
        if truncation is None:
            raise ModelError("power-of-d needs a truncation level (largest queue length)")
        K = int(truncation)
        cost = np.zeros(n)
        cost[-1] = 1.0
        X = enumerate_sorted(cost, K)
        space = StateSpace(X, [f"x{i}" for i in range(n)], lo=np.zeros(n, np.int64), hi=np.full(n, K))
        X = space.states
        P = group_arrival_probabilities(X, n, **self._routing())
        first, last, start, _ = _groups(X)
        unit = np.eye(n, dtype=np.int64)

        def arrival(b):
            return Event(f"arrival_{b}", lambda s: (n * lam * P[:, b], s + unit[b]))

        def departure(a):
            rate = np.where(start[:, a] & (X[:, a] > 0), last[:, a] - a + 1, 0).astype(float)
            return Event(f"departure_{a}", lambda s: (rate, s - unit[a]))

        events = [arrival(b) for b in range(n)] + [departure(a) for a in range(n)]
        return build_ctmc(space, events, initial=np.zeros(n, np.int64),
                          truncation={"level": K, "rule": "block", "variables": "largest queue"},
                          constants={"K": K, "n": n, "arrival_rate": lam},
                          rewards={"L": X.sum(axis=1).astype(float)})

    def ctmc_measure(self, measure, chain, pi):
        if measure == "stability_limit":
            return self.stability_limit()[0]
        return _state_measure(measure, np.asarray(chain.states), pi, n=self.n, lam=self._lam(measure),
                              **self._routing())

    # -------------------------------------------------------------------- bounds
    def finite_bounds(self) -> dict:
        """Bounding chains for the ``bounds`` method (:mod:`exactq.solvers.lb_bounds`).

        ``lower_chain(previous)``: the sorted chain with the *lower* rule (jobs are only
        lost) on a fitted truncation; ``upper_qbd(spread)``: the QBD of
        :func:`shape_qbd` (jobs are only gained). Both bound E[L] for position-based
        routing, by the monotone coupling of the module docstring.
        """
        n, lam = self.n, self._lam("bounds")
        routing = self._routing()

        def lower_chain(previous=None, target_states=None):
            return self.level_chain(None, previous, rule="lower", target_states=target_states)

        def upper_qbd(profile):
            return shape_qbd(n, self.d, lam, profile, self.sampling, self.error, self.eps)

        def profile_for(chain, pi, max_phases):
            X = chain.states
            return choose_profile(n, X - X[:, :1], pi, max_phases)

        return {"servers": n, "arrival_rate": lam, **routing, "position_based": self.is_position_based,
                "lower_chain": lower_chain, "upper_qbd": upper_qbd, "profile_for": profile_for,
                "measure": lambda measure, chain, pi: self.level_measure(measure, chain, pi),
                "from_mean_number": lambda measure, EL: _from_mean_number(measure, EL, n, lam)}


#: the measures that follow from E[L] alone (Little), increasing in it
MEAN_MEASURES = ("mean_number", "mean_queue_length", "mean_response_time", "mean_waiting_time")


def _from_mean_number(measure, EL, n, lam):
    """Measures that are increasing functions of E[L] (so bounds carry over)."""
    if measure == "mean_number":
        return EL
    if measure == "mean_queue_length":
        return EL / n
    if measure == "mean_response_time":
        return EL / (n * lam)
    if measure == "mean_waiting_time":
        return EL / (n * lam) - 1.0
    raise NotApplicableError(f"bounds are available for mean_number, mean_queue_length, mean_response_time "
                             f"and mean_waiting_time; got {measure}")


def _bound_for(cost, target: int) -> float:
    """Smallest bound (in steps of 0.25 nats) whose set has at least ``target`` states."""
    C = float(np.max(cost)) + 1.0
    count = len(enumerate_sorted(cost, C, max_states=50 * target))
    while count < target:
        C += 0.25 if count > target / 4 else 1.0
        count = len(enumerate_sorted(cost, C, max_states=50 * target))
    return C
