"""Power-of-d dispatch: where an arrival goes, for finite n and in the mean-field limit.

Part of the ``power-of-d`` model (:mod:`exactq.models.power_of_d`, whose docstring
defines the model, the sampling and the two error models): the probability that an
arrival joins each group of equal queues of a sorted state (vectorised over states),
the position probabilities, the finite and mean-field stability limits, and the
mean-field dispatch tail.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from exactq.errors import NotApplicableError

__all__ = [
    "window_probability",
    "group_arrival_probabilities",
    "position_probabilities",
    "finite_stability_limit",
    "meanfield_stability_limit",
    "dispatch_tail",
]


# ============================================================================ routing
def window_probability(n: int, d: int, sampling: str, width):
    """Probability that all ``d`` sampled servers fall in a given set of ``width`` servers.

    ``C(width, d) / C(n, d)`` without replacement, ``(width / n)^d`` with
    replacement; vectorised over ``width`` (negative widths count as 0).

    Examples
    --------
    Two of four servers, both samples among them: ``C(2, 2) / C(4, 2) = 1/6``:

    >>> float(window_probability(4, 2, "without", 2)), float(window_probability(4, 2, "with", 2))
    (0.16666666666666666, 0.25)
    """
    width = np.maximum(np.asarray(width), 0)
    if sampling == "with":
        return (width / n) ** d
    table = _window_table(n, d)
    return table[np.minimum(width, n)]


@lru_cache(maxsize=64)
def _window_table(n: int, d: int) -> np.ndarray:
    total = math.comb(n, d)
    t = np.array([math.comb(m, d) / total for m in range(n + 1)])
    t.flags.writeable = False
    return t


def _groups(X: np.ndarray):
    """First and last position of each entry's tie group, and the group starts and ends, for sorted rows ``X``."""
    n = X.shape[1]
    pos = np.arange(n)
    start = np.ones(X.shape, dtype=bool)
    start[:, 1:] = X[:, 1:] != X[:, :-1]
    end = np.ones(X.shape, dtype=bool)
    end[:, :-1] = X[:, :-1] != X[:, 1:]
    first = np.maximum.accumulate(np.where(start, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    return first, last, start, end


def group_arrival_probabilities(X, n, d, sampling, error, eps, g):
    """Probability that an arrival joins each tie group, for sorted states ``X``.

    Parameters
    ----------
    X : (N, n) int array, rows sorted ascending
    n, d : int
    sampling : {"without", "with"}
    error : {"none", "independent", "dependent"}
    eps : float
    g : int

    Returns
    -------
    (N, n) float array
        Entry ``[r, b]`` is the probability that the arrival joins the tie group
        whose LAST position is ``b`` (zero where ``b`` is not the end of a group);
        rows sum to 1.

    Notes
    -----
    With ``W(m)`` = P(all samples within a given set of ``m`` positions)
    (:func:`window_probability`) and a group occupying positions ``[a, b]``:
    P(shortest sample in the group) = W(n - a) - W(n - 1 - b);
    P(longest sample in the group) = W(b + 1) - W(a). Dependent errors
    (Bhambay & Mukhopadhyay) restrict the error to samples with span <= g:
    P(shortest in group, span <= g) = W(u - a + 1) - W(u - b) with ``u`` the last
    position of value <= x_b + g, and symmetrically for the longest with ``w`` the
    first position of value >= x_b - g.

    Examples
    --------
    Two servers, d = 2 (JSQ): with queues ``(0, 1)`` the arrival joins the shorter one;
    with ``(1, 1)`` the tie group ``[0, 1]`` gets it all (recorded at its last
    position):

    >>> group_arrival_probabilities(np.array([[0, 1], [1, 1]]), 2, 2, "without", "none", 0.0, 0).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    X = np.asarray(X)
    first, _, _, end = _groups(X)
    if error != "dependent" or eps == 0.0 or g == 0 or d == 1:
        # position-based: group probability = difference of cumulative position probabilities
        err = "independent" if error == "independent" else "none"
        cum = np.concatenate([[0.0], np.cumsum(position_probabilities(n, d, sampling, err, eps))])
        return np.where(end, cum[1:][None, :] - cum[first], 0.0)
    b = np.broadcast_to(np.arange(n), X.shape)
    a = first
    W = lambda m: window_probability(n, d, sampling, m)  # noqa: E731
    p_min = W(n - a) - W(n - 1 - b)
    u = np.empty_like(X)
    w = np.empty_like(X)
    for j in range(n):  # n vectorised passes over all states
        col = X[:, j:j + 1]
        u[:, j] = (X <= col + g).sum(axis=1) - 1
        w[:, j] = (X < col - g).sum(axis=1)
    p_min_span = W(u - a + 1) - W(u - b)
    p_max_span = W(b - w + 1) - W(a - w)
    p = p_min + eps * (p_max_span - p_min_span)
    return np.where(end, p, 0.0)


def position_probabilities(n, d, sampling="without", error="none", eps=0.0):
    """Probability that an arrival joins ascending position ``i`` (ties by position).

    Defined for routing that depends on positions only (``error`` none or
    independent): ``(1 - eps) P(min sample at i) + eps P(max sample at i)``. Without
    replacement P(min at i) = ``C(n-1-i, d-1)/C(n, d)``.

    Examples
    --------
    Four servers, two samples: ``C(3, 1), C(2, 1), C(1, 1), 0`` over ``C(4, 2) = 6``:

    >>> (position_probabilities(4, 2) * 6).round(12).tolist()
    [3.0, 2.0, 1.0, 0.0]
    """
    if error == "dependent" and eps > 0 and d > 1:
        raise NotApplicableError("dependent errors depend on the queue lengths, not on positions only")
    i = np.arange(n)
    W = lambda m: window_probability(n, d, sampling, m)  # noqa: E731
    p = W(n - i) - W(n - 1 - i)
    if error == "independent" and eps > 0:
        p = (1.0 - eps) * p + eps * (W(i + 1) - W(i))
    return p


def finite_stability_limit(n, d, sampling="without", error="none", eps=0.0):
    """Largest per-server arrival rate for which the n-server system is stable.

    For position-based routing the fluid (top-k) condition: whenever the ``k``
    longest queues are much longer than the others they receive rate
    ``n lambda P_k``, with ``P_k`` the probability that the arrival joins one of the
    ``k`` top positions, and must drain: ``n lambda P_k < k`` for ``k = 1..n``
    (``k = n`` gives ``lambda < 1``). Without errors ``P_k <= k/n``, so the limit is 1.
    With dependent errors, long queues differ by more than ``g`` from short ones, so
    the error cannot favour them and the limit is 1 as well.

    Returns
    -------
    limit : float
    rule : str
        One line describing the binding constraint.

    Examples
    --------
    Two servers, d = 2, independent errors with eps = 0.75: the longer queue receives
    ``2 lambda eps`` and must drain at rate 1, so lambda < 1 / (2 eps) = 2/3:

    >>> lim, rule = finite_stability_limit(2, 2, error="independent", eps=0.75)
    >>> round(lim, 12), rule
    (0.666666666667, 'the 1 longest queue(s) must drain: 2 lambda P(join top 1) < 1')
    """
    if error != "independent" or eps == 0.0:
        return 1.0, "lambda < 1 (total service capacity)"
    p = position_probabilities(n, d, sampling, error, eps)
    tops = np.cumsum(p[::-1])  # P(join one of the k top positions), k = 1..n
    k = np.arange(1, n + 1)
    lim = k / (n * tops)
    j = int(np.argmin(lim))
    if lim[j] >= 1.0:
        return 1.0, "lambda < 1 (total service capacity)"
    return float(lim[j]), (f"the {j + 1} longest queue(s) must drain: "
                           f"{n} lambda P(join top {j + 1}) < {j + 1}")


def meanfield_stability_limit(d, error="none", eps=0.0):
    """Stability limit of the mean-field fixed point (n = infinity).

    Independent errors: the tail of the fixed point decays with ratio
    ``lambda eps d``, so lambda < 1/(eps d) when eps > 1/d (Bhambay & Mukhopadhyay);
    otherwise (and for dependent errors) lambda < 1.

    Examples
    --------
    >>> meanfield_stability_limit(2, "independent", 0.75)[0] == 1 / 1.5, meanfield_stability_limit(2)[0]
    (True, 1.0)
    """
    if error == "independent" and eps * d > 1.0:
        return 1.0 / (eps * d), f"lambda < 1/(eps d) = {1.0 / (eps * d):.6g} (independent errors, eps > 1/d)"
    return 1.0, "lambda < 1"


# ================================================================== mean-field dispatch
def dispatch_tail(s_full, d, error="none", eps=0.0, g=0, power=None):
    """``A_j``: probability that an arrival joins a queue with >= j jobs (mean field).

    Parameters
    ----------
    s_full : (..., K + 1 + g) array (real or complex)
        ``s_0 = 1, s_1, ..., s_K`` followed by ``g`` closure values beyond ``K``.
    d, error, eps, g : routing parameters
    power : callable, optional
        ``w -> P(all d samples fall in a set holding fraction w of the servers)``;
        default ``w**d`` (sampling with replacement, the limit). The refined method
        passes the 1/n correction of sampling without replacement through it.

    Returns
    -------
    (..., K + 1) array: ``A_0 = 1, A_1, ..., A_K``.

    Notes
    -----
    Sampled lengths are i.i.d. with P(>= j) = s_j. Shortest: P(min >= j) = s_j^d.
    Longest: P(max >= j) = 1 - (1 - s_j)^d. Dependent errors add
    ``eps P(min < j <= max, max - min <= g)`` to the shortest-queue term, which is a
    sum over the minimum m in [j - g, j - 1] of window probabilities
    ``psi(s_m - s_{m+g+1}) - psi(s_{m+1} - s_{m+g+1}) - psi(s_m - s_j) + psi(s_{m+1} - s_j)``.

    Examples
    --------
    Without errors ``A_j = s_j^d``; with independent errors and eps = 1/2, d = 2, the
    dispatch is random routing, ``A_j = s_j``:

    >>> s = np.array([1.0, 0.5, 0.25])
    >>> dispatch_tail(s, 2).tolist(), bool(np.allclose(dispatch_tail(s, 2, "independent", 0.5), s))
    ([1.0, 0.25, 0.0625], True)
    """
    psi = power if power is not None else (lambda w: w ** d)
    K = s_full.shape[-1] - 1 - (g if error == "dependent" else 0)
    s = s_full[..., :K + 1]
    A = psi(s)
    if error == "independent" and eps > 0:
        if power is None:  # 1 - (1 - s)^d without cancellation for small s
            with np.errstate(divide="ignore", invalid="ignore"):
                longest = -np.expm1(d * np.log1p(-s))
            longest = np.where(s == 1.0, 1.0, longest)
        else:
            longest = 1.0 - psi(1.0 - s)
        A = (1.0 - eps) * A + eps * longest
    elif error == "dependent" and eps > 0 and g > 0:
        extra = np.zeros_like(A)
        j = np.arange(K + 1)
        for off in range(1, g + 1):  # the minimum sits at m = j - off
            m = j - off
            ok = m >= 0
            mm = np.where(ok, m, 0)
            sm, sm1 = s_full[..., mm], s_full[..., mm + 1]
            top = s_full[..., mm + g + 1]
            sj = s_full[..., j]
            term = psi(sm - top) - psi(sm1 - top) - psi(sm - sj) + psi(sm1 - sj)
            extra = extra + np.where(ok, term, 0.0)
        A = A + eps * extra
    return A
