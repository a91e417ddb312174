"""Graph algorithms and Bellman backups for MDPs, vectorised over the choice rows.

The qualitative part of MDP model checking decides exactly, by graph search and
without arithmetic, where a probability is 0 or 1 and where an end component lets a
scheduler stay forever; the quantitative solvers (:mod:`exactq.solvers.mdp`,
:mod:`exactq.solvers.mdp_average`) iterate only on what is left.

- :func:`prob0a`, :func:`prob0e`, :func:`prob1a`, :func:`prob1e`: the states where
  ``P(constraint U target)`` is 0 or 1 for all (A) or for some (E) schedulers,
  Baier & Katoen (2008), Algorithms 45-46 and sec. 10.6.1 (the fixpoints of Prob0E,
  Prob1E, Prob0A and Prob1A).
- :func:`attractor`: a memoryless scheduler that reaches a target set almost surely
  from the states where some scheduler does (the layers of the Prob1E fixpoint).
- :func:`maximal_end_components`: the MEC decomposition, de Alfaro (1997), Algorithm
  3.1 (repeated strongly connected components, dropping the choices that leave them),
  as in Baier & Katoen (2008), Algorithm 47.
- :func:`backup` / :func:`greedy`: one Bellman backup ``max_c (b + P v)`` (or min) as a
  sparse matrix-vector product over the choice rows and ``np.maximum.reduceat`` over
  the row groups; the choice attaining it (lowest row on ties).

Breadth-first searches run in :mod:`scipy.sparse.csgraph`; the fixpoints that need a
count per choice ("every choice of the state hits the set") advance a whole frontier
of states per round, so a round costs the edges into the frontier, not the model.

References
----------
C. Baier and J.-P. Katoen, *Principles of Model Checking*, MIT Press, 2008, sec. 10.6.
L. de Alfaro, *Formal Verification of Probabilistic Systems*, PhD thesis, Stanford,
1997, ch. 3.
C. Baier, J. Klein, L. Leuschner, D. Parker, S. Wunderlich, "Ensuring the reliability
of your model checker: interval iteration for Markov decision processes", CAV 2017.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

__all__ = ["prob0a", "prob0e", "prob1a", "prob1e", "attractor", "maximal_end_components", "backup", "greedy",
           "rows_inside", "closed_classes", "RowStructure"]


class RowStructure:
    """Index arrays of an MDP's rows that the graph algorithms share (built once per matrix).

    ``P`` is the ``(n_choices, n_states)`` CSR matrix, ``groups`` the row groups.
    """

    def __init__(self, P: sp.csr_matrix, groups: np.ndarray):
        self.P = P
        self.groups = np.asarray(groups, dtype=np.int64)
        self.n_states = self.groups.size - 1
        self.n_choices = P.shape[0]
        self.counts = np.diff(self.groups)
        self.owner = np.repeat(np.arange(self.n_states, dtype=np.int64), self.counts)
        positive = P.data > 0
        self.nnz_row = np.repeat(np.arange(self.n_choices, dtype=np.int64), np.diff(P.indptr))[positive]
        self.nnz_col = P.indices[positive].astype(np.int64)
        self._reverse = None
        self._pure = None

    @property
    def self_loops(self) -> np.ndarray:
        """(n_choices,) whether a choice surely stays in its own state (all its successors are its owner)."""
        if self._pure is None:
            self._pure = self.all_successors(self.nnz_col == self.owner[self.nnz_row])
        return self._pure

    @property
    def reverse(self) -> sp.csr_matrix:
        """(n_states, n_choices) pattern: row j lists the choices that can move to j."""
        if self._reverse is None:
            self._reverse = sp.csr_matrix((np.ones(self.nnz_row.size, dtype=np.int8), (self.nnz_col, self.nnz_row)),
                                          shape=(self.n_states, self.n_choices))
        return self._reverse

    def state_graph(self, rows: np.ndarray | None = None, reverse: bool = False) -> sp.csr_matrix:
        """(n_states, n_states) pattern of the state-to-state edges of the chosen ``rows`` (a mask)."""
        keep = slice(None) if rows is None else rows[self.nnz_row]
        src, dst = self.owner[self.nnz_row[keep]], self.nnz_col[keep]
        if reverse:
            src, dst = dst, src
        g = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(self.n_states, self.n_states))
        g.sum_duplicates()
        return g

    def all_successors(self, good: np.ndarray) -> np.ndarray:
        """(n_choices,) whether every successor of every choice satisfies the per-transition mask ``good``."""
        bad = np.bincount(self.nnz_row[~good], minlength=self.n_choices)
        return bad == 0

    def rows_into(self, states: np.ndarray) -> np.ndarray:
        """(n_choices,) whether a choice moves into the state mask ``states`` with positive probability."""
        hit = np.zeros(self.n_choices, dtype=bool)
        hit[self.nnz_row[states[self.nnz_col]]] = True
        return hit

    def any_per_state(self, rows: np.ndarray) -> np.ndarray:
        """(n_states,) whether some choice of the state is in the row mask."""
        return np.bincount(self.owner[rows], minlength=self.n_states) > 0

    def all_per_state(self, rows: np.ndarray) -> np.ndarray:
        """(n_states,) whether every choice of the state is in the row mask."""
        return np.bincount(self.owner[rows], minlength=self.n_states) == self.counts


def _structure(P, groups, structure: RowStructure | None) -> RowStructure:
    return structure if structure is not None else RowStructure(P, groups)


def _backward(graph_rev: sp.csr_matrix, sources: np.ndarray, movable: np.ndarray) -> np.ndarray:
    """States that reach ``sources`` along edges leaving only ``movable`` states (``graph_rev``: j -> i for i -> j)."""
    n = graph_rev.shape[0]
    if not np.any(sources):
        return np.zeros(n, dtype=bool)
    # keep the reversed edges j -> i whose source state i may move, plus a root joined to every source
    coo = graph_rev.tocoo()
    keep = movable[coo.col]
    src = np.flatnonzero(sources)
    rows = np.concatenate([coo.row[keep], np.full(src.size, n)])
    cols = np.concatenate([coo.col[keep], src])
    g = sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
    order = csgraph.breadth_first_order(g, n, directed=True, return_predecessors=False)
    reach = np.zeros(n + 1, dtype=bool)
    reach[order] = True
    return reach[:n]


def _masks(n: int, constraint, target) -> tuple[np.ndarray, np.ndarray]:
    target = np.asarray(target, dtype=bool)
    constraint = np.ones(n, dtype=bool) if constraint is None else np.asarray(constraint, dtype=bool)
    return constraint, target


def prob0a(P, groups, constraint, target, *, structure: RowStructure | None = None) -> np.ndarray:
    """States with ``Pmax(constraint U target) = 0``: no path through ``constraint`` reaches ``target``.

    Examples
    --------
    State 0 may move to the target 1 or to the trap 2:

    >>> P = sp.csr_matrix([[0, 1.0, 0], [0, 0, 1.0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> prob0a(P, [0, 2, 3, 4], None, [False, True, False]).tolist()
    [False, False, True]
    """
    st = _structure(P, groups, structure)
    constraint, target = _masks(st.n_states, constraint, target)
    return ~_backward(st.state_graph(reverse=True), target, constraint & ~target)


def prob0e(P, groups, constraint, target, *, structure: RowStructure | None = None) -> np.ndarray:
    """States with ``Pmin(constraint U target) = 0``: some scheduler avoids ``target`` surely.

    The complement is the least fixpoint ``Y = target  or  (constraint and every choice
    moves into Y with positive probability)``, grown one frontier of new states per
    round (Baier & Katoen 2008, sec. 10.6.1).

    Examples
    --------
    >>> P = sp.csr_matrix([[0, 1.0, 0], [0, 0, 1.0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> prob0e(P, [0, 2, 3, 4], None, [False, True, False]).tolist()
    [True, False, True]
    """
    st = _structure(P, groups, structure)
    constraint, target = _masks(st.n_states, constraint, target)
    movable = constraint & ~target
    inside = target.copy()
    hit = np.zeros(st.n_choices, dtype=bool)
    missing = st.counts.copy()  # choices of each state that do not yet move into the set
    frontier = np.flatnonzero(target)
    rev = st.reverse
    while frontier.size:
        rows = np.unique(rev[frontier].indices)
        rows = rows[~hit[rows]]
        hit[rows] = True
        missing -= np.bincount(st.owner[rows], minlength=st.n_states)
        new = (missing == 0) & movable & ~inside
        frontier = np.flatnonzero(new)
        inside |= new
    return ~inside


def prob1a(P, groups, constraint, target, *, structure: RowStructure | None = None,
           zero_min: np.ndarray | None = None) -> np.ndarray:
    """States with ``Pmin(constraint U target) = 1``: every scheduler reaches ``target`` almost surely.

    The complement is the set of states that can reach, through ``constraint``
    states outside ``target``, a state where some scheduler avoids the target surely
    (:func:`prob0e`, passed as ``zero_min`` when already known).

    Examples
    --------
    >>> P = sp.csr_matrix([[0, 1.0, 0], [0, 0, 1.0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> prob1a(P, [0, 2, 3, 4], None, [False, True, False]).tolist()
    [False, True, False]
    """
    st = _structure(P, groups, structure)
    constraint, target = _masks(st.n_states, constraint, target)
    zero = prob0e(P, groups, constraint, target, structure=st) if zero_min is None else zero_min
    return ~_backward(st.state_graph(reverse=True), zero, constraint & ~target)


def _gather(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The column indices of the CSR rows ``rows``, concatenated (no Python loop over the rows)."""
    starts, stops = indptr[rows], indptr[rows + 1]
    lens = stops - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=indices.dtype)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return indices[np.arange(total) + offsets]


def _trim(st: RowStructure, U: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``U`` without the non-target states that have no choice staying in it, to a fixpoint.

    Such a state cannot be in :func:`prob1e`'s fixpoint (it cannot move without risking
    to leave it; a self-loop does not count, it moves nowhere), nor can the states that
    lose their last staying choice when it goes:
    a worklist with a count of staying choices per state (each choice is touched once
    when it stops staying, so the whole cascade costs ``O(nnz)`` plus a few array
    operations per wave). Without it the fixpoint loop removed one layer per round: a
    gambler's-ruin MDP of 20,000 states took more than 5 minutes.
    """
    U = U.copy()
    stay = st.all_successors(U[st.nnz_col]) & U[st.owner]
    pure = st.self_loops  # a choice that stays put leads nowhere: it does not count
    good = np.bincount(st.owner[stay & ~pure], minlength=st.n_states)
    frontier = np.flatnonzero(U & ~target & (good == 0))
    rev = st.reverse
    while frontier.size:
        U[frontier] = False
        ch = np.unique(_gather(rev.indptr, rev.indices, frontier))
        ch = ch[stay[ch]]  # the choices that stop staying now
        stay[ch] = False
        ch = ch[~pure[ch]]
        owners = st.owner[ch]
        np.subtract.at(good, owners, 1)
        cand = np.unique(owners)
        frontier = cand[U[cand] & ~target[cand] & (good[cand] == 0)]
    return U


def _prune(st: RowStructure, alive: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``alive`` states and ``live`` choices without what no end component can contain, to a fixpoint (the
    cascade :func:`maximal_end_components` repeats between its strongly-connected-components rounds).

    Removed: the choices that can move out of ``alive``; the states left without a live choice; and the
    choices of other states that can move into a *closed* state, one whose live choices are all self-loops
    (an end component holding it is that state alone: it cannot move anywhere else). A worklist as in
    :func:`_trim`, with a count of live choices and of live non-self-loop choices per state; each choice
    is touched once when it dies, so the cascade costs ``O(nnz)`` plus a few array operations per wave.
    Without it a gambler's-ruin MDP lost one state per round (2,500 rounds of components at 10,001 states;
    with a "stop" self-loop in every state, still a state per round by the plain loop).
    """
    alive = alive.copy()
    live = live & alive[st.owner] & st.all_successors(alive[st.nnz_col])
    pure = st.self_loops  # choices that surely stay put
    good = np.bincount(st.owner[live], minlength=st.n_states)
    moving = np.bincount(st.owner[live & ~pure], minlength=st.n_states)
    closed = np.zeros(st.n_states, dtype=bool)
    frontier = np.flatnonzero(alive & (moving == 0))  # closed or dead (no live choice): either way a sink
    alive &= good > 0
    rev = st.reverse
    while frontier.size:
        closed[frontier] = True
        ch = np.unique(_gather(rev.indptr, rev.indices, frontier))
        ch = ch[live[ch] & ~pure[ch]]  # other states' live choices that can move into a closed state
        live[ch] = False
        owners = st.owner[ch]
        np.subtract.at(good, owners, 1)
        np.subtract.at(moving, owners, 1)
        cand = np.unique(owners)
        dead = cand[alive[cand] & (good[cand] == 0)]
        alive[dead] = False
        frontier = cand[~closed[cand] & (moving[cand] == 0)]
    return alive, live


def prob1e(P, groups, constraint, target, *, structure: RowStructure | None = None,
           zero_max: np.ndarray | None = None, with_rows: bool = False):
    """States with ``Pmax(constraint U target) = 1``, the greatest fixpoint of Baier & Katoen (2008), Alg. 46.

    ``U`` starts as the states that can reach the target (not :func:`prob0a`); each
    round keeps the states of ``U`` that reach the target using only choices whose
    successors all lie in ``U``, until ``U`` no longer shrinks.

    Returns
    -------
    (n_states,) bool mask; with ``with_rows``, also the ``(n_choices,)`` mask of the
    choices that stay in the set (the ones an almost-sure scheduler may take).

    Examples
    --------
    >>> P = sp.csr_matrix([[0, 1.0, 0], [0, 0, 1.0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> prob1e(P, [0, 2, 3, 4], None, [False, True, False]).tolist()
    [True, True, False]
    """
    st = _structure(P, groups, structure)
    constraint, target = _masks(st.n_states, constraint, target)
    zero = prob0a(P, groups, constraint, target, structure=st) if zero_max is None else zero_max
    U = ~zero & (constraint | target)
    while True:
        U = _trim(st, U, target)
        stay = st.all_successors(U[st.nnz_col]) & U[st.owner]
        R = _backward(st.state_graph(rows=stay, reverse=True), target & U, U & ~target)
        if np.array_equal(R, U):
            break
        U = R
    if with_rows:
        return U, st.all_successors(U[st.nnz_col]) & U[st.owner]
    return U


def attractor(P, groups, target, rows, *, structure: RowStructure | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A scheduler reaching ``target`` almost surely using only the choices in ``rows``.

    A backward breadth-first search from ``target`` over the edges of ``rows``; a state
    found from state ``j`` takes a choice of ``rows`` that moves to ``j`` with positive
    probability, so every step may go one layer closer to the target. If every choice
    in ``rows`` keeps to the states found (as the rows of :func:`prob1e` do), the target
    is reached almost surely.

    Returns
    -------
    reached : (n_states,) bool
        The states from which the search found the target (``target`` included).
    choice : (n_states,) int
        The chosen row of every reached non-target state; ``-1`` elsewhere.
    """
    st = _structure(P, groups, structure)
    target = np.asarray(target, dtype=bool)
    n = st.n_states
    choice = np.full(n, -1, dtype=np.int64)
    if not np.any(target):
        return target.copy(), choice
    keep = rows[st.nnz_row] & ~target[st.owner[st.nnz_row]]
    r_row, r_col = st.nnz_row[keep], st.nnz_col[keep]
    src = np.flatnonzero(target)
    # reversed state graph with a root: root -> targets, j -> owner(row) for each edge row -> j
    g = sp.csr_matrix((np.ones(r_row.size + src.size, dtype=np.int8),
                       (np.concatenate([r_col, np.full(src.size, n)]), np.concatenate([st.owner[r_row], src]))),
                      shape=(n + 1, n + 1))
    g.sum_duplicates()
    order, pred = csgraph.breadth_first_order(g, n, directed=True, return_predecessors=True)
    reached = np.zeros(n + 1, dtype=bool)
    reached[order] = True
    reached = reached[:n]
    found = reached & ~target
    # the edge (row -> pred[owner]) for every found state: the first such row
    parent = pred[:n]
    ok = found[st.owner[r_row]] & (r_col == parent[st.owner[r_row]])
    owners, first = np.unique(st.owner[r_row[ok]], return_index=True)
    choice[owners] = r_row[ok][first]
    return reached | target, choice


def maximal_end_components(P, groups, states=None, rows=None, *, structure: RowStructure | None = None):
    """The maximal end components within the ``states`` mask using the choices in ``rows``.

    de Alfaro (1997), Algorithm 3.1: take the strongly connected components of the
    graph of the remaining choices, drop every choice that can leave its state's
    component, drop states left without a choice, and repeat until nothing changes.

    Returns
    -------
    component : (n_states,) int
        The MEC of every state (0, 1, ...), ``-1`` for states in none.
    internal : (n_choices,) bool
        The choices that stay inside their state's MEC.

    Examples
    --------
    State 0 can loop or go to 1; 1 goes back to 0 or to the absorbing 2:

    >>> P = sp.csr_matrix([[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, 0], [0, 0, 1.0], [0, 0, 1.0]])
    >>> comp, internal = maximal_end_components(P, [0, 2, 4, 5])
    >>> comp.tolist(), internal.tolist()
    ([0, 0, 1], [True, True, True, False, True])
    """
    st = _structure(P, groups, structure)
    alive = np.ones(st.n_states, dtype=bool) if states is None else np.asarray(states, dtype=bool).copy()
    live_rows = np.ones(st.n_choices, dtype=bool) if rows is None else np.asarray(rows, dtype=bool).copy()
    live_rows &= alive[st.owner]
    comp = np.full(st.n_states, -1, dtype=np.int64)
    while True:
        alive, live_rows = _prune(st, alive, live_rows)
        graph = st.state_graph(rows=live_rows)
        _, labels = csgraph.connected_components(graph, directed=True, connection="strong")
        labels = np.where(alive, labels, -1)
        same = labels[st.nnz_col] == labels[st.owner[st.nnz_row]]
        keep = live_rows & st.all_successors(same)
        still = alive & st.any_per_state(keep)
        if np.array_equal(keep, live_rows) and np.array_equal(still, alive):
            comp = labels
            break
        live_rows, alive = keep, still
    # renumber the components 0, 1, ... in order of their first state
    used = comp >= 0
    if np.any(used):
        _, first, inverse = np.unique(comp[used], return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        comp[used] = rank[inverse]
    return comp, live_rows


def closed_classes(P: sp.csr_matrix) -> tuple[np.ndarray, int]:
    """The closed (recurrent) communicating classes of a finite Markov chain.

    Returns
    -------
    klass : (n,) int
        The closed class of every recurrent state (0, 1, ...), ``-1`` for transient states.
    count : int
        The number of closed classes (1 for a unichain).
    """
    n = P.shape[0]
    ncomp, labels = csgraph.connected_components(P, directed=True, connection="strong")
    coo = sp.coo_matrix(P)
    pos = coo.data > 0
    leaves = labels[coo.row[pos]] != labels[coo.col[pos]]
    open_ = np.zeros(ncomp, dtype=bool)
    open_[labels[coo.row[pos][leaves]]] = True
    closed = ~open_
    rank = np.cumsum(closed) - 1
    klass = np.where(closed[labels], rank[labels], -1)
    return klass.astype(np.int64), int(closed.sum()) if n else 0


def rows_inside(structure: RowStructure, states: np.ndarray) -> np.ndarray:
    """(n_choices,) the choices of ``states`` whose successors all lie in ``states``."""
    return structure.all_successors(states[structure.nnz_col]) & states[structure.owner]


def backup(P: sp.csr_matrix, b: np.ndarray, v: np.ndarray, starts: np.ndarray, sense: str) -> tuple[np.ndarray, np.ndarray]:
    """One Bellman backup: ``q = b + P v`` per choice and its max (or min) per state.

    ``v`` may be ``(n,)`` or ``(n, k)`` (``k`` vectors at once, e.g. a lower and an upper
    bound). Returns ``(best, q)``.
    """
    q = P @ v
    q += b if q.ndim == 1 else b[:, None]
    slots = _slots(starts, q.shape[0])
    if slots is not None:
        # the k-th choice of every state gathered (np.take into one buffer) and folded in, one column of slots at
        # a time: 43,136 states, 115,840 choices, two vectors: 0.25 ms, against 5.6 ms for q[slots].max(axis=1)
        # and 1.2 ms for reduceat
        fold = np.maximum if sense == "max" else np.minimum
        best = np.take(q, slots[0], axis=0)
        if slots.shape[0] > 1:
            tmp = np.empty_like(best)
            for col in slots[1:]:
                fold(best, np.take(q, col, axis=0, out=tmp), out=best)
    else:
        best = (np.maximum if sense == "max" else np.minimum).reduceat(q, starts, axis=0)
    return best, q


_SLOTS: dict = {}


def _slots(starts: np.ndarray, n_rows: int) -> np.ndarray | None:
    """``(c, n_states)`` row indices (C order: row ``k`` the ``k``-th choice of every state), each state's
    choices padded with its last (a repeated row leaves the max and min unchanged), where ``c`` (the most
    choices of a state) keeps it within twice the rows; cached per row layout (the iterations back up the
    same layout thousands of times)."""
    key = (id(starts), starts.size, n_rows)
    hit = _SLOTS.get(key)
    if hit is not None and hit[0] is starts:
        return hit[1]
    counts = np.diff(np.append(starts, n_rows))
    c = int(counts.max(initial=1))
    slots = None
    if starts.size and np.all(counts >= 1) and starts.size * c <= 2 * n_rows:
        slots = np.ascontiguousarray((starts[:, None] + np.minimum(np.arange(c)[None, :], (counts - 1)[:, None])).T)
    if len(_SLOTS) > 8:
        _SLOTS.clear()
    _SLOTS[key] = (starts, slots)
    return slots


def greedy(q: np.ndarray, best: np.ndarray, groups: np.ndarray, *, current: np.ndarray | None = None,
           tol: float = 0.0, sense: str = "max") -> np.ndarray:
    """The choice attaining ``best`` in every state (the lowest row on ties).

    With ``current`` (a row per state), a state keeps its current choice unless the
    best one improves on it by more than ``tol`` (policy iteration's rule, which
    stops it from cycling on rounding noise).
    """
    counts = np.diff(groups)
    n_rows = q.shape[0]
    rep = np.repeat(best, counts)
    hit = q >= rep if sense == "max" else q <= rep
    idx = np.where(hit, np.arange(n_rows), n_rows)
    arg = np.minimum.reduceat(idx, groups[:-1])
    if current is None:
        return arg
    cur = q[current]
    better = best > cur + tol if sense == "max" else best < cur - tol
    return np.where(better, arg, current)
