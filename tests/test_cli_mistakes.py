"""A new user's mistakes, each answered in one line by the real command (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from antiloop.approval.request import ApprovalRequest
from antiloop.stores import open_store


def antiloop(
    *args: str, cwd: Path | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("ANTILOOP_CONFIG", None)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "antiloop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.mark.parametrize(
    ("typed", "meant"), [("chekc", "check"), ("scna", "scan"), ("isntall", "install")]
)
def test_a_mistyped_command_suggests_the_near_one(typed: str, meant: str) -> None:
    proc = antiloop(typed)
    assert proc.returncode == 2
    assert one_line(proc.stderr) == f"antiloop: unknown command {typed!r} (did you mean {meant!r}?)"


def test_an_unknown_command_far_from_any_lists_them() -> None:
    proc = antiloop("frobnicate")
    assert proc.returncode == 2
    assert one_line(proc.stderr).startswith(
        "antiloop: unknown command 'frobnicate' (known: approve,"
    )


def test_version() -> None:
    from antiloop import __version__

    proc = antiloop("--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"antiloop {__version__}")


def test_init_writes_a_config_that_config_check_accepts(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    proc = antiloop("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "for Codex" in proc.stdout
    assert "antiloop install codex --project" in proc.stdout
    text = (tmp_path / "antiloop.toml").read_text()
    assert 'approval = "off"' in text
    assert "# repeat_threshold = 2" in text
    checked = antiloop("config", "check", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "antiloop.toml is valid" in checked.stdout
    again = antiloop("init", cwd=tmp_path)
    assert again.returncode == 2
    assert "exists: edit it, or run again with --force" in one_line(again.stderr)
    assert antiloop("init", "--force", "--agent", "gemini", cwd=tmp_path).returncode == 0
    assert "Gemini CLI" in (tmp_path / "antiloop.toml").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "repeat_treshold = 3\n",
            "unknown key 'repeat_treshold' (did you mean 'repeat_threshold'?)",
        ),
        (
            "[guard]\nmax_steps = 3\n[aproval]\n",
            "unknown table or key 'aproval' (did you mean 'approval'?)",
        ),
        ("[hooks]\ndeadlin = 3\n", "[hooks]: unknown key 'deadlin' (did you mean 'deadline'?)"),
        ("[approval]\ntimeout = -1\n", "'timeout' must be seconds > 0, not -1"),
        ("max_steps = 'ten'\n", "'max_steps' must be an integer >= 1, not 'ten'"),
        ("max_steps = \n", "not valid TOML"),
    ],
)
def test_config_check_names_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "antiloop.toml"
    config.write_text(text)
    proc = antiloop("config", "check", str(config))
    assert proc.returncode == 2
    assert message in one_line(proc.stderr)


def test_the_documented_hook_config_is_accepted_by_every_command(tmp_path: Path) -> None:
    """Top-level guard keys with [approval] and [hooks]: check, scan and config check read it."""
    config = tmp_path / "antiloop.toml"
    config.write_text(
        'repeat_action = "block"\nembedder = "ngram"\n[approval]\ntiers = { exec = "allow" }\n'
        '[[approval.rules]]\ncommand = "^rm -rf /"\ndecision = "deny"\n'
        '[hooks]\napproval = "policy"\ndeadline = 10\nfail = "open"\n'
    )
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps({"tool": "Read", "args": {"path": "a"}, "output": "x"}) + "\n")
    assert antiloop("config", "check", str(config)).returncode == 0
    check = antiloop("check", str(steps), "--config", str(config))
    assert check.returncode == 0, check.stderr
    scan = antiloop("scan", str(steps), "--config", str(config))
    assert scan.returncode == 0, scan.stderr


def test_approve_and_deny_an_unknown_request_say_so(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/a.db"
    for args in (("approve", "nosuchid"), ("deny", "nosuchid", "-m", "x")):
        proc = antiloop(*args, "--store", store)
        assert proc.returncode == 2
        assert one_line(proc.stderr) == "antiloop: no request 'nosuchid' (0 known)"


def test_approve_by_a_unique_prefix_and_nothing_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    store = open_store(url)
    req = ApprovalRequest("a1b2c3d4e5", "s", "a", "Bash", {"command": "rm x"}, "exec", "why", 1.0)
    store.put_approval(req)
    store.close()
    proc = antiloop("approve", req.id[:6], "--store", url)
    assert proc.returncode == 0, proc.stderr
    assert f"request {req.id} is approved" in proc.stdout
    listed = antiloop("approve", "--list", "--store", url)
    assert listed.stdout.strip() == "antiloop: no request is pending"


def test_stop_an_unknown_session_says_so_and_a_prefix_finds_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    store = open_store(url)
    for sid in ("demo-20261201-aa", "demo-20261201-ab", "other"):
        with store.transaction(sid) as state:
            state.steps = 1
    store.close()
    typo = antiloop("stop", "typo", "--store", url)
    assert typo.returncode == 2
    assert one_line(typo.stderr) == "antiloop: no session 'typo' (3 known)"
    near = antiloop("stop", "othr", "--store", url)
    assert one_line(near.stderr) == "antiloop: no session 'othr' (did you mean 'other'?)"
    ambiguous = antiloop("stop", "demo-", "--store", url)
    assert ambiguous.returncode == 2
    assert one_line(ambiguous.stderr) == (
        "antiloop: session 'demo-' is ambiguous: it starts 2 (demo-20261201-aa, demo-20261201-ab)"
    )
    found = antiloop("stop", "demo-20261201-ab"[:-1] + "b", "--store", url)
    assert found.returncode == 0
    assert antiloop("stop", "oth", "--store", url).stdout.startswith(
        "antiloop: session other stops"
    )


def _complete(script: str, words: list[str]) -> list[str]:
    """What bash completes for ``words`` (the last one being typed) with ``script`` loaded."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _antiloop; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_bash_completion_completes_commands_and_their_options() -> None:
    script = antiloop("completion", "bash").stdout
    assert _complete(script, ["antiloop", "ch"]) == ["check"]
    assert _complete(script, ["antiloop", "c"]) == ["check", "calibrate", "config", "completion"]
    assert _complete(script, ["antiloop", "scan", "--st"]) == ["--strict"]
    assert "--uninstall" in _complete(script, ["antiloop", "install", "--"])


def test_zsh_and_fish_scripts_name_every_command() -> None:
    from antiloop.cli import COMMANDS

    zsh = antiloop("completion", "zsh").stdout
    assert zsh.startswith("#compdef antiloop\n")
    fish = antiloop("completion", "fish").stdout
    for name in COMMANDS:
        assert f"-a {name} -d '" in fish
    assert "-n '__fish_seen_subcommand_from scan' -l strict" in fish


def test_scan_colours_only_when_asked_or_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (the tests' case) no ESC; --color always paints; NO_COLOR wins over auto."""
    steps = tmp_path / "loop.jsonl"
    grep = {"tool": "Grep", "args": {"pattern": "x"}, "output": "a.py:1:x"}
    steps.write_text((json.dumps(grep) + "\n") * 2)
    plain = antiloop("scan", str(steps))
    assert plain.returncode == 1
    assert "\x1b[" not in plain.stdout
    painted = antiloop("scan", str(steps), "--color", "always")
    assert "\x1b[31mrepeat" in painted.stdout
    from antiloop._color import wants_colour

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert wants_colour(Tty())  # type: ignore[arg-type]
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_colour(Tty())  # type: ignore[arg-type]


def test_scan_names_a_malformed_line_it_skips(tmp_path: Path) -> None:
    steps = tmp_path / "run.jsonl"
    read = json.dumps({"tool": "Read", "args": {"path": "a"}, "output": "x"})
    steps.write_text(f"{read}\n{{not json\n{read}\n")
    proc = antiloop("scan", str(steps))
    assert proc.returncode == 1  # the two reads around it are still a repeat
    assert one_line(proc.stderr).startswith(
        f"antiloop: {steps}: skipped 1 part(s) that read as no step (line 2: "
    )
