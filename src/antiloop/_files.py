"""Where antiloop keeps its files, for this user only: 0700 directories, 0600 files.

The audit log holds the agents' arguments and outputs, so nothing antiloop creates may be
read by other local users, whatever the umask: the store's directory (``~/.antiloop``), the
database and its ``-wal`` and ``-shm``, and the hook daemon's socket directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "make_private_dirs", "open_to_others"]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_private_dirs(directory: str | os.PathLike[str]) -> None:
    """Create ``directory`` and each missing parent, mode 0700 (existing ones stay as they are).

    Raises:
        OSError: a component cannot be created, or is a file.
    """
    path = Path(directory).absolute()
    missing: list[Path] = []
    for each in (path, *path.parents):
        if each.is_dir():
            break
        missing.append(each)
    for each in reversed(missing):
        try:
            each.mkdir(PRIVATE_DIR)
        except FileExistsError:
            if not each.is_dir():
                raise
            continue  # another process made it at the same moment
        each.chmod(PRIVATE_DIR)  # mkdir's mode passes through the umask


def open_to_others(path: str | os.PathLike[str]) -> int:
    """The permission bits ``path`` gives its group and others (0 when private or absent)."""
    try:
        return Path(path).stat().st_mode & 0o077
    except OSError:
        return 0
