"""``antiloop install <agent>``: add antiloop's hooks to a coding agent's settings (or remove them).

Examples::

antiloop install claude-code              # ~/.claude/settings.json
antiloop install claude-code --project    # .claude/settings.json of this directory
antiloop install gemini --project         # .gemini/settings.json
antiloop install codex                    # ~/.codex/hooks.json
antiloop install claude-code --uninstall  # exactly our entries out again
antiloop install claude-code --print      # show the entries, touch nothing
"""

from __future__ import annotations

import argparse
import json
import sys

NOTES = {
    "codex": (
        "Codex runs hooks from hooks.json once they are enabled and trusted: on Codex releases "
        "before hooks were on by default, add `[features] codex_hooks = true` to config.toml; "
        "project hooks run once the project is trusted. Codex honours only `deny` before a "
        "call, so the approval policy's `ask` is left to Codex's own approval."
    ),
    "gemini": (
        "Gemini CLI runs hooks when `hooksConfig.enabled` is true (the default on recent "
        "releases); the approval policy's `ask` is left to Gemini's own confirmation."
    ),
}


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop install``."""
    parser.add_argument("agent", choices=["claude-code", "gemini", "codex"], help="the agent")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--user", dest="scope", action="store_const", const="user", help="for you (default)"
    )
    scope.add_argument(
        "--project",
        dest="scope",
        action="store_const",
        const="project",
        help="for this directory's project (shared settings file)",
    )
    scope.add_argument(
        "--local",
        dest="scope",
        action="store_const",
        const="local",
        help="Claude Code's .claude/settings.local.json (not committed)",
    )
    parser.add_argument("--uninstall", action="store_true", help="remove antiloop's entries")
    parser.add_argument("--settings", help="edit this settings file instead")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--command", help="the hook command (default: this antiloop)")
    target.add_argument(
        "--http",
        metavar="URL",
        help="Claude Code only: HTTP hooks to an `antiloop serve` at URL (no process per call; "
        "Claude Code must have ANTILOOP_TOKEN in its environment)",
    )
    parser.add_argument("--no-backup", action="store_true", help="write no .antiloop.bak copy")
    parser.add_argument("--print", action="store_true", help="print the entries, change nothing")
    parser.set_defaults(handler=run, scope="user")


def run(ns: argparse.Namespace) -> int:
    """Install or uninstall; prints what was done."""
    from pathlib import Path

    from antiloop.hooks import installer

    if ns.http:
        command = installer.hook_url(ns.http, ns.agent)
    else:
        command = ns.command or installer.default_command(ns.agent)
    if ns.print:
        print(json.dumps({"hooks": _listed(installer.hook_entries(ns.agent, command))}, indent=2))
        return 0
    path = Path(ns.settings) if ns.settings else installer.settings_path(ns.agent, ns.scope)
    if ns.uninstall:
        result = installer.uninstall(ns.agent, path)
        if not result.changed:
            print(f"antiloop: no antiloop hooks in {path}; nothing changed")
        elif result.restored:
            print(f"antiloop: removed the hooks from {path} (restored byte for byte)")
        elif result.removed:
            print(f"antiloop: removed {path} (it held only antiloop's hooks)")
        else:
            print(f"antiloop: removed the hooks of {len(result.events)} events from {path}")
        return 0
    result = installer.install(ns.agent, path, command, backup=not ns.no_backup)
    if not result.changed:
        print(f"antiloop: already installed in {path}; nothing changed")
    else:
        backup = f" (backup: {result.backup})" if result.backup else ""
        events = ", ".join(result.events)
        print(f"antiloop: added hooks for {events} to {path}{backup}")
        print(f"antiloop: {'url' if ns.http else 'command'}: {command}")
    if ns.agent in NOTES:
        print(f"antiloop: note: {NOTES[ns.agent]}", file=sys.stderr)
    scope = "" if ns.scope == "user" else f" --{ns.scope}"
    settings = f" --settings {path}" if ns.settings else ""
    print(f"antiloop: check it with: antiloop doctor {ns.agent}{scope}{settings}")
    return 0


def _listed(entries: dict[str, dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    return {event: [group] for event, group in entries.items()}
