"""The local journal: steps answered while the store was unreachable, until they are replayed.

One file per process and store, ``<dir>/<store digest>/<host>-<pid>-<random>.jsonl``, mode
0600 in a 0700 directory, held under an exclusive ``flock`` while its process lives. Each
step is one JSON line, written and fsync'd before the step is answered; a replayed step adds
a ``{"done": id}`` line, and a file whose steps are all done is removed. A journal left by a
process that died (its lock free) is adopted by the next guard of the same store: its
pending steps are copied into the adopter's file (fsync'd), then the old file is removed.
The texts are redacted before they are written (``antiloop.core.redact``), as in the audit log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from antiloop.core.errors import StoreError

__all__ = ["Journal", "JournalFull", "store_identity"]


def store_identity(store: Any) -> str:
    """What names a store's data: its URL, and its key prefix or schema (both halves of a split)."""
    parts = [store.url]
    for name in ("prefix", "schema"):
        value = getattr(store, name, None)
        if isinstance(value, str):
            parts.append(f"{name}={value}")
    for half in ("state", "records"):
        inner = getattr(store, half, None)
        if inner is not None and hasattr(inner, "url"):
            parts.append(store_identity(inner))
    return " ".join(parts)


class JournalFull(StoreError):
    """The journal cannot take the step: full, or its file cannot be written."""


class Journal:
    """A process's journal of unrecorded steps for one store.

    Args:
        directory: where the journals live (a folder per store is made in it).
        store_url: the store's URL (without password): journals of other stores are not read.
        max_bytes: the most the file holds; past it ``append`` raises ``JournalFull``.
    """

    def __init__(self, directory: Path, store_url: str, max_bytes: int) -> None:
        digest = hashlib.sha256(store_url.encode("utf-8", "replace")).hexdigest()[:16]
        self.folder = directory / digest
        self.store_url = store_url
        self.max_bytes = max_bytes
        self.path: Path | None = None
        self._fd: int | None = None
        self._size = 0
        self._pending: dict[str, dict[str, Any]] = {}  # step id -> entry, in journal order
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self) -> list[dict[str, Any]]:
        """The entries not replayed yet, oldest first."""
        with self._lock:
            return list(self._pending.values())

    def append(self, entry: dict[str, Any]) -> None:
        """Keep an entry (it has an ``id``) on disk before returning.

        Raises:
            JournalFull: the file would pass ``max_bytes``, or cannot be written.
        """
        line = (json.dumps(entry, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._size + len(line) > self.max_bytes:
                raise JournalFull(
                    f"the journal {self.path or self.folder} is full ({self.max_bytes} bytes)"
                )
            try:
                self._write(line)
            except OSError as exc:
                raise JournalFull(f"cannot write the journal in {self.folder}: {exc}") from exc
            self._pending[str(entry["id"])] = entry

    def done(self, step_id: str) -> None:
        """Mark a step replayed; when none is left, the file is removed."""
        with self._lock:
            if self._pending.pop(step_id, None) is None:
                return
            with contextlib.suppress(OSError):  # a done line lost only means a second replay
                self._write(json.dumps({"done": step_id}).encode() + b"\n")
            if not self._pending:
                self._release()

    def adopt(self) -> int:
        """Take over the journals of this store whose process is gone; how many steps came.

        A file whose lock is held (its process lives) is left alone.
        """
        try:
            names = sorted(self.folder.glob("*.jsonl"))
        except OSError:
            return 0
        found: list[dict[str, Any]] = []
        held: list[tuple[int, Path]] = []
        try:
            for path in names:
                if path != self.path:
                    got = self._lock_orphan(path)
                    if got is not None:
                        held.append((got, path))
                        found += _read(path)
            found.sort(key=lambda entry: float(entry.get("at") or 0))  # in the order answered
            for entry in found:
                self.append(entry)
            for _, path in held:
                path.unlink()
        finally:
            for fd, _ in held:
                os.close(fd)
        return len(found)

    def close(self) -> None:
        """Release the file (and its lock); a file with nothing pending is removed."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        if self._fd is None:
            return
        if not self._pending and self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self._closer()
        self._fd, self.path, self._size = None, None, 0

    # -- the file ---------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self._open()
        assert self._fd is not None  # noqa: S101 - opened just above
        os.write(self._fd, data)
        os.fsync(self._fd)
        self._size += len(data)

    def _open(self) -> None:
        import fcntl
        import socket

        from antiloop._files import make_private_dirs

        make_private_dirs(self.folder)
        name = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}.jsonl"
        path = self.folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        header = {"journal": 1, "store": self.store_url, "pid": os.getpid()}
        os.write(fd, json.dumps(header).encode() + b"\n")
        os.fsync(fd)
        with contextlib.suppress(OSError):  # the new name itself survives a crash
            folder = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        self._fd, self.path, self._size = fd, path, os.fstat(fd).st_size
        self._closer = weakref.finalize(self, _close, fd)  # a dropped journal frees its lock

    def _lock_orphan(self, path: Path) -> int | None:
        """An open, locked descriptor of a journal whose process is gone; None if it lives."""
        import fcntl

        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _read(path: Path) -> list[dict[str, Any]]:
    """The pending entries of a journal file, in order (a torn last line is skipped)."""
    entries: dict[str, dict[str, Any]] = {}
    with path.open("rb") as file:
        for line in file:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            if "done" in item:
                entries.pop(str(item["done"]), None)
            elif "id" in item and "step" in item:
                entries[str(item["id"])] = item
    return list(entries.values())
