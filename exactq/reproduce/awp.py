"""``exactq reproduce awp``: adaptive window protocols (Altman, Avrachenkov, Kherani & Prabhu 2005).

Four parts, each computed with the ``awp`` model through :func:`exactq.solve`:

* **Mean window against the loss probability** for NewReno, Scalable and HighSpeed TCP
  (per-packet losses ``p``): the analytic q-series, checked against the numerical
  solution of the Kolmogorov equation at every point.
* **The stability region of Scalable TCP** with losses at a constant rate ``lam`` (per
  round trip, independent of the window) and a minimum window of one packet: the
  window process is positive recurrent iff ``lam > a / ln(1/nu)``; its mean is finite
  iff ``lam > a / (1 - nu)`` (the law is Pareto with index ``kappa``,
  ``a kappa = lam (1 - nu^kappa)``). The verdicts are checked against window ceilings:
  with ``w_max`` growing, the mass near the ceiling vanishes inside the region and
  does not outside it. With window-dependent losses ``lam W^gamma`` the process is
  stable iff ``gamma > 0``.
* **HighSpeed TCP approximating the others by its one parameter**, the response
  exponent ``S`` of RFC 3649: ``E[W]`` falls as ``p^-S``; ``S = 1/2`` gives NewReno's
  law (the same law of ``W / E[W]``) and ``S = 1`` Scalable TCP's ``1/p`` scaling.
* **Window bounds ordering the stationary laws** (NewReno, ``p = 0.001``): a larger
  floor gives a stochastically larger window (the floored law is the unbounded one
  conditioned on ``W >= w_min``); a larger ceiling does too when losses come at a
  constant rate (a pathwise coupling), but not with per-packet losses, where a window
  held at ``w_max`` is lost less often than one above it: the comparison says where the
  order holds.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

import exactq
from exactq.catalogue import solve_representation
from exactq.progress import Job, Stage, steps
from exactq.representations.pdmp import CDFPair
from exactq.reproduce import format_table, have_matplotlib, register_reproduction

__all__ = ["reproduce_awp"]

PROTOCOLS = ("newreno", "scalable", "highspeed")
SCALABLE_A = 0.01
SCALABLE_NU = 0.875
HS_EXPONENTS = (0.5, 0.6, 0.7, 0.835, 0.9, 1.0)
#: seconds per point of each part in one default run (the progress ETA's cost model)
COST = {"mean": 0.56, "stability": 0.01, "escape": 0.05, "gamma": 0.01, "highspeed": 0.72, "shape": 1.2,
        "ordering": 1.2}


def _solve(measure: str, method: str = "auto", **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("awp", measure, method=method, **params)


def _mean_window_table(losses, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    for p in steps(stage, losses, [f"p = {float(x):.2g}" for x in losses]):
        row = {"p": p}
        for proto in PROTOCOLS:
            a = _solve("mean_window", "analytic", preset=proto, loss_prob=p)
            n = _solve("mean_window", "numerical", preset=proto, loss_prob=p)
            row[proto] = a.value
            row[f"{proto}_numerical_rel_diff"] = abs(n.value - a.value) / a.value
        row["newreno_sqrt_p"] = row["newreno"] * math.sqrt(p)
        row["rfc3649_response"] = 0.12 / p**0.835
        rows.append(row)
    return rows


def _stability_table() -> list[dict]:
    rows = []
    for nu in (0.5, 0.7, 0.8, 0.875, 0.9, 0.95):
        edge = SCALABLE_A / math.log(1 / nu)
        finite_mean = SCALABLE_A / (1 - nu)
        for factor in (0.9, 1.1, 2.0):
            lam = factor * edge
            kw = dict(preset="general", a=SCALABLE_A, alpha=1, lam=lam, gamma=0, nu=nu, w_min=1)
            st = _solve("stable", **kw)
            row = {"nu": nu, "lam": lam, "lam/edge": factor, "stability_edge": edge, "finite_mean_edge": finite_mean,
                   "stable": st.value, "deciding": st.info["stability"]["quantity"],
                   "value": st.info["stability"]["value"]}
            row["mean_window"] = _solve("mean_window", **kw).value if st.value else None
            rows.append(row)
    return rows


def _escape_table(nu: float = SCALABLE_NU, ceilings=(1e2, 1e3, 1e4)) -> list[dict]:
    """Stochastic-ordering check of the verdict: P(W > w_max / 10) as the ceiling grows."""
    edge = SCALABLE_A / math.log(1 / nu)
    rows = []
    for factor in (0.9, 1.1, 2.0):
        row = {"lam/edge": factor, "stable": _solve("stable", preset="general", a=SCALABLE_A, alpha=1,
                                                    lam=factor * edge, gamma=0, nu=nu, w_min=1).value}
        for w_max in ceilings:
            F = _solve("cdf", "numerical", preset="general", a=SCALABLE_A, alpha=1, lam=factor * edge, gamma=0, nu=nu,
                       w_min=1, w_max=w_max, points=2, grid_min=1, grid_max=w_max / 10)
            row[f"P(W>{w_max:g}/10)"] = 1.0 - F.value[-1]
        rows.append(row)
    return rows


def _gamma_table() -> list[dict]:
    rows = []
    for gamma in (-0.5, 0.0, 0.5, 1.0):
        st = _solve("stable", preset="general", a=SCALABLE_A, alpha=1, lam=1e-3, gamma=gamma, nu=SCALABLE_NU)
        rows.append({"gamma": gamma, "stable": st.value, "deciding": st.info["stability"]["quantity"],
                     "value": st.info["stability"]["value"]})
    return rows


def _highspeed_table(losses, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    for S in steps(stage, HS_EXPONENTS, [f"S = {x:g}" for x in HS_EXPONENTS]):
        means = [_solve("mean_window", preset="highspeed", loss_prob=p, response_exponent=S).value for p in losses]
        slope = -np.polyfit(np.log(losses), np.log(means), 1)[0]
        row = {"S": S, "alpha": 2 - 1 / S, "slope": float(slope)}
        row.update({f"EW(p={p:g})": m for p, m in zip(losses, means)})
        rows.append(row)
    return rows


def _shape_comparison(p: float = 1e-3, points: int = 201) -> dict:
    """Sup distance between the laws of W / E[W]: HighSpeed at S against NewReno and Scalable-type laws."""
    out = {}
    x = np.linspace(0, 4, points)

    def scaled_cdf(**kw):
        mean = _solve("mean_window", **kw).value
        F = _solve("cdf", points=points, grid_min=0, grid_max=4 * mean, **kw).value
        return np.asarray(F)

    newreno = scaled_cdf(preset="newreno", loss_prob=p)
    for S in (0.5, 0.835, 1.0):
        hs = scaled_cdf(preset="highspeed", loss_prob=p, response_exponent=S)
        out[f"S={S:g} vs newreno"] = float(np.max(np.abs(hs - newreno)))
    # Scalable's form a W with HighSpeed's decrease 1/2: the same law of W / E[W] as HighSpeed at S = 1
    mult = scaled_cdf(preset="general", a=SCALABLE_A, alpha=1, lam=p, gamma=1, nu=0.5)
    hs1 = scaled_cdf(preset="highspeed", loss_prob=p, response_exponent=1.0)
    out["S=1 vs a W increase, nu = 1/2"] = float(np.max(np.abs(hs1 - mult)))
    out["grid_over_mean"] = x.tolist()
    return out


def _ordering(grid_max: float = 200.0, points: int = 401) -> dict:
    grid = dict(points=points, grid_min=0, grid_max=grid_max)
    x = np.linspace(0, grid_max, points)
    base = dict(preset="newreno", loss_prob=1e-3)
    const = dict(preset="general", a=1, alpha=0, lam=0.02, gamma=0, nu=0.5)  # E[W] = 100
    cases = {
        "floor (per-packet losses)": [("w_min=none", {}), ("w_min=10", {"w_min": 10}), ("w_min=20", {"w_min": 20}),
                                      ("w_min=40", {"w_min": 40})],
        "ceiling (per-packet losses)": [("w_max=20", {"w_max": 20}), ("w_max=40", {"w_max": 40}),
                                        ("w_max=80", {"w_max": 80}), ("w_max=none", {})],
        "ceiling (constant-rate losses)": [("w_max=40", {"w_max": 40}), ("w_max=80", {"w_max": 80}),
                                           ("w_max=160", {"w_max": 160}), ("w_max=none", {})],
    }
    out = {"grid": x.tolist(), "cases": {}}
    for title, variants in cases.items():
        params = const if "constant" in title else base
        cdfs = {label: np.asarray(_solve("cdf", **params, **extra, **grid).value) for label, extra in variants}
        means = {label: _solve("mean_window", **params, **extra).value for label, extra in variants}
        pairs = []
        labels = list(cdfs)
        for small, large in zip(labels[:-1], labels[1:]):
            order = solve_representation(CDFPair(x, cdfs[small], cdfs[large], tol=1e-8, labels=(small, large)))
            pairs.append({"first": small, "second": large, "verdict": order.verdict(), "regions": order.regions,
                          "largest_violation": order.largest_violation})
        out["cases"][title] = {"means": means, "pairs": pairs, "cdf": {k: v.tolist() for k, v in cdfs.items()}}
    return out


def _fmt(rows: list[dict], cols: list[str]) -> str:
    return format_table(rows, cols, width=18, digits=10)


@register_reproduction("awp", "adaptive window protocols: NewReno, Scalable and HighSpeed TCP windows, stability, "
                              "ordering by window bounds (Altman et al. 2005)")
def reproduce_awp(out_dir: Path | None, full: bool = False, *, scale: str | None = None, progress=None) -> str:
    """The four parts (module docstring); ``scale="smoke"`` takes three loss probabilities per sweep."""
    scale = scale or ("full" if full else "default")  # full=True: the former switch, kept
    losses = np.logspace(-7, -1, {"full": 25, "smoke": 3}.get(scale, 13))
    hs_losses = np.logspace(-6, -2, {"full": 9, "smoke": 3}.get(scale, 5))
    job = Job("awp", progress)
    st = [job.stage("mean window against the loss probability", [COST["mean"]] * len(losses)),
          job.stage("stability of Scalable TCP", [COST["stability"] + COST["escape"] + COST["gamma"]]),
          job.stage("HighSpeed TCP by its response exponent", [COST["highspeed"]] * len(HS_EXPONENTS)),
          job.stage("laws of W / E[W]", [COST["shape"]]),
          job.stage("window bounds and stochastic order", [COST["ordering"]])]
    mean = _mean_window_table(losses, stage=st[0])
    for _ in st[1].each(["stability region, ceilings, window-dependent losses"]):
        region = _stability_table()
        escape = _escape_table()
        gamma = _gamma_table()
    hs = _highspeed_table(hs_losses, stage=st[2])
    for _ in st[3].each(["p = 0.001"]):
        shape = _shape_comparison()
    for _ in st[4].each(["NewReno and constant-rate losses"]):
        order = _ordering()
    job.close()
    worst = max(r[f"{p}_numerical_rel_diff"] for r in mean for p in PROTOCOLS)
    text = [
        "Mean window E[W] (packets) against the per-packet loss probability p: analytic q-series; every value "
        f"checked against the numerical Kolmogorov solution (largest relative difference {worst:.1e})",
        _fmt(mean, ["p", *PROTOCOLS, "newreno_sqrt_p", "rfc3649_response"]),
        "",
        f"Stability of Scalable TCP (a(W) = {SCALABLE_A} W, W -> nu W) with constant-rate losses lam and w_min = 1: "
        "stable iff lam > a / ln(1/nu); E[W] finite iff lam > a / (1 - nu)",
        _fmt(region, ["nu", "lam/edge", "stability_edge", "finite_mean_edge", "stable", "value", "mean_window"]),
        "",
        f"The verdict against growing ceilings (nu = {SCALABLE_NU}): the mass above w_max / 10 vanishes iff stable",
        _fmt(escape, ["lam/edge", "stable"] + [k for k in escape[0] if k.startswith("P(")]),
        "",
        "Scalable TCP with losses at rate 1e-3 W^gamma (no bounds): stable iff m = gamma > 0",
        _fmt(gamma, ["gamma", "stable", "deciding", "value"]),
        "",
        "HighSpeed TCP by its response exponent S (RFC 3649: 0.835): E[W] ~ p^-S (slope of log E[W] against -log p)",
        _fmt(hs, ["S", "alpha", "slope"] + [k for k in hs[0] if k.startswith("EW(")]),
        "",
        "Laws of W / E[W] (p = 0.001), sup distance of the CDFs on [0, 4]: HighSpeed at S = 1/2 has NewReno's law",
        "\n".join(f"  {k}: {v:.3e}" for k, v in shape.items() if k != "grid_over_mean"),
        "",
        "Window bounds and stochastic order (CDFs on [0, 200]; 'a <=st b' where F_a >= F_b on the whole grid)",
    ]
    for title, case in order["cases"].items():
        text.append(f"  {title}: means " + ", ".join(f"{k} {v:.6g}" for k, v in case["means"].items()))
        for pr in case["pairs"]:
            where = "" if pr["verdict"] != "not ordered" else \
                f" (first <=st second holds on {', '.join(f'[{a:g}, {b:g}]' for a, b in pr['regions'])})"
            text.append(f"    {pr['first']} vs {pr['second']}: {pr['verdict']}{where}")
    if out_dir is not None:
        data = {"mean_window": mean, "scalable_stability": region, "scalable_escape": escape,
                "scalable_gamma": gamma, "highspeed": hs, "highspeed_shape": shape, "ordering": order}
        (out_dir / "awp.json").write_text(json.dumps(data, indent=1, default=str))
        if have_matplotlib():
            _figures(out_dir, mean, hs, hs_losses, order)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, mean, hs, hs_losses, order) -> list[str]:
    """The four figures; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import new_axes, save

    problems = []
    p = np.array([r["p"] for r in mean])
    fig, ax = new_axes(figsize=(6.0, 4.2))
    for proto in PROTOCOLS:
        ax.loglog(p, [r[proto] for r in mean], marker=".", label=proto)
    ax.loglog(p, 0.12 / p**0.835, "k:", linewidth=0.8, label="RFC 3649: 0.12 / p^0.835")
    ax.set_xlabel("loss probability p per packet")
    ax.set_ylabel("mean window E[W] (packets)")
    ax.set_title("Mean congestion window of three TCP variants\nagainst the per-packet loss probability", fontsize=9)
    problems += save(fig, out_dir / "awp_mean_window.png")

    fig, ax = new_axes(figsize=(6.0, 4.2))
    nu = np.linspace(0.3, 0.97, 200)
    edge, finite = 1 / np.log(1 / nu), 1 / (1 - nu)
    ax.fill_between(nu, edge, 60, color="tab:green", alpha=0.15, label="stable: lam / a > 1 / ln(1/nu)")
    ax.plot(nu, edge, "tab:green", label="stability edge, lam / a = 1 / ln(1/nu)")
    ax.plot(nu, finite, "tab:blue", linestyle="--", label="finite mean from lam / a = 1 / (1 - nu)")
    ax.plot([SCALABLE_NU], [1 / math.log(1 / SCALABLE_NU)], "ko", markersize=4,
            label=f"Scalable TCP's nu = {SCALABLE_NU:g}")
    ax.set_ylim(0, 40)
    ax.set_xlabel("decrease factor nu (W -> nu W at a loss)")
    ax.set_ylabel("loss rate / increase rate  lam / a")
    ax.set_title("Scalable TCP with losses at a constant rate, window at least 1:\nwhere the window process is "
                 "stable", fontsize=9)
    problems += save(fig, out_dir / "awp_scalable_stability.png")

    fig, ax = new_axes(figsize=(6.0, 4.2))
    for r in hs:
        ax.loglog(hs_losses, [r[f"EW(p={q:g})"] for q in hs_losses], marker=".", label=f"S = {r['S']:g}")
    ax.set_xlabel("loss probability p per packet")
    ax.set_ylabel("mean window E[W] (packets)")
    ax.set_title("HighSpeed TCP by its response exponent S (RFC 3649: S = 0.835):\nE[W] falls like p^-S", fontsize=9)
    problems += save(fig, out_dir / "awp_highspeed.png")

    x = np.array(order["grid"])
    fig, axes = new_axes(1, 3, figsize=(10.5, 3.8))
    for ax, (title, case) in zip(axes, order["cases"].items()):
        for label, F in case["cdf"].items():
            ax.plot(x, F, label=label.replace("=none", " none"), linewidth=1)
        ax.set_title(f"NewReno, {title}" if "per-packet" in title else title, fontsize=8)
        ax.set_xlabel("W (packets)")
    axes[0].set_ylabel("P(W <= x)")
    fig.suptitle("Window bounds and the stationary law of the window: a larger floor or ceiling gives a larger "
                 "window,\nexcept a ceiling under per-packet losses (the CDFs cross)", fontsize=9)
    problems += save(fig, out_dir / "awp_bounds_ordering.png", legend_kw={"fontsize": 7})
    return problems
