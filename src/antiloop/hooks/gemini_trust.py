"""Gemini CLI's trusted folders: a project's ``.gemini/settings.json`` hooks load only there.

Gemini CLI (0.61) reads ``trustedFolders.json`` (``GEMINI_CLI_TRUSTED_FOLDERS_PATH``, else
``~/.gemini/trustedFolders.json``): a map of absolute paths to ``TRUST_FOLDER`` (that folder and
below), ``TRUST_PARENT`` (its parent and below) or ``DO_NOT_TRUST``; the most specific rule
wins. ``--skip-trust`` and ``GEMINI_CLI_TRUST_WORKSPACE=true`` let a run start in an untrusted
folder but do not load the project's hooks. With ``security.folderTrust.enabled = false`` in the
user's settings every folder is trusted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["folder_trust", "trusted_folders_path"]


def trusted_folders_path(env: Mapping[str, str] | None = None) -> Path:
    """Where Gemini CLI keeps its trusted folders."""
    env = os.environ if env is None else env
    named = env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
    if named:
        return Path(named).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".gemini" / "trustedFolders.json"


def _load(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def folder_trust(project: Path, env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(trusted, one line for doctor) for the project whose hooks Gemini CLI should load."""
    env = os.environ if env is None else env
    settings = _load(Path(env.get("HOME") or Path.home()) / ".gemini" / "settings.json")
    security = settings.get("security") if isinstance(settings, dict) else None
    folder_cfg = security.get("folderTrust") if isinstance(security, dict) else None
    if isinstance(folder_cfg, dict) and folder_cfg.get("enabled") is False:
        return True, "folder trust is off in the user settings: the project's hooks load"
    rules_path = trusted_folders_path(env)
    rules = _load(rules_path)
    here = project.resolve()
    best: tuple[int, str] | None = None
    for raw, level in rules.items() if isinstance(rules, dict) else ():
        if not isinstance(raw, str) or not isinstance(level, str):
            continue
        root = Path(raw).expanduser().resolve()
        if level == "TRUST_PARENT":
            root = root.parent
        if here == root or root in here.parents:
            depth = len(root.parts)
            if best is None or depth > best[0]:
                best = (depth, level)
    if best is not None and best[1] in ("TRUST_FOLDER", "TRUST_PARENT"):
        return True, f"Gemini CLI trusts {here} ({rules_path}): the project's hooks load"
    step = (
        f"Gemini CLI loads the project's hooks only in a trusted folder, and {here} is not one "
        f"(--skip-trust and GEMINI_CLI_TRUST_WORKSPACE do not load them): trust it when Gemini "
        f'asks (or /permissions), or add "{here}": "TRUST_FOLDER" to {rules_path}; '
        "for headless runs in untrusted folders use `antiloop install gemini` (user settings)"
    )
    return False, step
