"""The log writer on a real event stream and the in-memory log set to write live (as the file and Redis logs do):
batches behind the run, a store failure retried from the same position, the ring's bounds, the closing write."""

from __future__ import annotations

import asyncio
import json

from gateway.engine.logwriter import FIRST_FLUSH_DELAY, LogWriter
from gateway.engine.stream import Bounds, EventStream
from gateway.protocol import events as e
from store import StoreUnavailable
from store.eventlog import LogMeta, LogRead, LogRef, LogWrite
from store.eventlog.memory import MemoryEventLog
from tests.unit.manual_time import ManualTime

REF = LogRef("thread-key", "run-1")


class FlakyLog(MemoryEventLog):
    """The in-memory log, written live, that refuses its next `fail` writes as an unreachable store would."""

    live_writes = True

    def __init__(self) -> None:
        super().__init__(600)
        self.fail = 0
        self.writes: list[LogWrite] = []

    async def apply(self, write: LogWrite) -> None:
        if self.fail:
            self.fail -= 1
            raise StoreUnavailable("the store is down (on purpose)")
        self.writes.append(write)
        await super().apply(write)


class Owner:
    """What a run is to its stream and its writer."""

    def __init__(self) -> None:
        self.stream: EventStream | None = None
        self.fenced = False

    def stream_detached(self) -> None:
        return None

    def log_first(self) -> int:
        assert self.stream is not None
        return self.stream.first

    def log_meta(self) -> LogMeta:
        return LogMeta("ros-digest", "request-digest", "this-replica", "exec-1")

    def log_fenced(self) -> None:
        self.fenced = True


def live(log: FlakyLog, bounds: Bounds | None = None, time: ManualTime | None = None) -> tuple[EventStream, LogWriter]:
    owner = Owner()
    stream = owner.stream = EventStream(owner, bounds or Bounds())
    writer = LogWriter(log, REF, owner, stream, timers=time or ManualTime())
    stream.watch(writer)
    return stream, writer


async def put(stream: EventStream, start: int, count: int) -> None:
    for index in range(start, start + count):
        await stream.put([e.TextMessageContent(message_id="m", delta=f"d{index}")])


async def finished(writer: LogWriter, time: ManualTime) -> None:
    """`writer.finish()`, with time moved on while it waits out its retries."""
    finishing = asyncio.ensure_future(writer.finish())
    while not finishing.done():
        await time.advance(0.05)
    await finishing


async def read(log: FlakyLog) -> tuple[list[tuple[int, str]], LogRead]:
    got = await log.read(REF, 0, 10_000)
    assert got is not None
    return [(position, json.loads(data).get("delta", json.loads(data)["type"])) for position, data in got.entries], got


async def test_events_are_written_behind_the_run_in_batches_each_position_once():
    log, time = FlakyLog(), ManualTime()
    stream, writer = live(log, time=time)
    await put(stream, 1, 10)
    await time.advance(FIRST_FLUSH_DELAY * 3)
    await put(stream, 11, 10)
    await time.advance(FIRST_FLUSH_DELAY * 3)
    assert log.writes, "written while the run goes, not only at its end"
    await writer.finish()
    events, got = await read(log)
    assert events == [(n, f"d{n}") for n in range(1, 21)]
    assert got.ended and got.first == 1
    assert 2 <= len(log.writes) < 20, "batched: one write per flush, not one per event"
    assert log.writes[0].create is not None and all(write.create is None for write in log.writes[1:])


async def test_a_failed_write_is_tried_again_from_the_same_position_and_nothing_is_lost_or_repeated():
    log, time = FlakyLog(), ManualTime()
    log.fail = 2  # the first write and its first retry fail (backoff 0.05 s, then 0.1 s)
    stream, writer = live(log, time=time)
    await put(stream, 1, 5)
    await time.advance(FIRST_FLUSH_DELAY + 0.02)
    await put(stream, 6, 5)  # published while the writes fail
    await time.advance(0.04)
    assert not log.writes, "still in the first backoff"
    await time.advance(0.2)
    assert log.writes[0].entries[0][0] == 1, "the retry starts where the failed write started"
    await put(stream, 11, 5)
    await finished(writer, time)
    events, got = await read(log)
    assert events == [(n, f"d{n}") for n in range(1, 16)] and got.ended
    written = [position for write in log.writes for position, _ in write.entries]
    assert written == sorted(set(written)), "no position written twice"


async def test_what_the_ring_trimmed_while_the_store_was_down_is_never_written():
    log, time = FlakyLog(), ManualTime()
    log.fail = 3
    stream, writer = live(log, Bounds(max_events=10), time)
    await put(stream, 1, 5)
    await time.advance(FIRST_FLUSH_DELAY + 0.02)  # the first write went out and failed
    await put(stream, 6, 25)
    await finished(writer, time)  # waits out the retries (0.05 + 0.1 + 0.2 s)
    events, got = await read(log)
    assert stream.first == 21
    assert events == [(n, f"d{n}") for n in range(21, 31)] and got.first == 21 and got.ended


async def end_short_run(log: FlakyLog, failure: Exception | None) -> LogWrite:
    """Five events, then the end as settle does it: the closing write (sent by the store, or failing with
    `failure`), the terminal event published, the writer finished."""
    stream, writer = live(log)
    await put(stream, 1, 5)
    terminal = stream.next_entries([e.RunFinished(thread_id="t", run_id="run-1")])
    closing = await writer.closing_write(terminal)
    assert closing is not None
    if failure is None:
        await log.apply(closing)  # the store sends it with the record of the run's end
    writer.closed(closing, failure)
    await stream.put_encoded([data for _, data in terminal])  # the terminal event is published all the same
    await writer.finish()
    return closing


async def test_a_short_run_writes_its_whole_log_once_with_its_end():
    log = FlakyLog()
    closing = await end_short_run(log, None)
    assert closing.create is not None and closing.end == 6
    events, got = await read(log)
    assert events == [*[(n, f"d{n}") for n in range(1, 6)], (6, "RUN_FINISHED")] and got.ended
    assert len(log.writes) == 1


async def test_a_failed_closing_write_leaves_the_log_to_be_completed_from_the_ring():
    log = FlakyLog()
    await end_short_run(log, StoreUnavailable("the end of the run was not recorded"))
    events, got = await read(log)
    assert events == [*[(n, f"d{n}") for n in range(1, 6)], (6, "RUN_FINISHED")] and got.ended


async def test_the_last_write_is_retried_until_the_store_is_back():
    log, time = FlakyLog(), ManualTime()
    log.fail = 2
    stream, writer = live(log, time=time)
    await put(stream, 1, 5)  # a short run: nothing written before its end
    await finished(writer, time)
    events, got = await read(log)
    assert events == [(n, f"d{n}") for n in range(1, 6)] and got.ended


async def test_a_put_after_a_write_behind_the_run_has_landed_starts_the_next_write():
    """The writer is not told of puts while its write is due or out (that write reads all that is new); once it has
    landed with nothing new, the next put is heard again."""
    log, time = FlakyLog(), ManualTime()
    stream, writer = live(log, time=time)
    await put(stream, 1, 3)
    await time.advance(FIRST_FLUSH_DELAY * 2)
    assert [[position for position, _ in write.entries] for write in log.writes] == [[1, 2, 3]]
    await put(stream, 4, 2)
    await time.advance(0)
    assert [[position for position, _ in write.entries] for write in log.writes] == [[1, 2, 3], [4, 5]]


async def test_after_a_failed_closing_write_the_terminal_event_is_written_behind_the_run():
    """The closing write took the first write's delay with it; once it failed, the writer hears puts again: the
    terminal event, published all the same, is written from the ring without waiting for `finish`."""
    log, time = FlakyLog(), ManualTime()
    stream, writer = live(log, time=time)
    await put(stream, 1, 5)  # the first write's delay is running
    terminal = stream.next_entries([e.RunFinished(thread_id="t", run_id="run-1")])
    closing = await writer.closing_write(terminal)
    assert closing is not None
    writer.closed(closing, StoreUnavailable("the end of the run was not recorded"))
    await stream.put_encoded([data for _, data in terminal])
    await time.advance(FIRST_FLUSH_DELAY * 2)
    events, _ = await read(log)
    assert events == [*[(n, f"d{n}") for n in range(1, 6)], (6, "RUN_FINISHED")]
