"""Figures without collisions: the overlap test itself, legend placement, empty entries, integer ticks,
and every reproduction's figures rendered at the smoke scale."""

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from exactq import reproduce as rep  # noqa: E402
from exactq.reproduce import figures  # noqa: E402
from exactq.reproduce.figures import (  # noqa: E402
    figure_problems,
    integer_axis,
    legend_overlaps,
    new_axes,
    place_legends,
    save,
)


def _long_legend(ax, n=4):
    for i in range(n):
        ax.plot([], [], label=f"a rather long legend entry number {i}")


@pytest.mark.parametrize("kind", ["segment", "markers", "band", "scatter"])
def test_a_legend_over_data_is_detected(kind):
    fig, ax = new_axes()
    if kind == "segment":  # two vertices far outside the box; only the segment crosses it
        ax.plot([0, 1], [0, 1], label="diagonal")
    elif kind == "markers":
        ax.plot([0.5], [0.5], "o", label="one point")
        ax.plot([0, 1], [0, 1], "o", alpha=0)  # the axes' extent
    elif kind == "band":
        ax.fill_between([0, 1], [0.2, 0.2], [0.8, 0.8], label="band")
        ax.plot([0, 1], [0, 1.6], alpha=0)  # room above the band
    else:
        ax.scatter([0.5, 0, 1], [0.5, 0, 1], label="cloud")
    leg = ax.legend(loc="center")
    hits = legend_overlaps(leg, fig)
    assert hits and hits[0] in ("diagonal", "one point", "band", "cloud")
    leg.set_loc("upper left")
    if kind == "band":
        assert legend_overlaps(leg, fig) == []  # above the band
    if kind == "segment":
        assert legend_overlaps(leg, fig) == []


def test_a_line_near_but_outside_the_box_is_not_an_overlap():
    fig, ax = new_axes()
    ax.plot([0, 1], [0.0, 0.0], label="floor")
    ax.plot([0, 1], [1.0, 1.0], alpha=0)
    leg = ax.legend(loc="upper right")
    assert legend_overlaps(leg, fig) == []


def test_placement_moves_a_colliding_legend_inside_when_it_can():
    fig, ax = new_axes()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x**3, label="cubic")  # the upper left is empty
    ax.plot(x, x, label="line")
    ax.legend(loc="center")
    assert legend_overlaps(ax.get_legend(), fig)
    where = place_legends(fig)
    assert figure_problems(fig) == [] and list(where.values())[0] != "outside right"


def test_placement_goes_outside_when_data_fills_the_axes():
    fig, ax = new_axes(figsize=(5, 3))
    ax.fill_between([0, 1], [0, 0], [1, 1], alpha=0.3, label="everywhere")
    _long_legend(ax)
    width = fig.get_figwidth()
    problems = save(fig, None)
    assert problems == [] and ax.get_legend() is not None
    assert fig.get_figwidth() > width  # widened for the legend, the axes keep their size


def test_entries_without_finite_points_are_dropped_and_reported():
    fig, ax = new_axes()
    ax.plot([1, 2, 3], [3, 1, 2], "o-", label="data")
    ax.plot([1, 2, 3], [math.nan] * 3, "x", label="no points")
    ax.semilogy([1, 2], [0.0, -1.0], label="nothing on a log axis")
    ax.legend(loc="upper center")
    assert any("no finite point" in p and "no points" in p for p in figure_problems(fig))
    assert save(fig, None) == []
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["data"]


def test_integer_axes_get_integer_ticks_and_fractional_ones_are_reported():
    fig, ax = new_axes()
    ax.plot([2, 3, 4, 5], [1, 4, 9, 16], "o-", label="n^2")
    integer_axis(ax, "x")
    assert save(fig, None) == []
    ticks = [t for t in ax.get_xticks() if 2 <= t <= 5]
    assert ticks and all(float(t).is_integer() for t in ticks)
    ax.set_xticks([2, 2.5, 3])
    assert any("integer x axis" in p for p in figure_problems(fig))


def test_a_shared_legend_sits_outside_all_panels():
    fig, axes = new_axes(1, 2, figsize=(8, 3))
    for ax in axes:
        ax.fill_between([0, 1], [0, 0], [1, 1], label="full")
        ax.plot([0, 1], [0.5, 0.5], label="middle")
    assert save(fig, None, shared_legend=True) == []
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == ["full", "middle"]


def _smoke_names():
    return sorted(rep.reproduction_names())


@pytest.mark.parametrize("name", _smoke_names())
def test_every_reproduction_figure_is_free_of_collisions(name, tmp_path, monkeypatch):
    """Each reproduction at the smoke scale (seconds): every figure written, no legend over data, no empty
    entry, integer ticks where declared."""
    import inspect

    fn = rep._REPRODUCTIONS[name][0]
    if "scale" not in inspect.signature(fn).parameters:
        pytest.skip(f"reproduction {name} has no smoke scale")
    seen = []
    real_save = figures.save

    def checked_save(fig, path, **kw):
        problems = real_save(fig, path, **kw)
        seen.append((path, problems + figure_problems(fig)))
        return problems

    monkeypatch.setattr(figures, "save", checked_save)
    rep.reproduce(name, tmp_path, scale="smoke")
    assert seen, f"{name} drew no figure through figures.save"
    for path, problems in seen:
        assert problems == [], f"{path.name}: {problems}"
        assert path.exists() and path.stat().st_size > 0
    written = sorted(p.name for p in tmp_path.glob("*.png"))
    assert written == sorted(p.name for p, _ in seen)  # no figure bypasses the shared save path
