"""``antiloop calibrate``: precision and recall per threshold on a labelled set, and the best cut.

The labelled set (a .jsonl file, or a directory of them read together) is JSON lines of
goal/output pairs and message triples (see :mod:`antiloop.calibration`); the cut is chosen on
the items not marked ``"split": "test"`` and then measured on those that are.
"""

from __future__ import annotations

import argparse
import json
import sys

from antiloop.calibration import MIN_PRECISION, calibrate, format_report, grid, load_labelled
from antiloop.embed import get_embedder


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop calibrate``."""
    parser.add_argument(
        "labelled",
        metavar="LABELLED",
        help="the labelled set: a .jsonl file, or a directory of them (read together)",
    )
    parser.add_argument(
        "--embedder", default="auto", help="the embedder to calibrate (default: auto)"
    )
    parser.add_argument(
        "--min-precision",
        type=float,
        default=MIN_PRECISION,
        help=f"the precision the cut must keep (default {MIN_PRECISION})",
    )
    parser.add_argument(
        "--step", type=float, default=0.05, help="print every threshold this far apart"
    )
    parser.add_argument("--json", action="store_true", help="print the chosen cuts as JSON")
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop calibrate``; 0 on success."""
    items = load_labelled(ns.labelled)
    embedder = get_embedder(ns.embedder)
    report = calibrate(items, embedder, grid(), ns.min_precision)
    if ns.json:
        out = {
            "embedder": report.embedder,
            "thresholds": report.thresholds(),
            "held_out": {
                k.kind: None
                if k.held_out is None
                else {"precision": k.held_out.precision, "recall": k.held_out.recall}
                for k in report.kinds
            },
        }
        print(json.dumps(out, indent=2))
        return 0
    every = max(1, round(ns.step / 0.01))
    sys.stdout.write(format_report(report, every=every) + "\n")
    return 0
