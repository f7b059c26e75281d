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
    if ns.server:
        call(ns, "POST", f"/v1/sessions/{ns.session}/stop", {"by": by})
    else:
        open_ledger(ns).request_stop(ns.session, by)
    print(f"antiloop: session {ns.session} stops at its next step (by {by})")
    return 0
