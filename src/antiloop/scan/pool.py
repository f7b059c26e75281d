"""Files scanned in parallel: one scanner per worker process, the results in file order.

A file is scanned whole by one worker (its runs share nothing with other files' runs), so the
results are those of a serial scan, in the same order: the pool hands them back file by file
in the order of the files, whichever worker finished first.

Workers are forked where that is safe (Linux, no other thread in the process, native ones
included), so they start in a few milliseconds with antiloop already imported and a custom
embedder already built; given this process's scanner, it scans the first file itself and the
workers are copies of it, warm (what a first file costs is not paid again in each worker).
Elsewhere they are spawned, and what builds the scanner (its config and embedder) must pickle
(else the scan runs serially). Ctrl-C is the parent's: it stops the workers. This module knows
scanners only by their ``scan_one`` method: it imports nothing of antiloop, and the scan engine
imports it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts, not for a small scan
    from multiprocessing.context import BaseContext

POOL_MIN_BYTES = 1_000_000
"""Smaller scans run in one process: starting the workers would cost more than it saves."""

T = TypeVar("T")


class FileScanner(Protocol[T]):
    """What a worker runs: the scan of one file, whole."""

    def scan_one(self, path: Path, format: str) -> list[T]:
        """Every result of one file."""
        ...


_worker: FileScanner[Any] | None = None
_format = "auto"


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def scan_files(
    build: Callable[[], FileScanner[T]],
    files: Sequence[Path],
    format: str,
    jobs: int,
    local: FileScanner[T] | None = None,
) -> Iterator[list[T]] | None:
    """Each file's results, in file order, from ``jobs`` worker processes.

    Args:
        build: makes a worker's scanner (called once in each worker).
        files: the files (or conversation folders) to scan.
        format: the trace format, or ``auto``.
        jobs: how many workers at most.
        local: this process's scanner. Where workers are forked, it scans the first file here,
            then the workers start as copies of it: what a first file costs once (imports
            inside functions, patterns compiled on first use, caches) is not paid per worker.

    Returns:
        None when the scan is better run serially: the files are small (under
        ``POOL_MIN_BYTES`` in all), or spawned workers would need a ``build`` that does not
        pickle.
    """
    if _size(files) < POOL_MIN_BYTES:
        return None
    context = _context()
    if context.get_start_method() != "fork":
        import pickle

        try:
            pickle.dumps(build)
        except Exception:  # whatever does not pickle: scan serially
            return None
    elif local is not None and len(files) > jobs:  # the first file is a small share
        return _warm_results(context, local, format, files, jobs)
    return _results(context, build, format, files, jobs)


def _warm_results(
    context: BaseContext, local: FileScanner[T], format: str, files: Sequence[Path], jobs: int
) -> Iterator[list[T]]:
    yield local.scan_one(files[0], format)
    # the initializer's arguments are inherited by the forked workers, never pickled
    yield from _results(context, lambda: local, format, files[1:], jobs)


def _results(
    context: BaseContext,
    build: Callable[[], FileScanner[T]],
    format: str,
    files: Sequence[Path],
    jobs: int,
) -> Iterator[list[T]]:
    pool = context.Pool(min(jobs, len(files)), initializer=_start, initargs=(build, format))
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


def _start(build: Callable[[], FileScanner[Any]], format: str) -> None:
    global _worker, _format  # one scanner per worker process, built once
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the pool
    _worker = build()
    _format = format


def _scan_one(path: Path) -> list[Any]:
    if _worker is None:
        raise RuntimeError("a scan worker runs the pool's initializer first")
    return _worker.scan_one(path, _format)
