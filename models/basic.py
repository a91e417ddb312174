"""Single-queue reference models: M/M/1, M/M/c, M/M/c/K and M/PH/1.

They anchor the library's tests: every CTMC and QBD answer is checked against these
closed forms (Kleinrock, *Queueing Systems* vol. 1, 1975, sec. 3.2-3.7 and 5.6;
Erlang's C formula; the Pollaczek-Khinchine mean). Conventions: FCFS, the number in
system counts jobs in service, waiting time excludes service, ``arrival_rate`` is the
total Poisson rate.

M/M/1, M/M/c and M/PH/1 describe themselves as QBDs without truncation (level = the
number in system, or the number beyond ``c - 1``; phase = the service phase), so
``--method qbd`` is exact: the matrix-geometric law of the infinite queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc, explore
from exactq.errors import ModelError, UnstableError
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations import QBD
from exactq.statespace import StateSpace
from exactq.truncation import Truncation

__all__ = ["MM1", "MMc", "MMcK", "MPH1", "phase_type_fit"]

_MEASURES = {
    "mean_number": "E[L], mean number in system",
    "mean_queue_length": "mean number waiting (excluding those in service)",
    "mean_response_time": "E[T] = E[W] + 1/mu, sojourn time of an accepted job",
    "mean_waiting_time": "E[W], time in queue before service of an accepted job",
    "p_wait": "probability that an accepted arrival waits",
    "utilization": "mean fraction of busy servers",
    "prob_empty": "probability that the system is empty",
}


class _BirthDeath(Model):
    """Common CTMC and closed-form machinery for M/M/c with optional capacity."""

    methods = ("closed-form", "ctmc")
    default_measure = "mean_number"

    # subclasses provide: arrival_rate, service_rate, _servers, _capacity (None = infinite)
    @property
    def is_infinite(self) -> bool:
        return self._capacity is None

    def _probabilities(self, K: int) -> np.ndarray:
        """Exact stationary law on 0..K of the birth-death chain (product form)."""
        n = np.arange(K + 1)
        c = self._servers
        a = self.arrival_rate / self.service_rate
        # log p_n = n log a - log(min(n, c)!) - (n - c)^+ log c
        from scipy.special import gammaln  # here, not at import (0.1 s; only the M/M/c laws need it)

        logp = n * math.log(a) - gammaln(np.minimum(n, c) + 1) - np.maximum(n - c, 0) * math.log(c)
        p = np.exp(logp - logp.max())
        return p / p.sum()

    # -- CTMC representation ---------------------------------------------------
    def truncation_start(self, tol: float) -> int:
        rho = self.arrival_rate / (self._servers * self.service_rate)
        return int(self._servers + math.ceil(math.log(tol) / math.log(rho))) + 10

    def ctmc_size(self, truncation) -> int:
        return (self._capacity if self._capacity is not None else int(truncation)) + 1

    def ctmc(self, truncation=None):
        K = self._capacity if self._capacity is not None else int(truncation)
        lam, mu, c = self.arrival_rate, self.service_rate, self._servers
        space = StateSpace.box(["n"], hi=[K])
        events = [
            Event("arrival", lambda s: (np.full(len(s), lam), s + 1)),
            Event("departure", lambda s: (mu * np.minimum(s[:, 0], c), s - 1)),
        ]
        trunc = Truncation(K, "block", "number in system") if self._capacity is None else None
        return build_ctmc(space, events, initial=0, truncation=trunc,
                          constants={"c": c, "K": K})

    def ctmc_measure(self, measure, chain, sol):
        n = chain.states[:, 0].astype(float)
        return self._measure_from(measure, n, sol.pi, int(chain.states[-1, 0]), self._servers)

    def ctmc_functional(self, measure, chain):
        """``(f, g)``: the measure is ``(f . pi) / (g . pi)`` on the chain (what ``certify`` encloses)."""
        return self._functional(measure, chain.states[:, 0].astype(float), int(chain.states[-1, 0]), self._servers)

    def _functional(self, measure, n, K, c):
        """Per-state rewards ``(f, g)`` with ``measure = (f . pi) / (g . pi)`` on the states ``n``.

        With a capacity K, arrivals are lost in the state ``n = K``; accepted jobs arrive
        at rate ``lambda (1 - P(N = K))`` (PASTA), which Little's law divides by.
        """
        lam = self.arrival_rate
        ones = np.ones_like(n)
        accepted = ones if self._capacity is None else (n < K).astype(float)
        if measure == "mean_number":
            return n, ones
        if measure == "mean_queue_length":
            return np.maximum(n - c, 0), ones
        if measure == "mean_response_time":
            return n, lam * accepted
        if measure == "mean_waiting_time":
            return np.maximum(n - c, 0), lam * accepted
        if measure == "p_wait":
            return (n >= c) * accepted, accepted
        if measure == "utilization":
            return np.minimum(n, c) / c, ones
        if measure == "prob_empty":
            return (n == 0).astype(float), ones
        if measure == "blocking_probability":
            return 1.0 - accepted, ones
        raise ModelError(f"unknown measure {measure!r}")  # pragma: no cover (validated by the API)

    def _measure_from(self, measure, n, pi, K, c):
        f, g = self._functional(measure, n, K, c)
        return float(pi @ f) / float(pi @ g)

    # -- QBD representation (the infinite queues): exact, no truncation -------------
    #: the QBD is the whole infinite chain: the qbd method solves it once
    qbd_truncated = False

    def qbd(self, width=None) -> QBD:
        """Level 0 = the states 0..c-1 (``c`` phases); level ``n >= 1`` = the state ``c - 1 + n`` (one phase).

        Level 0 is the finite birth-death chain below ``c``; above it every state has
        the same rates ``lambda`` up and ``c mu`` down, so the QBD is level
        independent with scalar blocks and ``R = lambda / (c mu)``.

        Examples
        --------
        M/M/3 with ``lambda = 2.4``: Erlang C from the QBD, ``P(wait) = 1 - pi_0 1``.

        >>> import exactq
        >>> q = exactq.solve("mmc", "p_wait", method="qbd", arrival_rate=2.4, servers=3).value
        >>> c = exactq.solve("mmc", "p_wait", method="closed-form", arrival_rate=2.4, servers=3).value
        >>> bool(abs(q - c) < 1e-12)
        True
        """
        if width is not None:
            raise ModelError(f"model {self.name} has an exact QBD: it takes no phase truncation; got {width}")
        lam, mu, c = self.arrival_rate, self.service_rate, self._servers
        i = np.arange(c)
        B1 = np.diag(np.full(c - 1, lam), 1) + np.diag(mu * i[1:], -1) - np.diag(lam + mu * i)
        B0 = np.zeros((c, 1))
        B0[c - 1, 0] = lam
        B2 = np.zeros((1, c))
        B2[0, c - 1] = c * mu
        return QBD([[lam]], [[-(lam + c * mu)]], [[c * mu]], B1=B1, B0=B0, B2=B2)

    def qbd_measure(self, measure, qbd, sol):
        lam, c = self.arrival_rate, self._servers
        j = np.arange(c, dtype=float)
        L = sol.expect_affine(j, c - 1.0, 1.0)
        Lq = sol.expect_affine(0.0, -1.0, 1.0)
        values = {
            "mean_number": L,
            "mean_queue_length": Lq,
            "mean_response_time": L / lam,
            "mean_waiting_time": Lq / lam,
            "p_wait": 1.0 - float(sol.pi0.sum()),
            "utilization": sol.expect_affine(j, float(c), 0.0) / c,
            "prob_empty": float(sol.pi0[0]),
        }
        return values[measure]

    # -- closed forms ------------------------------------------------------------
    def closed_form(self, measure):
        lam, mu, c = self.arrival_rate, self.service_rate, self._servers
        if self._capacity is not None:
            K = self._capacity
            p = self._probabilities(K)
            n = np.arange(K + 1, dtype=float)
            return self._measure_from(measure, n, p, K, c)
        a = lam / mu
        rho = a / c
        # Erlang C via the stable Erlang B recursion B(k) = a B(k-1) / (k + a B(k-1))
        B = 1.0
        for k in range(1, c + 1):
            B = a * B / (k + a * B)
        C = B / (1.0 - rho * (1.0 - B))
        Wq = C / (c * mu - lam)
        values = {
            "mean_waiting_time": Wq,
            "mean_response_time": Wq + 1.0 / mu,
            "mean_queue_length": lam * Wq,
            "mean_number": lam * Wq + a,
            "p_wait": C,
            "utilization": rho,
        }
        if measure == "prob_empty":
            s = sum(a**k / math.factorial(k) for k in range(c)) + a**c / (math.factorial(c) * (1 - rho))
            return 1.0 / s
        return values[measure]


def _stability(arrival_rate: float, total: float, what: str) -> None:
    if arrival_rate >= total:
        raise UnstableError(
            f"arrival_rate must be < {what} {total:g} for stability; got {arrival_rate:g}"
        )


_RATE = dict(low=0.0, low_open=True)


@register_model
@dataclass(frozen=True)
class MM1(_BirthDeath):
    """The M/M/1 queue."""

    name = "mm1"
    summary = "M/M/1: Poisson arrivals, one exponential server, infinite buffer"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.2"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda (total)", **_RATE, scope="total",
              count=Count(how="one"), aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rate", "float", "service rate mu", default=1.0, **_RATE, scope="per-server"),
    )
    measures = dict(_MEASURES)
    methods = ("closed-form", "ctmc", "qbd")
    arrival_rate: float
    service_rate: float = 1.0

    _servers = 1
    _capacity = None

    def check(self):
        _stability(self.arrival_rate, self.service_rate, "service_rate")


@register_model
@dataclass(frozen=True)
class MMc(_BirthDeath):
    """The M/M/c queue (Erlang C)."""

    name = "mmc"
    summary = "M/M/c: c identical exponential servers, one FCFS queue (Erlang C)"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.5"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda (total, to the one queue)", **_RATE,
              scope="total", count=Count("servers"), aliases=ARRIVAL_RATE_ALIASES),
        Param("servers", "int", "number of servers c", low=1),
        Param("service_rate", "float", "service rate of each server", default=1.0, **_RATE, scope="per-server"),
    )
    measures = dict(_MEASURES)
    methods = ("closed-form", "ctmc", "qbd")
    arrival_rate: float
    servers: int
    service_rate: float = 1.0
    _capacity = None

    @property
    def _servers(self):
        return self.servers

    def check(self):
        _stability(self.arrival_rate, self.servers * self.service_rate, "total service rate")


@register_model
@dataclass(frozen=True)
class MMcK(_BirthDeath):
    """The M/M/c/K queue: at most K jobs in system, arrivals finding K are lost."""

    name = "mmck"
    summary = "M/M/c/K: c exponential servers, room for K jobs in total; arrivals finding K are lost"
    reference = "Kleinrock (1975), Queueing Systems I, sec. 3.6-3.7"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda (total, offered)", **_RATE, scope="total",
              count=Count("servers"), aliases=ARRIVAL_RATE_ALIASES),
        Param("servers", "int", "number of servers c", low=1),
        Param("capacity", "int", "maximum number in system K (>= servers)", low=1),
        Param("service_rate", "float", "service rate of each server", default=1.0, **_RATE, scope="per-server"),
    )
    measures = dict(_MEASURES, blocking_probability="probability an arrival is lost (PASTA)")
    arrival_rate: float
    servers: int
    capacity: int
    service_rate: float = 1.0

    @property
    def _servers(self):
        return self.servers

    @property
    def _capacity(self):
        return self.capacity

    def check(self):
        if self.capacity < self.servers:
            raise ModelError(f"capacity must be >= servers {self.servers}; got {self.capacity}")


# ----------------------------------------------------------------------------------
# M/PH/1: a two-moment phase-type service
# ----------------------------------------------------------------------------------
#: the smallest scv accepted: Erlang-100 (one QBD phase per Erlang phase)
MIN_SCV = 0.01


def phase_type_fit(mean: float, scv: float) -> tuple[np.ndarray, np.ndarray]:
    """A phase-type law ``PH(alpha, S)`` with the given mean and squared coefficient of variation.

    The classical two-moment fits (Tijms, *A First Course in Stochastic Models*,
    2003, sec. 2.5 / eq. (B.12)):

    * ``scv = 1/k``: Erlang-k, ``k`` phases of rate ``k / mean``;
    * ``1/k < scv < 1/(k - 1)``: with probability ``p`` an Erlang-(k-1), otherwise an
      Erlang-k, all phases of one rate ``nu = (k - p) / mean``, where
      ``p = (k scv - sqrt(k (1 + scv) - k^2 scv)) / (1 + scv)``;
    * ``scv = 1``: exponential;
    * ``scv > 1``: the two-phase hyperexponential with balanced means,
      ``p1 = (1 + sqrt((scv - 1) / (scv + 1))) / 2``, ``mu_i = 2 p_i / mean``.

    Returns
    -------
    alpha : (k,) ndarray
        The initial phase law.
    S : (k, k) ndarray
        The sub-generator (exit rates ``t = -S 1``).

    Examples
    --------
    ``scv = 1/2`` is Erlang-2; every fit has the requested mean and scv:

    >>> alpha, S = phase_type_fit(2.0, 0.5)
    >>> alpha.tolist(), S.tolist()
    ([1.0, 0.0], [[-1.0, 1.0], [0.0, -1.0]])
    >>> alpha, S = phase_type_fit(1.5, 0.3)
    >>> m1 = alpha @ np.linalg.solve(-S, np.ones(len(alpha)))
    >>> m2 = 2 * alpha @ np.linalg.solve(S @ S, np.ones(len(alpha)))
    >>> bool(np.isclose(m1, 1.5) and np.isclose(m2 / m1 ** 2 - 1, 0.3))
    True
    """
    mean, scv = float(mean), float(scv)
    if not (mean > 0 and math.isfinite(mean)):
        raise ModelError(f"mean_service_time must be > 0; got {mean!r}")
    if not (scv >= MIN_SCV and math.isfinite(scv)):
        raise ModelError(f"scv must be >= {MIN_SCV:g} (at most {round(1 / MIN_SCV)} phases) and finite; got {scv!r}")
    if abs(scv - 1.0) <= 1e-12:
        return np.array([1.0]), np.array([[-1.0 / mean]])
    if scv > 1.0:
        p1 = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
        p = np.array([p1, 1.0 - p1])
        return p, np.diag(-2.0 * p / mean)
    k = max(2, math.ceil(1.0 / scv - 1e-9))
    p = (k * scv - math.sqrt(max(k * (1.0 + scv) - k * k * scv, 0.0))) / (1.0 + scv)
    p = min(max(p, 0.0), 1.0)
    nu = (k - p) / mean
    alpha = np.zeros(k)
    alpha[0], alpha[1] = 1.0 - p, p
    S = nu * (np.diag(np.ones(k - 1), 1) - np.eye(k))
    return alpha, S


@register_model
@dataclass(frozen=True)
class MPH1(Model):
    """The M/PH/1 queue: Poisson arrivals, one server whose service law is fitted to a mean and an scv.

    Examples
    --------
    Erlang-2 service (``scv = 1/2``) of mean 1 at ``lambda = 0.5``: Pollaczek-Khinchine
    gives ``E[W] = rho E[S] (1 + scv) / (2 (1 - rho)) = 0.75``, and so does the QBD.

    >>> import exactq
    >>> w = exactq.solve("mph1", "mean_waiting_time", method="qbd", arrival_rate=0.5, scv=0.5).value
    >>> bool(abs(w - 0.75) < 1e-12)
    True
    """

    name = "mph1"
    summary = "M/PH/1: Poisson arrivals, one FCFS server with phase-type service given by its mean and scv"
    reference = "Neuts (1981), ch. 3; Kleinrock (1975), Queueing Systems I, sec. 5.6 (Pollaczek-Khinchine)"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate lambda (total)", **_RATE, scope="total",
              count=Count(how="one"), aliases=ARRIVAL_RATE_ALIASES),
        Param("mean_service_time", "float", "mean service time E[S]", default=1.0, **_RATE),
        Param("scv", "float", "squared coefficient of variation of the service time: 1/k gives Erlang-k, "
              "between two such a mixture of Erlang-(k-1) and Erlang-k, 1 exponential, > 1 a balanced-means "
              "two-phase hyperexponential", default=1.0, low=MIN_SCV),
    )
    measures = dict(_MEASURES)
    methods = ("closed-form", "qbd", "ctmc")
    default_measure = "mean_number"

    arrival_rate: float
    mean_service_time: float = 1.0
    scv: float = 1.0

    is_infinite = True
    qbd_truncated = False
    _capacity = None
    _measure_from = _BirthDeath._measure_from
    _functional = _BirthDeath._functional

    def check(self):
        rho = self.arrival_rate * self.mean_service_time
        if rho >= 1.0:
            raise UnstableError(f"arrival_rate must be < 1 / mean_service_time = {1 / self.mean_service_time:g} "
                                f"for stability; got {self.arrival_rate:g}")

    @property
    def service_rate(self) -> float:
        """``1 / E[S]``."""
        return 1.0 / self.mean_service_time

    @property
    def service_law(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha, S)`` of the fitted service law (:func:`phase_type_fit`)."""
        return phase_type_fit(self.mean_service_time, self.scv)

    # -- closed form: Pollaczek-Khinchine ----------------------------------------------
    def closed_form(self, measure):
        """Pollaczek-Khinchine: ``E[W] = lambda E[S^2] / (2 (1 - rho))`` with ``E[S^2] = (1 + scv) E[S]^2``."""
        lam, es = self.arrival_rate, self.mean_service_time
        rho = lam * es
        wait = rho * es * (1.0 + self.scv) / (2.0 * (1.0 - rho))
        values = {
            "mean_waiting_time": wait,
            "mean_response_time": wait + es,
            "mean_queue_length": lam * wait,
            "mean_number": lam * (wait + es),
            "p_wait": rho,  # PASTA: an arrival waits iff the server is busy
            "utilization": rho,
            "prob_empty": 1.0 - rho,
        }
        return values[measure]

    # -- QBD: level = number in system, phase = the phase of the service in progress ------
    def qbd(self, width=None) -> QBD:
        """``A0 = lambda I``, ``A1 = S - lambda I``, ``A2 = t alpha``; level 0 (empty) has one phase."""
        if width is not None:
            raise ModelError(f"model {self.name} has an exact QBD: it takes no phase truncation; got {width}")
        alpha, S = self.service_law
        lam, k = self.arrival_rate, len(alpha)
        t = -S.sum(1)
        return QBD(lam * np.eye(k), S - lam * np.eye(k), np.outer(t, alpha), B1=[[-lam]],
                   B0=lam * alpha[None, :], B2=t[:, None])

    def qbd_measure(self, measure, qbd, sol):
        lam = self.arrival_rate
        L = sol.expect_affine(0.0, 0.0, 1.0)
        Lq = sol.expect_affine(0.0, -1.0, 1.0)
        busy = 1.0 - float(sol.pi0.sum())
        values = {"mean_number": L, "mean_queue_length": Lq, "mean_response_time": L / lam,
                  "mean_waiting_time": Lq / lam, "p_wait": busy, "utilization": busy,
                  "prob_empty": float(sol.pi0.sum())}
        return values[measure]

    # -- the truncated CTMC in (number in system, service phase) -------------------------
    def decay_rate(self) -> float:
        """``sp(R)``: the queue length's tail decays like ``sp(R)^n``, with ``R = lambda (lambda I - lambda 1 alpha - S)^-1``.

        The explicit rate matrix of the M/PH/1 QBD (Neuts 1981, sec. 3.2). It is
        ``rho`` for exponential service, below it for ``scv < 1`` and near 1 for a
        very variable service (``scv = 10^6``: ``1 - 1.3e-6``), where the truncated
        chain needs ``log(tol) / log(sp(R))`` levels.

        Examples
        --------
        >>> round(MPH1(0.5).decay_rate(), 12), MPH1(0.5, scv=1e6).decay_rate() > 1 - 2e-6
        (0.5, True)
        """
        alpha, S = self.service_law
        lam, k = self.arrival_rate, len(alpha)
        R = lam * np.linalg.inv(lam * np.eye(k) - lam * np.outer(np.ones(k), alpha) - S)
        return float(np.abs(np.linalg.eigvals(R)).max())

    def truncation_start(self, tol: float) -> int:
        """Where the tail ``sp(R)^K`` (never below ``rho^K``) falls under ``tol``, plus 10 levels."""
        rho = self.arrival_rate * self.mean_service_time
        eta = min(max(self.decay_rate(), rho), 1.0 - 1e-15)
        return int(math.ceil(math.log(tol) / math.log(eta))) + 10

    def ctmc_size(self, truncation) -> int:
        return int(truncation) * len(self.service_law[0]) + 1

    def ctmc(self, truncation=None):
        """At most ``truncation`` jobs; arrivals finding it full are blocked (the ``block`` rule)."""
        if truncation is None:
            raise ModelError("mph1 needs a truncation level (jobs in system)")
        K = int(truncation)
        alpha, S = self.service_law
        lam, k = self.arrival_rate, len(alpha)
        t = -S.sum(1)
        off = S - np.diag(np.diag(S))

        def start(j):  # an arrival to the empty system starts service in phase j
            return Event(f"arrival_start_{j}", lambda s: (lam * alpha[j] * (s[:, 0] == 0), np.column_stack(
                [s[:, 0] + 1, np.full(len(s), j)])))

        def phase(j):  # the service moves to phase j
            return Event(f"phase_{j}", lambda s: (off[s[:, 1], j] * (s[:, 0] > 0), np.column_stack(
                [s[:, 0], np.full(len(s), j)])))

        def next_job(j):  # a completion with a job waiting: the next one starts in phase j
            return Event(f"done_next_{j}", lambda s: (t[s[:, 1]] * alpha[j] * (s[:, 0] > 1), np.column_stack(
                [s[:, 0] - 1, np.full(len(s), j)])))

        events = [Event("arrival", lambda s: (lam * (s[:, 0] > 0), s + np.array([1, 0]))),
                  Event("done_empty", lambda s: (t[s[:, 1]] * (s[:, 0] == 1), np.zeros_like(s)))]
        events += [start(j) for j in range(k)] + [phase(j) for j in range(k)] + [next_job(j) for j in range(k)]
        space = explore([0, 0], events, ["n", "phase"], hi=[K, k - 1])
        return build_ctmc(space, events, initial=[0, 0], truncation=Truncation(K, "block", "number in system"),
                          constants={"K": K})

    def ctmc_measure(self, measure, chain, sol):
        n = chain.states[:, 0].astype(float)
        return self._measure_from(measure, n, sol.pi, int(chain.states[:, 0].max()), 1)

    def ctmc_functional(self, measure, chain):
        """``(f, g)``: the measure is ``(f . pi) / (g . pi)`` on the chain (what ``certify`` encloses)."""
        return self._functional(measure, chain.states[:, 0].astype(float), int(chain.states[:, 0].max()), 1)
