"""The Redis store (``redis://host:6379/0``): sessions shared by a fleet of guards.

Keys are hash-tagged by session, so a session's keys live in one Redis Cluster slot (an id
that is empty or starts with ``}`` is tagged ``~{<digest>}`` instead, as ``{}`` tags nothing)::

    <prefix>:{<session>}:state      the encoded state, with a TTL (default 7 days)
    <prefix>:{<session>}:version    a random token, new at every save of the state
    <prefix>:{<session>}:lock       held by transaction() (a token, with a TTL)
    <prefix>:{<session>}:feedback   a list of messages from people
    <prefix>:{<session>}:stop       who asked the session to stop
    <prefix>:sessions               a sorted set of session ids by last update
    <prefix>:{audit}:log / :head    the audit chain (one per store) and its head
    <prefix>:{audit}:ledger         step ids appended lately (a cluster client's, see below)
    <prefix>:{approval:<id>}        an approval request (JSON); ids in <prefix>:approvals
    <prefix>:{cache:<digest>}       a cached result

Judging a step is atomic for its session, in one of three ways:

- ``judge(session, fn)``, which ``Guard.record`` uses: compare-and-set (``stores.state``). ``fn``
  judges the state this store saved last (or read with ``interventions()``), and one script
  (``_COMMIT``) checks that the session's version is unchanged and unlocked and the audit head
  unmoved, then appends the records, moves the head, saves the state under a new version and
  indexes the session: one round trip (two with the read). A changed state is answered with
  the current one and ``fn`` runs again on it; a moved head, the records chained again on it.
- ``transaction()``: one script takes the session's lock (a token with a TTL, ``lock_ttl``,
  default 30 s, so a holder that dies leaves it to expire) and reads the state; ``_COMMIT``
  with the token saves and unlocks: two round trips.
- ``batch(sessions)`` (``POST /v1/steps`` with many steps): ``_GRAB`` locks every session
  (all or none) and reads their states, stop requests, feedback and the audit head; the steps
  are judged in order on those states, and one ``_COMMIT`` saves them all with every record:
  two round trips for the batch.

What is atomic: on one Redis server ``_COMMIT`` runs as one script, so no client sees some of
the audit records, the head, the state, its version and the index entry without the rest, and
every check runs before the first write, so a refused commit writes nothing. Redis has no
rollback: a command failing after the checks (out of memory under ``maxmemory``) would leave
the writes before it (the records go first, so a state is never saved without its records).
Replication is asynchronous: a failover can lose the last acknowledged steps, unless
``wait_replicas=N``: then every write of a step is followed by ``WAIT N`` on its connection
(in the same round trip), and a step is acknowledged only once N replicas hold it (fewer
within ``timeout / 2`` is a ``StoreError``: the step is not acknowledged). A cluster client
cannot run one script over the session's slot and the audit log's: it judges through
``transaction()``, appends the records in one script and then saves the state in another
(each atomic, the pair not). The append notes the step's ids in the audit slot's ledger and
appends nothing for ids it holds, so a step whose save failed after its records (its master
failed over) is recorded once when it is sent again.
Deciding an approval is a WATCH/MULTI retry loop.

Redis Sentinel: ``redis+sentinel://[:password@]host:port,host:port/<master name>[/db]``; the
Sentinels are asked for the master (and again when it stops answering or turns replica); the
password is the master's (Sentinels with a password of their own: ``sentinel_password``).

URL options (taken out of the URL before it reaches redis-py): ``prefix``, ``ttl`` (seconds),
``lock_ttl`` (seconds), ``audit_cap`` (bytes), ``timeout`` (socket and connect timeout,
seconds, default 2: a hung server costs a step at most that, then ``on_store_error`` applies),
``wait_replicas`` (replicas that must hold a step before it is acknowledged, default 0).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from antiloop.core.errors import MissingExtra, StoreError
from antiloop.core.history import SessionState
from antiloop.stores._common import (
    Records,
    approval_from_json,
    approval_to_json,
    chain,
    check_chain,
    head_of,
    hide_password,
    parse_head,
    split_options,
)
from antiloop.stores.codec import StateCache, decode_state, encode_state
from antiloop.stores.state import judge as judge_by_cas

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest
    from antiloop.audit import AuditEvent
    from antiloop.stores.auditlog import AuditRecord, AuditRow, Problem

__all__ = ["RedisStore"]

T = TypeVar("T")
V = TypeVar("V")

DEFAULT_TIMEOUT = 2.0
"""Seconds a Redis call may take (socket, connect) before the step follows on_store_error."""

# KEYS: lock, state. ARGV: token, lock ms. -> {1, state or nil} or {0, lock pttl}
_ENTER = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('GET', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
"""
# KEYS: lock, state, version. ARGV: token, state, ttl seconds, new version.
# -> 1 saved, 0 the lock was lost. (A cluster client's save; see _COMMIT.)
_EXIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[3])
redis.call('DEL', KEYS[1])
return 1
"""
# Saves judged steps of n sessions: the audit records, each state, its new version and the
# session index, all or nothing, after every check passed (nothing is written before the last).
# KEYS: per session lock, state, version; then log, head, index.
# ARGV: n, ttl seconds, now, expected head, new head; per session: lock token ('' when judged
#   without the lock), expected version, new version, state, session id; then the records.
# -> {1} saved; {0, 'lost'} a lock token is not ours; {0, 'locked', pttl} another holds a lock;
#   {0, 'state', version, state} a state changed (the current one, absent if none);
#   {0, 'head', head} another guard appended to the audit log first.
_COMMIT = """
local n = tonumber(ARGV[1])
local last = 3 * n
for i = 0, n - 1 do
  local k, a = 3 * i, 5 + 5 * i
  if ARGV[a + 1] ~= '' then
    if redis.call('GET', KEYS[k + 1]) ~= ARGV[a + 1] then return {0, 'lost'} end
  else
    local pttl = redis.call('PTTL', KEYS[k + 1])
    if pttl ~= -2 then return {0, 'locked', pttl} end
    local state = redis.call('GET', KEYS[k + 2])
    local version = ''
    if state then version = redis.call('GET', KEYS[k + 3]) or '' end
    if version ~= ARGV[a + 2] then return {0, 'state', version, state} end
  end
end
if #ARGV > 5 + 5 * n then
  local head = redis.call('GET', KEYS[last + 2]) or ''
  if head ~= ARGV[4] then return {0, 'head', head} end
  for i = 6 + 5 * n, #ARGV do redis.call('RPUSH', KEYS[last + 1], ARGV[i]) end
  redis.call('SET', KEYS[last + 2], ARGV[5])
end
for i = 0, n - 1 do
  local k, a = 3 * i, 5 + 5 * i
  redis.call('SET', KEYS[k + 2], ARGV[a + 4], 'EX', ARGV[2])
  redis.call('SET', KEYS[k + 3], ARGV[a + 3], 'EX', ARGV[2])
  redis.call('ZADD', KEYS[last + 3], ARGV[3], ARGV[a + 5])
  if ARGV[a + 1] ~= '' then redis.call('DEL', KEYS[k + 1]) end
end
return {1}
"""
# Locks every session of a batch, or none, and reads them and the audit head.
# KEYS: per session lock, state, version, stop, feedback; then the head. ARGV: token, lock ms.
# -> {0, pttl} one is locked by another; {1, head, per session: state, version, {stop}, feedback}
#   (the feedback taken; '' for an absent state or version).
_GRAB = """
local n = (#KEYS - 1) / 5
for i = 0, n - 1 do
  local pttl = redis.call('PTTL', KEYS[5 * i + 1])
  if pttl ~= -2 then return {0, pttl} end
end
local out = {1, redis.call('GET', KEYS[#KEYS]) or ''}
for i = 0, n - 1 do
  local k = 5 * i
  redis.call('SET', KEYS[k + 1], ARGV[1], 'PX', ARGV[2])
  out[#out + 1] = redis.call('GET', KEYS[k + 2]) or ''
  out[#out + 1] = redis.call('GET', KEYS[k + 3]) or ''
  local by = redis.call('GET', KEYS[k + 4])
  out[#out + 1] = by and {by} or {}
  out[#out + 1] = redis.call('LRANGE', KEYS[k + 5], 0, -1)
  redis.call('DEL', KEYS[k + 5])
end
return out
"""
# KEYS: lock. ARGV: token. Release without saving.
_ABORT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
# Appends records after the expected head; those of a cluster client's judged step once per
# step id (a retry after a save that failed, or a resent script, finds its ids in the ledger
# and appends nothing).
# KEYS: log, head, ledger. ARGV: expected head, new head, ledger cap, now, id count, ids...,
# records... -> {1, head} appended, {2, head} every id was appended before, or {0, head}.
_APPEND = """
local n = tonumber(ARGV[5])
local seen = n > 0
for i = 6, 5 + n do
  if not redis.call('ZSCORE', KEYS[3], ARGV[i]) then seen = false end
end
if seen then return {2, redis.call('GET', KEYS[2]) or ''} end
local head = redis.call('GET', KEYS[2]) or ''
if head ~= ARGV[1] then return {0, head} end
for i = 6 + n, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('SET', KEYS[2], ARGV[2])
if n > 0 then
  for i = 6, 5 + n do redis.call('ZADD', KEYS[3], ARGV[4], ARGV[i]) end
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[3]) - 1)
end
return {1, ARGV[2]}
"""
LEDGER_KEPT = 100_000
"""Step ids a cluster store's audit ledger remembers (of every session; oldest dropped)."""


#: The options a ``redis://`` store URL may carry in its query, with their types.
URL_OPTIONS: dict[str, type] = {
    "prefix": str,
    "ttl": float,
    "lock_ttl": float,
    "audit_cap": int,
    "timeout": float,
    "wait_replicas": int,
    "sentinel_password": str,
}


class RedisStore(Records):
    """Sessions, audit log, approvals, cache and interventions in Redis.

    Args:
        client: a ``redis.Redis`` (or a cluster client) with ``decode_responses=False``.
        url: the URL it was opened from (shown without its password).
        prefix: the first part of every key.
        ttl: seconds a session's state and queues live after its last step.
        lock_ttl: seconds a session lock lives if its holder dies.
        audit_cap: bytes of UTF-8 kept of each audit record's args, output and error.
        clock: seconds since the epoch, for times and cache expiry.
        wait_replicas: replicas that must hold a step's writes before it is acknowledged.
        wait_timeout: seconds ``WAIT`` waits for them.
    """

    def __init__(
        self,
        client: Any,
        *,
        url: str = "redis://",
        prefix: str = "antiloop",
        ttl: float = 7 * 86400,
        lock_ttl: float = 30.0,
        audit_cap: int = 4096,
        clock: Callable[[], float] = time.time,
        wait_replicas: int = 0,
        wait_timeout: float = DEFAULT_TIMEOUT / 2,
    ) -> None:
        self._client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self._url = hide_password(url)
        self.prefix = prefix
        self.ttl = int(ttl)
        self.lock_ttl = lock_ttl
        self.audit_cap = audit_cap
        self.clock = clock
        self._tx_lock = threading.RLock()
        self._pending: list[AuditEvent] | None = None
        self._states = StateCache(4096)  # the states it saved, by session (no decode)
        self._batch: dict[str, list[Any]] | None = None  # batch(): session -> [state, said]
        self._batched: list[AuditEvent] = []  # the audit events of the batch, in order
        self._head: str | None = None  # the audit head as last seen ("seq hash")
        # One script cannot span a cluster's slots: a cluster client saves in two.
        self._cluster = hasattr(client, "get_nodes")
        self._ids: list[str] = []  # the step ids of the step judge() is saving (cluster)
        self._log = f"{prefix}:{{audit}}:log"
        self._ledger = f"{prefix}:{{audit}}:ledger"
        self._head_key = f"{prefix}:{{audit}}:head"
        self._index = f"{prefix}:sessions"

    def __repr__(self) -> str:
        return f"RedisStore({self._url!r}, prefix={self.prefix!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        """``redis://[:password@]host:port/db?prefix=antiloop&ttl=604800``.

        ``redis+cluster://host:port`` (or ``rediss+cluster://``) opens a Redis Cluster from
        any of its nodes (database 0, the only one a cluster has).
        ``redis+sentinel://[:password@]host:port,host:port/<master name>[/db]`` (or
        ``rediss+sentinel://``) asks the Sentinels for the master of that name, and again
        after a failover (``_sentinel_master``).
        """
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:
            raise MissingExtra("redis", "redis", "the redis:// store") from exc
        base, opts = split_options(url, URL_OPTIONS)
        timeout = opts.pop("timeout", DEFAULT_TIMEOUT)
        sentinel_password = opts.pop("sentinel_password", None)
        opts["wait_timeout"] = timeout / 2
        parts = urlsplit(base)
        if parts.scheme.endswith("+cluster"):  # redis+cluster://host:port: any node will do
            scheme = parts.scheme.removesuffix("+cluster")
            try:
                cluster = redis.RedisCluster.from_url(
                    urlunsplit((scheme, parts.netloc, "", parts.query, "")),  # no db: 0 only
                    socket_timeout=timeout,
                    socket_connect_timeout=timeout,
                )
            except (redis.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
                raise StoreError(
                    f"could not reach the Redis Cluster at {hide_password(base)}: {exc}"
                ) from exc
            return cls(cluster, url=base, **{**opts, **options})
        if parts.scheme.endswith("+sentinel"):  # redis+sentinel://h:p,h:p/master/db
            client = _sentinel_master(base, timeout, sentinel_password)
            return cls(client, url=base, **{**opts, **options})
        # One retry on a broken connection (a restarted server), none on a timeout: a hung
        # server costs a step one timeout, not two. A resent commit is judged once (step ids).
        client = redis.Redis.from_url(
            base,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
            health_check_interval=0,
        )
        return cls(client, url=base, **{**opts, **options})

    @property
    def url(self) -> str:
        """The URL, without its password."""
        return self._url

    def _keys(self, session: str) -> list[str]:
        if session and not session.startswith("}"):
            base = f"{self.prefix}:{{{session}}}"
        else:  # "{}" would tag nothing (each key its own slot): tag a digest, after a "~"
            base = f"{self.prefix}:~{{{hashlib.sha256(session.encode()).hexdigest()[:24]}}}"
        return [
            f"{base}:lock",
            f"{base}:state",
            f"{base}:feedback",
            f"{base}:stop",
            f"{base}:version",
        ]

    def _call(
        self, script: str, keys: list[str], args: list[Any], what: str, wait: bool = False
    ) -> Any:
        # EVAL, not EVALSHA: no NOSCRIPT after a server restart, and a pipeline needs no
        # SCRIPT EXISTS round trip; Redis keeps the compiled script by its digest anyway.
        try:
            return self._eval(script, keys, args, wait)
        except Exception as exc:
            raise self._failed(what, exc) from exc

    def _eval(self, script: str, keys: list[str], args: list[Any], wait: bool) -> Any:
        """EVAL; with ``wait`` and ``wait_replicas``, WAIT on the same connection after it."""
        if not (wait and self.wait_replicas):
            return self._client.eval(script, len(keys), *keys, *args)
        client = self._client
        if self._cluster:  # WAIT counts the writes of its own connection: the key's node's
            client = client.get_node_from_key(keys[0]).redis_connection
        pipe = client.pipeline(transaction=False)
        pipe.eval(script, len(keys), *keys, *args)
        pipe.execute_command("WAIT", self.wait_replicas, int(self.wait_timeout * 1000))
        reply, held = pipe.execute()
        if int(held) < self.wait_replicas:
            raise StoreError(
                f"{held} of wait_replicas={self.wait_replicas} replicas held the write within "
                f"{self.wait_timeout:g} s; the step is not acknowledged"
            )
        return reply

    def _failed(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"could not {what} in {self._url}: {type(exc).__name__}: {exc}")

    def _run(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(client)``, its errors as StoreError."""
        try:
            return fn(self._client)
        except StoreError:
            raise
        except KeyError:
            raise
        except Exception as exc:
            raise self._failed(what, exc) from exc

    def _release(self, token: str, *sessions: str) -> None:
        # The lock expires anyway; the error that brought us here is the one that matters.
        with contextlib.suppress(Exception):
            pipe = self._client.pipeline(transaction=False)
            for session in sessions:
                pipe.eval(_ABORT, 1, self._keys(session)[0], token)
            pipe.execute()

    @contextlib.contextmanager
    def _unlocking(self, token: str, *sessions: str) -> Iterator[None]:
        """On any failure inside: forget the sessions' cached states and release their locks.

        (A lost reply may have left a lock taken: with this token, it is ours.)
        """
        try:
            yield
        except BaseException:
            for session in sessions:
                self._states.drop(session)
            self._release(token, *sessions)
            raise

    # -- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, session: str) -> Iterator[SessionState]:
        """Lock the session (``_ENTER``), yield its state; on a clean exit save, append, unlock."""
        with self._tx_lock:
            if self._batch is not None and session in self._batch:  # judged in the batch
                with self._keeping() as pending:
                    yield self._batch[session][0]
                self._batched += pending
                return
            token, data = self._lock(session)
            with self._unlocking(token, session):
                state = self._states.load(session, data)
                self._ids = []
                with self._keeping() as pending:
                    yield state
                data = encode_state(state)
            self._save(session, token, data, state, pending)

    @contextlib.contextmanager
    def _keeping(self) -> Iterator[list[AuditEvent]]:
        """Collect the audit events appended inside (``append_audit``), to send with the save."""
        pending: list[AuditEvent] = []
        self._pending = pending
        try:
            yield pending
        finally:
            self._pending = None

    def _save(
        self, session: str, token: str, data: bytes, state: SessionState, pending: list[Any]
    ) -> None:
        """Save under the lock, append and unlock: one ``_COMMIT`` (a cluster: ``_save_apart``)."""
        version = uuid.uuid4().hex
        with self._unlocking(token, session):
            if self._cluster:
                saved = self._save_apart(session, token, data, version, pending)
            else:
                saved = self._commit([(session, token, "", version, data)], pending)[0] == 1
        if not saved:
            self._states.drop(session)
            raise StoreError(
                f"session {session!r} lost its lock in {self._url} (a step took longer than "
                f"lock_ttl={self.lock_ttl} s); the step was not saved"
            )
        self._states.saved(session, data, state, version)

    def _commit(self, items: list[tuple[str, str, str, str, bytes]], events: list[Any]) -> Any:
        """Run ``_COMMIT`` until it is not refused for the audit head; its last reply.

        ``items``: per session (session, lock token, expected version, new version, state).
        Chained on the head this store last saw; when another guard appended first, the
        records are chained again on the head the script returns.
        """
        keys = [k for i in items for k in (self._keys(i[0])[0], *self._keys(i[0])[1::3])]
        head = self._head
        if events and head is None:
            head = self._read_head()
        each = [
            a
            for s, token, expected, version, data in items
            for a in (token, expected, version, data, s)
        ]
        for _ in range(1000):
            rows = self._chain(head or "", events) if events else [""]
            args = [len(items), self.ttl, self.clock(), head or "", rows[0], *each, *rows[1:]]
            try:
                reply = self._eval(
                    _COMMIT, [*keys, self._log, self._head_key, self._index], args, True
                )
            except Exception as exc:
                self._head = None
                raise self._failed("save a session", exc) from exc
            if reply[0] == 1 and events:
                self._head = rows[0]
            if reply[0] == 1 or reply[1] != b"head":
                return reply
            head = self._head = reply[2].decode()
        raise StoreError(f"could not append to the audit log of {self._url}: too much contention")

    def _save_apart(
        self, session: str, token: str, data: bytes, version: str, pending: list[AuditEvent]
    ) -> bool:
        """A cluster client's save: the records, then the state under the lock, then the index.

        Each is a command of its own (the audit log's slot, the session's, the index's), as a
        cluster pipeline runs no script. A state is never saved without its records; records
        may be kept for a step whose save then failed. False: the lock was lost.
        """
        keys = self._keys(session)
        if pending:
            self._append(pending, [f"{session}\n{i}" for i in self._ids])
        saved = self._call(
            _EXIT, [keys[0], keys[1], keys[4]], [token, data, self.ttl, version], "save", wait=True
        )
        if saved == 1:
            self._run("index a session", lambda c: c.zadd(self._index, {session: self.clock()}))
        return bool(saved == 1)

    @contextlib.contextmanager
    def batch(self, sessions: Sequence[str] = ()) -> Iterator[None]:
        """Judge many steps together: two round trips (the module docstring says how).

        Inside, ``judge``, ``transaction``, ``peek``, ``interventions`` and ``append_audit`` of
        the sessions named work on what ``_GRAB`` read; any failure saves nothing. A cluster
        client (the sessions' slots and the audit log's are apart) judges each step alone.
        """
        names = list(dict.fromkeys(sessions))
        if self._cluster or not names:
            yield
            return
        with self._tx_lock:
            if self._batch is not None:  # nested: the outer batch saves
                yield
                return
            token = uuid.uuid4().hex
            self._batch, self._batched = self._grab(names, token), []
            try:
                with self._unlocking(token, *names):
                    yield
                    items = [
                        (s, token, "", uuid.uuid4().hex, encode_state(got[0]))
                        for s, got in self._batch.items()
                    ]
                    if self._commit(items, self._batched)[0] != 1:
                        raise StoreError(
                            f"a batch lost its locks in {self._url}; nothing was saved"
                        )
                    for s, _, _, version, data in items:
                        self._states.saved(s, data, self._batch[s][0], version)
            finally:
                self._batch, self._batched = None, []

    def _grab(self, names: list[str], token: str) -> dict[str, list[Any]]:
        """Lock and read the sessions (``_GRAB``): per session its state and interventions."""
        keys = [k for s in names for k in (lambda k: (k[0], k[1], k[4], k[3], k[2]))(self._keys(s))]
        keys.append(self._head_key)
        args, waited = [token, int(self.lock_ttl * 1000)], 0.0
        with self._unlocking(token, *names):
            while (got := self._call(_GRAB, keys, args, "lock sessions"))[0] != 1:
                waited = self._wait(names[0], waited)
        found: dict[str, list[Any]] = {}
        for n, s in enumerate(names):
            data, version, by, said = got[2 + 4 * n : 6 + 4 * n]
            self._prime(s, data or None, version.decode(), [got[1]] if n == 0 else [])
            hit = self._states.pop(s)
            state = hit[1] if hit is not None else decode_state(data)
            stop = by[0].decode() if by else None
            found[s] = [state, (stop, [i.decode("utf-8", "surrogatepass") for i in said])]
        return found

    def judge(
        self,
        session: str,
        fn: Callable[[SessionState], tuple[V, Sequence[AuditEvent]]],
    ) -> V:
        """Judge a step by compare-and-set (``state.judge``; the module docstring says how).

        Raises:
            StoreError: Redis failed, or the session stayed locked.
        """
        with self._tx_lock:
            if self._batch is not None and session in self._batch:
                result, events = fn(self._batch[session][0])
                self._batched += events
                return result
        if self._cluster:
            with self.transaction(session) as state:
                before = set(state.seen)
                result, events = fn(state)
                self._ids = [i for i in state.seen if i not in before]
                for event in events:
                    self.append_audit(event)
            return result
        with self._tx_lock:
            hit = self._states.pop(session)
            warm = (hit[1], hit[2]) if hit is not None and isinstance(hit[2], str) else None
            return judge_by_cas(self, session, fn, warm)

    def load(self, session: str) -> tuple[SessionState, object]:
        """The session's state and version (None when unknown), read in one MULTI."""
        keys = self._keys(session)

        def read(c: Any) -> list[Any]:
            pipe = c.pipeline(transaction=True)
            pipe.get(keys[1])
            pipe.get(keys[4])
            if self._head is None and not self._cluster:  # another slot in a cluster
                pipe.get(self._head_key)
            found: list[Any] = pipe.execute()
            return found

        found = self._run("read a session", read)
        if len(found) > 2:
            self._head = found[2].decode() if found[2] else ""
        if found[0] is None:
            return SessionState(), None
        return decode_state(found[0]), (found[1] or b"").decode() or None

    def save(
        self,
        session: str,
        state: SessionState,
        version: object,
        events: Sequence[AuditEvent] = (),
    ) -> tuple[SessionState, object] | None:
        """Save the state and append ``events`` in one script if the version is ``version``.

        Waits while a ``transaction()`` holds the session. Returns None when saved, else the
        current state and version (from the same reply).
        """
        data = encode_state(state)
        new = uuid.uuid4().hex
        with self._tx_lock:
            if self._cluster:
                return self._save_locked(session, data, state, str(version or ""), list(events))
            waited = 0.0
            while True:
                reply = self._commit([(session, "", str(version or ""), new, data)], list(events))
                if reply[0] == 1:
                    self._states.saved(session, data, state, new)
                    return None
                if reply[1] != b"locked":
                    found = reply[3] if len(reply) > 3 and reply[3] else None
                    current = SessionState() if found is None else decode_state(found)
                    return current, reply[2].decode() or None
                waited = self._wait(session, waited)

    def _save_locked(
        self, session: str, data: bytes, state: SessionState, version: str, events: list[Any]
    ) -> tuple[SessionState, object] | None:
        """A cluster client's compare-and-set: under the session's lock, records then state."""
        token, current = self._lock(session)
        with self._unlocking(token, session):
            found = self._run("read a session", lambda c: c.get(self._keys(session)[4]))
        now = (found or b"").decode() if current is not None else ""
        if now != version:
            self._release(token, session)
            return (SessionState() if current is None else decode_state(current)), now or None
        self._ids = []
        self._save(session, token, data, state, events)
        return None

    def _lock(self, session: str) -> tuple[str, bytes | None]:
        """Take the session's lock (waiting while another holds it): the token, and the state."""
        token = uuid.uuid4().hex
        keys = self._keys(session)
        lock_ms = int(self.lock_ttl * 1000)
        waited = 0.0
        with self._unlocking(token, session):
            while (got := self._call(_ENTER, keys[:2], [token, lock_ms], "lock a session"))[0] != 1:
                waited = self._wait(session, waited)
        return token, (got[1] if len(got) > 1 else None)

    def _wait(self, session: str, waited: float) -> float:
        """Sleep a little while another holds the session's lock; the time waited, after."""
        if waited > self.lock_ttl * 2:
            raise StoreError(f"session {session!r} stayed locked for {waited:.0f} s in {self._url}")
        pause = min(0.002 * (1 + waited * 50), 0.05)
        time.sleep(pause)
        return waited + pause

    def _read_head(self) -> str:
        raw = self._run("read the audit head", lambda c: c.get(self._head_key))
        self._head = raw.decode() if raw else ""
        return self._head

    def _chain(self, head: str, events: list[AuditEvent]) -> list[str]:
        """The new head and the stored rows of ``events`` (one or more) chained after ``head``."""
        rows = chain(head_of(self, head, self._tail), events, self.audit_cap)
        return [f"{rows[-1].seq} {rows[-1].hash}", *[r.hash + r.body for r in rows]]

    def _tail(self) -> tuple[int, str]:
        """The last record's seq and hash, read from the log itself (GENESIS when empty)."""
        import json

        from antiloop.stores.auditlog import GENESIS

        raw = self._run("read the audit log", lambda c: c.lindex(self._log, -1))
        if not raw:
            return 0, GENESIS
        text = raw.decode("utf-8", "surrogateescape")
        try:
            seq = int(json.loads(text[64:]).get("seq", 0))
        except (ValueError, AttributeError, TypeError):
            seq = self._run("read the audit log", lambda c: c.llen(self._log))
        return seq, text[:64]

    def _append(self, events: list[AuditEvent], ids: Sequence[str] = ()) -> None:
        """``_APPEND`` the records after the audit head, chained again when another moved it.

        Nothing is appended when every one of ``ids`` is noted in the ledger already.
        """
        head = self._head if self._head is not None else self._read_head()
        for _ in range(1000):
            rows = self._chain(head, events)
            ok, found = self._call(
                _APPEND,
                [self._log, self._head_key, self._ledger],
                [head, rows[0], LEDGER_KEPT, self.clock(), len(ids), *ids, *rows[1:]],
                "append to the audit log",
                wait=True,
            )
            head = self._head = found.decode() if isinstance(found, bytes) else str(found)
            if ok in (1, 2):
                return
        raise StoreError(f"could not append to the audit log of {self._url}: too much contention")

    def peek(self, session: str) -> SessionState | None:
        """The saved state, or None (inside ``batch()``: the state judged so far)."""
        with self._tx_lock:
            if self._batch is not None and session in self._batch:
                state: SessionState = self._batch[session][0]
                return state
        data = self._run("read a session", lambda c: c.get(self._keys(session)[1]))
        return None if data is None else decode_state(data)

    def forget(self, session: str) -> None:
        """Drop the session's state, queues and lock (its audit records stay)."""

        def drop(c: Any) -> None:
            c.delete(*self._keys(session))
            c.zrem(self._index, session)

        self._run("forget a session", drop)
        with self._tx_lock:
            self._states.drop(session)

    def sessions(self) -> list[str]:
        """Session ids, most recently updated first (expired ones are swept)."""
        return self.sessions_page(0, -1)

    def sessions_page(self, offset: int, limit: int) -> list[str]:
        """``limit`` session ids (-1: all) from ``offset`` on, most recently updated first."""

        def page(c: Any) -> list[bytes]:
            c.zremrangebyscore(self._index, "-inf", self.clock() - self.ttl)
            last = -1 if limit < 0 else offset + limit - 1
            found: list[bytes] = c.zrevrange(self._index, offset, last)
            return found

        return [s.decode() for s in self._run("list sessions", page)]

    def close(self) -> None:
        """Close the connection pool."""
        try:
            self._client.close()
        except Exception as exc:
            raise self._failed("close", exc) from exc

    # -- audit ----------------------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> None:
        """Keep an event; inside ``transaction()`` it is sent with the save."""
        with self._tx_lock:
            if self._pending is not None or self._batch is not None:
                (self._pending if self._pending is not None else self._batched).append(event)
                return
            self._append([event])

    def _audit_rows(self, since_seq: int = 0) -> list[AuditRow]:
        import json

        from antiloop.stores.auditlog import AuditRow

        raw = self._run(
            "read the audit log", lambda c: c.lrange(self._log, max(since_seq - 8, 0), -1)
        )
        rows = []
        for item in raw:
            text = item.decode("utf-8", "surrogateescape")
            digest, body = text[:64], text[64:]
            try:
                seq = int(json.loads(body).get("seq", 0))
            except (ValueError, AttributeError):
                seq = 0
            if seq > since_seq or since_seq == 0:
                rows.append(AuditRow(seq, body, digest))
        return rows

    def audit_records(
        self, session: str | None = None, since_seq: int = 0
    ) -> Iterator[AuditRecord]:
        """The records after ``since_seq``, of one session or all."""
        from antiloop.stores.auditlog import parse_rows

        for record in parse_rows(self._audit_rows(since_seq)):
            if record.seq > since_seq and (session is None or record.session == session):
                yield record

    def verify_audit(self) -> list[Problem]:
        """Check the chain (in list order) and the head."""
        rows = self._audit_rows()
        raw = self._run("read the audit head", lambda c: c.get(self._head_key))
        return check_chain(rows, raw.decode("utf-8", "replace") if raw else "")

    # -- approvals ------------------------------------------------------------------------

    def _approval_key(self, id: str) -> str:
        return f"{self.prefix}:{{approval:{id}}}"

    def put_approval(self, request: ApprovalRequest) -> None:
        """Keep a request (args redacted)."""
        body = approval_to_json(request)

        def put(c: Any) -> None:
            pipe = c.pipeline(transaction=False)
            pipe.set(self._approval_key(request.id), body, ex=self.ttl)
            pipe.zadd(f"{self.prefix}:approvals", {request.id: request.created_at})
            pipe.execute()

        self._run("keep an approval", put)

    def _approval_body(self, id: str) -> bytes | None:
        found: bytes | None = self._run("read an approval", lambda c: c.get(self._approval_key(id)))
        return found

    def _approvals_of(self, status: str | None, session: str | None) -> list[str | bytes]:
        """Every request (expired keys are dropped from the index)."""

        def read(c: Any) -> list[str | bytes]:
            ids = [i.decode() for i in c.zrange(f"{self.prefix}:approvals", 0, -1)]
            pipe = c.pipeline(transaction=False)
            for i in ids:
                pipe.get(self._approval_key(i))
            bodies = pipe.execute()
            gone = [i for i, raw in zip(ids, bodies, strict=True) if raw is None]
            if gone:
                c.zrem(f"{self.prefix}:approvals", *gone)
            return [raw for raw in bodies if raw is not None]

        return self._run("list approvals", read)

    def _swap_approval(
        self, id: str, change: Callable[[ApprovalRequest], ApprovalRequest | None]
    ) -> ApprovalRequest:
        """A WATCH/MULTI loop (redis-py's ``transaction``), run again when another decides first."""
        key = self._approval_key(id)

        def apply(pipe: Any) -> ApprovalRequest:
            raw = pipe.get(key)
            if raw is None:
                raise KeyError(id)
            current = approval_from_json(raw)
            changed = change(current)
            if changed is None:
                pipe.unwatch()
                return current
            pipe.multi()
            pipe.set(key, approval_to_json(changed), ex=self.ttl)
            return changed

        result: ApprovalRequest = self._run(
            "decide an approval", lambda c: c.transaction(apply, key, value_from_callable=True)
        )
        return result

    # -- cache ----------------------------------------------------------------------------

    def _cache_key(self, key: str) -> str:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self.prefix}:{{cache:{digest}}}"

    def cache_get(self, key: str) -> str | None:
        """The cached value, or None."""
        raw = self._run("read the cache", lambda c: c.get(self._cache_key(key)))
        if raw is None:
            return None
        expires, _, value = raw.decode("utf-8", "surrogatepass").partition(" ")
        return value if float(expires) > self.clock() else None

    def cache_put(self, key: str, value: str, ttl_seconds: float) -> None:
        """Keep a value for ``ttl_seconds`` (Redis expires it too)."""
        expires = self.clock() + ttl_seconds
        text = f"{expires!r} {value}".encode("utf-8", "surrogatepass")
        ms = max(int(ttl_seconds * 1000), 1)
        self._run("write the cache", lambda c: c.set(self._cache_key(key), text, px=ms))

    # -- people ---------------------------------------------------------------------------

    def push_feedback(self, session: str, text: str) -> None:
        """Queue a message for the session."""
        key = self._keys(session)[2]

        def push(c: Any) -> None:
            pipe = c.pipeline(transaction=False)
            pipe.rpush(key, text.encode("utf-8", "surrogatepass"))
            pipe.expire(key, self.ttl)
            pipe.execute()

        self._run("queue feedback", push)

    def pop_feedback(self, session: str) -> list[str]:
        """Take every queued message (LRANGE and DEL in one MULTI)."""
        key = self._keys(session)[2]

        def pop(c: Any) -> list[str]:
            pipe = c.pipeline(transaction=True)
            pipe.lrange(key, 0, -1)
            pipe.delete(key)
            items = pipe.execute()[0]
            return [i.decode("utf-8", "surrogatepass") for i in items]

        return self._run("take feedback", pop)

    def interventions(self, session: str) -> tuple[str | None, list[str]]:
        """``stop_requested`` and ``pop_feedback`` together, in one round trip.

        The same round trip reads the session's state, its version and the audit head, so the
        step judged next (``judge``) commits in one more, whichever replica wrote last.
        """
        with self._tx_lock:
            if self._batch is not None and session in self._batch:
                said, self._batch[session][1] = self._batch[session][1], (None, [])
                return said  # type: ignore[no-any-return]
        keys = self._keys(session)
        stop_key, feedback_key = keys[3], keys[2]

        def both(c: Any) -> tuple[str | None, list[str]]:
            pipe = c.pipeline(transaction=True)
            pipe.get(stop_key)
            pipe.lrange(feedback_key, 0, -1)
            pipe.delete(feedback_key)
            pipe.get(keys[1])
            pipe.get(keys[4])
            if not self._cluster:  # another slot in a cluster: there the commit re-chains
                pipe.get(self._head_key)
            by, items, _, data, version, *head = pipe.execute()
            self._prime(session, data, (version or b"").decode(), head)
            said = [i.decode("utf-8", "surrogatepass") for i in items]
            return (None if by is None else by.decode()), said

        return self._run("read interventions", both)

    def _prime(self, session: str, data: bytes | None, version: str, head: list[Any]) -> None:
        """Keep the state (and audit head) just read as what ``judge`` sets against."""
        with self._tx_lock:
            if head:  # never older than the head this store's own last commit set
                read = head[0].decode() if head[0] else ""
                mine = parse_head(self._head) if self._head else None
                found = parse_head(read)
                if mine is None or (found is not None and found[0] > mine[0]):
                    self._head = read
            hit = self._states.pop(session)
            if data is None:
                self._states.saved(session, b"", SessionState(), "")
            elif hit is not None and hit[2] == version:
                self._states.saved(session, *hit)
            else:
                try:
                    self._states.saved(session, data, decode_state(data), version)
                except Exception:  # judge reads it again and names the damage
                    return

    def request_stop(self, session: str, by: str) -> None:
        """Ask the session to stop."""
        self._run("ask a session to stop", lambda c: c.set(self._keys(session)[3], by, ex=self.ttl))

    def stop_requested(self, session: str) -> str | None:
        """Who asked the session to stop, or None."""
        raw = self._run("read a stop request", lambda c: c.get(self._keys(session)[3]))
        return None if raw is None else raw.decode()

    def clear_stop(self, session: str) -> None:
        """Withdraw a stop request."""
        self._run("clear a stop request", lambda c: c.delete(self._keys(session)[3]))


def _sentinel_master(url: str, timeout: float, sentinel_password: str | None = None) -> Any:
    """A client of the master that the Sentinels of ``url`` name (found again after a failover).

    ``redis+sentinel://[user:password@]host:port,host:port/<master name>[/db]``: the hosts are
    the Sentinels; the user and password are the master's.

    Raises:
        ConfigError: the URL names no Sentinel or no master.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from redis.sentinel import MasterNotFoundError, Sentinel

    from antiloop.core.errors import ConfigError

    parts = urlsplit(url)
    where = hide_password(url)
    hosts: list[tuple[str, int]] = []
    for item in parts.netloc.rpartition("@")[2].split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"{where}: each Sentinel is host:port, not {item!r}")
        hosts.append((host.strip("[]"), int(port)))
    names = [p for p in parts.path.split("/") if p]
    if not names or len(names) > 2 or (len(names) == 2 and not names[1].isdigit()):
        raise ConfigError(f"{where}: give the master's name and a database: .../mymaster/0")
    tls = {"ssl": True} if parts.scheme.startswith("rediss") else {}
    socket = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    listed = ",".join(f"{h}:{p}" for h, p in hosts)

    base: Any = Sentinel  # redis-py's Sentinel is untyped

    class Sentinels(base):  # type: ignore[misc]
        """Sentinels whose "no master" error is one line (redis-py's lists every client)."""

        def discover_master(self, service_name: str) -> tuple[str, int]:
            try:
                found: tuple[str, int] = super().discover_master(service_name)
            except MasterNotFoundError:
                raise MasterNotFoundError(
                    f"no Sentinel of {listed} names a live master {service_name!r}"
                ) from None
            return found

    sentinel: Any = Sentinels(
        hosts,
        # one try a sentinel: redis-py's default retries cost seconds when one is down
        sentinel_kwargs={
            **socket,
            **tls,
            "password": sentinel_password,
            "retry": Retry(NoBackoff(), 0),
        },
        **socket,
        **tls,
    )
    master: Any = sentinel.master_for(
        names[0],
        db=int(names[1]) if len(names) == 2 else 0,
        username=parts.username,
        password=parts.password,
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        health_check_interval=0,
    )
    close_master = master.close

    def close() -> None:  # the master's client owns the Sentinels' connections too
        try:
            close_master()
        finally:
            sentinel.close()

    master.close = close
    return master
