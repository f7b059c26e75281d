"""``antiloop mcp-proxy``: guard every ``tools/call`` between an MCP client and its server.

    antiloop mcp-proxy [--config antiloop.toml] [--ask 'delete_*'] -- python my_server.py

Point the MCP client at this command instead of the server's; it starts the server itself.
The config's ``[approval]`` table (when ``--ask``/``--deny`` say nothing) is the approval
policy, ``[budgets]`` its budgets, and ``[mcp]`` ``trust_annotations = true`` (or
``--trust-annotations``) marks the server trusted: its tool annotations inform the policy.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from antiloop.config import read_settings
from antiloop.core.errors import ConfigError
from antiloop.guard import Guard

EXIT_USAGE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop mcp-proxy``."""
    parser.add_argument(
        "--config",
        help="a JSON or TOML guard config (docs/protocol.md section 7); without one, a repeat "
        "refuses the looping call only and there is no step budget",
    )
    parser.add_argument("--store", help="where sessions live, as a URL (in memory by default)")
    parser.add_argument("--session", help="the antiloop session id (a new one by default)")
    parser.add_argument("--agent", default="mcp", help="the agent name in fingerprints")
    parser.add_argument(
        "--ask",
        action="append",
        default=[],
        metavar="TOOL",
        help="a tool (shell pattern) that needs a person's approval, asked by elicitation",
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="TOOL",
        help="a tool (shell pattern) that is always refused",
    )
    parser.add_argument(
        "--approval-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for a person's answer before refusing (default 300)",
    )
    parser.add_argument(
        "--trust-annotations",
        action="store_true",
        help="trust the server's tool annotations (readOnlyHint, destructiveHint...) in the "
        "approval policy; never trusted otherwise",
    )
    parser.add_argument(
        "server",
        nargs=argparse.REMAINDER,
        help="the MCP server's command line, after --",
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop mcp-proxy``; returns the server's exit status."""
    from antiloop.integrations.mcp_proxy import PROXY_CONFIG, McpProxy, name_policy

    command = list(ns.server)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("antiloop mcp-proxy: give the server command after --", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    config, tables, source = PROXY_CONFIG, {}, "config"
    if ns.config:
        settings = read_settings(ns.config)
        config = settings.config()
        tables, source = dict(settings.tables), settings.source
    budgets = None
    if "budgets" in tables:
        from antiloop.budgets import Budgets

        budgets = Budgets.from_mapping(tables["budgets"], source)
    guard = Guard(config=config, store=ns.store, budgets=budgets)
    policy: Any = name_policy(ask=ns.ask, deny=ns.deny) if ns.ask or ns.deny else None
    if policy is None and "approval" in tables:
        from antiloop.approval.policy import ApprovalPolicy

        policy = ApprovalPolicy.from_mapping(tables["approval"], f"{source} [approval]")
    trusted = ns.trust_annotations or mcp_table(tables.get("mcp", {}), source)
    proxy = McpProxy(
        command,
        guard,
        session=ns.session,
        agent=ns.agent,
        needs_approval=policy,
        approval_timeout=ns.approval_timeout if ns.approval_timeout > 0 else None,
        trust_annotations=trusted,
    )
    try:
        return proxy.run()
    except FileNotFoundError as exc:
        print(f"antiloop mcp-proxy: cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE


def mcp_table(table: Any, source: str) -> bool:
    """``[mcp]``: ``trust_annotations`` (a boolean), whether the server's annotations count."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source} [mcp]: expected a table, not {table!r}")
    for key, value in table.items():
        if key != "trust_annotations":
            raise ConfigError(f"{source} [mcp]: unknown key {key!r} (known: trust_annotations)")
        if not isinstance(value, bool):
            raise ConfigError(f"{source} [mcp]: 'trust_annotations' must be true or false")
    return bool(table.get("trust_annotations", False))
