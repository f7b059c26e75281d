"""`antiloop demo`: each scripted agent is stopped at its second repetition."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from antiloop.demo import run_demo
from antiloop.fingerprint import parse


def test_demo_json_stops_every_agent_with_a_fingerprint():
    """Six scenes, six stops: four loops, then one goal reached and one stalled run."""
    out = io.StringIO()
    assert run_demo(as_json=True, out=out) == 0
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


def test_demo_terminal_output_never_waits_for_input():
    """The demo runs to the end with no terminal and no input, and prints the fingerprints."""
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "demo"],
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
