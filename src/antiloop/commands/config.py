"""``antiloop config check [FILE]``: validate a config with the parser every command uses.

Without FILE, the file the hooks would read: ``ANTILOOP_CONFIG``, else ``antiloop.toml`` in
the project directory (``CLAUDE_PROJECT_DIR``, ``GEMINI_PROJECT_DIR``) or here.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from antiloop.core.errors import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop config``."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate a config file (every key and table)")
    check.add_argument("file", nargs="?", help="the file (default: the one the hooks read)")
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Validate the file: one line saying what it holds, or what is wrong in it."""
    from antiloop.hooks.config import find_config

    path = find_config(ns.file, os.environ, str(Path.cwd()))
    if path is None:
        print(
            "antiloop: no config file here (antiloop.toml, or ANTILOOP_CONFIG): the defaults apply"
        )
        return 0
    if not path.is_file():
        raise ConfigError(f"no config file {path}")
    print(f"antiloop: {path} is valid ({describe(path)})")
    return 0


def describe(path: Path | str) -> str:
    """Check every part of a config file as the part it configures reads it; say what it sets.

    Raises:
        ConfigError: naming the first unknown key, bad value or unreadable part.
    """
    from antiloop.approval.policy import ApprovalPolicy
    from antiloop.config import GuardConfig, read_settings
    from antiloop.hooks.config import _hook_table

    settings = read_settings(path)
    GuardConfig.from_mapping(settings.guard, source=settings.source)
    approval = settings.tables.get("approval")
    if approval is not None:
        ApprovalPolicy.from_mapping(approval, f"{settings.source} [approval]")
    _hook_table(settings.tables.get("hooks", {}), settings.source)
    _audit_table(settings.tables.get("audit", {}), settings.source)
    if "mcp" in settings.tables:
        from antiloop.commands.mcp_proxy import mcp_table

        mcp_table(settings.tables["mcp"], settings.source)
    if "budgets" in settings.tables:
        from antiloop.budgets import Budgets

        Budgets.from_mapping(settings.tables["budgets"], settings.source)
    if "fleet" in settings.tables:
        from antiloop.config import FleetConfig

        FleetConfig.from_mapping(settings.tables["fleet"], settings.source)
    if "outage" in settings.tables:
        from antiloop.outage import OutageConfig

        OutageConfig.from_mapping(settings.tables["outage"], settings.source)
    if "telemetry" in settings.tables:
        from antiloop.telemetry import telemetry_settings

        telemetry_settings(settings.tables["telemetry"], settings.source)
    parts = [f"{len(settings.guard)} guard keys"]
    parts += [f"[{name}] {len(table)} keys" for name, table in settings.tables.items()]
    return ", ".join(parts)


def _audit_table(audit: Mapping[str, object], source: str) -> None:
    """``[audit]``: ``retention``, the age ``antiloop log prune`` removes by default."""
    from antiloop.commands.log import parse_age
    from antiloop.core.text.suggest import unknown

    for key, value in audit.items():
        if key != "retention":
            raise ConfigError(f"{source} [audit]: {unknown('key', key, ['retention'])}")
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ConfigError(f"{source} [audit]: 'retention' must be an age such as \"30d\"")
        parse_age(str(value))
