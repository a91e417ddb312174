"""Solvers of a :class:`~exactq.representations.routing.RoutingProblem`: closed form, convex program, best responses.

A routing problem (parallel processor-sharing servers of capacities mu_i and holding
costs c_i, work rate rho, K decision makers) has loads that minimise

    F_K(rho) = sum_i c_i [ (1/K) / (1 - rho_i) + (1 - 1/K) (-log(1 - rho_i)) ]
    subject to  sum_i mu_i rho_i = rho,  rho_i >= 0

(the representation's docstring). Three solvers, each returning a
:class:`~exactq.representations.routing.RoutingSolution`:

``water-filling`` (:func:`water_filling`)
    The closed form. Stationarity reads u^2/K + (1 - 1/K) u = nu / a_i on a used
    server, with u = 1/(1 - rho_i), a_i = c_i / mu_i and nu the multiplier of the
    work constraint; a server is used iff a_i < nu. For K = 1 and K = inf the used
    set and nu follow from a sort by a_i and prefix sums (Altman, Ayesta & Prabhu
    2011, Props. 1 and 3); for finite K, nu is the root of a monotone scalar
    equation (Brent's method).
``convex`` (:func:`convex_loads`)
    The same program in cvxpy (checked DCP; ``inv_pos`` is a second-order cone,
    ``log`` an exponential cone), solved by Clarabel by default. With several job
    classes it is posed over the per-class routing probabilities, which shows
    numerically that the optimum depends on the loads only. An interior-point
    solution is accurate only to about the square root of the solver's tolerance in
    the loads, so the answer is then *polished*: with the used set read from the
    solver's loads, the stationarity conditions are solved exactly for the
    multiplier, and the set is corrected until complementarity holds (as in OSQP's
    polishing; here the used set is always the k cheapest servers by c_i/mu_i, so the
    correction is a search over k started at the solver's k). The solution reports
    both the solver's and the polished KKT residuals and how far polishing moved the
    loads.
``best-response`` (:func:`best_response`)
    K atomic dispatchers with their own work rates: Gauss-Seidel best responses
    (Orda, Rom & Shimkin 1993), each the centralized optimum on the residual
    capacities.

The ``closed-form`` and ``convex`` methods of a model offering ``routing(measure,
context)`` run the first two through the ``model`` driver (the model combines the
regimes a measure needs, e.g. the optimum and the equilibrium for a price of
anarchy). cvxpy is imported inside the functions, so that importing exactq stays fast.

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
import warnings

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import AccuracyWarning, ConvergenceError, NotApplicableError, UnstableError
from exactq.representations.routing import RoutingProblem, RoutingSolution

__all__ = [
    "water_filling",
    "convex_loads",
    "best_response",
    "kkt_residuals",
    "spare_at_multiplier",
    "solve_program",
    "check_accuracy",
    "SOLVER_TOLERANCES",
]

#: how ``solver_tol`` is passed to the cvxpy solvers that take one
SOLVER_TOLERANCES = {
    "CLARABEL": ("tol_gap_abs", "tol_gap_rel", "tol_feas"),
    "SCS": ("eps_abs", "eps_rel"),
    "ECOS": ("abstol", "reltol", "feastol"),
}


def _symmetric(problem: RoutingProblem) -> str | None:
    if problem.symmetric:
        return None
    return "the dispatchers route unequal work rates (not a potential game); use best-response"


def _finite(problem: RoutingProblem) -> str | None:
    if math.isinf(problem.dispatchers):
        return "best responses need a finite number of dispatchers; got K = inf"
    return None


def _inv_k(dispatchers) -> float:
    return 0.0 if math.isinf(dispatchers) else 1.0 / dispatchers


# -- stationarity ---------------------------------------------------------------------------


def spare_at_multiplier(z, dispatchers):
    """Spare fraction 1 - rho_i of a used server as a function of z = nu / a_i.

    Stationarity of F_K reads u^2/K + (1 - 1/K) u = z with u = 1/(1 - rho_i), so
    1 - rho = ((1 - 1/K) + sqrt((1 - 1/K)^2 + 4z/K)) / (2z), written without
    cancellation: z^(-1/2) for K = 1 and 1/z for K = inf. A server is used iff z > 1.

    Examples
    --------
    >>> float(spare_at_multiplier(4.0, 1)), float(spare_at_multiplier(4.0, math.inf))
    (0.5, 0.25)
    """
    z = np.asarray(z, dtype=float)
    inv_k = _inv_k(dispatchers)
    return ((1.0 - inv_k) + np.sqrt((1.0 - inv_k) ** 2 + 4.0 * inv_k * z)) / (2.0 * z)


def _marginal(u, dispatchers):
    """d F_K / d rho_i divided by c_i, as a function of u = 1/(1 - rho_i)."""
    inv_k = _inv_k(dispatchers)
    return inv_k * u * u + (1.0 - inv_k) * u


def _multiplier(excess, lo, hi):
    """The root nu of the increasing ``excess`` with excess(lo) <= 0 (Brent's method, hi doubled)."""
    from scipy.optimize import brentq

    while excess(hi) <= 0.0:
        hi *= 2.0
    return brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


def _multiplier_on(mu, a, rho, dispatchers):
    """The nu with sum_i mu_i (1 - spare_i(nu)) = rho over the given (used) servers."""
    def excess(nu):
        return float(np.sum(mu * (1.0 - spare_at_multiplier(nu / a, dispatchers)))) - rho

    # every spare >= 1 at nu = min a, so excess(lo) <= -rho < 0
    return _multiplier(excess, float(a.min()), 2.0 * float(a.max()))


def _polish(mu, c, rho, used, dispatchers):
    """Exact stationary loads of F_K, starting from a guessed used set.

    At the solution a server is used iff its threshold a_i = c_i/mu_i is below the
    multiplier nu, so the used servers are the k* cheapest by a_i. For the k cheapest,
    let nu_k solve the work constraint sum mu_i (1 - spare_i(nu)) = rho over them with
    the stationary spare fractions (Brent's method on a monotone scalar equation).
    The k-th cheapest server then has a positive load (nu_k > a_k) exactly when
    k <= k*, so k* is found by galloping from the size of ``used`` (the solver's set)
    and bisecting: one or two scalar solves when the guess is right, O(log n) at worst.

    Returns loads (n,), spare (n,) (1 - loads without cancellation), the multiplier
    and the number of scalar root findings.
    """
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
    spare[order[:lo]] = spare_at_multiplier(nu / a_s[:lo], dispatchers)
    return 1.0 - spare, spare, float(nu), len(nu_of)


def kkt_residuals(problem: RoutingProblem, loads, multiplier, *, spare=None) -> dict:
    """KKT residuals of loads for F_K, relative to the multiplier nu.

    With the reduced cost g_i = c_i marginal(1/(1-rho_i)) / (mu_i nu) - 1 (zero on used
    servers, >= 0 on unused ones at the solution):

    * ``kkt_residual`` = max(|sum mu rho - rho| / rho, max_i |min(rho_i, g_i)|), the
      natural residual of the complementarity problem (zero iff KKT holds);
    * ``cost_spread`` = max - min of g over used servers (rho_i > 0): for the Wardrop
      equilibrium (K = inf) the relative spread of the cost per unit of work
      c_i/(mu_i(1-rho_i)) among used servers, i.e. the equilibrium gap;
    * ``unused_slack`` = min of g over unused servers, the reduced cost (dual
      slack) of rho_i >= 0 (>= 0 when no unused server would be cheaper; ``inf``
      when all are used);
    * ``equilibrium_gap`` = max(cost_spread, -unused_slack, 0).

    ``spare`` (1 - rho_i), when known more accurately than ``1 - loads`` (heavy
    traffic), is used for u.

    Examples
    --------
    The Wardrop loads of MODELS.md with nu = 1/t, t = spare / sum c = 3/4:

    >>> p = RoutingProblem([1, 2], [1, 1], 1.5, dispatchers=math.inf)
    >>> kkt_residuals(p, [0.25, 0.625], 4 / 3)["kkt_residual"] < 1e-15
    True
    """
    mu, c, rho = problem.service_rates, problem.holding_costs, problem.work_rate
    rho_i = np.asarray(loads, dtype=float)
    nu = float(multiplier)
    spare = 1.0 - rho_i if spare is None else np.asarray(spare, dtype=float)
    g = c * _marginal(1.0 / spare, problem.dispatchers) / (mu * nu) - 1.0
    used = rho_i > 0
    primal = abs(float(mu @ rho_i) - rho) / rho
    natural = float(np.max(np.abs(np.minimum(rho_i, g))))
    spread = float(np.ptp(g[used])) if used.any() else 0.0
    unused = float(g[~used].min()) if (~used).any() else math.inf
    return {
        "kkt_residual": max(primal, natural),
        "cost_spread": spread,
        "unused_slack": unused,
        "equilibrium_gap": max(spread, -unused, 0.0),
    }


def _dispatchers_label(k):
    return k if math.isfinite(k) else "inf"


# -- the closed form ---------------------------------------------------------------------------


@register_solver(RoutingProblem, name="water-filling", priority=30, applies=_symmetric,
                 doc="closed form: water-filling with activation thresholds (sort and prefix sums; a "
                     "Brent root for finite K)")
def water_filling(problem: RoutingProblem) -> RoutingSolution:
    """Closed-form loads of the optimal, selfish or atomic routing to PS servers.

    Parameters
    ----------
    problem : RoutingProblem
        With symmetric dispatchers (1: centralized optimum; ``math.inf``: Wardrop
        equilibrium of selfish jobs; K >= 2: Nash equilibrium of K dispatchers each
        routing rho/K).

    Returns
    -------
    RoutingSolution
        ``loads``, ``spare`` (1 - rho_i from the closed form, no cancellation),
        ``multiplier`` nu; ``info``: ``cost``, ``multiplier``, ``servers_used``,
        ``dispatchers``.

    Notes
    -----
    O(n log n), no loop over servers. For K = 1 and K = inf (Altman, Ayesta & Prabhu
    2011, Props. 1 and 3): sort by a_i = c_i/mu_i; with the multiplier at server k's
    threshold a_k the servers before it absorb work
    L_k = sum_{j<k} mu_j - sum_{j<k} w_j / r(a_k) (w = sqrt(c mu), r = sqrt for the
    optimum; w = c, r = identity for the equilibrium). L_k increases with k, so the
    used set is {k : L_k < rho}, found with prefix sums, and on it
    1 - rho_i = r(a_i) (sum_used mu - rho) / sum_used w. For finite K the multiplier
    solves sum_i mu_i (1 - s_i(nu))^+ = rho, a monotone scalar equation (Brent's
    method; Ayesta, Brun & Prabhu 2011, symmetric game).

    Examples
    --------
    Reference case of MODELS.md, optimum loads 1 - 1.5/(1 + sqrt 2), 1 - 1.5/(2 + sqrt 2)
    (0.378680, 0.560660) of cost 4 sqrt(2)/3 = 1.885618, and the equilibrium
    (0.25, 0.625) of cost 2:

    >>> s = water_filling(RoutingProblem([1, 2], [1, 1], 1.5))
    >>> bool(np.allclose(s.loads, [1 - 1.5 / (1 + 2**0.5), 1 - 1.5 / (2 + 2**0.5)]))
    True
    >>> bool(np.isclose(s.cost, 4 * 2**0.5 / 3))
    True
    >>> e = water_filling(RoutingProblem([1, 2], [1, 1], 1.5, dispatchers=math.inf))
    >>> bool(np.allclose(e.loads, [0.25, 0.625])), round(e.cost, 12)
    (True, 2.0)
    """
    mu, c, rho, k = problem.service_rates, problem.holding_costs, problem.work_rate, problem.dispatchers
    a = problem.thresholds
    if math.isinf(k) or k == 1:
        order = np.argsort(a, kind="stable")
        a_s, mu_s = a[order], mu[order]
        if k == 1:
            w, r = np.sqrt(c * mu)[order], np.sqrt(a_s)
        else:
            w, r = c[order], a_s
        before_mu = np.concatenate(([0.0], np.cumsum(mu_s)[:-1]))
        before_w = np.concatenate(([0.0], np.cumsum(w)[:-1]))
        absorbed = before_mu - before_w / r
        n_used = int(np.count_nonzero(absorbed < rho))
        t = (np.sum(mu_s[:n_used]) - rho) / np.sum(w[:n_used])
        spare = np.ones_like(mu)
        spare[order[:n_used]] = r[:n_used] * t
        nu = 1.0 / t**2 if k == 1 else 1.0 / t
    else:
        def excess(nu):
            s = spare_at_multiplier(nu / a, k)
            return float(np.sum(mu * np.maximum(1.0 - s, 0.0))) - rho

        lo = float(a.min())
        nu = _multiplier(excess, lo, lo)
        spare = np.minimum(spare_at_multiplier(nu / a, k), 1.0)
    loads = 1.0 - spare
    sol = RoutingSolution(problem, loads, spare, float(nu), "water-filling", closed_form=True)
    sol.info.update(cost=sol.cost, multiplier=float(nu), servers_used=sol.servers_used,
                    dispatchers=_dispatchers_label(k))
    return sol


# -- the convex programs ------------------------------------------------------------------------


def _capable_solvers() -> list:
    """Installed cvxpy conic solvers with second-order and exponential cones."""
    try:
        from cvxpy.reductions.solvers.defines import INSTALLED_CONIC_SOLVERS, SOLVER_MAP_CONIC

        return [s for s in INSTALLED_CONIC_SOLVERS
                if {"SOC", "ExpCone"} <= {c.__name__ for c in SOLVER_MAP_CONIC[s].SUPPORTED_CONSTRAINTS}]
    except (ImportError, AttributeError, KeyError):  # pragma: no cover (cvxpy internals moved)
        return ["CLARABEL", "SCS"]


def solve_program(problem, *, solver="CLARABEL", solver_tol=1e-9, what="program") -> dict:
    """Solve a cvxpy problem, checked DCP, with errors that name the solver and the reason.

    ``solver_tol`` goes to the solver's own tolerances (``SOLVER_TOLERANCES``).
    Returns ``{"solver", "status", "dcp", "objective", "solver_iterations",
    "solve_seconds"}``; cvxpy's inaccuracy warning is replaced by the status, which
    the caller must check with its own residual when it is ``optimal_inaccurate``.

    Raises
    ------
    NotApplicableError
        The solver is not installed, cannot handle the program's cones, or the
        problem is not DCP.
    ConvergenceError
        The solver failed, or returned a status other than optimal(_inaccurate).
    UnstableError
        The problem is infeasible (e.g. demands above the capacity).

    Examples
    --------
    >>> import cvxpy as cp
    >>> x = cp.Variable()
    >>> abs(solve_program(cp.Problem(cp.Minimize(cp.inv_pos(x) + x)))["objective"] - 2.0) < 1e-6
    True
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
        if "cannot solve this problem" in str(exc):
            raise NotApplicableError(
                f"solver {solver} cannot solve the {what}: it needs second-order and exponential cones "
                f"(installed solvers that have them: {', '.join(_capable_solvers())})") from None
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


def check_accuracy(info: dict, what: str, residual: float, tol: float, strict: bool) -> None:
    """Warn (``AccuracyWarning``) when ``residual > tol``; raise ``ConvergenceError`` instead with
    ``strict`` or when the solver's status (``info["status"]``) was not ``optimal``.

    Examples
    --------
    >>> check_accuracy({"solver": "CLARABEL", "status": "optimal"}, "gap 1e-12", 1e-12, 1e-9, True)
    """
    if residual <= tol:
        return
    msg = f"solver {info['solver']} (status {info['status']}): {what} exceeds tol {tol:g}"
    if strict or info["status"] != "optimal":
        raise ConvergenceError(msg)
    warnings.warn(msg, AccuracyWarning, stacklevel=4)


def _solve_cvxpy(problem: RoutingProblem, solver, solver_tol):
    """Build and solve the cvxpy program; return the spare fractions 1 - rho_i, the
    multiplier(s) and the solver's report."""
    import cvxpy as cp

    mu, c, rho, w = problem.service_rates, problem.holding_costs, problem.work_rate, problem.class_work_rates
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
    inv_k = _inv_k(problem.dispatchers)
    alpha, beta = inv_k, f * (1.0 - inv_k)
    scale = max(alpha, beta)
    terms = []
    if alpha > 0:
        terms.append(cp.sum(cp.multiply(alpha / scale * c, cp.inv_pos(y))))
    if beta > 0:
        terms.append(cp.sum(cp.multiply(beta / scale * c, -cp.log(y))))
    program = cp.Problem(cp.Minimize(sum(terms)), constraints)
    info = solve_program(program, solver=solver, solver_tol=solver_tol,
                         what=f"{problem.regime} routing program ({n} servers)")
    # Stationarity in y (cvxpy: grad objective + dual * grad constraint = 0) gives the
    # multiplier nu of sum mu rho = rho: nu = dual scale / f^2, or -dual_k scale / (f w_k)
    # per class.
    dual = np.atleast_1d(np.asarray(work.dual_value, dtype=float))
    class_nu = -dual * scale / (f * w) if m > 1 else dual * scale / f**2
    info["n_variables"] = n * m
    return f * np.asarray(y.value, dtype=float), class_nu, info


@register_solver(RoutingProblem, name="convex", priority=20, applies=_symmetric,
                 doc="convex program in cvxpy (DCP; Clarabel), polished on the solver's used set and checked by "
                     "its KKT residual",
                 options=("solver", "solver_tol", "polish", "tol", "strict"))
def convex_loads(problem: RoutingProblem, *, solver: str = "CLARABEL", solver_tol: float = 1e-9,
                 polish: bool = True, tol: float = 1e-9, strict: bool = False) -> RoutingSolution:
    """Loads of the optimal (K=1), Wardrop (K=inf) or K-dispatcher routing by cvxpy.

    Parameters
    ----------
    problem : RoutingProblem
        With symmetric dispatchers; with m > 1 ``class_work_rates`` the program is
        posed over the class-by-server routing probabilities.
    solver : str
        An installed cvxpy solver with second-order and exponential cones
        (``CLARABEL``, ``SCS``, ``ECOS``).
    solver_tol : float
        Tolerance passed to the solver (see ``SOLVER_TOLERANCES``).
    polish : bool
        Polish the solver's answer on its used set (module docstring).
    tol : float
        The KKT residual the returned loads must meet.
    strict : bool
        Raise instead of warning when the residual exceeds ``tol``.

    Returns
    -------
    RoutingSolution
        ``residual``: the KKT residual of the returned loads; ``nit``: the solver's
        iterations; ``info``: solver, status, ``multiplier`` (nu, the marginal cost
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
        The solver is not installed, or lacks the program's cones.

    Examples
    --------
    >>> s = convex_loads(RoutingProblem([1, 2], [1, 1], 1.5))
    >>> bool(np.allclose(s.loads, [1 - 1.5 / (1 + 2**0.5), 1 - 1.5 / (2 + 2**0.5)], atol=1e-12))
    True
    """
    mu, c, rho, k = problem.service_rates, problem.holding_costs, problem.work_rate, problem.dispatchers
    raw_spare, class_nu, info = _solve_cvxpy(problem, solver, solver_tol)
    raw_spare = np.clip(raw_spare, None, 1.0)
    raw = 1.0 - raw_spare
    nu_raw = float(np.mean(class_nu))
    info["multiplier_solver"] = class_nu.tolist() if class_nu.size > 1 else nu_raw
    info["kkt_residual_solver"] = kkt_residuals(problem, raw, nu_raw, spare=raw_spare)["kkt_residual"]
    if polish:
        # Loads below sqrt(solver_tol) are within the solver's error of zero.
        loads, spare, nu, its = _polish(mu, c, rho, raw > math.sqrt(solver_tol), k)
        info.update(polished=True, scalar_solves=its, polish_shift=float(np.max(np.abs(loads - raw))))
    else:
        loads, spare, nu = raw, raw_spare, nu_raw
        info["polished"] = False
    checks = kkt_residuals(problem, loads, nu, spare=spare)
    residual = checks["kkt_residual"]
    sol = RoutingSolution(problem, loads, spare, nu, "convex", residual=residual, nit=info["solver_iterations"],
                          info=info)
    info.update(checks, multiplier=nu, dispatchers=_dispatchers_label(k), cost=sol.cost,
                servers_used=sol.servers_used)
    check_accuracy(info, f"KKT residual {residual:.2e} of the {problem.regime} loads", residual, tol, strict)
    return sol


# -- atomic dispatchers with unequal traffic: best-response dynamics ---------------------------------


@register_solver(RoutingProblem, name="best-response", priority=10, applies=_finite,
                 doc="Nash equilibrium of K atomic dispatchers (own work rates) by Gauss-Seidel best responses",
                 options=("tol", "maxiter"))
def best_response(problem: RoutingProblem, *, tol: float = 1e-12, maxiter: int = 10_000) -> RoutingSolution:
    """Nash equilibrium of dispatchers with their own work rates (atomic routing game).

    Dispatcher j routes work rate r_j (``problem.dispatcher_rates``, or rho/K each)
    and minimises its holding cost J_j = sum_i c_i x_ji / (mu_i - x_i) (its mean
    number of jobs at PS server i, weighted), x_i = sum_j x_ji. Given the others, its
    best response is the centralized optimum on the residual capacities
    mu_i - (x_i - x_ji); dispatchers update in turn (Gauss-Seidel best responses,
    Orda, Rom & Shimkin 1993) until no flow moves by more than ``tol`` times the
    largest rate.

    Returns
    -------
    RoutingSolution
        ``loads`` x_i/mu_i, ``flows`` (dispatchers x servers work rates),
        ``multiplier`` None (each dispatcher has its own), ``residual`` the Nash gap
        (the largest relative KKT residual of a dispatcher's problem), ``nit`` the
        rounds; ``info``: ``flows``, ``dispatcher_costs``, ``cost`` (their sum, the
        global holding cost), ``nash_gap``, ``iterations``.

    Raises
    ------
    ConvergenceError
        After ``maxiter`` rounds without convergence.

    Notes
    -----
    With equal rates the equilibrium is the symmetric one, which minimises F_K
    (:func:`water_filling` and :func:`convex_loads` with K dispatchers); Ayesta, Brun &
    Prabhu (2011, Thm. 1) show that for a given total rate it is the worst case.

    Examples
    --------
    One dispatcher is the centralized optimum (MODELS.md: cost 4 sqrt(2)/3):

    >>> s = best_response(RoutingProblem([1, 2], [1, 1], dispatcher_rates=[1.5]))
    >>> bool(np.isclose(s.cost, 4 * 2**0.5 / 3, rtol=1e-12))
    True
    """
    mu, c, k = problem.service_rates, problem.holding_costs, problem.dispatchers
    r = problem.dispatcher_rates if problem.dispatcher_rates is not None else np.full(k, problem.work_rate / k)
    flows = np.zeros((r.size, mu.size))
    total = np.zeros(mu.size)
    for iteration in range(1, maxiter + 1):
        move = 0.0
        for j in range(r.size):
            others = total - flows[j]
            cap = mu - others
            share, _, _, _ = _polish(cap, c, r[j], flows[j] > 0 if iteration > 1 else np.ones(mu.size, bool), 1)
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
    info = {"flows": flows.tolist(), "dispatcher_costs": dispatcher_costs.tolist(),
            "cost": float(dispatcher_costs.sum()), "nash_gap": gap, "iterations": iteration}
    return RoutingSolution(problem, total / mu, spare / mu, None, "best-response", residual=gap, nit=iteration,
                           flows=flows, info=info)


# -- the methods: the model combines the regimes a measure needs ----------------------------------
