"""Files scanned in parallel: one scanner per worker process, the results in file order.

A file is scanned whole by one worker (its runs share nothing with other files' runs), so the
results are those of a serial scan, in the same order: the pool hands them back file by file
in the order of the files, whichever worker finished first.

Workers are forked where that is safe (Linux, no other thread in the process, native ones
included), so they start in a few milliseconds with antiloop already imported and a custom
embedder already built; elsewhere they are spawned, and the scanner's config and embedder must
pickle (else the scan runs serially). Ctrl-C is the parent's: it stops the workers.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts, not for a small scan
    from multiprocessing.context import BaseContext

    from antiloop.config import GuardConfig
    from antiloop.embed import Embedder
    from antiloop.scan.engine import FileScan, Scanner

POOL_MIN_BYTES = 1_000_000
"""Smaller scans run in one process: starting the workers would cost more than it saves."""

_worker: Scanner | None = None
_format = "auto"


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def scan_files(
    scanner: Scanner, files: Sequence[Path], format: str, jobs: int
) -> Iterator[FileScan] | None:
    """Each file's results, in file order, from ``jobs`` worker processes.

    Returns None when the scan is better run serially: the files are small (under
    ``POOL_MIN_BYTES`` in all), or a spawned worker would need a config or an embedder that
    does not pickle.
    """
    if _size(files) < POOL_MIN_BYTES:
        return None
    context = _context()
    embedder = scanner.given_embedder
    args = (scanner.config, embedder, scanner.views, format)
    if context.get_start_method() != "fork":
        import pickle

        try:
            pickle.dumps(args)
        except Exception:
            return None
    return _results(context, args, files, jobs)


def _results(
    context: BaseContext,
    args: tuple[GuardConfig, Embedder | None, bool, str],
    files: Sequence[Path],
    jobs: int,
) -> Iterator[FileScan]:
    pool = context.Pool(min(jobs, len(files)), initializer=_start, initargs=args)
    done = False
    try:
        yield from pool.imap(_scan_one, files, chunksize=1)
        done = True
    finally:  # an abandoned or failed scan stops its workers at once
        if done:
            pool.close()
        else:
            pool.terminate()
        pool.join()


def _size(files: Sequence[Path]) -> int:
    total = 0
    for path in files:
        try:
            if path.is_dir():  # a persisted conversation: its files
                total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            else:
                total += path.stat().st_size
        except OSError:  # the scan reports it, as unreadable
            continue
        if total >= POOL_MIN_BYTES:
            break
    return total


def _context() -> BaseContext:
    import multiprocessing

    if sys.platform.startswith("linux") and _threads() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _threads() -> int:
    """The threads of this process, native ones included (a forked child would lose them)."""
    try:
        return sum(1 for _ in Path("/proc/self/task").iterdir())
    except OSError:
        return threading.active_count() + 1  # unknown: not safe to fork


def _start(config: GuardConfig, embedder: Embedder | None, views: bool, format: str) -> None:
    global _worker, _format  # one scanner per worker process, built once
    import signal

    from antiloop.scan.engine import Scanner

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the pool

    _worker = Scanner(config, embedder=embedder, views=views)
    _format = format


def _scan_one(path: Path) -> FileScan:
    if _worker is None:
        raise RuntimeError("a scan worker runs the pool's initializer first")
    return _worker.scan_one(path, _format)
