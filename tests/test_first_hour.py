"""The README's first hour, as a new user meets it: each mistake or odd input answered plainly.

Issue 27: "did you mean" for every command and option, the nearest ``antiloop.toml`` found and
named, no traceback on a deep line, one line for a file that is not text, a word for an empty
input, no placeholder in a hint, a demo store of its own, ``make demo`` saying what it installs,
and a scan summary whose counts agree with its lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from antiloop import Guard, Step
from antiloop.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def antiloop(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, data: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "OTEL_"))}
    environ["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "antiloop", *args],
        capture_output=True,
        cwd=cwd,
        env={**environ, **(env or {})},
        input=data,
        timeout=120,
        check=False,
    )


def one_line(text: bytes) -> str:
    lines = [line for line in text.decode().splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in lines[0]
    return lines[0]


def _swap(word: str) -> str:
    """A typo: two neighbouring letters swapped (past the leading dashes)."""
    body = word.lstrip("-")
    lead = word[: len(word) - len(body)]
    i = next((i for i in range(1, len(body) - 1) if body[i] != body[i + 1]), 0)
    return lead + body[:i] + body[i + 1] + body[i] + body[i + 2 :]


# -- did you mean ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_mistyped_is_named(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    typo = _swap(name)
    assert typo != name
    assert main([typo]) == 2
    assert f"(did you mean {name!r}?)" in capsys.readouterr().err


def _long_options(command: str) -> list[str]:
    import argparse

    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for action in sub.choices[command]._actions:
        found += [o for o in action.option_strings if o.startswith("--") and o != "--help"]
    return found


def test_lgo_is_log_and_a_near_option_is_named() -> None:
    assert (
        one_line(antiloop("lgo").stderr) == "antiloop: unknown command 'lgo' (did you mean 'log'?)"
    )
    proc = antiloop("check", "--confg", "x.toml", "steps.jsonl")
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (
        "antiloop: unknown option '--confg' (did you mean '--config'?) (see antiloop check --help)"
    )


@pytest.mark.parametrize(
    "command", [c for c in sorted(COMMANDS) if c not in ("deny", "hook", "completion")]
)
def test_every_option_of_every_command_mistyped_is_named(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in _long_options(command):
        typo = _swap(option)
        if typo == option or typo in _long_options(command):
            continue
        assert main([command, typo]) == 2, option
        err = capsys.readouterr().err
        assert f"(did you mean {option!r}?)" in err, (option, err)
        assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("config", "chek"), "unknown action 'chek' (did you mean 'check'?)"),
        (("fleet", "kil"), "unknown action 'kil' (did you mean 'kill'?)"),
        (("scan", "--format", "jsnol", "x"), "unknown choice 'jsnol' (did you mean 'jsonl'?)"),
        (("completion", "bsah"), "(did you mean 'bash'?)"),
    ],
)
def test_a_mistyped_choice_is_named(args: tuple[str, ...], said: str) -> None:
    proc = antiloop(*args)
    assert proc.returncode == 2
    assert said in one_line(proc.stderr)


def test_log_verfy_suggests_verify(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/a.db"
    guard = Guard(store=store)
    guard.record(Step(tool="Read", args={"file_path": "a.py"}, output="x", session="s"))
    guard.store.close()
    proc = antiloop("log", "verfy", "--store", store)
    assert proc.returncode == 2
    assert one_line(proc.stderr).endswith("(did you mean 'verify'?)")


# -- the config file, found as ruff and pytest find theirs -------------------------------------


REPEAT_3 = 'repeat_threshold = 3\n[hooks]\napproval = "off"\n'


def _three_repeats(folder: Path) -> Path:
    path = folder / "steps.jsonl"
    step = {"tool": "Bash", "args": {"command": "pytest"}, "output": "1 failed"}
    path.write_text("".join(json.dumps(step) + "\n" for _ in range(3)), encoding="utf-8")
    return path


def _first_stop(stdout: bytes) -> int:
    return next(json.loads(line)["index"] for line in stdout.splitlines() if b'"stop"' in line)


def test_check_and_scan_read_the_nearest_antiloop_toml_and_say_so(tmp_path: Path) -> None:
    (tmp_path / "antiloop.toml").write_text(REPEAT_3, encoding="utf-8")
    work = tmp_path / "src" / "deep"
    work.mkdir(parents=True)
    steps = _three_repeats(work)
    proc = antiloop("check", steps.name, cwd=work)
    assert proc.returncode == 3
    assert _first_stop(proc.stdout) == 2  # the file's repeat_threshold, not the default 2
    assert one_line(proc.stderr) == (
        f"antiloop check: config {tmp_path / 'antiloop.toml'} "
        "(the nearest antiloop.toml; --no-config for the defaults)"
    )
    scan = antiloop("scan", "--json", steps.name, cwd=work)
    assert scan.returncode == 1
    [loop] = json.loads(scan.stdout.splitlines()[0])["loops"]
    assert loop["step"] == 2
    assert f"antiloop scan: config {tmp_path / 'antiloop.toml'}" in scan.stderr.decode()
    bare = antiloop("check", "--no-config", steps.name, cwd=work)
    assert (_first_stop(bare.stdout), bare.stderr) == (1, b"")


def test_a_config_named_on_the_line_or_in_the_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "antiloop.toml").write_text("repeat_threshold = 2\n", encoding="utf-8")
    other = tmp_path / "other.toml"
    other.write_text(REPEAT_3, encoding="utf-8")
    steps = _three_repeats(tmp_path)
    given = antiloop("check", "--config", str(other), str(steps), cwd=tmp_path)
    assert (_first_stop(given.stdout), given.stderr) == (2, b"")  # given: nothing to say
    named = antiloop("check", str(steps), cwd=tmp_path, env={"ANTILOOP_CONFIG": str(other)})
    assert _first_stop(named.stdout) == 2
    assert "(ANTILOOP_CONFIG;" in one_line(named.stderr)


def test_no_config_anywhere_is_the_defaults_in_silence(tmp_path: Path) -> None:
    proc = antiloop("check", str(_three_repeats(tmp_path)), cwd=tmp_path)
    assert (proc.returncode, _first_stop(proc.stdout), proc.stderr) == (3, 1, b"")


# -- inputs that are no steps ------------------------------------------------------------------


def _deep_line(depth: int = 1000) -> str:
    nested = "[" * depth + "1" + "]" * depth
    return '{"tool": "Read", "args": {"p": ' + nested + '}, "output": "x"}'


def test_scan_skips_a_line_nested_too_deep_with_its_reason(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    good = json.dumps({"tool": "Read", "args": {"file_path": "a.py"}, "output": "x"})
    trace.write_text(f"{_deep_line()}\n{good}\n{good}\n", encoding="utf-8")
    proc = antiloop("scan", "--no-config", str(trace))
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert "RecursionError" not in err
    assert proc.returncode == 1  # the two good steps still make their loop
    assert "line 1: nested too deeply (more than 200 levels)" in one_line(proc.stderr)


@pytest.mark.parametrize("name", ["one.jsonl", "one.traj"])
def test_scan_says_a_file_nested_too_deep_is_unreadable(tmp_path: Path, name: str) -> None:
    trace = tmp_path / name
    trace.write_text(_deep_line(5000) + "\n", encoding="utf-8")
    proc = antiloop("scan", "--no-config", str(trace))
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert proc.returncode == 2
    assert "nested too deeply to read" in err.splitlines()[0]


def test_the_scanner_turns_a_recursion_error_into_an_unreadable_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the readers' own checks (a step too deep for a reader or the engine)."""
    from antiloop.scan import engine
    from antiloop.scan.engine import Scanner, Unreadable, scan_config

    def too_deep(path: Path, format: str = "auto") -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine, "read_runs", too_deep)
    trace = tmp_path / "run.jsonl"
    trace.write_text("{}\n", encoding="utf-8")
    [item] = Scanner(scan_config()).scan_one(trace)
    assert isinstance(item, Unreadable)
    assert item.reason == "nested too deeply to read"


def test_check_on_a_binary_file_or_stdin_exits_2_in_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "tool.bin"
    binary.write_bytes(bytes(range(256)) * 64 + b"\n" * 63)
    proc = antiloop("check", "--no-config", str(binary))
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert one_line(proc.stderr) == f"antiloop: {binary} is not UTF-8 text (a NUL byte at offset 0)"
    latin = b'{"tool": "Read", "output": "caf\xe9"}\n'
    piped = antiloop("check", "--no-config", data=latin)
    assert (piped.returncode, piped.stdout) == (2, b"")
    assert one_line(piped.stderr) == (
        "antiloop: standard input is not UTF-8 text (byte 0xe9 at offset 31)"
    )
    scan = antiloop("scan", "--no-config", str(binary))
    assert scan.returncode == 2
    assert "not UTF-8 text" in scan.stderr.decode().splitlines()[0]


def test_utf8_cut_at_the_sniffs_end_is_still_text(tmp_path: Path) -> None:
    from antiloop.commands.check import not_text

    assert not_text("é".encode()[:1]) is None  # the rest of the character follows
    steps = tmp_path / "steps.jsonl"
    line = json.dumps({"tool": "Read", "output": "é" * 40000}, ensure_ascii=False)
    steps.write_text(line + "\n", encoding="utf-8")  # é straddles the 64 KB sniff
    proc = antiloop("check", "--no-config", str(steps))
    assert proc.returncode == 0, proc.stderr
    assert b'"continue"' in proc.stdout


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_input_says_it_read_no_step(tmp_path: Path, text: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(text, encoding="utf-8")
    proc = antiloop("check", "--no-config", str(empty))
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert one_line(proc.stderr) == f"antiloop: read no step from {empty}: it is empty"
    piped = antiloop("check", "--no-config", data=b"not json\n")
    assert piped.returncode == 0
    assert piped.stderr.decode().strip() == (
        "antiloop: read no step from standard input: its 1 lines are all invalid"
    )
    scan = antiloop("scan", "--no-config", str(empty))
    assert scan.returncode == 2
    assert "the file is empty" in scan.stderr.decode().splitlines()[0]


# -- what the model is told --------------------------------------------------------------------


def test_no_placeholder_in_a_reason_or_hint_the_fingerprint_keeps_them() -> None:
    from antiloop.core.rules.ruleset import BUILTIN

    placeholders = {row.placeholder for row in BUILTIN.scrubbers}
    volatile = (
        "took {n}.5s at 10:11:1{n} on 2025-01-0{n}, pid 42{n}2, in /tmp/x{n} at 0x7f3a9c2e1b4{n}"
    )
    verdicts = []
    for tool, key in (("Bash", "output"), ("Bash", "error")):
        guard = Guard()
        for n in range(1, 4):
            fields = {key: volatile.format(n=n)}
            if key == "error":
                fields["exit_code"] = 1
            command = "sleep 1 && make" if key == "output" else f"make t{n}"
            verdicts.append(guard.record(Step(tool=tool, args={"command": command}, **fields)))
    said = [(v.reason, v.hint) for v in verdicts if v.action.wire != "continue"]
    assert {v.detector for v in verdicts} >= {"repeat", "fail-streak"}
    for reason, hint in said:
        for token in placeholders:
            assert token not in reason + hint, (token, reason, hint)
        assert not re.search(r"<[a-z]+>", reason + hint), (reason, hint)
    repeat = next(v for v in verdicts if v.detector == "repeat")
    assert "<dur>" in str(repeat.fingerprint)  # the same on every machine, by design
    assert "(took … at … on …, pid …, in …)" in repeat.hint  # cut at 50 characters


# -- the demo and make demo --------------------------------------------------------------------


def test_the_demo_keeps_its_own_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    mine = tmp_path / "mine.db"
    env = {"HOME": str(home), "ANTILOOP_STORE": f"sqlite:///{mine}", "TMPDIR": str(tmp_path)}
    proc = antiloop("demo", "--embedder", "ngram", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (home / ".antiloop").exists()
    assert not mine.exists()
    [folder] = tmp_path.glob("antiloop-demo-*")
    store = f"sqlite:///{str(folder / 'demo.db').lstrip('/')}"
    assert f"every step and verdict is in {store}" in proc.stdout.decode()
    verify = antiloop("log", "verify", "--store", store)
    assert verify.returncode == 0, verify.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_says_what_it_installs_and_shows_pips_progress(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    proc = subprocess.run(
        ["make", "-n", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    assert "installing antiloop and its MiniLM model" in script
    [install] = [line for line in script.splitlines() if "'.[embed]'" in line]
    assert " -q " not in install  # pip says what it collects and downloads
    assert "--progress-bar on" in install


# -- the scan summary agrees with its lines ----------------------------------------------------


def test_a_run_with_warnings_only_is_counted_as_it_is_printed(tmp_path: Path) -> None:
    fails = tmp_path / "fails.jsonl"
    fails.write_text(
        "".join(
            json.dumps({"tool": "Bash", "args": {"command": f"make t{n}"}, "error": "boom"}) + "\n"
            for n in range(4)
        ),
        encoding="utf-8",
    )
    loop = tmp_path / "loop.jsonl"
    loop.write_text(
        "".join(
            json.dumps({"tool": "Bash", "args": {"command": "pytest"}, "output": "1 failed"}) + "\n"
            for _ in range(3)
        ),
        encoding="utf-8",
    )
    proc = antiloop("scan", "--no-config", "--jobs", "1", str(fails), str(loop))
    out = proc.stdout.decode()
    assert f"{fails} (jsonl, 4 steps): warnings only: no stopping loop, no waste" in out
    assert f"{loop} (jsonl, 3 steps): first loop point at step 1" in out
    assert "Runs with loops: 2 (100%): 1 stopped at a loop point, 1 with warnings only" in out
    summary = json.loads(
        antiloop("scan", "--no-config", "--json", str(fails), str(loop)).stdout.splitlines()[-1]
    )["summary"]
    assert (
        summary["runs_with_loops"],
        summary["runs_with_stopping_loops"],
        summary["runs_with_warnings_only"],
    ) == (2, 1, 1)


# -- the README promises nothing PyPI does not have --------------------------------------------


def test_the_readme_installs_from_a_checkout_or_a_wheel_in_pips_syntax() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install 'antiloop[" not in readme  # the name is not published on PyPI
    assert not re.search(r"install [^\n`]*\*\.whl\[", readme)  # a glob with brackets never expands
    assert "pip install -e '.[embed]'" in readme
    assert 'pip install "$(ls dist/antiloop-*.whl)[embed]"' in readme


def test_the_readmes_check_and_scan_lines_run_as_shown(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.search(r'"fingerprint": "(AGENT::explorer::[^"]+)"', readme)
    assert shown is not None
    assert "antiloop check examples/runs/explorer.jsonl" in readme
    proc = antiloop("check", "examples/runs/explorer.jsonl", cwd=ROOT)
    assert proc.returncode == 3, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    assert (last["index"], last["fingerprint"]) == (3, shown[1])
    assert "antiloop scan examples/runs/ --html report.html" in readme
    report = tmp_path / "report.html"
    scan = antiloop("scan", "examples/runs/", "--html", str(report), cwd=ROOT)
    assert scan.returncode == 1  # loops found
    assert shown[1] in scan.stdout.decode()
    assert report.stat().st_size > 0


def test_approve_and_deny_take_a_prefix_through_the_server_too(tmp_path: Path) -> None:
    from tests.server.conftest import TOKEN, start_server, stop_server

    config = tmp_path / "serve.toml"
    config.write_text('[approval]\ntiers = { delete = "ask" }\n', encoding="utf-8")
    server = start_server(tmp_path, "--config", str(config))
    try:
        ids = []
        for n in (1, 2):
            status, verdict = server.call(
                "POST", "/v1/check", {"tool": "Bash", "args": {"command": f"rm -rf b{n}"}}
            )
            assert (status, verdict["action"]) == (200, "ask"), verdict
            ids.append(verdict["approval"]["id"])
        env = {"ANTILOOP_URL": server.url, "ANTILOOP_TOKEN": TOKEN}
        approved = antiloop("approve", ids[0][:6], env=env)
        assert one_line(approved.stdout) == f"antiloop: request {ids[0]} is approved"
        denied = antiloop("deny", ids[1][:6], "-m", "use the staging config", env=env)
        assert one_line(denied.stdout) == f"antiloop: request {ids[1]} is denied"
        unknown = antiloop("approve", "zz", env=env)
        assert unknown.returncode == 2
        assert one_line(unknown.stderr).startswith("antiloop: no request 'zz'")
    finally:
        stop_server(server)
