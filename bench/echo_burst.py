"""Bursts of large echo runs against one gateway, and its RSS: at the start, at the peak of each burst, and after
the event-log retention. An ended run must release its ring at once, and the retained logs stay within their
byte budget, whatever the input.

Usage: python -m bench.echo_burst [--store memory|file] [--runs 60] [--concurrency 6] [--megabytes 11] [--bursts 2]
The client sends each run's body (a user message of that size) with httpx and reads the stream to its end.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import tempfile
import threading
import time

import httpx

from bench.flood import demo_body, free_port, gateway_command, spawn
from bench.idle import rss_kib


def large_body(megabytes: float) -> dict:
    return demo_body("x" * int(megabytes * 1024 * 1024))


async def burst(url: str, runs: int, concurrency: int, megabytes: float) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient) -> None:
        async with gate, client.stream("POST", url + "/", json=large_body(megabytes), headers={"accept": "text/event-stream"}) as response:
            assert response.status_code == 200, response.status_code
            async for _ in response.aiter_raw():
                pass

    async with httpx.AsyncClient(timeout=300) as client:
        await asyncio.gather(*(one(client) for _ in range(runs)))


def peak_during(pid: int, action) -> int:
    """The highest RSS (KiB) seen while `action` runs, sampled every 20 ms."""
    peak, done = [rss_kib(pid)], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        action()
    finally:
        done.set()
        sampler.join()
    return peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["memory", "file"], default="memory")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--megabytes", type=float, default=11.0)
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--retention", type=float, default=5.0)
    parser.add_argument("--extra", default="", help="more gateway flags, as one string")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as state_dir:
        cmd = gateway_command(
            port, state_dir, "--store", args.store, "--event-log-retention", f"{args.retention:g}s", *shlex.split(args.extra)
        )
        proc, url = spawn(cmd, port, "/ping")
        try:
            asyncio.run(burst(url, 2, 1, 0.01))  # warm-up
            start = rss_kib(proc.pid)
            print(
                f"store {args.store}: {args.bursts} bursts of {args.runs} echo runs of {args.megabytes:g} MiB, {args.concurrency} at once"
            )
            print(f"  RSS at start            {start / 1024:8.0f} MiB")
            for index in range(args.bursts):
                began = time.monotonic()
                peak = peak_during(proc.pid, lambda: asyncio.run(burst(url, args.runs, args.concurrency, args.megabytes)))
                took = time.monotonic() - began
                after = rss_kib(proc.pid)
                print(f"  burst {index + 1}: peak {peak / 1024:8.0f} MiB, after {after / 1024:8.0f} MiB ({took:.1f} s)")
            time.sleep(args.retention + 61)  # past the retention and the next purge (every 60 s)
            print(f"  after the retention     {rss_kib(proc.pid) / 1024:8.0f} MiB")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
