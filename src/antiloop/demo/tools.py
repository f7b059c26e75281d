"""The demo's tools: they really run on the sample project's files."""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_tool(tool: str, args: dict[str, Any], root: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run one demo tool in ``root``; returns the step fields (output, error, exit code...)."""
    if tool == "Grep":
        return {"output": _grep(args["pattern"], root / args["path"], root)}
    if tool == "Read":
        return {"output": (root / args["file_path"]).read_text(encoding="utf-8")}
    if tool == "Edit":
        return _edit(root, args["file_path"], args["old_string"], args["new_string"])
    if tool == "Bash":
        return _bash(args["command"], root, env)
    raise ValueError(f"the demo has no tool {tool!r}")


def _grep(pattern: str, where: Path, root: Path) -> str:
    regex = re.compile(pattern)
    lines = []
    for file in sorted(where.rglob("*.py")):
        for number, text in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if regex.search(text):
                lines.append(f"{file.relative_to(root)}:{number}:{text}")
    return "\n".join(lines) + ("\n" if lines else "")


def _edit(root: Path, file_path: str, old: str, new: str) -> dict[str, Any]:
    file = root / file_path
    text = file.read_text(encoding="utf-8")
    result: dict[str, Any]
    if old in text:
        file.write_text(text.replace(old, new, 1), encoding="utf-8")
        result = {"output": f"The file {file_path} has been updated."}
    else:
        result = {"error": f"String to replace not found in file.\nString: {old}"}
    data = file.read_bytes()
    result["file_states"] = {
        file_path: {"sha256": hashlib.sha256(data).hexdigest(), "mtime": file.stat().st_mtime}
    }
    return result


def _bash(command: str, root: Path, env: dict[str, str]) -> dict[str, Any]:
    words = shlex.split(command)
    if words[:1] == ["python"]:
        words[0] = sys.executable
    proc = subprocess.run(
        words, cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return {"output": proc.stdout + proc.stderr, "exit_code": proc.returncode}
