"""Static routing of Poisson job classes to parallel processor-sharing servers.

Servers ``i = 1..n`` have capacities ``service_rates`` mu_i (work per unit time) and
holding costs ``holding_costs`` c_i (per job per unit time). Job classes arrive as
Poisson streams of rates lambda_k (``arrival_rates``: the rate of each *class*, not
per server) with mean sizes E[B_k] (``mean_sizes``; general size laws), or the total
work rate is given directly (``work_rate`` rho = sum_k lambda_k E[B_k], the total
over all servers); rho < sum_i mu_i. A static policy sends a fraction of each class
to each server, so server i is an M/G/1-PS queue with utilisation rho_i = x_i / mu_i
(x_i: work routed to it per unit time), mean number E[N_i] = rho_i / (1 - rho_i)
whatever the size laws, and the holding cost rate is

    C(rho_1, ..., rho_n) = sum_i c_i rho_i / (1 - rho_i),   sum_i mu_i rho_i = rho.

Three regimes, all indexed here by the number K of decision makers:

* **centralized** (K = 1): one dispatcher minimises C; the cost depends on the loads
  only, so an optimal policy that ignores job sizes exists (every class split in the
  same proportions).
* **decentralized** (K = inf): each job, knowing its size b, picks a server minimising
  its own cost c_i b / (mu_i (1 - rho_i)). The Wardrop equilibrium minimises the
  potential -sum_i c_i log(1 - rho_i) under the same constraint.
* **atomic** (finite K >= 2): K dispatchers each route rho/K and minimise their own
  cost; the symmetric Nash equilibrium minimises
  sum_i c_i [(1 - 1/K)(-log(1 - rho_i)) + (1/K) / (1 - rho_i)] (Ayesta, Brun & Prabhu).

The model describes each regime as a
:class:`~exactq.representations.routing.RoutingProblem` and maps the solutions to
its measures; the ``closed-form`` method solves them by water-filling with activation
thresholds, the ``convex`` method as convex programs in cvxpy (the independent
check), both in :mod:`exactq.solvers.routing`.

References
----------
E. Altman, U. Ayesta, B. J. Prabhu, "Load balancing in processor sharing systems",
Telecommunication Systems 47 (2011) 35-48.
U. Ayesta, O. Brun, B. J. Prabhu, "Price of anarchy in non-cooperative load balancing
games", Performance Evaluation 68 (2011) 1312-1332.
M. Haviv, T. Roughgarden, "The price of anarchy in an exponential multi-server",
Operations Research Letters 35 (2007) 421-426.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.errors import ModelError, UnstableError
from exactq.params import Param
from exactq.representations.routing import RoutingProblem
from exactq.result import Result

__all__ = ["PSRouting", "CENTRALIZED", "DECENTRALIZED"]

#: number of decision makers of the centralized optimum and of the Wardrop equilibrium
CENTRALIZED = 1
DECENTRALIZED = math.inf

_POSITIVE = dict(low=0.0, low_open=True)
_REGIMES = {"centralized": CENTRALIZED, "decentralized": DECENTRALIZED, "atomic": None}


@register_model
@dataclass(frozen=True)
class PSRouting(Model):
    """Static routing to parallel PS servers: optimum, Wardrop and atomic equilibria.

    Examples
    --------
    The reference case of MODELS.md (mu = (1, 2), c = (1, 1), rho = 1.5): optimum
    loads (0.378680, 0.560660) of cost 1.885618, equilibrium (0.25, 0.625) of cost
    2, price of anarchy 3 / (2 sqrt 2) = 1.060660.

    >>> import exactq
    >>> kw = dict(service_rates="1,2", holding_costs="1,1", work_rate=1.5)
    >>> [round(v, 6) for v in exactq.solve("ps-routing", "loads_centralized", **kw).value]
    [0.37868, 0.56066]
    >>> round(exactq.solve("ps-routing", "cost_centralized", **kw).value, 6)
    1.885618
    >>> exactq.solve("ps-routing", "loads_decentralized", **kw).value
    [0.25, 0.625]
    >>> round(exactq.solve("ps-routing", "cost_decentralized", **kw).value, 12)
    2.0
    >>> r = exactq.solve("ps-routing", "price_of_anarchy", method="convex", **kw)
    >>> bool(abs(r.value - 3 / (2 * 2**0.5)) < 1e-10), round(r.value, 6)
    (True, 1.06066)
    """

    name = "ps-routing"
    summary = ("multi-class static routing to parallel processor-sharing servers: "
               "optimal, selfish (Wardrop) and K-dispatcher routing, price of anarchy")
    reference = "Altman, Ayesta & Prabhu, Telecommunication Systems 47 (2011); Ayesta, Brun & Prabhu, Perf. Eval. 68 (2011)"
    parameters = (
        Param("service_rates", "floats", "server capacities mu_i (work per unit time)", **_POSITIVE,
              scope="per-server"),
        Param("holding_costs", "floats", "holding cost c_i per job per unit time at server i (default 1 each)",
              default=None, **_POSITIVE),
        Param("work_rate", "float", "TOTAL work rate rho = sum lambda_k E[B_k] over all servers (or give "
              "arrival_rates)", default=None, **_POSITIVE, scope="total"),
        Param("arrival_rates", "floats", "Poisson rate lambda_k of each job CLASS, in total (not per server; "
              "instead of work_rate)", default=None, **_POSITIVE, scope="total"),
        Param("mean_sizes", "floats", "mean job sizes E[B_k] of the classes (default 1 each)",
              default=None, **_POSITIVE),
        Param("dispatchers", "int", "number K of symmetric selfish dispatchers (for the *_atomic measures)",
              default=None, low=1),
    )
    measures = {
        "price_of_anarchy": "cost_decentralized / cost_centralized",
        "price_of_anarchy_atomic": "cost_atomic / cost_centralized",
        "cost_centralized": "minimal holding cost rate sum_i c_i rho_i/(1-rho_i)",
        "cost_decentralized": "holding cost rate at the Wardrop equilibrium of selfish jobs",
        "cost_atomic": "holding cost rate at the Nash equilibrium of `dispatchers` dispatchers",
        "loads_centralized": "utilisations rho_i = x_i/mu_i under the optimal routing (list)",
        "loads_decentralized": "utilisations at the Wardrop equilibrium (list)",
        "loads_atomic": "utilisations at the symmetric K-dispatcher Nash equilibrium (list)",
        "servers_used_centralized": "0-based indices of the servers the optimum uses (list)",
        "servers_used_decentralized": "0-based indices of the servers selfish jobs use (list)",
        "servers_used_atomic": "0-based indices of the servers the dispatchers use (list)",
        "routing_centralized": "size-independent optimal routing probabilities, classes x servers",
        "routing_decentralized": "size-independent equilibrium routing probabilities, classes x servers",
    }
    methods = ("closed-form", "convex")
    default_measure = "price_of_anarchy"

    service_rates: tuple
    holding_costs: tuple | None = None
    work_rate: float | None = None
    arrival_rates: tuple | None = None
    mean_sizes: tuple | None = None
    dispatchers: int | None = None

    def check(self):
        if (self.work_rate is None) == (self.arrival_rates is None):
            raise ModelError("give exactly one of work_rate or arrival_rates (with mean_sizes); "
                             f"got work_rate={self.work_rate}, arrival_rates={self.arrival_rates}")
        if self.mean_sizes is not None:
            if self.arrival_rates is None:
                raise ModelError("mean_sizes needs arrival_rates; got mean_sizes without arrival_rates")
            if len(self.mean_sizes) != len(self.arrival_rates):
                raise ModelError(f"mean_sizes must have one value per class ({len(self.arrival_rates)}); "
                                 f"got {len(self.mean_sizes)}")
        try:  # the one validation of the problem: the representation's, in the model's words
            self.routing_problem()
        except UnstableError:
            if self.work_rate is not None:
                raise
            raise UnstableError(f"work rate sum(arrival_rates * mean_sizes) must be < total service rate "
                                f"{float(sum(self.service_rates)):g}; got {self.total_work_rate:g}") from None

    # -- representation ------------------------------------------------------------
    @property
    def class_work_rates(self) -> np.ndarray:
        """Work rate lambda_k E[B_k] of each class (one class of rate rho with work_rate)."""
        if self.arrival_rates is None:
            return np.array([float(self.work_rate)])
        lam = np.asarray(self.arrival_rates, dtype=float)
        sizes = np.ones_like(lam) if self.mean_sizes is None else np.asarray(self.mean_sizes, dtype=float)
        return lam * sizes

    @property
    def total_work_rate(self) -> float:
        """rho = sum_k lambda_k E[B_k], the total work rate."""
        return float(np.sum(self.class_work_rates))

    def routing_problem(self, dispatchers=CENTRALIZED) -> RoutingProblem:
        """The routing problem of ``dispatchers`` decision makers (1, an int K or math.inf).

        Examples
        --------
        >>> m = PSRouting.create(service_rates="1,2", arrival_rates="1,0.5", mean_sizes="0.5,2")
        >>> p = m.routing_problem(math.inf)
        >>> p.regime, p.work_rate, p.class_work_rates.tolist()
        ('decentralized', 1.5, [0.5, 1.0])
        """
        return RoutingProblem(self.service_rates, self.holding_costs, self.total_work_rate,
                              self.class_work_rates, dispatchers)

    def routing_regimes(self, measure: str) -> tuple:
        """The numbers of decision makers whose loads ``measure`` needs (1, inf or K).

        Examples
        --------
        >>> PSRouting.create(service_rates="1,2", work_rate=1.5).routing_regimes("price_of_anarchy")
        (1, inf)
        """
        if measure.startswith("price_of_anarchy"):
            other = "atomic" if measure.endswith("_atomic") else "decentralized"
            return (CENTRALIZED, self._dispatchers_of(other))
        regime = measure.rsplit("_", 1)[-1]
        if regime not in _REGIMES or measure not in self.measures:
            raise ModelError(f"unknown measure {measure!r} for model {self.name}; "
                             f"valid: {', '.join(self.measures)}")
        return (self._dispatchers_of(regime),)

    def _dispatchers_of(self, regime: str):
        k = _REGIMES[regime]
        if k is None:
            if self.dispatchers is None:
                raise ModelError("the *_atomic measures need dispatchers (an integer >= 1); got none")
            k = int(self.dispatchers)
        return k

    def routing_measure(self, measure: str, solutions: dict):
        """Evaluate ``measure`` from the solution of each regime it needs.

        ``solutions`` maps a number of decision makers (as from
        :meth:`routing_regimes`) to its :class:`~exactq.representations.routing.RoutingSolution`.
        """
        regimes = self.routing_regimes(measure)
        if measure.startswith("price_of_anarchy"):
            return solutions[regimes[1]].cost / solutions[regimes[0]].cost
        (k,) = regimes
        sol = solutions[k]
        quantity = measure.rsplit("_", 1)[0]
        if quantity == "cost":
            return sol.cost
        if quantity == "loads":
            return sol.loads.tolist()
        if quantity == "servers_used":
            return sol.servers_used
        if quantity == "routing":
            # Every class split in proportion to the work each server receives: the
            # loads (hence the cost) are those of the regime whatever the size laws.
            p = sol.problem
            share = p.service_rates * sol.loads / p.work_rate
            return np.tile(share, (len(p.class_work_rates), 1)).tolist()
        raise ModelError(f"unknown measure {measure!r} for model {self.name}")  # pragma: no cover

    def routing(self, measure: str, context) -> Result:
        """``measure`` from the regimes it needs, each solved by the method's solver.

        The ``closed-form`` (water-filling) and ``convex`` methods (``model``
        driver) call this with their solver; ``info`` holds each regime's report
        under ``centralized``, ``decentralized`` or ``atomic``, and ``residual`` the
        largest KKT residual where the solver has one.
        """
        solutions = {k: context.solve(self.routing_problem(k), **context.options)
                     for k in self.routing_regimes(measure)}
        value = self.routing_measure(measure, solutions)
        info = {}
        if all(s.closed_form for s in solutions.values()):
            info = {"arithmetic": "float64", "accuracy": "exact formula; rounding error only (it grows near saturation)"}
        info.update({s.problem.regime: s.info for s in solutions.values()})
        residuals = [s.residual for s in solutions.values()]
        return Result(value=value, method=context.method,
                      residual=None if None in residuals else max(residuals), info=info)
