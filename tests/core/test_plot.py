"""exactq plot: lines per group, lower/upper as bands, files, and one-line errors."""

from __future__ import annotations

import pytest

import exactq
from exactq.cli import main
from exactq.errors import ModelError

pytest.importorskip("matplotlib")
from exactq.plotting import draw_series, plot_table  # noqa: E402


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """JSQ with two identical servers: the bounds (a band) and the compensation series (a line)."""
    out = tmp_path_factory.mktemp("plot") / "jsq.csv"
    exactq.sweep("jsq", {"service_rates": "1,1"}, {"arrival_rate": "1.0:1.8:5", "method": "bounds|compensation"},
                 tol=0.05, backend="serial", out=out)
    return out


def test_one_line_per_hue_and_a_band_for_the_bounds(table):
    fig = plot_table(table, x="arrival_rate", hue="method")
    [ax] = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"bounds", "compensation"}
    assert len(ax.collections) == 1  # only the bounds have lower/upper
    rows = exactq.sweep("jsq", {"service_rates": "1,1"}, {"arrival_rate": "1.0:1.8:5"}, method="compensation",
                        backend="serial", as_frame=False)
    x, y = lines["compensation"].get_data()
    assert list(x) == [r["arrival_rate"] for r in rows] and list(y) == [r["value"] for r in rows]
    # the band lies around the bounds' line, and contains the compensation value (an independent method)
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() <= min(y) and band[:, 1].max() >= max(y)
    assert ax.get_ylabel() == "mean_number" and ax.get_xlabel() == "arrival_rate"


def test_other_varying_parameters_make_their_own_lines(tmp_path):
    rows = exactq.sweep("mm1", {}, {"service_rate": "1|2", "arrival_rate": "0.2:0.8:4"}, backend="serial",
                        as_frame=False)
    fig = plot_table(rows, x="arrival_rate", logy=True)
    ax = fig.axes[0]
    assert sorted(line.get_label() for line in ax.get_lines()) == ["service_rate=1", "service_rate=2"]
    assert ax.get_yscale() == "log"
    for line in ax.get_lines():
        mu = float(line.get_label().split("=")[1])
        x, y = line.get_data()
        assert all(abs(v - (a / mu) / (1 - a / mu)) < 1e-12 for a, v in zip(x, y))  # M/M/1: rho / (1 - rho)


def test_vector_components_and_failed_rows(tmp_path):
    rows = exactq.sweep("jsq", {"service_rates": "1,2"}, {"arrival_rate": "1|2|4"}, measure="mean_queue_lengths",
                        backend="serial", as_frame=False)
    assert rows[-1]["status"] == "error"
    fig = plot_table(rows, x="arrival_rate", y="value_2")
    x, y = fig.axes[0].get_lines()[0].get_data()
    assert list(x) == [1, 2] and list(y) == [r["value"][1] for r in rows[:2]]  # the failed point is left out
    with pytest.raises(ModelError, match="a vector measure: use value_1, value_2"):
        plot_table(rows, x="arrival_rate", y="value")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<?xml")])
def test_files_and_the_command_line(table, tmp_path, capsys, suffix, magic):
    out = tmp_path / f"fig{suffix}"
    code = main(["plot", str(table), "--x", "arrival_rate", "--hue", "method", "--logy", "--out", str(out)])
    assert code == 0 and capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes().startswith(magic)


def test_bad_input_is_one_line_with_status_2(table, tmp_path, capsys):
    for argv, words in [
        (["--x", "arrival"], "--x arrival: no such column"),
        (["--x", "arrival_rate", "--hue", "colour"], "--hue colour: no such column"),
        (["--x", "arrival_rate", "--out", str(tmp_path / "f.gif")], "--out must end in .png, .pdf, .svg"),
    ]:
        if "--out" not in argv:
            argv = argv + ["--out", str(tmp_path / "f.png")]
        code = main(["plot", str(table), *argv])
        err = capsys.readouterr().err
        assert code == 2 and words in err and err.count("\n") == 1
    code = main(["plot", str(tmp_path / "missing.csv"), "--x", "a", "--out", str(tmp_path / "f.png")])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    with pytest.raises(ModelError, match="must be > 0"):
        plot_table([{"x": 0.0, "value": 1.0}, {"x": 1.0, "value": 2.0}], x="x", logx=True)


def test_draw_series_for_reproductions():
    from exactq.reproduce import new_figure

    ax = new_figure().add_subplot()
    line = draw_series(ax, [3, 1, 2], [30, 10, 20], lower=[29, 9, None], upper=[31, 11, 21], label="a")
    assert list(line.get_xdata()) == [1, 2, 3] and list(line.get_ydata()) == [10, 20, 30]
    assert len(ax.collections) == 1
