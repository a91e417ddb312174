"""Reachability and total rewards of MDPs, max and min, with bounds that enclose the value.

Solvers of :class:`~exactq.representations.mdp.Reachability` (``Pmax``/``Pmin`` of
``constraint U target``, also step-bounded) and
:class:`~exactq.representations.mdp.TotalReward` (``Rmax``/``Rmin`` until a target,
``C<=k``), each returning an :class:`~exactq.representations.mdp.MDPSolution` whose
``lower`` and ``upper`` enclose the value of every state.

Unbounded objectives
--------------------
1. **Graph precomputation** (:mod:`exactq.solvers.mdp_graph`): the states with value
   0 and 1 (``Pmax``: Prob0A, Prob1E; ``Pmin``: Prob0E, Prob1A; Baier & Katoen 2008,
   sec. 10.6.1), and the states with an infinite reward (``Rmin``: not Prob1E;
   ``Rmax``: not Prob1A), are settled exactly; only the other ("maybe") states are
   iterated.
2. **End components** are what makes value iteration from above wrong (inside an end
   component the Bellman operator has a fixpoint at any value): for ``Pmax`` the
   maximal end components of the maybe states are collapsed into one state each
   (Baier et al., CAV 2017; Haddad & Monmege, TCS 2018), for ``Rmin`` those of the
   zero-reward choices. For ``Pmin`` (after Prob0E) and ``Rmax`` (on Prob1A) the maybe
   states hold no end component. What is left has a unique fixpoint, and value
   iteration converges to it from any start.
3. **Interval iteration**: a lower sequence from 0 and an upper one from a vector
   known to lie above the value, both under the same Bellman operator and each kept
   monotone (``max``/``min`` with the previous iterate). For probabilities the upper
   start is 1 (Baier et al. 2017). For rewards an upper start is *verified*: a
   candidate ``u`` with ``F(u) <= u`` lies above the unique fixpoint (the
   guess-and-verify step of optimistic value iteration, Hartmanns & Kaminski, CAV
   2020). For ``Rmin`` the candidate is the exact value of an almost-surely-reaching
   scheduler (:func:`~exactq.solvers.mdp_graph.attractor`) raised by a relative
   1e-10, which verifies because rewards are >= 0; for ``Rmax`` it is the converged
   lower iterate raised by a relative epsilon that halves after each failed
   verification, and, after a few failures, the value of policy iteration's
   scheduler raised the same way.
   Iteration stops when ``upper - lower <= 2 max(tol |mid|, atol)`` in every state.
4. **Policy iteration** with exact sparse solves (SuperLU) on the same reduced model.
   On the reduced model every scheduler reaches the settled states almost surely
   (``Rmin``: policy iteration starts from the attractor and stays proper, Bertsekas &
   Tsitsiklis 1991), so every solve is non-singular (an M-matrix). Its values ``x``
   become *verified* bounds: with ``b >= 0``, ``(1 + d) x`` is a super-solution and
   ``(1 - d) x`` a sub-solution of the Bellman operator, which one backup each
   confirms (:func:`verified_bracket`; the same Knaster-Tarski argument as step 3).
   That slack is relative: a choice better than the kept one by an ulp, absolute, in a
   state whose one-step value ``b`` is 0 defeats every ``d``. Then (or where the
   relative bracket is wider than ``tol``) :func:`defect_bracket` makes the slack
   additive, ``x -/+ w`` with ``w`` the value of the *defect MDP* (the choices'
   defects ``q_c(x) - x_s`` and a rounding allowance as rewards; with a uniform defect
   ``eps`` it is ``eps`` times the expected number of steps), by a few sparse solves,
   each side again verified by one backup; ``info["certificate"]`` says which ran and
   ``info["certificate_width"]`` how wide it was.
   ``method="auto"`` runs step 3 for up to 1,000 sweeps (fast where value iteration
   mixes fast, and no factorisation, whose fill on unstructured models can be large),
   then this (a few sparse LUs instead of many thousands of sweeps where it mixes
   slowly), then step 3 again from the tightest bounds where an LU does not fit the
   memory budget, a system is singular, or the values cannot be verified to ``tol``
   (ill-conditioned systems: expected times of 1e20 steps).
   ``method="interval-iteration"`` forces step 3, the independent check;
   ``method="policy-iteration"`` returns the values alone (``lower = upper``).

Policy iteration's bounds include the floating-point rounding of their checks:
:func:`verified_bracket` pads its float test (which alone would accept ``F(U) <= U +
8 eps |U|``, ~2.5e-13 relative below the value on a 2,001-state gambler of ~1e5
expected steps) by the accumulated rounding bound (:func:`_pad`), and
:func:`defect_bracket` carries its rounding allowance in ``w``. Interval iteration's
iterates (step 3) are float backups, as in Storm and PRISM: exact up to the rounding
of ~``eps T`` relative over ``T`` expected steps, which is not added.

Step-bounded objectives (``U<=k``, ``C<=k``) take ``k`` backups from the terminal
values: exact up to rounding, ``lower = upper``; the scheduler returned is the one of
the first step (the optimal one depends on the steps left).

References
----------
C. Baier and J.-P. Katoen, *Principles of Model Checking*, MIT Press, 2008, sec. 10.6.
C. Baier, J. Klein, L. Leuschner, D. Parker, S. Wunderlich, "Ensuring the reliability
of your model checker: interval iteration for Markov decision processes", CAV 2017.
S. Haddad, B. Monmege, "Interval iteration algorithm for MDPs and IMDPs", Theoretical
Computer Science 735 (2018) 111-131.
A. Hartmanns, B. L. Kaminski, "Optimistic value iteration", CAV 2020.
D. P. Bertsekas, J. N. Tsitsiklis, "An analysis of stochastic shortest path problems",
Mathematics of Operations Research 16(3) (1991) 580-595.
M. L. Puterman, *Markov Decision Processes*, Wiley, 1994, sec. 7.2 (policy iteration).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.budget import memory_budget, require_memory
from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ConvergenceWarning, ExactqError, ModelError
from exactq.representations.mdp import MDPSolution, Reachability, Scheduler, TotalReward

from .mdp_graph import (RowStructure, attractor, backup, greedy, maximal_end_components, prob0a, prob0e, prob1a,
                        prob1e, rows_inside)

__all__ = ["reachability", "total_reward", "Reduced", "reduce_to", "interval_iteration", "policy_iteration",
           "verified_bracket", "defect_bracket",
           "METHODS"]

METHODS = ("auto", "interval-iteration", "policy-iteration")
#: default iteration budget of interval iteration (sweeps)
MAXITER = 1_000_000
_EPS = np.finfo(float).eps


# ---------------------------------------------------------------------------------------
# the reduced problem: the maybe states only, the settled states' values folded into b
# ---------------------------------------------------------------------------------------
class Reduced:
    """``x = opt_c (b_c + sum_j Q[c, j] x_j)`` on the maybe states, end components collapsed.

    Attributes
    ----------
    Q : (n_rows, n) CSR, substochastic
    groups : (n + 1,) row groups
    b : (n_rows,) the one-step reward plus the settled states' values
    rows : (n_rows,) the original choice of every reduced row
    klass : (n_states,) the reduced state of every original state (``-1``: settled)
    collapsed : (n_states,) bool, the states of a collapsed end component
    internal : (n_choices,) bool, the choices inside a collapsed end component
    """

    def __init__(self, Q, groups, b, rows, klass, collapsed, internal):
        self.Q, self.groups, self.b, self.rows = Q, groups, b, rows
        self.klass, self.collapsed, self.internal = klass, collapsed, internal
        self.starts = groups[:-1]
        self.n = int(groups.size - 1)
        #: how the policies' systems above :data:`POLICY_LU_ALWAYS` states are solved: ``None`` until the first
        #: one decides (:func:`_solve_policy`), ``True`` the sparse LU, ``False`` BiCGSTAB (the LU if it fails)
        self.policy_lu: bool | None = None
        #: what decided it, for the result's info
        self.policy_why = ""
        #: the last policy's sparse LU, kept for the certificates' solves with the same policy
        self._lu: tuple | None = None

    def exit_probability(self) -> np.ndarray:
        """(n_rows,) probability that a row leaves the reduced states."""
        return 1.0 - np.asarray(self.Q.sum(axis=1)).ravel()


def reduce_to(mdp, st: RowStructure, maybe, rows_ok, fixed, reward=None, collapse=None) -> Reduced:
    """The maybe states with the choices ``rows_ok``; MECs of the choices ``collapse`` collapsed.

    ``fixed`` holds the (finite) values of the settled states (0 on the maybe states);
    every kept row's moves to settled states contribute ``P @ fixed`` to ``b``.
    """
    n_maybe = int(maybe.sum())
    keep = rows_ok & maybe[st.owner]
    klass = np.full(mdp.n_states, -1, dtype=np.int64)
    klass[maybe] = np.arange(n_maybe)
    n_classes = n_maybe
    collapsed = np.zeros(mdp.n_states, dtype=bool)
    internal = np.zeros(mdp.n_choices, dtype=bool)
    if collapse is not None and n_maybe:
        comp, internal = maximal_end_components(mdp.P, mdp.row_groups, states=maybe, rows=collapse & keep,
                                                structure=st)
        collapsed = comp >= 0
        if np.any(collapsed):
            keep = keep & ~internal
            n_mec = int(comp.max()) + 1
            single = maybe & ~collapsed
            klass[collapsed] = comp[collapsed]
            klass[single] = n_mec + np.arange(int(single.sum()))
            n_classes = n_mec + int(single.sum())
    kept = np.flatnonzero(keep)
    order = np.argsort(klass[st.owner[kept]], kind="stable")
    old = kept[order]
    sub = mdp.P[old]
    inside = maybe[sub.indices]
    Q = sp.csr_matrix((np.where(inside, sub.data, 0.0), np.where(inside, klass[sub.indices], 0), sub.indptr.copy()),
                      shape=(old.size, n_classes))
    Q.sum_duplicates()
    Q.eliminate_zeros()
    b = sub @ fixed
    if reward is not None:
        b = b + reward[old]
    counts = np.bincount(klass[st.owner[old]], minlength=n_classes)
    if np.any(counts == 0):  # the graph precomputation rules this out
        raise ModelError("internal: a collapsed end component of the maybe states has no choice leaving it")
    groups = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Reduced(Q, groups, b, old, klass, collapsed, internal)


# ---------------------------------------------------------------------------------------
# the iterations
# ---------------------------------------------------------------------------------------
def _converged(lo, hi, tol, atol) -> bool:
    """``upper - lower <= 2 max(tol |mid|, atol)`` everywhere (``atol`` at least 1e-300: zero values meet)."""
    mid = 0.5 * (np.abs(lo) + np.abs(hi))
    return bool(np.all(hi - lo <= 2.0 * np.maximum(tol * mid, max(atol, 1e-300))))


def interval_iteration(red: Reduced, sense: str, lower, upper, *, tol: float, atol: float = 0.0,
                       maxiter: int = MAXITER) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Iterate a lower and an upper vector under the same Bellman operator until they meet.

    Both start from bounds of the unique fixpoint (``lower <= x* <= upper``) and stay
    bounds (each is kept monotone). Stops when ``upper - lower <= 2 max(tol |mid|,
    atol)`` in every state, or after ``maxiter`` sweeps.

    Returns
    -------
    lower, upper, sweeps, converged
    """
    X = np.column_stack([lower, upper]).astype(float)
    if red.n == 0:
        return X[:, 0], X[:, 1], 0, True
    it = 0
    check = 1
    while it < maxiter:
        best, _ = backup(red.Q, red.b, X, red.starts, sense)
        np.maximum(X[:, 0], best[:, 0], out=X[:, 0])
        np.minimum(X[:, 1], best[:, 1], out=X[:, 1])
        it += 1
        if it % check == 0:
            if _converged(X[:, 0], X[:, 1], tol, atol):
                return X[:, 0], X[:, 1], it, True
            check = min(check * 2, 16)  # test the stopping rule less often once it is far away
    return X[:, 0], X[:, 1], it, _converged(X[:, 0], X[:, 1], tol, atol)


def _lower_until_stable(red, sense, x, eps, maxiter):
    """Value iteration from below until the relative change of a sweep is <= eps.

    Returns ``(x, sweeps, hopeless)``: ``hopeless`` when, extrapolated at its observed
    geometric rate (every :data:`_RATE_SWEEPS` sweeps), the change would not fall to
    ``eps`` within the sweeps left (consensus N=4, K=4, Rmax: 1,000 sweeps, 1.8 s, before
    policy iteration solved it in 0.17 s).
    """
    it = 0
    mark = None
    while it < maxiter:
        best, _ = backup(red.Q, red.b, x, red.starts, sense)
        best = np.maximum(best, x)
        it += 1
        change = np.max(np.abs(best - x) / np.maximum(np.abs(best), 1e-300)) if best.size else 0.0
        x = best
        if change <= eps:
            break
        if it % _RATE_SWEEPS == 0:
            if mark is not None and 0 < change < mark:
                rate = (change / mark) ** (1.0 / _RATE_SWEEPS)
                if np.log(eps / change) / np.log(rate) > maxiter - it:
                    return x, it, True
            elif mark is not None and change >= mark:
                return x, it, True
            mark = change
    return x, it, False


def _verify_upper(red, sense, u, tries: int = 8):
    """Iterate ``u`` a few times; return a vector ``v`` with ``F(v) <= v`` (an upper bound), or None.

    The test allows the rounding of one backup (8 eps relative): where ``F(u) = u`` in
    exact arithmetic (a state whose chosen choice earns nothing and stays), the float
    backup may land one unit in the last place above.
    """
    for _ in range(tries):
        fu, _ = backup(red.Q, red.b, u, red.starts, sense)
        if np.all(fu <= u + 8 * _EPS * np.abs(u)):
            return np.minimum(fu, u)  # F(F(u)) <= F(u) by monotonicity
        u = fu
    return None


#: up to this many reduced states a policy's system is always factorised (no prediction needed)
POLICY_LU_ALWAYS = 5000


#: BiCGSTAB's iteration cap on a policy's system before the sparse LU (consensus N=4, K=4: BiCGSTAB ran to
#: its default cap of thousands of iterations and broke down on every policy, 36 s, where the LUs took 0.9 s)
POLICY_BICGSTAB_ITERATIONS = 300

#: the first large policy system is factorised (and timed) when the envelope bound of its LU fits the memory
#: budget and predicts at most this many seconds: that bound is for the reverse Cuthill-McKee order, and
#: SuperLU's minimum degree order is usually far below it (consensus N=4, K=4, 31,354 states: predicted
#: 0.8 s, factorised in 0.028 s, where BiCGSTAB took 0.36 s; a random 50,000-state MDP: predicted 16e12
#: flops, never tried)
POLICY_LU_PROBE_SECONDS = 5.0

#: the probe's LU is kept for the next policies while it took at most this many times the expected BiCGSTAB
#: solve (:data:`exactq.solvers.linear.EXPECTED_ITERATIONS` iterations)
POLICY_LU_KEEP = 1.0


def _policy_lu(A, n: int, nnz: int):
    require_memory(40.0 * (nnz + n) * 8, f"the sparse LU of a policy's system ({n} states)")
    try:
        return spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    except RuntimeError as exc:  # exactly singular: the scheduler keeps an end component
        raise ConvergenceError(f"policy iteration: a policy's linear system is singular ({exc})") from None


def _decide_policy_solver(red: Reduced, A) -> "spla.SuperLU | None":
    """Decide, on the first policy system above :data:`POLICY_LU_ALWAYS` states, how this model's policy systems
    are solved (``red.policy_lu``); returns the probe's LU when one was made.

    The LU's predicted cost (:func:`exactq.solvers.linear.choose`) decides when it calls for the LU. Otherwise,
    when the prediction is the envelope bound (an upper bound of the fill in the reverse Cuthill-McKee order)
    and it fits the memory budget and :data:`POLICY_LU_PROBE_SECONDS`, the LU is made and timed: kept while it
    costs at most :data:`POLICY_LU_KEEP` times an expected BiCGSTAB solve. Policy iteration solves tens of
    systems of one sparsity pattern but for the changed rows, so one measurement decides for all of them.
    """
    from .linear import EXPECTED_ITERATIONS, ITERATION_OVERHEAD_SECONDS, ITERATIVE_FLOPS_PER_SECOND, choose

    n = red.n
    name, det = choose(A)
    if name == "direct":
        red.policy_lu, red.policy_why = True, det.get("why", "")
        return None
    budget = memory_budget()
    iterative = EXPECTED_ITERATIONS * (8.0 * A.nnz / ITERATIVE_FLOPS_PER_SECOND + ITERATION_OVERHEAD_SECONDS)
    seconds = float(det.get("predicted_lu_seconds", np.inf))
    if (str(det.get("prediction", "")).startswith("envelope") and seconds <= POLICY_LU_PROBE_SECONDS
            and (budget is None or float(det.get("predicted_lu_bytes", np.inf)) <= budget)):
        t = time.perf_counter()
        lu = _policy_lu(A, n, A.nnz)
        took = time.perf_counter() - t
        red.policy_lu = took <= POLICY_LU_KEEP * iterative
        red.policy_why = (f"the first policy's LU took {took:.2g} s (envelope bound {seconds:.2g} s) against "
                          f"~{iterative:.2g} s expected of BiCGSTAB: "
                          + ("the LU" if red.policy_lu else "BiCGSTAB") + " for the policies' systems")
        return lu
    red.policy_lu, red.policy_why = False, det.get("why", "")
    return None


def _solve_policy(red: Reduced, choice: np.ndarray, rhs: np.ndarray | None = None) -> np.ndarray:
    """Value of the reduced scheduler ``choice``: ``(I - Q_c) x = b_c`` by a sparse LU and one refinement step,
    or, above :data:`POLICY_LU_ALWAYS` states where the LU is measured (or predicted) to cost more than an
    iterative solve (:func:`_decide_policy_solver`), by preconditioned BiCGSTAB to its stated error bound.

    ``rhs`` (one entry per reduced state) replaces ``b_c`` (the defect certificate's systems).
    ``I - Q_c`` of a scheduler that leaves the reduced states almost surely is a
    non-singular M-matrix, so the LU pivots on the diagonal.
    """
    n = red.n
    b = red.b[choice] if rhs is None else np.asarray(rhs, dtype=float)
    Qc = red.Q[choice]
    A = (sp.identity(n, format="csc") - Qc.tocsc()).tocsc()
    lu = None
    if n > POLICY_LU_ALWAYS:
        from .linear import solve_mmatrix

        if red.policy_lu is None:
            lu = _decide_policy_solver(red, A)
        if lu is None and red.policy_lu is False:
            # an unstructured model's LU can fill in catastrophically (a random 50,000-state MDP: 2 GB and
            # minutes). Scaled to a largest entry of 1: BiCGSTAB's breakdown test is absolute (scipy: rho <
            # eps^2), so a right-hand side of 1e-20 (a residual to refine) broke down at once and came back as 0
            scale = float(np.max(np.abs(b), initial=0.0))
            if scale == 0.0 or not np.isfinite(scale):
                return np.zeros(n) if scale == 0.0 else np.full(n, np.nan)
            x, info = solve_mmatrix(A, b / scale, solver="bicgstab", what=f"a policy's system ({n} states)",
                                    maxiter=POLICY_BICGSTAB_ITERATIONS)
            status = info["solver"].get("status", 0)
            if status == 0:
                return np.atleast_1d(np.asarray(x, dtype=float)) * scale
            red.policy_lu = True  # the next policies of this model are close: their systems fail the same way
            red.policy_why = f"BiCGSTAB failed on a policy's system (status {status}): the sparse LU"
            # asked for by name, solve_mmatrix hands back its last iterate: never a value here; the sparse LU
            # below instead (consensus N=4, K=4: BiCGSTAB breaks down on a 31,354-state policy system, and the
            # error sent Pmax to interval iteration, 1.3 s -> 80 s), or an error when the LU is over the budget
            try:
                require_memory(40.0 * (Qc.nnz + n) * 8, f"the sparse LU of a policy's system ({n} states)")
            except ExactqError:
                raise ConvergenceError(f"policy iteration: BiCGSTAB did not converge on a policy's system ({n} "
                                       f"states; status {status}, residual {info['residual']:.2e}) and its "
                                       "sparse LU is over the memory budget") from None
    if lu is None and red._lu is not None:
        if np.array_equal(red._lu[0], choice):
            lu = red._lu[1]
        else:
            x = _near_policy_solve(red, A, Qc, b, choice)
            if x is not None:
                return x
    if lu is None:
        lu = _policy_lu(A, n, Qc.nnz)
    red._lu = (np.array(choice, copy=True), lu)
    x = lu.solve(b)
    x = x + lu.solve(b - A @ x)
    return np.atleast_1d(np.asarray(x, dtype=float))


#: a policy that differs from the factorised one in at most this many states (or this fraction of them) is
#: solved by iterative refinement on the old LU (:func:`_near_policy_solve`)
NEAR_POLICY_STATES = 64
NEAR_POLICY_FRACTION = 0.005
#: refinement steps tried before a new LU
NEAR_POLICY_STEPS = 8


def _near_policy_solve(red: Reduced, A, Qc, b: np.ndarray, choice: np.ndarray):
    """``A x = b`` by iterative refinement with the LU of a policy that differs in a few states, or ``None``.

    Policy iteration's last improvements change a few states (consensus N=4: 8-60 of 31,354), and SuperLU's
    factorisation costs 40 times its solve there (20 ms against 0.5 ms): ``x <- x + LU_old^-1 (b - A x)``
    converges at once when the change is small. Accepted when every residual is within ``8 eps (|x| + Q_c|x|
    + |b|)`` (componentwise backward error, what the LU and one refinement step give), else ``None``.
    """
    old_choice, lu = red._lu
    changed = int(np.count_nonzero(old_choice != choice))
    if changed > max(NEAR_POLICY_STATES, NEAR_POLICY_FRACTION * red.n):
        return None
    x = lu.solve(b)
    for _ in range(NEAR_POLICY_STEPS):
        r = b - A @ x
        ax = np.abs(x)
        if np.all(np.abs(r) <= 8 * _EPS * (ax + Qc @ ax + np.abs(b))):
            return np.atleast_1d(np.asarray(x, dtype=float))
        x = x + lu.solve(r)
    return None


def verified_bracket(red: Reduced, sense: str, x: np.ndarray, tol: float, atol: float = 0.0,
                     choice: np.ndarray | None = None):
    """Bounds ``L <= x* <= U`` from an approximate fixpoint ``x``, each verified by one backup and then padded
    by what that backup's rounding leaves unproven.

    With rewards and probabilities ``b >= 0`` and ``x = F(x)``, ``U = (1 + d) x``
    satisfies ``F(U) <= U`` and ``L = (1 - d) x`` satisfies ``F(L) >= L`` (each choice's
    ``Q_c x <= x``); on a reduced model with a unique fixpoint that proves ``L <= x* <= U``.
    ``d`` starts at 1e-13 and grows (x100) until both tests pass with the rounding of one
    backup allowed (8 eps relative), up to ``tol``. Where a chosen choice's ``b`` is 0 the
    slack ``d b`` is 0 too and the float test decides alone, so the allowance and the
    rounding of the test are then absorbed exactly (:func:`_pad`): ``U + w`` and
    ``L - w'`` are returned, with ``w``, ``w'`` of the order of the allowance times the
    expected number of steps. ``choice`` (policy iteration's scheduler) starts the pad's
    policies. Returns ``(L, U)`` or ``None``.
    """
    d = 1e-13
    while d <= max(tol, 1e-13):
        U = x * (1 + d)
        L = np.maximum(x * (1 - d), 0.0)
        # where x is a fixpoint only up to the solve's rounding (a choice better by a few ulps than the one
        # policy iteration kept), (1 + d) x misses F(U) <= U by those ulps; then U is iterated, U <- F(U), and
        # L <- F(L), a few times: any iterate with F(U) <= U (F(L) >= L) is a bound by the same argument
        for _ in range(_VERIFY_SWEEPS):
            best, _ = backup(red.Q, red.b, np.column_stack([L, U]), red.starts, sense)
            FL, FU = best[:, 0], best[:, 1]
            up = np.all(FU <= U + 8 * _EPS * np.abs(U))
            low = np.all(FL >= L - 8 * _EPS * np.abs(L))
            if up and low:
                return _pad(red, sense, L, U, choice)
            if not up:
                U = FU
            if not low:
                L = np.maximum(FL, 0.0)
        d *= 100.0
    return None


def _pad(red: Reduced, sense: str, L: np.ndarray, U: np.ndarray, choice: np.ndarray | None):
    """``(L - w', U + w)`` proven sub- and super-solutions, from ``L``, ``U`` that pass the float tests.

    The true ``F(U)`` exceeds the computed one by at most the backup's rounding ``e_s =
    max_c (k_c + 2) eps (b_c + Q_c |U|)`` (a row of ``k_c`` entries; Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., sec. 3.1), so ``F(U) <= U + a`` with ``a =
    max(fl F(U) - U, 0) + e``. For ``w >= 0``, ``F(U + w) <= F(U) + max_c Q_c w`` (``max``)
    and ``<= q_c(U) + Q_c w`` for the computed argmin ``c`` (``min``), so ``w >= a + Q_c w``
    over those choices makes ``U + w`` a super-solution; likewise ``L - w'`` with the
    roles of the senses swapped (:func:`_absorb`). Returns ``None`` if no ``w`` is proven.
    """
    Ub = np.column_stack([L, U])
    best, q = backup(red.Q, red.b, Ub, red.starts, sense)
    owner = np.repeat(np.arange(red.n, dtype=np.int64), np.diff(red.groups))
    size = (np.diff(red.Q.indptr) + 2).astype(float)
    err = size[:, None] * _EPS * (np.abs(red.b)[:, None] + red.Q @ np.abs(Ub))
    # per choice, an upper bound of the true defect q_c(U) - U_s (of L_s - q_c(L) for L): ties near 0, the
    # choices worse than the kept ones strongly negative (they then need no slack at all)
    rU = q[:, 1] - U[owner] + err[:, 1]
    rL = L[owner] - q[:, 0] + err[:, 0]
    argL = greedy(q[:, 0], best[:, 0], red.groups, sense=sense)
    argU = greedy(q[:, 1], best[:, 1], red.groups, sense=sense)
    start = red.starts.copy() if choice is None else choice
    try:
        if sense == "max":
            wU = _absorb(red, rU, start, every=True)
            wL = _absorb(red, np.maximum(rL, 0.0), argL, every=False)
        else:
            wU = _absorb(red, np.maximum(rU, 0.0), argU, every=False)
            wL = _absorb(red, rL, start, every=True)
    except ExactqError:
        return None
    if wU is None or wL is None:
        return None
    return np.maximum(L - wL, 0.0), U + wU


def _row_max(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.maximum.reduceat(v, starts, axis=0) if v.shape[0] else v[: starts.size]


#: policy-improvement steps :func:`_absorb` may take towards the choices that fail its check (one solve each)
ABSORB_IMPROVEMENTS = 12
#: choices whose defect bound is at least ``-ABSORB_TIE`` times the largest count as ties in :func:`_absorb`'s
#: improvements
ABSORB_TIE = 16.0


def _absorb(red: Reduced, r: np.ndarray, pol: np.ndarray, *, every: bool):
    """A proven ``w >= 0`` with ``w >= r_c + Q_c w`` for the choices ``c`` of ``pol`` or, with ``every``, for
    every choice (``r``: one bound per choice, ``>= 0`` on ``pol``'s unless ``every``); ``None`` if the checks
    fail.

    ``w`` is ``pol``'s value for the rewards ``2 max(r_c, 0)`` plus a floor (one sparse solve; the factor and
    the floor leave slack for the solve's error), checked with the rounding of ``r_c + Q_c w`` rounded up; with ``every``, up
    to :data:`ABSORB_IMPROVEMENTS` improvement steps towards the choices that fail (a policy optimal for the
    solved rewards passes the check with the floor to spare).
    """
    n = red.n
    if n == 0:
        return np.zeros(n)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(red.groups))
    size = (np.diff(red.Q.indptr) + 2).astype(float)
    # the rewards solved for: 2 r_c and a floor of 2^-10 of the largest defect where r_c <= 0. The solve's error
    # is ~eps |w| ~ eps T max r (T the expected steps), far below the floor; the floor adds 2^-10 of the width.
    # A policy optimal for these rewards passes the check on every choice with the floor to spare (where the
    # defects tie, e.g. in a loop of equal choices), so the improvements are taken on them, not on r
    top = float(np.max(r, initial=0.0)) if every else float(np.max(r[pol], initial=0.0))
    if top <= 0:
        return np.zeros(n)
    R = 2.0 * np.maximum(r, 0.0) + top * 2.0 ** -10
    for k in range(ABSORB_IMPROVEMENTS + 1):
        w = _solve_policy(red, pol, R[pol])
        if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
            return None
        Qw = red.Q @ w
        need = (r + Qw) + size * _EPS * (np.abs(r) + Qw)
        bad = need > w[owner]
        if not every:
            return w if not bad[pol].any() else None
        if not bad.any():
            return w
        if k == ABSORB_IMPROVEMENTS:
            return None
        # a failing choice beats pol's by more than the floor for the rewards R (r_c + Q_c w > w_s and R_c >=
        # r_c + floor). Every state switches to its best choice for R among the failing ones and the near-ties
        # (r_c >= -TIE x top): Howard's improvement restricted to them, so the values grow; choices with a
        # strongly negative defect (a loop of positive reward for Rmin) are never taken
        qa = np.where(bad | (r >= -ABSORB_TIE * top), R + Qw, -np.inf)
        qa[pol] = R[pol] + Qw[pol]
        best = _row_max(qa, red.starts)
        new = greedy(qa, best, red.groups, current=pol, tol=0.0, sense="max")
        if np.array_equal(new, pol):
            return None
        pol = new
    return None


#: improvements :func:`policy_iteration` may take with its per-state threshold once the absolute one is met
POLISH_STEPS = 8

#: backups :func:`verified_bracket` tries per slack before it widens the slack
_VERIFY_SWEEPS = 12


#: policy-improvement steps :func:`defect_bracket` may take on each defect MDP (one sparse solve each)
DEFECT_IMPROVEMENTS = 3
_FLIP = {"max": "min", "min": "max"}


def defect_bracket(red: Reduced, sense: str, x: np.ndarray, choice: np.ndarray, *,
                   improvements: int | None = None):
    """Bounds ``L <= x* <= U`` from policy ``choice``'s values ``x`` that absorb *absolute* defects.

    :func:`verified_bracket`'s slack ``d x`` is relative: where a choice beats the kept
    one by a few ulps (absolute) and the state's one-step value ``b`` is 0, no ``d``
    makes ``(1 + d) x`` a super-solution. Here the slack is additive. With
    ``q_c = b_c + Q_c x`` (per choice) and any ``w``::

        F(x + w) - (x + w) = opt_c (r_c + Q_c w) - w,    r_c = q_c - x_s,

    exactly (``s`` the owner of choice ``c``), so ``U = x + w`` satisfies ``F(U) <= U``
    iff ``w >= opt_c (r_c + Q_c w)``: ``w`` must be a super-solution of a *defect MDP*
    with the same transitions, the defects ``r`` as one-step rewards and the same
    ``opt``. Likewise ``L = x - w'`` satisfies ``F(L) >= L`` iff ``w' >= opt'_c (-r_c +
    Q_c w')`` with the opposite ``opt'``; and ``max(L, 0)`` too (``F(0) >= 0`` as
    ``b >= 0``). With the uniform defect ``r_c = eps`` this is ``w = eps v``, ``v >= 1 +
    max_c Q_c v`` an upper bound of the expected number of steps in the reduced states,
    finite because no scheduler can stay in them forever (module docstring, steps 2 and 4;
    Rmin's reduced model may keep end components of positive reward, which the
    per-choice defects ``r_c`` make strongly negative for the lower side, so the policies
    below avoid them); the per-choice defects give widths proportional to the defects
    met along the way (a state of value 1e-5 does not inherit the ulps of a state of
    value 0.5).

    ``w`` is the value of a policy of the defect MDP with the rewards raised by a margin
    (the rounding of ``r_c``, ``(k + 2) eps (b_c + Q_c |x| + |x_s|)`` for a row of ``k``
    entries, plus the residual of the kept choice's solve), starting from ``choice``, by
    one sparse solve; if ``w >= opt_c(r_c + rounding / 2 + Q_c w)`` fails (``eps`` is
    twice the unit roundoff, so half the allowance bounds the rounding of ``r_c``; the
    check's own rounding is allowed for too), up to ``improvements`` policy-improvement
    steps (one solve each). Before that ``x`` gets one step of iterative refinement (one more solve),
    which brings the solve's residual (BiCGSTAB's ~1e-13) down to rounding. ``U`` and
    ``L`` are then verified by one exact backup each (the algebra is not trusted alone),
    with :func:`verified_bracket`'s rounding allowance.

    Returns
    -------
    ``(L, U, details)`` or ``None`` (a check failed, a system was singular, a budget ran out).
    """
    improvements = DEFECT_IMPROVEMENTS if improvements is None else int(improvements)
    n = red.n
    details = {"solves": 0, "improvements": 0}
    if n == 0:
        z = np.zeros(0)
        return z, z, details
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(red.groups))
    try:
        # iterative refinement of the policy's values: x += (I - Q_c)^-1 (q_c(x) - x)
        _, q = backup(red.Q, red.b, x, red.starts, sense)
        x = x + _solve_policy(red, choice, q[choice] - x)
        details["solves"] += 1
        best, q = backup(red.Q, red.b, x, red.starts, sense)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(q))):
            return None
        # the rounding of q_c - x_s: a row of k entries sums k + 1 products of one sign, then one subtraction
        size = np.diff(red.Q.indptr) + 2
        rho = size * _EPS * (np.abs(red.b) + red.Q @ np.abs(x) + np.abs(x[owner])) + 1e-300
        # the check's own rounding (a row's k + 1 terms of |w| at most, unit roundoff eps / 2)
        own = 0.5 * _EPS * float(size.max(initial=2))
        margin = rho + np.abs(q[choice] - x)[owner]  # and the residual of the kept choice's solve
        sides = []
        for sign, opt in ((1.0, sense), (-1.0, _FLIP[sense])):
            r0 = sign * (q - x[owner])
            r = r0 + margin
            pol = choice
            for k in range(improvements + 1):
                w = _solve_policy(red, pol, r[pol])
                details["solves"] += 1
                if not np.all(np.isfinite(w)):
                    return None
                g, qw = backup(red.Q, r0 + 0.5 * rho, w, red.starts, opt)
                if not np.all(g <= w - own * np.abs(w)):  # an iterative solve's residual is relative to the largest entry: refine
                    w = w + _solve_policy(red, pol, (r[pol] + qw[pol] - 0.5 * rho[pol] - r0[pol]) - w)
                    details["solves"] += 1
                    g, _ = backup(red.Q, r0 + 0.5 * rho, w, red.starts, opt)
                if np.all(g <= w - own * np.abs(w)):
                    break
                if k == improvements:
                    return None
                # a policy-improvement step of the defect MDP, in the states that failed only (still monotone)
                gr, qr = backup(red.Q, r, w, red.starts, opt)
                new = np.where(g > w - own * np.abs(w), greedy(qr, gr, red.groups, current=pol, tol=0.0, sense=opt), pol)
                if np.array_equal(new, pol):
                    return None
                pol = new
                details["improvements"] += 1
            sides.append(w)
    except ExactqError:
        return None
    U = x + sides[0]
    L = np.maximum(x - sides[1], 0.0)
    best, _ = backup(red.Q, red.b, np.column_stack([L, U]), red.starts, sense)
    FL, FU = best[:, 0], best[:, 1]
    if not (np.all(FU <= U + 8 * _EPS * np.abs(U)) and np.all(FL >= L - 8 * _EPS * np.abs(L))):
        return None
    return np.maximum(np.minimum(FL, FU), L), np.maximum(np.minimum(FU, U), L), details


def policy_iteration(red: Reduced, sense: str, choice: np.ndarray, *, maxiter: int = 10_000):
    """Howard's policy iteration on the reduced model from the proper scheduler ``choice`` (reduced rows).

    Returns ``(values, choice, improvements)``; a state switches only when the best
    choice improves on the current one by more than ``16 eps (|q| + 1)`` plus twice the
    largest residual of the solve (rounding noise). That threshold is absolute: in a
    state of value 1e-36 (a gambler's ``Pmin``) it hides a choice better by 8 %. Once
    no choice passes it, up to :data:`POLISH_STEPS` more improvements use a per-state
    threshold, ``16 eps |q|`` plus twice that state's own residual (a bounded number, so
    noise cannot make it cycle).
    """
    it = 0
    polished = 0
    x = np.zeros(red.n)
    while it < maxiter:
        x = _solve_policy(red, choice)
        if not np.all(np.isfinite(x)):
            raise ConvergenceError("policy iteration: a policy's linear system is singular (the reduced model "
                                   "keeps an end component)")
        best, q = backup(red.Q, red.b, x, red.starts, sense)
        own = q[choice]
        spread = float(np.max(np.abs(own - x))) if x.size else 0.0  # the solve's residual
        tol = 16 * _EPS * (np.abs(own) + 1.0) + 2.0 * spread
        new = greedy(q, best, red.groups, current=choice, tol=tol, sense=sense)
        it += 1
        if np.array_equal(new, choice):
            if polished >= POLISH_STEPS:
                return x, choice, it
            fine = 16 * _EPS * np.abs(own) + 2.0 * np.abs(own - x)
            new = greedy(q, best, red.groups, current=choice, tol=fine, sense=sense)
            if np.array_equal(new, choice):
                return x, choice, it
            polished += 1
        choice = new
    raise ConvergenceError(f"policy iteration did not stabilise in {maxiter} improvements")


def _proper_choice(red: Reduced) -> np.ndarray:
    """A reduced scheduler reaching the settled states almost surely (an attractor to 'outside')."""
    n = red.n
    exit_p = red.exit_probability()
    # one virtual absorbing state n that every row with exit probability moves to
    Q = red.Q.tocoo()
    rows = np.concatenate([Q.row, np.flatnonzero(exit_p > 1e-300), [red.Q.shape[0]]])
    cols = np.concatenate([Q.col, np.full(int(np.sum(exit_p > 1e-300)), n), [n]])
    ext = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(red.Q.shape[0] + 1, n + 1))
    groups = np.concatenate([red.groups, [red.Q.shape[0] + 1]])
    target = np.zeros(n + 1, dtype=bool)
    target[n] = True
    reached, choice = attractor(ext, groups, target, np.ones(ext.shape[0], dtype=bool))
    if not np.all(reached):
        raise ModelError("internal: the reduced model has states that cannot leave it")
    return choice[:n]


# ---------------------------------------------------------------------------------------
# the schedulers of the original model
# ---------------------------------------------------------------------------------------
def _lift_scheduler(mdp, st: RowStructure, red: Reduced, reduced_choice: np.ndarray, base: np.ndarray) -> Scheduler:
    """The original scheduler: ``base`` on settled states, the reduced choices on the maybe states.

    In a collapsed end component the state owning the chosen exit row takes it, and
    the others move towards it inside the component (an attractor on its choices).
    """
    choice = base.copy()
    if red.n:
        rows = red.rows[reduced_choice]
        owners = st.owner[rows]
        choice[owners] = rows
        if np.any(red.collapsed):
            exits = np.zeros(mdp.n_states, dtype=bool)
            exits[owners[red.collapsed[owners]]] = True
            _, nav = attractor(mdp.P, mdp.row_groups, exits, red.internal, structure=st)
            move = red.collapsed & ~exits & (nav >= 0)
            choice[move] = nav[move]
    return Scheduler(choice)


def _first_rows(mdp) -> np.ndarray:
    return np.asarray(mdp.row_groups[:-1], dtype=np.int64).copy()


def _rows_staying(st: RowStructure, states: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``base`` with every state of ``states`` given a choice that keeps inside ``states`` (where one exists)."""
    inside = rows_inside(st, states)
    idx = np.where(inside, np.arange(st.n_choices), st.n_choices)
    first = np.minimum.reduceat(idx, st.groups[:-1])
    ok = states & (first < st.n_choices)
    out = base.copy()
    out[ok] = first[ok]
    return out


def _options(method, tol, atol, maxiter):
    if method not in METHODS:
        raise ModelError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if not (0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    if atol < 0:
        raise ModelError(f"atol must be >= 0; got {atol!r}")
    return MAXITER if maxiter is None else int(maxiter)


def _not_converged(what: str, width: float, sweeps: int, strict: bool) -> None:
    msg = (f"{what}: interval iteration stopped after {sweeps} sweeps with bounds {width:.3e} apart; the bounds "
           "still enclose the value")
    if strict:
        raise ConvergenceError(msg)
    warnings.warn(msg, ConvergenceWarning, stacklevel=3)


#: sweeps of interval iteration that ``method="auto"`` tries before policy iteration
AUTO_SWEEPS = 1000


def _upper_start(red, sense, upper_start, lower, tol, atol, budget, info):
    """A verified upper start for interval iteration; returns ``(lower, upper or None, sweeps)``."""
    nit = 0
    if not isinstance(upper_start, str):
        info["upper_start"] = f"{upper_start:g}"
        return lower, np.full(red.n, float(upper_start)), 0
    if upper_start == "attractor":  # Rmin: an almost-surely-reaching scheduler's exact value, raised
        try:
            seed = _solve_policy(red, _proper_choice(red))
        except ExactqError as exc:
            info["upper_start"] = f"not found: {exc}"
            return lower, None, 0
        for delta in (1e-10, 1e-8, 1e-6):
            upper = _verify_upper(red, sense, seed * (1 + delta), tries=1)
            if upper is not None:
                info["upper_start"] = "value of an almost-surely-reaching scheduler, verified F(u) <= u"
                return lower, upper, 0
        return lower, None, 0
    # "verify" (Rmax): an optimistic guess from the lower iterate, the guess-and-verify step of OVI
    eps = max(tol, 1e-12)
    for _ in range(6):
        lower, k, hopeless = _lower_until_stable(red, sense, lower, eps * 0.5, max(budget - nit, 1))
        nit += k
        upper = _verify_upper(red, sense, lower * (1 + eps) + eps * max(atol, 1e-300))
        if upper is not None:
            info["upper_start"] = f"optimistic guess (relative {eps:.1e}) verified F(u) <= u"
            return lower, upper, nit
        if nit >= budget or hopeless:
            break
        eps *= 0.5
    return lower, None, nit


def _policy_bracket(red, sense, proper, tol, atol, info, warm=None):
    """Policy iteration and its verified bracket: ``(L, U, choice, improvements)``, or None (reason in info).

    ``warm`` (a lower bound from interval iteration) gives the first scheduler, greedy on
    it, where any scheduler will do (every one leaves the maybe states surely); ``Rmin``
    starts from a proper scheduler.
    """
    if proper:
        start = _proper_choice(red)
    elif warm is not None:
        best, q = backup(red.Q, red.b, warm, red.starts, sense)
        start = greedy(q, best, red.groups, sense=sense)
    else:
        start = greedy(*_backup0(red, sense), red.groups, sense=sense)
    try:
        x, choice, nit = policy_iteration(red, sense, start)
    except ExactqError as exc:  # a budget, a singular system: interval iteration needs neither
        info["policy_iteration"] = f"not used: {exc}"
        return None
    info["improvements"] = nit
    if red.policy_why:
        info["policy_solver"] = red.policy_why
    bracket = verified_bracket(red, sense, x, tol, atol, choice=choice)
    if bracket is not None:
        info["certificate"] = ("relative: (1 - d) x and (1 + d) x, verified by one backup each and padded by the "
                               "accumulated rounding of that backup")
    if bracket is None or not _converged(bracket[0], bracket[1], tol, atol):
        # absolute defects (a choice better by ulps where b = 0): the additive certificate
        defect = defect_bracket(red, sense, x, choice)
        if defect is not None:
            L, U, details = defect
            if bracket is not None:
                L, U = np.maximum(L, bracket[0]), np.minimum(U, bracket[1])
            bracket = (L, U)
            info["certificate"] = (f"defect: x -/+ the expected accumulated defect ({details['solves']} solves, "
                                   f"{details['improvements']} improvements), verified by one backup each")
    if bracket is None:
        info["policy_iteration"] = "its values could not be verified as bounds (ill-conditioned systems)"
        return None
    L, U = bracket
    info["certificate_width"] = float(np.max(U - L)) if U.size else 0.0
    mid = 0.5 * (np.abs(L) + np.abs(U))
    info["certificate_relative_width"] = float(np.max((U - L) / np.maximum(mid, 1e-300))) if U.size else 0.0
    return L, U, choice, nit, x


def _solve(mdp, st, red: Reduced, sense, method, upper_start, tol, atol, maxiter, strict, what, proper=False):
    """Solve the reduced model; returns ``lower, upper, choice, nit, info`` on the reduced states.

    ``auto``: interval iteration for up to :data:`AUTO_SWEEPS` sweeps (cheap where value
    iteration converges fast, and no factorisation whose fill could be large), then
    policy iteration with verified bounds (a few LUs where it does not), then interval
    iteration again from the tightest bounds found, up to ``maxiter``.
    """
    info: dict = {"maybe_states": int(np.sum(red.klass >= 0)), "reduced_states": red.n,
                  "collapsed_end_component_states": int(red.collapsed.sum())}
    if red.n == 0:
        z = np.zeros(0)
        return z, z, np.zeros(0, dtype=np.int64), 0, info
    if method == "policy-iteration":
        start = _proper_choice(red) if proper else greedy(*_backup0(red, sense), red.groups, sense=sense)
        x, choice, nit = policy_iteration(red, sense, start)
        info["improvements"] = nit
        return x, x.copy(), choice, nit, info
    budget = min(AUTO_SWEEPS, maxiter) if method == "auto" else maxiter
    lower, upper, nit = _upper_start(red, sense, upper_start, np.zeros(red.n), tol, atol, budget, info)
    if upper is not None:
        if method == "auto":
            lower, upper, sweeps, ok = _interval_or_switch(red, sense, lower, upper, tol, atol, max(budget - nit, 1))
        else:
            lower, upper, sweeps, ok = interval_iteration(red, sense, lower, upper, tol=tol, atol=atol,
                                                          maxiter=max(budget - nit, 1))
        nit += sweeps
        if ok or method == "interval-iteration":
            if not ok:
                _not_converged(what, float(np.max(upper - lower)), nit, strict)
            return _finish(red, sense, lower, upper, nit, info)
    pi = _policy_bracket(red, sense, proper, tol, atol, info, warm=lower if upper is not None else None)
    if pi is not None:
        L, U, choice, k, x = pi
        if upper is not None:
            L, U = np.maximum(L, lower), np.minimum(U, upper)
        if _converged(L, U, tol, atol):
            info["bounds"] = "policy iteration's values, lowered and raised, verified by one backup each"
            info["sweeps"] = nit
            return L, U, choice, nit + k, info
        lower, upper = L, U
    if upper is None:  # Rmax without a verified upper bound so far: the full budget for the guess
        lower, upper, k = _upper_start(red, sense, upper_start, lower, tol, atol, maxiter, info)
        nit += k
        if upper is None:
            raise ConvergenceError(f"{what}: no upper bound could be verified (F(u) <= u failed within {maxiter} "
                                   "sweeps, and policy iteration's values could not be verified)")
    lower, upper, sweeps, ok = interval_iteration(red, sense, lower, upper, tol=tol, atol=atol,
                                                  maxiter=max(maxiter - nit, 1))
    nit += sweeps
    if not ok:
        _not_converged(what, float(np.max(upper - lower)), nit, strict)
    return _finish(red, sense, lower, upper, nit, info)


#: ``auto`` measures interval iteration's rate over this many sweeps before it decides to go on
_RATE_SWEEPS = 64


def _interval_or_switch(red, sense, lower, upper, tol, atol, budget):
    """Interval iteration for up to ``budget`` sweeps, stopped early where it would not meet in them.

    After :data:`_RATE_SWEEPS` sweeps, and every time as many again, the largest width is
    extrapolated at its observed geometric rate; when the sweeps it would still need
    exceed what is left of the budget, the bounds so far are returned (not converged),
    and policy iteration takes over (a few sparse LUs instead of sweeps that would be
    spent anyway).
    """
    done = 0
    width0 = float(np.max(upper - lower)) if red.n else 0.0
    while done < budget:
        step = min(_RATE_SWEEPS, budget - done)
        lower, upper, k, ok = interval_iteration(red, sense, lower, upper, tol=tol, atol=atol, maxiter=step)
        done += k
        if ok or done >= budget:
            return lower, upper, done, ok
        width = float(np.max(upper - lower))
        target = 2.0 * max(tol * float(np.max(0.5 * (np.abs(lower) + np.abs(upper)))), atol, 1e-300)
        if width0 > 0 and width > 0 and width < width0:
            rate = (width / width0) ** (1.0 / k)
            need = np.log(target / width) / np.log(rate) if rate < 1 else np.inf
            if need > budget - done:
                return lower, upper, done, False
        elif width >= width0 > 0:
            return lower, upper, done, False
        width0 = width
    return lower, upper, done, False


def _finish(red, sense, lo, hi, nit, info):
    best, q = backup(red.Q, red.b, lo, red.starts, sense)
    info["sweeps"] = nit
    return lo, hi, greedy(q, best, red.groups, sense=sense), nit, info


def _method_used(method: str, info: dict) -> str:
    if method == "policy-iteration":
        return "policy-iteration"
    if "bounds" in info:
        return "policy-iteration (verified bounds)"
    return "interval-iteration"


def _backup0(red, sense):
    best, q = backup(red.Q, red.b, np.zeros(red.n), red.starts, sense)
    return q, best


# ---------------------------------------------------------------------------------------
# the public solvers
# ---------------------------------------------------------------------------------------
@register_solver(Reachability, name="value-bounds", options=("method", "tol", "atol", "maxiter", "strict"),
                 doc="Pmax/Pmin of (constraint U target) with enclosing bounds: graph precomputation, MEC collapse, "
                     "policy iteration with verified bounds or interval iteration")
def reachability(problem: Reachability, *, method: str = "auto", tol: float = 1e-9, atol: float = 0.0,
                 maxiter: int | None = None, strict: bool = False) -> MDPSolution:
    """``Pmax`` / ``Pmin`` of ``constraint U target`` (or ``U<=k``) from every state (module docstring).

    Parameters
    ----------
    problem : Reachability
    method : {"auto", "interval-iteration", "policy-iteration"}
        ``auto``: interval iteration for up to :data:`AUTO_SWEEPS` sweeps; if the
        bounds have not met by then, policy iteration, its values turned into bounds
        verified by one backup each (:func:`verified_bracket`); where that fails (a
        memory budget, a singular or ill-conditioned system), interval iteration again
        from the tightest bounds, up to ``maxiter`` sweeps. ``interval-iteration``:
        only that (the independent check). ``policy-iteration``: its values alone
        (``lower = upper``).
    tol, atol : float
        Stop when ``upper - lower <= 2 max(tol |value|, atol)`` in every maybe state.
    maxiter : int, optional
        Sweeps of interval iteration (default 1e6); the bounds returned after running
        out still enclose the value, with a :class:`ConvergenceWarning`.
    strict : bool
        Non-convergence is a :class:`ConvergenceError` instead.

    Returns
    -------
    MDPSolution
        ``info`` counts the states settled by graph search (``prob0``, ``prob1``), the
        maybe states and the collapsed end components.

    Examples
    --------
    A gamble: from state 0, ``safe`` reaches the goal 1 with probability 0.5 (else the
    trap 2); ``risky`` with 0.3, else back to 0. ``Pmax = 1`` (keep trying) and ``Pmin = 0.5``:

    >>> import scipy.sparse as sp
    >>> from exactq.representations.mdp import MDP
    >>> P = sp.csr_matrix([[0, .5, .5], [.7, .3, 0], [0, 1, 0], [0, 0, 1]])
    >>> m = MDP(P, [0, 2, 3, 4], labels={"goal": [False, True, False]})
    >>> hi = reachability(Reachability(m, "goal", "max"))
    >>> lo = reachability(Reachability(m, "goal", "min"))
    >>> hi.at(0), lo.at(0)[0]
    ((1.0, 1.0, 1.0), 0.5)
    """
    t0 = time.perf_counter()
    maxiter = _options(method, tol, atol, maxiter)
    mdp, sense = problem.mdp, problem.sense
    st = RowStructure(mdp.P, mdp.row_groups)
    target = problem.target
    constraint = np.ones(mdp.n_states, dtype=bool) if problem.constraint is None else problem.constraint
    if problem.steps is not None:
        return _bounded_reach(mdp, st, target, constraint, sense, problem.steps, t0)
    if sense == "max":
        zero = prob0a(mdp.P, mdp.row_groups, constraint, target, structure=st)
        one, stay = prob1e(mdp.P, mdp.row_groups, constraint, target, structure=st, zero_max=zero, with_rows=True)
    else:
        zero = prob0e(mdp.P, mdp.row_groups, constraint, target, structure=st)
        one = prob1a(mdp.P, mdp.row_groups, constraint, target, structure=st, zero_min=zero)
    maybe = ~zero & ~one
    fixed = one.astype(float)
    red = reduce_to(mdp, st, maybe, np.ones(mdp.n_choices, dtype=bool), fixed,
                    collapse=np.ones(mdp.n_choices, dtype=bool) if sense == "max" else None)
    lo, hi, choice, nit, info = _solve(mdp, st, red, sense, method, 1.0, tol, atol, maxiter, strict,
                                       f"P{sense}")
    method_used = _method_used(method, info)
    if method == "policy-iteration" and lo.size and not (np.min(lo) >= -1e-9 and np.max(hi) <= 1.0 + 1e-9):
        # unverified values that are not even probabilities: a solve went wrong (never clip them into [0, 1])
        raise ConvergenceError(f"P{sense}: policy iteration's values leave [0, 1] (from {np.min(lo):.3g} to "
                               f"{np.max(hi):.3g}): a policy's linear solve is wrong")
    lower, upper = fixed.copy(), fixed.copy()
    lower[maybe], upper[maybe] = lo[red.klass[maybe]], hi[red.klass[maybe]]
    np.clip(lower, 0.0, 1.0, out=lower)
    np.clip(upper, 0.0, 1.0, out=upper)
    base = _first_rows(mdp)
    if sense == "max":  # almost-sure states: move towards the target; the rest: anything
        _, nav = attractor(mdp.P, mdp.row_groups, target, stay, structure=st)
        sure = one & ~target & (nav >= 0)
        base[sure] = nav[sure]
    else:  # probability-0 states: a choice that avoids the target surely
        base = _rows_staying(st, zero & ~target, base)
    sched = _lift_scheduler(mdp, st, red, choice, base)
    info.update(prob0=int(zero.sum()), prob1=int(one.sum()), seconds=time.perf_counter() - t0)
    return MDPSolution(lower, upper, sched, method_used, problem.describe(), nit=nit, info=info)


@register_solver(Reachability, name="policy-iteration", options=("tol", "atol", "maxiter", "strict"),
                 doc="Pmax/Pmin by policy iteration with exact sparse solves (the cross-check)")
def reachability_policy_iteration(problem: Reachability, **options) -> MDPSolution:
    """:func:`reachability` with ``method="policy-iteration"``."""
    options.pop("method", None)
    return reachability(problem, method="policy-iteration", **options)


def _bounded_reach(mdp, st, target, constraint, sense, steps, t0) -> MDPSolution:
    x = target.astype(float)
    move = constraint & ~target
    rows = np.flatnonzero(move[st.owner])
    sub = mdp.P[rows]
    counts = st.counts[move]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    choice = _first_rows(mdp)
    opt = np.maximum if sense == "max" else np.minimum
    for _ in range(steps):
        q = sub @ x
        x[move] = opt.reduceat(q, starts) if rows.size else x[move]
    if steps and rows.size:
        best = opt.reduceat(q, starts)
        local = greedy(q, best, np.concatenate([[0], np.cumsum(counts)]), sense=sense)
        choice[move] = rows[local]
    return MDPSolution(x, x.copy(), Scheduler(choice), "value-iteration (bounded)", f"P{sense} [ U<={steps} ]",
                       nit=steps, info={"exact": "k backups, exact up to rounding; the scheduler is the first "
                                                 "step's", "seconds": time.perf_counter() - t0})


@register_solver(TotalReward, name="value-bounds", options=("method", "tol", "atol", "maxiter", "strict"),
                 doc="Rmax/Rmin until a target with enclosing bounds (policy iteration verified, or interval "
                     "iteration), or C<=k")
def total_reward(problem: TotalReward, *, method: str = "auto", tol: float = 1e-9, atol: float = 0.0,
                 maxiter: int | None = None, strict: bool = False) -> MDPSolution:
    """``Rmax`` / ``Rmin`` of the reward until ``target`` (``F``), or over ``steps`` (``C<=k``).

    ``F``: infinite where the target may be missed (PRISM's semantics: ``Rmin`` is
    finite exactly on Prob1E, ``Rmax`` on Prob1A); nothing is earned in target states.
    Parameters as for :func:`reachability`.

    Examples
    --------
    Expected steps to the goal of a coin flipped until heads (``F``) is 2; within 3
    steps (``C<=3``) ``1 + 1/2 + 1/4``:

    >>> import scipy.sparse as sp
    >>> from exactq.representations.mdp import MDP
    >>> m = MDP(sp.csr_matrix([[.5, .5], [0, 1]]), [0, 1, 2], state_rewards={"steps": [1, 0]})
    >>> round(total_reward(TotalReward(m, "steps", "min", target=[False, True])).at(0)[0], 8)
    2.0
    >>> total_reward(TotalReward(m, "steps", "max", steps=3)).at(0)[0]
    1.75
    """
    t0 = time.perf_counter()
    maxiter = _options(method, tol, atol, maxiter)
    mdp, sense = problem.mdp, problem.sense
    st = RowStructure(mdp.P, mdp.row_groups)
    r = mdp.reward(problem.reward)
    if problem.steps is not None:
        return _bounded_reward(mdp, st, r, sense, problem.steps, t0)
    target = problem.target
    if sense == "max":
        finite = prob1a(mdp.P, mdp.row_groups, None, target, structure=st)
        ok_rows = np.ones(mdp.n_choices, dtype=bool)
        collapse = None
        upper_start = "verify"
    else:
        finite, ok_rows = prob1e(mdp.P, mdp.row_groups, None, target, structure=st, with_rows=True)
        collapse = r == 0
        upper_start = "attractor"
    maybe = finite & ~target
    red = reduce_to(mdp, st, maybe, ok_rows, np.zeros(mdp.n_states), reward=r, collapse=collapse)
    lo, hi, choice, nit, info = _solve(mdp, st, red, sense, method, upper_start, tol, atol, maxiter, strict,
                                       f"R{sense}", proper=sense == "min")
    method_used = _method_used(method, info)
    lower = np.where(finite, 0.0, np.inf)
    upper = lower.copy()
    lower[maybe], upper[maybe] = lo[red.klass[maybe]], hi[red.klass[maybe]]
    base = _first_rows(mdp)
    if sense == "min":  # the finite states must keep to the almost-surely-reaching choices
        base = _rows_staying(st, finite & ~target, base)
    sched = _lift_scheduler(mdp, st, red, choice, base)
    info.update(infinite=int((~finite).sum()), seconds=time.perf_counter() - t0)
    return MDPSolution(lower, upper, sched, method_used, f"R{sense} [ F target ]", nit=nit, info=info)


@register_solver(TotalReward, name="policy-iteration", options=("tol", "atol", "maxiter", "strict"),
                 doc="Rmax/Rmin until a target by policy iteration with exact sparse solves (the cross-check)")
def total_reward_policy_iteration(problem: TotalReward, **options) -> MDPSolution:
    """:func:`total_reward` with ``method="policy-iteration"``."""
    options.pop("method", None)
    return total_reward(problem, method="policy-iteration", **options)


def _bounded_reward(mdp, st, r, sense, steps, t0) -> MDPSolution:
    x = np.zeros(mdp.n_states)
    choice = _first_rows(mdp)
    q = r
    for _ in range(steps):
        x, q = backup(mdp.P, r, x, mdp.row_groups[:-1], sense)
    if steps:
        # q was computed from the value with steps - 1 left: the first step's choice
        choice = greedy(q, x, mdp.row_groups, sense=sense)
    return MDPSolution(x, x.copy(), Scheduler(choice), "value-iteration (bounded)", f"R{sense} [ C<={steps} ]",
                       nit=steps, info={"exact": "k backups, exact up to rounding; the scheduler is the first "
                                                 "step's", "seconds": time.perf_counter() - t0})
