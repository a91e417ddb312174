"""Long-run average reward of MDPs, max and min, unichain and multichain, with span bounds.

Solvers of :class:`~exactq.representations.mdp.LongRunAverage`; each returns an
:class:`~exactq.representations.mdp.MDPSolution` whose ``lower``/``upper`` enclose the
optimal gain of every state. In a uniformised continuous-time MDP the gain is per
unit of time (the per-step gain times the uniformisation rate).

The bracket
-----------
For *any* vector ``h`` and the Bellman operator ``(L h)(s) = opt_c [r_c + (P h)_c]``,

    min_s (L h - h)(s)  <=  g*(s)  <=  max_s (L h - h)(s)     for every state s

(Puterman 1994, Theorem 8.5.5 and its proof, which needs no unichain assumption:
multiply ``r_d + P_d h - h >= m`` by a policy's limiting matrix). Every method below
ends with one backup of its own relative-value vector and reports these *span bounds*;
they are exact bounds up to the rounding of that one backup. They meet when ``h``
solves the optimality equation, which exists when the optimal gain is the same in
every state (weakly communicating models).

Methods (for a communicating model, or each maximal end component)
-------------------------------------------------------------------
``policy-iteration``
    Howard's policy iteration for unichain models (Puterman 1994, sec. 8.6): evaluate
    ``g + h = r_d + P_d h`` with ``h(ref) = 0`` by one sparse LU (SuperLU; the same
    factors give the stationary law of the scheduler, by the transposed solve),
    improve greedily (a state switches only for a gain above rounding), until the
    scheduler is stable. A scheduler whose chain has several closed classes cannot be
    evaluated this way; policy iteration then hands its ``h`` to value iteration.
``value-iteration``
    Relative value iteration on the aperiodic transform ``P' = tau I + (1 - tau) P``
    (Puterman 1994, sec. 8.5.5: same gains for every scheduler, every chain
    aperiodic), ``v <- L' v - (L' v)(ref)``, stopping when the span bounds of
    ``L' v - v`` are within ``tol`` relative (they enclose g* at every sweep; the
    tightest pair seen is kept).
``linear-program``
    The dual pair of Puterman (1994), sec. 8.8: for a minimum, maximise ``g`` subject
    to ``g + h(s) - sum_j p(j|s,c) h(j) <= r_c`` for every choice (a maximum: the
    reverse), ``h(ref) = 0``, solved by HiGHS (``scipy.optimize.linprog``); the span
    bounds come from the program's ``h``. The independent check.
``auto``
    Policy iteration, then value iteration from its ``h`` if the span bounds are not
    yet within ``tol``.

Multichain models
-----------------
The model is split into its maximal end components (de Alfaro 1997); each is
communicating and gets its optimal gain by the method above. A scheduler eventually
stays in one end component, so the optimal gain of a state is the optimal expected
gain of the end component it ends in: a total reward to reach a sink, in the
quotient where every end component has a "stay" choice to the sink worth its gain and
keeps the choices that leave it (the approach of Storm, and of de Alfaro 1997, ch. 5).
That total reward is solved by interval iteration (:func:`exactq.solvers.mdp.total_reward`)
once with the end components' lower gains and once with their upper ones, so the
bounds still enclose the optimal gain.

References
----------
M. L. Puterman, *Markov Decision Processes: Discrete Stochastic Dynamic Programming*,
Wiley, 1994, ch. 8 (unichain: policy iteration 8.6, relative value iteration and its
span bounds 8.5, linear programming 8.8) and ch. 9 (multichain).
R. A. Howard, *Dynamic Programming and Markov Processes*, MIT Press, 1960.
L. de Alfaro, *Formal Verification of Probabilistic Systems*, PhD thesis, Stanford,
1997 (end components; long-run average via the end components).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.budget import require_memory
from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ConvergenceWarning, ExactqError, ModelError, NotApplicableError
from exactq.representations.mdp import MDP, LongRunAverage, MDPSolution, Scheduler, TotalReward

from .mdp import total_reward
from .mdp_graph import RowStructure, attractor, backup, closed_classes, greedy, maximal_end_components

__all__ = ["long_run_average", "evaluate_chain", "communicating_gain", "state_order", "METHODS"]

METHODS = ("auto", "policy-iteration", "value-iteration", "linear-program")
#: default sweeps of relative value iteration
MAXITER = 1_000_000
_EPS = np.finfo(float).eps


# ---------------------------------------------------------------------------------------
# one Markov chain
# ---------------------------------------------------------------------------------------
#: the smallest chain that ``ordering="auto"`` dissects (below, minimum degree is as good)
ND_MIN_STATES = 2000


def state_order(mdp: MDP) -> np.ndarray | None:
    """The fill-reducing order of the states the MDP's ``ordering`` asks for (``None``: SuperLU's MMD).

    ``level``: by the sum of the state variables; ``nested-dissection``: geometric
    (:func:`exactq.solvers.ordering.nested_dissection`, separators as thick as the
    largest change of each variable in one transition).
    """
    from .ordering import nested_dissection

    kind = mdp.ordering
    if mdp.space is None or kind == "mmd" or (kind == "auto" and mdp.n_states < ND_MIN_STATES):
        return None
    coords = np.asarray(mdp.space.states, dtype=np.int64)
    if kind == "level":
        return np.argsort(coords.sum(axis=1), kind="stable")
    owner = np.repeat(mdp.state_of_choice, np.diff(mdp.P.indptr))
    jumps = np.abs(coords[mdp.P.indices] - coords[owner]).max(axis=0)
    return nested_dissection(coords, jumps)

#: up to this many states a scheduler's chain is always factorised (no prediction needed)
FACTOR_LU_ALWAYS = 5000


class _IterativeSolve:
    """What :class:`_UnichainFactor` needs of a SuperLU object, by Gauss-Seidel-preconditioned BiCGSTAB.

    For the non-singular M-matrix ``I - P'`` whose LU is predicted to fill in: ``solve(B)``
    and ``solve(B, trans="T")``, column by column, each to a relative residual of 1e-13
    (the span bounds computed from the result stay valid bounds whatever its accuracy).
    """

    def __init__(self, A: sp.spmatrix):
        from .linear import GaussSeidel

        self.A = sp.csr_matrix(A)
        self.prec = GaussSeidel(self.A)

    def solve(self, B: np.ndarray, trans: str = "N") -> np.ndarray:
        from .linear import solve_iterative

        B = np.asarray(B, dtype=float)
        cols = B.reshape(B.shape[0], -1)
        out = np.empty_like(cols)
        for j in range(cols.shape[1]):  # one or two right-hand sides
            x, info = solve_iterative(self.A, cols[:, j], rtol=1e-13, trans=trans == "T",
                                      prec=self.prec, accept=1e-9)
            if info["status"] != 0 or not np.all(np.isfinite(x)):
                raise ConvergenceError(f"BiCGSTAB on a scheduler's chain ({self.A.shape[0]} states) did not "
                                       f"converge (status {info['status']})")
            out[:, j] = x
        return out.reshape(B.shape)


class _UnichainFactor:
    """One sparse LU for a unichain's gain, bias and stationary law, with ``ref`` recurrent.

    With ``h(ref) = 0`` the bias on the other states is ``h = a - g b`` where
    ``(I - P') a = r'`` and ``(I - P') b = 1`` (``P'``: ``P`` without the row and column
    of ``ref``, non-singular because every state reaches ``ref``): ``a`` and ``b`` are
    the reward and the steps until ``ref``. The equation of ``ref`` then gives
    ``g = (r(ref) + p a) / (1 + p b)``, ``p = P[ref, others]`` (a renewal-reward
    argument: the reward over the steps of one cycle from ``ref`` back to it), and the
    expected visits per cycle ``y = p (I - P')^{-1}`` (one transposed solve with the
    same factors) are the stationary law up to normalisation. No dense column (the
    usual ``h(ref) = 0`` / ``g`` column replacement has one) spoils the ordering.
    """

    def __init__(self, P: sp.csr_matrix, ref: int, order: np.ndarray | None = None):
        n = P.shape[0]
        require_memory(60.0 * (P.nnz + n) * 8, f"the sparse LU of a scheduler's chain ({n} states)")
        self.ordered = order is not None
        order = np.arange(n) if order is None else np.asarray(order)
        keep = order[order != ref]  # the other states, in the fill-reducing order (if any)
        self.n, self.ref, self.keep = n, ref, keep
        P = sp.csr_matrix(P)
        self.p = np.asarray(P[ref].toarray()).ravel()[keep]
        self.ones = np.ones(n - 1)
        if n == 1:
            self.lu = None
            return
        A = (sp.identity(n - 1, format="csc") - P[keep][:, keep]).tocsc()
        if n > FACTOR_LU_ALWAYS:
            from .linear import choose

            # an unstructured chain's LU can fill in catastrophically (a random 50,000-state MDP: GBs and
            # minutes): the predicted fill and time decide, as for the chains' systems (linear.choose)
            name, _ = choose(A)
            if name != "direct":
                self.lu = _IterativeSolve(A)  # solved to 1e-13 relative: no refinement step
                return
        try:
            # I - P' is a non-singular M-matrix: elimination on the diagonal is stable (no pivoting), which
            # keeps a given fill-reducing order
            self.lu = spla.splu(A, permc_spec="NATURAL" if self.ordered else "MMD_AT_PLUS_A",
                                diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        except RuntimeError as exc:  # "Factor is exactly singular": ref is not reached from every state
            raise NotApplicableError(f"the scheduler's chain is not unichain ({exc})") from None

    def _solve(self, r: np.ndarray) -> tuple[float, np.ndarray]:
        h = np.zeros(self.n)
        if self.lu is None:
            return float(r[0]), h
        X = self.lu.solve(np.column_stack([r[self.keep], self.ones]))
        a, b = X[:, 0], X[:, 1]
        g = float((r[self.ref] + self.p @ a) / (1.0 + self.p @ b))
        h[self.keep] = a - g * b
        return g, h

    def gain_bias(self, r: np.ndarray, P: sp.csr_matrix | None = None) -> tuple[float, np.ndarray]:
        """``(g, h)`` with ``h(ref) = 0``; given ``P``, one step of iterative refinement on the residual.

        ``h = a - g b`` cancels where the steps to ``ref`` are many; the residual
        ``r + P h - h - g`` is solved with the same factors and added.
        """
        r = np.asarray(r, dtype=float)
        g, h = self._solve(r)
        if P is not None and self.lu is not None and not isinstance(self.lu, _IterativeSolve):
            res = r + P @ h - h - g
            dg, dh = self._solve(res)
            g, h = g + dg, h + dh
        return g, h

    def stationary(self, P: sp.csr_matrix | None = None) -> np.ndarray:
        """The stationary law; given ``P``, one step of iterative refinement of the visits ``y A = p``."""
        pi = np.zeros(self.n)
        pi[self.ref] = 1.0
        if self.lu is not None:
            y = self.lu.solve(self.p, trans="T")
            if P is not None and not isinstance(self.lu, _IterativeSolve):
                sub = P[self.keep][:, self.keep]
                residual = self.p - (y - sub.T @ y)
                y = y + self.lu.solve(residual, trans="T")
            pi[self.keep] = np.maximum(y, 0.0)
        return pi / pi.sum()


def _reference(klass: np.ndarray) -> int:
    """A recurrent state (of the first closed class)."""
    return int(np.flatnonzero(klass >= 0)[0])


def evaluate_chain(P: sp.csr_matrix, r: np.ndarray, *, order: np.ndarray | None = None) -> dict:
    """Gain of every state of a finite Markov chain with per-step reward ``r``, and its diagnostics.

    Unichain: ``g + h = r + P h`` with ``h(ref) = 0`` by one LU; ``lower``/``upper``
    are the span bounds ``min/max (r + P h - h)``; ``pi`` the stationary law.
    Several closed classes: the stationary law of each, its gain ``pi_C r``, and the
    absorption probabilities of the transient states into each class (one sparse
    solve with a column per class).

    Returns
    -------
    dict with ``gain`` ((n,) per state), ``lower``, ``upper``, ``closed_classes``,
    and for a unichain ``bias``, ``stationary``.

    Examples
    --------
    A two-state chain with stationary law (2/3, 1/3) and reward (0, 3) has gain 1:

    >>> P = sp.csr_matrix([[0.5, 0.5], [1.0, 0.0]])
    >>> out = evaluate_chain(P, np.array([0.0, 3.0]))
    >>> round(float(out["gain"][0]), 12), out["closed_classes"], np.round(out["stationary"], 12).tolist()
    (1.0, 1, [0.666666666667, 0.333333333333])
    """
    P = sp.csr_matrix(P)
    n = P.shape[0]
    klass, count = closed_classes(P)
    if count == 1:
        f = _UnichainFactor(P, _reference(klass), order)
        g, h = f.gain_bias(r, P)
        diff = r + P @ h - h
        lo, hi = _outward(float(diff.min()), float(diff.max()), _span_pad(P, r, float(np.max(np.abs(h), initial=0.0))))
        return {"gain": np.full(n, g), "lower": np.full(n, lo), "upper": np.full(n, hi), "closed_classes": 1,
                "bias": h, "stationary": f.stationary(P)}
    gains = np.zeros(count)
    for c in range(count):  # one solve per closed class (classes, not states)
        members = np.flatnonzero(klass == c)
        sub = P[members][:, members]
        f = _UnichainFactor(sub, 0)
        gains[c] = float(f.stationary() @ r[members])
    out = np.zeros(n)
    out[klass >= 0] = gains[klass[klass >= 0]]
    transient = np.flatnonzero(klass < 0)
    if transient.size:
        rec = np.flatnonzero(klass >= 0)
        onehot = sp.csr_matrix((np.ones(rec.size), (rec, klass[rec])), shape=(n, count))
        A = (sp.identity(transient.size, format="csc") - P[transient][:, transient].tocsc()).tocsc()
        B = (P[transient] @ onehot).toarray()
        X = spla.spsolve(A, B)
        out[transient] = np.atleast_2d(X.reshape(transient.size, count)) @ gains
    return {"gain": out, "lower": out.copy(), "upper": out.copy(), "closed_classes": count}


# ---------------------------------------------------------------------------------------
# a communicating model: constant optimal gain
# ---------------------------------------------------------------------------------------
#: the unit roundoff of IEEE double precision
_UNIT = 2.0 ** -53


def _span_pad(P, r, vmax: float) -> float:
    """A bound on the rounding error of every computed entry of ``r + P v - v`` when ``max |v| <= vmax``
    (:func:`_span_pad_terms`)."""
    fixed, per_v = _span_pad_terms(P, r)
    return fixed + per_v * vmax


def _span_pad_terms(P, r) -> tuple[float, float]:
    """``(a, b)``: every computed entry of ``r + P v - v`` (or of relative value iteration's
    ``(1 - tau) P v + r + tau v - v``) rounds by at most ``a + b max |v|``.

    A sum of ``m`` terms rounds by at most ``gamma_m sum |terms|``, ``gamma_m = m u / (1 - m u)`` (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, eq. 3.5); a row of ``P`` with ``m``
    entries plus the reward and the two ``v`` terms is at most ``m + 6`` roundings of terms bounded by
    ``max |r|``, ``(row sum of |P|) vmax`` and ``2 vmax``. The span bounds ``min``/``max`` of the computed
    entries, widened by this, hold for the exact ones (without it a bracket of 8e-15 missed the M/M/1/8
    queue's mean number by 3e-15).
    """
    P = sp.csr_matrix(P)
    if P.shape[0] == 0:
        return 0.0, 0.0
    m = int(np.diff(P.indptr).max(initial=0)) + 6
    gamma = m * _UNIT / (1.0 - m * _UNIT)
    row_sum = float(np.add.reduceat(np.abs(P.data), P.indptr[:-1]).max(initial=0.0)) if P.nnz else 0.0
    rmax = float(np.max(np.abs(r))) if np.size(r) else 0.0
    return gamma * rmax, gamma * (row_sum + 2.0)


def _outward(lo: float, hi: float, pad: float) -> tuple[float, float]:
    """``[lo - pad, hi + pad]`` rounded outwards."""
    return float(np.nextafter(lo - pad, -np.inf)), float(np.nextafter(hi + pad, np.inf))


def _span(P, r, h, starts, sense):
    best, q = backup(P, r, h, starts, sense)
    d = best - h
    lo, hi = _outward(float(d.min()), float(d.max()), _span_pad(P, r, float(np.max(np.abs(h), initial=0.0))))
    return lo, hi, best, q


def _width_ok(lo, hi, tol, scale) -> bool:
    """Span bounds within ``tol`` relative, or within the rounding of the backup that gave them.

    ``scale`` is ``max |r| + max |h|``: one backup of ``h`` rounds at ``eps * scale``, so
    a gain of 0 (or one small against the relative values) cannot be bracketed closer. Bounds a few
    units in the last place apart are as close as they can be (their outward rounding alone keeps a gain
    of exactly 0 bracketed by +-5e-324, which neither test above accepts when ``scale`` is 0: an end
    component with no reward then ran every sweep of ``maxiter``, 246 s on the CSMA model's ``LRAmax``,
    and warned that the bounds were too wide).
    """
    width = hi - lo
    return width <= tol * max(abs(lo), abs(hi), 0.0) or width <= 64 * _EPS * scale or \
        width <= 4 * float(np.spacing(max(abs(lo), abs(hi))))


#: sweeps of relative value iteration whose greedy scheduler starts policy iteration
WARM_SWEEPS = 64


def _unichain_start(P, r, groups, st, sense) -> np.ndarray:
    """A unichain scheduler to start policy iteration from.

    The greedy scheduler of ``WARM_SWEEPS`` sweeps of relative value iteration if its
    chain is unichain (a cheap look ahead: on the two-server dispatch MDP it cuts
    policy iteration from 42 improvements to a handful), else the myopic one, else an
    attractor to state 0.
    """
    v = np.zeros(P.shape[1])
    opt = np.maximum if sense == "max" else np.minimum
    for _ in range(WARM_SWEEPS):  # sweeps, not states
        q = 0.5 * (P @ v) + r
        v = opt.reduceat(q, groups[:-1]) + 0.5 * v
        v -= v[0]
    q = r + P @ v
    choice = greedy(q, opt.reduceat(q, groups[:-1]), groups, sense=sense)
    if closed_classes(P[choice])[1] == 1:
        return choice
    best = opt.reduceat(r, groups[:-1])
    choice = greedy(r, best, groups, sense=sense)
    if closed_classes(P[choice])[1] == 1:
        return choice
    ref = np.zeros(st.n_states, dtype=bool)
    ref[0] = True
    reached, nav = attractor(P, groups, ref, np.ones(P.shape[0], dtype=bool), structure=st)
    if not np.all(reached):
        raise NotApplicableError("the model is not communicating (a state cannot reach state 0)")
    nav[0] = choice[0]
    return nav


def _policy_iteration(P, r, groups, st, sense, choice, maxiter, progress, order=None):
    """Howard's policy iteration; returns (h, choice, improvements, factor or None, stalled)."""
    starts = groups[:-1]
    h = np.zeros(P.shape[1])
    f = None
    for it in range(1, maxiter + 1):
        Pd = P[choice]
        klass, count = closed_classes(Pd)
        if count != 1:
            return h, choice, it - 1, None, True
        f = _UnichainFactor(Pd, _reference(klass), order)
        g, h = f.gain_bias(r[choice], Pd)
        best, q = backup(P, r, h, starts, sense)
        # switch only for a gain above the noise: rounding of q, and the evaluation's own residual spread
        own = q[choice]
        spread = float(np.ptp(own - h))
        tol = 16 * _EPS * (np.abs(own) + 1.0) + 2.0 * spread
        new = greedy(q, best, groups, current=choice, tol=tol, sense=sense)
        if progress is not None:
            progress({"iteration": it, "gain": g, "changed": int(np.sum(new != choice))})
        if np.array_equal(new, choice):
            return h, choice, it, f, False
        choice = new
    raise ConvergenceError(f"policy iteration did not stabilise in {maxiter} improvements")


def _value_iteration(P, r, groups, sense, v, tol, tau, maxiter, r_scale, lo_best=-np.inf, hi_best=np.inf):
    """Relative value iteration on the aperiodic transform; returns (v, lo, hi, sweeps, converged)."""
    starts = groups[:-1]
    v = np.array(v, dtype=float)
    ref = 0
    it = 0
    pad_r, pad_row = _span_pad_terms(P, r)  # the pad: pad_r + pad_row max |v|
    while it < maxiter:
        q = P @ v
        q *= 1.0 - tau
        q += r
        best = (np.maximum if sense == "max" else np.minimum).reduceat(q, starts)
        new = best + tau * v
        d = new - v
        # each sweep's bounds widened by its own rounding (the v of this sweep) before they are combined
        lo_s, hi_s = _outward(float(d.min()), float(d.max()), pad_r + pad_row * float(np.max(np.abs(v), initial=0.0)))
        lo_best, hi_best = max(lo_best, lo_s), min(hi_best, hi_s)
        v = new - new[ref]
        it += 1
        if _width_ok(lo_best, hi_best, tol, r_scale + float(np.max(np.abs(v)))):
            return v, lo_best, hi_best, it, True
    return v, lo_best, hi_best, it, False


def _linear_program(P, r, groups, st, sense):
    """Puterman's (1994, sec. 8.8) linear program by HiGHS; returns ``(g, h, occupation, message)``.

    ``occupation`` is the dual solution, the long-run frequency of every choice under
    an optimal scheduler (Puterman 1994, Theorem 8.8.2).
    """
    from scipy.optimize import linprog

    n, m = P.shape[1], P.shape[0]
    require_memory(80.0 * (P.nnz + 2 * m) * 8, f"the linear program ({m} constraints, {n + 1} variables)")
    E = sp.csr_matrix((np.ones(m), (np.arange(m), st.owner)), shape=(m, n))
    A = sp.hstack([sp.csr_matrix(np.ones((m, 1))), E - P], format="csr")
    bounds = [(None, None)] * (n + 1)
    bounds[1] = (0.0, 0.0)  # h(0) = 0
    options = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
    if sense == "min":  # max g  s.t.  g + h - P h <= r
        res = linprog(np.concatenate([[-1.0], np.zeros(n)]), A_ub=A, b_ub=r, bounds=bounds, method="highs",
                      options=options)
    else:  # min g  s.t.  g + h - P h >= r
        res = linprog(np.concatenate([[1.0], np.zeros(n)]), A_ub=-A, b_ub=-r, bounds=bounds, method="highs",
                      options=options)
    if res.status != 0:
        raise ConvergenceError(f"linear program: HiGHS ended with status {res.status} ({res.message})")
    occupation = np.abs(np.asarray(res.ineqlin.marginals, dtype=float))
    return float(res.x[0]), np.asarray(res.x[1:], dtype=float), occupation, str(res.message)


def _occupation_scheduler(P, groups, st, occupation) -> np.ndarray:
    """A scheduler from the LP's choice frequencies: the most frequent choice where a state is visited,
    an attractor to the visited states elsewhere (Puterman 1994, Theorem 8.8.2 and sec. 9.5)."""
    per_state = np.bincount(st.owner, weights=occupation, minlength=st.n_states)
    visited = per_state > 1e-12 * max(float(per_state.max()), 1e-300)
    best = np.maximum.reduceat(occupation, groups[:-1])
    choice = greedy(occupation, best, groups, sense="max")
    reached, nav = attractor(P, groups, visited, np.ones(P.shape[0], dtype=bool), structure=st)
    out = np.where(visited, choice, nav)
    return np.where(out >= 0, out, choice)


def _checked_greedy(P, r, groups, st, sense, choice, lo, hi, tol, scale, order):
    """Value iteration's greedy scheduler, evaluated exactly; improved by policy iteration where its gain falls
    outside the span bounds. Returns ``(choice, what was done)``.

    The span bounds of relative value iteration hold for the optimal gain, but the scheduler greedy in its
    ``h`` is optimal only once ``h`` is accurate enough to separate the choices (Puterman 1994, sec. 8.5.5):
    a 5-state random MDP's greedy scheduler had gain -0.22944 where the optimum is -0.22874 (hypothesis).
    """
    slack = 2.0 * tol * max(scale, 1.0) + (hi - lo)
    try:
        ev = evaluate_chain(P[choice], r[choice], order=order)
    except ExactqError as exc:
        return choice, f"greedy in h, not evaluated ({exc})"
    g = float(ev["lower"].min()) if sense == "max" else float(ev["upper"].max())
    if (g >= lo - slack) if sense == "max" else (g <= hi + slack):
        return choice, "greedy in h, evaluated exactly: its gain lies within the bounds"
    for begin in (choice, _unichain_start(P, r, groups, st, sense)):
        try:
            _, better, k, _, stalled = _policy_iteration(P, r, groups, st, sense, begin, 10_000, None, order)
        except ExactqError:
            continue
        if not stalled:
            return better, f"greedy in h had a gain outside the bounds: {k} policy improvements from it"
    try:  # the schedulers met were multichain: the linear program's (Puterman 1994, Theorem 8.8.2), evaluated
        _, _, occupation, _ = _linear_program(P, r, groups, st, sense)
        lp_choice = _occupation_scheduler(P, groups, st, occupation)
        ev = evaluate_chain(P[lp_choice], r[lp_choice], order=order)
        g_lp = float(ev["lower"].min()) if sense == "max" else float(ev["upper"].max())
        if (g_lp >= lo - slack) if sense == "max" else (g_lp <= hi + slack):
            return lp_choice, "greedy in h had a gain outside the bounds: the linear program's scheduler"
    except ExactqError:
        pass
    warnings.warn("long-run average: value iteration's greedy scheduler has a gain outside the span bounds, and "
                  "neither policy iteration nor the linear program gave a better one; the bounds hold for the "
                  "optimum, not for the scheduler returned", ConvergenceWarning, stacklevel=4)
    return choice, "greedy in h: its gain lies outside the bounds (suboptimal)"


def communicating_gain(P, r, groups, sense, *, method="auto", tol=1e-9, maxiter=None, aperiodicity=0.05,
                       strict=False, start=None, progress=None, structure=None, order=None) -> dict:
    """The optimal gain of a communicating (or weakly communicating) MDP with span bounds.

    Parameters
    ----------
    P : (n_choices, n_states) CSR
    r : (n_choices,) per-step reward
    groups : row groups
    sense : {"min", "max"}
    method : {"auto", "policy-iteration", "value-iteration", "linear-program"}
    tol : float
        Relative width of the span bounds to reach.
    maxiter : int, optional
        Sweeps of value iteration (default 1e6), improvements of policy iteration (1e4).
    aperiodicity : float
        ``tau`` of the aperiodic transform of value iteration, in (0, 1).
    strict : bool
        Bounds wider than ``tol`` are a :class:`ConvergenceError`, else a warning.
    start : (n_states,) ndarray, optional
        A relative value vector to start value iteration from, or a scheduler
        (int array of rows) to start policy iteration from.
    progress : callable, optional
        Called with a dict after every policy improvement.
    order : (n_states,) int array, optional
        A fill-reducing order of the states for the sparse LUs (:func:`state_order`).

    Returns
    -------
    dict with ``lower``, ``upper`` (the span bounds), ``bias`` (the final h),
    ``choice`` (a greedy scheduler of h), ``method``, ``nit``, and, after policy
    iteration, ``stationary`` (the law of the final scheduler's chain) and
    ``factor`` (its LU, for evaluating other rewards of the same scheduler).
    """
    if method not in METHODS:
        raise ModelError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if not (0 < aperiodicity < 1):
        raise ModelError(f"aperiodicity must be in (0, 1); got {aperiodicity!r}")
    st = structure if structure is not None else RowStructure(P, groups)
    starts = np.asarray(groups)[:-1]
    r_scale = float(np.max(np.abs(r))) if r.size else 0.0
    out: dict = {"stationary": None, "factor": None}
    h = None
    nit = 0
    used = method
    if method in ("auto", "policy-iteration"):
        choice = np.asarray(start, dtype=np.int64) if (start is not None and np.asarray(start).dtype.kind == "i") \
            else _unichain_start(P, r, groups, st, sense)
        failed = None
        try:
            h, choice, nit, f, stalled = _policy_iteration(P, r, groups, st, sense, choice,
                                                           10_000 if maxiter is None else int(maxiter), progress,
                                                           order)
        except ConvergenceError as exc:  # an evaluation's iterative solve failed (its LU predicted too costly)
            if method != "auto":
                raise
            failed = str(exc)
            h, nit, f, stalled = np.zeros(P.shape[1]), 0, None, True
        used = "policy-iteration"
        if f is not None:
            out["stationary"], out["factor"] = f.stationary(P[choice]), f
        if failed is not None:
            out["policy_iteration"] = f"not used ({failed}); value iteration took over"
        elif stalled:
            out["policy_iteration"] = "a scheduler's chain had several closed classes; value iteration took over"
        lo, hi, best, q = _span(P, r, h, starts, sense)
        if (not _width_ok(lo, hi, tol, r_scale + float(np.max(np.abs(h)))) and method == "auto") or stalled:
            v, lo2, hi2, sweeps, ok = _value_iteration(P, r, groups, sense, h, tol, aperiodicity,
                                                       MAXITER, r_scale, lo, hi)
            lo, hi, h, nit = lo2, hi2, v, nit + sweeps
            used = "policy-iteration + value-iteration"
            out["stationary"], out["factor"] = None, None
    elif method == "value-iteration":
        v0 = np.zeros(P.shape[1]) if start is None or np.asarray(start).dtype.kind == "i" else np.asarray(start)
        h, lo, hi, nit, ok = _value_iteration(P, r, groups, sense, v0, tol, aperiodicity,
                                              MAXITER if maxiter is None else int(maxiter), r_scale)
    else:
        # one side from the program's h (the constraints make L h - h >= g on every state for a minimum),
        # the other from the exact value of the scheduler its dual solution describes
        g_lp, h, occupation, message = _linear_program(P, r, groups, st, sense)
        out["lp_gain"], out["lp_message"] = g_lp, message
        lo, hi, _, _ = _span(P, r, h, starts, sense)
        lp_choice = _occupation_scheduler(P, groups, st, occupation)
        ev = evaluate_chain(P[lp_choice], r[lp_choice], order=order)
        if sense == "min":
            hi = min(hi, float(ev["upper"].max()))
        else:
            lo = max(lo, float(ev["lower"].min()))
        out["stationary"] = ev.get("stationary")
    best, q = backup(P, r, h, starts, sense)
    out.update(lower=lo, upper=hi, bias=h, choice=greedy(q, best, groups, sense=sense), method=used, nit=nit)
    if method == "linear-program":
        out["choice"] = lp_choice
    if used == "policy-iteration" and out.get("factor") is not None:
        out["choice"] = choice  # the evaluated scheduler (greedy up to ties, and its law is known)
    elif "value-iteration" in used:
        out["choice"], out["scheduler_check"] = _checked_greedy(P, r, groups, st, sense, out["choice"], lo, hi, tol,
                                                                r_scale + float(np.max(np.abs(h))), order)
    if not _width_ok(lo, hi, tol, r_scale + float(np.max(np.abs(h)))):
        msg = (f"long-run average ({used}): span bounds [{lo:.12g}, {hi:.12g}] are wider than tol={tol:g} "
               "relative; they still enclose the optimal gain")
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
    return out


# ---------------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------------
def _sub_mdp(mdp, st, members: np.ndarray, rows: np.ndarray):
    """The sub-model of the states ``members`` (sorted) with the choices ``rows`` (all inside)."""
    idx = np.full(mdp.n_states, -1, dtype=np.int64)
    idx[members] = np.arange(members.size)
    kept = np.flatnonzero(rows)
    sub = mdp.P[kept]
    Q = sp.csr_matrix((sub.data.copy(), idx[sub.indices], sub.indptr.copy()), shape=(kept.size, members.size))
    counts = np.bincount(idx[st.owner[kept]], minlength=members.size)
    return Q, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), kept


def _options(method, tol, maxiter):
    if method not in METHODS:
        raise ModelError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if not (0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    if maxiter is not None and int(maxiter) < 1:
        raise ModelError(f"maxiter must be an integer >= 1; got {maxiter!r}")


@register_solver(LongRunAverage, name="long-run-average",
                 options=("method", "tol", "maxiter", "aperiodicity", "strict", "start", "progress"),
                 doc="optimal long-run average reward: policy iteration, relative value iteration or the LP, with "
                     "span bounds; multichain models through their maximal end components")
def long_run_average(problem: LongRunAverage, *, method: str = "auto", tol: float = 1e-9,
                     maxiter: int | None = None, aperiodicity: float = 0.05, strict: bool = False,
                     start=None, progress=None) -> MDPSolution:
    """The optimal (or a given scheduler's) long-run average reward from every state (module docstring).

    Parameters
    ----------
    problem : LongRunAverage
    method : {"auto", "policy-iteration", "value-iteration", "linear-program"}
    tol : float
        Relative width of the span bounds to reach.
    maxiter : int, optional
    aperiodicity : float
        ``tau`` of value iteration's aperiodic transform.
    strict : bool
        Bounds wider than ``tol`` are a :class:`ConvergenceError` instead of a warning.
    start : ndarray, optional
        A warm start (a relative value vector, or a scheduler's rows) for a
        communicating model.
    progress : callable, optional

    Returns
    -------
    MDPSolution
        Per state ``lower``/``upper``; ``bias`` and ``stationary`` for a communicating
        model solved by policy iteration; ``info`` says whether the model was
        communicating, how many end components it has, and each method's details.

    Examples
    --------
    A machine that is ``up`` (state 0) or ``down`` (1). Up, it fails with probability
    0.1 per step, or 0.05 when run ``slow``; down, a ``fast`` repair (cost 2) succeeds
    with probability 0.8, a ``cheap`` one (cost 0.5) with 0.4. Running slow costs 0.2
    per step in lost output. The cheapest long-run cost per step is an LP's or a
    closed form's: running fast and repairing cheap gives 0.5 * 0.1 / (0.1 + 0.4) = 0.1.

    >>> from exactq.representations.mdp import MDP
    >>> P = sp.csr_matrix([[0.9, 0.1], [0.95, 0.05], [0.8, 0.2], [0.4, 0.6]])
    >>> m = MDP(P, [0, 2, 4], choice_rewards={"cost": [0.0, 0.2, 2.0, 0.5]},
    ...         action_names=["run", "slow", "fast", "cheap"], actions=[0, 1, 2, 3])
    >>> sol = long_run_average(LongRunAverage(m, "cost", "min"))
    >>> round(sol.at(0)[0], 12), sol.scheduler.action_names(m), sol.width < 1e-12
    (0.1, ['run', 'cheap'], True)
    """
    t0 = time.perf_counter()
    _options(method, tol, maxiter)
    mdp, sense = problem.mdp, problem.sense
    r = mdp.reward(problem.reward)
    scale = mdp.uniformisation_rate or 1.0
    unit = "per unit of time" if mdp.is_continuous_time else "per step"
    if problem.scheduler is not None:
        out = evaluate_chain(mdp.induced(problem.scheduler), mdp.induced_reward(problem.scheduler, r),
                             order=state_order(mdp))
        info = {"closed_classes": out["closed_classes"], "unit": unit, "seconds": time.perf_counter() - t0,
                "evaluated": "the given scheduler (exact solve; lower/upper are its span bounds)"}
        return MDPSolution(out["lower"] * scale, out["upper"] * scale, problem.scheduler, "policy-evaluation",
                           "LRA of a scheduler", nit=1, info=info, bias=out.get("bias"),
                           stationary=out.get("stationary"))
    st = RowStructure(mdp.P, mdp.row_groups)
    comp, internal = maximal_end_components(mdp.P, mdp.row_groups, structure=st)
    n_mec = int(comp.max()) + 1 if np.any(comp >= 0) else 0
    info: dict = {"unit": unit, "end_components": n_mec}
    if n_mec == 1 and np.all(comp == 0):  # communicating: one constant gain
        res = communicating_gain(mdp.P, r, mdp.row_groups, sense, method=method, tol=tol, maxiter=maxiter,
                                 aperiodicity=aperiodicity, strict=strict, start=start, progress=progress,
                                 structure=st, order=state_order(mdp))
        n = mdp.n_states
        info.update(communicating=True, seconds=time.perf_counter() - t0)
        for key in ("lp_gain", "lp_message", "policy_iteration", "scheduler_check"):
            if key in res:
                info[key] = res[key] * scale if key == "lp_gain" else res[key]
        return MDPSolution(np.full(n, res["lower"] * scale), np.full(n, res["upper"] * scale),
                           Scheduler(res["choice"]), res["method"], f"LRA{sense}", nit=res["nit"], info=info,
                           bias=res["bias"], stationary=res["stationary"])
    return _multichain(mdp, st, r, sense, comp, internal, n_mec, method, tol, maxiter, aperiodicity, strict,
                       scale, info, t0)


def _multichain(mdp, st, r, sense, comp, internal, n_mec, method, tol, maxiter, aperiodicity, strict, scale,
                info, t0) -> MDPSolution:
    """Gain per maximal end component, then the best expected gain of the component reached."""
    lo = np.zeros(n_mec)
    hi = np.zeros(n_mec)
    choice = np.asarray(mdp.row_groups[:-1], dtype=np.int64).copy()
    sizes = np.bincount(comp[comp >= 0], minlength=n_mec)
    # single-state end components: the best of their self-loops, in one vectorised step
    one = sizes == 1
    rows1 = internal & (comp[st.owner] >= 0) & one[np.maximum(comp[st.owner], 0)]
    if np.any(rows1):
        fill = -np.inf if sense == "max" else np.inf
        vals = np.where(rows1, r, fill)
        best = (np.maximum if sense == "max" else np.minimum).reduceat(vals, mdp.row_groups[:-1])
        states1 = np.flatnonzero((comp >= 0) & one[np.maximum(comp, 0)])
        lo[comp[states1]] = hi[comp[states1]] = best[states1]
        arg = greedy(vals, best, mdp.row_groups, sense=sense)
        choice[states1] = arg[states1]
    details = []
    for k in np.flatnonzero(~one):  # one solve per larger end component (components, not states)
        members = np.flatnonzero(comp == k)
        Q, groups, kept = _sub_mdp(mdp, st, members, internal & (comp[st.owner] == k))
        res = communicating_gain(Q, r[kept], groups, sense, method=method, tol=tol, maxiter=maxiter,
                                 aperiodicity=aperiodicity, strict=strict)
        lo[k], hi[k] = res["lower"], res["upper"]
        choice[members] = kept[res["choice"]]
        details.append({"states": int(members.size), "method": res["method"], "lower": res["lower"] * scale,
                        "upper": res["upper"] * scale, **({"scheduler_check": res["scheduler_check"]}
                                                          if "scheduler_check" in res else {})})
    # the quotient: transient states, one state per end component, and a sink
    transient = comp < 0
    n_t = int(transient.sum())
    klass = np.empty(mdp.n_states, dtype=np.int64)
    klass[transient] = np.arange(n_t)
    klass[~transient] = n_t + comp[~transient]
    n_q = n_t + n_mec + 1
    sink = n_q - 1
    leave = ~internal
    kept = np.flatnonzero(leave)
    sub = mdp.P[kept]
    # rows: kept original rows, then one stay row per end component, then the sink's loop
    rows_owner = np.concatenate([klass[st.owner[kept]], n_t + np.arange(n_mec), [sink]])
    order = np.argsort(rows_owner, kind="stable")
    coo = sub.tocoo()
    R = np.concatenate([coo.row, kept.size + np.arange(n_mec), [kept.size + n_mec]])
    C = np.concatenate([klass[coo.col], np.full(n_mec, sink), [sink]])
    D = np.concatenate([coo.data, np.ones(n_mec + 1)])
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    Pq = sp.csr_matrix((D, (inv[R], C)), shape=(order.size, n_q))
    groups_q = np.concatenate([[0], np.cumsum(np.bincount(rows_owner, minlength=n_q))]).astype(np.int64)
    shift = -min(float(lo.min()), 0.0)
    sink_mask = np.zeros(n_q, dtype=bool)
    sink_mask[sink] = True
    bounds = []
    for gains in (lo, hi):
        reward = np.concatenate([np.zeros(kept.size), gains + shift, [0.0]])[order]
        quotient = MDP(Pq, groups_q, choice_rewards={"gain": reward})
        bounds.append(total_reward(TotalReward(quotient, "gain", sense, target=sink_mask), tol=tol,
                                   strict=strict))
    # two roundings each (the shift, the scale), at most 2u(1 + u)|y| together: widened by 4u|y|, outwards
    lower = (bounds[0].lower[klass] - shift) * scale
    upper = (bounds[1].upper[klass] - shift) * scale
    lower = np.nextafter(lower - 4.0 * _UNIT * np.abs(lower), -np.inf)
    upper = np.nextafter(upper + 4.0 * _UNIT * np.abs(upper), np.inf)
    # scheduler: transient states take the quotient's choice; an end component stays (its own optimal
    # choices) or leaves by the chosen row, its other states moving towards that row's state
    qchoice = bounds[0].scheduler.choice
    orig = np.concatenate([kept, np.full(n_mec + 1, -1)])[order]
    pick = orig[qchoice[:sink]]
    tr = np.flatnonzero(transient)
    choice[tr] = pick[klass[tr]]
    exits = pick[n_t:n_t + n_mec]
    leaving = exits >= 0
    if np.any(leaving):
        exit_states = np.zeros(mdp.n_states, dtype=bool)
        exit_states[st.owner[exits[leaving]]] = True
        choice[st.owner[exits[leaving]]] = exits[leaving]
        _, nav = attractor(mdp.P, mdp.row_groups, exit_states, internal, structure=st)
        move = (~transient) & leaving[np.maximum(comp, 0)] & ~exit_states & (nav >= 0)
        choice[move] = nav[move]
    info.update(communicating=False, components=details[:20], seconds=time.perf_counter() - t0,
                quotient_states=n_q, quotient_sweeps=[b.nit for b in bounds])
    return MDPSolution(lower, upper, Scheduler(choice), f"end components + {method}", f"LRA{sense}",
                       nit=sum(b.nit for b in bounds), info=info)

