"""Step-bounded analysis of discrete-time Markov chains, and the ``dtmc`` method.

- :func:`step_bounded_until` — the PCTL probability of ``left U<=k right`` from every
  state: ``k`` sparse products with the chain made absorbing in ``right`` and in
  ``¬left ∧ ¬right`` (Hansson & Jonsson 1994; Baier & Katoen, *Principles of Model
  Checking*, 2008, Sec. 10.2).
- :func:`step_values` — ``P^k v`` from every state, optionally with the states outside
  a set killed at every step (the first phase of ``left U[k1,k2] right``, and the
  instantaneous reward ``I=k``).
- :func:`step_cumulative` — the expected reward of the first ``k`` steps,
  ``Σ_{i<k} P^i r`` (``C<=k``).

Unbounded properties of a DTMC use the CTMC algorithms on ``P - I`` (the chain with
one jump per unit of time has the same reachability probabilities and stationary law,
and its expected hitting times are expected numbers of steps).

The ``dtmc`` method solves the stationary law of a model's DTMC representation with
the stationary solvers (:func:`exactq.solvers.stationary.solve_stationary`, on
``P - I``), with ``verify`` re-solving at 50 digits; an infinite model is truncated by
the one truncation driver (``dtmc(level)``, ``truncation_start``, ``dtmc_size``), as
the ``ctmc`` method does.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from exactq.errors import ModelError

from .transient import DETECT_EVERY, LIMIT_RULE, STEADY_STATE_MIN_STEPS, _Stepper, as_mask, long_run_values, validated

__all__ = ["as_stochastic", "step_bounded_until", "step_values", "step_cumulative", "step_until_sets",
           "step_keep_sets"]


#: what :func:`as_stochastic` accepts: entries at most this, rows summing to 1 within ROW_SUM_TOL
PROBABILITY_MAX = 1 + 1e-12
ROW_SUM_TOL = 1e-9


def as_stochastic(P, *, name: str = "P") -> sp.csr_array:
    """Validate a transition matrix (square, entries in [0, 1], rows summing to 1) as float CSR (once per
    matrix: :func:`~exactq.solvers.transient.validated`)."""
    return validated(f"stochastic {name}", P, lambda M: _as_stochastic(M, name))


def _as_stochastic(P, name: str) -> sp.csr_array:
    try:
        A = sp.csr_array(P, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name} must be a square sparse or dense matrix; got {type(P).__name__}") from exc
    n = A.shape[0]
    if A.ndim != 2 or A.shape != (n, n) or n == 0:
        raise ModelError(f"{name} must be a non-empty square matrix; got shape {A.shape}")
    A.sum_duplicates()
    if not np.all(np.isfinite(A.data)) or np.any(A.data < 0) or np.any(A.data > PROBABILITY_MAX):
        raise ModelError(f"{name} must have entries in [0, 1]")
    rows = np.asarray(A.sum(axis=1)).ravel()
    bad = np.abs(rows - 1) > ROW_SUM_TOL
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ModelError(f"rows of {name} must sum to 1; row {i} (state {i}) sums to {rows[i]:.12g}")
    return A


def _steps(k) -> int:
    try:
        kf = float(k)
    except (TypeError, ValueError):
        raise ModelError(f"a step bound must be an integer >= 0; got {k!r}") from None
    if not (kf >= 0 and kf == int(kf)):
        raise ModelError(f"a step bound of a dtmc must be an integer >= 0; got {k!r}")
    return int(kf)


def period(P) -> int:
    """The least common multiple of the periods of the closed classes of ``P`` (1: every one is aperiodic).

    The period of an irreducible class is the gcd of ``d(u) + 1 - d(v)`` over its
    transitions ``u -> v``, with ``d`` the breadth-first distance from one of its states
    (e.g. Bremaud, *Markov Chains*, 1999, Ch. 2, Thm. 5.1 (the cyclic classes)).

    Examples
    --------
    >>> period(np.array([[0.0, 1.0], [1.0, 0.0]])), period(np.array([[0.5, 0.5], [1.0, 0.0]]))
    (2, 1)
    """
    from scipy.sparse.csgraph import shortest_path

    from .structure import communicating_classes

    A = sp.csr_array(P, dtype=float)
    A.eliminate_zeros()
    cls = communicating_classes(sp.csr_matrix(A))
    labels = cls.labels
    sizes = np.bincount(labels, minlength=cls.n_classes)
    coo = A.tocoo()
    out = 1
    for c in cls.closed[sizes[cls.closed] > 1]:  # a loop over the (few) larger closed classes
        idx = np.flatnonzero(labels == c)
        sub = sp.csr_matrix(A[idx][:, idx])
        if np.any(sub.diagonal() > 0):
            continue  # a self-loop: aperiodic
        d = shortest_path(sub, method="D", unweighted=True, indices=0)
        sc = sub.tocoo()
        g = int(np.gcd.reduce(np.abs(d[sc.row] + 1 - d[sc.col]).astype(np.int64)))
        out = int(np.lcm(out, max(g, 1)))
    del coo
    return out


def _power(P, L: int):
    """``P^L`` as a sparse matrix (its size checked against the memory budget as it grows)."""
    from exactq.budget import require_memory

    A = sp.csr_array(P)
    out = A
    for _ in range(L - 1):
        out = (out @ A).tocsr()
        require_memory(out.nnz * 24.0, f"the {L}-step transition matrix of a periodic chain (steady-state detection)")
    return out


def _settle(P, v, k: int, eps: float, solver: str):
    """``P^k v`` for a huge ``k`` by steady-state detection; ``(values, info)`` or None if it does not settle.

    With ``L`` the period (lcm over the closed classes), ``P^k v = (P^L)^m w`` with
    ``w = P^c v`` and ``k = mL + c``; ``P^L`` has aperiodic closed classes, so
    ``(P^L)^m w`` tends to ``u``, the long-run values of ``w`` under ``P^L``, and
    ``max |(P^L)^m w - u|`` never increases (:func:`~exactq.solvers.transient.long_run_values`).
    Stopped once it is below ``eps max|v| / 2``; the error is at most that gap.
    """
    L = period(P)
    if L * DETECT_EVERY * 4 > k:
        return None
    A = sp.csr_array(P)
    m, c = divmod(k, L)
    w = np.asarray(v, dtype=float).copy()
    for _ in range(c):
        w = A @ w
    PL = A if L == 1 else _power(A, L)
    n = A.shape[0]
    u, linfo = long_run_values((PL - sp.eye_array(n, format="csr")).tocsr(), w, solver=solver)
    scale = float(np.max(np.abs(v), initial=0.0))
    slack = (float(linfo["residual"]) + 8 * np.finfo(float).eps) * max(scale, 1.0)
    x = w
    for j in range(m + 1):  # a loop over products, not states
        if j % DETECT_EVERY == 0:
            gap = float(np.max(np.abs(x - u), initial=0.0)) + slack
            if gap <= eps * max(scale, 1e-300) / 2:
                return u, {"period": L, "steps": int(j * L + c), "gap_to_limit": gap, "rule": LIMIT_RULE,
                           "limit_residual": float(linfo["residual"])}
        if j == m:
            return x, {"period": L, "steps": int(k), "gap_to_limit": 0.0, "rule": "all steps made"}
        x = PL @ x
    return None  # pragma: no cover


#: step-bounded reachability iterates on the states near the target only when they are at most this share of
#: the chain (the search and the sub-chain cost about as much as a few steps on the whole chain)
NEAR_SHARE = 0.5

#: the depth-bounded search expands this many levels itself; a deeper search goes on in one shortest-path call
#: (each level costs ~12 us of NumPy calls: a random walk's 1,000 levels of one or two states each took 12 ms)
SEARCH_LEVELS = 16


def step_bounded_until(P, left_mask, right_mask, steps) -> tuple[np.ndarray, dict]:
    """Probability of ``left U<=steps right`` from every state.

    Parameters
    ----------
    P : (n, n) sparse or dense array
        Transition probabilities (rows sum to 1).
    left_mask, right_mask : (n,) bool array_like
    steps : int
        The step bound ``k >= 0``.

    Returns
    -------
    probs : (n,) ndarray
        Exactly 1 on ``right``; the iteration ``x_{i+1} = 1_right + 1_{left ∧ ¬right} P x_i``
        from ``x_0 = 1_right``, ``k`` times.
    info : dict
        ``method``, ``matvecs``, ``seconds``.

    Examples
    --------
    A coin flipped until heads (probability 1/2 each step): ``P(F<=3 heads) = 1 - 1/8``.

    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> probs, _ = step_bounded_until(P, [True, True], [False, True], 3)
    >>> float(probs[0])
    0.875
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    go = left & ~right
    near = _within_steps(A, go, right, k)
    if near is not None:
        # only the go states that reach `right` within k steps through go states can have a value other than
        # 0 (and the right states have 1): the iteration runs on those, with `right` merged into one absorbing
        # goal state and everything else into one absorbing state of value 0 (the held-out gambler's ruin,
        # F<=1000 on 100,001 states: 1,000 of them)
        idx = np.flatnonzero(near & go)
        m = idx.size
        # B from the rows of idx in one pass: a transition to a state of idx keeps its column (renumbered), one to
        # `right` goes to column m, any other to column m + 1, and the duplicates are summed; two rows of one
        # self-loop each close it (a sparse block matrix of the same took 1 ms of a 5 ms property at 643 states)
        rows = A[idx]
        col = np.full(n, m + 1, dtype=np.int64)
        col[right] = m
        col[idx] = np.arange(m)
        indptr = np.concatenate([rows.indptr, [rows.indptr[-1] + 1, rows.indptr[-1] + 2]])
        B = sp.csr_array((np.concatenate([rows.data, [1.0, 1.0]]), np.concatenate([col[rows.indices], [m, m + 1]]),
                          indptr), shape=(m + 2, m + 2))
        B.sum_duplicates()
        y, info = _step_bounded_until(B, np.r_[np.ones(m, bool), True, False], np.r_[np.zeros(m, bool), True, False],
                                      k, t0)
        x = right.astype(float)
        x[idx] = y[:m]
        info["states_iterated"] = int(m)
        return x, info
    return _step_bounded_until(A, left, right, k, t0)


def _within_steps(A: sp.csr_array, go: np.ndarray, right: np.ndarray, k: int) -> np.ndarray | None:
    """The states from which ``right`` can be reached in at most ``k`` steps through ``go`` states, or ``None``
    when that is (nearly) every state: a breadth-first search from ``right`` backwards along the transitions,
    stopped at depth ``k`` (:func:`_within_depth`)."""
    n = A.shape[0]
    if k >= n or not right.any():
        return None
    T = A.T.tocsr()  # row j: the states i with a transition i -> j
    # the reversed graph: j -> i for a transition i -> j out of a go state i
    return _within_depth(T, right, k, allowed=go, cap=NEAR_SHARE * n)


def _within_depth(A: sp.csr_array, starts: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
                  cap: float = math.inf) -> np.ndarray | None:
    """The states within ``k`` edges ``i -> A.indices[A.indptr[i]:A.indptr[i+1]]`` (stored entries > 0) of a
    ``starts`` state, entering only ``allowed`` states; ``None`` as soon as more than ``cap`` states besides
    the disallowed starts are found.

    A breadth-first search that expands only each level's new states (the edges of the states found, once
    each): the search for a target reached from nearly everywhere stops after a few levels (Herman's ring of
    13 processes, 1.6M transitions, ``F<=10``: one transpose and three levels instead of a graph of every
    transition for :func:`scipy.sparse.csgraph.dijkstra`, 65 -> 12 ms). After :data:`SEARCH_LEVELS` levels
    the rest of a deeper search is one unweighted :func:`~scipy.sparse.csgraph.dijkstra` from the last level,
    limited to the levels left (the gambler's ruin of 10,001 states, ``F<=1000``: 12 -> 1 ms).
    """
    indptr, indices, data = A.indptr, A.indices, A.data
    near = np.array(starts, dtype=bool, copy=True)
    frontier = np.flatnonzero(near)
    count = frontier.size if allowed is None else int(np.count_nonzero(near & allowed))
    for level in range(k):
        if level == SEARCH_LEVELS and frontier.size:
            near |= _within_depth_graph(A, frontier, k - level, allowed)
            count = int(np.count_nonzero(near if allowed is None else near & allowed))
            break
        if count > cap:
            return None
        if frontier.size == 0:
            break
        lo = indptr[frontier]
        length = indptr[frontier + 1] - lo
        total = int(length.sum())
        if total == 0:
            break
        pos = np.repeat(lo - (np.cumsum(length) - length), length) + np.arange(total)
        nb = indices[pos[data[pos] > 0]]
        nb = nb[~near[nb]]
        if allowed is not None:
            nb = nb[allowed[nb]]
        frontier = np.unique(nb)
        near[frontier] = True
        count += frontier.size
    return None if count > cap else near


def _within_depth_graph(A: sp.csr_array, sources: np.ndarray, k: int, allowed: np.ndarray | None) -> np.ndarray:
    """The states within ``k`` edges of ``sources`` by :func:`_within_depth`'s edges, in one call of SciPy's
    unweighted Dijkstra from every source (``min_only``) with the limit ``k``."""
    from scipy.sparse.csgraph import dijkstra

    keep = A.data > 0
    if allowed is not None:
        keep &= allowed[A.indices]
    G = sp.csr_array((keep.astype(float), A.indices.copy(), A.indptr.copy()), shape=A.shape)
    G.eliminate_zeros()  # in place: on copies of the caller's index arrays
    return np.isfinite(dijkstra(G, directed=True, indices=sources, unweighted=True, min_only=True, limit=k + 0.5))


def _reachable_within(A: sp.csr_array, sources: np.ndarray, k: int) -> np.ndarray | None:
    """The states a path from ``sources`` can be in within ``k`` steps, or ``None`` when that is more than
    :data:`NEAR_SHARE` of the chain (:func:`_within_depth` forwards).

    A value after ``k`` steps (``P^k v``, ``Σ_{i<k} P^i r``) at a source depends only on these states: a path
    from it is at distance at most ``i`` at step ``i``, and only the transitions of states at distance below
    ``k`` are taken, all inside the set. So the iteration on the sub-matrix of these states (the transitions
    that leave it dropped) is exact at the sources, and says nothing elsewhere.
    """
    n = A.shape[0]
    if k >= n or not np.any(sources):
        return None
    return _within_depth(sp.csr_array(A), sources, k, cap=NEAR_SHARE * n)


def _on_reachable(A: sp.csr_array, sources, k: int, rows: np.ndarray | None, b: np.ndarray | None,
                  x0: np.ndarray, t0: float):
    """``x -> diag(rows) A x + b`` ``k`` times from ``x0`` on the states of :func:`_reachable_within` only (the
    other entries NaN), with its info; ``None`` without ``sources`` or when those states are not few."""
    if sources is None:
        return None
    near = _reachable_within(A, sources, k)
    if near is None:
        return None
    idx = np.flatnonzero(near)
    step = _step_operator(A[idx][:, idx].tocsr(), None if rows is None else rows[idx],
                          None if b is None else b[idx], k)
    y = step.steps(step.start(x0[idx]), k)
    return _spread(A.shape[0], idx, y), {"method": "step iteration", "matvecs": k,
                                         "states_iterated": int(idx.size), "seconds": time.perf_counter() - t0}


def _spread(n: int, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A vector of ``n`` NaNs with ``values`` at ``idx`` (a value only where it was computed)."""
    out = np.full(n, np.nan)
    out[idx] = values
    return out


def _step_bounded_until(A: sp.csr_array, left: np.ndarray, right: np.ndarray, k: int, t0: float):
    n = A.shape[0]
    go = (left & ~right).astype(float)
    x = right.astype(float)
    base = right.astype(float)
    u = None
    if k > STEADY_STATE_MIN_STEPS:
        # x_i increases to the unbounded-until probability u: stop once within eps of it
        from .reachability import until_probability

        u, uinfo = until_probability(A - sp.eye_array(n, format="csr"), left, right)
        slack = float(uinfo.get("residual", 0.0)) + 8 * np.finfo(float).eps
    step = _step_operator(A, go, base, k)
    x = step.start(x)
    for i in range(0, k, DETECT_EVERY if u is not None else max(k, 1)):  # blocks of steps, not states
        if u is not None:
            gap = float(np.max(u - x, initial=0.0)) + slack
            if gap <= 1e-12 / 2:
                return x, {"method": "step iteration", "matvecs": i, "seconds": time.perf_counter() - t0,
                           "error_bound": gap,
                           "steady_state_detection": {"steps": i, "gap_to_limit": gap,
                                                      "rule": "x_i increases to the unbounded-until probability; "
                                                              "stopped within eps of it"}}
        x = step.steps(x, min(k - i, DETECT_EVERY) if u is not None else k)  # base + go * (A @ x)
    return x.copy(), {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def _step_operator(A: sp.csr_array, rows: np.ndarray | None, b: np.ndarray | None, k: int) -> _Stepper:
    """``x -> diag(rows) A x + b`` as a :class:`~exactq.solvers.transient._Stepper` (SciPy's compiled product
    into reused buffers): ``A @ x`` and the element-wise updates cost 13 us a step on the 2,694-state
    bounded retransmission protocol, the product alone 4 us. ``rows`` (0/1 per state) zeroes the rows of
    the states whose value is fixed; ``None`` keeps every row."""
    M = A
    if rows is not None:  # the rows scaled in place of a product with a diagonal matrix (a third of the time)
        M = sp.csr_array((A.data * np.repeat(np.asarray(rows, dtype=float), np.diff(A.indptr)), A.indices.copy(),
                          A.indptr.copy()), shape=A.shape)
        M.eliminate_zeros()
    return _Stepper(M, b, products=k)


def step_values(P, values, steps, *, keep=None, eps: float = 1e-12, solver: str = "auto",
                sources=None) -> tuple[np.ndarray, dict]:
    """``E_s[v(X_k)]`` from every state, the path killed (value 0) when it leaves ``keep`` before step ``k``.

    Parameters
    ----------
    P : (n, n) sparse or dense array
    values : (n,) array_like
    steps : int
    keep : (n,) bool array_like, optional
        The states the path must be in at steps ``0 .. k-1`` (default: all).
    sources : (n,) bool array_like, optional
        Only these states' values are needed (a query's initial states): when the states
        they reach within ``k`` steps are few (:func:`_reachable_within`), the iteration
        runs on those, and the other entries of ``out`` are NaN.

    Returns
    -------
    out : (n,) ndarray
        ``z_k`` with ``z_0 = v`` and ``z_{i+1} = 1_keep · P z_i``.
    info : dict

    Examples
    --------
    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> float(step_values(P, [0.0, 1.0], 2)[0][0])
    0.75
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    z = np.asarray(values, dtype=float).copy()
    if z.shape != (n,):
        raise ModelError(f"values must have shape ({n},); got {z.shape}")
    mask = None if keep is None else as_mask(keep, n, "keep").astype(float)
    near = _on_reachable(A, None if sources is None else as_mask(sources, n, "sources"), k, mask, None, z, t0)
    if near is not None:
        return near
    if k > STEADY_STATE_MIN_STEPS:
        # the killed chain as a stochastic one: a cemetery state (value 0) takes what leaves `keep`
        B, z_ext = A, z
        if mask is not None:
            K = (sp.diags_array(mask) @ A).tocsr()
            lost = 1.0 - np.asarray(K.sum(axis=1)).ravel()
            B = sp.block_array([[K, sp.csr_array(lost[:, None])],
                                [sp.csr_array((1, n)), sp.csr_array(np.ones((1, 1)))]], format="csr")
            z_ext = np.append(z, 0.0)
        settled = _settle(B, z_ext, k, eps, solver)
        if settled is not None:
            out, sinfo = settled
            return out[:n].copy(), {"method": "step iteration", "matvecs": sinfo["steps"],
                                    "error_bound": sinfo["gap_to_limit"], "seconds": time.perf_counter() - t0,
                                    "steady_state_detection": sinfo}
    step = _step_operator(A, mask, None, k)
    z = step.steps(step.start(z), k)  # mask * (A @ z), k times
    return z.copy(), {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def step_cumulative(P, reward, steps, *, eps: float = 1e-12, solver: str = "auto",
                    sources=None) -> tuple[np.ndarray, dict]:
    """Expected reward of the first ``steps`` steps, ``Σ_{i<k} P^i r``, from every state.

    For ``k`` beyond :data:`~exactq.solvers.transient.STEADY_STATE_MIN_STEPS` the sum is
    taken over blocks of ``L`` steps (``L`` the period), ``b = Σ_{c<L} P^c r``, and
    stopped at the first block ``M`` where ``(P^L)^M b`` is within ``eps max|r| L / 2`` of
    its limit ``u`` (:func:`~exactq.solvers.transient.long_run_values`); the remaining
    blocks add ``u`` each (the steady state's reward for the remaining steps), with an
    error of at most the gap times their number.

    With ``sources`` (the states whose values are needed), the sum is taken on the states
    they reach within ``k`` steps when those are few, as in :func:`step_values` (NaN
    elsewhere).

    Examples
    --------
    A reward of 1 per step in state 0, left with probability 1/2 per step for an
    absorbing state: ``C<=3`` from state 0 is ``1 + 1/2 + 1/4``.

    >>> P = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> float(step_cumulative(P, [1.0, 0.0], 3)[0][0])
    1.75
    """
    t0 = time.perf_counter()
    A = as_stochastic(P)
    n = A.shape[0]
    k = _steps(steps)
    r = np.asarray(reward, dtype=float)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise ModelError(f"reward must be {n} finite numbers (one per state)")
    near = _on_reachable(A, None if sources is None else as_mask(sources, n, "sources"), k, None, r, np.zeros(n),
                         t0)
    if near is not None:  # only the sources' values (see step_values): on the states they reach within k steps
        return near
    if k > STEADY_STATE_MIN_STEPS:
        out = _settled_sum(A, r, k, eps, solver)
        if out is not None:
            x, sinfo = out
            return x, {"method": "step iteration", "matvecs": sinfo["steps"], "error_bound": sinfo["error_bound"],
                       "seconds": time.perf_counter() - t0, "steady_state_detection": sinfo}
    step = _step_operator(A, None, r, k)
    x = step.steps(step.start(np.zeros(n)), k)  # r + A @ x, k times
    return x.copy(), {"method": "step iteration", "matvecs": k, "seconds": time.perf_counter() - t0}


def _settled_sum(A, r, k: int, eps: float, solver: str):
    """``Σ_{i<k} P^i r`` by blocks of the period and steady-state detection (see :func:`step_cumulative`).

    With ``k = mL + c``: ``Σ_{j<m} (P^L)^j b + (P^L)^m p`` where ``b = Σ_{i<L} P^i r`` and
    ``p = Σ_{i<c} P^i r``; both sequences ``(P^L)^j b`` and ``(P^L)^j p`` are followed to
    their limits, and the sum is completed once both are within the tolerance.
    """
    L = period(A)
    if L * DETECT_EVERY * 4 > k:
        return None
    n = A.shape[0]
    m, c = divmod(k, L)
    b = np.zeros(n)
    p = np.zeros(n)
    x = np.asarray(r, dtype=float).copy()
    for i in range(L):  # b = Σ_{i<L} P^i r, p = Σ_{i<c} P^i r
        b += x
        if i < c:
            p += x
        x = A @ x
    PL = A if L == 1 else _power(A, L)
    G = (PL - sp.eye_array(n, format="csr")).tocsr()
    ub, binfo = long_run_values(G, b, solver=solver)
    up, pinfo = long_run_values(G, p, solver=solver) if c else (np.zeros(n), {"residual": 0.0})
    scale = float(np.max(np.abs(r), initial=0.0))
    res = max(float(binfo["residual"]), float(pinfo["residual"]))
    slack = (res + 8 * np.finfo(float).eps) * max(scale * L, 1.0)
    tol = eps * max(scale * L, 1e-300) / 2
    acc = np.zeros(n)
    y, z = b, p
    for j in range(m):  # blocks 0 .. m-1 cover the steps 0 .. mL-1
        if j % DETECT_EVERY == 0:
            gap = max(float(np.max(np.abs(y - ub), initial=0.0)), float(np.max(np.abs(z - up), initial=0.0))) + slack
            if gap <= tol:
                rest = m - j
                out = acc + rest * ub + up
                return out, {"period": L, "steps": int(j * L + L), "blocks": int(j), "gap_to_limit": gap,
                             "error_bound": gap * (rest + 1), "steady_from_step": int(j * L),
                             "rule": LIMIT_RULE + " (each remaining block of the period adds u)",
                             "limit_residual": res}
        acc += y
        y = PL @ y
        if c:
            z = PL @ z
    return None


def step_until_sets(adjacency, left_mask, right_mask, steps) -> tuple[np.ndarray, np.ndarray]:
    """The states where ``P(left U<=steps right)`` is exactly 0 and exactly 1, by iteration on the graph.

    With ``pos_0 = one_0 = right``: ``pos_{i+1} = right | (left & ¬right & some successor in
    pos_i)`` and ``one_{i+1} = right | (left & ¬right & every successor in one_i)``, the
    qualitative counterpart of :func:`step_bounded_until` (PRISM's bounded
    precomputation). Both sequences only grow, so the iteration stops at its fixed
    point (at most ``n`` steps) even for a huge bound.

    Parameters
    ----------
    adjacency : (n, n) sparse array
        1 for each transition of positive probability (self-loops included).

    Returns
    -------
    (no, yes) : (n,) bool arrays

    Examples
    --------
    A fair coin flipped until heads: after 3 flips heads has not surely come.

    >>> A = sp.csr_array(np.array([[1.0, 1.0], [0.0, 1.0]]))
    >>> no, yes = step_until_sets(A, [True, True], [False, True], 3)
    >>> no.tolist(), yes.tolist()
    ([False, False], [False, True])
    """
    A = sp.csr_array(adjacency)
    n = A.shape[0]
    k = _steps(steps)
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    go = left & ~right
    pos, one = right.copy(), right.copy()
    for _ in range(k):  # a loop over steps (to the fixed point), not states
        new_pos = right | (go & ((A @ pos.astype(float)) > 0))
        new_one = right | (go & ((A @ (~one).astype(float)) == 0))
        if np.array_equal(new_pos, pos) and np.array_equal(new_one, one):
            break
        pos, one = new_pos, new_one
    return ~pos, one


def step_keep_sets(adjacency, no, yes, steps, keep) -> tuple[np.ndarray, np.ndarray]:
    """``(no, yes)`` after ``steps`` steps that must stay in ``keep`` (the first phase of ``U[k1,k2]``).

    The qualitative counterpart of :func:`step_values` with ``keep``: positive where
    ``keep`` holds and some successor is positive, one where ``keep`` holds and every
    successor is one. Stops early at a fixed point.
    """
    A = sp.csr_array(adjacency)
    n = A.shape[0]
    k = _steps(steps)
    keep = as_mask(keep, n, "keep")
    pos, one = ~np.asarray(no, dtype=bool), np.asarray(yes, dtype=bool).copy()
    for _ in range(k):
        new_pos = keep & ((A @ pos.astype(float)) > 0)
        new_one = keep & ((A @ (~one).astype(float)) == 0)
        if np.array_equal(new_pos, pos) and np.array_equal(new_one, one):
            break
        pos, one = new_pos, new_one
    return ~pos, one
