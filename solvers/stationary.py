"""Stationary distributions of finite CTMCs: pi Q = 0, sum(pi) = 1.

Methods
-------
``direct``
    Sparse LU (SuperLU) of the generator with one state's equation removed. The
    reduced matrix ``-Q^T`` minus a row and column is a nonsingular M-matrix for an
    irreducible chain, so LU without pivoting is stable (Grassmann, Taksar & Heyman
    1985; Stewart, *Introduction to the Numerical Solution of Markov Chains*, 1994,
    sec. 2.5) and we pivot on the diagonal. The fill-reducing ordering comes from the
    states' coordinates (by level, or geometric nested dissection; see ``_ordering``),
    else SuperLU's MMD on A^T + A.
``gmres``
    GMRES on the same reduced system, preconditioned by an incomplete LU (``spilu``).
``bicgstab``
    BiCGSTAB on the same reduced system, preconditioned by Jacobi, then symmetric Gauss-Seidel
    (:mod:`exactq.solvers.linear`), iterated to the rounding level; the answer carries
    ``info["error_bound_l1"]``, a bound on ``||pi* - pi||_1`` from the residual and the
    expected hitting times of the reference state (:func:`_l1_bound`). ``auto`` picks
    it when the sparse LU's predicted fill or work is too large
    (:func:`exactq.solvers.linear.choose`: Kanban with 58,400 states, whose LU would
    need more than 6.9 GB, solves in about 2.5 s).
``power``
    Power iteration on the uniformised chain ``P = I + Q / q``.
``gth``
    The Grassmann-Taksar-Heyman elimination on a dense copy (small chains only);
    subtraction-free, hence accurate to a few ulps in every entry.
``mpmath``
    A direct solve followed by mixed-precision iterative refinement with residuals in
    mpmath at ``dps`` digits (Wilkinson; Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., ch. 12); used by ``verify=True``.
``level-reduction``
    Linear level reduction by the largest coordinate, when the chain moves up a level
    only from a few states of each level (join-the-shortest-queue chains: only when all
    queues are equal); exact elimination in linear time
    (:mod:`exactq.solvers.level_reduction`). ``auto`` picks it above 200 states when
    the structure test passes, and otherwise ``direct`` or ``bicgstab`` by the LU's
    predicted cost (``info["solver"]`` says which and why).
``level-aggregation``
    For chains that declare a level structure (``CTMC.levels``): BiCGSTAB with an
    aggregation/Gauss-Seidel preconditioner (:mod:`exactq.solvers.level_aggregation`).

Every method reports ``residual = max_j |(pi Q)_j|`` computed afresh from the answer,
and every answer passes :func:`check_stationary` (finite, non-negative, sums to 1,
small residual) or is redone with another reference state or method
(``info["recovery"]``); no usable vector is a :class:`ConvergenceError`.

:func:`stationary` works on a generator matrix; :func:`solve_stationary`, the solver
registered for the :class:`~exactq.ctmc.CTMC` and :class:`~exactq.ctmc.DTMC`
representations as ``stationary`` (priority 100: the automatic choice), takes the
chain and uses its geometry (coordinates, jumps, ordering, level structure, start
vector) to pick and configure the method. Each method is registered by its own name
too (:data:`ALGORITHMS`, priority 10, family ``stationary``), so that ``--option
solver=NAME`` chooses from the registry, plug-in solvers included.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from exactq.catalogue import register_solver
from exactq.ctmc import CTMC, DTMC, ORDERINGS, StationaryDistribution
from exactq.errors import ConvergenceError, ConvergenceWarning, ModelError, NotApplicableError, ReducibleError

from .linear import MAX_REFERENCES, NoValidVector, choose, csr_part as _part, gth, warn_or_raise
from .ordering import nested_dissection
from .structure import communicating_classes

__all__ = ["stationary", "solve_stationary", "METHODS", "STATIONARY_SOLVERS"]

METHODS = ("auto", "direct", "gmres", "power", "gth", "mpmath", "level-reduction", "bicgstab")
#: every name ``solve_stationary(chain, solver=...)`` accepts
STATIONARY_SOLVERS = METHODS + ("level-aggregation",)
GTH_MAX_STATES = 4000
#: up to this many states a failed method is redone by GTH before the sparse LU (below a second)
GTH_FIRST_STATES = 1000
ND_MIN_STATES = 2000


def stationary(
    Q: sp.spmatrix,
    *,
    method: str = "auto",
    rtol: float = 1e-12,
    maxiter: int | None = None,
    strict: bool = False,
    coords: np.ndarray | None = None,
    jumps: np.ndarray | None = None,
    reference: int | None = None,
    describe_state=None,
    dps: int = 50,
    ordering: str = "auto",
    classes=None,
) -> StationaryDistribution:
    """Stationary distribution of the CTMC with generator ``Q``.

    Parameters
    ----------
    Q : (n, n) sparse matrix
        Generator: off-diagonal entries >= 0, rows summing to 0.
    method : {"auto", "direct", "gmres", "power", "gth", "mpmath", "level-reduction", "bicgstab"}
        ``auto`` takes ``gth`` up to 200 states, ``level-reduction`` above when the
        states' coordinates give it a cheap level structure, and otherwise ``direct``
        or ``bicgstab`` by the sparse LU's predicted cost (``direct`` when the chain
        asks for an ordering of its own).
    rtol : float
        Iterative methods stop when ``||pi Q||_1 / q <= rtol`` (``q`` the largest
        exit rate). Direct methods report the same quantity.
    maxiter : int, optional
        Iteration cap of the iterative methods.
    strict : bool
        Raise :class:`ConvergenceError` instead of warning on non-convergence.
    coords, jumps : ndarray, optional
        Lattice coordinates of the states and the largest jump per coordinate; when
        given, ``direct`` orders by geometric nested dissection (or by level).
    reference : int, optional
        The state whose equation is dropped (default: a state of largest exit rate
        among the recurrent states). BiCGSTAB replaces it by the largest entry of a
        Gauss-Seidel mass estimate (:data:`LIKELY_GUESS`).
    describe_state : callable, optional
        ``i -> str`` used to name states in error messages.
    dps : int
        Decimal digits for ``mpmath``.
    ordering : {"auto", "level", "nested-dissection", "mmd"}
        Fill-reducing ordering of ``direct`` and ``mpmath`` (see ``_ordering``).
    classes : ClassStructure, optional
        ``Q``'s communicating classes (:func:`~exactq.solvers.structure.communicating_classes`), when the
        caller has found them already (a model checker's long-run query); found here otherwise.

    Returns
    -------
    StationaryDistribution
        ``pi`` (zero on transient states), the method, the residual and details.

    Raises
    ------
    ReducibleError
        If the chain has more than one closed class (naming a state in each).
    ConvergenceError
        With ``strict=True`` when an iterative method does not reach ``rtol``; always
        when no method gives a usable vector (:class:`NoValidVector`).
    BudgetError
        When ``direct`` (or ``mpmath``) is asked for and the LU's predicted fill
        exceeds the memory budget.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> Q = sp.csr_matrix([[-1.0, 1.0], [2.0, -2.0]])
    >>> np.allclose(stationary(Q).pi, [2 / 3, 1 / 3])
    True
    """
    t0 = time.perf_counter()
    Q = sp.csr_matrix(Q, dtype=float)
    n = Q.shape[0]
    if Q.shape != (n, n) or n == 0:
        raise ModelError(f"Q must be a non-empty square matrix; got shape {Q.shape}")
    if method not in METHODS:
        raise ModelError(f"stationary method must be one of {', '.join(METHODS)}; got {method!r}")
    _check_generator(Q, describe_state)
    name = describe_state or (lambda i: f"state {i}")
    info: dict = {}
    if n == 1:
        return StationaryDistribution(np.ones(1), "trivial", 0.0, seconds=time.perf_counter() - t0)

    cls = communicating_classes(Q) if classes is None else classes
    keep = None
    if not cls.is_irreducible:
        if len(cls.closed) > 1:
            reps = ", ".join(name(int(i)) for i in cls.representatives[:5])
            more = "" if len(cls.closed) <= 5 else f" and {len(cls.closed) - 5} more"
            raise ReducibleError(
                f"the chain is reducible: {len(cls.closed)} closed classes, containing {reps}{more}; "
                "the stationary distribution is not unique"
            )
        keep = np.flatnonzero(cls.recurrent_mask)
        info["transient_states"] = int(n - len(keep))
    Qr = Q if keep is None else Q[keep][:, keep].tocsr()
    cr = None if coords is None or keep is None else coords[keep]
    if cr is None and coords is not None:
        cr = coords
    m = Qr.shape[0]
    exit_rate = -Qr.diagonal()
    if reference is None or keep is not None:
        ref = int(np.argmax(exit_rate))
    else:
        ref = int(reference)

    plan = None
    asked = method
    chosen: dict = {"why": "asked for"}
    if method == "level-reduction" or (method == "auto" and m > 200 and cr is not None):
        from .level_reduction import plan_level_reduction  # (imported when needed: scipy.linalg)

        opts = {} if method == "auto" else {"min_states_per_level": 1, "max_dense_work": np.inf}
        plan, why = (None, "it needs the states' coordinates") if cr is None else \
            plan_level_reduction(Qr, cr.max(axis=1), **opts)  # asked for: only the structure must hold
        if plan is None and method == "level-reduction":
            raise NotApplicableError(f"the level-reduction solver does not apply to this chain: {why}")
        if plan is not None:
            method = "level-reduction"
            if asked == "auto":
                chosen = {"why": f"the chain moves up a level from few states ({plan.n_levels} levels)"}
    if method == "auto":
        method = "gth" if m <= 200 else "direct"
        chosen = {"why": "at most 200 states" if m <= 200 else f"the chain asks for the {ordering} ordering"}
        if m > 200 and ordering == "auto":  # the chain asked for no ordering of its own: choose by predicted cost
            method, chosen = choose(Qr, coords=cr, jumps=jumps, trial=True)
            if "trial_iterations" in chosen and maxiter is None:
                maxiter = chosen["trial_iterations"]  # then the LU (the runner's fallback, auto)
    elif method in ("direct", "mpmath") and m > 200:
        choose(Qr, coords=cr, jumps=jumps, asked="direct")  # refuses, in one line, an LU over the memory budget
    if m == 1:  # a single absorbing state carries all the mass
        pi_r, nit = np.ones(1), None
        info["solver"] = {"name": "trivial", "why": "one recurrent state"}
    else:
        from exactq.budget import memory_budget

        budget = memory_budget()
        run = _Runner(Qr, rtol=rtol, maxiter=maxiter, strict=strict, coords=cr, jumps=jumps, dps=dps,
                      ordering=ordering, plan=plan, name=(name if keep is None else lambda i: name(int(keep[i]))),
                      auto=asked == "auto", lu_fits=budget is None or chosen.get("predicted_lu_bytes", 0) <= budget)
        first = method
        given = ref
        if method == "bicgstab":
            # the largest exit rate (or the initial state, solve_stationary's reference) is often an improbable
            # state (FMS n = 4: 7e-10 of the largest entry; n = 5, its initial state: 7.5e-7), and an iterative
            # answer with an improbable reference is redone; Gauss-Seidel sweeps point at a likely one (FMS n = 4:
            # 0.44 of the largest after three, in 38 ms; :meth:`_MassSweeps.settled` goes on while the largest
            # entry moves), unless the given one is the estimate's largest entry
            est = run._estimate = run.sweeps().settled()
            guess = int(np.argmax(est))
            if np.isfinite(est[guess]) and est[guess] > 0 and not est[ref] >= LIKELY_GUESS * est[guess]:
                ref = guess
        elif method == "direct" and asked == "auto":
            # the LU's reference row is dropped: an improbable one (tandem, 2,016 states: 2.3e-9 of the largest
            # entry) gives a vector with negative entries, redone by the recovery from a second LU (10 ms each);
            # the sweeps spot it beforehand, until their largest entry settles (a loaded Erlang loss network of
            # 5,456 states, where the mass moves as a wave: three sweeps pointed at a state of 3.9e-11 and a
            # second LU of 50 ms followed). Changed only when improbable, so the other chains' LUs are the same
            est = run._estimate = run.sweeps().settled()
            guess = int(np.argmax(est))
            if np.isfinite(est[guess]) and est[guess] > 0 and est[ref] < IMPROBABLE * est[guess]:
                ref = guess
        pi_r, nit, method, inf = run.solve(method, ref)
        details = inf.pop("solver", {})
        info.update(inf)
        info["solver"] = {"name": method, **chosen, **details}
        if ref != given:  # the mass sweeps moved the reference state: say from where, and why
            est = run._estimate
            info["solver"]["reference"] = (f"{run.name(ref)}, the mass sweeps' largest entry, instead of "
                                           f"{run.name(given)} ({float(est[given] / est[ref]):.2g} of it)")
        if method != first:
            info["solver"]["why"] = f"{first} failed (see recovery); {chosen.get('why', '')}".rstrip("; ")

    pi = np.zeros(n)
    if keep is None:
        pi[:] = pi_r
    else:
        pi[keep] = pi_r
    residual = float(np.abs(Q.T @ pi).max())
    scale = float(exit_rate.max()) or 1.0
    info["relative_residual"] = residual / scale
    return StationaryDistribution(pi, method, residual, nit=nit, seconds=time.perf_counter() - t0, info=info)


def _level_zero(S0: sp.csr_matrix) -> np.ndarray:
    """The stationary vector of level reduction's level 0 (its censored generator), by this module's solvers."""
    return stationary(S0, method="gth" if S0.shape[0] <= 200 else "direct").pi


def _structure(chain) -> str | None:
    if chain.Q is None:
        return "the chain was released (it has no generator)"
    return None


@register_solver(CTMC, name="stationary", priority=100, family="stationary", applies=_structure,
                 doc="stationary distribution, the algorithm chosen by the chain's structure and the predicted "
                     "cost of its sparse LU: level reduction, sparse LU, BiCGSTAB, GTH, or level aggregation for "
                     "level-structured chains (each also registered by its own name)",
                 options=("solver", "strict", "rtol", "previous"))
def solve_stationary(chain, *, solver: str = "auto", strict: bool = False, rtol: float | None = None,
                     previous=None, classes=None) -> StationaryDistribution:
    """Stationary distribution of a :class:`~exactq.ctmc.CTMC` (or DTMC), using its geometry.

    Parameters
    ----------
    chain : CTMC or DTMC
    solver : str
        One of :data:`STATIONARY_SOLVERS`. ``auto`` takes ``level-aggregation`` for a
        chain that declares ``levels`` and otherwise :func:`stationary`'s choice (GTH
        up to 200 states, sparse LU above).
    strict : bool
        Raise instead of warning on non-convergence.
    rtol : float, optional
        Relative residual target of the iterative methods (level aggregation: 1e-12).
    previous : (chain, StationaryDistribution), optional
        The last, smaller truncation: its solution warm-starts an iterative solver.
    classes : ClassStructure, optional
        The chain's communicating classes, when the caller has them (passed to :func:`stationary`).

    Returns
    -------
    StationaryDistribution
        With ``space`` set to the chain's, so that marginals are available.

    Examples
    --------
    The M/M/1 queue truncated at 3 jobs (arrival rate 1, service rate 2):

    >>> from exactq.ctmc import Event, build_ctmc
    >>> from exactq.statespace import StateSpace
    >>> c = build_ctmc(StateSpace.box(["n"], hi=[3]), [Event("a", lambda s: (np.ones(len(s)), s + 1)),
    ...                                                Event("d", lambda s: (2.0 * (s[:, 0] > 0), s - 1))])
    >>> d = solve_stationary(c)
    >>> bool(np.allclose(d.marginal("n"), 0.5 ** np.arange(4) / sum(0.5 ** np.arange(4))))
    True
    """
    if solver not in STATIONARY_SOLVERS:
        raise ModelError(f"stationary solver must be one of {', '.join(STATIONARY_SOLVERS)}; got {solver!r}")
    Q = chain.generator() if isinstance(chain, DTMC) else chain.Q
    levels = getattr(chain, "levels", None)
    if solver == "level-aggregation" or (solver == "auto" and levels is not None):
        if levels is None:
            raise ModelError("the level-aggregation solver needs a chain that declares its levels (CTMC.levels)")
        from .level_aggregation import stationary_levels

        x0 = getattr(chain, "start", None)
        if previous is not None:
            x0 = _warm_start(chain, previous)
        try:
            return replace(stationary_levels(Q, levels, x0=x0, rtol=1e-12 if rtol is None else rtol, strict=strict),
                           space=chain.space)
        except NoValidVector as exc:
            if solver != "auto":
                raise
            recovery = [{"from": "level-aggregation", "to": "auto", "why": str(exc)}]
    else:
        recovery = []
    sol = stationary(Q, method=solver, strict=strict,
                     coords=chain.states, jumps=getattr(chain, "jumps", None), reference=chain.initial,
                     describe_state=chain.space.format_state, ordering=getattr(chain, "ordering", "auto"),
                     classes=classes, **({} if rtol is None else {"rtol": rtol}))
    if recovery:
        sol.info["recovery"] = recovery + sol.info.get("recovery", [])
    return replace(sol, space=chain.space)


register_solver(DTMC, name="stationary", priority=100, family="stationary",
                doc="stationary distribution of P - I (the CTMC solvers)",
                options=("solver", "strict", "rtol"))(solve_stationary)

#: each stationary algorithm, registered by its name (``--option solver=NAME``, ``method=NAME``): what it needs
ALGORITHMS = {
    "direct": "sparse LU of the reduced M-matrix (SuperLU, fill-reducing ordering from the states' geometry)",
    "bicgstab": "BiCGSTAB preconditioned by Jacobi, then symmetric Gauss-Seidel, with an l1 error bound",
    "gmres": "ILU-preconditioned GMRES on the reduced system",
    "power": "power iteration on the uniformised chain",
    "gth": f"Grassmann-Taksar-Heyman elimination, dense (at most {GTH_MAX_STATES} states)",
    "mpmath": "sparse LU and mixed-precision iterative refinement at 50 digits",
    "level-reduction": "linear level reduction by the largest coordinate (chains that move up from few states)",
    "level-aggregation": "BiCGSTAB with level aggregation (chains that declare their levels)",
}


def _algorithm(name: str):
    """The registered solver of one algorithm: :func:`solve_stationary` with ``solver=name``."""
    def fn(chain, **options):
        options.pop("solver", None)
        return solve_stationary(chain, solver=name, **options)
    fn.__name__ = fn.__qualname__ = f"solve_{name.replace('-', '_')}"
    fn.__doc__ = f"The stationary law by {ALGORITHMS[name]} (:func:`solve_stationary` with ``solver={name!r}``)."
    return fn


for _name, _doc in ALGORITHMS.items():
    _fn = _algorithm(_name)
    register_solver(CTMC, name=_name, priority=10, family="stationary", applies=_structure, doc=_doc,
                    options=("strict", "rtol", "previous"))(_fn)
    register_solver(DTMC, name=_name, priority=10, family="stationary", doc=_doc, options=("strict", "rtol"))(_fn)


def _warm_start(chain, previous) -> np.ndarray:
    """A start vector on ``chain`` from the solution of a smaller truncation (zero where new)."""
    pchain, psol = previous
    x0 = np.asarray(chain.start if chain.start is not None else np.ones(chain.n_states), dtype=float).copy()
    idx = chain.space.index(pchain.states)
    ok = (idx >= 0) & (psol.pi > 0)
    if ok.any():
        x0 *= psol.pi[ok].sum() / max(x0[idx[ok]].sum(), 1e-300)
        x0[idx[ok]] = psol.pi[ok]
    return x0


# ----------------------------------------------------------------------------
_warn_or_raise = warn_or_raise


#: methods whose answer depends on the dropped equation (the reference state)
REFERENCED = ("direct", "gmres", "mpmath", "bicgstab")
#: methods that stop on ``rtol``; the others are eliminations, held to :data:`ELIMINATION_RTOL`
ITERATIVE = ("gmres", "power", "level-aggregation", "bicgstab")
#: an elimination's answer must have ``||pi Q||_1 / q`` at most this (or ``rtol`` if larger);
#: measured on the test suite: at most 5e-16 in the max norm
ELIMINATION_RTOL = 1e-10
#: entries above ``-NEGATIVE_RTOL * max(pi)`` are rounding noise and set to 0 (counted in
#: ``info["clipped_negative"]``); a more negative entry makes the vector unusable
NEGATIVE_RTOL = 1e-12
#: an iterative method keeps the given reference state when its share of the largest entry of Gauss-Seidel's mass
#: estimate is at least this (1: only when it is that entry; with 1e-3 the polling chain's initial state was kept
#: and BiCGSTAB over- or underflowed with it: 2.4 s before the redo, against 0.14 s from the estimate's state)
LIKELY_GUESS = 1.0
#: a reference state with less than this share of the largest probability is changed
IMPROBABLE = 1e-6
#: an iterative method chosen by predicted cost that does not converge is retried from at most this many new
#: reference states before the fallbacks (the LU)
ITERATIVE_REFERENCES = 1
#: Gauss-Seidel sweeps of the estimate that picks the reference state after such a run (see
#: :meth:`_Runner.deep_reference`); a heavily loaded Erlang loss network (39,711 states) needed 30-50
MASS_DEEP_SWEEPS = 64


def check_stationary(Q: sp.csr_matrix, x, *, tol: float) -> tuple[np.ndarray | None, str | None, float]:
    """Validate a candidate stationary vector: the one test every solve ends in.

    Parameters
    ----------
    Q : (n, n) sparse generator
    x : (n,) array or None
        The candidate, normalised or not (for instance ``pi / pi[ref]``); None for a
        solve that failed.
    tol : float
        The largest acceptable relative residual ``||pi Q||_1 / q`` (``q`` the largest
        exit rate).

    Returns
    -------
    pi : (n,) ndarray or None
        The normalised vector (``pi >= 0``, ``sum = 1``; rounding-level negative
        entries set to 0), or None when ``x`` is unusable: an entry is NaN or
        infinite, an entry is negative beyond :data:`NEGATIVE_RTOL` of the largest,
        the vector is zero, or its residual is not finite.
    problem : str or None
        One line saying what is wrong (None when ``pi`` passes every test).
    relative_residual : float
        ``||pi Q||_1 / q`` (``inf`` when ``pi`` is None).

    Examples
    --------
    >>> Q = sp.csr_matrix([[-1.0, 1.0], [2.0, -2.0]])
    >>> pi, problem, r = check_stationary(Q, np.array([2.0, 1.0]), tol=1e-12)
    >>> pi.tolist(), problem, r
    ([0.6666666666666666, 0.3333333333333333], None, 0.0)
    >>> check_stationary(Q, np.array([np.inf, 1.0]), tol=1e-12)[:2]
    (None, '1 of 2 entries are not finite (the solve over- or underflowed)')
    """
    if x is None:
        return None, "the solve failed", math.inf
    x = np.asarray(x, dtype=float)
    n = x.size
    bad = ~np.isfinite(x)
    if bad.any():
        return None, f"{int(bad.sum())} of {n} entries are not finite (the solve over- or underflowed)", math.inf
    top = float(np.abs(x).max(initial=0.0))
    if top == 0.0:
        return None, "the solve returned the zero vector", math.inf
    lowest = float(x.min())
    if lowest < -NEGATIVE_RTOL * top:
        i = int(np.argmin(x))
        return None, f"entry {i} is negative ({lowest / top:.2e} of the largest)", math.inf
    if lowest < 0.0:
        x = np.maximum(x, 0.0)
    total = float(x.sum())
    if not (math.isfinite(total) and total > 0.0):
        x = x / top
        total = float(x.sum())
    pi = x / total if total != 1.0 else x
    q = float((-Q.diagonal()).max()) or 1.0
    rel = float(np.abs(Q.T @ pi).sum()) / q
    if not math.isfinite(rel):
        return None, "the residual is not finite", math.inf
    if rel > tol:
        return pi, f"relative residual ||pi Q||_1/q = {rel:.2e} > {tol:.0e}", rel
    return pi, None, rel


def _mass_estimate(Q: sp.csr_matrix, sweeps: int = 3, x0: np.ndarray | None = None) -> np.ndarray:
    """Where the stationary mass lies, roughly: symmetric Gauss-Seidel sweeps on ``pi Q = 0``.

    With ``Q^T = -D + L + U`` (``D`` the exit rates, ``L``/``U`` the strictly lower/upper
    off-diagonal rates), a forward sweep solves ``(D - L) y = U x`` and a backward one
    ``(D - U) x = L y`` (Stewart 1994, sec. 3.2). Both are sums of non-negative terms, and
    one forward sweep carries mass along the whole state order (a PRISM model's states
    are in exploration order, so mass far from the initial state is reached in the first
    sweep). Each half sweep is rescaled by its largest entry; a sweep that over- or
    underflows is discarded. Only the position of the largest entry is used (as a
    reference state), so a few sweeps suffice.
    """
    return _MassSweeps(Q).run(x0, sweeps)


class _MassSweeps:
    """The sweeps of :func:`_mass_estimate` on one generator (prepared once).

    A half sweep solves ``(D - L) y = U x`` (forward) or ``(D - U) y = L x`` (backward), ``D - L - U = -Q^T``:
    one Gauss-Seidel sweep over ``-Q^T y = 0`` started from ``x``, which PyAMG's compiled sweep makes in one
    pass over the rows (:func:`exactq.solvers.linear.compiled_sweep`). Without it, the triangles are cut and
    solved apart (a product and a triangular solve a half sweep).
    """

    def __init__(self, Q: sp.csr_matrix):
        from .linear import compiled_sweep, sweep_arrays

        QT = sp.csr_matrix(Q.T)
        QT.sum_duplicates()
        d = -QT.diagonal()
        self.n = Q.shape[0]
        self._sweep = compiled_sweep() if np.all(d > 0) else None
        if self._sweep is not None:
            self._M = sweep_arrays(-QT)  # rows of -Q^T: one sweep each way, in place
            return
        # the four triangles cut from Q^T's entries by one comparison each (D - L is -Q^T on and below the
        # diagonal): tril, triu and two differences with a diagonal matrix took 0.9 ms at 4,600 states
        rows = np.repeat(np.arange(QT.shape[0], dtype=QT.indices.dtype), np.diff(QT.indptr))
        self.lower = _part(QT, rows, QT.indices < rows)
        self.upper = _part(QT, rows, QT.indices > rows)
        A_fwd = _part(QT, rows, QT.indices <= rows, -1.0)
        A_bwd = _part(QT, rows, QT.indices >= rows, -1.0)
        if np.all(d > 0):
            from .linear import Triangle

            self.solves = [Triangle(A_fwd, lower=True).solve, Triangle(A_bwd, lower=False).solve]
        else:
            self.solves = [lambda r: spla.spsolve_triangular(A_fwd, r, lower=True),
                           lambda r: spla.spsolve_triangular(A_bwd, r, lower=False)]

    def _halves(self, x: np.ndarray):
        """The two half sweeps from ``x``: each yields its (unscaled) ``y`` (for an all-zero right-hand side
        ``U x`` or ``L x``, the triangle's solve of ``x`` itself)."""
        if self._sweep is not None:
            n, zero = self.n, np.zeros(self.n)
            for start, stop, step in ((0, n, 1), (n - 1, -1, -1)):
                y = x.copy()
                self._sweep(*self._M, y, zero, start, stop, step)
                if not y.any():  # y = 0 exactly when the right-hand side is: solve with x instead, from zero
                    y = np.zeros(n)
                    self._sweep(*self._M, y, np.ascontiguousarray(x), start, stop, step)
                x = yield y
            return
        for solve, rhs_part in zip(self.solves, (self.upper, self.lower)):
            rhs = rhs_part @ x
            if not rhs.any():
                rhs = x
            x = yield solve(rhs)

    def run(self, x0: np.ndarray | None, sweeps: int) -> np.ndarray:
        x = np.full(self.n, 1.0 / self.n) if x0 is None else np.array(x0, dtype=float)
        for _ in range(sweeps):
            halves = self._halves(x)
            with np.errstate(all="ignore"):
                y = next(halves)
            while True:
                top = float(np.max(y, initial=0.0))
                if not (np.all(np.isfinite(y)) and top > 0.0):
                    return x
                x = y / top
                try:
                    with np.errstate(all="ignore"):
                        y = halves.send(x)
                except StopIteration:
                    break
        return x

    def settled(self, sweeps: int = 3, most: int | None = None) -> np.ndarray:
        """Sweeps until the estimate's largest entry stays where it was when the sweeps so far are doubled
        (3, 6, 12, ... up to ``most``, default :data:`MASS_DEEP_SWEEPS`; within 0.1% counts as staying).

        Three sweeps suffice on most chains (FMS, polling, cluster, tandem: the same state after 6, 12 and
        64), and cost three more to confirm; on a heavily loaded Erlang loss network the mass moves through
        the lattice as a wave, a few states a sweep, and the three-sweep state had probability 6e-43 of the
        largest (176,851 states), so that BiCGSTAB with it as reference state stagnated for 220 iterations.
        """
        most = MASS_DEEP_SWEEPS if most is None else most
        x = self.run(None, sweeps)
        done = sweeps
        while done < most:
            j = int(np.argmax(x))
            k = min(done, most - done)
            y = self.run(x, k)
            if y is x:
                return x
            x, done = y, done + k
            if x[j] >= 0.999 * float(x.max()):
                break
        return x


class _Runner:
    """Runs stationary methods on one irreducible generator, validates and recovers.

    Every answer goes through :func:`check_stationary`. An answer that is unusable (not
    finite, negative, or a failed factorisation), an elimination whose residual is above
    :data:`ELIMINATION_RTOL`, or a referenced method's answer whose reference state is
    improbable is redone: first with another reference state (the largest entry of the
    last answer, or of :func:`_mass_estimate`), then by another method (``gth`` on small
    chains, ``direct``). Each step is one entry of ``info["recovery"]``
    (``{"from", "to", "why"}``). An iterative method that stops above its tolerance with a
    usable vector warns (or raises, with ``strict``) as before; when no attempt gives a
    usable vector the solve raises :class:`ConvergenceError`, whatever ``strict`` says.
    """

    def __init__(self, Q, *, rtol, maxiter, strict, coords, jumps, dps, ordering, plan, name, auto=False,
                 lu_fits=True):
        self.Q, self.rtol, self.maxiter, self.strict = Q, rtol, maxiter, strict
        self.auto, self.lu_fits = auto, lu_fits  # chosen automatically: a non-converged iteration is recovered too
        self.coords, self.jumps, self.dps, self.ordering, self.plan, self.name = \
            coords, jumps, dps, ordering, plan, name
        self._estimate = None
        self._sweeps = None
        self.recovery: list[dict] = []
        self.caught: dict = {}

    def sweeps(self) -> "_MassSweeps":
        """The Gauss-Seidel sweeps of the mass estimates, their triangles prepared once per chain."""
        if self._sweeps is None:
            self._sweeps = _MassSweeps(self.Q)
        return self._sweeps

    def tol(self, method: str) -> float:
        return self.rtol if method in ITERATIVE else max(self.rtol, ELIMINATION_RTOL)

    def _label(self, method: str, ref) -> str:
        return method if ref is None else f"{method}, reference {self.name(int(ref))}"

    def attempt(self, method: str, ref: int | None, x0: np.ndarray | None = None, certify: str = "probable"):
        """One run: (raw vector or None, nit, info, why it failed or None).

        ``x0`` (a previous answer, any scale) starts an iterative method; ``certify``
        (``"probable"``, ``"always"``) says when BiCGSTAB computes its error certificate
        (:func:`_bicgstab`). The method's warnings are kept in ``self.caught[id(info)]``
        and re-issued only for the answer that is returned.
        """
        Q, nit, info = self.Q, None, {}
        strict = False
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"), \
                    warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if method == "gth":
                    if Q.shape[0] > GTH_MAX_STATES:
                        raise ModelError(f"gth is dense and limited to {GTH_MAX_STATES} states; "
                                         f"this chain has {Q.shape[0]}")
                    x = _gth(Q.toarray())
                elif method == "direct":
                    x, info = _direct(Q, ref, self.coords, self.jumps, self.ordering)
                elif method == "level-reduction":
                    from .level_reduction import stationary_level_reduction

                    x, info = stationary_level_reduction(Q, self.plan, level_zero=_level_zero)
                elif method == "gmres":
                    x, nit, info = _gmres(Q, ref, self.rtol, self.maxiter, strict)
                elif method == "bicgstab":
                    x, nit, info = _bicgstab(Q, ref, self.rtol, self.maxiter, x0=x0, certify=certify)
                elif method == "power":
                    x, nit = _power(Q, self.rtol, self.maxiter, strict)
                else:  # mpmath
                    x, info = _refine_mp(Q, ref, self.coords, self.jumps, self.dps, self.ordering)
        except (RuntimeError, np.linalg.LinAlgError, ZeroDivisionError) as exc:  # "Factor is exactly singular"
            why = str(exc).rstrip(".")
            if not why.lower().startswith(method.replace("-", " ")):
                why = f"{method}: {why}"
            return None, None, {}, why
        info = dict(info)
        self.caught[id(info)] = caught
        return x, nit, info, None

    def likely_reference(self, x, tried: set) -> tuple[int | None, str]:
        """A likelier reference state: the largest finite entry of ``x``, else the mass estimate.

        An answer that over- or underflowed tries the mass estimate first: its largest
        finite entry lies at the edge of the overflow, next to the reference (the cell
        chain's 100,001 states: the redo walked 83 states at a time from the top, 99,999,
        99,916, ..., and gave up, where the estimate points at state 35).
        """
        skip = sorted(tried)
        finite = None if x is None else np.isfinite(x)
        if finite is not None and not finite.all():
            if self._estimate is None:
                self._estimate = self.sweeps().run(None, 3)
            j = int(np.argmax(self._estimate))
            if j not in tried and np.isfinite(self._estimate[j]) and self._estimate[j] > 0:
                return j, "the largest entry of a Gauss-Seidel estimate"
        if x is not None and finite.any() and x[finite].min() >= -NEGATIVE_RTOL * np.abs(x[finite]).max():
            # an answer that over- or underflowed, or had an improbable reference: its
            # largest finite entry is a likelier state (a negative answer tells nothing)
            v = np.where(finite, x, -np.inf)
            known = v[skip].max(initial=0.0)
            v[skip] = -np.inf
            j = int(np.argmax(v))
            if np.isfinite(v[j]) and v[j] > known:
                return j, "the largest entry of the last answer"
        if self._estimate is None:
            self._estimate = self.sweeps().run(None, 3)
        v = self._estimate.copy()
        v[skip] = -np.inf
        j = int(np.argmax(v))
        return (j, "the largest entry of a Gauss-Seidel estimate") if np.isfinite(v[j]) else (None, "")

    def deep_reference(self, tried: set) -> tuple[int | None, str]:
        """After an iterative run that did not converge: the largest entry of the mass estimate taken
        :data:`MASS_DEEP_SWEEPS` sweeps further (the failed iterate tells little; the three-sweep estimate can
        point far from the mass, as on a heavily loaded loss network where the mass settles after 30-50
        sweeps). The sweeps cost a few of the failed run's iterations."""
        self._estimate = self.sweeps().run(self._estimate, MASS_DEEP_SWEEPS)
        v = self._estimate.copy()
        v[sorted(tried)] = -np.inf
        j = int(np.argmax(v))
        return (j, f"the largest entry of a {MASS_DEEP_SWEEPS}-sweep Gauss-Seidel estimate") if np.isfinite(v[j]) \
            else (None, "")

    def _referenced(self, method: str, ref: int):
        """Run a referenced method, changing the reference state while the answer is bad."""
        tried: set = set()
        good = inaccurate = None
        problem = None
        x0 = None  # an iterative method starts from the last usable answer (with a new reference: rescaled)
        unconverged = 0  # iterative attempts that did not converge (chosen by cost: the LU is the fallback)
        for k in range(MAX_REFERENCES + 1):
            tried.add(int(ref))
            x, nit, info, why = self.attempt(method, ref, x0)
            pi, problem, rel = check_stationary(self.Q, x, tol=self.tol(method))
            problem = why or problem
            if pi is not None and problem is None:
                top = float(pi.max())
                if pi[ref] >= IMPROBABLE * top:
                    return pi, nit, info, None
                good = good or (pi, nit, info, ref)  # usable: another reference may only make it more accurate
                problem = f"improbable reference state (probability {pi[ref] / top:.1e} of the largest)"
                x0 = pi
            elif pi is not None:
                if method == "bicgstab":
                    info["_ref"] = int(ref)  # for its certificate, if this answer is kept (_certify_kept)
                if method in ITERATIVE and not self.auto:
                    return pi, nit, self._kept(method, pi, info), problem  # the method warned (or raised) itself
                if inaccurate is None or rel < inaccurate[3]:
                    inaccurate = (pi, nit, info, rel, problem)
                if method in ITERATIVE:
                    unconverged += 1
                    if unconverged > ITERATIVE_REFERENCES:
                        # chosen by predicted cost: the LU is cheaper than more failed runs (a loss network of
                        # 39,711 states: five BiCGSTAB runs of 3.7 s, each from a new reference, before the LU)
                        break
            if k == MAX_REFERENCES:
                break
            new, how = self.likely_reference(x, tried) if not (method in ITERATIVE and (unconverged or pi is None)) \
                else self.deep_reference(tried)
            if new is None:
                break
            self.recovery.append({"from": self._label(method, ref), "to": self._label(method, new),
                                  "why": f"{problem}; the new reference is {how}"})
            ref = new
        if good is not None:
            pi, nit, info, ref = good
            if method == "bicgstab" and "error_bound_l1" not in info:
                # its certificate was skipped (improbable reference): from the answer itself, no iterations
                x, _, info2, why = self.attempt(method, ref, pi, certify="always")
                pi2, problem2, _ = check_stationary(self.Q, x, tol=self.tol(method))
                if pi2 is not None and problem2 is None and why is None:
                    pi, info = pi2, info2
            return pi, nit, info, None
        if inaccurate is not None:
            return inaccurate[0], inaccurate[1], self._kept(method, inaccurate[0], inaccurate[2]), inaccurate[4]
        return None, None, {}, problem

    def _kept(self, method: str, pi, info: dict) -> dict:
        """``info`` of an unconverged answer that is returned: with its certificate when BiCGSTAB skipped it."""
        ref = info.pop("_ref", None)
        if method != "bicgstab" or ref is None:
            return info
        with np.errstate(all="ignore"):
            return _certify_kept(self.Q, ref, pi, info)

    def run(self, method: str, ref: int | None):
        if method in REFERENCED:
            return self._referenced(method, ref)
        x, nit, info, why = self.attempt(method, None)
        pi, problem, _ = check_stationary(self.Q, x, tol=self.tol(method))
        return pi, nit, info, why or problem

    def fallbacks(self, method: str) -> list[str]:
        out = []
        if method not in ("direct", "mpmath") and self.lu_fits:
            out.append("direct")
        if method != "gth" and self.Q.shape[0] <= GTH_MAX_STATES:
            # dense GTH is exact but cubic (3,600 states: 34 s): first on small chains, after the LU on larger
            out.insert(0 if self.Q.shape[0] <= GTH_FIRST_STATES else len(out), "gth")
        return out

    def solve(self, method: str, ref: int):
        """The validated vector: (pi, nit, method used, info)."""
        pi, nit, info, problem = self.run(method, ref)
        used = method
        stopped = pi is not None and problem is not None and method in ITERATIVE and not self.auto  # warned
        if problem is not None and not stopped:
            for fb in self.fallbacks(method):
                entry = {"from": self._label(used, None), "to": fb, "why": problem}
                self.recovery.append(entry)
                new_ref = self.likely_reference(pi, set())[0] if fb in REFERENCED else None
                p2, n2, i2, prob2 = self.run(fb, new_ref)
                if p2 is not None and (prob2 is None or pi is None):
                    pi, nit, info, problem, used = p2, n2, i2, prob2, fb
                    if problem is None:
                        break
                else:
                    entry["result"] = prob2 or "not better"
        caught = self.caught.get(id(info), [])
        info = dict(info)
        if self.recovery:
            info["recovery"] = self.recovery
        if pi is None:
            steps = "; ".join(f"{r['from']} -> {r['to']}: {r['why']}" for r in self.recovery)
            raise NoValidVector(f"no stationary solver gave a valid vector ({problem})"
                                   + (f"; tried {steps}" if steps else ""))
        for w in caught:  # the warnings of the answer returned (an iterative method's non-convergence)
            if self.strict and issubclass(w.category, ConvergenceWarning):
                raise ConvergenceError(str(w.message))
            warnings.warn(w.message, w.category, stacklevel=4)
        if problem is not None:
            info["converged"] = False
            if not any(issubclass(w.category, ConvergenceWarning) for w in caught):
                _warn_or_raise(f"{used}: the stationary vector is not accurate: {problem}", self.strict)
        return pi, nit, used, info


def _check_generator(Q: sp.csr_matrix, describe_state) -> None:
    """Off-diagonal rates >= 0, finite, rows summing to 0; name the first bad state."""
    name = describe_state or (lambda i: f"state {i}")
    rows = np.repeat(np.arange(Q.shape[0]), np.diff(Q.indptr))
    finite = np.isfinite(Q.data)
    if not finite.all():
        raise ModelError(f"generator has a non-finite rate in {name(int(rows[~finite][0]))}")
    bad = (Q.data < 0) & (Q.indices != rows)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ModelError(f"generator has a negative off-diagonal rate {Q.data[k]} in {name(int(rows[k]))}")
    rowsum = np.bincount(rows, weights=Q.data, minlength=Q.shape[0])
    scale = np.maximum(np.abs(Q.diagonal()), 1.0)
    wrong = np.abs(rowsum) > 1e-9 * scale
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise ModelError(f"generator rows must sum to 0; row of {name(i)} sums to {rowsum[i]:.3e}")


def _reduced_system(Q: sp.csr_matrix, ref: int, perm: np.ndarray | None):
    """``B x = b`` with ``B = Q^T`` minus row/column ``ref`` (permuted by ``perm``)."""
    n = Q.shape[0]
    if perm is None and sp.issparse(Q) and Q.format == "csr" and Q.has_canonical_format:
        return _reduced_in_place_order(Q, ref)
    coo = Q.tocoo()
    if perm is None:
        perm = np.concatenate([np.arange(ref), np.arange(ref + 1, n)])
    else:
        perm = perm[perm != ref]
    inv = np.full(n, -1, dtype=np.int64)
    inv[perm] = np.arange(n - 1)
    r, c = inv[coo.col], inv[coo.row]  # transpose
    ok = (r >= 0) & (c >= 0)
    B = sp.csc_matrix((coo.data[ok], (r[ok], c[ok])), shape=(n - 1, n - 1))
    rhs_mask = (coo.row == ref) & (inv[coo.col] >= 0)
    b = np.zeros(n - 1)
    np.add.at(b, inv[coo.col[rhs_mask]], -coo.data[rhs_mask])
    return B, b, perm


def _reduced_in_place_order(Q, ref: int):
    """:func:`_reduced_system` without a permutation, from ``Q``'s canonical CSR arrays: ``Q``'s rows are
    ``Q^T``'s columns, so ``B`` is those arrays less row ``ref``'s entries and column ``ref``'s, the indices above
    ``ref`` moved down by one (sorted still, no COO round trip: tandem c=127, 32,640 states, 13 ms -> 1 ms)."""
    n = Q.shape[0]
    indptr, indices, data = Q.indptr, Q.indices, Q.data
    lo, hi = int(indptr[ref]), int(indptr[ref + 1])
    cols, vals = indices[lo:hi], data[lo:hi]
    off = cols != ref
    b = np.zeros(n - 1)
    b[cols[off] - (cols[off] > ref)] = -vals[off]  # (canonical: each column once)
    from .reachability import _kept_indptr

    keep = indices != ref
    keep[lo:hi] = False
    starts = np.delete(_kept_indptr(keep, indptr), ref + 1)  # (row ref keeps no entry: its start and end coincide)
    rows = indices[keep]
    rows -= rows > ref
    B = sp.csc_matrix((data[keep], rows, starts), shape=(n - 1, n - 1))
    perm = np.concatenate([np.arange(ref), np.arange(ref + 1, n)])
    return B, b, perm


def _assemble(x: np.ndarray, perm: np.ndarray, ref: int, n: int) -> np.ndarray:
    """The unnormalised vector ``pi / pi[ref]`` (:func:`check_stationary` normalises it)."""
    pi = np.empty(n)
    pi[perm] = x
    pi[ref] = 1.0
    return pi


def _ordering(Q, coords, jumps, ordering="auto"):
    """Fill-reducing ordering for the sparse LU.

    ``nested-dissection`` (geometric, from the states' coordinates; 2-D chains of unit
    steps are dissected in the rotated coordinates of :func:`_rotated_unit_lattice`) is
    the default for chains with coordinates; ``level`` sorts the states by the sum of their coordinates
    (block-banded factors; best for many-dimensional chains of narrow levels such as
    sorted queue lengths of several server classes, where a model asks for it through
    ``CTMC.ordering``); ``mmd`` is SuperLU's minimum degree on A^T + A, the default for
    chains without coordinates.
    """
    if ordering not in ORDERINGS:
        raise ModelError(f"ordering must be one of {', '.join(ORDERINGS)}; got {ordering!r}")
    have = coords is not None and jumps is not None and np.any(jumps > 0)
    if ordering == "mmd" or not have or (ordering == "auto" and Q.shape[0] < ND_MIN_STATES):
        return None, "MMD_AT_PLUS_A"
    if ordering == "level":
        return np.argsort(coords.sum(axis=1), kind="stable"), "level"
    rotated = _rotated_unit_lattice(Q, coords)
    if rotated is not None:
        return nested_dissection(rotated, np.ones(2, np.int64)), "nested-dissection"
    return nested_dissection(coords, jumps), "nested-dissection"


def _rotated_unit_lattice(Q, coords):
    """``(x + y, y - x)`` for a 2-D chain whose every transition moves one step in both.

    For chains of unit steps along the axes (JSQ, exponential SED, their lumped
    versions) nested dissection in the 45-degree rotated coordinates factors faster:
    measured on the lumped JSQ with K = 1000 (501,501 states) SuperLU takes 1.10 s
    instead of 1.74 s (fill 17.6M instead of 26.3M), on the full K = 700 square 1.23 s
    instead of 1.38 s; for longer jumps (Erlang SED, r phases per arrival) it is no
    better, so those keep the axes. Returns None when the rotation does not apply.
    """
    if coords.shape[1] != 2:
        return None
    rot = np.stack([coords[:, 0] + coords[:, 1], coords[:, 1] - coords[:, 0]], axis=1)
    rows = np.repeat(np.arange(Q.shape[0]), np.diff(Q.indptr))
    off = rows != Q.indices
    delta = rot[Q.indices[off]] - rot[rows[off]]
    return rot if delta.size and np.abs(delta).max() == 1 else None


def _factor(Q, ref, coords, jumps, ordering="auto"):
    perm, ordering = _ordering(Q, coords, jumps, ordering)
    # (decided before _reduced_system, which returns a permutation in every case: from 9f52d9e to this fix the
    # "mmd" ordering, that of chains without coordinates and of those under ND_MIN_STATES, factorised in the
    # chain's own order; a 2-D walk of 4,900 states numbered at random: 808 ms and 3.7M entries, against 16 ms
    # and 0.18M with SuperLU's minimum degree)
    spec = "MMD_AT_PLUS_A" if perm is None else "NATURAL"
    B, b, perm = _reduced_system(Q, ref, perm)
    lu = spla.splu(
        B,
        permc_spec=spec,
        diag_pivot_thresh=0.0,
        options=dict(SymmetricMode=True),
    )
    # SuperLU's own count (supernodal storage, explicit zeros included): lu.L and lu.U
    # would copy the factors (0.4 s of a 2.3 s solve at 500k states)
    info = {"ordering": ordering, "lu_nnz": int(lu.nnz)}
    return lu, B, b, perm, info


def _direct(Q, ref, coords, jumps, ordering="auto"):
    n = Q.shape[0]
    lu, B, b, perm, info = _factor(Q, ref, coords, jumps, ordering)
    x = lu.solve(b)
    with np.errstate(all="ignore"):
        info["error_bound_l1"] = _l1_bound(B, x, b, -lu.solve(np.ones(n - 1), trans="T"))
    return _assemble(x, perm, ref, n), info


def _l1_bound(B, x, b, m) -> float:
    """A bound on ``||pi* - pi||_1`` from the reduced system ``B x = b`` (``B = Q_SS^T``, ``x = pi_S / pi_ref``).

    ``A = -B`` is a nonsingular M-matrix, so ``|x* - x| <= A^-1 |r|`` (``r = b - B x``) and
    ``||x* - x||_1 <= (A^-T 1)^T |r| <= (m / g)^T |r|`` for any ``m >= 0`` with
    ``A^T m >= g 1``, ``g > 0`` (verified here by one product). ``A^-T 1 = (-Q_SS)^-1 1``
    is the vector of expected hitting times of the reference state, so the bound reads
    ``sum_j E_j[T_ref] |(pi Q)_j|`` in the scale ``pi_ref = 1``; normalising costs a
    factor ``2 / (1 + sum x)`` (Stewart 1994, sec. 2.5; Varah 1975; Rump 2010, sec.
    10.2). It holds up to the rounding of one residual; ``inf`` when no certificate was
    found (``g <= 0``).
    """
    m = np.asarray(m, dtype=float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(m)) and np.all(m >= 0)):
        return math.inf
    g = float((-(B.T @ m)).min(initial=math.inf))
    if not g > 0:
        return math.inf
    r = np.abs(b - B @ x)
    total = 1.0 + float(x.sum())
    bound = 2.0 * float((m / g) @ r) / total
    return bound if math.isfinite(bound) else math.inf


def _bicgstab(Q, ref, rtol, maxiter, *, x0=None, certify="probable"):
    """BiCGSTAB with :data:`~exactq.solvers.linear.PRECONDITIONER` (Jacobi, then symmetric Gauss-Seidel) on ``-B x = -b``.

    The iteration runs to the rounding level (``||b - B x||_2 <= 1e-15 ||b||_2``, or until
    it stagnates: a result within ``rtol / 10`` counts as converged; a tighter residual
    gave 100x smaller errors on a 30,976-state round-robin chain), then the certificate of
    :func:`_l1_bound` (expected hitting times from a loose solve of the transposed
    system) bounds ``||pi* - pi||_1``.

    ``x0``, a previous answer (any scale, e.g. for another reference state), starts the
    iteration at ``x0 / x0[ref]``: after a change of reference the answer is usually
    within the tolerance already (measured on FMS n = 5, 152,712 states: 0 iterations
    instead of 210). With ``certify="probable"`` the certificate (half an iteration's
    cost again: 106 iterations of the transposed system there) is skipped when the
    reference state is improbable (below :data:`IMPROBABLE` of the largest entry), since
    that answer is then redone with a likelier reference; ``"always"`` computes it.
    """
    from .linear import PRECONDITIONER, solve_iterative

    n = Q.shape[0]
    B, b, perm = _reduced_system(Q, ref, None)
    A = (-B).tocsr()
    prec = PRECONDITIONER(A)
    start = None
    if x0 is not None:
        x0 = np.asarray(x0, dtype=float)
        if np.all(np.isfinite(x0)) and x0[ref] > 0 and np.all(x0 >= 0):
            start = x0[perm] / x0[ref]
    x, it = solve_iterative(A, -b, x0=start, rtol=1e-15, accept=0.1 * rtol, maxiter=maxiter, prec=prec)
    info = {"solver": {"name": f"bicgstab+{prec.name}", "iterations": it["iterations"], "status": it["status"]}}
    if it["status"] != 0 and np.all(np.isfinite(x)):
        # stopped short of the rounding level (a breakdown, stagnation): what counts is the chain's own test
        pi = _assemble(x, perm, ref, n)
        with np.errstate(all="ignore"):
            pi = pi / pi.sum()
            rel = float(np.abs(Q.T @ pi).sum()) / (float((-Q.diagonal()).max()) or 1.0)
        if rel <= rtol:
            info["solver"]["stopped"] = f"status {it['status']} with ||pi Q||_1/q = {rel:.1e} <= rtol"
            it["status"] = 0
    if it["status"] != 0:
        warnings.warn(f"bicgstab did not reach its tolerance in {it['iterations']} iterations "
                      f"(status {it['status']})", ConvergenceWarning, stacklevel=2)
    improbable = np.all(np.isfinite(x)) and float(np.max(x, initial=0.0)) * IMPROBABLE > 1.0  # pi_ref = 1 here
    if certify == "probable" and improbable:
        info["solver"]["certificate"] = "skipped: improbable reference state (the answer is redone)"
    elif certify == "probable" and it["status"] != 0:
        # an answer above its tolerance is redone from another reference (or by the LU), and its certificate, a
        # solve of the transposed system, fails the same way: a loss network of 176,851 states spent 3.0 s in
        # 300 such iterations after the 2.2 s of the failed run. The caller certifies it if it is kept
        # (:func:`_certificate`).
        info["solver"]["certificate"] = "skipped: not converged (the answer is redone)"
    elif np.all(np.isfinite(x)):
        info.update(_certificate(A, B, b, x, prec, info["solver"]))
    return _assemble(x, perm, ref, n), it["iterations"], info


def _certificate(A, B, b, x, prec, solver_info: dict) -> dict:
    """``{"error_bound_l1": ...}`` of :func:`_l1_bound` for the reduced system's answer ``x``, from a loose
    solve of the transposed system (its iterations go into ``solver_info``)."""
    from .linear import solve_iterative

    n1 = A.shape[0]
    ones = np.ones(n1)
    limit = max(200, (n1 + 1) // 50)
    m, mit = solve_iterative(A, ones, rtol=CERTIFICATE_RTOL[0], trans=True, prec=prec, maxiter=limit)
    iterations = mit["iterations"]
    with np.errstate(all="ignore"):
        bound = _l1_bound(B, x, b, np.maximum(m, 0.0))
        if not math.isfinite(bound):  # A^T m >= g 1 failed somewhere (g <= 0): on, from m, to the tighter residual
            m, mit = solve_iterative(A, ones, x0=m, rtol=CERTIFICATE_RTOL[1], trans=True, prec=prec, maxiter=limit)
            iterations += mit["iterations"]
            bound = _l1_bound(B, x, b, np.maximum(m, 0.0))
    solver_info["certificate_iterations"] = iterations
    return {"error_bound_l1": bound}


#: the residuals of the certificate's solve (:func:`_certificate`): the first, and the one it goes on to when that
#: vector is no certificate (``A^T m >= g 1`` fails, ``g <= 0``). Measured on nine PRISM chains of 3,072-130,816
#: states, 1e-2 gives bounds within 3% of 1e-4's in 10-45% fewer iterations (tandem 127: 37 -> 33, FMS 4: 9 ->
#: 6, cluster 32: 6 -> 4); any vector with g > 0 gives a rigorous bound (:func:`_l1_bound` checks it), a looser
#: one a larger bound
CERTIFICATE_RTOL = (1e-2, 1e-4)


def _certify_kept(Q, ref: int, pi: np.ndarray, info: dict) -> dict:
    """The certificate of a BiCGSTAB answer ``pi`` (reference ``ref``) that skipped it and is kept after all:
    ``info`` with ``error_bound_l1`` (no iterations of the answer itself)."""
    from .linear import PRECONDITIONER

    if "error_bound_l1" in info or not (np.all(np.isfinite(pi)) and pi[ref] > 0):
        return info
    B, b, perm = _reduced_system(Q, ref, None)
    A = (-B).tocsr()
    solver_info = dict(info.get("solver", {}))
    solver_info.pop("certificate", None)
    out = dict(info)
    out.update(_certificate(A, B, b, pi[perm] / pi[ref], PRECONDITIONER(A), solver_info))
    out["solver"] = solver_info
    return out


def _gmres(Q, ref, rtol, maxiter, strict):
    n = Q.shape[0]
    B, b, perm = _reduced_system(Q, ref, None)
    ilu = spla.spilu(B, drop_tol=1e-5, fill_factor=20)
    M = spla.LinearOperator(B.shape, ilu.solve)
    count = [0]

    def cb(_):
        count[0] += 1

    x, status = spla.gmres(B, b, M=M, rtol=rtol, atol=0.0, restart=50, maxiter=maxiter or 200,
                           callback=cb, callback_type="pr_norm")
    if status != 0:
        _warn_or_raise(f"gmres did not reach rtol={rtol} (status {status})", strict)
    return _assemble(x, perm, ref, n), count[0], {"preconditioner": "spilu", "gmres_status": int(status)}


def _power(Q, rtol, maxiter, strict):
    n = Q.shape[0]
    q = float((-Q.diagonal()).max()) * 1.05
    P = (sp.identity(n, format="csr") + Q / q).T.tocsr()
    pi = np.full(n, 1.0 / n)
    maxiter = maxiter or 1_000_000
    it = 0
    QT = Q.T.tocsr()
    while it < maxiter:
        for _ in range(50):
            pi = P @ pi
        it += 50
        pi /= pi.sum()
        if np.abs(QT @ pi).sum() / q <= rtol / 1.05:  # ||pi Q||_1 / max exit rate <= rtol
            return pi, it
    _warn_or_raise(f"power iteration did not reach rtol={rtol} in {maxiter} iterations", strict)
    return pi, it


_gth = gth


def _refine_mp(Q, ref, coords, jumps, dps, ordering="auto"):
    """Mixed-precision iterative refinement of the reduced system at ``dps`` digits."""
    import mpmath

    n = Q.shape[0]
    lu, B, b, perm, info = _factor(Q, ref, coords, jumps, ordering)
    Bc = B.tocsr()
    Bc.sort_indices()
    with mpmath.workdps(dps):  # the precision is scoped to this solve
        mpf = mpmath.mpf
        to_mp = np.frompyfunc(mpf, 1, 1)
        data = to_mp(Bc.data)
        bm = to_mp(b)
        x = to_mp(lu.solve(b))
        rows_nonempty = np.diff(Bc.indptr) > 0
        target = mpf(10) ** (-(dps - 5))
        bnorm = max(abs(v) for v in bm) or mpf(1)
        rnorm = None
        it = 0
        for it in range(1, 30):
            prods = data * x[Bc.indices]
            Bx = np.zeros(len(x), dtype=object)
            Bx[:] = mpf(0)
            Bx[rows_nonempty] = np.add.reduceat(prods, Bc.indptr[:-1][rows_nonempty])
            r = bm - Bx
            rnorm = max(abs(v) for v in r) / bnorm
            if rnorm <= target:
                break
            d = lu.solve(np.array([float(v) for v in r]))
            x = x + to_mp(d)
        full = np.empty(n, dtype=object)
        full[perm] = x
        full[ref] = mpf(1)
        total = mpmath.fsum(full)
        pi_mp = full / total
        info.update({"dps": dps, "refinement_steps": it, "mp_relative_residual": float(rnorm)})
        info["pi_mp"] = pi_mp
        pi = np.array([float(v) for v in pi_mp])
    return pi, info
