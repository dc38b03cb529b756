"""A run's owner with followers that never read: the owner's events/s with none, and with `--stalled` followers
attached (raw sockets that ask for the run's events and never read a byte; half SSE GETs, half mux attaches),
side by side in one run, rounds interleaved, and the ratio of the two.

Usage: python -m bench.followers [--events 200000] [--stalled 100] [--rounds 3]
The gateway runs on the memory store (its ring is the only copy a follower reads live). The owner's client is
httpx in this process, reading as fast as it can; before the followers' lag became their own, one stalled
follower held the owner to about 1,024 events per send timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import time

import httpx
import websockets

from bench.flood import demo_body, free_port, gateway_command, spawn


def stalled_get(port: int, path: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


async def stalled_mux(port: int, body: dict) -> websockets.ClientConnection:
    ws = await websockets.connect(f"ws://127.0.0.1:{port}/ws", subprotocols=["agui-mux.v1"], max_size=None, max_queue=1)
    ws.transport.pause_reading()
    frame = {"op": "attach", "id": "s", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "bench"}
    await ws.send(json.dumps(frame))
    return ws


def drain(sock: socket.socket) -> int:
    """The bytes a stalled follower's socket had taken in (what the gateway wrote it before its buffers filled)."""
    sock.setblocking(False)
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except BlockingIOError:
        pass
    return got


async def owner_rate(port: int, events: int, stalled: int, kind: str = "both") -> dict[str, float]:
    """The owner's events/s over the whole run and over its second half (the followers stalled by then), and the
    bytes one stalled GET follower had buffered."""
    body = demo_body(f"/flood {events}")
    path = f"/threads/{body['threadId']}/runs/{body['runId']}/events?rosInvocationId=bench"
    held: list[socket.socket] = []
    sockets: list[websockets.ClientConnection] = []
    received = 0
    half_at = 0.0
    async with httpx.AsyncClient(timeout=300) as client:
        started = time.perf_counter()
        headers = {"accept": "text/event-stream", "agui-reattach-grace": "30"}
        async with client.stream("POST", f"http://127.0.0.1:{port}/", json=body, headers=headers) as response:
            chunks = response.aiter_raw()
            received += (await anext(chunks)).count(b"\n\n")
            for index in range(stalled):  # attached while the run goes
                if kind == "mux" or (kind == "both" and index % 2):
                    sockets.append(await stalled_mux(port, body))
                else:
                    held.append(stalled_get(port, path))
            async for chunk in chunks:
                received += chunk.count(b"\n\n")
                if not half_at and received >= events // 2:
                    half_at, half_count = time.perf_counter(), received
        ended = time.perf_counter()
    buffered = drain(held[0]) if held else 0
    for sock in held:
        sock.close()
    for ws in sockets:
        ws.transport.abort()
    assert received >= events, received
    return {"whole": received / (ended - started), "second_half": (received - half_count) / (ended - half_at), "buffered": buffered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--stalled", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kind", choices=["get", "mux", "both"], default="both", help="how the stalled followers attach")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as state_dir:
        cmd = gateway_command(port, state_dir, "--store", "memory", "--send-timeout-seconds", "120")
        proc, _ = spawn(cmd, port, "/ping")
        rates: dict[int, list[dict[str, float]]] = {0: [], args.stalled: []}
        try:
            asyncio.run(owner_rate(port, 10_000, 0))  # warm-up
            for _ in range(args.rounds):
                for stalled in rates:
                    rates[stalled].append(asyncio.run(owner_rate(port, args.events, stalled, args.kind)))
                    time.sleep(0.5)  # the stalled sockets' streams end before the next round
        finally:
            proc.terminate()
            proc.wait()
    print(f"owner of one /flood {args.events} run, memory store; {args.kind} followers; median of {args.rounds} rounds, interleaved")
    alone, crowded = ({name: statistics.median(row[name] for row in rates[key]) for name in rates[key][0]} for key in rates)
    for name in ("whole", "second_half"):
        print(
            f"  {name:11s}  no follower {alone[name]:>10,.0f} events/s   {args.stalled} stalled {crowded[name]:>10,.0f} events/s"
            f"   stalled / alone = {crowded[name] / alone[name]:.2f}x"
        )
    print(f"  what one stalled SSE follower's socket took in before it filled: {crowded['buffered'] / 1024:,.0f} KiB")


if __name__ == "__main__":
    main()
