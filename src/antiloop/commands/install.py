"""``antiloop install <agent>``: add antiloop's hooks to a coding agent's settings (or remove them).

Examples::

antiloop install claude-code              # ~/.claude/settings.json
antiloop install claude-code --project    # .claude/settings.json of this directory
antiloop install gemini --project         # .gemini/settings.json
antiloop install codex --trust            # ~/.codex/hooks.json, and Codex's trust of them
antiloop install claude-code --uninstall  # exactly our entries out again
antiloop install claude-code --print      # show the entries, touch nothing
antiloop install claude-code --on-failure block   # Claude Code blocks when the hook fails

The command names the hook client by its absolute path, so it runs whatever the agent's PATH;
`install` then starts the hook daemon, so that the first session finds it warm.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from antiloop.core.errors import ConfigError

NOTES = {
    "codex": (
        "Codex runs a hook from hooks.json only once it is trusted (its hash recorded under "
        "[hooks.state] in ~/.codex/config.toml), and project hooks only in a trusted project. "
        "Codex honours only `deny` before a call, so approvals (opt-in) are left to Codex's own."
    ),
    "gemini": (
        "Gemini CLI runs hooks when `hooksConfig.enabled` is true (the default), and a "
        "project's hooks only in a trusted folder (--skip-trust does not load them); approvals "
        "(opt-in) are left to Gemini's own confirmation."
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
    parser.add_argument(
        "--trust",
        action="store_true",
        help="Codex: record in ~/.codex/config.toml that you trust antiloop's hooks (Codex runs "
        "no hook it has not been told to trust); asked interactively when not given",
    )
    parser.add_argument(
        "--on-failure",
        choices=["block", "allow"],
        help="Claude Code only: what a failure of the hook does (its onFailure): block the "
        "action (and antiloop fails closed), or allow it (the default); kept by later installs",
    )
    parser.add_argument("--no-backup", action="store_true", help="write no .antiloop.bak copy")
    parser.add_argument("--print", action="store_true", help="print the entries, change nothing")
    parser.set_defaults(handler=run, scope="user")


def run(ns: argparse.Namespace) -> int:
    """Install or uninstall; prints what was done."""
    from antiloop.hooks import installer

    shared = ns.scope == "project" and not ns.settings
    if ns.on_failure and ns.agent != "claude-code":
        raise ConfigError("--on-failure is Claude Code's onFailure; Gemini CLI and Codex have none")
    if ns.command:
        _check_command(ns.command)
    path = Path(ns.settings) if ns.settings else installer.settings_path(ns.agent, ns.scope)
    on_failure = ns.on_failure
    if on_failure is None and ns.agent == "claude-code" and not ns.uninstall:
        try:
            on_failure = installer.on_failure_of(installer._read(path)[1], ns.agent)
        except ConfigError:
            on_failure = None  # install says what is wrong with the file
    if ns.http:
        command = installer.hook_url(ns.http, ns.agent)
    else:
        command = ns.command or installer.default_command(ns.agent, on_failure=on_failure)
    if ns.print:
        entries = installer.hook_entries(ns.agent, command, on_failure)
        print(json.dumps({"hooks": _listed(entries)}, indent=2))
        return 0
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
    result = installer.install(
        ns.agent, path, command, backup=not ns.no_backup, on_failure=on_failure
    )
    if not result.changed:
        print(f"antiloop: already installed in {path}; nothing changed")
    else:
        backup = f" (backup: {result.backup})" if result.backup else ""
        events = ", ".join(result.events)
        print(f"antiloop: added hooks for {events} to {path}{backup}")
        print(f"antiloop: {'url' if ns.http else 'command'}: {command}")
    if on_failure == "block":
        print("antiloop: on failure: block (Claude Code blocks the action when the hook fails)")
    if shared and not ns.http:
        print(
            f"antiloop: note: {path} names this machine's antiloop by its absolute path; on a "
            "machine without it the hook says so and checks nothing (run antiloop install there)",
            file=sys.stderr,
        )
    if not ns.http and not ns.command:
        from antiloop.hooks.daemon import ensure_running

        print(f"antiloop: {ensure_running()}")
    if ns.agent in NOTES:
        print(f"antiloop: note: {NOTES[ns.agent]}", file=sys.stderr)
    scope = "" if ns.scope == "user" else f" --{ns.scope}"
    if ns.agent == "codex":
        _codex_trust(path, ns.trust, scope)
    elif ns.agent == "gemini" and shared:
        from antiloop.hooks.gemini_trust import folder_trust

        trusted, detail = folder_trust(path.parent.parent)
        if not trusted:
            print(f"antiloop: {detail}")
    settings = f" --settings {path}" if ns.settings else ""
    print(f"antiloop: check it with: antiloop doctor {ns.agent}{scope}{settings}")
    return 0


def _check_command(command: str) -> None:
    """``--command`` must name its program by an absolute path: the agent's PATH is unknown."""
    from antiloop.hooks import installer

    try:
        argv = installer.client_of(command)
    except ValueError as exc:
        raise ConfigError(f"--command {command!r} does not parse as a shell line: {exc}") from None
    if not argv or not Path(argv[0]).is_absolute():
        raise ConfigError(
            f"--command {command!r} names its program by the PATH, which the agent may not "
            "have: give its absolute path (or leave --command out: this antiloop's own)"
        )


def _codex_trust(path: object, given: bool, scope: str) -> None:
    """Record Codex's trust of our hooks with the person's consent, or print the one step."""
    from pathlib import Path

    from antiloop.hooks import codex_trust

    hooks = Path(str(path))
    missing = codex_trust.untrusted_events(hooks)
    if not missing:
        return
    config = codex_trust.codex_config_path()
    consent = given
    if not given and sys.stdin.isatty() and sys.stdout.isatty():
        answer = input(f"antiloop: record in {config} that Codex may run these hooks? [y/N] ")
        consent = answer.strip().lower() in ("y", "yes")
    if consent:
        written = codex_trust.record_trust(hooks)
        print(f"antiloop: Codex trusts the hooks now ({len(written)} entries in {config})")
    else:
        print(
            f"antiloop: Codex will not run these hooks until you trust them: run "
            f"`antiloop install codex{scope} --trust` (or review them in Codex with /hooks)"
        )


def _listed(entries: dict[str, dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    return {event: [group] for event, group in entries.items()}
