"""The ``closed-form`` method: a model's own exact formulas, evaluated directly."""

from __future__ import annotations

import time

import numpy as np

from exactq.catalogue import register_method
from exactq.result import Result

__all__ = ["solve_closed_form"]


@register_method(
    "closed-form",
    requires="closed_form",
    doc="the model's exact closed-form expressions (no truncation, no iteration)",
)
def solve_closed_form(model, measure, **_ignored) -> Result:
    """Evaluate ``model.closed_form(measure)``; the error is rounding only.

    A model may return a full :class:`Result` (with its own diagnostics) instead of a
    bare value; it is passed through.
    """
    t0 = time.perf_counter()
    value = model.closed_form(measure)
    if isinstance(value, Result):
        value.seconds = value.seconds or time.perf_counter() - t0
        return value
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return Result(value=value, method="closed-form", error_estimate=None,
                  seconds=time.perf_counter() - t0,
                  info={"arithmetic": "float64",
                        "accuracy": "exact formula; rounding error only (it grows near saturation)"})
