"""Two corpora of hostile input, shared by the unit tests, the sink tests and the benchmark.

``SECRETS``: one or more realistic fake secrets per kind (shapes after the gitleaks rule set,
MIT licence), each in a line such as an agent's command or a tool's output holds it, with the
part that must never reach a sink. The random parts come from a seeded generator (the same
every run), not from the redactor's own patterns. ``NEAR_MISSES``: texts that look a little
like secrets (git SHAs, UUIDs, digests, ordinary words after ``password``) and must come out
unchanged. ``BROKEN_TEXT``: strings that are not valid Unicode (lone UTF-16 surrogates), and
``BROKEN_BYTES``: byte strings that are not UTF-8.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

_RNG = random.Random(29)  # noqa: S311 - fake secrets, the same every run
_ALNUM = string.ascii_letters + string.digits


def _pick(chars: str, n: int) -> str:
    return "".join(_RNG.choice(chars) for _ in range(n))


def alnum(n: int) -> str:
    """``n`` random letters and digits, with at least one of each case and one digit."""
    while True:
        out = _pick(_ALNUM, n)
        if all(any(test(c) for c in out) for test in (str.isdigit, str.isupper, str.islower)):
            return out


def hexs(n: int) -> str:
    """``n`` random lower-case hex digits."""
    return _pick("0123456789abcdef", n)


def lower(n: int) -> str:
    """``n`` random lower-case letters and digits."""
    return _pick(string.ascii_lowercase + string.digits, n)


def digits(n: int) -> str:
    """``n`` random digits."""
    return _pick(string.digits, n)


@dataclass(frozen=True)
class Case:
    """One fake secret: its kind, a line holding it, and the part no sink may hold."""

    kind: str
    text: str
    secret: str


def _case(kind: str, template: str, secret: str, token: str | None = None) -> Case:
    return Case(kind, template.format(token if token is not None else secret), secret)


def _cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    s = alnum(48)
    add(_case("OpenAI project key", "echo {} | llm", s, f"sk-proj-{s}"))
    s = alnum(20)
    add(_case("OpenAI legacy key", "using {} now", s, f"sk-{s}T3BlbkFJ{alnum(20)}"))
    s = alnum(93)
    add(_case("Anthropic key", "key {} set", s, f"sk-ant-api03-{s}AA"))
    s = _pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    add(_case("AWS access key id", "aws iam {} done", s, f"AKIA{s}"))
    s = alnum(40)
    add(_case("AWS secret access key", "aws configure set aws_secret_access_key {}", s))
    s = alnum(40)
    add(_case("AWS secret access key, alone", "export X='{}'", s))
    for prefix in ("ghp", "gho", "ghs", "ghu", "ghr"):
        s = alnum(36)
        add(
            _case(
                f"GitHub token {prefix}_", "git push https://{}@github.com/o/r", s, f"{prefix}_{s}"
            )
        )
    s = alnum(82)
    add(_case("GitHub fine-grained token", "GH {} ok", s, f"github_pat_{s}"))
    for prefix in ("glpat", "glrt", "gldt", "glptt", "glft"):
        s = alnum(20)
        add(_case(f"GitLab {prefix} token", "clone with {} please", s, f"{prefix}-{s}"))
    s = alnum(24)
    add(_case("Slack bot token", "slack {}", s, f"xoxb-{digits(12)}-{digits(13)}-{s}"))
    s = alnum(32)
    add(
        _case("Slack user token", "slack {}", s, f"xoxp-{digits(12)}-{digits(12)}-{digits(12)}-{s}")
    )
    s = hexs(64)
    add(_case("Slack app token", "app {}", s, f"xapp-1-A{digits(10)}-{digits(13)}-{s}"))
    s = alnum(24)
    add(
        Case(
            "Slack webhook", f"POST https://hooks.slack.com/services/T{alnum(8)}/B{alnum(8)}/{s}", s
        )
    )
    s = alnum(24)
    add(_case("Stripe secret key", "stripe {} charge", s, f"sk_live_{s}"))
    s = alnum(24)
    add(_case("Stripe restricted key", "rk {}", s, f"rk_live_{s}"))
    s = alnum(32)
    add(_case("Stripe webhook secret", "endpoint {}", s, f"whsec_{s}"))
    s = alnum(35)
    add(_case("Google API key", "maps {} used", s, f"AIza{s}"))
    s = alnum(28)
    add(_case("Google OAuth client secret", "oauth {}", s, f"GOCSPX-{s}"))
    s = alnum(36)
    add(_case("npm token", "//registry.npmjs.org/:_authToken {}", s, f"npm_{s}"))
    s = alnum(60)
    add(_case("PyPI token", "twine upload -p {}", s, f"pypi-AgEIcHlwaS5vcmc{s}"))
    s = _pick(string.ascii_letters, 34)
    add(_case("Hugging Face token", "hf {} login", s, f"hf_{s}"))
    s = alnum(43)
    add(_case("SendGrid API key", "mail via {}", s, f"SG.{alnum(22)}.{s}"))
    s = hexs(32)
    add(_case("Twilio API key", "twilio {} sid", s, f"SK{s}"))
    s = alnum(27)
    add(_case("Docker Hub token", "docker login -u bob -p {} hub", s, f"dckr_pat_{s}"))
    s = alnum(14) + "9"
    add(_case("docker login -p password", "docker login -u bob -p {} registry.example.com", s))
    s = hexs(32)
    add(_case("Shopify token", "shop {}", s, f"shpat_{s}"))
    s = hexs(64)
    add(_case("DigitalOcean token", "doctl auth init -t {}", s, f"dop_v1_{s}"))
    s = alnum(43)
    add(_case("Doppler token", "doppler {}", s, f"dp.pt.{s}"))
    s = hexs(32)
    add(_case("Databricks token", "databricks {}", s, f"dapi{s}"))
    s = alnum(58)
    add(_case("Heroku API key", "heroku {}", s, f"HRKU-AA{s}"))
    s = alnum(40)
    add(_case("Linear API key", "linear {}", s, f"lin_api_{s}"))
    s = hexs(34)
    add(_case("Postman API key", "postman {}", s, f"PMAK-{hexs(24)}-{s}"))
    s = hexs(40)
    add(_case("Pulumi token", "pulumi {}", s, f"pul-{s}"))
    s = alnum(64)
    add(_case("Terraform Cloud token", "tf {}", s, f"{alnum(14)}.atlasv1.{s}"))
    s = alnum(95)
    add(_case("Vault token", "VAULT {}", s, f"hvs.{s}"))
    s = alnum(186)
    add(_case("Atlassian API token", "jira {}", s, f"ATATT3{s}"))
    s = alnum(32)
    add(_case("Grafana service account token", "grafana {}", s, f"glsa_{s}_{hexs(8)}"))
    s = hexs(64)
    add(_case("Sentry user token", "sentry {}", s, f"sntryu_{s}"))
    s = _pick("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    add(_case("age secret key", "age {}", s, f"AGE-SECRET-KEY-1{s}"))
    s = alnum(20)
    add(_case("Alibaba access key id", "aliyun {}", s, f"LTAI{s}"))
    s = alnum(69)
    add(_case("Artifactory token", "jfrog {}", s, f"AKCp{s}"))
    s = alnum(54)
    add(_case("EasyPost key", "easypost {}", s, f"EZAK{s}"))
    s = alnum(64)
    add(_case("Dynatrace token", "dt {}", s, f"dt0c01.{alnum(24)}.{s}"))
    s = hexs(32)
    add(_case("Flutterwave secret key", "flw {}", s, f"FLWSECK_TEST-{s}-X"))
    s = alnum(43)
    add(_case("Fly.io token", "fly {}", s, f"fo1_{s}"))
    s = alnum(64)
    add(_case("Frame.io token", "frameio {}", s, f"fio-u-{s}"))
    s = alnum(43)
    add(_case("PlanetScale password", "pscale {}", s, f"pscale_pw_{s}"))
    s = alnum(36)
    add(_case("Prefect token", "prefect {}", s, f"pnu_{s}"))
    s = lower(70)
    add(_case("ReadMe API key", "readme {}", s, f"rdme_{s}"))
    s = hexs(48)
    add(_case("RubyGems API key", "gem push {}", s, f"rubygems_{s}"))
    s = alnum(48)
    add(_case("Scalingo token", "scalingo {}", s, f"tk-us-{s}"))
    s = alnum(16)
    add(_case("Brevo API key", "brevo {}", s, f"xkeysib-{hexs(64)}-{s}"))
    s = hexs(40)
    add(_case("Shippo token", "shippo {}", s, f"shippo_live_{s}"))
    s = alnum(60)
    add(_case("Square access token", "square {}", s, f"EAAA{s}"))
    s = alnum(43)
    add(_case("Square OAuth secret", "square {}", s, f"sq0csp-{s}"))
    s = alnum(35)
    add(_case("Notion token", "notion {}", s, f"ntn_{digits(11)}{s}"))
    s = alnum(48)
    add(_case("Perplexity API key", "pplx {}", s, f"pplx-{s}"))
    s = alnum(52)
    add(_case("Groq API key", "groq {}", s, f"gsk_{s}"))
    s = alnum(37)
    add(_case("Replicate token", "replicate {}", s, f"r8_{s}"))
    s = alnum(32)
    add(_case("Infracost API key", "infracost {}", s, f"ico-{s}"))
    s = lower(60)
    add(_case("Clojars token", "lein deploy {}", s, f"CLOJARS_{s}"))
    s = alnum(43)
    add(_case("Duffel token", "duffel {}", s, f"duffel_test_{s}"))
    s = _pick(string.ascii_uppercase + string.digits, 27)
    add(_case("New Relic user key", "newrelic {}", s, f"NRAK-{s}"))
    s = alnum(250)
    add(_case("1Password service account token", "op {}", s, f"ops_eyJ{s}"))
    s = alnum(43)
    add(_case("OpenShift token", "oc login --token {}", s, f"sha256~{s}"))
    s = alnum(34)
    add(_case("Azure AD client secret", "az login --secret {}", s, f"{alnum(3)}8Q~{s}"))
    s = hexs(32)
    add(_case("Mailgun API key", "mailgun {}", s, f"key-{s}"))
    s = hexs(32)
    add(_case("Mailchimp API key", "mailchimp {}", s, f"{s}-us12"))
    s = alnum(33)
    add(_case("Telegram bot token", "bot {}", s, f"{digits(9)}:AA{s}"))
    s = alnum(43)
    add(
        _case("JSON web token", "cookie {}", s, f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx{alnum(12)}.{s}")
    )
    s = alnum(68)
    add(_case("Discord webhook", "https://discord.com/api/webhooks/{}", s, f"{digits(18)}/{s}"))
    s = alnum(32)
    add(
        Case(
            "Microsoft Teams webhook",
            f"https://acme.webhook.office.com/webhookb2/{hexs(8)}-{hexs(4)}@{hexs(8)}"
            f"/IncomingWebhook/{s}/{hexs(8)}",
            s,
        )
    )
    body = alnum(64)
    add(
        Case(
            "RSA private key block",
            f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{body}\n-----END RSA PRIVATE KEY-----",
            body,
        )
    )
    body = alnum(64)
    add(
        Case(
            "OpenSSH private key",
            f"cat id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl{body}\n"
            "-----END OPENSSH PRIVATE KEY-----\n",
            body,
        )
    )
    body = alnum(64)
    add(
        Case(
            "PGP private key block",
            f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQdGBF{body}\n=abcd\n"
            "-----END PGP PRIVATE KEY BLOCK-----",
            body,
        )
    )
    s = alnum(32)
    add(_case("bearer credential", "curl -H 'Authorization: Bearer {}' https://api", s))
    s = alnum(24)
    add(_case("basic credential", "Authorization: Basic {}", s))
    s = alnum(12)
    add(_case("password in a URL", "psql postgresql://app:{}@db:5432/prod", s))
    s = alnum(12)
    add(_case("--password flag", "mysqladmin --password {} status", s))
    s = alnum(12)
    add(_case("mysql -p", "mysql -uroot -p{} -e 'select 1'", s))
    s = alnum(12)
    add(_case("sshpass -p", "sshpass -p {} ssh deploy@host", s))
    s = alnum(12)
    add(_case("curl -u", "curl -u admin:{} https://example.com/api", s))
    s = lower(6) + digits(2)
    add(_case("password <word>", "the password {} works", s))
    add(_case("password <plain word>", "login with password swordfish", "swordfish"))
    s = alnum(12)
    add(_case("password= pair", "DB_PASSWORD={}", s))
    s = alnum(16)
    add(_case("JSON client secret", '{{"client_secret": "{}", "n": 1}}', s))
    s = alnum(24)
    add(_case("random value under a key", "session_key = {}", s))
    s = alnum(86)
    add(
        _case(
            "Azure storage account key",
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={}==;",
            s,
        )
    )
    return c


SECRETS: list[Case] = _cases()
"""Every fake secret, one or more per kind."""

NEAR_MISSES: list[str] = [
    "git checkout 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "password reset link sent to bob@example.com",
    "Enter password:",
    "the password is required",
    "sudo passwd root",
    "docker run -p 8080:80 nginx",
    "mysql -p mydb -u root",
    "max_tokens: 512",
    "sort_key=created_at",
    "SKU-1234567 in stock",
    "pip install scikit-learn sk-video",
    "tests/test_models.py::test_create_user PASSED",
    "src/components/UserProfileSettings.tsx",
    "KeyError: 'api_version'",
    "ImportError: cannot import name 'TokenizerFast'",
    "npm WARN deprecated request@2.88.2",
    "FROM python:3.11-slim",
    "the key is documentation_index_page",
    "segfault at 0x7ffd5c3e9a10",
    "base64 of hello is aGVsbG8=",
    "token_count=12 secret_santa.py key-value store",
    "A long sentence about keys, tokens and secrets that holds none of them at all.",
    "AKIA alone and ghp_ alone and sk- alone",
    "Loading modules...",
]
"""Texts that must come out of the redactor as they went in."""

BROKEN_TEXT: list[str] = [
    "\udc80",
    "a\ud800b",
    "\udfff tail",
    "lone high \ud83d then text",
    "pair split \udc81\udc82 and emoji \U0001f600",
]
"""Strings with lone UTF-16 surrogates (``json.loads('"\\udc80"')`` makes the first)."""

BROKEN_BYTES: list[bytes] = [b"\xff", b"caf\xc3", b"\xed\xa0\x80 cesu", b"\x80abc", b"ok \xc3\x28"]
"""Byte strings that are not UTF-8."""


def leaks(data: bytes | str, secrets: dict[str, str] | None = None) -> list[str]:
    """The kinds of which ``data`` holds a piece of the secret (15 characters or more, any
    case: fingerprints lower-case a tool's name); ``secrets`` adds kinds to the corpus's."""
    named = [(case.kind, case.secret) for case in SECRETS] + list((secrets or {}).items())
    raw = (data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")).lower()
    return sorted(
        {
            kind
            for kind, secret in named
            for i in range(0, max(len(secret) - 11, 1), 4)
            if secret[i : i + 12].lower().encode() in raw
        }
    )
