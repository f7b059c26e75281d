"""``antiloop serve``: the HTTP API and dashboard on uvicorn (the ``server`` extra)."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from typing import TYPE_CHECKING

from antiloop.core.errors import ConfigError, MissingExtra

if TYPE_CHECKING:
    from antiloop.config import FleetConfig
    from antiloop.outage import OutageConfig


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop serve``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    parser.add_argument("--store", help="store URL (default: the default SQLite store)")
    parser.add_argument(
        "--records",
        default=os.environ.get("ANTILOOP_RECORDS") or None,
        help="audit log, approvals and interventions in this store (e.g. postgresql://...),"
        " the session state in --store (default: ANTILOOP_RECORDS, else all in --store)",
    )
    parser.add_argument("--config", help="antiloop.toml or JSON: [guard] and [approval] tables")
    parser.add_argument(
        "--webhook", help="POST approval requests to this URL (signed; ANTILOOP_WEBHOOK_SECRET)"
    )
    parser.add_argument("--webhook-template", default="json", choices=("json", "slack", "telegram"))
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")
    parser.add_argument(
        "--max-body", type=int, default=8 * 1024 * 1024, help="request body limit in bytes (413)"
    )
    parser.add_argument(
        "--store-timeout",
        type=float,
        default=10.0,
        help="seconds a request waits for the store before on_store_error applies (default 10)",
    )
    parser.add_argument(
        "--identity-header",
        default=os.environ.get("ANTILOOP_IDENTITY_HEADER") or None,
        help="a trusted reverse proxy names the signed-in person in this header, e.g."
        " X-Forwarded-User (default: ANTILOOP_IDENTITY_HEADER, else off)",
    )
    parser.add_argument(
        "--trusted-proxies",
        default=os.environ.get("ANTILOOP_TRUSTED_PROXIES") or "127.0.0.1,::1",
        help="comma-separated addresses the identity header is believed from"
        " (default: ANTILOOP_TRUSTED_PROXIES, else 127.0.0.1,::1)",
    )
    parser.set_defaults(handler=run)


def default_store() -> str:
    """The stores' default URL (SQLite), or ``memory://`` until a default store exists."""
    from antiloop import stores

    default = getattr(stores, "default_store_url", None)
    return default() if callable(default) else "memory://"


def load(path: str | None) -> tuple[object | None, object | None, object | None]:
    """The guard config, approval policy and budgets: [guard], [approval], [budgets]."""
    if path is None:
        return None, None, None
    import json
    import tomllib
    from pathlib import Path

    from antiloop.approval.policy import ApprovalPolicy
    from antiloop.config import GuardConfig
    from antiloop.core.rules.ruleset import load_rules

    file = Path(path)
    try:
        raw = file.read_bytes()
        data = json.loads(raw) if file.suffix == ".json" else tomllib.loads(raw.decode())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read config {file}: {exc}") from None
    approval = data.pop("approval", None)
    data.pop("telemetry", None)  # read by antiloop.telemetry.attach_from
    data.pop("fleet", None)  # read by fleet_config
    data.pop("outage", None)  # read by outage_config
    limits = data.pop("budgets", None)
    rules = load_rules({t: data.pop(t) for t in ("canonical", "readings") if t in data}, str(file))
    guard = data.pop("guard", data)
    policy = ApprovalPolicy.from_mapping(approval, f"{file} [approval]") if approval else None
    budgets = None
    if limits is not None:
        from antiloop.budgets import Budgets

        budgets = Budgets.from_mapping(limits, str(file))
    return GuardConfig.from_mapping(guard, str(file), rules), policy, budgets


def fleet_config(path: str | None) -> FleetConfig:
    """The ``[fleet]`` table of the config (``antiloop.config.FleetConfig``)."""
    from antiloop.config import FleetConfig

    if path is None:
        return FleetConfig()
    import json
    import tomllib
    from pathlib import Path

    file = Path(path)
    raw = file.read_bytes()
    data = json.loads(raw) if file.suffix == ".json" else tomllib.loads(raw.decode())
    return FleetConfig.from_mapping(data.get("fleet", {}), str(file))


def outage_config(path: str | None) -> OutageConfig:
    """The ``[outage]`` table of the config (``antiloop.outage.OutageConfig``)."""
    from antiloop.outage import OutageConfig

    if path is None:
        return OutageConfig()
    from antiloop.config import read_settings

    settings = read_settings(path)
    return OutageConfig.from_mapping(settings.tables.get("outage", {}), settings.source)


def run(ns: argparse.Namespace) -> int:
    """Run the service until Ctrl+C."""
    if ns.max_body < 1 or not ns.store_timeout > 0:
        raise ConfigError("--max-body must be at least 1 byte and --store-timeout above 0 s")
    try:
        import uvicorn  # noqa: F401 - the server extra: named when missing

        from antiloop.server import Service, create_app
        from antiloop.server.limits import Limits
        from antiloop.server.limits import run as serve_app
    except ImportError as exc:
        raise MissingExtra("server", exc.name or "uvicorn", "antiloop serve") from exc
    from antiloop.approval import WebChannel, WebhookChannel

    token = os.environ.get("ANTILOOP_TOKEN") or secrets.token_urlsafe(24)
    secret = os.environ.get("ANTILOOP_WEBHOOK_SECRET")
    config, policy, budgets = load(ns.config)
    url = f"http://{ns.host}:{ns.port}"
    channels: list[object] = [WebChannel(url + "/")]
    if ns.webhook:
        if not secret:
            raise ConfigError("--webhook needs ANTILOOP_WEBHOOK_SECRET to sign with")
        channels.append(WebhookChannel(ns.webhook, secret, ns.webhook_template, answer_url=url))
    from antiloop.server.app import parse_tokens

    try:
        tokens = parse_tokens(os.environ.get("ANTILOOP_TOKENS", ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from antiloop.stores import Store, open_store

    where: str = ns.store or default_store()
    store: Store | str = open_store(where, records=ns.records) if ns.records else where
    service = Service(
        store,
        token,
        tokens=tokens,
        config=config,  # type: ignore[arg-type]
        policy=policy,  # type: ignore[arg-type]
        budgets=budgets,  # type: ignore[arg-type]
        channels=channels,  # type: ignore[arg-type]
        webhook_secret=secret,
        limits=Limits(max_body=ns.max_body, store_timeout=ns.store_timeout),
        identity_header=ns.identity_header,
        trusted_proxies=tuple(a.strip() for a in ns.trusted_proxies.split(",") if a.strip()),
        outage=outage_config(ns.config),
    )
    from antiloop.fleet import open_fleet

    # the kill switch and known loops, shared by every replica of a Redis store
    service.guard.fleet = open_fleet(where, fleet_config(ns.config))
    from antiloop.telemetry import attach_from

    attach_from(service.guard, ns.config)  # OpenTelemetry: [telemetry] or the OTLP environment
    _port_free(ns.host, ns.port)  # before the URL and token are printed
    if "ANTILOOP_TOKEN" in os.environ:
        print(f"antiloop serve: {url}/  store {service.store.url}", file=sys.stderr)
    else:
        print(f"antiloop serve: token {token}", file=sys.stderr)
        print(f"antiloop serve: {url}/#token={token}  store {service.store.url}", file=sys.stderr)
    sys.stderr.flush()
    serve_app(
        create_app(service),
        service.limits,
        host=ns.host,
        port=ns.port,
        log_level=ns.log_level,
        access_log=False,
        lifespan="on",
    )
    return 0


def _port_free(host: str, port: int) -> None:
    """Fail in one line when the address is taken, before anything is printed or started."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"{host}:{port} is in use (another antiloop serve?): pick one with --port"
                ) from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
