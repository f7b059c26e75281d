r"""Agent-supplied text made safe for a terminal: control characters are shown, never obeyed.

A tool name, a command or an output can hold ``ESC [2K`` (erase the line), ``\r`` (back to the
start of the line), BEL, or Unicode bidirectional overrides: printed raw, they rewrite what a
person reads (``rm -rf ~ \r\x1b[2K  command: ls`` shows as ``command: ls``). Every terminal
output of antiloop passes such text through ``printable``; JSON lines through
``printable_json``.

Example:
    >>> printable("rm -rf ~ \r\x1b[2K  command: ls")
    'rm -rf ~ \\r\\x1b[2K  command: ls'
"""

from __future__ import annotations

import re

__all__ = ["printable", "printable_json"]

# C0 controls, DEL, C1 controls (U+009B is a CSI on some terminals), the Arabic letter mark,
# left-to-right and right-to-left marks, bidirectional embeddings, overrides and isolates, and
# the line and paragraph separators.
_REST = r"\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ONE_LINE = re.compile(rf"[\x00-\x1f{_REST}]")
_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f{_REST}]")  # keeps tabs and new lines
_JSON_RAW = re.compile(rf"[{_REST}]")  # what json.dumps(ensure_ascii=False) leaves raw
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    r"""``text`` with every control character written out (``\x1b``, ``\r``, ``\u202e``).

    Args:
        text: text an agent (or a trace, or a tool) supplied.
        lines: keep new lines and tabs as they are (a multi-line report); otherwise they are
            written out too and the text stays on one line.
    """
    pattern = _LINES if lines else _ONE_LINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_shown, text)


def printable_json(line: str) -> str:
    r"""A JSON text with the characters JSON leaves raw (DEL, C1, bidi) as ``\uXXXX`` escapes.

    Those characters can only stand inside JSON strings, where ``\uXXXX`` means the same.
    """
    if _JSON_RAW.search(line) is None:
        return line
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", line)
