"""The numerical stationary law of window processes: the Kolmogorov equation on a log mesh (solver ``kolmogorov``).

The independent check of the series, for general increase, loss rate, decrease and
window bounds: the level-crossing equation in ``t = ln w``, trapezoidal rule on a mesh
aligned with ``ln(1/nu)``, a sparse triangular solve, and Richardson extrapolation
over mesh halvings (see :mod:`exactq.solvers.pdmp` for the derivation and references).

Examples
--------
Losses at rate ``lambda W`` with linear increase: ``E[W^2] = a / (lambda (1 - nu))``
exactly (here 2000):

>>> from exactq.representations.pdmp import PDMP, PowerLaw
>>> sol = solve_kolmogorov(PDMP(PowerLaw(1.0), PowerLaw(0.001, 1.0), nu=0.5))
>>> bool(abs(sol.moment(2) - 2000) < 1e-6)
True
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import spsolve_triangular

from exactq.catalogue import register_solver
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, NonFiniteError
from exactq.representations.pdmp import PDMP, PDMPSolution

from .pdmp import _EPS, _support, _unstable, reference_window, stability

__all__ = ["solve_kolmogorov", "richardson", "MAX_NODES"]

#: the finest Kolmogorov mesh may have at most this many nodes
MAX_NODES = 2_000_000


# ===================================================================== Kolmogorov equation
def richardson(values, columns: int) -> tuple[float, float, list]:
    """Richardson extrapolation of values on meshes halved each time (errors in ``h^2, h^4, ...``).

    Returns ``(best, error estimate, table)``; the estimate is the larger difference of
    the best extrapolant from its two neighbours in the table.

    Examples
    --------
    The trapezoidal rule for ``int_0^1 e^x dx`` with 4, 8, 16 and 32 panels (error
    ``1e-3`` at 32 panels) extrapolates to ``e - 1``, and the estimate covers the error:

    >>> vals = [np.trapezoid(np.exp(np.linspace(0, 1, n + 1)), dx=1 / n) for n in (4, 8, 16, 32)]
    >>> best, err, _ = richardson(vals, 3)
    >>> bool(abs(best - (math.e - 1)) < 1e-14 < err < 1e-9)
    True
    """
    vals = np.asarray(values, dtype=float)
    T = [[v] for v in vals]
    for i in range(1, vals.shape[0]):
        for k in range(1, min(i, columns) + 1):
            T[i].append(T[i][k - 1] + (T[i][k - 1] - T[i - 1][k - 1]) / (4.0**k - 1.0))
    last = T[-1]
    best = last[-1]
    if len(T) == 1:
        return float(best), math.inf, T
    diffs = [abs(best - last[-2]) if len(last) >= 2 else abs(best - T[-2][-1])]
    prev = T[-2][min(len(T[-2]), len(last)) - 1]
    diffs.append(abs(best - prev))
    return float(best), float(np.max(diffs)), T


def _richardson_arrays(values: list, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`richardson` elementwise for arrays of equal shape."""
    V = np.stack([np.asarray(v, dtype=float) for v in values])
    T = [[V[i]] for i in range(V.shape[0])]
    for i in range(1, V.shape[0]):
        for k in range(1, min(i, columns) + 1):
            T[i].append(T[i][k - 1] + (T[i][k - 1] - T[i - 1][k - 1]) / (4.0**k - 1.0))
    best = T[-1][-1]
    if len(T) == 1:
        return best, np.full(best.shape, np.inf)
    e1 = np.abs(best - (T[-1][-2] if len(T[-1]) >= 2 else T[-2][-1]))
    e2 = np.abs(best - T[-2][min(len(T[-2]), len(T[-1])) - 1])
    return best, np.maximum(e1, e2)


def _lagrange(t_nodes: np.ndarray, base: np.ndarray, valid: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Weights ``(n, 6)`` of the Lagrange interpolant on nodes ``base + 0..5`` (invalid ones skipped)."""
    idx = base[:, None] + np.arange(6)[None, :]
    tt = t_nodes[np.minimum(idx, t_nodes.size - 1)]
    w = np.ones(idx.shape)
    for i in range(6):
        for j in range(6):
            if i == j:
                continue
            factor = np.where(valid[:, j], (s - tt[:, j]) / np.where(valid[:, j], tt[:, i] - tt[:, j], 1.0), 1.0)
            w[:, i] *= factor
    return np.where(valid, w, 0.0)


def _stencils(t: np.ndarray, breaks: np.ndarray, s: np.ndarray, lowest: np.ndarray):
    """6-point stencils around points ``s`` within the smooth segment of ``s``, using nodes ``>= lowest``."""
    N = t.size - 1
    k = np.searchsorted(t, s)
    seg_edges = np.concatenate([[t[0]], breaks, [t[-1]]])
    seg = np.clip(np.searchsorted(seg_edges, s, side="right") - 1, 0, seg_edges.size - 2)
    seg_lo = np.searchsorted(t, seg_edges[seg], side="left")
    seg_hi = np.searchsorted(t, seg_edges[seg + 1], side="right") - 1
    lo = np.maximum(seg_lo, lowest)
    base = np.clip(k - 3, lo, np.maximum(lo, seg_hi - 5))
    base = np.maximum(np.minimum(base, N - 5), lowest)
    idx = base[:, None] + np.arange(6)[None, :]
    valid = idx <= N
    return base, valid, _lagrange(t, base, valid, s)


@dataclass
class _Level:
    t: np.ndarray
    x: np.ndarray
    fp: np.ndarray  # right limits of the density at the nodes
    fm: np.ndarray  # left limits
    Z: float
    P: float  # the ceiling's atom (unnormalised)
    cum: np.ndarray  # P(W <= x_j) from the continuous part (normalised)
    breaks: np.ndarray
    exact_history: bool
    bottom_mass: float
    noise: np.ndarray  # rounding bound of the normalised density at the nodes

    @property
    def noise_mass(self) -> float:
        """The mass the rounding floor of the density could hide (trapezoid of ``x * noise``)."""
        h = np.diff(self.t)
        return float(np.sum(0.5 * h * (self.x[:-1] * self.noise[:-1] + self.x[1:] * self.noise[1:])))

    def moment(self, k: float) -> float:
        h = np.diff(self.t)
        with np.errstate(over="ignore", invalid="ignore"):
            body = np.sum(0.5 * h * (self.x[:-1] ** (k + 1) * self.fp[:-1] + self.x[1:] ** (k + 1) * self.fm[1:]))
            return float((body + self.P * self.x[-1] ** k) / self.Z)

    def log_moment(self, k: float) -> float:
        """``ln E[W^k]`` of the same trapezoid sum as :meth:`moment`, by a log-sum-exp (no overflow)."""
        from scipy.special import logsumexp

        h = np.diff(self.t)
        lx = np.log(self.x)
        a = np.concatenate([(k + 1) * lx[:-1], (k + 1) * lx[1:], [k * lx[-1]]])
        b = np.concatenate([0.5 * h * self.fp[:-1], 0.5 * h * self.fm[1:], [self.P]])
        lse, sign = logsumexp(a, b=b, return_sign=True)
        if not sign > 0:  # pragma: no cover - a density is nonnegative
            raise NonFiniteError(f"kolmogorov: the trapezoid sum of E[W^{k:g}] is not positive")
        return float(lse) - math.log(self.Z)

    def _interp(self, values_left, values_right, tq):
        """Interpolate node values (one-sided at segment boundaries) at points ``tq`` inside the mesh."""
        base, valid, w = _stencils(self.t, self.breaks, tq, np.zeros(tq.shape, dtype=int))
        idx = np.minimum(base[:, None] + np.arange(6)[None, :], self.t.size - 1)
        node_t = self.t[idx]
        vals = np.where(node_t <= tq[:, None], values_left[idx], values_right[idx])
        return np.sum(w * vals, axis=1)

    def density(self, xq: np.ndarray) -> np.ndarray:
        out = np.zeros(xq.shape)
        inside = (xq >= self.x[0] * (1 - 1e-12)) & (xq <= self.x[-1] * (1 + 1e-12)) & (xq > 0)
        if inside.any():
            tq = np.clip(np.log(xq[inside]), self.t[0], self.t[-1])
            out[inside] = self._interp(self.fp, self.fm, tq) / self.Z
        return out

    def rounding(self, xq: np.ndarray) -> np.ndarray:
        """The rounding bound of the density at ``xq`` (the largest at the two nearest nodes)."""
        j = np.clip(np.searchsorted(self.x, xq), 1, self.x.size - 1)
        return np.maximum(self.noise[j - 1], self.noise[j])

    def cdf(self, xq: np.ndarray) -> np.ndarray:
        out = np.where(xq >= self.x[-1], 1.0, 0.0)
        inside = (xq >= self.x[0]) & (xq < self.x[-1]) & (xq > 0)
        if inside.any():
            tq = np.log(xq[inside])
            out[inside] = self._interp(self.cum, self.cum, tq)
        return np.clip(out, 0.0, 1.0)


def _back_substitute(M, x: np.ndarray) -> np.ndarray:
    """Solve the upper-triangular recursion ``M u = e_N`` (both meshes' schemes); refuse an overflow."""
    rhs = np.zeros(M.shape[0])
    rhs[-1] = 1.0
    u = spsolve_triangular(M, rhs, lower=False)
    if not np.all(np.isfinite(u)):
        raise ConvergenceError("the Kolmogorov recursion overflowed: int lambda / a over the window range "
                               f"[{x[0]:.6g}, {x[-1]:.6g}] exceeds the float range; give w_max or a smaller range")
    return u


def _above_noise(D: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """``D`` where it exceeds its rounding floor, 0 where it is indistinguishable from noise.

    Far in the lower tail, where the law has (numerically) no mass, the computed ``a f``
    is rounding noise, which ``1 / a`` amplifies where ``a`` vanishes (``alpha > 1``); the
    error estimate keeps the floor.
    """
    return np.where(np.abs(D) > floor, D, 0.0)


class _KolmogorovMesh:
    """The log mesh, its history points and the triangular system of one refinement level."""

    def __init__(self, rep: PDMP, t_lo: float, t_top: float, h: float, anchor_top: bool, breaks_x: list):
        self.rep = rep
        if anchor_top:
            n = int(math.floor((t_top - t_lo) / h + 1e-9))
            uniform = t_top - h * np.arange(n, -1, -1)
        else:
            n = int(math.floor((t_top - t_lo) / h + 1e-9))
            uniform = t_lo + h * np.arange(0, n + 1)
        extra = [t_lo, t_top] + [math.log(b) for b in breaks_x if math.exp(t_lo) < b < math.exp(t_top)]
        t = np.unique(np.concatenate([uniform, extra]))
        t = t[(t >= t_lo - 1e-12) & (t <= t_top + 1e-12)]
        # snap nodes closer than 1e-6 h to a break or an end onto it
        keep = np.concatenate([[True], np.diff(t) > 1e-6 * h])
        t = t[keep]
        t[0], t[-1] = t_lo, t_top
        self.t0 = t
        bt = np.array(sorted(math.log(b) for b in breaks_x if math.exp(t_lo) < b < math.exp(t_top)))
        # a segment boundary needs at least 6 nodes on each side to keep the stencils inside
        good = []
        edges = [t[0]] + list(bt) + [t[-1]]
        for i, b in enumerate(bt):
            left = np.count_nonzero((t >= edges[i]) & (t <= b))
            right = np.count_nonzero((t >= b) & (t <= edges[i + 2]))
            if left >= 6 and right >= 6:
                good.append(b)
        self.breaks = np.array(good)
        steps = np.diff(t)
        ratio = -math.log(rep.nu) / h if rep.is_multiplicative else 0.5
        # a uniform mesh with ln(1/nu) a whole number of steps: the history is on the nodes
        self.aligned = bool(rep.is_multiplicative and np.allclose(steps, h, rtol=1e-9, atol=0)
                            and abs(ratio - round(ratio)) < 1e-6)
        self.K = int(round(ratio)) if self.aligned else None

    @staticmethod
    def refine(t: np.ndarray, level: int) -> np.ndarray:
        for _ in range(level):
            t = np.sort(np.concatenate([t, 0.5 * (t[:-1] + t[1:])]))
        return t

    def solve(self, level: int) -> _Level:
        rep = self.rep
        t = self.refine(self.t0, level)
        N = t.size - 1
        if N + 1 > MAX_NODES:
            raise ModelError(f"the Kolmogorov mesh needs {N + 1} nodes at refinement level {level}; the limit is "
                             f"{MAX_NODES} (lower points_per_decrease or max_levels)")
        x = np.exp(t)
        h = np.diff(t)
        A = np.asarray(rep.a(x), dtype=float)
        L = np.asarray(rep.loss(x), dtype=float)
        if not float(L[-1]) > 0:
            raise ModelError(f"the loss rate at the top of the window range ({x[-1]:.6g}) must be > 0")
        r = L * x / A
        if self.aligned:
            return self._solve_aligned(t, x, A, L, r, self.K * 2**level)
        s = np.log(rep.d_inverse(x))
        tiny = 1e-7 * float(h.min())
        top = t[-1]
        beyond = s > top + tiny
        at_top = np.abs(s - top) <= tiny
        inner = ~beyond & ~at_top
        # exact hits on nodes
        k = np.clip(np.searchsorted(t, s), 0, N)
        km = np.clip(k - 1, 0, N)
        hit_k = np.abs(t[k] - s) <= tiny
        hit_km = np.abs(t[km] - s) <= tiny
        exact = inner & (hit_k | hit_km)
        exact_idx = np.where(hit_k, k, km)
        interp = inner & ~exact
        rows_i = np.flatnonzero(interp)
        if rows_i.size:
            base, valid, wts = _stencils(t, self.breaks, s[rows_i], rows_i)
        # history H = sum_c W[j, c] G_c (the same for both limits except at the top)
        hist_r, hist_c, hist_w = [], [], []
        je = np.flatnonzero(exact)
        hist_r.append(je), hist_c.append(exact_idx[je]), hist_w.append(np.ones(je.size))
        if rows_i.size:
            cols = base[:, None] + np.arange(6)[None, :]
            hist_r.append(np.repeat(rows_i, 6)[valid.ravel()])
            hist_c.append(cols.ravel()[valid.ravel()])
            hist_w.append(wts.ravel()[valid.ravel()])
        hr, hc, hw = (np.concatenate(v) for v in (hist_r, hist_c, hist_w))
        Hmat = sparse.csr_matrix((hw, (hr, hc)), shape=(N + 1, N + 1))
        jt = np.flatnonzero(at_top)
        Hminus = Hmat + sparse.csr_matrix((np.ones(jt.size), (jt, np.full(jt.size, N))), shape=(N + 1, N + 1))
        # cell j: G_j (1 - h r_j / 2) - G_{j+1} (1 + h r_{j+1} / 2) + h/2 (r_j H+_j + r_{j+1} H-_{j+1}) = 0
        j = np.arange(N)
        D = sparse.csr_matrix((np.concatenate([1 - 0.5 * h * r[:-1], -(1 + 0.5 * h * r[1:]), [1.0]]),
                               (np.concatenate([j, j, [N]]), np.concatenate([j, j + 1, [N]]))), shape=(N + 1, N + 1))
        left = sparse.diags(np.concatenate([0.5 * h * r[:-1], [0.0]])) @ Hmat
        shift = sparse.csr_matrix((0.5 * h * r[1:], (j, j + 1)), shape=(N + 1, N + 1))
        M = (D + left + shift @ Hminus).tocsr()
        G = _back_substitute(M, x)
        Hp, Hm = Hmat @ G, Hminus @ G
        floor = 8 * _EPS * (np.abs(G) + np.abs(Hm))  # rounding of the difference G - H
        fp, fm = _above_noise(G - Hp, floor) / A, _above_noise(G - Hm, floor) / A
        noise = floor / A
        P = float(G[N] / L[N])
        cells = 0.5 * h * (x[:-1] * fp[:-1] + x[1:] * fm[1:])
        Z = float(cells.sum() + P)
        cum = np.concatenate([[0.0], np.cumsum(cells)]) / Z
        low_window = t <= s[0] if s[0] < top else np.ones(t.size, bool)
        bottom = float(cells[low_window[:-1]].sum() / Z)
        return _Level(t, x, fp, fm, Z, P, cum, self.breaks, bool(rows_i.size == 0), bottom, noise / Z)

    def _solve_aligned(self, t, x, A, L, r, K: int) -> _Level:
        """The aligned mesh (``x / nu`` is node ``j + K``): the same scheme written for ``D = a f``.

        With ``D_j = G_j - G_{j+K}``, subtracting the trapezoidal step of cell ``j + K`` from
        that of cell ``j`` gives ``D_j (1 - h r_j / 2) - D_{j+1} (1 + h r_{j+1} / 2)
        + h/2 (r_{j+K} D_{j+K} + r_{j+K+1} D_{j+K+1}) = 0``: the solution of the G system,
        without the cancellation of ``G - G(x / nu)`` where both are near the total loss rate
        (that difference loses every digit where ``a`` is small, e.g. ``alpha > 1`` near 0).
        Unknowns: ``U_j = D_j^+`` (right limits); at ``j* = N - K`` (``x / nu`` is the top)
        ``D^-_{j*} = U_{j*} - U_N``; above ``j*`` the history is 0, so ``D = G``; ``U_N = G_N``.
        """
        N = t.size - 1
        h = (t[-1] - t[0]) / N
        js = N - K
        half = 0.5 * h
        rows, cols, vals = [np.array([N])], [np.array([N])], [np.array([1.0])]
        top = np.arange(max(js, 0), N)
        rows += [top, top]
        cols += [top, top + 1]
        vals += [1 - half * r[top], -(1 + half * r[top + 1])]
        if js > 0:
            j = np.arange(js)
            rows += [j, j, j]
            cols += [j, j + 1, j + K]
            vals += [1 - half * r[j], -(1 + half * r[j + 1]), half * r[j + K]]
            # D^-_{j+K+1}: U_{j+K+1}, minus U_N where j + K + 1 = j*
            rows.append(j)
            cols.append(j + K + 1)
            vals.append(half * r[j + K + 1])
            jump = j[j + K + 1 == js]
            rows.append(jump)
            cols.append(np.full(jump.size, N))
            vals.append(-half * r[jump + K + 1])
            # D^-_{j+1} at j + 1 = j*: -(U_{j*} - U_N)(1 + h r / 2)
            last = j[j + 1 == js]
            rows.append(last)
            cols.append(np.full(last.size, N))
            vals.append(1 + half * r[last + 1])
        M = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(N + 1, N + 1))
        U = _back_substitute(M, x)
        Dm = U.copy()
        if js >= 0:
            Dm[js] = U[js] - U[N]
        # rounding: an error made at node i persists below it (the recursion's nearly constant
        # mode), so the noise floor of D at j is eps times the largest D above j
        floor = 8 * _EPS * np.sqrt(np.arange(N, -1, -1) + 1.0) * np.maximum.accumulate(np.abs(U)[::-1])[::-1]
        fp, fm = _above_noise(U, floor) / A, _above_noise(Dm, floor) / A
        noise = floor / A
        P = float(U[N] / L[N])
        cells = half * (x[:-1] * fp[:-1] + x[1:] * fm[1:])
        Z = float(cells.sum() + P)
        cum = np.concatenate([[0.0], np.cumsum(cells)]) / Z
        bottom = float(cells[: min(K, N)].sum() / Z)
        return _Level(t, x, fp, fm, Z, P, cum, self.breaks, True, bottom, noise / Z)


def _history_width(rep: PDMP, x: np.ndarray) -> np.ndarray:
    """``ln(d^-1(x) / x)``: how far above ``x`` (in ``ln w``) the losses landing at ``x`` start."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(rep.d_inverse(x) / x)


def _tail_top(rep: PDMP, w_ref: float, tail: float) -> float:
    """Where ``int_{w_ref}^x lambda/a`` reaches ``tail`` (the no-loss survival is ``e^-tail``)."""
    x = w_ref * np.geomspace(1.0, 1e15, 3001)
    integrand = np.asarray(rep.loss(x), float) * x / np.asarray(rep.a(x), float)
    cum = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(np.log(x)) * (integrand[1:] + integrand[:-1]))])
    hit = np.flatnonzero(cum >= tail)
    return float(x[hit[0]]) if hit.size else float(x[-1])


@register_solver(PDMP, name="kolmogorov", priority=10,
                 doc="the level-crossing equation a f = int lambda f on a log mesh (trapezoidal rule, Richardson "
                     "extrapolation over mesh halvings), for general a, lambda, d and window bounds",
                 options=("points_per_decrease", "max_levels", "tol", "strict"))
def solve_kolmogorov(rep: PDMP, *, points_per_decrease: int = 32, max_levels: int = 7, tol: float = 1e-9,
                     strict: bool = False, tail: float = 45.0) -> PDMPSolution:
    """The stationary law from a discretisation of the Kolmogorov equation (module docstring).

    Parameters
    ----------
    rep : PDMP
        Any profiles and decrease, optional bounds.
    points_per_decrease : int
        Mesh nodes per decrease width ``ln(1/nu)`` (``ln(d^-1(w)/w)``, its smallest
        value over the window range, for a general decrease) on the coarsest mesh; raised
        where the tail needs it (``h lambda x / a <= 1``).
    max_levels : int
        At most this many meshes (each halving the last); at least three are solved.
    tol : float
        Stop refining when the estimated relative error of ``E[W]`` and of the
        normalisation is below ``tol``.
    strict : bool
        Raise :class:`ConvergenceError` instead of an :class:`AccuracyWarning` when
        ``tol`` is not met on the finest mesh.
    tail : float
        Without a ceiling the mesh ends where ``int lambda / a`` from the reference
        window reaches ``tail`` (extended while the artificial ceiling holds mass).

    Returns
    -------
    PDMPSolution
        Moments, density and CDF by Richardson extrapolation over the levels, with
        their error estimates; ``info`` has the mesh, the levels and the masses at the
        artificial ceiling (``ceiling_mass``) and below the bottom cut
        (``floor_cut_mass``, an estimate: the mass of the lowest decrease window).

    Notes
    -----
    Order: the trapezoidal rule is of order 2 with an error expansion in even powers
    of the mesh width when the history falls on nodes (the multiplicative decrease on
    an aligned mesh); three extrapolation columns are then used (order 8). With an
    interpolated history (a general decrease, or both a floor and a ceiling) the
    degree-5 interpolation limits the expansion and two columns are used (order 6).

    Examples
    --------
    AIMD with constant-rate losses: ``E[W] = (a/lam) / (1 - nu)``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> sol = solve_kolmogorov(PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.5))
    >>> bool(abs(sol.mean() - 2.0) < 1e-10)
    True
    """
    t0 = time.perf_counter()
    if not isinstance(rep, PDMP):
        raise ModelError(f"solve_kolmogorov takes a PDMP representation; got {type(rep).__name__}")
    K = int(points_per_decrease)
    if K < 4:
        raise ModelError(f"points_per_decrease must be >= 4; got {points_per_decrease!r}")
    if int(max_levels) < 3:
        raise ModelError(f"max_levels must be >= 3; got {max_levels!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ModelError(f"tol must be in (0, 1); got {tol!r}")
    verdict = stability(rep)
    if not verdict.stable:
        return _unstable(rep, verdict, "kolmogorov", t0)
    w_ref = reference_window(rep)
    floor, ceiling = rep.w_min is not None, rep.w_max is not None
    tail_now = float(tail)
    # without a ceiling: where the no-loss survival from the bulk (the floor, if it is above the
    # reference window) is e^-tail (extended below while the artificial ceiling holds mass)
    bulk = max(w_ref, rep.w_min or 0.0)
    top = rep.w_max if ceiling else max(_tail_top(rep, bulk, tail_now), 1.5 * bulk)
    span = 16.0
    ceiling_extensions = floor_extensions = 0
    while True:
        lo = rep.w_min if floor else None
        probe = np.geomspace(lo if lo is not None else w_ref * 1e-6, top, 400)
        widths = _history_width(rep, probe)
        c = -math.log(rep.nu) if rep.is_multiplicative else float(np.min(widths[np.isfinite(widths)]))
        if lo is None:
            lo = w_ref * math.exp(-span * max(c, float(np.median(widths[np.isfinite(widths)]))))
            lo = min(lo, top * math.exp(-4 * c))
        r_top = float(np.max(np.asarray(rep.loss(probe), float) * probe / np.asarray(rep.a(probe), float)))
        K_eff = max(K, int(math.ceil(c * r_top)))
        h = c / K_eff
        anchor_top = ceiling or not floor or not rep.is_multiplicative
        if rep.is_multiplicative and not (floor and ceiling):
            # align the free end with the mesh so that x / nu is always a node
            n = math.ceil(math.log(top / lo) / h - 1e-9)
            if floor:
                top = lo * math.exp(n * h)
            else:
                lo = top * math.exp(-n * h)
        breaks, b = [], top
        for _ in range(5):  # where f jumps (d(top)) and where its derivatives do
            b = float(rep.d(np.array([b]))[0])
            if floor:
                b = max(b, rep.w_min)
            breaks.append(b)
        mesh = _KolmogorovMesh(rep, math.log(lo), math.log(top), h, anchor_top, breaks)
        if mesh.t0.size > MAX_NODES // 8:
            raise ModelError(f"the coarsest Kolmogorov mesh needs {mesh.t0.size} nodes (window range "
                             f"[{lo:.3g}, {top:.3g}], {K_eff} points per decrease); lower points_per_decrease")
        level0 = mesh.solve(0)
        ceiling_mass = level0.P / level0.Z if not ceiling else 0.0
        if not ceiling and ceiling_mass > 1e-17 and top < bulk * 1e14 and tail_now < 600.0:
            # a heavier tail than the no-loss survival suggests: a longer range (G grows like
            # exp(int lambda / a) from the top down, so the range stays below exp(600))
            tail_now = min(2.0 * tail_now, 600.0)
            top = max(top, min(_tail_top(rep, bulk, tail_now), bulk * 1e15))
            ceiling_extensions += 1
            continue
        if not floor and level0.bottom_mass > 1e-17 and floor_extensions < 6 and lo > 1e-250:
            span *= 2.0
            floor_extensions += 1
            continue
        break
    columns = 3 if level0.exact_history else 2
    levels = [level0]
    converged = False
    means = [level0.moment(1.0)]
    best = err = math.nan
    for ell in range(1, int(max_levels)):
        lev = mesh.solve(ell)
        levels.append(lev)
        means.append(lev.moment(1.0))
        if ell >= 2:
            best, err, _ = richardson(means, columns)
            if err <= tol * abs(best):
                converged = True
                break
    finest = levels[-1]
    ceiling_mass = finest.P / finest.Z if not ceiling else 0.0
    floor_cut = finest.bottom_mass if not floor else 0.0
    noise_mass = finest.noise_mass
    info = {
        "stability": verdict.to_info(),
        "scheme": "trapezoidal rule for dG/dt = -(lambda x / a)(G - G(d^-1)) on a log mesh, Richardson "
                  "extrapolation over mesh halvings",
        "levels": len(levels),
        "nodes": [int(lv.t.size) for lv in levels],
        "points_per_decrease": K_eff,
        "extrapolation_order": 2 * (columns + 1),
        "history": "on nodes (aligned mesh)" if level0.exact_history else "degree-5 Lagrange interpolation",
        "window_range": [float(math.exp(mesh.t0[0])), float(math.exp(mesh.t0[-1]))],
        "reference_window": w_ref,
        "ceiling_mass": ceiling_mass,
        "floor_cut_mass": floor_cut,
        "rounding_mass": noise_mass,
        "first_moment_error": err,
        "first_moment_by_level": means,
        "error_estimate_kind": "Richardson: the larger difference of the best extrapolant from its neighbours, plus "
                               "the masses at the artificial ceiling, below the bottom cut and under the rounding "
                               "floor of the density",
    }
    if not converged:
        msg = (f"kolmogorov: E[W] reached an estimated relative error {err / abs(best):.2e}, not tol={tol:g}, "
               f"after {len(levels)} meshes ({levels[-1].t.size} nodes)")
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=2)
    info["converged"] = converged

    def cut_error(k: float, value: float) -> float:
        e = noise_mass * abs(value)
        if not ceiling:
            e += ceiling_mass * (finest.x[-1] ** k + abs(value))
        if not floor:
            e += floor_cut * (finest.x[0] ** k + abs(value))
        return e

    def log_moment(k: float):
        """``E[W^k]`` when the float sum overflows: Richardson on ``ln E[W^k]`` (it has the same expansion)."""
        L, eL, _ = richardson([lv.log_moment(k) for lv in levels], columns)
        log_cut = [math.log(mass) + k * math.log(x) for mass, x in ((ceiling_mass, finest.x[-1]),
                                                                      (floor_cut, finest.x[0])) if mass > 0]
        tail_decides = not ceiling and ceiling_mass > 0 and log_cut[0] > math.log(1e-3) + L
        if L > math.log(np.finfo(float).max):
            where = ("; the computational window alone gives about" if tail_decides else " =") + \
                f" 10^{L / math.log(10):.6g}"
            raise NonFiniteError(f"E[W^{k:g}] is beyond the float64 range (about 1.8e308){where}")
        v = math.exp(L)
        if tail_decides:
            warnings.warn(f"kolmogorov: E[W^{k:g}] depends on the tail beyond the computational window "
                          f"(mass {ceiling_mass:.2e} at {finest.x[-1]:.3g}); the moment may be infinite",
                          AccuracyWarning, stacklevel=2)
            return v, math.inf
        cut = sum(math.exp(min(c, 709.0)) for c in log_cut) + (ceiling_mass + floor_cut + noise_mass) * v
        return v, v * math.expm1(eL) + cut + 4 * _EPS * math.sqrt(finest.t.size) * v * max(1.0, abs(L))

    def moment(k: float):
        per_level = [lv.moment(k) for lv in levels]
        if not all(math.isfinite(m) for m in per_level) or abs(k) * max(abs(math.log(finest.x[-1])),
                                                                         abs(math.log(finest.x[0]))) > 700:
            return log_moment(k)  # the sum, or the cut masses' weights x^k, overflow a double
        v, e, _ = richardson(per_level, columns)
        if not ceiling and ceiling_mass * finest.x[-1] ** k > 1e-3 * abs(v):
            # the artificial ceiling's atom decides E[W^k]: the tail beyond the window range
            # (heavy, as a Pareto tail) is not resolved, so no finite error can be claimed
            warnings.warn(f"kolmogorov: E[W^{k:g}] depends on the tail beyond the computational window "
                          f"(mass {ceiling_mass:.2e} at {finest.x[-1]:.3g}); the moment may be infinite",
                          AccuracyWarning, stacklevel=2)
            return v, math.inf
        # rounding: the recursion and the sums run over the finest mesh's nodes
        return v, e + cut_error(k, v) + 4 * _EPS * math.sqrt(finest.t.size) * abs(v)

    def density(xq):
        xq = np.asarray(xq, float)
        v, e = _richardson_arrays([lv.density(xq) for lv in levels], columns)
        # the extrapolation weights sum to at most 3 in absolute value
        e = e + 3 * finest.rounding(xq) * (xq > 0)
        return np.maximum(v, 0.0), e + np.maximum(-v, 0.0) + 8 * _EPS * np.abs(v)

    def cdf(xq):
        xq = np.asarray(xq, float)
        v, e = _richardson_arrays([lv.cdf(xq) for lv in levels], columns)
        return np.clip(v, 0.0, 1.0), e + ceiling_mass + floor_cut + 8 * _EPS

    def quantile(p):
        F = finest.cum
        j = int(np.searchsorted(F, p))
        if j >= F.size:
            return float(finest.x[-1])
        lo_x, hi_x = finest.x[max(j - 1, 0)], finest.x[j]
        if hi_x <= lo_x:
            return float(hi_x)
        from scipy.optimize import brentq

        return float(brentq(lambda v: cdf(np.array([v]))[0][0] - p, lo_x, hi_x, xtol=1e-12 * hi_x))

    atom = (float(rep.w_max), float(finest.P / finest.Z)) if ceiling else None
    if atom is not None:
        vals = [lv.P / lv.Z for lv in levels]
        pa, pe, _ = richardson(vals, columns)
        atom = (atom[0], pa)
        info["ceiling_atom"] = {"w_max": atom[0], "probability": pa, "error_estimate": pe}
    return PDMPSolution(verdict, "kolmogorov", _support(rep), moment_fn=moment, density_fn=density, cdf_fn=cdf,
                        quantile_fn=quantile, atom=atom, info=info, seconds=time.perf_counter() - t0)
