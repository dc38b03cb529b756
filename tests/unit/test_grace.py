"""Grace windows in the engine: a detached run goes on for its window, a follower that comes back keeps it
going, and nobody coming back cancels it (the window's time is stepped by hand)."""

from __future__ import annotations

import asyncio
import json

from gateway.agents import signals as s
from gateway.engine import LogPolicy
from gateway.engine.handle import LiveHandle
from tests.unit.manual_time import ManualTime
from tests.unit.scripted import Harness, ScriptedAgent, body, prepare_body


def harness(agent: ScriptedAgent, time: ManualTime) -> Harness:
    return Harness(agent, log_policy=LogPolicy(max_grace_seconds=0.3), timers=time)


async def start(h: Harness, grace: float) -> LiveHandle:
    prepared = prepare_body(body())
    prepared.grace_seconds = grace
    handle = await h.engine.start(prepared)
    assert isinstance(handle, LiveHandle)
    return handle


async def drop_after_first_batch(handle: LiveHandle) -> int:
    reading = handle.events(30)
    batch = await anext(reading)
    await reading.aclose()
    assert batch is not None
    return batch[-1][0]


async def test_nobody_back_within_the_window_cancels_the_run_and_logs_its_end():
    time = ManualTime()
    agent = ScriptedAgent([s.TextDelta(text="a"), asyncio.Event(), s.Completed()])
    h = harness(agent, time)
    await drop_after_first_batch(await start(h, grace=5))  # asked for 5 s, capped at the operator's 0.3 s
    await time.advance(0.25)
    assert h.engine.in_flight == 1 and agent.closed == 0  # still going in its window
    await time.advance(0.1)
    for _ in range(40):  # the cancel itself settles on the loop (the store, the log): no window left to wait
        if h.engine.in_flight == 0:
            break
        await time.advance(0.01)
    assert h.engine.in_flight == 0 and agent.closed == 1
    replay = await h.engine.attach("t1", "r1", "inv-1", 0)
    events = [json.loads(data) for batch in [b async for b in replay.events(30)] if batch for _, data in batch]
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}


async def test_a_follower_that_comes_back_keeps_the_run_and_gets_the_rest_exactly_once():
    time = ManualTime()
    go = asyncio.Event()
    agent = ScriptedAgent([s.TextDelta(text="a"), go, s.TextDelta(text="b"), s.Completed()])
    h = harness(agent, time)
    last = await drop_after_first_batch(await start(h, grace=0.3))
    back = await h.engine.attach("t1", "r1", "inv-1", last)
    await time.advance(0.5)  # longer than the window: the returning follower holds the run
    go.set()
    rest = [item async for batch in back.events(30) if batch for item in batch]
    assert [position for position, _ in rest] == list(range(last + 1, last + 1 + len(rest)))
    assert json.loads(rest[-1][1])["outcome"] == {"type": "success"}
