"""Per-thread locks for the stores whose transactions wait (the file store's lane): a lock exists only while it is
taken, and taking a free one is one dict insert, with no lock object, weak reference or Python frame of its own (a
run makes two transactions)."""

from __future__ import annotations

import asyncio
from collections import deque


class KeyedLocks:
    """One first-come-first-served lock per key. The release hands the lock to the next waiter directly, so nobody
    who comes later overtakes the queue."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[str, deque[asyncio.Future[None]] | None] = {}  # key -> its waiters (None: none yet)

    def __len__(self) -> int:
        return len(self._held)

    def take(self, key: str) -> asyncio.Future[None] | None:
        """None: the lock is taken. Else the turn to pass to `wait`: the lock is taken once it completes."""
        held = self._held
        if key not in held:
            held[key] = None
            return None
        queue = held[key]
        if queue is None:
            queue = held[key] = deque()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(turn)
        return turn

    async def wait(self, key: str, turn: asyncio.Future[None]) -> None:
        """Wait for the lock. A waiter cancelled after the lock was handed to it hands it on; one cancelled
        before stays in the queue as a cancelled turn, which the release skips."""
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(key)
            raise

    def release(self, key: str) -> None:
        queue = self._held[key]
        while queue:
            turn = queue.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        del self._held[key]
