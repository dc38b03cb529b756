"""Runs per second and time to RUN_STARTED with the Redis store versus the memory store, on one and two replicas,
the cost of `--redis-durability replicated` (a replica Redis attached), and the Redis round trips per run.

Usage: python -m bench.store_bench [--runs 2000] [--concurrency 16]
Starts its own redis-server on a free loopback port. Each run is a short plain-text turn on its own thread.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid

import httpx
import redis

from bench.flood import body, free_port, gateway_command, spawn


def start_redis(directory: str, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            shutil.which("redis-server"),
            *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def start_gateways(store: str, count: int, state_dir: str, *extra: str) -> list[tuple[subprocess.Popen, str]]:
    servers = []
    for _ in range(count):
        port = free_port()
        servers.append(spawn(gateway_command(port, state_dir, "--store", store, *extra), port, "/ping"))
    return servers


async def one_run(client: httpx.AsyncClient, url: str) -> float:
    payload = body(0)
    payload["messages"][0]["content"] = "hello"
    payload["threadId"] = "bench-" + uuid.uuid4().hex
    started = time.perf_counter()
    first = None
    async with client.stream("POST", url + "/", json=payload) as response:
        assert response.status_code == 200, response.status_code
        async for chunk in response.aiter_raw():
            if first is None and b"RUN_STARTED" in chunk:
                first = time.perf_counter() - started
    return first if first is not None else time.perf_counter() - started


async def load(urls: list[str], runs: int, concurrency: int) -> tuple[float, float]:
    latencies: list[float] = []
    counter = iter(range(runs))

    async def worker(index: int) -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            url = urls[index % len(urls)]
            for _ in counter:
                latencies.append(await one_run(client, url))

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    return runs / elapsed, statistics.median(latencies) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        redis_proc, port = start_redis(directory)
        replica_dir = tempfile.mkdtemp(dir=directory)
        replica_proc, _ = start_redis(replica_dir, "--replicaof", "127.0.0.1", str(port))
        db = redis.Redis(port=port)
        configs = [("memory", 1), ("redis", 1), ("replicated", 1), ("redis", 2)]
        try:
            for kind, replicas in configs:
                store = "memory" if kind == "memory" else f"redis://127.0.0.1:{port}/0"
                extra = ("--redis-durability", "replicated") if kind == "replicated" else ()
                servers = start_gateways(store, replicas, directory, *extra)
                try:
                    urls = [url for _, url in servers]
                    asyncio.run(load(urls, 100, args.concurrency))  # warm-up
                    db.config_resetstat()
                    rate, latency = asyncio.run(load(urls, args.runs, args.concurrency))
                    stats = db.info("commandstats")
                    # Script calls (EVALSHA/EVAL) per run. The GET/SET/TIME inside a script are counted by
                    # commandstats too, but run inside Redis; the end of a run and its log write are two calls in
                    # one pipelined round trip (tests/test_replicas.py counts the trips: two per short run).
                    trips = sum(
                        stats.get(k, {}).get("calls", 0) for k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_publish", "cmdstat_getdel")
                    )
                    results[(kind, replicas)] = (rate, latency, trips / args.runs if kind != "memory" else 0.0)
                finally:
                    for proc, _ in servers:
                        proc.terminate()
                        proc.wait()
        finally:
            for proc in (replica_proc, redis_proc):
                proc.terminate()
                proc.wait()
    print(f"{args.runs} short runs, {args.concurrency} concurrent clients:")
    for (kind, replicas), (rate, latency, trips) in results.items():
        extra = f", {trips:.2f} Redis script calls per run" if kind != "memory" else ""
        print(f"  {kind:10s} x{replicas}: {rate:8.0f} runs/s, median time to RUN_STARTED {latency:6.2f} ms{extra}")
    memory = results[("memory", 1)][0]
    print(f"  redis x1 / memory x1 = {results[('redis', 1)][0] / memory:.2f}x   (target >= 0.7x)")
    print(f"  redis x2 / memory x1 = {results[('redis', 2)][0] / memory:.2f}x")
    replicated = results[("replicated", 1)][0]
    print(f"  replicated x1 / redis x1 (async) = {replicated / results[('redis', 1)][0]:.2f}x   (the price of WAIT 1)")


if __name__ == "__main__":
    main()
