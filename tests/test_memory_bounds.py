"""Memory stays bounded whatever the input: an ended run's ring goes at once, the ended runs' logs a replica keeps
are bounded in bytes (the oldest expire first, and a late attacher learns EVENTS_EXPIRED), and the RSS a burst of
large runs took comes back once their retention is over. Real gateway processes, their RSS read from /proc."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.reattach_client import events_url, open_get
from tests.support import run_body

MIB = 1024 * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


async def echo_burst(url: str, bodies: list[dict], concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, body: dict) -> None:
        async with gate, client.stream("POST", url + "/", json=body, headers={"accept": "text/event-stream"}) as response:
            assert response.status_code == 200
            tail = b""
            async for chunk in response.aiter_raw():
                tail = (tail + chunk)[-4096:]
            assert b"RUN_FINISHED" in tail

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(one(client, body) for body in bodies))


@pytest.mark.parametrize("store", ["memory", "file", "redis"])
def test_a_burst_of_large_echo_runs_stays_bounded_and_gives_its_memory_back(start_gateway, store, tmp_path):
    redis = None
    if store == "redis":  # the budget holds in Redis too: the oldest streams are deleted, their meta hash stays
        from tests.support import RedisServer

        (tmp_path / "redis").mkdir()
        redis = RedisServer(tmp_path / "redis").start()
        store = redis.url
    try:
        burst_and_retention(start_gateway, store)
    finally:
        if redis is not None:
            redis.stop()


def burst_and_retention(start_gateway, store: str) -> None:
    server = start_gateway("--store", store, "--event-log-retention", "3s", "--event-log-retained-bytes", str(24 * MIB))
    assert server.proc is not None
    pid = server.proc.pid
    asyncio.run(echo_burst(server.url, [run_body("warm up")], 1))
    start = rss_mib(pid)
    bodies = [run_body("x" * (4 * MIB)) for _ in range(16)]
    asyncio.run(echo_burst(server.url, bodies, 4))
    ended = time.monotonic()
    after = rss_mib(pid)
    # Four runs at once, each holding its body, its text, its answer and its events (about 40 MiB each), and the budget.
    assert after - start < 200, f"RSS grew {after - start:.0f} MiB during the burst"

    # The replica kept 24 MiB of the ended logs: the oldest runs' events expired early, their tombstones stay.
    status, error = open_get(events_url(server.url, bodies[0], rosInvocationId="inv-1"))
    assert status == 410 and error["error"]["code"] == "EVENTS_EXPIRED"
    status, stream = open_get(events_url(server.url, bodies[-1], rosInvocationId="inv-1"))
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"

    time.sleep(max(0.0, ended + 3.5 - time.monotonic()))  # past the retention the rest goes too
    deadline = time.monotonic() + 10
    while rss_mib(pid) - start > 40 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rss_mib(pid) - start <= 40, f"RSS still {rss_mib(pid) - start:.0f} MiB above its start after the retention"
    status, error = open_get(events_url(server.url, bodies[-1], rosInvocationId="inv-1"))
    assert status == 410 and error["error"]["code"] == "EVENTS_EXPIRED"
