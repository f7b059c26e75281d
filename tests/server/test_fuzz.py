"""Schema-driven fuzzing of the HTTP API: every route of the OpenAPI schema, no 500, no hang.

schemathesis generates requests from the app's generated schema (valid ones and, by
its negative mode, invalid ones) and sends them to the app in this process, with the token.
The number of examples is bounded so the module stays well under a minute.
"""

# ruff: noqa: S105  (a fixed test token)

from __future__ import annotations

import time

import hypothesis
import schemathesis
from schemathesis.checks import not_a_server_error

from antiloop import GuardConfig
from antiloop.server import Service, create_app
from antiloop.stores.memory import MemoryStore

TOKEN = "fuzz-token"
SECRET = "fuzz-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SLOWEST = 5.0  # seconds: a request slower than this counts as a hang

service = Service(MemoryStore(), TOKEN, config=GuardConfig(embedder="ngram"), webhook_secret=SECRET)
app = create_app(service)
schema = schemathesis.openapi.from_dict(app.openapi())
schema.app = app
# the live event stream never ends by design; it is tested in test_api.py
schema = schema.exclude(path="/v1/events")


@schema.parametrize()
@hypothesis.settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    database=None,
)
def test_no_request_gets_a_500_or_hangs(case: schemathesis.Case) -> None:
    """Any request the schema allows, or nearly allows, gets an answer below 500, quickly."""
    started = time.monotonic()
    response = case.call(headers=AUTH)
    took = time.monotonic() - started
    case.validate_response(response, checks=[not_a_server_error])
    assert took < SLOWEST, f"{case.method} {case.formatted_path} took {took:.1f} s"
