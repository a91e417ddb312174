"""Round-robin load balancing on homogeneous unreliable processors (Liu & Righter).

Liu & Righter, "Optimal load balancing on distributed homogeneous unreliable
processors", INRIA RR-2659 (1995); Operations Research 46(4), 1998 (seed 002;
``MODELS.md``). ``n`` processors (``servers``) of rate ``mu`` (``service_rate``), FCFS,
infinite buffers; Poisson arrivals of total rate ``Lambda`` (``arrival_rate``).

``dispatch=central``
    One stream of rate ``Lambda``; arrival ``k`` goes to processor ``k mod n``
    (``policy=round-robin``) or to a uniformly random one (``policy=random``).
``dispatch=distributed``
    ``n`` independent streams of rate ``Lambda / n``, one per processor, each split
    over all ``n`` processors by its own round-robin pointer (or at random).

Unreliable processors alternate up (exponential, rate ``failure_rate``, busy or idle)
and down (rate ``repair_rate``); a down processor serves nothing and keeps its jobs
(exponential phases: preemptive resume); the dispatcher does not see failures. Service
is exponential, Erlang (``phases``) or a two-moment phase-type fit (``scv``;
:func:`exactq.models.basic.phase_type_fit`). Stability:
``Lambda / n < mu repair / (failure + repair)``.

Methods
-------
``qbd``
    Exact for one processor's marginal (hence for the means): the input of a
    processor and its up/down process do not depend on the other queues, so its queue
    is a QBD with level = its queue length and phase = (arrival clock, up/down,
    service phase). The arrival clock is Erlang-n (central round-robin: the distance
    of the pointer to this processor), one phase (random), or the superposition of
    ``n`` Erlang-n clocks of rate ``Lambda / n`` (distributed round-robin; phase =
    how many of the ``n`` clocks are in each stage).
``closed-form``
    Without failures and with exponential service the input is a renewal process
    (Erlang-n of rate ``Lambda``, or Poisson): the E_n/M/1 root
    ``sigma = (Lambda / (Lambda + mu (1 - sigma)))^n``, ``E[T] = 1 / (mu (1 - sigma))``.
``ctmc``
    The joint chain of all queues with the pointer(s) in the state (small ``n``),
    truncated at a queue length; it also gives the distribution of the time of the
    ``k``-th task completion from an empty start (all processors up, pointers at
    processor 0, or, distributed, stream ``j``'s at processor ``j``), through the
    transient solver.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.ctmc import Event, build_ctmc, explore
from exactq.errors import ModelError, NotApplicableError, UnstableError
from exactq.methods import boundary_evaluation
from exactq.params import ARRIVAL_RATE_ALIASES, Count, Param
from exactq.representations import QBD
from exactq.representations.qbd import RenewalQueue
from exactq.result import Result
from exactq.truncation import Evaluation, Truncation, grow

from .basic import phase_type_fit

__all__ = ["RoundRobin", "arrival_map"]

#: the joint chain is offered up to this many processors
CTMC_MAX_SERVERS = 4
#: the largest QBD phase count (see exactq.solvers.qbd.MAX_PHASES)
QBD_MAX_PHASES = 2000


def _compositions(n: int) -> np.ndarray:
    """All ``(c_0, ..., c_{n-1})`` of nonnegative integers summing to ``n`` (stars and bars), one per row."""
    bars = np.array(list(itertools.combinations(range(2 * n - 1), n - 1)), dtype=np.int64).reshape(-1, n - 1)
    edges = np.hstack([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), 2 * n - 1)])
    return np.diff(edges, axis=1) - 1


def arrival_map(servers: int, arrival_rate: float, policy: str, dispatch: str) -> tuple[np.ndarray, np.ndarray]:
    """``(D0, D1)`` of the arrival process seen by one processor (a Markovian arrival process).

    * central round-robin: every ``n``-th arrival of a Poisson(``Lambda``) stream, an
      Erlang-n renewal process (phase = arrivals still to come before this processor's);
    * random (either dispatch): Poisson of rate ``Lambda / n``;
    * distributed round-robin: the superposition of ``n`` independent every-n-th
      thinnings of Poisson(``Lambda / n``) streams; the phase counts the streams in each
      stage of their Erlang-n clock (``C(2n - 1, n)`` phases).

    Examples
    --------
    Central round-robin to two processors: Erlang-2 of rate ``Lambda`` per stage.

    >>> D0, D1 = arrival_map(2, 1.5, "round-robin", "central")
    >>> D0.tolist(), D1.tolist()
    ([[-1.5, 1.5], [0.0, -1.5]], [[0.0, 0.0], [1.5, 0.0]])

    Distributed round-robin has the same mean rate ``Lambda / n``:

    >>> D0, D1 = arrival_map(3, 1.5, "round-robin", "distributed")
    >>> Q = D0 + D1
    >>> w = np.linalg.lstsq(np.vstack([Q.T, np.ones(len(Q))]), np.r_[np.zeros(len(Q)), 1.0], rcond=None)[0]
    >>> bool(np.isclose(w @ D1.sum(1), 1.5 / 3))
    True
    """
    n, lam = int(servers), float(arrival_rate)
    if policy == "random" or n == 1:
        return np.array([[-lam / n]]), np.array([[lam / n]])
    if dispatch == "central":
        D0 = lam * (np.diag(np.ones(n - 1), 1) - np.eye(n))
        D1 = np.zeros((n, n))
        D1[n - 1, 0] = lam
        return D0, D1
    comp = _compositions(n)  # rows: how many of the n clocks are in each stage
    k = len(comp)
    base = n + 1
    keys = comp @ base ** np.arange(n)
    order = np.argsort(keys)
    sorted_keys = keys[order]

    def index(rows):
        return order[np.searchsorted(sorted_keys, rows @ base ** np.arange(n))]

    rate = lam / n  # each stream's rate; every stage of its Erlang-n clock has rate lam / n
    D0, D1 = np.zeros((k, k)), np.zeros((k, k))
    rows = np.arange(k)
    for stage in range(n):  # one vectorised move per stage of the clock
        live = comp[:, stage] > 0
        target = comp.copy()
        target[:, stage] -= 1
        target[:, (stage + 1) % n] += 1
        dst = index(target[live])
        block = D1 if stage == n - 1 else D0
        np.add.at(block, (rows[live], dst), rate * comp[live, stage])
    D0[rows, rows] -= D0.sum(1) + D1.sum(1)
    return D0, D1


@register_model
@dataclass(frozen=True)
class RoundRobin(Model):
    """Round-robin (or random) routing to n unreliable processors (module docstring).

    Examples
    --------
    ``MODELS.md``: n = 2, mu = 1, Lambda = 1 gives ``E[T] = 1 / (mu (1 - sigma))`` with
    ``sigma = (3 - sqrt 5) / 2``, i.e. the golden ratio 1.61803399; random splitting 2.

    >>> import exactq
    >>> t = exactq.solve("round-robin", "mean_response_time", servers=2, arrival_rate=1.0).value
    >>> bool(abs(t - (1 + 5 ** 0.5) / 2) < 1e-12)
    True
    >>> round(exactq.solve("round-robin", servers=2, arrival_rate=1.0, policy="random").value, 12)
    2.0
    """

    name = "round-robin"
    summary = "Poisson tasks split round-robin or at random over n unreliable FCFS processors, central or " \
              "distributed dispatch (Liu & Righter 1998)"
    reference = "Liu & Righter, Operations Research 46(4) (1998); INRIA RR-2659 (1995) (seed 002)"
    parameters = (
        Param("servers", "int", "number n of processors", low=1, high=64),
        Param("arrival_rate", "float", "total Poisson arrival rate Lambda (all streams together; Lambda / n per "
              "processor)", low=0.0, low_open=True, scope="total", count=Count("servers"),
              aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rate", "float", "service rate mu of each processor (mean service time 1 / mu)", default=1.0,
              low=0.0, low_open=True, scope="per-server"),
        Param("policy", "choice", "routing: each dispatcher's pointer cycles over the processors, or uniform",
              default="round-robin", choices=("round-robin", "random")),
        Param("dispatch", "choice", "one dispatcher for the total stream, or one stream of rate Lambda / n per "
              "processor with its own dispatcher", default="central", choices=("central", "distributed")),
        Param("failure_rate", "float", "rate of failures of an up processor (0: reliable)", default=0.0, low=0.0,
              scope="per-server"),
        Param("repair_rate", "float", "rate of repairs of a down processor (needed when failure_rate > 0)",
              default=None, low=0.0, low_open=True, scope="per-server"),
        Param("phases", "int", "Erlang phases of the service time (1: exponential)", default=None, low=1, high=50),
        Param("scv", "float", "squared coefficient of variation of the service time (phase-type fit; instead of "
              "phases)", default=None, low=0.01),
        Param("k", "int", "completion_time_cdf: the rank k of the task completion", default=None, low=1),
        Param("t", "float", "completion_time_cdf: the time t", default=None, low=0.0),
    )
    measures = {
        "mean_response_time": "E[T], the mean sojourn time of a task (waiting and service)",
        "mean_number": "E[L], the mean total number of tasks at all processors",
        "mean_number_per_processor": "E[L] / n, the mean number of tasks at one processor",
        "completion_time_cdf": "P(D_k <= t): the k-th task completion of the whole system by time t, from an "
                               "empty start (ctmc)",
    }
    methods = ("qbd", "closed-form", "ctmc")
    default_measure = "mean_response_time"

    servers: int
    arrival_rate: float
    service_rate: float = 1.0
    policy: str = "round-robin"
    dispatch: str = "central"
    failure_rate: float = 0.0
    repair_rate: float | None = None
    phases: int | None = None
    scv: float | None = None
    k: int | None = None
    t: float | None = None

    is_infinite = True
    qbd_truncated = False

    def check(self):
        if self.failure_rate > 0 and self.repair_rate is None:
            raise ModelError("failure_rate > 0 needs repair_rate (the rate at which a down processor is repaired)")
        if self.phases is not None and self.scv is not None:
            raise ModelError(f"give phases or scv, not both; got phases={self.phases}, scv={self.scv:g}")
        if (self.k is None) != (self.t is None):
            raise ModelError("completion_time_cdf needs both k and t")
        per, cap = self.arrival_rate / self.servers, self.service_rate * self.availability
        if per >= cap:
            raise UnstableError(
                f"the load arrival_rate / servers = {per:.6g} must be < service_rate x availability = {cap:.6g} for "
                f"stability (availability = repair_rate / (failure_rate + repair_rate) = {self.availability:.6g}); "
                f"got arrival_rate={self.arrival_rate:g}")

    @property
    def availability(self) -> float:
        """Long-run fraction of time a processor is up: ``repair / (failure + repair)``."""
        if self.failure_rate == 0:
            return 1.0
        return self.repair_rate / (self.failure_rate + self.repair_rate)

    @property
    def service_law(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha, S)``: Erlang-``phases`` or the fit to ``scv`` (exponential by default)."""
        scv = self.scv if self.scv is not None else 1.0 / (self.phases or 1)
        return phase_type_fit(1.0 / self.service_rate, scv)

    def auto_method(self) -> str:
        """The QBD; the joint chain when a completion time (``k``, ``t``) is asked for."""
        return "ctmc" if self.k is not None else "qbd"

    # -- QBD of one processor (exact) ---------------------------------------------------
    def arrival_phases(self) -> int:
        """Phases of one processor's arrival process (:func:`arrival_map`), counted without building it.

        Examples
        --------
        Distributed round-robin over 64 processors: ``C(127, 64)`` phases, about 1.2e37.

        >>> RoundRobin(64, 1.0, dispatch="distributed").arrival_phases() == math.comb(127, 64)
        True
        """
        n = int(self.servers)
        if self.policy == "random" or n == 1:
            return 1
        return n if self.dispatch == "central" else math.comb(2 * n - 1, n)

    def qbd_size(self, width=None) -> int:
        return self.arrival_phases() * (2 if self.failure_rate > 0 else 1) * len(self.service_law[0])

    def qbd(self, width=None) -> QBD:
        """Level = this processor's queue length; phase = (arrival clock, up/down, service phase).

        ``A0 = D1 x I x I``, ``A1 = D0 x I x I + I x F x I + I x E_up x S``,
        ``A2 = I x E_up x t alpha``; level 0 has phases (clock, up/down):
        ``B1 = D0 x I + I x F``, ``B0 = D1 x I x alpha``, ``B2 = I x E_up x t`` (``x`` the
        Kronecker product, ``F`` the up/down generator, ``E_up = diag(1, 0)``).

        Examples
        --------
        Central round-robin to two reliable processors with exponential service: two
        phases per level (the Erlang-2 clock) and two at level 0.

        >>> q = RoundRobin(2, 1.0).qbd()
        >>> q.n_phases, q.n_boundary_phases
        (2, 2)
        """
        if width is not None:
            raise ModelError(f"the {self.name} QBD is exact: it takes no phase truncation; got {width}")
        size = self.qbd_size()
        if size > QBD_MAX_PHASES:
            raise NotApplicableError(f"the QBD of one processor needs {size:.3g} phases, above {QBD_MAX_PHASES} "
                                     f"(servers={self.servers}, dispatch={self.dispatch}, "
                                     f"{len(self.service_law[0])} service phases); lower servers or phases")
        D0, D1 = arrival_map(self.servers, self.arrival_rate, self.policy, self.dispatch)
        alpha, S = self.service_law
        t = -S.sum(1)
        if self.failure_rate > 0:
            F = np.array([[-self.failure_rate, self.failure_rate], [self.repair_rate, -self.repair_rate]])
            up = np.diag([1.0, 0.0])
        else:
            F, up = np.zeros((1, 1)), np.eye(1)
        Ic, Iu, Is = np.eye(len(D0)), np.eye(len(F)), np.eye(len(alpha))
        kron = lambda *ms: ms[0] if len(ms) == 1 else np.kron(ms[0], kron(*ms[1:]))  # noqa: E731
        A0 = kron(D1, Iu, Is)
        A1 = kron(D0, Iu, Is) + kron(Ic, F, Is) + kron(Ic, up, S)
        A2 = kron(Ic, up, np.outer(t, alpha))
        B1 = kron(D0, Iu) + kron(Ic, F)
        B0 = kron(D1, Iu, alpha[None, :])
        B2 = kron(Ic, up, t[:, None])
        return QBD(A0, A1, A2, B1=B1, B0=B0, B2=B2)

    def qbd_measure(self, measure, qbd, sol):
        if measure == "completion_time_cdf":
            raise NotApplicableError("completion_time_cdf is a transient measure of the joint chain: use --method ctmc")
        return self._means(measure, sol.mean_level())

    def _means(self, measure: str, per_processor: float) -> float:
        values = {"mean_number_per_processor": per_processor, "mean_number": self.servers * per_processor,
                  "mean_response_time": per_processor / (self.arrival_rate / self.servers)}
        return values[measure]

    # -- closed form: the GI/M/1 root ---------------------------------------------------------
    def renewal_queue(self) -> RenewalQueue:
        """The renewal input of one processor (E_n/M/1 or M/M/1) when there is one."""
        if self.failure_rate > 0 or (self.phases or 1) != 1 or (self.scv is not None and self.scv != 1):
            raise NotApplicableError("closed-form needs reliable processors (failure_rate=0) and exponential service "
                                     "(the E_n/M/1 root); use --method qbd")
        n = self.servers
        if self.policy == "random" or n == 1:
            return RenewalQueue.erlang(1, self.arrival_rate / n, self.service_rate)
        if self.dispatch == "distributed":
            raise NotApplicableError("closed-form: with distributed round-robin a processor receives the "
                                     "superposition of n renewal streams, which is not renewal; use --method qbd")
        return RenewalQueue.erlang(n, self.arrival_rate, self.service_rate)

    def renewal_queue_measure(self, measure, queue, sol):
        if measure == "completion_time_cdf":
            raise NotApplicableError("completion_time_cdf is a transient measure of the joint chain: use --method ctmc")
        return self._means(measure, sol.mean_number())

    # -- the joint CTMC (small n) -----------------------------------------------------------------
    def _names(self, counter: bool) -> list[str]:
        n = self.servers
        names = [f"q{i}" for i in range(n)]
        if self.policy == "round-robin" and n > 1:
            names += ["p"] if self.dispatch == "central" else [f"p{j}" for j in range(n)]
        if self.failure_rate > 0:
            names += [f"u{i}" for i in range(n)]
        if len(self.service_law[0]) > 1:
            names += [f"s{i}" for i in range(n)]
        if counter:
            names.append("d")
        return names

    def joint_ctmc(self, level: int, counter: bool = False):
        """The joint chain truncated at ``level`` tasks per processor (arrivals to a full queue blocked).

        With ``counter=True`` it also counts completions up to ``k`` (the count stays at
        ``k``) and starts empty; the law at ``t`` then gives ``P(D_k <= t)``.
        """
        n, K = self.servers, int(level)
        if n > CTMC_MAX_SERVERS:
            raise NotApplicableError(f"the joint chain is offered for servers <= {CTMC_MAX_SERVERS}; got {n} "
                                     "(use --method qbd: it is exact for the means)")
        names = self._names(counter)
        col = {name: i for i, name in enumerate(names)}
        alpha, S = self.service_law
        ks = len(alpha)
        tvec = -S.sum(1)
        off = S - np.diag(np.diag(S))
        lam, rr = self.arrival_rate, self.policy == "round-robin" and n > 1
        unit = np.eye(len(names), dtype=np.int64)
        has_s, has_u = ks > 1, self.failure_rate > 0

        def arrive(i, rate_fn, pointer):
            """Events of arrivals to processor i (with rate_fn(states)), starting service in each phase."""
            out = []
            for j in range(ks):
                def fn(s, j=j):
                    rate = rate_fn(s) * np.where(s[:, col[f"q{i}"]] == 0, alpha[j], 0.0)
                    tgt = s + unit[col[f"q{i}"]]
                    if has_s:
                        tgt[:, col[f"s{i}"]] = j
                    return rate, pointer(tgt)
                out.append(Event(f"arrive_{i}_start_{j}", fn))
            out.append(Event(f"arrive_{i}", lambda s: (rate_fn(s) * (s[:, col[f"q{i}"]] > 0),
                                                       pointer(s + unit[col[f"q{i}"]]))))
            return out

        events = []
        for i in range(n):
            if not rr:
                events += arrive(i, lambda s: np.full(len(s), lam / n), lambda x: x)
            elif self.dispatch == "central":
                def advance(x):
                    x = x.copy()
                    x[:, col["p"]] = (x[:, col["p"]] + 1) % n
                    return x
                events += arrive(i, lambda s, i=i: lam * (s[:, col["p"]] == i), advance)
            else:
                for j in range(n):
                    def advance_j(x, j=j):
                        x = x.copy()
                        x[:, col[f"p{j}"]] = (x[:, col[f"p{j}"]] + 1) % n
                        return x
                    events += arrive(i, lambda s, i=i, j=j: (lam / n) * (s[:, col[f"p{j}"]] == i), advance_j)

        def up(s, i):
            return s[:, col[f"u{i}"]] == 0 if has_u else np.ones(len(s), bool)  # u = 0 up, 1 down

        def phase_of(s, i):
            return s[:, col[f"s{i}"]] if has_s else np.zeros(len(s), np.int64)

        def count(x):
            if counter:
                x = x.copy()
                x[:, col["d"]] = np.minimum(x[:, col["d"]] + 1, self.k)
            return x

        for i in range(n):
            qi = col[f"q{i}"]
            busy = lambda s, i=i, qi=qi: (s[:, qi] > 0) & up(s, i)  # noqa: E731
            if has_s:
                for j in range(ks):
                    events.append(Event(f"phase_{i}_{j}", lambda s, i=i, j=j, busy=busy: (
                        off[phase_of(s, i), j] * busy(s), np.where(np.arange(len(names)) == col[f"s{i}"], j, s))))
            for j in range(ks):  # a completion with a task waiting: the next starts in phase j
                def nxt(s, i=i, j=j, qi=qi, busy=busy):
                    tgt = s - unit[qi]
                    if has_s:
                        tgt[:, col[f"s{i}"]] = j
                    return tvec[phase_of(s, i)] * alpha[j] * busy(s) * (s[:, qi] > 1), count(tgt)
                events.append(Event(f"done_{i}_next_{j}", nxt))

            def last(s, i=i, qi=qi, busy=busy):
                tgt = s - unit[qi]
                if has_s:
                    tgt[:, col[f"s{i}"]] = 0
                return tvec[phase_of(s, i)] * busy(s) * (s[:, qi] == 1), count(tgt)
            events.append(Event(f"done_{i}_last", last))
            if has_u:
                ui = col[f"u{i}"]
                events.append(Event(f"fail_{i}", lambda s, ui=ui: (self.failure_rate * (s[:, ui] == 0),
                                                                   s + unit[ui])))
                events.append(Event(f"repair_{i}", lambda s, ui=ui: (self.repair_rate * (s[:, ui] == 1),
                                                                     s - unit[ui])))
        init = np.zeros(len(names), np.int64)
        if rr and self.dispatch == "distributed":
            for j in range(n):
                init[col[f"p{j}"]] = j  # stream j starts with processor j
        hi = []
        for name in names:
            hi.append(K if name.startswith("q") else n - 1 if name.startswith("p") else 1 if name.startswith("u")
                      else ks - 1 if name.startswith("s") else self.k)
        space = explore(init, events, names, hi=hi)
        queues = space.states[:, :n]
        trunc = Truncation(K, "block", "tasks at each processor", layers=queues.max(axis=1))
        return build_ctmc(space, events, initial=init, truncation=trunc,
                          rewards={"tasks": queues.sum(axis=1)}, constants={"K": K, "n": n})

    def ctmc_size(self, level, counter: bool = False) -> int:
        """States of :meth:`joint_ctmc` at ``level`` (a bound: the box of its variables), computed before it is built.

        With ``counter`` (``completion_time_cdf``) the completion count ``0..k`` multiplies it.

        Examples
        --------
        >>> m = RoundRobin(2, 1.0, k=10, t=1.0)
        >>> m.ctmc_size(8), m.ctmc_size(8, counter=True)
        (162, 1782)
        """
        n, K = self.servers, int(level)
        pointers = 1 if self.policy == "random" or n == 1 else n if self.dispatch == "central" else n ** n
        count = int(self.k) + 1 if counter and self.k is not None else 1
        return (K + 1) ** n * pointers * (2 ** n if self.failure_rate > 0 else 1) * len(self.service_law[0]) ** n * \
            count

    def truncation_start(self, tol: float) -> int:
        rho = self.arrival_rate / (self.servers * self.service_rate * self.availability)
        return max(8, int(math.ceil(0.5 * math.log(tol) / math.log(rho))))

    def ctmc_study(self, measure: str, context) -> Result:
        """The ``ctmc`` method: the stationary law of the joint chain, or its law at ``t`` for ``completion_time_cdf``."""
        transient = measure == "completion_time_cdf"
        if transient and self.k is None:
            raise ModelError("completion_time_cdf needs k (the rank of the completion) and t (the time)")
        opts = {key: v for key, v in context.options.items() if key == "solver"}

        def build(level, _previous):
            return self.joint_ctmc(level, counter=transient)

        def solve(chain, _previous):
            if transient:
                return context.solve(chain, using="transient", t=self.t)
            return context.solve(chain, strict=context.strict, **opts)

        def value_of(chain, sol):
            if transient:
                return sol.probability(chain.states[:, -1] >= self.k)
            return self._means(measure, sol.expect(chain.rewards["tasks"]) / self.servers)

        def evaluate(chain, sol) -> Evaluation:
            return boundary_evaluation(chain, sol, value_of(chain, sol), lambda other: value_of(chain, other))

        fixed = context.options.get("truncation")
        out = grow(build, solve, evaluate, tol=context.tol, start=None if fixed else self.truncation_start(context.tol),
                   fixed=fixed, size=lambda level: self.ctmc_size(level, counter=transient), strict=context.strict)
        sol = out.solution
        label = "ctmc/transient" if transient else f"ctmc/{sol.method}"
        return Result(value=out.value, method=label, error_estimate=out.error_estimate, residual=sol.residual,
                      n_states=out.representation.n_states, nit=getattr(sol, "nit", None), info=out.info)
