"""``antiloop fleet``: the fleet view; ``fleet kill`` / ``fleet lift`` / ``fleet kills``.

Through a service (``--server URL``: any replica) or the store directly (``--store
redis://…``: the fleet's keys beside the sessions'). A store that is not Redis keeps its fleet
controls in the process that serves it: use ``--server`` there.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.server.client import add_target, call


def _targets(parser: argparse.ArgumentParser, keep: bool) -> None:
    """``--server``/``--token``/``--store`` on a subcommand too (before or after it)."""
    if keep:
        add_target(parser)
        return
    hidden = argparse.SUPPRESS
    parser.add_argument("--server", default=hidden, help="the service (ANTILOOP_URL)")
    parser.add_argument("--token", default=hidden, help="the service's token (ANTILOOP_TOKEN)")
    parser.add_argument("--store", default=hidden, help="the store URL (redis://…)")


def _selector(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every session of the fleet")
    which.add_argument("--agent", help="every session's steps of this agent name")
    which.add_argument("--fingerprint", help="every step of this fingerprint's procedure")
    which.add_argument("--session", help="one session")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop fleet``."""
    _targets(parser, keep=True)
    parser.add_argument("--json", action="store_true", help="the view as JSON")
    parser.add_argument(
        "--config",
        default=os.environ.get("ANTILOOP_CONFIG"),
        help="antiloop.toml: its [fleet] table, with --store (default: ANTILOOP_CONFIG)",
    )
    parser.add_argument("--top", type=int, default=10, help="fingerprints shown (default 10)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    kill = sub.add_parser("kill", help="stop every session a kill names, on every replica")
    _selector(kill)
    kill.add_argument("--reason", default="", help="why (shown in the stop verdict)")
    kill.add_argument("--by", help="who sets it (default: your user name)")
    lift = sub.add_parser("lift", help="lift a kill")
    _selector(lift)
    kills = sub.add_parser("kills", help="list the active kills")
    for p in (kill, lift, kills):
        _targets(p, keep=False)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON")
    parser.set_defaults(handler=run)


def _scope(ns: argparse.Namespace) -> tuple[str, str]:
    for scope in ("agent", "fingerprint", "session"):
        value = getattr(ns, scope)
        if value is not None:
            return scope, value
    return "all", ""


def _fleet(ns: argparse.Namespace) -> Any:
    url = ns.store or os.environ.get("ANTILOOP_STORE")
    if not url:
        raise ConfigError("give --server URL (a replica) or --store redis://… (the shared store)")
    if url.split(":", 1)[0].split("+", 1)[0] not in ("redis", "rediss"):
        raise ConfigError(
            f"{url}: a store that is not Redis keeps its fleet controls in the process that "
            "serves it: give --server URL"
        )
    from antiloop.commands.serve import fleet_config
    from antiloop.fleet import open_fleet

    return open_fleet(url, fleet_config(getattr(ns, "config", None)), watch=False)


def _body(ns: argparse.Namespace) -> dict[str, Any]:
    scope, target = _scope(ns)
    return {"all": True} if scope == "all" else {scope: target}


def run(ns: argparse.Namespace) -> int:
    """The view, or a kill, a lift, the list of kills."""
    action = ns.action
    as_json = bool(getattr(ns, "json", False))
    if action == "kill":
        by = ns.by or getpass.getuser()
        if ns.server:
            made = call(ns, "POST", "/v1/fleet/kill", {**_body(ns), "by": by, "reason": ns.reason})
        else:
            fleet = _fleet(ns)
            try:
                made = fleet.kill(*_scope(ns), by=by, reason=ns.reason).to_dict()
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        if as_json:
            print(json.dumps(made))
        else:
            what = made["target"] or "every session of the fleet"
            print(f"antiloop: killed {made['scope']} {what} (by {made['by']}): its steps stop")
        return 0
    if action == "lift":
        if ns.server:
            lifted = call(ns, "POST", "/v1/fleet/lift", _body(ns))
        else:
            from antiloop.fleet.kills import key_of

            found = _fleet(ns).lift(*_scope(ns))
            lifted = {"key": key_of(*_scope(ns)), "lifted": found.to_dict() if found else None}
        if as_json:
            print(json.dumps(lifted))
        elif lifted["lifted"] is None:
            print(f"antiloop: no kill of {lifted['key']} to lift", file=sys.stderr)
            return 1
        else:
            print(f"antiloop: lifted the kill of {lifted['key']}")
        return 0
    if action == "kills":
        if ns.server:
            kills = call(ns, "GET", "/v1/fleet/kills")["kills"]
        else:
            kills = [k.to_dict() for k in _fleet(ns).kills()]
        if as_json:
            print(json.dumps({"kills": kills}))
        for k in [] if as_json else kills:
            print(f"{k['key']}\tby {k['by']}\t{k['reason']}")
        return 0
    if ns.top < 1:
        raise ConfigError("--top must be at least 1")
    if ns.server:
        view = call(ns, "GET", f"/v1/fleet?top={ns.top}")
    else:
        fleet = _fleet(ns)
        view = fleet.status(ns.top)
    if as_json:
        print(json.dumps(view, indent=2))
    else:
        from antiloop.fleet.status import render

        print(render(view))
    return 0
