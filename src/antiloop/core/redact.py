"""Redaction: the one place secrets are replaced before anything leaves the core.

Pure functions, standard library only. Every sink (the audit log, stored session state,
fingerprints, reasons and hints, approval requests, webhooks, live events, the dashboard and
exports) passes text through ``redact_text`` and values through ``redact_value``.

``redact_text`` replaces:

- tokens with a recognisable shape: the rows of ``antiloop.core.rules.secrets`` (providers'
  API keys and tokens, JSON web tokens, Slack, Discord and Microsoft Teams webhook URLs);
- standalone 40-character AWS secret keys;
- private key blocks (PEM, OpenSSH, PGP ``PRIVATE KEY BLOCK``), whole;
- bearer and basic credentials, passwords in URLs, ``--password x`` flags, ``mysql -px``,
  ``sshpass -p x``, ``docker login -p x``, ``curl -u user:x``, ``password x`` in prose (unless
  ``x`` is a common word: ``password reset``), and ``key=value`` pairs whose key names a
  password, token, secret or API key;
- high-entropy values (16+ characters, letters and digits) after a secret-looking key (``key``,
  ``secret``, ``token``, ``pwd``, ``sig``, ``cookie``, ``salt``...), also when separated by
  a space only (``aws_secret_access_key wJalr…``);
- the start of a provider key or of a random run cut short: before an ellipsis (``…``,
  ``...``), or at the end of a text of 64 characters or more (where the core cuts texts).

The fake secrets of ``tests/secrets_corpus.py`` check every kind, and near-misses (git SHAs,
UUIDs, digests, ordinary words) that must stay.

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

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from antiloop.core.rules import secrets
from antiloop.core.rules.secrets import TOKEN_KINDS

__all__ = [
    "REDACTED",
    "TOKEN_KINDS",
    "is_sensitive_key",
    "looks_random",
    "redact_name",
    "redact_text",
    "redact_value",
]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

# -- tokens with a recognisable shape (case-sensitive), in one pattern (none inside a word) ---
_GATED = tuple((kind, literal, re.compile(shape)) for kind, literal, shape in secrets.GATED_KINDS)


def _branches(shape: str) -> list[str]:
    """The top-level alternatives of a shape (``a|b`` is two, ``a(?:b|c)`` one)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(shape):
        if c == "(" and shape[i - 1 : i] != "\\":
            depth += 1
        elif c == ")" and shape[i - 1 : i] != "\\":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(shape[start:i])
            start = i + 1
    return [*out, shape[start:]]


def _grouped(shapes: list[str]) -> str:
    """The shapes as one alternation, grouped by the first character of each alternative.

    An alternative that starts with a character class stays whole.
    """
    groups: dict[str, list[str]] = {}
    whole: list[str] = []
    for shape in shapes:
        for branch in _branches(shape):
            if branch[0].isalnum():
                groups.setdefault(branch[0], []).append(branch[1:])
            else:
                whole.append(branch)
    return "|".join([f"{first}(?:{'|'.join(rests)})" for first, rests in groups.items()] + whole)


# A shape starts after a character that is no letter, digit or "_" (a space, a quote, "=",
# ":", "/"...): the pattern starts with that character, so only those positions are tried (the
# text is searched with a space in front, for a token at its start).
_TOKEN_SHAPES = re.compile(r"[^\w](?:" + _grouped(list(TOKEN_KINDS.values())) + r")(?!\w)")
# The same for an ASCII text: the ASCII characters that are no letter, digit or "_", as a
# bitmap sre tests in a few instructions (a category test per character costs several times more)
_ASCII_TOKEN_SHAPES = re.compile(
    r"[\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f](?:"
    + _grouped(list(TOKEN_KINDS.values()))
    + r")(?!\w)"
)
_WEBHOOK_URLS = re.compile(secrets.WEBHOOK_URLS)

_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)

# -- rules found on the lower-cased text -----------------------------------------------------
# These run on ``low`` (the text lower-cased, with the few characters ``str.lower`` does not
# fold to an ASCII letter folded too: same length, same offsets), where a case-sensitive
# pattern that starts with its key word is several times faster than ``re.IGNORECASE``. The
# value group ``v`` is replaced in the original text; the text before it is kept.
_B64 = r"A-Za-z0-9+/"

_AUTH = re.compile(r"\b(?:bearer|basic)\s+(?P<v>[a-z0-9._~+/=-]{8,})")
_URL = re.compile(r"://[^\s/:@\"']*:(?P<v>[^\s@/\"']+)(?=@)")
# --password x, --api-key=x (the word must be part of a flag: checked in _flag)
_FLAG = re.compile(secrets.KEY_WORDS + r"(?:\s+|=)(?P<v>[^\s\"'-][^\s\"']*)")
# mysql -phunter2 (attached: "-p x" asks for one), sshpass -p x, docker login -p x
_CLI = re.compile(
    r"(?:\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n;|&]*?\s-p(?=[^\s-])"
    r"|\bsshpass\s+-p\s*"
    r"|\bdocker\s+login\b[^\n;|&]*?\s-p\s+"
    r"|\bcurl\b[^\n;|&]*?\s(?:-u\s*|--user[\s=]+)[\"']?[^\s:\"']+:)(?P<v>[^\s\"']+)"
)
# password=x, "api_key": "x", TOKEN: x (the key ends with the word; "max_tokens" is no key)
_KV = re.compile(
    secrets.KEY_WORDS + r"[\"']?\s*[=:]\s*(?P<v>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\])]+)"
)
# password hunter2: the next word, unless it is a word of prose (checked in _prose)
_WORD = re.compile(r"\b(?:password|passphrase|passcode)\s+(?P<v>[^\s\"'`<>()\[\]{},;]+)")
# secret-looking key, then a value that must look random
_HIGH = re.compile(
    secrets.WEAK_WORDS + r"[\w-]{0,12}[\"']?(?:\s*[=:]\s*|\s+)[\"']?"
    r"(?P<v>[a-z0-9+/=_\-~]{16,})(?![a-z0-9+/=_\-~.])"
)

# -- rules on the text as it is --------------------------------------------------------------
# A standalone AWS secret access key: 40 base64 characters, not part of a longer run.
_AWS = re.compile(rf"(?<![{_B64}_\-])[{_B64}]{{40}}(?![{_B64}=_\-])")


# Starts that ordinary words share (``secret_santa``, ``key-value``): cut, they stay.
_COMMON_STARTS = frozenset({"secret_", "key-", "xapp-", "whsec_", "github_pat_"})


def _cut_starts() -> list[str]:
    """Each token shape's literal start (4 characters or more), then 6 or more of its body."""
    out = []
    for shape in TOKEN_KINDS.values():
        for branch in _branches(shape):
            start = re.match(r"(?:[\w~-]|\\\.)+", branch)
            literal = start.group(0) if start else ""
            if len(literal.replace("\\", "")) >= 4 and literal not in _COMMON_STARTS:
                out.append(literal + r"[\w.~+/=-]{6,}")
    return out


# The start of a provider key, or of a random run, cut short by "…", "..." or the end.
_CUT = re.compile(
    r"(?:\b(?P<cutp>(?:AKIA|ASIA)[0-9A-Z]{4,15}|gh[pousr]_[A-Za-z0-9]{4,}|github_pat_\w{4,}"
    r"|sk-(?:ant-|proj-)?[\w-]{6,}|xox[abeoprs]-[A-Za-z0-9-]{4,}|xapp-[0-9A-Za-z-]{4,}"
    r"|gl(?:pat|dt|ptt|rt)-[\w-]{4,}|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{2,}"
    r"|eyJ[\w-]{6,}(?:\.[\w-]*){0,2}|AIza[\w-]{4,}|SG\.[\w-]{4,}(?:\.[\w-]*)?"
    r"|whsec_[0-9A-Za-z]{4,}|npm_[A-Za-z0-9]{4,}|pypi-AgE[\w-]{4,}|hf_[A-Za-z0-9]{6,}"
    r"|SK[0-9a-fA-F]{16,31}|key-[0-9a-f]{6,}|do[opr]_v1_[0-9a-f]{4,}|gl(?:c|sa)_\w{4,}"
    r"|shp(?:at|ca|pa|ss)_[0-9a-fA-F]{4,}|dp\.(?:pt|st|sa|ct)\.\w{4,}|sq0(?:atp|csp)-[\w-]{4,}"
    r"|r8_\w{6,}|" + "|".join(_cut_starts()) + ")"
    rf"|(?<![{_B64}_\-])(?P<cutr>[{_B64}]{{16,39}}))(?=…|\.\.\.|\Z)"
)

# The characters ``re.IGNORECASE`` would match to an ASCII letter that ``str.lower`` does not
# lower to that letter alone (dotted and dotless i, long s); the Kelvin sign lowers to k.
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
_SENSITIVE_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|credential|private[_-]?key",
    re.IGNORECASE,
)
_WEAK_KEY = re.compile(secrets.WEAK_WORDS, re.IGNORECASE)
_RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-.~=…"
_CUT_SHORTEST = 8  # the shortest cut key the end-of-text rule replaces ("AKIA" and 4)
_RUN_END = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-.")
"""The characters a cut key can end with (the end-of-text rule needs one last)."""
_TAIL = 128  # longer than any cut key the end-of-text rule looks for
_CUT_AT_LEAST = 64  # the core cuts texts to 120 (contexts) or 50 characters and an ellipsis


# Words after "password" that are prose, not the password ("password reset", "password is").
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


# Runs of the characters tokens are made of, found by translating the text to a class per
# character (C loops) rather than by a pattern (a pattern that starts with a repeated class is
# tried at every position): a base64 character becomes "a", the other characters of a token
# ("_", "-", ".", "~", "=") "b", the rest a space.
_RUN_CLASSES: dict[int, str] = {
    **dict.fromkeys(range(128), " "),
    **dict.fromkeys(
        map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"), "a"
    ),
    **dict.fromkeys(map(ord, "_-.~="), "b"),
}
_B64_16 = "a" * 16
_B64_40 = "a" * 40


def _has_token(text: str, runs: str) -> bool:
    """True when a token shape matches in one of the runs of 16 or more token characters.

    An ASCII text's runs are found with ``str.find`` on its classes and searched as one text
    (each run after a space); any other text is searched whole.
    """
    if not text.isascii():
        return _TOKEN_SHAPES.search(" " + text) is not None
    marks = runs.replace("b", "a")
    start = marks.find(_B64_16)
    if start < 0:
        return False
    parts = []
    while start >= 0:
        end = marks.find(" ", start + 16)
        if end < 0:
            parts.append(text[start:])
            break
        parts.append(text[start:end])
        start = marks.find(_B64_16, end)
    return _ASCII_TOKEN_SHAPES.search(" " + " ".join(parts)) is not None


def _token(match: re.Match[str]) -> str:
    return match.group(0)[0] + REDACTED  # the character before the token stays


def _long_run(match: re.Match[str]) -> str:
    run = match.group(0)
    return REDACTED if _aws_secret(run) else run


def _cut(match: re.Match[str]) -> str:
    if match.group("cutp") is not None:
        return REDACTED
    run = match.group("cutr") or ""
    return REDACTED if _aws_secret(run) else run


# What each rule on ``low`` replaces its value with: the value kept as it is (None), or
# ``[REDACTED]`` (inside the value's quotes, if it has any).
def _always(text: str, match: re.Match[str], value: str) -> bool:
    return REDACTED[:-1] not in value


def _random(text: str, match: re.Match[str], value: str) -> bool:
    return looks_random(value)


def _flag(text: str, match: re.Match[str], value: str) -> bool:
    """The key word is part of a flag: its word starts with "-" after a space or the start."""
    at = match.start()
    while at and (text[at - 1].isalnum() or text[at - 1] in "_-"):
        at -= 1
    word = text[at : match.start()]
    return word.startswith("-") and REDACTED[:-1] not in value


def _prose(text: str, match: re.Match[str], value: str) -> bool:
    """``password x``: x is the password unless it is a word of prose or a flag."""
    word = value.lower().rstrip(".:!?")
    return (
        word not in secrets.PROSE
        and not value.startswith(("-", "$", "%"))
        and REDACTED[:-1] not in value
        and not (value.isalpha() and value.istitle())  # a capitalised word: a sentence goes on
    )


def _on_low(
    pattern: re.Pattern[str],
    redact: Callable[[str, re.Match[str], str], bool],
    text: str,
    low: str,
) -> tuple[str, str]:
    """Replace the value of each match of ``pattern`` in ``low`` that ``redact`` accepts."""
    parts: list[str] = []
    at = 0
    for match in pattern.finditer(low):
        start, end = match.span("v")
        value = text[start:end]
        if not redact(text, match, value):
            continue
        quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 else ""
        parts.append(text[at:start])
        parts.append(f"{quote}{REDACTED}{quote}")
        at = end
    if not parts:
        return text, low
    parts.append(text[at:])
    out = "".join(parts)
    return out, _lower(out)


def _lower(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


_CLEAN: set[str] = set()
"""Texts found to hold no secret: a text redacted again (a record's, the state's) costs a lookup."""
_CLEAN_KEPT = 8192  # texts remembered (then forgotten all at once): memory stays bounded
_CLEAN_LONGEST = 512  # longer texts rarely come again: hashing them would cost more


def redact_text(text: str) -> str:
    """The text with every secret it holds replaced by ``[REDACTED]``.

    Each rule runs only when the text holds the literals every match of it needs (most
    outputs hold none, and a substring check is a C loop that costs far less than a pattern).

    Args:
        text: any text (a command, a tool's output, an error).

    Returns:
        The text, unchanged when it holds no secret.
    """
    if len(text) > _CLEAN_LONGEST:
        return _redact(text, False)
    if text in _CLEAN:  # redacted before and found clean (a record's text, the state's again)
        return text
    out = _redact(text, False)
    if out == text:  # only texts that hold no secret are remembered
        if len(_CLEAN) >= _CLEAN_KEPT:
            _CLEAN.clear()
        _CLEAN.add(text)
    return out


def _redact(text: str, every: bool) -> str:
    """``redact_text``; with ``every``, each rule runs whatever literals the text holds."""
    if every or "PRIVATE KEY" in text:
        text = _PEM.sub(REDACTED, text)
    runs = text.translate(_RUN_CLASSES) if len(text) >= 16 else ""
    if every or (len(text) >= 16 and _has_token(text, runs)):  # the shortest has 16 characters
        spaced = " " + text
        shapes = _ASCII_TOKEN_SHAPES if text.isascii() else _TOKEN_SHAPES
        text = shapes.sub(_token, spaced)[1:]
        runs = text.translate(_RUN_CLASSES)
    if every or len(text) >= 16:
        if every or "hooks.slack.com/" in text or "/api/webhooks/" in text or "webhookb2/" in text:
            text = _WEBHOOK_URLS.sub(REDACTED, text)
        for _kind, literal, shape in _GATED:
            if every or literal in text:
                text = shape.sub(REDACTED, text)
    low = _lower(text)
    translated = text
    if every or "bearer" in low or "basic" in low:
        text, low = _on_low(_AUTH, _always, text, low)
    if every or ("@" in text and "://" in text):
        text, low = _on_low(_URL, _always, text, low)
    if every or (
        "secret" in low
        or "token" in low
        or "auth" in low
        or ("pass" in low and ("passw" in low or "passphrase" in low))
        or ("key" in low and any(k in low for k in secrets.KEY_LITERALS))
    ):
        if every or "-" in text:
            text, low = _on_low(_FLAG, _flag, text, low)
        if every or "=" in text or ":" in text:
            text, low = _on_low(_KV, _always, text, low)
    if every or (
        " -" in text
        and (
            "mysql" in low
            or "mariadb" in low
            or "sshpass" in low
            or "docker" in low
            or "curl" in low
        )
    ):
        text, low = _on_low(_CLI, _always, text, low)
    if every or ("password " in low or "passphrase " in low or "passcode " in low):
        text, low = _on_low(_WORD, _prose, text, low)
    if text is not translated and len(text) >= 16:
        runs = text.translate(_RUN_CLASSES)
    if every or _B64_16 in runs:  # a run of 16 base64 characters (not the marks of a token)
        if every or any(w in low for w in secrets.WEAK_LITERALS):
            text, low = _on_low(_HIGH, _random, text, low)
            runs = text.translate(_RUN_CLASSES)
        if every or _B64_40 in runs:
            text = _AWS.sub(_long_run, text)
    ellipses = text.count("…") + text.count("...")
    if ellipses > 1 or (ellipses and not text.endswith(("…", "..."))):
        text = _CUT.sub(_cut, text)  # a rule of meaning, not a literal check: always
    elif ellipses or (len(text) >= _CUT_AT_LEAST and text[-1] in _RUN_END):
        # Only a match that ends the text (before its one ellipsis) is possible, and it is
        # made of the characters of a run: search the run the text ends with alone.
        start = len(text.rstrip(_RUN_CHARS))
        if len(text) - start >= _CUT_SHORTEST:
            text = _cut_tail(text, start)
    return text


def _cut_tail(text: str, start: int) -> str:
    """``text`` with the cut key or random run that ends it (from ``start`` on) replaced."""
    match = _CUT.search(text, start)
    if match is None:
        return text
    return text[: match.start()] + _cut(match) + text[match.end() :]


_NAMES: dict[str, str] = {}
_NAMES_KEPT = 4096  # names remembered (then forgotten all at once): memory stays bounded


def redact_name(name: str) -> str:
    """A session, agent or tool name with any secret in it replaced.

    A name that holds none is returned as it is; one that does becomes its redacted text and
    ``#`` and 12 hex digits of its SHA-256, so that two names that differ only in their secret
    stay two (the same name always gives the same result, in every process). Names repeat
    step after step: each is redacted once and remembered.

    Example:
        >>> redact_name("deploy-ghp_16C7e42F292c6912E7710c838347Ae178B4a")
        'deploy-[REDACTED]#fec7eec3a051'
    """
    if len(name) < 16 and name.isalnum():  # no rule matches so short a word
        return name
    found = _NAMES.get(name)
    if found is None:
        clean = redact_text(name)
        found = name
        if clean != name:
            digest = hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:12]
            found = f"{clean}#{digest}"
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        _NAMES[name] = found
    return found


def _weak_key(key: str) -> bool:
    return _WEAK_KEY.search(key) is not None


def is_sensitive_key(key: str) -> bool:
    """True when an argument named ``key`` holds a secret (password, token, secret, API key)."""
    return _SENSITIVE_KEY.search(key) is not None


def redact_value(value: Any, keep_numbers: bool = False) -> Any:
    """A copy of a JSON-like value with secrets replaced.

    Mappings keep their keys; the value of a sensitive key (see ``is_sensitive_key``) becomes
    ``[REDACTED]`` whole (unless it is empty or ``None``, or, with ``keep_numbers``, a number:
    a limit such as ``session_hard_tokens``), and so does a string that ``looks_random``
    under a secret-looking key (``session_key``, ``sig``, ``cookie``...). Lists and tuples
    become lists; strings go through ``redact_text``; other values are returned as they are.
    """
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, dict | Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            if (
                is_sensitive_key(key)
                and v not in (None, "")
                and not isinstance(v, bool)
                and not (keep_numbers and isinstance(v, int | float))
            ) or (isinstance(v, str) and _weak_key(key) and looks_random(v)):
                out[key] = REDACTED
            else:
                out[key] = redact_value(v, keep_numbers)
        return out
    if isinstance(value, list | tuple):
        return [redact_value(v, keep_numbers) for v in value]
    return value
