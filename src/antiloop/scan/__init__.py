"""Scanning recorded agent runs for loops, and what the loops cost.

    scanner = Scanner()
    for result in scanner.scan_paths([Path("runs/")]):
        ...  # a RunScan (loops, waste) or an Unreadable input

``summarize`` folds the results into a corpus summary, ``write_html`` draws the offline report.
"""

from antiloop.scan.engine import (
    DEFAULT_EMBEDDER,
    SCAN_DETECTORS,
    STOPPING,
    Loop,
    RunScan,
    Scanner,
    StepView,
    Unreadable,
    scan_config,
)
from antiloop.scan.spend import Usage, Waste

__all__ = [
    "DEFAULT_EMBEDDER",
    "SCAN_DETECTORS",
    "STOPPING",
    "Loop",
    "RunScan",
    "Scanner",
    "StepView",
    "Unreadable",
    "Usage",
    "Waste",
    "scan_config",
]
