"""``antiloop approve ID`` and ``antiloop deny ID``: answer a request; ``--list`` shows them."""

from __future__ import annotations

import argparse
import getpass
import json

from antiloop.printable import printable
from antiloop.server.client import add_target, call, open_ledger


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop approve`` (and ``antiloop deny``)."""
    deny = parser.prog.split()[-1] == "deny"
    parser.add_argument("id", nargs="?", help="the request id (omit with --list)")
    parser.add_argument("-m", "--comment", help="words for the agent")
    parser.add_argument("--by", help="who answers (default: your user name)")
    parser.add_argument("--list", action="store_true", help="list pending requests")
    add_target(parser)
    parser.set_defaults(handler=run, decision="deny" if deny else "approve")


def run(ns: argparse.Namespace) -> int:
    """Answer (or list) approval requests."""
    if ns.list or not ns.id:
        rows = (
            call(ns, "GET", "/v1/approvals?status=pending")["approvals"]
            if ns.server
            else [r.to_dict() for r in open_ledger(ns).list_approvals(status="pending")]
        )
        for r in rows:
            args = json.dumps(r["args"], ensure_ascii=False)[:120]
            print(printable(f"{r['id']}  {r['session']}  [{r['risk']}] {r['tool']} {args}"))
        if not rows:
            print("antiloop: no request is pending")
        return 0
    by = ns.by or getpass.getuser()
    from antiloop.core.text.suggest import resolve

    if ns.server:  # a unique prefix, as the README's `antiloop approve ID` takes from --list
        known = [r["id"] for r in call(ns, "GET", "/v1/approvals")["approvals"]]
    else:
        known = [r.id for r in open_ledger(ns).list_approvals()]
    ns.id = resolve(ns.id, known, "request")
    if ns.server:
        body = {"decision": ns.decision, "comment": ns.comment, "by": by}
        status = call(ns, "POST", f"/v1/approvals/{ns.id}", body)["status"]
    else:
        from dataclasses import replace

        from antiloop.approval import Answer, Approvals

        answer = (
            Answer.approve(by, ns.comment)
            if ns.decision == "approve"
            else Answer.deny(by, ns.comment)
        )
        ledger = open_ledger(ns)
        status = Approvals(ledger).answer(ns.id, replace(answer, channel="cli")).status
    print(f"antiloop: request {ns.id} is {status}")
    return 0 if status == ("approved" if ns.decision == "approve" else "denied") else 1
