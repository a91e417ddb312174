"""Static routing of Poisson job classes to parallel processor-sharing servers.

Servers ``i = 1..n`` have capacities ``service_rates`` mu_i (work per unit time) and
holding costs ``holding_costs`` c_i (per job per unit time). Job classes arrive as
Poisson streams of rates lambda_k with mean sizes E[B_k] (general size laws); the
total work rate is rho = sum_k lambda_k E[B_k] < sum_i mu_i. A static policy sends a
fraction of each class to each server, so server i is an M/G/1-PS queue with
utilisation rho_i = x_i / mu_i (x_i: work routed to it per unit time), mean number
E[N_i] = rho_i / (1 - rho_i) whatever the size laws, and the holding cost rate is

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

This module holds the model and its closed forms (water-filling with activation
thresholds); :mod:`exactq.solvers.routing` solves the same problems as convex
programs with cvxpy, which the tests use as the independent check.

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
import time
from dataclasses import dataclass

import numpy as np

from exactq.catalogue import Model, register_model
from exactq.errors import ModelError, UnstableError
from exactq.params import Param
from exactq.result import Result
from exactq.solvers.routing import check_routing_problem

__all__ = [
    "PSRouting",
    "water_filling",
    "routing_cost",
    "slack_at_multiplier",
    "CENTRALIZED",
    "DECENTRALIZED",
]

#: number of decision makers of the centralized optimum and of the Wardrop equilibrium
CENTRALIZED = 1
DECENTRALIZED = math.inf

_POSITIVE = dict(low=0.0, low_open=True)
_REGIMES = {"centralized": CENTRALIZED, "decentralized": DECENTRALIZED, "atomic": None}


# -- closed forms ---------------------------------------------------------------------


def slack_at_multiplier(z, dispatchers):
    """Spare fraction 1 - rho_i of a used server as a function of z = nu / (c_i/mu_i).

    ``nu`` is the Lagrange multiplier of the work constraint (the common marginal cost
    per unit of work); stationarity of the K-dispatcher potential reads
    u^2/K + (1 - 1/K) u = z with u = 1/(1 - rho_i), so
    1 - rho = ((1 - 1/K) + sqrt((1 - 1/K)^2 + 4z/K)) / (2z): z^(-1/2) for K = 1 and 1/z
    for K = inf. A server is used iff z > 1.
    """
    z = np.asarray(z, dtype=float)
    inv_k = 0.0 if math.isinf(dispatchers) else 1.0 / dispatchers
    return ((1.0 - inv_k) + np.sqrt((1.0 - inv_k) ** 2 + 4.0 * inv_k * z)) / (2.0 * z)


def _water_fill(mu, c, rho, dispatchers):
    """Loads, spare fractions 1 - rho_i and multiplier of one regime (no validation).

    For K = 1 and K = inf (Altman, Ayesta & Prabhu 2011, Props. 1 and 3): sort by
    a_i = c_i/mu_i; with the multiplier at server k's threshold a_k the servers before
    it absorb work  L_k = sum_{j<k} mu_j - sum_{j<k} w_j / r(a_k)  (w = sqrt(c mu),
    r = sqrt for the optimum; w = c, r = identity for the equilibrium). L_k increases
    with k, so the used set is {k : L_k < rho}, found with prefix sums in O(n log n),
    and on it 1 - rho_i = r(a_i) (sum_used mu - rho) / sum_used w. For finite K the
    multiplier solves sum_i mu_i (1 - s_i(nu))^+ = rho, a monotone scalar equation
    (Brent's method).
    """
    a = c / mu
    if math.isinf(dispatchers) or dispatchers == 1:
        order = np.argsort(a, kind="stable")
        a_s, mu_s = a[order], mu[order]
        if dispatchers == 1:
            w, r = np.sqrt(c * mu)[order], np.sqrt(a_s)
        else:
            w, r = c[order], a_s
        before_mu = np.concatenate(([0.0], np.cumsum(mu_s)[:-1]))
        before_w = np.concatenate(([0.0], np.cumsum(w)[:-1]))
        absorbed = before_mu - before_w / r
        n_used = int(np.count_nonzero(absorbed < rho))
        t = (np.sum(mu_s[:n_used]) - rho) / np.sum(w[:n_used])
        slack = np.ones_like(mu)
        slack[order[:n_used]] = r[:n_used] * t
        nu = 1.0 / t**2 if dispatchers == 1 else 1.0 / t
    else:
        from scipy.optimize import brentq

        def excess(nu):
            s = slack_at_multiplier(nu / a, dispatchers)
            return float(np.sum(mu * np.maximum(1.0 - s, 0.0))) - rho

        lo = hi = float(a.min())
        while excess(hi) <= 0.0:
            hi *= 2.0
        nu = brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
        slack = np.minimum(slack_at_multiplier(nu / a, dispatchers), 1.0)
    loads = 1.0 - slack
    return loads, slack, nu


def _as_arrays(service_rates, holding_costs, work_rate):
    """Validated arrays ``mu, c, rho`` (the checks of :func:`check_routing_problem`)."""
    mu, c, rho, _ = check_routing_problem(service_rates, holding_costs, work_rate)
    return mu, c, rho


def routing_cost(holding_costs, loads, slack=None) -> float:
    """Holding cost rate sum_i c_i rho_i / (1 - rho_i) (weighted mean number in system).

    ``slack`` (1 - rho_i), when known more accurately than ``1 - loads``, is used in the
    denominator.
    """
    loads = np.asarray(loads, dtype=float)
    slack = 1.0 - loads if slack is None else np.asarray(slack, dtype=float)
    return float(np.sum(np.asarray(holding_costs, dtype=float) * loads / slack))


def water_filling(service_rates, holding_costs, work_rate, *, dispatchers=CENTRALIZED) -> Result:
    """Closed-form loads of the optimal, selfish or atomic routing to PS servers.

    Parameters
    ----------
    service_rates : (n,) array_like, each > 0
        Server capacities mu_i.
    holding_costs : (n,) array_like, each > 0, or None
        Holding costs c_i per job per unit time (None: all 1).
    work_rate : float
        Total work rate rho, 0 < rho < sum(mu).
    dispatchers : 1, int >= 2 or math.inf
        1: centralized optimum; ``math.inf``: Wardrop equilibrium of selfish jobs;
        K >= 2: Nash equilibrium of K symmetric dispatchers each routing rho/K.

    Returns
    -------
    Result
        ``value``: the utilisations rho_i (list, server order); ``info``: ``cost``
        (sum c_i rho_i/(1-rho_i)), ``multiplier`` (marginal cost per unit of work
        nu), ``servers_used`` (0-based indices with rho_i > 0).

    Raises
    ------
    ModelError, UnstableError
        Non-positive rates or costs, length mismatch, rho >= sum(mu).

    Notes
    -----
    O(n log n), no loop over servers: a sort by c_i/mu_i and prefix sums for K = 1 and
    K = inf (Altman, Ayesta & Prabhu 2011); a scalar Brent root for finite K
    (Ayesta, Brun & Prabhu 2011, symmetric game).

    Examples
    --------
    Reference case of MODELS.md, optimum cost 4 sqrt(2)/3 and equilibrium cost 2:

    >>> r = water_filling([1, 2], [1, 1], 1.5)
    >>> bool(np.allclose(r.value, [1 - 1.5 / (1 + 2**0.5), 1 - 1.5 / (2 + 2**0.5)]))
    True
    >>> bool(np.isclose(r.info["cost"], 4 * 2**0.5 / 3))
    True
    >>> e = water_filling([1, 2], [1, 1], 1.5, dispatchers=math.inf)
    >>> bool(np.allclose(e.value, [0.25, 0.625])), round(e.info["cost"], 12)
    (True, 2.0)
    """
    t0 = time.perf_counter()
    mu, c, rho = _as_arrays(service_rates, holding_costs, work_rate)
    k = _check_dispatchers(dispatchers)
    loads, slack, nu = _water_fill(mu, c, rho, k)
    return Result(
        value=loads.tolist(),
        method="closed-form",
        n_states=None,
        seconds=time.perf_counter() - t0,
        info={
            "cost": routing_cost(c, loads, slack),
            "multiplier": float(nu),
            "servers_used": np.flatnonzero(loads > 0).tolist(),
            "dispatchers": k if math.isfinite(k) else "inf",
        },
    )


def _check_dispatchers(k):
    if k == math.inf:
        return math.inf
    if isinstance(k, bool) or not float(k).is_integer() or k < 1:
        raise ModelError(f"dispatchers must be an integer >= 1 or inf; got {k!r}")
    return int(k)


# -- the model ------------------------------------------------------------------------


@register_model
@dataclass(frozen=True)
class PSRouting(Model):
    """Static routing to parallel PS servers: optimum, Wardrop and atomic equilibria."""

    name = "ps-routing"
    summary = ("multi-class static routing to parallel processor-sharing servers: "
               "optimal, selfish (Wardrop) and K-dispatcher routing, price of anarchy")
    reference = "Altman, Ayesta & Prabhu, Telecommunication Systems 47 (2011); Ayesta, Brun & Prabhu, Perf. Eval. 68 (2011)"
    parameters = (
        Param("service_rates", "floats", "server capacities mu_i (work per unit time)", **_POSITIVE),
        Param("holding_costs", "floats", "holding cost c_i per job per unit time at server i (default 1 each)",
              default=None, **_POSITIVE),
        Param("work_rate", "float", "total work rate rho = sum lambda_k E[B_k] (or give arrival_rates)",
              default=None, **_POSITIVE),
        Param("arrival_rates", "floats", "Poisson rates lambda_k of the job classes (instead of work_rate)",
              default=None, **_POSITIVE),
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
        n = len(self.service_rates)
        if self.holding_costs is not None and len(self.holding_costs) != n:
            raise ModelError(
                f"holding_costs must have one value per server ({n}); got {len(self.holding_costs)}"
            )
        if (self.work_rate is None) == (self.arrival_rates is None):
            raise ModelError("give exactly one of work_rate or arrival_rates (with mean_sizes); "
                             f"got work_rate={self.work_rate}, arrival_rates={self.arrival_rates}")
        if self.mean_sizes is not None:
            if self.arrival_rates is None:
                raise ModelError("mean_sizes needs arrival_rates; got mean_sizes without arrival_rates")
            if len(self.mean_sizes) != len(self.arrival_rates):
                raise ModelError(f"mean_sizes must have one value per class ({len(self.arrival_rates)}); "
                                 f"got {len(self.mean_sizes)}")
        total = float(sum(self.service_rates))
        rho = self.total_work_rate
        if rho >= total:
            what = "work_rate" if self.work_rate is not None else "work rate sum(arrival_rates * mean_sizes)"
            raise UnstableError(f"{what} must be < total service rate {total:g}; got {rho:g}")

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
        return float(np.sum(self.class_work_rates))

    def routing_problem(self) -> dict:
        """The convex-program data (plain arrays).

        Keys: ``service_rates`` (n,), ``holding_costs`` (n,), ``work_rate`` (float),
        ``class_work_rates`` (m,), summing to ``work_rate``.
        """
        mu = np.asarray(self.service_rates, dtype=float)
        c = np.ones_like(mu) if self.holding_costs is None else np.asarray(self.holding_costs, dtype=float)
        return {
            "service_rates": mu,
            "holding_costs": c,
            "work_rate": self.total_work_rate,
            "class_work_rates": self.class_work_rates,
        }

    def routing_regimes(self, measure: str) -> tuple:
        """The numbers of decision makers whose loads ``measure`` needs (1, inf or K)."""
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

    def routing_measure(self, measure: str, loads: dict, slack: dict | None = None):
        """Evaluate ``measure`` from the loads of each regime it needs.

        ``loads`` maps a number of decision makers (as from :meth:`routing_regimes`) to
        the (n,) utilisations; ``slack`` optionally maps it to 1 - rho_i computed
        without cancellation.
        """
        p = self.routing_problem()
        c = p["holding_costs"]
        slack = slack or {}

        def cost(k):
            return routing_cost(c, loads[k], slack.get(k))

        regimes = self.routing_regimes(measure)
        if measure.startswith("price_of_anarchy"):
            return cost(regimes[1]) / cost(regimes[0])
        (k,) = regimes
        rho_i = np.asarray(loads[k], dtype=float)
        quantity = measure.rsplit("_", 1)[0]
        if quantity == "cost":
            return cost(k)
        if quantity == "loads":
            return rho_i.tolist()
        if quantity == "servers_used":
            return np.flatnonzero(rho_i > 0).tolist()
        if quantity == "routing":
            # Every class split in proportion to the work each server receives: the
            # loads (hence the cost) are those of the regime whatever the size laws.
            share = p["service_rates"] * rho_i / p["work_rate"]
            return np.tile(share, (len(p["class_work_rates"]), 1)).tolist()
        raise ModelError(f"unknown measure {measure!r} for model {self.name}")  # pragma: no cover

    # -- closed forms (the `closed-form` method) ---------------------------------------
    def closed_form(self, measure: str):
        """Evaluate ``measure`` with the water-filling closed forms (:func:`water_filling`)."""
        p = self.routing_problem()
        loads, slack = {}, {}
        for k in self.routing_regimes(measure):
            loads[k], slack[k], _ = _water_fill(p["service_rates"], p["holding_costs"], p["work_rate"], k)
        return self.routing_measure(measure, loads, slack)
