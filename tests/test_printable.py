"""Agent-supplied text on a terminal: control characters are written out, never obeyed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.cli import main
from antiloop.printable import printable, printable_json

# What an agent could put in a tool name, a command or an output to rewrite a person's screen.
ERASE = "rm -rf ~/important \r\x1b[2K  command: ls -la"
TITLE = "\x1b]0;owned\x07"
CSI_8BIT = "\x9b2J"
BIDI = "deploy \u202edlrow\u202c"
RAW = ("\x1b", "\r", "\x07", "\x9b", "\u202e")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (ERASE, "rm -rf ~/important \\r\\x1b[2K  command: ls -la"),
        (TITLE, "\\x1b]0;owned\\x07"),
        (CSI_8BIT, "\\x9b2J"),
        (BIDI, "deploy \\u202edlrow\\u202c"),
        ("a\nb\tc\x00\x7f", "a\\nb\\tc\\x00\\x7f"),
        ("caf\u00e9 \u2603 plain", "caf\u00e9 \u2603 plain"),
    ],
)
def test_printable_writes_control_characters_out(text: str, shown: str) -> None:
    """Each control character becomes its escape; other text, Unicode included, stays."""
    assert printable(text) == shown


def test_printable_lines_keeps_new_lines_and_tabs_only() -> None:
    """A multi-line report keeps its lines; a carriage return in it is still written out."""
    assert printable("one\n\ttwo\r\x1b[2Kthree", lines=True) == "one\n\ttwo\\r\\x1b[2Kthree"


def test_printable_json_escapes_what_json_leaves_raw() -> None:
    """DEL, C1 and bidi characters become \\uXXXX in a JSON line, which still parses the same."""
    value = {"tool": "x\x7f\x9b\u202e"}
    line = printable_json(json.dumps(value, ensure_ascii=False))
    assert line == '{"tool": "x\\u007f\\u009b\\u202e"}'
    assert json.loads(line) == value


@pytest.fixture
def hostile_store(tmp_path: Path) -> str:
    """A SQLite store whose records carry terminal control sequences from the agent."""
    url = f"sqlite:///{tmp_path / 'antiloop.db'}"
    guard = Guard(store=url, config=GuardConfig(detectors=("repeat",), embedder="ngram"))
    step = Step(
        tool="Bash" + TITLE,
        agent="agent" + CSI_8BIT,
        args={"command": ERASE + BIDI},
        output="done\x07",
        session="s1",
    )
    guard.record(step)
    guard.record(step)
    guard.store.close()
    return url


@pytest.mark.parametrize("argv", [["log"], ["log", "s1"], ["log", "--jsonl"]])
def test_antiloop_log_prints_no_raw_control_character(
    hostile_store: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Sessions, a timeline and the export show the sequences written out."""
    assert main([*argv, "--store", hostile_store]) == 0
    out = capsys.readouterr().out
    assert [c for c in RAW if c in out] == []
    if argv == ["log", "s1"]:
        assert "Bash\\x1b]0;owned\\x07" in out
        assert "agent\\x9b2J" in out


def test_antiloop_scan_prints_no_raw_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tool names and commands from a trace reach the terminal written out."""
    step = {"tool": "Grep" + TITLE, "args": {"pattern": ERASE}, "output": "none\x07"}
    run = tmp_path / "loop.jsonl"
    run.write_text("".join(json.dumps(e) + "\n" for e in [step, step, step]), encoding="utf-8")
    for argv in (["scan", str(run)], ["scan", "--json", str(run)]):
        main(argv)
        out = capsys.readouterr().out
        assert "repeat" in out
        assert [c for c in RAW if c in out] == [], argv
