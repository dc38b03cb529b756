"""Start a coroutine at once, in the caller's step: its result with no task when it never waits, else a task that
goes on from its first wait (what Python 3.12's eager tasks do; the deployed image runs 3.11).

The engine admits a run this way on a store that answers at once (the memory store): no task, no shield and no turn
of the loop between the request and its first event; a call that waits after all goes on in a task of its own,
which its caller may shield as it would any task."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

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
    return loop.create_task(_go_on(_Resumed(coro, waiting_on)), context=context)


async def _go_on(resumed: _Resumed[T]) -> T:
    return await resumed


class _Resumed(Generic[T]):
    """The rest of a coroutine whose first step already ran and yielded `waiting_on` (the future it waits for):
    the task that awaits this sees that future, and sends or throws into the coroutine what the task is given."""

    __slots__ = ("_coro", "_waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, T], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, T]:
        coro, waiting_on = self._coro, self._waiting_on
        self._waiting_on = None
        step: Callable[[Any], Any]
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - a cancel (or anything thrown in) goes to the coroutine
                step, value = coro.throw, exc
            else:
                step, value = coro.send, sent
            try:
                waiting_on = step(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
