"""Put antiloop's hook entries into an agent's settings file, and take exactly them out again.

==============  ===================================  =====================================
agent           ``--user``                           ``--project``
==============  ===================================  =====================================
claude-code     ``~/.claude/settings.json``          ``.claude/settings.json``
                (``$CLAUDE_CONFIG_DIR``)             (``--local``: ``settings.local.json``)
gemini          ``~/.gemini/settings.json``          ``.gemini/settings.json``
codex           ``~/.codex/hooks.json``              ``.codex/hooks.json``
                (``$CODEX_HOME``)
==============  ===================================  =====================================

Each event gets a matcher group of its own, holding one handler whose command is
``<path>/antiloop hook <agent>``; that command is how "ours" is recognised, so every other
setting and hook is kept as it is. Installing twice changes nothing; installing with another
command replaces ours. Before the first change the file is copied to
``<name>.antiloop.bak``. Uninstalling removes our handlers (and the groups, event lists and
``hooks`` object they alone made up); when what is left equals that backup, the backup's bytes
are put back, so the file is byte for byte as it was found. Otherwise the JSON is written with
the file's own indentation, key order and line ending.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from antiloop.core.errors import ConfigError

__all__ = [
    "AGENTS",
    "BACKUP_SUFFIX",
    "InstallResult",
    "default_command",
    "find_ours",
    "hook_entries",
    "install",
    "is_ours",
    "settings_path",
    "uninstall",
]

AGENTS = ("claude-code", "gemini", "codex")
BACKUP_SUFFIX = ".antiloop.bak"
TIMEOUT_SECONDS = 30

#: agent -> event -> matcher (None: no matcher, the event fires for everything)
EVENTS: Mapping[str, Mapping[str, str | None]] = {
    "claude-code": {
        "SessionStart": None,
        "UserPromptSubmit": None,
        "PreToolUse": "*",
        "PostToolUse": "*",
        "PostToolUseFailure": "*",
        "Stop": None,
        "SubagentStop": None,
        "SessionEnd": None,
    },
    "gemini": {
        "SessionStart": None,
        "BeforeAgent": None,
        "BeforeTool": ".*",
        "AfterTool": ".*",
        "AfterAgent": None,
        "SessionEnd": None,
    },
    "codex": {
        "SessionStart": None,
        "UserPromptSubmit": None,
        "PreToolUse": None,
        "PostToolUse": None,
        "Stop": None,
    },
}


@dataclass(frozen=True, slots=True)
class InstallResult:
    """What an install or uninstall did.

    Attributes:
        path: the settings file.
        changed: whether the file was written (or removed).
        backup: the backup file, when there is one.
        restored: uninstall put the backup's bytes back.
        removed: uninstall deleted a file that only held our entries.
        events: the events whose entries were added or removed.
    """

    path: Path
    changed: bool
    backup: Path | None = None
    restored: bool = False
    removed: bool = False
    events: tuple[str, ...] = ()


def _check_agent(agent: str) -> None:
    if agent not in AGENTS:
        raise ConfigError(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")


def settings_path(
    agent: str,
    scope: str = "user",
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The settings file ``install`` edits for ``agent`` at ``scope`` (user, project, local)."""
    _check_agent(agent)
    env = os.environ if env is None else env
    if scope not in ("user", "project", "local"):
        raise ConfigError(f"unknown scope {scope!r}: use user, project or local")
    if scope == "local" and agent != "claude-code":
        raise ConfigError("--local is Claude Code's settings.local.json only")
    base = Path(cwd) if cwd is not None else Path.cwd()
    user_home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if agent == "claude-code":
        if scope == "user":
            home = env.get("CLAUDE_CONFIG_DIR")
            return (Path(home) if home else user_home / ".claude").expanduser() / "settings.json"
        name = "settings.local.json" if scope == "local" else "settings.json"
        return base / ".claude" / name
    if agent == "gemini":
        root = user_home / ".gemini" if scope == "user" else base / ".gemini"
        return root / "settings.json"
    if scope == "project":
        return base / ".codex" / "hooks.json"
    home = env.get("CODEX_HOME")
    return (Path(home).expanduser() if home else user_home / ".codex") / "hooks.json"


def default_command(agent: str, executable: str | None = None, *, shared: bool = False) -> str:
    """The command line an agent runs: this installation's ``antiloop hook <agent>``.

    For settings of this machine (user, local) the ``antiloop`` script beside the running
    interpreter is named by its absolute path, so the hook works whatever the agent's PATH;
    without one, ``<python> -m antiloop`` is used. Settings a team shares (``shared``, the
    project scope) carry no machine path: ``antiloop hook <agent>``, found on the PATH.
    """
    _check_agent(agent)
    if shared:
        return f"antiloop hook {agent}"
    python = Path(executable or sys.executable)
    script = python.with_name("antiloop.exe" if os.name == "nt" else "antiloop")
    if script.is_file():
        base = shlex.quote(str(script))
    else:
        base = f"{shlex.quote(str(python))} -m antiloop"
    return f"{base} hook {agent}"


#: Claude Code events that take no HTTP hooks ("HTTP hooks are not supported for SessionStart")
NO_HTTP = frozenset({"SessionStart", "Setup"})


def events_for(agent: str, command: str) -> list[str]:
    """The events ``install`` gives an entry for ``command`` (an HTTP URL skips ``NO_HTTP``)."""
    _check_agent(agent)
    return [e for e in EVENTS[agent] if not (is_url(command) and e in NO_HTTP)]


def hook_entries(agent: str, command: str) -> dict[str, dict[str, Any]]:
    """Event -> the matcher group ``install`` adds for it."""
    _check_agent(agent)
    groups: dict[str, dict[str, Any]] = {}
    wanted = events_for(agent, command)
    for event, matcher in EVENTS[agent].items():
        if event not in wanted:
            continue
        handler: dict[str, Any] = {"type": "command", "command": command}
        if is_url(command):
            if agent != "claude-code":
                raise ConfigError(f"{agent} has no HTTP hooks; install the command hook instead")
            handler = http_handler(command)
        elif agent == "gemini":
            handler = {"name": "antiloop", **handler, "timeout": TIMEOUT_SECONDS * 1000}
        else:
            handler["timeout"] = TIMEOUT_SECONDS
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [handler]
        groups[event] = group
    return groups


def is_url(command: str) -> bool:
    """Whether an install target is the URL of an ``antiloop serve`` (an HTTP hook)."""
    return command.startswith(("http://", "https://"))


def hook_url(server: str, agent: str) -> str:
    """The hook endpoint of an ``antiloop serve`` at ``server`` for ``agent``."""
    return f"{server.rstrip('/')}/v1/hooks/{agent}"


def http_handler(url: str) -> dict[str, Any]:
    """A Claude Code ``http`` hook: the service answers in about a millisecond, no process.

    The token is read from ``ANTILOOP_TOKEN`` in Claude Code's environment; a service that is
    down fails open (Claude Code treats a connection error as a non-blocking error).
    """
    return {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer $ANTILOOP_TOKEN"},
        "allowedEnvVars": ["ANTILOOP_TOKEN"],
        "timeout": TIMEOUT_SECONDS,
    }


def is_ours(handler: object, agent: str) -> bool:
    """Whether a hook handler is antiloop's hook for ``agent`` (by its command line or URL)."""
    if not isinstance(handler, dict):
        return False
    if handler.get("type") == "http":
        url = handler.get("url")
        return isinstance(url, str) and url.rstrip("/").endswith(f"/v1/hooks/{agent}")
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    pattern = _OURS.get(agent)
    if pattern is None:
        pattern = _OURS[agent] = re.compile(
            r"(?:^|[\s/\\\"'])antiloop(?:\.exe)?[\"']?\s+hook\s+" + re.escape(agent) + r"(?:\s|$)"
        )
    return pattern.search(command) is not None


_OURS: dict[str, re.Pattern[str]] = {}


def find_ours(data: Mapping[str, Any], agent: str) -> dict[str, list[dict[str, Any]]]:
    """Event -> our handlers found in a settings object."""
    found: dict[str, list[dict[str, Any]]] = {}
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list):
                mine = [h for h in handlers if is_ours(h, agent)]
                if mine:
                    found.setdefault(event, []).extend(mine)
    return found


# -- reading and writing, keeping the file's own form ---------------------------------------


@dataclass(frozen=True, slots=True)
class _Form:
    indent: str | int | None = 2
    newline: str = "\n"
    final_newline: bool = True
    ascii: bool = False


def _form_of(text: str) -> _Form:
    if not text.strip():
        return _Form()
    newline = "\r\n" if "\r\n" in text else "\n"
    match = re.search(r"^[{\[][ \t]*\r?\n([ \t]+)\S", text, re.MULTILINE)
    indent: str | int | None
    if match:
        lead = match.group(1)
        indent = len(lead) if lead == " " * len(lead) else lead
    else:
        indent = None if "\n" not in text.strip() else 2
    return _Form(indent, newline, text.endswith(("\n", "\r\n")), "\\u" in text)


def _dumps(data: Any, form: _Form) -> str:
    separators = None if form.indent is not None else (", ", ": ")
    text = json.dumps(data, indent=form.indent, ensure_ascii=form.ascii, separators=separators)
    if form.newline != "\n":
        text = text.replace("\n", form.newline)
    return text + (form.newline if form.final_newline else "")


def _read(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8; antiloop leaves it as it is") from None
    if not text.strip():
        return raw, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); antiloop leaves it as it is: fix it, or add "
            "the entries by hand (antiloop install --print shows them)"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return raw, data


def _write(path: Path, data: str | bytes, mode_from: Path | None = None) -> None:
    """Write atomically (a temporary file renamed over), keeping the file's permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.antiloop-{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        if mode_from is not None and mode_from.exists():
            tmp.chmod(mode_from.stat().st_mode & 0o7777)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _without_ours(data: dict[str, Any], agent: str) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``data`` with our handlers (and what only they made up) removed."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data, []
    touched: list[str] = []
    new_hooks: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            new_hooks[event] = groups
            continue
        kept_groups = []
        removed_here = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(is_ours(h, agent) for h in handlers):
                kept_groups.append(group)
                continue
            removed_here = True
            rest = [h for h in handlers if not is_ours(h, agent)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if removed_here:
            touched.append(event)
            if kept_groups:
                new_hooks[event] = kept_groups
        else:
            new_hooks[event] = groups
    if not touched:
        return data, []
    out = dict(data)
    if new_hooks:
        out["hooks"] = new_hooks
    else:
        del out["hooks"]
    return out, touched


def install(
    agent: str, path: Path, command: str | None = None, *, backup: bool = True
) -> InstallResult:
    """Merge our hook entries into ``path``; idempotent; keeps every other setting and hook.

    Raises:
        ConfigError: the file is not a JSON object, or its ``hooks`` is not one.
    """
    _check_agent(agent)
    command = command or default_command(agent)
    raw, data = _read(path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is a {type(hooks).__name__}, not an object")
    for event in EVENTS[agent]:
        if event in hooks and not isinstance(hooks[event], list):
            raise ConfigError(f"{path}: hooks.{event} is not a list; antiloop leaves it as it is")
    wanted = hook_entries(agent, command)
    present = find_ours(data, agent)
    if set(present) == set(wanted) and all(present[e] == wanted[e]["hooks"] for e in wanted):
        return InstallResult(path, changed=False, backup=_existing_backup(path))
    pristine, _ = _without_ours(data, agent)
    bak: Path | None = _existing_backup(path)
    if raw is not None and backup and not present:
        bak = path.with_name(path.name + BACKUP_SUFFIX)
        bak.write_bytes(raw)
    merged = dict(pristine)
    new_hooks = dict(merged.get("hooks", {}))
    for event, group in wanted.items():
        new_hooks[event] = [*new_hooks.get(event, []), group]
    merged["hooks"] = new_hooks
    form = _form_of(raw.decode("utf-8-sig") if raw else "")
    _write(path, _dumps(merged, form), mode_from=path)
    return InstallResult(path, changed=True, backup=bak, events=tuple(wanted))


def _existing_backup(path: Path) -> Path | None:
    bak = path.with_name(path.name + BACKUP_SUFFIX)
    return bak if bak.is_file() else None


def uninstall(agent: str, path: Path) -> InstallResult:
    """Remove exactly our hook entries from ``path`` (byte-identical when nothing else changed).

    Raises:
        ConfigError: the file is not a JSON object.
    """
    _check_agent(agent)
    raw, data = _read(path)
    if raw is None:
        return InstallResult(path, changed=False)
    rest, touched = _without_ours(data, agent)
    if not touched:
        return InstallResult(path, changed=False, backup=_existing_backup(path))
    bak = _existing_backup(path)
    if bak is not None:
        try:
            _, before = _read(bak)
        except ConfigError:
            before = None
        if before == rest:
            _write(path, bak.read_bytes(), mode_from=path)
            bak.unlink()
            return InstallResult(path, changed=True, restored=True, events=tuple(touched))
    elif not rest:
        path.unlink()
        return InstallResult(path, changed=True, removed=True, events=tuple(touched))
    form = _form_of(raw.decode("utf-8-sig"))
    _write(path, _dumps(rest, form), mode_from=path)
    return InstallResult(path, changed=True, backup=bak, events=tuple(touched))
