"""Progress reports: a bar for sweeps, a line for long adaptive truncations.

The library reports progress only through callbacks (``progress=`` of
:func:`exactq.solve`, :func:`exactq.check` and :func:`exactq.sweep`); the objects
here are such callbacks, which the command line passes when its standard error is
a terminal (and not under ``--json``). They write to the stream they are given.

:class:`TruncationLine`
    For one long solve: the adaptive truncation's level, states, last change and
    elapsed time on one line that is rewritten in place, and cleared at the end.
:func:`sweep_bar`
    For a sweep: a tqdm bar with the points done, the failures and an ETA.
"""

from __future__ import annotations

import math
import sys
from typing import IO, Any

__all__ = ["TruncationLine", "SweepBar", "sweep_bar", "is_terminal", "describe_record"]


def is_terminal(stream: IO | None = None) -> bool:
    """Whether ``stream`` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def describe_record(record: dict) -> str:
    """One line for a truncation record (``level``, ``n_states``, ``change``, ``elapsed``).

    Examples
    --------
    >>> describe_record({"level": 40, "n_states": 1681, "change": 2.5e-07, "elapsed": 1.25})
    'truncation level 40: 1681 states, last change 2.50e-07, 1.2 s'
    >>> describe_record({"level": 25, "n_states": 676, "change": float("inf"), "elapsed": 0.01})
    'truncation level 25: 676 states, first level, 0.0 s'
    """
    parts = []
    level = record.get("level")
    head = "truncation" if level is None else f"truncation level {level}"
    if record.get("n_states") is not None:
        parts.append(f"{record['n_states']} states")
    elif record.get("phases") is not None:
        parts.append(f"{record['phases']} phases")
    change = record.get("change")
    if change is None or (isinstance(change, float) and not math.isfinite(change)):
        parts.append("first level")
    else:
        parts.append(f"last change {change:.2e}")
    if record.get("elapsed") is not None:
        parts.append(f"{record['elapsed']:.1f} s")
    return f"{head}: {', '.join(parts)}"


class TruncationLine:
    """A progress callback for :func:`exactq.solve`: one line, rewritten at each level.

    Parameters
    ----------
    stream : file, optional
        Where the line goes (default: standard error).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> line = TruncationLine(out)
    >>> line({"level": 10, "n_states": 121, "change": 1e-3, "elapsed": 0.5})
    >>> line.close()
    >>> out.getvalue().count("truncation level 10: 121 states")
    1
    """

    def __init__(self, stream: IO | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.width = 0

    def __call__(self, record: dict) -> None:
        text = describe_record(record)
        pad = max(self.width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def close(self) -> None:
        """Erase the line (the result is printed in its place)."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class SweepBar:
    """A progress callback for :func:`exactq.sweep`: a tqdm bar with an ETA.

    ``total`` is learnt from the first report (the points left to compute after
    resumption); failures are shown beside the bar.
    """

    def __init__(self, stream: IO | None = None, desc: str = "sweep"):
        self.stream = sys.stderr if stream is None else stream
        self.desc = desc
        self.bar: Any = None

    def __call__(self, event: dict) -> None:
        if self.bar is None:
            from tqdm import tqdm

            tqdm.monitor_interval = 0  # no monitor thread (the process pool forks)
            self.bar = tqdm(total=event["total"], file=self.stream, desc=self.desc, unit="point",
                            dynamic_ncols=True, leave=False)
        self.bar.update(event["done"] - self.bar.n)
        if event.get("failed"):
            self.bar.set_postfix(failed=event["failed"], refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def sweep_bar(enabled: bool | None = None, stream: IO | None = None) -> SweepBar | None:
    """A :class:`SweepBar` when ``enabled`` (default: when ``stream`` is a terminal), else ``None``."""
    if enabled is None:
        enabled = is_terminal(stream)
    return SweepBar(stream) if enabled else None
