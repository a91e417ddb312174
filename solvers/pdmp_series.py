"""The analytic stationary law of power-law window processes: the q-Pochhammer series (solver ``q-series``).

For ``a(w) = a w^alpha``, ``lambda(w) = lam w^gamma`` and ``W -> nu W`` the Kolmogorov
equation maps to a linear-increase protocol with constant-rate losses; its solution
and its moments are the series of :mod:`exactq.solvers.pdmp` (module docstring, with
the references). :func:`solve_series` evaluates them with mpmath at a scoped
precision, twice, for the error estimate.

Examples
--------
AIMD with constant-rate losses: ``E[W^n] = n! (a/lambda)^n / prod_{k<=n} (1 - nu^k)``;
for ``a = lambda`` and ``nu = 1/2``, ``E[W] = 2`` and ``E[W^2] = 16/3``:

>>> from exactq.representations.pdmp import PDMP, PowerLaw
>>> sol = solve_series(PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.5))
>>> bool(abs(sol.mean() - 2) < 1e-12 and abs(sol.moment(2) - 16 / 3) < 1e-12)
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import mpmath
import numpy as np
from scipy.special import logsumexp

from exactq.catalogue import register_solver
from exactq.errors import ConvergenceError, ModelError, NonFiniteError, NotApplicableError
from exactq.representations.pdmp import PDMP, PDMPSolution, StabilityVerdict

from .pdmp import _EPS, _GL_W, _GL_X, _LONG_EPS, _power_law_parameters, _support, _unstable, stability

__all__ = ["solve_series", "series_moment"]


#: the most factors of ``(x; q)_inf`` evaluated in mpmath (about 1 s); nearer ``q = 1`` the series is refused
QP_MAX_TERMS = 200_000
#: the most digits the float-series cancellation may ask for (beyond, densities are refused)
MAX_SERIES_DIGITS = 300


class _QTooClose(NotApplicableError):
    """``q = nu^m`` is so close to 1 that the q-Pochhammer products and series are out of reach."""


def _qp_terms(q) -> int:
    """Factors of ``(x; q)_inf`` until ``q^j`` is below the working precision: ``dps ln 10 / ln(1/q)``."""
    lq = -float(mpmath.log(q))
    return int(math.ceil((mpmath.mp.dps + 10) * math.log(10) / lq)) + 16 if lq > 0 else 10**18


def _qp(x, q):
    """``(x; q)_inf`` with as many factors as ``q`` needs (mpmath's default stops at ``50 prec``)."""
    terms = _qp_terms(q)
    if terms > QP_MAX_TERMS:
        raise _QTooClose(f"q = nu^m = {float(q):.12g} is too close to 1: (x; q)_inf needs about {terms:.3g} factors, "
                         f"above {QP_MAX_TERMS}")
    return mpmath.qp(x, q, maxterms=terms)


def _float(value, what: str) -> float:
    """``value`` (an mpf) as a float, or :class:`NonFiniteError` with its value when it overflows float64."""
    v = float(value)
    if math.isinf(v) and mpmath.isfinite(value):
        raise NonFiniteError(f"{what} = {mpmath.nstr(value, 6)} is beyond the float64 range (about 1.8e308)")
    return v


# ============================================================================ the q-series
def _phi(s, q):
    """``Phi(s) = Gamma(s) (q^s; q)_inf`` at the current mpmath precision (entire in ``s``).

    For ``s <= 0`` the poles of ``Gamma`` cancel the zeros of ``(q^s; q)_inf``:
    ``Phi(s) = Gamma(s + N) (q^(s+N); q)_inf prod_{i<N} (1 - q^(s+i)) / (s + i)``, with
    ``(1 - q^t) / t = ln(1/q)`` at ``t = 0``.
    """
    s, q = mpmath.mpf(s), mpmath.mpf(q)
    if s > 0:
        return mpmath.gamma(s) * _qp(q**s, q)
    N = int(mpmath.ceil(1 - s))
    out = mpmath.gamma(s + N) * _qp(q ** (s + N), q)
    lq = mpmath.log(q)
    for i in range(N):
        t = s + i
        out *= -lq if t == 0 else -mpmath.expm1(t * lq) / t
    return out


def series_moment(a: float, alpha: float, lam: float, gamma: float, nu: float, k: float, *, dps: int = 30):
    """``E[W^k] = theta^(-k/m) Phi(s0 + k/m) / Phi(s0)`` of the unbounded power-law process (mpmath).

    ``m = gamma + 1 - alpha > 0``, ``theta = lam / (a m)``, ``q = nu^m``,
    ``s0 = (1 - alpha) / m``; evaluated at ``dps`` digits (scoped).

    Examples
    --------
    AIMD with constant-rate losses: ``E[W^n] = n! (a/lam)^n / prod_{k<=n} (1 - nu^k)``,
    e.g. ``16/3`` for ``n = 2``, ``a/lam = 1``, ``nu = 1/2``; a multiplicative increase
    (``a(w) = a w``, losses ``lam w``): ``E[W] = (a/lam) / ln(1/nu)``:

    >>> with mpmath.workdps(30):
    ...     aimd = abs(series_moment(1, 0, 1, 0, 0.5, 2) - mpmath.mpf(16) / 3)
    ...     mult = abs(series_moment(0.01, 1, 1e-3, 1, 0.875, 1) - 10 / mpmath.log(8 / mpmath.mpf(7)))
    >>> bool(aimd < 1e-25 and mult < 1e-25)
    True
    """
    with mpmath.workdps(dps):
        m = mpmath.mpf(gamma) + 1 - mpmath.mpf(alpha)
        if not m > 0:
            raise ModelError(f"the series needs m = gamma + 1 - alpha > 0; got {float(m):.6g}")
        q = mpmath.mpf(nu) ** m
        theta = mpmath.mpf(lam) / (mpmath.mpf(a) * m)
        s0 = (1 - mpmath.mpf(alpha)) / m
        kk = mpmath.mpf(k)
        return +(theta ** (-kk / m) * _phi(s0 + kk / m, q) / _phi(s0, q))


@dataclass
class _QSeries:
    """The series law of a stable power-law process with ``m > 0`` (module docstring)."""

    a: float
    alpha: float
    lam: float
    gamma: float
    nu: float
    w_min: float | None
    dps: int

    def __post_init__(self):
        self.m = self.gamma + 1.0 - self.alpha
        self.q = self.nu ** self.m
        self.theta = self.lam / (self.a * self.m)
        self.s0 = (1.0 - self.alpha) / self.m
        # log |c_n| and the cancellation the float series suffers: sum_n |c_n|
        n = np.arange(0, 20001)
        lq = math.log(self.q)
        logc = 0.5 * n * (n - 1) * lq - np.concatenate([[0.0], np.cumsum(np.log1p(-self.q ** n[1:]))])
        # terms with log |c_n| < -800 are below the float range whatever u is
        alive = np.flatnonzero(logc > -800.0)
        last = int(alive[-1]) + 1 if alive.size else 1
        self.logc = logc[:last]
        self.sign = np.where(n[:last] % 2 == 0, 1.0, -1.0)
        log10_cancellation = float(logsumexp(self.logc)) / math.log(10)  # in log space: it overflows near q = 1
        if last == n.size and self.logc[-1] > self.logc[-2] or log10_cancellation > MAX_SERIES_DIGITS:
            raise _QTooClose(f"q = nu^m = {self.q:.12g} is too close to 1: the series cancels to about "
                             f"10^{log10_cancellation:.3g}")
        self.cancellation = 10.0 ** log10_cancellation
        self.float_ok = self.cancellation <= 1e6
        self.mp_dps = max(self.dps, int(17 + log10_cancellation + 8))
        # normalisation: int_0^inf x^-alpha H(x^m) dx = Phi(s0) theta^-s0 / m; with a floor, conditioned
        full, full_err = self._twice(lambda: _phi(self.s0, self.q) * mpmath.mpf(self.theta) ** (-self.s0))
        if self.w_min is None:
            self.norm, self.norm_err = full, full_err
            self.tail_prob = 1.0
        else:
            self.norm, self.norm_err = self._tail(self.s0)
            self.tail_prob = float(self.norm / full)
            if self.theta * self.w_min ** self.m > 600 or self.tail_prob < 1e-200:
                self.float_ok = False
        self.C = float(self.m / self.norm)
        self._mp_terms: dict = {}
        self.scale = max(self.moment(1.0)[0], self.w_min or 0.0)
        if self.w_min is None:
            self._lower_tail_setup()

    # -- mpmath pieces, each computed at two precisions ---------------------------------
    def _twice(self, fn):
        with mpmath.workdps(self.dps):
            lo = fn()
        with mpmath.workdps(self.dps + 20):
            hi = fn()
            err = abs(hi - lo)
        return hi, err

    def _tail_sum(self, s):
        """``sum_n c_n (theta q^-n)^-s Gamma(s, theta q^-n w_min^m)`` (= int_{w_min}^inf u^(s-1) H)."""
        q, theta = mpmath.mpf(self.q), mpmath.mpf(self.theta)
        U = mpmath.mpf(self.w_min) ** mpmath.mpf(self.m)
        s = mpmath.mpf(s)
        cut = mpmath.mp.dps * 2.31 + 60
        total, c, n = mpmath.mpf(0), mpmath.mpf(1), 0
        while True:
            rate = theta * q ** (-n)
            z = rate * U
            term = c * rate ** (-s) * mpmath.gammainc(s, z)
            total += term
            if z > cut and abs(term) <= mpmath.eps * abs(total):
                return total
            n += 1
            if n > 100000:
                raise ConvergenceError("the incomplete-gamma series for the floored moments did not converge "
                                       "in 100000 terms")
            c *= -q ** (n - 1) / (1 - q**n)

    def _tail(self, s):
        dps = max(self.dps, self.mp_dps)
        for _ in range(4):
            with mpmath.workdps(dps):
                lo = self._tail_sum(s)
            with mpmath.workdps(dps + 20):
                hi = self._tail_sum(s)
                err = abs(hi - lo)
                if err <= abs(hi) * mpmath.mpf(10) ** -17:
                    return hi, err
            dps += 30
        return hi, err

    # -- the law -----------------------------------------------------------------------
    def moment(self, k: float) -> tuple[float, float]:
        s = self.s0 + k / self.m
        if self.w_min is None:
            val, err = self._twice(lambda: _phi(s, self.q) * mpmath.mpf(self.theta) ** (-s) / self.norm)
        else:
            num, nerr = self._tail(s)
            with mpmath.workdps(self.dps + 20):
                val = num / self.norm
                err = abs(val) * (nerr / abs(num) + self.norm_err / abs(self.norm))
        v = _float(val, f"E[W^{k:g}]")
        return v, float(err) + abs(v) * 2 * _EPS

    # -- a rigorous bound on the lower tail (no floor): Markov's inequality for 1/W ----------
    def _lower_tail_setup(self) -> None:
        """Negative moments ``E[W^-k]`` (``Phi`` is entire) for ``P(W <= x) <= x^k E[W^-k]``."""
        self.neg_k = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
        logs = []
        with mpmath.workdps(self.dps):
            for k in self.neg_k:
                v = _phi(self.s0 - k / self.m, self.q) * mpmath.mpf(self.theta) ** (k / self.m) / self.norm
                logs.append(float(mpmath.log(abs(v))))
        self.neg_log_moments = np.array(logs)

    def lower_tail_bound(self, x: np.ndarray) -> np.ndarray:
        """``min_k x^k E[W^-k]`` over ``k = 1, 2, 4, ..., 64``: a bound on ``P(W <= x)``."""
        with np.errstate(divide="ignore"):
            logb = np.min(self.neg_k[None, :] * np.log(x)[:, None] + self.neg_log_moments[None, :], axis=1)
        return np.minimum(np.exp(logb), 1.0)

    def _density_bound(self, x: np.ndarray) -> np.ndarray:
        """``f(x) <= max(lambda(x), lambda(x/nu)) P(W <= x/nu) / a(x)`` (the Kolmogorov equation)."""
        lam = self.lam * np.maximum(x**self.gamma, (x / self.nu) ** self.gamma)
        return lam * self.lower_tail_bound(x / self.nu) / (self.a * x**self.alpha)

    def density(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=float)
        out = np.zeros_like(x)
        err = np.zeros_like(x)
        lower = self.w_min if self.w_min is not None else 0.0
        inside = (x > 0) & (x >= lower) & np.isfinite(x)
        target = 1e-12 / self.scale
        if self.w_min is None and inside.any():
            # far in the lower tail the density is below 1e-3 * target by a rigorous bound: 0
            with np.errstate(all="ignore"):
                bound = np.where(inside, self._density_bound(np.where(inside, x, 1.0)), 0.0)
            negligible = inside & (bound <= 1e-3 * target)
            err[negligible] = bound[negligible]
            inside &= ~negligible
        if not inside.any():
            return out, err
        xi = x[inside]
        if self.float_ok:
            f, e = self._density_float(xi, np.float64)
            # where the float series cancels beyond 1e-12 of the density's scale 1 / E[W]: 80-bit
            # extended precision, then mpmath
            bad = e > target
            if bad.any() and _LONG_EPS < _EPS:
                f[bad], e[bad] = self._density_float(xi[bad], np.longdouble)
                bad = e > target
            if bad.any():
                lost = math.log10(float(e[bad].max()) / (4 * _EPS * target))
                dps = int(max(self.dps, 20 + math.ceil(lost)))
                f[bad] = [self._density_mp(v, dps) for v in xi[bad]]
                e[bad] = np.abs(f[bad]) * 1e-15
            out[inside], err[inside] = np.maximum(f, 0.0), e
            return out, err
        vals = np.array([self._density_mp(v, self.mp_dps) for v in xi])
        out[inside] = vals
        err[inside] = np.abs(vals) * 1e-15
        return out, err

    def _density_float(self, xi: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
        """The series in ``dtype`` arithmetic, with a rounding bound from the sum of |terms|."""
        eps = float(np.finfo(dtype).eps)
        u = xi.astype(dtype) ** dtype(self.m)
        # every term with theta q^-n u below 800 + max log|c_n| counts (beyond, exp underflows)
        need = math.log((800.0 + max(float(self.logc.max()), 0.0)) / (self.theta * float(u.min())))
        n_terms = int(min(self.logc.size, max(1, math.ceil(need / -math.log(self.q)) + 2)))
        n = np.arange(n_terms)
        rate = dtype(self.theta) * np.exp(-n.astype(dtype) * np.log(dtype(self.q)))
        logc = self._logc_in(dtype)[:n_terms]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            terms = np.exp(logc[None, :] - u[:, None] * rate[None, :])
            H = terms @ self.sign[:n_terms].astype(dtype)
            absH = terms.sum(1)
            pre = dtype(self.C) * xi.astype(dtype) ** dtype(-self.alpha)
            f = (pre * H).astype(float)
            e = (pre * absH).astype(float) * 4 * eps * math.sqrt(n_terms) + np.abs(f) * 4 * _EPS
        f = np.where(np.isfinite(f), f, 0.0)
        e = np.where(np.isfinite(e), e, np.inf)
        return f, e

    def _logc_in(self, dtype) -> np.ndarray:
        if dtype is np.float64:
            return self.logc
        n = np.arange(self.logc.size).astype(dtype)
        lq = np.log(dtype(self.q))
        qn = np.exp(n[1:] * lq)
        return 0.5 * n * (n - 1) * lq - np.concatenate([[dtype(0)], np.cumsum(np.log1p(-qn))])

    def _density_mp(self, x: float, dps: int) -> float:
        """The series at ``x`` in mpmath at ``dps`` digits (coefficients cached per precision)."""
        cache = self._mp_terms.setdefault(dps, ([], []))
        coeffs, rates = cache
        with mpmath.workdps(dps):
            q = mpmath.mpf(self.q)
            u = mpmath.mpf(x) ** mpmath.mpf(self.m)
            cut = dps * 2.31 + 60
            total, n = mpmath.mpf(0), 0
            while True:
                if n == len(coeffs):
                    if n == 0:
                        coeffs.append(mpmath.mpf(1))
                        rates.append(mpmath.mpf(self.theta))
                    else:
                        coeffs.append(-coeffs[-1] * q ** (n - 1) / (1 - q**n))
                        rates.append(rates[-1] / q)
                z = rates[n] * u
                total += coeffs[n] * mpmath.exp(-z)
                if z > cut + abs(mpmath.log(abs(coeffs[n]) + 1)):
                    break
                n += 1
            f = self.m / self.norm * mpmath.mpf(x) ** (-mpmath.mpf(self.alpha)) * total
            return max(float(f), 0.0)

    def _panels(self, top: float) -> "_Panels":
        """The cumulative panels up to at least ``top`` (cached and extended by doubling)."""
        cached = getattr(self, "_panel_cache", None)
        if cached is not None and cached.top >= top:
            return cached
        if self.w_min is not None:
            start, bound = self.w_min, None
        else:
            # start where P(W <= x) < 1e-18 (Markov's bound on 1/W)
            start = float(np.exp(((np.log(1e-18) - self.neg_log_moments) / self.neg_k).max()))
            bound = self.lower_tail_bound
        reach = max(top, 4.0 * self.scale, 2.0 * (cached.top if cached is not None else 0.0))
        self._panel_cache = _Panels(self.density, start, self.scale, reach, bound)
        return self._panel_cache

    def cdf(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=float)
        fin = x[np.isfinite(x)]
        return self._panels(float(fin.max()) if fin.size else 0.0).cdf(x)

    def quantile(self, p: float) -> float:
        """The ``p``-quantile: panels extended until they pass ``p``, then the root of the CDF."""
        top = 4.0 * self.scale
        for _ in range(60):
            panels = self._panels(top)
            if panels.cum[-1] >= p:
                return panels.quantile(p)
            top = 2.0 * panels.top
        raise ConvergenceError(f"the {p} quantile lies beyond {top:.3g}")


_LEG_V = np.polynomial.legendre.legvander(_GL_X, _GL_X.size - 1)  # P_k at the Gauss nodes
_LEG_FWD = (_LEG_V * _GL_W[:, None]).T * ((2 * np.arange(_GL_X.size) + 1) / 2.0)[:, None]
_LEG_INT = np.stack([np.polynomial.legendre.legint(np.eye(_GL_X.size)[k], lbnd=-1) for k in range(_GL_X.size)],
                    axis=1)  # column k: the antiderivative (from -1) of P_k, in Legendre coefficients


class _Panels:
    """``P(W <= x) = int_start^x f``: a density's Legendre expansion (degree 19) on fixed panels.

    Panels: geometric (ratio 1.1) from ``start`` to the scale ``E[W]``, then uniform of
    width ``scale / 10`` up to ``top``. On each panel the 20-point Gauss-Legendre values
    give the Legendre coefficients of ``f``; their antiderivative gives the CDF inside
    the panel (spectrally accurate for the smooth density). Below ``start`` the CDF is 0
    within ``below_bound(x)``; above ``top`` it is not available.
    """

    def __init__(self, density, start: float, scale: float, top: float, below_bound):
        self.start, self.top, self.below_bound = start, top, below_bound
        geo_hi = min(max(scale, start * 1.1), top)
        if start > 0:
            n_geo = max(int(math.ceil(math.log(max(geo_hi, start * 1.0001) / start) / math.log(1.1))), 1)
            edges = [np.geomspace(start, max(geo_hi, start * 1.0001), n_geo + 1)]
        else:
            edges = [np.array([0.0]), np.geomspace(scale * 1e-4, max(geo_hi, scale * 1.1e-4), 100)]
        if top > geo_hi:
            edges.append(np.linspace(geo_hi, top, int(math.ceil((top - geo_hi) / (scale / 10.0))) + 1))
        self.edges = edges = np.unique(np.concatenate(edges))
        self.left = edges[:-1]
        self.half = 0.5 * (edges[1:] - edges[:-1])
        nodes = (self.left + self.half)[:, None] + self.half[:, None] * _GL_X[None, :]
        f, fe = density(nodes.ravel())
        f, fe = f.reshape(nodes.shape), fe.reshape(nodes.shape)
        self.anti = (f @ _LEG_FWD.T) @ _LEG_INT.T  # antiderivative on each panel, per unit of xi
        panel = (f @ _GL_W) * self.half
        self.panel_err = (fe @ _GL_W) * self.half + np.abs(panel) * 4 * _EPS
        self.cum = np.concatenate([[0.0], np.cumsum(panel)])
        self.cum_err = np.concatenate([[0.0], np.cumsum(self.panel_err)])
        self.base_err = float(below_bound(np.array([start]))[0]) if below_bound is not None and start > 0 else 0.0

    def _inside(self, xa: np.ndarray):
        j = np.clip(np.searchsorted(self.edges, xa, side="right") - 1, 0, self.left.size - 1)
        xi = np.clip((xa - self.left[j]) / self.half[j] - 1.0, -1.0, 1.0)
        leg = np.polynomial.legendre.legvander(xi, _LEG_INT.shape[0] - 1)
        return j, self.cum[j] + np.einsum("ij,ij->i", leg, self.anti[j]) * self.half[j]

    def cdf(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros(x.shape)
        err = np.zeros(x.shape)
        fin = np.isfinite(x)
        out[~fin & (x > 0)] = 1.0
        above = fin & (x > self.start)
        if self.below_bound is not None:
            low = fin & (x > 0) & ~above
            err[low] = self.below_bound(x[low])
        if above.any():
            j, F = self._inside(x[above])
            out[above] = np.clip(F, 0.0, 1.0)
            err[above] = self.cum_err[j] + self.panel_err[j] + self.base_err
        return out, err

    def quantile(self, p: float) -> float:
        j = int(np.clip(np.searchsorted(self.cum, p) - 1, 0, self.left.size - 1))
        lo, hi = self.edges[j], self.edges[j + 1]
        from scipy.optimize import brentq

        return float(brentq(lambda v: self._inside(np.array([v]))[1][0] - p, lo, hi, xtol=1e-13 * hi, rtol=1e-13))


def _pareto_solution(rep: PDMP, verdict: StabilityVerdict, t0: float) -> PDMPSolution:
    """``m = 0`` with a floor: ``f(x) = eta w_min^eta x^-(eta+1)`` on ``[w_min, inf)``."""
    eta = float(verdict.details["tail_index"])
    w0 = float(rep.w_min)

    def moment(k):
        if k >= eta:
            return math.inf, 0.0
        v = eta / (eta - k) * w0**k
        return v, abs(v) * 1e-14

    def density(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(x >= w0, eta * w0**eta * np.power(np.maximum(x, w0), -eta - 1.0), 0.0)
        return f, np.abs(f) * 1e-14

    def cdf(x):
        F = np.where(x >= w0, 1.0 - np.power(w0 / np.maximum(x, w0), eta), 0.0)
        return F, np.full(F.shape, 1e-15)

    info = {"stability": verdict.to_info(), "law": "Pareto", "tail_index": eta,
            "error_estimate_kind": "closed form (the tail index from Lambert's W, refined at 30 digits)",
            "arithmetic": "float64 from a 30-digit root"}
    return PDMPSolution(verdict, "q-series/pareto", _support(rep), moment_fn=moment, density_fn=density, cdf_fn=cdf,
                        quantile_fn=lambda p: w0 * (1.0 - p) ** (-1.0 / eta), info=info,
                        seconds=time.perf_counter() - t0)


def _product_solution(rep: PDMP, verdict: StabilityVerdict, params: tuple, dps: int, why: str,
                      t0: float) -> PDMPSolution:
    """Moments of order ``k = j m`` (``j`` an integer) when ``q`` is too close to 1 for the series.

    ``Phi(s + 1) = s Phi(s) / (1 - q^s)`` (from ``Gamma(s + 1) = s Gamma(s)`` and
    ``(q^s; q)_inf = (1 - q^s) (q^(s+1); q)_inf``) turns the moment ratio into a finite
    product, ``E[W^(j m)] = theta^-j prod_{i<j} (s0 + i) / (1 - q^(s0 + i))``, which
    needs no infinite product; other orders, the density and the CDF need the series
    and are refused (the ``numerical`` method computes them).

    Examples
    --------
    AIMD (``m = 1``) with ``nu = 0.999999``: ``E[W] = (a / lam) / (1 - nu) = 10^6``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> sol = solve_series(PDMP(PowerLaw(1.0), PowerLaw(1.0), nu=0.999999))
    >>> bool(abs(sol.mean() / 1e6 - 1) < 1e-9), sol.info["law"].startswith("finite product")
    (True, True)
    """
    a, alpha, lam, gamma, nu = params

    def product(k, digits):
        with mpmath.workdps(digits):
            m = mpmath.mpf(gamma) + 1 - mpmath.mpf(alpha)
            q, theta, s0 = mpmath.mpf(nu) ** m, mpmath.mpf(lam) / (mpmath.mpf(a) * m), (1 - mpmath.mpf(alpha)) / m
            j = int(round(k / float(m)))
            out = theta ** (-j)
            for i in range(j):
                out *= (s0 + i) / -mpmath.expm1((s0 + i) * mpmath.log(q))
            return +out

    def refused(what):
        return NotApplicableError(f"{what}: the q-series does not apply ({why}); use --method numerical")

    def moment(k):
        j = k / (gamma + 1.0 - alpha)
        if not (abs(j - round(j)) <= 1e-12 and round(j) >= 0):
            raise refused(f"E[W^{k:g}] (an order that is not a multiple of m = {gamma + 1.0 - alpha:g})")
        lo, hi = product(k, dps), product(k, dps + 20)
        v = _float(hi, f"E[W^{k:g}]")
        return v, float(abs(hi - lo)) + abs(v) * 2 * _EPS

    def law(_x):
        raise refused("the density and the CDF")

    info = {"stability": verdict.to_info(),
            "law": "finite product for the moments of order j m (the q-series is out of reach near q = 1)",
            "series_refusal": why, "arithmetic": f"mpmath at {dps} and {dps + 20} digits",
            "error_estimate_kind": "difference of two mpmath precisions"}
    return PDMPSolution(verdict, "q-series/product", _support(rep), moment_fn=moment, density_fn=law, cdf_fn=law,
                        quantile_fn=law, info=info, seconds=time.perf_counter() - t0)


@register_solver(PDMP, name="q-series", priority=20, applies=lambda rep: rep.series_refusal(),
                 doc="analytic stationary law of power-law profiles with W -> nu W: the q-Pochhammer series "
                     "(floor allowed, no ceiling)", options=("dps", "tol", "strict"))
def solve_series(rep: PDMP, *, dps: int = 30, tol: float = 1e-9, strict: bool = False) -> PDMPSolution:
    """The analytic stationary law of power-law profiles (module docstring).

    Parameters
    ----------
    rep : PDMP
        Power-law increase and loss rate, ``W -> nu W``, an optional floor, no ceiling.
    dps : int
        Decimal digits of the mpmath evaluations (each done at ``dps`` and ``dps + 20``;
        their difference is the error estimate). The float series for densities
        switches to mpmath when its cancellation ``sum_n |c_n|`` exceeds ``1e6``.
    tol, strict : float, bool
        ``strict=True`` raises :class:`ConvergenceError` when a moment's estimated
        relative error exceeds ``tol`` (it never does at the default precision).

    Returns
    -------
    PDMPSolution
        With only the verdict for an unstable process.

    Raises
    ------
    NotApplicableError
        The profiles are not declared power laws, the decrease is not multiplicative,
        or there is a ceiling.

    Examples
    --------
    Losses at rate ``lam W`` with linear increase: ``E[W^2] = a / (lam (1 - nu))``:

    >>> from exactq.representations.pdmp import PDMP, PowerLaw
    >>> sol = solve_series(PDMP(PowerLaw(2.0), PowerLaw(0.01, 1.0), nu=0.7))
    >>> bool(abs(sol.moment(2) - 2.0 / (0.01 * 0.3)) < 1e-9)
    True
    """
    t0 = time.perf_counter()
    why = rep.series_refusal() if isinstance(rep, PDMP) else "not a PDMP"
    if why:
        raise NotApplicableError(f"the q-series does not apply: {why}")
    verdict = stability(rep)
    if not verdict.stable:
        return _unstable(rep, verdict, "q-series", t0)
    a, alpha, lam, gamma, nu = _power_law_parameters(rep)
    if abs(gamma + 1.0 - alpha) <= 1e-12:
        return _pareto_solution(rep, verdict, t0)
    try:
        law = _QSeries(a, alpha, lam, gamma, nu, rep.w_min, int(dps))
    except _QTooClose as exc:
        if rep.w_min is not None:
            raise NotApplicableError(f"the q-series does not apply: {exc}; use --method numerical") from None
        return _product_solution(rep, verdict, (a, alpha, lam, gamma, nu), int(dps), str(exc), t0)

    def moment(k):
        v, e = law.moment(k)
        if strict and e > tol * max(abs(v), 1e-300):
            raise ConvergenceError(f"q-series moment k={k:g}: estimated relative error {e / abs(v):.2e} > tol={tol:g}")
        return v, e

    info = {
        "stability": verdict.to_info(),
        "law": "q-Pochhammer series" + (" conditioned on W >= w_min" if rep.w_min is not None else ""),
        "m": law.m, "q": law.q, "theta": law.theta, "s0": law.s0,
        "series_cancellation": law.cancellation,
        "arithmetic": (f"moments in mpmath at {dps} and {dps + 20} digits; densities in "
                       + ("float64" if law.float_ok else f"mpmath at {law.mp_dps} digits")),
        "error_estimate_kind": "moments: difference of two mpmath precisions; density: float rounding bound "
                               "times the series' cancellation; CDF: Gauss-Legendre quadrature of the density",
    }
    if rep.w_min is not None:
        info["unbounded_tail_probability"] = law.tail_prob
    return PDMPSolution(verdict, "q-series", _support(rep), moment_fn=moment, density_fn=law.density,
                        cdf_fn=law.cdf, quantile_fn=law.quantile,
                        info=info, seconds=time.perf_counter() - t0)
