"""`antiloop demo`: each scripted agent is stopped at its second repetition."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from antiloop.core.fingerprint import parse
from antiloop.demo import run_demo
from antiloop.stores import open_store


@pytest.mark.parametrize("embedder", ["minilm", "ngram"])
def test_demo_json_stops_every_agent_with_a_fingerprint(tmp_path, embedder):
    """Six scenes, six stops: four loops, then one goal reached and one stalled run."""
    out = io.StringIO()
    url = f"sqlite:///{tmp_path}/antiloop.db"
    assert run_demo(as_json=True, out=out, store=url, embedder=embedder) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    summary = rows[-1]["summary"]
    assert summary["stopped"] == summary["scenes"] == 6
    stops = [r for r in rows[:-1] if r["verdict"]["action"] == "stop"]
    assert [(r["agent"], r["step"], r["verdict"]["detector"]) for r in stops] == [
        ("explorer", 1, "repeat"),
        ("qa-validator", 1, "repeat"),
        ("code-writer", 2, "repeat"),
        ("explorer", 3, "cycle"),
        ("qa-validator", 4, "goal"),
        ("explorer", 4, "stagnation"),
    ]
    assert stops[4]["verdict"]["outcome"] == "goal"
    assert parse(stops[5]["verdict"]["fingerprint"]).operation == "stagnation"
    stops = stops[:4]
    ops = [parse(r["verdict"]["fingerprint"]).operation for r in stops]
    assert ops == ["grep", "test", "edit", "cycle"]
    results = [parse(r["verdict"]["fingerprint"]).result for r in stops]
    assert results[1].startswith("2 failing#")
    assert results[2].startswith("no change#")
    assert all(r["verdict"]["hint"] for r in stops)
    # The same fingerprints in every run, on every machine: no time, no temporary path in them
    # (the demo's project is written afresh, with new mtimes, each run).
    assert [r["verdict"]["fingerprint"] for r in stops] == [
        "AGENT::explorer::grep::double jump@game::1 match#24fa4bb3",
        "AGENT::qa-validator::test::python -m unittest discover -s tests::2 failing#2ef0390a",
        "AGENT::code-writer::edit::game/config.py::no change#039c07dd",
        "AGENT::explorer::cycle::grep>read::period 2#3b2d204a",
    ]
    assert summary["embedder"].startswith(embedder)
    store = open_store(url)
    assert store.verify_audit() == []
    records = list(store.audit_records(summary["sessions"][0]))
    assert [r.kind for r in records] == ["step", "step"]
    store.close()


def test_demo_terminal_output_never_waits_for_input(tmp_path):
    """The demo runs to the end with no terminal and no input, and prints the fingerprints."""
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "demo", "--store", f"sqlite:///{tmp_path}/a.db"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "AGENT::explorer::grep::double jump@game::" in proc.stdout
    assert "agent told" in proc.stdout
    assert "\033[" not in proc.stdout
    assert "antiloop log verify" in proc.stdout
