"""``GET /metrics``: the service in Prometheus' text format, through ``prometheus-client``.

Per process (each replica its own): request latency by route, method and status
(``antiloop_http_request_duration_seconds``), store faults: a route's store call that failed
or timed out (``antiloop_store_errors_total`` by ``kind``), a step answered by
``on_store_error`` (``antiloop_store_unguarded_total``), a transient error retried
(``antiloop_store_retries_total``). Read at each scrape: the pending approvals
and the age of the oldest (``antiloop_pending_approvals``,
``antiloop_oldest_pending_approval_age_seconds``), and, from the audit log the store shares
(every entry point: API, hooks, library, other replicas), the steps and checks judged and the
verdicts by detector and action (``antiloop_steps_total``, ``antiloop_verdicts_total``): sum
those across replicas with ``max``, not ``sum``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from antiloop.core.errors import StoreError
from antiloop.server.limits import StoreTimeout
from antiloop.stores import faults

if TYPE_CHECKING:
    from antiloop.server.console.index import SessionIndex
    from antiloop.server.service import Service
    from antiloop.stores.auditlog import AuditRecord

Scope = MutableMapping[str, Any]
ASGI = Callable[
    [Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STREAMS = frozenset({"/v1/events"})  # open for as long as a dashboard is: not a latency
IN_FRONT = frozenset({"/v1/steps"})  # answered before the routes (antiloop.server.fast)


class VerdictTally:
    """Steps, checks and verdicts counted from the audit records the index reads."""

    def __init__(self) -> None:
        self.kinds: Tally[str] = Tally()
        self.verdicts: Tally[tuple[str, str]] = Tally()
        self._lock = threading.Lock()

    def __call__(self, record: AuditRecord) -> None:
        """Count one record."""
        if record.kind not in ("step", "check"):
            return
        with self._lock:
            self.kinds[record.kind] += 1
            if record.action is not None:
                self.verdicts[(record.detector or "none", record.action)] += 1

    def read(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """The counts so far."""
        with self._lock:
            return dict(self.kinds), dict(self.verdicts)


class Metrics:
    """The service's metrics, in a registry of their own (one per app)."""

    def __init__(self, service: Service, index: SessionIndex) -> None:
        self.service = service
        self.index = index
        self.tally = VerdictTally()
        index.listeners.append(self.tally)
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "antiloop_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template, method and status.",
            ("route", "method", "status"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.store_errors = Counter(
            "antiloop_store_errors",
            "Store calls of a route that failed or timed out.",
            ("kind",),
            registry=self.registry,
        )
        for kind in ("timeout", "error"):
            self.store_errors.labels(kind)  # shown as 0 before the first
        self.registry.register(_ReadAtScrape(self))

    def wrap_calls(self) -> None:
        """Count the store calls of the routes that fail (``service.call``) by kind."""
        self.service.call = _Counted(self.service.call, self.store_errors)  # type: ignore[assignment]

    def middleware(self, app: ASGI) -> ASGI:
        """An ASGI middleware timing every HTTP request by its route template."""
        latency = self.latency
        children: dict[tuple[str, str, int], Any] = {}  # labels() once per route, method, status

        async def timed(scope: Scope, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            status = [500]

            async def sending(message: Any) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            started = time.perf_counter()
            try:
                await app(scope, receive, sending)
            finally:
                route = scope.get("route")
                path = getattr(route, "path", None)
                if path is None:
                    path = scope["path"] if scope["path"] in IN_FRONT else "unmatched"
                if path not in STREAMS:
                    key = (path, scope["method"], status[0])
                    child = children.get(key)
                    if child is None:
                        child = children[key] = latency.labels(path, key[1], str(key[2]))
                    child.observe(time.perf_counter() - started)

        return timed


class _Counted:
    """``service.call`` (``antiloop.server.limits.StoreCalls``), counting the calls that fail."""

    def __init__(self, inner: Any, errors: Counter) -> None:
        self.inner = inner
        self.errors = errors

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # its timeout, its limiter: the wrapped one's

    async def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner(fn, *args, **kwargs)
        except StoreTimeout:
            self.errors.labels("timeout").inc()
            raise
        except StoreError:
            self.errors.labels("error").inc()
            raise


class _ReadAtScrape(Collector):
    """What is read when Prometheus scrapes: approvals, the audit log, the faults."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        metrics = self.metrics
        service = metrics.service
        try:
            metrics.index.refresh()
        except StoreError:
            metrics.store_errors.labels("error").inc()
        kinds, verdicts = metrics.tally.read()
        steps = CounterMetricFamily(
            "antiloop_steps", "Steps and checks judged, from the audit log.", labels=("kind",)
        )
        for kind in ("step", "check"):
            steps.add_metric((kind,), kinds.get(kind, 0))
        yield steps
        judged = CounterMetricFamily(
            "antiloop_verdicts",
            "Verdicts by detector and action, from the audit log.",
            labels=("detector", "action"),
        )
        for (detector, action), n in sorted(verdicts.items()):
            judged.add_metric((detector, action), n)
        yield judged
        found = faults.counts()
        unguarded = CounterMetricFamily(
            "antiloop_store_unguarded",
            "Steps answered by on_store_error because the store failed.",
        )
        unguarded.add_metric((), found.get("error", 0))
        yield unguarded
        retries = CounterMetricFamily(
            "antiloop_store_retries", "Transient store errors retried (SQLite lock errors)."
        )
        retries.add_metric((), found.get("retry", 0))
        yield retries
        try:
            pending = [
                service.fresh_approval(r)
                for r in service.ledger.list_approvals(status="pending")
                if not r.extra.get("vote_for")
            ]
        except StoreError:
            metrics.store_errors.labels("error").inc()
            return
        waiting = [r for r in pending if str(r.status) == "pending"]
        now = service.clock()
        count = GaugeMetricFamily("antiloop_pending_approvals", "Approval requests waiting.")
        count.add_metric((), len(waiting))
        yield count
        oldest = GaugeMetricFamily(
            "antiloop_oldest_pending_approval_age_seconds",
            "How long the oldest pending approval request has waited (0 when none).",
        )
        oldest.add_metric((), max((now - r.created_at for r in waiting), default=0.0))
        yield oldest
