"""A store keeps each thread's state in bytes sized to what they hold: msgspec's `encode` hands back its working
buffer, up to half as much again, which a store kept for the thread's retention (store/kept.py)."""

from __future__ import annotations

import hashlib
import tracemalloc

import msgspec
import pytest

from store.base import Admission
from store.file import FileStore
from store.kept import KeptEncoder
from store.memory import MemoryStore

THREADS = 500


def admission(store: MemoryStore | FileStore, index: int, cwd: str) -> Admission:
    return Admission(
        thread_id=f"thread-{index:06d}",
        run_id=f"run-{index:06d}",
        digest=hashlib.sha256(str(index).encode()).hexdigest(),
        cwd=cwd,
        user_id=None,
        ros_invocation_id=f"invocation-{index:06d}",
        is_resume=False,
        new_execution_id=f"exec-{index:06d}",
        owner=store.owner_id,
    )


def test_encodings_are_the_encoders_own_and_none_rewrites_another():
    encoder = KeptEncoder(msgspec.json.Encoder())
    values = [{"text": "y" * size, "n": size} for size in (10, 700, 3000, 40)]
    assert [encoder.encode(value) for value in values] == [msgspec.json.encode(value) for value in values]


async def kept_cost(kind: str, directory: str, cwd: str) -> tuple[float, int]:
    """Memory the store holds per admitted thread, and the size of one thread's state."""
    store = MemoryStore(600) if kind == "memory" else FileStore(directory, 600)
    try:
        await store.admit(admission(store, 0, cwd))  # first-call caches
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for index in range(1, THREADS + 1):
                await store.admit(admission(store, index, cwd))
            grown = (tracemalloc.get_traced_memory()[0] - before) / THREADS
        finally:
            tracemalloc.stop()
        document = await store.read_document(f"thread-{THREADS:06d}")
        assert document is not None and document["binding"]["cwd"] == cwd
        return grown, len(msgspec.json.encode(document))
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_kept_state_grows_byte_for_byte_with_its_encoding(kind, tmp_path):
    """Exact bytes: what a thread costs beyond its encoding is the same whatever the state's size. msgspec's buffer
    grows in steps, so its bytes cost 50 to 470 bytes more than they hold depending on where the size falls."""
    beyond = []
    for length in (7, 100, 150, 250, 400):
        grown, encoded = await kept_cost(kind, str(tmp_path / str(length)), "/workspace/" + "p" * length)
        beyond.append(grown - encoded)
    assert max(beyond) - min(beyond) < 24, beyond
