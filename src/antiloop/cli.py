"""The ``antiloop`` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    print(f"antiloop: not implemented yet: {args}", file=sys.stderr)
    return 2
