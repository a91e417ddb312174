"""Figures of sweep tables: one line per group, bounds drawn as bands (the ``plot`` extra).

:func:`plot_table` draws a table (a file written by :func:`exactq.sweep`, a pandas
``DataFrame`` or a list of row dicts) on a matplotlib ``Figure`` from
:func:`exactq.reproduce.new_figure` (no pyplot, no global backend switch);
:func:`plot_file` is ``exactq plot``. :func:`draw_series` draws one line with its
band on any ``Axes``, for the reproductions' own figures.

Rows whose ``status`` is not ``ok`` are left out, and so are rows whose ``x`` or ``y``
is not a finite number (NaN, inf, empty), each with a warning that counts them; a
point left out of a line is a gap in it (the line is broken there, not drawn across).
The lines are the groups of rows that share ``hue`` and every other parameter column
that varies in the table (so a two-parameter sweep plotted against one gives one line
per value of the other), each sorted by ``x``. When ``y`` is ``value`` (or a
component ``value_i``) and the table has ``lower``/``upper`` (``lower_i``/``upper_i``),
they are drawn as a shaded band. A table with two columns of one name is refused (which
one would be drawn is ambiguous).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Sequence

from .errors import ModelError

__all__ = ["plot_table", "plot_file", "draw_series", "FIGURE_FORMATS"]

FIGURE_FORMATS = (".png", ".pdf", ".svg")
#: columns of a sweep table that are not parameters
_RESULT_COLUMNS = {"measure", "method", "tol", "value", "lower", "upper", "error_estimate", "n_states", "truncation",
                   "seconds", "method_used", "status", "message"}


def _need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ModelError('plotting needs matplotlib (pip install "exactq[plot]")') from None


def _rows(table: Any) -> tuple[list[dict], str]:
    """The rows of ``table`` with vector values spread over component columns, and its name."""
    from .sweep import _flat, read_table

    if isinstance(table, (str, Path)):
        name = str(table)
        if not Path(table).exists():
            raise ModelError(f"table {name!r} does not exist")
        rows = read_table(table)
    elif hasattr(table, "to_dict") and hasattr(table, "columns"):
        name = "the table"
        cols = [str(c) for c in table.columns]
        if len(set(cols)) != len(cols):
            dup = next(c for c in cols if cols.count(c) > 1)
            raise ModelError(f"the table has two columns named {dup!r}; which one to draw is ambiguous")
        frame = table.astype(object).where(table.notna(), None)
        rows = frame.to_dict("records")
    else:
        name = "the table"
        rows = [dict(r) for r in table]
    return [_flat(r) for r in rows], name


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def draw_series(ax, x: Sequence[float], y: Sequence[float], lower: Sequence[float] | None = None,
                upper: Sequence[float] | None = None, *, label: str | None = None, marker: str | None = None,
                **line_kw):
    """Draw one line and, when ``lower`` and ``upper`` are given, its band.

    Points are sorted by ``x``; a ``y`` that is not a finite number breaks the line
    there (matplotlib draws no segment to a NaN). A band is drawn where both bounds are
    finite numbers. Returns the line (a matplotlib ``Line2D``).

    Examples
    --------
    >>> from exactq.reproduce import new_figure
    >>> ax = new_figure().add_subplot()
    >>> line = draw_series(ax, [2, 1], [4.0, 1.0], lower=[3.5, 0.5], upper=[4.5, 1.5], label="x squared")
    >>> line.get_xdata().tolist(), line.get_ydata().tolist(), len(ax.collections)
    ([1, 2], [1.0, 4.0], 1)
    """
    order = sorted(range(len(x)), key=lambda i: x[i])
    xs = [x[i] for i in order]
    ys = [y[i] if _is_number(y[i]) else math.nan for i in order]  # a missing value is a gap, not a join
    (line,) = ax.plot(xs, ys, label=label, marker=marker, **line_kw)
    if lower is not None and upper is not None:
        lo, hi = [lower[i] for i in order], [upper[i] for i in order]
        keep = [i for i in range(len(xs)) if _is_number(lo[i]) and _is_number(hi[i])]
        if keep:
            ax.fill_between([xs[i] for i in keep], [lo[i] for i in keep], [hi[i] for i in keep],
                            color=line.get_color(), alpha=0.25, linewidth=0)
    return line


def plot_table(table: Any, *, x: str, y: str = "value", hue: str | None = None, logx: bool = False,
               logy: bool = False, title: str | None = None, figure=None):
    """Draw a sweep table: ``y`` against ``x``, one line per group, bounds as bands.

    Parameters
    ----------
    table : str, Path, pandas.DataFrame or list of dict
        A sweep table (module docstring).
    x, y : str
        Columns for the axes (``y`` default ``value``; ``value_2`` for the second
        component of a vector measure).
    hue : str, optional
        One line per value of this column (``method``, a parameter).
    logx, logy : bool
        Logarithmic axes.
    title : str, optional
    figure : matplotlib.figure.Figure, optional
        Draw on this figure (default: a new one from :func:`exactq.reproduce.new_figure`).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ModelError
        matplotlib missing, an unknown column, or no plottable row.

    Examples
    --------
    M/M/1 with service rate 1 holds ``rho / (1 - rho)`` jobs on average:

    >>> import exactq
    >>> rows = exactq.sweep("mm1", {"service_rate": 1}, {"arrival_rate": "0.2:0.8:4"}, backend="serial")
    >>> fig = plot_table(rows, x="arrival_rate")
    >>> x, y = fig.axes[0].get_lines()[0].get_data()
    >>> all(abs(v - a / (1 - a)) < 1e-12 for a, v in zip(x, y))
    True
    """
    _need_matplotlib()
    rows, name = _rows(table)
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    for what, col in (("x", x), ("y", y), ("hue", hue)):
        if col is not None and col not in columns:
            hint = ""
            if col == "value" and "value_1" in columns:
                hint = " (a vector measure: use value_1, value_2, ...)"
            raise ModelError(f"--{what} {col}: no such column in {name}{hint}; columns: {', '.join(columns)}")
    good = [r for r in rows if r.get("status", "ok") == "ok" and _is_number(r.get(x))]
    ok = [r for r in good if _is_number(r.get(y))]
    failed = sum(1 for r in rows if r.get("status", "ok") != "ok")
    no_x = len(rows) - failed - len(good)
    no_y = len(good) - len(ok)
    if not ok:
        hint = " (a vector measure: use value_1, value_2, ...)" if y == "value" and "value_1" in columns else ""
        raise ModelError(f"{name} has no row with status ok and numbers in {x} and {y}{hint}")
    if failed:
        warnings.warn(f"{name}: {failed} row{'s' * (failed != 1)} whose status is not ok left out", UserWarning,
                      stacklevel=2)
    for count, col, what in ((no_x, x, "x"), (no_y, y, "y")):
        if count:
            warnings.warn(f"{name}: {count} row{'s' * (count != 1)} with status ok left out: {what} ({col}) is not a "
                          "finite number (NaN, inf or empty)" + ("; the lines break there" if what == "y" else ""),
                          UserWarning, stacklevel=2)
    if logx and any(r[x] <= 0 for r in ok):
        raise ModelError(f"--logx: {x} must be > 0 in every row")
    if logy and any(r[y] <= 0 for r in ok):
        raise ModelError(f"--logy: {y} must be > 0 in every row")
    # group by hue and by every other parameter column that varies
    params = [c for c in columns if c not in _RESULT_COLUMNS and c not in (x, y)
              and not (c.rpartition("_")[0] in ("value", "lower", "upper") and c.rpartition("_")[2].isdigit())]
    varying = [c for c in params if c != hue and len({repr(r.get(c)) for r in ok}) > 1]
    keys = ([hue] if hue else []) + varying
    groups: dict = {}
    for r in ok:
        groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    for r in good:  # a row without a finite y is a gap in its line (drawn as NaN)
        if not _is_number(r.get(y)) and tuple(r.get(k) for k in keys) in groups:
            groups[tuple(r.get(k) for k in keys)].append(r)
    if y == "value" or y.startswith("value_"):
        suffix = y[len("value"):]
        lo_col, hi_col = f"lower{suffix}", f"upper{suffix}"
    else:
        lo_col = hi_col = None
    if figure is None:
        from .reproduce import new_figure

        figure = new_figure(figsize=(6.4, 4.4), layout="constrained")
    ax = figure.add_subplot()
    few = max(len(g) for g in groups.values()) <= 25
    for key in sorted(groups, key=lambda k: tuple(repr(v) for v in k)):
        g = groups[key]
        label = ", ".join(f"{k}={_label(v)}" if k != hue or varying else _label(v) for k, v in zip(keys, key)) \
            or None
        lower = [r.get(lo_col) for r in g] if lo_col and any(_is_number(r.get(lo_col)) for r in g) else None
        upper = [r.get(hi_col) for r in g] if hi_col and any(_is_number(r.get(hi_col)) for r in g) else None
        draw_series(ax, [r[x] for r in g], [r[y] for r in g], lower, upper, label=label,
                    marker="o" if few else None, markersize=3)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    measures = {r.get("measure") for r in ok if r.get("measure")}
    ylabel = y if not (len(measures) == 1 and (y == "value" or y.startswith("value_"))) else \
        f"{measures.pop()}{y[len('value'):]}"
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if keys:
        ax.legend(title=hue if hue and not varying else None, fontsize="small")
    ax.grid(True, alpha=0.3)
    return figure


def _label(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def plot_file(table: Any, out: str | Path, **kwargs) -> str:
    """Draw ``table`` with :func:`plot_table` and save it to ``out`` (.png, .pdf or .svg); return the path."""
    out = Path(out)
    if out.suffix.lower() not in FIGURE_FORMATS:
        raise ModelError(f"--out must end in {', '.join(FIGURE_FORMATS)}; got {str(out)!r}")
    fig = plot_table(table, **kwargs)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    return str(out)
