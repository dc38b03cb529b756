"""Conversations kept on the server: what a join of a long thread costs, and what threads cost to keep.

- Hydration: a thread of about 1,000 messages (about 1 MiB), joined (`GET /threads/{id}/events`) again and again;
  the time to the stream's last byte (the snapshot, then RUN_FINISHED), median and p90, per store.
- Bytes: 1,000 threads of 20 typical messages each (one run whose input holds 19), on Redis (`used_memory`) and on
  the file store (the journal's size after a compaction's worth of writes), with the conversation kept
  (`--thread-history plain`) and without (`off`): the difference is what conversations cost.

python -m bench.threads [--threads 1000] [--joins 30]
"""

from __future__ import annotations

import argparse
import asyncio
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

WORDS = [
    "the",
    "gateway",
    "keeps",
    "every",
    "message",
    "of",
    "a",
    "thread",
    "so",
    "a",
    "page",
    "that",
    "reloads",
    "shows",
    "the",
    "whole",
    "conversation",
    "again",
]


def text(size: int, seed: int) -> str:
    out, index = [], seed
    while sum(map(len, out)) + len(out) < size:
        out.append(WORDS[index % len(WORDS)])
        index += 7
    return " ".join(out)


def conversation(count: int, size: int) -> list[dict]:
    return [{"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text(size, i)} for i in range(count - 1)] + [
        {"id": f"m{count - 1}", "role": "user", "content": "and now?"}
    ]


def body(thread: str, messages: list[dict]) -> dict:
    return {
        "threadId": thread,
        "runId": "r-" + uuid.uuid4().hex[:8],
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def seed(url: str, threads: int, messages: list[dict]) -> None:
    limits = asyncio.Semaphore(20)
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(index: int) -> None:
            async with limits:
                response = await client.post(url + "/", json=body(f"t{index:06d}", messages), headers={"accept": "text/event-stream"})
                assert response.status_code == 200 and b"RUN_FINISHED" in response.content, response.text[:200]

        await asyncio.gather(*(one(i) for i in range(threads)))


def hydration(url: str, joins: int) -> tuple[float, float, int]:
    with httpx.Client(timeout=60) as client:
        response = client.post(url + "/", json=body("long", conversation(1000, 1000)), headers={"accept": "text/event-stream"})
        assert response.status_code == 200
        took, size = [], 0
        for _ in range(joins):
            started = time.perf_counter()
            joined = client.get(url + "/threads/long/events", headers={"accept": "text/event-stream"})
            took.append(time.perf_counter() - started)
            size = len(joined.content)
            assert joined.status_code == 200 and b"MESSAGES_SNAPSHOT" in joined.content
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--joins", type=int, default=30)
    args = parser.parse_args()
    import redis

    with tempfile.TemporaryDirectory() as work:
        redis_server = RedisServer(work).start()
        try:
            print("hydration of a thread of 1,000 messages (time to the last byte)")
            for store in ("memory", "file", redis_server.url):
                gateway = Gateway(_Dir(work), "--store", store, "--log-level", "warning").start()
                try:
                    p50, p90, size = hydration(gateway.url, args.joins)
                finally:
                    gateway.stop()
                print(f"  {store.split('://')[0]:7s} p50 {p50 * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  ({size / 1024:.0f} KiB)")
            print(f"bytes per {args.threads} threads of 20 messages (19 in the input, the agent's answer)")
            typical = conversation(19, 160)
            direct = redis.Redis.from_url(redis_server.url)
            for mode in ("off", "plain"):
                direct.flushall()
                before = direct.info("memory")["used_memory"]
                gateway = Gateway(_Dir(work), "--store", redis_server.url, "--thread-history", mode, "--log-level", "warning").start()
                try:
                    asyncio.run(seed(gateway.url, args.threads, typical))
                finally:
                    gateway.stop()
                grown = direct.info("memory")["used_memory"] - before
                print(f"  redis --thread-history {mode:5s} {grown / 1024:9.0f} KiB ({grown / args.threads:6.0f} B a thread)")
            for mode in ("off", "plain"):
                gateway = Gateway(_Dir(work), "--thread-history", mode, "--log-level", "warning").start()
                try:
                    asyncio.run(seed(gateway.url, args.threads, typical))
                finally:
                    gateway.stop()
                journal = os.path.getsize(os.path.join(gateway.state_dir, "threads.journal"))
                events = sum(
                    os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(gateway.state_dir, "events")) for f in fs
                )
                print(f"  file  --thread-history {mode:5s} journal {journal / 1024:9.0f} KiB, event logs {events / 1024:7.0f} KiB")
        finally:
            redis_server.stop()


class _Dir(str):
    """A directory as the tests' Gateway takes it (`tmp_path / name`)."""

    def __truediv__(self, name: str) -> str:
        return os.path.join(self, name)


if __name__ == "__main__":
    main()
