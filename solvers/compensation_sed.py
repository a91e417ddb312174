"""Compensation approach for the symmetric join-the-shorter walk with jumps r >= 2.

Adan & Wessels, "Shortest expected delay routing for Erlang servers", Queueing Systems
23 (1996) 77-105 (memorandum COSOR 93-38). The walk
(:class:`~exactq.representations.walk.QuarterPlaneWalk`): arrivals of rate
lambda = 2 rho mu add r to the smaller coordinate (ties 1/2-1/2), each positive
coordinate decreases by one at rate r mu. It is the number of remaining service phases
(p1, p2) of two identical Erlang-r servers of mean 1/mu under shortest-expected-delay
routing: an arrival adds r phases to the queue with fewer remaining phases. In
m = min(p1, p2), n = |p1 - p2| (rates in units of mu): from (m, n) an arrival goes to
(m + min(r, n), |n - r|); the shorter queue completes a phase at rate r, to
(m - 1, n + 1) (rate 2r to (m - 1, 1) when n = 0); the longer one at rate r, to
(m, n - 1). The interior equations
(m >= r, n >= r + 1)

    (lambda + 2r) p(m, n) = lambda p(m-r, n+r) + r p(m+1, n-1) + r p(m, n+1)

admit product forms alpha^m beta^n on the kernel curve

    K(alpha, beta) = lambda beta^(r+1) + r alpha^(r+1) + r alpha^r beta^2 - (lambda + 2r) alpha^r beta = 0;

for fixed beta there are r + 1 alphas, for fixed alpha r + 1 betas.

The series (phases r >= 2)
--------------------------
Every term is valid on all m >= 0 for n >= r. The differences n < r form r *layers*:
``p(m, n) = sum u_n alpha^m`` (one value u_n per alpha and layer). The equations split into

* the vertical boundary, columns m = 0..r-1 for n >= r + 1: no arrival inflow and, for
  m = 0, out-rate lambda + r. For a fixed beta these are r equations in m, so a term
  ``c alpha^m beta^n`` is compensated by the r *other* alpha-roots with the same beta
  (an r x r system): the series branches r-fold at every vertical step;
* the layered horizontal boundary, rows n = 0..r at m >= r (row n receives arrivals from
  the layer state (m - r + n, r - n)); per alpha these are r + 1 equations, and a term
  ``c alpha^m beta^n`` is compensated by the layers u_0..u_{r-1} and one new term
  ``c' alpha^m beta'^n``, beta' the beta-root of smallest modulus other than beta
  (an (r + 1) x (r + 1) system);
* the corner, the rows n = 0..r at m < r, where both boundaries meet.

Counting, the corner has r (r + 1) equations (one redundant) and r (r + 1) / 2 states
outside the representation (layer n at m < r - n); the r (r + 1) / 2 - 1 conditions left
and the normalisation need r (r + 1) / 2 independent *start solutions* (with fewer, e.g.
only the dominant one or two, the corner system is inconsistent): products
``alpha^m beta^n`` whose layered boundary holds with a single beta. They are exactly the r (r + 1) / 2 roots alpha in the unit disk of SED with
*instantaneous jockeying* (the difference stays in 0..r; matrix polynomial
:func:`_jockey_alphas`), each paired with the beta-root at which the (r + 1) x (r + 1)
layered system is singular (always the root of smallest modulus); the dominant one is
:func:`decay_rates`. Some are negative or complex (in conjugate pairs).

Each start solution grows a tree (branching r, depth d: r^d vertical and r^d horizontal
terms at depth d). Near the origin the tree converges slowly -- at m = 0, n = r the
contributions of a depth fall only by ~0.4-0.9 while their number grows r-fold -- but on
``m + n >= N`` every depth adds a factor ~ 1e-3 (N = 2r + 2, almost independent of
rho). So the states with ``m + n < N`` are unknowns, found with the r (r + 1) / 2 start
coefficients from the balance equations of every state that sees them (an overdetermined
system, consistent up to the series' truncation, solved by least squares; its relative
residual is reported), and the series is used on ``m + n >= N``. Branches whose estimated
subtree is below a tenth of the tolerance are pruned.

The sums over each part of the plane are per-term geometric sums over ``m + n >= N``
plus the finite corner (the model maps them to its measures: for SED, by PASTA the mean
wait is E[min(x, y)] / (r mu), an arrival joining the shorter queue behind its phases).

Unit jumps (r = 1) are the symmetric walk of :mod:`exactq.solvers.compensation`
(Adan, Wessels & Zijm 1990).

Validated against the matrix-geometric ``qbd`` method (exact in m): r = 2..5 at rho =
0.05..0.98 and r = 6, 7, 8, 10 at rho = 0.2, 0.9 agree to ~1e-13 relative (at rho >= 0.95
the qbd drifts by ~1e-12 with its width while this series is stable to ~1e-14 under changes
of N), state by state (~1e-15 absolute), by the balance equations on a grid across the seam m + n = N (~1e-13
relative) and by E[busy servers] = 2 rho (up to rho = 0.9999). The root choices (start
beta and horizontal beta' of smallest modulus, the start alphas from the jockeying
model) are the rules that reproduce the exact solution in all those cases; they are not
proven here. The tail estimate is the last depth's bound continued geometrically with
the observed ratio (~1e-3 per depth) plus the pruned branches; rounding is bounded by
100 eps x (sum of |terms|) / (1 - alpha0).

Cost (one core): ~3 ms for r = 2, ~10 ms for r = 3 (qbd at tol 1e-13: ~0.1 s at rho =
0.9), ~60 ms for r = 5, ~3 s for r = 10; jumps ``r > MAX_JUMP`` are refused.

Examples
--------
>>> from exactq.representations import QuarterPlaneWalk
>>> sol = solve_erlang_walk(QuarterPlaneWalk.join_shorter(1.0, (2.0, 2.0), jump=2))
>>> round(sol.mean_min() / 2, 8)   # MODELS.md: E[W] = E[min(p1, p2)] / r = 0.29938794 at rho = 0.5
0.29938794
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ModelError, NotApplicableError
from exactq.representations.walk import QuarterPlaneWalk, SymmetricWalkSolution

from .compensation import series_tol

__all__ = ["ErlangSeries", "erlang_series", "solve_erlang_walk", "kernel", "decay_rates", "MAX_JUMP"]

MAX_JUMP = 10  # start solutions r (r + 1) / 2 and branching r grow with r
MAX_TERMS = 400_000
_EPS = np.finfo(float).eps


def _roots_batch(coefs: np.ndarray) -> np.ndarray:
    """Roots of the polynomials in the rows of ``coefs`` (leading coefficient first)."""
    c = coefs / coefs[:, :1]
    t, d = c.shape[0], c.shape[1] - 1
    comp = np.zeros((t, d, d), complex)
    comp[:, 0, :] = -c[:, 1:]
    comp[:, np.arange(1, d), np.arange(d - 1)] = 1.0
    return np.linalg.eigvals(comp)


def _alpha_roots_batch(lam: float, r: int, b: np.ndarray) -> np.ndarray:
    """(T, r + 1): the roots alpha of ``K(alpha, b) = 0`` for each b."""
    c = np.zeros((b.size, r + 2), complex)
    c[:, 0] = r
    c[:, 1] = r * b * b - (lam + 2 * r) * b
    c[:, r + 1] = lam * b ** (r + 1)
    return _roots_batch(c)


def _beta_roots_batch(lam: float, r: int, a: np.ndarray) -> np.ndarray:
    """(T, r + 1): the roots beta of ``K(a, beta) = 0`` for each a."""
    c = np.zeros((a.size, r + 2), complex)
    c[:, 0] = lam
    c[:, r - 1] += r * a**r
    c[:, r] += -(lam + 2 * r) * a**r
    c[:, r + 1] += r * a ** (r + 1)
    return _roots_batch(c)


def _drop_nearest(roots: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each row of ``roots`` without the entry nearest to ``x`` (the root already in use)."""
    i = np.argmin(np.abs(roots - x[:, None]), axis=1)
    keep = np.ones(roots.shape, bool)
    keep[np.arange(len(x)), i] = False
    return roots[keep].reshape(roots.shape[0], roots.shape[1] - 1)


def _vertical_rows(lam: float, r: int, b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(T, r, k): equations (m, n), m = 0..r-1, n > r, per b^n, of the terms ``a[:, j]^m b^n``.

    (lam + r [m > 0] + r) p(m, n) = r p(m + 1, n - 1) + r p(m, n + 1): no arrival reaches
    these states (it would come from m - r < 0).
    """
    m = np.arange(r)[None, :, None]
    bb = b[:, None, None]
    aa = a[:, None, :]
    return (lam + r * (m > 0) + r - r * bb) * aa**m - (r / bb) * aa ** (m + 1)


def _horizontal_rows(lam: float, r: int, a: np.ndarray, bs: np.ndarray) -> np.ndarray:
    """(T, r + 1, r + k): equations n = 0..r at m >= r (per a^m, times a^r) of layers and terms.

    Columns: the layer values u_0..u_{r-1} (``p(m, n) = u_n a^m``, n < r) and the
    coefficients of ``a^m beta^n`` (n >= r) for the k betas in ``bs`` (T, k). Row n:

        (lam + 2r) g(n) = lam a^-r g(n + r) + lam a^(n-r) g(r - n) [n >= 1]
                          + r (2 if n == 1 else 1) a g(n - 1) [n >= 1] + r g(n + 1),

    multiplied by a^r (no negative powers of small alphas). Row n = r: g(r - n) = g(0) enters
    with a^0 (an arrival at (m, 0) lands on (m, r)).
    """
    t, k = bs.shape
    out = np.zeros((t, r + 1, r + k), complex)
    ar = a**r
    for n in range(r + 1):
        parts = [(n, (lam + 2 * r) * ar), (n + r, -lam + 0 * a), (n + 1, -r * ar)]
        if n >= 1:
            parts += [(r - n, -lam * a**n), (n - 1, -r * (2 if n == 1 else 1) * a * ar)]
        for idx, coef in parts:
            if idx < r:
                out[:, n, idx] += coef
            else:
                out[:, n, r:] += coef[:, None] * bs**idx
    return out


def _jockey_alphas(lam: float, r: int) -> np.ndarray:
    """The r (r + 1) / 2 alphas in the unit disk of SED with instantaneous jockeying.

    With jockeying (the last waiting job moves as soon as that shortens its expected
    delay) the difference stays in 0..r and ``p(m, n) = sum_k x_k alpha_k^m u_k(n)``; the
    alphas solve ``det J(alpha) = 0``, J the (r + 1) x (r + 1) matrix of the rows
    n = 0..r (as the no-jockeying rows, but row r - 1 receives 2r p(m, r) and row r
    nothing from n = r + 1). They are the start points of the compensation.
    """
    P = np.zeros((r + 2, r + 1, r + 1))  # a^r J(a) = sum_k P[k] a^k

    def add(row, col, power, val):
        P[power + r, row, col] += val

    for n in range(r + 1):
        add(n, n, 0, lam + 2 * r)
        if n == 0:
            add(0, r, -r, -lam)
            add(0, 1, 0, -r * (2 if r == 1 else 1))
            continue
        add(n, r - n, n - r, -lam)  # arrival from (m - r + n, r - n); n = r: from (m, 0)
        add(n, n - 1, 1, -r * (2 if n == 1 else 1))
        if n < r:
            add(n, n + 1, 0, -r * (2 if n == r - 1 else 1))
    d, s = r + 1, r + 1
    A = np.zeros((d * s, d * s))
    B = np.eye(d * s)
    for i in range(d - 1):
        A[i * s:(i + 1) * s, (i + 1) * s:(i + 2) * s] = np.eye(s)
    for k in range(d):
        A[(d - 1) * s:, k * s:(k + 1) * s] = -P[k]
    B[(d - 1) * s:, (d - 1) * s:] = P[d]
    import scipy.linalg  # here, not at import: the module loads with every JSQ solve

    ev = scipy.linalg.eigvals(A, B)
    ev = ev[np.isfinite(ev)]
    ev = np.delete(ev, np.argmin(np.abs(ev - 1)))  # det J(1) = 0: the jockeying chain's phase generator
    return ev[(np.abs(ev) < 1) & (np.abs(ev) > 1e-14)]


def _start_terms(lam: float, r: int):
    """Start points: alpha from the jockeying model, beta the root that makes the layered
    boundary (rows n = 0..r with one beta-term) singular, u its null vector (beta-coefficient 1)."""
    a = _jockey_alphas(lam, r)
    K = r * (r + 1) // 2
    if a.size != K:
        raise ConvergenceError(f"expected {K} start solutions in the unit disk, found {a.size} "
                               f"(rho={lam / 2:g}, phases={r})")
    bs = _beta_roots_batch(lam, r, a)  # (K, r + 1)
    H = _horizontal_rows(lam, r, np.repeat(a, r + 1), bs.reshape(-1, 1))
    sv = np.linalg.svd(H, compute_uv=False)
    sing = (sv[:, -1] / sv[:, 0]).reshape(K, r + 1)
    j = np.argmin(np.abs(bs), axis=1)  # the root of smallest modulus (the only one in every case tried)
    if np.max(sing[np.arange(K), j]) > 1e-8:
        raise ConvergenceError(f"a start solution does not satisfy the layered boundary "
                               f"(rho={lam / 2:g}, phases={r})")
    b = bs[np.arange(K), j]
    _, _, vh = np.linalg.svd(H.reshape(K, r + 1, r + 1, r + 1)[np.arange(K), j])
    v = vh[:, -1, :].conj()
    u = v[:, :r] / v[:, r:]
    return a, b, u


def _next_level(lam, r, a, b, c):
    """One compensation cycle for the product terms ``c a^m b^n`` (arrays of length T).

    Vertical: the r other alphas with the same beta, coefficients from the r equations
    of the columns m = 0..r-1. Horizontal: each of them gets the layers u_0..u_{r-1} and
    the beta-root of smallest modulus other than b, from the r + 1 layered rows.
    Returns (alpha, b, coef) of the vertical terms, (alpha, beta', coef') of the
    horizontal ones, the layers (T r, r) and the parent index of each.
    """
    others = _drop_nearest(_alpha_roots_batch(lam, r, b), a)  # (T, r)
    V = _vertical_rows(lam, r, b, others)
    rhs = -c[:, None] * _vertical_rows(lam, r, b, a[:, None])[:, :, 0]
    cv = np.linalg.solve(V, rhs[..., None])[..., 0]
    ak, bk, ck = others.ravel(), np.repeat(b, r), cv.ravel()
    bo = _drop_nearest(_beta_roots_batch(lam, r, ak), bk)
    bn = bo[np.arange(ak.size), np.argmin(np.abs(bo), axis=1)]
    H = _horizontal_rows(lam, r, ak, np.stack([bk, bn], axis=1))
    M = np.concatenate([H[:, :, :r], H[:, :, r + 1:]], axis=2)
    x = np.linalg.solve(M, (-ck[:, None] * H[:, :, r])[..., None])[..., 0]
    parent = np.repeat(np.arange(a.size), r)
    return (ak, bk, ck), (ak, bn, x[:, r]), x[:, :r], parent


def kernel(rho: float, r: int, alpha, beta):
    """``K(alpha, beta)``; zero where ``alpha^m beta^n`` solves the interior equations.

    Examples
    --------
    For r = 1 the dominant product form of the symmetric walk, ``(rho^2, rho^2 / (2 + rho))``,
    lies on the kernel:

    >>> rho = 0.6
    >>> bool(abs(kernel(rho, 1, rho**2, rho**2 / (2 + rho))) < 1e-15)
    True
    """
    return (2 * rho * beta ** (r + 1) + r * alpha ** (r + 1) + r * alpha**r * beta**2
            - (2 * rho + 2 * r) * alpha**r * beta)


def decay_rates(rho: float, r: int) -> tuple:
    """Dominant product form ``(alpha0, beta0)`` of the symmetric walk with jumps ``r``.

    ``p(m, n) ~ C alpha0^m beta0^n`` as m grows (m = min(x, y), n = |x - y| >= r): the
    start solution of largest alpha (the decay rate of SED with instantaneous jockeying).

    Raises
    ------
    ModelError
        ``rho`` outside (0, 1) or ``r < 1``.

    Examples
    --------
    For r = 1 this is ``(rho^2, rho^2 / (2 + rho))`` of the symmetric shortest queue:

    >>> a, b = decay_rates(0.6, 1)
    >>> bool(abs(a - 0.36) < 1e-12 and abs(b - 0.36 / 2.6) < 1e-12)
    True
    """
    if not 0 < rho < 1 or r < 1:
        raise ModelError(f"need 0 < rho < 1 and r >= 1; got rho={rho}, r={r}")
    a, b, _ = _start_terms(2.0 * rho, int(r))
    i = int(np.argmax(np.abs(a)))
    return float(a[i].real), float(b[i].real)


def _region_sums(a, b, N: int, r: int, absolute: bool = False):
    """Sums of ``a^m b^n`` (n >= r) over ``m + n >= N`` (N >= r), per term.

    Returns ``(mass, m-weighted, m = 0 part, n-weighted, n-weighted m = 0 part)``.
    Closed forms: for r <= n < N the columns m >= N - n, sum_{m >= k} a^m = a^k / (1 - a),
    sum_{m >= k} m a^m = a^k (k (1 - a) + a) / (1 - a)^2; for n >= N all m >= 0, and
    sum_{n >= N} n b^n = b^N (N (1 - b) + b) / (1 - b)^2. With ``absolute`` the moduli
    are summed (a bound for complex terms).
    """
    if absolute:
        a, b = np.abs(a), np.abs(b)
    ga = 1.0 / (1.0 - a)
    tail_n = b**N / (1.0 - b)
    tail_nn = b**N * (N * (1.0 - b) + b) / (1.0 - b) ** 2
    mass = tail_n * ga
    mw = tail_n * a * ga * ga
    nw = tail_nn * ga
    if N > r:
        n = np.arange(r, N)[None, :]
        k = N - n
        w = b[:, None] ** n * a[:, None] ** k
        mass = mass + w.sum(1) * ga
        mw = mw + (w * (k * (1.0 - a[:, None]) + a[:, None])).sum(1) * ga * ga
        nw = nw + (w * n).sum(1) * ga
    return mass, mw, tail_n, nw, tail_nn


def _layer_sums(a, u, N: int, absolute: bool = False):
    """Sums of the layer terms ``u[:, n] a^m`` (n < r) over ``m >= N - n``, per layer.

    Returns ``(mass, m-weighted)``, each of the shape of ``u`` (terms x layers n = 0..r-1).
    """
    if absolute:
        a, u = np.abs(a), np.abs(u)
    r = u.shape[1]
    k = N - np.arange(r)[None, :]
    ga = 1.0 / (1.0 - a[:, None])
    w = u * a[:, None] ** k
    return w * ga, w * (k * (1.0 - a[:, None]) + a[:, None]) * ga * ga


def _inflows(lam: float, r: int, m: int, n: int):
    """Balance of state (m, n): its out-rate and the (source, rate) pairs of its inflow."""
    out = lam + (2 * r if n == 0 else r) * (m > 0) + r * (n > 0)
    ins = [((m, n + 1), r)]  # the longer queue completes a phase
    if m >= r:
        ins.append(((m - r, n + r), lam))  # arrival to the shorter queue, difference n + r >= r
    if 1 <= n <= r and m >= r - n:
        ins.append(((m - r + n, r - n), lam))  # arrival turns difference r - n < r (or 0) into n
    if n >= 1:
        ins.append(((m + 1, n - 1), 2 * r if n == 1 else r))  # the shorter queue completes a phase
    return out, ins


@dataclass(frozen=True)
class ErlangSeries(SymmetricWalkSolution):
    """The product-form series of the symmetric join-the-shorter walk with jumps r >= 2.

    ``p(m, n)`` (m = min(x, y), n = |x - y|, the law of the unordered pair) is

    * a free value for the ``N (N + 1) / 2`` states with ``m + n < N`` (from their
      balance equations),
    * ``sum_i coef[i] alpha[i]^m beta[i]^n`` for ``n >= r``, ``m + n >= N``,
    * ``sum_j layer[j, n] layer_alpha[j]^m`` for ``n < r``, ``m + n >= N``.

    Attributes
    ----------
    rho, phases, N : the load, the jump r, and the size of the free corner.
    alpha, beta, coef : complex ndarrays of the product terms (normalised coefficients).
    layer_alpha, layer : complex ndarrays of the layer terms (``layer`` is (J, r)).
    corner : (N, N) ndarray; ``corner[m, n]`` for ``m + n < N`` (zero elsewhere).
    n_terms, depth, ratio, tail, tail_m, residual, cancellation, imag : diagnostics
        (``tail``: estimated absolute error of the probabilities summed over all states;
        ``tail_m``: of the m-weighted sum; ``residual``: relative residual of the corner
        system, which is overdetermined and consistent only for the exact series;
        ``cancellation``: sum of |terms|; ``imag``: largest imaginary part of a corner
        state, zero up to rounding as complex terms come in conjugate pairs).

    Examples
    --------
    Every unit of work is served at rate mu per busy coordinate, so the mean number of
    busy coordinates is ``2 rho``:

    >>> s = erlang_series(0.6, 3)
    >>> idle = s.sums(("upper_edge", "lower_edge", "origin")).mass + s.sums(("origin",)).mass
    >>> round(2 - idle, 11)
    1.2
    """

    rho: float
    phases: int
    N: int
    alpha: np.ndarray
    beta: np.ndarray
    coef: np.ndarray
    layer_alpha: np.ndarray
    layer: np.ndarray
    corner: np.ndarray
    n_terms: int
    depth: int
    ratio: float
    tail: float
    tail_m: float
    residual: float
    cancellation: float
    imag: float

    # -- pointwise -----------------------------------------------------------------------
    def min_difference_probability(self, m, n) -> np.ndarray:
        """``P(min(X, Y) = m, |X - Y| = n)``, vectorised over integer arrays ``m``, ``n``.

        Examples
        --------
        The balance of the empty state, ``lambda p(0, 0) = r mu p(0, 1)`` (rates in units of mu):

        >>> s = erlang_series(0.5, 2)
        >>> p00, p01 = s.min_difference_probability([0, 0], [0, 1])
        >>> bool(abs(1.0 * p00 - 2 * p01) < 1e-14)
        True
        """
        m, n = np.broadcast_arrays(np.asarray(m, dtype=np.int64), np.asarray(n, dtype=np.int64))
        out = np.zeros(m.shape)
        r, N = self.phases, self.N
        flat_m, flat_n = m.ravel(), n.ravel()
        res = out.ravel()
        inner = flat_m + flat_n < N
        res[inner] = self.corner[flat_m[inner], flat_n[inner]]
        for sel, fn in ((~inner & (flat_n >= r), self._prod), (~inner & (flat_n < r), self._lay)):
            idx = np.nonzero(sel)[0]
            for s in range(0, idx.size, 256):
                j = idx[s:s + 256]
                res[j] = fn(flat_m[j], flat_n[j])
        return res.reshape(m.shape)

    def _prod(self, m, n):
        v = self.coef[None, :] * self.alpha[None, :] ** m[:, None] * self.beta[None, :] ** n[:, None]
        return v.sum(1).real

    def _lay(self, m, n):
        v = self.layer[:, n].T * self.layer_alpha[None, :] ** m[:, None]
        return v.sum(1).real

    # -- sums ------------------------------------------------------------------------------
    def _part_table(self) -> dict:
        r, N = self.phases, self.N
        mass, mw, m0, nw, m0n = (np.real(self.coef * x) for x in _region_sums(self.alpha, self.beta, N, r))
        lmass, lmw = (np.real(x) for x in _layer_sums(self.layer_alpha, self.layer, N))
        c = self.corner
        mm, nn = np.indices(c.shape)
        off = (mm >= 1) & (nn >= 1)
        layers = np.arange(r)
        # m >= 1, n >= 1 (unordered): products without the m = 0 row, layers n >= 1 (there m >= N - n >= 1)
        hm = float(mass.sum() - m0.sum() + lmass[:, 1:].sum() + c[off].sum())
        hx = float(mw.sum() + lmw[:, 1:].sum() + (mm * c)[off].sum())
        hn = float(nw.sum() - m0n.sum() + (lmass * layers).sum() + (nn * c)[off].sum())
        em = float(m0.sum() + c[0, 1:].sum())
        en = float(m0n.sum() + (nn[0] * c[0]).sum())
        dm = float(lmass[:, 0].sum() + c[1:, 0].sum())
        dx = float(lmw[:, 0].sum() + (mm[1:, 0] * c[1:, 0]).sum())
        return self._mirrored((hm, hx, hn), (em, en), (dm, dx), float(c[0, 0]))

    # -- accuracy --------------------------------------------------------------------------
    def error(self, value, *, kind: str = "probability", rate: float = 1.0) -> float:
        """Error estimate from the tails of the mass (``tail``) and of the m-weighted sums (``tail_m``).

        ``rnd = 100 eps C / (1 - |alpha0|)`` bounds rounding (the per-term sums divide by
        ``1 - alpha``, and the terms cancel by ``C``, the sum of their moduli). A
        probability: ``tail + rnd``. A mean ``e`` of the smaller coordinate (the
        m-weighted tail is what the series tracks): ``tail_m + e tail + rnd max(1, e)``;
        a time ``value = e / rate``: that divided by ``rate``.

        Examples
        --------
        >>> s = erlang_series(0.5, 2)
        >>> bool(0 < s.error(0.1) < s.error(0.6, kind="time", rate=2.0) * 2 < 1e-12)
        True
        """
        kind = self._checked_kind(kind)
        i0 = int(np.argmax(np.abs(self.alpha)))
        rnd = 100 * _EPS * self.cancellation / (1 - abs(self.alpha[i0]))
        if kind == "probability":
            return float(self.tail + rnd)
        e = float(np.max(np.abs(np.atleast_1d(value)))) * (rate if kind == "time" else 1.0)
        err = self.tail_m + e * self.tail + rnd * max(1.0, e)
        return float(err / rate if kind == "time" else err)

    @property
    def diagonal_decay(self) -> float:
        """``|alpha0|``, the largest start alpha."""
        return float(np.max(np.abs(self.alpha)))

    @property
    def info(self) -> dict:
        """The series' diagnostics."""
        r = self.phases
        i0 = int(np.argmax(np.abs(self.alpha)))
        return {
            "terms": self.n_terms,
            "depth": self.depth,
            "tail_probability": self.tail,
            "contribution_ratio": self.ratio,
            "cancellation_factor": self.cancellation,
            "start_solutions": r * (r + 1) // 2,
            "corner_states": f"p(m, n) for m + n < {self.N} from balance equations",
            "corner_residual": self.residual,
            "alpha0": float(self.alpha[i0].real),
            "beta0": float(self.beta[i0].real),
            "construction": "Adan & Wessels (1996): r(r+1)/2 start solutions from SED with instantaneous "
                            "jockeying, vertical steps branching r-fold, layered horizontal steps",
        }


def _tree_sum(tree, values, K):
    """Per-tree sums of complex ``values``."""
    return np.bincount(tree, values.real, minlength=K) + 1j * np.bincount(tree, values.imag, minlength=K)


def erlang_series(rho: float, phases: int, *, tol: float = 1e-15, N: int | None = None,
                  max_terms: int = MAX_TERMS, requested_tol: float = 1e-9) -> ErlangSeries:
    """Build the compensation series for the symmetric walk with jumps ``phases`` (Erlang servers).

    Parameters
    ----------
    rho : float
        Load per coordinate, in (0, 1).
    phases : int
        The jump r >= 2 (r = 1 is :func:`~exactq.solvers.compensation.symmetric_series`).
    tol : float
        Grow every tree until its estimated tail, relative to its start term, is below tol.
    N : int, optional
        States with ``m + n < N`` are solved from their balance equations (default 2r + 2);
        the series converges faster the farther from the origin it is used.
    max_terms : int
        Hard cap on the number of product terms.
    requested_tol : float
        The accuracy a caller asked for (recorded as the solution's ``tol``).

    Raises
    ------
    ModelError
        ``rho`` outside (0, 1), ``phases < 2`` or ``N < phases``.
    ConvergenceError
        The terms stop decreasing, the series needs more than ``max_terms`` terms, or the
        corner system is inconsistent.

    Examples
    --------
    MODELS.md: E[W] = E[min(p1, p2)] / r = 0.29938794 at r = 2, rho = 0.5 (mean service 1):

    >>> round(erlang_series(0.5, 2).mean_min() / 2, 8)
    0.29938794
    """
    r = int(phases)
    if not 0 < rho < 1 or r < 2:
        raise ModelError(f"need 0 < rho < 1 and phases >= 2; got rho={rho}, phases={r}")
    N = 2 * r + 2 if N is None else int(N)
    if N < r:
        raise ModelError(f"the free corner must contain the states m + n < phases; got N={N} < {r}")
    lam = 2.0 * rho
    a, b, u = _start_terms(lam, r)
    K = a.size
    tree = np.arange(K)
    c = np.ones(K, complex)
    prods = [(a, b, c, tree)]  # product terms: alpha, beta, coefficient, tree
    lays = [(a, u, tree)]  # layer terms: alpha, u (T, r), tree

    def bounds(a_, b_, c_):  # sums of |term| over m + n >= N: (mass, m-weighted)
        s0, s1 = _region_sums(a_, b_, N, r, absolute=True)[:2]
        return np.abs(c_) * s0, np.abs(c_) * s1

    def lay_bounds(a_, u_):
        m0, m1 = _layer_sums(a_, u_, N, absolute=True)
        return m0.sum(1), m1.sum(1)

    p0, p1 = bounds(a, b, c)
    l0, l1 = lay_bounds(a, u)
    levels = [np.bincount(tree, p0 + l0, minlength=K)]
    levels_m = [np.bincount(tree, p1 + l1, minlength=K)]
    start = levels[0]
    pruned, pruned_m = np.zeros(K), np.zeros(K)
    ratio, depth, n_terms = 0.0, 0, K
    frontier = (a, b, c, tree)
    while frontier[0].size:
        fa, fb, fc, ft = frontier
        (va, vb, vc), (ha, hb, hc), hu, parent = _next_level(lam, r, fa, fb, fc)
        vt = ft[parent]
        depth += 1
        n_terms += 2 * va.size
        prods += [(va, vb, vc, vt), (ha, hb, hc, vt)]
        lays.append((va, hu, vt))
        v0, v1 = bounds(va, vb, vc)
        h0, h1 = bounds(ha, hb, hc)
        l0, l1 = lay_bounds(va, hu)
        levels.append(np.bincount(vt, v0 + h0 + l0, minlength=K))
        levels_m.append(np.bincount(vt, v1 + h1 + l1, minlength=K))
        if depth >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                rat = [np.where(levels[-i - 1] > 0, levels[-i] / levels[-i - 1], 0.0) for i in (1, 2)]
            ratio = float(max(np.max(rat[0]), np.max(rat[1])))
            if not ratio < 1:
                raise ConvergenceError(
                    f"compensation terms stopped decreasing at depth {depth} (ratio {ratio:.3g}, rho={rho}, "
                    f"phases={r})")
            if np.all(levels[-1] * ratio / (1 - ratio) + pruned <= tol * start):
                break
        if n_terms > max_terms:
            raise ConvergenceError(
                f"compensation did not converge in {n_terms} terms (depth {depth}, rho={rho}, phases={r})")
        keep = np.ones(ha.size, bool)
        if depth >= 2:  # drop the smallest branches while their estimated subtrees fit a tenth of tol
            est = h0 * ratio / (1 - ratio)
            order = np.lexsort((est, vt))
            to = vt[order]
            cs = np.cumsum(est[order])
            first = np.searchsorted(to, np.arange(K))
            cs -= np.concatenate([[0.0], cs])[first][to]
            keep[order[cs <= 0.1 * tol * start[to] - pruned[to]]] = False
            pruned += np.bincount(vt[~keep], est[~keep], minlength=K)
            pruned_m += np.bincount(vt[~keep], h1[~keep] * ratio / (1 - ratio), minlength=K)
        frontier = (ha[keep], hb[keep], hc[keep], vt[keep])
    pa, pb, pc, pt = (np.concatenate(x) for x in zip(*prods))
    la, lu, lt = (np.concatenate(x) for x in zip(*lays))

    # -- the corner: balance equations of every state that sees a state with m + n < N -----
    U = [(m, n) for m in range(N) for n in range(N - m)]
    ui = {s: i for i, s in enumerate(U)}
    rows, outside = [], {}
    for m in range(N + r):
        for n in range(N + r - m):
            out, ins = _inflows(lam, r, m, n)
            entry = [((m, n), -out)] + ins
            rows.append(entry)
            for y, _ in entry:
                if y not in ui and y not in outside:
                    outside[y] = len(outside)
    ys = np.array(list(outside), dtype=np.int64).reshape(-1, 2)
    vals = np.zeros((K, len(ys)), complex)
    hi = ys[:, 1] >= r
    if hi.any():
        # per-tree series values, powers by repeated products (no complex pow per state)
        mmax, nmax = int(ys[:, 0].max()), int(ys[:, 1].max())
        apow = np.cumprod(np.concatenate([np.ones((pa.size, 1)), np.repeat(pa[:, None], mmax, 1)], 1), 1)
        bpow = pb[:, None] ** r * np.cumprod(
            np.concatenate([np.ones((pb.size, 1)), np.repeat(pb[:, None], nmax - r, 1)], 1), 1)
        for j in np.nonzero(hi)[0]:
            vals[:, j] = _tree_sum(pt, pc * apow[:, ys[j, 0]] * bpow[:, ys[j, 1] - r], K)
    for j in np.nonzero(~hi)[0]:
        vals[:, j] = _tree_sum(lt, lu[:, ys[j, 1]] * la ** ys[j, 0], K)
    A = np.zeros((len(rows), K + len(U)), complex)
    for i, entry in enumerate(rows):
        for y, q in entry:
            if y in ui:
                A[i, K + ui[y]] += q
            else:
                A[i, :K] += q * vals[:, outside[y]]
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    As = A / scale
    j00 = K + ui[(0, 0)]  # p(0, 0) > 0: fix it, least squares for the rest
    rest = np.delete(np.arange(A.shape[1]), j00)
    import scipy.linalg

    sol = scipy.linalg.lstsq(As[:, rest], -As[:, j00], lapack_driver="gelsy")[0]
    z = np.insert(sol, j00, 1.0)
    residual = float(np.linalg.norm(As @ z) / (np.linalg.norm(As) * np.linalg.norm(z)))
    if not residual < 1e-6:
        raise ConvergenceError(
            f"the series does not satisfy the balance equations near the origin (relative residual "
            f"{residual:.3g}, rho={rho}, phases={r})")
    z = z / scale

    # -- normalise ---------------------------------------------------------------------------
    mass_p = _tree_sum(pt, pc * _region_sums(pa, pb, N, r)[0], K)
    mass_l = _tree_sum(lt, _layer_sums(la, lu, N)[0].sum(1), K)
    z = z / (np.sum(z[:K] * (mass_p + mass_l)) + np.sum(z[K:]))
    x = z[:K]
    corner = np.zeros((N, N))
    um, un = np.array(U).T
    corner[um, un] = z[K:].real
    imag = float(np.max(np.abs(z[K:].imag)))
    coef = x[pt] * pc
    layer = x[lt][:, None] * lu
    absx = np.abs(x)
    geo = ratio / (1 - ratio)
    tail = float(np.sum(absx * (levels[-1] * geo + pruned)))
    tail_m = float(np.sum(absx * (levels_m[-1] * geo + pruned_m)))
    cancel = float(np.sum(np.abs(coef) * _region_sums(pa, pb, N, r, absolute=True)[0])
                   + np.sum(_layer_sums(la, layer, N, absolute=True)[0]) + np.sum(np.abs(corner)))
    return ErlangSeries(
        rho=rho, phases=r, N=N, alpha=pa, beta=pb, coef=coef, layer_alpha=la, layer=layer, corner=corner,
        n_terms=n_terms, depth=depth, ratio=ratio, tail=tail, tail_m=tail_m, residual=residual,
        cancellation=cancel, imag=imag, tol=requested_tol,
    )


def _erlang_structure(walk: QuarterPlaneWalk) -> str | None:
    """``None`` for a symmetric join-the-shorter walk with jumps r >= 2, else the reason."""
    return walk.join_shorter_refusal(jumps="multiple", symmetric=True)


@register_solver(QuarterPlaneWalk, name="compensation-erlang", priority=10, applies=_erlang_structure,
                 doc="symmetric join-the-shorter walk with jumps r >= 2 (Erlang phases): r(r+1)/2 start "
                     "solutions, r-fold branching (Adan & Wessels 1996)", options=("tol",))
def solve_erlang_walk(walk: QuarterPlaneWalk, *, tol: float = 1e-9) -> ErlangSeries:
    """Stationary law of a symmetric join-the-shorter walk with jumps ``r`` (2 <= r <= MAX_JUMP).

    Parameters
    ----------
    walk : QuarterPlaneWalk
        Arrivals of rate lambda add r to the smaller coordinate (ties 1/2), both
        coordinates decrease by one at rate nu; the load per coordinate is
        ``rho = lambda r / (2 nu)``.
    tol : float
        The accuracy asked for; the series is built to :func:`~exactq.solvers.compensation.series_tol` of it.

    Returns
    -------
    ErlangSeries

    Raises
    ------
    NotApplicableError
        ``r > MAX_JUMP`` (the series has r(r+1)/2 start solutions, each branching r-fold).
    ModelError
        ``rho >= 1`` (no stationary law).

    Examples
    --------
    Erlang-2 phases at load 1/2 (MODELS.md: E[W] = E[min] / (r mu) = 0.29938794 with mu = 1):

    >>> from exactq.representations import QuarterPlaneWalk
    >>> s = solve_erlang_walk(QuarterPlaneWalk.join_shorter(1.0, (2.0, 2.0), jump=2))
    >>> round(s.mean_min() / 2, 8)
    0.29938794
    """
    s = walk.join_shorter_rates()
    r = s.jump
    if r > MAX_JUMP:
        raise NotApplicableError(
            f"the compensation series for jumps r >= 2 (Erlang phases) is implemented for r <= {MAX_JUMP} (it has "
            f"r(r+1)/2 start solutions, each branching r-fold); got r = {r}")
    rho = s.arrival_rate / (2 * (s.service_rates[0] / r))
    return erlang_series(rho, r, tol=series_tol(tol), requested_tol=tol)
