"""The ``closed-form`` method: a model's own exact formulas, evaluated directly.

There is nothing to solve: the ``model`` driver calls ``model.closed_form(measure)``;
the error is rounding only (a model may return an Estimate or a full Result with its
own diagnostics).
"""

from exactq.catalogue import register_method

register_method(
    "closed-form",
    requires="closed_form",
    driver="model",
    context=False,
    label="closed-form",
    doc="the model's exact closed-form expressions (no truncation, no iteration)",
)
