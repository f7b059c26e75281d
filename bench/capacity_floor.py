"""The HTTP floor of the capacity bench: the serve stack answering a fixed verdict.

The same framework, uvicorn protocol class and limits as ``antiloop serve``
(``antiloop.server.limits.run``), one ``POST /v1/steps`` route that checks the bearer token,
reads and parses the JSON body and answers a fixed ``continue`` verdict per step; no guard, no
store. Run as ``python -m bench.capacity_floor`` (port 0: uvicorn prints the port it got).
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

VERDICT = {
    "action": "continue",
    "detector": None,
    "outcome": None,
    "fingerprint": None,
    "reason": "",
    "hint": "",
    "index": 0,
}


def app(token: str) -> Starlette:
    """The floor app: a fixed verdict for each step of the body."""
    expected = f"Bearer {token}"

    async def steps(request: Request) -> Response:
        if not hmac.compare_digest(request.headers.get("authorization", ""), expected):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        body: Any = json.loads(await request.body())
        if isinstance(body, list):
            return JSONResponse({"verdicts": [{**VERDICT, "index": i} for i in range(len(body))]})
        return JSONResponse({**VERDICT, "session": body.get("session")})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[Route("/v1/steps", steps, methods=["POST"]), Route("/healthz", health)]
    )


def main() -> int:
    from antiloop.server.limits import Limits, run

    run(
        app(os.environ["ANTILOOP_TOKEN"]),
        Limits(),
        host="127.0.0.1",
        port=0,
        log_level="info",
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
