"""`antiloop check`: the section 7 contract, end to end."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc

from antiloop import Guard
from antiloop.commands.check import judge_stream
from antiloop.core.step import parse_line

GREP = {"tool": "grep", "args": {"pattern": "x"}, "output": "a\n"}


def run_cli(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "antiloop", "check", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def lines(text):
    return [json.loads(line) for line in text.splitlines()]


def test_one_verdict_per_non_blank_line_and_exit_3():
    """Every non-blank line gets a verdict; a loop stop exits 3."""
    stream = "\n".join([json.dumps(GREP), "", "{not json", json.dumps(GREP), ""]) + "\n"
    proc = run_cli("-", stdin=stream)
    assert proc.returncode == 3, proc.stderr
    out = lines(proc.stdout)
    assert [v["index"] for v in out] == [0, 1, 2]
    assert out[1]["action"] == "invalid"
    assert "line 3" in out[1]["reason"]
    assert out[2]["action"] == "stop"
    assert out[2]["detector"] == "repeat"
    assert set(out[2]) == {"index", "action", "detector", "outcome", "fingerprint", "reason"}


def test_goal_only_exits_0(tmp_path):
    """A session that only reached its goal exits 0."""
    goal = "Write the release notes for version two."
    steps = [
        {"tool": "read", "args": {"path": f"n{i}"}, "output": str(i), "goal": goal, "message": m}
        for i, m in enumerate(["Reading.", "Writing.", goal])
    ]
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"min_steps": 1, "embedder": "ngram"}))
    proc = run_cli("--config", str(config), stdin="".join(json.dumps(s) + "\n" for s in steps))
    assert proc.returncode == 0, proc.stderr
    assert lines(proc.stdout)[-1]["detector"] == "goal"


def test_bad_arguments_exit_2():
    """An unreadable file or an unknown config key exits 2 with a one-line message."""
    proc = run_cli("/nonexistent/steps.jsonl")
    assert proc.returncode == 2
    assert "cannot read /nonexistent/steps.jsonl" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_unknown_config_key_exits_2(tmp_path):
    """An unknown config key is named and exits 2."""
    config = tmp_path / "c.json"
    config.write_text('{"max_stepz": 3}')
    proc = run_cli("--config", str(config), stdin=json.dumps(GREP))
    assert proc.returncode == 2
    assert "unknown key 'max_stepz'" in proc.stderr


def test_bad_lines_keep_the_steps_around_them_consecutive():
    """A bad line between two identical steps does not break their run."""
    raw = [json.dumps(GREP), '{"tool": ""}', '{"tool": "x", "args": []}', "[1]", json.dumps(GREP)]
    out = io.StringIO()
    code = judge_stream(io.BytesIO("\n".join(raw).encode()), out, Guard())
    verdicts = lines(out.getvalue())
    assert [v["action"] for v in verdicts] == ["continue", "invalid", "invalid", "invalid", "stop"]
    assert "'tool' is empty" in verdicts[1]["reason"]
    assert "'args' must be an object" in verdicts[2]["reason"]
    assert code == 3


def test_memory_stays_bounded_by_the_windows():
    """Many steps over many sessions keep only the windows, not the outputs."""
    guard = Guard()
    out = io.StringIO()

    def stream(first, n):
        buf = io.BytesIO()
        for i in range(first, first + n):
            step = {
                "session": f"s{i % 200}",
                "tool": "Bash",
                "args": {"command": f"grep -rn name{i} src"},
                "output": f"src/a.py:{i}:" + "x" * 2000,
            }
            buf.write(json.dumps(step).encode() + b"\n")
        buf.seek(0)
        return buf

    tracemalloc.start()
    judge_stream(stream(0, 8000), out, guard)  # windows and caches fill up
    warm, _ = tracemalloc.get_traced_memory()
    judge_stream(stream(8000, 6000), io.StringIO(), guard)
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # 6,000 more steps of 2 KB output each (12 MB of text): what is kept does not grow with
    # them: less than 1% of the text that went through (a kept output would be 100%)
    fed = 6000 * 2000
    assert after - warm < fed // 100, (warm, after, fed)


def test_a_huge_output_is_judged_without_extra_copies(tmp_path):
    """A 20 MB output is judged with no copy beyond what parsing the JSON line itself takes."""
    big = "line of output ✓ " * (20_000_000 // 18)
    line = json.dumps({"tool": "read", "args": {"path": "big.log"}, "output": big}).encode()
    path = tmp_path / "big.jsonl"
    path.write_bytes(line + b"\n" + line + b"\n")
    size = len(line)
    del big
    tracemalloc.start()
    parse_line(line)  # the floor: bytes -> text -> the parsed output string
    _, parse_peak = tracemalloc.get_traced_memory()
    del line
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    out = io.StringIO()
    with path.open("rb") as source:
        code = judge_stream(source, out, Guard())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert code == 3
    assert lines(out.getvalue())[1]["detector"] == "repeat"
    # reading the line (its bytes) plus parsing it, and then only small slices
    assert peak - base < size + parse_peak + size // 8, (peak - base, parse_peak, size)


def _nested(depth, session="default"):
    return (
        f'{{"session": "{session}", "tool": "read", "args": {{"a": '
        + "[" * depth
        + "]" * depth
        + "}}"
    )


def test_a_line_nested_too_deeply_is_invalid_and_the_stream_goes_on():
    """100,000 levels: that line is invalid; the steps around it are judged and consecutive."""
    stream = "\n".join([json.dumps(GREP), _nested(100_000), json.dumps(GREP), _nested(150, "b")])
    result = run_cli(stdin=stream + "\n")
    verdicts = lines(result.stdout)
    assert [v["action"] for v in verdicts] == ["continue", "invalid", "stop", "continue"]
    assert "line 2: nested too deeply" in verdicts[1]["reason"]
    assert result.stderr == ""
    assert result.returncode == 3


def _one_step_sessions(first, n):
    buf = io.BytesIO()
    for i in range(first, first + n):
        buf.write(json.dumps({**GREP, "session": f"s{i}"}).encode() + b"\n")
    buf.seek(0)
    return buf


def test_sessions_past_max_sessions_are_forgotten_least_recent_first():
    """max_sessions bounds what check keeps; a forgotten session that comes back starts afresh."""
    from antiloop import GuardConfig
    from antiloop.commands.check import guard_for

    guard = guard_for(GuardConfig(max_sessions=1000))
    tracemalloc.start()
    empty, _ = tracemalloc.get_traced_memory()
    judge_stream(_one_step_sessions(0, 1000), io.StringIO(), guard)
    full, _ = tracemalloc.get_traced_memory()  # what 1,000 kept sessions take, in this run
    kept = io.StringIO()
    judge_stream(io.BytesIO(json.dumps({**GREP, "session": "s0"}).encode()), kept, guard)
    assert lines(kept.getvalue())[0]["action"] == "stop"  # s0 was kept: this is its repeat
    judge_stream(_one_step_sessions(1000, 2000), io.StringIO(), guard)
    warm, _ = tracemalloc.get_traced_memory()
    judge_stream(_one_step_sessions(3000, 4000), io.StringIO(), guard)
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(guard.sessions) == 1000
    # 4,000 more sessions through a full store: less growth than 100 kept sessions take (a
    # ratio measured in this run, not a byte count that depends on the interpreter)
    assert after - warm < (full - empty) // 10, (empty, full, warm, after)
    back = io.StringIO()
    judge_stream(io.BytesIO(json.dumps({**GREP, "session": "s1"}).encode()), back, guard)
    assert lines(back.getvalue())[0]["action"] == "continue"  # forgotten: starts afresh


def test_max_sessions_is_checked(tmp_path):
    """max_sessions must be a positive integer (exit 2 with the reason)."""
    config = tmp_path / "c.json"
    config.write_text('{"max_sessions": 0}')
    result = run_cli("--config", str(config))
    assert result.returncode == 2
    assert "max_sessions" in result.stderr


def test_a_reader_that_goes_away_is_an_error_not_success(tmp_path):
    """stdout closed after the first line: non-zero exit and one line saying so."""
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({**GREP, "session": f"s{i}"}) + "\n" for i in range(50000)))
    process = subprocess.Popen(
        [sys.executable, "-m", "antiloop", "check", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stdout.readline()
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 141
    assert err.decode().splitlines() == ["antiloop: stdout closed before every verdict was written"]
