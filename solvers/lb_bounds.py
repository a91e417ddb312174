"""The ``bounds`` method for models that bracket a measure between bounding representations.

There is nothing model-specific here: the ``model`` driver calls
``model.finite_bounds(measure, context)``; the model builds its bounding
representations (for example a truncated CTMC that only ever loses jobs and a QBD that
only ever gains them), has each solved by ``context.solve`` (the generic stationary
and QBD solvers, by the representation's type and declared structure) and returns
the bracket. ``truncation`` is accepted for its deprecated use by such a model.
"""

from exactq.catalogue import register_method

register_method(
    "bounds",
    requires="finite_bounds",
    driver="model",
    label="bounds/coupling",
    doc="rigorous lower/upper bounds at finite n: a job-losing truncation and a job-gaining "
        "QBD on a profile of queue differences (sample-path coupling; rank-based routing)",
    options=("truncation", "strict", "spread", "lower_states", "max_phases"),
)
