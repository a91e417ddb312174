"""The reproduction registry and the ``exactq reproduce`` command's plumbing."""

import pytest

from exactq import reproduce as rep
from exactq.cli import main
from exactq.errors import ModelError


@pytest.fixture
def dummy():
    calls = []

    @rep.register_reproduction("dummy-full", "test: records its arguments")
    def with_full(out_dir, full=False):
        calls.append(("full", out_dir, full))
        return "ok full"

    @rep.register_reproduction("dummy-plain", "test: no full parameter")
    def plain(out_dir):
        calls.append(("plain", out_dir))
        return "ok plain"

    yield calls
    rep._REPRODUCTIONS.pop("dummy-full")
    rep._REPRODUCTIONS.pop("dummy-plain")


def test_full_is_passed_only_where_accepted(dummy, tmp_path):
    assert rep.reproduce("dummy-full", tmp_path / "a", full=True) == "ok full"
    assert rep.reproduce("dummy-plain", None, full=True) == "ok plain"
    assert dummy == [("full", tmp_path / "a", True), ("plain", None)]
    assert (tmp_path / "a").is_dir()


def test_cli_full_flag_and_listing(dummy, capsys):
    assert main(["reproduce", "dummy-full", "--full"]) in (0, None)
    assert "ok full" in capsys.readouterr().out and dummy[-1][2] is True
    assert main(["reproduce"]) in (0, None)
    listing = capsys.readouterr().out
    for name in ("shortest-queue", "power-of-d", "speed-aware", "ps-routing", "dummy-plain"):
        assert name in listing


def test_unknown_reproduction_is_one_line(capsys):
    with pytest.raises(ModelError, match="unknown reproduction"):
        rep.reproduce("no-such-paper")
    assert main(["reproduce", "no-such-paper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown reproduction" in err[0]


def test_shortest_queue_reproduction(tmp_path):
    """The whole reproduction runs (smoke scale: a few points per table) and its independent columns agree."""
    import json

    text = rep.reproduce("shortest-queue", tmp_path, scale="smoke")
    assert "Asymmetric JSQ" in text and "rho = 4" in text
    data = json.loads((tmp_path / "shortest_queue.json").read_text())
    for row in data["jsq"]:
        assert row["EW_compensation"] == pytest.approx(row["EW_ctmc"], rel=1e-8)
        if row.get("EW_lower") is not None:
            assert row["EW_lower"] <= row["EW_compensation"] <= row["EW_upper"]
    for row in data["asymmetric_jsq"]:
        for ties in ("random", "fastest"):
            assert row[f"EW_{ties}_comp"] == pytest.approx(row[f"EW_{ties}_ctmc"], rel=1e-8)
    for row in data["sed"]:
        for r in (1, 2, 3):
            assert row[f"EW_r{r}"] == pytest.approx(row[f"ctmc_r{r}"], rel=1e-8)
            assert row[f"comp_r{r}"] == pytest.approx(row[f"EW_r{r}"], rel=1e-9)
    for rho, d in data["marginals_K20"].items():
        assert sum(d["exact"]) == pytest.approx(1, abs=1e-12)
        assert max(abs(a - b) for a, b in zip(d["exact"], d["asymptotic"])) < 1e-6
