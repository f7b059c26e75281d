"""``antiloop doctor``: check a hook installation end to end.

For each installation found (or named): the settings file parses; our entries are there for
every event, and hooks are not switched off; the agent trusts them (Codex's hook trust and
trusted project, Gemini's trusted folders); the command resolves to an executable on the PATH
the agent gives it; a dry run of the command, exactly as the agent runs it (through the shell,
JSON on stdin, in the project directory, so the project's ``antiloop.toml`` is read as the hook
reads it), answers a PreToolUse and then stops a repeated PostToolUse with a fingerprint,
against a throw-away store; the real store (``ANTILOOP_STORE``) is writable; the hook config
parses as the hook reads it; the hook daemon is off, running, or will be started by the next
event; only the user can read the store's files and ``~/.antiloop`` (``permissions``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.hooks import installer

__all__ = ["Check", "diagnose", "dry_run_payloads", "installations", "permissions_check"]

_SHOWN = 5  # open files named in the finding
_WALK_LIMIT = 2000  # entries of ~/.antiloop looked at


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: ``ok`` True (fine), False (broken) or None (a warning)."""

    name: str
    ok: bool | None
    detail: str

    def line(self) -> str:
        """The finding as one line of the report."""
        mark = {True: "ok  ", False: "FAIL", None: "warn"}[self.ok]
        return f"  {mark} {self.name}: {self.detail}"


def installations(
    cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> list[tuple[str, Path]]:
    """(agent, settings file) of every installation of antiloop's hooks found."""
    found = []
    for agent in installer.AGENTS:
        scopes = ("user", "project", "local") if agent == "claude-code" else ("user", "project")
        for scope in scopes:
            path = installer.settings_path(agent, scope, cwd=cwd, env=env)
            try:
                _, data = installer._read(path)
            except ConfigError:
                found.append((agent, path))
                continue
            if installer.find_ours(data, agent):
                found.append((agent, path))
    return found


def dry_run_payloads(agent: str, session: str, cwd: str, repeats: int = 2) -> list[dict[str, Any]]:
    """A harmless PreToolUse, then the same PostToolUse ``repeats`` times (the last repeats)."""
    if agent == "gemini":
        pre = {"hook_event_name": "BeforeTool", "tool_name": "read_file"}
        post = {
            "hook_event_name": "AfterTool",
            "tool_name": "read_file",
            "tool_response": {"llmContent": "doctor\n", "returnDisplay": ""},
        }
        args = {"file_path": f"{cwd}/antiloop-doctor.txt"}
    else:
        pre = {"hook_event_name": "PreToolUse", "tool_name": "Read"}
        post = {
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_response": {"type": "text", "file": {"content": "doctor\n"}},
        }
        args = {"file_path": f"{cwd}/antiloop-doctor.txt"}
        if agent == "codex":
            pre["tool_name"] = post["tool_name"] = "Bash"
            args = {"command": "cat antiloop-doctor.txt"}
            post["tool_response"] = "doctor\n"
    base = {"session_id": session, "cwd": cwd, "transcript_path": None}
    return [
        {**base, **pre, "tool_input": args},
        *(
            {**base, **post, "tool_input": args, "tool_use_id": f"doctor-{n}"}
            for n in range(1, max(repeats, 2) + 1)
        ),
    ]


def project_of(
    agent: str, path: Path, cwd: str | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """The project directory an installation's hook judges events of.

    A project settings file (``<project>/.claude/settings.json``, ``.gemini/``, ``.codex/``)
    names its project; for user settings it is where the agent runs (``cwd``).
    """
    if _is_project(agent, path, env):
        return path.parent.parent.resolve()
    return Path(cwd or Path.cwd()).resolve()


def diagnose(
    agent: str,
    path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    run: bool = True,
) -> list[Check]:
    """Check one installation; returns the findings in order."""
    env = dict(os.environ if env is None else env)
    checks: list[Check] = []
    try:
        raw, data = installer._read(path)
    except ConfigError as exc:
        return [Check("settings", False, str(exc))]
    if raw is None:
        return [Check("settings", False, f"{path} does not exist (antiloop install {agent})")]
    checks.append(Check("settings", True, f"{path} parses"))
    ours = installer.find_ours(data, agent)
    if not ours:
        checks.append(Check("entries", False, f"no antiloop hooks (antiloop install {agent})"))
        return checks
    commands = sorted({str(h.get("command") or h.get("url")) for hs in ours.values() for h in hs})
    command = commands[0]
    wanted = installer.events_for(agent, command)
    missing = [e for e in wanted if e not in ours]
    doubled = [e for e, hs in ours.items() if len(hs) > 1]
    if missing:
        checks.append(Check("entries", False, f"missing for {', '.join(missing)}: reinstall"))
    elif doubled:
        checks.append(Check("entries", None, f"more than one antiloop hook on {doubled}"))
    else:
        checks.append(Check("entries", True, f"all {len(wanted)} events: {', '.join(wanted)}"))
    checks.extend(_switches(agent, data))
    project = project_of(agent, path, cwd, env)
    checks.extend(trust_checks(agent, path, project, env))
    if len(commands) > 1:
        checks.append(Check("command", None, f"{len(commands)} different commands: {commands}"))
    hook_env = hook_environment(agent, env, project)
    if installer.is_url(command):
        checks.append(Check("command", True, f"HTTP hooks to {command}"))
    else:
        resolved = _resolve(command, hook_env)
        checks.append(resolved)
        if run and resolved.ok:
            checks.append(_dry_run(agent, command, hook_env, str(project)))
    checks.append(_store(env))
    checks.append(permissions_check(env))
    checks.append(_config(hook_env, str(project), _config_option(command)))
    checks.append(daemon_check(env))
    return checks


def permissions_check(env: Mapping[str, str]) -> Check:
    """Only the user can read what antiloop keeps: the store's files and ``~/.antiloop``.

    Fails when the SQLite store, its ``-wal`` or ``-shm``, or anything in ``~/.antiloop``
    (the default store's directory, the daemon's sockets), when this configuration keeps
    something there, is open to the group or others; warns for a store directory elsewhere
    that others may list.
    """
    from antiloop._files import open_to_others

    home = Path(env.get("HOME") or Path.home()) / ".antiloop"
    failing: list[Path] = []
    warning: list[Path] = []
    seen = 0
    for path in _kept_paths(env, home):
        seen += 1
        if not open_to_others(path):
            continue
        inside = path == home or home in path.parents
        (failing if inside or not path.is_dir() else warning).append(path)
    if failing:
        return Check("permissions", False, "open to other users: " + _modes(failing))
    if warning:
        return Check(
            "permissions", None, "others may list the store's directory " + _modes(warning)
        )
    return Check("permissions", True, f"only you can read the store's files ({seen} checked)")


def _kept_paths(env: Mapping[str, str], home: Path) -> list[Path]:
    """The existing files and directories antiloop keeps for this configuration."""
    from antiloop._hook_client import enabled, socket_dir
    from antiloop.hooks.runner import store_url

    found: list[Path] = []
    url = store_url(env)
    if url.startswith("sqlite:"):
        from antiloop.stores.sqlite import SQLiteStore

        try:
            db = SQLiteStore.from_url(url).path  # only parsed: nothing is opened
        except ConfigError:
            db = None  # the store check says what is wrong with the URL
        if db is not None:
            found += [db, db.with_name(f"{db.name}-wal"), db.with_name(f"{db.name}-shm")]
            found.append(db.parent)
    if enabled(env):
        found.append(Path(socket_dir(env)))
    if home.is_dir() and any(p == home or home in p.parents for p in found):
        found.append(home)  # used by this configuration: everything in it
        for root, dirs, files in os.walk(home):
            found += [Path(root, name) for name in (*dirs, *files)]
            if len(found) > _WALK_LIMIT:
                break
    unique = dict.fromkeys(p for p in found if p.exists())
    return list(unique)


def _modes(paths: list[Path]) -> str:
    shown = ", ".join(f"{p} ({_mode(p)})" for p in paths[:_SHOWN])
    more = f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else ""
    return f"{shown}{more}: chmod 600 the files and 700 the directories"


def _mode(path: Path) -> str:
    try:
        return f"{path.stat().st_mode & 0o777:o}"
    except OSError:
        return "gone"


def hook_environment(agent: str, env: Mapping[str, str], project: Path) -> dict[str, str]:
    """The environment the agent gives its hook in ``project`` (its project directory set)."""
    out = dict(env)
    name = {"claude-code": "CLAUDE_PROJECT_DIR", "gemini": "GEMINI_PROJECT_DIR"}.get(agent)
    if name:
        out.setdefault(name, str(project))
    return out


def _config_option(command: str) -> str | None:
    """The ``--config PATH`` of a hook command line, if it has one."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(argv):
        if word == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return None


def trust_checks(agent: str, path: Path, project: Path, env: Mapping[str, str]) -> list[Check]:
    """What the agent itself must trust before it runs these hooks (Codex, Gemini CLI)."""
    scope = "--project" if _is_project(agent, path, env) else ""
    if agent == "codex":
        from antiloop.hooks import codex_trust

        out: list[Check] = []
        try:
            untrusted = codex_trust.untrusted_events(path, env)
        except ConfigError as exc:
            return [Check("trust", False, str(exc))]
        config = codex_trust.codex_config_path(env)
        if untrusted:
            out.append(
                Check(
                    "trust",
                    False,
                    f"Codex has not trusted the hooks of {', '.join(untrusted)}, so it does not "
                    f"run them: `antiloop install codex {scope} --trust` records their trust in "
                    f"{config} (or trust them in Codex with /hooks)".replace("  ", " "),
                )
            )
        else:
            out.append(Check("trust", True, f"Codex trusts every antiloop hook ({config})"))
        if scope and not codex_trust.project_trusted(project, env):
            out.append(
                Check(
                    "project",
                    False,
                    f"Codex loads {path} only in a trusted project: trust {project} when Codex "
                    f'asks, or add [projects."{project}"] trust_level = "trusted" to {config}',
                )
            )
        return out
    if agent == "gemini" and scope:
        from antiloop.hooks.gemini_trust import folder_trust

        trusted, detail = folder_trust(project, env)
        return [Check("trust", trusted, detail)]
    return []


_FOLDERS = {"claude-code": ".claude", "gemini": ".gemini", "codex": ".codex"}


def _is_project(agent: str, path: Path, env: Mapping[str, str] | None = None) -> bool:
    """A project's settings: in its ``.claude``/``.gemini``/``.codex``, not the user's."""
    if path.parent.name != _FOLDERS[agent]:
        return False
    user = installer.settings_path(agent, "user", env=env)
    return path.resolve() != user.resolve()


def daemon_check(env: Mapping[str, str]) -> Check:
    """The hook daemon of this installation: off, running, or started by the next event."""
    from antiloop._hook_client import enabled, private, socket_dir, socket_path
    from antiloop.hooks.daemon import answers

    if not enabled(env):
        return Check("daemon", True, "off (ANTILOOP_HOOKD=0): each event is judged in its process")
    directory, path = socket_dir(env), socket_path(env)
    if Path(directory).exists() and not private(directory):
        return Check(
            "daemon", None, f"{directory} is open to other users: the daemon is not used there"
        )
    if answers(path):
        return Check("daemon", True, f"running, on {path}")
    return Check("daemon", True, f"not running; the next hook event starts it ({path})")


def _switches(agent: str, data: Mapping[str, Any]) -> list[Check]:
    if agent == "claude-code" and data.get("disableAllHooks") is True:
        return [Check("switch", False, '"disableAllHooks": true turns every hook off')]
    if agent == "gemini":
        cfg = data.get("hooksConfig")
        if isinstance(cfg, dict) and cfg.get("enabled") is False:
            return [Check("switch", False, '"hooksConfig": {"enabled": false} turns hooks off')]
        disabled = cfg.get("disabled") if isinstance(cfg, dict) else None
        if isinstance(disabled, list) and "antiloop" in disabled:
            return [Check("switch", False, 'hooksConfig.disabled lists "antiloop"')]
    return []


def _resolve(command: str, env: Mapping[str, str] | None = None) -> Check:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return Check("command", False, f"{command!r} does not parse as a shell line: {exc}")
    if not argv:
        return Check("command", False, "the command is empty")
    program = argv[0]
    path = (env or os.environ).get("PATH")
    where = shutil.which(program, path=path) if os.sep not in program else program
    if where is None and os.sep not in program:
        return Check(
            "command",
            False,
            f"{program} is not on the PATH, so the agent cannot run `{command}`: put antiloop's "
            "bin directory on the PATH, or install for you alone (antiloop install --user or "
            "--local names its absolute path)",
        )
    if where is None or not os.access(where, os.X_OK) or not Path(where).is_file():
        return Check("command", False, f"{program} is not an executable file (reinstall)")
    return Check("command", True, f"{command}")


def _dry_run(agent: str, command: str, env: Mapping[str, str], cwd: str) -> Check:
    session = f"antiloop-doctor-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="antiloop-doctor-") as tmp:
        run_env = {**env, "ANTILOOP_STORE": f"sqlite:///{Path(tmp, 'doctor.db')}"}
        run_env.pop("ANTILOOP_FAIL", None)
        answers: list[str] = []
        took: list[float] = []
        where = cwd if Path(cwd).is_dir() else tmp
        for payload in dry_run_payloads(agent, session, where, _repeats(env, where)):
            started = time.perf_counter()
            try:
                proc = subprocess.run(  # noqa: S602 - the agent runs the command through a shell
                    command,
                    shell=True,
                    input=json.dumps(payload).encode(),
                    capture_output=True,
                    env=run_env,
                    cwd=where,
                    timeout=60,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return Check("dry run", False, "the hook gave no answer within 60 s")
            took.append((time.perf_counter() - started) * 1000)
            out = proc.stdout.decode("utf-8", "replace").strip()
            err = proc.stderr.decode("utf-8", "replace").strip()
            if proc.returncode != 0:
                return Check(
                    "dry run",
                    False,
                    f"{payload['hook_event_name']} exited {proc.returncode}: {err or out}",
                )
            if out:
                try:
                    json.loads(out)
                except ValueError:
                    return Check("dry run", False, f"the answer is not JSON: {out[:200]}")
            answers.append(out)
    unchecked = next((a for a in answers if "not checked" in a), None)
    if unchecked:
        return Check("dry run", False, f"the hook could not judge: {unchecked[:300]}")
    if answers[0]:
        return Check("dry run", False, f"a harmless call got an answer: {answers[0][:200]}")
    if "AGENT::" not in answers[-1]:
        return Check(
            "dry run", False, f"a repeated call was not stopped: {answers[-1][:200] or '(nothing)'}"
        )
    mean = sum(took) / len(took)
    return Check(
        "dry run",
        True,
        f"{len(answers)} invocations as the agent runs them: the repeat is stopped "
        f"with its fingerprint ({mean:.0f} ms each)",
    )


def _repeats(env: Mapping[str, str], cwd: str) -> int:
    """How many identical calls the hook's config takes to call a repeat (2 by default)."""
    from antiloop.hooks.config import load_hook_config

    try:
        return min(max(load_hook_config(None, env, cwd).guard_config().repeat_threshold, 2), 20)
    except Exception:
        return 2


def _store(env: Mapping[str, str]) -> Check:
    from antiloop.hooks.runner import store_url
    from antiloop.stores import open_store

    url = store_url(env)
    session = f"antiloop-doctor-{uuid.uuid4().hex[:8]}"
    try:
        store = open_store(url)
        try:
            with store.transaction(session) as state:
                state.steps += 0
            store.forget(session)
        finally:
            store.close()
    except Exception as exc:
        return Check("store", False, f"{url}: {exc}")
    return Check("store", True, f"{url} is writable")


def _config(env: Mapping[str, str], cwd: str | None, option: str | None = None) -> Check:
    """The config exactly as the hook reads it (``--config``, ``ANTILOOP_CONFIG``, project)."""
    from antiloop.hooks.config import load_hook_config

    try:
        config = load_hook_config(option, env, cwd)
        config.guard_config()
        config.approval_policy()
    except Exception as exc:
        return Check("config", False, f"{exc}: every hook call would answer 'not checked'")
    where = config.source or "none found: the defaults (loops guarded, permissions the host's)"
    return Check("config", True, f"{where} (approval {config.approval}, fail {config.fail})")
