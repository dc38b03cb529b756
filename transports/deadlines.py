"""Per-request deadlines (a request head's, a body's) kept by one sweeping task per loop and length, not a timer each.

asyncio keeps a cancelled timer in its heap until the time it was set for, with its context and its callback:
with a timer each, a 10-second head deadline met in a millisecond, and a 30-second body
deadline, would stay held that long after every request (what a burst of new streams pays on top of their own
memory), and each would cost a heap push. Here a deadline is an entry in an insertion-ordered dict: the same length for all of them means arrival order
is deadline order, so the sweep looks only at the front; meeting a deadline removes its entry at once. A deadline
fires at most one tick (an eighth of its length, at most TICK) late."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger("agui.deadlines")
TICK = 0.25  # the longest time between two looks at the due deadlines, in seconds


class Deadlines:
    """Deadlines of one length (`seconds`) on one event loop. `clock` and `sleep` are the loop's own unless given
    (the unit tests step them by hand)."""

    __slots__ = ("_clock", "_due", "_sleep", "_task", "_tick", "seconds")

    def __init__(
        self, seconds: float, *, clock: Callable[[], float] | None = None, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
    ) -> None:
        # No reference to the loop: the registry below is weak in its loop, which a value holding it would defeat.
        self.seconds = seconds
        self._tick = min(TICK, seconds / 8)
        self._clock = clock  # None: the running loop's time
        self._sleep = sleep
        self._due: dict[Hashable, tuple[float, Callable[[], object]]] = {}  # key -> (when, what to call then)
        self._task: asyncio.Task[None] | None = None

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def add(self, key: Hashable, expire: Callable[[], object]) -> None:
        """Call `expire` once `seconds` have passed, unless `discard(key)` comes first (a key has one deadline)."""
        self._due.pop(key, None)  # a key added again goes to the back, where its new deadline belongs
        self._due[key] = (self._now() + self.seconds, expire)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._sweep(), name=f"deadlines:{self.seconds:g}s")

    def discard(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def __len__(self) -> int:
        return len(self._due)

    async def _sweep(self) -> None:
        due = self._due
        try:
            while due:
                await self._sleep(self._tick)
                now = self._now()
                while due:
                    key = next(iter(due))
                    when, expire = due[key]
                    if when > now:
                        break
                    del due[key]
                    try:
                        expire()
                    except Exception:  # one failing expiry must not stop the others
                        log.exception("a deadline's expiry failed")
        finally:
            self._task = None


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, Deadlines]] = weakref.WeakKeyDictionary()
_last: tuple[asyncio.AbstractEventLoop | None, dict[float, Deadlines]] = (None, {})  # the last loop asked for: a weak
# dictionary's lookup makes a weak reference each time, and this is asked for several times per request


def install(found: Deadlines) -> None:
    """Make `found` the running loop's deadlines of its length."""
    deadlines(found.seconds)  # the loop's registry exists
    _last[1][found.seconds] = found


def deadlines(seconds: float) -> Deadlines:
    """The running loop's deadlines of this length (each loop has its own: tests run servers on several)."""
    global _last
    loop = asyncio.get_running_loop()
    if _last[0] is loop:
        lengths = _last[1]
    else:
        lengths = _by_loop.get(loop) or _by_loop.setdefault(loop, {})
        _last = (loop, lengths)
    found = lengths.get(seconds)
    if found is None:
        found = lengths[seconds] = Deadlines(seconds)
    return found
