"""The ``antiloop`` command line.

Each subcommand imports what it needs when it runs, so that start-up stays fast (the hook path
starts a new process per tool call).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from antiloop.errors import ConfigError

Handler = Callable[[argparse.Namespace], int]


def _check(ns: argparse.Namespace) -> int:
    from antiloop.commands.check import run_check

    return run_check(ns.file, ns.config)


def _demo(ns: argparse.Namespace) -> int:
    from antiloop.demo import run_demo

    return run_demo(as_json=ns.json, color=ns.color)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="antiloop", description="Keeps AI agents from looping; keeps people in control."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser(
        "check", help="judge a stream of steps (JSON lines) and print one verdict per line"
    )
    check.add_argument("file", nargs="?", default="-", help="a .jsonl file, or - for stdin")
    check.add_argument("--config", help="a JSON or TOML config (PROTOCOL.md section 7)")
    check.set_defaults(handler=_check)

    demo = sub.add_parser("demo", help="watch the guard stop three looping agents")
    demo.add_argument("--json", action="store_true", help="one JSON object per verdict")
    demo.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the table (auto: when stdout is a terminal)",
    )
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.version:
        from antiloop import __version__

        print(f"antiloop {__version__}")
        return 0
    handler: Handler | None = getattr(ns, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(ns)
    except ConfigError as exc:
        print(f"antiloop: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("antiloop: interrupted", file=sys.stderr)
        return 130
