"""GI/M/1: the root ``sigma = A~(mu (1 - sigma))`` of a renewal input to one exponential server.

The representation is :class:`~exactq.representations.qbd.RenewalQueue` (the
interarrival transform ``A~``, its mean and the service rate); :func:`solve_renewal_queue`
returns a :class:`~exactq.representations.qbd.RenewalQueueSolution`. The embedded
chain at arrival epochs is of GI/M/1 type with scalar blocks, so its rate "matrix" is
the number ``sigma``: the queue an arrival finds is geometric, ``(1 - sigma) sigma^n``
(Kleinrock 1975, vol. 1, sec. 6.4, eq. 6.24; Neuts 1981, ch. 1).

``f(s) = A~(mu (1 - s)) - s`` is convex on [0, 1] with ``f(0) = A~(mu) > 0`` and
``f(1) = 0``; ``f'(1) = mu E[A] - 1 > 0`` iff the load is below one, and then ``f`` has
exactly one other root, in (0, 1). It is bracketed by ``[0, 1 - 2^-k]`` with the
first ``k`` that makes ``f`` negative and found by Brent's method
(``scipy.optimize.brentq``) to ``xtol = 4 eps``.

The ``closed-form`` method for models that describe themselves as a renewal queue
(``renewal_queue()``, mapped by ``renewal_queue_measure``) is registered here.

References
----------
L. Kleinrock, *Queueing Systems*, vol. 1, Wiley 1975, sec. 6.4 (the queue G/M/1).
M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*, 1981, ch. 1.
R. P. Brent, *Algorithms for Minimization without Derivatives*, 1973, ch. 4.

Examples
--------
Poisson input is M/M/1, ``sigma = rho``:

>>> from exactq.representations.qbd import RenewalQueue
>>> sol = solve_renewal_queue(RenewalQueue.erlang(1, 0.6, 1.0))
>>> bool(abs(sol.sigma - 0.6) < 1e-15)
True

Erlang-2 input of rate 2 per phase (one arrival per unit time on average) to a server of
rate 2: ``sigma = (2 / (2 + 2 (1 - sigma)))^2`` has the root ``(3 - sqrt(5)) / 2``:

>>> sol = solve_renewal_queue(RenewalQueue.erlang(2, 2.0, 2.0))
>>> bool(abs(sol.sigma - (3 - 5 ** 0.5) / 2) < 1e-15)
True
"""

from __future__ import annotations

import time

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, UnstableError
from exactq.representations.qbd import RenewalQueue, RenewalQueueSolution

__all__ = ["solve_renewal_queue"]

_EPS = np.finfo(float).eps


@register_solver(RenewalQueue, name="gi-m-1-root", priority=100,
                 doc="GI/M/1: the root sigma = A~(mu (1 - sigma)) in (0, 1) by Brent's method",
                 options=("strict",))
def solve_renewal_queue(queue: RenewalQueue, *, strict: bool = False) -> RenewalQueueSolution:
    """The root ``sigma`` in (0, 1) of ``sigma = A~(mu (1 - sigma))`` (module docstring).

    Parameters
    ----------
    queue : RenewalQueue
    strict : bool
        Raise :class:`ConvergenceError` when the residual ``|f(sigma)|`` exceeds
        ``1e-12`` (it never should for a smooth ``A~``).

    Returns
    -------
    RenewalQueueSolution

    Raises
    ------
    UnstableError
        The load ``1 / (mu E[A])`` is >= 1 (no root in (0, 1)).

    Examples
    --------
    Deterministic arrivals every unit of time to a server of rate 2 (D/M/1):
    ``sigma = exp(-2 (1 - sigma))``.

    >>> import math
    >>> sol = solve_renewal_queue(RenewalQueue(lambda s: math.exp(-s), 1.0, 2.0))
    >>> bool(abs(sol.sigma - math.exp(-2 * (1 - sol.sigma))) < 1e-15 and 0 < sol.sigma < 1)
    True
    """
    t0 = time.perf_counter()
    rho = queue.load
    if rho >= 1.0 - 1e-14:
        raise UnstableError(
            f"the GI/M/1 queue is unstable: load 1 / (mu E[A]) = {rho:.12g} must be < 1 "
            f"(mu = {queue.service_rate:g}, E[A] = {queue.mean_interarrival:g})"
        )
    mu, lst = queue.service_rate, queue.interarrival_lst
    calls = {"n": 0}

    def f(s: float) -> float:
        calls["n"] += 1
        return float(lst(mu * (1.0 - s))) - s

    if f(0.0) <= 0.0:  # A~(mu) = 0: arrivals never find anybody (an atom-free infinite gap)
        sigma = 0.0
    else:
        b, k = 0.5, 1
        while f(b) >= 0.0 and k < 60:
            k += 1
            b = 1.0 - 2.0 ** (-k)
        if f(b) >= 0.0:
            raise ConvergenceError(f"GI/M/1 root: no sign change of A~(mu (1 - s)) - s below s = {b!r} at load "
                                   f"{rho:.12g}; the load is too close to 1 for double precision")
        from scipy.optimize import brentq  # here: scipy.optimize takes 0.3 s to import

        sigma = brentq(f, 0.0, b, xtol=4 * _EPS, rtol=4 * _EPS, maxiter=200)
    residual = abs(f(sigma))
    if strict and residual > 1e-12:
        raise ConvergenceError(f"GI/M/1 root: residual |A~(mu (1 - sigma)) - sigma| = {residual:.3e} > 1e-12")
    return RenewalQueueSolution(sigma=float(sigma), load=rho, service_rate=mu, residual=residual, nit=calls["n"],
                                method="brentq", seconds=time.perf_counter() - t0,
                                info={"sigma": float(sigma), "interarrival": queue.description,
                                      "root_residual": residual})
