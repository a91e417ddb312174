"""exactq: exact and rigorously bounded values of load-balancing and queueing models."""

import os as _os

# ``models/`` and ``solvers/`` sit beside this package in a source checkout and are
# installed as ``exactq.models`` / ``exactq.solvers``. When this ``__init__`` is the
# checkout's (the repository root is on sys.path, e.g. ``python -m pytest`` run
# there), let the subpackages resolve to the root's folders.
_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "models")) and all(
    _os.path.isfile(_os.path.join(_root, sub, "__init__.py")) for sub in ("models", "solvers")
):
    __path__.append(_root)  # noqa: F821  (the package's own search path)

from .errors import (  # noqa: F401
    AccuracyWarning,
    ConvergenceError,
    ConvergenceWarning,
    ExactqError,
    ModelError,
    NotApplicableError,
    PluginError,
    QuerySyntaxError,
    ReducibleError,
    TruncationError,
    UnstableError,
)
from .budget import tune_allocator as _tune_allocator
from .result import Result  # noqa: F401
from .api import solve, check, model  # noqa: F401
from .sweep import sweep  # noqa: F401
from .catalogue import describe_models, model_names  # noqa: F401

__version__ = "0.1.0"

_tune_allocator()  # glibc keeps freed arrays for reuse (exactq.budget.MALLOC_SETTINGS; EXACTQ_MALLOC_TUNING=0: off)


def load_prism(path, constants=None, **options):
    """Read a PRISM model file (ctmc or dtmc) as a model; see :func:`exactq.prism.load_prism`."""
    from .prism import load_prism as _load_prism

    return _load_prism(path, constants, **options)


def register_model(obj=None, **options):
    """Add a plug-in model at run time (a Model subclass or a function returning a CTMC); see
    :func:`exactq.plugins.register`."""
    from .plugins import register as _register

    return _register(obj, **options)
