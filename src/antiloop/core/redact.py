"""Redaction: the one place secrets are replaced before anything leaves the core.

Pure functions, standard library only. Every sink (the audit log, stored session state,
fingerprints, reasons and hints, approval requests, webhooks, live events, the dashboard and
exports) passes text through ``redact_text`` and values through ``redact_value``.

``redact_text`` replaces:

- provider keys with a recognisable shape: OpenAI/Anthropic ``sk-…``, AWS ``AKIA…``/``ASIA…``,
  GitHub ``ghp_…``/``github_pat_…``, GitLab ``glpat-…`` (and ``gldt-``, ``glptt-``, ``glrt-``),
  Slack ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/``xoxe-``/``xapp-`` tokens and
  webhook URLs, Stripe ``sk_live_``/``rk_live_``/``pk_live_``/``whsec_`` (and ``_test_``),
  Google ``AIza…``, npm ``npm_…``, PyPI ``pypi-AgE…``, Hugging Face ``hf_…``;
- JSON web tokens (``eyJ…`` . ``…`` . ``…``) and standalone 40-character AWS secret keys;
- bearer and basic credentials, passwords in URLs, ``--password x`` flags, ``mysql -px`` and
  ``sshpass -p x``, ``key=value`` pairs
  whose key names a password, token, secret or API key, and private key blocks;
- high-entropy values (16+ characters, letters and digits) after a secret-looking key (``key``,
  ``secret``, ``token``, ``pwd``, ``sig``, ``cookie``, ``salt``...), also when separated by
  a space only (``aws_secret_access_key wJalr…``);
- the start of a provider key or of a random run cut short: before an ellipsis (``…``,
  ``...``), or at the end of a text of 64 characters or more (where the core cuts texts).

``redact_value`` walks JSON-like values: the value of a key that contains ``password``,
``passwd``, ``token``, ``secret``, ``api_key`` (or ``apikey``, ``api-key``), ``credential`` or
``private_key`` is replaced whole, a high-entropy string under a secret-looking key too; every
string is passed to ``redact_text``. Redacting twice gives what redacting once gives.

Example:
    >>> redact_text("curl -H 'Authorization: Bearer abcdef123456' https://u:pw@h/x")
    "curl -H 'Authorization: Bearer [REDACTED]' https://u:[REDACTED]@h/x"
    >>> redact_value({"user": "bob", "password": "hunter2"})
    {'user': 'bob', 'password': '[REDACTED]'}
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "is_sensitive_key", "looks_random", "redact_text", "redact_value"]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_KEY_WORDS = r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|auth)"
# Words that make a key look secret when its value also looks random.
_WEAK_WORDS = r"(?:key|secret|token|passw|pass|pwd|auth|cred|sig|cookie|salt|private)"
_B64 = r"A-Za-z0-9+/"

# Each alternative is one named group; the replacement keeps the named prefix group, if any.
_PATTERNS = [
    # Private key blocks (PEM), whole.
    r"(?P<pem>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z))",
    # Provider keys with a recognisable shape, and JSON web tokens.
    r"(?P<key>\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox(?:[abeoprs]|e\.xox[bp])-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_\-]{20,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[0-9A-Za-z]{20,}"
    r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_\-]{40,}|hf_[A-Za-z0-9]{30,})(?!\w)"
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r"|(?<=hooks\.slack\.com/services/)[A-Za-z0-9]+/[A-Za-z0-9]+/[A-Za-z0-9]+)",
    # Authorization: Bearer x / Basic x / token x.
    r"(?P<authp>\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\s+)(?P<auth>[A-Za-z0-9._~+/=\-]{8,})",
    # scheme://user:password@host
    r"(?P<urlp>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@\"']*:)(?P<url>[^\s@/\"']+)(?=@)",
    # --password x, --api-key=x
    r"(?P<flagp>(?<![\w-])--?[\w-]*" + _KEY_WORDS + r"(?:\s+|=))(?P<flag>[^\s\"'-][^\s\"']*)",
    # mysql -phunter2 (attached: "-p x" asks for one), sshpass -p x
    r"(?P<myp>\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n;|&]*?\s-p(?=[^\s-])"
    r"|\bsshpass\s+-p\s*)(?P<my>[^\s\"']+)",
    # password=x, "api_key": "x", TOKEN: x (the key ends with the word; "max_tokens" is no key)
    r"(?P<kvp>(?<![\w-])[\w.-]*" + _KEY_WORDS + r"[\"']?\s*[=:]\s*)"
    r"(?P<kv>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\])]+)",
    # secret-looking key, then a value that must look random (checked in _replace)
    r"(?P<hip>(?<![\w.-])[\w.-]*" + _WEAK_WORDS + r"[\w-]{0,12}[\"']?(?:\s*[=:]\s*|\s+)[\"']?)"
    r"(?P<hi>[A-Za-z0-9+/=_\-~]{16,})(?![A-Za-z0-9+/=_\-~.])",
    # A standalone AWS secret access key: 40 base64 characters, not part of a longer run.
    rf"(?P<aws>(?<![{_B64}=_\-])[{_B64}]{{40}}(?![{_B64}=_\-]))",
    # The start of a provider key, or of a random run, cut short by "…", "..." or the end.
    r"(?:\b(?P<cutp>(?:AKIA|ASIA)[0-9A-Z]{4,15}|gh[pousr]_[A-Za-z0-9]{4,}|github_pat_\w{4,}"
    r"|sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{6,}|xox[abeoprs]-[A-Za-z0-9\-]{4,}|xapp-[0-9A-Za-z\-]{4,}"
    r"|gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_\-]{4,}|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{2,}"
    r"|eyJ[A-Za-z0-9_\-]{6,}(?:\.[A-Za-z0-9_\-]*){0,2}|AIza[0-9A-Za-z_\-]{4,}"
    r"|whsec_[0-9A-Za-z]{4,}|npm_[A-Za-z0-9]{4,}|pypi-AgE[A-Za-z0-9_\-]{4,}|hf_[A-Za-z0-9]{6,})"
    rf"|(?<![{_B64}=_\-])(?P<cutr>[{_B64}]{{16,39}}))(?=…|\.\.\.|\Z)",
]
_PEM, _PROVIDER, _AUTH, _URL, _FLAG, _MYSQL, _KV, _HIGH, _AWS, _CUT = (
    re.compile(_PATTERNS[0], re.DOTALL),
    re.compile(_PATTERNS[1]),
    re.compile(_PATTERNS[2], re.IGNORECASE),
    re.compile(_PATTERNS[3], re.IGNORECASE),
    re.compile(_PATTERNS[4], re.IGNORECASE),
    re.compile(_PATTERNS[5], re.IGNORECASE),
    re.compile(_PATTERNS[6], re.IGNORECASE),
    re.compile(_PATTERNS[7], re.IGNORECASE),
    re.compile(_PATTERNS[8]),
    re.compile(_PATTERNS[9]),
)
# The characters ``re.IGNORECASE`` matches to an ASCII letter that ``str.lower`` does not
# lower to that letter alone (dotted and dotless i, long s); the Kelvin sign lowers to k.
_KEY_LITERALS = ("api_key", "api-key", "apikey", "access_key", "access-key", "accesskey")
_WEAK_LITERALS = ("key", "secret", "token", "pass", "pwd", "auth", "cred", "sig", "cookie", "salt")
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
_SENSITIVE_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|credential|private[_-]?key",
    re.IGNORECASE,
)
_WEAK_KEY = re.compile(_WEAK_WORDS, re.IGNORECASE)
_LONG_RUN = re.compile(rf"[{_B64}]{{16}}")
_TAIL = 128  # longer than any cut key the end-of-text rule looks for
_CUT_AT_LEAST = 64  # the core cuts texts to 120 (contexts) or 50 characters and an ellipsis


def looks_random(value: str) -> bool:
    """True when ``value`` reads as a generated secret: 16+ characters, letters and digits.

    Its characters' Shannon entropy must reach 3 bits each; a value with ``/`` (a path, or
    base64) needs upper case, lower case and digits all three.

    Example:
        >>> looks_random("9f8Kq2LmZx71PwQe"), looks_random("documentation_index")
        (True, False)
    """
    if len(value) < 16:
        return False
    digit = any(c.isdigit() for c in value)
    if not digit or not any(c.isalpha() for c in value):
        return False
    if "/" in value and not (any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    n = len(value)
    entropy = -sum(k / n * math.log2(k / n) for k in Counter(value).values())
    return entropy >= 3.0


def _aws_secret(run: str) -> bool:
    """A 40-character run reads as an AWS secret key: mixed case, digits, high entropy."""
    return (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and looks_random(run)
    )


def _replace(match: re.Match[str]) -> str:
    groups = match.groupdict()
    run = groups.get("aws")
    if run is not None:
        return REDACTED if _aws_secret(run) else run
    if groups.get("cutp") is not None:
        return REDACTED
    cut = groups.get("cutr")
    if cut is not None:
        return REDACTED if _aws_secret(cut) else cut
    hi = groups.get("hi")
    if hi is not None:
        return f"{groups['hip']}{REDACTED}" if looks_random(hi) else match.group(0)
    for name in ("authp", "urlp", "flagp", "myp", "kvp"):
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
        (
            "-" in text
            and (
                "sk-" in text or "xox" in text or "gl" in text or "xapp-" in text or "pypi-" in text
            )
        )
        or ("A" in text and ("AKIA" in text or "ASIA" in text or "AIza" in text))
        or (
            "_" in text
            and (
                "gh" in text
                or "github_pat_" in text
                or "k_" in text
                or "whsec_" in text
                or "npm_" in text
                or "hf_" in text
            )
        )
        or "eyJ" in text
        or "hooks.slack.com/services/" in text
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
    if " -p" in text and ("mysql" in low or "mariadb" in low or "sshpass" in low):
        text = _MYSQL.sub(_replace, text)
    long_run = len(text) >= 16 and _LONG_RUN.search(text) is not None
    if long_run:
        if any(w in low for w in _WEAK_LITERALS):
            text = _HIGH.sub(_replace, text)
        if len(text) >= 40:
            text = _AWS.sub(_replace, text)
    if "…" in text or "..." in text:
        text = _CUT.sub(_replace, text)
    elif len(text) >= _CUT_AT_LEAST:
        # Only a match that ends the text is possible: search its tail alone.
        match = _CUT.search(text, max(0, len(text) - _TAIL))
        if match is not None:
            text = text[: match.start()] + _replace(match) + text[match.end() :]
    return text


def _weak_key(key: str) -> bool:
    return _WEAK_KEY.search(key) is not None


def is_sensitive_key(key: str) -> bool:
    """True when an argument named ``key`` holds a secret (password, token, secret, API key)."""
    return _SENSITIVE_KEY.search(key) is not None


def redact_value(value: Any) -> Any:
    """A copy of a JSON-like value with secrets replaced.

    Mappings keep their keys; the value of a sensitive key (see ``is_sensitive_key``) becomes
    ``[REDACTED]`` whole (unless it is empty or ``None``), and so does a string that
    ``looks_random`` under a secret-looking key (``session_key``, ``sig``, ``cookie``...).
    Lists and tuples become lists; strings go through ``redact_text``; other values are
    returned as they are.
    """
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, dict | Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            if (is_sensitive_key(key) and v not in (None, "") and not isinstance(v, bool)) or (
                isinstance(v, str) and _weak_key(key) and looks_random(v)
            ):
                out[key] = REDACTED
            else:
                out[key] = redact_value(v)
        return out
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
