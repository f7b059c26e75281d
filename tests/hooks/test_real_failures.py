"""antiloop failing inside the real Claude Code, Codex and Gemini CLI: safe, and said where it can.

Each test installs the hooks as the README says and breaks one thing the way it breaks on a
machine: antiloop is not on the agent's PATH (and the hook daemon is killed in the middle of an
event), the daemon hangs (stopped), the hook client is gone, the store cannot be written by the
user running the agent. In each, the CLI must finish its run (no failure of antiloop refuses
it), a repeat must still be stopped when antiloop can still judge, no event may be counted
twice, and a degraded antiloop must say so where the CLI shows a hook's words (Gemini CLI: its
stderr; Claude Code ``-p``: a failed SessionEnd hook's stderr; ``codex exec`` shows neither, so
there ``antiloop doctor`` says it).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.hooks.real_clis import CLIS, DIALECT, CliProject, Ran, Say, _daemons, binary, shell

from antiloop.hooks import installer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER = "antiloop-test"
WAIT = 120.0  # seconds a fault's helper waits for its condition (a loaded machine is slow)


def _project(cli: str, root: Path, user: str | None = None) -> CliProject:
    binary(cli)
    project = CliProject(cli, root, user=user)
    project.install()
    project.trust_folder()
    return project


def _repeat_stopped(cli: CliProject, ran: Ran) -> None:
    """Three identical calls: two ran, the repeat was told, the third refused; none twice."""
    assert ran.proc.returncode == 0, ran.log
    assert cli.calls() == 2, ran.log
    audit = cli.audit()
    kept = [(r.kind, r.tool, r.fingerprint) for r in audit]
    steps = [r for r in audit if r.kind == "step" and r.tool != "antiloop:turn-end"]
    assert len(steps) == 2, kept  # each call counted once, whoever judged it
    assert len([r for r in steps if r.fingerprint]) == 1, kept
    assert len([r for r in audit if r.kind == "check" and r.fingerprint]) == 1, kept
    assert "was stopped as a loop" in ran.after(3), ran.log


def _the_daemon(cli: CliProject) -> int:
    """The one hook daemon of the project (``install`` started it and waited for it)."""
    found = _daemons(cli.root / "run")
    assert len(found) == 1, found
    return found[0]


def _threads(pid: int) -> int:
    try:
        return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1]
    except OSError:
        return True
    return state.startswith(("Z", "X"))


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextlib.contextmanager
def _store_locked(cli: CliProject) -> Iterator[None]:
    """Hold the store's write lock (as a long transaction of another process would)."""
    path = cli.env["ANTILOOP_STORE"].removeprefix("sqlite:///")
    db = sqlite3.connect("/" + path.lstrip("/"), timeout=WAIT, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


@pytest.mark.parametrize("cli_name", CLIS)
def test_a_daemon_killed_mid_event_loses_nothing_without_antiloop_on_the_path(
    cli_name: str, tmp_path: Path
) -> None:
    """The PATH lacks antiloop; the daemon is killed holding an event: it is judged again, once.

    Before the second call the test takes the store's lock, so the daemon's next recording
    waits inside the daemon; the test kills the daemon then (SIGKILL), and lets the lock go
    once it is gone. The hook judges the event in its own process: the repeat is stopped.
    """
    cli = _project(cli_name, tmp_path)
    cli.without_antiloop_on_the_path()
    pid = _the_daemon(cli)
    idle = _threads(pid)  # no event yet: a thread more means an event is inside
    killed: list[int] = []
    errors: list[BaseException] = []

    def fault(results: int) -> None:
        if results != 1 or killed:
            return

        def kill_mid_event() -> None:
            try:
                with _store_locked(cli):
                    _until(lambda: _threads(pid) > idle, "an event inside the daemon")
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    _until(lambda: _gone(pid), "the daemon to be gone")
            except BaseException as exc:  # the run's assertions say what followed
                errors.append(exc)

        threading.Thread(target=kill_mid_event, daemon=True).start()

    ran = cli.run([shell(cli_name, "sh count.sh")] * 3 + [Say("finished")], on_main=fault)
    assert errors == [], errors
    assert killed, ran.log
    _repeat_stopped(cli, ran)
    cli.stop_daemon()


@pytest.mark.parametrize("cli_name", CLIS)
def test_a_hung_daemon_costs_one_wait_and_is_replaced(cli_name: str, tmp_path: Path) -> None:
    """The daemon stops answering (SIGSTOP) before the second call: the hook waits once, ends
    it, judges the event itself; the repeat is still stopped, and a new daemon takes over."""
    cli = _project(cli_name, tmp_path)
    stopped: list[int] = []

    def fault(results: int) -> None:
        if results == 1 and not stopped:
            pid = _the_daemon(cli)
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    try:
        ran = cli.run([shell(cli_name, "sh count.sh")] * 3 + [Say("finished")], on_main=fault)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert stopped, ran.log
    _repeat_stopped(cli, ran)
    _until(lambda: _gone(stopped[0]), "the hung daemon to be ended by the hook")
    cli.stop_daemon()


@pytest.mark.parametrize("cli_name", CLIS)
def test_a_hook_client_that_is_gone_lets_the_run_finish_and_says_so(
    cli_name: str, tmp_path: Path
) -> None:
    """Settings naming a client that is not there (a removed environment, a teammate's
    machine): every command runs, no CLI refuses the run, and Gemini and Claude say why."""
    binary(cli_name)
    cli = CliProject(cli_name, tmp_path)
    agent = DIALECT[cli_name]
    gone = tmp_path / "removed-venv" / "bin" / "python"
    command = installer.default_command(agent, executable=str(gone))
    installer.install(agent, installer.settings_path(agent, "project", cwd=cli.project), command)
    if cli_name == "codex":
        cli.install("--command", command)  # and Codex's trust of that command
    cli.trust_folder()
    commands = ["touch made.txt", "sh count.sh"]
    ran = cli.run([*(shell(cli_name, c) for c in commands), Say("finished")])
    assert ran.proc.returncode == 0, ran.log
    assert cli.calls() == 1, ran.log
    assert (cli.project / "made.txt").exists(), ran.log
    assert ran.after(2), ran.log  # the model was asked again after both results
    said = f"{gone} is missing, so nothing was checked"
    if cli_name == "codex":
        assert said not in ran.proc.stdout + ran.proc.stderr  # codex exec shows no hook's words
    else:
        assert said in ran.proc.stderr, ran.log
    doctor = cli.antiloop("doctor", agent, "--project", "--no-run", check=False)
    assert "FAIL command" in doctor.stdout, doctor.stdout


def _missing(problem: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(problem)
    pytest.skip(problem)


@pytest.fixture(scope="module")
def user() -> str:
    """A user who is not root, made when missing (``useradd``; CI runs as root).

    The user must be able to run this environment's interpreter: where it lies under a
    directory closed to others (pyenv in ``/root``), the user alone is let through it (an ACL
    granting search, nothing else; ``make sysdeps`` installs ``acl``).
    """
    if os.geteuid() != 0:
        _missing(f"only root may run the agents as another user ({USER})")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
    python = Path(sys.executable).resolve()
    for folder in reversed(python.parents):
        if folder.stat().st_mode & 0o001:
            continue
        if shutil.which("setfacl") is None:
            _missing(f"{USER} cannot reach {python} ({folder} is closed): install acl")
        subprocess.run(["setfacl", "-m", f"u:{USER}:x", str(folder)], check=True)
    check = [sys.executable, "-c", "import antiloop"]
    ran = subprocess.run(
        ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", *check],
        capture_output=True,
        text=True,
        check=False,
    )
    if ran.returncode != 0:
        _missing(f"{USER} cannot run {sys.executable}: {ran.stderr.strip()[-300:]}")
    return USER


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary directory others may enter (pytest's own are the owner's alone)."""
    path = Path(tempfile.mkdtemp(prefix="antiloop-user-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("cli_name", CLIS)
def test_a_store_the_user_cannot_write_lets_the_run_finish_and_says_so(
    cli_name: str, open_tmp: Path, user: str
) -> None:
    """The agent runs as a user who may not write the store: nothing is checked, the run
    finishes, and the CLI's own output says so where it shows a hook's words."""
    root = open_tmp / "shared"
    root.mkdir()
    locked = open_tmp / "locked"
    locked.mkdir(mode=0o755)  # root's: the user may read it, not write in it
    cli = CliProject(cli_name, root, user=user)
    cli.env["ANTILOOP_STORE"] = f"sqlite:///{locked / 'antiloop.db'}"
    binary(cli_name)
    cli.install()
    cli.trust_folder()
    ran = cli.run([shell(cli_name, "sh count.sh")] * 3 + [Say("finished")])
    assert ran.proc.returncode == 0, ran.log
    assert cli.calls() == 3, ran.log  # nothing could be checked, nothing was refused
    said = "read-only or cannot be created"
    if cli_name == "codex":
        assert said not in ran.proc.stdout + ran.proc.stderr  # codex exec shows no hook's words
    else:
        assert said in ran.proc.stderr, ran.log
        assert "not checked" in ran.proc.stderr, ran.log
    doctor = cli.antiloop("doctor", DIALECT[cli_name], "--project", "--no-run", check=False)
    assert "FAIL store" in doctor.stdout, doctor.stdout
    assert said in doctor.stdout, doctor.stdout
    cli.stop_daemon()
