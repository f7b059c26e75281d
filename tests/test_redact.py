"""Redaction replaces secrets in text and in arguments, and nothing else."""

from __future__ import annotations

import pytest

from antiloop.redact import REDACTED, is_sensitive_key, redact_text, redact_value

SECRETS = [
    ("OPENAI_API_KEY=sk-proj-" + "a1B2" * 8, "sk-proj-"),
    ("key: sk-ant-api03-" + "Xy_-" * 10, "sk-ant-api03"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("token ghp_" + "a" * 36, "ghp_aaaa"),
    ("github_pat_" + "b" * 40, "github_pat_bbbb"),
    ("slack xoxb-123456789012-abcdefABCDEF", "xoxb-1234"),
    ("google AIza" + "c" * 35, "AIzaccc"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
    ("curl https://bob:hunter2@example.com/x", "hunter2"),
    ("postgresql://app:pa55w0rd@db:5432/prod", "pa55w0rd"),
    ("mysql --password hunter3 -u root", "hunter3"),
    ("tool --api-key=abc123def", "abc123def"),
    ("DB_PASSWORD=letmein", "letmein"),
    ('{"client_secret": "s3cr3t", "n": 1}', "s3cr3t"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIE"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "b3BlbnNz"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secrets_in_text_are_replaced(text: str, secret: str) -> None:
    """Each kind of secret disappears and a [REDACTED] marker takes its place."""
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "no secrets here",
        "max_tokens: 512",
        "author: Ann",
        "https://example.com/path?q=1",
        "ask-me-anything",
        "the token budget is 3",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    """Text without secrets comes back as it was."""
    assert redact_text(text) == text


def test_redaction_is_idempotent_and_keeps_quotes() -> None:
    """Redacting twice changes nothing more; a quoted value stays quoted."""
    once = redact_text('{"password": "abc", "x": 1}')
    assert once == '{"password": "[REDACTED]", "x": 1}'
    assert redact_text(once) == once


def test_values_of_sensitive_keys_are_replaced_whole() -> None:
    """Args whose key names a password, token, secret or API key lose their value."""
    args = {
        "user": "bob",
        "password": "x",
        "apiKey": "y",
        "nested": [{"auth_token": 12345, "empty_secret": ""}],
        "command": "echo Bearer abcdefghijkl",
        "flag": True,
    }
    assert redact_value(args) == {
        "user": "bob",
        "password": REDACTED,
        "apiKey": REDACTED,
        "nested": [{"auth_token": REDACTED, "empty_secret": ""}],
        "command": f"echo Bearer {REDACTED}",
        "flag": True,
    }


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        ("password", True),
        ("API_KEY", True),
        ("x-api-key", True),
        ("db_passwd", True),
        ("private_key", True),
        ("credentials", True),
        ("path", False),
        ("pattern", False),
    ],
)
def test_sensitive_keys(key: str, sensitive: bool) -> None:
    """Keys are sensitive when they name a secret."""
    assert is_sensitive_key(key) is sensitive


TRICKY = [
    *(text for text, _ in SECRETS),
    "tests/test_m1.py::test_1 PASSED\nmax_tokens: 512\nauthor: Ann",
    "KeyError: 'x'\nmonkey=1 apikey: k3y auth_header=Basic YWxhZGRpbjpvcGVu",
    "git clone https://user@host/x and ssh git@github.com:a/b",
    "--passphrase 'open sesame' --no-password -p x",
    "ASIA1234567890ABCDEF and AKIAshort and sk-short and xoxp-1234567890-a",
    "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
    "SECRET_KEY = 'x'\nAccess-Key: y\nACCESSKEY=z\ntoken:'t'",
    "na\u00efve caf\u00e9 password=\u00fcber-geheim \u2603",
]


@pytest.mark.parametrize("text", TRICKY)
def test_literal_prefilters_never_change_the_result(text: str) -> None:
    """Skipping a pattern whose literals are absent gives what running every pattern gives."""
    from antiloop import redact

    expected = text
    for pattern in (
        redact._PEM,
        redact._PROVIDER,
        redact._AUTH,
        redact._URL,
        redact._FLAG,
        redact._KV,
    ):
        expected = pattern.sub(redact._replace, expected)
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "pa\u017fsword=hunter2",
        "\u017fecret: hunter2",
        "api_to\u212aen=hunter2",
        "ap\u0130_key=hunter2",
    ],
)
def test_letters_that_ignorecase_folds_do_not_hide_a_key(text: str) -> None:
    """A key word spelt with the long s, the Kelvin sign or a dotted I is still redacted."""
    out = redact_text(text)
    assert "hunter2" not in out
    assert REDACTED in out
