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

    def nonfinite(self) -> str | None:
        """Why ``value`` is not a finite number, or ``None`` when it is (or is infinite for a stated reason).

        A value is accepted when every number in it is finite; ``+inf`` also when the
        result says why the exact value is infinite (``info["infinite"]``, or
        ``info["reached_surely"] is False`` for an expected time): a divergent moment or
        an unreachable target. NaN is never a value. Booleans and strings are not
        numbers and pass.

        Examples
        --------
        >>> Result(value=1.5, method="m").nonfinite() is None
        True
        >>> Result(value=[1.0, float("nan")], method="m").nonfinite()
        'component 2 is nan'
        >>> Result(value=float("inf"), method="m", info={"infinite": "a Pareto tail"}).nonfinite() is None
        True
        """
        values = self.value if isinstance(self.value, (list, tuple, np.ndarray)) else [self.value]
        declared = bool(self.info.get("infinite")) or self.info.get("reached_surely") is False \
            if isinstance(self.info, dict) else False
        for i, v in enumerate(np.ravel(np.asarray(values, dtype=object)), 1):
            if isinstance(v, (bool, np.bool_, str)) or v is None:
                continue
            try:
                x = float(v)
            except (TypeError, ValueError, OverflowError):
                continue
            if np.isfinite(x) or (x == np.inf and declared):
                continue
            where = "" if len(values) == 1 and not isinstance(self.value, (list, tuple, np.ndarray)) else \
                f"component {i} is "
            return f"{where}{x!r}"
        return None

    def require_finite(self, what: str = "") -> "Result":
        """Return ``self``, or raise :class:`~exactq.errors.NonFiniteError` naming ``what`` when :meth:`nonfinite`.

        Examples
        --------
        >>> Result(value=float("inf"), method="m", measure="mean").require_finite("mm1 mean")
        Traceback (most recent call last):
        ...
        exactq.errors.NonFiniteError: mm1 mean: method m gave inf, not a finite number (an overflow or a failed \
solve; the exact value is not known to be infinite)
        """
        why = self.nonfinite()
        if why is None:
            return self
        from .errors import NonFiniteError

        name = what or self.measure or "the value"
        est = "" if self.error_estimate is None or np.isfinite(self.error_estimate) else \
            f", error estimate {self.error_estimate!r}"
        raise NonFiniteError(f"{name}: method {self.method} gave {why}{est}, not a finite number (an overflow or a "
                             "failed solve; the exact value is not known to be infinite)")

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

    def _repr_html_(self) -> str:
        """A small table for notebooks: value, bounds, error estimate, method, truncation.

        Examples
        --------
        >>> html = Result(value=1.0, method="closed-form", measure="mean_number")._repr_html_()
        >>> "mean_number" in html and "closed-form" in html
        True
        """
        from html import escape

        def fmt(v):
            if isinstance(v, float):
                return f"{v:.12g}"
            if isinstance(v, (list, tuple)):
                return "[" + ", ".join(fmt(x) for x in v) + "]"
            return str(v)

        rows = [("value", fmt(_plain(self.value)))]
        if self.lower is not None or self.upper is not None:
            kind = "certified bounds" if "certificate" in self.info else "bounds"
            rows.append((kind, f"[{fmt(_plain(self.lower))}, {fmt(_plain(self.upper))}]"))
        if self.error_estimate is not None:
            rows.append(("error estimate", f"{self.error_estimate:.3g}"))
        rows.append(("method", self.method))
        trunc = self.info.get("truncation") if isinstance(self.info, dict) else None
        if isinstance(trunc, dict):
            bits = [f"level {trunc['level']}" if trunc.get("level") is not None else "a kept set"]
            if trunc.get("boundary_mass") is not None:
                bits.append(f"boundary mass {trunc['boundary_mass']:.2e}")
            if trunc.get("stopped_by"):
                bits.append(f"stopped by {trunc['stopped_by']}")
            rows.append(("truncation", ", ".join(bits)))
        if self.n_states is not None:
            rows.append(("states", str(self.n_states)))
        rows.append(("seconds", f"{self.seconds:.3g}"))
        head = escape(self.measure or "result")
        body = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>{escape(v)}</td>"
                       "</tr>" for k, v in rows)
        return f"<table><caption style='text-align:left'><b>{head}</b></caption>{body}</table>"
