"""The lease proof in process: a run whose renewals hang stops on its own timer, and no end is announced that the
store did not record (the memory store, a scripted backend, a lease of a fraction of a second of the test's time)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from gateway.agents import signals as s
from gateway.agents.base import AgentBackend, AgentRequest
from gateway.engine.driver import MAX_HELD
from gateway.engine.lease import PROOF_SHARE
from store import Lease, RenewResult, StoreUnavailable
from tests.unit.manual_time import ManualTime
from tests.unit.scripted import Harness, body

LEASE = 0.15


class Ticking(AgentBackend):
    """A delta every 20 ms, each stamped with the time it was produced at, then success."""

    name = "ticking"

    def __init__(self, count: int, time: ManualTime) -> None:
        self.count = count
        self.time = time
        self.produced: dict[str, float] = {}
        self.closed = False

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        try:
            for index in range(self.count):
                await self.time.sleep(0.02)
                self.produced[f"d{index} "] = self.time.now()
                yield s.TextDelta(text=f"d{index} ")
            yield s.Completed()
        finally:
            self.closed = True


async def hang(lease: Lease) -> RenewResult:
    await asyncio.Event().wait()  # a store that took the command and never answers
    raise AssertionError


async def stopped_by_the_proof(agent: AgentBackend, time: ManualTime) -> list[dict[str, Any]]:
    """The events of a run of `agent` whose renewals hang, run to its end on the test's time: the proof's own
    timer or check must stop it with STATE_PERSISTENCE_FAILED."""
    harness = Harness(agent, lease_seconds=LEASE, timers=time)  # type: ignore[arg-type]
    harness.store.renew = hang  # type: ignore[method-assign]
    running = asyncio.ensure_future(harness.run(body()))
    await time.run_until(running, step=0.005)
    events = running.result()
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STATE_PERSISTENCE_FAILED", events[-1]
    return events


async def test_a_renewal_that_hangs_stops_the_run_on_the_proofs_own_timer():
    time = ManualTime()
    agent = Ticking(100, time)  # 2 s of deltas: far past the proof
    started = time.now()
    events = await stopped_by_the_proof(agent, time)
    shown = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert shown and len(shown) < 100 and agent.closed, "the backend was stopped"
    proof_end = started + LEASE * PROOF_SHARE
    late = [delta for delta in shown if agent.produced[delta] >= proof_end]
    assert late == [], f"deltas produced after the proof ran out were shown: {late}"


async def test_an_end_the_store_could_not_record_is_never_announced_as_success():
    time = ManualTime()
    agent = Ticking(3, time)
    harness = Harness(agent, lease_seconds=LEASE, timers=time)  # type: ignore[arg-type]

    async def unreachable(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("down")

    harness.store.finish_run = unreachable  # type: ignore[method-assign]
    harness.store.finish_run_and_log = unreachable  # type: ignore[method-assign]
    running = asyncio.ensure_future(harness.run(body()))
    await time.run_until(running, step=0.005)
    events = running.result()
    assert [e["type"] for e in events if e["type"].startswith("RUN_")] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "STATE_PERSISTENCE_FAILED"


async def test_a_run_that_finds_its_proof_run_out_as_it_publishes_still_records_and_announces_its_end():
    """The run's own task sees the proof run out before the proof's timer does (a process woken from a pause sees its
    work before its timers): it stops itself from inside its task, and that stop must not cancel its settling."""
    time = ManualTime()
    go = asyncio.Event()
    harness = Harness(ScriptedAgentAfter(go), lease_seconds=LEASE, timers=time)  # type: ignore[arg-type]
    harness.store.renew = hang  # type: ignore[method-assign]
    recorded = harness.store.finish_run

    async def round_trip(*args: object) -> None:
        await asyncio.sleep(0)  # the store's answer comes on a later turn of the loop, as a real one's does
        await recorded(*args)  # type: ignore[arg-type]

    harness.store.finish_run = round_trip  # type: ignore[method-assign]
    running = asyncio.ensure_future(harness.run(body()))
    await time.advance(0)
    time.current += LEASE  # past the proof, its timer not run yet
    go.set()
    events = await asyncio.wait_for(running, 5)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STATE_PERSISTENCE_FAILED", events[-1]
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == []
    document = await harness.store.read_document("t1")
    assert document["active"] is None and document["history"][-1]["status"] == "failed", "its end is recorded"


async def test_a_process_paused_past_its_proof_before_its_first_renewal_stops_the_run_without_renewing():
    """Until the first renewal is due the keeper holds one timer; a process that wakes past the proof's end finds
    that timer due first, and it ends the run instead of renewing a lease it can no longer prove."""
    time = ManualTime()
    go = asyncio.Event()
    harness = Harness(ScriptedAgentAfter(go), lease_seconds=LEASE, timers=time)  # type: ignore[arg-type]
    renewed: list[Lease] = []

    async def record(lease: Lease) -> RenewResult:
        renewed.append(lease)
        return RenewResult(True, False)

    harness.store.renew = record  # type: ignore[method-assign]
    running = asyncio.ensure_future(harness.run(body()))
    await time.advance(0)
    time.current += LEASE  # paused past the proof: every timer is due at once on waking
    await time.advance(0)
    go.set()
    events = await asyncio.wait_for(running, 5)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STATE_PERSISTENCE_FAILED", events[-1]
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == []
    assert renewed == [], "no renewal was sent after the proof ran out"


class ScriptedAgentAfter(AgentBackend):
    """One delta once the test says so, then success."""

    name = "after"

    def __init__(self, go: asyncio.Event) -> None:
        self.go = go

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        await self.go.wait()
        yield s.TextDelta(text="late ")
        yield s.Completed()


class RunsPastTheProof(AgentBackend):
    """A delta, then its own code runs past the lease proof before it waits (a long computation, or a pause of the
    process) and goes on."""

    name = "runs-past-the-proof"

    def __init__(self, time: ManualTime) -> None:
        self.time = time
        self.closed = False

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        try:
            await self.time.sleep(0.01)
            yield s.TextDelta(text="before ")
            self.time.current += LEASE  # no wait: the driver holds the delta while this runs
            await self.time.sleep(0.01)
            yield s.TextDelta(text="after ")
            yield s.Completed()
        finally:
            self.closed = True


async def test_events_held_while_the_backend_ran_past_the_proof_are_never_shown():
    """The driver publishes a burst when the backend next waits: by then the proof may have run out, and then the
    burst is dropped with the run, never shown late."""
    time = ManualTime()
    agent = RunsPastTheProof(time)
    events = await stopped_by_the_proof(agent, time)
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == []
    assert agent.closed, "the backend was stopped"


class EndsPastTheProof(AgentBackend):
    """A delta and the end in one burst, its own code running past the lease proof between them."""

    name = "ends-past-the-proof"

    def __init__(self, time: ManualTime) -> None:
        self.time = time

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        await self.time.sleep(0.01)
        yield s.TextDelta(text="held ")
        self.time.current += LEASE
        yield s.Completed()


async def test_a_burst_the_proof_no_longer_covers_never_ends_the_run_as_a_success():
    """Its events are dropped with the run: the client hears the run stop, not a success with a message whose start
    it never saw."""
    time = ManualTime()
    events = await stopped_by_the_proof(EndsPastTheProof(time), time)
    assert [e["type"] for e in events if e["type"].startswith(("RUN_", "TEXT_"))] == ["RUN_STARTED", "RUN_ERROR"], events


class LongBurstPastTheProof(AgentBackend):
    """A burst of deltas with no wait in it, its own code running past the lease proof partway through, then more
    deltas, a wait and the end."""

    name = "long-burst-past-the-proof"

    def __init__(self, time: ManualTime, before: int, after: int) -> None:
        self.time, self.before, self.after = time, before, after
        self.produced_after = 0

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        await self.time.sleep(0.01)
        for index in range(self.before):
            yield s.TextDelta(text=f"b{index} ")
        self.time.current += LEASE
        for index in range(self.after):
            self.produced_after += 1
            yield s.TextDelta(text=f"a{index} ")
        await self.time.sleep(0.01)
        yield s.Completed()


async def test_a_burst_whose_proof_runs_out_partway_shows_only_what_was_published_while_it_held():
    """The proof is asked as a burst begins and before each publish of it (every MAX_HELD events): what went out
    before the proof ran out stays shown, nothing after it is, and the backend is stopped within MAX_HELD events."""
    time = ManualTime()
    agent = LongBurstPastTheProof(time, before=MAX_HELD + 3, after=3 * MAX_HELD)
    events = await stopped_by_the_proof(agent, time)
    shown = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert 0 < len(shown) <= MAX_HELD and shown == [f"b{index} " for index in range(len(shown))], shown
    assert agent.produced_after <= MAX_HELD, f"the backend ran {agent.produced_after} deltas past the proof"
