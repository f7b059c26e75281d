"""``antiloop doctor``: check antiloop's hook installations end to end.

Examples::

antiloop doctor                      # every installation found (user and project scopes)
antiloop doctor claude-code          # Claude Code, user settings
antiloop doctor claude-code --project
antiloop doctor --settings .claude/settings.json claude-code
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop doctor``."""
    parser.add_argument(
        "agent", nargs="?", choices=["claude-code", "gemini", "codex"], help="default: all found"
    )
    scope = parser.add_mutually_exclusive_group()
    for name in ("user", "project", "local"):
        scope.add_argument(
            f"--{name}", dest="scope", action="store_const", const=name, help=f"{name} settings"
        )
    parser.add_argument("--settings", help="check this settings file")
    parser.add_argument("--no-run", action="store_true", help="skip the dry run of the command")
    parser.set_defaults(handler=run, scope=None)


def run(ns: argparse.Namespace) -> int:
    """Print the findings; 0 when nothing failed, 1 otherwise."""
    from pathlib import Path

    from antiloop.hooks import installer
    from antiloop.hooks.doctor import diagnose, installations

    if ns.settings or ns.agent:
        agent = ns.agent or "claude-code"
        path = (
            Path(ns.settings) if ns.settings else installer.settings_path(agent, ns.scope or "user")
        )
        targets = [(agent, path)]
    else:
        targets = installations()
        if not targets:
            print("antiloop doctor: no installation found (antiloop install claude-code)")
            return 1
    failed = False
    for agent, path in targets:
        print(f"antiloop doctor: {agent} ({path})")
        for check in diagnose(agent, path, run=not ns.no_run):
            print(check.line())
            failed = failed or check.ok is False
    print("antiloop doctor: " + ("problems found" if failed else "all good"))
    return 1 if failed else 0
