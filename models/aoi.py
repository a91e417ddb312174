"""Age of information with fixed-length differential encoding over an erasure channel.

Bhambay, Poojary & Parag, "Fixed length differential encoding for real-time status
updates", IEEE Trans. Commun. 67(3), 2019, and the related WCNC / ITW papers (seed
001; ``MODELS.md``). Time is slotted in periods. Each period the source sends one
``n``-bit codeword (``codeword_bits``) over a channel that erases each bit
independently with probability ``delta`` (``erasure_prob``); an update of ``b``
information bits is decoded iff at least ``b`` of the ``n`` bits arrive,
``q(b) = P(Binomial(n, 1 - delta) >= b)``. An *actual* update has ``b_A`` bits
(``actual_bits``), a *differential* one ``b_D < b_A`` (``differential_bits``).

Conventions (``MODELS.md``): ``a`` is the age at the start of a period; ``a = 1`` right
after a useful decode, else the previous age plus one. The time-average age is
``E[a] + 1/2`` and the peak age is the mean age reached just before a reset,
``E[(a + 1) | the period resets]``.

Schemes
-------
``actual``
    Every update is actual: the age is geometric, mean ``1/2 + 1/q_A``.
``differential``
    With feedback: a differential after a successful period, an actual after a failure.
``generalized``
    A differential only when the last update was received *and* the source's
    increment falls within the threshold set (probability ``threshold_prob``),
    otherwise an actual.
``periodic``
    No feedback: one actual followed by ``period - 1`` differentials; a differential
    is useful only if every update since the last actual was decoded.
``markov``
    A finite Markov source (``source_matrix``, states ``0..m-1``) and an integer
    threshold ``k``: after a received update, a differential iff the increment
    ``|X_t - X_{t-1}| <= k``; ``b_D = ceil(log2(2k + 1))`` and ``b_A = ceil(log2 m)``
    unless given.

Matrix-geometric view
---------------------
The protocol (and source) state at the start of a period is the *phase* ``j``; during
the period the chain moves to phase ``j'`` and either resets the age (probability
``S[j, j']``) or not (``F[j, j']``), ``S + F`` stochastic. With level = age - 1 this is
a discrete-time QBD with resets (:class:`~exactq.representations.qbd.QBD`): ``A0 = F``
(up), no local or down moves, ``reset = S`` (back to level 0). Its rate matrix is
``R = F`` and ``P(a, j) = pi_1 F^(a-1)``: the limiting age distribution of the Markov
source paper. The independent check is the DTMC of (age, phase) truncated at an age
(``--method dtmc``), and for the first three schemes the renewal closed form
(``--method closed-form``): with ``X`` the number of periods between resets,
``E[a] = E[X (X + 1)] / (2 E[X])`` and the peak age is ``E[X] + 1``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_dtmc
from exactq.errors import AccuracyWarning, ModelError, NonFiniteError, NotApplicableError
from exactq.params import Param
from exactq.representations import QBD
from exactq.result import Result
from exactq.statespace import StateSpace
from exactq.truncation import Truncation

__all__ = ["AgeOfInformation", "decoding_probability", "parse_matrix", "SCHEMES"]

SCHEMES = ("actual", "differential", "generalized", "periodic", "markov")
#: optimal_period scans the periods 1..max(PERIOD_SCAN, period)
PERIOD_SCAN = 64
#: the largest Markov source accepted (2 m phases per level)
MAX_SOURCE_STATES = 500

_NEEDS = {
    "actual": ("actual_bits",),
    "differential": ("actual_bits", "differential_bits"),
    "generalized": ("actual_bits", "differential_bits", "threshold_prob"),
    "periodic": ("actual_bits", "differential_bits", "period"),
    "markov": ("source_matrix", "threshold"),
}
_OPTIONAL = {"markov": ("actual_bits", "differential_bits")}
_SCHEME_PARAMS = ("actual_bits", "differential_bits", "threshold_prob", "period", "source_matrix", "threshold")


def decoding_probability(codeword_bits: int, erasure_prob: float, bits: int) -> float:
    """``q(b) = P(Binomial(n, 1 - delta) >= b)``: an update of ``b`` bits survives the erasures.

    Examples
    --------
    Ten bits, erasure probability 0.3, an 8-bit update: ``45 0.7^8 0.3^2 + 10 0.7^9 0.3 + 0.7^10``.

    >>> q = decoding_probability(10, 0.3, 8)
    >>> bool(abs(q - (45 * 0.7**8 * 0.09 + 10 * 0.7**9 * 0.3 + 0.7**10)) < 1e-15)
    True
    """
    if bits <= 0:
        return 1.0
    from scipy.stats import binom  # here: scipy.stats takes 0.5 s to import

    return float(binom.sf(bits - 1, codeword_bits, 1.0 - erasure_prob))


def _log_decoding_probability(codeword_bits: int, erasure_prob: float, bits: int) -> float:
    """``ln q(b)`` by a log-sum-exp of the binomial terms (no underflow where ``q(b)`` is below 1e-308).

    Examples
    --------
    >>> bool(abs(_log_decoding_probability(10, 0.3, 8) - math.log(decoding_probability(10, 0.3, 8))) < 1e-12)
    True
    """
    from scipy.special import gammaln, logsumexp

    n, k = int(codeword_bits), np.arange(max(int(bits), 0), int(codeword_bits) + 1)
    log_terms = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + k * math.log1p(-erasure_prob) + \
        np.where(k < n, (n - k) * (math.log(erasure_prob) if erasure_prob > 0 else -np.inf), 0.0)
    return float(logsumexp(log_terms))


def parse_matrix(value) -> np.ndarray:
    """A square matrix from an array or the literal ``"0.9,0.1;0.2,0.8"`` (rows by ``;``, entries by ``,``).

    Examples
    --------
    >>> parse_matrix("0.9,0.1;0.2,0.8").tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """
    if isinstance(value, str):
        try:
            rows = [[float(x) for x in row.split(",")] for row in value.strip().strip(";").split(";")]
        except ValueError:
            raise ModelError(f"source_matrix must be numbers, rows separated by ';' and entries by ','; "
                             f"got {value!r}") from None
        if len({len(r) for r in rows}) != 1:
            raise ModelError(f"source_matrix rows must have equal lengths; got {value!r}")
        M = np.array(rows, dtype=float)
    else:
        try:
            M = np.array(value, dtype=float)
        except (TypeError, ValueError):
            raise ModelError(f"source_matrix must be a square matrix of numbers; got {value!r}") from None
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ModelError(f"source_matrix must be square; got shape {M.shape}")
    return M


def _canonical_matrix(M: np.ndarray) -> str:
    return ";".join(",".join(repr(float(x)) for x in row) for row in M)


@register_model
@dataclass(frozen=True)
class AgeOfInformation(Model):
    """Age of information of fixed-length (differential) status updates (module docstring).

    Examples
    --------
    The references of ``MODELS.md`` (n = 10, delta = 0.3, b_A = 8, b_D = 4):

    >>> import exactq
    >>> kw = dict(codeword_bits=10, erasure_prob=0.3, actual_bits=8)
    >>> round(exactq.solve("aoi", "mean_age", scheme="actual", **kw).value, 8)
    3.11244767
    >>> round(exactq.solve("aoi", "mean_age", scheme="differential", differential_bits=4, **kw).value, 8)
    1.57034321
    """

    name = "aoi"
    summary = "age of information of n-bit status updates over an erasure channel: actual, differential (with " \
              "feedback), generalized, periodic (without feedback) and Markov-source threshold encoding"
    reference = "Bhambay, Poojary & Parag, IEEE Trans. Commun. 67(3) (2019); WCNC and ITW papers (seed 001)"
    parameters = (
        Param("scheme", "choice", "encoding scheme", choices=SCHEMES),
        Param("codeword_bits", "int", "bits n of the codeword sent each period", low=1, high=100_000),
        Param("erasure_prob", "float", "probability delta that the channel erases a bit", low=0.0, high=1.0,
              high_open=True),
        Param("actual_bits", "int", "information bits b_A of an actual update (<= codeword_bits; markov: "
              "ceil(log2 m) unless given)", default=None, low=1),
        Param("differential_bits", "int", "information bits b_D < actual_bits of a differential update "
              "(markov: ceil(log2(2 threshold + 1)) unless given)", default=None, low=0),
        Param("threshold_prob", "float", "generalized: probability that the increment falls within the threshold",
              default=None, low=0.0, high=1.0),
        Param("period", "int", "periodic: one actual update every period periods, differentials between",
              default=None, low=1),
        Param("source_matrix", "str", "markov: the source's transition matrix, rows separated by ';' "
              "(e.g. 0.9,0.1;0.2,0.8)", default=None),
        Param("threshold", "int", "markov: encoding threshold k on the increment |X_t - X_{t-1}|", default=None,
              low=0),
        Param("tail_tol", "float", "age_distribution lists P(age = a) until P(age > a) < tail_tol", default=1e-12,
              low=0.0, high=1.0, low_open=True, high_open=True),
    )
    measures = {
        "mean_age": "time-average age of information E[a] + 1/2, in periods",
        "mean_peak_age": "mean age just before a reset, E[a + 1 | the period's update is useful]",
        "age_distribution": "P(age at the start of a period = a), a = 1, 2, ... (list, to a tail below tail_tol)",
        "decoding_failure_probability": "long-run fraction of periods whose update does not give the receiver "
                                        "the current state",
        "optimal_threshold": "markov: the threshold k in 0..m-1 of least mean age (info: the mean age of each k)",
        "optimal_period": "periodic: the period L of least mean age (scanned over 1..max(64, period))",
    }
    methods = ("qbd", "dtmc", "closed-form")
    default_measure = "mean_age"

    scheme: str
    codeword_bits: int
    erasure_prob: float
    actual_bits: int | None = None
    differential_bits: int | None = None
    threshold_prob: float | None = None
    period: int | None = None
    source_matrix: str | None = None
    threshold: int | None = None
    tail_tol: float = 1e-12

    #: the age is unbounded: the dtmc method truncates it, the qbd method does not
    is_infinite = True

    @classmethod
    def create(cls, **raw):
        """As :meth:`Model.create`; ``source_matrix`` may also be an array (stored as its literal)."""
        if raw.get("source_matrix") is not None and not isinstance(raw["source_matrix"], str):
            raw = dict(raw, source_matrix=_canonical_matrix(parse_matrix(raw["source_matrix"])))
        return super().create(**raw)

    def __post_init__(self):
        if self.source_matrix is not None and not isinstance(self.source_matrix, str):
            object.__setattr__(self, "source_matrix", _canonical_matrix(parse_matrix(self.source_matrix)))
        super().__post_init__()

    # -- validation ------------------------------------------------------------------
    def check(self):
        s = self.scheme
        needs, optional = _NEEDS[s], _OPTIONAL.get(s, ())
        for p in _SCHEME_PARAMS:
            given = getattr(self, p) is not None
            if given and p not in needs and p not in optional:
                raise ModelError(f"{p} does not apply to scheme={s} (it takes {', '.join(needs + optional)})")
            if not given and p in needs:
                raise ModelError(f"scheme={s} needs {p}")
        if s == "markov":
            P = self.source
            m = P.shape[0]
            if m < 2 or m > MAX_SOURCE_STATES:
                raise ModelError(f"source_matrix must have 2 to {MAX_SOURCE_STATES} states; got {m}")
            if np.any(P < 0) or np.any(P > 1):
                i, j = np.argwhere((P < 0) | (P > 1))[0]
                raise ModelError(f"source_matrix entries must be in [0, 1] (a stochastic matrix); got "
                                 f"P[{i}, {j}] = {P[i, j]:g}")
            rows = P.sum(1)
            bad = np.flatnonzero(np.abs(rows - 1.0) > 1e-9)
            if bad.size:
                raise ModelError(f"source_matrix rows must sum to 1 (a stochastic matrix); row {bad[0]} sums to "
                                 f"{rows[bad[0]]:.12g}")
            from scipy.sparse.csgraph import connected_components

            n_classes, labels = connected_components(P > 0, directed=True, connection="strong")
            if n_classes > 1:
                raise ModelError(f"source_matrix must be irreducible (one communicating class); states "
                                 f"{int(np.flatnonzero(labels == labels[0])[0])} and "
                                 f"{int(np.flatnonzero(labels != labels[0])[0])} do not communicate")
        b_a, b_d = self.bits
        if b_a > self.codeword_bits:
            raise ModelError(f"actual_bits must be <= codeword_bits {self.codeword_bits}; got {b_a}")
        if b_d is not None and b_d >= b_a:
            if s == "markov" and self.differential_bits is None:
                raise ModelError(f"threshold={self.threshold} needs differential_bits = ceil(log2({2 * self.threshold}"
                                 f" + 1)) = {b_d}, which must be < actual_bits {b_a}; give a smaller threshold or "
                                 "larger actual_bits")
            raise ModelError(f"differential_bits must be < actual_bits {b_a}; got {b_d}")

    @property
    def source(self) -> np.ndarray:
        """The Markov source's transition matrix (``markov`` only)."""
        if self.source_matrix is None:
            raise NotApplicableError(f"scheme={self.scheme} has no Markov source")
        return parse_matrix(self.source_matrix)

    @property
    def bits(self) -> tuple[int, int | None]:
        """``(b_A, b_D)``, with the ``markov`` defaults ``ceil(log2 m)`` and ``ceil(log2(2k + 1))``."""
        if self.scheme != "markov":
            return int(self.actual_bits), (None if self.differential_bits is None else int(self.differential_bits))
        m = self.source.shape[0]
        b_a = self.actual_bits if self.actual_bits is not None else math.ceil(math.log2(m))
        b_d = self.differential_bits if self.differential_bits is not None else \
            math.ceil(math.log2(2 * self.threshold + 1))
        return int(b_a), int(b_d)

    @property
    def success(self) -> tuple[float, float | None]:
        """``(q_A, q_D)``: the decoding probabilities of an actual and a differential update."""
        b_a, b_d = self.bits
        q = lambda b: decoding_probability(self.codeword_bits, self.erasure_prob, b)  # noqa: E731
        return q(b_a), (None if b_d is None else q(b_d))

    def require_resolvable(self, method: str, tol: float | None = None, strict: bool = False) -> None:
        """Refuse (or warn) where float64 cannot hold the chain of the ``qbd`` and ``dtmc`` methods.

        Their matrices store ``1 - q_A``; when ``q_A`` is below the double's resolution
        ``eps`` it rounds to 1 and the chain looks null recurrent, although the model is
        positive recurrent for every ``q_A > 0`` (what the closed form uses). Between
        ``eps`` and ``eps / tol`` the chain holds ``q_A`` to a relative accuracy of about
        ``eps / q_A`` only, which the mean age inherits: an :class:`AccuracyWarning`
        (an error with ``strict``). So every method agrees on the stability condition
        ``q_A > 0``, and none answers with a value it cannot resolve.

        Examples
        --------
        >>> AgeOfInformation("actual", 10, 0.999999, actual_bits=8).require_resolvable("qbd")
        Traceback (most recent call last):
        ...
        exactq.errors.NotApplicableError: the decoding probability of an actual update q_A = 4.5e-47 is below the \
float64 resolution 2.2e-16 (1 - q_A rounds to 1), so the chain of the qbd method cannot hold it (the model is \
positive recurrent: q_A > 0); use --method closed-form
        """
        q_a = self.success[0]
        eps = float(np.finfo(float).eps)
        alt = "use --method closed-form" if self.scheme in ("actual", "differential", "generalized") else \
            f"no method of scheme={self.scheme} resolves it in float64"
        if q_a <= eps:
            raise NotApplicableError(f"the decoding probability of an actual update q_A = {q_a:.2g} is below the "
                                     f"float64 resolution {eps:.2g} (1 - q_A rounds to 1), so the chain of the {method} "
                                     f"method cannot hold it (the model is positive recurrent: q_A > 0); {alt}")
        if tol is not None and eps / q_a > tol:
            msg = (f"the decoding probability of an actual update q_A = {q_a:.3g} is so small that the chain of the "
                   f"{method} method (which stores 1 - q_A) resolves it to a relative {eps / q_a:.1e} only, above "
                   f"tol={tol:g}; {alt}")
            if strict:
                raise NotApplicableError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=3)

    # -- the phase chain ------------------------------------------------------------------
    def phase_chain(self) -> tuple[np.ndarray, np.ndarray]:
        """``(S, F)``: per period, from phase ``j`` to ``j'`` with a reset of the age (``S``) or without (``F``).

        Phases: ``actual`` one; ``differential``/``generalized`` (0 = last update
        received, 1 = not); ``periodic`` position 0 (the actual) then ``(p, intact)``
        and ``(p, broken)`` for ``p = 1..L-1`` at indices ``2p - 1`` and ``2p``;
        ``markov`` ``(received, i)`` at ``i`` and ``(not received, i)`` at ``m + i``,
        ``i`` the source state of the last period.

        Examples
        --------
        >>> m = AgeOfInformation("differential", 10, 0.3, actual_bits=8, differential_bits=4)
        >>> S, F = m.phase_chain()
        >>> q_a, q_d = m.success
        >>> bool(np.allclose(S, [[q_d, 0], [q_a, 0]]) and np.allclose(S + F, [[q_d, 1 - q_d], [q_a, 1 - q_a]]))
        True
        """
        q_a, q_d = self.success
        s = self.scheme
        if s == "actual":
            return np.array([[q_a]]), np.array([[1.0 - q_a]])
        if s in ("differential", "generalized"):
            q1 = q_d if s == "differential" else self.threshold_prob * q_d + (1.0 - self.threshold_prob) * q_a
            return np.array([[q1, 0.0], [q_a, 0.0]]), np.array([[0.0, 1.0 - q1], [0.0, 1.0 - q_a]])
        if s == "periodic":
            L = int(self.period)
            k = 2 * L - 1
            S, F = np.zeros((k, k)), np.zeros((k, k))
            pos = np.concatenate([[0], np.repeat(np.arange(1, L), 2)])
            intact = np.concatenate([[True], np.tile([True, False], L - 1)])
            nxt = (pos + 1) % L
            ok_to = np.where(nxt == 0, 0, 2 * nxt - 1)  # the next position, chain intact
            broken_to = np.where(nxt == 0, 0, 2 * nxt)  # the next position, chain broken
            q = np.where(pos == 0, q_a, np.where(intact, q_d, 0.0))
            rows = np.arange(k)
            S[rows, ok_to] += q
            F[rows, broken_to] += 1.0 - q
            return S, F
        P = self.source
        m = P.shape[0]
        i, j = np.indices((m, m))
        q_rx = np.where(np.abs(j - i) <= self.threshold, q_d, q_a)  # after a received update
        S, F = np.zeros((2 * m, 2 * m)), np.zeros((2 * m, 2 * m))
        S[:m, :m] = P * q_rx
        F[:m, m:] = P * (1.0 - q_rx)
        S[m:, :m] = P * q_a
        F[m:, m:] = P * (1.0 - q_a)
        return S, F

    # -- QBD (matrix-geometric, exact) ---------------------------------------------------
    def age_qbd(self) -> QBD:
        """The discrete-time QBD with resets: level = age - 1, ``A0 = F``, ``reset = S`` (module docstring).

        Examples
        --------
        Actual updates only: one phase, ``R = 1 - q_A``.

        >>> q = AgeOfInformation("actual", 10, 0.3, actual_bits=8).age_qbd()
        >>> q.n_phases, bool(np.isclose(q.A0[0, 0], 1 - decoding_probability(10, 0.3, 8)))
        (1, True)
        """
        S, F = self.phase_chain()
        zero = np.zeros_like(S)
        return QBD(F, zero, zero, B1=S, B0=F, B2=zero, reset=S, time="discrete")

    def qbd_study(self, measure: str, context) -> Result:
        """The ``qbd`` method: one QBD, or one per candidate of ``optimal_threshold`` / ``optimal_period``."""
        opts = {k: v for k, v in context.options.items() if k in ("algorithm", "dps")}
        self.require_resolvable("qbd", context.tol, context.strict)

        def solve(model):
            rep = model.age_qbd()
            return rep, context.solve(rep, strict=context.strict, **opts)

        if measure in ("optimal_threshold", "optimal_period"):
            return self._optimum(measure, lambda model: model.qbd_measure("mean_age", *solve(model)))
        rep, sol = solve(self)
        return Result(value=self.qbd_measure(measure, rep, sol), method="qbd", residual=sol.residual, nit=sol.nit,
                      info=dict(sol.info, levels="all ages (matrix-geometric)"))

    def qbd_measure(self, measure: str, qbd: QBD, sol):
        """A measure from the QBD solution (level ``l`` = age - 1)."""
        S, _ = self.phase_chain()
        s = S.sum(1)  # probability that a period started in each phase resets the age
        if measure == "age_distribution":
            return self._age_list(sol.level_distribution, sol.level_tail)
        if measure == "mean_age":
            return sol.mean_level() + 1.5
        reset = float(sol.phase_marginal() @ s)
        if measure == "decoding_failure_probability":
            return 1.0 - reset
        if measure == "mean_peak_age":
            return sol.expect_affine(2.0 * s, 2.0 * s, s) / reset
        raise NotApplicableError(f"measure {measure!r} needs --method qbd")

    def _age_list(self, distribution, tail) -> list:
        """``[P(a = 1), ..., P(a = A)]`` with ``P(a > A) < tail_tol`` (levels ``l = a - 1``)."""
        n = 1
        while tail(n) >= self.tail_tol:
            n *= 2
            if n > 10**7:
                raise NotApplicableError(f"age_distribution: the tail is still above tail_tol={self.tail_tol:g} "
                                         f"at age {n}; raise tail_tol")
        lo, hi = n // 2, n  # the first level l with P(level >= l) < tail_tol lies in (lo, hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if tail(mid) >= self.tail_tol else (lo, mid)
        return [float(x) for x in distribution(hi - 1)]

    def _optimum(self, measure: str, mean_age) -> Result:
        if measure == "optimal_threshold":
            if self.scheme != "markov":
                raise NotApplicableError(f"optimal_threshold applies to scheme=markov; got scheme={self.scheme}")
            m = self.source.shape[0]
            b_a = self.bits[0]
            ks = [k for k in range(m) if self.differential_bits is not None
                  or math.ceil(math.log2(2 * k + 1)) < b_a]
            candidates = [replace(self, threshold=k) for k in ks]
            name = "threshold"
        else:
            if self.scheme != "periodic":
                raise NotApplicableError(f"optimal_period applies to scheme=periodic; got scheme={self.scheme}")
            candidates = [replace(self, period=L) for L in range(1, max(PERIOD_SCAN, int(self.period)) + 1)]
            name = "period"
        ages = [mean_age(c) for c in candidates]
        best = int(np.argmin(ages))
        value = int(getattr(candidates[best], name))
        return Result(value=value, method="qbd", info={"mean_age": ages[best], f"mean_age_by_{name}": {
            int(getattr(c, name)): a for c, a in zip(candidates, ages)}})

    # -- the truncated DTMC of (age, phase): the independent check ---------------------------
    def truncation_start(self, tol: float) -> int:
        self.require_resolvable("dtmc", tol)
        _, F = self.phase_chain()
        f = float(np.abs(np.linalg.eigvals(F)).max())  # P(age > a) decays like sp(F)^a
        if f >= 1.0:  # pragma: no cover - q_A > eps keeps sp(F) < 1
            raise NotApplicableError(f"the age's decay rate sp(F) = {f!r} is not below 1 in float64")
        return 8 if f <= 1e-300 else int(math.ceil(math.log(tol) / math.log(f))) + 8

    def dtmc_size(self, truncation) -> int:
        return int(truncation) * self.phase_chain()[0].shape[0]

    def dtmc(self, truncation=None):
        """The chain of (age, phase) with ages ``1..truncation``, the age capped at the top.

        A failure at the top age keeps the age there but moves the phase (the
        ``redirect`` rule: no probability leaves and the protocol runs on; only the
        ages above the top are lumped into it). Blocking instead would freeze the
        phase at the top age and make the chain reducible.
        """
        if truncation is None:
            raise ModelError("aoi needs a truncation level (the largest age kept) for the dtmc method")
        K = int(truncation)
        self.require_resolvable("dtmc")
        S, F = self.phase_chain()
        k = S.shape[0]
        space = StateSpace.box(["age", "phase"], lo=[1, 0], hi=[K, k - 1])

        def reset(j):
            return Event(f"reset_{j}", lambda s: (S[s[:, 1], j], np.column_stack([np.ones(len(s), np.int64),
                                                                                 np.full(len(s), j)])))

        def older(j):
            return Event(f"older_{j}", lambda s: (F[s[:, 1], j], np.column_stack([np.minimum(s[:, 0] + 1, K),
                                                                                 np.full(len(s), j)])))

        events = [reset(j) for j in range(k)] + [older(j) for j in range(k)]
        return build_dtmc(space, events, initial=[1, 0], truncation=Truncation(K, "redirect", "age (periods)"))

    def dtmc_measure(self, measure, chain, sol):
        age = chain.states[:, 0]
        S, _ = self.phase_chain()
        s = S.sum(1)[chain.states[:, 1]]
        if measure == "age_distribution":
            law = np.bincount(age - 1, weights=sol.pi)
            tail = np.concatenate([np.cumsum(law[::-1])[::-1], [0.0]])  # tail[l] = P(level >= l)
            return self._age_list(lambda n: law[:n + 1], lambda n: float(tail[min(n, len(law))]))
        if measure == "mean_age":
            return sol.expect(age) + 0.5
        reset = sol.expect(s)
        if measure == "decoding_failure_probability":
            return 1.0 - reset
        if measure == "mean_peak_age":
            return sol.expect((age + 1) * s) / reset
        raise NotApplicableError(f"measure {measure!r} is an optimum over several chains: use --method qbd")

    # -- closed forms (renewal argument) --------------------------------------------------------
    def closed_form(self, measure):
        """Renewal closed forms for ``actual``, ``differential`` and ``generalized``.

        After a reset the next period succeeds with probability ``q1`` (``q_A``,
        ``q_D`` or ``pi q_D + (1 - pi) q_A``) and every later one with ``q_A``, so the
        periods between resets are ``X = 1`` with probability ``q1`` and ``1 + Geom(q_A)``
        otherwise: ``E[X] = 1 + (1 - q1) / q_A``,
        ``E[X^2] = 1 + 2 (1 - q1) / q_A + (1 - q1)(2 - q_A) / q_A^2``; the age is ``i``
        in a cycle for ``i = 1..X``, so ``E[a] = E[X (X + 1)] / (2 E[X])``,
        ``P(a = i) = P(X >= i) / E[X]``, the peak is ``E[X] + 1`` and the decoding
        failure probability ``1 - 1 / E[X]``.

        Examples
        --------
        Actual only: ``1/2 + 1/q_A``; the reference 3.11244767 of ``MODELS.md``.

        >>> m = AgeOfInformation("actual", 10, 0.3, actual_bits=8)
        >>> round(m.closed_form("mean_age"), 8), round(m.closed_form("mean_peak_age"), 8)
        (3.11244767, 3.61244767)
        """
        if self.scheme not in ("actual", "differential", "generalized"):
            raise NotApplicableError(f"closed-form applies to schemes actual, differential and generalized; got "
                                     f"scheme={self.scheme} (use --method qbd)")
        if measure in ("optimal_threshold", "optimal_period"):
            raise NotApplicableError(f"{measure} applies to scheme={'markov' if 'threshold' in measure else 'periodic'}"
                                     " with --method qbd")
        S, _ = self.phase_chain()
        q1, q_a = float(S[0].sum()), float(S[-1].sum())
        if q_a == 0.0:  # underflow: q_A > 0 exactly, below the smallest double
            log10_q = _log_decoding_probability(self.codeword_bits, self.erasure_prob, self.bits[0]) / math.log(10)
            if measure in ("mean_age", "mean_peak_age", "age_distribution"):
                raise NonFiniteError(f"the decoding probability of an actual update q_A = 10^{log10_q:.6g} underflows "
                                     f"float64, so the {measure} (about 10^{-log10_q:.6g} periods) is beyond the "
                                     "float64 range")
            return 1.0  # decoding_failure_probability = 1 - q_A (1 - q1) ... rounds to 1
        ex = 1.0 + (1.0 - q1) / q_a
        ex2 = 1.0 + 2.0 * (1.0 - q1) / q_a + (1.0 - q1) * (2.0 - q_a) / q_a**2
        if measure == "mean_age":
            return (ex2 + ex) / (2.0 * ex) + 0.5
        if measure == "mean_peak_age":
            return ex + 1.0
        if measure == "decoding_failure_probability":
            return 1.0 - 1.0 / ex
        # age_distribution: P(a = 1) = 1 / E[X], P(a = i) = (1 - q1)(1 - q_a)^(i - 2) / E[X], so that
        # P(a > n) = (1 - q1)(1 - q_a)^(n - 1) / (q_a E[X]) for n >= 1
        tail = lambda n: 1.0 if n <= 0 else (1.0 - q1) * (1.0 - q_a) ** (n - 1) / (q_a * ex)  # noqa: E731
        return self._age_list(
            lambda n: np.concatenate([[1.0], (1.0 - q1) * (1.0 - q_a) ** np.arange(n)])[:n + 1] / ex, tail)
