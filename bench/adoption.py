"""Adoption latency: the time from a replica's end to the first event of the run from the replica that adopted it,
for a slow A2A run (the scripted a2a-sdk agent of the tests), with the lease TTL as a parameter. Side by side in
one run: a crash (SIGKILL: the lease must run out first) and a drain hand-off (SIGTERM, grace 0: the lease is
given up at once). The goal for a crash is under one lease TTL plus one second.

Usage: python -m bench.adoption [--leases 2 5 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import tempfile
import time
import uuid

import httpx
import redis

from bench.a2a_flood import start_agent
from bench.flood import free_port, gateway_command, spawn
from bench.store_bench import start_redis
from gateway.engine.caller import ANONYMOUS
from gateway.engine.caller import thread_key as engine_key
from store.eventlog import LogRef
from store.eventlog.redis import _keys
from store.redis import thread_key as state_key


def start_gateway(state_dir: str, redis_port: int, agent_url: str, lease: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    extra = ("--store", f"redis://127.0.0.1:{redis_port}/0", "--agent", f"a2a+{agent_url}/", "--lease-seconds", str(lease))
    return spawn(gateway_command(port, state_dir, *extra, "--shutdown-grace-seconds", "0"), port, "/ping")


def records(response: httpx.Response):
    """(position, event) of each SSE record."""
    buffer = b""
    for chunk in response.iter_raw():
        buffer += chunk
        while b"\n\n" in buffer:
            record, buffer = buffer.split(b"\n\n", 1)
            position, data = 0, None
            for line in record.split(b"\n"):
                if line.startswith(b"id:"):
                    position = int(line[3:].strip() or 0)
                elif line.startswith(b"data:"):
                    data = json.loads(line[5:])
            if data is not None:
                yield position, data


def one(owner: tuple[subprocess.Popen, str], other: str, lease: float, how: str, redis_port: int) -> float:
    """Seconds from the owner's end to the adopter's first event of the run."""
    thread, run = f"t-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:8]}"
    ticks = int((lease * 2 + 6) / 0.1)
    body = {
        "threadId": thread,
        "runId": run,
        "state": {},
        "tools": [],
        "context": [],
        "messages": [{"id": "m1", "role": "user", "content": f"long {ticks}"}],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp"}},
    }
    headers = {"accept": "text/event-stream", "AGUI-Reattach-Grace": "60"}
    last = 0
    with httpx.Client(timeout=120) as http, http.stream("POST", owner[1] + "/", json=body, headers=headers) as response:
        for position, event in records(response):
            last = position
            if event["type"] == "TEXT_MESSAGE_CONTENT" and position > 12:
                break
        time.sleep(0.3)  # the owner's log has what it sent
        ended = time.perf_counter()
        owner[0].send_signal(signal.SIGKILL if how == "crash" else signal.SIGTERM)
    adopted = adoption_moment(redis_port, thread, run)
    url = f"{other}/threads/{thread}/runs/{run}/events?rosInvocationId=inv-1"
    with httpx.Client(timeout=120) as http, http.stream("GET", url, headers={"last-event-id": str(last)}) as response:
        for _position, _event in records(response):  # the owner's own last events come first, from its log
            now = time.perf_counter()
            if now >= adopted:
                return now - ended
    raise RuntimeError("the run was not adopted")


def adoption_moment(redis_port: int, thread: str, run: str) -> float:
    """When the adopter fenced the run's log (its first step, before its first event): its meta's fence moves."""
    key = _keys(LogRef(engine_key(ANONYMOUS, thread), run), state_key(engine_key(ANONYMOUS, thread)))[1]
    client = redis.Redis(port=redis_port)
    first = client.hget(key, "fence")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.hget(key, "fence") != first:
            return time.perf_counter()
        time.sleep(0.005)
    raise RuntimeError("the run was not adopted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leases", type=float, nargs="+", default=[2.0, 5.0, 10.0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as state_dir:
        agent, agent_url = start_agent()
        redis_proc, redis_port = start_redis(state_dir)
        try:
            for lease in args.leases:
                other = start_gateway(state_dir, redis_port, agent_url, lease)
                figures: dict[str, list[float]] = {"crash": [], "handoff": []}
                try:
                    for _ in range(args.rounds):
                        for how in ("crash", "handoff"):
                            owner = start_gateway(state_dir, redis_port, agent_url, lease)
                            figures[how].append(one(owner, other[1], lease, how, redis_port))
                            owner[0].wait(30)
                finally:
                    other[0].terminate()
                    other[0].wait()
                rows.append((lease, statistics.median(figures["crash"]), max(figures["crash"]), statistics.median(figures["handoff"])))
        finally:
            for proc in (agent, redis_proc):
                proc.terminate()
                proc.wait()
    print(f"Death to the adopter's first event, {args.rounds} rounds per lease (seconds):")
    print(f"  {'lease':>6} {'crash p50':>10} {'crash max':>10} {'goal':>6} {'max/goal':>9} {'hand-off p50':>13} {'crash/hand-off':>15}")
    for lease, crash, worst, handoff in rows:
        goal = lease + 1.0
        print(
            f"  {lease:>6.1f} {crash:>10.2f} {worst:>10.2f} {goal:>6.1f} {worst / goal:>8.2f}x {handoff:>13.2f} {crash / handoff:>14.1f}x"
        )


if __name__ == "__main__":
    main()
