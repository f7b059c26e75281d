"""The OpenAPI 3.1 schema of the service, for agents written in other languages."""

from __future__ import annotations

from typing import Any

_STEP = {
    "type": "object",
    "description": "A step event (PROTOCOL.md section 2).",
    "required": ["tool"],
    "properties": {
        "session": {"type": "string", "default": "default"},
        "agent": {"type": "string", "default": "agent"},
        "tool": {"type": "string", "minLength": 1},
        "args": {"type": "object"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "output": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "exit_code": {"type": ["integer", "null"]},
        "file_states": {"type": "object"},
        "message": {"type": "string"},
        "goal": {"type": "string"},
        "cwd": {"type": "string"},
    },
    "additionalProperties": True,
}
_VERDICT = {
    "type": "object",
    "description": "A verdict (PROTOCOL.md section 7) plus the hint for the model.",
    "properties": {
        "index": {"type": "integer"},
        "action": {"enum": ["continue", "ask", "stop", "invalid"]},
        "detector": {"type": ["string", "null"]},
        "outcome": {"type": ["string", "null"]},
        "fingerprint": {"type": ["string", "null"]},
        "reason": {"type": "string"},
        "hint": {"type": "string", "description": "pass this to the model"},
        "session": {"type": "string"},
        "escalate_to": {"type": ["string", "null"]},
    },
}
_APPROVAL = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "session": {"type": "string"},
        "agent": {"type": "string"},
        "tool": {"type": "string"},
        "args": {"type": "object"},
        "risk": {"type": "string"},
        "reason": {"type": "string"},
        "created_at": {"type": "number"},
        "expires_at": {"type": ["number", "null"]},
        "status": {"enum": ["pending", "approved", "denied", "edited", "expired"]},
        "decided_by": {"type": ["string", "null"]},
        "decided_at": {"type": ["number", "null"]},
        "comment": {"type": ["string", "null"]},
        "edited_args": {"type": ["object", "null"]},
        "fingerprint": {"type": ["string", "null"]},
    },
}
_DECISION = {
    "type": "object",
    "required": ["decision"],
    "properties": {
        "decision": {"enum": ["approve", "deny", "edit"]},
        "comment": {"type": "string"},
        "by": {"type": "string"},
        "args": {"type": "object", "description": "the edited arguments, for edit"},
    },
}


def _json(ref: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}


def _op(summary: str, response: str | None = None, body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {"401": {"description": "no token"}}}
    op["responses"]["200"] = {"description": "OK", **(_json(response) if response else {})}
    if body:
        op["requestBody"] = {"required": True, **_json(body)}
    return op


def _id(name: str = "id") -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}]


def _view_paths() -> dict[str, Any]:
    """The dashboard's read-only views (``antiloop.server.views``)."""
    limit = {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
    }
    return {
        "/v1/timeline/{id}": {
            "get": {
                **_op("One session's page: state, controls, latest verdict, timeline, audit"),
                "parameters": _id(),
            }
        },
        "/v1/decisions": {
            "get": {
                **_op("Decided approvals, newest first, with who, when and how long they waited"),
                "parameters": [limit],
            }
        },
    }


def schema() -> dict[str, Any]:
    """The service's OpenAPI document."""
    from antiloop import __version__

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "antiloop",
            "version": __version__,
            "description": "Steps in, verdicts out; approvals, sessions, stops and feedback.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/steps": {
                "post": {
                    **_op("Record one step, or a batch (a list or {steps: [...]}), get verdicts"),
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/Step"},
                                        {
                                            "type": "array",
                                            "maxItems": 1000,
                                            "items": {"$ref": "#/components/schemas/Step"},
                                        },
                                    ]
                                }
                            }
                        },
                    },
                }
            },
            "/v1/check": {
                "post": {
                    **_op("Before a call: stop request, guard, approval policy", "Verdict"),
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["tool"],
                                    "properties": {
                                        "tool": {"type": "string"},
                                        "args": {"type": "object"},
                                        "session": {"type": "string"},
                                        "agent": {"type": "string"},
                                    },
                                }
                            }
                        },
                    },
                }
            },
            "/v1/sessions": {"get": _op("Sessions with their step counts and state")},
            "/v1/sessions/{id}": {
                "get": {**_op("One session: state, recent verdicts, audit"), "parameters": _id()}
            },
            "/v1/sessions/{id}/stop": {
                "post": {**_op("Stop the session at its next step"), "parameters": _id()}
            },
            "/v1/sessions/{id}/feedback": {
                "post": {
                    **_op("Queue text for the agent's next step (the verdict's hint)"),
                    "parameters": _id(),
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["text"],
                                    "properties": {"text": {"type": "string"}},
                                }
                            }
                        },
                    },
                }
            },
            "/v1/approvals": {
                "get": {
                    **_op("Approval requests"),
                    "parameters": [
                        {"name": "status", "in": "query", "schema": {"type": "string"}},
                        {"name": "session", "in": "query", "schema": {"type": "string"}},
                    ],
                }
            },
            "/v1/approvals/{id}": {
                "get": {**_op("One request", "ApprovalRequest"), "parameters": _id()},
                "post": {
                    **_op("Approve, deny or edit", "ApprovalRequest", "Decision"),
                    "parameters": _id(),
                },
            },
            "/v1/approvals/{id}/answer": {
                "post": {
                    **_op("A webhook answer, HMAC-signed instead of the token", "ApprovalRequest"),
                    "security": [],
                    "parameters": [
                        *_id(),
                        {"name": "X-Antiloop-Timestamp", "in": "header", "required": True},
                        {"name": "X-Antiloop-Signature", "in": "header", "required": True},
                    ],
                }
            },
            "/v1/events": {"get": _op("Live events (text/event-stream): verdict, approval, ...")},
            **_view_paths(),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Step": _STEP,
                "Verdict": _VERDICT,
                "ApprovalRequest": _APPROVAL,
                "Decision": _DECISION,
            },
        },
    }
