"""Bounds from comparison systems: the :class:`~exactq.representations.Bracket` solver and the ``bounds`` method.

A :class:`~exactq.representations.bracket.Bracket` holds the comparison systems a
model is ordered against (for the symmetric shortest queue: the threshold-jockeying
and threshold-blocking QBDs of van Houtum, Zijm, Adan & Wessels 1998). Solving it
means solving each system with the solver registered for that system's type, with the
same options (a QBD's ``algorithm``, ``strict``); nothing here depends on what the
systems are.

The ``bounds`` method (declared in :mod:`exactq.method_table`) is the ``bracket``
driver of :mod:`exactq.methods` over the model's ``threshold_bracket(measure,
threshold)``: with the model's ``threshold`` fixed, one bracket; otherwise the threshold starts where the model says
(``threshold=None``) and grows by a quarter (at least 1) until the bounds, intersected
over every threshold tried, are within ``tol`` relative, or their width stops
shrinking (the rounding margin), or the threshold reaches ``max_parameter``.
``verify`` re-solves the last bracket's systems by cyclic reduction.

Examples
--------
A bracket of one M/M/1 QBD (arrival rate 1/2, service rate 1: E[N] = 1):

>>> from exactq.representations import QBD, Bracket
>>> sol = solve_bracket(Bracket({"single": QBD([[0.5]], [[-1.5]], [[1.0]])}, parameter=1))
>>> round(sol["single"].mean_level(), 12), sol.nit >= 1
(1.0, True)
"""

from __future__ import annotations

import time

from exactq.catalogue import register_solver, solve_representation
from exactq.method_table import BOUNDS_MAX_THRESHOLD
from exactq.representations.bracket import Bracket, BracketSolution

__all__ = ["solve_bracket", "MAX_PARAMETER"]

#: the largest comparison parameter the bounds method grows to (declared with the method, exactq.method_table)
MAX_PARAMETER = BOUNDS_MAX_THRESHOLD


@register_solver(Bracket, name="comparison-systems", priority=100,
                 doc="solve each comparison system with the solver registered for its type",
                 options=("algorithm", "tol", "maxiter", "strict"))
def solve_bracket(bracket: Bracket, **options) -> BracketSolution:
    """Solve every comparison system of ``bracket``, each by its own registered solver.

    Parameters
    ----------
    bracket : Bracket
    **options
        Passed to every system's solver (e.g. ``algorithm="cyclic_reduction"`` and
        ``strict`` for QBDs).

    Returns
    -------
    BracketSolution
        The solutions by system name, their largest residual and their iterations.

    Raises
    ------
    NotApplicableError
        No solver applies to one of the systems.

    Examples
    --------
    Two M/M/1 queues at loads 1/4 and 1/2 bracket every load in between (E[N] = r / (1 - r)):

    >>> from exactq.representations import QBD
    >>> birth_death = lambda lam: QBD([[lam]], [[-(lam + 1.0)]], [[1.0]])
    >>> sol = solve_bracket(Bracket({"low": birth_death(0.25), "high": birth_death(0.5)}, parameter=0))
    >>> round(sol["low"].mean_level(), 12), round(sol["high"].mean_level(), 12)
    (0.333333333333, 1.0)
    """
    t0 = time.perf_counter()
    solutions = {name: solve_representation(rep, **options) for name, rep in bracket.systems.items()}
    return BracketSolution(solutions, bracket.parameter, seconds=time.perf_counter() - t0)
