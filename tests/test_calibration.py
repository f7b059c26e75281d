"""Calibration on the labelled set (antiloop.calibration and `antiloop calibrate`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from tests.conftest import missing

from antiloop.calibration import (
    GoalItem,
    Row,
    StagnationItem,
    best_cut,
    calibrate,
    format_report,
    grid,
    load_labelled,
    parse_item,
)
from antiloop.cli import main
from antiloop.detectors import GOAL_THRESHOLDS, STAGNATION_THRESHOLDS
from antiloop.embed import get_embedder
from antiloop.embed import minilm as minilm_module
from antiloop.errors import ConfigError

LABELLED = Path(__file__).parent / "data" / "labelled" / "termination.jsonl"


@pytest.fixture(scope="module")
def minilm():
    """One cached minilm embedder for the module (skips without the embed extra)."""
    if minilm_module.missing_package() is not None:
        missing("the embed extra is not installed: pip install -e '.[embed]'")
    return get_embedder("minilm")


def test_the_shipped_set_is_large_and_split():
    """The labelled set has >= 150 items of both kinds, with a held-out test part."""
    items = load_labelled(LABELLED)
    assert len(items) >= 150
    kinds = Counter((type(i).__name__, i.split) for i in items)
    assert kinds[("GoalItem", "test")] >= 30
    assert kinds[("StagnationItem", "test")] >= 10
    tags = {i.tag for i in items if isinstance(i, GoalItem)}
    assert {"negation", "intention", "failure", "description", "partial"} <= tags
    assert any(i.tag == "corpus" for i in items if isinstance(i, StagnationItem))


def test_bad_items_are_named(tmp_path):
    """A line that is not a labelled item is a ConfigError naming the file and line."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "goal", "goal": "x"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        load_labelled(bad)
    with pytest.raises(ValueError, match="kind"):
        parse_item({"kind": "other"})


def test_best_cut_keeps_precision_and_takes_the_middle_of_a_plateau():
    """The cut keeps the precision floor, maximises F0.5 and sits mid-plateau."""
    rows = [
        Row(0.1, 10, 5, 0, 5),
        Row(0.2, 9, 0, 1, 10),
        Row(0.3, 9, 0, 1, 10),
        Row(0.4, 9, 0, 1, 10),
        Row(0.5, 2, 0, 8, 10),
    ]
    assert best_cut(rows).threshold == 0.3
    assert grid(0.0, 0.1, 0.05) == [0.0, 0.05, 0.1]


def test_ngram_calibration_runs_and_reports():
    """With the stdlib embedder the report has a sweep, a cut and a held-out row per kind."""
    items = load_labelled(LABELLED)
    report = calibrate(items, get_embedder("ngram"))
    assert {k.kind for k in report.kinds} == {"goal", "stagnation"}
    assert all(k.held_out is not None for k in report.kinds)
    text = format_report(report, every=10)
    assert "Best cut" in text
    assert "Held out" in text
    assert report.thresholds()["goal"] == GOAL_THRESHOLDS["ngram-v1"]
    assert report.thresholds()["stagnation"] == STAGNATION_THRESHOLDS["ngram-v1"]


def test_minilm_meets_the_targets_on_the_held_out_part(minilm):
    """minilm: held-out goal precision >= 0.9 at recall >= 0.8, stagnation precision >= 0.9."""
    report = calibrate(load_labelled(LABELLED), minilm)
    by_kind = {k.kind: k for k in report.kinds}
    goal, stag = by_kind["goal"].held_out, by_kind["stagnation"].held_out
    assert goal is not None
    assert stag is not None
    assert goal.precision >= 0.9
    assert goal.recall >= 0.8
    assert stag.precision >= 0.9
    assert report.thresholds()["goal"] == GOAL_THRESHOLDS["minilm-l6-int8"]
    assert report.thresholds()["stagnation"] == STAGNATION_THRESHOLDS["minilm-l6-int8"]


def test_calibrate_command_prints_the_cuts(capsys):
    """`antiloop calibrate FILE --embedder ngram --json` prints the chosen thresholds."""
    assert main(["calibrate", str(LABELLED), "--embedder", "ngram", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedder"] == "ngram-v1"
    assert set(out["thresholds"]) == {"goal", "stagnation"}
    assert main(["calibrate", str(LABELLED), "--embedder", "ngram"]) == 0
    assert "| threshold | precision | recall |" in capsys.readouterr().out
