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
        "spend": {"steps": 4, "input_tokens": None, "output_tokens": None, "cost_usd": None},
        "loop_spend": {"steps": 2, "input_tokens": None, "output_tokens": None, "cost_usd": None},
        "partial": None,
    }
    assert lines[0]["loops"][0]["fingerprint"].startswith("AGENT::agent::grep::")
    summary = lines[1]["summary"]
    assert (summary["runs"], summary["runs_with_loops"], summary["loops"]) == (1, 1, 1)
    assert summary["runs_with_loops_by_kind"] == {"repeat": 1}
    assert summary["top_fingerprints"][0]["runs"] == 1


def test_file_of_no_format_is_unreadable_and_scan_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is none of the formats is reported unreadable; the others are scanned."""
    notes = tmp_path / "notes.txt"
    notes.write_text("# notes\n", encoding="utf-8")
    _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"antiloop: unreadable {notes}: no known trace format fits" in captured.err
    assert "Scanned 1 runs (4 steps) in 1 files; 1 unreadable." in captured.out
    assert "Unreadable (not counted as runs): 1" in captured.out
    assert f"  {notes}: no known trace format fits" in captured.out


def test_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is a usage error."""
    assert main(["scan", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_nothing_readable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Paths holding no trace at all are a usage error, not a clean scan."""
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    assert main(["scan", str(tmp_path)]) == 2
    assert "no readable run found in" in capsys.readouterr().err


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


# --- unreadable inputs and --strict ----------------------------------------------------------

SDK_RUNS = Path(__file__).resolve().parents[1] / "data" / "openhands-sdk" / "runs"


def test_file_of_no_steps_is_unreadable_never_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step-event file whose lines are all bad reads as no steps: unreadable, exit 2, not 0."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tool": ""}\n{"tool": "Grep", "args": 3}\n', encoding="utf-8")
    assert main(["scan", str(bad), "--json"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out.splitlines()[-1])["summary"]
    assert summary["runs"] == 0
    assert summary["unreadable"] == [
        {
            "file": str(bad),
            "record": None,
            "format": "jsonl",
            "reason": summary["unreadable"][0]["reason"],
        }
    ]
    assert summary["unreadable"][0]["reason"].startswith("read as jsonl, no steps: line 1: ")
    assert f"antiloop: unreadable {bad}: read as jsonl, no steps: line 1:" in captured.err
    assert "no readable run found" in captured.err


def test_sdk_events_read_as_old_openhands_are_unreadable_not_clean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The bug of issue 15: agent-SDK eval records read by the old OpenHands reader give no
    steps; each is reported as unreadable, with a hint, never as a clean run."""
    records = SDK_RUNS / "eval_output.jsonl"
    assert main(["scan", str(records), "--format", "openhands", "--json"]) == 2
    unreadable = json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]["unreadable"]
    assert [(u["record"], u["format"]) for u in unreadable] == [(0, "openhands"), (1, "openhands")]
    hint = "OpenHands agent-SDK events (--format openhands-sdk reads those)"
    assert all(hint in u["reason"] for u in unreadable)


def test_empty_record_of_a_multi_run_file_is_unreadable_and_the_others_scanned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An eval record with an empty history is unreadable by its line; the other records count."""
    records = SDK_RUNS / "eval_output.jsonl"
    loop, clean = records.read_text(encoding="utf-8").splitlines()
    empty = json.loads(clean)
    empty["history"] = [e for e in empty["history"] if e["kind"] == "MessageEvent"]
    path = tmp_path / "output.jsonl"
    path.write_text(f"{loop}\n{json.dumps(empty)}\n", encoding="utf-8")
    assert main(["scan", str(path), "--json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["record"], r["steps"]) for r in lines[:-1]] == [(0, 8)]
    summary = lines[-1]["summary"]
    assert (summary["runs"], summary["files"]) == (1, 1)
    (unreadable,) = summary["unreadable"]
    assert (unreadable["record"], unreadable["format"]) == (1, "openhands-sdk")
    assert unreadable["reason"] == (
        "read as openhands-sdk, no steps: no executed tool call in 1 events (MessageEvent 1)"
    )


def test_strict_fails_on_any_unreadable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--strict: exit 3 with a message naming the first unreadable input; without it, 0."""
    _write(tmp_path / "clean.jsonl", CLEAN)
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n", encoding="utf-8")
    assert main(["scan", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["scan", str(tmp_path), "--strict"]) == 3
    err = capsys.readouterr().err
    assert f"antiloop: --strict: 1 inputs unreadable (first: {notes}: no known trace format" in err


def test_strict_outranks_loops_and_passes_when_all_is_read(tmp_path: Path) -> None:
    """Loops and an unreadable input under --strict exit 3; everything read exits as usual."""
    _write(tmp_path / "loop.jsonl", LOOPING)
    assert main(["scan", str(tmp_path), "--strict"]) == 1
    assert main(["scan", str(tmp_path), "--strict", "--no-fail"]) == 0
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    assert main(["scan", str(tmp_path), "--strict"]) == 3


def test_html_report_lists_unreadable_inputs(tmp_path: Path) -> None:
    """The HTML report has an unreadable card and section, each input with its reason."""
    _write(tmp_path / "loop.jsonl", LOOPING)
    (tmp_path / "notes.txt").write_text("<hello>\n", encoding="utf-8")
    report = tmp_path / "report.html"
    assert main(["scan", str(tmp_path), "--html", str(report), "--no-fail"]) == 0
    text = report.read_text(encoding="utf-8")
    assert "<section id='unreadable'><h2>Unreadable (1)</h2>" in text
    assert "<b>1</b>unreadable</div>" in text
    assert f"<code>{tmp_path / 'notes.txt'}</code>" in text
    assert "no known trace format fits" in text
    assert "1 runs, 4 steps, 1 files; 1 unreadable." in text


def test_spend_and_the_spend_inside_loops_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Steps with usage: the JSON, the text summary and the HTML report show both spends."""
    priced = [dict(e, cost_usd=0.5, tokens_in=100, tokens_out=10) for e in LOOPING]
    run = _write(tmp_path / "priced.jsonl", priced)
    report = tmp_path / "r.html"
    assert main(["scan", str(run), "--json", "--html", str(report)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["spend"] == {
        "steps": 4,
        "input_tokens": 400,
        "output_tokens": 40,
        "cost_usd": 2.0,
    }
    assert lines[0]["loop_spend"] == {
        "steps": 2,
        "input_tokens": 200,
        "output_tokens": 20,
        "cost_usd": 1.0,
    }
    assert lines[-1]["summary"]["loop_spend"]["cost_usd"] == 1.0
    html = report.read_text(encoding="utf-8")
    assert "spent inside loops" in html
    assert "2 steps, 220 tokens, $1.00" in html
    assert main(["scan", str(run)]) == 1
    assert "Spend: 4 steps, 440 tokens, $2.00; inside loops: 2 steps, 220 tokens, $1.00." in (
        capsys.readouterr().out
    )
