"""The OpenAPI 3.1 schema of the service, for agents written in other languages."""

from __future__ import annotations

from typing import Any

_STEP = {
    "type": "object",
    "description": "A step event (docs/protocol.md section 2).",
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
        "id": {
            "type": ["string", "integer"],
            "description": (
                "The step's id (the host's tool-call id where there is one). A step sent again "
                "with an id its session has seen (a retried request) gets the first verdict "
                "again and is not counted twice; the last 32 ids of a session are remembered."
            ),
        },
        "tokens_in": {"type": "integer"},
        "tokens_out": {"type": "integer"},
        "cost_usd": {"type": "number"},
    },
    "additionalProperties": True,
}
_VERDICT = {
    "type": "object",
    "description": "A verdict (docs/protocol.md section 7) plus the hint for the model.",
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


_SESSION_PAGE = {
    "type": "object",
    "properties": {
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "session": {"type": "string"},
                    "steps": {"type": "integer"},
                    "ended": {"type": ["object", "null"]},
                    "stop_requested": {"type": ["string", "null"]},
                    "last": {"type": ["object", "null"]},
                },
            },
        },
        "next_cursor": {
            "type": ["string", "null"],
            "description": "pass as ?cursor= for the next page; null on the last page",
        },
    },
}


def _json(ref: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}


_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "one line saying what is wrong"}},
}
_ERRORS = {
    "400": "bad input (the message names it)",
    "401": "no token, or a wrong one",
    "403": "a POST from another origin",
    "404": "no such session, request or route",
    "408": "the body did not arrive in time",
    "413": "the body, or the batch, is too large",
    "503": "the store failed or did not answer in time",
}


def _op(summary: str, response: str | None = None, body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {
            code: {"description": text, **_json("Error")} for code, text in _ERRORS.items()
        },
    }
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
    """The service's OpenAPI document.

    Example:
        >>> sorted(schema()["paths"])[:3]
        ['/healthz', '/v1/approvals', '/v1/approvals/{id}']
    """
    from antiloop import __version__
    from antiloop.hooks.events import DIALECTS

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
                                        "paths": {"type": "array", "items": {"type": "string"}},
                                        "cwd": {"type": ["string", "null"]},
                                    },
                                }
                            }
                        },
                    },
                }
            },
            "/v1/sessions": {
                "get": {
                    **_op("A page of sessions, most recently updated first", "SessionPage"),
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "description": "sessions per page (default 100)",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                        },
                        {
                            "name": "cursor",
                            "in": "query",
                            "description": "the next_cursor of the page before",
                            "schema": {"type": "string"},
                        },
                    ],
                }
            },
            "/v1/hooks/{dialect}": {
                "post": {
                    **_op("One agent hook delivered over HTTP (the answer antiloop hook prints)"),
                    "parameters": [
                        {
                            "name": "dialect",
                            "in": "path",
                            "required": True,
                            "schema": {"enum": list(DIALECTS)},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Liveness: answers without touching the store",
                    "security": [],
                    "responses": {"200": {"description": "OK"}},
                }
            },
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
                        {
                            "name": "X-Antiloop-Timestamp",
                            "in": "header",
                            "required": True,
                            "description": "seconds since the epoch, as signed",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "X-Antiloop-Signature",
                            "in": "header",
                            "required": True,
                            "description": "sha256=<hex HMAC-SHA256 of timestamp '.' body>",
                            "schema": {"type": "string"},
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "allOf": [
                                        {"$ref": "#/components/schemas/Decision"},
                                        {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {"id": {"type": "string"}},
                                        },
                                    ]
                                }
                            }
                        },
                    },
                }
            },
            "/v1/events": {"get": _op("Live events (text/event-stream): verdict, approval, ...")},
            **_view_paths(),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": _ERROR,
                "SessionPage": _SESSION_PAGE,
                "Step": _STEP,
                "Verdict": _VERDICT,
                "ApprovalRequest": _APPROVAL,
                "Decision": _DECISION,
            },
        },
    }
