"""``exactq reproduce ps-routing``: the price of anarchy of selfish routing to PS servers.

Reproduces the claims of Altman, Ayesta & Prabhu (2011) with the ``ps-routing``
model's ``closed-form`` method, its ``convex`` method as the check on the reference
case:

1. the reference case of MODELS.md (mu = (1, 2), c = (1, 1), rho = 1.5);
2. equal holding costs: PoA <= number of servers n (Haviv & Roughgarden 2007). The
   family of n - 1 servers of capacity 1 and one of capacity r in heavy traffic has
   PoA -> n(n - 1 + r)/(n - 1 + sqrt(r))^2 -> n as r -> inf (the bound is tight), and no
   random instance exceeds n;
3. server-dependent costs: mu = (1, 1), c = (1, M), rho = 1 - 1/M. Selfish jobs all
   use server 1 (its cost per unit of work 1/(1 - rho_1) stays below M), the optimum
   also uses server 2, and PoA ~ sqrt(M)/2 grows without bound; the Nash equilibrium
   of K atomic dispatchers on the same family stays below sqrt(K) (Ayesta, Brun &
   Prabhu 2011), and a grid of two-server instances gets close to their worst-case
   lower bound K/(2 sqrt(K) - 1).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from exactq.api import model as build, solve
from exactq.progress import Job, Stage, steps
from exactq.reproduce import have_matplotlib, register_reproduction

__all__ = ["reproduce_ps_routing"]


def _poa(mu, c, rho, dispatchers=math.inf):
    """Price of anarchy by the closed forms (the model's costs use 1 - rho from the closed form)."""
    atomic = math.isfinite(dispatchers)
    m = build("ps-routing", service_rates=tuple(mu), holding_costs=tuple(c), work_rate=float(rho),
              dispatchers=int(dispatchers) if atomic else None)
    return solve(m, "price_of_anarchy_atomic" if atomic else "price_of_anarchy", method="closed-form").value, m


def _reference():
    model = build("ps-routing", service_rates="1,2", holding_costs="1,1", work_rate=1.5)
    rows = []
    for measure in ("loads_centralized", "cost_centralized", "loads_decentralized",
                    "cost_decentralized", "price_of_anarchy"):
        exact = solve(model, measure, method="closed-form").value
        convex = solve(model, measure, method="convex")
        rows.append({"measure": measure, "closed_form": exact, "convex": convex.value,
                     "kkt_residual": convex.residual})
    return rows


#: seconds per point of each part in one default run (the progress ETA's cost model)
COST = {"reference": 1.4, "family": 0.05, "random": 1.0, "unbounded": 0.03, "atomic": 2.7}


def _equal_costs(*, sizes=range(2, 6), random_sizes=range(2, 7), instances: int = 400,
                 stage: Stage | None = None, random_stage: Stage | None = None):
    rows = []
    for n in steps(stage, list(sizes), [f"n = {n}" for n in sizes]):
        for exponent in (2, 4, 6, 8):
            r = 10.0**exponent
            mu = np.array([1.0] * (n - 1) + [r])
            spare = 1e-4  # heavy traffic: rho = sum(mu) - spare
            poa, _ = _poa(mu, np.ones(n), mu.sum() - spare)
            limit = n * (n - 1 + r) / (n - 1 + math.sqrt(r)) ** 2
            rows.append({"n": n, "r": r, "poa": poa, "heavy_traffic_limit": limit, "bound": n})
    rng = np.random.default_rng(2011)
    random_rows = []
    for n in steps(random_stage, list(random_sizes), [f"{instances} instances of n = {n}" for n in random_sizes]):
        worst = 0.0
        for _ in range(instances):
            mu = 10.0 ** rng.uniform(-3, 3, n)
            rho = mu.sum() * (1 - 10.0 ** rng.uniform(-6, 0))
            worst = max(worst, _poa(mu, np.ones(n), rho)[0])
        random_rows.append({"n": n, "instances": instances, "max_poa": worst, "bound": n})
    return rows, random_rows


_DISPATCHERS = (2, 4, 16)


def _unbounded(*, exponents=range(1, 9), stage: Stage | None = None):
    rows = []
    for exponent in steps(stage, list(exponents), [f"M = 1e{e}" for e in exponents]):
        big = 10.0**exponent
        mu, c, rho = np.array([1.0, 1.0]), np.array([1.0, big]), 1.0 - 1.0 / big
        poa, m = _poa(mu, c, rho)
        rows.append({
            "M": big,
            "poa": poa,
            "sqrt(M)/2": math.sqrt(big) / 2,
            "servers_used_centralized": solve(m, "servers_used_centralized", method="closed-form").value,
            "servers_used_decentralized": solve(m, "servers_used_decentralized", method="closed-form").value,
            "poa_atomic": {k: _poa(mu, c, rho, k)[0] for k in _DISPATCHERS},
        })
    return rows


def _atomic_worst_case(*, grid_size=(13, 37), stage: Stage | None = None):
    """Largest atomic PoA on a grid of two-server instances mu = (1, 10^a), c = (1, 10^b)."""
    rows = []
    grid = [(a, b) for a in np.linspace(0.5, 3.5, grid_size[0]) for b in np.linspace(-9.0, 0.0, grid_size[1])]
    for k in steps(stage, _DISPATCHERS, [f"K = {k} dispatchers" for k in _DISPATCHERS]):
        worst, where = 0.0, None
        for a, b in grid:
            mu = np.array([1.0, 10.0**a])
            poa = _poa(mu, np.array([1.0, 10.0**b]), mu.sum() * (1 - 10.0**-a), k)[0]
            if poa > worst:
                worst, where = poa, (float(a), float(b))
        rows.append({"K": k, "max_poa_found": worst, "at_log10_mu2_c2": where,
                     "lower_bound": k / (2 * math.sqrt(k) - 1), "upper_bound": math.sqrt(k)})
    return rows


def _plot(path, equal, unbounded) -> list[str]:
    """The two-panel figure; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import new_axes, save

    fig, (left, right) = new_axes(1, 2, figsize=(11, 4.4))
    for n in sorted({r["n"] for r in equal}):
        rows = [r for r in equal if r["n"] == n]
        line, = left.semilogx([r["r"] for r in rows], [r["poa"] for r in rows], "o-", label=f"n = {n} servers")
        left.axhline(n, color=line.get_color(), ls=":")
    left.set(xlabel="capacity r of the one fast server (the others: 1)", ylabel="price of anarchy")
    left.set_title("Equal holding costs, heavy traffic: the price of anarchy\napproaches its bound n (dotted) "
                   "and never exceeds it", fontsize=9)
    m = [r["M"] for r in unbounded]
    right.loglog(m, [r["poa"] for r in unbounded], "o-", label="selfish jobs (Wardrop)")
    right.loglog(m, [r["sqrt(M)/2"] for r in unbounded], "k--", label="sqrt(M)/2")
    for k in _DISPATCHERS:
        right.loglog(m, [r["poa_atomic"][k] for r in unbounded], "s-", label=f"K = {k} dispatchers")
    right.set(xlabel="cost ratio M of the two servers", ylabel="price of anarchy")
    right.set_title("Server-dependent costs, mu = (1, 1), c = (1, M), rho = 1 - 1/M: unbounded\nfor selfish "
                    "jobs, below sqrt(K) for K atomic dispatchers", fontsize=9)
    return save(fig, path)


@register_reproduction(
    "ps-routing",
    "Altman, Ayesta & Prabhu (2011): PoA <= n servers for equal costs, unbounded with "
    "server-dependent costs; K atomic dispatchers (Ayesta, Brun & Prabhu 2011)",
)
def reproduce_ps_routing(out_dir: Path | None, *, scale: str = "default", progress=None) -> str:
    """Compute the tables (text); write ``ps_routing.json`` and ``ps_routing_poa.png`` to ``out_dir``.

    ``scale="smoke"`` takes 20 random instances of two sizes and a 3 x 5 grid for the
    atomic worst case (a quick check, not the paper's search).
    """
    smoke = scale == "smoke"
    sizes, random_sizes, instances = (range(2, 4), range(2, 4), 20) if smoke else (range(2, 6), range(2, 7), 400)
    grid = (3, 5) if smoke else (13, 37)
    job = Job("ps-routing", progress)
    st = [job.stage("reference case (closed form and convex)", [COST["reference"]]),
          job.stage("equal costs: the fast-server family", [COST["family"]] * len(sizes)),
          job.stage("equal costs: random instances", [COST["random"] * instances / 400] * len(random_sizes)),
          job.stage("server-dependent costs", [COST["unbounded"]] * 8),
          job.stage("atomic dispatchers: worst case on a grid",
                    [COST["atomic"] * grid[0] * grid[1] / 481] * len(_DISPATCHERS))]
    for _ in st[0].each(["mu = (1, 2), c = (1, 1), rho = 1.5"]):
        reference = _reference()
    equal, random_rows = _equal_costs(sizes=sizes, random_sizes=random_sizes, instances=instances,
                                      stage=st[1], random_stage=st[2])
    unbounded = _unbounded(stage=st[3])
    atomic = _atomic_worst_case(grid_size=grid, stage=st[4])
    job.close()
    lines = ["Reference case mu = (1, 2), c = (1, 1), rho = 1.5 (MODELS.md)",
             f"{'measure':<22}{'closed form':>28}{'convex (cvxpy)':>28}{'KKT residual':>14}"]
    for r in reference:
        fmt = (lambda v: ", ".join(f"{x:.6f}" for x in v)) if isinstance(r["closed_form"], list) \
            else (lambda v: f"{v:.6f}")
        lines.append(f"{r['measure']:<22}{fmt(r['closed_form']):>28}{fmt(r['convex']):>28}"
                     f"{r['kkt_residual']:>14.1e}")
    lines += ["", "Equal costs, n-1 servers of capacity 1 and one of capacity r, rho = sum(mu) - 1e-4",
              f"{'n':>3}{'r':>10}{'PoA':>12}{'n(n-1+r)/(n-1+sqrt r)^2':>26}{'bound n':>9}"]
    lines += [f"{r['n']:>3}{r['r']:>10.0e}{r['poa']:>12.6f}{r['heavy_traffic_limit']:>26.6f}{r['n']:>9}"
              for r in equal]
    lines += ["", "Equal costs, random instances (capacities 10^U(-3,3), rho = sum(mu)(1 - 10^U(-6,0)))",
              f"{'n':>3}{'instances':>11}{'max PoA':>12}{'bound n':>9}"]
    lines += [f"{r['n']:>3}{r['instances']:>11}{r['max_poa']:>12.6f}{r['bound']:>9}" for r in random_rows]
    lines += ["", "Server-dependent costs: mu = (1, 1), c = (1, M), rho = 1 - 1/M",
              f"{'M':>8}{'PoA':>14}{'sqrt(M)/2':>12}{'used opt':>10}{'used eq':>9}"
              + "".join(f"{'K=' + str(k):>10}" for k in _DISPATCHERS)]
    for r in unbounded:
        lines.append(f"{r['M']:>8.0e}{r['poa']:>14.4f}{r['sqrt(M)/2']:>12.4f}"
                     f"{str(r['servers_used_centralized']):>10}{str(r['servers_used_decentralized']):>9}"
                     + "".join(f"{r['poa_atomic'][k]:>10.4f}" for k in _DISPATCHERS))
    lines += ["", "K atomic dispatchers: largest PoA on a grid of two-server instances",
              f"{'K':>4}{'max PoA found':>15}{'K/(2 sqrt K - 1)':>18}{'sqrt K':>9}"]
    lines += [f"{r['K']:>4}{r['max_poa_found']:>15.6f}{r['lower_bound']:>18.6f}{r['upper_bound']:>9.4f}"
              for r in atomic]
    text = "\n".join(lines)
    if out_dir is not None:
        data = {"reference": reference, "equal_costs_family": equal, "equal_costs_random": random_rows,
                "server_dependent_costs": [dict(r, poa_atomic={str(k): v for k, v in r["poa_atomic"].items()})
                                           for r in unbounded],
                "atomic_worst_case": atomic}
        (out_dir / "ps_routing.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _plot(out_dir / "ps_routing_poa.png", equal, unbounded)
            text += f"\n\nfigure: {out_dir / 'ps_routing_poa.png'}"
    return text
