"""SIGTERM: stop admitting, let runs finish within the grace period (or cancel them), close sockets with 1001, exit."""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.support import assert_well_formed_run, post_sse, run_body


async def _wait_busy(url: str, runs: int = 1) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(100):
            if (await http.get(url + "/health")).json()["runsInFlight"] >= runs:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("never busy")


async def test_sigterm_drains_runs_then_closes_sockets_going_away(start_gateway):
    server = start_gateway("--shutdown-grace-seconds", "10")
    sse: dict = {}
    sse_thread = threading.Thread(target=lambda: sse.update(r=post_sse(httpx.Client(), server.url + "/", run_body("/slow 2"))))
    async with websockets.connect(server.url.replace("http", "ws") + "/ws") as ws:
        await ws.send(json.dumps(run_body("/slow 2")))
        assert json.loads(await ws.recv())["type"] == "RUN_STARTED"
        sse_thread.start()
        await _wait_busy(server.url, runs=2)
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient() as http:
            assert (await http.get(server.url + "/ping")).json()["status"] == "HealthyBusy"
            refused = await http.post(server.url + "/", json=run_body("late"))
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "SHUTTING_DOWN"
            assert refused.headers["retry-after"] == "1"
        events = [{"type": "RUN_STARTED"}]
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                events.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
        assert closed.value.rcvd.code == 1001
    sse_thread.join(10)
    assert sse["r"].terminal["outcome"]["type"] == "success"
    assert server.proc.wait(15) is not None


def test_runs_past_the_grace_period_end_cancelled(start_gateway):
    server = start_gateway("--shutdown-grace-seconds", "0.5")
    holder: dict = {}
    worker = threading.Thread(target=lambda: holder.update(r=post_sse(httpx.Client(timeout=30), server.url + "/", run_body("/slow 30"))))
    worker.start()
    asyncio.run(_wait_busy(server.url))
    server.proc.send_signal(signal.SIGTERM)
    worker.join(15)
    result = holder["r"]
    assert_well_formed_run(result.events)
    assert result.terminal["outcome"] == {"type": "cancelled"}
    assert server.proc.wait(15) is not None
