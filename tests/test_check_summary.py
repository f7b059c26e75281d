"""`antiloop check --summary-json`: why the run ended, steps, spend, loops with fingerprints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = (sys.executable, "-m", "antiloop", "check")


def _step(tool: str, session: str, usage: tuple[int, int, float] | None, **kw: object) -> str:
    out: dict[str, object] = {"tool": tool, "args": {"q": kw.pop("q", "x")}, "output": "same"}
    out.update(session=session, **kw)
    if usage is not None:
        out.update(tokens_in=usage[0], tokens_out=usage[1], cost_usd=usage[2])
    return json.dumps(out) + "\n"


def _check(
    tmp_path: Path, stream: str, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [*CHECK, "-", "--summary-json", str(summary), *extra],
        input=stream,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc, json.loads(summary.read_text(encoding="utf-8"))


def test_a_loop_stops_the_run_and_its_spend_is_counted_apart(tmp_path: Path) -> None:
    stream = (
        _step("grep", "s1", (100, 10, 0.01))
        + _step("read", "s2", (50, 5, 0.005), q="other")
        + _step("grep", "s1", (120, 12, 0.012))
        + "{not json\n"
    )
    proc, summary = _check(tmp_path, stream)
    assert proc.returncode == 3, proc.stderr
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert summary["summary"] == "antiloop-check/1"
    assert summary["ended"] == "stopped"
    assert summary["exit_code"] == 3
    assert (summary["steps"], summary["invalid"], summary["sessions"]) == (3, 1, 2)
    assert summary["spend"] == {
        "tokens_in": 270,
        "tokens_out": 27,
        "cost_usd": 0.027,
        "steps_with_usage": 3,
    }
    # the two grep calls are the loop's evidence: the read of the other session is outside
    assert summary["loop_spend"]["tokens_in"] == 220
    assert summary["loop_spend"]["cost_usd"] == pytest.approx(0.022)
    [loop] = summary["loops"]
    assert loop["fingerprint"] == verdicts[2]["fingerprint"]
    assert (loop["session"], loop["detector"], loop["action"]) == ("s1", "repeat", "stop")
    assert (loop["first_index"], loop["session_steps"]) == (2, [0, 1])
    assert loop["spend"]["tokens_out"] == 22
    [stopped] = summary["stopped"]
    assert (stopped["session"], stopped["index"]) == ("s1", 2)
    assert "inside loops 220 tokens in" in proc.stderr


def test_a_clean_run_ends_at_the_end_of_input_without_a_spend_line(tmp_path: Path) -> None:
    stream = _step("grep", "s", None, q="a") + _step("grep", "s", None, q="b")
    proc, summary = _check(tmp_path, stream)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no usage in the steps: nothing to report
    assert summary["ended"] == "end of input"
    assert summary["loops"] == []
    assert summary["stopped"] == []
    assert summary["spend"]["steps_with_usage"] == 0


def test_an_unreadable_input_still_writes_the_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [*CHECK, str(tmp_path / "missing.jsonl"), "--summary-json", str(summary)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    data = json.loads(summary.read_text(encoding="utf-8"))
    assert (data["ended"], data["exit_code"], data["steps"]) == ("unreadable input", 2, 0)


def test_an_unwritable_summary_is_named(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CHECK, "-", "--summary-json", str(tmp_path / "no" / "such" / "dir.json")],
        input=_step("grep", "s", None),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "cannot write" in proc.stderr
