"""Memory a store keeps per thread beyond its state's encoding, at five state sizes, on the memory and file stores:
with exact bytes (store/kept.py) the figure is the same at every size; msgspec's working buffer makes it step.

Usage: python -m bench.kept_bytes [--threads 500]
Measured with tracemalloc in one process; the file store's I/O thread allocates beside it, so read the spread
across sizes over a few runs, never one figure alone.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import tempfile
import tracemalloc

import msgspec

from store.base import Admission
from store.file import FileStore
from store.memory import MemoryStore

SIZES = (7, 100, 150, 250, 400)  # workspace path lengths: states of about 0.7-1.1 KiB


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


async def kept_cost(kind: str, directory: str, cwd: str, threads: int) -> tuple[float, int]:
    """Bytes the store holds per admitted thread, and the size of one thread's state as JSON."""
    store = MemoryStore(600) if kind == "memory" else FileStore(directory, 600)
    try:
        await store.admit(admission(store, 0, cwd))  # first-call caches
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for index in range(1, threads + 1):
                await store.admit(admission(store, index, cwd))
            grown = (tracemalloc.get_traced_memory()[0] - before) / threads
        finally:
            tracemalloc.stop()
        document = await store.read_document(f"thread-{threads:06d}")
        assert document is not None
        return grown, len(msgspec.json.encode(document))
    finally:
        await store.close()


async def main(threads: int) -> None:
    for kind in ("memory", "file"):
        beyond = []
        with tempfile.TemporaryDirectory() as directory:
            for length in SIZES:
                grown, encoded = await kept_cost(kind, f"{directory}/{length}", "/workspace/" + "p" * length, threads)
                beyond.append(grown - encoded)
                print(f"{kind:6} state {encoded:5} bytes: {grown:7.0f} bytes a thread, {grown - encoded:6.0f} beyond its encoding")
        print(f"{kind:6} spread across sizes: {max(beyond) - min(beyond):.0f} bytes (exact bytes: a few; msgspec's buffer: hundreds)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=500)
    asyncio.run(main(parser.parse_args().threads))
