"""A small standard-library client of the service, and the store fallback, for the CLI."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from typing import Any

from antiloop.core.errors import ConfigError


def add_target(parser: argparse.ArgumentParser) -> None:
    """Add ``--server``/``--token`` (the service) and ``--store`` (the store, directly)."""
    parser.add_argument(
        "--server", default=os.environ.get("ANTILOOP_URL"), help="the service (ANTILOOP_URL)"
    )
    parser.add_argument("--token", help="the service's token (default: ANTILOOP_TOKEN)")
    parser.add_argument("--store", help="the store URL, when no service is given")


def call(ns: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """Call the service's API; a refusal is a ConfigError with the service's message."""
    token = ns.token or os.environ.get("ANTILOOP_TOKEN")
    if not token:
        raise ConfigError("the service needs its token: --token or ANTILOOP_TOKEN")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - the user's own service URL
        ns.server.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise ConfigError(f"{ns.server}: {exc.code} {message}") from None
    except urllib.error.URLError as exc:
        raise ConfigError(f"{ns.server}: unreachable ({exc.reason})") from None


def open_ledger(ns: argparse.Namespace) -> Any:
    """The approval methods of the store ``--store`` names (or the default store)."""
    from antiloop.approval.ledger import ledger_of
    from antiloop.commands.serve import default_store
    from antiloop.stores import open_store

    url = ns.store or default_store()
    if url.startswith("memory:"):
        raise ConfigError("a memory store lives in one process: give --server or --store")
    return ledger_of(open_store(url))
