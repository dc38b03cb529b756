"""One lane for a store's blocking file work: a worker thread of its own runs the calls queued while it was busy
together, one after another, and answers their callers with one callback on the event loop. Calls made with
`join` that wait together become one call with all their items (group commit: one flush for all of them). The
thread ends after a second with nothing to do and starts again with the next call.

The thread is woken once per turn of the loop, at its end, for every call that turn queued: woken for each call,
it took the core from the loop at once (the two share it under load) and ran each call alone, a context switch
both ways and a flush apiece where the turn's calls could share one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
IDLE_SECONDS = 1.0

# A queued call: the work, its arguments (for a joined call: its one item), the caller's future, whether joined.
_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any], bool]


class IoLane:
    def __init__(self) -> None:
        self._queue: list[_Call] = []
        self._ready = threading.Condition()
        self._running = False  # a worker thread exists (it may be waiting for work)
        # The loop where a wake of the thread is due at the end of this turn (a test may run several loops: a
        # loop closed before its turn ended must not keep the next one from scheduling its own).
        self._wake_due: asyncio.AbstractEventLoop | None = None

    async def call(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` on the lane's thread; its result, or its exception raised here."""
        return await self._queue_call(work, args, joined=False)  # type: ignore[no-any-return]

    async def join(self, work: Callable[[list[Any]], list[Any]], item: Any) -> Any:
        """`item` handed to `work` with every other item joined to the same work while the lane was busy; `work`
        returns one result per item, in order, or raises, and then every item gets its exception."""
        return await self._queue_call(work, (item,), joined=True)

    def _queue_call(self, work: Callable[..., Any], args: tuple[Any, ...], *, joined: bool) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        with self._ready:
            self._queue.append((work, args, done, joined))
        if self._wake_due is not loop:
            self._wake_due = loop
            loop.call_soon(self._wake)
        return done

    def _wake(self) -> None:
        """The end of the turn: the thread takes every call queued meanwhile (started first if it had ended)."""
        self._wake_due = None
        with self._ready:
            if not self._queue:
                return
            if not self._running:
                self._running = True
                threading.Thread(target=self._work, name="agui-store-lane", daemon=True).start()
            else:
                self._ready.notify()

    def _work(self) -> None:
        while True:
            with self._ready:
                if not self._queue:
                    self._ready.wait(IDLE_SECONDS)
                if not self._queue:
                    self._running = False
                    return
                batch, self._queue = self._queue, []
            outcomes = _run_all(batch)
            for loop in {done.get_loop() for done, _, _ in outcomes}:  # one loop, but for tests that make several
                try:
                    loop.call_soon_threadsafe(_settle, outcomes)
                except RuntimeError:  # that loop was closed: nobody is waiting there any more
                    continue


def _run_all(batch: list[_Call]) -> list[tuple[asyncio.Future[Any], bool, Any]]:
    """Every call of the batch in order (joined calls at the place of the first of them)."""
    outcomes: list[tuple[asyncio.Future[Any], bool, Any]] = []
    joined: dict[Callable[..., Any], list[_Call]] = {}
    for call in batch:
        if call[3]:
            joined.setdefault(call[0], []).append(call)
    for work, args, done, is_joined in batch:
        if not is_joined:
            outcomes.extend(_outcome(work, args, [done], joined=False))
        elif work in joined:
            calls = joined.pop(work)
            outcomes.extend(_outcome(work, ([call[1][0] for call in calls],), [call[2] for call in calls], joined=True))
    return outcomes


def _outcome(
    work: Callable[..., Any], args: tuple[Any, ...], futures: list[asyncio.Future[Any]], *, joined: bool
) -> list[tuple[asyncio.Future[Any], bool, Any]]:
    try:
        result = work(*args)
        return [(futures[0], True, result)] if not joined else [(done, True, value) for done, value in zip(futures, result, strict=True)]
    except Exception as exc:  # noqa: BLE001 (handed, whatever it is, to the callers that queued it)
        return [(done, False, exc) for done in futures]


def _settle(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    loop = asyncio.get_running_loop()
    for done, ok, value in outcomes:
        if done.done() or done.get_loop() is not loop:
            continue
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)
