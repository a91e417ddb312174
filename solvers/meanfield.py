"""Mean-field limits of occupancy processes: fixed point, stability, refined 1/N term.

An *occupancy process* describes ``N`` identical servers by the fractions ``s_k`` of
servers with at least ``k`` jobs (``s_0 = 1 >= s_1 >= s_2 >= ...``). A job arrives at
rate ``N lambda`` and joins a queue with at least ``j`` jobs with probability
``A_j(s)`` (the *dispatch tail*); each busy server completes at rate ``mu``. As
``N -> infinity`` the occupancy follows the ODE (Kurtz 1970; Mitzenmacher 2001;
Vvedenskaya, Dobrushin & Karpelevich 1996)::

    ds_k/dt = lambda (A_{k-1}(s) - A_k(s)) - mu (s_k - s_{k+1}),   k >= 1,

whose fixed point satisfies the flux balance ``mu s_k = lambda A_{k-1}(s)``.

Representation (``model.population()``, plain data)
---------------------------------------------------
``arrival_rate`` (lambda per server), ``service_rate`` (mu), ``servers`` (N, may be
``inf``), ``dispatch(s_full, power=None) -> A`` (vectorised over leading axes, accepts
complex input; ``s_full`` holds ``s_0..s_K`` followed by ``closure`` values beyond
``K``; returns ``A_0..A_K``; ``power`` replaces the window probability ``w -> w**d``),
``closure`` (int), ``tail_slope`` (``a`` with ``A_j ~ a s_j`` as ``s_j -> 0``, so the
tail of the fixed point is geometric with ratio ``r = lambda a / mu`` when ``a > 0``),
``power_correction`` (``w -> d/d(1/N)`` of the finite-N window probability, or
``None``), ``bandwidth`` (``A_j`` depends on ``s_{j-b} .. s_{j+b}``),
``stability_limit`` and ``stability_rule``.

Algorithms
----------
* Fixed point (:func:`occupancy_fixed_point`): Gauss-Seidel sweeps of the flux balance
  give the start and the truncation ``K`` (first ``s_K < 1e-17``); Newton's method on
  ``F_k(s) = lambda A_{k-1}(s) - mu s_k`` for ``k = 1..K`` with the *geometric tail
  closure* ``s_{K+j} = s_K r^j``. The Jacobian is banded; it is formed exactly by the
  complex-step derivative (Squire & Trapp 1998) with ``2b + 2`` column groups
  (Curtis, Powell & Reid 1974) and factored by ``scipy.linalg.solve_banded``.
  No ODE is integrated.
* Stability: eigenvalues of the drift Jacobian ``Df`` at the fixed point. The
  coordinates with ``s_k < 1e-13`` form a (block-)triangular tail whose spectrum is
  that of the linear birth-death drift ``(lambda a, mu)``, inside
  ``Re z <= -(sqrt(mu) - sqrt(lambda a))^2 < 0``; the leading block is done densely.
* Refined mean field (:func:`refined_correction`; Gast & Van Houdt 2017, Thm. 3.1,
  with the 1/N drift term of Gast, Bortolussi & Tribastone 2019):
  ``E[s] = s* + V/N + o(1/N)`` with ``V = -A^{-1}(1/2 D2f : W + f~)``, ``A = Df(s*)``,
  ``W`` solving the Lyapunov equation ``A W + W A^T + Qn = 0``, ``Qn`` the diagonal
  jump covariance, ``D2f : W = sum_jk d2f/ds_j ds_k W_jk`` (second directional
  derivatives along the eigenvectors of ``W``, by a complex step in one direction and a
  central difference in the other) and ``f~`` the 1/N part of the finite-N drift
  (sampling without replacement: ``C(Nw, d)/C(N, d) = w^d + d(d-1)/(2N) (w^d - w^{d-1})
  + O(N^-2)``).

References
----------
T. G. Kurtz, "Solutions of ordinary differential equations as limits of pure jump
Markov processes", J. Appl. Probab. 7, 1970. M. Mitzenmacher, IEEE TPDS 12(10), 2001.
N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM Meas. Anal.
Comput. Syst. 1(2), 2017. N. Gast, L. Bortolussi, M. Tribastone, "Size expansions of mean
field approximation: transient and steady-state analysis", Perform. Eval. 129, 2019.
W. Squire, G. Trapp, "Using complex variables to estimate derivatives of real
functions", SIAM Review 40, 1998. A. R. Curtis, M. J. D. Powell, J. K. Reid, "On the
estimation of sparse Jacobian matrices", IMA J. Appl. Math. 13, 1974.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from exactq.catalogue import register_method
from exactq.errors import AccuracyWarning, ConvergenceError, ModelError, UnstableError
from exactq.result import Result

__all__ = ["FixedPoint", "occupancy_fixed_point", "drift", "drift_jacobian", "refined_correction",
           "solve_meanfield", "solve_refined"]

_H = 1e-30            # complex step
_SMALL = 1e-17        # truncation: first s_K below this
_KMAX = 2_000_000
_EIG_BLOCK = 120
_REFINED_MAX = 400


@dataclass
class FixedPoint:
    """The mean-field fixed point of an occupancy process.

    Attributes
    ----------
    s : (K,) ndarray
        ``s_1 .. s_K``.
    tail_ratio : float
        ``r``: ``s_{K+j} = s_K r^j`` beyond ``K`` (0 for super-geometric tails).
    tail_sum : float
        ``sum_{k > K} s_k`` from the closure.
    residual : float
        ``max_k |lambda A_{k-1}(s) - mu s_k|``.
    step : float
        Sum of the absolute values of the last Newton step (an error estimate of
        ``sum_k s_k``).
    nit : int
        Newton iterations.
    eigenvalues : ndarray
        Eigenvalues of the drift Jacobian on the leading block.
    spectral_abscissa : float
        Largest real part (the leading block and the analytic tail bound together).
    stable : bool
        ``spectral_abscissa < 0``: the fixed point is locally asymptotically stable.
    """

    s: np.ndarray
    tail_ratio: float
    tail_sum: float
    residual: float
    step: float
    nit: int
    eigenvalues: np.ndarray
    spectral_abscissa: float
    tail_abscissa: float
    stable: bool
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def K(self) -> int:
        return len(self.s)

    def total(self) -> float:
        """``sum_{k >= 1} s_k`` (mean number of jobs per server)."""
        return float(self.s.sum() + self.tail_sum)


def _get(pop, name, default=None):
    if isinstance(pop, dict):
        return pop.get(name, default)
    return getattr(pop, name, default)


def _extend(pop, s, r, extra=1):
    """``s_0..s_K`` followed by the closure values ``s_{K+1}..s_{K+closure+extra}``.

    ``s`` has shape (..., K) (real or complex); the tail uses ``s_K r^j``.
    """
    c = int(_get(pop, "closure", 0)) + extra
    lead = s.shape[:-1]
    one = np.ones(lead + (1,), dtype=s.dtype)
    tail = s[..., -1:] * (r ** np.arange(1, c + 1))
    return np.concatenate([one, s, tail], axis=-1)


def _flux(pop, s, r):
    """``F_k = lambda A_{k-1}(s) - mu s_k``, k = 1..K (vectorised over leading axes)."""
    lam = float(_get(pop, "arrival_rate"))
    mu = float(_get(pop, "service_rate", 1.0))
    full = _extend(pop, s, r, extra=0)
    A = _get(pop, "dispatch")(full)
    K = s.shape[-1]
    return lam * A[..., :K] - mu * s


def drift(pop, s, r=0.0, power=None):
    """The mean-field drift ``f_k(s)``, k = 1..K, with the tail closure ratio ``r``."""
    lam = float(_get(pop, "arrival_rate"))
    mu = float(_get(pop, "service_rate", 1.0))
    full = _extend(pop, s, r, extra=1)
    K = s.shape[-1]
    disp = _get(pop, "dispatch")
    A = disp(full[..., :-1]) if power is None else disp(full[..., :-1], power=power)
    return lam * (A[..., :K] - A[..., 1:K + 1]) - mu * (s - full[..., 2:K + 2])


def _banded_jacobian(fun, s, lower, upper):
    """Banded Jacobian of ``fun`` at ``s`` by grouped complex steps (exact to rounding).

    Returns ``ab`` in the ``scipy.linalg.solve_banded`` layout ``(lower, upper)``.
    """
    K = len(s)
    period = lower + upper + 1
    groups = np.arange(K) % period
    P = np.zeros((period, K), dtype=complex)
    P[:] = s
    P[groups, np.arange(K)] += 1j * _H
    D = fun(P).imag / _H  # (period, K): row g = sum of the columns in group g
    ab = np.zeros((period, K))
    cols = np.arange(K)
    for off in range(-upper, lower + 1):  # row i = col + off
        rows = cols + off
        ok = (rows >= 0) & (rows < K)
        ab[upper + off, cols[ok]] = D[groups[cols[ok]], rows[ok]]
    return ab


def _band_to_dense(ab, lower, upper, K):
    J = np.zeros((K, K))
    cols = np.arange(K)
    for off in range(-upper, lower + 1):
        rows = cols + off
        ok = (rows >= 0) & (rows < K)
        J[rows[ok], cols[ok]] = ab[upper + off, cols[ok]]
    return J


def drift_jacobian(pop, s, r=0.0):
    """Dense Jacobian ``Df`` (K x K) of the drift at ``s`` (complex step; small K only)."""
    b = int(_get(pop, "bandwidth", 0))
    lower, upper = b + 1, b + 1
    ab = _banded_jacobian(lambda x: drift(pop, x, r), np.asarray(s, dtype=float), lower, upper)
    return _band_to_dense(ab, lower, upper, len(s))


def _threshold(r: float) -> float:
    """Truncate at the first ``s_K`` below this. Beyond ``K`` the closure
    ``s_{K+j} = s_K r^j`` is exact to first order (``A_j = a s_j + O(s_j^2)``), so the
    error of the tail sum is ``O(s_K^2 / (1 - r))``; the threshold keeps it below 1e-16."""
    if r <= 0.0:
        return _SMALL
    return min(1e-9, math.sqrt(1e-16 * (1.0 - r)))


def _start(pop, r):
    """Forward recursion of the flux balance ``mu s_k = lambda A_{k-1}(s)``.

    Exact when ``A_{k-1}`` depends on ``s_{k-1}`` only (``bandwidth = 0``; a pure
    Python scalar map when the representation offers ``tail_map``); otherwise the
    ``bandwidth`` values beyond ``k - 1`` are extrapolated geometrically from the last
    two, and Newton's method corrects the result.
    """
    lam = float(_get(pop, "arrival_rate"))
    mu = float(_get(pop, "service_rate", 1.0))
    rho = lam / mu
    b = int(_get(pop, "bandwidth", 0))
    delta = _threshold(r)
    tail_map = _get(pop, "tail_map")
    s = [1.0]
    if b == 0 and tail_map is not None:
        x = 1.0
        while len(s) <= _KMAX:
            x = rho * tail_map(x)
            s.append(x)
            if x < delta:
                break
        return np.array(s[1:])
    disp = _get(pop, "dispatch")
    c = int(_get(pop, "closure", 0))
    while len(s) <= _KMAX:
        k = len(s)
        lo = max(0, k - 1 - b)
        q = min(s[-1] / s[-2], 1.0) if k >= 2 and s[-2] > 0 else rho
        ext = [s[-1] * q ** j for j in range(1, b + c + 2)]
        window = np.array(s[lo:] + ext)
        x = max(rho * float(disp(window)[k - 1 - lo].real), 0.0)
        s.append(x)
        if x < delta:
            break
    return np.array(s[1:])


def occupancy_fixed_point(pop, *, tol: float = 1e-14, maxiter: int = 50, eig_block: int = _EIG_BLOCK,
                          strict: bool = False) -> FixedPoint:
    """Fixed point of the occupancy ODE by Newton's method (module docstring).

    Parameters
    ----------
    pop : mapping or object
        The population representation (module docstring).
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

    Raises
    ------
    UnstableError
        If ``lambda`` is not below the stability limit of the representation.

    Examples
    --------
    Power-of-two without errors: ``s_k = lambda^(2^k - 1)`` (Mitzenmacher 2001).

    >>> lam, d = 0.9, 2
    >>> pop = dict(arrival_rate=lam, service_rate=1.0, dispatch=lambda s, power=None: s ** d,
    ...            closure=0, tail_slope=0.0, bandwidth=0, stability_limit=1.0)
    >>> fp = occupancy_fixed_point(pop)
    >>> k = np.arange(1, 6); bool(np.allclose(fp.s[:5], lam ** (2.0 ** k - 1), rtol=1e-13))
    True
    """
    t0 = time.perf_counter()
    lam = float(_get(pop, "arrival_rate"))
    mu = float(_get(pop, "service_rate", 1.0))
    limit = float(_get(pop, "stability_limit", mu))
    if not lam < limit:
        raise UnstableError(f"arrival_rate must be < {limit:.6g} for a proper mean-field fixed point "
                            f"({_get(pop, 'stability_rule', 'stability limit')}); got {lam:g}")
    a = float(_get(pop, "tail_slope", 0.0))
    r = lam * a / mu
    if r >= 1.0:
        raise UnstableError(f"the fixed point's tail ratio lambda*a/mu = {r:.6g} must be < 1")
    b = int(_get(pop, "bandwidth", 0))
    lower, upper = b + 1, max(b - 1, 0) + 1
    s = _start(pop, r)
    if len(s) < 2:
        s = np.append(s, s[-1] * max(r, 1e-3))
    nit = 0
    step = math.inf
    ds = np.zeros(1)
    for nit in range(1, maxiter + 1):
        F = _flux(pop, s, r)
        ab = _banded_jacobian(lambda x: _flux(pop, x, r), s, lower, upper)
        ds = sla.solve_banded((lower, upper), ab, -F)
        s = s + ds
        step = float(np.abs(ds).max())
        if step <= tol:
            break
    res = float(np.abs(_flux(pop, s, r)).max())
    converged = step <= tol and res <= max(10 * tol, 1e-13)
    if not converged:
        msg = f"mean-field Newton stopped with step {step:.2e}, residual {res:.2e} (tol={tol:g})"
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=2)
    if np.any(s < -1e-14) or np.any(np.diff(s) > 1e-12):
        raise ConvergenceError("mean-field Newton converged to an improper point (s not decreasing in [0, 1])")
    s = np.maximum(s, 0.0)
    tail_sum = float(s[-1] * r / (1.0 - r)) if r > 0 else 0.0
    # stability: leading block densely, the linear tail analytically
    lead = int(min(len(s), eig_block, max(2, np.count_nonzero(s > 1e-13) + b + 2)))
    lo_up = b + 1
    ab = _banded_jacobian(lambda x: drift(pop, x, r), s, lo_up, lo_up)
    J = _band_to_dense(ab[:, :lead], lo_up, lo_up, lead)  # leading block only (never K x K)
    eig = np.linalg.eigvals(J)
    tail_abscissa = -(math.sqrt(mu) - math.sqrt(lam * a)) ** 2 if a > 0 else -mu
    abscissa = float(max(eig.real.max(), tail_abscissa if lead < len(s) else -math.inf))
    info = {"K": int(len(s)), "eig_block": lead, "newton_iterations": nit}
    return FixedPoint(s=s, tail_ratio=r, tail_sum=tail_sum, residual=res, step=float(np.abs(ds).sum()),
                      nit=nit, eigenvalues=eig, spectral_abscissa=abscissa, tail_abscissa=tail_abscissa,
                      stable=bool(abscissa < 0), seconds=time.perf_counter() - t0, info=info)


def refined_correction(pop, fp: FixedPoint, *, max_dim: int = _REFINED_MAX) -> tuple[np.ndarray, dict]:
    """The 1/N term ``V`` of the refined mean field: ``E[s_k] = s*_k + V_k / N + o(1/N)``.

    Parameters
    ----------
    pop : population representation (module docstring)
    fp : FixedPoint
        From :func:`occupancy_fixed_point`; must be stable.
    max_dim : int
        The correction is computed on the leading coordinates (those with
        ``s_k > 1e-14``, at most ``max_dim``); later coordinates are held at the fixed
        point (their correction is below the precision of the leading ones).

    Returns
    -------
    V : (K,) ndarray
        Zero beyond the leading block.
    info : dict
        ``dim`` (leading block size), ``lyapunov_residual``, ``drift_term`` (the norm of
        the 1/N drift part ``f~``).

    Notes
    -----
    Gast & Van Houdt (2017), Theorem 3.1: ``V = -A^{-1} (1/2 sum_jk d2f/ds_j ds_k W_jk
    + f~)`` with ``A = Df(s*)`` and ``A W + W A^T + Qn = 0``; ``Qn = diag(lambda (A_{k-1}
    - A_k) + mu (s_k - s_{k+1}))`` since every jump moves one coordinate by 1/N. The
    ``f~`` term is the 1/N part of the drift when the finite-N rates differ from the
    limit ones (Gast, Bortolussi & Tribastone 2019, sec. 4).
    """
    if not fp.stable:
        raise ModelError("the refined mean field needs a locally stable fixed point")
    lam = float(_get(pop, "arrival_rate"))
    mu = float(_get(pop, "service_rate", 1.0))
    b = int(_get(pop, "bandwidth", 0))
    s, r = fp.s, fp.tail_ratio
    K = len(s)
    m = int(min(K, max_dim, np.count_nonzero(s > 1e-14) + b + 2))

    def f_lead(x):  # drift with the leading m coordinates replaced by x (..., m)
        full = np.broadcast_to(s.astype(x.dtype), x.shape[:-1] + (K,)).copy()
        full[..., :m] = x
        return drift(pop, full, r)[..., :m]

    x0 = s[:m].astype(float)
    lower = upper = b + 1
    A = _band_to_dense(_banded_jacobian(f_lead, x0, lower, upper), lower, upper, m)
    full = _extend(pop, s, r, extra=1)
    Adisp = _get(pop, "dispatch")(full[:-1])
    up = lam * (Adisp[:K] - Adisp[1:K + 1])
    down = mu * (s - full[2:K + 2])
    Qn = np.diag((up + down)[:m])
    W = sla.solve_continuous_lyapunov(A, -Qn)
    W = 0.5 * (W + W.T)
    lyap_res = float(np.abs(A @ W + W @ A.T + Qn).max())
    sig, U = np.linalg.eigh(W)
    delta = 1e-5
    pts = np.concatenate([x0 + delta * U.T + 1j * _H * U.T, x0 - delta * U.T + 1j * _H * U.T])
    g = f_lead(pts).imag / _H
    second = (g[:m] - g[m:]) / (2 * delta)  # row j: D2f[u_j, u_j]
    T = sig @ second
    corr = _get(pop, "power_correction")
    ftilde = np.zeros(m)
    if corr is not None:
        d_power = _get(pop, "power")
        plain = drift(pop, s, r, power=d_power)
        shifted = drift(pop, s, r, power=lambda w: d_power(w) + corr(w))
        ftilde = (shifted - plain)[:m]
    V = np.zeros(K)
    V[:m] = -np.linalg.solve(A, 0.5 * T + ftilde)
    return V, {"dim": m, "lyapunov_residual": lyap_res, "drift_term": float(np.abs(ftilde).max())}


# ============================================================================ methods
def _stability_result(model, pop, t0, method):
    lim = float(_get(pop, "stability_limit"))
    return Result(value=lim, method=method, error_estimate=0.0, seconds=time.perf_counter() - t0,
                  info={"rule": _get(pop, "stability_rule", ""), "arithmetic": "float64"})


def _fixed_point_info(fp: FixedPoint) -> dict:
    lead = fp.eigenvalues[np.argsort(-fp.eigenvalues.real)][:5]
    return {
        "K": fp.K,
        "tail_ratio": fp.tail_ratio,
        "tail_sum": fp.tail_sum,
        "newton_iterations": fp.nit,
        "stable": fp.stable,
        "spectral_abscissa": fp.spectral_abscissa,
        "leading_eigenvalues": [[float(z.real), float(z.imag)] for z in lead],
        "tail_eigenvalue_bound": fp.tail_abscissa,
        "eig_block": fp.info.get("eig_block"),
        "occupancy_head": fp.s[:8].tolist(),
    }


@register_method(
    "meanfield",
    requires="population",
    doc="mean-field limit (n -> infinity): fixed point of the occupancy ODE by banded Newton, "
        "with its Jacobian spectrum",
    options=("tol", "strict"),
)
def solve_meanfield(model, measure, *, tol=1e-9, truncation=None, verify=False, strict=False, **_ignored):
    """Evaluate ``measure`` at the mean-field fixed point of ``model.population()``.

    The model maps the fixed point to its measures through
    ``model.population_measure(measure, s, tail_sum)``. The error estimate covers the
    fixed point of the limit; at finite ``servers`` the limit itself differs from the
    finite system by O(1/n) (see the ``refined`` and ``exact`` methods).
    """
    t0 = time.perf_counter()
    pop = model.population()
    if measure == "stability_limit":
        return _stability_result(model, pop, t0, "meanfield/closed-form")
    if _get(pop, "arrival_rate") is None:
        raise ModelError(f"missing required parameter arrival_rate for model {model.name}: needed for {measure}")
    fp = occupancy_fixed_point(pop, strict=strict)
    if not fp.stable:
        warnings.warn(f"the mean-field fixed point is not locally stable (spectral abscissa "
                      f"{fp.spectral_abscissa:.3e})", AccuracyWarning, stacklevel=3)
    value = model.population_measure(measure, fp.s, fp.tail_sum)
    err = model.population_measure_error(measure, fp) if hasattr(model, "population_measure_error") else None
    info = _fixed_point_info(fp)
    n = _get(pop, "servers", math.inf)
    info["servers"] = "inf" if not math.isfinite(n) else int(n)
    if math.isfinite(n):
        info["note"] = "the n -> infinity limit; the finite system differs by O(1/n)"
    return Result(value=value, method="meanfield/newton", residual=fp.residual, error_estimate=err,
                  nit=fp.nit, seconds=time.perf_counter() - t0, info=info)


@register_method(
    "refined",
    requires="population",
    doc="refined mean field (Gast & Van Houdt 2017): the fixed point plus its 1/n correction",
    options=("tol", "strict"),
)
def solve_refined(model, measure, *, tol=1e-9, truncation=None, verify=False, strict=False, **_ignored):
    """``measure`` at ``s* + V/n`` (:func:`refined_correction`), an O(1/n^2) approximation.

    Linear measures (mean queue length, mean response time, occupancy) are exact
    expectations of the expansion; nonlinear ones are evaluated at the corrected
    occupancy (first order only).
    """
    t0 = time.perf_counter()
    pop = model.population()
    if measure == "stability_limit":
        return _stability_result(model, pop, t0, "refined/closed-form")
    if _get(pop, "arrival_rate") is None:
        raise ModelError(f"missing required parameter arrival_rate for model {model.name}: needed for {measure}")
    fp = occupancy_fixed_point(pop, strict=strict)
    n = _get(pop, "servers", math.inf)
    info = _fixed_point_info(fp)
    if math.isfinite(n):
        V, extra = refined_correction(pop, fp)
        s = fp.s + V / n
        info.update({"correction_dim": extra["dim"], "lyapunov_residual": extra["lyapunov_residual"],
                     "drift_term_max": extra["drift_term"], "V_head": V[:8].tolist(), "servers": int(n)})
    else:
        s = fp.s
        info["servers"] = "inf"
    value = model.population_measure(measure, s, fp.tail_sum)
    info["accuracy"] = "approximation with error O(1/n^2) (Gast & Van Houdt 2017); not an error bound"
    return Result(value=value, method="refined/lyapunov", residual=fp.residual, nit=fp.nit,
                  seconds=time.perf_counter() - t0, info=info)
