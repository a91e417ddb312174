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
    "PluginError",
    "NonFiniteError",
    "FileError",
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


class PluginError(ModelError):
    """A plug-in model failed in its own code, or cannot be registered (its message names the plug-in)."""


class QuerySyntaxError(ExactqError, SyntaxError):
    """A malformed property query or state expression (position and expected token)."""


class NonFiniteError(ExactqError, ArithmeticError):
    """A value is not a finite float64: it overflows the double range although finite, or a computation gave NaN.

    The message names the quantity and, where it is known, its value at higher
    precision (``E[W^200] = 7.88e+374``). A value that is infinite in exact arithmetic
    (a divergent moment) is a result whose ``info["infinite"]`` says why, not this error.
    """


class FileError(ExactqError, OSError):
    """A file or folder cannot be read or written; the message names the path and the reason."""


def file_error(exc: OSError, action: str, path=None) -> FileError:
    """A :class:`FileError` for ``exc``: ``cannot write /x/out.csv: the folder /x does not exist``.

    Examples
    --------
    >>> str(file_error(FileNotFoundError(2, "No such file or directory", "/nope/t.csv"), "write"))
    'cannot write /nope/t.csv: No such file or directory (the folder /nope does not exist)'
    """
    import errno
    import os

    where = str(path if path is not None else (exc.filename or "the file"))
    why = exc.strerror or str(exc) or type(exc).__name__
    folder = os.path.dirname(os.path.abspath(where))
    if exc.errno == errno.ENOENT and action == "write" and not os.path.isdir(folder):
        why += f" (the folder {folder} does not exist)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and action == "write":
        why += f" (is the folder {folder} read-only?)"
    return FileError(f"cannot {action} {where}: {why}")


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped before reaching its tolerance."""


class AccuracyWarning(RuntimeWarning):
    """A result is less accurate than requested (truncation, residual, bounds)."""
