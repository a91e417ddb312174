"""Paper reproductions for ``exactq reproduce NAME``: one module per seed paper.

A reproduction is a function ``fn(out_dir: pathlib.Path | None, *, scale="default",
progress=None) -> str`` that computes a seed paper's table(s) with exactq, returns them
as text, and, when ``out_dir`` is given, writes the table as JSON and (if matplotlib is
installed, the ``plot`` extra) the figure(s) into it. Register with
:func:`register_reproduction`. The modules of this package are imported only when a
reproduction is listed or run, never by the model catalogue.

Scales: ``default`` (minutes at most on a laptop core), ``full`` (the paper-scale run,
``--full``) and ``smoke`` (every table and figure at a tiny size, in seconds: for the
tests and for checking an installation; its numbers are not the paper's).

Progress: ``progress`` is a callback for :mod:`exactq.progress` job events; each
reproduction plans its tables as stages of weighted points (a :class:`~exactq.progress.Job`)
before computing them, so the total and the ETA are known from the first point.

Figures are drawn on :func:`exactq.reproduce.figures.new_axes` (matplotlib's
object-oriented ``Figure``, no pyplot or global backend switch) and written by
:func:`exactq.reproduce.figures.save`, which places legends where they cover no data.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from ..errors import ModelError

__all__ = ["register_reproduction", "reproduce", "reproduction_names", "have_matplotlib", "new_figure", "SCALES"]

_REPRODUCTIONS: dict[str, tuple[Callable[..., str], str]] = {}
SCALES = ("smoke", "default", "full")


def register_reproduction(name: str, doc: str):
    """Decorator registering ``fn(out_dir) -> str`` as reproduction ``name``."""

    def deco(fn):
        _REPRODUCTIONS[name] = (fn, doc)
        return fn

    return deco


def _load() -> None:
    """Import every reproduction module of this package (and the catalogue, which they use)."""
    from ..catalogue import _load as load_catalogue, import_all

    load_catalogue()
    import_all(__name__, __path__)


def reproduction_names() -> dict[str, str]:
    _load()
    return {k: v[1] for k, v in sorted(_REPRODUCTIONS.items())}


def reproduce(name: str, out_dir: str | Path | None = None, full: bool = False, *,
              scale: str | None = None, progress: Callable[[dict], None] | None = None) -> str:
    """Run reproduction ``name``; return its text tables (files go to ``out_dir``).

    Parameters
    ----------
    name : str
        One of :func:`reproduction_names`.
    out_dir : str or Path, optional
        Where the JSON tables and figures go (created if needed).
    full : bool
        The paper-scale run (``scale="full"``), where a reproduction has one.
    scale : {"smoke", "default", "full"}, optional
        Overrides ``full`` (module docstring); reproductions without scales ignore it.
    progress : callable, optional
        Receives :mod:`exactq.progress` job events (per table and per point).
    """
    names = reproduction_names()
    if name not in names:
        raise ModelError(f"unknown reproduction {name!r}; valid: {', '.join(names) or '(none)'}")
    scale = scale if scale is not None else ("full" if full else "default")
    if scale not in SCALES:
        raise ModelError(f"scale must be one of {', '.join(SCALES)}; got {scale!r}")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    fn = _REPRODUCTIONS[name][0]
    params = inspect.signature(fn).parameters
    kwargs: dict = {}
    if "scale" in params:
        kwargs["scale"] = scale
    elif "full" in params:
        kwargs["full"] = scale == "full"
    if "progress" in params:
        return fn(out, progress=progress, **kwargs)
    from ..progress import Job  # a reproduction that reports nothing itself: one point for the whole run

    job = Job(name, progress)
    for _ in job.stage(name, [1.0]).each([name]):
        text = fn(out, **kwargs)
    job.close()
    return text


def format_table(rows: list[dict], cols: list[str], *, width: int, digits: int) -> str:
    """The rows as a fixed-width text table: floats in ``.{digits}g``, anything else as ``str``.

    >>> print(format_table([{"x": 0.5, "name": "a"}], ["x", "name"], width=6, digits=3))
         x    name
       0.5       a
    """
    lines = ["  ".join(f"{c:>{width}}" for c in cols)]
    for r in rows:
        lines.append("  ".join(f"{v:>{width}.{digits}g}" if isinstance(v, float) else f"{v!s:>{width}}"
                               for v in (r.get(c) for c in cols)))
    return "\n".join(lines)


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def new_figure(**kwargs):
    """A matplotlib ``Figure`` that can ``savefig`` without pyplot (no global backend switch)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)
