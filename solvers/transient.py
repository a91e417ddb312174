"""Transient analysis of CTMCs by uniformisation with Fox–Glynn Poisson weights.

Three functions:

- :func:`fox_glynn` — the Poisson weights ``e^{-λ} λ^k / k!`` on a window
  ``[left, right]`` that holds all but ``eps`` of the mass, computed without
  under- or overflow for ``λ`` up to ``1e7`` and beyond.
- :func:`transient` — ``p(t) = p(0) exp(Q t)`` by uniformisation (Jensen's method).
- :func:`bounded_until` — the CSL probability of ``a U<=t b`` from every state, by
  backward uniformisation on the chain made absorbing in ``b`` and in ``¬a ∧ ¬b``.

References
----------
.. [FG88] B. L. Fox and P. W. Glynn, "Computing Poisson probabilities",
   Communications of the ACM 31(4):440–445, 1988.
.. [Jan11] D. N. Jansen, "Understanding Fox and Glynn's 'Computing Poisson
   probabilities'", Technical report ICIS-R11001, Radboud University Nijmegen, 2011.
.. [Jen53] A. Jensen, "Markoff chains as an aid in the study of Markoff processes",
   Skandinavisk Aktuarietidskrift 36:87–91, 1953.
.. [BHHK03] C. Baier, B. Haverkort, H. Hermanns and J.-P. Katoen, "Model-checking
   algorithms for continuous-time Markov chains", IEEE Transactions on Software
   Engineering 29(6):524–541, 2003.
.. [Can17] C. Canonne, "A short note on Poisson tail bounds", 2017.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from exactq.errors import ConvergenceError, ModelError

__all__ = ["FoxGlynn", "fox_glynn", "transient", "transient_pair", "pair_from_projections", "bounded_until", "transient_values", "cumulative_reward",
           "long_run_values"]

#: Uniformisation rate factor: q = UNIFORMISATION_FACTOR * max_i |Q_ii| (keeps P's diagonal > 0).
UNIFORMISATION_FACTOR = 1.02


@dataclass(frozen=True, eq=False)
class FoxGlynn:
    """Truncated, normalised Poisson weights.

    Attributes
    ----------
    rate_time : float
        The Poisson parameter ``λ`` (``q t`` in uniformisation).
    eps : float
        The requested bound on the mass outside ``[left, right]``.
    left, right : int
        The window of terms kept (inclusive).
    weights : (right - left + 1,) ndarray
        ``weights[k - left]`` is the Poisson probability of ``k`` conditioned on the
        window; they sum to 1.
    total_mass_lost : float
        A rigorous upper bound on the Poisson mass outside the window (``<= eps``);
        it is also a bound on the total-variation distance between ``weights`` and
        the Poisson distribution.
    """

    rate_time: float
    eps: float
    left: int
    right: int
    weights: np.ndarray
    total_mass_lost: float

    def summary(self) -> dict:
        """Small JSON-ready description (no arrays)."""
        return {
            "rate_time": float(self.rate_time),
            "left": int(self.left),
            "right": int(self.right),
            "n_terms": int(self.right - self.left + 1),
            "total_mass_lost": float(self.total_mass_lost),
        }


def _log_tail_bound(lam: float, k: float) -> float:
    """Log of the Chernoff bound ``e^{-λ} (eλ/k)^k`` on ``P(X >= k)`` (``k > λ``)
    or on ``P(X <= k)`` (``k < λ``) for ``X ~ Poisson(λ)`` [Can17]_."""
    if k <= 0:
        return -lam
    return -lam + k + k * math.log(lam / k)


def fox_glynn(rate_time: float, eps: float = 1e-12) -> FoxGlynn:
    """Poisson weights on a window holding all but ``eps`` of the mass.

    Parameters
    ----------
    rate_time : float
        ``λ >= 0`` (finite).
    eps : float
        Bound on the Poisson mass left outside the window, ``0 < eps < 1``.

    Returns
    -------
    FoxGlynn
        ``left``, ``right``, the normalised ``weights`` and ``total_mass_lost``.

    Raises
    ------
    ModelError
        If ``rate_time`` is negative or not finite, or ``eps`` not in ``(0, 1)``.

    Notes
    -----
    The scheme follows Fox & Glynn [FG88]_ in the form analysed by Jansen [Jan11]_:
    weights are built from the mode ``m = floor(λ)`` outwards by the ratios
    ``w_{k+1}/w_k = λ/(k+1)`` and never by ``e^{-λ}`` or ``k!`` themselves, so nothing
    under- or overflows; here the ratios are accumulated as sums of
    ``log1p((λ - j)/j)`` (vectorised with :func:`numpy.cumsum`), which is accurate
    because every term is small near the mode.

    The window is chosen, instead of by Fox & Glynn's finder, from the Bernstein
    forms of the Poisson tail bounds [Can17]_:
    ``P(X >= λ + x) <= exp(-x²/(2(λ + x/3)))`` and ``P(X <= λ - x) <= exp(-x²/(2λ))``,
    with ``x`` solving ``= eps/4``. The relative weights on that window are
    normalised, then the two ends are trimmed while the trimmed mass stays below
    ``eps/4`` on each side. ``total_mass_lost`` is the trimmed mass plus the sharper
    Chernoff bounds ``e^{-λ}(eλ/k)^k`` on the two tails outside the initial window,
    so it is a rigorous bound (up to rounding), and it is at most ``eps``.

    Examples
    --------
    >>> from scipy.stats import poisson
    >>> fg = fox_glynn(10.0, 1e-12)
    >>> k = np.arange(fg.left, fg.right + 1)
    >>> bool(np.allclose(fg.weights, poisson.pmf(k, 10.0), rtol=1e-10, atol=0))
    True
    >>> fg.total_mass_lost <= 1e-12
    True
    """
    lam = float(rate_time)
    if not math.isfinite(lam) or lam < 0:
        raise ModelError(f"rate_time must be a finite number >= 0; got {rate_time!r}")
    eps = float(eps)
    if not (0.0 < eps < 1.0):
        raise ModelError(f"eps must be in (0, 1); got {eps!r}")
    if lam == 0.0:
        return FoxGlynn(0.0, eps, 0, 0, np.ones(1), 0.0)

    log_target = math.log(4.0 / eps)
    x_hi = log_target / 3.0 + math.sqrt(log_target**2 / 9.0 + 2.0 * lam * log_target)
    mode = int(math.floor(lam))
    lo = _window_start(lam, eps)  # max(0, floor(lam - sqrt(2 lam log(4/eps))))
    hi = int(math.ceil(lam + x_hi))

    # log(w_k / w_mode) for k in [lo, hi], by cumulated log-ratios from the mode.
    log_w = np.zeros(hi - lo + 1)
    j_right = np.arange(mode + 1, hi + 1, dtype=float)  # w_j / w_{j-1} = λ / j
    log_w[mode - lo + 1:] = np.cumsum(np.log1p((lam - j_right) / j_right))
    j_left = np.arange(mode, lo, -1, dtype=float)  # w_{j-1} / w_j = j / λ
    log_w[:mode - lo][::-1] = np.cumsum(np.log1p((j_left - lam) / lam))
    w = np.exp(log_w)
    w /= math.fsum(w)

    # Mass outside [lo, hi] (rigorous Chernoff bounds), then trim each end by <= eps/4.
    outside = 0.0
    if lo > 0:
        outside += math.exp(_log_tail_bound(lam, lo - 1))
    outside += math.exp(_log_tail_bound(lam, hi + 1))
    budget = eps / 4.0
    cut_left = int(np.searchsorted(np.cumsum(w), budget, side="right"))
    cut_right = int(np.searchsorted(np.cumsum(w[::-1]), budget, side="right"))
    cut_left = min(cut_left, mode - lo)  # never trim past the mode
    cut_right = min(cut_right, hi - mode)
    trimmed = math.fsum(w[:cut_left]) + math.fsum(w[len(w) - cut_right:])
    kept = w[cut_left:len(w) - cut_right]
    kept = kept / math.fsum(kept)
    left, right = lo + cut_left, hi - cut_right
    lost = min(1.0, outside + trimmed)
    return FoxGlynn(lam, eps, left, right, kept, lost)


# ---------------------------------------------------------------------------------
# helpers shared with exactq.solvers.reachability
# ---------------------------------------------------------------------------------

#: matrices already validated, by id: (a weak reference to the matrix, the fingerprint of its arrays, the
#: validated float CSR array); see :func:`validated`
_VALIDATED: dict = {}


def _fingerprint(M) -> tuple | None:
    """What changes when a sparse matrix is given new arrays (a compressed matrix's buffers and sizes)."""
    try:
        return (type(M), M.shape, id(M.data), id(M.indices), id(M.indptr), M.data.size, M.indptr.size)
    except AttributeError:
        return None  # dense or another format: validated every time


def validated(kind: str, M, check):
    """``check(M)`` (a validation returning the validated float CSR array), run once per matrix object.

    The checkers of one chain pass its generator (or transition matrix) to every query's
    algorithm, which validates it again: 0.3 ms a query on 2,694 states, 8 ms of the 40 ms
    of a bounded retransmission file. A compressed matrix given again, with the same
    arrays, gets the array its first validation returned. (Writing into a validated
    matrix's ``data`` in place is not detected: the chain's matrices are not for editing.)
    """
    hit = _recorded(kind, M)
    if hit is not None:
        return hit
    A = check(M)
    _record(kind, M, A)
    return A


def _recorded(kind: str, M):
    """The validated array recorded for ``M`` as it is now (the same object, the same arrays), or None."""
    fp = _fingerprint(M)
    hit = _VALIDATED.get((kind, id(M))) if fp is not None else None
    return hit[2] if hit is not None and hit[0]() is M and hit[1] == fp else None


def _record(kind: str, M, A) -> bool:
    """Record ``A`` as ``M``'s validated array (for as long as ``M`` lives); False for a matrix that cannot be."""
    fp = _fingerprint(M)
    if fp is None:
        return False
    key = (kind, id(M))
    try:
        _VALIDATED[key] = (weakref.ref(M, lambda _r, key=key: _VALIDATED.pop(key, None)), fp, A)
    except TypeError:  # pragma: no cover - not weakly referenceable
        return False
    return True


def trust(kind: str, M) -> bool:
    """Record the compressed matrix ``M`` as validated for ``kind`` (``"generator Q"``, ``"stochastic P"``) without
    checking it; True when recorded.

    For a matrix valid by construction: the PRISM builder checks every command's rates (finite, non-negative) and
    probabilities (in [0, 1], summing to 1) as it forms them, sums the duplicates, and puts each generator row's
    negated sum on its diagonal, so that its matrices need not be read again by :func:`as_generator` and
    :func:`~exactq.solvers.dtmc.as_stochastic` (on crowds, TotalRuns=6, CrowdSize=15, 9M transitions: 74 ms of the
    first check). Only a matrix in canonical form (sorted, no duplicates) is recorded.
    """
    if not sp.issparse(M) or M.format != "csr" or M.dtype != np.float64 or not M.has_canonical_format:
        return False
    A = M if isinstance(M, sp.csr_array) else sp.csr_array((M.data, M.indices, M.indptr), shape=M.shape)
    A.has_canonical_format = True
    return _record(kind, M, A)


def is_trusted(kind: str, M) -> bool:
    """Whether ``M``, as it is now, was validated (or trusted) for ``kind``."""
    return _recorded(kind, M) is not None


def as_generator(Q, *, name: str = "Q") -> sp.csr_array:
    """Validate a CTMC generator and return it as a float CSR array.

    Checks (vectorised, ``O(nnz)``): square and non-empty, finite entries,
    off-diagonal entries ``>= 0`` and rows summing to 0 (relative tolerance
    ``1e-9`` of the row's exit rate). Raises :class:`ModelError` naming the first
    offending state. A matrix validated before is not checked again (:func:`validated`).
    """
    return validated(f"generator {name}", Q, lambda M: _as_generator(M, name))


def _as_generator(Q, name: str) -> sp.csr_array:
    try:
        A = sp.csr_array(Q, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name} must be a square sparse or dense matrix; got {type(Q).__name__}") from exc
    n = A.shape[0]
    if A.ndim != 2 or A.shape != (n, n) or n == 0:
        raise ModelError(f"{name} must be a non-empty square matrix; got shape {A.shape}")
    A.sum_duplicates()
    if not np.all(np.isfinite(A.data)):
        row = int(np.repeat(np.arange(n), np.diff(A.indptr))[~np.isfinite(A.data)][0])
        raise ModelError(f"{name} has a non-finite entry in row {row} (state {row})")
    diag = A.diagonal()
    # (summed duplicates: each diagonal entry stored once) the negative entries are all on the diagonal iff they
    # are as many as the negative diagonal entries; the entries' rows are formed only to name an offender (crowds
    # TotalRuns=6, CrowdSize=15, 9M entries: a COO copy of 40 ms saved)
    if np.count_nonzero(A.data < 0) != np.count_nonzero(diag < 0):
        coo = A.tocoo()
        off = (coo.row != coo.col) & (coo.data < 0)
        k = int(np.flatnonzero(off)[0])
        raise ModelError(f"{name} must have off-diagonal entries >= 0; got {coo.data[k]} at state {coo.row[k]} "
                         f"-> {coo.col[k]}")
    rowsum = np.asarray(A.sum(axis=1)).ravel()
    bad = np.abs(rowsum) > 1e-9 * np.maximum(np.abs(diag), 1e-300) + 1e-300
    bad &= np.abs(rowsum) > 1e-12 * max(1.0, float(np.max(np.abs(diag))))
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ModelError(f"rows of {name} must sum to 0; row {i} (state {i}) sums to {rowsum[i]:.6g}")
    return A


def as_mask(mask, n: int, name: str) -> np.ndarray:
    """A boolean ``(n,)`` state mask (scalars broadcast), or :class:`ModelError`."""
    m = np.asarray(mask)
    if m.dtype != bool:
        if m.dtype.kind in "iu" and np.all((m == 0) | (m == 1)):
            m = m.astype(bool)
        else:
            raise ModelError(f"{name} must be a boolean mask over the states; got dtype {m.dtype}")
    if m.ndim == 0:
        m = np.full(n, bool(m))
    if m.shape != (n,):
        raise ModelError(f"{name} must have shape ({n},) (one entry per state); got {m.shape}")
    return m


def _check_time(t) -> float:
    try:
        t = float(t)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"time t must be a number >= 0; got {t!r}") from exc
    if not math.isfinite(t) or t < 0:
        raise ModelError(f"time t must be a finite number >= 0; got {t!r}")
    return t


def _uniformised(Q: sp.csr_array, active_rows: np.ndarray | None = None):
    """``(P, q)`` with ``P = I + Q/q`` and ``q = 1.02 max |Q_ii|`` (``P = None`` if ``q = 0``)."""
    diag = Q.diagonal()
    q = UNIFORMISATION_FACTOR * float(np.max(np.abs(diag))) if Q.shape[0] else 0.0
    if q == 0.0:
        return None, 0.0
    n = Q.shape[0]
    P = (sp.eye_array(n, format="csr") + Q / q).tocsr()
    return P, q


try:  # SciPy's compiled sparse products into a given output vector (no allocation per product)
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec, csr_matvec as _csr_matvec
except ImportError:  # pragma: no cover - a SciPy without them: the products go through ``M @ x``
    _csc_matvec = _csr_matvec = None
try:
    from scipy.sparse._sparsetools import dia_matvec as _dia_matvec
except ImportError:  # pragma: no cover
    _dia_matvec = None

#: a matrix on at most this many diagonals, stored with at most DIAGONAL_PADDING times its entries, is also tried
#: by diagonals (the birth-death chains of a cell or a queue: 100,001 states on 3 diagonals, 138 us a product by
#: diagonals against 277 us by rows)
DIAGONALS_MAX = 16
DIAGONAL_PADDING = 1.5

#: a series of at least this many products first times both storage orders of its matrix (:class:`_Stepper`): the
#: trial costs about 30 products (the other order's copy and 16 timed products a candidate), and the faster order
#: saved 13-18% of series of 500-1,300 products (interleaved, median of 7: polling N=10 U<=5, 1,025 products, 134
#: -> 111 ms; N=8 26.5 -> 21.8 ms; tandem c=127 C<=1, 524, 136 -> 113 ms; FMS n=4 F<=10 24.2 -> 21.0 ms), where
#: the old threshold, 2,000, left them by columns
TRIAL_MIN_PRODUCTS = 300
#: products timed per storage order in that trial (twice each, alternating)
TRIAL_PRODUCTS = 8
#: a series of fewer products on a matrix held by rows keeps it by rows (no trial below TRIAL_MIN_PRODUCTS, and the
#: conversion to columns costs about ten products): interleaved, median of 7, tandem c=127 F<=0.25 (131 products)
#: 43 -> 33 ms, FMS n=4 F<=10 (83) 21.5 -> 17.8 ms against converting to columns; the same numbers (a row's terms
#: are added in the same order either way)
KEEP_ROWS_PRODUCTS = TRIAL_MIN_PRODUCTS
#: a run of at least this many products (:meth:`_Stepper.steps`) on a matrix of at most POWER_MAX_STATES states may
#: be made by its dense powers M^(2^j) (cached): the embedded control system's F<=168 makes 63,492 products on
#: 128 moving states, ~1.3 us each by SciPy's product, almost all of it the call; 64 of them are one product by
#: M^64 (6 us)
POWER_MIN_STEPS = 32
POWER_MAX_STATES = 512
#: the cost model of that choice, seconds: a dense product C + m^2 / R (measured 6.4, 18.7 and 62 us at 129, 257
#: and 513 states), a squaring 2 m^3 / F (17-43 GFlop/s measured there), a sparse product in a run L + nnz E
POWER_MATVEC_SECONDS, POWER_MATVEC_RATE, POWER_GEMM_RATE = 3e-6, 4e9, 1e10
LOOP_PRODUCT_SECONDS, LOOP_ENTRY_SECONDS = 1e-6, 1.5e-9


class _Stepper:
    """``x -> M x + b`` for a fixed sparse ``M`` and constant ``b``, into two alternating buffers.

    The uniformisation loops make up to hundreds of thousands of products; ``M @ x``
    allocates its result and dispatches through SciPy's sparse-array machinery on every
    call. Here ``M`` is applied by SciPy's compiled products into reused buffers, held
    either by columns (a scatter ``y[i] += M_ij x_j``, whose updates do not wait on one
    another) or by rows (a gather, one sum per row). Which is faster depends on the
    matrix: measured, 97 us by columns against 134 us by rows on the uniformised
    18,292-state MAPK cascade, but 527 us against 424 us on the 130,816-state tandem
    queue. So a series of at least :data:`TRIAL_MIN_PRODUCTS` products (``products``)
    first times :data:`TRIAL_PRODUCTS` products in each order (a bounded trial, a few
    milliseconds) and keeps the faster; shorter series keep a matrix given by rows as it is, and others by
    columns. Both orders add each row's terms in the same (column) order: the same sums.

    :meth:`start` returns a private copy of the first vector; each call returns a buffer
    that the call after the next one overwrites, so a caller that keeps an iterate
    beyond one step keeps a copy.
    """

    def __init__(self, M, b: np.ndarray | None = None, *, products: int | None = None):
        self.b = None if b is None or not np.any(b) else np.ascontiguousarray(b, dtype=float)
        self.trial = None
        self.products = products
        self._powers = None  # the dense powers of [[M, b], [0, 1]] (:meth:`_power_steps`), or False: not used
        self._bound = None  # (M, product, its arguments), made on the first call
        if (products is not None and products < KEEP_ROWS_PRODUCTS and _csr_matvec is not None
                and sp.issparse(M) and M.format == "csr"):
            # a short series on a matrix held by rows: the gather, without the conversion to columns (which costs
            # about ten products: Herman's 13-process ring, 1.6M transitions, F<=10: 7 ms, a product 0.7 ms)
            R = sp.csr_matrix(M, dtype=float)
            if not R.has_canonical_format:
                R.sum_duplicates()
            self.n = R.shape[0]
            self.spare = np.empty(self.n)
            self.M, self.kernel, self.order = R, _csr_matvec, "rows"
            return
        C = sp.csc_matrix(M, dtype=float)
        if not C.has_canonical_format:
            C.sum_duplicates()
        self.n = C.shape[0]
        self.spare = np.empty(self.n)
        self.M, self.kernel, self.order = C, _csc_matvec, "columns"
        if _csc_matvec is not None and products is not None and products >= TRIAL_MIN_PRODUCTS:
            R = sp.csr_matrix(C)
            R.sort_indices()
            x = np.ones(self.n)
            candidates = [("columns", C, _csc_matvec), ("rows", R, _csr_matvec)]
            D = _diagonals(R)
            if D is not None:
                candidates.append(("diagonals", D, None))
            times = {order: math.inf for order, _, _ in candidates}
            for _ in range(2):  # alternating, so that a burst of load on a shared machine hits all
                for order, mat, kernel in candidates:
                    t0 = time.perf_counter()
                    for _ in range(TRIAL_PRODUCTS):
                        self.spare.fill(0.0)
                        _product(kernel, mat, x, self.spare)
                    times[order] = min(times[order], (time.perf_counter() - t0) / TRIAL_PRODUCTS)
            best = min(times, key=times.get)
            self.order, self.M, self.kernel = next(c for c in candidates if c[0] == best)
            self.trial = {"storage": self.order, "seconds_per_product": {k: float(v) for k, v in times.items()}}

    def start(self, x0: np.ndarray) -> np.ndarray:
        return np.array(x0, dtype=float, copy=True)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.kernel is None and self.order != "diagonals":  # pragma: no cover
            y = self.M @ x
            return y + self.b if self.b is not None else y
        if self._bound is None or self._bound[0] is not self.M:
            self._bound = (self.M, *_bound_product(self.kernel, self.M))
        _, f, args = self._bound
        y = self.spare
        if self.b is None:
            y.fill(0.0)
        else:
            np.copyto(y, self.b)
        f(*args, x, y)
        self.spare = x
        return y

    def steps(self, x: np.ndarray, count: int) -> np.ndarray:
        """``count`` calls in a row: the same products into the same buffers as ``count`` calls, without a call's
        look-ups each (240 states: 3.2 -> 1.6 us a product)."""
        if count <= 0:
            return x
        if count >= POWER_MIN_STEPS and self._powers is not False and self._powers_pay(count):
            return self._power_steps(x, count)
        if self.kernel is None and self.order != "diagonals":  # pragma: no cover
            for _ in range(count):
                x = self(x)
            return x
        x = self(x)  # binds the product
        _, f, args = self._bound
        b, y = self.b, self.spare
        for _ in range(count - 1):  # a loop over products, not over states
            if b is None:
                y.fill(0.0)
            else:
                np.copyto(y, b)
            f(*args, x, y)
            x, y = y, x
        self.spare = y
        return x

    def _powers_pay(self, count: int) -> bool:
        """Whether runs of ``count`` products are cheaper by the dense powers (decided once, by the cost model of
        :data:`POWER_MATVEC_SECONDS`, for the series's ``products`` in runs of ``count``)."""
        if self._powers is None:
            m = self.n + (self.b is not None)
            total = max(int(self.products or 0), count)
            runs = total / count
            nnz = self.M.data.size
            dense = (2.0 * m ** 3 / POWER_GEMM_RATE) * count.bit_length() + \
                runs * count.bit_count() * (POWER_MATVEC_SECONDS + m * m / POWER_MATVEC_RATE)
            loop = total * (LOOP_PRODUCT_SECONDS + LOOP_ENTRY_SECONDS * nnz)
            if m > POWER_MAX_STATES or dense > 0.5 * loop:
                self._powers = False
                return False
            M = self.M.toarray()
            if self.b is not None:  # x -> M x + b as one matrix on (x, 1)
                G = np.zeros((m, m))
                G[:-1, :-1], G[:-1, -1], G[-1, -1] = M, self.b, 1.0
                M = G
            self._powers = [np.ascontiguousarray(M)]
        return True

    def _power_steps(self, x: np.ndarray, count: int) -> np.ndarray:
        """``M^count x`` (with ``b``: the affine map ``count`` times) by the binary digits of ``count``: at most
        ``log2 count`` dense products by the cached ``M^(2^j)`` (squared as needed). Its entries are sums of
        the same non-negative terms as the run's (a stochastic matrix's products), grouped otherwise: equal to
        rounding. Returns a new vector (the buffers are left as they were)."""
        P = self._powers
        if self.b is None:
            z = x
        else:
            z = np.empty(self.n + 1)
            z[:-1], z[-1] = x, 1.0
        j = 0
        while count:
            if j == len(P):
                P.append(P[-1] @ P[-1])
            if count & 1:
                z = P[j] @ z
            count >>= 1
            j += 1
        return np.ascontiguousarray(z if self.b is None else z[:-1])


def _diagonals(R: sp.csr_matrix):
    """``R`` by diagonals (:class:`scipy.sparse.dia_matrix`) when it lies on at most :data:`DIAGONALS_MAX` of
    them with little padding, else ``None``."""
    if _dia_matvec is None or R.nnz == 0:
        return None
    n = R.shape[0]
    offsets = np.unique(R.indices - np.repeat(np.arange(n, dtype=R.indices.dtype), np.diff(R.indptr)))
    if offsets.size > DIAGONALS_MAX or offsets.size * n > DIAGONAL_PADDING * R.nnz:
        return None
    D = R.todia()
    return D if D.offsets.size == offsets.size else None


def _bound_product(kernel, M):
    """``(f, args)`` with ``f(*args, x, y)`` doing ``y += M x`` by SciPy's compiled product: ``kernel``
    (``csr_matvec``/``csc_matvec``) on a compressed ``M``, or, with ``kernel=None``, ``dia_matvec`` on ``M``
    stored by diagonals. The arguments are read once: a series of a thousand products on a small chain paid
    ~1 us a product for the shape and array look-ups, as much as the product itself at 240 states."""
    if kernel is None:
        return _dia_matvec, (M.shape[0], M.shape[1], M.offsets.size, M.data.shape[1], M.offsets, M.data)
    return kernel, (M.shape[0], M.shape[1], M.indptr, M.indices, M.data)


def _product(kernel, M, x: np.ndarray, y: np.ndarray) -> None:
    """``y += M x`` (see :func:`_bound_product`)."""
    f, args = _bound_product(kernel, M)
    f(*args, x, y)


def _restricted_uniformisation(A: sp.csr_array, rows: np.ndarray, fixed: np.ndarray | None = None):
    """``(M, b, q)``: the uniformised chain ``P = I + Q/q`` on the states ``rows`` only.

    The other states keep their values for ever (absorbing states, and states whose
    value is 0 at every time because they cannot reach a state that matters): with
    those values in ``fixed`` (zero where omitted), ``(P x)_S = P_SS x_S + b`` with
    ``b = Q_{S, not S} fixed / q``. ``q = 1.02`` times the largest exit rate of ``rows``
    (the rate of the states that move, as PRISM and Storm uniformise the sub-chain of
    the states not settled by graph analysis).
    """
    idx = np.flatnonzero(rows)
    exit_rate = -A.diagonal()[idx]
    q = UNIFORMISATION_FACTOR * float(np.max(exit_rate, initial=0.0))
    if q == 0.0 or idx.size == 0:
        return None, None, 0.0
    sub = A[idx]
    M = (sp.eye_array(idx.size, format="csr") + sub[:, idx] / q).tocsr()
    b = None
    if fixed is not None:
        f = np.where(rows, 0.0, fixed)
        if np.any(f):
            b = np.asarray(sub @ f, dtype=float) / q
    return M, b, q


def _window_start(lam: float, eps: float) -> int:
    """The first Poisson term :func:`fox_glynn` considers: its window ``[left, right]`` has ``left`` >= this."""
    log_target = math.log(4.0 / eps)
    return max(0, int(math.floor(lam - math.sqrt(2.0 * lam * log_target))))


class _Limit:
    """The limit ``u`` of the iterates ``x_k`` and their distance to it, for steady-state detection.

    ``u`` (one sparse solve, ``solve() -> (u, slack, residual)``) is computed only once
    the iterates settle: when ``max |x_k - x_{k-64}|`` is below the tolerance. A chain that
    does not mix within the time bound never pays for the solve (the MAPK cascade's
    99,535 states at ``T = 30``); the distance test itself is the rigorous one of the
    callers, the settling only decides when it is worth making.
    """

    def __init__(self, solve, tol: float, monotone: bool):
        self.solve, self.tol, self.monotone = solve, tol, monotone
        self.u = None
        self.slack = 0.0
        self.residual = None
        self.prev = None
        self.failed = None  # why the limit could not be solved (then the sums run to the end of the window)

    def gap(self, x: np.ndarray) -> float:
        """``max |x - u| + slack`` (``max (u - x)`` for a nondecreasing sequence), ``inf`` before ``u`` is known."""
        if self.u is None:
            if self.failed is not None:
                return math.inf
            settled = self.prev is not None and float(np.max(np.abs(x - self.prev), initial=0.0)) <= self.tol
            if not settled:
                if self.prev is None:
                    self.prev = x.copy()
                else:
                    np.copyto(self.prev, x)
                return math.inf
            try:
                self.u, self.slack, self.residual = self.solve()
            except ConvergenceError as exc:  # (NoValidVector too) the limit is an optimisation: sum on without it
                self.failed, self.prev = str(exc), None
                return math.inf
            self.prev = None
        d = (self.u - x) if self.monotone else np.abs(x - self.u)
        return float(np.max(d, initial=0.0)) + self.slack


def _tails(fg: FoxGlynn) -> np.ndarray:
    """``P(N > k)`` for the ``k`` of the Fox–Glynn window (0 at its right end): the cumulative series's weights."""
    tails = 1.0 - np.cumsum(fg.weights)
    tails[-1] = 0.0
    return tails


def _series(step: _Stepper, x: np.ndarray, rate_time: float, eps: float, *, cumulative: bool = False,
            limit: _Limit | None = None, early=None, pair: bool = False, watch=None) -> dict:
    """The uniformisation sum over ``x_k = M^k x_0`` (``x_{k+1} = step(x_k)``), in one pass.

    ``Σ_k w_k x_k`` with the Fox–Glynn weights ``w_k`` of :func:`fox_glynn`, or, with
    ``cumulative``, ``Σ_k c_k x_k`` with ``c_k = P(N > k)`` (1 before the window, the
    tail of the window's weights inside it). The weights are computed when the products
    reach the window (a huge ``rate_time`` whose products settle long before never
    computes them).

    Steady-state detection (with ``limit``), every :data:`DETECT_EVERY` products: before
    the window, ``early(k, gap, acc, x)`` decides whether to stop there (its answer is
    returned, or None to go on); inside the window (not ``cumulative``), the products
    stop once ``gap <= limit.tol`` and the sum is completed with ``limit.u`` (or ``x_k``
    for a monotone sequence) times the remaining weight, within ``gap`` times that
    weight.

    With ``pair`` (and neither ``cumulative`` nor ``limit``) both sums are made from the same
    products, the second in ``cumulative``; ``watch(x_k)``, when given (with ``pair`` only), sees
    every iterate ``x_0 ... x_right`` in turn.

    Returns a dict: ``value``, ``matvecs``, ``fg`` (None when stopped before the
    window), ``gap`` (the completion's error bound, 0 without detection), ``steady``,
    and ``cumulative`` (the second sum with ``pair``, else None).
    """
    from .linear import _blas_single_thread

    # one BLAS thread for the loop's daxpy calls: OpenBLAS threads them above 10,000 entries, and waking its
    # threads twice a product cost more than the products. In fresh processes, medians of 5: FMS n = 4's F<=10
    # (13,530 states) 113.7 -> 17.3 ms, tandem c=127's F<=0.25 124 -> 32 ms, polling 10's U<=5 154 -> 109 ms;
    # with the other core busy, the threaded loop also stalled (FMS: 210 ms in one run of five)
    with _blas_single_thread(x.shape[0]):
        return _series_loop(step, x, rate_time, eps, cumulative=cumulative, limit=limit, early=early, pair=pair,
                            watch=watch)


def _series_loop(step: _Stepper, x: np.ndarray, rate_time: float, eps: float, *, cumulative: bool, limit, early,
                 pair: bool, watch) -> dict:
    """:func:`_series`'s loop (run with one BLAS thread)."""
    from scipy.linalg.blas import daxpy as axpy  # y <- a x + y in place on contiguous float64 vectors

    lo = _window_start(rate_time, eps)
    fg = coef = tails = None
    # float64 and contiguous, as daxpy updates in place only such a vector (it would return a copy of another)
    acc = np.zeros(x.shape[0])
    acc2 = np.zeros(x.shape[0]) if pair else None
    tmp = np.empty_like(x)
    used = 0.0
    k = 0
    plain = not cumulative and not pair  # before the window such a series only makes products
    while True:  # a loop over the products, not over states
        if fg is None and k >= lo:
            fg = fox_glynn(rate_time, eps)
            tails = _tails(fg)
            coef = tails if cumulative else fg.weights
        if limit is not None and k % DETECT_EVERY == 0:
            gap = limit.gap(x)
            if gap <= limit.tol:
                if fg is None or k < fg.left:
                    out = early(k, gap, acc, x)
                    if out is not None:
                        return out
                elif not cumulative:
                    rest = max(1.0 - used, 0.0)
                    done = limit.u if not limit.monotone else x
                    np.multiply(done, rest, out=tmp)
                    acc += tmp
                    return {"value": acc, "matvecs": k, "fg": fg, "gap": gap * rest,
                            "steady": {"steps": int(k), "gap_to_limit": gap * rest}}
        if watch is not None:
            watch(x)
        if fg is not None and k >= fg.left:
            c = float(coef[k - fg.left])
            if c:
                axpy(x, acc, a=c)  # acc += c x in place, one BLAS call (two NumPy ones cost 4x as much)
                used += c
            if pair and tails[k - fg.left]:
                axpy(x, acc2, a=float(tails[k - fg.left]))
        elif cumulative:
            axpy(x, acc, a=1.0)
        elif pair:
            axpy(x, acc2, a=1.0)
        if fg is not None and k >= fg.right:
            return {"value": acc, "matvecs": int(fg.right), "fg": fg, "gap": 0.0, "steady": None,
                    "cumulative": acc2}
        if plain and fg is None and k < lo:
            # up to the window, or from one detection to the next, in one run of products (the same products, fewer
            # tests): DETECT_EVERY of them, a power of two, which the dense powers make in one product (after a
            # detection, one product and a run of 63 took six)
            skip = lo - k if limit is None else min(lo - k, DETECT_EVERY - k % DETECT_EVERY)
            x = step.steps(x, skip)
            k += skip
            continue
        x = step(x)
        k += 1


def transient(Q, p0, t: float, *, eps: float = 1e-12) -> tuple[np.ndarray, dict]:
    """Transient distribution ``p(t) = p0 · exp(Q t)`` by uniformisation.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator: off-diagonal rates >= 0, rows sum to 0.
    p0 : (n,) array_like
        Initial distribution (entries >= 0 summing to 1).
    t : float
        Time, ``>= 0``.
    eps : float
        Bound on the Poisson mass dropped by the truncation (``0 < eps < 1``).

    Returns
    -------
    p_t : (n,) ndarray
        The distribution at time ``t``.
    info : dict
        ``uniformisation_rate`` (``q``), ``fox_glynn`` (window and lost mass),
        ``matvecs`` (sparse products), ``truncated_mass`` — an upper bound on the
        total-variation distance ``½ ||p_t - p(t)||_1`` from truncation (rounding
        excluded) — and ``seconds``.

    Raises
    ------
    ModelError
        For an invalid generator, ``p0`` not a distribution, or ``t`` negative or
        not finite.

    Notes
    -----
    Jensen's uniformisation [Jen53]_: with ``q = 1.02 max_i |Q_ii|`` and the
    stochastic matrix ``P = I + Q/q``, ``exp(Q t) = Σ_k e^{-qt} (qt)^k / k! P^k``.
    The series is cut to the Fox–Glynn window [FG88]_ of :func:`fox_glynn`, which
    costs ``right ≈ qt + O(sqrt(qt log(1/eps)))`` sparse products ``v ↦ Pᵀ v``; the
    weights are renormalised on the window so ``p_t`` sums to 1 and is non-negative.
    No steady-state detection is done: the cost grows linearly in ``qt``.

    References
    ----------
    See the module references [Jen53]_, [FG88]_.

    Examples
    --------
    Two states, ``0 -> 1`` at rate 2 and back at rate 1; ``p_1(t) = 2/3 (1 - e^{-3t})``:

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[-2.0, 2.0], [1.0, -1.0]])
    >>> p, info = transient(Q, [1.0, 0.0], 0.5)
    >>> bool(np.isclose(p[1], 2 / 3 * (1 - np.exp(-1.5)), rtol=1e-12))
    True
    """
    t0 = time.perf_counter()
    A, p, t = _distribution_at_zero(Q, p0, t)
    P, q = _uniformised(A)
    if t == 0.0 or P is None:
        info = {"method": "uniformisation", "uniformisation_rate": q, "fox_glynn": None, "matvecs": 0,
                "truncated_mass": 0.0, "seconds": time.perf_counter() - t0}
        return p.copy(), info
    step = _Stepper(P.T, products=int(q * t))
    run = _series(step, step.start(p), q * t, eps)
    fg, p_t = run["fg"], run["value"]
    info = {
        "method": "uniformisation",
        "uniformisation_rate": q,
        "fox_glynn": fg.summary(),
        "matvecs": int(fg.right),
        "truncated_mass": float(fg.total_mass_lost),
        "seconds": time.perf_counter() - t0,
    }
    return p_t, info


def _distribution_at_zero(Q, p0, t) -> tuple[sp.csr_array, np.ndarray, float]:
    """The validated generator, initial distribution and time of a forward transient computation."""
    A = as_generator(Q)
    n = A.shape[0]
    t = _check_time(t)
    p = np.asarray(p0, dtype=float)
    if p.shape != (n,):
        raise ModelError(f"p0 must have shape ({n},) (one entry per state); got {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        i = int(np.flatnonzero(~(np.isfinite(p) & (p >= 0)))[0])
        raise ModelError(f"p0 must be a probability distribution; p0[{i}] = {p[i]}")
    total = math.fsum(p)
    if abs(total - 1.0) > 1e-9:
        raise ModelError(f"p0 must sum to 1; got {total!r}")
    return A, p, t


def transient_pair(Q, p0, t: float, *, eps: float = 1e-12, record=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """The distribution at ``t`` and its integral over ``[0, t]``, from one forward uniformisation pass.

    ``p(t) = p0 exp(Q t)`` and ``c(t) = ∫_0^t p(u) du``: with them, every instantaneous reward at ``t``
    (``p(t) · v``) and every cumulative reward up to ``t`` (``c(t) · r``) from ``p0`` is one dot product,
    whatever the reward. A properties file that asks ``R{"a"}=? [ I=T ]``, ``R{"b"}=? [ I=T ]`` and
    ``R{"a"}=? [ C<=T ]`` of one chain pays one pass instead of three
    (:meth:`exactq.solvers.csl._Evaluator.reward` keeps the pair per time bound).

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator.
    p0 : (n,) array_like
        Initial distribution.
    t : float
        Time, ``>= 0``.
    eps : float
        Bound on the Poisson mass dropped by the truncation.
    record : (n, m) array_like, optional
        Vectors ``v_1 ... v_m`` (columns) onto which every iterate is projected: ``info["projections"]``
        holds ``(p0 P^k) · v_j`` for ``k = 0 ... right``, from which :func:`pair_from_projections`
        reads ``p(s) · v_j`` and ``c(s) · v_j`` at every other time ``s`` whose window ends by
        ``right``, with no product at all.

    Returns
    -------
    p_t, c_t : (n,) ndarray
        The distribution at ``t`` and the expected time spent in each state by ``t``.
    info : dict
        ``uniformisation_rate``, ``fox_glynn``, ``matvecs``, ``truncated_mass`` (the Poisson mass
        outside the window, ``lost``), ``cumulative_bound``, ``seconds`` (and ``projections`` with
        ``record``). For ``v`` with values in ``[a, b]``, ``|p_t · v - p(t) · v| <= lost (b - a)``;
        for a reward ``r``, ``|c_t · r - c(t) · r| <= cumulative_bound max|r|`` with
        ``cumulative_bound = eps (t + right/q)`` (:func:`cumulative_reward`'s bound: the same
        series, read forward).

    Notes
    -----
    The series of :func:`transient` (``p(t) = Σ_k w_k p0 P^k`` with the Fox–Glynn weights
    [FG88]_) and of :func:`cumulative_reward` (``c(t) = Σ_k P(N > k)/q · p0 P^k``) share their
    iterates ``p0 P^k``, so both are summed in one pass of ``right`` products. No steady-state
    detection is done: the cost grows linearly in ``qt``.

    Examples
    --------
    Two states, ``0 -> 1`` at rate 2 and back at rate 1: ``p_1(t) = 2/3 (1 - e^{-3t})`` and
    ``∫_0^t p_1 = 2/3 t - 2/9 (1 - e^{-3t})``.

    >>> import scipy.sparse as sp
    >>> p, c, info = transient_pair(sp.csr_array([[-2.0, 2.0], [1.0, -1.0]]), [1.0, 0.0], 0.5)
    >>> bool(np.isclose(p[1], 2 / 3 * (1 - np.exp(-1.5)), rtol=1e-12))
    True
    >>> bool(np.isclose(c[1], 2 / 3 * 0.5 - 2 / 9 * (1 - np.exp(-1.5)), rtol=1e-12))
    True
    """
    t0 = time.perf_counter()
    A, p, t = _distribution_at_zero(Q, p0, t)
    P, q = _uniformised(A)
    if t == 0.0 or P is None:
        return p.copy(), p * t, {"method": "uniformisation", "uniformisation_rate": q, "fox_glynn": None,
                                 "matvecs": 0, "truncated_mass": 0.0, "cumulative_bound": 0.0,
                                 "seconds": time.perf_counter() - t0}
    step = _Stepper(P.T, products=int(q * t))
    seen, watch = [], None
    if record is not None:
        V = np.ascontiguousarray(np.asarray(record, dtype=float).reshape(len(p), -1))
        watch = lambda x: seen.append(x @ V)  # noqa: E731 (m dot products per iterate)
    # (the projections run inside _series's one BLAS thread: OpenBLAS's threaded product of a vector and an (n, 1)
    # matrix took 9 ms to 70 ms a call here, central server, 46,376 states; tandem c=127, against 40 us in one)
    run = _series(step, step.start(p), q * t, eps, pair=True, watch=watch)
    fg, at, up_to = run["fg"], run["value"], run["cumulative"] / q
    info = {"method": "uniformisation", "uniformisation_rate": q, "fox_glynn": fg.summary(),
            "matvecs": int(fg.right), "truncated_mass": float(fg.total_mass_lost),
            "cumulative_bound": eps * (t + fg.right / q), "seconds": time.perf_counter() - t0}
    if record is not None:
        info["projections"] = np.array(seen)
    if step.trial is not None:
        info["storage"] = step.trial
    return at, up_to, info


def pair_from_projections(S: np.ndarray, q: float, t: float, *, eps: float = 1e-12):
    """``p(t) · v_j`` and ``c(t) · v_j`` from a forward pass's projections, or None when they do not reach.

    ``S[k, j] = (p0 P^k) · v_j`` for ``k = 0 ... K`` (:func:`transient_pair` with ``record``, at
    the same uniformisation rate ``q``). The sums of :func:`transient_pair` are linear in the
    iterates, so they are read off the projections with the Fox–Glynn weights of ``qt``: the
    same values (up to the order of the additions) and the same error bounds, at no product,
    when the window of ``qt`` ends by ``K``. Returns ``(p_t · V, c_t · V, info)`` or None.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[-2.0, 2.0], [1.0, -1.0]])
    >>> _, _, info = transient_pair(Q, [1.0, 0.0], 1.0, record=np.eye(2))
    >>> at, up_to, _ = pair_from_projections(info["projections"], info["uniformisation_rate"], 0.5)
    >>> bool(np.isclose(at[1], 2 / 3 * (1 - np.exp(-1.5)), rtol=1e-12))
    True
    >>> pair_from_projections(info["projections"], info["uniformisation_rate"], 2.0) is None  # beyond the pass
    True
    """
    S = np.asarray(S, dtype=float)
    if t == 0.0:
        return S[0].copy(), np.zeros(S.shape[1]), {"uniformisation_rate": q, "fox_glynn": None, "matvecs": 0,
                                                   "truncated_mass": 0.0, "cumulative_bound": 0.0}
    fg = fox_glynn(q * t, eps)
    if fg.right >= S.shape[0]:
        return None
    tails = _tails(fg)
    window = S[fg.left:fg.right + 1]
    at = fg.weights @ window
    up_to = (S[:fg.left].sum(axis=0) + tails @ window) / q
    return at, up_to, {"uniformisation_rate": q, "fox_glynn": fg.summary(), "matvecs": 0,
                       "truncated_mass": float(fg.total_mass_lost), "cumulative_bound": eps * (t + fg.right / q)}


def bounded_until(Q, left_mask, right_mask, t: float, *, eps: float = 1e-12) -> tuple[np.ndarray, dict]:
    """Probability of ``left U<=t right`` from every state.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator: off-diagonal rates >= 0, rows sum to 0.
    left_mask, right_mask : (n,) bool array_like
        The states satisfying ``left`` and ``right``.
    t : float
        Time bound, ``>= 0``.
    eps : float
        Bound on the Poisson mass dropped by the truncation.

    Returns
    -------
    probs : (n,) ndarray
        ``probs[s]`` is the probability, starting in ``s``, of reaching a ``right``
        state within time ``t`` along a path whose earlier states all satisfy
        ``left``; each entry is within ``info["truncated_mass"]`` of the exact value
        (rounding excluded).
    info : dict
        ``uniformisation_rate``, ``fox_glynn``, ``matvecs``, ``truncated_mass``,
        ``n_absorbing``, ``seconds``.

    Raises
    ------
    ModelError
        For an invalid generator, masks of the wrong shape, or an invalid ``t``.

    Notes
    -----
    Baier, Haverkort, Hermanns & Katoen [BHHK03]_ reduce time-bounded until to
    transient analysis: make every ``right`` state and every ``¬left ∧ ¬right``
    state absorbing (giving ``Q'``); then ``probs = exp(Q' t) 1_right``. This
    vector is computed backwards by uniformisation,
    ``probs = Σ_k w_k P'^k 1_right`` with ``P' = I + Q'/q`` and the Fox–Glynn
    weights ``w_k`` [FG88]_, one sparse product per term. Since ``P'^k 1_right``
    has entries in ``[0, 1]``, the truncation error of each entry is at most the
    lost Poisson mass.

    The products run on the states that move only: not absorbing and able to reach
    ``right`` through non-absorbing states (graph analysis, as PRISM and Storm do
    before a transient computation); every other state keeps 1 (``right``) or 0 at
    every time. ``q`` is 1.02 times the largest exit rate of those states.

    For a time bound far beyond the chain's mixing (more than
    :data:`STEADY_STATE_MIN_STEPS` products) the products stop once they are within
    ``eps / 2`` of their limit, with that distance added to ``truncated_mass``:
    ``v_k = P'^k 1_right`` (the probability of reaching ``right`` within ``k`` jumps)
    is nondecreasing in ``k`` and tends to the unbounded-until probability ``u`` (one
    sparse solve, :func:`exactq.solvers.reachability.until_probability`), so once
    ``max(u - v_k) <= eps / 2`` every later ``v_j`` lies in ``[v_k, u]`` and the
    Poisson-weighted sum is within that gap (times the weight beyond ``k``) of the
    partial sum completed with ``v_k``: a bound, not a heuristic stopping rule (compare
    the steady-state detection of PRISM and Storm, Malhotra, Muppala & Trivedi 1994).
    Before the Poisson window starts the answer is ``v_k`` itself, with the Poisson
    mass ``P(N <= k)`` of the jumps that may not have happened added.

    Examples
    --------
    One exponential step of rate 3 from state 0 into the target state 1:
    ``P(F<=t target) = 1 - e^{-3t}``.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_array([[-3.0, 3.0], [0.0, 0.0]])
    >>> probs, info = bounded_until(Q, [True, True], [False, True], 0.4)
    >>> bool(np.isclose(probs[0], 1 - np.exp(-1.2), rtol=1e-12))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    t = _check_time(t)
    left = as_mask(left_mask, n, "left_mask")
    right = as_mask(right_mask, n, "right_mask")
    absorbing = right | ~left
    target = right.astype(float)
    base = {"method": "uniformisation", "n_absorbing": int(np.count_nonzero(absorbing))}
    # the states whose probability moves: not absorbing and able to reach `right` through such states; the
    # others keep 1 (right) or 0 (cannot reach it) at every time, so the products run on the rest alone
    from .reachability import _backward_reachable

    moving = ~absorbing & _backward_reachable(A, right, ~absorbing)
    M, b, q = _restricted_uniformisation(A, moving, target)
    base["n_iterated"] = int(np.count_nonzero(moving))
    if t == 0.0 or M is None:
        info = dict(base, uniformisation_rate=q, fox_glynn=None, matvecs=0, truncated_mass=0.0,
                    seconds=time.perf_counter() - t0)
        return target, info
    rate_time = q * t
    idx = np.flatnonzero(moving)
    limit = None
    if rate_time > STEADY_STATE_MIN_STEPS:
        def solve():
            from .reachability import until_probability

            u, uinfo = until_probability(A, left, right)
            res = float(uinfo.get("residual", 0.0))
            return u[idx], res + 4 * np.finfo(float).eps, res

        limit = _Limit(solve, eps / 2, monotone=True)

    def early(k, gap, acc, x):
        # before the Poisson window: every later iterate lies in [x_k, u], and the jumps that may not have
        # happened weigh P(N <= k) at most
        before = math.exp(_log_tail_bound(rate_time, k))
        if gap + before > eps:
            return None
        return {"value": x, "matvecs": k, "fg": None, "gap": gap + before,
                "steady": {"steps": k, "gap_to_limit": gap, "poisson_mass_before": before, "rule": STEADY_RULE}}

    step = _Stepper(M, b, products=int(rate_time))
    run = _series(step, step.start(np.zeros(idx.size)), rate_time, eps, limit=limit, early=early)
    probs = target.copy()
    probs[idx] = np.clip(run["value"], 0.0, 1.0)
    fg = run["fg"]
    lost = run["gap"] + (float(fg.total_mass_lost) if fg is not None else 0.0)
    info = dict(base, uniformisation_rate=q, fox_glynn=fg.summary() if fg is not None else None,
                matvecs=int(run["matvecs"]), truncated_mass=lost, seconds=time.perf_counter() - t0)
    if run["steady"] is not None:
        info["steady_state_detection"] = dict(run["steady"], rule=STEADY_RULE)
    return probs, info


#: time-bounded until tries steady-state detection when uniformisation needs more products than this
STEADY_STATE_MIN_STEPS = 20_000
STEADY_RULE = "P'^k 1_right increases to the unbounded-until probability; stopped within eps of it"


def long_run_values(Q, values, *, solver: str = "auto") -> tuple[np.ndarray, dict]:
    """``u(s) = lim_t E_s[v(X_t)]`` (for a DTMC's ``P - I``: the Cesàro limit), from every state.

    Parameters
    ----------
    Q : (n, n) sparse array
        Generator (rows sum to 0).
    values : (n,) array_like
        The state function ``v``.
    solver : str
        The stationary method of the closed classes (:func:`exactq.solvers.stationary.stationary`).

    Returns
    -------
    u : (n,) ndarray
        On a closed class, ``π_C · v``; elsewhere the average over the closed class the
        chain ends in, weighted by the probability of ending there.
    info : dict
        ``closed_classes``, ``residual`` (the largest of the stationary and absorption
        solves), ``method``.

    Notes
    -----
    ``u = P u`` for the uniformised matrix ``P = I + Q/q``, so ``P^k v - u = P^k (v - u)``
    and ``max |P^k v - u|`` never increases with ``k`` (``P`` is stochastic): once it is
    small, every later term is as close. This is what stops the transient sums of
    :func:`transient_values`, :func:`cumulative_reward` and their DTMC versions long
    before a huge time bound (steady-state detection with a bound, instead of the
    usual test on two successive iterates; Malhotra, Muppala & Trivedi, "Stiffness-
    tolerant methods for transient analysis of stiff Markov chains", 1994, for the idea).

    Examples
    --------
    Two states swapping at rates 2 and 1: the long-run probability of state 1 is 2/3.

    >>> u, _ = long_run_values(sp.csr_array([[-2.0, 2.0], [1.0, -1.0]]), [0.0, 1.0])
    >>> bool(np.allclose(u, 2 / 3, rtol=1e-14))
    True
    """
    from .reachability import absorption_values
    from .stationary import stationary
    from .structure import communicating_classes

    A = sp.csr_array(Q, dtype=float)
    v = np.asarray(values, dtype=float)
    cls = communicating_classes(sp.csr_matrix(A))
    labels = cls.labels
    recurrent = cls.recurrent_mask
    sizes = np.bincount(labels, minlength=cls.n_classes)
    class_value = np.zeros(cls.n_classes)
    single = cls.closed[sizes[cls.closed] == 1]
    first = np.full(cls.n_classes, -1)
    first[labels[::-1]] = np.arange(len(labels))[::-1]
    class_value[single] = v[first[single]]
    residual, methods = 0.0, set()
    Acsr = sp.csr_matrix(A)
    for c in cls.closed[sizes[cls.closed] > 1]:  # a loop over the (few) larger closed classes
        idx = np.flatnonzero(labels == c)
        st = stationary(Acsr[idx][:, idx], method=solver if solver != "level-aggregation" else "auto")
        used = st.pi > 0
        class_value[c] = float(np.dot(st.pi[used], v[idx][used]))
        residual = max(residual, float(st.residual))
        methods.add(st.method)
    v_rec = np.where(recurrent, class_value[labels], 0.0)
    if recurrent.all():
        u = v_rec
    else:
        u, ainfo = absorption_values(A, recurrent, v_rec)
        residual = max(residual, float(ainfo["residual"]))
    return u, {"closed_classes": int(len(cls.closed)), "residual": residual,
               "method": ", ".join(sorted(methods)) or "trivial"}


#: how often (in products) the steady-state detection compares the iterate with its limit
DETECT_EVERY = 64
LIMIT_RULE = ("max |P^k v - u| is nonincreasing (u = P u, the long-run values); stopped once it is small and the "
              "rest of the sum completed with u")


def transient_values(Q, values, t: float, *, absorbing=None, eps: float = 1e-12,
                     solver: str = "auto") -> tuple[np.ndarray, dict]:
    """Expected value at time ``t`` of a state function: ``(exp(Q' t) v)(s)`` from every state ``s``.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator: off-diagonal rates >= 0, rows sum to 0.
    values : (n,) array_like
        The function ``v`` (a reward, or the indicator of a set of states).
    t : float
        Time, ``>= 0``.
    absorbing : (n,) bool array_like, optional
        States made absorbing first (``Q'`` has their rows set to 0); default none.
    eps : float
        Bound on the Poisson mass dropped by the truncation.

    Returns
    -------
    out : (n,) ndarray
        ``E_s[v(X'_t)]``; each entry is within ``info["error_bound"]`` of the exact value.
    info : dict
        ``uniformisation_rate``, ``fox_glynn``, ``matvecs``, ``truncated_mass``,
        ``error_bound`` (``truncated_mass`` times ``max |v|``), ``seconds``.

    Notes
    -----
    Backward uniformisation [Jen53]_: ``exp(Q' t) v = Σ_k w_k P'^k v`` with
    ``P' = I + Q'/q`` and the Fox–Glynn weights ``w_k`` [FG88]_. This is the second
    phase of interval until ``a U[t1,t2] b`` [BHHK03]_ and the instantaneous reward
    ``R=? [ I=t ]``.

    Examples
    --------
    Two states, ``0 -> 1`` at rate 2 and back at rate 1: ``P_0(X_t = 1) = 2/3 (1 - e^{-3t})``.

    >>> import scipy.sparse as sp
    >>> out, info = transient_values(sp.csr_array([[-2.0, 2.0], [1.0, -1.0]]), [0.0, 1.0], 0.5)
    >>> bool(np.isclose(out[0], 2 / 3 * (1 - np.exp(-1.5)), rtol=1e-12))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    t = _check_time(t)
    v = np.asarray(values, dtype=float)
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ModelError(f"values must be {n} finite numbers (one per state)")
    fixed = np.zeros(n, dtype=bool) if absorbing is None else as_mask(absorbing, n, "absorbing")
    scale = float(np.max(np.abs(v))) if n else 0.0
    # the states whose value moves: not absorbing, and able to reach a state of nonzero value through such
    # states; absorbing states keep v and the others 0 at every time, so the products run on the rest alone
    from .reachability import _backward_reachable

    moving = ~fixed & _backward_reachable(A, v != 0, ~fixed)
    M, b, q = _restricted_uniformisation(A, moving, np.where(fixed, v, 0.0))
    base = {"method": "uniformisation", "n_iterated": int(np.count_nonzero(moving))}
    out = np.where(fixed, v, 0.0)
    if t == 0.0 or M is None:
        # nothing moves (or no time passes): on the moving states without exits, v stays; elsewhere out = v too
        return v.copy(), dict(base, uniformisation_rate=q, fox_glynn=None, matvecs=0, truncated_mass=0.0,
                              error_bound=0.0, seconds=time.perf_counter() - t0)
    rate_time = q * t
    idx = np.flatnonzero(moving)
    tol = eps * max(scale, 1e-300)
    limit = None
    if rate_time > STEADY_STATE_MIN_STEPS:
        def solve():
            Qa = A
            if fixed.any():
                Qa = (sp.diags_array((~fixed).astype(float)) @ A).tocsr()
                Qa.eliminate_zeros()
            u, linfo = long_run_values(Qa, v, solver=solver)
            res = float(linfo["residual"])
            return u[idx], (res + 8 * np.finfo(float).eps) * max(scale, 1.0), res

        limit = _Limit(solve, tol / 2, monotone=False)

    def early(k, gap, acc, x):
        # every Poisson term from k on is within gap of u, and the terms before k weigh at most P(N < k)
        before = math.exp(_log_tail_bound(rate_time, k)) if k else math.exp(-rate_time)
        err = gap + 2 * scale * before
        if err > tol:
            return None
        return {"value": limit.u.copy(), "matvecs": k, "fg": None, "gap": err, "before": before,
                "steady": {"steps": int(k), "gap_to_limit": gap, "poisson_mass_before": before, "rule": LIMIT_RULE,
                           "limit_residual": limit.residual}}

    step = _Stepper(M, b, products=int(rate_time))
    run = _series(step, step.start(v[idx]), rate_time, eps, limit=limit, early=early)
    out[idx] = run["value"]
    fg = run["fg"]
    if fg is None:  # stopped before the window: the answer is the limit
        info = dict(base, uniformisation_rate=q, fox_glynn=None, matvecs=int(run["matvecs"]),
                    truncated_mass=float(run["before"]), error_bound=float(run["gap"]),
                    seconds=time.perf_counter() - t0, steady_state_detection=run["steady"])
        return out, info
    lost = float(fg.total_mass_lost)
    info = dict(base, uniformisation_rate=q, fox_glynn=fg.summary(), matvecs=int(run["matvecs"]),
                truncated_mass=lost, error_bound=lost * scale + float(run["gap"]), seconds=time.perf_counter() - t0)
    if run["steady"] is not None:
        info["steady_state_detection"] = dict(run["steady"], rule=LIMIT_RULE, limit_residual=limit.residual)
    return out, info


def cumulative_reward(Q, reward, t: float, *, eps: float = 1e-12, solver: str = "auto") -> tuple[np.ndarray, dict]:
    """Expected reward accumulated up to time ``t``: ``E_s[∫_0^t r(X_u) du]`` from every state.

    Parameters
    ----------
    Q : (n, n) sparse or dense array
        Generator.
    reward : (n,) array_like
        Reward rate of each state (finite).
    t : float
        Time horizon, ``>= 0``.
    eps : float
        Bound on the Poisson mass dropped by the truncation.

    Returns
    -------
    out : (n,) ndarray
    info : dict
        ``uniformisation_rate``, ``fox_glynn``, ``matvecs``, ``error_bound`` and ``seconds``.

    Notes
    -----
    With ``P = I + Q/q`` and ``N ~ Poisson(qt)``,
    ``∫_0^t e^{-qu} (qu)^k / k! du = P(N > k) / q``, so
    ``∫_0^t exp(Qu) r du = Σ_k P(N > k)/q · P^k r`` (the cumulative-reward form of
    uniformisation, e.g. Kwiatkowska, Norman & Parker, "Stochastic model checking",
    SFM 2007, sec. 5.3). The sum stops at the right end ``R`` of the Fox–Glynn window
    [FG88]_; the neglected terms are at most ``E[(N - R)^+]/q · max|r|``, below
    ``error_bound = eps (t + R/q) max|r|``.

    For ``qt`` beyond :data:`STEADY_STATE_MIN_STEPS` the products stop at the first
    ``K`` where ``max |P^K r - u| <= eps max|r| / 2`` (``u`` the long-run reward rates,
    :func:`long_run_values`); the rest of the sum is ``u`` times its weight
    ``E[(N - K)^+]/q``, about ``(t - K/q) u``: the reward of the steady state for the
    remaining time. ``info["steady_state_detection"]`` reports ``K`` and the bound.

    Examples
    --------
    One state of reward rate 2 that leaves at rate 3 to a reward-free absorbing state:
    ``E[∫_0^t r] = 2 (1 - e^{-3t}) / 3``.

    >>> import scipy.sparse as sp
    >>> out, _ = cumulative_reward(sp.csr_array([[-3.0, 3.0], [0.0, 0.0]]), [2.0, 0.0], 0.4)
    >>> bool(np.isclose(out[0], 2 * (1 - np.exp(-1.2)) / 3, rtol=1e-12))
    True
    """
    t0 = time.perf_counter()
    A = as_generator(Q)
    n = A.shape[0]
    t = _check_time(t)
    r = np.asarray(reward, dtype=float)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise ModelError(f"reward must be {n} finite numbers (one per state)")
    if t == 0.0:
        return np.zeros(n), {"method": "uniformisation", "matvecs": 0, "error_bound": 0.0,
                             "seconds": time.perf_counter() - t0}
    # the states that can reach a state of nonzero reward (the others accumulate nothing), and only those move
    from .reachability import _backward_reachable

    moving = _backward_reachable(A, r != 0, np.ones(n, dtype=bool))
    M, _, q = _restricted_uniformisation(A, moving)
    if M is None:  # no transitions among them: the reward accumulates linearly
        return r * t, {"method": "uniformisation", "matvecs": 0, "error_bound": 0.0,
                       "seconds": time.perf_counter() - t0}
    idx = np.flatnonzero(moving)
    scale = float(np.max(np.abs(r))) if n else 0.0
    rate_time = q * t
    limit = None
    if rate_time > STEADY_STATE_MIN_STEPS:
        def solve():
            u, linfo = long_run_values(A, r, solver=solver)
            res = float(linfo["residual"])
            return u[idx], (res + 8 * np.finfo(float).eps) * max(scale, 1.0), res

        limit = _Limit(solve, eps * max(scale, 1e-300) / 2, monotone=False)

    def early(k, gap, acc, x):
        u = limit.u
        before = math.exp(_log_tail_bound(rate_time, k)) if k else math.exp(-rate_time)
        # Σ_{j<K} P(N>j) v_j / q with P(N>j) = 1 - P(N<=j) >= 1 - P(N<K); the rest weighs E[(N-K)^+] / q
        rest = rate_time - k  # E[(N-K)^+] = qt - K + E[(K-N)^+], the last at most K P(N < K)
        err = (gap * (rest + k * before) + 2 * k * before * max(scale, float(np.max(np.abs(u), initial=0.0)))) / q
        if err > eps * (t + k / q) * max(scale, 1e-300):
            return None
        return {"value": (acc + rest * u) / q, "matvecs": k, "fg": None, "error_bound": err,
                "steady": {"steps": int(k), "gap_to_limit": gap, "steady_from_time": k / q,
                           "poisson_mass_before": before, "rule": LIMIT_RULE + " (times the remaining time)",
                           "limit_residual": limit.residual}}

    # c_k = P(N > k) / q: 1/q below the window, 1 - (cumulated window weights) inside it
    step = _Stepper(M, products=int(rate_time))
    run = _series(step, step.start(r[idx]), rate_time, eps, cumulative=True, limit=limit, early=early)
    out = np.zeros(n)
    fg = run["fg"]
    if fg is None:
        out[idx] = run["value"]
        return out, {"method": "uniformisation", "uniformisation_rate": q, "fox_glynn": None,
                     "matvecs": int(run["matvecs"]), "error_bound": float(run["error_bound"]),
                     "seconds": time.perf_counter() - t0, "steady_state_detection": run["steady"]}
    out[idx] = run["value"] / q
    info = {"method": "uniformisation", "uniformisation_rate": q, "fox_glynn": fg.summary(), "matvecs": int(fg.right),
            "error_bound": eps * (t + fg.right / q) * scale, "seconds": time.perf_counter() - t0}
    return out, info
