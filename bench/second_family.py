"""Loops in recorded runs of other agent families: the scanner against independent labels.

``python -m bench second_family`` reads the runs from ``$ANTILOOP_SECOND_FAMILY`` (a folder laid
out as ``bench/second_family_labels/SOURCES.md`` says; the runs are public but are not kept in
this repository), checks each file against the sha256 of ``labels.jsonl``, and compares
``antiloop scan`` (the loop rule and cycles) with the labels: recall (labelled loops found),
exact step (found at the labelled step) and precision (flagged runs that loop). It also runs the
independent labeller (``bench/labeller.py``) again and lists where it and the scanner disagree.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from antiloop.config import GuardConfig
from antiloop.scan import Scanner
from antiloop.scan.engine import RunScan, scan_config
from bench.labeller import first_loop, runs_of

HERE = Path(__file__).resolve().parent
LABELS = HERE / "second_family_labels" / "labels.jsonl"
ENV = "ANTILOOP_SECOND_FAMILY"


def _labels() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line]


def run(quick: bool = False) -> str:
    root = os.environ.get(ENV)
    if not root or not Path(root).is_dir():
        sys.exit(f"bench second_family: set {ENV} to the folder of the runs (see {LABELS.parent})")
    base = Path(root)
    labels = _labels()
    if quick:
        labels = [row for i, row in enumerate(labels) if i % 10 == 0 or row["first_loop"]]
    scanner = Scanner(scan_config(GuardConfig(detectors=("repeat", "cycle"))))
    scans: dict[str, list[RunScan]] = {}
    labelled_again: dict[str, list[int | None]] = {}
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    disagreements: list[str] = []
    for row in labels:
        path = base / row["file"]
        if hashlib.sha256(path.read_bytes()).hexdigest() != row["sha256"]:
            sys.exit(f"bench second_family: {row['file']}: not the labelled file (sha256 differs)")
        if row["file"] not in scans:
            scans[row["file"]] = [r for r in scanner.scan_one(path) if isinstance(r, RunScan)]
            labelled_again[row["file"]] = [first_loop(calls) for calls in runs_of(path)]
        index = row["record"] or 0
        scanned = scans[row["file"]]
        scan = scanned[index] if index < len(scanned) else None  # None: read as no steps
        found = scan.first_loop if scan is not None else None
        truth = row["first_loop"]
        counts = per[row["source"]]
        counts["runs"] += 1
        counts["steps"] += scan.steps if scan is not None else 0
        counts["no_steps"] += scan is None
        counts["loops"] += truth is not None
        counts["flagged"] += found is not None
        counts["found"] += truth is not None and found is not None
        counts["exact"] += truth is not None and found == truth
        counts["false"] += truth is None and found is not None
        again = labelled_again[row["file"]][index]
        if again != found:
            disagreements.append(f"{row['file']}: labeller {again}, scanner {found}")
    return _section(per, disagreements)


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f} ({num}/{den})" if den else "- (0/0)"


def _section(per: dict[str, dict[str, int]], disagreements: list[str]) -> str:
    total: dict[str, int] = defaultdict(int)
    for counts in per.values():
        for key, value in counts.items():
            total[key] += value
    rows = [*sorted(per.items()), ("all", total)]
    lines = [
        "## Second agent family: the scanner against independent labels",
        "",
        "Runs of agent families and sources outside ../shared/corpus (sources, licences and how "
        "the labels were made: bench/second_family_labels/SOURCES.md), scanned with the loop "
        "rule and cycles (`detectors: [repeat, cycle]`; stagnation needs an embedder and is not "
        "labelled). Recall: labelled loops the scanner flags; exact step: flagged at the "
        "labelled step; precision: flagged runs that loop.",
        "",
        "| source | runs | of them no steps | steps | loops | recall | exact step | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in rows:
        lines.append(
            f"| {name} | {c['runs']} | {c['no_steps']} | {c['steps']} | {c['loops']} | "
            f"{_ratio(c['found'], c['loops'])} | {_ratio(c['exact'], c['loops'])} | "
            f"{_ratio(c['flagged'] - c['false'], c['flagged'])} |"
        )
    lines.append("")
    if disagreements:
        lines.append(f"Labeller and scanner disagree on {len(disagreements)} runs:")
        lines.extend(f"- {d}" for d in disagreements)
    else:
        lines.append(
            "The independent labeller and the scanner agree on every run. Every run where they "
            "once disagreed was read by hand; the classes, who was right and what changed are in "
            "bench/second_family_labels/SOURCES.md, with the scanner's figures before the fixes."
        )
    return "\n".join(lines) + "\n"
