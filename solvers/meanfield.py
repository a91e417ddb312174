"""Mean-field limits of occupancy processes: fixed point, stability, refined 1/N term.

The representation, its conventions (occupancy ``s_1 .. s_K``, dispatch tail, tail
closure) and the solution types are in :mod:`exactq.representations.population`. The
solvers here take a :class:`~exactq.representations.population.Population` and
return a :class:`~exactq.representations.population.FixedPoint` (``fixed-point``) or
a :class:`~exactq.representations.population.RefinedFixedPoint` (``refined``).

Algorithms
----------
* Fixed point (:func:`occupancy_fixed_point`): the forward recursion of the flux
  balance gives the start and the truncation ``K`` (the first ``s_K`` below a
  threshold, see :func:`_threshold`); Newton's method on
  ``F_k(s) = lambda A_{k-1}(s) - mu s_k``, ``k = 1..K``, with the geometric tail
  closure ``s_{K+j} = s_K r^j``. The Jacobian is banded; it is formed exactly by the
  complex-step derivative (Squire & Trapp 1998) with ``2b + 2`` column groups
  (Curtis, Powell & Reid 1974) and factored by ``scipy.linalg.solve_banded``. No ODE
  is integrated.
* Stability: eigenvalues of the drift Jacobian ``Df`` at the fixed point. The
  coordinates with ``s_k < 1e-13`` form a (block-)triangular tail whose spectrum is
  that of the linear birth-death drift ``(lambda a, mu)``, inside
  ``Re z <= -(sqrt(mu) - sqrt(lambda a))^2 < 0``; the leading block is done densely.
* Refined mean field (:func:`solve_refined`; Gast & Van Houdt 2017, Thm. 3.1, with the
  1/N drift term of Gast, Bortolussi & Tribastone 2019):
  ``E[s] = s* + V/N + o(1/N)`` with ``V = -A^{-1}(1/2 D2f : W + f~)``, ``A = Df(s*)``,
  ``W`` solving the Lyapunov equation ``A W + W A^T + Qn = 0``, ``Qn`` the diagonal
  jump covariance, ``D2f : W = sum_jk d2f/ds_j ds_k W_jk`` (second directional
  derivatives along the eigenvectors of ``W``, by a complex step in one direction and a
  central difference in the other) and ``f~`` the 1/N part of the finite-N drift.

References
----------
T. G. Kurtz, J. Appl. Probab. 7, 1970. M. Mitzenmacher, IEEE TPDS 12(10), 2001.
N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM Meas. Anal.
Comput. Syst. 1(2), 2017. N. Gast, L. Bortolussi, M. Tribastone, "Size expansions of mean
field approximation: transient and steady-state analysis", Perform. Eval. 129, 2019.
W. Squire, G. Trapp, SIAM Review 40, 1998. A. R. Curtis, M. J. D. Powell, J. K. Reid,
IMA J. Appl. Math. 13, 1974.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.linalg as sla

from exactq.catalogue import register_solver
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, UnstableError
from exactq.representations.population import (
    COMPLEX_STEP,
    FixedPoint,
    Population,
    RefinedFixedPoint,
    band_to_dense,
    banded_jacobian,
)

__all__ = ["occupancy_fixed_point", "solve_refined"]

_SMALL = 1e-17        # truncation: first s_K below this (super-geometric tails)
_KMAX = 2_000_000
_EIG_BLOCK = 120
_REFINED_MAX = 400


def _threshold(r: float) -> float:
    """Truncate at the first ``s_K`` below this. Beyond ``K`` the closure
    ``s_{K+j} = s_K r^j`` is exact to first order (``A_j = a s_j + O(s_j^2)``), so the
    error of the tail sum is ``O(s_K^2 / (1 - r))``; the threshold keeps it below 1e-16."""
    if r <= 0.0:
        return _SMALL
    return min(1e-9, math.sqrt(1e-16 * (1.0 - r)))


def _start(pop: Population, r: float) -> np.ndarray:
    """Forward recursion of the flux balance ``mu s_k = lambda A_{k-1}(s)``.

    Exact when ``A_{k-1}`` depends on ``s_{k-1}`` only (``bandwidth = 0``; a pure
    Python scalar map when the representation offers ``tail_map``); otherwise the
    ``bandwidth`` values beyond ``k - 1`` are extrapolated geometrically from the last
    two, and Newton's method corrects the result.
    """
    rho = pop.arrival_rate / pop.service_rate
    b = pop.bandwidth
    delta = _threshold(r)
    s = [1.0]
    if b == 0 and pop.tail_map is not None:
        x = 1.0
        while len(s) <= _KMAX:  # a scalar recursion along k (the occupancy, not states)
            x = rho * pop.tail_map(x)
            s.append(x)
            if x < delta:
                break
        return np.array(s[1:])
    c = pop.closure
    while len(s) <= _KMAX:
        k = len(s)
        lo = max(0, k - 1 - b)
        q = min(s[-1] / s[-2], 1.0) if k >= 2 and s[-2] > 0 else rho
        ext = [s[-1] * q ** j for j in range(1, b + c + 2)]
        window = np.array(s[lo:] + ext)
        x = max(rho * float(pop.dispatch(window)[k - 1 - lo].real), 0.0)
        s.append(x)
        if x < delta:
            break
    return np.array(s[1:])


def occupancy_fixed_point(pop: Population, *, tol: float = 1e-14, maxiter: int = 50,
                          eig_block: int = _EIG_BLOCK, strict: bool = False) -> FixedPoint:
    """Fixed point of the occupancy ODE by Newton's method, with its stability (module docstring).

    Parameters
    ----------
    pop : Population
    tol : float
        Stop when the Newton step is below ``tol`` (max norm) and the residual below
        ``10 tol``.
    maxiter : int
    eig_block : int
        Size of the leading block whose eigenvalues are computed densely.
    strict : bool
        Raise :class:`ConvergenceError` instead of warning on non-convergence.

    Returns
    -------
    FixedPoint
        With the drift Jacobian at the fixed point and the stability verdict.

    Raises
    ------
    UnstableError
        If the tail ratio ``lambda a / mu`` is not below 1 (no proper fixed point).
    ConvergenceError
        If Newton's method ends at an improper point (``s`` not decreasing in
        ``[0, 1]``), or with ``strict=True`` when it does not converge.

    Examples
    --------
    The dispatch tail ``A_j = s_j^d`` (the shortest of ``d`` samples) has the fixed point
    ``s_k = lambda^((d^k - 1) / (d - 1))`` (Mitzenmacher 2001); here ``d = 2``:

    >>> lam, d = 0.9, 2
    >>> fp = occupancy_fixed_point(Population(lam, dispatch=lambda s, power=None: s ** d))
    >>> k = np.arange(1, 6); bool(np.allclose(fp.s[:5], lam ** ((d ** k - 1) / (d - 1)), rtol=1e-13))
    True
    >>> fp.stable, round(fp.total() / lam, 6)   # E[T] = 2.614057 (MODELS.md)
    (True, 2.614057)
    """
    t0 = time.perf_counter()
    if not isinstance(pop, Population):
        raise ModelError(f"occupancy_fixed_point takes a Population; got {type(pop).__name__}")
    lam, mu = pop.arrival_rate, pop.service_rate
    a = pop.tail_slope
    r = pop.tail_ratio
    if r >= 1.0:
        raise UnstableError(f"the fixed point's tail ratio lambda*a/mu = {r:.6g} must be < 1 "
                            f"(lambda = {lam:g}, a = {a:g}, mu = {mu:g})")
    b = pop.bandwidth
    lower, upper = b + 1, max(b - 1, 0) + 1
    s = _start(pop, r)
    if len(s) < 2:
        s = np.append(s, s[-1] * max(r, 1e-3))
    nit = 0
    step = math.inf
    ds = np.zeros(1)
    for nit in range(1, maxiter + 1):
        F = pop.flux(s, r)
        ab = banded_jacobian(lambda x: pop.flux(x, r), s, lower, upper)
        ds = sla.solve_banded((lower, upper), ab, -F)
        s = s + ds
        step = float(np.abs(ds).max())
        if step <= tol:
            break
    res = float(np.abs(pop.flux(s, r)).max())
    converged = step <= tol and res <= max(10 * tol, 1e-13)
    if not converged:
        msg = f"mean-field Newton stopped with step {step:.2e}, residual {res:.2e} (tol={tol:g})"
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=2)
    if np.any(s < -1e-14) or np.any(np.diff(s) > 1e-12):
        raise ConvergenceError("mean-field Newton converged to an improper point (s not decreasing in [0, 1])")
    s = np.maximum(s, 0.0)
    # stability: the leading block densely (never K x K), the linear tail analytically
    lead = int(min(len(s), eig_block, max(2, np.count_nonzero(s > 1e-13) + b + 2)))
    band = b + 1
    ab = banded_jacobian(lambda x: pop.drift(x, r), s, band, band)
    eig = np.linalg.eigvals(band_to_dense(ab[:, :lead], band, band, lead))
    tail_abscissa = -(math.sqrt(mu) - math.sqrt(lam * a)) ** 2 if a > 0 else -mu
    abscissa = float(max(eig.real.max(), tail_abscissa if lead < len(s) else -math.inf))
    return FixedPoint(s=s, tail_ratio=r, residual=res, step=float(np.abs(ds).sum()), nit=nit,
                      jacobian_band=ab, band_width=band, eigenvalues=eig, spectral_abscissa=abscissa,
                      tail_abscissa=tail_abscissa, stable=bool(abscissa < 0), eig_block=lead,
                      seconds=time.perf_counter() - t0)


def _refined_correction(pop: Population, fp: FixedPoint, max_dim: int):
    """``V`` of ``E[s_k] = s*_k + V_k / N`` on the leading coordinates (Gast & Van Houdt 2017, Thm. 3.1).

    ``V = -A^{-1} (1/2 sum_jk d2f/ds_j ds_k W_jk + f~)`` with ``A = Df(s*)`` and
    ``A W + W A^T + Qn = 0``; the leading ``m`` coordinates are those with
    ``s_k > 1e-14`` (at most ``max_dim``), later ones are held at the fixed point.
    """
    b = pop.bandwidth
    s, r = fp.s, fp.tail_ratio
    K = len(s)
    m = int(min(K, max_dim, np.count_nonzero(s > 1e-14) + b + 2))

    def f_lead(x):  # the drift with the leading m coordinates replaced by x (..., m)
        full = np.broadcast_to(s.astype(x.dtype), x.shape[:-1] + (K,)).copy()
        full[..., :m] = x
        return pop.drift(full, r)[..., :m]

    x0 = s[:m].astype(float)
    band = b + 1
    A = band_to_dense(banded_jacobian(f_lead, x0, band, band), band, band, m)
    Qn = np.diag(pop.jump_variance(s, r)[:m])
    W = sla.solve_continuous_lyapunov(A, -Qn)
    W = 0.5 * (W + W.T)
    lyap_res = float(np.abs(A @ W + W @ A.T + Qn).max())
    sig, U = np.linalg.eigh(W)
    delta = 1e-5
    h = COMPLEX_STEP
    pts = np.concatenate([x0 + delta * U.T + 1j * h * U.T, x0 - delta * U.T + 1j * h * U.T])
    g = f_lead(pts).imag / h
    second = (g[:m] - g[m:]) / (2 * delta)  # row j: D2f[u_j, u_j]
    ftilde = pop.finite_drift_term(s, r)[:m]
    V = np.zeros(K)
    V[:m] = -np.linalg.solve(A, 0.5 * (sig @ second) + ftilde)
    return V, m, lyap_res, float(np.abs(ftilde).max())


def solve_refined(pop: Population, *, strict: bool = False, max_dim: int = _REFINED_MAX) -> RefinedFixedPoint:
    """The refined mean field of a population: its fixed point and the 1/N term ``V``.

    Parameters
    ----------
    pop : Population
        With finite ``servers`` the correction is computed; with ``servers = inf``
        ``V = 0`` (the refined value is the limit).
    strict : bool
        As for :func:`occupancy_fixed_point`.
    max_dim : int
        The correction is computed on the leading coordinates (those with
        ``s_k > 1e-14``, at most ``max_dim``); later coordinates are held at the fixed
        point (their correction is below the precision of the leading ones).

    Returns
    -------
    RefinedFixedPoint

    Raises
    ------
    ModelError
        If the fixed point is not locally stable (the expansion needs a stable one).

    Notes
    -----
    ``Qn = diag(lambda (A_{k-1} - A_k) + mu (s_k - s_{k+1}))`` since every jump moves one
    coordinate by 1/N; ``f~`` is the 1/N part of the drift when the finite-N rates
    differ from the limit ones (Gast, Bortolussi & Tribastone 2019, sec. 4).

    Examples
    --------
    Random routing to one server is N independent M/M/1 queues, for which the mean
    field is exact: the correction vanishes.

    >>> ref = solve_refined(Population(0.5, dispatch=lambda s, power=None: s, tail_slope=1.0, servers=10))
    >>> bool(np.abs(ref.V).max() < 1e-9), round(ref.total(), 12)   # E[L] per server = rho / (1 - rho)
    (True, 1.0)
    """
    t0 = time.perf_counter()
    fp = occupancy_fixed_point(pop, strict=strict)
    if not pop.is_finite:
        return RefinedFixedPoint(fp, np.zeros(fp.K), pop.servers, seconds=time.perf_counter() - t0)
    if not fp.stable:
        raise ModelError("the refined mean field needs a locally stable fixed point")
    V, m, lyap, drift_term = _refined_correction(pop, fp, max_dim)
    return RefinedFixedPoint(fp, V, pop.servers, dim=m, lyapunov_residual=lyap, drift_term=drift_term,
                             seconds=time.perf_counter() - t0)


register_solver(Population, name="fixed-point", priority=20, doc="mean-field fixed point by banded Newton, with "
                "the spectrum of its drift Jacobian",
                options=("tol", "maxiter", "eig_block", "strict"))(occupancy_fixed_point)
register_solver(Population, name="refined", priority=10, doc="refined mean field: the fixed point and its 1/N term "
                "(Lyapunov covariance, Gast & Van Houdt 2017)", options=("strict", "max_dim"))(solve_refined)

