"""Shared store for several replicas: one JSON document per thread in Redis, changed only by the Lua scripts
in store/lua/ (one atomic script and one round trip per operation), behind one gate: a Sentinel failover's
pause, a bounded number of connections in use, a Cluster's moving slots."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar
from urllib.parse import urlparse

import msgspec
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

from store.base import (
    RESTART_WINDOW_SECONDS,
    Admission,
    AdmitResult,
    Adopted,
    CancelResult,
    CancelStatus,
    HistoryWrite,
    Lease,
    Progress,
    RenewResult,
    StopResult,
    StoreUnavailable,
    ThreadHistory,
    ThreadStore,
)
from store.eventlog import LogFenced, LogRef, LogWrite
from store.eventlog.redis import RedisEventLog
from store.limits import MAX_ANSWERED_IDS, MAX_HISTORY, MAX_RUN_RECORDS, QUEUE_TICKET_SECONDS
from store.records import ExecutionStatus, PendingInterrupt
from store.redis.cancels import LIST_CHANNEL, ChannelListener, cancel_channel, cancel_message, list_message
from store.redis.client import CLUSTER_SCHEMES, SENTINEL_SCHEMES, connect, unavailable
from store.redis.scripts import (
    DURABLE_SCRIPTS,
    SCRIPTS,
    as_list,
    execution_of,
    history_keys,
    lease_argument,
    list_key,
    pending_argument,
    progress_argument,
    reply,
    script_source,
    thread_key,
)
from store.redis.sentinel import FailoverWatch
from store.redis.wire import SCRIPT_LOST, WIRE_CONNECTIONS, Wire, evalsha, pack

log = logging.getLogger("agui.store.redis")
ADOPT_INDEX = "agui:adoptable"  # sorted set: [thread key, run id] of adoptable live runs, scored by lease end
_encoder = msgspec.json.Encoder()
PROBE_TTL_MS = 10_000
PROBE_WAIT_MS = 300  # replicated mode: how long the readiness probe waits for its replicas
CLUSTER_SLOTS = 16384
SLOT_WAIT_SECONDS = 5.0  # how long a command may wait for a free connection before the store counts as unavailable
REPLICA_WAIT_MS = 1000  # --redis-durability replicated: how long a write waits for its replicas' acknowledgement
CLUSTER_MOVES = (ClusterError, TryAgainError, AskError, MovedError, ClusterDownError, SlotNotCoveredError)
CLUSTER_RETRY_SECONDS = 3.0  # a reshard's redirects and a promotion's gap: within an admission's budget
ADMIT_TRIES = 3  # an admission whose reply was lost is tried again this many times in all, with the same nonce
POOL_HEADROOM = 8  # pooled connections beyond the gate (the pool itself never refuses)
LIST_SUBSCRIBE_WAIT = 5.0  # how long a new watcher of a thread list waits for the list channel's subscription
ADOPT_WINDOW_LEASES = 3  # an adoptable run whose lease ran out waits this many lease lifetimes for an adopter
T = TypeVar("T")


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
        wire: bool = True,
    ) -> None:
        self.url = url
        self._cluster = urlparse(url).scheme in CLUSTER_SCHEMES
        self.min_replicas = min_replicas  # 0: asynchronous replication (a failover can lose acknowledged writes)
        self.lease_seconds = lease_seconds
        self._retention_ms = int(retention_seconds * 1000)
        self.owner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Commands on pooled connections wait for one of `max_connections` slots (at most SLOT_WAIT_SECONDS) instead
        # of failing when every one is busy: load alone never turns into STATE_PERSISTENCE_FAILED.
        self._slots = asyncio.Semaphore(max_connections)
        self.client = connect(url, max_connections=max_connections + WIRE_CONNECTIONS + POOL_HEADROOM)
        bounds = {
            "MAX_RUNS": MAX_RUN_RECORDS,
            "MAX_HISTORY": MAX_HISTORY,
            "MAX_ANSWERED": MAX_ANSWERED_IDS,
            "RETENTION_MS": int(retention_seconds * 1000),
            "LEASE_SECONDS": float(lease_seconds),
            "RESTART_WINDOW": RESTART_WINDOW_SECONDS,
            "ADOPT_WINDOW": float(lease_seconds * ADOPT_WINDOW_LEASES),
            "QUEUE_TICKET_SECONDS": QUEUE_TICKET_SECONDS,
        }
        self.scripts = {name: self.client.register_script(script_source(name, bounds)) for name in SCRIPTS}
        # The scripts' short way to a pooled connection (not to a cluster's several, nor with the annex's part off).
        self._wire = Wire(self.client) if wire and not self._cluster else None
        self._cancels = ChannelListener(url, cancel_channel(self.owner_id), self._cluster)
        self._lists = ChannelListener(url, LIST_CHANNEL, self._cluster)  # started by the first watcher of a list
        sentinel = urlparse(url).scheme in SENTINEL_SCHEMES
        self._failover = FailoverWatch(url, self.client, self._drop_connections) if sentinel else None
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

    async def _command(self, operation: Callable[[], Awaitable[T]], *, pooled: bool = True) -> T:
        """One command through the gate: wait while a Sentinel failover is under way and, when it takes a pooled
        connection (`pooled`), for a free slot (both bounded); run it; Redis errors become StoreUnavailable."""
        failover = self._failover
        if failover is not None and not failover.writes_open.is_set():  # state and event-log writes alike must
            await failover.writes_reopened()  # reach the new master
        slots = self._slots if pooled else None
        if slots is not None:
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
            raise unavailable(exc) from None
        except (AttributeError, OSError) as exc:
            # redis-py on a connection torn down under it (a pool dropped during a failover): its socket is gone,
            # and the command may not have run. Retryable, like a lost connection, never an internal error.
            log.debug("redis command on a torn connection", exc_info=True)
            raise StoreUnavailable(f"redis: connection lost ({type(exc).__name__})", retryable=True) from None
        finally:
            if slots is not None:
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

    async def _call(self, name: str, key: str, argument: Any, extra_keys: tuple[str, ...] = (), extra_args: tuple[bytes, ...] = ()) -> Any:
        script, args, keys = self.scripts[name], [_encoder.encode(argument), *extra_args], [key, *extra_keys]
        if self.min_replicas and name in DURABLE_SCRIPTS:
            return await self._command(lambda: self._replicated(script, keys, args))
        return await self._script(script, keys, args)

    async def _script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """A script through the gate: on the wire where there is one, which holds its one connection outside the
        slots (its callers share it, pipelined: a slot apiece would only queue them behind one another); else,
        and when the server lost the script (redis-py loads it: every caller at once after a restart), on a
        pooled connection, in a slot."""
        wire = self._wire
        if wire is not None:
            reply = await self._command(lambda: wire.script(script, keys, args), pooled=False)
            if reply is not SCRIPT_LOST:
                return reply
        return await self._command(lambda: script(keys=keys, args=args))

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

    async def _run(
        self, name: str, thread_id: str, argument: Any, extra_keys: tuple[str, ...] = (), extra_args: tuple[bytes, ...] = ()
    ) -> dict[str, Any]:
        """One script, one round trip; a refusal in the reply becomes Rejected."""
        return reply(await self._call(name, thread_key(thread_id), argument, extra_keys, extra_args))

    @staticmethod
    def _history_call(thread_id: str, history: HistoryWrite | None) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
        """The keys and arguments a finish or an interrupt adds to write the conversation in the same script."""
        if history is None:
            return (), ()
        rollback = history.rollback or ()
        return history_keys(thread_key(thread_id)), (history.conversation, history.summary, *rollback)

    async def now(self) -> float:
        seconds, micros = await self._command(self.client.time)
        return float(seconds) + float(micros) / 1_000_000

    async def admit(self, a: Admission) -> AdmitResult:
        """Tried up to ADMIT_TRIES times when the connection fails or times out (the script may or may not have
        run): the nonce makes a repeated try return the grant the first one made, never a second admission."""
        meta_key = self._log.meta_key(LogRef(a.thread_id, a.run_id))
        kept: ThreadHistory | None = None
        for attempt in range(ADMIT_TRIES):
            try:
                together = await self._admit_with_history(a, meta_key) if a.history_scope is not None else None
                if together is not None:
                    result, kept = together
                else:
                    result = await self._run("admit", a.thread_id, a, (meta_key,))  # encoded field by field, as asdict would
                break
            except StoreUnavailable as exc:
                if not exc.retryable or attempt == ADMIT_TRIES - 1:
                    raise
                log.warning("admission of run %s not confirmed (%s); trying again with the same nonce", a.run_id, exc)
                await asyncio.sleep(0.1 * 2**attempt)
        if result.get("queued"):
            owner = result.get("stop_owner")
            return AdmitResult(
                None,
                [],
                queued=int(result["queued"]),
                stop_owner=owner if isinstance(owner, str) else None,
                stop_execution=result.get("stop_execution") or "",
            )
        history = [e for e in (execution_of(raw) for raw in as_list(result.get("history"))) if e is not None]
        expired = execution_of(result.get("expired"))
        return AdmitResult(execution_of(result.get("execution")), history, expired, int(result["fence"]), kept)

    async def _admit_with_history(self, a: Admission, meta_key: str) -> tuple[dict[str, Any], ThreadHistory | None] | None:
        """The admission and `open_history`'s commands in one exchange on the wire (a run that keeps its thread's
        conversation then waits for no read of its own); None where there is no wire, durability is replicated (the
        admission waits for its replicas on its own) or the server lost the script (the ordinary call loads it)."""
        wire, scope = self._wire, a.history_scope
        if wire is None or self.min_replicas or scope is None:
            return None
        commands = [evalsha(self.scripts["admit"], [thread_key(a.thread_id), meta_key], [_encoder.encode(a)])]
        commands.extend(self._opening_commands(a.thread_id, scope, time.time()))
        admitted, found, *_ = await self._command(lambda: wire.exchange(commands), pooled=False)
        if isinstance(admitted, NoScriptError):
            return None
        if isinstance(admitted, RedisError):
            raise unavailable(admitted)
        result = reply(admitted)  # a refusal is raised here, as `_run` raises it
        return result, (None if isinstance(found, RedisError) else ThreadHistory(*found))

    async def accept_resume(self, lease: Lease, applied: dict[str, str]) -> None:
        await self._run("accept_resume", lease.thread_id, {"lease": lease_argument(lease), "applied": applied})

    async def save_interrupt(
        self,
        lease: Lease,
        pending: list[PendingInterrupt],
        *,
        checkpoint: Any,
        open_steps: list[str],
        progress: Progress,
        history: HistoryWrite | None = None,
    ) -> None:
        argument = {
            "lease": lease_argument(lease),
            "pending": pending_argument(pending),
            "checkpoint": json.dumps(checkpoint),
            "open_steps": open_steps,
            "progress": progress_argument(progress),
        }
        await self._run("save_interrupt", lease.thread_id, argument, *self._history_call(lease.thread_id, history))
        await self._listed(lease.thread_id, history)

    async def finish_run(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, history: HistoryWrite | None = None
    ) -> None:
        argument = {"lease": lease_argument(lease), "status": status, "progress": progress_argument(progress)}
        result = await self._run("finish_run", lease.thread_id, argument, *self._history_call(lease.thread_id, history))
        if result.get("ok"):
            await self._listed(lease.thread_id, history)
            await self._wake_next(lease.thread_id, result.get("next"))

    async def _wake_next(self, thread_id: str, owner: Any) -> None:
        """Wake the replica whose queued run is next on the thread (its own end wakes this replica's in process)."""
        if isinstance(owner, str) and owner != self.owner_id:
            await self.notify_cancel(owner, thread_id, "")

    def _list_commands(self, thread_id: str, history: HistoryWrite) -> list[tuple[Any, ...]]:
        """After a thread's conversation was written: its place in its list (newest), and the message to the list's
        watchers. A list is a view beside the threads (on a Cluster it lives on another slot)."""
        key = list_key(history.scope)
        return [
            ("ZADD", key, repr(time.time()), thread_id),
            ("PEXPIRE", key, self._retention_ms),
            ("SPUBLISH" if self._cluster else "PUBLISH", LIST_CHANNEL, list_message(history.scope, thread_id)),
        ]

    async def _listed(self, thread_id: str, history: HistoryWrite | None) -> None:
        """`_list_commands` in one pipeline; a failure only leaves the thread where it was listed."""
        if history is None:
            return

        wire = self._wire
        if wire is not None:  # packed on the wire: redis-py's pipeline cost more than the finish itself
            try:
                await self._command(
                    lambda: wire.exchange([pack(*command) for command in self._list_commands(thread_id, history)]), pooled=False
                )
            except StoreUnavailable as exc:
                log.warning("thread list not updated (%s)", exc)
            return

        async def send() -> None:
            if self._cluster:  # each command to the node of its own key or channel
                for command in self._list_commands(thread_id, history):
                    await self.client.execute_command(*command)
                return
            async with self.client.pipeline(transaction=False) as pipe:
                for command in self._list_commands(thread_id, history):
                    pipe.execute_command(*command)
                await pipe.execute()

        try:
            await self._command(send)
        except StoreUnavailable as exc:
            log.warning("thread list not updated (%s)", exc)

    async def finish_run_and_log(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, log: LogWrite, history: HistoryWrite | None = None
    ) -> Exception | None:
        """The finish script and the run's last log write pipelined: one round trip for both (the end of a short
        run). Replicated durability keeps them apart (the finish waits for its replicas on its own), and so does
        a Cluster (its pipelines route command by command)."""
        wire = self._wire
        if self.min_replicas or wire is None:
            return await super().finish_run_and_log(lease, status, progress, log, history)
        argument = _encoder.encode({"lease": lease_argument(lease), "status": status, "progress": progress_argument(progress)})
        log_keys, log_args = self._log.script_call(log)
        extra_keys, extra_args = self._history_call(lease.thread_id, history)
        commands = [
            evalsha(self.scripts["finish_run"], [thread_key(lease.thread_id), *extra_keys], [argument, *extra_args]),
            evalsha(self._log.append_script, log_keys, log_args),
        ]
        if history is not None:  # the thread's list and its watchers, in the same round trip
            commands.extend(pack(*command) for command in self._list_commands(lease.thread_id, history))
        finished, logged, *_ = await self._command(lambda: wire.exchange(commands), pooled=False)
        if isinstance(finished, NoScriptError) or isinstance(logged, NoScriptError):
            # The scripts are not loaded (a restarted or flushed Redis): the ordinary calls load them. The finish
            # is fenced, so running it again after it landed changes nothing.
            return await super().finish_run_and_log(lease, status, progress, log, history)
        if isinstance(finished, RedisError):
            raise unavailable(finished)
        await self._wake_next(lease.thread_id, reply(finished).get("next"))
        if isinstance(logged, RedisError):
            return unavailable(logged)
        if logged == -1:
            return LogFenced(f"run {log.ref.run_id}: a newer owner writes this log")
        return None

    # -- conversations and the thread list -------------------------------------------------------------------
    async def read_history(self, thread_id: str, *, conversation: bool = True) -> ThreadHistory:
        conv, summary, meta = history_keys(thread_key(thread_id))
        if conversation:
            found = await self._command(lambda: self.client.mget([conv, summary, meta]))
            return ThreadHistory(*found)
        found = await self._command(lambda: self.client.mget([summary, meta]))
        return ThreadHistory(None, *found)

    async def open_history(self, thread_id: str, scope: str, at: float) -> ThreadHistory:
        """One round trip on the wire: the history read, the thread added to its list if it is not there (ZADD NX),
        and its watchers told that a run starts. Elsewhere (a Cluster, where the list is on another slot) in steps."""
        wire = self._wire
        if wire is None:
            return await super().open_history(thread_id, scope, at)
        commands = self._opening_commands(thread_id, scope, at)
        found, *_ = await self._command(lambda: wire.exchange(commands), pooled=False)
        if isinstance(found, RedisError):
            raise unavailable(found)
        return ThreadHistory(*found)

    def _opening_commands(self, thread_id: str, scope: str, at: float) -> list[bytes]:
        """A run's start on a thread that keeps its conversation: read its history, list it if new, tell the list."""
        key = list_key(scope)
        return [
            pack("MGET", *history_keys(thread_key(thread_id))),
            pack("ZADD", key, "NX", repr(at), thread_id),  # the finish refreshes the list's lifetime
            pack("PUBLISH", LIST_CHANNEL, list_message(scope, thread_id)),
        ]

    async def write_meta(self, thread_id: str, meta: bytes) -> bool:
        state = thread_key(thread_id)
        ttl = int(await self._command(lambda: self.client.pttl(state)))  # -2: no such thread; -1: one without expiry
        if ttl == -2:
            return False
        ttl = max(ttl, 1000) if ttl > 0 else self._retention_ms
        await self._command(lambda: self.client.set(history_keys(state)[2], meta, px=ttl))
        return True

    async def index_thread(self, scope: str, thread_id: str, at: float) -> None:
        key = list_key(scope)

        async def add() -> None:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zadd(key, {thread_id: at}, nx=True)  # a thread already listed keeps its place
                pipe.pexpire(key, self._retention_ms)
                await pipe.execute()

        await self._command(add)

    async def list_threads(self, scope: str, before: tuple[float, str] | None, limit: int) -> list[tuple[str, float]]:
        key, found = list_key(scope), list[tuple[str, float]]()
        top: float | str = "+inf" if before is None else before[0]
        offset = 0
        while len(found) < limit:
            page = await self._command(
                lambda at=offset: self.client.zrevrangebyscore(key, top, "-inf", start=at, num=limit + 16, withscores=True)  # type: ignore[misc]
            )
            if not page:
                break
            offset += len(page)
            for member, score in page:
                name = member.decode() if isinstance(member, bytes) else str(member)
                if before is None or (float(score), name) < before:
                    found.append((name, float(score)))
        return found[:limit]

    async def delete_thread(self, thread_id: str, scope: str, run_ids: list[str]) -> None:
        state = thread_key(thread_id)
        keys = [state, *history_keys(state)]
        for run_id in run_ids:
            keys.extend(self._log.keys_of(LogRef(thread_id, run_id)))
        await self._command(lambda: self.client.delete(*keys))  # one hash tag: one slot, one command
        await self._command(lambda: self.client.zrem(list_key(scope), thread_id))

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, user_id: str | None = None) -> CancelResult:
        argument = {"execution_id": execution_id, "ros_invocation_id": ros_invocation_id, "user_id": user_id}
        result = await self._run("cancel", thread_id, argument)
        owner = result.get("owner")
        return CancelResult(
            CancelStatus(result["status"]), owner if isinstance(owner, str) else None, execution_of(result.get("execution"))
        )

    async def stop(self, thread_id: str, run_id: str | None, user_id: str | None) -> StopResult:
        result = await self._run("stop", thread_id, {"run_id": run_id, "user_id": user_id})
        owner = result.get("owner")
        owner = owner if isinstance(owner, str) else None
        return StopResult(CancelStatus(result["status"]), owner, result.get("execution_id") or "", execution_of(result.get("execution")))

    async def leave_queue(self, thread_id: str, run_id: str) -> None:
        await self._run("leave_queue", thread_id, {"run_id": run_id})

    async def renew(self, lease: Lease) -> RenewResult:
        result = await self._run("renew", lease.thread_id, {"lease": lease_argument(lease)})
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
            "mark_adoptable", lease.thread_id, {"lease": lease_argument(lease), "record": json.dumps(record), "handoff": handoff}
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

    async def adopt(self, thread_id: str, run_id: str, agents: Collection[str] | None = None) -> Adopted | None:
        asked = {"owner": self.owner_id, "run_id": run_id, "agents": None if agents is None else sorted(agents)}
        result = await self._run("adopt", thread_id, asked)
        if result["status"] == "foreign":  # left in the index for a replica that declares its agent
            log.debug("run %s is the agent %r's, not declared here: left to a replica that declares it", run_id, result["agent"])
            return None
        if result["status"] == "gone":
            member = json.dumps([thread_id, run_id])
            await self._command(lambda: self.client.zrem(ADOPT_INDEX, member))
            return None
        await self._index(thread_id, run_id, float(result["until"]))  # held by its owner, or now by us: its lease end
        if result["status"] == "held":
            return None
        lease = Lease(thread_id, run_id, str(result["execution_id"]), int(result["fence"]))
        return Adopted(lease, json.loads(result["record"]), execution_of(result.get("execution")))

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
        """Wake the owner at once; if this message is lost its renewal timer still sees the durable intent. An empty
        `execution_id` wakes the thread's queued runs there instead."""
        try:
            message, channel = cancel_message(thread_id, execution_id), cancel_channel(owner)
            publish = self.client.spublish if self._cluster else self.client.publish  # Cluster: sharded pub/sub
            await self._command(lambda: publish(channel, message))
        except StoreUnavailable:
            log.warning("cancel wake-up not published; the owner will see the intent on its next renewal")

    async def listen_for_cancels(self, on_cancel: Callable[[str, str], None]) -> None:
        self._cancels.start(on_cancel)
        if self._failover is not None:
            self._failover.start()

    async def thread_changed(self, scope: str, thread_id: str, deleted: bool = False) -> None:
        """Published to every replica (the ones whose clients watch `scope`'s list tell them); a failure is logged."""
        try:
            message = list_message(scope, thread_id, deleted)
            publish = self.client.spublish if self._cluster else self.client.publish
            await self._command(lambda: publish(LIST_CHANNEL, message))
        except StoreUnavailable:
            log.warning("a thread list's change was not published; its watchers see it with the next one")

    async def threads_watched(self) -> None:
        """Once the list channel's subscription is confirmed (at most LIST_SUBSCRIBE_WAIT seconds: a watcher then hears
        what comes after it is back)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LIST_SUBSCRIBE_WAIT):
                await self._lists.subscribed.wait()

    def watch_threads(self, scope: str, on_change: Callable[[str, bool], None]) -> Callable[[], None]:
        if not self._lists.started:
            self._lists.start(self.list_changed)
        return super().watch_threads(scope, on_change)

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
        await self._cancels.close()
        await self._lists.close()
        if self._failover is not None:
            self._failover.stop()
        try:
            await self.client.aclose()
        except Exception:  # noqa: BLE001
            pass
