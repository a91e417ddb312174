"""Linear programs and roots: the solvers of the ``fluid`` (mean-field limit) method.

The fluid limit of a many-server dispatching model is handed over as plain
mathematics (:mod:`exactq.representations.routing`):

:class:`~exactq.representations.routing.LinearProgram`
    ``greedy-fill`` (:func:`greedy_fill`) for the declared one-row (knapsack)
    structure, in closed form; ``linprog`` (:func:`solve_linprog`), scipy's HiGHS,
    for any linear program (the independent check).
:class:`~exactq.representations.routing.RootProblem`
    ``brentq`` (:func:`solve_bracketed`) for a scalar equation on a sign-changing
    bracket; ``hybr`` (:func:`solve_system`), Powell's hybrid method of
    ``scipy.optimize.root``, for a system from a starting point.

The ``fluid`` method is run by the ``model`` driver: the model builds the program
or the equation of its dispatch rule, has it solved here, and maps the solution to
its measures (and, with ``verify``, re-solves it with the other solver).

References
----------
R. P. Brent, *Algorithms for Minimization without Derivatives*, Prentice-Hall, 1973,
ch. 4 (the bracketing root finder).
G. B. Dantzig, "Discrete-variable extremum problems", Operations Research 5 (1957)
266-288 (the greedy solution of the fractional knapsack).
Q. Huangfu, J. A. J. Hall, "Parallelizing the dual revised simplex method",
Mathematical Programming Computation 10 (2018) 119-142 (HiGHS).
"""

from __future__ import annotations

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ModelError
from exactq.representations.routing import LinearProgram, LinearProgramSolution, RootProblem, RootSolution

__all__ = ["greedy_fill", "solve_linprog", "solve_bracketed", "solve_system"]

_EPS = np.finfo(float).eps


def _knapsack(lp: LinearProgram) -> str | None:
    if lp.is_knapsack:
        return None
    return "the greedy fill needs one equality row with positive coefficients and costs, lower = 0, finite upper"


@register_solver(LinearProgram, name="greedy-fill", priority=20, applies=_knapsack,
                 doc="fractional knapsack in closed form: fill in decreasing order of coefficient per unit cost")
def greedy_fill(lp: LinearProgram) -> LinearProgramSolution:
    """Solve ``min c @ x  s.t.  a @ x = b, 0 <= x <= u`` (a, c > 0) by filling greedily.

    With the variables grouped by their coefficient per unit cost a_j / c_j, largest
    first, and C_g the capacity a @ u of the groups before g, group g is filled to
    the fraction clip((b - C_g) / (a @ u)_g, 0, 1) of its bounds (Dantzig 1957).
    Variables of one group are filled in proportion to their bounds: every optimum
    has the same objective, and this one treats them alike.

    Returns
    -------
    LinearProgramSolution
        ``error`` bounds the rounding error of each x_j (8 eps n max u).

    Raises
    ------
    ModelError
        b > a @ u or b < 0: the program is infeasible.

    Examples
    --------
    The speed-priority fluid program of MODELS.md, gamma = (.5, .5), mu = (2, 1),
    lambda = 1.2: x = (0.5, 0.2), and E[T] = sum x / lambda = 0.58333333.

    >>> s = greedy_fill(LinearProgram([1, 1], [[2.0, 1.0]], [1.2], [0.5, 0.5]))
    >>> bool(np.allclose(s.x, [0.5, 0.2]) and np.isclose(s.objective / 1.2, 0.58333333))
    True
    """
    a, b, u, c = lp.A_eq[0], float(lp.b_eq[0]), lp.upper, lp.cost
    capacity = float(a @ u)
    if not 0.0 <= b <= capacity:
        raise ModelError(f"b_eq must be in [0, sum(A_eq * upper)] = [0, {capacity:g}] for the program to be "
                         f"feasible; got {b:g}")
    _, group = np.unique(-(a / c), return_inverse=True)  # groups of equal a/c, the largest first
    cap_group = np.bincount(group, weights=a * u)
    before = np.concatenate([[0.0], np.cumsum(cap_group)[:-1]])
    share = np.clip((b - before) / cap_group, 0.0, 1.0)  # filled fraction of each group
    x = u * share[group]
    return LinearProgramSolution(x=x, objective=float(c @ x), residual=float(np.max(np.abs(lp.A_eq @ x - lp.b_eq))),
                                 method="greedy-fill", message="closed form",
                                 error=8 * _EPS * x.size * float(u.max()), closed_form=True)


@register_solver(LinearProgram, name="linprog", priority=10, doc="scipy.optimize.linprog (HiGHS), any linear program")
def solve_linprog(lp: LinearProgram) -> LinearProgramSolution:
    """Solve a linear program with ``scipy.optimize.linprog`` (HiGHS).

    With ties (several optima) the point differs from :func:`greedy_fill`'s; compare
    the objective then.

    Raises
    ------
    ModelError
        The program is infeasible or unbounded.
    ConvergenceError
        HiGHS stopped for another reason (iteration limit, numerical trouble).

    Examples
    --------
    >>> s = solve_linprog(LinearProgram([1, 1], [[2.0, 1.0]], [1.2], [0.5, 0.5]))
    >>> bool(np.allclose(s.x, [0.5, 0.2])), s.status
    (True, 0)
    """
    from scipy.optimize import linprog

    res = linprog(lp.cost, A_eq=lp.A_eq, b_eq=lp.b_eq, bounds=list(zip(lp.lower, lp.upper)), method="highs")
    if res.status in (2, 3):
        raise ModelError(f"the linear program must be feasible and bounded; linprog (HiGHS) says: {res.message}")
    if res.status != 0:
        raise ConvergenceError(f"linprog (HiGHS) returned status {res.status} on the linear program: {res.message}")
    x = np.asarray(res.x, dtype=float)
    return LinearProgramSolution(x=x, objective=float(lp.cost @ x), residual=float(np.max(np.abs(lp.A_eq @ x - lp.b_eq))),
                                 method="linprog", status=int(res.status), message=str(res.message))


def _bracket(problem: RootProblem) -> str | None:
    return None if problem.is_scalar else "needs a bracket (a scalar equation)"


def _start(problem: RootProblem) -> str | None:
    return None if not problem.is_scalar else "needs a starting point (a system of equations)"


@register_solver(RootProblem, name="brentq", priority=20, applies=_bracket,
                 doc="Brent's method on a sign-changing bracket")
def solve_bracketed(problem: RootProblem) -> RootSolution:
    """The root of a scalar equation in its bracket by Brent's method (``scipy.optimize.brentq``).

    Stops when the bracket is below ``2 (xtol + rtol |x|)``, which is the returned
    ``error`` bound on |x - x*|.

    Raises
    ------
    ModelError
        F(lo) and F(hi) have the same sign.
    ConvergenceError
        No convergence in ``maxiter`` iterations.

    Examples
    --------
    >>> s = solve_bracketed(RootProblem(lambda x: x * x - 2.0, bracket=(0.0, 2.0)))
    >>> bool(abs(s.x - 2**0.5) <= s.error), s.converged
    (True, True)
    """
    from scipy.optimize import brentq

    f, (lo, hi) = problem.function, problem.bracket
    f_lo, f_hi = f(lo), f(hi)
    if f_lo * f_hi > 0:
        raise ModelError(f"the bracket [{lo:g}, {hi:g}] must enclose a sign change; got F = {f_lo:g} and {f_hi:g}")
    x, r = brentq(f, lo, hi, xtol=problem.xtol, rtol=problem.rtol, maxiter=problem.maxiter, full_output=True,
                  disp=False)
    if not r.converged:
        raise ConvergenceError(f"brentq did not converge in {problem.maxiter} iterations ({r.flag})")
    return RootSolution(x=float(x), residual=abs(f(x)), method="brentq", converged=True, iterations=int(r.iterations),
                        error=2 * (problem.xtol + problem.rtol * abs(x)))


@register_solver(RootProblem, name="hybr", priority=10, applies=_start,
                 doc="Powell's hybrid method (scipy.optimize.root) from a start")
def solve_system(problem: RootProblem) -> RootSolution:
    """A root of a system of equations from ``problem.start`` (``scipy.optimize.root``, ``hybr``).

    ``xtol`` is the solver's relative tolerance between iterates; the solution
    reports ``converged`` as the solver does (no exception: the caller compares it
    with an independent answer) and the residual max |F(x)|.

    Examples
    --------
    >>> s = solve_system(RootProblem(lambda x: x**2 - np.array([2.0, 9.0]), start=[1.0, 1.0], xtol=1e-12))
    >>> bool(np.allclose(s.x, [2**0.5, 3.0])), s.converged
    (True, True)
    """
    from scipy.optimize import root

    sol = root(problem.function, problem.start, method="hybr", tol=problem.xtol)
    x = np.asarray(sol.x, dtype=float)
    return RootSolution(x=x, residual=float(np.max(np.abs(problem.function(x)))), method="hybr",
                        converged=bool(sol.success), iterations=int(sol.nfev))
