"""The procedure of a step or of a fingerprint, as the fingerprint writes it: agent, op, context.

A fingerprint's context is cut at 80 characters and redacted; a step's is escaped the same way
(``fingerprint.escape``), so the two compare as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from antiloop.core import fingerprint
from antiloop.core.history import kept_context
from antiloop.core.procedure import procedure_of
from antiloop.core.redact import redact_text


def of_fingerprint(fp: str) -> tuple[str, str, str]:
    """``(agent, operation, context)`` of a fingerprint; ValueError when it is none."""
    parts = fingerprint.parse(fp.strip())
    return parts.agent, parts.operation, parts.context


def of_step(
    agent: str,
    tool: str,
    args: Mapping[str, Any],
    paths: Sequence[str] = (),
    cwd: str | None = None,
) -> tuple[str, str, str]:
    """``(agent, operation, context)`` of a call, written as its fingerprint would write them."""
    proc = procedure_of(tool, args, paths, cwd)
    return (
        fingerprint.escape(agent.lower()),
        fingerprint.escape(proc.operation),
        fingerprint.escape(redact_text(kept_context(proc.context)), fingerprint.CONTEXT_MAX),
    )
