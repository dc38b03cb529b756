"""Busy threads: how soon a queued run starts after the run before it ended (THREADS.md §4).

Pairs of runs on one thread: the first (`/sleep 0.3`, one short text after a silence) on replica A, the second sent
with `AGUI-Multitask: enqueue` while the first runs, on A (same replica) or on B (across replicas, both on one
Redis). The gap is from the first run's RUN_FINISHED to the second's RUN_STARTED, as the two clients receive them;
median, p90 and worst of `--pairs` pairs each, on the file store (same replica only) and on Redis.

python -m bench.busy_threads [--pairs 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.support import Gateway, RedisServer  # noqa: E402


def body(thread: str, text: str) -> dict:
    message = {"id": "m-" + uuid.uuid4().hex[:8], "role": "user", "content": text}
    run = "r-" + uuid.uuid4().hex[:8]
    return {"threadId": thread, "runId": run, "state": {}, "messages": [message], "tools": [], "context": [], "forwardedProps": {}}


async def moment_of(client: httpx.AsyncClient, url: str, payload: dict, kind: str, headers: dict[str, str], sent: asyncio.Event) -> float:
    """When the client read the event `kind` of the run, on the loop's clock."""
    async with client.stream("POST", url + "/", json=payload, headers={"accept": "text/event-stream", **headers}) as response:
        sent.set()
        async for line in response.aiter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == kind:
                return time.perf_counter()
    raise RuntimeError(f"no {kind}")


async def gap(first: str, second: str) -> float:
    thread = "q-" + uuid.uuid4().hex[:10]
    async with httpx.AsyncClient(timeout=30) as client:
        opened = asyncio.Event()
        ended = asyncio.create_task(moment_of(client, first, body(thread, "/sleep 0.3"), "RUN_FINISHED", {}, opened))
        await opened.wait()
        await asyncio.sleep(0.05)  # the first run holds the thread
        queued = asyncio.Event()
        started = await moment_of(client, second, body(thread, "next"), "RUN_STARTED", {"AGUI-Multitask": "enqueue"}, queued)
        return started - await ended


async def measure(first: str, second: str, pairs: int) -> list[float]:
    await gap(first, second)  # warm both
    return [await gap(first, second) for _ in range(pairs)]


def report(name: str, gaps: list[float]) -> None:
    ordered = sorted(gaps)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    print(f"{name:<32} median {statistics.median(ordered) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   worst {ordered[-1] * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        from pathlib import Path

        root = Path(tmp)
        single = Gateway(root, "--store", "file", "--log-level", "warning").start()
        redis = RedisServer(root).start()
        a, b = (Gateway(root, "--store", redis.url, "--log-level", "warning").start() for _ in range(2))
        try:
            report("file, same replica", asyncio.run(measure(single.url, single.url, args.pairs)))
            report("redis, same replica", asyncio.run(measure(a.url, a.url, args.pairs)))
            report("redis, across replicas", asyncio.run(measure(a.url, b.url, args.pairs)))
        finally:
            for server in (single, a, b):
                server.stop()
            redis.stop()


if __name__ == "__main__":
    main()
