"""Python rules (memory store) and Lua scripts (Redis) run one scenario list and must leave the same document.

Timestamps and owner ids differ by nature (fake clock vs the Redis server's clock, process ids) and are left
out of the comparison; everything else, including which run records and executions were trimmed, must match."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from store import Admission, Lease, PendingInterrupt, Progress, Rejected, Rejection
from store.limits import MAX_ANSWERED_IDS, MAX_HISTORY, MAX_RUN_RECORDS
from store.memory import MemoryStore
from store.redis import RedisStore
from tests.unit.clock import FakeClock

pytestmark = pytest.mark.redis

TIME_FIELDS = {"updated_at", "created_at", "at", "started_at", "lease_until", "expires_at", "owner", "until"}
LIST_FIELDS = {"pending", "answered_ids", "open_steps", "history", "queue"}
OPAQUE_FIELDS = {"wire", "response_schema", "checkpoint"}
Advance = Callable[[float], Awaitable[None]]


def normalise(value: Any, key: str | None = None) -> Any:
    """One shape for both documents: opaque JSON strings decoded, cjson's {} read as [] where a list belongs."""
    if key in OPAQUE_FIELDS and isinstance(value, str):
        value = json.loads(value)
    if key in LIST_FIELDS and value == {}:
        return []
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in sorted(value.items()) if k not in TIME_FIELDS}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def admission(store, run: str, execution: str, resume: bool = False) -> Admission:
    return Admission("t", run, f"d-{run}", "/w", "alice", "inv", resume, execution, store.owner_id)


async def turn(store, run: str, execution: str) -> None:
    admitted = await store.admit(admission(store, run, execution))
    await store.finish_run(Lease("t", run, execution, admitted.fence), "completed", Progress(1, {"taskId": f"task-{run}"}))


async def interrupt(store, run: str, execution: str, ids: list[str], expires: float | None = None) -> Lease:
    admitted = await store.admit(admission(store, run, execution))
    lease = Lease("t", run, execution, admitted.fence)
    schema = {"type": "object", "required": [], "properties": {}}
    pending = [PendingInterrupt(i, "tool_call", {"id": i, "items": []}, schema, f"call-{i}", expires) for i in ids]
    await store.save_interrupt(
        lease, pending, checkpoint={"steps": [], "k": 1}, open_steps=["plan"], progress=Progress(4, {"sessionId": "s"})
    )
    return lease


async def many_runs_and_executions(store, advance: Advance) -> None:
    for index in range(MAX_RUN_RECORDS + 20):
        await turn(store, f"r{index:04d}", f"e{index % (MAX_HISTORY + 5)}-{index}")


async def interrupt_resume_and_cancel(store, advance: Advance) -> None:
    await interrupt(store, "r1", "e1", ["i1", "i2"])
    resumed = await store.admit(admission(store, "r2", "e1", resume=True))
    lease = Lease("t", "r2", "e1", resumed.fence)
    await store.accept_resume(lease, {"i1": "a", "i2": "b"})
    await store.finish_run(lease, "completed", Progress(9, {"contextId": "ctx"}))
    await interrupt(store, "r3", "e3", [f"x{n}" for n in range(MAX_ANSWERED_IDS + 6)])
    assert (await store.cancel("t", "e3", "inv")).status.value == "not_found", "another userId is refused"
    await store.cancel("t", "e3", "inv", "alice")
    running = await store.admit(admission(store, "r4", "e4"))
    await store.cancel("t", "e4", "inv", "alice")
    await store.finish_run(Lease("t", "r4", "e4", running.fence), "cancelled", Progress(0, {}))


async def expiry_and_lost_lease(store, advance: Advance) -> None:
    await interrupt(store, "r1", "e1", ["i1"], expires=await store.now() + 0.2)
    await advance(0.4)
    await store.admit(admission(store, "r2", "e2"))  # expires e1; its lease then runs out (0.3 s)
    await advance(0.4)
    await store.admit(admission(store, "r3", "e3"))  # e2 is lost, r3 holds the lease


async def retried_and_unstarted_admissions(store, advance: Advance) -> None:
    tried = msgspec.structs.replace(admission(store, "r1", "e1"), nonce="n1", restart_unstarted=True)
    first = await store.admit(tried)
    assert (await store.admit(tried)).fence == first.fence  # the same try again: the grant it made, nothing new
    retry = msgspec.structs.replace(tried, nonce="n2", new_execution_id="e2")  # the client's retry after a lost answer
    with pytest.raises(Rejected) as busy:
        await store.admit(retry)
    assert busy.value.reason is Rejection.THREAD_BUSY  # the orphaned lease still holds the thread
    await advance(0.4)  # it runs out
    assert (await store.admit(retry)).fence == first.fence + 1  # never started: admitted again
    with pytest.raises(Rejected) as duplicate:
        await store.admit(msgspec.structs.replace(retry, nonce="n3", restart_unstarted=False))
    assert duplicate.value.reason is Rejection.DUPLICATE_RUN_ID


def queued(store, run: str, execution: str, multitask: str = "enqueue", *, waiting: bool = False) -> Admission:
    return msgspec.structs.replace(admission(store, run, execution), multitask=multitask, max_queued=2, waiting=waiting)


async def refused(store, asked: Admission) -> Rejection:
    with pytest.raises(Rejected) as refusal:
        await store.admit(asked)
    return refusal.value.reason


async def queue_stop_and_rollback(store, advance: Advance) -> None:
    first = await store.admit(admission(store, "r1", "e1"))
    assert (await store.admit(queued(store, "r2", "e2"))).queued == 1
    rollback = await store.admit(queued(store, "r3", "e3", "rollback"))
    assert (rollback.queued, rollback.stop_execution) == (1, "e1"), "a rollback run goes first and stops the active run"
    assert await refused(store, queued(store, "r4", "e4")) is Rejection.THREAD_BUSY, "two wait already"
    assert await refused(store, admission(store, "r5", "e5")) is Rejection.THREAD_BUSY
    assert (await store.admit(queued(store, "r2", "e2", waiting=True))).queued == 2
    await store.finish_run(Lease("t", "r1", "e1", first.fence), "cancelled", Progress(0, {}))
    turn = await store.admit(queued(store, "r3", "e3", "rollback", waiting=True))
    assert (turn.queued, turn.fence) == (0, first.fence + 1), "the rollback run's turn"
    assert (await store.stop("t", "r2", "alice")).status.value == "cancelled", "a queued run named leaves the queue"
    assert await refused(store, queued(store, "r2", "e2", waiting=True)) is Rejection.DEQUEUED
    assert (await store.stop("t", "r1", "alice")).status.value == "already_terminal"
    assert (await store.stop("t", "nobody", "alice")).status.value == "not_running"
    assert (await store.stop("t", None, "bob")).status.value == "not_found"
    stopped = await store.stop("t", None, "alice")
    assert (stopped.status.value, stopped.execution_id) == ("cancelled", "e3")
    await store.finish_run(Lease("t", "r3", "e3", turn.fence), "cancelled", Progress(0, {}))
    assert (await store.stop("t", None, "alice")).status.value == "not_running"
    await interrupt(store, "r6", "e6", ["i1"])
    assert await refused(store, queued(store, "r7", "e7")) is Rejection.RESUME_REQUIRED
    assert (await store.stop("t", "r3", "alice")).status.value == "already_terminal"
    assert (await store.stop("t", "r6", "alice")).status.value == "cancelled", "the run that interrupted: its interrupts end"
    await store.admit(admission(store, "r8", "e8"))
    await store.admit(queued(store, "r9", "e9"))
    await store.leave_queue("t", "r9")


async def a_thread_keeps_its_agent(store, advance: Advance) -> None:
    research = msgspec.structs.replace(admission(store, "r1", "e1"), agent="research")
    first = await store.admit(research)
    await store.finish_run(Lease("t", "r1", "e1", first.fence), "completed", Progress(1, {}))
    assert await refused(store, admission(store, "r2", "e2")) is Rejection.THREAD_BINDING_CONFLICT, "the default agent's run"
    assert await refused(store, msgspec.structs.replace(research, run_id="r3", agent="coder")) is Rejection.THREAD_BINDING_CONFLICT
    again = await store.admit(msgspec.structs.replace(research, run_id="r4", new_execution_id="e4", digest="d-r4"))
    assert again.execution is not None and again.execution.agent == "research", "the execution names its agent"


SCENARIOS = [
    a_thread_keeps_its_agent,
    many_runs_and_executions,
    interrupt_resume_and_cancel,
    expiry_and_lost_lease,
    retried_and_unstarted_admissions,
    queue_stop_and_rollback,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_python_and_lua_leave_the_same_document(scenario, redis_server):
    import redis

    redis.Redis(port=redis_server.port).flushdb()
    clock = FakeClock()
    memory = MemoryStore(3600, clock=clock, lease_seconds=0.3)
    shared = RedisStore(redis_server.url, retention_seconds=3600, lease_seconds=0.3)

    async def advance_clock(seconds: float) -> None:
        clock.advance(seconds)

    try:
        await scenario(memory, advance_clock)
        await scenario(shared, asyncio.sleep)
        python_doc = normalise(await memory.read_document("t"))
        lua_doc = normalise(await shared.read_document("t"))
    finally:
        await shared.close()
    assert python_doc == lua_doc
    assert len(python_doc["runs"]) <= MAX_RUN_RECORDS and len(python_doc["history"]) <= MAX_HISTORY
