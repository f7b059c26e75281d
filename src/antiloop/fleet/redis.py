"""The fleet controls shared by every replica through Redis (standalone or Redis Cluster).

Keys (one hash tag, so every script runs in one Cluster slot)::

    <prefix>:{fleet}:kills    hash   kill key -> the kill (JSON); durable until lifted
    <prefix>:{fleet}:log      zset   session + fingerprint -> time of its stop (the last day)
    <prefix>:{fleet}:stops    hash   fingerprint -> sessions it stopped
    <prefix>:{fleet}:steps    hash   fingerprint -> steps wasted
    <prefix>:{fleet}:tokens   hash   fingerprint -> tokens wasted
    <prefix>:{fleet}:last     zset   fingerprint -> time of its last stop (bounds the hashes)
    <prefix>:{fleet}:known    hash   fingerprint -> sessions, once it stopped known_after
    <prefix>:{fleet}:nudged   zset   session + fingerprint -> time it was nudged
    channel <prefix>:fleet           kill, lift and known events, as JSON

Each replica keeps the kills and the known fingerprints in memory: a step reads them with no
round trip. A subscriber thread applies the channel's events as they come (a kill reaches
every replica within milliseconds), and reloads both from the hashes when it (re)subscribes
and every ``refresh`` seconds, so a replica that starts later, or was cut off, catches up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from antiloop.config import FleetConfig
from antiloop.core.errors import MissingExtra, StoreError
from antiloop.fleet._store import redis_client, state_store
from antiloop.fleet.kills import Kill, KillSet
from antiloop.fleet.local import LOG_KEPT, LOG_MAX, Fleet, learned
from antiloop.fleet.status import Counts
from antiloop.stores._common import hide_password, split_options
from antiloop.stores.redis import URL_OPTIONS

log = logging.getLogger("antiloop")

TIMEOUT = 2.0  # seconds a fleet command waits for Redis (its writes are best effort)

# KEYS log stops steps tokens last known; ARGV member fp steps tokens now log_kept ttl
# max_known known_after log_max -> {fresh, sessions fp stopped}
_RECORD_STOP = """
local now = tonumber(ARGV[5])
local fresh = redis.call('ZADD', KEYS[1], 'NX', now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[6]))
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[10])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1) end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[6])))
local fp = ARGV[2]
if fp == '' then return {fresh, 0} end
if fresh == 0 then return {0, tonumber(redis.call('HGET', KEYS[2], fp) or '0')} end
local n = redis.call('HINCRBY', KEYS[2], fp, 1)
redis.call('HINCRBY', KEYS[3], fp, ARGV[3])
redis.call('HINCRBY', KEYS[4], fp, ARGV[4])
redis.call('ZADD', KEYS[5], now, fp)
if n >= tonumber(ARGV[9]) then redis.call('HSET', KEYS[6], fp, n) end
local ttl = tonumber(ARGV[7])
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - ttl)
local over = redis.call('ZCARD', KEYS[5]) - #gone - tonumber(ARGV[8])
if over > 0 then
  for _, f in ipairs(redis.call('ZRANGE', KEYS[5], #gone, #gone + over - 1)) do
    table.insert(gone, f)
  end
end
for _, f in ipairs(gone) do
  redis.call('HDEL', KEYS[2], f)
  redis.call('HDEL', KEYS[3], f)
  redis.call('HDEL', KEYS[4], f)
  redis.call('HDEL', KEYS[6], f)
  redis.call('ZREM', KEYS[5], f)
end
for i = 2, 6 do redis.call('EXPIRE', KEYS[i], math.ceil(ttl)) end
return {1, n}
"""

# KEYS nudged stops; ARGV member now ttl fp cap -> {fresh, sessions fp stopped}
_CLAIM_NUDGE = """
local now = tonumber(ARGV[2])
local fresh = redis.call('ZADD', KEYS[1], 'NX', now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1) end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])))
return {fresh, tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or '0')}
"""

# KEYS stops steps tokens; ARGV fp steps tokens -> 1 when fp is counted
_WASTE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[3], ARGV[1], ARGV[3])
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisFleet(Fleet):
    """The fleet controls of every replica over one Redis (see the module's keys).

    Args:
        client: a ``redis.Redis`` or ``redis.RedisCluster`` (bytes replies).
        prefix: the store's key prefix (the fleet's keys sit beside the sessions').
        config: the ``[fleet]`` table.
        url: shown in the view (without its password).
        watch: run the subscriber thread (a command line call needs none).
    """

    shared = True

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "antiloop",
        config: FleetConfig | None = None,
        url: str = "redis://",
        clock: Callable[[], float] = time.time,
        watch: bool = True,
    ) -> None:
        super().__init__(config, clock=clock)
        self._client = client
        self.prefix = prefix
        shown = hide_password(url)
        self.url = (
            shown if "prefix=" in shown else f"{shown}{'&' if '?' in shown else '?'}prefix={prefix}"
        )
        tag = f"{prefix}:{{fleet}}"
        names = ("kills", "log", "stops", "steps", "tokens", "last", "known", "nudged")
        self._key = {name: f"{tag}:{name}" for name in names}
        self.channel = f"{prefix}:fleet"
        self._index = f"{prefix}:sessions"  # the store's sessions by their last step
        self._closed = threading.Event()
        self.listening = threading.Event()  # the subscriber is subscribed and loaded
        self.reloads = 0
        self.subscriptions = 0  # times the subscriber subscribed (1 + reconnections)
        self._generation = 0  # bumped by every change applied here: a reload then reads again
        self._change = threading.Lock()
        try:
            self.reload()
        except StoreError as exc:
            log.error("antiloop: could not load the fleet's kills: %s", exc)
        self._thread: threading.Thread | None = None
        if watch:
            self._thread = threading.Thread(target=self._watch, name="antiloop-fleet", daemon=True)
            self._thread.start()

    @classmethod
    def from_url(
        cls, url: str, config: FleetConfig | None = None, *, watch: bool = True
    ) -> RedisFleet:
        """The fleet of the store at ``redis://…?prefix=…`` (or ``+cluster``, ``+sentinel``)."""
        try:
            import redis
        except ImportError as exc:
            raise MissingExtra("redis", "redis", "the fleet controls on redis://") from exc
        base, opts = split_options(url, URL_OPTIONS)
        prefix = str(opts.get("prefix", "antiloop"))
        parts = urlsplit(base)
        client: Any
        try:
            if parts.scheme.endswith("+sentinel"):  # the master the Sentinels name
                from antiloop.stores.redis import _sentinel_master

                password = opts.get("sentinel_password")
                client = _sentinel_master(base, TIMEOUT, str(password) if password else None)
            elif parts.scheme.endswith("+cluster"):
                scheme = parts.scheme.removesuffix("+cluster")
                client = redis.RedisCluster.from_url(
                    urlunsplit((scheme, parts.netloc, "", parts.query, "")),
                    socket_timeout=TIMEOUT,
                    socket_connect_timeout=TIMEOUT,
                )
            else:
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                client = redis.Redis.from_url(  # one retry on a broken connection, as the store
                    base,
                    socket_timeout=TIMEOUT,
                    socket_connect_timeout=TIMEOUT,
                    retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                )
        except (redis.RedisError, OSError) as exc:
            raise StoreError(f"could not reach Redis at {hide_password(base)}: {exc}") from exc
        return cls(client, prefix=prefix, config=config, url=base, watch=watch)

    @classmethod
    def of_store(
        cls, store: object, config: FleetConfig | None = None, *, watch: bool = True
    ) -> RedisFleet:
        """The fleet beside a RedisStore (or a split store's Redis state), on its client."""
        state = state_store(store)
        prefix = str(getattr(state, "prefix", "antiloop"))
        url = str(getattr(state, "url", "redis://"))
        return cls(redis_client(store), prefix=prefix, config=config, url=url, watch=watch)

    # -- Redis calls -----------------------------------------------------------------------

    def _run(self, what: str, fn: Callable[[Any], Any]) -> Any:
        try:
            return fn(self._client)
        except Exception as exc:
            raise StoreError(f"the fleet could not {what} in Redis ({self.url}): {exc}") from exc

    def _eval(self, what: str, script: str, keys: list[str], args: list[Any]) -> Any:
        return self._run(what, lambda c: c.eval(script, len(keys), *keys, *args))

    def _publish(self, event: dict[str, Any]) -> None:
        text = json.dumps(event, sort_keys=True)
        self._run("publish an event", lambda c: c.publish(self.channel, text))

    def _put_kill(self, kill: Kill) -> None:
        self._run("keep a kill", lambda c: c.hset(self._key["kills"], kill.key, kill.to_json()))
        with self._change:
            self._generation += 1
        self._publish({"op": "kill", "kill": json.loads(kill.to_json())})

    def _drop_kill(self, key: str) -> Kill | None:
        found = self._run("read a kill", lambda c: c.hget(self._key["kills"], key))
        self._run("lift a kill", lambda c: c.hdel(self._key["kills"], key))
        with self._change:
            self._generation += 1
        self._publish({"op": "lift", "key": key})
        return None if found is None else Kill.from_dict(json.loads(found))

    def _announce(self, fp: str, count: int) -> None:
        self._publish({"op": "known", "fingerprint": fp, "sessions": count})

    def _record_stop(
        self, member: str, fp: str | None, steps: int, tokens: int
    ) -> tuple[bool, int]:
        k = self._key
        c = self.config
        fresh, count = self._eval(
            "count a stop",
            _RECORD_STOP,
            [k["log"], k["stops"], k["steps"], k["tokens"], k["last"], k["known"]],
            [
                member,
                fp or "",
                steps,
                tokens,
                self.clock(),
                LOG_KEPT,
                c.ttl,
                c.max_known,
                c.known_after,
                LOG_MAX,
            ],
        )
        return bool(fresh), int(count)

    def _claim_nudge(self, memo: str, fp: str) -> tuple[bool, int]:
        fresh, count = self._eval(
            "mark a nudge",
            _CLAIM_NUDGE,
            [self._key["nudged"], self._key["stops"]],
            [memo, self.clock(), self.config.ttl, fp, LOG_MAX],
        )
        return bool(fresh), int(count)

    def _waste(self, fp: str, steps: int, tokens: int) -> None:
        k = self._key
        self._eval("add waste", _WASTE, [k["stops"], k["steps"], k["tokens"]], [fp, steps, tokens])

    def _stats(self) -> tuple[int, list[float], dict[str, Counts]]:
        now = self.clock()
        k = self._key

        def read(c: Any) -> list[Any]:
            pipe = c.pipeline() if hasattr(c, "get_nodes") else c.pipeline(transaction=False)
            pipe.zcount(self._index, now - self.config.live_window, "+inf")
            pipe.zrangebyscore(k["log"], now - LOG_KEPT, "+inf", withscores=True)
            for name in ("stops", "steps", "tokens"):
                pipe.hgetall(k[name])
            pipe.zrange(k["last"], 0, -1, withscores=True)
            return list(pipe.execute())

        live, log_rows, stops, steps, tokens, last = self._run("read the fleet", read)
        last_at = {_text(f): float(t) for f, t in last}
        counts = {
            _text(fp): Counts(
                int(n),
                int(steps.get(fp, 0)),
                int(tokens.get(fp, 0)),
                last_at.get(_text(fp), 0.0),
            )
            for fp, n in stops.items()
        }
        return int(live), [float(t) for _, t in log_rows], counts

    # -- the subscriber --------------------------------------------------------------------

    def reload(self) -> None:
        """Read the kills and the known fingerprints again.

        At start, after a drop (subscribed again), and every ``refresh`` seconds.
        """
        for _ in range(3):
            with self._change:
                generation = self._generation

            def read(c: Any) -> list[Any]:
                pipe = c.pipeline() if hasattr(c, "get_nodes") else c.pipeline(transaction=False)
                pipe.hgetall(self._key["kills"])
                pipe.hgetall(self._key["known"])
                return list(pipe.execute())

            kills, known = self._run("load the kills", read)
            with self._change:
                if generation != self._generation:
                    continue  # a change came in meanwhile: read again
                found = []
                for raw in kills.values():
                    try:
                        found.append(Kill.from_dict(json.loads(raw)))
                    except (ValueError, KeyError, TypeError):
                        log.error("antiloop: a fleet kill is unreadable: %r", raw)
                self._kills = KillSet(found)
                fresh: dict[tuple[str, str], tuple[str, int]] = {}
                for fp, n in known.items():
                    if int(n) >= self.config.known_after:
                        fresh = learned(fresh, _text(fp), int(n))
                self._known = fresh
                self.reloads += 1
                return

    def _apply(self, data: Any) -> None:
        try:
            event = json.loads(data)
            with self._change:
                self._generation += 1
                if event["op"] == "kill":
                    self._kills = self._kills.with_kill(Kill.from_dict(event["kill"]))
                elif event["op"] == "lift":
                    self._kills = self._kills.without(str(event["key"]))
                elif event["op"] == "known":
                    self._learn(str(event["fingerprint"]), int(event["sessions"]))
        except (ValueError, KeyError, TypeError) as exc:
            log.error("antiloop: an unreadable fleet event %r: %s", data, exc)

    def _watch(self) -> None:
        backoff = 0.05
        while not self._closed.is_set():
            pubsub: Any = None
            try:
                pubsub = self._client.pubsub()
                pubsub.subscribe(self.channel)
                due = float("inf")
                waiting = False  # for the answer to the subscriber's own PING
                while not self._closed.is_set():
                    message = pubsub.get_message(timeout=0.2)
                    kind = None if message is None else message.get("type")
                    if kind == "subscribe":
                        self.reload()  # after subscribing: no kill falls in between
                        self.subscriptions += 1
                        self.listening.set()
                        backoff = 0.05
                        due = time.monotonic() + self.config.refresh
                    elif kind == "message":
                        self._apply(message["data"])
                    elif kind == "pong":
                        waiting = False
                    if time.monotonic() >= due:
                        if waiting:  # a connection that no longer answers: subscribe again
                            raise ConnectionError("the fleet subscriber's PING went unanswered")
                        self.reload()
                        pubsub.ping()
                        waiting = True
                        due = time.monotonic() + self.config.refresh
            except Exception as exc:  # a dropped connection: subscribe again
                if self._closed.is_set():
                    return
                self.listening.clear()
                log.warning("antiloop: the fleet subscriber lost Redis (%s); again", exc)
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 1.0)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):  # closing a broken connection
                        pubsub.close()

    def close(self) -> None:
        """Stop the subscriber thread."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
