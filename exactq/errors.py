"""The exception tree of exactq.

Every error a user can provoke derives from :class:`ExactqError`; the command line
turns each into one line on stderr and a non-zero exit status. Messages name the
parameter (or state), the rule and the offending value, e.g.
``arrival_rate must be < total service rate 2.0 for stability; got 2.5``.
"""

from __future__ import annotations

__all__ = [
    "ExactqError",
    "ModelError",
    "UnstableError",
    "NotApplicableError",
    "SolverRefusal",
    "ConvergenceError",
    "TruncationError",
    "ReducibleError",
    "QuerySyntaxError",
    "NonFiniteError",
    "ConvergenceWarning",
    "AccuracyWarning",
]


class ExactqError(Exception):
    """Root of all exactq errors."""


class ModelError(ExactqError, ValueError):
    """Invalid model, parameter, measure or method name."""


class UnstableError(ModelError):
    """The parameters give an unstable (non-ergodic) infinite model."""


class NotApplicableError(ExactqError):
    """A solver or method cannot handle this model or representation."""


class SolverRefusal(NotApplicableError):
    """No registered solver can handle this representation (its structure or size)."""


class ConvergenceError(ExactqError, ArithmeticError):
    """An iterative method did not reach its tolerance (raised with ``strict=True``)."""


class TruncationError(ExactqError):
    """The truncation needed for the requested tolerance exceeds the allowed size."""


class ReducibleError(ExactqError):
    """The Markov chain is not irreducible; the message names a state in each closed class."""


class QuerySyntaxError(ExactqError, SyntaxError):
    """A malformed property query or state expression (position and expected token)."""


class NonFiniteError(ExactqError, ArithmeticError):
    """A value is not a finite float64: it overflows the double range although finite, or a computation gave NaN.

    The message names the quantity and, where it is known, its value at higher
    precision (``E[W^200] = 7.88e+374``). A value that is infinite in exact arithmetic
    (a divergent moment) is a result whose ``info["infinite"]`` says why, not this error.
    """


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped before reaching its tolerance."""


class AccuracyWarning(RuntimeWarning):
    """A result is less accurate than requested (truncation, residual, bounds)."""
