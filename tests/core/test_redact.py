"""Redaction replaces secrets in text and in arguments, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from antiloop.core.redact import REDACTED, is_sensitive_key, redact_text, redact_value
from antiloop.core.verdict import Action

# Every secret kind, with what the redactor must make of it, written out by hand (not computed
# with the module's own patterns: dropping a pattern must fail here).
EXPECTED = [
    # OpenAI, Anthropic
    ("OPENAI_API_KEY=sk-proj-a1B2a1B2a1B2a1B2a1B2a1B2a1B2a1B2", "OPENAI_API_KEY=[REDACTED]"),
    ("key: sk-ant-api03-Xy_-Xy_-Xy_-Xy_-Xy_-Xy_-", "key: [REDACTED]"),
    ("use sk-ant-api03-Xy_-Xy_-Xy_-Xy_-Xy_-Xy_ now", "use [REDACTED] now"),
    # AWS: access key ids, and a standalone secret access key
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED] here"),
    ("sts ASIAY34FZKBOKMUTVV7A done", "sts [REDACTED] done"),
    ("secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok", "secret is [REDACTED] ok"),
    ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "[REDACTED]"),
    (
        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws configure set aws_secret_access_key [REDACTED]",
    ),
    # GitHub
    (
        "git push https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r",
        "git push https://[REDACTED]@github.com/o/r",
    ),
    ("GH=gho_16C7e42F292c6912E7710c838347Ae178B4a", "GH=[REDACTED]"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU",
        "[REDACTED]",
    ),
    ("github_pat_11ABCDEFG0_Pr0beP4tB0dyW1thNoG1tHubL3tters", "[REDACTED]"),
    # GitLab
    ("git clone glpat-Zz9yXw8VuT7sRq6PoN5m", "git clone [REDACTED]"),
    ("gldt-Zz9yXw8VuT7sRq6PoN5m", "[REDACTED]"),
    # Slack: every token kind, app tokens and webhook URLs
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack [REDACTED]"),
    ("xoxp-123456789012-123456789012-123456789012-abcdef0123456789abcdef", "[REDACTED]"),
    ("legacy xoxa-2-123456789012-abcdefABCDEF", "legacy [REDACTED]"),
    ("refresh xoxr-123456789012-abcdefABCDEF", "refresh [REDACTED]"),
    ("session xoxs-123456789012-abcdefABCDEF", "session [REDACTED]"),
    ("xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAxMg", "[REDACTED]"),
    ("app xapp-1-A0123456789-1234567890123-abcdef0123456789", "app [REDACTED]"),
    (
        "curl -d x https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "curl -d x https://hooks.slack.com/services/[REDACTED]",
    ),
    # Stripe-style
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [REDACTED]"),
    ("rk_live_51H8abcdEFGH1234ijkl,", "[REDACTED],"),
    ("pk_live_51H8abcdEFGH1234ijkl", "[REDACTED]"),
    ("(sk_test_4eC39HqLyjWDarjtT1zdp7dc)", "([REDACTED])"),
    ("whsec_1234567890abcdefABCDEF123456", "[REDACTED]"),
    # Google, npm, PyPI, Hugging Face
    ("google AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "google [REDACTED]"),
    (
        "//registry/:_authToken npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "//registry/:_authToken [REDACTED]",
    ),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "[REDACTED]"),
    (
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmFiLTEyMzQtNTY3OC05MGFiLWNkZWYxMjM0NTY3OAACKlszLCJhYmMiXQ",
        "[REDACTED]",
    ),
    # JSON web tokens, with and without a signature
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
        "jwt [REDACTED] end",
    ),
    ("X-Id: eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ. ok", "X-Id: [REDACTED] ok"),
    # Authorization headers, URL passwords, flags, key=value
    ("Authorization: Bearer abcdef0123456789", "Authorization: Bearer [REDACTED]"),
    ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Authorization: Basic [REDACTED]"),
    ("curl https://bob:hunter2@example.com/x", "curl https://bob:[REDACTED]@example.com/x"),
    ("postgresql://app:pa55w0rd@db:5432/prod", "postgresql://app:[REDACTED]@db:5432/prod"),
    ("mysql --password hunter3 -u root", "mysql --password [REDACTED] -u root"),
    ("tool --api-key=abc123def", "tool --api-key=[REDACTED]"),
    ("mysql -u root -phunter4 -e 'select 1'", "mysql -u root -p[REDACTED] -e 'select 1'"),
    ("sshpass -p hunter5 ssh host", "sshpass -p [REDACTED] ssh host"),
    ("DB_PASSWORD=letmein", "DB_PASSWORD=[REDACTED]"),
    ('{"client_secret": "s3cr3t", "n": 1}', '{"client_secret": "[REDACTED]", "n": 1}'),
    # Private key blocks, closed and cut
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter",
        "[REDACTED]\nafter",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "[REDACTED]"),
    # High-entropy values under secret-looking keys
    ("session_key = 9f8Kq2LmZx71PwQeAB", "session_key = [REDACTED]"),
    ('{"signing_key": "Zm9vYmFyYmF6cXV4MTIzNDU2"}', '{"signing_key": "[REDACTED]"}'),
    ("X-Hub-Sig: 3c9a7f1e2b4d6a8c0e1f3a5b7c9d1e3f", "X-Hub-Sig: [REDACTED]"),
    ("cookie 3c9a7f1e2b4d6a8c0e1f3a5b7c9d1e3f;", "cookie [REDACTED];"),
    # Keys cut short where the core cuts a text (an ellipsis, or the end of a long text)
    ("aws_access_key_id = AKIAIOSFODNN7EXAMP…", "aws_access_key_id = [REDACTED]…"),
    ("ghp_16C7e42F29…", "[REDACTED]…"),
    ("token eyJhbGciOiJIUzI1NiIsInR5cCI6…", "token [REDACTED]…"),
    ("key xoxb-1234567...", "key [REDACTED]..."),
    ("x" * 70 + " wJalrXUtnFEMI/K7MDENG/bPxRfiC", "x" * 70 + " [REDACTED]"),
    ("y" * 70 + " sk_live_4eC39Hq", "y" * 70 + " [REDACTED]"),
    ("out pypi-AgEIcHlwaS5vcmcCJGFi…", "out [REDACTED]…"),
    ("out npm_abcdefghijkl…", "out [REDACTED]…"),
    ("out hf_abcdefghijkl…", "out [REDACTED]…"),
    ("out whsec_1234567890ab…", "out [REDACTED]…"),
]

# The raw secret each case holds; none may survive.
SECRETS = [
    "sk-proj-a1B2a1B2",
    "api03-Xy_",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "wJalrXUtnFEMI/K7MDENG",
    "ghp_16C7e42F",
    "gho_16C7e42F",
    "github_pat_11ABC",
    "Pr0beP4tB0dy",
    "glpat-Zz9y",
    "gldt-Zz9y",
    "xoxb-1234",
    "xoxp-1234",
    "xoxa-2-1234",
    "xoxr-1234",
    "xoxs-1234",
    "xoxe.xoxp",
    "xapp-1-A0",
    "XXXXXXXXXXXXXXXXXXXXXXXX",
    "sk_live_4eC39",
    "rk_live_51H8",
    "pk_live_51H8",
    "sk_test_4eC39",
    "whsec_1234",
    "AIzaSyD",
    "npm_abcdef",
    "hf_abcdef",
    "pypi-AgEIcHlwaS",
    "eyJhbGciOiJ",
    "abcdef0123456789",
    "YWxhZGRpbjpvcGVu",
    "hunter2",
    "pa55w0rd",
    "hunter3",
    "hunter4",
    "hunter5",
    "abc123def",
    "letmein",
    "s3cr3t",
    "MIIEpAIB",
    "b3BlbnNz",
    "9f8Kq2LmZx71",
    "Zm9vYmFyYmF6",
    "3c9a7f1e2b4d",
    "AKIAIOSFODNN7EXAMP",
    "ghp_16C7e42F29",
    "xoxb-1234567",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiC",
    "sk_live_4eC39Hq",
    "pypi-AgEIcHlwaS5vcmcCJGFi",
    "npm_abcdefghijkl",
    "hf_abcdefghijkl",
    "whsec_1234567890ab",
]


@pytest.mark.parametrize(("text", "expected"), EXPECTED)
def test_each_secret_kind_is_redacted_to_the_literal_expectation(text: str, expected: str) -> None:
    """Each kind of secret gives exactly the text written out by hand."""
    assert redact_text(text) == expected


@pytest.mark.parametrize(("text", "expected"), EXPECTED)
def test_redacting_twice_changes_nothing_more(text: str, expected: str) -> None:
    """Redaction is idempotent: the stored form, redacted again on the way out, is the same."""
    assert redact_text(expected) == expected


def test_no_raw_secret_survives_any_case() -> None:
    """Across every case, none of the raw secrets is left in the output."""
    out = "\n".join(redact_text(text) for text, _ in EXPECTED)
    assert [s for s in SECRETS if s in out] == []
    assert all(s in "\n".join(text for text, _ in EXPECTED) for s in SECRETS)


@pytest.mark.parametrize(
    "text",
    [
        "no secrets here",
        "max_tokens: 512",
        "author: Ann",
        "https://example.com/path?q=1",
        "ask-me-anything",
        "the token budget is 3",
        "KeyError: src/antiloop/redact.py",
        "git checkout 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "sort_key=created_at",
        "pip install sk-video",
        "mysql -p mydb -u root",
        "docker run -p 8080:80 img",
        "Loading modules...",
        "see https://hooks.slack.com/ for docs",
        "the key is documentation_index_page",
        "x" * 70 + " src/antiloop/stores/sqlite.py",
        "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
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
        "session_key": "9f8Kq2LmZx71PwQeAB",
        "sort_key": "created_at_desc_order",
        "x-hub-signature": "3c9a7f1e2b4d6a8c0e1f3a5b7c9d1e3f",
    }
    assert redact_value(args) == {
        "user": "bob",
        "password": REDACTED,
        "apiKey": REDACTED,
        "nested": [{"auth_token": REDACTED, "empty_secret": ""}],
        "command": f"echo Bearer {REDACTED}",
        "flag": True,
        "session_key": REDACTED,
        "sort_key": "created_at_desc_order",
        "x-hub-signature": REDACTED,
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
    *(text for text, _ in EXPECTED),
    "tests/test_m1.py::test_1 PASSED\nmax_tokens: 512\nauthor: Ann",
    "KeyError: 'x'\nmonkey=1 apikey: k3y auth_header=Basic YWxhZGRpbjpvcGVu",
    "git clone https://user@host/x and ssh git@github.com:a/b",
    "--passphrase 'open sesame' --no-password -p x",
    "ASIA1234567890ABCDEF and AKIAshort and sk-short and xoxp-1234567890-a",
    "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
    "SECRET_KEY = 'x'\nAccess-Key: y\nACCESSKEY=z\ntoken:'t'",
    "na\u00efve caf\u00e9 password=\u00fcber-geheim \u2603",
    "a" * 80 + " key Zm9vYmFyYmF6cXV4MTIzNDU2 and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "short AKIAIOSFODN",
]


@pytest.mark.parametrize("text", TRICKY)
def test_literal_prefilters_never_change_the_result(text: str) -> None:
    """Skipping a pattern whose literals are absent gives what running every pattern gives."""
    from antiloop.core import redact

    expected = redact._redact(text, True)
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


# -- detection is made on raw data; what is stored is redacted -----------------------------

SHORT_SECRET_STEP = {"tool": "Bash", "args": {"command": "mysql -phunter2 -e 'select 1'"}}


def _verdicts(steps: list[dict[str, object]], store: str | None) -> list[tuple[object, ...]]:
    """Each step judged by a fresh guard on ``store`` (so every state is decoded from bytes)."""
    from antiloop import Guard, GuardConfig

    out = []
    for step in steps:
        guard = Guard(config=GuardConfig(embedder="ngram"), store=store)
        verdict = guard.record(step)
        out.append((verdict.action, verdict.detector, verdict.fingerprint, verdict.reason))
        guard.store.close()
    return out


def test_a_stored_state_judges_as_the_live_one(tmp_path: Path) -> None:
    """Secrets in commands, outputs and messages: SQLite (decoded each step) = memory."""
    from antiloop import Guard, GuardConfig

    steps: list[dict[str, object]] = [
        {
            **SHORT_SECRET_STEP,
            "output": "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "session": "s",
            "message": f"retry {i % 2} with ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        }
        for i in range(4)
    ]
    live = Guard(config=GuardConfig(embedder="ngram"))
    expected = [
        (v.action, v.detector, v.fingerprint, v.reason) for v in (live.record(s) for s in steps)
    ]
    assert expected[1][1] == "repeat"
    assert _verdicts(steps, f"sqlite:///{tmp_path}/a.db") == expected


def test_two_different_secrets_are_two_procedures(tmp_path: Path) -> None:
    """Redaction does not merge calls: the same command with other tokens is no repeat."""
    steps: list[dict[str, object]] = [
        {"tool": "Bash", "args": {"command": f"gh auth ghp_{i}{'a1' * 18}"}, "output": "ok"}
        for i in range(6)
    ]
    assert [v[0] for v in _verdicts(steps, f"sqlite:///{tmp_path}/b.db")] == [Action.CONTINUE] * 6
    same = [{**steps[0], "session": "same"}] * 3
    assert [v[1] for v in _verdicts(same, f"sqlite:///{tmp_path}/b.db")][1] == "repeat"


def test_the_encoded_state_holds_no_raw_secret() -> None:
    """Goal, messages, contexts, heads, error lines and verdicts are redacted in the bytes."""
    from antiloop import Guard, GuardConfig
    from antiloop.stores.codec import decode_state, encode_state

    guard = Guard(config=GuardConfig(embedder="ngram"))
    for _ in range(3):
        guard.record(
            {
                **SHORT_SECRET_STEP,
                "output": "",
                "error": "denied for xoxb-123456789012-abcdefABCDEF",
                "goal": "deploy with sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "message": "the key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            }
        )
    state = guard.store.peek("default")
    assert state is not None
    assert state.ended is not None
    data = encode_state(state)
    for raw in ("hunter2", "xoxb-1234", "sk_live_4eC", "wJalrXUtnFEMI"):
        assert raw.encode() not in data, raw
    again = decode_state(data)
    assert again.goal == "deploy with [REDACTED]"
    assert again.streams["agent"].messages[-1].text == "the key is [REDACTED]"
    assert again.streams["agent"].window[-1].context == "mysql -p[REDACTED] -e 'select 1'"
    assert again.streams["agent"].window[-1].readings.head == "denied for [REDACTED]"


@pytest.mark.parametrize("pad", [0, 9, 17, 25, 33, 41, 49, 57, 65, 73, 81, 89, 97, 105])
def test_no_secret_is_left_half_cut_in_a_fingerprint_or_reason(pad: int) -> None:
    """The result's head, the error line and the context are redacted before they are cut,
    wherever the secret falls against the cut."""
    from antiloop import Guard

    probe = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    words = " ".join(["step"] * (pad // 5 + 1))
    out = f"{words} aws_secret_access_key={probe} ok\n"
    command = f"echo {words} && aws configure set aws_secret_access_key {probe}"
    guard = Guard()
    for _ in range(2):
        verdict = guard.record({"tool": "Bash", "args": {"command": command}, "output": out})
    assert verdict.detector == "repeat"
    shown = f"{verdict.fingerprint} {verdict.reason} {verdict.hint}"
    denied = guard.check("Bash", {"command": command}).reason
    for start in range(len(probe) - 7):
        assert probe[start : start + 8] not in shown, (probe[start : start + 8], shown)
        assert probe[start : start + 8] not in denied, denied


# -- the corpus: every kind of secret, and near-misses that must stay -----------------------

from tests.secrets_corpus import NEAR_MISSES, Case  # noqa: E402
from tests.secrets_corpus import SECRETS as CORPUS  # noqa: E402


def leaked(case: Case, text: str) -> list[str]:
    """The pieces (12 characters or more) of ``case``'s secret that ``text`` still holds."""
    secret = case.secret
    width = min(12, len(secret))
    return sorted(
        {secret[i : i + width] for i in range(len(secret) - width + 1)} & _pieces(text, width)
    )


def _pieces(text: str, width: int) -> set[str]:
    return {text[i : i + width] for i in range(len(text) - width + 1)}


def test_the_corpus_has_forty_kinds_and_each_secret_in_its_text() -> None:
    """At least 40 kinds; each case's secret is in its text (so a leak would show)."""
    assert len({case.kind for case in CORPUS}) >= 40
    for case in CORPUS:
        assert case.secret in case.text, case.kind


@pytest.mark.parametrize("case", CORPUS, ids=[case.kind for case in CORPUS])
def test_every_secret_of_the_corpus_is_redacted(case: Case) -> None:
    """No piece of the secret survives, the text says [REDACTED], and once is enough."""
    out = redact_text(case.text)
    assert leaked(case, out) == [], out
    assert REDACTED in out
    assert redact_text(out) == out


@pytest.mark.parametrize("case", CORPUS, ids=[case.kind for case in CORPUS])
def test_every_secret_is_redacted_in_arguments_and_cut_texts(case: Case) -> None:
    """Under an ordinary key, and at the end of a long text cut after 20 of its characters."""
    assert leaked(case, str(redact_value({"command": case.text}))) == []
    if case.kind in UNCUTTABLE:
        return
    at = case.text.index(case.secret) + 20
    cut = "x " * 40 + case.text[:at] + "…"
    assert case.secret[:20] not in redact_text(cut)


# Kinds whose start, cut short, is no different from ordinary hex or digits.
UNCUTTABLE = {"Mailchimp API key", "Telegram bot token"}


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(text: str) -> None:
    """SHAs, UUIDs, digests and ordinary words come out as they went in."""
    assert redact_text(text) == text
    assert redact_value({"output": text}) == {"output": text}


def test_a_text_redacted_again_gives_the_same_answer_and_no_secret_is_remembered() -> None:
    """Clean texts are remembered (the same object back); a secret's text is redacted each time."""
    from antiloop.core import redact

    clean = "pytest tests/test_one.py -q: 3 passed in 0.2s, output of some length"
    assert redact_text(clean) is clean
    assert redact_text("".join(clean)) == clean
    assert clean in redact._CLEAN
    holding = "export TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    assert redact_text(holding) == redact_text(holding) == "export TOKEN=[REDACTED]"
    assert holding not in redact._CLEAN
    for i in range(redact._CLEAN_KEPT + 10):
        redact_text(f"a clean line of output number {i}")
    assert len(redact._CLEAN) <= redact._CLEAN_KEPT
