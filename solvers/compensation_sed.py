"""Compensation approach for shortest-expected-delay routing to two identical Erlang servers.

Adan & Wessels, "Shortest expected delay routing for Erlang servers", Queueing Systems
23 (1996) 77-105. Two identical servers, Erlang-r service of mean 1/mu (r phases of
rate r mu), Poisson arrivals of rate 2 rho mu; the state is the number of remaining
phases (p1, p2); an arrival adds r phases to the queue with fewer remaining phases
(ties 1/2-1/2). In the coordinates m = min(p1, p2), n = |p1 - p2| the interior balance
equations (m >= r, n >= r + 1)

    (2 rho + 2 r) p(m, n) = r p(m+1, n-1) + r p(m, n+1) + 2 rho p(m-r, n+r)

admit product forms alpha^m beta^n on the kernel curve

    K(alpha, beta) = 2 rho beta^(r+1) + r alpha^(r+1) + r alpha^r beta^2 - (2 rho + 2 r) alpha^r beta = 0.

What is implemented (status: PARTIAL)
------------------------------------
* ``phases == 1``: SED with identical exponential servers is the symmetric JSQ, and the
  walk is solved by the exact compensation series of
  :func:`exactq.solvers.compensation.symmetric_jsq` (Adan, Wessels & Zijm 1990): the
  value is exact up to the reported tail error.
* ``phases >= 2``: the paper's construction has NOT been reproduced here, and the solver
  raises :class:`~exactq.errors.NotApplicableError` (use ``--method ctmc``). What was
  established numerically (see :func:`sed_decay_rates`): the dominant product form
  ``alpha0^m beta0^n`` is the point of the kernel curve (beta the root of smallest modulus
  for the given alpha) at which the r + 1 homogeneous equations of the layered boundary
  (n = 0 .. r, layer states ``alpha^m u_n`` for n < r) have a nontrivial solution; the
  largest such alpha in (0, 1) is alpha0. For r = 2, rho = 0.5 this gives alpha0 =
  0.41009705, beta0 = 0.18535423, which the truncated CTMC reproduces as the ratios
  p(m+1, n)/p(m, n) and p(m, n+1)/p(m, n). A naive compensation started there
  (vertical boundary m = 0 .. r-1: all r other alpha-roots with the same beta;
  layered horizontal boundary: the layer vector plus the other beta-root of smallest
  modulus) produces r^k terms whose sizes fall only by about 0.36 per cycle (r = 2,
  rho = 0.5), and -- even combined with the second start point and free corner states
  m, n < r -- it does not satisfy the balance equations near the origin (the smallest
  singular value of the corner system stays O(0.2)). The missing ingredient (the paper's
  treatment of the layered corner and its starting solution from SED with instantaneous
  jockeying) is left open.
"""

from __future__ import annotations

import time

import numpy as np

from exactq.errors import ModelError, NotApplicableError
from exactq.result import Result
from exactq.solvers.compensation import register_walk, symmetric_jsq

__all__ = ["SED_MEASURES", "kernel", "sed_decay_rates"]

#: measures of models/sed.py that this solver returns
SED_MEASURES = ("mean_number", "mean_waiting_time", "mean_response_time", "mean_queue_lengths", "p_wait",
                "prob_empty")


def kernel(rho: float, r: int, alpha, beta):
    """``K(alpha, beta)``; zero where ``alpha^m beta^n`` solves the interior equations."""
    return (2 * rho * beta ** (r + 1) + r * alpha ** (r + 1) + r * alpha**r * beta**2
            - (2 * rho + 2 * r) * alpha**r * beta)


def _beta_roots(rho: float, r: int, alpha: float) -> np.ndarray:
    """The r + 1 roots beta of ``K(alpha, beta) = 0`` for fixed alpha."""
    c = np.zeros(r + 2)
    c[0] = 2 * rho
    c[r - 1] += r * alpha**r
    c[r] += -(2 * rho + 2 * r) * alpha**r
    c[r + 1] += r * alpha ** (r + 1)
    return np.roots(c)


def _layer_matrix(rho: float, r: int, alpha: float, beta: complex) -> np.ndarray:
    """Equations n = 0..r (per alpha^m) for layers ``u_0..u_{r-1}`` and ``e beta^n`` (n >= r)."""
    A = np.zeros((r + 1, r + 1), dtype=complex)

    def P(n):
        row = np.zeros(r + 1, dtype=complex)
        if n < r:
            row[n] = 1.0
        else:
            row[r] = beta**n
        return row

    for n in range(r + 1):
        row = (2 * rho + 2 * r) * P(n)
        if n >= 1:
            row -= r * (2 if n == 1 else 1) * alpha * P(n - 1)  # shorter queue completes a phase
        row -= r * P(n + 1)  # longer queue completes a phase
        row -= 2 * rho * alpha ** (-r) * P(n + r)  # arrival from (m - r, n + r)
        if 1 <= n <= r - 1:
            row -= 2 * rho * alpha ** (n - r) * P(r - n)  # arrival from the layer (m - r + n, r - n)
        if n == r:
            row -= 2 * rho * P(0)  # arrival from (m, 0)
        A[n] = row
    return A


def sed_decay_rates(rho: float, r: int) -> tuple:
    """Dominant product form ``(alpha0, beta0)`` of SED for two identical Erlang-r servers.

    ``p(m, n) ~ C alpha0^m beta0^n`` as m grows (m = min phases, n = difference >= r).
    For r = 1 this is ``(rho^2, rho^2 / (2 + rho))`` of the symmetric JSQ.

    Raises
    ------
    ModelError
        ``rho`` outside (0, 1) or ``r < 1``.
    """
    if not 0 < rho < 1 or r < 1:
        raise ModelError(f"need 0 < rho < 1 and r >= 1; got rho={rho}, r={r}")

    def det(a):
        bs = _beta_roots(rho, r, a)
        b = bs[np.argmin(np.abs(bs))]
        return float(np.real(np.linalg.det(_layer_matrix(rho, r, a, b))))

    from scipy.optimize import brentq

    grid = np.linspace(1e-4, 1 - 1e-9, 2000)
    d = np.array([det(a) for a in grid])
    idx = np.nonzero(np.sign(d[:-1]) * np.sign(d[1:]) < 0)[0]
    if idx.size == 0:
        raise ModelError(f"no dominant product form found (rho={rho}, r={r})")
    i = idx[-1]
    a0 = brentq(det, grid[i], grid[i + 1], xtol=1e-15, rtol=4 * np.finfo(float).eps)
    bs = _beta_roots(rho, r, a0)
    b0 = bs[np.argmin(np.abs(bs))]
    return float(a0), float(np.real(b0))


@register_walk("erlang-sed")
def _solve(walk, measure, tol) -> Result:
    t0 = time.perf_counter()
    if measure not in SED_MEASURES:
        raise NotApplicableError(f"measure {measure!r} is not available from the compensation method")
    r = int(walk["phases"])
    if r != 1:
        raise NotApplicableError(
            f"compensation for SED is implemented only for phases=1 (exponential servers); got phases={r}; "
            "use --method ctmc")
    mu = float(walk["service_rate"])
    sol = symmetric_jsq(walk["rho"], tol=min(tol, 1e-15) if tol > 0 else 1e-15)
    values = sol.measures(mu)
    value = values[measure]
    scale = max(1.0, float(np.max(np.abs(np.atleast_1d(value)))))
    amp = 2.0 / (1 - sol.alpha[0]) ** 2 + 1.0 / (1 - sol.beta[0]) ** 2
    cancel = float(np.sum(np.abs(sol.coef * sol.beta)) / abs(np.sum(sol.coef * sol.beta)))
    err = sol.tail * amp * scale + 100 * np.finfo(float).eps * scale * cancel
    return Result(
        value=value,
        method="compensation",
        error_estimate=err,
        n_states=None,
        nit=sol.n_terms,
        residual=abs(values["normalisation"] - 1.0),
        seconds=time.perf_counter() - t0,
        info={
            "terms": sol.n_terms,
            "tail_probability": sol.tail,
            "contribution_ratio": sol.ratio,
            "cancellation_factor": cancel,
            "alpha0": float(sol.alpha[0]),
            "beta0": float(sol.beta[0]),
            "phases": r,
            "construction": "phases=1: symmetric-JSQ compensation series (Adan, Wessels & Zijm 1990)",
        },
    )
