"""``antiloop serve``: the HTTP API and the dashboard (needs the ``server`` extra).

from antiloop.server import Service, create_app
app = create_app(Service("sqlite://antiloop.db", token="s3cret"))   # any ASGI server
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from antiloop.core.errors import MissingExtra

if TYPE_CHECKING:
    from antiloop.server.app import EventHub, Service, create_app

__all__ = ["EventHub", "Service", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        try:
            from antiloop.server import app
        except ImportError as exc:
            if exc.name in (
                "fastapi",
                "pydantic",
                "starlette",
                "uvicorn",
                "anyio",
                "prometheus_client",
            ):
                raise MissingExtra("server", exc.name, "antiloop serve") from exc
            raise
        return getattr(app, name)
    raise AttributeError(name)
