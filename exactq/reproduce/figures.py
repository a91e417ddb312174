"""One save path for the reproductions' figures: legends that cover no data, integer ticks.

Every reproduction draws on :func:`new_axes` (matplotlib's object-oriented ``Figure``,
no pyplot) and writes with :func:`save`, which

* builds each legend from the entries that have finite points only (a series with
  no drawable point gets no entry);
* places it where it covers no data: matplotlib's ``best`` first, then the other
  eight positions inside the axes, then outside to the right of the axes (or of the
  figure, for a legend shared by several axes) - checked, after the layout, by
  :func:`legend_overlaps` on the display coordinates of every line segment, marker,
  scatter offset, filled band and patch of every axes in the figure;
* gives the axes declared by :func:`integer_axis` integer ticks
  (``MaxNLocator(integer=True)``);
* and returns what :func:`figure_problems` still finds (nothing, unless a legend
  cannot be placed at all), which the tests assert is empty.

Overlap is geometric: a segment overlaps when it crosses the legend's box
(Liang-Barsky clipping), a marker when its disc (radius half the marker size)
reaches into the box, a band or patch when its filled path intersects the box.
Data outside an artist's clip box (the axes) is not drawn and does not count.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["new_axes", "integer_axis", "save", "place_legends", "legend_overlaps", "figure_problems",
           "legend_entries", "DPI"]

DPI = 120
_INSIDE = ("best", "upper right", "upper left", "lower left", "lower right", "center right", "center left",
           "upper center", "lower center", "center")
_INTEGER = "_exactq_integer_axes"


def new_axes(nrows: int = 1, ncols: int = 1, *, figsize=(6, 4), squeeze: bool = True, **kwargs):
    """A ``Figure`` (no pyplot) and its axes, as ``fig.subplots`` returns them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, squeeze=squeeze, **kwargs)


def integer_axis(ax, which: str = "x") -> None:
    """Declare an axis of ``ax`` integer-valued (``"x"``, ``"y"`` or ``"xy"``): integer ticks only.

    Examples
    --------
    >>> fig, ax = new_axes()
    >>> _ = ax.plot([2, 3, 4, 5], [1.0, 0.5, 0.2, 0.1], "o-")
    >>> integer_axis(ax, "x")
    >>> _ = save(fig, None)
    >>> ticks = [t for t in ax.get_xticks() if 2 <= t <= 5]
    >>> bool(ticks) and all(float(t).is_integer() for t in ticks)
    True
    """
    from matplotlib.ticker import FixedLocator, MaxNLocator

    declared = set(getattr(ax, _INTEGER, set()))
    for axis_name in which:
        axis = ax.xaxis if axis_name == "x" else ax.yaxis
        if not isinstance(axis.get_major_locator(), FixedLocator):  # ticks set explicitly stay
            axis.set_major_locator(MaxNLocator(integer=True))
        declared.add(axis_name)
    setattr(ax, _INTEGER, declared)


# -- geometry ---------------------------------------------------------------------------------

def _finite_rows(xy: np.ndarray) -> np.ndarray:
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    return np.all(np.isfinite(xy), axis=1)


def _segments_hit(p: np.ndarray, q: np.ndarray, box) -> bool:
    """Whether any segment ``p[i] -> q[i]`` (display coordinates) meets the rectangle ``box``."""
    if len(p) == 0:
        return False
    x0, y0, x1, y1 = box
    d = q - p
    t_lo = np.zeros(len(p))
    t_hi = np.ones(len(p))
    ok = np.ones(len(p), dtype=bool)
    for dk, qk in ((-d[:, 0], p[:, 0] - x0), (d[:, 0], x1 - p[:, 0]), (-d[:, 1], p[:, 1] - y0),
                   (d[:, 1], y1 - p[:, 1])):
        parallel = dk == 0
        ok &= ~(parallel & (qk < 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(parallel, 0.0, qk / np.where(parallel, 1.0, dk))
        t_lo = np.where(~parallel & (dk < 0), np.maximum(t_lo, t), t_lo)
        t_hi = np.where(~parallel & (dk > 0), np.minimum(t_hi, t), t_hi)
    return bool(np.any(ok & (t_lo <= t_hi)))


def _discs_hit(points: np.ndarray, radius: float | np.ndarray, box) -> bool:
    if len(points) == 0:
        return False
    x0, y0, x1, y1 = box
    dx = np.maximum(np.maximum(x0 - points[:, 0], points[:, 0] - x1), 0.0)
    dy = np.maximum(np.maximum(y0 - points[:, 1], points[:, 1] - y1), 0.0)
    return bool(np.any(dx * dx + dy * dy <= np.square(radius)))


def _clip(box, artist):
    """``box`` cut to the artist's clip box (what can be drawn), or None if they do not meet."""
    x0, y0, x1, y1 = box
    if artist.get_clip_on() and artist.get_clip_box() is not None:
        c = artist.get_clip_box()
        x0, y0, x1, y1 = max(x0, c.x0), max(y0, c.y0), min(x1, c.x1), min(y1, c.y1)
    if x0 > x1 or y0 > y1:
        return None
    return (x0, y0, x1, y1)


def _marker_radius(size_points: float, dpi: float) -> float:
    return 0.5 * size_points * dpi / 72.0


def _has_marker(line) -> bool:
    m = line.get_marker()
    return m not in (None, "None", "none", "", " ") and line.get_markersize() > 0


def _has_segments(line) -> bool:
    return line.get_linestyle() not in ("None", "none", "", " ") and line.get_linewidth() > 0


def _line_display(line) -> np.ndarray:
    xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
    with np.errstate(all="ignore"):
        return line.get_transform().transform(xy) if len(xy) else xy


def _collection_offsets(coll) -> np.ndarray:
    offsets = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
    if len(offsets) == 0:
        return offsets
    with np.errstate(all="ignore"):
        return coll.get_offset_transform().transform(offsets)


def _artist_hits(artist, box, dpi: float) -> bool:
    """Whether ``artist`` has drawn data inside ``box`` (display coordinates)."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import Bbox

    if not artist.get_visible() or artist.get_alpha() == 0:
        return False
    box = _clip(box, artist)
    if box is None:
        return False
    if isinstance(artist, Line2D):
        xy = _line_display(artist)
        fin = _finite_rows(xy)
        if _has_segments(artist):
            both = fin[:-1] & fin[1:]
            if _segments_hit(xy[:-1][both], xy[1:][both], box):
                return True
        if _has_marker(artist):
            pad = _marker_radius(artist.get_markersize(), dpi) + 0.5 * artist.get_markeredgewidth() * dpi / 72
            return _discs_hit(xy[fin], pad, box)
        return False
    if isinstance(artist, PathCollection):  # scatter: markers at offsets
        pts = _collection_offsets(artist)
        fin = _finite_rows(pts)
        sizes = np.asarray(artist.get_sizes(), dtype=float).reshape(-1)
        sizes = np.resize(sizes if len(sizes) else np.array([36.0]), len(pts))  # sizes cycle, as drawn
        return _discs_hit(pts[fin], _marker_radius(1.0, dpi) * np.sqrt(sizes[fin]), box)
    if isinstance(artist, LineCollection):
        trans = artist.get_transform()
        for seg in artist.get_segments():
            xy = trans.transform(np.asarray(seg, dtype=float)) if len(seg) else np.zeros((0, 2))
            fin = _finite_rows(xy)
            both = fin[:-1] & fin[1:]
            if _segments_hit(xy[:-1][both], xy[1:][both], box):
                return True
        return False
    if isinstance(artist, PolyCollection) or (hasattr(artist, "get_paths") and not isinstance(artist, Patch)):
        trans = artist.get_transform()
        bbox = Bbox.from_extents(*box)
        for path in artist.get_paths():
            disp = trans.transform_path(path)
            if len(disp.vertices) and disp.intersects_bbox(bbox, filled=True):
                return True
        return False
    if isinstance(artist, Patch):
        disp = artist.get_transform().transform_path(artist.get_path())
        return bool(len(disp.vertices)) and disp.intersects_bbox(Bbox.from_extents(*box), filled=artist.get_fill())
    return False


def _data_artists(fig) -> list:
    out = []
    for ax in fig.axes:
        out.extend(ax.lines)
        out.extend(ax.collections)
        out.extend(p for p in ax.patches)
    return out


def _has_points(artist, dpi: float = 100.0) -> bool:
    """Whether an artist draws at least one point inside its clip box (a legend entry needs one).

    Non-finite values draw nothing, and neither do values a log axis clips far outside the axes.
    """
    box = (-math.inf, -math.inf, math.inf, math.inf)
    return _artist_hits(artist, box, dpi) if artist.get_visible() else False


def legend_entries(axes: Iterable) -> tuple[list, list[str]]:
    """The labelled artists of ``axes`` that have finite points, one per label (first wins)."""
    handles, labels, seen = [], [], set()
    for ax in axes:
        hs, ls = ax.get_legend_handles_labels()
        for h, lab in zip(hs, ls):
            if lab in seen or not _has_points(h, ax.figure.dpi):
                continue
            seen.add(lab)
            handles.append(h)
            labels.append(lab)
    return handles, labels


def _legends(fig) -> list:
    out = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return out + list(fig.legends)


def _renderer(fig, draw: bool = False):
    """An Agg renderer for ``fig``; without ``draw`` nothing is drawn (legend boxes, the layout and the
    view limits are computed on demand from the renderer alone, which is all the checks need)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    if draw:
        canvas.draw()
    return canvas.get_renderer()


def legend_overlaps(legend, fig=None, renderer=None) -> list[str]:
    """The artists (by label, or type) of ``fig`` whose drawn data the legend's box covers.

    Call after the figure is laid out (nothing is drawn: the box is computed from the renderer).

    Examples
    --------
    A legend in the upper left of a line through the upper left corner covers it:

    >>> fig, ax = new_axes()
    >>> _ = ax.plot([0, 1], [1, 0], label="falling")
    >>> leg = ax.legend(loc="upper left")
    >>> legend_overlaps(leg, fig)
    ['falling']
    >>> leg.set_loc("upper right")
    >>> legend_overlaps(leg, fig)
    []
    """
    fig = fig if fig is not None else legend.get_figure(root=True)
    renderer = renderer or _renderer(fig, draw=False)
    b = legend.get_window_extent(renderer)
    box = (b.x0, b.y0, b.x1, b.y1)
    hits = []
    for artist in _data_artists(fig):
        if _artist_hits(artist, box, fig.dpi):
            label = artist.get_label()
            hits.append(label if label and not label.startswith("_") else type(artist).__name__)
    return hits


def _legend_kw(legend_kw: dict | None, n_entries: int) -> dict:
    kw = {"fontsize": 8 if n_entries > 4 else 9, "framealpha": 0.9}
    kw.update(legend_kw or {})
    return kw


def place_legends(fig, *, shared: bool = False, legend_kw: dict | None = None, layout: bool = True) -> dict:
    """Legends of ``fig`` placed where they cover no data (module docstring); returns where each went.

    ``shared=True`` draws one legend for all axes (their entries merged by label) at the
    right edge of a figure widened to hold it; otherwise one per axes that has entries,
    at the first of matplotlib's ``best`` and the nine fixed positions that covers no
    data, else outside the axes on the right (the figure widened by the legend's width,
    so that the axes keep their size). Nothing is drawn: the boxes come from the
    renderer, and the layout (``tight_layout``) is computed once, and again only if a
    legend went outside.
    """
    placements: dict = {}
    for ax in fig.axes:
        old = ax.get_legend()
        if old is not None:
            old.remove()
    for leg in list(fig.legends):
        leg.remove()
    if shared:
        handles, labels = legend_entries(fig.axes)
        if layout:
            fig.tight_layout()
        if handles:
            leg = fig.legend(handles, labels, loc="center right", bbox_to_anchor=(1.0, 0.5),
                             **_legend_kw(legend_kw, len(labels)))
            width = leg.get_window_extent(_renderer(fig)).width / fig.dpi + 0.15
            old_width = fig.get_figwidth()
            fig.set_size_inches(old_width + width, fig.get_figheight())
            if layout:
                fig.tight_layout(rect=(0.0, 0.0, old_width / (old_width + width), 1.0))
            placements["figure"] = "outside right"
        return placements
    if layout:
        fig.tight_layout()
    renderer = _renderer(fig)
    outside = False
    for i, ax in enumerate(fig.axes):
        handles, labels = legend_entries([ax])
        if not handles:
            continue
        kw = _legend_kw(legend_kw, len(labels))
        name = ax.get_title() or f"axes {i}"
        for loc in _INSIDE:
            leg = ax.legend(handles, labels, loc=loc, **kw)
            if not legend_overlaps(leg, fig, renderer):
                placements[name] = loc
                break
            leg.remove()
        else:
            leg = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)
            width = leg.get_window_extent(renderer).width / fig.dpi
            fig.set_size_inches(fig.get_figwidth() + width + 0.2, fig.get_figheight())
            placements[name] = "outside right"
            outside = True
    if outside and layout:
        fig.tight_layout()
    return placements


def figure_problems(fig) -> list[str]:
    """What is wrong with a laid-out figure: legends over data, entries without points, fractional ticks.

    Examples
    --------
    >>> fig, ax = new_axes()
    >>> _ = ax.plot([0, 1], [1, 0], label="falling")
    >>> _ = ax.plot([0, 1], [float("nan")] * 2, label="empty")
    >>> _ = ax.legend(loc="upper left")
    >>> figure_problems(fig)
    ["legend of axes 0 covers 'falling'", "legend of axes 0 lists 'empty', which has no finite point"]
    """
    renderer = _renderer(fig, draw=False)
    problems = []
    for i, ax in enumerate(fig.axes):
        name = ax.get_title() or f"axes {i}"
        leg = ax.get_legend()
        if leg is not None:
            problems += [f"legend of {name} covers {h!r}" for h in legend_overlaps(leg, fig, renderer)]
            problems += _empty_entries(leg, [ax], name)
        for axis_name in sorted(getattr(ax, _INTEGER, ())):
            axis = ax.xaxis if axis_name == "x" else ax.yaxis
            lo, hi = sorted(axis.get_view_interval())
            ticks = [t for t in axis.get_majorticklocs() if lo - 1e-9 <= t <= hi + 1e-9]
            bad = [t for t in ticks if not float(t).is_integer()]
            if bad:
                problems.append(f"{name}: integer {axis_name} axis has ticks {bad}")
    for leg in fig.legends:
        problems += [f"figure legend covers {h!r}" for h in legend_overlaps(leg, fig, renderer)]
        problems += _empty_entries(leg, fig.axes, "the figure")
    return problems


def _empty_entries(legend, axes: Sequence, name: str) -> list[str]:
    labelled: dict[str, list] = {}
    for ax in axes:
        for artist in list(ax.lines) + list(ax.collections) + list(ax.patches):
            labelled.setdefault(artist.get_label(), []).append(artist)
    out = []
    for text in legend.get_texts():
        label = text.get_text()
        artists = labelled.get(label, [])
        if not any(_has_points(a, legend.figure.dpi) for a in artists):
            out.append(f"legend of {name} lists {label!r}, which has no finite point")
    return out


def save(fig, path: str | Path | None, *, shared_legend: bool = False, legend_kw: dict | None = None,
         dpi: int = DPI) -> list[str]:
    """Place the legends, lay out, check and (if ``path``) write ``fig``; return the problems left.

    The returned list is :func:`figure_problems` after placement: empty unless a legend
    could not be placed anywhere (the tests require it empty for every reproduction).
    """
    place_legends(fig, shared=shared_legend, legend_kw=legend_kw)
    problems = figure_problems(fig)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return problems


def finite_or_nan(values: Iterable[Any]) -> list[float]:
    """``values`` as floats, with None, inf and non-numbers as NaN (matplotlib then draws no point).

    >>> finite_or_nan([1, None, float("inf"), 2.5])
    [1.0, nan, nan, 2.5]
    """
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = math.nan
        out.append(f if math.isfinite(f) else math.nan)
    return out
