"""``antiloop stop SESSION``: stop a guarded run at its next step (as Ctrl+C does locally)."""

from __future__ import annotations

import argparse
import getpass

from antiloop.server.client import add_target, call, open_ledger


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop stop``."""
    parser.add_argument("session", help="the session to stop")
    parser.add_argument("--by", help="who stops it (default: your user name)")
    add_target(parser)
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Ask the session to stop; its next step gets a stop verdict."""
    by = ns.by or getpass.getuser()
    session = ns.session
    if ns.server:
        call(ns, "POST", f"/v1/sessions/{session}/stop", {"by": by})
    else:
        from antiloop.core.text.suggest import resolve

        ledger = open_ledger(ns)
        session = resolve(session, ledger.sessions(), "session")  # a unique prefix will do
        ledger.request_stop(session, by)
    print(f"antiloop: session {session} stops at its next step (by {by})")
    return 0
