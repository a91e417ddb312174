"""The shared controls, validated once: ``tol``, ``time_limit``, ``truncation``, ``workers``.

Every entry point that takes one of these controls (:func:`exactq.solve`,
:func:`exactq.check`, :func:`exactq.sweep`, the ``solve``, ``check``, ``sweep`` and
``export`` commands, PRISM files included) validates it here, so that a value refused
by one is refused by all, with the same line: the control's name, the rule and the
value, e.g. ``tol must be in (0, 1); got 2.0``.

The rules
---------
``tol``
    A real number with ``0 < tol < 1`` (a relative accuracy; ``nan`` and ``inf`` are
    refused).
``time_limit``
    A real number of seconds, finite and ``> 0``.
``truncation``
    An integer ``>= 1`` (a float with an integer value, ``10.0``, is accepted).
``workers``
    An integer ``>= 1``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import ModelError

__all__ = ["check_tol", "check_time_limit", "check_truncation", "check_workers", "check_controls", "CONTROLS"]


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_tol(tol: Any, *, name: str = "tol") -> float:
    """``tol`` as a float, or :class:`~exactq.errors.ModelError` unless ``0 < tol < 1``.

    Examples
    --------
    >>> check_tol(1e-9)
    1e-09
    >>> try:
    ...     check_tol(2.0)
    ... except ModelError as e:
    ...     print(e)
    tol must be in (0, 1); got 2.0
    """
    if not (_is_real(tol) and math.isfinite(tol) and 0 < tol < 1):
        raise ModelError(f"{name} must be in (0, 1); got {tol!r}")
    return float(tol)


def check_time_limit(time_limit: Any, *, name: str = "time_limit") -> float | None:
    """``time_limit`` as a float (``None`` stays ``None``), or :class:`~exactq.errors.ModelError` unless finite and > 0.

    Examples
    --------
    >>> check_time_limit(2), check_time_limit(None)
    (2.0, None)
    """
    if time_limit is None:
        return None
    if not (_is_real(time_limit) and math.isfinite(time_limit) and time_limit > 0):
        raise ModelError(f"{name} must be a number of seconds > 0; got {time_limit!r}")
    return float(time_limit)


def _check_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    ok = _is_real(value) and math.isfinite(value) and float(value).is_integer() and value >= 1
    if not ok:
        raise ModelError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def check_truncation(truncation: Any, *, name: str = "truncation") -> int | None:
    """``truncation`` as an int (``None`` stays ``None``), or :class:`~exactq.errors.ModelError` unless an integer >= 1.

    Examples
    --------
    >>> check_truncation(10.0), check_truncation(None)
    (10, None)
    >>> try:
    ...     check_truncation(0)
    ... except ModelError as e:
    ...     print(e)
    truncation must be an integer >= 1; got 0
    """
    return _check_int(truncation, name)


def check_workers(workers: Any, *, name: str = "workers") -> int | None:
    """``workers`` as an int (``None`` stays ``None``), or :class:`~exactq.errors.ModelError` unless an integer >= 1.

    Examples
    --------
    >>> check_workers(4)
    4
    """
    return _check_int(workers, name)


#: the shared controls and their checks, by keyword name
CONTROLS = {"tol": check_tol, "time_limit": check_time_limit, "truncation": check_truncation,
            "workers": check_workers}


def check_controls(**controls: Any) -> dict:
    """Validate the given shared controls (keywords of :data:`CONTROLS`); return them normalised.

    Examples
    --------
    >>> check_controls(tol=1e-6, truncation=None, time_limit=3)
    {'tol': 1e-06, 'truncation': None, 'time_limit': 3.0}
    """
    return {key: CONTROLS[key](value) for key, value in controls.items()}
