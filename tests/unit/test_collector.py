"""The memory given back after large frees: a trim each time, a full collection at most once a window and once
after a burst (real garbage collections, counted through gc.callbacks; the C library's real trim, counted)."""

from __future__ import annotations

import gc

import pytest

from gateway import collector
from tests.unit.manual_time import ManualTime


@pytest.fixture
def full_collections():
    seen: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(count)
    gc.disable()  # only the collections asked for are counted
    try:
        yield seen
    finally:
        gc.enable()
        gc.callbacks.remove(count)


async def test_trims_every_time_and_collects_at_most_once_a_window(monkeypatch, full_collections):
    monkeypatch.setattr(collector, "TRIM_DELAY", 0.01)
    monkeypatch.setattr(collector, "FULL_COLLECT_EVERY", 0.3)
    time = ManualTime()
    memory = collector.MemoryReturn(time.now, time.call_at)
    if memory._trim is None:
        pytest.skip("this C library has no malloc_trim")
    trims: list[int] = []
    real_trim = memory._trim
    memory._trim = lambda pad: (trims.append(pad), real_trim(pad))[1]

    memory.released(collector.TRIM_AFTER_BYTES)
    await time.advance(0.05)
    assert (len(trims), len(full_collections)) == (1, 1), "the first burst: collected, then trimmed"

    memory.released(collector.TRIM_AFTER_BYTES)
    await time.advance(0.05)
    assert (len(trims), len(full_collections)) == (2, 1), "within the window: trimmed only"

    await time.advance(0.35)
    assert (len(trims), len(full_collections)) == (3, 2), "the idle server's collection came at the window's end"

    memory.released(collector.TRIM_AFTER_BYTES - 1)
    await time.advance(0.05)
    assert len(trims) == 3, "less than the threshold let go: nothing to do"
