"""Codex's hook trust: a hook from ``hooks.json`` runs only once its hash is recorded as trusted.

Codex (0.171) reads ``[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]`` tables of
the user's ``config.toml`` (``$CODEX_HOME``, else ``~/.codex``); a handler runs when the table's
``trusted_hash`` equals the handler's current hash. The hash is Codex's own: sha256 of the
canonical JSON (sorted keys, no spaces) of ``{event_name, matcher?, hooks: [handler]}``, the
handler normalised to ``type``, ``command``, ``timeout`` (600 when unset) and ``async``
(``codex-rs/hooks/src/engine/discovery.rs``, ``command_hook_hash``). Project hooks also need the
project itself trusted (``[projects."<dir>"] trust_level = "trusted"``).

``install`` records the trust of antiloop's own handlers with the person's consent; ``doctor``
fails while one is missing or stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.hooks import installer

__all__ = [
    "codex_config_path",
    "project_trusted",
    "record_trust",
    "trust_entries",
    "untrusted_events",
]

#: Codex's event keys (``hook_event_key_label``)
EVENT_KEYS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
_NO_MATCHER = frozenset({"UserPromptSubmit", "Stop"})
_DEFAULT_TIMEOUT = 600


def codex_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The user's ``config.toml``: ``$CODEX_HOME/config.toml`` or ``~/.codex/config.toml``."""
    env = os.environ if env is None else env
    home = env.get("CODEX_HOME")
    base = Path(home).expanduser() if home else Path(env.get("HOME") or Path.home()) / ".codex"
    return base / "config.toml"


def handler_hash(event: str, matcher: str | None, handler: Mapping[str, Any]) -> str:
    """Codex's trust hash of one command handler of ``event``."""
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    normal: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": max(int(timeout), 1) if isinstance(timeout, int) else _DEFAULT_TIMEOUT,
        "async": handler.get("async") is True,
    }
    if isinstance(handler.get("statusMessage"), str):
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_KEYS[event], "hooks": [normal]}
    if matcher is not None and event not in _NO_MATCHER:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def trust_entries(hooks_path: Path) -> dict[str, tuple[str, str]]:
    """Trust key -> (event, hash) of every antiloop handler in a Codex ``hooks.json``."""
    _, data = installer._read(hooks_path)
    hooks = data.get("hooks")
    out: dict[str, tuple[str, str]] = {}
    if not isinstance(hooks, dict):
        return out
    source = str(hooks_path.resolve())
    for event, groups in hooks.items():
        if event not in EVENT_KEYS or not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            for h, handler in enumerate(handlers):
                if installer.is_ours(handler, "codex"):
                    key = f"{source}:{EVENT_KEYS[event]}:{g}:{h}"
                    out[key] = (event, handler_hash(event, matcher, handler))
    return out


def _read_config(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def untrusted_events(hooks_path: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """The events whose antiloop handler Codex would not run (trust missing or stale)."""
    config = _read_config(codex_config_path(env))
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    state = state if isinstance(state, dict) else {}
    missing: list[str] = []
    for key, (event, digest) in trust_entries(hooks_path).items():
        entry = state.get(key)
        trusted = entry.get("trusted_hash") if isinstance(entry, dict) else None
        enabled = entry.get("enabled", True) if isinstance(entry, dict) else True
        if trusted != digest or enabled is False:
            missing.append(event)
    return missing


def project_trusted(project: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``config.toml`` marks ``project`` (or a parent of it) trusted."""
    projects = _read_config(codex_config_path(env)).get("projects")
    if not isinstance(projects, dict):
        return False
    here = project.resolve()
    for folder in (here, *here.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def _basic(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string for these values


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def record_trust(hooks_path: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """Write the trust of our handlers in ``hooks_path`` to ``config.toml``; the keys written.

    Only our ``[hooks.state."…"]`` tables are added or updated; every other line is kept.
    """
    config = codex_config_path(env)
    entries = trust_entries(hooks_path)
    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    _read_config(config)  # refuse to edit a file that does not parse
    lines = text.splitlines()
    written: list[str] = []
    for key, (_, digest) in entries.items():
        header = f"[hooks.state.{_basic(key)}]"
        line = f"trusted_hash = {_basic(digest)}"
        at = next((i for i, s in enumerate(lines) if s.strip() == header), None)
        if at is None:
            if lines and lines[-1].strip():
                lines.append("")
            lines += [header, line]
        else:
            end = next(
                (i for i in range(at + 1, len(lines)) if _HEADER.match(lines[i])), len(lines)
            )
            slot = next(
                (i for i in range(at + 1, end) if lines[i].strip().startswith("trusted_hash")),
                None,
            )
            if slot is None:
                lines.insert(at + 1, line)
            elif lines[slot] == line:
                continue
            else:
                lines[slot] = line
        written.append(key)
    if written:
        new = "\n".join(lines) + "\n"
        _read_config_text(new, config)
        installer._write(config, new, mode_from=config)
    return written


def _read_config_text(text: str, path: Path) -> None:
    import tomllib

    try:
        tomllib.loads(text)
    except ValueError as exc:  # pragma: no cover - our lines are valid TOML
        raise ConfigError(f"{path}: the trust entries would not parse ({exc})") from None
