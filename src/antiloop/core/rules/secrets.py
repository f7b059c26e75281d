"""Secrets antiloop knows by their shape, as rows: the tokens of providers, webhook URLs.

``antiloop.core.redact`` compiles them; a new kind is one row here and one fake secret of its
shape in ``tests/secrets_corpus.py``. Each shape of ``TOKEN_KINDS`` starts with a literal
letter or digit (redaction groups them by that first character); ``GATED_KINDS`` are shapes
with no literal start, each tried only when the text holds its literal.

The shapes are adapted from the gitleaks rule set (config/gitleaks.toml,
https://github.com/gitleaks/gitleaks, MIT licence, Copyright (c) 2019 Zachary Rice).
"""

from __future__ import annotations

__all__ = [
    "GATED_KINDS",
    "KEY_LITERALS",
    "KEY_WORDS",
    "PROSE",
    "TOKEN_KINDS",
    "WEAK_LITERALS",
    "WEAK_WORDS",
    "WEBHOOK_URLS",
]

TOKEN_KINDS: dict[str, str] = {
    "OpenAI / Anthropic API key": r"sk-(?:ant-|proj-|live-|test-|svcacct-|admin-)?[\w-]{16,}",
    "AWS access key id": r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}",
    "GitHub token": r"gh[pousr]_[A-Za-z0-9]{20,}",
    "GitHub fine-grained token": r"github_pat_\w{20,}",
    "GitLab token": r"gl(?:pat|dt|ptt|rt|cbt|ffct|ft|imt|agent|oas|soat)-[\w-]{20,}",
    "GitLab runner registration token": r"GR1348941[\w-]{20}",
    "Slack token": r"xox(?:[abeoprs]|e\.xox[bp])-[A-Za-z0-9-]{10,}",
    "Slack app token": r"xapp-\d-[A-Za-z0-9-]{10,}",
    "Stripe key": r"sk_(?:live|test|prod)_[0-9A-Za-z]{10,}|[rp]k_(?:live|test)_[0-9A-Za-z]{10,}",
    "Stripe webhook secret": r"whsec_[0-9A-Za-z]{20,}",
    "Google API key": r"AIza[\w-]{35}",
    "Google OAuth client secret": r"GOCSPX-[\w-]{28}",
    "Google OAuth access token": r"ya29\.[\w-]{20,}",
    "npm token": r"npm_[A-Za-z0-9]{36}",
    "PyPI token": r"pypi-AgE[\w-]{40,}",
    "Hugging Face token": r"hf_[A-Za-z0-9]{30,}",
    "Hugging Face organisation token": r"api_org_[A-Za-z]{34}",
    "SendGrid API key": r"SG\.[\w-]{16,32}\.[\w-]{16,64}",
    "Twilio API key": r"SK[0-9a-fA-F]{32}",
    "Docker Hub token": r"dckr_(?:pat|oat)_[\w-]{20,}",
    "Shopify token": r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    "DigitalOcean token": r"do[opr]_v1_[a-f0-9]{64}",
    "Doppler token": r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
    "Databricks token": r"dapi[a-f0-9]{32}(?:-\d)?",
    "Heroku API key": r"HRKU-[\w-]{30,}",
    "Linear API key": r"lin_api_[A-Za-z0-9]{40}",
    "Postman API key": r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
    "Pulumi token": r"pul-[a-f0-9]{40}",
    "Terraform Cloud token": r"atlasv1\.[\w=-]{60,70}",
    "HashiCorp Vault token": r"hv[sbr]\.[\w-]{24,300}",
    "Atlassian API token": r"ATATT3[\w=-]{100,}",
    "Grafana token": r"gl(?:c_[A-Za-z0-9+/]{32,400}={0,3}|sa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
    "Sentry token": r"sntry[us]_[\w+/=]{40,}",
    "age secret key": r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    "Alibaba Cloud access key id": r"LTAI[A-Za-z0-9]{20}",
    "Artifactory token": r"AKCp[A-Za-z0-9]{69}",
    "EasyPost key": r"EZ[AT]K[A-Za-z0-9]{54}",
    "Dynatrace token": r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
    "Flutterwave key": r"FLW(?:SECK|PUBK)(?:_TEST)?-[a-hA-H0-9]{12,32}(?:-X)?",
    "Fly.io token": r"fo1_[\w-]{43}",
    "Frame.io token": r"fio-u-[\w=-]{64}",
    "PlanetScale token": r"pscale_(?:tkn|oauth|pw)_[\w=.-]{32,64}",
    "Prefect token": r"pnu_[A-Za-z0-9]{36}",
    "ReadMe API key": r"rdme_[a-z0-9]{70}",
    "RubyGems API key": r"rubygems_[a-f0-9]{48}",
    "Scalingo token": r"tk-us-[\w-]{48}",
    "Brevo (Sendinblue) API key": r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
    "Shippo token": r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
    "Square access token": r"EAAA[\w-]{22,60}",
    "Square OAuth secret": r"sq0(?:atp|csp)-[\w-]{22,60}",
    "Notion token": r"ntn_[0-9]{11}[A-Za-z0-9]{35}",
    "Notion integration secret": r"secret_[A-Za-z0-9]{43}",
    "Perplexity API key": r"pplx-[A-Za-z0-9]{48}",
    "Groq API key": r"gsk_[A-Za-z0-9]{52}",
    "Replicate token": r"r8_[A-Za-z0-9]{37}",
    "Infracost API key": r"ico-[A-Za-z0-9]{32}",
    "Clojars token": r"CLOJARS_[a-z0-9]{60}",
    "Duffel token": r"duffel_(?:test|live)_[\w=-]{43}",
    "New Relic key": r"NR(?:AK|II|JS)-[A-Za-z0-9]{19,32}",
    "1Password service account token": r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}",
    "OpenShift token": r"sha256~[\w-]{43}",
    "Mailgun API key": r"key-[0-9a-f]{32}",
    "JSON web token": r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*",
}
WEBHOOK_URLS = (
    r"(?<=hooks\.slack\.com/services/)[A-Za-z0-9]+/[A-Za-z0-9]+/[A-Za-z0-9]+"
    r"|(?<=hooks\.slack\.com/)(?:workflows|triggers)/[A-Za-z0-9+/]{20,}"
    r"|(?<=discord\.com/api/webhooks/)[0-9]+/[\w-]{20,}"
    r"|(?<=discordapp\.com/api/webhooks/)[0-9]+/[\w-]{20,}"
    r"|(?<=\.webhook\.office\.com/webhookb2/)[\w@/-]{20,}"
)
# Shapes with no literal start, each run only when the text holds its literal.
GATED_KINDS: tuple[tuple[str, str, str], ...] = (
    # Azure AD client secrets: three characters, a digit, then "Q~"
    (
        "Azure AD client secret",
        "Q~",
        r"(?<![\w~.-])[\w~.]{3}[0-9]Q~[\w~.-]{31,34}(?![\w~.-])",
    ),
    ("Mailchimp API key", "-us", r"(?<![0-9a-f])[0-9a-f]{32}-us[0-9]{1,2}(?!\w)"),
    ("Telegram bot token", ":AA", r"(?<![0-9])[0-9]{8,10}:AA[\w-]{33}(?!\w)"),
)

# -- the words around a secret ------------------------------------------------------------
# the keys and flags that name a secret (a value after them is one)
KEY_WORDS = r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|auth)"
# the words in a key that make a high-entropy value under it a secret
WEAK_WORDS = r"(?:key|secret|token|passw|pass|pwd|auth|cred|sig|cookie|salt|private)"
KEY_LITERALS = ("api_key", "api-key", "apikey", "access_key", "access-key", "accesskey")
WEAK_LITERALS = ("key", "secret", "token", "pass", "pwd", "auth", "cred", "sig", "cookie", "salt")
# ordinary words: ``password reset`` names no password
PROSE = frozenset(
    """a an the is was are be been being has have had will would can cannot could should must
    may might shall not no and or but for of to in on at by with without from into as if then
    than too so that this these those it its here there again please now also only just all any
    reset field fields prompt policy policies required requirement requirements manager hash
    hashes hashed file files change changed changes expired expires expiry incorrect invalid
    wrong authentication auth protected length strength update updated set setting settings
    login logins entry entries input form page screen dialog box mismatch match matches
    missing empty blank hint hints rules rule storage store stored protection recovery
    forgotten forgot forget reuse rotation history complexity check checks validation
    database user users account accounts when which what where who how do does did""".split()  # noqa: SIM905
)
