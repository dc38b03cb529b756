"""Streams `/flood N` through the gateway, a bare Litestar floor and an ag-ui SDK server; prints events/s and ratios.

Usage: python -m bench.flood [--events 200000] [--rounds 5] [--streams 1]
Each server runs in its own process on loopback; rounds interleave the servers so drift hits all of them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(cmd: list[str], port: int, probe: str = "/") -> tuple[subprocess.Popen, str]:
    """Start a server process on loopback and wait until `probe` answers (any HTTP status)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + probe, timeout=0.5)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{' '.join(cmd[:3])} did not start")


def gateway_command(port: int, state_dir: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gateway",
        "--port",
        str(port),
        "--state-dir",
        state_dir,
        "--log-level",
        "warning",
        "--allowed-cwd",
        "/tmp",
        *extra,
    ]


def start(kind: str, state_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    if kind == "gateway":
        return spawn(gateway_command(port, state_dir, "--store", "memory"), port, "/ping")
    return spawn([sys.executable, "-m", "bench.servers", kind, str(port)], port)


def body(count: int) -> dict:
    return {
        "threadId": "bench-" + uuid.uuid4().hex,
        "runId": "run-" + uuid.uuid4().hex,
        "state": {},
        "messages": [{"id": "m", "role": "user", "content": f"/flood {count}"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "bench", "cwd": "/tmp/bench"}},
    }


async def one_stream(client: httpx.AsyncClient, url: str, count: int) -> int:
    events = 0
    async with client.stream("POST", url + "/", json=body(count), headers={"accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            events += chunk.count(b"\n\n")
    assert events >= count, (url, events)
    return events


async def measure(url: str, count: int, streams: int) -> float:
    async with httpx.AsyncClient(timeout=120) as client:
        await one_stream(client, url, 1000)  # warm-up
        started = time.perf_counter()
        totals = await asyncio.gather(*(one_stream(client, url, count // streams) for _ in range(streams)))
        return sum(totals) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=1)
    args = parser.parse_args()
    kinds = ["gateway", "bare", "sdk"]
    with tempfile.TemporaryDirectory() as state_dir:
        servers = {kind: start(kind, state_dir) for kind in kinds}
        try:
            rates: dict[str, list[float]] = {kind: [] for kind in kinds}
            for _ in range(args.rounds):
                for kind in kinds:
                    rates[kind].append(asyncio.run(measure(servers[kind][1], args.events, args.streams)))
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait()
    median = {kind: statistics.median(values) for kind, values in rates.items()}
    print(f"/flood {args.events} events, {args.streams} stream(s), median of {args.rounds} rounds (events/s):")
    for kind in kinds:
        print(f"  {kind:8s} {median[kind]:>12,.0f}   (min {min(rates[kind]):,.0f}, max {max(rates[kind]):,.0f})")
    print(f"  gateway / sdk  = {median['gateway'] / median['sdk']:.2f}x   (target >= 3x)")
    print(f"  gateway / bare = {median['gateway'] / median['bare']:.2f}x   (target >= 0.8x)")


if __name__ == "__main__":
    main()
