"""Unbounded reachability and expected hitting times of CTMCs.

- :func:`until_probability` — the probability of ``left U right`` from every state.
- :func:`expected_time` — the expected time to reach a target set from every state.

Both first classify states by graph search (:mod:`scipy.sparse.csgraph`), which
settles the probability-0 and probability-1 states exactly, and then solve one sparse
linear system (:func:`scipy.sparse.linalg.spsolve`) on the remaining states, scaled by
the exit rates (the embedded jump chain), which is non-singular by construction.

References
----------
.. [BK08] C. Baier and J.-P. Katoen, *Principles of Model Checking*, MIT Press, 2008,
   Sec. 10.1.1 (reachability probabilities: the states with probability 0 and 1 by
   graph analysis, and the linear system on the rest).
.. [BHHK03] C. Baier, B. Haverkort, H. Hermanns and J.-P. Katoen, "Model-checking
   algorithms for continuous-time Markov chains", IEEE Transactions on Software
   Engineering 29(6):524–541, 2003 (unbounded until on the embedded DTMC).
.. [Nor97] J. R. Norris, *Markov Chains*, Cambridge University Press, 1997,
   Sec. 3.3 (mean hitting times of a CTMC as the minimal non-negative solution of
   ``-Q_SS k = 1``).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from exactq.errors import AccuracyWarning, ModelError
from exactq.solvers.transient import as_generator, as_mask

__all__ = ["until_probability", "expected_time", "expected_reward", "absorption_values"]

#: Residuals above this (in the scaled system, whose diagonal is 1) trigger an AccuracyWarning.
RESIDUAL_WARN = 1e-8
#: A direct solve states its certified bound as the error estimate too when the bound exceeds this share of the
#: largest |x| (or of 1): an ill-conditioned system (the biased gambler's ruin with 100,001 states, condition
#: ~N^2) lost 2.8e-9 of P(rich) in the LU, within its bound of 1.1e-8, and said nothing
DIRECT_ESTIMATE_MIN = 1e-12


class _Predecessors:
    """The transition graph of a generator reversed: for each state, the states with a positive rate into it
    (itself too, for a stochastic matrix's self-loop: no reachability changes by it).

    Built once (one CSR -> CSC conversion and a mask, no COO round trip) and restricted to
    a set of movable states by a mask over its entries, so that the two searches of
    :func:`_prob01`, which move through the same states, share one graph (crowds
    TotalRuns=5, CrowdSize=10, 58,202 states: 23 ms -> 4 ms for the pair).
    """

    def __init__(self, Q):
        C = sp.csc_array(Q)
        self.n = C.shape[0]
        # the positive entries, and the diagonal: a self-loop changes no reachability and no strong component, so
        # when the only other entries are a generator's negative diagonal the arrays are C's own (crowds
        # TotalRuns=6, CrowdSize=15, 10M entries: dropping the 1.3M diagonal entries took 102 ms)
        keep = C.data > 0
        dropped = keep.size - np.count_nonzero(keep)
        if dropped == 0 or dropped == np.count_nonzero(C.diagonal() < 0):
            self.indices, self.indptr = C.indices, C.indptr
        else:
            self.indices, self.indptr = C.indices[keep], _kept_indptr(keep, C.indptr)

    def components(self) -> tuple[int, np.ndarray]:
        """The chain's strong components ``(count, labels)``, found once (those of the reversed graph are the
        same: :func:`scipy.sparse.csgraph.connected_components`)."""
        found = getattr(self, "_components", None)
        if found is None:
            R = sp.csr_array((_ones(self.indices.size), self.indices, self.indptr), shape=(self.n, self.n))
            found = self._components = csgraph.connected_components(R, directed=True, connection="strong")
        return found

    def block_order(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """A block triangular order of the system on ``states`` (``-Q[states][:, states]``, its unknowns numbered
        as ``states``'s true entries), by the chain's strong components, or None.

        A system's graph is a subgraph of the chain's, so the chain's components, in an order where every
        transition leads to an earlier or the same component, put each system in block lower triangular form
        with blocks no larger than theirs. That order is checked once, on every transition of the chain
        (Pearce's numbering gives it; None when it does not); each system then takes it restricted to its
        unknowns without a search of its own (:func:`exactq.solvers.linear._solve_block_triangular`; nand
        N=30, K=3: three systems of up to 336,854 unknowns, 51 ms of search each). Returns ``(order, sizes)``:
        the unknowns in that order and the sizes of the consecutive blocks.
        """
        topo = getattr(self, "_topological", None)
        if topo is None:
            from .linear import label_order

            k, labels = self.components()
            topo = False
            if k > 1:
                # row j of the reversed graph lists the sources i of the transitions i -> j: the system's entry
                # (i, j) has row label labels[i] (a source) and column label labels[j] (a target)
                found = label_order(labels, labels[self.indices], np.repeat(labels, np.diff(self.indptr)))
                if found is not None:
                    topo = (found[0], labels)
            self._topological = topo
        if topo is False:
            return None
        order, labels = topo
        mask = np.asarray(states, dtype=bool)
        chosen = order[mask[order]]
        if chosen.size == 0:
            return None
        local = np.cumsum(mask) - 1  # a state's index among the unknowns
        lab = labels[chosen]
        cuts = np.flatnonzero(lab[1:] != lab[:-1]) + 1
        sizes = np.diff(np.concatenate(([0], cuts, [chosen.size])))
        return local[chosen], sizes

    def restrict(self, movable: np.ndarray) -> "_Predecessors":
        """Only the edges leaving ``movable`` states (the predecessor must be movable)."""
        keep = movable[self.indices]
        out = object.__new__(_Predecessors)
        out.n = self.n
        out.indices = self.indices[keep]
        out.indptr = _kept_indptr(keep, self.indptr)
        return out

    def reach(self, sources: np.ndarray) -> np.ndarray:
        """The states with a path into ``sources`` (sources included): one breadth-first search from a
        virtual root (index ``n``) joined to every source."""
        n = self.n
        if not np.any(sources):
            return np.zeros(n, dtype=bool)
        src = np.flatnonzero(sources).astype(self.indices.dtype)
        indices = np.concatenate([self.indices, src])
        indptr = np.append(self.indptr, self.indptr[-1] + src.size)
        graph = sp.csr_array((_ones(indices.size), indices, indptr), shape=(n + 1, n + 1))
        order = csgraph.breadth_first_order(graph, n, directed=True, return_predecessors=False)
        reach = np.zeros(n + 1, dtype=bool)
        reach[order] = True
        return reach[:n]


def _ones(size: int) -> np.ndarray:
    """The values of a graph that SciPy's searches read only the structure of: one 1.0 repeated (a view of stride 0;
    a fresh array of ones took 11 ms at 10M entries, per search)."""
    return np.broadcast_to(np.float64(1.0), (size,))


def _kept_indptr(keep: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """The index pointer of a compressed matrix after dropping the entries where ``keep`` is False: from the
    dropped entries when they are few, else from a 32-bit cumulative sum of ``keep`` (not an int64 one: 0.28 s of
    fresh memory at 14M entries, a Herman ring of 32,768 states)."""
    n = len(indptr) - 1
    few = keep.size - np.count_nonzero(keep) <= keep.size // 8
    if few:
        dropped = np.flatnonzero(~keep)
        # few entries dropped (a generator's diagonal, a restriction to nearly every state): each column's count
        # less the dropped entries found in it (Herman's ring of 15 processes, 14M entries: 0.13 s -> 0.02 s)
        counts = np.diff(indptr).astype(np.int64)
        if dropped.size:
            counts -= np.bincount(np.searchsorted(indptr, dropped, side="right") - 1, minlength=n)
    else:
        # the kept entries before each column's start, by one cumulative sum in 32 bits where it fits (crowds
        # TotalRuns=6, CrowdSize=15, 9M entries: 21 ms against 37 ms for np.add.reduceat over the columns)
        wide = np.int32 if keep.size < np.iinfo(np.int32).max else np.int64
        before = np.empty(keep.size + 1, dtype=wide)
        before[0] = 0
        np.cumsum(keep, dtype=wide, out=before[1:])
        starts = before[indptr]
        return starts.astype(indptr.dtype, copy=False) if starts[-1] < np.iinfo(indptr.dtype).max else starts
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out.astype(indptr.dtype, copy=False) if out[-1] < np.iinfo(indptr.dtype).max else out


def _backward_reachable(Q: sp.csr_array, sources: np.ndarray, movable: np.ndarray) -> np.ndarray:
    """States that can reach a ``sources`` state along transitions leaving ``movable`` states.

    A path ``s0 -> s1 -> ... -> sk`` counts when ``sk`` is a source and every
    ``s0..s(k-1)`` is ``movable`` (and has a positive rate to the next state). One
    breadth-first search on the reversed graph from a virtual root joined to all
    sources.
    """
    if not np.any(sources):
        return np.zeros(Q.shape[0], dtype=bool)
    return _Predecessors(Q).restrict(movable).reach(sources)


def _prob01(Q: sp.csr_array, left: np.ndarray, right: np.ndarray, *,
            graph: "_Predecessors | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """The states where ``P(left U right)`` is 0 and where it is 1 (graph analysis [BK08]_).

    ``graph``: ``Q``'s :class:`_Predecessors`, when the caller keeps it for several queries of one chain.
    """
    graph = (_Predecessors(Q) if graph is None else graph).restrict(left & ~right)
    no = ~graph.reach(right)
    # probability 1 iff the no-states cannot be reached through left & ~right states
    yes = ~graph.reach(no)
    return no, yes


def _solve_scaled(Q: sp.csr_array, states: np.ndarray, rhs_rates: np.ndarray, solver: str = "auto",
                  what: str = "the linear system", graph: "_Predecessors | None" = None) -> tuple[np.ndarray, dict]:
    """Solve ``-Q_SS x = rhs_rates`` on ``states``, scaled by the exit rates.

    The scaled matrix ``D^{-1}(-Q_SS) = I - P_SS`` is the embedded jump chain's, which
    keeps rates of very different magnitude from hurting the conditioning. The solver
    is the registry's (:func:`exactq.solvers.linear.solve_linear`: ``auto`` picks the
    sparse LU or BiCGSTAB by the LU's predicted cost), and the answer comes with a
    componentwise error bound (``info["error_bound"]``, the largest). ``graph``: the chain's
    :class:`_Predecessors` a caller keeps, whose components order the system (:meth:`_Predecessors.block_order`).
    """
    from exactq.budget import memory_budget

    from .linear import SMALL_SYSTEM, block_lu_pays, scale_rows, solve_linear

    idx = np.flatnonzero(states)
    info = {"n_solved": int(idx.size), "residual": 0.0, "error_bound": 0.0}
    if idx.size == 0:
        return np.zeros(0), info
    blocks = graph.block_order(states) if graph is not None and solver in ("auto", "direct") else None
    order = None  # the unknowns' block order, when the system is cut in it
    budget = memory_budget() if blocks is not None else None
    if blocks is not None and idx.size > SMALL_SYSTEM and blocks[1].max() > 1 and \
            block_lu_pays(blocks[1], int(np.diff(Q.indptr)[idx].sum()), budget):
        # an LU in block order follows (every block of one state: sweeps over the rows as they are): the system is
        # cut from Q in that order, one row gather instead of a gather in the states' order and a permuted copy.
        # (Asked first with the entries of the rows, a bound on the system's; a system with a large component, as
        # leader election's, whose LU does not pay, is cut in the states' order as before)
        order = blocks[0]
        sel = idx[order]
        Qss = Q[sel][:, sel].tocsr()
        if not block_lu_pays(blocks[1], Qss.nnz, budget):  # the general solvers: cut again in the states' order
            order = None
        else:
            blocks = (np.arange(idx.size), blocks[1])  # (the identity: no permuted copy in the solver)
            rhs_rates = rhs_rates[order]
    if order is None:
        Qss = Q[idx][:, idx].tocsr()
    exit_rate = -Qss.diagonal()
    if np.any(exit_rate <= 0):  # cannot happen after the graph analysis; guard anyway
        i = int((idx if order is None else sel)[np.flatnonzero(exit_rate <= 0)[0]])
        raise ModelError(f"state {i} is absorbing but was not classified; the generator is inconsistent")
    # negated and scaled in place, one pass over Qss's own entries (the fancy indexing copied them): a diagonal
    # times the matrix as a sparse product took 3-5 ms at 57,056 states; a negated copy and a scale repeated per
    # entry 40-185 ms at 6.2M entries (crowds TotalRuns=6, CrowdSize=15), against 7 ms (:func:`scale_rows`)
    A = Qss if not np.may_share_memory(Qss.data, Q.data) else Qss.copy()
    scale_rows(A, -1.0 / exit_rate)
    b = rhs_rates / exit_rate
    x, linfo = solve_linear(A, b, solver=solver, what=f"{what} ({idx.size} states)", blocks=blocks)
    x = np.atleast_1d(np.asarray(x, dtype=float))
    residual = float(np.max(np.abs(A @ x - b))) if x.size else 0.0
    if order is not None:  # back to the states' order
        x_ordered, bound_ordered = x, linfo["bound_vector"]
        x = np.empty_like(x_ordered)
        x[order] = x_ordered
        linfo["bound_vector"] = np.empty_like(bound_ordered)
        linfo["bound_vector"][order] = bound_ordered
    info.update(residual=residual, error_bound=linfo["error_bound"], solver=linfo["solver"])
    if linfo["solver"]["name"] != "direct":  # an iterative answer states its bound as the error estimate
        info["error_estimate"] = linfo["error_bound"]
    elif x.size and not linfo["error_bound"] <= DIRECT_ESTIMATE_MIN * max(1.0, float(np.max(np.abs(x)))):
        info["error_estimate"] = linfo["error_bound"]  # a direct answer too, when its bound is not negligible
    info["_bound"] = linfo["bound_vector"]
    if not np.all(np.isfinite(x)) or residual > RESIDUAL_WARN * max(1.0, float(np.max(np.abs(x)))):
        warnings.warn(f"linear solve on {idx.size} states has residual {residual:.3g}", AccuracyWarning,
                      stacklevel=3)
    return x, info


def _method_name(solve_info: dict) -> str:
    """``graph+spsolve`` (the name before solvers were chosen) for a sparse LU, ``graph+bicgstab`` otherwise."""
    name = solve_info.get("solver", {}).get("name", "direct")
    return "graph+" + ("spsolve" if name == "direct" else name)


def until_probability(Q, left_mask, right_mask, *, solver: str = "auto", graph=None) -> tuple[np.ndarray, dict]:
    """Probability of ``left U right`` (unbounded) from every state.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator: off-diagonal rates >= 0, rows sum to 0.
    left_mask, right_mask : (n,) bool array_like
        The states satisfying ``left`` and ``right``.
    graph : optional
        The transition graph reversed (an internal ``_Predecessors`` of ``Q``), when a caller
        keeps it for several queries of one chain; built here otherwise.

    Returns
    -------
    probs : (n,) ndarray
        ``probs[s]`` = probability from ``s`` of eventually reaching a ``right``
        state along a path whose earlier states all satisfy ``left``. Exactly 0 and
        exactly 1 where the graph analysis decides it.
    info : dict
        ``n_prob0``, ``n_prob1`` (states settled by graph analysis), ``n_solved``
        (states of the linear system), ``residual`` (max-norm residual of the scaled
        system ``(I - P_SS) x = b``), ``method`` and ``seconds``.

    Raises
    ------
    ModelError
        For an invalid generator or masks of the wrong shape.

    Warns
    -----
    AccuracyWarning
        If the residual of the linear solve exceeds ``1e-8``.

    Notes
    -----
    The probability depends only on the embedded jump chain ``P = I + D^{-1} Q``
    (``D = diag(-Q_ii)``) [BHHK03]_. States that cannot reach ``right`` through
    ``left ∧ ¬right`` states have probability 0; states that cannot reach one of
    those have probability 1 [BK08]_. On the rest, ``S``, the vector solves
    ``(I - P_SS) x = P_{S,yes} 1``, which is non-singular because every state of
    ``S`` can leave ``S``.

    Examples
    --------
    Gambler's ruin with up-rate 2 and down-rate 1 on 0..3, absorbing at 0 and 3:
    the probability of reaching 3 from ``i`` is ``(1 - r^i) / (1 - r^3)``, ``r = 1/2``.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[0, 0, 0, 0], [1, -3, 2, 0], [0, 1, -3, 2], [0, 0, 0, 0]], dtype=float)
    >>> probs, info = until_probability(Q, np.ones(4, bool), np.arange(4) == 3)
    >>> bool(np.allclose(probs, (1 - 0.5 ** np.arange(4)) / (1 - 0.5 ** 3)))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    no, yes = _prob01(A, left, right, graph=graph)
    probs = yes.astype(float)
    rest = ~no & ~yes
    # right-hand side: rate from each state of `rest` into the probability-1 states
    rhs = A[np.flatnonzero(rest)] @ yes.astype(float) if np.any(rest) else np.zeros(0)
    x, solve_info = _solve_scaled(A, rest, np.asarray(rhs, dtype=float), solver, "the reachability system",
                                  graph)
    probs[rest] = np.clip(x, 0.0, 1.0)
    bound = solve_info.pop("_bound", None)
    lower, upper = probs.copy(), probs.copy()
    if bound is not None and bound.size:
        lower[rest] = np.clip(x - bound, 0.0, 1.0)
        upper[rest] = np.clip(x + bound, 0.0, 1.0)
    info = {
        "method": _method_name(solve_info),
        "lower": lower, "upper": upper,
        "n_prob0": int(np.count_nonzero(no)),
        "n_prob1": int(np.count_nonzero(yes)),
        **solve_info,
        "seconds": time.perf_counter() - t0,
    }
    return probs, info


def expected_time(Q, target_mask, *, solver: str = "auto", graph=None) -> tuple[np.ndarray, dict]:
    """Expected time to reach the target set from every state.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator: off-diagonal rates >= 0, rows sum to 0.
    target_mask : (n,) bool array_like
        The target states.
    graph : optional
        The transition graph reversed (an internal ``_Predecessors`` of ``Q``), when a caller
        keeps it for several queries of one chain; built here otherwise.

    Returns
    -------
    times : (n,) ndarray
        0 on the target; ``inf`` wherever the target is reached with probability
        < 1 (decided exactly by graph analysis: the state can reach a state from
        which the target is unreachable); otherwise the finite mean hitting time.
    info : dict
        ``n_infinite`` (states with ``inf``), ``n_solved``, ``residual`` (of the
        system scaled by the exit rates), ``method`` and ``seconds``.

    Raises
    ------
    ModelError
        For an invalid generator or a mask of the wrong shape.

    Warns
    -----
    AccuracyWarning
        If the residual of the linear solve exceeds ``1e-8``.

    Notes
    -----
    With ``S`` the non-target states that reach the target with probability 1, the
    mean hitting times solve ``-Q_SS x = 1`` [Nor97]_; the system is solved in the
    scaled form ``(I - P_SS) x = 1 / exit_rate``. States outside ``S`` and the
    target have infinite expectation (the target is missed with positive
    probability).

    Examples
    --------
    M/M/1/2 (arrival 1, service 2) from empty to full: 1 + (1 + 2) = 4 time units
    from state 0, 3 from state 1.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[-1, 1, 0], [2, -3, 1], [0, 2, -2]], dtype=float)
    >>> times, info = expected_time(Q, np.arange(3) == 2)
    >>> bool(np.allclose(times, [4.0, 3.0, 0.0]))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    target = as_mask(target_mask, n, "target_mask")
    _, yes = _prob01(A, np.ones(n, dtype=bool), target, graph=graph)
    times = np.full(n, np.inf)
    times[target] = 0.0
    solve = yes & ~target
    x, solve_info = _solve_scaled(A, solve, np.ones(int(np.count_nonzero(solve))), solver,
                                  "the expected-time system", graph)
    times[solve] = x
    solve_info.pop("_bound", None)
    info = {
        "method": _method_name(solve_info),
        "n_infinite": int(np.count_nonzero(~yes)),
        **solve_info,
        "seconds": time.perf_counter() - t0,
    }
    return times, info


def expected_reward(Q, target_mask, reward, *, solver: str = "auto", graph=None) -> tuple[np.ndarray, dict]:
    """Expected reward accumulated until the target set is reached, from every state.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator (a DTMC enters as ``P - I``: one time unit per step).
    target_mask : (n,) bool array_like
        The target states.
    reward : (n,) array_like
        Reward rate of each state (per step for ``P - I``), finite.
    graph : optional
        The transition graph reversed (an internal ``_Predecessors`` of ``Q``), when a caller
        keeps it for several queries of one chain; built here otherwise.

    Returns
    -------
    values : (n,) ndarray
        0 on the target; ``inf`` wherever the target is reached with probability < 1
        (decided exactly by graph analysis, as PRISM does for ``R=? [ F b ]``);
        otherwise the finite expectation.
    info : dict
        ``n_infinite``, ``n_solved``, ``residual`` (of the system scaled by the exit
        rates), ``method`` and ``seconds``.

    Notes
    -----
    On the non-target states ``S`` that reach the target with probability 1 the
    expectation solves ``-Q_SS x = r_S`` [Nor97]_ (with ``r = 1`` this is
    :func:`expected_time`); it is solved in the scaled form ``(I - P_SS) x = r / exit``.

    Examples
    --------
    M/M/1/2 (arrival 1, service 2), reward rate = number in system, from empty until
    full: ``x_1 = (1 + 2 x_0) / 3`` and ``x_0 = x_1`` give ``x_0 = x_1 = 1``.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[-1, 1, 0], [2, -3, 1], [0, 2, -2]], dtype=float)
    >>> values, info = expected_reward(Q, np.arange(3) == 2, [0.0, 1.0, 2.0])
    >>> bool(np.allclose(values, [1.0, 1.0, 0.0]))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    target = as_mask(target_mask, n, "target_mask")
    r = np.asarray(reward, dtype=float)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise ModelError(f"reward must be {n} finite numbers (one per state)")
    _, yes = _prob01(A, np.ones(n, dtype=bool), target, graph=graph)
    values = np.full(n, np.inf)
    values[target] = 0.0
    solve = yes & ~target
    x, solve_info = _solve_scaled(A, solve, r[solve], solver, "the expected-reward system", graph)
    values[solve] = x
    solve_info.pop("_bound", None)
    info = {"method": _method_name(solve_info), "n_infinite": int(np.count_nonzero(~yes)), **solve_info,
            "seconds": time.perf_counter() - t0}
    return values, info


def absorption_values(Q, absorbing_mask, values, *, solver: str = "auto", graph=None) -> tuple[np.ndarray, dict]:
    """``E_s[v(X_τ)]``, the value of the state where the absorbing set is first entered.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator.
    absorbing_mask : (n,) bool array_like
        A set that every state reaches with probability 1 (the union of the closed
        classes, for instance).
    values : (n,) array_like
        ``v``; only its entries on the absorbing set matter.
    graph : optional
        The transition graph reversed (an internal ``_Predecessors`` of ``Q``), when a caller
        keeps it for several queries of one chain; built here otherwise.

    Returns
    -------
    out : (n,) ndarray
        ``v`` on the absorbing set, the expectation elsewhere.
    info : dict
        ``n_solved``, ``residual``, ``method``, ``seconds``.

    Raises
    ------
    ModelError
        If some state can avoid the absorbing set forever.

    Notes
    -----
    On the other states ``T`` the vector solves ``-Q_TT x = Q_{T,A} v_A`` (first-step
    analysis, [BK08]_ Sec. 10.1.1); used for the long-run value of a chain with several
    closed classes, weighted by the probability of ending in each.

    Examples
    --------
    Gambler's ruin on 0..3 (up 2, down 1) with v(0) = 10, v(3) = 40: from state 1,
    P(reach 3) = (1 - 1/2)/(1 - 1/8) = 4/7.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[0, 0, 0, 0], [1, -3, 2, 0], [0, 1, -3, 2], [0, 0, 0, 0]], dtype=float)
    >>> out, _ = absorption_values(Q, [True, False, False, True], [10.0, 0, 0, 40.0])
    >>> bool(np.isclose(out[1], 10 * 3 / 7 + 40 * 4 / 7))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    absorbing = as_mask(absorbing_mask, n, "absorbing_mask")
    v = np.asarray(values, dtype=float)
    if v.shape != (n,):
        raise ModelError(f"values must have shape ({n},); got {v.shape}")
    given = graph  # (its components are kept for the next query; a graph made here is not)
    graph = _Predecessors(A) if graph is None else graph
    _, yes = _prob01(A, np.ones(n, dtype=bool), absorbing, graph=graph)
    if not yes.all():
        i = int(np.flatnonzero(~yes)[0])
        raise ModelError(f"state {i} can avoid the absorbing set forever")
    settled, v = _settle_by_value(graph, absorbing, v)
    ends = absorbing | settled
    out = np.where(ends, v, 0.0)
    rest = ~ends
    rhs = A[np.flatnonzero(rest)] @ np.where(ends, v, 0.0) if rest.any() else np.zeros(0)
    x, solve_info = _solve_scaled(A, rest, np.asarray(rhs, dtype=float), solver, "the absorption system",
                                  given)
    out[rest] = x
    solve_info.pop("_bound", None)
    return out, {"method": _method_name(solve_info), "n_settled": int(np.count_nonzero(settled)), **solve_info,
                 "seconds": time.perf_counter() - t0}


#: :func:`_settle_by_value` searches backwards from at most this many distinct values of the absorbing states (one
#: breadth-first search each)
SETTLE_MAX_VALUES = 8


def _settle_by_value(graph: "_Predecessors", absorbing: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The transient states whose absorption value graph analysis decides, and ``v`` with those values.

    A state that reaches the absorbing set with probability 1 (the caller has checked it), and along paths of
    transient states reaches only absorbing states of one value ``a``, ends there with probability 1: its value
    is ``a`` exactly, with no equation to solve (the qualitative step before the linear system, [BK08]_ Sec.
    10.1.1, taken per value). When every absorbing state has the same value, every state is settled: the
    long-run probability of a label that holds in every closed class is 1 with no solve (the embedded control
    system's ``S=? ["down"]``, 6,038 transient states, ~200 BiCGSTAB iterations before).
    With more than :data:`SETTLE_MAX_VALUES` distinct values (or values that are not finite) nothing is settled.
    Where every transient state reaches every value, the searches settle nothing and cost their time (measured:
    a gambler's ruin of 10,001 states, ``S=? ["rich"]`` 18.5 -> 19.8 ms; the bounded retransmission protocol's
    ``S=? [srep=3]`` 11.2 -> 13.1 ms; nand 30x3 unchanged).
    """
    settled = np.zeros(len(v), dtype=bool)
    values = np.unique(v[absorbing])
    if values.size == 0 or values.size > SETTLE_MAX_VALUES or not np.all(np.isfinite(values)):
        return settled, v
    transient = ~absorbing
    if values.size == 1:
        return transient, np.where(transient, values[0], v)
    moves = graph.restrict(transient)
    reaches = np.zeros(len(v), dtype=np.int64)  # how many of the values each state can end with
    last = np.zeros(len(v))
    for a in values:
        hit = moves.reach(absorbing & (v == a)) & transient
        reaches += hit
        last[hit] = a
    settled = reaches == 1
    return settled, np.where(settled, last, v)
