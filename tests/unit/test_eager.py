"""Eager starts: a coroutine that never waits is done in the caller's step with no task; one that waits goes on in a
task that resumes it where it stopped, takes a cancel into it, and keeps one context throughout."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from gateway.engine.eager import start_eagerly

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")


async def _answer_now(value: int) -> int:
    return value * 2


async def _refuse_now() -> int:
    raise LookupError("refused in the first step")


async def test_a_coroutine_that_never_waits_is_done_before_any_turn_of_the_loop():
    tasks_before = len(asyncio.all_tasks())
    answered = start_eagerly(_answer_now(21))
    assert answered.done() and answered.result() == 42
    assert len(asyncio.all_tasks()) == tasks_before, "no task was made"
    refused = start_eagerly(_refuse_now())
    assert refused.done()
    with pytest.raises(LookupError, match="first step"):
        refused.result()


async def test_a_coroutine_that_waits_goes_on_in_a_task_from_where_it_stopped():
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    steps: list[str] = []

    async def admit() -> str:
        steps.append("first")
        opened = await gate
        steps.append(f"then {opened}")
        await asyncio.sleep(0)  # a wait on a bare yield, as a task's own
        return "admitted " + opened

    admitting = start_eagerly(admit())
    assert steps == ["first"] and not admitting.done() and isinstance(admitting, asyncio.Task)
    gate.set_result("open")
    assert await asyncio.shield(admitting) == "admitted open"
    assert steps == ["first", "then open"]


async def test_a_cancel_reaches_the_coroutine_where_it_waits():
    cleaned: list[str] = []

    async def hold() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("released")

    holding = start_eagerly(hold())
    await asyncio.sleep(0)
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert cleaned == ["released"]


async def test_every_step_runs_in_one_copy_of_the_callers_context():
    async def mark() -> list[str]:
        seen = [SEEN.get()]
        SEEN.set("inside")
        await asyncio.sleep(0)
        seen.append(SEEN.get())  # the value set in the first step, in the task's steps too
        return seen

    assert await start_eagerly(mark()) == ["caller", "inside"]
    assert SEEN.get() == "caller", "the caller's own context is left alone"
