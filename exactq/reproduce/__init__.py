"""Paper reproductions for ``exactq reproduce NAME``: one module per seed paper.

A reproduction is a function ``fn(out_dir: pathlib.Path | None) -> str`` that computes
a seed paper's table(s) with exactq, returns them as text, and, when ``out_dir`` is
given, writes the table as JSON and (if matplotlib is installed, the ``plot`` extra)
the figure(s) into it. Register with :func:`register_reproduction`. The modules of this
package are imported only when a reproduction is listed or run, never by the model
catalogue. Figures are drawn on :func:`new_figure` (matplotlib's object-oriented
``Figure``, which saves without pyplot or a global backend switch).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from ..errors import ModelError

__all__ = ["register_reproduction", "reproduce", "reproduction_names", "have_matplotlib", "new_figure"]

_REPRODUCTIONS: dict[str, tuple[Callable[[Path | None], str], str]] = {}


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


def reproduce(name: str, out_dir: str | Path | None = None, full: bool = False) -> str:
    """Run reproduction ``name``; return its text tables (files go to ``out_dir``).

    ``full`` asks for the paper-scale run where a reproduction has one (longer, tighter
    tolerances); reproductions without a ``full`` parameter ignore it.
    """
    names = reproduction_names()
    if name not in names:
        raise ModelError(f"unknown reproduction {name!r}; valid: {', '.join(names) or '(none)'}")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    fn = _REPRODUCTIONS[name][0]
    if "full" in inspect.signature(fn).parameters:
        return fn(out, full=full)
    return fn(out)


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
