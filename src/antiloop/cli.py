"""The ``antiloop`` command line.

Each subcommand lives in its own module under ``antiloop.commands`` with two functions:
``configure(parser)`` adds its arguments and ``run(namespace) -> int`` does the work. Only the
module of the command being run is imported, so start-up stays fast (the hook path starts a
new process per tool call).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's constant, without importing typing on the hook path
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import NoReturn

#: command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("antiloop.commands.check", "judge a stream of steps (JSON lines), one verdict each"),
    "scan": ("antiloop.commands.scan", "find the loops in recorded agent runs, and what they cost"),
    "demo": ("antiloop.commands.demo", "watch the guard stop scripted agents that loop"),
    "hook": ("antiloop.commands.hook", "answer a coding agent's hook event (JSON on stdin)"),
    "install": ("antiloop.commands.install", "add antiloop's hooks to Claude Code, Gemini, Codex"),
    "doctor": ("antiloop.commands.doctor", "check an installation of the hooks end to end"),
    "serve": ("antiloop.commands.serve", "run the HTTP API and dashboard (approvals, sessions)"),
    "stop": ("antiloop.commands.stop", "stop a guarded run at its next step"),
    "fleet": (
        "antiloop.commands.fleet",
        "the fleet: live sessions, stops, kill switch, known loops",
    ),
    "approve": ("antiloop.commands.approve", "approve a pending request (--list shows them)"),
    "deny": ("antiloop.commands.approve", "deny a pending request, with -m for the agent"),
    "log": ("antiloop.commands.log", "the audit log: sessions, timelines, follow, export, verify"),
    "mcp-proxy": ("antiloop.commands.mcp_proxy", "guard the tool calls of an MCP server"),
    "calibrate": ("antiloop.commands.calibrate", "choose goal and stagnation thresholds"),
    "init": ("antiloop.commands.init", "write a commented antiloop.toml for this project"),
    "config": ("antiloop.commands.config", "validate a config file (config check [FILE])"),
    "completion": ("antiloop.commands.completion", "a completion script for bash, zsh or fish"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported to add its arguments."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        """An argument parser whose errors are one line: what is wrong, and where to look."""

        def error(self, message: str) -> NoReturn:
            self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

        def _check_value(self, action: argparse.Action, value: object) -> None:
            """A value outside the choices is named, with the near one (``chek``: check)."""
            choices = action.choices
            if choices is not None and value not in choices:
                from antiloop.core.text.suggest import unknown

                what = "choice" if action.option_strings else (action.metavar or action.dest)
                known = [str(c) for c in choices]
                raise argparse.ArgumentError(action, unknown(str(what).lower(), str(value), known))

    parser = _Parser(
        prog="antiloop", description="Keeps AI agents from looping; keeps people in control."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            from importlib import import_module

            import_module(module).configure(cmd)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _hook_call(args: Sequence[str]) -> tuple[str, str | None] | None:
    """``hook AGENT [--config FILE] [--fail open|closed]`` read without building the parser.

    The hook runs as a new process per tool call: argparse's set-up (help formatters,
    gettext, shutil) is a few milliseconds of each call that this plain form skips. ``--fail``
    is put in the environment (``ANTILOOP_FAIL``), where the daemon and the runner read it.
    """
    if len(args) < 2 or args[0] != "hook" or args[1].startswith("-"):
        return None
    options: dict[str, str] = {}
    rest = list(args[2:])
    while rest:
        word = rest.pop(0)
        name, equals, value = word.partition("=")
        if name not in ("--config", "--fail") or name in options:
            return None
        if not equals:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        if not value or (name == "--fail" and value not in ("open", "closed")):
            return None
        options[name] = value
    if "--fail" in options:
        import os

        os.environ["ANTILOOP_FAIL"] = options["--fail"]
    return args[1], options.get("--config")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    hook = _hook_call(args)
    if hook is not None:
        from antiloop._hook_client import answer_by_daemon, handed_on

        asked = handed_on() or answer_by_daemon(*hook)
        if asked.code is not None:
            return asked.code
        from antiloop.commands.hook import answer

        return _run(
            lambda: answer(*hook, data=asked.data, start_daemon=asked.start, problem=asked.problem)
        )
    named = next((a for a in args if not a.startswith("-")), None)
    if named is not None and named not in COMMANDS:
        from antiloop.core.text.suggest import unknown

        print(f"antiloop: {unknown('command', named, COMMANDS)}", file=sys.stderr)
        return 2
    parser = build_parser(_command_of(args))
    wrong = _unknown_option(parser, args)
    if wrong is not None:  # said before argparse's other complaints (a missing argument)
        from argparse import Namespace

        extra: list[str] = [wrong]
        ns = Namespace(command=_command_of(args))
    else:
        ns, extra = parser.parse_known_args(args)
    if extra:
        help_of = " ".join(["antiloop", *([ns.command] if ns.command else []), "--help"])
        print(f"antiloop: {_unrecognized(parser, extra)} (see {help_of})", file=sys.stderr)
        return 2
    if ns.version:
        from antiloop._version import __version__

        print(f"antiloop {__version__}")
        return 0
    handler = getattr(ns, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return _run(lambda: handler(ns))


def _long_options(parser: argparse.ArgumentParser) -> set[str]:
    """The ``--`` options of a parser and of the subcommands configured under it."""
    import argparse

    known: set[str] = set()
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            known.update(o for o in action.option_strings if o.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return known


def _unknown_option(parser: argparse.ArgumentParser, args: Sequence[str]) -> str | None:
    """The first ``--option`` that is neither an option nor the start of just one."""
    known = _long_options(parser)
    for arg in args:
        if arg == "--":
            return None  # what follows is another program's (mcp-proxy -- SERVER ...)
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        if not any(k.startswith(name) for k in known):  # a prefix of several: argparse says
            return name
    return None


def _unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """What was not understood, with the near option of the command (``--confg``: --config)."""
    option = next((a.split("=", 1)[0] for a in extra if a.startswith("-")), None)
    if option is None:
        return f"unexpected argument {extra[0]!r}"
    from antiloop.core.text.suggest import unknown

    return unknown("option", option, _long_options(parser))


def _run(work: Callable[[], int]) -> int:
    """Run a command: an AntiloopError is one line on stderr and exit 2."""
    from antiloop.core.errors import AntiloopError

    try:
        return work()
    except AntiloopError as exc:
        print(f"antiloop: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("antiloop: interrupted", file=sys.stderr)
        return 130
