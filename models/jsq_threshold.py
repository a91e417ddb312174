"""The threshold systems of two identical servers, the systems whose measures bound JSQ's.

Two exponential servers of rate ``service_rate``, Poisson arrivals of total rate
``arrival_rate`` joining the shorter queue (ties at random), and a threshold ``T``:

* **threshold jockeying**: when a departure from the shorter queue would make the
  difference of the queue lengths ``T + 1``, a job jockeys from the longer queue to
  the shorter one, so ``|q1 - q2| <= T``;
* **threshold blocking**: while the difference is ``T``, the server of the shorter
  queue stops, so the difference never exceeds ``T``; this system loses service
  capacity and is stable only from a smallest threshold on.

Each is a level-independent QBD (level: the shorter queue, phase: the difference,
:func:`exactq.models.jsq.threshold_qbd`), solved exactly by ``--method qbd``.
Jockeying bounds JSQ's mean number, response and waiting times from below and
blocking from above (and the other way round for the probability of an empty system),
which is how the ``bounds`` method of ``jsq`` brackets JSQ (Adan, van Houtum & van der
Wal 1994). These systems were ``jsq threshold_system=... threshold=T``, which still
works and warns.

References
----------
I. J. B. F. Adan, G. J. van Houtum and J. van der Wal, "Upper and lower bounds for the
waiting time in the symmetric shortest queue system", Ann. Oper. Res. 48 (1994) 197-217.
"""

from __future__ import annotations

from dataclasses import dataclass

from exactq.catalogue import Model, register_model
from exactq.errors import NotApplicableError
from exactq.params import ARRIVAL_RATE_ALIASES, Param
from exactq.representations import QBD
from exactq.result import Estimate

from .jsq import BOUNDED_MEASURES, SYSTEMS, JSQ, check_threshold_stability, threshold_measure, threshold_qbd

__all__ = ["JSQThreshold"]


def _two_servers(values: dict) -> int:
    """The number of servers (the rates' scope conversions): always two."""
    return 2


@register_model
@dataclass(frozen=True)
class JSQThreshold(Model):
    """A threshold-jockeying or threshold-blocking system (see the module docstring).

    Examples
    --------
    At ``T = 1`` threshold jockeying keeps the queues within one job of each other: it
    is the M/M/2 queue, ``E[L] = 2 rho / (1 - rho^2)``:

    >>> import exactq
    >>> r = exactq.solve("jsq-threshold", system="jockeying", threshold=1, arrival_rate=1.0, service_rate=1.0)
    >>> bool(abs(r.value - 1.0 / 0.75) < 1e-12), r.method
    (True, 'qbd')
    """

    name = "jsq-threshold"
    summary = "threshold jockeying or threshold blocking with two identical servers (the systems bounding JSQ)"
    reference = "Adan, van Houtum & van der Wal, Ann. Oper. Res. 48 (1994) 197-217"
    parameters = (
        Param("arrival_rate", "float", "Poisson arrival rate, total over the two servers", low=0.0, low_open=True,
              scope="total", count=_two_servers, count_doc="2", aliases=ARRIVAL_RATE_ALIASES),
        Param("service_rate", "float", "service rate of each of the two servers", low=0.0, low_open=True,
              scope="per-server", count=_two_servers, count_doc="2"),
        Param("threshold", "int", "threshold T on the difference of the queue lengths", low=1),
        Param("system", "choice", "jockeying (a job jockeys to keep |q1 - q2| <= T: a lower bound on JSQ's delays) "
              "or blocking (the shorter queue's server stops at difference T: an upper bound)", choices=SYSTEMS),
    )
    measures = {k: JSQ.measures[k] for k in BOUNDED_MEASURES}
    methods = ("qbd",)
    default_measure = "mean_number"

    arrival_rate: float
    service_rate: float
    threshold: int
    system: str

    is_infinite = True  # the QBD is the whole infinite chain, exact in the level (qbd_truncated is False)

    def check(self) -> None:
        check_threshold_stability(self.arrival_rate, self.service_rate, self.threshold, self.system)

    def qbd(self, width=None) -> QBD:
        """The system as a QBD: level = the shorter queue, phase = the difference (0..T)."""
        if width is not None:
            raise NotApplicableError(f"model {self.name} is an exact QBD: it takes no truncation; got {width}")
        return threshold_qbd(self.arrival_rate, self.service_rate, self.threshold, self.system)

    def qbd_measure(self, measure, qbd, sol) -> Estimate:
        """A measure of the solved system, with its rounding-error estimate."""
        value, err = threshold_measure(sol, self.system, self.threshold, measure, self.arrival_rate)
        return Estimate(value, error=err, info={"system": self.system, "threshold": self.threshold,
                                                "spectral_radius": sol.spectral_radius, "residual": sol.residual})
