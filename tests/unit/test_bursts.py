"""The driver's bursts: the signals a backend had ready at once are published together, and nothing it had ready
waits for its next step, its failure, a stop or the end of a backend that is not a native generator; bursts the
loop publishes while the backend waits are paced by a client that trails, and a failure there fails the run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from gateway.agents import signals as s
from gateway.agents.base import AgentBackend, AgentRequest
from gateway.engine.stream import MAX_LAG, YIELD_EVERY, EventStream
from tests.unit.scripted import Harness, ScriptedAgent, body, collect, types


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT"]


async def read_until(stream: AsyncIterator[Any], seen: list[dict[str, Any]], wanted: str) -> None:
    """Read batches into `seen` until a TEXT_MESSAGE_CONTENT with `wanted` arrived (a second at most)."""
    async with asyncio.timeout(1):
        while wanted not in texts(seen):
            batch = await anext(stream)
            seen.extend(json.loads(data) for _, data in batch or [])


async def test_what_a_backend_had_ready_reaches_the_client_before_the_backend_waits_again():
    cue = asyncio.Event()
    agent = ScriptedAgent([s.TextDelta(text="a"), s.TextDelta(text="b"), cue, s.TextDelta(text="c"), s.Completed()])
    harness = Harness(agent)
    handle = await harness.start(body())
    stream = handle.events(30)
    seen: list[dict[str, Any]] = []
    await read_until(stream, seen, "b")
    assert not cue.is_set() and texts(seen) == ["a", "b"], "the burst went out while the backend still waits"
    cue.set()
    await read_until(stream, seen, "c")
    seen.extend(json.loads(data) for batch in [b async for b in stream] for _, data in batch or [])
    assert types(seen)[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"] and texts(seen) == ["a", "b", "c"]


async def test_what_a_backend_had_ready_before_it_raised_is_shown_before_the_error():
    agent = ScriptedAgent([s.TextDelta(text="a"), s.TextDelta(text="b"), RuntimeError("the backend broke")])
    events = await Harness(agent).run(body())
    assert texts(events) == ["a", "b"] and events[-1]["type"] == "RUN_ERROR"
    assert agent.closed == 1


async def test_a_stop_while_the_backend_waits_reaches_the_backend_and_closes_it():
    """A stop that arrives while a step waits is thrown into that step, and the backend's generator is closed (its
    `finally` runs) before the run settles."""
    never = asyncio.Event()
    agent = ScriptedAgent([s.TextDelta(text="a"), never, s.Completed()])
    harness = Harness(agent)
    handle = await harness.start(body())
    reader = asyncio.create_task(collect(handle))
    for _ in range(10):
        await asyncio.sleep(0)
    execution = (await harness.store.read_document("t1"))["execution"]["execution_id"]
    assert (await harness.engine.cancel("t1", execution, "inv-1")).value == "cancelled"
    events = await reader
    assert texts(events) == ["a"] and events[-1]["outcome"] == {"type": "cancelled"}
    assert agent.closed == 1 and harness.engine.in_flight == 0


class CountedSignals:
    """A backend's own async iterator, not a generator: signals with a wait between them, and its close counted."""

    def __init__(self, signals: list[s.Signal]) -> None:
        self.signals = signals
        self.closed = 0

    def __aiter__(self) -> CountedSignals:
        return self

    async def __anext__(self) -> s.Signal:
        await asyncio.sleep(0)
        if not self.signals:
            raise StopAsyncIteration
        return self.signals.pop(0)

    async def aclose(self) -> None:
        self.closed += 1


class IteratorAgent(AgentBackend):
    name = "iterator"

    def __init__(self, signals: CountedSignals) -> None:
        self.signals = signals

    def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:
        return self.signals


async def test_a_backend_that_returns_its_own_iterator_is_read_to_its_end_and_closed():
    signals = CountedSignals([s.TextDelta(text="a"), s.TextDelta(text="b"), s.Completed()])
    events = await Harness(IteratorAgent(signals)).run(body())  # type: ignore[arg-type]
    assert texts(events) == ["a", "b"] and events[-1]["type"] == "RUN_FINISHED"
    assert signals.closed == 1


async def test_a_backend_that_never_waits_still_gives_the_loop_a_turn_every_few_hundred_events():
    count = 20 * YIELD_EVERY
    agent = ScriptedAgent([*[s.TextDelta(text="x")] * count, s.Completed()])
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    other = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    events = await Harness(agent).run(body())
    other.cancel()
    assert len(texts(events)) == count
    assert turns >= count // YIELD_EVERY, f"the rest of the loop ran {turns} times during {count} events"


class WaitsBeforeEachSignal(AgentBackend):
    """A backend that gives the loop a turn before each of its text deltas: every burst is one signal, published by
    the driver's callback while the backend waits."""

    name = "waits"

    def __init__(self, count: int) -> None:
        self.count = count
        self.produced = 0

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        for index in range(self.count):
            await asyncio.sleep(0)
            self.produced += 1
            yield s.TextDelta(text=str(index))
        yield s.Completed()


async def test_bursts_published_while_the_backend_waits_are_paced_by_a_client_that_trails():
    agent = WaitsBeforeEachSignal(MAX_LAG * 4)
    handle = await Harness(agent).start(body())  # type: ignore[arg-type]
    stream = handle.events(30)
    seen: list[dict[str, Any]] = []
    await read_until(stream, seen, "0")  # the client reads once, then trails
    for _ in range(MAX_LAG * 8):
        await asyncio.sleep(0)
    assert MAX_LAG <= agent.produced <= MAX_LAG + 8, f"the backend ran {agent.produced} signals ahead of its client"
    seen.extend(json.loads(data) for batch in [b async for b in stream] for _, data in batch or [])
    assert texts(seen) == [str(index) for index in range(MAX_LAG * 4)] and seen[-1]["type"] == "RUN_FINISHED"


async def test_a_failure_of_the_publish_the_loop_runs_for_a_burst_fails_the_run_at_its_next_step(monkeypatch):
    """The burst's callback runs on the loop, outside the run's task: what it raises is not lost there, the run fails
    with it once the backend gives its next signal, and nothing of the failed burst is shown."""
    publish, broken = EventStream.publish, []

    def breaks_once(self: EventStream, encoded: list[bytes]) -> bool:
        if not broken:
            broken.append([json.loads(data).get("delta") for data in encoded])
            raise RuntimeError("a defect in publishing")
        return publish(self, encoded)

    monkeypatch.setattr(EventStream, "publish", breaks_once)
    cue = asyncio.Event()
    agent = ScriptedAgent([s.TextDelta(text="a"), cue, s.TextDelta(text="b"), s.Completed()])
    harness = Harness(agent)
    running = asyncio.ensure_future(harness.run(body()))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not running.done(), "the run waits with its backend"
    cue.set()
    events = await asyncio.wait_for(running, 1)
    assert "a" in broken[0] and "b" not in broken[0], "the burst's own publish broke"
    assert texts(events) == [] and events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "A2A_EXECUTION_FAILED", events[-1]
    assert agent.closed == 1


async def test_signals_handed_over_in_lists_are_shown_in_order_and_a_terminal_one_ends_the_run():
    """A step may bring a list of signals (what one network read brought): each is taken as if it came alone, and
    what follows the terminal signal in its list is never shown."""
    agent = ScriptedAgent(
        [
            [s.TextDelta(text="a"), s.TextDelta(text="b")],
            s.TextDelta(text="c"),
            [s.TextDelta(text="d"), s.Completed(), s.TextDelta(text="late")],
        ]
    )
    events = await Harness(agent).run(body())
    assert texts(events) == ["a", "b", "c", "d"] and types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert agent.closed == 1


async def test_a_refused_signal_in_a_list_shows_the_list_s_earlier_signals_and_none_of_its_own():
    refused = s.CustomEvent(name="iac-code.session.v1", value={})  # the gateway's own name: refused
    agent = ScriptedAgent([[s.TextDelta(text="a"), refused, s.TextDelta(text="b")], s.Completed()])
    events = await Harness(agent).run(body())
    assert texts(events) == ["a"] and events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "AGENT_PROTOCOL_ERROR"
    assert [e for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1" and e["value"] == {}] == []


async def test_a_list_longer_than_a_trailing_client_allows_waits_for_room_within_the_list():
    count = MAX_LAG * 4
    agent = ScriptedAgent([[s.TextDelta(text=str(index)) for index in range(count)], s.Completed()])
    handle = await Harness(agent).start(body())
    stream = handle.events(30)
    seen: list[dict[str, Any]] = []
    await read_until(stream, seen, "0")  # the client reads once, then trails
    for _ in range(MAX_LAG * 8):
        await asyncio.sleep(0)
    assert agent.closed == 0, "the run waits for room in the middle of its list"
    seen.extend(json.loads(data) for batch in [b async for b in stream] for _, data in batch or [])
    assert texts(seen) == [str(index) for index in range(count)] and seen[-1]["type"] == "RUN_FINISHED"
