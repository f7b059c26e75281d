"""The OpenAPI schema is generated from the app: every route is in it, and nothing else."""

# ruff: noqa: S105  (a fixed test token)

from __future__ import annotations

import subprocess
import sys

from fastapi.routing import APIRoute

from antiloop import GuardConfig
from antiloop.server import Service, create_app
from antiloop.stores.memory import MemoryStore

TOKEN = "schema-token"


def _app():  # type: ignore[no-untyped-def]
    return create_app(Service(MemoryStore(), TOKEN, config=GuardConfig(embedder="ngram")))


def test_the_schema_has_every_route_of_the_app_and_no_other() -> None:
    """The paths and methods of /openapi.json are exactly the app's routes."""
    app = _app()
    assert all(isinstance(r, APIRoute) and r.include_in_schema for r in app.routes), [
        r for r in app.routes if not isinstance(r, APIRoute) or not r.include_in_schema
    ]
    routes = {(r.path_format, m.lower()) for r in app.routes for m in r.methods}
    documented = {(path, m) for path, ops in app.openapi()["paths"].items() for m in ops}
    assert documented == routes, (documented - routes, routes - documented)
    assert ("/v1/hooks/{dialect}", "post") in documented


def test_every_api_route_needs_the_token_but_the_signed_answer() -> None:
    """The schema asks for the bearer token on /v1, /openapi.json and /metrics, HMAC on answers."""
    schema = _app().openapi()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            needs_token = path.startswith("/v1") or path in ("/openapi.json", "/metrics")
            if path == "/v1/approvals/{id}/answer":
                assert "security" not in op
                headers = {p["name"] for p in op["parameters"] if p["in"] == "header"}
                assert headers == {"X-Antiloop-Timestamp", "X-Antiloop-Signature"}
            else:
                assert (op.get("security") == [{"bearer": []}]) == needs_token, (method, path)
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_errors_are_documented_as_today_and_no_422() -> None:
    """Validation errors are 400s with one line: the schema shows Error, never FastAPI's 422."""
    schema = _app().openapi()
    check = schema["paths"]["/v1/check"]["post"]["responses"]
    assert "422" not in check
    assert check["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_validation_errors_are_one_line_400s() -> None:
    """A field of the wrong type, a missing body or a bad query value: 400 and one line."""
    from starlette.testclient import TestClient

    with TestClient(_app(), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        wrong = client.post("/v1/check", json={"tool": "Read", "paths": 5})
        assert (wrong.status_code, wrong.json()) == (
            400,
            {"error": "'paths': input should be a valid list"},
        )
        for path in ("/v1/sessions/s/feedback", "/v1/steps"):
            missing = client.post(path)
            assert (missing.status_code, missing.json()) == (400, {"error": "the body is missing"})
        limit = client.get("/v1/sessions?limit=0")
        assert limit.json() == {"error": "'limit' must be a whole number from 1 to 1000"}
        plain = client.post("/v1/steps", content=b"{}", headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415
        assert client.get("/v1/nowhere").json() == {"error": "Not Found"}


def test_the_hook_path_and_the_package_do_not_import_the_web_framework() -> None:
    """Importing antiloop, the hook client or the hook handler loads no web framework."""
    code = (
        "import sys, antiloop, antiloop.hooks, antiloop._hook_client, antiloop.hooks.handler\n"
        "print(sorted(m for m in ('fastapi', 'pydantic', 'starlette') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
