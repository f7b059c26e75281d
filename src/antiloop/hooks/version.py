"""The version of the agent CLI that runs a hook, for notices about input it does not know.

Claude Code names itself in ``AI_AGENT`` (``claude-code_2-1-332_harness``); Codex installed by
npm sets ``CODEX_MANAGED_PACKAGE_ROOT`` (its ``package.json`` has the version); otherwise the
hook's parent processes are looked at for the CLI's npm package (Linux ``/proc``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cli_version"]

_PACKAGES = {
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}
_AI_AGENT = re.compile(r"^claude-code_(\d+(?:-\d+)+)")


def _package_version(root: Path) -> str | None:
    try:
        data = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def _from_processes(package: str) -> str | None:
    pid = os.getppid()
    for _ in range(4):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        for word in argv:
            text = word.decode("utf-8", "replace")
            at = text.find(f"/node_modules/{package}/")
            if at >= 0:
                found = _package_version(Path(text[: at + len(f"/node_modules/{package}")]))
                if found:
                    return found
        match = re.search(r"^PPid:\s*(\d+)", status, re.M)
        if match is None or match.group(1) in ("0", "1"):
            return None
        pid = int(match.group(1))
    return None


def cli_version(dialect: str, env: Mapping[str, str]) -> str:
    """``<version>`` of the CLI running this hook, or ``(version unknown)``."""
    if dialect == "claude-code":
        match = _AI_AGENT.match(env.get("AI_AGENT") or "")
        if match:
            return match.group(1).replace("-", ".")
    if dialect == "codex" and env.get("CODEX_MANAGED_PACKAGE_ROOT"):
        found = _package_version(Path(env["CODEX_MANAGED_PACKAGE_ROOT"]))
        if found:
            return found
    package = _PACKAGES.get(dialect)
    found = _from_processes(package) if package else None
    return found or "(version unknown)"
