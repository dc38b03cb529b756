"""Start a coroutine at once, in the caller's step: its result with no task when it never waits, else a task that
goes on from its first wait (what Python 3.12's eager tasks do; the deployed image runs 3.11).

The engine admits a run this way on a store that answers at once (the memory store): no task, no shield and no turn
of the loop between the request and its first event; a call that waits after all goes on in a task of its own,
which its caller may shield as it would any task."""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar, cast

T = TypeVar("T")


def start_eagerly(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """A future that is done when `coro` finished (or raised) without waiting, else the task that goes on with it.
    Its steps run in one copy of the caller's context, the first one included, as a task's would."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as stop:
        done = loop.create_future()
        done.set_result(stop.value)
        return done
    except Exception as exc:  # noqa: BLE001 - handed to the caller through the future, as a task would
        failed = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_go_on(coro, waiting_on), context=context)


async def _go_on(coro: Coroutine[Any, Any, T], waiting_on: Any) -> T:
    return cast(T, await resumed(coro, waiting_on))


@types.coroutine
def resumed(coro: Any, waiting_on: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine (or of an async generator's step) whose first step already ran and yielded
    `waiting_on`: the task that awaits this waits for that first, then goes on with the coroutine itself, whose
    later waits, sends and throws pass straight through (`yield from`: no frame of ours per wait). What the task
    throws in meanwhile (a cancel) goes to the coroutine. The task sends None after each wait, as asyncio's do."""
    while True:
        try:
            yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - a cancel (or anything thrown in) goes to the coroutine
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        return (yield from coro)
