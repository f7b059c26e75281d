"""Redaction: secrets are replaced before anything is written to the audit log or a store.

Pure functions, standard library only. ``redact_text`` replaces provider API keys (OpenAI
``sk-…``, Anthropic ``sk-ant-…``, AWS ``AKIA…``/``ASIA…``, GitHub ``ghp_…``/``github_pat_…``,
Slack ``xox[bpars]-…``, Google ``AIza…``), bearer and basic credentials, passwords in URLs,
``key=value`` pairs whose key names a password, token, secret or API key, ``--password x``
flags, and private key blocks. ``redact_value`` walks JSON-like values: the value of a key
that contains ``password``, ``passwd``, ``token``, ``secret``, ``api_key`` (or ``apikey``,
``api-key``), ``credential`` or ``private_key`` is replaced whole; every string is passed to
``redact_text``.

Example:
    >>> redact_text("curl -H 'Authorization: Bearer abcdef123456' https://u:pw@h/x")
    "curl -H 'Authorization: Bearer [REDACTED]' https://u:[REDACTED]@h/x"
    >>> redact_value({"user": "bob", "password": "hunter2"})
    {'user': 'bob', 'password': '[REDACTED]'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "is_sensitive_key", "redact_text", "redact_value"]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_KEY_WORDS = r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|auth)"

# Each alternative is one named group; the replacement keeps the named prefix group, if any.
_PATTERNS = [
    # Private key blocks (PEM), whole.
    r"(?P<pem>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z))",
    # Provider keys with a recognisable shape.
    r"(?P<key>\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[bpars]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|glpat-[A-Za-z0-9_\-]{20,})\b)",
    # Authorization: Bearer x / Basic x / token x.
    r"(?P<authp>\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\s+)(?P<auth>[A-Za-z0-9._~+/=\-]{8,})",
    # scheme://user:password@host
    r"(?P<urlp>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@\"']*:)(?P<url>[^\s@/\"']+)(?=@)",
    # --password x, --api-key=x
    r"(?P<flagp>(?<![\w-])--?[\w-]*" + _KEY_WORDS + r"(?:\s+|=))(?P<flag>[^\s\"'-][^\s\"']*)",
    # password=x, "api_key": "x", TOKEN: x (the key ends with the word; "max_tokens" is no key)
    r"(?P<kvp>(?<![\w-])[\w.-]*" + _KEY_WORDS + r"[\"']?\s*[=:]\s*)"
    r"(?P<kv>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\])]+)",
]
_PEM, _PROVIDER, _AUTH, _URL, _FLAG, _KV = (
    re.compile(_PATTERNS[0], re.DOTALL),
    re.compile(_PATTERNS[1]),
    re.compile(_PATTERNS[2], re.IGNORECASE),
    re.compile(_PATTERNS[3], re.IGNORECASE),
    re.compile(_PATTERNS[4], re.IGNORECASE),
    re.compile(_PATTERNS[5], re.IGNORECASE),
)
# The characters ``re.IGNORECASE`` matches to an ASCII letter that ``str.lower`` does not
# lower to that letter alone (dotted and dotless i, long s); the Kelvin sign lowers to k.
_KEY_LITERALS = ("api_key", "api-key", "apikey", "access_key", "access-key", "accesskey")
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
_SENSITIVE_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|credential|private[_-]?key",
    re.IGNORECASE,
)


def _replace(match: re.Match[str]) -> str:
    groups = match.groupdict()
    for name in ("authp", "urlp", "flagp", "kvp"):
        prefix = groups.get(name)
        if prefix is not None:
            value = groups[name[:-1]] or ""
            if REDACTED[:-1] in value:
                return match.group(0)
            quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 else ""
            return f"{prefix}{quote}{REDACTED}{quote}"
    return REDACTED


def redact_text(text: str) -> str:
    """The text with every secret it holds replaced by ``[REDACTED]``.

    Each pattern runs only when the text holds the literals every match of it needs (most
    outputs hold none, and a substring check is a C loop that costs far less than a pattern):
    provider keys and PEM headers are matched case-sensitively, the rest on the lower-cased
    text with the few characters that ``re.IGNORECASE`` folds to ASCII letters folded too.

    Args:
        text: any text (a command, a tool's output, an error).

    Returns:
        The text, unchanged when it holds no secret.
    """
    low = text.lower() if text.isascii() else text.translate(_FOLD).lower()
    if "PRIVATE KEY" in text:
        text = _PEM.sub(_replace, text)
    if (
        ("-" in text and ("sk-" in text or "xox" in text or "glpat-" in text))
        or ("A" in text and ("AKIA" in text or "ASIA" in text or "AIza" in text))
        or ("_" in text and ("gh" in text or "github_pat_" in text))
    ):
        text = _PROVIDER.sub(_replace, text)
    if "bearer" in low or "basic" in low:
        text = _AUTH.sub(_replace, text)
    if "@" in text and "://" in text:
        text = _URL.sub(_replace, text)
    if (
        "secret" in low
        or "token" in low
        or "auth" in low
        or ("pass" in low and ("passw" in low or "passphrase" in low))
        or ("key" in low and any(k in low for k in _KEY_LITERALS))
    ):
        if "-" in text:
            text = _FLAG.sub(_replace, text)
        if "=" in text or ":" in text:
            text = _KV.sub(_replace, text)
    return text


def is_sensitive_key(key: str) -> bool:
    """True when an argument named ``key`` holds a secret (password, token, secret, API key)."""
    return _SENSITIVE_KEY.search(key) is not None


def redact_value(value: Any) -> Any:
    """A copy of a JSON-like value with secrets replaced.

    Mappings keep their keys; the value of a sensitive key (see ``is_sensitive_key``) becomes
    ``[REDACTED]`` whole (unless it is empty or ``None``). Lists and tuples become lists;
    strings go through ``redact_text``; other values are returned as they are.
    """
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, dict | Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            if is_sensitive_key(key) and v not in (None, "") and not isinstance(v, bool):
                out[key] = REDACTED
            else:
                out[key] = redact_value(v)
        return out
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
