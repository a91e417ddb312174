"""The ``asymptotic`` method: a model's large-parameter approximations, with the solves they need.

The ``model`` driver of :mod:`exactq.methods` calls ``model.asymptotic(measure,
context)``; the model evaluates its asymptotic formulas and hands any representation
they need (a walk of the limit system, a QBD) to ``context.solve``. There is no error
bound: a model reports ``error_estimate=None`` and says in ``info`` which regime it
used and how accurate it is.
"""

from exactq.catalogue import register_method

register_method(
    "asymptotic",
    requires="asymptotic",
    driver="model",
    label="asymptotic",
    doc="large-parameter approximations (e.g. a capacity -> infinity, by regime of the load); no error bound",
)
