"""The compensation approach for the symmetric join-the-shorter walk; the ``compensation`` method.

Adan, Wessels & Zijm, "Analysis of the symmetric shortest queue problem", Stochastic
Models 6(4), 1990. The walk (:class:`~exactq.representations.walk.QuarterPlaneWalk`):
arrivals of rate lambda = 2 rho mu add one to the smaller coordinate (ties 1/2-1/2),
each positive coordinate decreases by one at rate mu.

In the coordinates m = min(x, y), n = |x - y| (the law of the unordered pair), the
interior balance equations (m >= 1, n >= 2)

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

All sums over a part of the plane are sums of geometric series per term, so the cost
is O(number of terms), independent of the load: milliseconds even at rho = 0.99.

The ``compensation`` method is registered here: the ``single`` driver hands the
model's ``quarter_plane()`` walk to the walk solver whose declared structure fits it
(this one, the asymmetric series of :mod:`exactq.solvers.compensation_asym`, or the
Erlang-jump series of :mod:`exactq.solvers.compensation_sed`) and the model maps the
solution to its measures (``quarter_plane_measure``).

Examples
--------
>>> from exactq.representations import QuarterPlaneWalk
>>> sol = solve_symmetric_walk(QuarterPlaneWalk.join_shorter(1.8, (1.0, 1.0)))
>>> s = sol.sums()
>>> round(s.x + s.y, 8)   # MODELS.md: E[L] = 9.85484308 at rho = 0.9
9.85484308
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ModelError
from exactq.representations.walk import QuarterPlaneWalk, SymmetricWalkSolution

__all__ = ["SymmetricSeries", "symmetric_series", "solve_symmetric_walk", "series_tol"]

MAX_TERMS = 2000
_EPS = np.finfo(float).eps


def series_tol(tol: float) -> float:
    """The tolerance the series are built to: ``min(tol, 1e-15)`` (their cost barely depends on it).

    Examples
    --------
    >>> series_tol(1e-9), series_tol(1e-17)
    (1e-15, 1e-17)
    """
    return min(tol, 1e-15) if tol > 0 else 1e-15


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


def _sums(c, a, b, d, corner) -> dict:
    """Unnormalised sums of each part in (m, n), summed per term (every piece is positive per term).

    ``half``: m >= 1, n >= 1 (mass, sum of m, sum of n); ``edge``: m = 0, n >= 1 (mass,
    sum of n); ``diagonal``: n = 0, m >= 1 (mass, sum of m); ``origin``.
    """
    p00, p01, p10 = corner
    ga, gb = 1 / (1 - a), 1 / (1 - b)
    return {
        "half": (float(np.sum(c * a * b * ga * gb)), float(np.sum(c * a * b * ga**2 * gb)),
                 float(np.sum(c * a * b * ga * gb**2))),
        # n = 1 is the corner state p(0, 1); the series covers n >= 2
        "edge": (p01 + float(np.sum(c * b * b * gb)), p01 + float(np.sum(c * b * b * (2 - b) * gb**2))),
        # m = 1 is the corner state p(1, 0); the series covers m >= 2
        "diagonal": (p10 + float(np.sum(d * a * a * ga)), p10 + float(np.sum(d * a * a * (2 - a) * ga**2))),
        "origin": p00,
    }


def _total(sums: dict) -> float:
    return sums["half"][0] + sums["edge"][0] + sums["diagonal"][0] + sums["origin"]


@dataclass(frozen=True)
class SymmetricSeries(SymmetricWalkSolution):
    """The product-form series of the symmetric join-the-shorter walk (normalised).

    The series is used on the states with ``m + n >= 2`` (m = min(x, y), n = |x - y|);
    near the origin it converges slowly at light load (the coefficients grow almost as
    fast as the product forms shrink), so the three states ``(0, 0)``, ``(0, 1)`` and
    ``(1, 0)`` are obtained from their balance equations instead:

        p(1, 0) = (p(1, 1) + p(0, 2)) / (2 rho),
        p(0, 1) = (2 p(1, 0) + p(0, 2)) / (2 rho),   p(0, 0) = p(0, 1) / (2 rho).

    Attributes
    ----------
    rho : float
        Load per coordinate, ``lambda / (2 mu)``.
    coef, alpha, beta : ndarray
        Terms ``coef[i] * alpha[i]**m * beta[i]**n`` valid for ``n >= 1``, ``m + n >= 2``.
    coef0 : ndarray
        Coefficients of ``alpha[i]**m`` for ``n = 0, m >= 2``.
    corner : tuple of float
        ``(p(0, 0), p(0, 1), p(1, 0))`` in (m, n).
    n_terms : int
    tail : float
        Estimated absolute error of the normalised probabilities from the truncated
        series (a geometric tail with the observed ratio).
    ratio : float
        Observed ratio of successive contributions (< 1 inside the convergence region).

    Examples
    --------
    Every job is served at rate mu, so the mean number of busy coordinates is
    ``lambda / mu = 2 rho``:

    >>> s = symmetric_series(0.3)
    >>> idle = s.sums(("upper_edge", "lower_edge", "origin")).mass + s.sums(("origin",)).mass
    >>> round(2 - idle, 12)
    0.6
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

    # -- pointwise -----------------------------------------------------------------------
    def min_difference_probability(self, m, n) -> np.ndarray:
        """``P(min(X, Y) = m, |X - Y| = n)``, vectorised over integer arrays ``m``, ``n``.

        Examples
        --------
        The balance equation of the empty state, ``2 rho p(0, 0) = p(0, 1)``:

        >>> s = symmetric_series(0.4)
        >>> p00, p01 = s.min_difference_probability([0, 0], [0, 1])
        >>> bool(abs(2 * 0.4 * p00 - p01) < 1e-15)
        True
        """
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

    # -- sums ------------------------------------------------------------------------------
    @cached_property
    def _raw(self) -> dict:
        return _sums(self.coef, self.alpha, self.beta, self.coef0, self.corner)

    def _part_table(self) -> dict:
        raw = self._raw
        return self._mirrored(raw["half"], raw["edge"], raw["diagonal"], raw["origin"])

    # -- accuracy --------------------------------------------------------------------------
    @property
    def residual(self) -> float:
        """``|total mass - 1|`` of the normalised series, summed afresh."""
        return abs(_total(self._raw) - 1.0)

    @cached_property
    def cancellation(self) -> float:
        """``sum |c beta| / |sum c beta|``: how much the alternating series cancels."""
        return float(np.sum(np.abs(self.coef * self.beta)) / abs(np.sum(self.coef * self.beta)))

    def error(self, value, *, kind: str = "probability", rate: float = 1.0) -> float:
        """Error estimate of ``value``: ``tail A s + 100 eps s C`` with ``s = max(1, |value|)``.

        The tail error on probabilities propagates to means with the largest per-state
        weight of the dominant terms, ``A = 2 / (1 - alpha_0)^2 + 1 / (1 - beta_0)^2``;
        rounding is bounded through the cancellation factor ``C``. The same bound is
        used for every kind of quantity (``kind`` and ``rate`` do not change it).

        Examples
        --------
        >>> s = symmetric_series(0.5)
        >>> bool(0 < s.error(0.3) < 1e-13 and s.error(14.0) == 14 * s.error(0.3))
        True
        """
        self._checked_kind(kind)
        scale = max(1.0, float(np.max(np.abs(np.atleast_1d(value)))))
        amp = 2.0 / (1 - self.alpha[0]) ** 2 + 1.0 / (1 - self.beta[0]) ** 2
        return float(self.tail * amp * scale + 100 * _EPS * scale * self.cancellation)

    @property
    def diagonal_decay(self) -> float:
        """``alpha_0 = rho^2``."""
        return float(self.alpha[0])

    @property
    def info(self) -> dict:
        """The series' diagnostics."""
        return {
            "terms": self.n_terms,
            "tail_probability": self.tail,
            "contribution_ratio": self.ratio,
            "cancellation_factor": self.cancellation,
            "alpha0": float(self.alpha[0]),
            "beta0": float(self.beta[0]),
            "corner_states": "p(0,0), p(0,1), p(1,0) from balance equations",
            "construction": "symmetric series of Adan, Wessels & Zijm (1990): alternating vertical and "
                            "horizontal compensation from alpha0 = rho^2, beta0 = rho^2 / (2 + rho)",
        }


def symmetric_series(rho: float, *, tol: float = 1e-15, max_terms: int = MAX_TERMS,
                     requested_tol: float = 1e-9) -> SymmetricSeries:
    """Build the compensation series for the symmetric walk at load ``rho`` per coordinate.

    Parameters
    ----------
    rho : float
        ``lambda / (2 mu)``, in (0, 1).
    tol : float
        Stop adding terms when the estimated tail of the series (relative to the
        first term's contribution) is below ``tol``.
    max_terms : int
        Hard cap on the number of (alpha, beta) pairs.
    requested_tol : float
        The accuracy a caller asked for (recorded as the solution's ``tol``).

    Raises
    ------
    ModelError
        ``rho`` outside (0, 1).
    ConvergenceError
        The contributions stop decreasing (outside the convergence region).

    Examples
    --------
    >>> s = symmetric_series(0.9).sums()
    >>> round(s.x + s.y, 8)   # MODELS.md: E[L] at rho = 0.9
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
    corner = (p00, p01, p10)
    total = _total(_sums(coef, alpha, beta, coef0, corner))
    return SymmetricSeries(
        rho=rho,
        coef=coef / total,
        alpha=alpha,
        beta=beta,
        coef0=coef0 / total,
        corner=(p00 / total, p01 / total, p10 / total),
        n_terms=len(coef),
        tail=tail / total,
        ratio=ratio,
        tol=requested_tol,
    )


# ------------------------------------------------------------------------------- solver
def _symmetric_structure(walk: QuarterPlaneWalk) -> str | None:
    """``None`` for a symmetric join-the-shorter walk with unit jumps, else the reason."""
    return walk.join_shorter_refusal(jumps="unit", symmetric=True)


@register_solver(QuarterPlaneWalk, name="compensation-symmetric", priority=30, applies=_symmetric_structure,
                 doc="symmetric join-the-shorter walk: alternating product-form series (Adan, Wessels & Zijm 1990)",
                 options=("tol",))
def solve_symmetric_walk(walk: QuarterPlaneWalk, *, tol: float = 1e-9) -> SymmetricSeries:
    """Stationary law of a symmetric join-the-shorter walk with unit jumps.

    Parameters
    ----------
    walk : QuarterPlaneWalk
        Arrivals of rate lambda join the smaller coordinate (ties 1/2), both
        coordinates decrease at rate mu.
    tol : float
        The accuracy asked for; the series is built to :func:`series_tol` of it.

    Returns
    -------
    SymmetricSeries

    Raises
    ------
    NotApplicableError
        (Through the dispatch) a walk of another structure.
    ModelError
        ``lambda >= 2 mu`` (no stationary law).

    Examples
    --------
    >>> from exactq.representations import QuarterPlaneWalk
    >>> s = solve_symmetric_walk(QuarterPlaneWalk.join_shorter(1.0, (1.0, 1.0))).sums()
    >>> round(s.x + s.y, 8)   # MODELS.md: E[L] at rho = 0.5
    1.42632075
    """
    s = walk.join_shorter_rates()
    rho = s.arrival_rate / s.service_rates[0] / 2
    return symmetric_series(rho, tol=series_tol(tol), requested_tol=tol)
