"""Reproduction ``speed-aware``: exact mean response times at growing N against the fluid limit.

Bhambay & Mukhopadhyay (Performance Evaluation 2022) show that speed-aware JSQ is
asymptotically delay-optimal: as N -> infinity its mean response time tends to the
value of the *delay-optimal configuration*, the linear program
min sum_j x_j s.t. sum_j mu_j x_j = lambda, 0 <= x_j <= gamma_j (fill the fastest
servers first, nobody waits); speed-aware JIQ has the same limit. Plain JSQ and JIQ
tend to Stolyar's (2015) no-waiting fixed point with idle servers chosen uniformly,
which keeps slow servers busy and has a larger E[T]; random routing is M/M/1 at every
server for every N.

The table takes two classes of equal size (counts k, k; N = 2k) with speeds 2 and 1
(mean speed 1.5) at per-server arrival rates lambda (load lambda / 1.5), computes the
exact E[T] of the lumped chain (``method="ctmc"`` with adaptive truncation to a relative
tolerance of 1e-6) for the sizes that fit, and the
fluid-limit value (``method="fluid"``). The exact values decrease towards the limit;
for the plain policies the gap closes quickly, for the speed-aware ones it closes
slowly (an Erlang-loss-like overflow of the fast class that decays like
(rho e^(1-rho))^k / sqrt(k)), which exact values at moderate N make visible.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import exactq
from exactq.errors import ExactqError, UnstableError
from exactq.progress import Job, Stage, steps
from exactq.reproduce import have_matplotlib, register_reproduction

__all__ = ["speed_aware_table", "SPEEDS", "FRACTIONS", "CASES"]

SPEEDS = (2.0, 1.0)
FRACTIONS = (0.5, 0.5)
POLICIES = ("sa-jsq", "sa-jiq", "jsq", "jiq", "random")
#: per-server arrival rate -> largest k (counts k, k) solved exactly, per policy family;
#: chosen so that the whole reproduction runs in a few minutes on a laptop
CASES = {
    0.6: {"jsq": 5, "jiq": 3},
    0.9: {"jsq": 3, "jiq": 2},
    1.2: {"jsq": 2, "jiq": 1},
}
#: the tiny run of ``scale="smoke"`` (tests, installation checks): N = 2, 4 at load 0.4, N = 2 at 0.8
SMOKE = {"ks": (1, 2), "cases": {0.6: {"jsq": 2, "jiq": 2}, 1.2: {"jsq": 1, "jiq": 1}}, "tol": 1e-4}


def _family(policy: str) -> str:
    return "jiq" if policy.endswith("jiq") else "jsq"


def _points(ks, loads, policies, k_max) -> list[tuple[float, str, int]]:
    return [(lam, policy, k) for lam in loads for policy in policies for k in ks]


#: seconds of each exact cell (k = 1, 2, ...) in one default run (a loaded 2-core machine): the ETA's
#: weights for the default grid; the predicted sizes were no guide (the last truncation level is not
#: the first one plus one: 627,264 states at N = 10 where ``truncation_start`` predicts 19,000)
MEASURED_SECONDS = {
    0.6: {"sa-jsq": (0.03, 0.05, 0.65, 3.41, 24.34), "sa-jiq": (0.02, 0.4, 18.75),
          "jsq": (0.03, 0.11, 0.78, 3.54, 26.94), "jiq": (0.01, 0.46, 17.94)},
    0.9: {"sa-jsq": (0.04, 0.66, 2.63), "sa-jiq": (0.11, 16.33), "jsq": (0.04, 0.86, 2.51), "jiq": (0.1, 13.53)},
    1.2: {"sa-jsq": (0.09, 14.64), "sa-jiq": (2.27,), "jsq": (0.12, 16.24), "jiq": (2.13,)},
}


def point_cost(lam: float, policy: str, k: int, tol: float, k_max=None) -> float:
    """Predicted seconds of one table cell (for the progress ETA only).

    The default grid's cells cost what they took in one measured run
    (:data:`MEASURED_SECONDS`); other cells are predicted from the chain's size at the
    first truncation level and the next, ``ctmc_size(start) + ctmc_size(start + 1)``
    states, with the power iteration's time growing like states^1.34 (0.65 s at
    27,225 states, 24.3 s at 627,264). Cells that are skipped, unstable or closed
    forms cost nothing.
    """
    k_max = CASES if k_max is None else k_max
    if policy == "random" or k > k_max.get(lam, {}).get(_family(policy), k):
        return 0.01
    measured = MEASURED_SECONDS.get(lam, {}).get(policy, ())
    if tol == 1e-6 and k <= len(measured):
        return measured[k - 1] + 0.01
    try:
        m = exactq.model("speed-aware", speeds=SPEEDS, counts=(k, k), arrival_rate=lam, policy=policy)
        start = m.truncation_start(tol)
        states = m.ctmc_size(start) + m.ctmc_size(start + 1)
    except ExactqError:
        return 0.01
    return 0.65 * (states / 27_225.0) ** 1.34 + 0.01


def speed_aware_table(ks=(1, 2, 3, 4, 5), loads=tuple(CASES), policies=POLICIES, *, tol=1e-6,
                      solver=None, k_max=None, stage: Stage | None = None) -> list[dict]:
    """Exact E[T] for counts (k, k) and the fluid limit, for every load and policy.

    Parameters
    ----------
    ks : sequence of int
        Class sizes k (N = 2k servers).
    loads : sequence of float
        Per-server arrival rates lambda (stable for lambda < 1.5; random needs < 1).
    policies : sequence of str
    tol : float
        Relative tolerance of the adaptive truncation.
    solver : str, optional
        Stationary solver of the ``ctmc`` method; default ``direct`` for N <= 3 and
        ``power`` above (on the many-dimensional chains of larger N sparse LU fills in
        beyond the memory of a small machine).
    k_max : mapping, optional
        ``{load: {"jsq": k, "jiq": k}}``, the largest k solved per policy family
        (default :data:`CASES`; loads not in it are solved for every k).

    Returns
    -------
    list of dict
        One row per (load, policy, k): ``exact`` (None when unstable or skipped),
        ``error_estimate``, ``n_states``, ``level``, ``fluid``, ``gap`` and ``method``.
        For ``random`` the exact value is the M/M/1 closed form (exact for every N).
    """
    k_max = CASES if k_max is None else k_max
    rows = []
    fluids: dict = {}
    points = _points(ks, loads, policies, k_max)
    for lam, policy, k in steps(stage, points, [f"lambda = {lam:g}, {policy}, N = {2 * k}"
                                                 for lam, policy, k in points]):
        if (lam, policy) not in fluids:
            try:
                fluids[lam, policy] = exactq.solve("speed-aware", speeds=SPEEDS, fractions=FRACTIONS,
                                                   arrival_rate=lam, policy=policy).value
            except UnstableError:
                fluids[lam, policy] = None
        fluid = fluids[lam, policy]
        limit = k_max.get(lam, {}).get(_family(policy), max(ks))
        row = {"load": lam, "rho": lam / (FRACTIONS[0] * SPEEDS[0] + FRACTIONS[1] * SPEEDS[1]),
               "policy": policy, "k": k, "N": 2 * k, "fluid": fluid, "exact": None,
               "error_estimate": None, "n_states": None, "level": None, "method": None, "gap": None}
        if fluid is None:
            row["method"] = "unstable"
        elif policy == "random":
            r = exactq.solve("speed-aware", speeds=SPEEDS, counts=(k, k), arrival_rate=lam,
                             policy=policy, method="fluid")
            row.update(exact=r.value, error_estimate=r.error_estimate,
                       method="closed form (M/M/1 per server)")
        elif k <= limit:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = exactq.solve("speed-aware", speeds=SPEEDS, counts=(k, k), arrival_rate=lam,
                                     policy=policy, tol=tol,
                                     method=solver or ("direct" if 2 * k <= 3 else "power"),
                                     progress=stage.detail if stage is not None else None)
                row.update(exact=r.value, error_estimate=r.error_estimate, n_states=r.n_states,
                           level=r.info["truncation"]["level"], method=r.method, seconds=r.seconds)
            except ExactqError as e:  # too large for the state budget
                row["method"] = f"skipped: {e}"
        else:
            row["method"] = "skipped (state space too large for this reproduction)"
        if row["exact"] is not None:
            row["gap"] = row["exact"] - fluid
        rows.append(row)
    return rows


def _text(rows, tol: float = 1e-6) -> str:
    ks = sorted({r["k"] for r in rows})
    lines = [
        "Speed-aware JSQ/JIQ (Bhambay & Mukhopadhyay 2022): exact E[T] for N = 2k servers, half of",
        f"speed {SPEEDS[0]:g} and half of speed {SPEEDS[1]:g}, arrivals N*lambda, against the fluid limit N -> inf.",
        f"Exact: lumped CTMC, adaptive truncation to relative tolerance {tol:g}; random: M/M/1 closed form,",
        "exact for every N; '-' = not solved (state space too large here); fluid = the N -> inf limit.",
    ]
    for lam in sorted({r["load"] for r in rows}):
        block = [r for r in rows if r["load"] == lam]
        lines.append("")
        lines.append(f"lambda = {lam:g} per server (load {block[0]['rho']:.2f})")
        head = f"{'policy':8s}" + "".join(f"{'N=' + str(2 * k):>11s}" for k in ks) + f"{'fluid':>11s}"
        lines.append(head)
        for policy in dict.fromkeys(r["policy"] for r in block):
            pr = {r["k"]: r for r in block if r["policy"] == policy}
            if pr[ks[0]]["method"] == "unstable":
                lines.append(f"{policy:8s}  unstable (random routing needs lambda < slowest speed)")
                continue
            cells = "".join(f"{pr[k]['exact']:11.6f}" if pr[k]["exact"] is not None else f"{'-':>11s}"
                            for k in ks)
            lines.append(f"{policy:8s}{cells}{pr[ks[0]]['fluid']:11.6f}")
        lines.append(f"{'gap':8s}" + "  (exact - fluid)")
        for policy in dict.fromkeys(r["policy"] for r in block):
            pr = {r["k"]: r for r in block if r["policy"] == policy}
            if policy == "random" or pr[ks[0]]["method"] == "unstable":
                continue
            cells = "".join(f"{pr[k]['gap']:11.6f}" if pr[k]["gap"] is not None else f"{'-':>11s}" for k in ks)
            lines.append(f"{policy:8s}{cells}")
    return "\n".join(lines)


def _figure(rows, out_dir: Path) -> list[str]:
    from exactq.reproduce.figures import integer_axis, new_axes, save

    loads = sorted({r["load"] for r in rows})
    colors = dict(zip(POLICIES, ("C0", "C1", "C2", "C3", "C7")))
    fig, axes = new_axes(2, len(loads), figsize=(4.2 * len(loads), 6.4), squeeze=False)
    for col, lam in enumerate(loads):
        top, bottom = axes[0][col], axes[1][col]
        block = [r for r in rows if r["load"] == lam]
        notes = []
        for policy in dict.fromkeys(r["policy"] for r in block):
            pr = [r for r in block if r["policy"] == policy and r["exact"] is not None]
            if policy == "random":  # flat and far above: stated, not drawn
                notes.append(f"random routing: E[T] = {pr[0]['exact']:.4g} for every N" if pr
                             else "random routing: unstable")
                continue
            if not pr:
                continue
            c = colors.get(policy, "k")
            N = [r["N"] for r in pr]
            top.plot(N, [r["exact"] for r in pr], "o-", color=c, label=policy)
            top.axhline(pr[0]["fluid"], color=c, ls="--", lw=0.8)
            bottom.semilogy(N, [r["gap"] for r in pr], "o-", color=c, label=policy)
        title = f"arrival rate {lam:g} per server (load {block[0]['rho']:.2f})"
        top.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=9)
        top.set_ylabel("E[T]: exact (markers), N = infinity (dashed)", fontsize=8)
        bottom.set_ylabel("exact E[T] minus its N = infinity limit", fontsize=8)
        bottom.set_xlabel("N (servers)")
        for ax in (top, bottom):
            ax.set_xticks(sorted({r["N"] for r in block}))
            integer_axis(ax, "x")
    fig.suptitle("Speed-aware JSQ/JIQ: half of the servers of speed 2, half of speed 1; exact finite N against the "
                 "N = infinity (fluid) limit,\nwhich the speed-aware policies share, and jsq and jiq share another",
                 fontsize=10)
    path = out_dir / "speed_aware_convergence.png"
    save(fig, path, shared_legend=True)
    return [path.name]


@register_reproduction(
    "speed-aware",
    "Bhambay & Mukhopadhyay 2022: exact E[T] of SA-JSQ/SA-JIQ/JSQ/JIQ/random for growing N vs the fluid limit",
)
def reproduce_speed_aware(out_dir: Path | None, *, scale: str = "default", progress=None) -> str:
    """Exact values for N = 2..10 at three loads next to the fluid limit (module docstring).

    ``scale="smoke"`` solves N = 2, 4 at two loads to 1e-4 (a quick check, not the
    paper's table); ``full`` is the default run (it is already the paper's table).
    """
    ks, cases, tol = ((1, 2, 3, 4, 5), CASES, 1e-6) if scale != "smoke" else \
        (SMOKE["ks"], SMOKE["cases"], SMOKE["tol"])
    job = Job("speed-aware", progress)
    points = _points(ks, tuple(cases), POLICIES, cases)
    stage = job.stage("exact E[T] for N = 2k servers against the fluid limit",
                      [point_cost(lam, policy, k, tol, cases) for lam, policy, k in points])
    rows = speed_aware_table(ks=ks, loads=tuple(cases), k_max=cases, tol=tol, stage=stage)
    job.close()
    text = _text(rows, tol)
    errs = [r["error_estimate"] for r in rows if r["exact"] is not None and r["error_estimate"] is not None]
    if errs:
        text += f"\n\nlargest estimated absolute error of an exact cell: {max(errs):.2e}"
    if out_dir is not None:
        (out_dir / "speed_aware.json").write_text(json.dumps(
            {"speeds": SPEEDS, "fractions": FRACTIONS, "tol": tol, "scale": scale, "rows": rows},
            default=lambda v: None if isinstance(v, float) and math.isnan(v) else str(v), indent=1))
        if have_matplotlib():
            names = _figure(rows, out_dir)
            text += "\n\nfigures: " + ", ".join(names)
    return text
