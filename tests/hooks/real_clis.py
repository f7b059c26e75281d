"""The real agent CLIs from npm, driven headless against the scripted model.

``make clis`` (a step of ``make test``) installs the pinned versions below into
``.cache/clis`` once. Each run gets a temporary HOME, a project directory, a store of its own
and dummy keys; the CLI talks only to the scripted model on 127.0.0.1. A CLI that is not
installed skips its tests with the reason, and fails them under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.model_server import Call, ModelServer, Move, Say

ROOT = Path(__file__).resolve().parents[2]
CLIS_DIR = Path(os.environ.get("ANTILOOP_CLIS_DIR") or ROOT / ".cache" / "clis")
VENV_BIN = Path(sys.executable).parent
PINNED = {"claude": "2.1.332", "codex": "0.171.0", "gemini": "0.61.0"}
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}
DIALECT = {"claude": "claude-code", "codex": "codex", "gemini": "gemini"}
PROTOCOL = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}
SHELL_TOOL = {"claude": "Bash", "codex": "exec_command", "gemini": "run_shell_command"}
CLI_TIMEOUT = 60
FINGERPRINT = re.compile(r"AGENT::main::.*?#[0-9a-f]{8}")

__all__ = ["CLIS", "Call", "CliProject", "Say", "binary", "shell"]

CLIS = tuple(PINNED)


def binary(cli: str) -> Path:
    """The CLI's executable in ``.cache/clis``; skips (fails under ``CI=true``) without it."""
    path = CLIS_DIR / "node_modules" / ".bin" / cli
    manifest = CLIS_DIR / "node_modules" / PACKAGES[cli] / "package.json"
    problem = None
    if not path.exists() or not manifest.is_file():
        problem = f"{PACKAGES[cli]} is not installed in {CLIS_DIR} (run `make clis`)"
    elif shutil.which("node") is None:
        problem = "node is not on the PATH"
    else:
        version = json.loads(manifest.read_text()).get("version")
        if version != PINNED[cli]:
            problem = f"{PACKAGES[cli]} {version} is installed, the tests pin {PINNED[cli]}"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return path


def _daemons(directory: Path) -> list[int]:
    """Pids of hook daemons serving a socket in ``directory`` (Linux ``/proc``)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"antiloop.hooks.daemon" in argv and any(str(directory).encode() in a for a in argv):
            found.append(int(cmdline.parent.name))
    return found


def shell(cli: str, command: str) -> Call:
    """The model's call of the CLI's shell tool with ``command``."""
    if cli == "claude":
        return Call("Bash", {"command": command, "description": "run it"})
    if cli == "codex":
        return Call("exec_command", {"cmd": command})
    return Call("run_shell_command", {"command": command})


@dataclass
class Ran:
    """One headless run: the CLI's process, what the model was sent, how long it took."""

    proc: subprocess.CompletedProcess[str]
    model: ModelServer
    seconds: float

    def after(self, results: int) -> str:
        """The text of the main request sent after ``results`` tool results."""
        for seen in self.model.main_requests:
            if seen.results == results:
                return seen.text
        sent = [s.results for s in self.model.main_requests]
        raise AssertionError(f"no request after {results} results (sent: {sent})\n{self.log}")

    @property
    def log(self) -> str:
        """The CLI's output, for assertion messages."""
        errors = "".join(f"model server: {e}\n" for e in self.model.errors)
        out, err = self.proc.stdout[-3000:], self.proc.stderr[-3000:]
        return f"{errors}exit {self.proc.returncode}\n{out}\n{err}"


@dataclass
class CliProject:
    """A temporary HOME and project directory for one CLI, with antiloop on the PATH.

    ``user``: run antiloop and the CLI as this user (``setpriv``; the caller is root), the
    directories made theirs.
    """

    cli: str
    root: Path
    user: str | None = None
    home: Path = field(init=False)
    project: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.project = self.root / "project"
        (self.project / "src").mkdir(parents=True)
        self.home.mkdir()
        (self.project / "src" / "app.ts").write_text("a\nb\n")
        (self.project / "count.sh").write_text("echo run >> calls.log\necho '<2 lines>'\n")
        (self.project / "fail.sh").write_text('echo "missing part $1" >&2\nexit 1\n')
        keep = ("LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")
        self.env = {k: os.environ[k] for k in keep if k in os.environ}
        node = shutil.which("node")
        path = [str(VENV_BIN), *([str(Path(node).parent)] if node else []), "/usr/bin", "/bin"]
        self.env.update(
            HOME=str(self.home),
            PATH=os.pathsep.join(dict.fromkeys(path)),
            ANTILOOP_STORE=f"sqlite:///{self.root / 'antiloop.db'}",
            ANTILOOP_HOOKD_DIR=str(self.root / "run"),
            NO_COLOR="1",
        )
        if self.user is not None:
            self.env.update(USER=self.user, LOGNAME=self.user)
            (self.root / "run").mkdir(mode=0o700)
            subprocess.run(["chown", "-R", f"{self.user}:", str(self.root)], check=True)
        subprocess.run(self._as(["git", "init", "-q"]), cwd=self.project, check=True, env=self.env)

    def own(self) -> None:
        """Give what the test wrote as root to ``user`` (nothing without one)."""
        if self.user is not None:
            subprocess.run(["chown", "-R", f"{self.user}:", str(self.home)], check=True)

    def _as(self, argv: list[str]) -> list[str]:
        """``argv`` run as ``user`` (its uid, gid and groups; the environment as given)."""
        if self.user is None:
            return argv
        return ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", *argv]

    def without_antiloop_on_the_path(self) -> None:
        """The CLI's PATH holds node and the system, not antiloop's directory."""
        node = shutil.which("node")
        path = [*([str(Path(node).parent)] if node else []), "/usr/bin", "/bin"]
        self.env["PATH"] = os.pathsep.join(p for p in dict.fromkeys(path) if p != str(VENV_BIN))

    def antiloop(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``antiloop ARGS`` in the project, as the person would."""
        return subprocess.run(
            self._as([str(VENV_BIN / "antiloop"), *args]),
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=check,
        )

    def install(self, *extra: str) -> subprocess.CompletedProcess[str]:
        """``antiloop install <agent> --project`` (Codex: with the hooks' trust recorded)."""
        args = ["install", DIALECT[self.cli], "--project", *extra]
        if self.cli == "codex" and "--no-trust" not in extra:
            args.append("--trust")
        return self.antiloop(*[a for a in args if a != "--no-trust"])

    def write_config(self, text: str) -> None:
        """The project's ``antiloop.toml``."""
        (self.project / "antiloop.toml").write_text(text)

    def trust_folder(self) -> None:
        """What the person does once per project in the CLI itself: trust the folder."""
        if self.cli == "gemini":
            folders = self.home / ".gemini" / "trustedFolders.json"
            folders.parent.mkdir(parents=True, exist_ok=True)
            folders.write_text(json.dumps({str(self.project): "TRUST_FOLDER"}))
            self.own()

    def _cli_config(self, model: ModelServer) -> None:
        if self.cli == "codex":
            config = self.home / ".codex" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            head = (
                'model = "gpt-scripted"\nmodel_provider = "scripted"\n\n'
                "[model_providers.scripted]\n"
                f'name = "scripted"\nbase_url = "{model.url}/v1"\n'
                'env_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n\n'
                f'[projects."{self.project}"]\ntrust_level = "trusted"\n'
            )
            rest = config.read_text() if config.exists() else ""
            rest = rest.split("# -- above: the test's --\n", 1)[-1]
            config.write_text(head + "# -- above: the test's --\n" + rest)
        elif self.cli == "gemini":
            settings = self.home / ".gemini" / "settings.json"
            settings.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(settings.read_text()) if settings.exists() else {}
            data.setdefault("security", {})["auth"] = {"selectedType": "gemini-api-key"}
            settings.write_text(json.dumps(data))

    def run(
        self,
        script: Sequence[Move],
        prompt: str = "please do the task",
        extra: Sequence[str] = (),
        on_main: Callable[[int], None] | None = None,
    ) -> Ran:
        """Run the CLI headless once against a scripted model playing ``script``.

        ``on_main(results)`` runs before the model answers a main request (a test's fault).
        """
        exe = binary(self.cli)
        with ModelServer(PROTOCOL[self.cli], script, SHELL_TOOL[self.cli], on_main) as model:
            self._cli_config(model)
            self.own()
            env = dict(self.env)
            if self.cli == "claude":
                env.update(
                    ANTHROPIC_BASE_URL=model.url,
                    ANTHROPIC_API_KEY="sk-ant-dummy",
                    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                    DISABLE_AUTOUPDATER="1",
                    DISABLE_TELEMETRY="1",
                )
                argv = [str(exe), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json"]
            elif self.cli == "codex":
                env["SCRIPTED_API_KEY"] = "dummy"
                argv = [str(exe), "exec", "--skip-git-repo-check", prompt]
            else:
                env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="dummy")
                argv = [str(exe), "-p", prompt, "-m", "gemini-2.5-flash"]
                argv += ["--allowed-tools", "run_shell_command", "--output-format", "json"]
            started = time.perf_counter()
            proc = subprocess.run(
                self._as([*argv, *extra]),
                cwd=self.project,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT,
                check=False,
            )
            seconds = time.perf_counter() - started
        return Ran(proc, model, seconds)

    def stop_daemon(self) -> None:
        """Remove the run's hook daemon socket: the daemon it belongs to leaves within a second."""
        for socket in (self.root / "run").glob("*.sock"):
            socket.unlink(missing_ok=True)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and _daemons(self.root / "run"):
            time.sleep(0.1)

    def calls(self) -> int:
        """How many times ``count.sh`` really ran."""
        log = self.project / "calls.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def audit(self) -> list[Any]:
        """Every audit record of the run's store."""
        from antiloop.stores import open_store

        store = open_store(self.env["ANTILOOP_STORE"])
        try:
            return list(store.audit_records())  # type: ignore[attr-defined]
        finally:
            store.close()
