"""The one result type returned by every solver and by :func:`exactq.solve`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Result", "Estimate"]


def _plain(x: Any) -> Any:
    """Convert numpy scalars/arrays (recursively) into JSON-ready Python objects."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


@dataclass(frozen=True)
class Estimate:
    """A model's value of a measure from one solution, when it says more than the value.

    ``error`` is an absolute error estimate, ``lower``/``upper`` rigorous bounds, and
    ``info`` details for the result (``info["record"]``, if present, goes into the
    truncation history instead).
    """

    value: Any
    error: float | None = None
    lower: float | None = None
    upper: float | None = None
    info: dict = field(default_factory=dict)


@dataclass
class Result:
    """Outcome of a computation, in the spirit of ``scipy.optimize.OptimizeResult``.

    Attributes
    ----------
    value : float or list of float
        The computed quantity (a list for vector measures such as
        ``mean_queue_lengths``).
    lower, upper : float or None
        Rigorous bounds when the method gives them (``lower <= value <= upper``).
    method : str
        The method that produced the value (e.g. ``"ctmc/direct"``).
    residual : float or None
        ``max |pi Q|`` for stationary solves, or the method's own residual.
    error_estimate : float or None
        Estimated absolute error of ``value`` (truncation and solver error together).
    n_states : int or None
        Size of the chain that was solved (the last one for adaptive truncation).
    nit : int or None
        Iterations used by an iterative method.
    seconds : float
        Wall time of the computation.
    info : dict
        Method-specific details: truncation level, boundary mass, solver status,
        verification, ...
    """

    value: Any
    method: str
    lower: float | None = None
    upper: float | None = None
    residual: float | None = None
    error_estimate: float | None = None
    n_states: int | None = None
    nit: int | None = None
    seconds: float = 0.0
    measure: str | None = None
    info: dict = field(default_factory=dict)

    def __float__(self) -> float:
        if isinstance(self.value, (list, tuple, np.ndarray)):
            raise TypeError(f"measure {self.measure!r} is a vector; use .value")
        return float(self.value)

    def to_dict(self) -> dict:
        """JSON-ready dictionary of every field."""
        return _plain(
            {
                "measure": self.measure,
                "method": self.method,
                "value": self.value,
                "lower": self.lower,
                "upper": self.upper,
                "error_estimate": self.error_estimate,
                "residual": self.residual,
                "n_states": self.n_states,
                "nit": self.nit,
                "seconds": self.seconds,
                "info": self.info,
            }
        )

    def __repr__(self) -> str:  # short, readable
        parts = [f"value={self.value!r}", f"method={self.method!r}"]
        for name in ("lower", "upper", "error_estimate", "residual", "n_states"):
            v = getattr(self, name)
            if v is not None:
                parts.append(f"{name}={v!r}")
        return f"Result({', '.join(parts)})"
