"""``antiloop scan``: find the loops in recorded agent runs, and show what they cost.

An input that cannot be read as a run (a file of no known format, a file or record that reads
as no steps) is *unreadable*: it is reported on stderr and in the summary, apart from the runs,
and never counted as a run without loops.

Exit status: 0 when no loop is found (or with ``--no-fail``), 1 when loops are found, 2 for bad
arguments (a missing path, a bad config, nothing that reads as a run), 3 with ``--strict`` when
any input is unreadable (whatever else was found).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import IO

from antiloop._color import Painter
from antiloop.config import load_config
from antiloop.printable import printable, printable_json
from antiloop.scan.engine import DEFAULT_EMBEDDER, RunScan, Scanner, Unreadable, scan_config
from antiloop.scan.summary import Summary, ranges, unreadable_name
from antiloop.traces import FORMATS

EXIT_OK = 0
EXIT_LOOPS = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 3


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop scan``."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories")
    parser.add_argument(
        "--format",
        default="auto",
        choices=("auto", *FORMATS),
        help="the trace format (default: detected from each file's content)",
    )
    parser.add_argument(
        "--config",
        help="a guard config (JSON or TOML; default: ANTILOOP_CONFIG, or antiloop.toml here or "
        "in the nearest parent that has one); the goal check is left out, and a step budget "
        "applies only when the config sets max_steps or task_type",
    )
    parser.add_argument(
        "--no-config", action="store_true", help="read no config file: the defaults apply"
    )
    parser.add_argument(
        "--embedder",
        help=f"the embedder of the stagnation check (default: {DEFAULT_EMBEDDER}, or the "
        "config's when it names one)",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per run, then a summary object"
    )
    parser.add_argument("--html", metavar="REPORT.html", help="also write an offline HTML report")
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=0,
        metavar="N",
        help="scan N files at once, in N processes (default: one per core; 1 scans in this "
        "process); the output is the same",
    )
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when loops are found")
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_UNREADABLE} when any input is unreadable (of no known format, or read "
        "as no steps)",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text output (default: auto, on a terminal unless NO_COLOR is set)",
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop scan``."""
    from antiloop.config import find_config, say_config

    path, how = (None, "none") if ns.no_config else find_config(ns.config)
    say_config(path, how, "scan")
    if path is not None:
        config = scan_config(load_config(path))
        embedder = ns.embedder or (
            config.embedder if config.embedder != "auto" else DEFAULT_EMBEDDER
        )
    else:
        config = scan_config()
        embedder = ns.embedder or DEFAULT_EMBEDDER
    config = dataclasses.replace(config, embedder=embedder)
    paths = [Path(p) for p in ns.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"antiloop: no such file or directory: {missing[0]}", file=sys.stderr)
        return EXIT_USAGE
    jobs = ns.jobs
    if jobs == 0:
        from antiloop.scan.pool import cores

        jobs = cores()
    scanner = Scanner(config, views=bool(ns.html), jobs=jobs)
    progress = Progress(sys.stderr)
    summary = Summary()
    kept: list[RunScan] = []
    out = sys.stdout
    paint = Painter.for_stream(out, ns.color)
    for item in scanner.scan_paths(paths, ns.format, progress=progress.update):
        summary.add(item)
        if isinstance(item, Unreadable):
            progress.clear()
            message = f"antiloop: unreadable {unreadable_name(item)}: {item.reason}"
            print(printable(message), file=sys.stderr)
            continue
        progress.loops += len(item.loops)
        if item.problems:  # lines the reader could not read: said, never silently dropped
            progress.clear()
            shown = "; ".join(item.problems[:3])
            more = f" and {len(item.problems) - 3} more" if len(item.problems) > 3 else ""
            where = item.file + (f"#{item.record}" if item.record is not None else "")
            note = f"skipped {len(item.problems)} part(s) that read as no step ({shown}{more})"
            print(printable(f"antiloop: {where}: {note}"), file=sys.stderr)
        if item.partial:  # results not found: the run is partial, and says so
            progress.clear()
            where = item.file + (f"#{item.record}" if item.record is not None else "")
            print(printable(f"antiloop: {where}: partial: {item.partial_reason}"), file=sys.stderr)
        if ns.html:
            kept.append(item)
        if ns.json:
            out.write(printable_json(json.dumps(item.to_json(), ensure_ascii=False)) + "\n")
        elif item.loops:
            progress.clear()
            out.write(run_text(item, paint) + "\n")
    progress.clear()
    if ns.json:
        out.write(json.dumps({"summary": summary.to_json()}, ensure_ascii=False) + "\n")
    else:
        out.write(("\n" if summary.loops else "") + printable(summary.text(), lines=True) + "\n")
    if ns.html:
        from antiloop.scan.report import write_html

        try:
            write_html(Path(ns.html), kept, summary)
        except OSError as exc:
            print(f"antiloop: cannot write {ns.html}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"antiloop: report written to {ns.html}", file=sys.stderr)
    if summary.runs == 0:
        where = ", ".join(ns.paths)
        what = f" ({len(summary.unreadable)} inputs unreadable)" if summary.unreadable else ""
        print(f"antiloop: no readable run found in {where}{what}", file=sys.stderr)
        return EXIT_USAGE
    if ns.strict and summary.unreadable:
        first = summary.unreadable[0]
        print(
            f"antiloop: --strict: {len(summary.unreadable)} inputs unreadable "
            f"(first: {unreadable_name(first)}: {first.reason})",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    if summary.loops and not ns.no_fail:
        return EXIT_LOOPS
    return EXIT_OK


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        jobs = -1
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes (1 or more): {value!r}")
    return jobs


def run_text(result: RunScan, paint: Painter | None = None) -> str:
    """A run with loops, for people: a header line, then one line per loop (coloured on a tty).

    What the trace supplied (its file name, the fingerprints) is made printable before it is
    painted: its control characters are shown, ours still colour.
    """
    paint = paint or Painter(False)
    name = printable(result.file + (f"#{result.record}" if result.record is not None else ""))
    waste = result.waste
    if waste.from_step is None:  # fail-streak, cosmetic-rerun: they ask, nothing stops
        head = "warnings only: no stopping loop, no waste"
    else:
        head = f"first loop point at step {waste.from_step}; waste {waste.text()}"
    lines = [f"{paint(name, 'bold')} ({result.format}, {result.steps} steps): {head}"]
    for loop in result.loops:
        kind = paint(f"{loop.detector:<11}", _KIND_COLOUR.get(loop.detector, "cyan"))
        steps = paint(f"[steps {ranges(loop.evidence)}]", "dim")
        fingerprint = printable(loop.fingerprint or "-")
        lines.append(f"  step {loop.step:>4}  {kind} {fingerprint}  {steps}")
    return "\n".join(lines)


_KIND_COLOUR = {"repeat": "red", "cycle": "red", "fail-streak": "yellow", "stagnation": "yellow"}


class Progress:
    """A one-line progress bar on a terminal; silent when the stream is not a TTY."""

    WIDTH = 30
    MIN_FILES = 2
    INTERVAL = 0.1

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        try:
            self.active = stream.isatty()
        except (AttributeError, ValueError):
            self.active = False
        self.loops = 0
        self._shown = False
        self._last = 0.0

    def update(self, done: int, total: int) -> None:
        """Show ``done`` of ``total`` files (at most ten times a second)."""
        if not self.active or total < self.MIN_FILES:
            return
        now = time.monotonic()
        if done < total and now - self._last < self.INTERVAL:
            return
        self._last = now
        filled = self.WIDTH * done // total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\rscan [{bar}] {done}/{total} files, {self.loops} loops")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the bar before other output."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
