"""``antiloop scan`` as a command: output, exit status, skipped files, progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from antiloop.cli import main
from antiloop.commands.scan import Progress

LOOPING = [
    {"tool": "Grep", "args": {"pattern": "a"}, "output": "x"},
    {"tool": "Grep", "args": {"pattern": "b"}, "output": "none"},
    {"tool": "Grep", "args": {"pattern": "b"}, "output": "none"},
    {"tool": "Read", "args": {"file_path": "a.py"}, "output": "1"},
]
CLEAN = [
    {"tool": "Grep", "args": {"pattern": "a"}, "output": "x"},
    {"tool": "Read", "args": {"file_path": "a.py"}, "output": "1"},
]


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def test_loops_found_exit_1_and_are_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with a loop is printed with its loop point and waste; the exit status is 1."""
    run = _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(run)]) == 1
    out = capsys.readouterr().out
    assert f"{run} (jsonl, 4 steps): first loop point at step 2; waste 1 steps" in out
    assert "step    2  repeat" in out
    assert "[steps 1-2]" in out
    assert "Runs with loops: 1 (100%); by kind: repeat 1" in out


def test_no_fail_exits_0_with_loops(tmp_path: Path) -> None:
    """--no-fail turns the loop exit status off."""
    run = _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(run), "--no-fail"]) == 0


def test_clean_runs_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without loops the exit status is 0 and only the summary is printed."""
    _write(tmp_path / "clean.jsonl", CLEAN)
    assert main(["scan", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Scanned 1 runs (2 steps) in 1 files.")


def test_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json writes one object per run then the summary object."""
    run = _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(run), "--json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {
        "file": str(run),
        "record": None,
        "format": "jsonl",
        "steps": 4,
        "loops": [
            {
                "step": 2,
                "detector": "repeat",
                "fingerprint": lines[0]["loops"][0]["fingerprint"],
                "evidence": [1, 2],
            }
        ],
        "waste": {
            "from_step": 2,
            "steps": 1,
            "input_tokens": None,
            "output_tokens": None,
            "cost_usd": None,
        },
    }
    assert lines[0]["loops"][0]["fingerprint"].startswith("AGENT::agent::grep::")
    summary = lines[1]["summary"]
    assert (summary["runs"], summary["runs_with_loops"], summary["loops"]) == (1, 1, 1)
    assert summary["runs_with_loops_by_kind"] == {"repeat": 1}
    assert summary["top_fingerprints"][0]["runs"] == 1


def test_file_of_no_format_is_skipped_and_scan_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is none of the formats gets a message on stderr; the others are scanned."""
    (tmp_path / "notes.md").write_text("# notes\n", encoding="utf-8")
    _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"antiloop: skipped {tmp_path / 'notes.md'}: no known trace format fits" in captured.err
    assert "Scanned 1 runs (4 steps) in 1 files; 1 files skipped." in captured.out


def test_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is a usage error."""
    assert main(["scan", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_nothing_readable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Paths holding no trace at all are a usage error, not a clean scan."""
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    assert main(["scan", str(tmp_path)]) == 2
    assert "no trace of a known format found" in capsys.readouterr().err


def test_bad_format_exits_2(tmp_path: Path) -> None:
    """An unknown --format is rejected by the argument parser with status 2."""
    with pytest.raises(SystemExit) as exc:
        main(["scan", str(tmp_path), "--format", "nope"])
    assert exc.value.code == 2


def test_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config with an unknown key is a usage error naming it."""
    config = tmp_path / "c.json"
    config.write_text('{"nope": 1}', encoding="utf-8")
    run = _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(run), "--config", str(config)]) == 2
    assert "unknown key 'nope'" in capsys.readouterr().err


def test_config_budget_applies_only_when_named(tmp_path: Path) -> None:
    """A config setting max_steps adds the budget; the default config adds none."""
    distinct = [{"tool": "Grep", "args": {"pattern": f"p{n}"}, "output": "x"} for n in range(6)]
    run = _write(tmp_path / "clean.jsonl", distinct)
    budget = tmp_path / "budget.toml"
    budget.write_text("max_steps = 4\n", encoding="utf-8")
    plain = tmp_path / "plain.toml"
    plain.write_text("failure_streak = 5\n", encoding="utf-8")
    assert main(["scan", str(run), "--config", str(plain)]) == 0
    assert main(["scan", str(run), "--config", str(budget)]) == 1


def test_html_report_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--html writes one self-contained file with a timeline cell per step."""
    run = _write(tmp_path / "loop.jsonl", LOOPING)
    report = tmp_path / "report.html"
    assert main(["scan", str(run), "--html", str(report), "--no-fail"]) == 0
    text = report.read_text(encoding="utf-8")
    assert text.count("class='s ") == 4
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    assert f"report written to {report}" in capsys.readouterr().err


def test_progress_is_silent_off_a_terminal() -> None:
    """The progress bar writes nothing when stderr is not a TTY."""
    stream = io.StringIO()
    bar = Progress(stream)
    bar.update(1, 10)
    bar.clear()
    assert stream.getvalue() == ""


def test_progress_draws_on_a_terminal() -> None:
    """On a TTY the bar shows files done and loops, and clears itself."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = Progress(stream)
    bar.loops = 3
    bar.update(10, 10)
    assert "10/10 files, 3 loops" in stream.getvalue()
    bar.clear()
    assert stream.getvalue().endswith("\r\x1b[K")
