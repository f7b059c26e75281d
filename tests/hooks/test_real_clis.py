"""The hooks inside the real Claude Code, Codex and Gemini CLI (npm), headless, scripted model.

Each test installs antiloop as the README says (``antiloop install <agent> --project``), runs
the CLI once against the scripted model on 127.0.0.1 and reads what the model was sent, what
ran in the project, and the audit log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hooks.real_clis import CLIS, FINGERPRINT, CliProject, Say, binary, shell

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRAPPERS = ("untrusted_context", "Output:", "PGID", "&lt;", "&gt;", "Exit Code")


@pytest.fixture(params=CLIS)
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CliProject]:
    """A fresh HOME and project for one CLI, antiloop installed in the project."""
    binary(request.param)
    project = CliProject(request.param, tmp_path)
    project.install()
    project.trust_folder()
    yield project
    project.stop_daemon()


def test_a_repeat_is_blocked_then_the_next_try_is_refused(cli: CliProject) -> None:
    twice = [shell(cli.cli, "sh count.sh")] * 3
    ran = cli.run([*twice, Say("finished")])
    assert ran.proc.returncode == 0, ran.log
    assert cli.calls() == 2, ran.log  # the third call was refused before it ran
    audit = cli.audit()
    blocked = [r for r in audit if r.kind == "step" and r.fingerprint]
    denied = [r for r in audit if r.kind == "check" and r.fingerprint]
    kept = [(r.kind, r.fingerprint) for r in audit]
    assert len(blocked) == 1, kept
    assert len(denied) == 1, kept
    fp = blocked[0].fingerprint
    assert denied[0].fingerprint == fp
    assert "<2 lines>" in fp, fp  # the result as the tool gave it
    assert not any(w in fp for w in WRAPPERS), fp
    after_block, after_deny = ran.after(2), ran.after(3)
    assert "ran twice in a row" in after_block, after_block[-2000:]
    assert fp in after_block, after_block[-2000:]
    assert "was stopped as a loop" in after_deny, after_deny[-2000:]
    assert fp in after_deny, after_deny[-2000:]
    seen = set(FINGERPRINT.findall(after_deny))
    assert seen == {fp}, seen


def test_three_different_failures_give_the_failure_streak(cli: CliProject) -> None:
    script = [shell(cli.cli, f"sh fail.sh {n}") for n in (1, 2, 3)]
    ran = cli.run([*script, Say("giving up")])
    assert ran.proc.returncode == 0, ran.log
    after = ran.after(3)
    assert "failed 3 times" in after, after[-2000:]
    assert "missing part 3" in after
    streak = [r for r in cli.audit() if r.detector == "fail-streak"]
    assert len(streak) == 1, [(r.kind, r.detector, r.exit_code) for r in cli.audit()]
    assert streak[0].exit_code == 1


def test_default_config_runs_every_command_the_person_allowed(cli: CliProject) -> None:
    # writes and shell commands the old default approval policy asked about; no `rm`, which
    # Gemini CLI itself refuses in a headless run whatever is allowed
    commands = ["touch made.txt", "mkdir -p build/out", "cp made.txt build/out/copy.txt"]
    ran = cli.run([*(shell(cli.cli, c) for c in [*commands, "sh count.sh"]), Say("done")])
    assert ran.proc.returncode == 0, ran.log
    assert (cli.project / "build" / "out" / "copy.txt").is_file(), ran.log
    assert cli.calls() == 1, ran.log
    last = ran.model.main_requests[-1]
    assert len(last.result_texts) == len(commands) + 1, ran.log
    assert not any("antiloop" in r for r in last.result_texts), last.result_texts
    refused = [r for r in cli.audit() if r.kind == "check"]
    assert refused == [], [(r.tool, r.detail) for r in refused]


def test_codex_runs_no_untrusted_hook_and_doctor_says_so(tmp_path: Path) -> None:
    """Installed without --trust, Codex runs none of the hooks, and doctor fails until --trust."""
    binary("codex")
    cli = CliProject("codex", tmp_path)
    told = cli.install("--no-trust")
    assert "--trust" in told.stdout
    script = [shell("codex", "sh count.sh")] * 2
    ran = cli.run([*script, Say("done")])
    assert ran.proc.returncode == 0, ran.log
    assert cli.audit() == []  # no hook ran
    doctor = cli.antiloop("doctor", "codex", "--project", "--no-run", check=False)
    assert doctor.returncode == 1, doctor.stdout
    assert "FAIL trust" in doctor.stdout
    cli.install()  # --trust
    assert "FAIL" not in cli.antiloop("doctor", "codex", "--project", "--no-run").stdout
    ran = cli.run([*script, Say("done")])
    assert any(r.fingerprint for r in cli.audit()), ran.log
    cli.stop_daemon()


def test_gemini_skip_trust_loads_no_project_hook_and_doctor_says_so(tmp_path: Path) -> None:
    """--skip-trust in an untrusted folder: the project's hooks never load; doctor fails."""
    binary("gemini")
    cli = CliProject("gemini", tmp_path)
    cli.install()
    ran = cli.run([shell("gemini", "sh count.sh"), Say("done")], extra=["--skip-trust"])
    assert ran.proc.returncode == 0, ran.log
    assert cli.calls() == 1, ran.log
    assert cli.audit() == []  # no hook ran
    doctor = cli.antiloop("doctor", "gemini", "--project", "--no-run", check=False)
    assert doctor.returncode == 1, doctor.stdout
    assert "FAIL trust" in doctor.stdout
    cli.trust_folder()
    assert "FAIL" not in cli.antiloop("doctor", "gemini", "--project", "--no-run").stdout
    cli.stop_daemon()
