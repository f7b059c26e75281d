"""``antiloop check``: one verdict per step of a JSON-lines stream (PROTOCOL.md section 7)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO

from antiloop.config import GuardConfig, load_config
from antiloop.errors import BadStep
from antiloop.events import parse_line
from antiloop.guard import Guard
from antiloop.verdict import Action, invalid_wire

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_STOPPED = 3


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop check``."""
    parser.add_argument("file", nargs="?", default="-", help="a .jsonl file, or - for stdin")
    parser.add_argument("--config", help="a JSON or TOML config (PROTOCOL.md section 7)")
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop check``."""
    return run_check(ns.file, ns.config)


def run_check(file: str, config_path: str | None) -> int:
    """Judge the stream in ``file`` (``-`` for stdin); returns the exit status."""
    config = load_config(config_path) if config_path else GuardConfig()
    if file == "-":
        return judge_stream(sys.stdin.buffer, sys.stdout, Guard(config=config), flush=True)
    try:
        stream = Path(file).open("rb")  # noqa: SIM115 - closed below, after the loop
    except OSError as exc:
        print(f"antiloop: cannot read {file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    with stream:
        return judge_stream(stream, sys.stdout, Guard(config=config))


def judge_stream(source: IO[bytes], out: IO[str], guard: Guard, *, flush: bool = False) -> int:
    """Write one verdict line per non-blank input line; returns 3 if a session stopped."""
    stopped = False
    index = 0
    write = out.write
    for lineno, raw in enumerate(source, 1):
        if not raw.strip():
            continue
        line, stops = _judge_line(guard, raw, lineno, index)
        del raw  # a huge line is held once at a time, never two
        stopped = stopped or stops
        write(json.dumps(line, ensure_ascii=False) + "\n")
        if flush:
            out.flush()
        index += 1
    return EXIT_STOPPED if stopped else EXIT_OK


def _judge_line(
    guard: Guard, raw: bytes, lineno: int, index: int
) -> tuple[dict[str, object], bool]:
    """The verdict line for one input line, and whether it stopped its session."""
    try:
        step = parse_line(raw)
    except BadStep as exc:
        return invalid_wire(index, f"line {lineno}: {exc}"), False
    verdict = guard.record(step)
    stops = verdict.action is Action.STOP and verdict.detector not in ("goal", "terminated")
    return verdict.to_wire(index), stops
