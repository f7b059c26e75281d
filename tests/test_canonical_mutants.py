"""Procedure canonicalisation pinned at its edges (PROTOCOL §3.1-§3.2), through the public API.

Every expectation is written out: the operation, the context, the paths, or which commands are
the same procedure and which are not.
"""

from __future__ import annotations

from antiloop.canonical import Procedure, procedure_of


def sh(command: str, cwd: str | None = None) -> Procedure:
    """The procedure of a Bash call running ``command``."""
    return procedure_of("Bash", {"command": command}, cwd=cwd)


def test_a_trailing_backslash_is_a_word_of_its_own() -> None:
    """``echo \\`` prints a backslash (bash reads a final ``\\`` as itself), not ``echo ''``."""
    assert sh("echo \\").key == sh("echo '\\'").key != sh("echo ''").key
