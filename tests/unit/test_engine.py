"""The engine in process: a scripted backend, the memory store and a fake clock; no sockets, no sleeping."""

from __future__ import annotations

import asyncio
import gc
import json

import pytest

from gateway.agents import signals as s
from gateway.engine import Caller
from gateway.engine.logwriter import LogPolicy
from gateway.engine.run import Run
from gateway.errors import ErrorCode, GatewayError
from store import Admission, Lease, RenewResult, StoreUnavailable
from tests.unit.manual_time import ManualTime
from tests.unit.scripted import Harness, ScriptedAgent, body, collect, prepare_body, types

ASK = s.InputRequired(
    interrupts=[
        s.InterruptRequest(id="i1", reason="question", message="Which?", response_schema={"type": "object", "required": ["answer"]})
    ],
    checkpoint={"at": "ask"},
)


async def test_a_completed_turn_streams_balanced_events_and_records_the_end():
    agent = ScriptedAgent(
        [
            s.SessionInfo(task_id="task-1"),
            s.TextDelta(text="Hel"),
            s.TextDelta(text="lo"),
            s.Usage(input_tokens=1, output_tokens=2),
            s.Completed(result={"ok": 1}),
        ]
    )
    harness = Harness(agent)
    events = await harness.run(body())
    assert types(events) == [
        "RUN_STARTED",
        "CUSTOM",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[1]["value"]["taskId"] == "task-1"
    assert events[-1]["outcome"] == {"type": "success"} and events[-1]["result"] == {"ok": 1}
    assert events[-1]["usage"][0]["totalTokens"] == 3
    document = await harness.store.read_document("t1")
    assert document["active"] is None and document["history"][-1]["status"] == "completed"
    assert document["history"][-1]["task_id"] == "task-1"
    assert agent.requests[0].options.invocation_id == "inv-1" and agent.closed == 1
    assert harness.engine.in_flight == 0


async def test_an_interrupt_is_saved_with_the_store_clock_then_a_resume_is_accepted():
    agent = ScriptedAgent([s.StepStart(name="plan"), ASK], [s.TextDelta(text="ok"), s.Completed()])
    harness = Harness(agent, interrupt_ttl=60)
    first = await harness.run(body())
    interrupt = first[-1]["outcome"]["interrupts"][0]
    assert first[-1]["outcome"]["type"] == "interrupt" and interrupt["id"] == "i1"
    assert interrupt["expiresAt"] == "1970-01-12T13:47:40Z", "now (1,000,000 s on the fake clock) + 60 s"
    # The session event goes out before the backend's first event; the open step closes before RUN_FINISHED.
    assert types(first) == ["RUN_STARTED", "CUSTOM", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    resumed = await harness.run(body(None, run="r2", resume=[{"interruptId": "i1", "status": "resolved", "payload": {"answer": "x"}}]))
    assert types(resumed)[:2] == ["RUN_STARTED", "STEP_STARTED"], "the open step re-opens after RUN_STARTED"
    assert resumed[-1]["outcome"] == {"type": "success"}
    request = agent.requests[1]
    assert request.resume[0].payload == {"answer": "x"} and request.checkpoint == {"at": "ask"}
    document = await harness.store.read_document("t1")
    done = document["history"][-1]
    assert done["status"] == "completed" and list(done["applied"]) == ["i1"] and done["pending"] == []


async def test_interrupts_expire_on_the_fake_clock_and_the_backend_is_told():
    agent = ScriptedAgent([ASK])
    harness = Harness(agent, interrupt_ttl=60)
    await harness.run(body())
    harness.clock.advance(61)
    late = await harness.run(body(None, run="r2", resume=[{"interruptId": "i1", "status": "cancelled"}]))
    assert types(late) == ["RUN_STARTED", "RUN_ERROR"] and late[-1]["code"] == "EXECUTION_EXPIRED"
    assert len(agent.cancelled) == 1


async def test_a_resume_the_backend_never_accepted_keeps_the_interrupt_pending():
    agent = ScriptedAgent([ASK], [s.Failed(message="busy", code="A2A_UNAVAILABLE")], [s.Completed()])
    harness = Harness(agent)
    await harness.run(body())
    answer = [{"interruptId": "i1", "status": "resolved", "payload": {"answer": "x"}}]
    refused = await harness.run(body(None, run="r2", resume=answer))
    assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "A2A_UNAVAILABLE"
    document = await harness.store.read_document("t1")
    assert document["execution"]["status"] == "interrupted" and document["execution"]["pending"][0]["id"] == "i1"
    again = await harness.run(body(None, run="r3", resume=answer))
    assert again[-1]["outcome"] == {"type": "success"}


async def test_cancel_on_purpose_closes_spans_and_finishes_cancelled():
    hold = asyncio.Event()
    agent = ScriptedAgent([s.ToolStart(tool_call_id="c1", name="deploy"), hold, s.Completed()])
    harness = Harness(agent)
    handle = await harness.start(body())
    reader = asyncio.create_task(collect(handle))
    await asyncio.sleep(0)
    execution = (await harness.store.read_document("t1"))["execution"]["execution_id"]
    assert (await harness.engine.cancel("t1", execution, "inv-1")).value == "cancelled"
    events = await reader
    assert types(events) == ["RUN_STARTED", "CUSTOM", "TOOL_CALL_START", "TOOL_CALL_END", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "cancelled"


async def test_a_client_that_leaves_without_a_grace_window_cancels_the_backend_at_once():
    hold = asyncio.Event()
    agent = ScriptedAgent([s.TextDelta(text="a"), hold, s.Completed()])
    harness = Harness(agent)
    handle = await harness.start(body())
    stream = handle.events(30)
    first = await anext(stream)
    assert first is not None and json.loads(first[0][1])["type"] == "RUN_STARTED"
    seen = [json.loads(data)["type"] for batch in [first, await anext(stream)] if batch for _, data in batch]
    assert "TEXT_MESSAGE_CONTENT" in seen, seen  # the backend is running, held before its end
    await stream.aclose()  # the transport's consumer is gone
    for _ in range(20):
        if harness.engine.in_flight == 0:
            break
        await asyncio.sleep(0)
    assert harness.engine.in_flight == 0 and agent.closed == 1
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "cancelled"


async def test_a_client_that_leaves_after_reading_run_started_stops_the_run_before_the_backend_sees_it():
    """RUN_STARTED is published as the run is admitted: a client can read it and leave before the run's task first
    runs, and the backend then never gets the request."""
    agent = ScriptedAgent([s.TextDelta(text="a"), s.Completed()])
    harness = Harness(agent)
    stream = (await harness.start(body())).events(30)
    first = await anext(stream)  # no loop turn yet: the run's task has not run
    assert first is not None and [json.loads(data)["type"] for _, data in first] == ["RUN_STARTED"]
    await stream.aclose()
    for _ in range(20):
        if harness.engine.in_flight == 0:
            break
        await asyncio.sleep(0)
    assert harness.engine.in_flight == 0 and agent.requests == []
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "cancelled"


async def test_a_backend_that_raises_is_a_failed_run_not_a_crash():
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), ConnectionResetError("gone")]))
    events = await harness.run(body())
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "A2A_UNAVAILABLE"
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "failed"


async def test_admission_refusals_are_contract_errors_before_any_event():
    harness = Harness(ScriptedAgent([s.Completed()]))
    await harness.run(body())
    with pytest.raises(GatewayError) as duplicate:
        await harness.start(body())
    assert duplicate.value.code is ErrorCode.DUPLICATE_RUN_ID
    capped = Harness(ScriptedAgent([asyncio.Event()]), max_runs=1)
    await capped.start(body())
    with pytest.raises(GatewayError) as quota:
        await capped.start(body(thread="t2"))
    assert quota.value.code is ErrorCode.SERVICE_QUOTA_EXCEEDED


async def test_a_lost_lease_ends_the_run_with_execution_lost():
    time = ManualTime()
    hold = asyncio.Event()
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), hold]), lease_seconds=3, timers=time)
    handle = await harness.start(body())
    reader = asyncio.create_task(collect(handle))
    harness.clock.advance(4)  # the store's lease ran out; another replica's admission reaps it and takes the thread
    other = Admission("t1", "r9", "d", "/tmp", None, "inv-1", False, "exec-other", "replica-b")
    assert (await harness.store.admit(other)).fence == 2
    await time.advance(1)  # the next renewal (every third of the lease), well within the owner's proof
    events = await reader
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "EXECUTION_LOST"


async def test_a_cancel_intent_seen_at_renewal_cancels_the_run():
    time = ManualTime()
    hold = asyncio.Event()
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), hold]), lease_seconds=3, timers=time)
    handle = await harness.start(body())
    reader = asyncio.create_task(collect(handle))
    await asyncio.sleep(0)
    execution = (await harness.store.read_document("t1"))["execution"]["execution_id"]
    await harness.store.cancel("t1", execution, "inv-1")  # the intent only, as another replica records it
    await time.advance(1)
    events = await reader
    assert events[-1]["outcome"] == {"type": "cancelled"}


async def test_a_renewal_in_flight_when_the_run_finishes_does_not_turn_success_into_a_loss():
    """Issue: a renewal answered "not ok" because the run had just released its lease ended the run as lost."""
    time = ManualTime()
    finish = asyncio.Event()
    renewing = asyncio.Event()

    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), finish, s.Completed()]), lease_seconds=3, timers=time)
    real_renew = harness.store.renew

    async def slow_renew(lease: Lease) -> RenewResult:
        renewing.set()
        await time.sleep(0.01)  # the run finishes meanwhile and releases its lease
        return await real_renew(lease)

    harness.store.renew = slow_renew  # type: ignore[method-assign]
    handle = await harness.start(body())
    reader = asyncio.create_task(collect(handle))
    await time.advance(1)
    await renewing.wait()
    finish.set()
    await time.run_until(reader, step=0.005)
    events = reader.result()
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "completed"


async def test_principals_naming_the_same_thread_reach_different_threads():
    agent = ScriptedAgent([ASK], [s.Completed()], [s.Completed()])
    harness = Harness(agent)
    alice, mallory = Caller(owner="oauth:iss:sub:alice", user_id="alice"), Caller(owner="oauth:iss:sub:mallory", user_id="mallory")
    await collect(await harness.engine.start(prepare_body(body()), alice))
    answer = [{"interruptId": "i1", "status": "resolved", "payload": {"answer": "x"}}]
    stolen = await collect(await harness.engine.start(prepare_body(body(None, run="r2", resume=answer)), mallory))
    assert stolen[-1]["code"] == "UNKNOWN_INTERRUPT" and len(agent.requests) == 1, "the backend never saw her answer"
    own = await collect(await harness.engine.start(prepare_body(body(run="r3")), mallory))
    assert own[-1]["outcome"] == {"type": "success"} and own[0]["threadId"] == "t1"
    assert agent.requests[1].thread_id != "t1", "the backend sees the scoped key, so contexts never collide"
    mine = await collect(await harness.engine.start(prepare_body(body(None, run="r4", resume=answer)), alice))
    assert mine[-1]["outcome"] == {"type": "success"}
    with pytest.raises(GatewayError) as wrong_user:
        await harness.engine.start(prepare_body(body(run="r5", user="alice")), mallory)
    assert wrong_user.value.code is ErrorCode.ACCESS_DENIED


async def test_the_end_of_a_run_is_recorded_even_when_the_store_is_busy_at_first():
    time = ManualTime()
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), s.Completed()]), timers=time)
    real_finish, failures = harness.store.finish_run, [2]

    async def busy_then_fine(lease, status, progress):
        if failures[0]:
            failures[0] -= 1
            raise StoreUnavailable("redis: every connection stayed busy")
        await real_finish(lease, status, progress)

    harness.store.finish_run = busy_then_fine  # type: ignore[method-assign]
    running = asyncio.ensure_future(harness.run(body()))
    await time.run_until(running, step=0.05)  # the retries' backoff: 0.05 s, then 0.1 s
    events = running.result()
    assert events[-1]["outcome"] == {"type": "success"} and failures[0] == 0
    document = await harness.store.read_document("t1")
    assert document["active"] is None and document["history"][-1]["status"] == "completed"


async def _batches(handle) -> list[list[str]]:
    """The types of the events of each batch a follower was given (heartbeats left out)."""
    return [[json.loads(data)["type"] for _, data in batch] async for batch in handle.events(30) if batch]


def _waiting_store(harness: Harness, failures: int = 0) -> None:
    """The harness's store as the file and Redis stores are: recording a run's end takes a turn of the loop at
    least (it may fail `failures` times first)."""
    real_finish, left = harness.store.finish_run, [failures]

    async def finish_later(lease, status, progress):
        await asyncio.sleep(0)
        if left[0]:
            left[0] -= 1
            raise StoreUnavailable("redis: every connection stayed busy")
        await real_finish(lease, status, progress)

    harness.store.answers_at_once = False  # type: ignore[misc]
    harness.store.finish_run = finish_later  # type: ignore[method-assign]


async def test_on_a_store_that_waits_a_runs_last_events_leave_with_its_end():
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), s.TextDelta(text="b"), s.Completed()]))
    _waiting_store(harness)
    batches = await _batches(await harness.start(body()))
    assert batches[0] == ["RUN_STARTED"]
    # The backend's events and the terminal ones (the session event, the message's end, RUN_FINISHED) in one batch.
    assert batches[1:] == [
        ["CUSTOM", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    ]


async def test_on_a_store_that_waits_an_interrupts_last_events_leave_with_its_end():
    harness = Harness(ScriptedAgent([s.StepStart(name="plan"), ASK]))
    real_save = harness.store.save_interrupt

    async def save_later(*args, **kwargs):
        await asyncio.sleep(0)
        await real_save(*args, **kwargs)

    harness.store.answers_at_once = False  # type: ignore[misc]
    harness.store.save_interrupt = save_later  # type: ignore[method-assign]
    batches = await _batches(await harness.start(body()))
    assert batches[0] == ["RUN_STARTED"]
    assert len(batches) == 2 and "STEP_STARTED" in batches[-1] and batches[-1][-1] == "RUN_FINISHED"


async def test_a_store_that_fails_the_end_does_not_hold_the_runs_events_through_the_retries():
    time = ManualTime()
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), s.Completed()]), timers=time)
    _waiting_store(harness, failures=2)
    reading = asyncio.ensure_future(_batches(await harness.start(body())))
    await time.run_until(reading, step=0.05)
    batches = reading.result()
    assert batches[-1][-1] == "RUN_FINISHED" and "TEXT_MESSAGE_CONTENT" not in batches[-1], "the end, once recorded"
    assert "TEXT_MESSAGE_CONTENT" in [kind for batch in batches[:-1] for kind in batch], "the text went out meanwhile"
    document = await harness.store.read_document("t1")
    assert document["history"][-1]["status"] == "completed"


async def test_a_defect_while_settling_still_ends_the_stream_with_an_internal_error():
    harness = Harness(ScriptedAgent([s.TextDelta(text="a"), s.Completed()]))

    async def broken(lease, status, progress):
        raise RuntimeError("a defect of ours, not a store failure")

    harness.store.finish_run = broken  # type: ignore[method-assign]
    events = await harness.run(body())
    assert types(events)[0] == "RUN_STARTED" and events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "INTERNAL_ERROR", "the client is told, never left waiting"
    assert harness.engine.in_flight == 0


async def test_a_run_stopped_before_its_task_starts_still_settles_and_frees_the_thread():
    agent = ScriptedAgent([s.Completed()], [s.Completed()])
    harness = Harness(agent)
    handle = await harness.start(body())
    handle.cancel()  # before the run's task had its first step
    events = await collect(handle)
    assert types(events)[0] == "RUN_STARTED" and events[-1]["outcome"] == {"type": "cancelled"}
    assert agent.requests == [], "the backend never saw the run"
    assert harness.engine.in_flight == 0
    assert (await harness.store.read_document("t1"))["history"][-1]["status"] == "cancelled"
    assert (await harness.run(body(run="r2")))[-1]["outcome"] == {"type": "success"}, "the thread is free"


async def test_a_caller_that_leaves_during_admission_leaves_no_orphan_lease():
    harness = Harness(ScriptedAgent([s.Completed()]))
    gate, real_admit = asyncio.Event(), harness.store.admit

    async def slow_admit(admission):
        await gate.wait()
        return await real_admit(admission)

    harness.store.admit = slow_admit  # type: ignore[method-assign]
    caller = asyncio.create_task(harness.start(body()))
    await asyncio.sleep(0)
    caller.cancel()  # e.g. its WebSocket closed while the store was admitting it
    with pytest.raises(asyncio.CancelledError):
        await caller
    gate.set()
    for _ in range(50):
        document = await harness.store.read_document("t1")
        if document is not None and document["active"] is None:
            break
        await asyncio.sleep(0)
    assert document["active"] is None and document["history"][-1]["status"] == "cancelled"
    assert harness.engine.in_flight == 0


@pytest.mark.parametrize("lease_seconds", [None, 3.0], ids=["no-renewals", "lease-keeper"])
async def test_a_closed_run_is_freed_at_once_not_left_to_the_cyclic_collector(lease_seconds):
    """A run and its writer (and its lease keeper's callbacks) held each other: every ended run, with its task and
    input, waited for Python's cyclic collector, whose passes over them paused the loop for tens of milliseconds."""
    gc.collect()
    earlier = [o for o in gc.get_objects() if type(o) is Run]  # another test's run still under way (its own loop's)
    gc.disable()  # unreachable objects stay listed by gc.get_objects() until a collection
    try:
        turn = [s.TextDelta(text="a"), s.Completed()]
        harness = Harness(ScriptedAgent(turn, turn, turn), lease_seconds=lease_seconds, log_policy=LogPolicy())
        for run in ("r1", "r2", "r3"):
            events = await harness.run(body(run=run))
            assert events[-1]["type"] == "RUN_FINISHED"
        for _ in range(20):  # the last run's task closes it after its terminal event
            if harness.engine.in_flight == 0:
                break
            await asyncio.sleep(0)
        assert harness.engine.in_flight == 0
        harness.agent.requests.clear()  # the scripted agent keeps each request it was given, and so its run
        assert [o for o in gc.get_objects() if type(o) is Run and not any(o is run for run in earlier)] == []
    finally:
        gc.enable()


def _ask(*ids: str, schema: dict | None = None) -> s.InputRequired:
    return s.InputRequired(interrupts=[s.InterruptRequest(id=i, reason="question", message="?", response_schema=schema or {}) for i in ids])


@pytest.mark.parametrize(
    ("ask", "said"),
    [
        (_ask("same", "same"), "names an earlier interrupt"),
        (_ask("x" * 1000), "1 to 256 characters"),
        (_ask(), "asked for 0 interrupts"),
        (_ask(*(f"i{n}" for n in range(101))), "asked for 101 interrupts"),
        (_ask("i1", schema={"type": 5}), "is not a JSON Schema"),
    ],
)
async def test_an_interrupt_no_resume_could_answer_ends_the_run_and_leaves_the_thread_free(ask, said):
    """Refused at the source: nothing is saved as pending, and the thread takes its next run at once."""
    agent = ScriptedAgent([ask], [s.TextDelta(text="next"), s.Completed()])
    harness = Harness(agent)
    events = await harness.run(body())
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "AGENT_PROTOCOL_ERROR", events[-1]
    assert said in events[-1]["message"], events[-1]["message"]
    document = await harness.store.read_document("t1")
    assert document["active"] is None and document["history"][-1]["pending"] == []
    after = await harness.run(body(run="r2"))
    assert after[-1]["type"] == "RUN_FINISHED" and after[-1]["outcome"] == {"type": "success"}


async def _until(condition, turns: int = 1000) -> None:
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_the_live_runs_memory_budget_refuses_new_runs_and_cuts_the_run_over_its_share():
    """Budget 50 KB: B holds 45 KB and waits, A adds 11 KB (under its share of two: 25 KB) and passes the budget. A new
    run is refused with 429 SERVICE_QUOTA_EXCEEDED; B, over its share, is cut at its next step; A finishes."""
    b_waits, a_waits = asyncio.Event(), asyncio.Event()
    kilobyte = "k" * 1000
    big = [s.TextDelta(text=kilobyte) for _ in range(40)]  # with their frames and EVENT_OVERHEAD, about 45 KB
    small = [s.TextDelta(text=kilobyte) for _ in range(10)]
    agent = ScriptedAgent(
        [*big, b_waits, s.TextDelta(text="more"), s.Completed()],
        [*small, a_waits, s.Completed()],
        [s.TextDelta(text="room again"), s.Completed()],
    )
    harness = Harness(agent, max_live_bytes=50_000)
    live = harness.engine.live
    b = asyncio.create_task(collect(await harness.start(body(thread="tB", run="rB"))))
    await _until(lambda: live.used > 44_000)
    a = asyncio.create_task(collect(await harness.start(body(thread="tA", run="rA"))))
    await _until(lambda: live.used > 50_000)
    assert live.full and live.rings == 2
    with pytest.raises(GatewayError) as refused:
        await harness.start(body(thread="tC", run="rC"))
    assert refused.value.code is ErrorCode.SERVICE_QUOTA_EXCEEDED and "--max-live-run-bytes" in (refused.value.detail or "")
    b_waits.set()
    cut = await b
    assert cut[-1]["type"] == "RUN_ERROR" and cut[-1]["code"] == "SERVICE_QUOTA_EXCEEDED", cut[-1]
    assert "more than its share" in cut[-1]["message"]
    a_waits.set()
    finished = await a
    assert finished[-1]["type"] == "RUN_FINISHED", finished[-1]
    await _until(lambda: live.rings == 0)
    assert live.used == 0, "every ring gave its charge back"
    again = await harness.run(body(thread="tC", run="rC2"))
    assert again[-1]["type"] == "RUN_FINISHED"


async def test_with_no_budget_the_account_is_kept_and_nothing_is_cut():
    agent = ScriptedAgent([*(s.TextDelta(text="k" * 1000) for _ in range(100)), s.Completed()])
    harness = Harness(agent)
    events = await harness.run(body())
    assert events[-1]["type"] == "RUN_FINISHED" and harness.engine.live.limit == 0
    await _until(lambda: harness.engine.live.rings == 0)
    assert harness.engine.live.used == 0
