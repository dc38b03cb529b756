"""The store seam's contract, run against every backend: admission, interrupts, cancel, expiry, fencing, retention."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import pytest

from store import Admission, PendingInterrupt, Rejected, StoreUnavailable, open_store
from store.file import FileStore, thread_file_name
from store.redis import RedisStore, thread_key

BACKENDS = ["memory", "file", "redis"]


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    spec = request.param
    if spec == "redis":
        server = request.getfixturevalue("redis_server")
        spec = server.url
        import redis

        redis.Redis(port=server.port).flushdb()
    backend = open_store(spec, state_dir=str(tmp_path / "state"), retention_seconds=3600)
    yield backend
    await backend.close()


def admission(store, thread="t1", run="r1", *, digest="d1", cwd="/w", user=None, resume=False, execution="e1", now=1000.0, owner=None, lease=30.0):
    return Admission(
        thread_id=thread, run_id=run, digest=digest, cwd=cwd, user_id=user, ros_invocation_id="inv",
        is_resume=resume, new_execution_id=execution, owner=owner or store.owner_id, now=now, lease_seconds=lease,
    )


def pending(interrupt_id="i1", expires=None):
    return [PendingInterrupt(id=interrupt_id, reason="tool_call", wire={"id": interrupt_id}, expires_at=expires)]


async def interrupt(store, thread="t1", run="r1", execution="e1", expires=None, now=1000.0):
    fence = (await store.admit(admission(store, thread, run, execution=execution, now=now))).fence
    await store.save_interrupt(thread, run, execution, pending(expires=expires), checkpoint={"k": 1}, open_steps=["s"], sequence=3, identities={}, now=now, fence=fence)


async def rejected(coro) -> str:
    with pytest.raises(Rejected) as caught:
        await coro
    return caught.value.code


async def test_admission_rules(store):
    first = await store.admit(admission(store, user="alice"))
    assert first.execution.execution_id == "e1" and first.execution.status == "running"
    assert await rejected(store.admit(admission(store, run="r1", user="alice"))) == "DUPLICATE_RUN_ID"
    assert await rejected(store.admit(admission(store, run="r1", digest="other", user="alice"))) == "RUN_ID_CONFLICT"
    assert await rejected(store.admit(admission(store, run="r2", user="alice"))) == "THREAD_BUSY"
    assert await rejected(store.admit(admission(store, run="r2", cwd="/elsewhere", user="alice"))) == "THREAD_BINDING_CONFLICT"
    assert await rejected(store.admit(admission(store, run="r2", user="bob"))) == "THREAD_BINDING_CONFLICT"
    await store.finish_run("t1", "r1", "e1", "completed", sequence=0, identities={}, now=1001, fence=first.fence)
    second = await store.admit(admission(store, run="r2", user="alice", execution="e2"))
    assert second.execution.execution_id == "e2" and second.fence == first.fence + 1
    assert [e.execution_id for e in second.history] == ["e1"] and second.history[0].status == "completed"


async def test_interrupt_then_resume_accepts_and_records_answers(store):
    await interrupt(store)
    assert await rejected(store.admit(admission(store, run="r2", execution="e2"))) == "RESUME_REQUIRED"
    resumed = await store.admit(admission(store, run="r2", resume=True))
    assert resumed.execution.status == "interrupted" and [p.id for p in resumed.execution.pending] == ["i1"]
    assert resumed.execution.pending[0].wire == {"id": "i1"}
    assert resumed.execution.checkpoint == {"k": 1} and resumed.execution.open_steps == ["s"] and resumed.execution.sequence == 3
    await store.accept_resume("t1", "r2", "e1", {"i1": "digest"}, 1002, fence=resumed.fence)
    await store.finish_run("t1", "r2", "e1", "completed", sequence=5, identities={"taskId": "task"}, now=1003, fence=resumed.fence)
    after = await store.admit(admission(store, run="r3", execution="e3"))
    done = after.history[-1]
    assert done.applied == {"i1": "digest"} and done.task_id == "task" and done.pending == [] and done.checkpoint is None
    assert done.answered_ids == ["i1"] and done.sequence == 5


async def test_interrupt_schemas_with_empty_arrays_survive(store):
    """JSON Schemas and checkpoints are opaque: empty arrays and nested objects come back exactly."""
    schema = {"type": "object", "required": [], "properties": {"x": {"enum": ["a"], "items": []}}}
    checkpoint = {"list": [], "map": {}, "deep": [{"k": []}]}
    first = await store.admit(admission(store))
    item = PendingInterrupt(id="i1", reason="q", wire={"id": "i1", "responseSchema": schema}, response_schema=schema)
    await store.save_interrupt("t1", "r1", "e1", [item], checkpoint=checkpoint, open_steps=[], sequence=0, identities={}, now=1000, fence=first.fence)
    resumed = await store.admit(admission(store, run="r2", resume=True))
    assert resumed.execution.pending[0].response_schema == schema and resumed.execution.pending[0].wire["responseSchema"] == schema
    assert resumed.execution.checkpoint == checkpoint and resumed.execution.open_steps == []


async def test_a_failed_resume_keeps_the_interrupt(store):
    await interrupt(store)
    resumed = await store.admit(admission(store, run="r2", resume=True))
    await store.finish_run("t1", "r2", "e1", None, sequence=3, identities={}, now=1001, fence=resumed.fence)
    again = await store.admit(admission(store, run="r3", resume=True))
    assert [p.id for p in again.execution.pending] == ["i1"]


async def test_expiry_on_next_access(store):
    await interrupt(store, expires=1010.0)
    result = await store.admit(admission(store, run="r2", execution="e2", now=1011.0))
    assert result.expired is not None and result.expired.execution_id == "e1" and result.expired.checkpoint == {"k": 1}
    assert result.history[-1].status == "expired" and result.history[-1].answered_ids == ["i1"]
    assert result.execution.execution_id == "e2"


async def test_cancel_paths(store):
    assert (await store.cancel("nobody", "e1", "inv", 1000)).status == "not_found"
    first = await store.admit(admission(store))
    assert (await store.cancel("t1", "e1", "wrong", 1000)).status == "not_found"
    running = await store.cancel("t1", "e1", "inv", 1000)
    assert running.status == "cancelled" and running.running_owner == store.owner_id
    assert await store.is_cancel_requested("t1", "e1")
    renewed = await store.renew("t1", "r1", first.fence)
    assert renewed.ok
    if store.needs_renewal:
        assert renewed.cancel_requested, "the renewal timer sees the durable cancel intent"
    # The cancel intent wins over a late interrupt.
    assert await rejected(store.save_interrupt("t1", "r1", "e1", pending(), checkpoint=None, open_steps=[], sequence=0, identities={}, now=1001, fence=first.fence)) == "CANCELLED"
    await store.finish_run("t1", "r1", "e1", "cancelled", sequence=0, identities={}, now=1001, fence=first.fence)
    assert (await store.cancel("t1", "e1", "inv", 1002)).status == "already_terminal"
    await interrupt(store, run="r2", execution="e2")
    waiting = await store.cancel("t1", "e2", "inv", 1003)
    assert waiting.status == "cancelled" and waiting.execution.checkpoint == {"k": 1}
    # Nothing pending any more: a normal turn is accepted.
    assert (await store.admit(admission(store, run="r3", execution="e3"))).execution.execution_id == "e3"


async def test_a_dead_owner_loses_its_lease_and_cannot_write(store):
    stale = await store.admit(admission(store, owner="proc-dead", lease=0.2))
    await asyncio.sleep(0.3)
    result = await store.admit(admission(store, run="r2", execution="e2", now=1001))
    assert result.lost is not None and result.lost.execution_id == "e1"
    assert (await store.cancel("t1", "e1", "inv", 1002)).status == "lost"
    # The former owner's writes are fenced off, its renewals refused.
    assert await rejected(store.save_interrupt("t1", "r1", "e1", pending(), checkpoint=None, open_steps=[], sequence=0, identities={}, now=1003, fence=stale.fence)) == "EXECUTION_LOST"
    assert not (await store.renew("t1", "r1", stale.fence)).ok or not store.needs_renewal
    await store.finish_run("t1", "r1", "e1", "completed", sequence=0, identities={}, now=1003, fence=stale.fence)
    assert await rejected(store.admit(admission(store, run="r3", execution="e3", now=1004))) == "THREAD_BUSY"


async def test_retention_removes_old_state(store):
    first = await store.admit(admission(store, now=1000.0))
    await store.finish_run("t1", "r1", "e1", "completed", sequence=0, identities={}, now=1000.0, fence=first.fence)
    if isinstance(store, RedisStore):
        ttl = await store.client.pttl(thread_key("t1"))
        assert 0 < ttl <= 3600 * 1000, "every Redis key carries the retention as its TTL"
        return
    if isinstance(store, FileStore):
        path = os.path.join(store.threads_dir, thread_file_name("t1"))
        os.utime(path, (1000.0, 1000.0))
    assert await store.purge_expired(1000.0 + 3600 + 1) == 1
    fresh = await store.admit(admission(store, run="r1", execution="e9", now=9000.0))
    assert fresh.history == [], "the old thread state is gone (run ids forgotten)"


async def test_tickets_are_single_use_and_expire(store):
    await store.put_ticket("d1", time.time() + 30)
    assert await store.take_ticket("d1", time.time())
    assert not await store.take_ticket("d1", time.time())
    await store.put_ticket("d2", time.time() + 0.2)
    await asyncio.sleep(0.3)
    assert not await store.take_ticket("d2", time.time())


@pytest.mark.parametrize("thread_id", ["../../etc/passwd", "CON", "a/b\\c:d", "x" * 5000, "\u00e9\u4e2d\U0001f600", ".", ""])
def test_file_names_are_safe_and_bounded(thread_id):
    name = thread_file_name(thread_id)
    assert "/" not in name and "\\" not in name and ".." not in name and len(name) <= 120
    assert name.startswith("t-") and name.endswith(".json")


async def test_file_store_permissions_and_corruption(tmp_path):
    store = FileStore(str(tmp_path / "state"), retention_seconds=3600)
    await store.admit(admission(store, thread="good"))
    await store.admit(admission(store, thread="bad"))
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.threads_dir).st_mode) == 0o700
    for name in os.listdir(store.threads_dir):
        assert stat.S_IMODE(os.stat(os.path.join(store.threads_dir, name)).st_mode) == 0o600
    with open(os.path.join(store.threads_dir, thread_file_name("bad")), "w") as handle:
        handle.write("[]")
    with pytest.raises(StoreUnavailable):
        await store.admit(admission(store, thread="bad", run="r2"))
    await store.finish_run("good", "r1", "e1", "completed", sequence=0, identities={}, now=1001, fence=1)
    assert not [n for n in os.listdir(store.threads_dir) if n.endswith(".tmp")]
