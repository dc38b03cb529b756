"""Shared store for several replicas: one JSON document per thread in Redis, changed only by the Lua scripts
in store/lua/ (one atomic script and one round trip per operation), leases with fencing, cancel via pub/sub."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlparse

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    NoScriptError,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from store.base import (
    RESTART_WINDOW_SECONDS,
    Admission,
    AdmitResult,
    Adopted,
    CancelResult,
    Lease,
    Progress,
    Rejected,
    Rejection,
    RenewResult,
    StoreUnavailable,
    ThreadStore,
)
from store.eventlog import LogFenced, LogRef, LogWrite
from store.eventlog.redis import RedisEventLog
from store.limits import MAX_ANSWERED_IDS, MAX_HISTORY, MAX_RUN_RECORDS
from store.records import Execution, ExecutionStatus, PendingInterrupt
from store.redis_wire import WIRE_IDLE, Wire, evalsha

log = logging.getLogger("agui.store.redis")
LUA_DIR = os.path.join(os.path.dirname(__file__), "lua")
SCRIPTS = ("admit", "accept_resume", "save_interrupt", "finish_run", "cancel", "renew", "rate_limit", "adopt", "mark_adoptable")
ADOPT_INDEX = "agui:adoptable"  # sorted set: [thread key, run id] of adoptable live runs, scored by lease end
_LIST_FIELDS = ("pending", "answered_ids", "open_steps")
_encoder = msgspec.json.Encoder()
PROBE_TTL_MS = 10_000
PROBE_WAIT_MS = 300  # replicated mode: how long the readiness probe waits for its replicas
CLUSTER_SLOTS = 16384
SLOT_WAIT_SECONDS = 5.0  # how long a command may wait for a free connection before the store counts as unavailable
DURABLE_SCRIPTS = frozenset({"admit", "accept_resume", "save_interrupt", "finish_run", "cancel"})
REPLICA_WAIT_MS = 1000  # --redis-durability replicated: how long a write waits for its replicas' acknowledgement
FAILOVER_STARTS = ("+try-failover", "+failover-state-select-slave", "+selected-slave", "+failover-state-send-slaveof-noone")
# Not +failover-end: it comes before the switch, while the pool still points at the old master. Not
# -failover-abort-not-elected either: with several sentinels, one that lost the election says it while the
# elected one goes on (a failover that really stopped reopens writes after FAILOVER_PAUSE_SECONDS).
FAILOVER_ENDS = ("+switch-master", "-failover-abort-no-good-slave")
CLUSTER_MOVES = (ClusterError, TryAgainError, AskError, MovedError, ClusterDownError, SlotNotCoveredError)
SUBSCRIBE_RETRY_CAP_SECONDS = 0.5  # the cancel channel is back within this long of its slot's new master
CLUSTER_RETRY_SECONDS = 3.0  # a reshard's redirects and a promotion's gap: within an admission's budget
FAILOVER_PAUSE_SECONDS = 10.0  # longest wait of state writes during a Sentinel failover
SENTINEL_AGREE_SECONDS = 5.0  # after a switch, how long writes wait for every sentinel to name the new master
ADMIT_TRIES = 3  # an admission whose reply was lost is tried again this many times in all, with the same nonce
POOL_HEADROOM = 8  # pooled connections beyond the gate (the pool itself never refuses)
ADOPT_WINDOW_LEASES = 3  # an adoptable run whose lease ran out waits this many lease lifetimes for an adopter
T = TypeVar("T")


def thread_key(thread_id: str) -> str:
    """Every key of a thread carries the hash tag {t:<digest>} so scripts work on Redis Cluster."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"agui:{{t:{digest}}}:state"


def script_source(name: str, bounds: dict[str, float]) -> str:
    """The bounds as Lua locals, then the shared helpers, then the script: constants are defined once, in Python."""
    header = "".join(f"local {key} = {value!r}\n" for key, value in bounds.items())
    with open(os.path.join(LUA_DIR, "lib.lua")) as lib, open(os.path.join(LUA_DIR, f"{name}.lua")) as body:
        return header + lib.read() + "\n" + body.read()


def _lease(lease: Lease) -> dict[str, Any]:
    return {"run_id": lease.run_id, "execution_id": lease.execution_id, "fence": lease.fence}


def _progress(progress: Progress) -> dict[str, Any]:
    return {"sequence": progress.sequence, "identities": progress.identities}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []  # cjson writes an empty array as {}


def _execution(raw: Any) -> Execution | None:
    """A script's execution table as an Execution (blobs decoded, empty tables read as lists)."""
    if not isinstance(raw, dict):
        return None
    raw = dict(raw)
    for name in _LIST_FIELDS:
        raw[name] = _as_list(raw.get(name))
    raw["pending"] = [
        {
            **p,
            "wire": json.loads(p["wire"]),
            "response_schema": json.loads(p["response_schema"]) if isinstance(p.get("response_schema"), str) else None,
        }
        for p in raw["pending"]
    ]
    checkpoint = raw.get("checkpoint")
    raw["checkpoint"] = json.loads(checkpoint) if isinstance(checkpoint, str) else None
    if not isinstance(raw.get("applied"), dict):
        raw["applied"] = {}
    return msgspec.convert(raw, Execution)


def _pending_wire(pending: list[PendingInterrupt]) -> list[dict[str, Any]]:
    """Pending interrupts with their opaque members as JSON strings (cjson must never rewrite them)."""
    return [
        {
            "id": p.id,
            "reason": p.reason,
            "wire": json.dumps(p.wire),
            "response_schema": json.dumps(p.response_schema) if p.response_schema is not None else None,
            "tool_call_id": p.tool_call_id,
            "expires_at": p.expires_at,
        }
        for p in pending
    ]


def sentinel_hosts(url: str) -> list[tuple[str, int]]:
    """The sentinels of a `redis+sentinel://h:p[,h:p]/service[/db]` URL."""
    netloc = urlparse(url).netloc.split("@")[-1]
    return [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]) if ":" in h else 26379) for h in netloc.split(",")]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def connect(url: str, *, blocking: bool = False, max_connections: int | None = None) -> Any:
    """`redis://`, `rediss://`, `redis+sentinel://h:p[,h:p]/service[/db]`, `redis+cluster://h:p`."""
    timeouts: dict[str, Any] = {"socket_connect_timeout": 2.0, "socket_timeout": None if blocking else 5.0}
    if not urlparse(url).scheme.endswith("+cluster"):  # a Cluster client retries (and re-routes) on its own
        # A command on a connection that broke (its server restarted, failed over, or closed it while idle) goes once
        # more on a new one: every store command is idempotent, fenced or carries a nonce. A timeout is not retried.
        timeouts["retry"] = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    if max_connections is not None:
        timeouts["max_connections"] = max_connections
    parsed = urlparse(url)
    if parsed.scheme in ("redis+sentinel", "rediss+sentinel"):
        from redis.asyncio.sentinel import Sentinel

        hosts = sentinel_hosts(url)
        parts = [p for p in parsed.path.split("/") if p]
        service, db = parts[0], int(parts[1]) if len(parts) > 1 else 0
        sentinel = Sentinel(hosts, ssl=parsed.scheme.startswith("rediss"), **timeouts)
        return sentinel.master_for(service, db=db, password=parsed.password, **timeouts)
    if parsed.scheme in ("redis+cluster", "rediss+cluster"):
        from redis.asyncio.cluster import RedisCluster

        return RedisCluster.from_url(url.replace("+cluster", "", 1), **timeouts)
    return aioredis.from_url(url, **timeouts)


class RedisStore(ThreadStore):
    """Several gateways share threads through it; the lease owner renews on a timer (`lease_seconds`)."""

    needs_renewal = True

    def __init__(
        self,
        url: str,
        *,
        retention_seconds: float,
        lease_seconds: float = 10.0,
        max_connections: int = 64,
        log_retention: float = 600.0,
        min_replicas: int = 0,
    ) -> None:
        self.url = url
        self._cluster = urlparse(url).scheme in ("redis+cluster", "rediss+cluster")
        self.min_replicas = min_replicas  # 0: asynchronous replication (a failover can lose acknowledged writes)
        self.lease_seconds = lease_seconds
        self.owner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Commands wait for one of `max_connections` slots (at most SLOT_WAIT_SECONDS) instead of failing when
        # every pooled connection is busy: load alone never turns into STATE_PERSISTENCE_FAILED.
        self._slots = asyncio.Semaphore(max_connections)
        self.client = connect(url, max_connections=max_connections + WIRE_IDLE + POOL_HEADROOM)
        bounds = {
            "MAX_RUNS": MAX_RUN_RECORDS,
            "MAX_HISTORY": MAX_HISTORY,
            "MAX_ANSWERED": MAX_ANSWERED_IDS,
            "RETENTION_MS": int(retention_seconds * 1000),
            "LEASE_SECONDS": float(lease_seconds),
            "RESTART_WINDOW": RESTART_WINDOW_SECONDS,
            "ADOPT_WINDOW": float(lease_seconds * ADOPT_WINDOW_LEASES),
        }
        self.scripts = {name: self.client.register_script(script_source(name, bounds)) for name in SCRIPTS}
        self._wire = None if self._cluster else Wire(self.client)  # the scripts' short way to a pooled connection
        self._listener: asyncio.Task[None] | None = None
        self._failovers: asyncio.Task[None] | None = None
        self._writes_open = asyncio.Event()  # cleared while Sentinel runs a failover
        self._writes_open.set()
        self._reopen_timer: asyncio.TimerHandle | None = None  # bounds one pause; cancelled when it ends
        self._switched_to: tuple[str, int] | None = None  # the master of the last `+switch-master` acted on
        self._sub_client: Any = None
        self._log = RedisEventLog(
            self.client,
            lambda: connect(url, blocking=True),
            self._command,
            self._script,
            thread_key,
            log_retention,
            lease_seconds * ADOPT_WINDOW_LEASES,
        )
        self.events = self._log

    async def _command(self, operation: Callable[[], Awaitable[T]]) -> T:
        """One command through the gate: wait while a Sentinel failover is under way and for a free slot (both
        bounded), run it; Redis errors become StoreUnavailable."""
        if not self._writes_open.is_set():  # state and event-log writes alike must reach the new master
            try:
                async with asyncio.timeout(FAILOVER_PAUSE_SECONDS):
                    await self._writes_open.wait()
            except TimeoutError:
                raise StoreUnavailable("redis: a failover is under way", retryable=True) from None
        slots = self._slots
        if not slots.locked():  # a slot is free: taken at once, no deadline armed (its timer would linger 5 s)
            await slots.acquire()
        else:
            try:
                async with asyncio.timeout(SLOT_WAIT_SECONDS):
                    await slots.acquire()
            except TimeoutError:
                raise StoreUnavailable("redis: every connection stayed busy") from None
        try:
            return await (self._through_reshards(operation) if self._cluster else operation())
        except RedisError as exc:
            raise _unavailable(exc) from None
        except (AttributeError, OSError) as exc:
            # redis-py on a connection torn down under it (a pool dropped during a failover): its socket is gone,
            # and the command may not have run. Retryable, like a lost connection, never an internal error.
            log.debug("redis command on a torn connection", exc_info=True)
            raise StoreUnavailable(f"redis: connection lost ({type(exc).__name__})", retryable=True) from None
        finally:
            slots.release()

    @staticmethod
    async def _through_reshards(operation: Callable[[], Awaitable[T]]) -> T:
        """A Cluster command, tried again while its slot moves or its master is being replaced: redis-py follows
        redirects for a few hops only (then "TTL exhausted"), and a script whose keys are half migrated gets
        TRYAGAIN. Every store command is idempotent, fenced or carries a nonce, so trying it again is safe."""
        loop = asyncio.get_running_loop()
        give_up, delay = loop.time() + CLUSTER_RETRY_SECONDS, 0.02
        while True:
            try:
                return await operation()
            except CLUSTER_MOVES:
                if loop.time() + delay > give_up:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)

    async def _call(self, name: str, key: str, argument: Any, extra_keys: tuple[str, ...] = ()) -> Any:
        script, args, keys = self.scripts[name], [_encoder.encode(argument)], [key, *extra_keys]
        if self.min_replicas and name in DURABLE_SCRIPTS:
            return await self._command(lambda: self._replicated(script, keys, args))
        return await self._command(lambda: self._script(script, keys, args))

    def _script(self, script: Any, keys: list[str], args: list[Any]) -> Awaitable[Any]:
        """A script call (inside the gate): on the wire's short way where there is one."""
        return self._wire.script(script, keys, args) if self._wire is not None else script(keys=keys, args=args)

    async def _replicated(self, script: Any, keys: list[str], args: list[bytes]) -> Any:
        """The script, then WAIT on the same connection: the reply counts only once `min_replicas` replicas have
        the write. Fewer (a master cut off from its replicas, or one being demoted) is a retryable failure, and
        the pool is dropped so that the next command finds the current master."""
        async with self.client.pipeline(transaction=False) as pipe:
            await script(keys=keys, args=args, client=pipe)
            pipe.wait(self.min_replicas, REPLICA_WAIT_MS)
            result, acknowledged = await pipe.execute()
        if int(acknowledged) < self.min_replicas:
            await self._drop_connections()
            raise StoreUnavailable(f"redis: the write reached {acknowledged} of {self.min_replicas} replica(s)", retryable=True)
        return result

    async def _drop_connections(self) -> None:
        """Forget every pooled connection: the next command connects afresh (through Sentinel, to the master)."""
        try:
            # In-use connections too: one left to its command would go back to the pool still on the old master.
            # Their commands fail, retryably (see `_command`).
            await self.client.connection_pool.disconnect()
        except Exception:
            log.debug("dropping pooled connections failed", exc_info=True)

    async def _run(self, name: str, thread_id: str, argument: Any, extra_keys: tuple[str, ...] = ()) -> dict[str, Any]:
        """One script, one round trip; a refusal in the reply becomes Rejected."""
        return _reply(await self._call(name, thread_key(thread_id), argument, extra_keys))

    async def now(self) -> float:
        seconds, micros = await self._command(self.client.time)
        return float(seconds) + float(micros) / 1_000_000

    async def admit(self, a: Admission) -> AdmitResult:
        """Tried up to ADMIT_TRIES times when the connection fails or times out (the script may or may not have
        run): the nonce makes a repeated try return the grant the first one made, never a second admission."""
        meta_key = self._log.meta_key(LogRef(a.thread_id, a.run_id))
        for attempt in range(ADMIT_TRIES):
            try:
                result = await self._run("admit", a.thread_id, a, (meta_key,))  # encoded field by field, as asdict would
                break
            except StoreUnavailable as exc:
                if not exc.retryable or attempt == ADMIT_TRIES - 1:
                    raise
                log.warning("admission of run %s not confirmed (%s); trying again with the same nonce", a.run_id, exc)
                await asyncio.sleep(0.1 * 2**attempt)
        history = [e for e in (_execution(raw) for raw in _as_list(result.get("history"))) if e is not None]
        return AdmitResult(_execution(result.get("execution")), history, _execution(result.get("expired")), int(result["fence"]))

    async def accept_resume(self, lease: Lease, applied: dict[str, str]) -> None:
        await self._run("accept_resume", lease.thread_id, {"lease": _lease(lease), "applied": applied})

    async def save_interrupt(
        self, lease: Lease, pending: list[PendingInterrupt], *, checkpoint: Any, open_steps: list[str], progress: Progress
    ) -> None:
        argument = {
            "lease": _lease(lease),
            "pending": _pending_wire(pending),
            "checkpoint": json.dumps(checkpoint),
            "open_steps": open_steps,
            "progress": _progress(progress),
        }
        await self._run("save_interrupt", lease.thread_id, argument)

    async def finish_run(self, lease: Lease, status: ExecutionStatus | None, progress: Progress) -> None:
        await self._run("finish_run", lease.thread_id, {"lease": _lease(lease), "status": status, "progress": _progress(progress)})

    async def finish_run_and_log(self, lease: Lease, status: ExecutionStatus | None, progress: Progress, log: LogWrite) -> Exception | None:
        """The finish script and the run's last log write pipelined: one round trip for both (the end of a short
        run). Replicated durability keeps them apart (the finish waits for its replicas on its own), and so does
        a Cluster (its pipelines route command by command)."""
        wire = self._wire
        if self.min_replicas or wire is None:
            return await super().finish_run_and_log(lease, status, progress, log)
        argument = _encoder.encode({"lease": _lease(lease), "status": status, "progress": _progress(progress)})
        log_keys, log_args = self._log.script_call(log)
        commands = [
            evalsha(self.scripts["finish_run"], [thread_key(lease.thread_id)], [argument]),
            evalsha(self._log.append_script, log_keys, log_args),
        ]
        finished, logged = await self._command(lambda: wire.exchange(commands))
        if isinstance(finished, NoScriptError) or isinstance(logged, NoScriptError):
            # The scripts are not loaded (a restarted or flushed Redis): the ordinary calls load them. The finish
            # is fenced, so running it again after it landed changes nothing.
            return await super().finish_run_and_log(lease, status, progress, log)
        if isinstance(finished, RedisError):
            raise _unavailable(finished)
        _reply(finished)
        if isinstance(logged, RedisError):
            return _unavailable(logged)
        if logged == -1:
            return LogFenced(f"run {log.ref.run_id}: a newer owner writes this log")
        return None

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, user_id: str | None = None) -> CancelResult:
        argument = {"execution_id": execution_id, "ros_invocation_id": ros_invocation_id, "user_id": user_id}
        result = await self._run("cancel", thread_id, argument)
        owner = result.get("owner")
        return CancelResult(result["status"], owner if isinstance(owner, str) else None, _execution(result.get("execution")))

    async def renew(self, lease: Lease) -> RenewResult:
        result = await self._run("renew", lease.thread_id, {"lease": _lease(lease)})
        if result.get("ok") and result.get("adoptable"):
            await self._index(lease.thread_id, lease.run_id, float(result["until"]))
        return RenewResult(bool(result["ok"]), bool(result["cancel"]))

    # -- adoption --------------------------------------------------------------------------------
    supports_adoption = True

    async def _index(self, thread_id: str, run_id: str, until: float) -> None:
        """The adoption index is a hint beside the thread documents (a Cluster keeps them on other slots): the
        adopt script decides, and a stale entry is corrected or dropped by the next scan."""
        member = json.dumps([thread_id, run_id])
        await self._command(lambda: self.client.zadd(ADOPT_INDEX, {member: until}))

    async def mark_adoptable(self, lease: Lease, record: dict[str, Any], *, handoff: bool = False) -> bool:
        result = await self._run(
            "mark_adoptable", lease.thread_id, {"lease": _lease(lease), "record": json.dumps(record), "handoff": handoff}
        )
        if result.get("ok"):
            await self._index(lease.thread_id, lease.run_id, float(result["until"]))
        return bool(result.get("ok"))

    async def adoption_candidates(self, limit: int) -> list[tuple[str, str]]:
        now = await self.now()
        members = await self._command(lambda: self.client.zrangebyscore(ADOPT_INDEX, "-inf", now, start=0, num=limit))
        out: list[tuple[str, str]] = []
        for member in members:
            thread_id, run_id = json.loads(member)
            out.append((str(thread_id), str(run_id)))
        return out

    async def adopt(self, thread_id: str, run_id: str) -> Adopted | None:
        result = await self._run("adopt", thread_id, {"owner": self.owner_id, "run_id": run_id})
        if result["status"] == "gone":
            member = json.dumps([thread_id, run_id])
            await self._command(lambda: self.client.zrem(ADOPT_INDEX, member))
            return None
        await self._index(thread_id, run_id, float(result["until"]))  # held by its owner, or now by us: its lease end
        if result["status"] == "held":
            return None
        lease = Lease(thread_id, run_id, str(result["execution_id"]), int(result["fence"]))
        return Adopted(lease, json.loads(result["record"]), _execution(result.get("execution")))

    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        key = "agui:rl:{" + hashlib.sha256(caller.encode()).hexdigest()[:32] + "}"
        return float(await self._call("rate_limit", key, {"rate": rate, "burst": burst}))

    async def read_document(self, thread_id: str) -> dict[str, Any] | None:
        """The raw thread document (diagnostics and the Python/Lua parity test)."""
        raw = await self._command(lambda: self.client.get(thread_key(thread_id)))
        return None if raw is None else json.loads(raw)

    # -- tickets ------------------------------------------------------------------------
    async def put_ticket(self, digest: str, ttl_seconds: float, value: str) -> None:
        await self._command(lambda: self.client.set(f"agui:ticket:{digest}", value, px=max(1, int(ttl_seconds * 1000))))

    async def take_ticket(self, digest: str) -> str | None:
        try:
            value = await self._command(lambda: self.client.getdel(f"agui:ticket:{digest}"))
        except StoreUnavailable:
            return None
        return value.decode() if isinstance(value, bytes) else value

    # -- cross-replica cancel ----------------------------------------------------------------
    async def notify_cancel(self, owner: str, thread_id: str, execution_id: str) -> None:
        """Wake the owner at once; if this message is lost its renewal timer still sees the durable intent."""
        try:
            message = json.dumps([thread_id, execution_id])
            channel = f"agui:cancel:{owner}"
            publish = self.client.spublish if self._cluster else self.client.publish  # Cluster: sharded pub/sub
            await self._command(lambda: publish(channel, message))
        except StoreUnavailable:
            log.warning("cancel wake-up not published; the owner will see the intent on its next renewal")

    async def listen_for_cancels(self, on_cancel: Callable[[str, str], None]) -> None:
        self._listener = asyncio.create_task(self._listen(on_cancel))
        if urlparse(self.url).scheme in ("redis+sentinel", "rediss+sentinel"):
            self._failovers = asyncio.create_task(self._follow_failovers())

    async def _follow_failovers(self) -> None:
        """Sentinel's failover events. From the moment a failover starts (before the replica is promoted) state
        writes wait; at `+switch-master` every pooled connection is dropped and writes resume on the new master.
        Without this the old master goes on accepting writes until Sentinel demotes it, and then discards them.
        Every sentinel of the URL is watched at once: only the one leading a failover announces its start, and
        a failover may be asked of any of them."""
        await asyncio.gather(*(self._watch_sentinel(host, port) for host, port in sentinel_hosts(self.url)))

    async def _watch_sentinel(self, host: str, port: int) -> None:
        delay = 0.1
        while True:
            try:
                watcher = aioredis.Redis(host=host, port=port, socket_connect_timeout=2.0)
                pubsub = watcher.pubsub()
                try:
                    await pubsub.subscribe(*FAILOVER_STARTS, *FAILOVER_ENDS)
                    delay = 0.1
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message and message.get("type") == "message":
                            await self._failover_event(_text(message["channel"]), _text(message["data"]))
                finally:
                    await pubsub.aclose()
                    await watcher.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the same sentinel again, with backoff (the others are watched)
                log.warning("sentinel %s:%d watch lost (%s); retrying in %.1fs", host, port, type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _failover_event(self, channel: str, data: str) -> None:
        if channel in FAILOVER_STARTS and self._writes_open.is_set():
            log.warning("sentinel failover under way (%s): state writes wait for the new master", channel)
            self._pause_writes()
        elif channel == "+switch-master":
            # "<service> <old ip> <old port> <new ip> <new port>", announced by every sentinel in turn.
            fields = data.split()
            master = (fields[3], int(fields[4])) if len(fields) == 5 and fields[4].isdigit() else None
            if master is not None and master == self._switched_to:
                return
            self._switched_to = master
            log.warning("sentinel switched the master (%s): reconnecting", data)
            self._pause_writes()  # also when the start went unseen
            if master is not None:
                await self._until_sentinels_name(master)
            await self._drop_connections()
            self._reopen_writes()
        elif channel in FAILOVER_ENDS:
            self._reopen_writes()

    def _pause_writes(self) -> None:
        self._writes_open.clear()
        if self._reopen_timer is None:  # never wait forever, and one pause's bound never ends a later pause
            self._reopen_timer = asyncio.get_running_loop().call_later(FAILOVER_PAUSE_SECONDS, self._reopen_writes)

    def _reopen_writes(self) -> None:
        if self._reopen_timer is not None:
            self._reopen_timer.cancel()
            self._reopen_timer = None
        self._writes_open.set()

    async def _until_sentinels_name(self, master: tuple[str, int]) -> None:
        """Wait (bounded) until every sentinel that answers names the new master. The leader announces the
        switch at once; the others learn it from its hello messages up to two seconds later, and a connection
        made meanwhile through one of them would reach the old master, which still takes writes until it is
        demoted, and then drops them."""
        sentinels = self.client.connection_pool.sentinel_manager.sentinels
        service = self.client.connection_pool.service_name
        loop = asyncio.get_running_loop()
        give_up = loop.time() + SENTINEL_AGREE_SECONDS
        while loop.time() < give_up:
            named = await asyncio.gather(*(_master_named(sentinel, service) for sentinel in sentinels))
            answers = [address for address in named if address is not None]
            if answers and all(address == master for address in answers):
                log.info("every sentinel names the new master after %.2fs", SENTINEL_AGREE_SECONDS - (give_up - loop.time()))
                return
            await asyncio.sleep(0.05)
        log.warning("sentinels still disagree on the master after %.0fs; reconnecting anyway", SENTINEL_AGREE_SECONDS)

    async def _listen(self, on_cancel: Callable[[str, str], None]) -> None:
        channel = f"agui:cancel:{self.owner_id}"
        delay = 0.1
        while True:
            try:
                self._sub_client = self._sub_client or connect(self.url, blocking=True)
                if self._cluster:
                    await self._sub_client.initialize()  # the slot map, which a sharded subscription needs first
                pubsub = self._sub_client.pubsub()
                # On a Cluster a plain SUBSCRIBE only hears its own node: the channel is sharded (SSUBSCRIBE, the
                # node owning its slot), and redis-py moves the subscription when the slot moves.
                await (pubsub.ssubscribe(channel) if self._cluster else pubsub.subscribe(channel))
                delay = 0.1
                try:
                    while True:
                        if self._cluster:
                            message = await pubsub.get_sharded_message(timeout=1.0)
                        else:
                            message = await pubsub.get_message(timeout=1.0)
                        if message and message.get("type") in ("sunsubscribe", "unsubscribe"):
                            # The server dropped the subscription: a node hands its slot's shard channels back
                            # when the slot changes owner (a failover, a reshard). Subscribe again, where it is now.
                            raise RedisConnectionError("the cancel channel was unsubscribed by the server")
                        if message and message.get("type") in ("message", "smessage"):
                            thread_id, execution_id = json.loads(message["data"])
                            on_cancel(thread_id, execution_id)
                finally:
                    await pubsub.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reconnect with backoff whatever happened
                log.warning("cancel subscription lost (%s); retrying in %.1fs", type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, SUBSCRIBE_RETRY_CAP_SECONDS)
                if self._cluster and self._sub_client is not None:
                    # Its slot map may still name a master that died: read it again, just before the next try and
                    # not before the wait, so a promotion during the wait is already seen by that try.
                    with contextlib.suppress(Exception):
                        await self._sub_client.nodes_manager.initialize()

    async def ping(self) -> bool:
        """A real write (a small key that expires), not a PING: an out-of-memory, read-only or slot-less Redis
        answers PING yet refuses every state write, and must show as not ready."""
        key = f"agui:probe:{{{self.owner_id}}}"
        try:
            if self.min_replicas:  # replicated: a write counts only once enough replicas have it, as admissions do
                return await self._command(lambda: self._replicated_probe(key))
            if self._cluster and not await self._command(self._cluster_covered):
                return False
            return bool(await self._command(lambda: self.client.set(key, "1", px=PROBE_TTL_MS)))
        except StoreUnavailable:
            return False

    async def _replicated_probe(self, key: str) -> bool:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.set(key, "1", px=PROBE_TTL_MS)
            pipe.wait(self.min_replicas, PROBE_WAIT_MS)
            written, acknowledged = await pipe.execute()
        return bool(written) and int(acknowledged) >= self.min_replicas

    async def _cluster_covered(self) -> bool:
        """Every slot served: one probe key reaches one slot, and a replica whose key landed on a live master
        would say ready while the threads of a dead one's slots are refused."""
        info = await self.client.cluster_info()
        return info.get("cluster_state") == "ok" and int(info.get("cluster_slots_ok", 0)) == CLUSTER_SLOTS

    async def close(self) -> None:
        await self.events.close()
        for task in (self._listener, self._failovers):
            if task is not None:
                task.cancel()
        for client in (self.client, self._sub_client):
            if client is not None:
                try:
                    await client.aclose()
                except Exception:  # noqa: BLE001
                    pass


async def _master_named(sentinel: Any, service: str) -> tuple[str, int] | None:
    """The master one sentinel names for `service`; None when it does not answer."""
    try:
        async with asyncio.timeout(0.5):
            address = await sentinel.sentinel_get_master_addr_by_name(service)
    except (RedisError, OSError, TimeoutError):
        return None
    return (_text(address[0]), int(address[1])) if address else None


def _unavailable(exc: RedisError) -> StoreUnavailable:
    """A Redis error as the store's failure; retryable where the command may not have run."""
    retryable = isinstance(exc, (RedisConnectionError, RedisTimeoutError))
    return StoreUnavailable(f"redis: {type(exc).__name__}", retryable=retryable)


def _reply(raw: Any) -> dict[str, Any]:
    """A script's JSON reply; a refusal in it becomes Rejected."""
    result: dict[str, Any] = json.loads(raw)
    if result.get("error"):
        field = result.get("field")
        raise Rejected(Rejection(result["error"]), field if isinstance(field, str) else None)
    return result
