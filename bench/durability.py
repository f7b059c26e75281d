"""Durability: SQLite under the hook daemon, with and without SIGKILLs of the daemon.

The fleet of ``tests/hooks/durability.py``: 12 agents through the hook daemon and 4 in-process
(``ANTILOOP_HOOKD=0``) send PostToolUse events as fresh ``antiloop hook claude-code``
processes to one SQLite store; then every acknowledged event must have its step record in the
audit log and ``PRAGMA integrity_check`` must say ``ok``. The same fleet also runs the source
of the commit before the fix (``git archive`` of it, on ``PYTHONPATH``), when git has it.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

from tests.hooks.durability import FleetResult, run_fleet

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "2df2ccd"  # the last commit whose SQLiteStore opened the file with open()
RUNS = (("open", None), ("closed", None), ("open", 2.0), ("closed", 2.0))
Row = tuple[str, str, float | None, FleetResult]


def run(quick: bool = False) -> str:
    """Run the fleet in each configuration, on this code and before the fix; return markdown."""
    steps = 8 if quick else 25
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        before = _checkout(BEFORE, Path(tmp) / "before")
        for code, pythonpath in (("this", None), (f"before ({BEFORE})", before)):
            if code != "this" and pythonpath is None:
                continue
            for fail, every in RUNS:
                with tempfile.TemporaryDirectory() as run_dir:
                    result = run_fleet(
                        Path(run_dir),
                        steps=steps,
                        kill_every=every,
                        fail=fail,
                        pythonpath=pythonpath,
                    )
                rows.append((code, fail, every, result))
                print(_row(*rows[-1]), flush=True)
    lines = [
        "## Durability: SQLite under the hook daemon",
        "",
        "Each row is one run of `tests/hooks/durability.py`'s fleet (`python -m bench "
        "durability`): 16 agents, 12 through the hook daemon and 4 answered in their own "
        f"process (`ANTILOOP_HOOKD=0`), each sending {steps} PostToolUse events one after "
        "another, every event a fresh `antiloop hook claude-code` process, all on one SQLite "
        "store. A killer thread SIGKILLs the daemon every 2 s where the row says so; the next "
        "hook answers itself and starts a new one. An event is *acknowledged* when its hook "
        "exits 0 and prints nothing (every event reads a new file, so the verdict is "
        "`continue`); anything else says the step was not checked. *Lost* counts acknowledged "
        "events without their step record in the audit log afterwards; *integrity* is "
        "SQLite's `PRAGMA integrity_check`. `fail` is the hook's `on_store_error` (`open` "
        "allows, `closed` blocks a call it cannot check). The *before* rows run the same "
        f"fleet on the source of commit {BEFORE} (on `PYTHONPATH`), whose `SQLiteStore` "
        "opened and closed the database file with Python's `open()` to read its header, "
        "which drops every POSIX lock of the process on the file.",
        "",
        "| code | fail | kills | agents | events | acknowledged | lost | integrity | took |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    lines += [_row(*row) for row in rows]
    if not any(code != "this" for code, *_ in rows):
        lines.append(f"\n(No *before* rows: git has no commit {BEFORE} here.)")
    told: Counter[str] = Counter()
    for code, _, _, result in rows:
        for text, n in result.unacknowledged.items():
            told[f"{code}: {_without_paths(text)}"] += n
    if told:
        lines.append("\nWhat the unacknowledged events were told:\n")
        lines += [f"- {n} x {text}" for text, n in told.most_common(8)]
    return "\n".join(lines) + "\n"


def _checkout(commit: str, into: Path) -> str | None:
    """``src`` of ``commit`` extracted under ``into``; None when git cannot give it."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
            capture_output=True,
            timeout=120,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return str(into / "src")


def _without_paths(text: str) -> str:
    import re

    return "`" + re.sub(r"/\S*/store/antiloop\.db", "STORE", text) + "`"


def _row(code: str, fail: str, every: float | None, r: FleetResult) -> str:
    kills = f"{r.kills} (every {every:g} s)" if every else "0"
    integrity = "ok" if r.integrity == ["ok"] else f"{len(r.integrity)} problems"
    return (
        f"| {code} | {fail} | {kills} | {r.agents} | {r.sent} | {r.acknowledged} "
        f"| {len(r.lost)} | {integrity} | {r.seconds:.0f} s |"
    )
