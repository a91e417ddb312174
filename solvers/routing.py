"""Routing to parallel processor-sharing servers as convex programs (the ``convex`` method).

With utilisations rho_i of servers of capacity mu_i and holding cost c_i, and
K decision makers (K = 1: central dispatcher; K = inf: selfish jobs, Wardrop; finite
K: symmetric atomic dispatchers), the loads minimise

    F_K(rho) = sum_i c_i [ (1/K) / (1 - rho_i) + (1 - 1/K) (-log(1 - rho_i)) ]
    subject to  sum_i mu_i rho_i = rho,  rho_i >= 0.

F_1 is the holding cost sum c_i rho_i/(1-rho_i) up to a constant (Altman, Ayesta &
Prabhu 2011, sec. 3), F_inf the potential of the selfish-routing game (sec. 4), and
F_K the potential of the symmetric K-dispatcher game (its stationarity conditions are
those of the Nash equilibrium of Ayesta, Brun & Prabhu 2011, Lemma 2). With several
job classes the program is posed over the per-class routing probabilities, which shows
numerically that the optimum depends on the loads only.

The programs are built with cvxpy (checked DCP; ``inv_pos`` is a second-order cone,
``log`` an exponential cone) and solved by Clarabel by default. An interior-point
solution is accurate only to about the square root of the solver's tolerance in the
loads, so the answer is then *polished*: with the used set read from the solver's
loads, the stationarity conditions are solved exactly for the multiplier, and the set
is corrected until complementarity holds (as in OSQP's polishing; here the used set
is always the k cheapest servers by c_i/mu_i, so the correction is a search over k
started at the solver's k). The result reports both the solver's and the polished
KKT residuals and how far polishing moved the loads.

cvxpy is imported inside the functions, so that importing exactq stays fast.

References
----------
E. Altman, U. Ayesta, B. J. Prabhu, "Load balancing in processor sharing systems",
Telecommunication Systems 47 (2011) 35-48.
U. Ayesta, O. Brun, B. J. Prabhu, "Price of anarchy in non-cooperative load balancing
games", Performance Evaluation 68 (2011) 1312-1332.
A. Orda, R. Rom, N. Shimkin, "Competitive routing in multiuser communication networks",
IEEE/ACM Trans. Networking 1 (1993) 510-521 (uniqueness; best-response dynamics).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import (
    AccuracyWarning,
    ConvergenceError,
    ModelError,
    NotApplicableError,
    UnstableError,
)
from exactq.result import Result

__all__ = [
    "check_routing_problem",
    "convex_loads",
    "polish_loads",
    "kkt_residuals",
    "atomic_equilibrium",
    "solve_convex",
    "solve_program",
    "SOLVER_TOLERANCES",
]

#: how ``solver_tol`` is passed to the cvxpy solvers that take one
SOLVER_TOLERANCES = {
    "CLARABEL": ("tol_gap_abs", "tol_gap_rel", "tol_feas"),
    "SCS": ("eps_abs", "eps_rel"),
    "ECOS": ("abstol", "reltol", "feastol"),
}


def _regime_label(dispatchers) -> str:
    if dispatchers == 1:
        return "centralized"
    return "decentralized" if math.isinf(dispatchers) else "atomic"


def check_routing_problem(service_rates, holding_costs, work_rate, class_work_rates=None):
    mu = np.asarray(service_rates, dtype=float).ravel()
    c = np.ones_like(mu) if holding_costs is None else np.asarray(holding_costs, dtype=float).ravel()
    if mu.size == 0 or not np.all(np.isfinite(mu)) or np.any(mu <= 0):
        raise ModelError(f"service_rates must be a list of 1+ values, each > 0; got {mu.tolist()}")
    if c.shape != mu.shape:
        raise ModelError(f"holding_costs must have one value per server ({mu.size}); got {c.size}")
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ModelError(f"holding_costs must each be > 0; got {c.tolist()}")
    rho = float(work_rate)
    if not (math.isfinite(rho) and rho > 0):
        raise ModelError(f"work_rate must be > 0; got {work_rate!r}")
    if rho >= mu.sum():
        raise UnstableError(f"work_rate must be < total service rate {mu.sum():g}; got {rho:g}")
    w = np.array([rho]) if class_work_rates is None else np.asarray(class_work_rates, float).ravel()
    if w.size == 0 or np.any(w <= 0) or not math.isclose(w.sum(), rho, rel_tol=1e-12):
        raise ModelError(f"class_work_rates must be > 0 and sum to work_rate {rho:g}; got {w.tolist()}")
    return mu, c, rho, w


def _check_dispatchers(k):
    if k == math.inf:
        return math.inf
    if isinstance(k, bool) or not float(k).is_integer() or k < 1:
        raise ModelError(f"dispatchers must be an integer >= 1 or inf; got {k!r}")
    return int(k)


# -- stationarity, polishing and residuals -------------------------------------------


def _marginal(u, dispatchers):
    """d F_K / d rho_i divided by c_i, as a function of u = 1/(1 - rho_i)."""
    inv_k = 0.0 if math.isinf(dispatchers) else 1.0 / dispatchers
    return inv_k * u * u + (1.0 - inv_k) * u


def _spare_at(nu, a, dispatchers):
    """1 - rho_i solving c_i * marginal(u_i) = nu * mu_i, i.e. marginal(u) = nu / a_i.

    The quadratic u^2/K + (1 - 1/K) u = z has the root
    u = 2z / ((1 - 1/K) + sqrt((1 - 1/K)^2 + 4z/K)), written without cancellation.
    """
    inv_k = 0.0 if math.isinf(dispatchers) else 1.0 / dispatchers
    z = nu / a
    return ((1.0 - inv_k) + np.sqrt((1.0 - inv_k) ** 2 + 4.0 * inv_k * z)) / (2.0 * z)


def _multiplier_on(mu, a, rho, dispatchers):
    """The nu with sum_i mu_i (1 - spare_i(nu)) = rho over the given (used) servers."""
    from scipy.optimize import brentq

    def excess(nu):
        return float(np.sum(mu * (1.0 - _spare_at(nu, a, dispatchers)))) - rho

    lo = float(a.min())  # every spare >= 1 here, so excess(lo) <= -rho < 0
    hi = 2.0 * float(a.max())
    while excess(hi) <= 0.0:
        hi *= 2.0
    return brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


def polish_loads(service_rates, holding_costs, work_rate, used, *, dispatchers=1):
    """Exact stationary loads of F_K, starting from a guessed used set.

    At the solution a server is used iff its threshold a_i = c_i/mu_i is below the
    multiplier nu, so the used servers are the k* cheapest by a_i. For the k cheapest,
    let nu_k solve the work constraint sum mu_i (1 - spare_i(nu)) = rho over them with
    the stationary spare fractions (Brent's method on a monotone scalar equation).
    The k-th cheapest server then has a positive load (nu_k > a_k) exactly when
    k <= k*, so k* is found by galloping from the size of ``used`` (the solver's set)
    and bisecting: one or two scalar solves when the guess is right, O(log n) at worst.

    Returns
    -------
    loads : (n,) array; spare : (n,) array, 1 - loads without cancellation;
    multiplier : float; solves : int, the number of scalar root findings
    """
    mu = np.asarray(service_rates, dtype=float)
    c = np.asarray(holding_costs, dtype=float)
    rho = float(work_rate)
    n = mu.size
    a = c / mu
    order = np.argsort(a, kind="stable")
    a_s, mu_s = a[order], mu[order]
    capacity = np.cumsum(mu_s)
    nu_of = {}

    def fits(k):  # does the k-th cheapest server carry work when the k cheapest are used?
        if k not in nu_of:
            nu_of[k] = None if capacity[k - 1] <= rho else _multiplier_on(mu_s[:k], a_s[:k], rho, dispatchers)
        return nu_of[k] is None or nu_of[k] > a_s[k - 1]

    guess = int(min(max(np.count_nonzero(used), 1), n))
    step = 1
    if fits(guess):  # fits(lo) holds; hi = n + 1 stands for "beyond the last server"
        lo, hi = guess, n + 1
        while lo + step <= n and fits(lo + step):
            lo, step = lo + step, 2 * step
        hi = min(lo + step, n + 1)
    else:  # lo = 0 stands for "before the first server" (fits(1) always holds)
        lo, hi = 0, guess
        while hi - step >= 1 and not fits(hi - step):
            hi, step = hi - step, 2 * step
        lo = max(hi - step, 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    nu = nu_of[lo]
    if nu is None:  # pragma: no cover (sum(mu) > rho makes nu_k exist at k*)
        raise ConvergenceError(f"no multiplier found: the {lo} cheapest servers cannot carry rho={rho:g}")
    spare = np.ones(n)
    spare[order[:lo]] = _spare_at(nu, a_s[:lo], dispatchers)
    return 1.0 - spare, spare, float(nu), len(nu_of)


def kkt_residuals(service_rates, holding_costs, work_rate, loads, multiplier, *, dispatchers=1,
                  spare=None):
    """KKT residuals of loads for F_K, relative to the multiplier nu.

    With the reduced cost g_i = c_i marginal(1/(1-rho_i)) / (mu_i nu) - 1 (zero on used
    servers, >= 0 on unused ones at the solution):

    * ``kkt_residual`` = max(|sum mu rho - rho| / rho, max_i |min(rho_i, g_i)|), the
      natural residual of the complementarity problem (zero iff KKT holds);
    * ``cost_spread`` = max - min of g over used servers (rho_i > 0): for the Wardrop
      equilibrium (K = inf) the relative spread of the cost per unit of work
      c_i/(mu_i(1-rho_i)) among used servers, i.e. the equilibrium gap;
    * ``unused_slack`` = min of g over unused servers (>= 0 when no unused server
      would be cheaper; ``inf`` when all are used);
    * ``equilibrium_gap`` = max(cost_spread, -unused_slack, 0).

    ``spare`` (1 - rho_i), when known more accurately than ``1 - loads`` (heavy
    traffic), is used for u.
    """
    mu = np.asarray(service_rates, dtype=float)
    c = np.asarray(holding_costs, dtype=float)
    rho_i = np.asarray(loads, dtype=float)
    nu = float(multiplier)
    spare = 1.0 - rho_i if spare is None else np.asarray(spare, dtype=float)
    g = c * _marginal(1.0 / spare, dispatchers) / (mu * nu) - 1.0
    used = rho_i > 0
    primal = abs(float(mu @ rho_i) - work_rate) / work_rate
    natural = float(np.max(np.abs(np.minimum(rho_i, g))))
    spread = float(np.ptp(g[used])) if used.any() else 0.0
    slack = float(g[~used].min()) if (~used).any() else math.inf
    return {
        "kkt_residual": max(primal, natural),
        "cost_spread": spread,
        "unused_slack": slack,
        "equilibrium_gap": max(spread, -slack, 0.0),
    }


# -- the convex programs ---------------------------------------------------------------


def solve_program(problem, *, solver="CLARABEL", solver_tol=1e-9, what="program"):
    """Solve a cvxpy problem, checked DCP, with errors that name the solver and the reason.

    ``solver_tol`` goes to the solver's own tolerances (``SOLVER_TOLERANCES``).
    Returns ``{"solver", "status", "dcp", "objective", "solver_iterations",
    "solve_seconds"}``; cvxpy's inaccuracy warning is replaced by the status, which
    the caller must check with its own residual when it is ``optimal_inaccurate``.

    Raises
    ------
    NotApplicableError
        The solver is not installed, or the problem is not DCP.
    ConvergenceError
        The solver failed, or returned a status other than optimal(_inaccurate).
    UnstableError
        The problem is infeasible (e.g. demands above the capacity).
    """
    import cvxpy as cp

    if solver not in cp.installed_solvers():
        raise NotApplicableError(
            f"solver must be one of the installed cvxpy solvers {', '.join(cp.installed_solvers())}; "
            f"got {solver!r}"
        )
    if not problem.is_dcp():
        raise NotApplicableError(f"the {what} is not DCP")
    options = {key: solver_tol for key in SOLVER_TOLERANCES.get(solver, ())}
    if solver == "SCS":
        options["max_iters"] = 200_000
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the status is reported instead
            problem.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        raise ConvergenceError(f"solver {solver} failed on the {what}: {exc}") from None
    status = problem.status
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise UnstableError(f"the {what} must be feasible; solver {solver} found it infeasible")
    if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ConvergenceError(f"solver {solver} returned status {status!r} on the {what}")
    stats = problem.solver_stats
    return {
        "solver": solver,
        "status": status,
        "dcp": True,
        "objective": float(problem.value),
        "solver_iterations": stats.num_iters,
        "solve_seconds": stats.solve_time,
    }


def _solve_program(mu, c, rho, w, dispatchers, solver, solver_tol):
    """Build and solve the cvxpy program; return the spare fractions 1 - rho_i, the
    multiplier(s) and the solver's report."""
    import cvxpy as cp

    # Variables: the spare fractions 1 - rho_i scaled by the total spare fraction f,
    # y_i = (1 - rho_i)/f, which keeps heavy traffic (f -> 0) well conditioned.
    n, m = mu.size, w.size
    f = (mu.sum() - rho) / mu.sum()
    if m == 1:
        y = cp.Variable(n)
        work = mu @ y == mu.sum()
        constraints = [work, y <= 1.0 / f]  # rho_i >= 0
    else:  # routing probabilities of each class
        routing = cp.Variable((m, n), nonneg=True)
        y = (1.0 - cp.multiply(1.0 / mu, w @ routing)) / f
        work = cp.sum(routing, axis=1) == 1
        constraints = [work]
    # f F_K(rho) = alpha sum c/y + beta sum -c log y + const, normalised to max(alpha, beta) = 1
    inv_k = 0.0 if math.isinf(dispatchers) else 1.0 / dispatchers
    alpha, beta = inv_k, f * (1.0 - inv_k)
    scale = max(alpha, beta)
    terms = []
    if alpha > 0:
        terms.append(cp.sum(cp.multiply(alpha / scale * c, cp.inv_pos(y))))
    if beta > 0:
        terms.append(cp.sum(cp.multiply(beta / scale * c, -cp.log(y))))
    problem = cp.Problem(cp.Minimize(sum(terms)), constraints)
    info = solve_program(problem, solver=solver, solver_tol=solver_tol,
                         what=f"{_regime_label(dispatchers)} routing program ({n} servers)")
    # Stationarity in y (cvxpy: grad objective + dual * grad constraint = 0) gives the
    # multiplier nu of sum mu rho = rho: nu = dual scale / f^2, or -dual_k scale / (f w_k)
    # per class.
    dual = np.atleast_1d(np.asarray(work.dual_value, dtype=float))
    class_nu = -dual * scale / (f * w) if m > 1 else dual * scale / f**2
    info["n_variables"] = n * m
    return f * np.asarray(y.value, dtype=float), class_nu, info


def convex_loads(
    service_rates,
    holding_costs,
    work_rate,
    *,
    dispatchers=1,
    class_work_rates=None,
    solver="CLARABEL",
    solver_tol=1e-9,
    polish=True,
    tol=1e-9,
    strict=False,
) -> Result:
    """Loads of the optimal (K=1), Wardrop (K=inf) or K-dispatcher routing by cvxpy.

    Parameters
    ----------
    service_rates, holding_costs : (n,) array_like, each > 0 (holding_costs None: all 1)
    work_rate : float, 0 < rho < sum(service_rates)
    dispatchers : 1, int >= 2 or math.inf
    class_work_rates : (m,) array_like, optional
        Work rate of each job class (summing to ``work_rate``); with m > 1 the program
        is posed over the class-by-server routing probabilities.
    solver : str
        An installed cvxpy solver supporting the exponential cone when K > 1
        (``CLARABEL``, ``SCS``, ``ECOS``).
    solver_tol : float
        Tolerance passed to the solver (see ``SOLVER_TOLERANCES``).
    polish : bool
        Polish the solver's answer on its used set (:func:`polish_loads`).
    tol : float
        The KKT residual the returned loads must meet.
    strict : bool
        Raise instead of warning when the residual exceeds ``tol``.

    Returns
    -------
    Result
        ``value``: the utilisations (list); ``residual``: the KKT residual of the
        returned loads; ``info``: solver, status, ``multiplier`` (nu, the marginal cost
        per unit of work, from the polished KKT system), ``multiplier_solver`` (minus
        the solver's dual of the work constraint; one per class with classes),
        ``kkt_residual_solver``, ``kkt_residual``, ``cost_spread``, ``unused_slack``,
        ``polish_shift`` (max change of a load), ``cost``, ``servers_used``.

    Raises
    ------
    ConvergenceError
        The solver failed or returned a status other than optimal (or
        optimal_inaccurate that polishing could not certify); with ``strict``, a
        residual above ``tol``.
    NotApplicableError
        The solver is not installed.

    Examples
    --------
    >>> r = convex_loads([1, 2], [1, 1], 1.5)
    >>> bool(np.allclose(r.value, [1 - 1.5 / (1 + 2**0.5), 1 - 1.5 / (2 + 2**0.5)], atol=1e-12))
    True
    """
    t0 = time.perf_counter()
    mu, c, rho, w = check_routing_problem(service_rates, holding_costs, work_rate, class_work_rates)
    loads, _, info = _convex(mu, c, rho, w, _check_dispatchers(dispatchers), solver=solver,
                             solver_tol=solver_tol, polish=polish, tol=tol, strict=strict)
    return Result(value=loads.tolist(), method="convex", residual=info["kkt_residual"],
                  seconds=time.perf_counter() - t0, info=info, nit=info["solver_iterations"])


def _convex(mu, c, rho, w, k, *, solver, solver_tol, polish, tol, strict):
    """Solve, polish and check one regime; return (loads, 1 - loads, info)."""
    raw_spare, class_nu, info = _solve_program(mu, c, rho, w, k, solver, solver_tol)
    raw_spare = np.clip(raw_spare, None, 1.0)
    raw = 1.0 - raw_spare
    nu_raw = float(np.mean(class_nu))
    info["multiplier_solver"] = class_nu.tolist() if class_nu.size > 1 else nu_raw
    info["kkt_residual_solver"] = kkt_residuals(mu, c, rho, raw, nu_raw, dispatchers=k,
                                                spare=raw_spare)["kkt_residual"]
    if polish:
        # Loads below sqrt(solver_tol) are within the solver's error of zero.
        loads, spare, nu, its = polish_loads(mu, c, rho, raw > math.sqrt(solver_tol), dispatchers=k)
        info.update(polished=True, scalar_solves=its,
                    polish_shift=float(np.max(np.abs(loads - raw))))
    else:
        loads, spare, nu = raw, raw_spare, nu_raw
        info["polished"] = False
    checks = kkt_residuals(mu, c, rho, loads, nu, dispatchers=k, spare=spare)
    info.update(checks, multiplier=nu, dispatchers=k if math.isfinite(k) else "inf",
                cost=float(np.sum(c * loads / spare)),
                servers_used=np.flatnonzero(loads > 0).tolist())
    residual = checks["kkt_residual"]
    if residual > tol:
        msg = (f"solver {solver} (status {info['status']}): KKT residual {residual:.2e} of the "
               f"{_regime_label(k)} loads exceeds tol {tol:g}")
        if strict or info["status"] != "optimal":
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=3)
    return loads, spare, info


@register_method(
    "convex",
    requires="routing_problem",
    doc="convex program in cvxpy (DCP; Clarabel), polished on the solver's used set and "
        "checked by its KKT residual; options solver, solver_tol, polish",
    options=("solver", "solver_tol", "polish"),
)
def solve_convex(model, measure, *, tol=1e-9, strict=False, solver="CLARABEL",
                 solver_tol=1e-9, polish=True, **_ignored) -> Result:
    """The ``convex`` method: loads of each regime ``measure`` needs, by :func:`convex_loads`.

    The model provides ``routing_problem()`` (arrays), ``routing_regimes(measure)``
    (the numbers of decision makers involved) and ``routing_measure(measure, loads,
    spare)``. ``info`` holds one entry per regime (``centralized``, ``decentralized``,
    ``atomic``) with the solver's report.
    """
    t0 = time.perf_counter()
    p = model.routing_problem()
    mu, c, rho, w = check_routing_problem(p["service_rates"], p["holding_costs"], p["work_rate"],
                                   p["class_work_rates"])
    loads, spare, info = {}, {}, {}
    for k in model.routing_regimes(measure):
        loads[k], spare[k], info[_regime_label(k)] = _convex(
            mu, c, rho, w, k, solver=solver, solver_tol=solver_tol, polish=polish, tol=tol,
            strict=strict)
    value = model.routing_measure(measure, loads, spare)
    residual = max(v["kkt_residual"] for v in info.values())
    return Result(value=value, method="convex", residual=residual, info=info,
                  seconds=time.perf_counter() - t0)


# -- atomic dispatchers with unequal traffic: best-response dynamics ---------------------


def atomic_equilibrium(service_rates, holding_costs, dispatcher_rates, *, tol=1e-12,
                       maxiter=10_000) -> Result:
    """Nash equilibrium of dispatchers with their own work rates (atomic routing game).

    Dispatcher j routes work rate r_j and minimises its holding cost
    J_j = sum_i c_i x_ji / (mu_i - x_i) (its mean number of jobs at PS server i,
    weighted), x_i = sum_j x_ji. Given the others, its best response is the centralized
    optimum on the residual capacities mu_i - (x_i - x_ji), computed by
    :func:`polish_loads`; dispatchers update in turn (Gauss-Seidel best responses,
    Orda, Rom & Shimkin 1993) until no flow moves by more than ``tol`` times the
    largest rate.

    Returns
    -------
    Result
        ``value``: the utilisations x_i/mu_i (list); ``info``: ``flows`` (dispatchers
        x servers work rates), ``dispatcher_costs``, ``cost`` (their sum, the global
        holding cost), ``nash_gap`` (the largest relative KKT residual of a
        dispatcher's problem), ``iterations``.

    Raises
    ------
    ConvergenceError
        After ``maxiter`` rounds without convergence.

    Notes
    -----
    With equal rates the equilibrium is the symmetric one, which minimises F_K
    (:func:`convex_loads` with ``dispatchers=K``); Ayesta, Brun & Prabhu (2011,
    Thm. 1) show that for a given total rate it is the worst case.
    """
    t0 = time.perf_counter()
    r = np.asarray(dispatcher_rates, dtype=float).ravel()
    if r.size == 0 or np.any(r <= 0) or not np.all(np.isfinite(r)):
        raise ModelError(f"dispatcher_rates must be a list of 1+ values, each > 0; got {r.tolist()}")
    total_capacity = float(np.sum(np.asarray(service_rates, dtype=float)))
    if r.sum() >= total_capacity:
        raise UnstableError(f"sum of dispatcher_rates must be < total service rate {total_capacity:g}; "
                            f"got {r.sum():g}")
    mu, c, rho, _ = check_routing_problem(service_rates, holding_costs, float(r.sum()))
    flows = np.zeros((r.size, mu.size))
    total = np.zeros(mu.size)
    for iteration in range(1, maxiter + 1):
        move = 0.0
        for j in range(r.size):
            others = total - flows[j]
            cap = mu - others
            share, _, _, _ = polish_loads(cap, c, r[j], flows[j] > 0 if iteration > 1 else np.ones(mu.size, bool))
            new = share * cap
            move = max(move, float(np.max(np.abs(new - flows[j]))))
            flows[j] = new
            total = others + new
        if move <= tol * r.max():
            break
    else:
        raise ConvergenceError(f"best-response dynamics did not converge in {maxiter} rounds "
                               f"(last move {move:.2e}, tol {tol:g})")
    spare = mu - total
    dispatcher_costs = (flows * (c / spare)).sum(axis=1)
    gap = 0.0
    for j in range(r.size):  # dispatcher j's KKT: c_i (spare_i + x_ji)/spare_i^2 equal where used
        cap = spare + flows[j]
        marginal = c * cap / spare**2
        used = flows[j] > 0
        nu = float(np.mean(marginal[used]))
        g = marginal / nu - 1.0
        gap = max(gap, float(np.max(np.abs(np.minimum(flows[j] / r[j], g)))),
                  abs(flows[j].sum() - r[j]) / r[j])
    return Result(value=(total / mu).tolist(), method="best-response", residual=gap, nit=iteration,
                  seconds=time.perf_counter() - t0,
                  info={"flows": flows.tolist(), "dispatcher_costs": dispatcher_costs.tolist(),
                        "cost": float(dispatcher_costs.sum()), "nash_gap": gap,
                        "iterations": iteration})
