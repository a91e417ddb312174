"""The ``qbd`` method: a model's chain as a level-independent QBD, solved matrix-geometrically.

A model offering ``qbd_blocks(width)`` describes its chain as a quasi-birth-death process
whose *level* is unbounded and handled exactly (the matrix-geometric law of
:func:`~exactq.solvers.qbd.solve_qbd`, all levels to infinity), and whose *phase* is
truncated at ``width`` (a finite number of phases per level). The phase truncation is
the only approximation; it is grown (x1.5) until the requested measure changes by less
than ``tol`` between two widths, and that change is the reported error estimate.

This is an independent second method for models that also have a truncated-CTMC
solution: different state coordinates, a different truncation (one dimension instead
of a box) and a different algorithm (logarithmic reduction for ``G``, dense LU of the
boundary), so agreement of the two is a real check.

Model protocol
--------------
``qbd_blocks(width) -> dict``
    ``A0, A1, A2, B0, B1, B2`` (see :mod:`exactq.solvers.qbd`), ``rewards``: a mapping
    name -> ``(boundary, constant, slope)`` such that the reward of phase ``j`` is
    ``boundary[j]`` at level 0 and ``constant[j] + n slope[j]`` at level ``n >= 1``,
    and ``edge``: a 0/1 vector over the phases marking those at the truncation edge.
``qbd_start(tol) -> int``
    The first width.
``qbd_measure(measure, expectations) -> value``
    The measure from the expected rewards (a dict name -> float).

Reference: G. Latouche and V. Ramaswami, *Introduction to Matrix Analytic Methods in
Stochastic Modeling*, SIAM 1999, ch. 6 and 8.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from exactq.catalogue import register_method
from exactq.errors import AccuracyWarning, ConvergenceError, TruncationError
from exactq.result import Result

from .qbd import MAX_PHASES, solve_qbd

__all__ = ["solve_qbd_method", "qbd_expectations"]


def qbd_expectations(blocks: dict) -> tuple[dict, object]:
    """Solve the QBD of ``blocks``; return the expected rewards (plus ``edge_mass``) and the solution."""
    sol = solve_qbd(blocks["A0"], blocks["A1"], blocks["A2"], B1=blocks["B1"], B0=blocks["B0"],
                    B2=blocks["B2"], strict=True)
    out = {name: sol.expect_affine(*triple) for name, triple in blocks["rewards"].items()}
    edge = np.asarray(blocks["edge"], dtype=float)
    out["edge_mass"] = sol.expect_affine(edge[: sol.n_boundary_phases], edge, 0.0)
    return out, sol


def _scalar(v) -> float:
    return float(np.max(np.abs(np.atleast_1d(v))))


@register_method(
    "qbd",
    requires="qbd_blocks",
    doc="matrix-geometric solution: exact in the unbounded level, the phase truncated adaptively",
    options=("tol", "truncation", "strict"),
)
def solve_qbd_method(model, measure, *, tol=1e-9, truncation=None, strict=False, **_ignored) -> Result:
    """Solve ``model`` by its QBD description (module docstring)."""
    t0 = time.perf_counter()
    history = []

    def at(width):
        blocks = model.qbd_blocks(width)
        exp, sol = qbd_expectations(blocks)
        value = model.qbd_measure(measure, exp)
        history.append({"width": width, "phases": sol.n_phases, "value": value, "edge_mass": exp["edge_mass"],
                        "sp_R": sol.spectral_radius, "residual": sol.residual})
        return value, sol

    warn = []
    if truncation is not None:
        value, sol = at(int(truncation))
        err = None
        warn.append(f"phase truncation fixed at {int(truncation)}: the error is not estimated "
                    f"(probability at the truncation edge {history[-1]['edge_mass']:.3g})")
    else:
        width = int(model.qbd_start(tol))
        value, sol = at(width)
        while True:
            nxt = int(math.ceil(1.5 * width))
            if model.qbd_blocks_size(nxt) > MAX_PHASES:
                raise TruncationError(
                    f"the phase truncation needed for tol={tol:g} exceeds {MAX_PHASES} phases per level "
                    f"(reached width {width}); use --method ctmc or a larger tol")
            new, sol = at(nxt)
            err = _scalar(np.asarray(new, dtype=float) - np.asarray(value, dtype=float))
            value, width = new, nxt
            if err <= tol * max(1.0, _scalar(value)):
                break
    last = history[-1]
    if not (last["residual"] < 1e-8):
        msg = f"QBD balance residual {last['residual']:.3g} is large"
        if strict:
            raise ConvergenceError(msg)
        warn.append(msg)
    for w in warn:
        warnings.warn(w, AccuracyWarning, stacklevel=3)
    return Result(
        value=value,
        method="qbd",
        error_estimate=err,
        n_states=None,
        nit=sol.nit,
        residual=last["residual"],
        seconds=time.perf_counter() - t0,
        info={
            "phase_truncation": last["width"],
            "phases_per_level": last["phases"],
            "levels": "all (matrix-geometric)",
            "spectral_radius_R": last["sp_R"],
            "edge_mass": last["edge_mass"],
            "history": history,
            "warnings": warn,
            "error_estimate_rule": "change of the measure between the last two phase truncations (x1.5)",
        },
    )
