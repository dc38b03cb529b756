"""The event log's cost and its cross-replica follow latency, side by side in one run.

Usage: python -m bench.eventlog [--events 100000] [--rounds 3]
1. `/flood` events/s with the log on vs off (`--max-reattach-grace-seconds 0`) on the memory store, at C=1 and
   C=50 (target: on >= 0.9x off), and on Redis vs memory at C=50 (target >= 0.6x).
2. Two replicas on one Redis: 50 concurrent `/slow 4` runs on A, each followed from B with the attach GET; for
   every event, how much later B's follower got it than A's own client (target p99 <= 50 ms).
Needs `redis-server` on PATH (a private instance on a free port is started).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import tempfile
import time

import httpx

from bench.flood import body, free_port, gateway_command, measure, spawn
from bench.store_bench import start_redis


def gateway(state_dir: str, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn(gateway_command(port, state_dir, *extra), port, "/ping")


async def _timed_lines(response: httpx.Response, stamps: dict[str, float]) -> None:
    buffer = b""
    async for chunk in response.aiter_raw():
        now = time.perf_counter()
        buffer += chunk
        while b"\n\n" in buffer:
            record, buffer = buffer.split(b"\n\n", 1)
            if record.startswith(b"id: "):
                stamps.setdefault(record[4 : record.index(b"\n")].decode(), now)


async def _followed_run(client: httpx.AsyncClient, owner: str, follower: str, delay: float) -> list[float]:
    await asyncio.sleep(delay)  # runs start spread over a second, as real ones do, not in lockstep
    run = body(0)
    run["messages"][0]["content"] = "/slow 4"
    own: dict[str, float] = {}
    seen: dict[str, float] = {}
    url = f"{follower}/threads/{run['threadId']}/runs/{run['runId']}/events?rosInvocationId=bench"
    async with client.stream("POST", owner + "/", json=run, headers={"accept": "text/event-stream"}) as response:
        reading = asyncio.create_task(_timed_lines(response, own))
        await asyncio.sleep(0.3)  # the log exists once the run has written its first events
        async with client.stream("GET", url) as follow:
            assert follow.status_code == 200, await follow.aread()
            attached = time.perf_counter()
            await _timed_lines(follow, seen)
        await reading
    # Only events written after the follower was live: the earlier ones are a replay, not a follow.
    return [seen[p] - own[p] for p in own if p in seen and own[p] > attached + 0.05]


async def follow_latency(owner: str, follower: str, runs: int) -> list[float]:
    limits = httpx.Limits(max_connections=4 * runs)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        spread = random.Random(1)
        delays = await asyncio.gather(*(_followed_run(client, owner, follower, spread.random()) for _ in range(runs)))
    return [delay for run in delays for delay in run]


def rates(urls: dict[str, str], events: int, streams: int, rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            samples[name].append(asyncio.run(measure(url, events, streams)))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        redis, redis_port = start_redis(state)  # waits until it answers
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        procs = {
            "log on": gateway(os.path.join(state, "a"), "--store", "memory"),
            "log off": gateway(os.path.join(state, "b"), "--store", "memory", "--max-reattach-grace-seconds", "0"),
            "redis": gateway(os.path.join(state, "c"), "--store", redis_url, "--redis-max-connections", "64"),
        }
        urls = {name: url for name, (_, url) in procs.items()}
        try:
            single = rates({k: urls[k] for k in ("log on", "log off")}, args.events, 1, args.rounds)
            fifty = rates(urls, args.events, 50, args.rounds)
            follower = gateway(os.path.join(state, "d"), "--store", redis_url)
            try:
                delays = sorted(asyncio.run(follow_latency(urls["redis"], follower[1], 50)))
            finally:
                follower[0].terminate()
        finally:
            for proc, _ in procs.values():
                proc.terminate()
            redis.terminate()
    print(f"/flood {args.events} events, median of {args.rounds} rounds (events/s):")
    print(
        f"  C=1   log on {single['log on']:>10,.0f}   log off {single['log off']:>10,.0f}   on/off = {single['log on'] / single['log off']:.2f}x (>= 0.9x)"
    )
    print(
        f"  C=50  log on {fifty['log on']:>10,.0f}   log off {fifty['log off']:>10,.0f}   on/off = {fifty['log on'] / fifty['log off']:.2f}x (>= 0.9x)"
    )
    print(
        f"  C=50  redis  {fifty['redis']:>10,.0f}   memory  {fifty['log on']:>10,.0f}   redis/memory = {fifty['redis'] / fifty['log on']:.2f}x (>= 0.6x)"
    )
    if delays:
        p50, p99 = delays[len(delays) // 2], delays[min(len(delays) - 1, int(len(delays) * 0.99))]
        print(f"follower on another replica, 50 runs, {len(delays)} events: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms (<= 50 ms)")


if __name__ == "__main__":
    main()
