"""Python's garbage collector set for a long-running server: what was built at start is frozen out of every
collection, and young objects are collected every 50,000 allocations instead of 700 (with older generations in
proportion), because a short run allocates thousands of objects and the default made full collections, which walk
every live object (thread states, streams, sockets), run many times a second under load (bench/NOTES.md has what
they cost)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from collections.abc import Callable
from typing import Protocol

THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    gc.collect()
    gc.freeze()  # the modules, the app and its routes: long-lived, never garbage
    gc.set_threshold(*THRESHOLDS)


TRIM_AFTER_BYTES = 8 * 1024 * 1024  # memory let go since the last trim that makes the next one worth its cost
TRIM_DELAY = 1.0  # seconds: the frees of one burst are trimmed together
# A full collection walks every live object: tens of milliseconds, the loop stopped, on a replica that keeps many
# ended runs' logs. Runs free themselves without it (no reference cycle outlives one), so it is only the net for
# rarer garbage in cycles, at most this often, and once after a burst on a server that then goes idle.
FULL_COLLECT_EVERY = 60.0


class Cancellable(Protocol):
    def cancel(self) -> None: ...


CallAt = Callable[[float, Callable[[], object]], Cancellable]


class MemoryReturn:
    """Gives the C allocator's free memory back to the system once a lot was let go (rings of ended runs, expired
    logs): glibc keeps freed heap memory for reuse, so an 11 MiB run once left its RSS behind for good. One
    `malloc_trim(0)` at most every TRIM_DELAY seconds, and none where the C library has no such call."""

    def __init__(self, now: Callable[[], float] | None = None, call_at: CallAt | None = None) -> None:
        # The running loop's clock and timers unless given (the unit tests step time by hand).
        self._now = now
        self._call_at = call_at
        self._pending = 0
        self._scheduled = False
        self._trim = _malloc_trim()
        self._collected_at = float("-inf")  # the loop's time of the last full collection
        self._collect_later: Cancellable | None = None

    def released(self, size: int) -> None:
        if self._trim is None:
            return
        self._pending += size
        if self._pending >= TRIM_AFTER_BYTES and not self._scheduled:
            self._scheduled = True
            self._at(self._time() + TRIM_DELAY, self._run)

    def _time(self) -> float:
        return self._now() if self._now is not None else asyncio.get_running_loop().time()

    def _at(self, when: float, callback: Callable[[], object]) -> Cancellable:
        return self._call_at(when, callback) if self._call_at is not None else asyncio.get_running_loop().call_at(when, callback)

    def _run(self) -> None:
        self._scheduled, self._pending = False, 0
        due = self._collected_at + FULL_COLLECT_EVERY
        if self._time() >= due:
            self._collect_and_trim()
            return
        if self._collect_later is None:  # what a cycle still holds is collected then, and given back
            self._collect_later = self._at(due, self._collect_and_trim)
        if self._trim is not None:  # (for mypy: released() schedules this only when there is one)
            self._trim(0)

    def _collect_and_trim(self) -> None:
        if self._collect_later is not None:
            self._collect_later.cancel()
            self._collect_later = None
        gc.collect()
        self._collected_at = self._time()
        if self._trim is not None:
            self._trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


RETURN = MemoryReturn()
