"""``antiloop demo``: three scripted agents loop; the guard stops each one."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop demo``."""
    parser.add_argument("--json", action="store_true", help="one JSON object per step")
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the table (auto: when stdout is a terminal)",
    )
    parser.add_argument(
        "--store",
        help="where the guard keeps state and the audit log (default: a store of the demo's "
        "own, in a new folder under the temporary one; never ~/.antiloop)",
    )
    parser.add_argument(
        "--embedder", default="auto", help="for the semantic checks (default: minilm if installed)"
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run the demo."""
    from antiloop.demo import run_demo

    return run_demo(as_json=ns.json, color=ns.color, store=ns.store, embedder=ns.embedder)
