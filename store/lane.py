"""One lane for a store's blocking file work: calls queued while the lane is busy run together, one after another,
in a single worker-thread hop, instead of one hop (and one loop wake-up) each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class IoLane:
    def __init__(self) -> None:
        self._queue: list[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def call(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` on the lane's worker thread; its result, or its exception raised here."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append((work, args, done))
        if self._task is None:
            self._task = asyncio.create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                outcomes = await asyncio.to_thread(_run_all, [(work, args) for work, args, _ in batch])
                for (_, _, done), (ok, value) in zip(batch, outcomes, strict=True):
                    if done.done():
                        continue
                    if ok:
                        done.set_result(value)
                    else:
                        done.set_exception(value)
        finally:
            self._task = None


def _run_all(batch: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[tuple[bool, Any]]:
    outcomes: list[tuple[bool, Any]] = []
    for work, args in batch:
        try:
            outcomes.append((True, work(*args)))
        except Exception as exc:  # noqa: BLE001 (handed, whatever it is, to the caller that queued it)
            outcomes.append((False, exc))
    return outcomes
