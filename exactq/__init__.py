"""exactq: exact and rigorously bounded values of load-balancing and queueing models."""

from .errors import (  # noqa: F401
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ExactqError,
    ModelError,
    NotApplicableError,
    QuerySyntaxError,
    ReducibleError,
    TruncationError,
    UnstableError,
)
from .result import Result  # noqa: F401
from .api import solve, check, model  # noqa: F401
from .catalogue import describe_models, model_names  # noqa: F401

__version__ = "0.1.0"
