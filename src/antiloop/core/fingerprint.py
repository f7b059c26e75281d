"""The loop fingerprint ``AGENT::<agent>::<operation>::<context>::<result>`` (docs/protocol.md §6).

Deterministic: no salt, no timestamps, so the same loop gives the same fingerprint in every
process and on every machine.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

PREFIX = "AGENT"
SEPARATOR = "::"
CONTEXT_MAX = 80
SUMMARY_MAX = 50

_COLONS = re.compile(r":{2,}")
_SPACES = re.compile(r"[\r\n\t\v\f]")
_EDGES = re.compile(r"^[\s:]+|[\s:]+$")


class Fingerprint(NamedTuple):
    """The five parts of a fingerprint, as parsed back from its string."""

    prefix: str
    agent: str
    operation: str
    context: str
    result: str


def escape(part: str, limit: int | None = None) -> str:
    """Make ``part`` safe inside a fingerprint: no new lines, no ``::``, no edge ``:``.

    When ``limit`` is given the part is cut to that many characters, ending in ``…``.
    """
    text = _EDGES.sub("", _COLONS.sub(":", _SPACES.sub(" ", part)))
    if limit is not None and len(text) > limit:
        text = _EDGES.sub("", text[: limit - 1]) + "…"
    return text or "-"


def digest8(text: str) -> str:
    """The first 8 hex digits of a stable digest of ``text``."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def build(agent: str, operation: str, context: str, summary: str, digest: str) -> str:
    """Build a fingerprint from its parts; ``digest`` is the 8 hex digits after ``#``.

    Secrets in the context or the summary (a token in a command, a key in an error line) are
    redacted first: fingerprints are shown to models, people and logs.
    """
    from antiloop.core.redact import redact_text

    context = redact_text(context)
    result = escape(redact_text(summary), SUMMARY_MAX)
    return SEPARATOR.join(
        (
            PREFIX,
            escape(agent.lower()),
            escape(operation),
            escape(context, CONTEXT_MAX),
            f"{result}#{digest}",
        )
    )


def parse(fingerprint: str) -> Fingerprint:
    """Split a fingerprint back into its five parts; ValueError when it is not one."""
    parts = fingerprint.split(SEPARATOR)
    if len(parts) != 5 or parts[0] != PREFIX:
        raise ValueError(f"not an antiloop fingerprint: {fingerprint!r}")
    return Fingerprint(*parts)
