"""The compensation approach for the symmetric two-server shortest-queue problem.

Adan, Wessels & Zijm, "Analysis of the symmetric shortest queue problem", Stochastic
Models 6(4), 1990. Two exponential servers of rate mu, Poisson arrivals of rate
lambda = 2 rho mu joining the shorter queue (ties 1/2-1/2), no jockeying.

In the coordinates m = shorter queue, n = difference, the interior balance equations
(m >= 1, n >= 2)

    (2 rho + 2) p(m, n) = 2 rho p(m-1, n+1) + p(m+1, n-1) + p(m, n+1)

admit product forms alpha^m beta^n for (alpha, beta) on the curve

    (2 rho + 2) alpha beta = 2 rho beta^2 + alpha^2 + alpha beta^2.

The equilibrium distribution is the countable linear combination

    p(m, n) = sum_i [ c_i alpha_i^m beta_i^n + e_i alpha_{i+1}^m beta_i^n ],  n >= 1,
    p(m, 0) = sum_i [ d_i alpha_i^m + d'_i alpha_{i+1}^m ],                 m >= 1,
    p(0, 0) = p(0, 1) / (2 rho),

started from alpha_0 = rho^2, beta_0 = rho^2 / (2 + rho) (a product form that already
satisfies the horizontal boundary, n = 0 and n = 1). Each new term compensates the
error of the previous one on one boundary: keeping beta, the other root alpha' =
2 rho beta^2 / alpha of the curve compensates the vertical boundary (m = 0); keeping
alpha, the other root beta' = alpha^2 / ((2 rho + alpha) beta) compensates the
horizontal one. The coefficients follow from the boundary equations term by term
(:func:`_vertical_error`, :func:`_horizontal_error`). alpha_i and beta_i decrease
geometrically, faster than the coefficients grow, so every series below converges
absolutely; the number of terms is chosen from the observed ratio of successive
contributions, and the remaining tail (a geometric series with that ratio) is the
reported error estimate.

All measures are sums of geometric series per term, so the cost is O(number of
terms), independent of the load: milliseconds even at rho = 0.99.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.result import Result

__all__ = ["SymmetricJSQSolution", "symmetric_jsq"]

MAX_TERMS = 2000


def _h(rho, a, b):
    """d / c: the n = 0 coefficient that makes equation (m, 0), m >= 1, hold."""
    return b * (a + 2 * rho) / (a * (2 * rho + 2))


def _horizontal_error(rho, a, b):
    """Residual of the (m, 1) equation, m >= 1, of one term (per unit coefficient)."""
    d = _h(rho, a, b)
    return (2 * rho + 2) * b - 2 * rho * d - 2 * a * d - b * b - 2 * rho * b * b / a


def _vertical_error(rho, a, b):
    """Residual of the (0, n) equation, n >= 2, of one term (per unit coefficient and beta^n)."""
    return (2 * rho + 1) - a / b - b


@dataclass(frozen=True)
class SymmetricJSQSolution:
    """The product-form series of the symmetric JSQ and its measures.

    The series is used on the states with ``m + n >= 2``; near the origin it converges
    slowly at light load (the coefficients grow almost as fast as the product forms
    shrink), so the three states ``(0, 0)``, ``(0, 1)`` and ``(1, 0)`` are obtained from
    their balance equations instead:

        p(1, 0) = (p(1, 1) + p(0, 2)) / (2 rho),
        p(0, 1) = (2 p(1, 0) + p(0, 2)) / (2 rho),   p(0, 0) = p(0, 1) / (2 rho).

    Attributes
    ----------
    rho : float
        Load per server, ``lambda / (2 mu)``.
    coef, alpha, beta : ndarray
        Terms ``coef[i] * alpha[i]**m * beta[i]**n`` valid for ``n >= 1``, ``m + n >= 2``.
    coef0 : ndarray
        Coefficients of ``alpha[i]**m`` for ``n = 0, m >= 2``.
    corner : tuple of float
        ``(p(0, 0), p(0, 1), p(1, 0))``.
    n_terms : int
    tail : float
        Estimated absolute error of the normalised probabilities from the truncated
        series (a geometric tail with the observed ratio).
    ratio : float
        Observed ratio of successive contributions (< 1 inside the convergence region).
    """

    rho: float
    coef: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    coef0: np.ndarray
    corner: tuple
    n_terms: int
    tail: float
    ratio: float

    def probability(self, m, n) -> np.ndarray:
        """``P(shorter queue = m, difference = n)``, vectorised over arrays ``m``, ``n``."""
        m = np.asarray(m)
        n = np.asarray(n)
        mm, nn = m[..., None], n[..., None]
        inner = np.sum(self.coef * self.alpha**mm * self.beta ** np.maximum(nn, 1), axis=-1)
        edge = np.sum(self.coef0 * self.alpha**mm, axis=-1)
        out = np.where(n >= 1, inner, edge)
        p00, p01, p10 = self.corner
        out = np.where((m == 0) & (n == 0), p00, out)
        out = np.where((m == 0) & (n == 1), p01, out)
        return np.where((m == 1) & (n == 0), p10, out)

    def joint(self, q1, q2) -> np.ndarray:
        """``P(Q1 = q1, Q2 = q2)`` (queue lengths of the two servers)."""
        q1, q2 = np.asarray(q1), np.asarray(q2)
        m, n = np.minimum(q1, q2), np.abs(q1 - q2)
        p = self.probability(m, n)
        return np.where(n > 0, p / 2, p)

    def measures(self, service_rate: float = 1.0) -> dict:
        """Mean number, waiting and response times, P(wait), P(empty), ... (normalised)."""
        t = _region_sums(self.coef, self.alpha, self.beta, self.coef0)
        p00, p01, p10 = self.corner
        total = t["mass"] + p00 + p01 + p10
        mean_short = (t["m"] + p10) / total
        mean_diff = (t["n"] + p01) / total
        L = 2 * mean_short + mean_diff
        p_m0_busy = (t["m0"] + p01) / total  # shorter queue empty, longer busy
        p_empty = p00 / total
        lam = 2 * self.rho * service_rate
        p_m_pos = 1 - p_m0_busy - p_empty
        Lq = L - 2 * p_m_pos - p_m0_busy
        return {
            "mean_number": L,
            "mean_waiting_time": Lq / lam,
            "mean_response_time": L / lam,
            "mean_queue_lengths": [L / 2, L / 2],
            "p_wait": p_m_pos,
            "prob_empty": p_empty,
            "mean_shorter_queue": mean_short,
            "mean_difference": mean_diff,
            "normalisation": total,
        }


def _region_sums(c, a, b, d) -> dict:
    """Sums over ``m + n >= 2`` of every term, in cancellation-free forms."""
    ga, gb = 1 / (1 - a), 1 / (1 - b)
    return {
        # sum_{m>=0,n>=1} a^m b^n minus the (0,1) term
        "mass": float(np.sum(c * b * (a + b - a * b) * ga * gb) + np.sum(d * a * a * ga)),
        # sum m a^m b^n (the (0,1) term has m = 0); edge: sum_{m>=2} m a^m
        "m": float(np.sum(c * a * b * ga**2 * gb) + np.sum(d * a * a * (2 - a) * ga**2)),
        # sum n a^m b^n minus the (0,1) term: b [1 - (1-a)(1-b)^2] / ((1-a)(1-b)^2)
        "n": float(np.sum(c * b * (a + 2 * b - b * b - 2 * a * b + a * b * b) * ga * gb**2)),
        # m = 0, n >= 2
        "m0": float(np.sum(c * b * b * gb)),
    }


def symmetric_jsq(rho: float, *, tol: float = 1e-15, max_terms: int = MAX_TERMS) -> SymmetricJSQSolution:
    """Build the compensation series for the symmetric JSQ at load ``rho`` per server.

    Parameters
    ----------
    rho : float
        ``lambda / (2 mu)``, in (0, 1).
    tol : float
        Stop adding terms when the estimated tail of the series (relative to the
        first term's contribution) is below ``tol``.
    max_terms : int
        Hard cap on the number of (alpha, beta) pairs.

    Raises
    ------
    ModelError
        ``rho`` outside (0, 1).
    ConvergenceError
        The contributions stop decreasing (outside the convergence region).

    Examples
    --------
    >>> s = symmetric_jsq(0.9)
    >>> round(s.measures()["mean_number"], 8)
    9.85484308
    """
    if not 0 < rho < 1:
        raise ModelError(f"rho must be in (0, 1) for the compensation approach; got {rho}")
    coefs, alphas, betas = [], [], []
    a, b, c = rho * rho, rho * rho / (2 + rho), 1.0
    contrib = []
    ratio = 0.0
    tail = math.inf

    def weight(coef, al, be):  # contribution of one term to the states with m + n = 2
        return abs(coef) * (be * be + al * be + _h(rho, al, be) * al * al)

    for i in range(max_terms):
        coefs.append(c), alphas.append(a), betas.append(b)
        a_next = 2 * rho * b * b / a
        if a_next < 1e-250:  # the rest underflows: bound it by this term's weight
            tail = 4 * weight(c, a, b)
            break
        e = -c * _vertical_error(rho, a, b) / _vertical_error(rho, a_next, b)
        coefs.append(e), alphas.append(a_next), betas.append(b)
        contrib.append(weight(c, a, b) + weight(e, a_next, b))
        if i >= 2:
            ratio = max(contrib[-1] / contrib[-2], contrib[-2] / contrib[-3])
            if ratio >= 1:
                raise ConvergenceError(
                    f"compensation terms stopped decreasing at term {2 * i + 1} (ratio {ratio:.3f}, rho={rho})"
                )
            tail = contrib[-1] * ratio / (1 - ratio)
            if tail <= tol * contrib[0]:
                break
        b_next = a_next * a_next / ((2 * rho + a_next) * b)
        if not (0 < a_next < 1 and 0 < b_next < 1):
            raise ConvergenceError(f"compensation left the convergence region at term {2 * i + 1} (rho={rho})")
        c_next = -e * _horizontal_error(rho, a_next, b) / _horizontal_error(rho, a_next, b_next)
        a, b, c = a_next, b_next, c_next
    else:
        raise ConvergenceError(f"compensation did not converge in {max_terms} term pairs (rho={rho})")
    coef, alpha, beta = np.array(coefs), np.array(alphas), np.array(betas)
    coef0 = coef * _h(rho, alpha, beta)
    p02 = float(np.sum(coef * beta**2))
    p11 = float(np.sum(coef * alpha * beta))
    p10 = (p11 + p02) / (2 * rho)
    p01 = (2 * p10 + p02) / (2 * rho)
    p00 = p01 / (2 * rho)
    total = _region_sums(coef, alpha, beta, coef0)["mass"] + p00 + p01 + p10
    return SymmetricJSQSolution(
        rho=rho,
        coef=coef / total,
        alpha=alpha,
        beta=beta,
        coef0=coef0 / total,
        corner=(p00 / total, p01 / total, p10 / total),
        n_terms=len(coef),
        tail=tail / total,
        ratio=ratio,
    )


def queue_marginals(joint, alpha0: float, tol: float = 1e-12, max_level: int = 20000) -> tuple:
    """``P(Q1 = k)`` and ``P(Q2 = k)``, k = 0..k_max, from a pointwise joint law ``joint(i, j)``.

    The joint law is evaluated on the band ``|i - j| <= D`` of ``0 <= i, j <= k_max``
    (the difference decays geometrically and the shorter queue like ``alpha0^m``);
    ``k_max`` and ``D`` grow (x1.5) until the mass left out, ``1 - sum``, is below
    ``tol``. Returns ``(p1, p2, missing)`` with ``missing`` that mass (an upper bound on
    the absolute error of every entry, since the law is nonnegative).
    """
    k = int(math.ceil(math.log(tol * (1 - alpha0)) / math.log(alpha0))) + 5 if alpha0 > 0 else 5
    D = 20
    while True:
        i = np.arange(k + 1)
        d = np.arange(-D, D + 1)
        ii, jj = i[:, None] + np.zeros_like(d)[None, :], i[:, None] + d[None, :]
        ok = (jj >= 0) & (jj <= k)
        p = np.zeros(ii.shape)
        p[ok] = joint(ii[ok], jj[ok])
        p1 = p.sum(axis=1)
        p2 = np.bincount(jj[ok], weights=p[ok], minlength=k + 1)
        missing = 1.0 - float(p1.sum())
        if missing <= tol or k >= max_level:
            return p1, p2, max(missing, 0.0)
        k, D = int(1.5 * k) + 1, int(1.5 * D) + 1


#: walk kind -> solver(walk, measure, tol) -> Result; other modules add kinds with
#: :func:`register_walk` (asymmetric JSQ, Erlang SED).
WALK_SOLVERS: dict = {}


def register_walk(kind: str):
    """Register ``fn(walk, measure, tol) -> Result`` for ``quarter_plane()["kind"] == kind``."""

    def deco(fn):
        if kind in WALK_SOLVERS:
            raise ValueError(f"compensation walk {kind!r} registered twice")
        WALK_SOLVERS[kind] = fn
        return fn

    return deco


@register_method(
    "compensation",
    requires="quarter_plane",
    doc="compensation approach: the equilibrium law as a series of product forms",
)
def solve_compensation(model, measure, *, tol=1e-9, **_ignored) -> Result:
    """Compensation method for a model offering ``quarter_plane()``.

    ``quarter_plane()`` returns a mapping whose ``kind`` selects the solver registered
    with :func:`register_walk` (``"symmetric-jsq"`` here: ``rho`` and ``service_rate``).
    """
    walk = model.quarter_plane()
    fn = WALK_SOLVERS.get(walk.get("kind"))
    if fn is None:
        raise NotApplicableError(
            f"compensation is implemented for the walks {sorted(WALK_SOLVERS)}; got {walk.get('kind')!r}"
        )
    return fn(walk, measure, tol)


@register_walk("symmetric-jsq")
def _solve_symmetric(walk, measure, tol) -> Result:
    t0 = time.perf_counter()
    sol = symmetric_jsq(walk["rho"], tol=min(tol, 1e-15) if tol > 0 else 1e-15)
    if measure == "queue_length_distributions":
        p1, p2, missing = queue_marginals(sol.joint, float(sol.alpha[0]), tol=max(tol, 1e-14))
        return Result(value=[p1.tolist(), p2.tolist()], method="compensation",
                      error_estimate=missing + sol.tail, nit=sol.n_terms, seconds=time.perf_counter() - t0,
                      info={"terms": sol.n_terms, "levels": len(p1), "mass_beyond_levels": missing,
                            "tail_probability": sol.tail})
    if measure not in sol.measures(walk["service_rate"]):
        raise NotApplicableError(f"measure {measure!r} is not available from the compensation method")
    return symmetric_result(sol, walk["service_rate"], measure, t0)


def symmetric_result(sol: SymmetricJSQSolution, service_rate: float, measure: str, t0: float) -> Result:
    """The :class:`Result` of ``measure`` from a symmetric series, with its error estimate."""
    values = sol.measures(service_rate)
    value = values[measure]
    # the tail error on probabilities propagates to means with the largest per-state weight
    # of the dominant terms, 1 / (1 - alpha)^2 (beta) scale; use the first term's scale
    scale = max(1.0, float(np.max(np.abs(np.atleast_1d(value)))))
    amp = 2.0 / (1 - sol.alpha[0]) ** 2 + 1.0 / (1 - sol.beta[0]) ** 2
    # rounding: the alternating series cancels; bound its effect by the cancellation factor
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
            "prob_empty": values["prob_empty"],
            "corner_states": "p(0,0), p(0,1), p(1,0) from balance equations",
        },
    )
