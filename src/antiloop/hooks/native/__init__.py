"""The native hook client, ``antiloop-hook``: a hook at the price of a small C process.

A coding agent starts its hook as a new process per event. Python's start alone is about 25 ms
(twice per tool call); ``antiloop-hook`` (``antiloop_hook.c``, C99 and POSIX only) starts in
about a millisecond, hands the event to the hook daemon over its Unix socket and prints the
answer. Whatever it cannot do, it hands to the Python client beside it (``antiloop hook``),
with the event: no daemon yet, a daemon that failed (one bounded wait, then the event is judged
in the hook's own process), a stale one. See ``antiloop._hook_client``, whose protocol it
speaks.

It is built beside the interpreter (the scripts directory, next to ``antiloop``) when a C
compiler is there: by ``make`` (``python -m antiloop.hooks.native``) and by the wheel's build
hook (``hatch_build.py``); ``antiloop install`` then writes it into the agents' settings.
Without a compiler nothing changes: the command is ``antiloop hook <agent>``.

    python -m antiloop.hooks.native [--out PATH] [--cc CC]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["SOURCE", "build", "compiler"]

SOURCE = Path(__file__).with_name("antiloop_hook.c")
FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra")


def compiler(named: str | None = None) -> str | None:
    """The C compiler to use: ``named``, ``$CC``, else ``cc``, ``gcc`` or ``clang``; None."""
    for candidate in (named, os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate:
            found = shutil.which(candidate)
            if found:
                return found
    return None


def build(out: Path, cc: str | None = None) -> Path | None:
    """Compile the client to ``out``; None when there is no compiler or it fails (said why).

    Raises:
        OSError: ``out``'s directory cannot be written.
    """
    found = compiler(cc)
    if found is None or os.name == "nt":
        print("antiloop: no C compiler: the hook stays the Python client", file=sys.stderr)
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    proc = subprocess.run(
        [found, *FLAGS, "-o", str(partial), str(SOURCE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        print(f"antiloop: {found} could not build antiloop-hook:\n{proc.stderr}", file=sys.stderr)
        return None
    partial.chmod(0o755)
    partial.replace(out)  # atomic: a hook running now sees the old client or the new one
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m antiloop.hooks.native``: build ``antiloop-hook`` beside this interpreter."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m antiloop.hooks.native")
    default = Path(sys.executable).absolute().with_name("antiloop-hook")
    parser.add_argument("--out", type=Path, default=default, help=f"default: {default}")
    parser.add_argument("--cc", help="the C compiler (default: $CC, cc, gcc or clang)")
    ns = parser.parse_args(argv)
    built = build(ns.out, ns.cc)
    if built is not None:
        print(f"antiloop: built {built}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
