"""Request ids end to end: honoured or minted, echoed, in every log line of the request and its run, in RUN_ERROR
metadata; an access line for every request, with no query string."""

from __future__ import annotations

import asyncio
import json

import websockets

from tests.support import post_sse, run_body


def test_request_ids_are_echoed_logged_and_put_in_run_errors(start_gateway, client):
    server = start_gateway("--log-format", "json")
    given = post_sse(client, server.url + "/", run_body("/fail"), headers={"x-request-id": "req-abc.123"})
    assert given.headers["x-request-id"] == "req-abc.123"
    assert given.terminal["type"] == "RUN_ERROR" and given.terminal["metadata"]["requestId"] == "req-abc.123"
    minted = post_sse(client, server.url + "/", run_body("hi"), headers={"x-request-id": "bad id with spaces"})
    minted_id = minted.headers["x-request-id"]
    assert minted_id != "bad id with spaces" and len(minted_id) == 32
    refused = client.post(server.url + "/invocations?ticket=secret-ticket", json={"threadId": "t"}, headers={"x-request-id": "req-refused"})
    assert refused.headers["x-request-id"] == "req-refused"
    event = json.loads(refused.text.split("data: ", 1)[1])
    assert event["metadata"]["requestId"] == "req-refused"

    async def over_ws() -> dict:
        async with websockets.connect(server.url.replace("http", "ws") + "/ws", additional_headers={"x-request-id": "req-ws"}) as ws:
            assert ws.response.headers["x-request-id"] == "req-ws"
            await ws.send(json.dumps({"threadId": "t"}))
            return json.loads(await ws.recv())

    assert asyncio.run(over_ws())["metadata"]["requestId"] == "req-ws"
    server.stop()
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    of_first = [line for line in lines if line.get("requestId") == "req-abc.123"]
    messages = " | ".join(line["message"] for line in of_first)
    assert "run started" in messages and "run ended" in messages, messages
    assert any(line["logger"] == "agui.access" and line["message"].startswith("POST / 200") for line in of_first)
    refused_lines = [line["message"] for line in lines if line.get("requestId") == "req-refused"]
    assert any(m.startswith("run refused code=INVALID_INPUT") for m in refused_lines), refused_lines
    assert any(m.startswith("POST /invocations 400") for m in refused_lines), refused_lines
    assert "secret-ticket" not in server.logs()
    assert any(line.get("requestId") == "req-ws" and line["message"].startswith("WS /ws 101") for line in lines)


def test_every_runs_lines_are_written_none_lost_at_shutdown(start_gateway):
    """Runs that end together log their lines in batches: each run's start, end and access line is written, the
    last ones too when the gateway is stopped right after."""
    import httpx

    server = start_gateway()
    runs = 120

    async def together() -> list[int]:
        async with httpx.AsyncClient(timeout=30) as http:
            answers = await asyncio.gather(*(http.post(server.url + "/", json=run_body("hi")) for _ in range(runs)))
        return [answer.status_code for answer in answers]

    assert asyncio.run(together()) == [200] * runs
    server.stop()
    logs = server.logs()
    assert logs.count(" agui.access: POST / 200 ") == runs
    assert logs.count(" agui.engine: run started ") == runs and logs.count(" agui.engine: run ended ") == runs
    assert all(line[:4].isdigit() for line in logs.splitlines() if "agui." in line), "whole lines, one per line"
