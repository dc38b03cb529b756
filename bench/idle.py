"""Holds N idle connections on one gateway and reports what each costs: the server's RSS growth per connection, and
for SSE how late the heartbeats come; side by side with a bare Litestar server holding the same connections (one
heartbeat loop per stream, an accepted WebSocket waiting for a frame).

Usage: python -m bench.idle [--connections 10000] [--kind sse|ws|both] [--heartbeat 5] [--hold 12] [--public]
--public adds the gateway with `--tuning off` (the libraries' public paths only): what the tuning annex saves.
Idle SSE runs are `/sleep` runs (RUN_STARTED, then silence but for heartbeats); idle WebSockets are open sockets
with no run. The client is raw asyncio sockets (SSE) and `websockets` (WebSocket) in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import websockets

from bench.flood import demo_body, free_port, gateway_command, spawn


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


def sleep_body(seconds: float) -> bytes:
    return json.dumps(demo_body(f"/sleep {seconds:g}")).encode()


class SseHolder:
    """One idle SSE run over a raw socket: when its first event came, and each heartbeat's lateness."""

    def __init__(self) -> None:
        self.started = asyncio.get_running_loop().create_future()
        self.lateness: list[float] = []
        self.writer: asyncio.StreamWriter | None = None

    async def run(self, port: int, seconds: float, interval: float) -> None:
        reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        body = sleep_body(seconds)
        head = f"POST / HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode() + body)
        last = None
        while chunk := await reader.read(65536):
            now = time.monotonic()
            if b"RUN_STARTED" in chunk and not self.started.done():
                self.started.set_result(None)
            if b": heartbeat" in chunk and last is not None:
                self.lateness.append(now - last - interval)
            if b"data:" in chunk or b": heartbeat" in chunk:
                last = now
            if b"RUN_FINISHED" in chunk:
                break

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def hold_sse(port: int, pid: int, count: int, hold: float, interval: float) -> tuple[float, list[float]]:
    before = rss_kib(pid)
    holders = [SseHolder() for _ in range(count)]
    tasks = []
    for index, holder in enumerate(holders):
        tasks.append(asyncio.create_task(holder.run(port, hold + 60, interval)))
        if index % 200 == 199:
            await asyncio.sleep(0.05)  # let the server accept: the listen backlog is finite
    await asyncio.wait_for(asyncio.gather(*(holder.started for holder in holders)), 300)
    await asyncio.sleep(hold)  # at least one heartbeat interval of silence
    grown = (rss_kib(pid) - before) / count
    lateness = [late for holder in holders for late in holder.lateness]
    for holder in holders:
        holder.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return grown, lateness


async def hold_ws(port: int, pid: int, count: int, hold: float) -> float:
    before = rss_kib(pid)
    sockets = []
    for index in range(count):
        sockets.append(await websockets.connect(f"ws://127.0.0.1:{port}/ws", compression=None, max_queue=4))
        if index % 500 == 499:
            await asyncio.sleep(0)
    await asyncio.sleep(hold)
    grown = (rss_kib(pid) - before) / count
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return grown


def start_servers(state_dir: str, interval: float, public: bool = False) -> dict[str, tuple[subprocess.Popen, str]]:
    gateway_port, bare_port, public_port = free_port(), free_port(), free_port()
    shared = ("--store", "memory", "--heartbeat-seconds", str(interval), "--max-connections-per-client", "0")
    bare = [sys.executable, "-m", "bench.servers", "bare", str(bare_port)]
    servers = {
        "gateway": spawn(gateway_command(gateway_port, state_dir, *shared), gateway_port, "/ping"),
        "bare": spawn(bare, bare_port, env={**os.environ, "BENCH_HEARTBEAT_SECONDS": str(interval)}),
    }
    if public:
        command = gateway_command(public_port, os.path.join(state_dir, "public"), *shared, "--tuning", "off")
        servers["public"] = spawn(command, public_port, "/ping")
    return servers


def measure(kind: str, args: argparse.Namespace) -> dict[str, float]:
    """One kind of idle connection on fresh servers (so neither kind inherits the other's freed memory)."""
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as state_dir:
        servers = start_servers(state_dir, args.heartbeat, args.public)
        try:
            time.sleep(1)
            for name, (proc, url) in servers.items():
                port = int(url.rsplit(":", 1)[1])
                if kind == "sse":
                    per[name], lateness = asyncio.run(hold_sse(port, proc.pid, args.connections, args.hold, args.heartbeat))
                    lateness.sort()
                    p50 = statistics.median(lateness) if lateness else float("nan")
                    p99 = lateness[int(len(lateness) * 0.99)] if lateness else float("nan")
                    print(
                        f"  {name:8s} SSE {per[name]:6.1f} KiB per idle run; {len(lateness)} heartbeats, late by p50 {p50:.3f} s, p99 {p99:.3f} s"
                    )
                else:
                    per[name] = asyncio.run(hold_ws(port, proc.pid, args.connections, min(args.hold, 5)))
                    print(f"  {name:8s} WS  {per[name]:6.1f} KiB per idle socket")
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait()
    print(f"  {kind}: gateway / floor = {per['gateway'] / per['bare']:.2f}x memory per connection")
    if "public" in per:
        print(f"  {kind}: tuning off / on = {per['public'] / per['gateway']:.2f}x memory per connection")
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--kind", choices=["sse", "ws", "both"], default="both")
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--hold", type=float, default=12.0, help="seconds the connections stay idle before RSS is read")
    parser.add_argument("--public", action="store_true", help="also the gateway with --tuning off")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.connections + 100:
        raise SystemExit(f"the file descriptor limit ({hard}) is too low for {args.connections} connections")
    os.makedirs("/tmp/bench", exist_ok=True)
    print(f"{args.connections} idle connections per server, heartbeat every {args.heartbeat:g} s, held {args.hold:g} s")
    for kind in ["sse", "ws"] if args.kind == "both" else [args.kind]:
        measure(kind, args)


if __name__ == "__main__":
    main()
