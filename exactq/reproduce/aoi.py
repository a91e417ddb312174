"""``exactq reproduce aoi``: age of information with fixed-length differential encoding (seed 001).

Bhambay, Poojary & Parag (IEEE Trans. Commun. 2019; WCNC and ITW papers), with the
conventions of ``MODELS.md`` (n = 10 bits, b_A = 8, b_D = 4). Three parts, each
computed with the ``aoi`` model through :func:`exactq.solve` (matrix-geometric method):

* **Mean age against the erasure probability** for the actual, differential (with
  feedback), generalized (``threshold_prob = 0.5``) and periodic (no feedback, ``L =
  3``) schemes, with the optimal period of the periodic scheme: differential encoding
  helps only with feedback (the optimal period is 1, i.e. actual updates).
* **The threshold trade-off of a Markov source**: a lazy random walk on 32 states with
  jumps of up to five; a larger threshold ``k`` allows more differential updates but
  needs ``ceil(log2(2k + 1))`` bits, decoded less often. Mean age, peak age and the
  decoding-failure probability for each admissible ``k``, and the optimal one.
* **The stochastic ordering** ``differential <=st generalized <=st actual`` of the age:
  ``P(age > x)`` of the three schemes, checked on the whole support.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

import exactq
from exactq.progress import Job, Stage, steps
from exactq.reproduce import format_table, have_matplotlib, register_reproduction

__all__ = ["reproduce_aoi", "walk_source"]

BASE = dict(codeword_bits=10, actual_bits=8)
SCHEMES = {
    "actual": dict(scheme="actual"),
    "differential": dict(scheme="differential", differential_bits=4),
    "generalized": dict(scheme="generalized", differential_bits=4, threshold_prob=0.5),
    "periodic": dict(scheme="periodic", differential_bits=4, period=3),
}


def _solve(measure: str, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exactq.solve("aoi", measure, **params)


def walk_source(m: int = 32, jumps=(0.4, 0.25, 0.15, 0.1, 0.06, 0.04)) -> np.ndarray:
    """A lazy random walk on ``0..m-1``: stay with ``jumps[0]``, move by ``d`` with ``jumps[d] / 2`` each way.

    Moves that would leave the range stay put (reflection by holding).

    Examples
    --------
    >>> P = walk_source(8)
    >>> bool(np.allclose(P.sum(1), 1) and P[3, 4] == 0.125 and np.isclose(P[0, 0], 0.4 + (0.25 + 0.15 + 0.1 + 0.06 + 0.04) / 2))
    True
    """
    P = np.zeros((m, m))
    i = np.arange(m)
    P[i, i] += jumps[0]
    for d, p in enumerate(jumps[1:], start=1):
        for sign in (1, -1):
            j = i + sign * d
            inside = (j >= 0) & (j < m)
            P[i[inside], j[inside]] += p / 2
            P[i[~inside], i[~inside]] += p / 2
    return P


#: seconds per point of each part in one default run (the progress ETA's cost model)
COST = {"erasure": 2.8, "thresholds": 0.85, "ordering": 0.3}


def _erasure_table(deltas, *, stage: Stage | None = None) -> list[dict]:
    rows = []
    for d in steps(stage, deltas, [f"erasure probability {float(x):.3g}" for x in deltas]):
        row = {"erasure_prob": float(d)}
        for name, extra in SCHEMES.items():
            row[name] = _solve("mean_age", erasure_prob=float(d), **BASE, **extra).value
        row["optimal_period"] = _solve("optimal_period", erasure_prob=float(d), **BASE, **SCHEMES["periodic"]).value
        rows.append(row)
    return rows


def _threshold_table(erasure_prob: float, codeword_bits: int) -> tuple[list[dict], int]:
    P = walk_source()
    kw = dict(scheme="markov", source_matrix=P, codeword_bits=codeword_bits, erasure_prob=erasure_prob)
    best = _solve("optimal_threshold", threshold=0, **kw)
    rows = []
    for k in sorted(best.info["mean_age_by_threshold"]):
        m = exactq.model("aoi", threshold=k, **kw)
        b_a, b_d = m.bits
        inc = np.abs(np.subtract.outer(np.arange(len(P)), np.arange(len(P))))
        pi = np.linalg.lstsq(np.vstack([P.T - np.eye(len(P)), np.ones(len(P))]), np.r_[np.zeros(len(P)), 1.0],
                             rcond=None)[0]
        rows.append({"threshold": k, "differential_bits": b_d, "actual_bits": b_a,
                     "P(increment<=k)": float(pi @ (P * (inc <= k)).sum(1)),
                     "mean_age": _solve("mean_age", threshold=k, **kw).value,
                     "mean_peak_age": _solve("mean_peak_age", threshold=k, **kw).value,
                     "decoding_failure_probability": _solve("decoding_failure_probability", threshold=k, **kw).value})
    return rows, int(best.value)


def _ordering(erasure_prob: float) -> dict:
    laws = {name: np.array(_solve("age_distribution", erasure_prob=erasure_prob, **BASE, **SCHEMES[name]).value)
            for name in ("actual", "generalized", "differential")}
    size = max(len(v) for v in laws.values())
    tails = {k: 1.0 - np.cumsum(np.pad(v, (0, size - len(v)))) for k, v in laws.items()}
    slack = 2e-12  # each list stops where its own tail is below 1e-12
    return {"erasure_prob": erasure_prob,
            "tails": {k: v[:30].tolist() for k, v in tails.items()},
            "differential<=st generalized": bool(np.all(tails["differential"] <= tails["generalized"] + slack)),
            "generalized<=st actual": bool(np.all(tails["generalized"] <= tails["actual"] + slack))}


def _fmt(rows: list[dict], cols: list[str]) -> str:
    return format_table(rows, cols, width=14, digits=8)


@register_reproduction("aoi", "age of information with differential encoding: mean age against the erasure "
                              "probability, the Markov-source threshold trade-off, the stochastic ordering")
def reproduce_aoi(out_dir: Path | None, full: bool = False, *, scale: str | None = None, progress=None) -> str:
    """The three parts (module docstring); ``scale="smoke"`` takes three erasure probabilities (0, 0.3, 0.5)."""
    scale = scale or ("full" if full else "default")  # full=True: the former switch, kept
    deltas = np.array([0.0, 0.3, 0.5]) if scale == "smoke" else np.linspace(0.0, 0.5, 26 if scale == "full" else 11)
    job = Job("aoi", progress)
    st = [job.stage("mean age against the erasure probability", [COST["erasure"]] * len(deltas)),
          job.stage("Markov source: the threshold trade-off", [COST["thresholds"]]),
          job.stage("stochastic ordering of the age", [COST["ordering"]])]
    erasure = _erasure_table(deltas, stage=st[0])
    for _ in st[1].each(["all thresholds"]):
        thresholds, best = _threshold_table(0.25, 8)
    for _ in st[2].each(["delta = 0.3"]):
        order = _ordering(0.3)
    job.close()
    text = [
        "Mean age (periods) against the erasure probability delta: n = 10 bits, b_A = 8, b_D = 4 "
        "(generalized: threshold_prob = 0.5; periodic: L = 3, no feedback)",
        _fmt(erasure, ["erasure_prob", *SCHEMES, "optimal_period"]),
        "",
        "Markov source (lazy random walk on 32 states, jumps up to 5), n = 8 bits, delta = 0.25, b_A = 5: the "
        f"threshold trade-off; optimal threshold k = {best}",
        _fmt(thresholds, ["threshold", "differential_bits", "P(increment<=k)", "mean_age", "mean_peak_age",
                          "decoding_failure_probability"]),
        "",
        f"Stochastic ordering of the age at delta = {order['erasure_prob']}: differential <=st generalized: "
        f"{order['differential<=st generalized']}; generalized <=st actual: {order['generalized<=st actual']}",
        "  x   " + "  ".join(f"P(age>x) {k:>12s}" for k in order["tails"]),
    ]
    for x in range(8):
        text.append(f"  {x + 1:<3d} " + "  ".join(f"{order['tails'][k][x]:>21.6e}" for k in order["tails"]))
    if out_dir is not None:
        data = {"erasure": erasure, "thresholds": thresholds, "optimal_threshold": best, "ordering": order}
        (out_dir / "aoi.json").write_text(json.dumps(data, indent=1))
        if have_matplotlib():
            _figures(out_dir, erasure, thresholds, order)
            text.append(f"\nfigures written to {out_dir}")
    return "\n".join(text)


def _figures(out_dir: Path, erasure, thresholds, order) -> list[str]:
    """The three figures; returns the problems :func:`figures.save` found (none expected)."""
    from exactq.reproduce.figures import integer_axis, new_axes, save

    problems = []
    fig, ax = new_axes(figsize=(6.4, 4.2))
    d = [r["erasure_prob"] for r in erasure]
    for name in SCHEMES:
        ax.plot(d, [r[name] for r in erasure], marker="o", ms=3, label=name)
    ax.set_xlabel("erasure probability of a transmitted update")
    ax.set_ylabel("mean age (periods)")
    ax.set_yscale("log")
    ax.set_title("Age of information of a 10-bit source: actual updates (8 bits) or differential\nones (4 bits; "
                 "generalized: half of the time; periodic: every 3rd actual, no feedback)", fontsize=9)
    problems += save(fig, out_dir / "aoi_mean_age.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    k = [r["threshold"] for r in thresholds]
    ax.plot(k, [r["mean_age"] for r in thresholds], marker="o", label="mean age")
    ax.plot(k, [r["mean_peak_age"] for r in thresholds], marker="s", label="mean peak age")
    ax.set_xlabel("encoding threshold k (largest increment sent differentially)")
    ax.set_ylabel("age (periods)")
    ax.set_title("Markov source (random walk on 32 states), 8-bit codewords, erasure 0.25:\na larger threshold "
                 "sends more differential updates, each needs more bits", fontsize=9)
    integer_axis(ax, "x")
    problems += save(fig, out_dir / "aoi_threshold.png")

    fig, ax = new_axes(figsize=(6.4, 4.2))
    for name, tail in order["tails"].items():
        ax.semilogy(np.arange(1, len(tail) + 1), np.maximum(tail, 1e-16), label=name)
    ax.set_xlabel("x (periods)")
    ax.set_ylabel("P(age > x)")
    ax.set_title(f"Tail of the age at erasure probability {order['erasure_prob']:g}: differential <= generalized "
                 "<= actual\nin the stochastic order (each curve lies below the next)", fontsize=9)
    integer_axis(ax, "x")
    problems += save(fig, out_dir / "aoi_ordering.png")
    return problems
