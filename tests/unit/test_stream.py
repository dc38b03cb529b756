"""The run's event stream alone: positions, bounds, followers, backpressure and detaching."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import Callable

import pytest

from gateway.engine import heartbeat
from gateway.engine.stream import (
    MAX_FOLLOWERS,
    MAX_LAG,
    Bounds,
    EventStream,
    FollowerCut,
    PositionGone,
    PositionUnknown,
    TooManyFollowers,
)
from gateway.protocol import events as e
from tests.unit.manual_time import ManualTime, settle


class Owner:
    """The stream's owner (a run, in the gateway): told when the last follower leaves."""

    def __init__(self, on_detached: Callable[[], object] = lambda: None) -> None:
        self.on_detached = on_detached

    def stream_detached(self) -> None:
        self.on_detached()


QUIET = Owner()


def text(n: int) -> list[e.Event]:
    return [e.TextMessageContent(message_id="m", delta=f"d{i}") for i in range(n)]


async def test_positions_count_from_one_and_the_ring_keeps_only_its_bounds():
    stream = EventStream(QUIET, Bounds(max_events=10, max_bytes=1 << 20))
    for event in text(25):
        await stream.put([event])
    assert (stream.first, stream.head) == (16, 25)
    assert [position for position, _ in stream.entries(20)] == [21, 22, 23, 24, 25]
    assert json.loads(stream.entries(24)[0][1])["delta"] == "d24"
    with pytest.raises(PositionGone):
        stream.entries(14)
    with pytest.raises(PositionUnknown):
        stream.attach(26)


async def test_the_byte_bound_trims_too():
    one = len(e.encode_json(text(1)[0]))
    stream = EventStream(QUIET, Bounds(max_events=1000, max_bytes=one * 4))
    await stream.put(text(9))
    assert stream.head - stream.first + 1 == 4


async def test_the_pacing_follower_never_loses_what_it_has_not_read():
    stream = EventStream(QUIET, Bounds(max_events=10, max_bytes=1 << 20))
    follower = stream.attach(0, paces=True)
    await stream.put(text(50))  # under MAX_LAG: the producer does not wait
    assert stream.first == 1
    reading = stream.follow(follower, 30)
    batch = await anext(reading)
    assert [position for position, _ in batch] == list(range(1, 51))
    await stream.put(text(1))
    assert stream.first == 42  # trimmed again once read
    await reading.aclose()


async def test_the_pacing_follower_slows_the_producer_when_it_lags_and_releases_it_by_reading():
    stream = EventStream(QUIET)
    follower = stream.attach(0, paces=True)

    async def produce() -> None:
        for event in text(MAX_LAG + 10):
            await stream.put([event])

    producer = asyncio.create_task(produce())
    for _ in range(MAX_LAG * 4):  # each put is a loop turn or two
        if stream.head >= MAX_LAG + 1:
            break
        await asyncio.sleep(0)
    await settle()
    assert not producer.done() and stream.head == MAX_LAG + 1
    reading = stream.follow(follower, 30)
    await anext(reading)
    await asyncio.wait_for(producer, 1)
    await reading.aclose()


async def test_followers_that_never_read_neither_slow_the_run_nor_keep_what_the_bounds_trim():
    stream = EventStream(QUIET, Bounds(max_events=100, max_bytes=1 << 20))
    owner = stream.attach(0, paces=True)
    stalled = [stream.attach(0) for _ in range(100)]
    reading = stream.follow(owner, 30)
    taken = 0
    for _ in range(20):  # the owner reads as it goes; the hundred others never do
        await stream.put(text(MAX_LAG // 2))
        taken = (await anext(reading))[-1][0]
    assert taken == stream.head == 10 * MAX_LAG, "the producer never waited for the stalled followers"
    await stream.put(text(1))  # the ring trims on a put: what the owner had not read yet was still held
    assert stream.head - stream.first + 1 == 100, "the ring holds its bounds, not what the stalled ones missed"
    cut = stream.follow(stalled[0], 30)
    with pytest.raises(FollowerCut) as raised:
        await anext(cut)
    assert raised.value.position == 0
    assert stream.followers == 100  # the cut one left
    await reading.aclose()


async def test_a_follower_that_keeps_up_is_never_cut_even_past_the_ring_bound():
    stream = EventStream(QUIET, Bounds(max_events=10, max_bytes=1 << 20))
    reading = stream.follow(stream.attach(0), 30)
    positions: list[int] = []
    for _ in range(30):
        await stream.put(text(5))
        positions += [position for position, _ in await anext(reading)]
    assert positions == list(range(1, 151))
    await reading.aclose()


async def test_a_run_takes_a_bounded_number_of_followers():
    stream = EventStream(QUIET)
    followers = [stream.attach(0) for _ in range(MAX_FOLLOWERS)]
    with pytest.raises(TooManyFollowers):
        stream.attach(0)
    await stream.follow(followers[0], 30).aclose()  # a follower that never started leaves nothing behind
    reading = stream.follow(followers[1], 30)
    await stream.put(text(1))
    await anext(reading)
    await reading.aclose()
    stream.attach(0)  # room again


async def test_the_last_follower_leaving_detaches_unless_the_stream_ended():
    detached: list[int] = []
    stream = EventStream(Owner(lambda: detached.append(1)))
    first, second = stream.attach(0), stream.attach(0)
    await stream.put(text(1))
    one, two = stream.follow(first, 30), stream.follow(second, 30)
    await anext(one)
    await anext(two)
    await one.aclose()
    assert detached == []  # one follower is still there
    await two.aclose()
    assert detached == [1]
    third = stream.attach(1)
    await stream.close()
    assert [batch async for batch in stream.follow(third, 30)] == []
    assert detached == [1]  # an ended stream is not a detach


@pytest.fixture
async def beats():
    """The loop's heartbeat clock on time the test moves by hand (a fresh loop clock again afterwards)."""
    time = ManualTime()
    heartbeat.install(heartbeat.HeartbeatClock(time.now, time.sleep))
    yield time
    heartbeat.install(heartbeat.HeartbeatClock())


async def test_a_silent_stream_yields_heartbeats(beats):
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 0.01)
    beat = asyncio.ensure_future(anext(reading))
    await beats.advance(0.02)
    assert beat.done() and beat.result() is None
    await reading.aclose()


async def test_heartbeats_come_after_the_interval_of_silence_and_data_restarts_it(beats):
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 0.2)
    beat = asyncio.ensure_future(anext(reading))
    await beats.advance(0.15)
    assert not beat.done(), "not before the interval"
    await beats.advance(0.1)
    assert beat.done() and beat.result() is None, "a heartbeat after 0.2 s of silence"
    await beats.advance(0.1)
    await stream.put(text(1))
    assert [position for position, _ in await anext(reading)] == [1]
    beat = asyncio.ensure_future(anext(reading))
    await beats.advance(0.15)
    assert not beat.done(), "the data restarted the interval"
    await beats.advance(0.1)
    assert beat.done() and beat.result() is None
    await reading.aclose()


async def test_an_ended_stream_is_not_kept_until_its_next_heartbeat(beats):
    """A short run's follower waits once, so its stream is due a heartbeat an interval later: the clock must not keep
    it (and its run's objects) alive that long after the run ended."""
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 15)
    waiting = asyncio.ensure_future(anext(reading))
    await asyncio.sleep(0)  # the follower waits: its heartbeat is due in 15 s
    await stream.put(text(1))
    assert [position for position, _ in await waiting] == [1]
    await stream.close()
    stream.release()
    assert [batch async for batch in reading] == []
    gone = weakref.ref(stream)
    del stream, reading, waiting
    gc.collect()  # only what is still referenced survives
    assert gone() is None, "the heartbeat clock held the ended stream"
    await beats.advance(16)  # its heartbeat's time comes and goes: nothing to call


async def test_thousands_of_silent_streams_share_one_clock_task_and_hold_no_timer_each(beats):
    """Each follower of each stream gets its heartbeats, yet the loop holds one clock task and no timer per stream."""
    loop = asyncio.get_running_loop()
    tasks_before = len(asyncio.all_tasks())
    timers_before = len(loop._scheduled)  # type: ignore[attr-defined]  # earlier tests' sleepers share the session loop
    streams = [EventStream(QUIET) for _ in range(2000)]
    readers = [stream.follow(stream.attach(0), 0.2) for stream in streams for _ in range(2)]
    waiting = [asyncio.ensure_future(anext(reader)) for reader in readers]
    await beats.advance(0.05)
    timers = len(loop._scheduled) - timers_before  # type: ignore[attr-defined]
    assert timers < 10, f"{timers} timers for {len(streams)} silent streams"
    assert len(asyncio.all_tasks()) - tasks_before - len(waiting) <= 1, "one clock task at most"
    await beats.advance(0.2)
    assert all(beat.done() for beat in waiting)
    assert [beat.result() for beat in waiting] == [None] * len(readers)
    for reader in readers:
        await reader.aclose()


async def test_a_durable_stream_shows_only_what_its_log_holds():
    stream = EventStream(QUIET)
    stream.durable = 0
    follower = stream.follow(stream.attach(0), 30)
    await stream.put(text(5))
    pending = asyncio.ensure_future(anext(follower))
    await settle()
    assert not pending.done(), "nothing the log lacks is shown"
    stream.made_durable(3)
    assert [position for position, _ in await pending] == [1, 2, 3]
    stream.made_durable(6)  # a closing write holds the terminal event before it is published
    await stream.put(text(1))
    assert [position for position, _ in await anext(follower)] == [4, 5, 6]
    await stream.close()
    stream.release()
    with pytest.raises(StopAsyncIteration):
        await anext(follower)


async def test_a_released_durable_stream_ends_its_followers_before_what_was_never_written():
    stream = EventStream(QUIET)
    stream.durable = 0
    follower = stream.follow(stream.attach(0), 30)
    await stream.put(text(3))
    stream.made_durable(1)
    assert [position for position, _ in await anext(follower)] == [1]
    await stream.close()
    waiting = asyncio.ensure_future(anext(follower))
    await settle()
    assert not waiting.done(), "the log may still get the rest"
    stream.release()
    with pytest.raises(StopAsyncIteration):
        await waiting


async def test_a_stream_held_for_its_end_gives_its_last_events_out_with_the_end(beats):
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 0.2)
    await stream.put(text(1))
    assert [position for position, _ in await anext(reading)] == [1]
    await stream.put(text(3))
    stream.hold_for_end()
    pending = asyncio.ensure_future(anext(reading))
    await settle()
    assert not pending.done(), "nothing while the end is on its way"
    await beats.advance(0.25)
    assert pending.done() and pending.result() is None, "heartbeats go on while held"
    pending = asyncio.ensure_future(anext(reading))
    await settle()
    assert not pending.done()
    stream.stop_holding()
    await stream.put_encoded([e.encode_json(e.RunFinished(thread_id="t", run_id="r"))])
    assert [position for position, _ in await pending] == [2, 3, 4, 5], "the held events and the end, in one batch"
    await stream.close()
    with pytest.raises(StopAsyncIteration):
        await anext(reading)


async def test_letting_go_of_a_hold_gives_out_what_it_held_at_once():
    """A store that failed the end's first attempt: its retries may take seconds, the run's events do not wait."""
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 30)
    stream.hold_for_end()
    await stream.put(text(2))
    pending = asyncio.ensure_future(anext(reading))
    await settle()
    assert not pending.done()
    stream.stop_holding()
    assert [position for position, _ in await pending] == [1, 2]
    await reading.aclose()


async def test_an_ended_stream_holds_nothing():
    """A defect while settling ends the stream without a word to the hold: its followers still get everything."""
    stream = EventStream(QUIET)
    reading = stream.follow(stream.attach(0), 30)
    stream.hold_for_end()
    await stream.put(text(2))
    await stream.close()
    assert [position for position, _ in await anext(reading)] == [1, 2]
    with pytest.raises(StopAsyncIteration):
        await anext(reading)
