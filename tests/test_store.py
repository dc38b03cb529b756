"""The store seam's contract, run against every backend: admission, interrupts, cancel, expiry, fencing, retention.

Memory and file stores run on a fake clock (time is moved, never slept); Redis uses its server's clock, so its
variants wait for real, with leases and expiries of a fraction of a second."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import httpx
import pytest
from msgspec.structs import replace

import store.eventlog.segments as segments_module
import store.journal as journal_module
from store import Admission, Lease, PendingInterrupt, Progress, Rejected, Rejection, StoreUnavailable
from store.eventlog import LogMeta, LogRef, LogWrite, ref_digest
from store.file import FileStore
from store.legacy import thread_file_name
from store.memory import MemoryStore
from store.redis import RedisStore, thread_key
from tests.support import ROOT, Gateway, RedisServer, corrupt_thread, run_body, thread_state
from tests.unit.clock import FakeClock

BACKENDS = ["memory", "file", "redis"]
NO_PROGRESS = Progress(0, {})


class Backend:
    """Opens stores of one kind that share state, and moves their time."""

    def __init__(self, kind: str, tmp_path, redis_url: str | None) -> None:
        self.kind = kind
        self.clock = FakeClock()
        self.tmp_path = tmp_path
        self.redis_url = redis_url
        self.opened: list = []

    def open(self, lease_seconds: float = 30.0):
        if self.kind == "memory":
            store = self.opened[0] if self.opened else MemoryStore(3600, clock=self.clock, lease_seconds=lease_seconds)
            if self.opened:
                store.lease_seconds = lease_seconds
        elif self.kind == "file":
            store = FileStore(str(self.tmp_path / "state"), retention_seconds=3600, clock=self.clock, lease_seconds=lease_seconds)
        else:
            store = RedisStore(self.redis_url, retention_seconds=3600, lease_seconds=lease_seconds)
        self.opened.append(store)
        return store

    async def advance(self, seconds: float) -> None:
        if self.kind == "redis":
            await asyncio.sleep(seconds)
        else:
            self.clock.advance(seconds)


@pytest.fixture(params=BACKENDS)
async def backend(request, tmp_path):
    url = None
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        url = server.url
        import redis

        redis.Redis(port=server.port).flushdb()
    kit = Backend(request.param, tmp_path, url)
    yield kit
    for store in kit.opened:
        await store.close()


@pytest.fixture
def store(backend):
    return backend.open()


def admission(store, thread="t1", run="r1", *, digest="d1", cwd="/w", user=None, resume=False, execution="e1", owner=None):
    return Admission(
        thread_id=thread,
        run_id=run,
        digest=digest,
        cwd=cwd,
        user_id=user,
        ros_invocation_id="inv",
        is_resume=resume,
        new_execution_id=execution,
        owner=owner or store.owner_id,
    )


def lease(admitted, thread="t1", run="r1", execution="e1") -> Lease:
    return Lease(thread, run, execution, admitted.fence)


def pending(interrupt_id="i1", expires=None):
    return [PendingInterrupt(id=interrupt_id, reason="tool_call", wire={"id": interrupt_id}, expires_at=expires)]


async def interrupt(store, thread="t1", run="r1", execution="e1", expires=None):
    admitted = await store.admit(admission(store, thread, run, execution=execution))
    progress = Progress(3, {})
    await store.save_interrupt(
        lease(admitted, thread, run, execution), pending(expires=expires), checkpoint={"k": 1}, open_steps=["s"], progress=progress
    )


async def rejected(coro) -> Rejection:
    with pytest.raises(Rejected) as caught:
        await coro
    return caught.value.reason


async def test_admission_rules(store):
    first = await store.admit(admission(store, user="alice"))
    assert first.execution.execution_id == "e1" and first.execution.status == "running"
    assert await rejected(store.admit(admission(store, run="r1", user="alice"))) is Rejection.DUPLICATE_RUN_ID
    assert await rejected(store.admit(admission(store, run="r1", digest="other", user="alice"))) is Rejection.RUN_ID_CONFLICT
    assert await rejected(store.admit(admission(store, run="r2", user="alice"))) is Rejection.THREAD_BUSY
    assert await rejected(store.admit(admission(store, run="r2", cwd="/elsewhere", user="alice"))) is Rejection.THREAD_BINDING_CONFLICT
    assert await rejected(store.admit(admission(store, run="r2", user="bob"))) is Rejection.THREAD_BINDING_CONFLICT
    await store.finish_run(lease(first), "completed", NO_PROGRESS)
    second = await store.admit(admission(store, run="r2", user="alice", execution="e2"))
    assert second.execution.execution_id == "e2" and second.fence == first.fence + 1
    assert [e.execution_id for e in second.history] == ["e1"] and second.history[0].status == "completed"


async def test_a_request_that_names_no_workspace_never_conflicts_on_one(store):
    """A plain request binds no workspace (""): replicas with different default workspaces serve one plain thread,
    and a thread bound before keeps taking plain runs; the caller binding still holds."""
    first = await store.admit(admission(store, cwd="", user="alice"))
    await store.finish_run(lease(first), "completed", NO_PROGRESS)
    second = await store.admit(admission(store, run="r2", cwd="", user="alice", execution="e2"))
    await store.finish_run(lease(second, run="r2", execution="e2"), "completed", NO_PROGRESS)
    assert await rejected(store.admit(admission(store, run="r3", cwd="", user="bob", execution="e3"))) is Rejection.THREAD_BINDING_CONFLICT
    bound = await store.admit(admission(store, thread="t2", cwd="/w", execution="e4"))
    await store.finish_run(lease(bound, thread="t2", execution="e4"), "completed", NO_PROGRESS)
    assert (await store.admit(admission(store, thread="t2", run="r2", cwd="", execution="e5"))).execution.execution_id == "e5"


async def test_interrupt_then_resume_accepts_and_records_answers(store):
    await interrupt(store)
    assert await rejected(store.admit(admission(store, run="r2", execution="e2"))) is Rejection.RESUME_REQUIRED
    resumed = await store.admit(admission(store, run="r2", resume=True))
    assert resumed.execution.status == "interrupted" and [p.id for p in resumed.execution.pending] == ["i1"]
    assert resumed.execution.pending[0].wire == {"id": "i1"}
    assert resumed.execution.checkpoint == {"k": 1} and resumed.execution.open_steps == ["s"] and resumed.execution.sequence == 3
    await store.accept_resume(lease(resumed, run="r2"), {"i1": "digest"})
    await store.finish_run(lease(resumed, run="r2"), "completed", Progress(5, {"taskId": "task"}))
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
    await store.save_interrupt(lease(first), [item], checkpoint=checkpoint, open_steps=[], progress=NO_PROGRESS)
    resumed = await store.admit(admission(store, run="r2", resume=True))
    assert resumed.execution.pending[0].response_schema == schema and resumed.execution.pending[0].wire["responseSchema"] == schema
    assert resumed.execution.checkpoint == checkpoint and resumed.execution.open_steps == []


async def test_a_failed_resume_keeps_the_interrupt(store):
    await interrupt(store)
    resumed = await store.admit(admission(store, run="r2", resume=True))
    await store.finish_run(lease(resumed, run="r2"), None, Progress(3, {}))
    again = await store.admit(admission(store, run="r3", resume=True))
    assert [p.id for p in again.execution.pending] == ["i1"]


async def test_expiry_on_next_access(backend, store):
    await interrupt(store, expires=await store.now() + 0.2)
    await backend.advance(0.3)
    result = await store.admit(admission(store, run="r2", execution="e2"))
    assert result.expired is not None and result.expired.execution_id == "e1" and result.expired.checkpoint == {"k": 1}
    assert result.history[-1].status == "expired" and result.history[-1].answered_ids == ["i1"]
    assert result.execution.execution_id == "e2"


async def test_cancel_paths(store):
    assert (await store.cancel("nobody", "e1", "inv")).status.value == "not_found"
    first = await store.admit(admission(store))
    assert (await store.cancel("t1", "e1", "wrong")).status.value == "not_found"
    running = await store.cancel("t1", "e1", "inv")
    assert running.status.value == "cancelled" and running.running_owner == store.owner_id
    renewed = await store.renew(lease(first))
    assert renewed.ok and renewed.cancel_requested, "the renewal sees the durable cancel intent"
    # The cancel intent wins over a late interrupt.
    late = store.save_interrupt(lease(first), pending(), checkpoint=None, open_steps=[], progress=NO_PROGRESS)
    assert await rejected(late) is Rejection.CANCELLED
    await store.finish_run(lease(first), "cancelled", NO_PROGRESS)
    assert (await store.cancel("t1", "e1", "inv")).status.value == "already_terminal"
    await interrupt(store, run="r2", execution="e2")
    waiting = await store.cancel("t1", "e2", "inv")
    assert waiting.status.value == "cancelled" and waiting.execution.checkpoint == {"k": 1}
    # Nothing pending any more: a normal turn is accepted.
    assert (await store.admit(admission(store, run="r3", execution="e3"))).execution.execution_id == "e3"


async def test_an_expired_lease_is_lost_and_its_owner_fenced_off(backend):
    store = backend.open(lease_seconds=0.3)
    stale = await store.admit(admission(store))
    assert (await store.renew(lease(stale))).ok
    await backend.advance(0.5)
    result = await store.admit(admission(store, run="r2", execution="e2"))
    assert result.history[-1].execution_id == "e1" and result.history[-1].status == "lost"
    assert (await store.cancel("t1", "e1", "inv")).status.value == "lost"
    # The former owner's writes are fenced off, its renewals refused.
    late = store.save_interrupt(lease(stale), pending(), checkpoint=None, open_steps=[], progress=NO_PROGRESS)
    assert await rejected(late) is Rejection.LEASE_LOST
    assert not (await store.renew(lease(stale))).ok
    await store.finish_run(lease(stale), "completed", NO_PROGRESS)
    assert await rejected(store.admit(admission(store, run="r3", execution="e3"))) is Rejection.THREAD_BUSY


async def test_retention_removes_old_state(backend, store):
    first = await store.admit(admission(store))
    await store.finish_run(lease(first), "completed", NO_PROGRESS)
    if isinstance(store, RedisStore):
        ttl = await store.client.pttl(thread_key("t1"))
        assert 0 < ttl <= 3600 * 1000, "every Redis key carries the retention as its TTL"
        # And Redis removes it when the retention is up: a store whose retention is 0.3 s.
        short = RedisStore(backend.redis_url, retention_seconds=0.3)
        backend.opened.append(short)
        ended = await short.admit(admission(short, thread="t-short"))
        await short.finish_run(lease(ended, thread="t-short"), "completed", NO_PROGRESS)
        deadline = asyncio.get_running_loop().time() + 10
        while await short.client.exists(thread_key("t-short")):
            assert asyncio.get_running_loop().time() < deadline, "Redis removed the thread at its retention"
            await asyncio.sleep(0.05)
        fresh = await short.admit(admission(short, thread="t-short", run="r1", execution="e9"))
        assert fresh.history == [], "the old thread state is gone (run ids forgotten)"
        return
    await backend.advance(3601)
    assert await store.purge_expired() == 1
    fresh = await store.admit(admission(store, run="r1", execution="e9"))
    assert fresh.history == [], "the old thread state is gone (run ids forgotten)"


async def test_tickets_are_single_use_and_expire(backend, store):
    await store.put_ticket("d1", 30, '{"owner": "a"}')
    assert await store.take_ticket("d1") == '{"owner": "a"}'
    assert await store.take_ticket("d1") is None
    await store.put_ticket("d2", 0.2, "v")
    await backend.advance(0.3)
    assert await store.take_ticket("d2") is None


@pytest.mark.parametrize("thread_id", ["../../etc/passwd", "CON", "a/b\\c:d", "x" * 5000, "\u00e9\u4e2d\U0001f600", ".", ""])
def test_file_names_are_safe_and_bounded(thread_id):
    name = thread_file_name(thread_id)
    assert "/" not in name and "\\" not in name and ".." not in name and len(name) <= 120
    assert name.startswith("t-") and name.endswith(".json")


async def test_a_file_store_that_cannot_open_leaves_nothing_open(tmp_path):
    """Its event segments cannot be opened (`events` is a file): the store raises, and neither the journal nor
    the claim on the directory stays open; once the cause is gone, the directory opens."""
    directory = tmp_path / "state"
    directory.mkdir()
    (directory / "events").write_text("not a directory")
    descriptors = set(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        FileStore(str(directory), retention_seconds=3600)
    assert set(os.listdir("/proc/self/fd")) == descriptors
    (directory / "events").unlink()
    store = FileStore(str(directory), retention_seconds=3600)
    await store.admit(admission(store, thread="after"))
    await store.close()


async def test_file_store_permissions_and_corruption(tmp_path):
    """The directory is 0700 and the journal 0600; a record found corrupt at start refuses its thread only, a torn
    last line (a write never acknowledged) is dropped, and every write before it stays."""
    directory = str(tmp_path / "state")
    store = FileStore(directory, retention_seconds=3600)
    await store.admit(admission(store, thread="good"))
    await store.admit(admission(store, thread="bad"))
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert sorted(os.listdir(directory)) == ["events", "lock", "threads.journal"]
    with pytest.raises(StoreUnavailable, match="in use by another gateway"):
        FileStore(directory, retention_seconds=3600)  # one process per state directory
    assert stat.S_IMODE(os.stat(store.journal.path).st_mode) == 0o600
    await store.close()
    corrupt_thread(directory, "bad")
    with open(os.path.join(directory, "threads.journal"), "ab") as handle:
        handle.write(b"S0badc0de not a whole line")  # torn: no newline
    reopened = FileStore(directory, retention_seconds=3600)  # as after a restart
    with pytest.raises(StoreUnavailable):
        await reopened.admit(admission(reopened, thread="bad", run="r2"))
    await reopened.finish_run(Lease("good", "r1", "e1", 1), "completed", NO_PROGRESS)
    assert (await reopened.read_document("good"))["history"][0]["status"] == "completed"
    with open(os.path.join(directory, "threads.journal"), "rb") as handle:
        assert handle.read().endswith(b"\n"), "the torn line is gone before anything is appended"


async def test_file_store_imports_the_earlier_one_file_per_thread_layout(tmp_path):
    """Thread files of the earlier layout are imported into the journal at start and removed; one that cannot be
    read stays, and its thread answers as corrupt."""
    old = FileStore(str(tmp_path / "source"), retention_seconds=3600)
    await old.admit(admission(old, thread="kept"))
    document = await old.read_document("kept")
    threads = tmp_path / "state" / "threads"
    threads.mkdir(parents=True)
    (threads / thread_file_name("kept")).write_text(json.dumps(document, indent=2))  # any JSON layout
    (threads / thread_file_name("broken")).write_text("{ not json")
    (threads / (thread_file_name("kept") + ".123.tmp")).write_text("half")
    store = FileStore(str(tmp_path / "state"), retention_seconds=3600)
    assert await store.read_document("kept") == document
    assert sorted(os.listdir(threads)) == [thread_file_name("broken")]
    with pytest.raises(StoreUnavailable):
        await store.admit(admission(store, thread="broken"))
    assert thread_state(str(tmp_path / "state"), "kept") == document, "durable in the journal"


async def test_file_store_compacts_its_journal_and_purges_for_good(tmp_path, monkeypatch):
    """Once dead records outweigh live ones the journal is rewritten with the live ones only; a purge writes
    deletion records, so a restart does not bring purged threads back."""
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 4096)
    clock = FakeClock()
    directory = str(tmp_path / "state")
    store = FileStore(directory, retention_seconds=3600, clock=clock)
    for index in range(60):
        admitted = await store.admit(admission(store, thread="busy", run=f"r{index}", execution=f"e{index}"))
        await store.finish_run(lease(admitted, thread="busy", run=f"r{index}", execution=f"e{index}"), "completed", NO_PROGRESS)
    assert store.journal.size < 2 * max(4096, store.journal.live), "compacted along the way"
    await store.admit(admission(store, thread="old"))
    clock.now += 3601
    await store.admit(admission(store, thread="fresh"))
    busy = await store.read_document("busy")
    assert await store.purge_expired() == 2  # "busy" and "old" were last written an hour ago
    await store.close()
    reopened = FileStore(directory, retention_seconds=3600, clock=clock)
    assert await reopened.read_document("old") is None and await reopened.read_document("busy") is None
    assert (await reopened.read_document("fresh"))["thread_id"] == "fresh"
    assert len(busy["runs"]) == 60


async def test_a_corrupt_thread_is_purged_one_retention_period_after_it_was_found(tmp_path):
    """A record found unreadable refuses its thread until the retention period has passed since it was found (its
    mark, with that time, survives compaction and restarts); then the thread is purged like an expired one and is
    new again. An unreadable file of the earlier layout goes once it is older than the retention period."""
    clock = FakeClock()
    directory = tmp_path / "state"
    store = FileStore(str(directory), retention_seconds=3600, clock=clock)
    await store.admit(admission(store, thread="bad"))
    await store.close()
    corrupt_thread(str(directory), "bad")
    threads = directory / "threads"
    threads.mkdir()
    (threads / thread_file_name("old-broken")).write_text("{ not json")
    (threads / thread_file_name("new-broken")).write_text("{ not json")
    found_at = clock.now
    os.utime(threads / thread_file_name("old-broken"), (found_at - 7200, found_at - 7200))
    os.utime(threads / thread_file_name("new-broken"), (found_at + 1800, found_at + 1800))

    store = FileStore(str(directory), retention_seconds=3600, clock=clock)  # finds "bad" corrupt now
    store.journal.compact()  # the mark is rewritten with the time it was found
    await store.close()
    clock.now += 3000
    store = FileStore(str(directory), retention_seconds=3600, clock=clock)  # a restart keeps that time
    with pytest.raises(StoreUnavailable):
        await store.admit(admission(store, thread="bad", run="r2"))
    assert await store.purge_expired() == 1  # the earlier layout's old file only
    assert sorted(os.listdir(threads)) == [thread_file_name("new-broken")]
    with pytest.raises(StoreUnavailable):
        await store.admit(admission(store, thread="new-broken"))
    clock.now += 1000  # over an hour since "bad" was found
    assert await store.purge_expired() == 1
    assert (await store.admit(admission(store, thread="bad", run="r3"))).fence == 1, "a new thread again"
    await store.close()
    store = FileStore(str(directory), retention_seconds=3600, clock=clock)
    assert (await store.read_document("bad"))["active"]["run_id"] == "r3", "the purge held across a restart"
    await store.close()


def test_a_failed_journal_write_leaves_nothing_behind(tmp_path):
    """A write the filesystem refuses (here: past the process's file size limit) fails that batch with
    StoreUnavailable and is cut from the journal; once there is room, the next write succeeds and a restart finds both earlier states."""
    script = f"""
import asyncio, resource, signal, sys
sys.path.insert(0, {ROOT!r})
from store.file import FileStore
from store.base import StoreUnavailable
from tests.test_store import admission

async def main():
    store = FileStore({str(tmp_path / "state")!r}, retention_seconds=3600)
    await store.admit(admission(store, thread="before"))
    size = store.journal.size
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 600, resource.RLIM_INFINITY))
    try:
        await asyncio.gather(*(store.admit(admission(store, thread=f"big{{i}}")) for i in range(20)))
    except StoreUnavailable as exc:
        print("refused:", exc)
    assert store.journal.size == size, "cut back"
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room again
    await store.admit(admission(store, thread="after"))
    print("ok")

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused: cannot write thread state" in done.stdout and done.stdout.strip().endswith("ok")
    assert thread_state(str(tmp_path / "state"), "before") is not None
    assert thread_state(str(tmp_path / "state"), "after") is not None
    assert thread_state(str(tmp_path / "state"), "big0") is None


async def test_cancel_checks_the_user_binding_and_leaks_nothing(store):
    await interrupt_for(store, user="alice")
    assert (await store.cancel("t1", "e1", "inv")).status.value == "not_found"
    assert (await store.cancel("t1", "e1", "inv", "mallory")).status.value == "not_found"
    assert (await store.cancel("t1", "nope", "inv", "mallory")).status.value == "not_found"
    assert (await store.cancel("t1", "e1", "inv", "alice")).status.value == "cancelled"


async def interrupt_for(store, user: str) -> None:
    admitted = await store.admit(admission(store, user=user))
    await store.save_interrupt(lease(admitted), pending(), checkpoint=None, open_steps=[], progress=NO_PROGRESS)


async def test_file_store_group_commit_shares_flushes_and_keeps_each_write(tmp_path):
    """Concurrent writes of many threads join batches (far fewer flushes than writes); each reads back as written."""
    store = FileStore(str(tmp_path / "state"), retention_seconds=3600)
    batches = []
    real = store.journal.append

    def counting(writes):
        batches.append(len(writes))
        return real(writes)

    store.journal.append = counting  # type: ignore[method-assign]
    await asyncio.gather(*(store.admit(admission(store, thread=f"t{i}")) for i in range(200)))
    assert sum(batches) == 200 and len(batches) < 50, batches
    await store.close()
    reopened = FileStore(str(tmp_path / "state"), retention_seconds=3600)  # read back from the journal itself
    for i in range(200):
        assert (await reopened.read_document(f"t{i}"))["thread_id"] == f"t{i}"


async def test_the_file_store_writes_the_ends_of_runs_finished_together_in_one_segment_write(tmp_path, monkeypatch):
    """200 runs whose ends (finish and whole log) arrive together: their logs go to the segment in a few writes, not
    one apiece, and each reads back whole, before and after a restart. A batch whose segment write fails answers
    each of its runs with the failure, keeps their finishes, and leaves no trace of their logs in the index."""
    directory = str(tmp_path / "state")
    store = FileStore(directory, retention_seconds=3600)
    segments = store.file_events._segments
    appended: list[int] = []
    real = segments._append

    def counting(data: bytes) -> None:
        appended.append(len(data))
        real(data)

    monkeypatch.setattr(segments, "_append", counting)
    meta = LogMeta("ros", "digest", store.owner_id, "e1")
    admitted = await asyncio.gather(*(store.admit(admission(store, thread=f"t{i}")) for i in range(200)))

    def end_of(i: int, fence: int) -> LogWrite:
        events = [(p, b'{"run":%d,"n":%d}' % (i, p)) for p in range(1, 11)]
        return LogWrite(LogRef(f"t{i}", "r1"), events, 1, create=meta, end=10, fence=fence)

    answers = await asyncio.gather(
        *(store.finish_run_and_log(lease(a, thread=f"t{i}"), "completed", NO_PROGRESS, end_of(i, a.fence)) for i, a in enumerate(admitted))
    )
    assert answers == [None] * 200
    assert len(appended) < 50, f"{len(appended)} segment writes for 200 runs' ends"
    for i in (0, 77, 199):
        read = await store.events.read(LogRef(f"t{i}", "r1"), 0, 100)
        assert read is not None and read.ended and read.entries == end_of(i, 0).entries
    await store.close()

    reopened = FileStore(directory, retention_seconds=3600)
    for i in range(200):
        read = await reopened.events.read(LogRef(f"t{i}", "r1"), 0, 100)
        assert read is not None and read.ended and read.entries == end_of(i, 0).entries, i

    def full(data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reopened.file_events._segments, "_append", full)
    again = await asyncio.gather(*(reopened.admit(admission(reopened, thread=f"u{i}")) for i in range(20)))
    failed = await asyncio.gather(
        *(
            reopened.finish_run_and_log(
                lease(a, thread=f"u{i}"), "completed", NO_PROGRESS, replace(end_of(i, a.fence), ref=LogRef(f"u{i}", "r1"))
            )
            for i, a in enumerate(again)
        )
    )
    assert all(isinstance(answer, StoreUnavailable) and "No space left" in str(answer) for answer in failed), failed
    for i in range(20):
        assert (await reopened.read_document(f"u{i}"))["active"] is None, "the finish is kept"
        assert await reopened.events.read(LogRef(f"u{i}", "r1"), 0, 100) is None, "no trace of a log never written"
    await reopened.close()


def test_file_store_loses_no_acknowledged_run_when_the_process_is_killed_mid_batch(tmp_path):
    """SIGKILL the gateway while 40 clients run short runs on the file store; after a restart on the same state
    directory every run whose RUN_FINISHED was received is recorded (its run id is refused as a duplicate) and
    every thread it touched still takes a new run (no file torn). The conversations were written in the same journal
    batches: an acknowledged run's thread holds its messages, and no thread holds messages of a run whose end was not
    recorded."""
    gateway = Gateway(tmp_path, "--allowed-cwd", "/tmp").start()
    acknowledged: list[dict] = []
    sent: list[dict] = []
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(timeout=10) as http:
            while not stop.is_set():
                body = run_body("hi", forwardedProps={})
                sent.append(body)
                try:
                    response = http.post(gateway.url + "/", json=body, headers={"accept": "text/event-stream"})
                except httpx.HTTPError:
                    return
                if b'"RUN_FINISHED"' in response.content:
                    acknowledged.append(body)

    clients = [threading.Thread(target=client) for _ in range(40)]
    for thread in clients:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 300:
        assert time.monotonic() < deadline, "the load did not get going"
        time.sleep(0.01)
    gateway.kill()
    stop.set()
    for thread in clients:
        thread.join(15)
    kept = list(acknowledged)
    restarted = Gateway(tmp_path, "--allowed-cwd", "/tmp")
    restarted.args[restarted.args.index("--state-dir") + 1] = gateway.state_dir
    restarted.start()
    try:
        with httpx.Client(timeout=10) as http:
            acknowledged_runs = {body["runId"] for body in kept}
            for body in list(sent):
                view = http.get(f"{restarted.url}/threads/{body['threadId']}")
                if view.status_code == 404:
                    assert body["runId"] not in acknowledged_runs  # never admitted: nothing of it anywhere
                    continue
                thread = view.json()
                ended = [run["runId"] for run in thread["runs"] if run["status"] != "running"]
                if body["runId"] in acknowledged_runs or thread["messageCount"]:
                    assert thread["messageCount"] == 2 and ended == [body["runId"]], thread
                    assert thread["messages"][0]["id"] == body["messages"][0]["id"]
                else:
                    assert ended == [] and thread["messages"] == [], thread
            for body in kept:
                again = http.post(restarted.url + "/", json=body, headers={"accept": "text/event-stream"})
                assert again.status_code == 409 and again.json()["error"]["code"] == "DUPLICATE_RUN_ID", again.text
            for body in kept[-50:]:
                fresh = http.post(restarted.url + "/", json=run_body("again", thread=body["threadId"], forwardedProps={}))
                assert fresh.status_code == 200 and b'"RUN_FINISHED"' in fresh.content, fresh.text[:300]
    finally:
        restarted.stop()


async def test_the_event_log_reads_from_any_position_across_written_batches(backend, store):
    """Batches of any size, read back from inside a batch and in pages, each position once however often it was
    written (a retry); a trim keeps every event from its cut on."""
    log, ref = store.events, LogRef("t1", "r1")
    meta = LogMeta("ros", "digest", store.owner_id, "e1")
    await log.write(ref, [(p, b"event-%d" % p) for p in range(1, 6)], 1, create=meta)
    await log.write(ref, [(p, b"event-%d" % p) for p in range(6, 9)], 1)
    await log.write(ref, [(p, b"event-%d" % p) for p in range(6, 9)], 1)  # its reply was lost: written again
    page = await log.read(ref, 3, 3)
    assert page is not None and page.entries == [(4, b"event-4"), (5, b"event-5"), (6, b"event-6")] and not page.ended
    everything = await log.read(ref, 0, 100)
    assert everything is not None and [p for p, _ in everything.entries] == list(range(1, 9)) and everything.first == 1
    await log.write(ref, [(8, b"event-8"), (9, b"event-9")], 7, end=9)  # overlaps what landed; events before 7 may go
    trimmed = await log.read(ref, 0, 100)
    assert trimmed is not None and trimmed.ended and trimmed.first <= 7
    assert trimmed.entries == [(p, b"event-%d" % p) for p in range(trimmed.first, 10)], "nothing from the cut on is lost"
    assert (await log.read(ref, 8, 100)).entries == [(9, b"event-9")]
    if backend.kind == "redis":  # a log written one event per stream entry (before batches) still reads
        import redis

        stream = f"{thread_key('t1')[: -len(':state')]}:log:{ref_digest(LogRef('t1', 'old'))}"
        info = stream.replace(":log:", ":logmeta:")
        client = redis.Redis.from_url(backend.redis_url)
        client.hset(info, mapping={"ros": "ros", "digest": "d", "owner": "o", "execution": "e", "ended": "0"})
        client.xadd(stream, {"d": b"one"}, id="0-1")
        client.xadd(stream, {"d": b"two"}, id="0-2")
        old = await log.read(LogRef("t1", "old"), 1, 10)
        assert old is not None and old.entries == [(2, b"two")] and old.first == 1


async def test_the_redis_store_takes_its_first_call_after_redis_restarted(tmp_path):
    """The connections the store keeps between calls died with the server: the next script call (here an event-log
    write, which the store does not retry) still lands, on a new connection, and its script is loaded again."""
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis").start()
    store = RedisStore(server.url, retention_seconds=3600)
    try:
        await asyncio.gather(*(store.admit(admission(store, thread=f"t{i}")) for i in range(4)))  # connections kept
        server.stop()
        server.start()
        ref = LogRef("t9", "r9")
        await store.events.write(ref, [(1, b"one")], 1, create=LogMeta("ros", "digest", store.owner_id, "e9"))
        read = await store.events.read(ref, 0, 10)
        assert read is not None and read.entries == [(1, b"one")]
    finally:
        await store.close()
        server.stop()


async def test_a_large_write_to_a_stalled_redis_times_out_instead_of_hanging(tmp_path):
    """Redis stopped (SIGSTOP) while a write larger than the socket buffers is sent: the write gives up after the
    socket timeout (5 s) with StoreUnavailable, and its connection slot is free again."""
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis").start()
    store = RedisStore(server.url, retention_seconds=3600)
    try:
        await store.admit(admission(store))
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        big = [(position, b"x" * 65536) for position in range(1, 513)]  # 32 MiB: more than loopback buffers hold
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(store.events.write(LogRef("t1", "big"), big, 1, create=LogMeta("r", "d", "o", "e")), 30)
        assert time.monotonic() - started < 20
    finally:
        if server.proc is not None:
            server.proc.send_signal(signal.SIGCONT)
        await store.close()
        server.stop()


async def test_the_file_event_log_rotates_segments_and_keeps_what_runs_need(tmp_path, monkeypatch):
    """Every run's lines share segment files; full ones are sealed, one that no log needs any more (events
    trimmed by a long run's bounds, or expired) is removed, one mostly dead has what it still holds copied forward,
    and a restart rebuilds the index from the segments that remain."""
    monkeypatch.setattr(segments_module, "SEGMENT_BYTES", 4096)
    clock = FakeClock()
    directory = str(tmp_path / "state")
    first = FileStore(directory, retention_seconds=3600, clock=clock)
    log = first.events
    meta = LogMeta("ros", "digest", "owner", "e1")
    long_run = LogRef("t1", "long")
    await log.write(long_run, [(1, b'{"n":1}')], 1, create=meta)
    for index in range(40):  # short runs, each a whole log in one write, between the long run's writes
        events = [(p, b'{"run":%d,"n":%d,"pad":"%s"}' % (index, p, b"x" * 40)) for p in range(1, 21)]
        await log.write(LogRef("t2", f"short-{index}"), events, 1, create=meta, end=20)
        await log.write(long_run, [(index + 2, b'{"n":%d}' % (index + 2))], max(1, index - 8))
    segments = [name for name in os.listdir(os.path.join(directory, "events")) if name.startswith("seg-")]
    assert 10 < len(segments) < 40, segments  # the short runs keep theirs until their events expire
    clock.now += 601  # past the event log retention (600 s): the short runs' events expire
    padded = [(p, b'{"n":%d,"pad":"%s"}' % (p, b"x" * 60)) for p in range(42, 120)]
    await log.write(long_run, padded, 100)  # fills and rotates
    remaining = [name for name in os.listdir(os.path.join(directory, "events")) if name.startswith("seg-")]
    assert len(remaining) <= 4, remaining
    expected = padded[100 - 42 :]
    assert (await log.read(long_run, 0, 1000)).entries == expected
    tombstone = await log.read(LogRef("t2", "short-3"), 0, 100)
    assert tombstone is not None and tombstone.ended and tombstone.entries == [] and tombstone.first == 21
    await first.close()
    restarted = FileStore(directory, retention_seconds=3600, clock=clock).events
    assert (await restarted.read(long_run, 0, 1000)).entries == expected
    assert (await restarted.read(long_run, 110, 5)).entries == expected[11:16]
    assert (await restarted.read(LogRef("t2", "short-3"), 0, 100)).ended
    clock.now += 86_400  # past the tombstones' day
    # The 40 tombstones; the long run, never ended, is judged after a restart by its segment's time (the real clock).
    assert await restarted.purge_expired() == 40
    assert await restarted.read(LogRef("t2", "short-3"), 0, 100) is None


async def test_the_file_event_log_writes_a_runs_events_as_blocks_and_reads_lines_and_blocks_alike(tmp_path, caplog):
    """A write whose positions follow each other is one block (`B <log> <first> <count>`, then the events as they
    are); any other write, and segments written before blocks, are `V` lines. Reads from any position, a restart and
    a copy forward see the same entries; a block cut short by a crash is skipped at start, and nothing after it."""
    directory = str(tmp_path / "state")
    clock = FakeClock()
    first = FileStore(directory, retention_seconds=3600, clock=clock)
    log, meta, ref = first.events, LogMeta("ros", "digest", "owner", "e1"), LogRef("t1", "r1")
    event = [(p, b'{"n":%d}' % p) for p in range(1, 13)]
    await log.write(ref, event[0:5], 1, create=meta)  # positions 1-5: a block
    await log.write(ref, [event[4], event[5], event[5], event[6], event[7]], 1)  # positions repeat: lines, each read once
    await log.write(ref, event[8:12], 1, end=12)  # 9-12: a block
    segment = os.path.join(directory, "events", "seg-0000000001.log")
    with open(segment, "rb") as handle:
        kinds = [line[:1] for line in handle.read().split(b"\n") if line[:1] in (b"B", b"V", b"M", b"E")]
    assert kinds == [b"M", b"B", *[b"V"] * 5, b"B", b"E"], kinds
    expected = event[0:8] + event[8:12]
    for after in (0, 3, 5, 6, 8, 10, 12):
        read = await log.read(ref, after, 100)
        assert read is not None and read.entries == expected[after:], after
    assert (await log.read(ref, 2, 4)).entries == expected[2:6]
    await first.close()

    reopened = FileStore(directory, retention_seconds=3600, clock=clock)
    for after in (0, 4, 9):
        assert (await reopened.events.read(ref, after, 100)).entries == expected[after:], after
    await reopened.close()

    # A crash cut the last block of another run short: the segment's complete logs stay readable.
    cut = LogRef("t2", "cut")
    again = FileStore(directory, retention_seconds=3600, clock=clock)
    await again.events.write(cut, event[0:3], 1, create=meta)
    await again.events.write(cut, event[3:12], 1)
    written = os.path.join(directory, "events", max(os.listdir(os.path.join(directory, "events"))))  # the active one
    await again.close()
    with open(written, "rb") as handle:
        data = handle.read()
    with open(written, "wb") as handle:
        handle.write(data[: data.rindex(b'{"n":10}')])
    with caplog.at_level("WARNING", logger="agui.store"):
        restarted = FileStore(directory, retention_seconds=3600, clock=clock)
    assert "a block cut short by a crash" in caplog.text
    assert (await restarted.events.read(cut, 0, 100)).entries == event[0:3]
    assert (await restarted.events.read(ref, 0, 100)).entries == expected
    await restarted.close()


async def test_a_block_whose_count_takes_in_other_records_is_skipped_and_the_records_are_replayed(tmp_path, caplog):
    """A block header damaged on disk to count more lines than its events: the lines it would take in include other
    logs' records, so the block is skipped as unreadable, and those records (another run's whole log) still replay."""
    directory = str(tmp_path / "state")
    store = FileStore(directory, retention_seconds=3600, clock=FakeClock())
    meta = LogMeta("ros", "digest", "owner", "e1")
    damaged, intact = LogRef("t1", "damaged"), LogRef("t2", "intact")
    events = [(p, b'{"n":%d}' % p) for p in range(1, 4)]
    await store.events.write(damaged, events, 1, create=meta, end=3)
    await store.events.write(intact, events, 1, create=meta, end=3)
    segment = os.path.join(directory, "events", "seg-0000000001.log")
    await store.close()
    with open(segment, "rb") as handle:
        data = handle.read()
    header = b"B %s 1 3\n" % ref_digest(damaged).encode()
    assert header in data
    with open(segment, "wb") as handle:
        handle.write(data.replace(header, header.replace(b" 3\n", b" 9\n")))
    with caplog.at_level("WARNING", logger="agui.store"):
        reopened = FileStore(directory, retention_seconds=3600, clock=FakeClock())
    assert "an unreadable line" in caplog.text
    assert (await reopened.events.read(damaged, 0, 100)).entries == []
    read = await reopened.events.read(intact, 0, 100)
    assert read is not None and read.ended and read.entries == events
    await reopened.close()


async def test_the_file_event_log_reads_segments_of_lines_written_before_blocks(tmp_path):
    """A segment of `V` lines only (what a gateway wrote before blocks) replays and reads as it did."""
    events = tmp_path / "state" / "events"
    events.mkdir(parents=True)
    ref = LogRef("t1", "old")
    name = ref_digest(ref).encode()
    head = {"ros_digest": "ros", "request_digest": "digest", "owner": "o", "execution_id": "e", "first": 1, "ended_at": None, "head": 0}
    ended = {**head, "ended_at": 1_000_000.0, "head": 3}
    lines = [b"M %s %s" % (name, json.dumps(head).encode())]
    lines += [b'V %s %d {"n":%d}' % (name, p, p) for p in (1, 2, 3)]
    lines += [b"E %s %s" % (name, json.dumps(ended).encode())]
    (events / "seg-0000000001.log").write_bytes(b"\n".join(lines) + b"\n")
    store = FileStore(str(tmp_path / "state"), retention_seconds=3600, clock=FakeClock())
    read = await store.events.read(ref, 1, 10)
    assert read is not None and read.ended and read.entries == [(2, b'{"n":2}'), (3, b'{"n":3}')]
    await store.close()


async def test_the_file_event_log_imports_the_earlier_one_file_per_run_layout(tmp_path):
    """A log of the earlier layout (`events/<digest>.log`: meta line, position lines, end line) is read into
    the segments at start and its file removed; its events and its end read as before."""
    events = tmp_path / "state" / "events"
    events.mkdir(parents=True)
    ref = LogRef("t1", "old")
    head = {"ros_digest": "ros", "request_digest": "digest", "owner": "o", "execution_id": "e", "first": 1, "ended_at": None, "head": 0}
    ended = {**head, "ended_at": 1_000_000.0, "head": 2}
    (events / f"{ref_digest(ref)}.log").write_bytes(
        b'M %s\n1 {"n":1}\n2 {"n":2}\nE %s\n' % (json.dumps(head).encode(), json.dumps(ended).encode())
    )
    store = FileStore(str(tmp_path / "state"), retention_seconds=3600, clock=FakeClock())
    read = await store.events.read(ref, 0, 10)
    assert read is not None and read.ended and read.entries == [(1, b'{"n":1}'), (2, b'{"n":2}')]
    assert read.meta == LogMeta("ros", "digest", "o", "e")
    assert not (events / f"{ref_digest(ref)}.log").exists()


async def test_an_expired_event_log_keeps_only_its_tombstone(backend, store):
    """A log expired before its retention (the replica's byte budget) reads as a tombstone: ended, its head known,
    no entry, `first` past the head (an attacher gets EVENTS_EXPIRED, or 204 at the head), on every store."""
    log, ref = store.events, LogRef("t1", "r-expired")
    await log.write(ref, [(p, b"event-%d" % p) for p in range(1, 6)], 1, create=LogMeta("ros", "digest", store.owner_id, "e1"), end=5)
    kept = await log.read(ref, 0, 100)
    assert kept is not None and len(kept.entries) == 5 and kept.head == 5
    await log.expire(ref, 5)
    gone = await log.read(ref, 0, 100)
    assert gone is not None and gone.entries == [] and gone.ended and gone.head == 5 and gone.first == 6
    assert gone.meta.ros_digest == "ros", "the tombstone still says whose run it was"
    if backend.kind == "file":  # and so does the index rebuilt from the segments
        await store.close()
        backend.opened.remove(store)
        again = await backend.open().events.read(ref, 0, 100)
        assert again is not None and again.entries == [] and again.first == 6 and again.head == 5
