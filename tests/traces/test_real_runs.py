"""Every reader checked against real recorded runs of its format.

Each format's runs come from ``../shared/corpus`` (public runs of the agents) or were recorded
here with the real agent and a scripted model on 127.0.0.1 (``tests/data/*/record.py``). The
expected step count is counted straight from the raw file by the format's own rule (corpus
FORMATS.md, or the agent's event schema), never by calling the reader.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from antiloop.traces import FORMATS, read_runs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = (ROOT / ".." / "shared" / "corpus").resolve()
DATA = ROOT / "tests" / "data"
SDK_RUNS = DATA / "openhands-sdk" / "runs"
CLAUDE_RUNS = DATA / "claude-code" / "runs"

BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks"
OPENHANDS_SKIPPED = {"system", "message", "recall", "change_agent_state", "null"}


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# --- the formats' own counting rules, applied to the raw files -------------------------------


def count_jsonl(path: Path) -> list[int]:
    """Generic JSONL: the lines whose ``tool`` is a non-empty string."""
    tools = [line.get("tool") for line in _lines(path)]
    return [sum(1 for t in tools if isinstance(t, str) and t.strip())]


def count_swe_agent(path: Path) -> list[int]:
    """SWE-agent: the entries of ``trajectory``."""
    return [len(_json(path)["trajectory"])]


def count_mini_v1(path: Path) -> list[int]:
    """mini-swe-agent v1: assistant messages with exactly one bash block, not answered by a
    format error (FORMATS.md section 1)."""
    messages = _json(path)["messages"]
    count = 0
    for n, message in enumerate(messages):
        if message["role"] != "assistant" or len(BASH_BLOCK.findall(message["content"])) != 1:
            continue
        reply = messages[n + 1]["content"] if n + 1 < len(messages) else ""
        if not (isinstance(reply, str) and reply.startswith(FORMAT_ERROR)):
            count += 1
    return [count]


def count_mini_v2(path: Path) -> list[int]:
    """mini-swe-agent v2: the tool calls of assistant messages, in order (FORMATS.md 2)."""
    messages = _json(path)["messages"]
    return [sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")]


def _openhands_events(events: list[dict[str, Any]]) -> int:
    return sum(
        1
        for e in events
        if e.get("source") == "agent"
        and isinstance(e.get("action"), str)
        and e["action"] not in OPENHANDS_SKIPPED
    )


def count_openhands(path: Path) -> list[int]:
    """OpenHands before the SDK: agent actions outside the skipped kinds (FORMATS.md 4)."""
    if path.suffix == ".jsonl":
        return [_openhands_events(record["history"]) for record in _lines(path)]
    return [_openhands_events(_json(path))]


def _sdk_events(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        return [_json(p) for p in sorted((path / "events").glob("event-*.json"))]
    if path.name.endswith(".events.jsonl"):
        return _lines(path)
    events: list[dict[str, Any]] = _json(path)
    return events


def count_openhands_sdk(path: Path) -> list[int]:
    """OpenHands agent SDK: ``ActionEvent`` records whose ``action`` is set."""

    def executed(events: list[dict[str, Any]]) -> int:
        return sum(1 for e in events if e["kind"] == "ActionEvent" and e.get("action"))

    if path.name == "eval_output.jsonl":
        return [executed(record["history"]) for record in _lines(path)]
    return [executed(_sdk_events(path))]


def count_claude_code(path: Path) -> list[int]:
    """Claude Code: distinct ``tool_use`` blocks of assistant entries."""
    ids = set()
    for entry in _lines(path):
        if entry.get("type") != "assistant":
            continue
        for block in entry["message"]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                ids.add(block["id"])
    return [len(ids)]


def _corpus(folder: str, pattern: str) -> list[Path]:
    return sorted((CORPUS / folder).rglob(pattern)) if CORPUS.is_dir() else []


REAL_RUNS: dict[str, tuple[Callable[[Path], list[int]], list[Path]]] = {
    "jsonl": (count_jsonl, sorted(SDK_RUNS.glob("*.steps.jsonl"))),
    "swe-agent": (count_swe_agent, _corpus("swe-agent", "*.traj")),
    "mini-swe-agent-1": (count_mini_v1, _corpus("mini-swe-agent-gemini-3-pro", "*.json")),
    "mini-swe-agent-2": (count_mini_v2, _corpus("mini-swe-agent-deepseek", "*.json")),
    "openhands": (count_openhands, _corpus("openhands", "*.json*")),
    "openhands-sdk": (
        count_openhands_sdk,
        [
            SDK_RUNS / "loop",
            SDK_RUNS / "clean",
            *sorted(SDK_RUNS.glob("*.events.json*")),
            SDK_RUNS / "eval_output.jsonl",
        ],
    ),
    "claude-code": (count_claude_code, sorted(CLAUDE_RUNS.glob("*.jsonl"))),
}
RECORDED_HERE = {"jsonl", "openhands-sdk", "claude-code"}

CASES = [(fmt, path) for fmt, (_, paths) in REAL_RUNS.items() for path in paths]


def test_every_reader_has_real_runs() -> None:
    """Each format the readers know has real runs here (the corpus ones when it is present)."""
    assert set(REAL_RUNS) == set(FORMATS)
    for fmt in RECORDED_HERE:
        assert REAL_RUNS[fmt][1], fmt
    if CORPUS.is_dir():
        assert all(paths for _, paths in REAL_RUNS.values())


@pytest.mark.parametrize(
    ("fmt", "path"), CASES, ids=[f"{fmt}:{path.parent.name}/{path.name}" for fmt, path in CASES]
)
def test_real_run_has_the_counted_steps(fmt: str, path: Path) -> None:
    """The reader gives the run as many steps as the format's rule counts in the raw file."""
    count, _ = REAL_RUNS[fmt]
    runs = list(read_runs(path))
    assert {r.format for r in runs} == {fmt}
    assert [len(r.steps) for r in runs] == count(path)
    assert all(r.steps for r in runs)


def test_recorded_claude_code_session_reads_its_tools_and_results() -> None:
    """The session recorded with the real CLI: its tool calls, outputs and exit codes."""
    (path,) = REAL_RUNS["claude-code"][1]
    (run,) = list(read_runs(path))
    assert [s.tool for s in run.steps] == ["Bash", "Read", "Bash", "Bash", "Bash", "Edit", "Bash"]
    assert [s.exit_code for s in run.steps if s.tool == "Bash"] == [0, 1, 1, 1, 0]
    assert dict(run.steps[2].args)["command"] == "python test_calc.py"
    assert run.steps[2].output is not None
    assert "AssertionError: add(2, 3) gave -1" in run.steps[2].output
    assert run.steps[0].goal == (
        "The test in test_calc.py fails. Fix add() in calc.py so that it passes."
    )


@pytest.mark.timeout(300)
def test_a_fresh_claude_code_recording_reads_the_same(tmp_path: Path) -> None:
    """Record the scripted session again with the real CLI: CLAUDE_CODE_BIN, else the one
    ``make clis`` installs (required under CI=true, where make test installs it)."""
    installed = Path(__file__).resolve().parents[2] / ".cache" / "clis" / "node_modules" / ".bin"
    claude = os.environ.get("CLAUDE_CODE_BIN") or str(installed / "claude")
    if not Path(claude).exists():
        reason = (
            f"no Claude Code CLI at {claude}: run `make clis`, or set CLAUDE_CODE_BIN, to record "
            "a fresh session against the scripted local model"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    recorder = DATA / "claude-code" / "record.py"
    done = subprocess.run(
        [sys.executable, str(recorder), str(tmp_path), claude],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (fresh,) = sorted(tmp_path.glob("*.jsonl"))
    (committed,) = REAL_RUNS["claude-code"][1]
    (new_run,) = list(read_runs(fresh))
    (old_run,) = list(read_runs(committed))
    assert len(new_run.steps) == count_claude_code(fresh)[0]
    assert [(s.tool, dict(s.args), s.exit_code) for s in new_run.steps] == [
        (s.tool, dict(s.args), s.exit_code) for s in old_run.steps
    ]
