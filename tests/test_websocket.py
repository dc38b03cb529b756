"""`/ws` with the `websockets` client against real servers: base and multiplexed modes, errors, auth, equivalence."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import threading
import time

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.settings import Settings
from server.app import create_app
from store.memory import MemoryStore
from tests.support import (
    EVENT_ADAPTER,
    ROOT,
    InProcessGateway,
    assert_no_nulls,
    assert_well_formed_run,
    ext,
    parse_sse,
    post_sse,
    run_body,
    thread_state,
)
from tests.unit.clock import FakeClock

TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def ws_url(server) -> str:
    return server.url.replace("http://", "ws://") + "/ws"


async def recv_event(ws) -> dict:
    event = json.loads(await asyncio.wait_for(ws.recv(), 30))
    assert_no_nulls(event)
    EVENT_ADAPTER.validate_python(event)
    return event


async def run_over(ws, body: dict) -> list[dict]:
    """Send one RunAgentInput frame and read bare events up to the terminal one."""
    await ws.send(json.dumps(body))
    events = []
    while not events or events[-1]["type"] not in TERMINAL:
        events.append(await recv_event(ws))
    return events


def verify_with_node(runs: list[list[dict]]) -> None:
    node = shutil.which("node")
    assert node, "Node.js is required"
    done = subprocess.run(
        [node, "verify_events.mjs"], cwd=f"{ROOT}/tests/node", input=json.dumps(runs), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"], report


async def test_plain_reasoning_and_a_second_turn_on_one_socket(gateway):
    thread = run_body("x")["threadId"]
    async with websockets.connect(ws_url(gateway)) as ws:
        first = await run_over(ws, run_body("hello ws", thread=thread))
        second = await run_over(ws, run_body("think", thread=thread, iac=ext(thinking={"enabled": True})))
    for events in (first, second):
        assert_well_formed_run(events)
        assert events[-1]["outcome"] == {"type": "success"}
    assert "".join(e["delta"] for e in first if e["type"] == "TEXT_MESSAGE_CONTENT") == "You said: hello ws"
    assert any(e["type"] == "REASONING_START" for e in second)
    verify_with_node([first, second])


@pytest.mark.parametrize("suffix", ["", "/"])
async def test_the_fast_path_and_the_routed_path_serve_sockets_alike(gateway, suffix):
    """`/ws` is served past Litestar's router (transports/fast_path.py); `/ws/` goes through it: both run, both echo
    the request id on the handshake."""
    async with websockets.connect(ws_url(gateway) + suffix, additional_headers={"x-request-id": "req-ws-fast"}) as ws:
        assert ws.response.headers["x-request-id"] == "req-ws-fast"
        events = await run_over(ws, run_body("hello fast"))
    assert_well_formed_run(events)
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "You said: hello fast"


async def test_interrupt_and_resume_on_the_same_socket(gateway):
    body = run_body('/tool deploy {"stack":"vpc"}')
    async with websockets.connect(ws_url(gateway)) as ws:
        first = await run_over(ws, body)
        interrupt = first[-1]["outcome"]["interrupts"][0]
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        second = await run_over(ws, run_body(None, thread=body["threadId"], resume=resume))
    assert_well_formed_run(first)
    assert_well_formed_run(second)
    assert second[-1]["outcome"] == {"type": "success"}
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in second)
    verify_with_node([first, second])


async def test_invalid_frames_get_a_run_error_and_the_socket_stays_usable(gateway):
    async with websockets.connect(ws_url(gateway)) as ws:
        bad = run_body("x")
        bad["tools"] = [{"name": "t"}]
        await ws.send(json.dumps(bad))
        error = await recv_event(ws)
        assert error["type"] == "RUN_ERROR" and error["code"] == "INVALID_INPUT" and error["metadata"]["field"] == "tools"
        await ws.send(json.dumps({"threadId": 3}))
        assert (await recv_event(ws))["code"] == "INVALID_INPUT"
        events = await run_over(ws, run_body("still here"))
        assert events[-1]["outcome"]["type"] == "success"


@pytest.mark.parametrize(
    "frame, code",
    [("this is not json", 1007), (b"\x00\x01binary", 1003), ("[" + " " * (12 * 1024 * 1024) + "]", 1009)],
)
async def test_frames_that_close_the_socket(gateway, frame, code):
    async with websockets.connect(ws_url(gateway), max_size=None) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.send(frame)  # the server may close while a large frame is still being sent
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == code
    async with websockets.connect(ws_url(gateway)) as ws:  # the server is fine
        assert (await run_over(ws, run_body("after")))[-1]["type"] == "RUN_FINISHED"


async def test_thread_busy_holds_across_sse_and_websocket(gateway):
    body = run_body("/slow 2")
    loop = asyncio.get_running_loop()
    started = threading.Event()

    def stream_sse() -> list[dict]:
        raw = b""
        with (
            httpx.Client(timeout=30) as http,
            http.stream("POST", gateway.url + "/", json=body, headers={"accept": "text/event-stream"}) as response,
        ):
            for chunk in response.iter_bytes():
                raw += chunk
                if b'"RUN_STARTED"' in raw:
                    started.set()
        started.set()
        return parse_sse(raw)[0]

    sse = loop.run_in_executor(None, stream_sse)
    # The SSE run holds the thread before the socket tries it (else a loaded machine may let the socket's run in first).
    assert await loop.run_in_executor(None, started.wait, 10)
    async with websockets.connect(ws_url(gateway)) as ws:
        deadline = time.monotonic() + 5
        while True:
            events = await run_over(ws, run_body("me too", thread=body["threadId"]))
            if events[-1].get("code") == "THREAD_BUSY":
                break
            assert time.monotonic() < deadline, events
            await asyncio.sleep(0.05)
        assert len(events) == 1, "refused before RUN_STARTED"
        # And the other way round: a WebSocket run makes the thread busy for SSE.
        ws_body = run_body("/slow 2")
        await ws.send(json.dumps(ws_body))
        assert (await recv_event(ws))["type"] == "RUN_STARTED"
        refused = await loop.run_in_executor(
            None, lambda: post_sse(httpx.Client(), gateway.url + "/", run_body("x", thread=ws_body["threadId"]))
        )
        assert refused.status == 409 and json.loads(refused.raw)["error"]["code"] == "THREAD_BUSY"
        while (await recv_event(ws))["type"] not in TERMINAL:
            pass
    assert (await sse)[-1]["outcome"]["type"] == "success"


async def test_disconnect_cancels_the_run(gateway):
    """The socket closes mid-run: the execution is recorded cancelled (not left running for its 30 s), and the
    thread takes its next run."""
    body = run_body("/slow 30")
    async with websockets.connect(ws_url(gateway)) as ws:
        await ws.send(json.dumps(body))
        while (await recv_event(ws))["type"] != "TEXT_MESSAGE_CONTENT":
            pass
    deadline = time.monotonic() + 5
    while (thread_state(gateway.state_dir, body["threadId"]) or {}).get("active") is not None:
        assert time.monotonic() < deadline, "the run ended well before its 30 s"
        await asyncio.sleep(0.05)
    assert thread_state(gateway.state_dir, body["threadId"])["history"][0]["status"] == "cancelled"
    async with httpx.AsyncClient() as http:
        response = await http.post(gateway.url + "/", json=run_body("free?", thread=body["threadId"]))
        assert response.status_code == 200


MUX = ["agui-mux.v1"]


async def test_multiplexed_runs_never_mix(gateway):
    bodies = {f"s{i}": run_body(f"/flood {200 + i}") for i in range(4)}
    bodies["slow"] = run_body("/slow 1")
    async with websockets.connect(ws_url(gateway), subprotocols=MUX) as ws:
        assert ws.subprotocol == "agui-mux.v1"
        for stream_id, body in bodies.items():
            await ws.send(json.dumps({"op": "run", "id": stream_id, "input": body}))
        streams: dict[str, list[dict]] = {k: [] for k in bodies}
        while any(not s or s[-1]["type"] not in TERMINAL for s in streams.values()):
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            EVENT_ADAPTER.validate_python(frame["event"])
            streams[frame["id"]].append(frame["event"])
    for stream_id, events in streams.items():
        assert_well_formed_run(events)
        assert events[0]["threadId"] == bodies[stream_id]["threadId"]
        assert events[0]["runId"] == bodies[stream_id]["runId"]
        message_ids = {e["messageId"] for e in events if e["type"].startswith("TEXT_MESSAGE")}
        assert len(message_ids) == 1
    for i in range(4):
        assert sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in streams[f"s{i}"]) == 200 + i


async def test_multiplexed_cancel_and_errors(gateway):
    body = run_body("/slow 20")
    async with websockets.connect(ws_url(gateway), subprotocols=MUX) as ws:
        await ws.send(json.dumps({"op": "run", "id": "a", "input": body}))
        events = []
        while not events or events[-1]["type"] != "TEXT_MESSAGE_CONTENT":
            events.append(json.loads(await ws.recv())["event"])
        await ws.send(json.dumps({"op": "cancel", "id": "a"}))
        while events[-1]["type"] not in TERMINAL:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert frame["id"] == "a"
            events.append(frame["event"])
        assert_well_formed_run(events)
        assert events[-1]["outcome"] == {"type": "cancelled"}
        await ws.send(json.dumps({"op": "dance", "id": "b"}))
        frame = json.loads(await ws.recv())
        assert frame["id"] == "b" and frame["event"]["code"] == "INVALID_INPUT"
        await ws.send(json.dumps({"op": "run", "id": "c", "input": {"threadId": ""}}))
        frame = json.loads(await ws.recv())
        assert frame["id"] == "c" and frame["event"]["code"] == "INVALID_INPUT"


_ID_KEYS = {
    "messageId",
    "toolCallId",
    "executionId",
    "eventId",
    "threadId",
    "runId",
    "aguiRunId",
    "id",
    "taskId",
    "contextId",
    "artifactId",
    "expiresAt",
}


def normalized(events: list[dict]) -> list:
    """Events with every identifier replaced by its order of first appearance."""
    seen: dict[str, str] = {}

    def walk(value, key=None):
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if key in _ID_KEYS and isinstance(value, str):
            return seen.setdefault(value, f"<id{len(seen)}>")
        if isinstance(value, str):
            return re.sub(r"exec-[0-9a-f]{32}|[0-9a-f]{12,}", "<hex>", value)
        return value

    return [walk(e) for e in events]


@pytest.mark.parametrize(
    "text, iac",
    [
        ("hello", {}),
        ("think", {"thinking": {"enabled": True}}),
        ("/tool deploy {}", {}),
        ("/pipeline", {}),
        ("/ask why?", {}),
        ("/fail", {}),
    ],
)
async def test_sse_and_websocket_yield_the_same_events(gateway, client, text, iac):
    sse = post_sse(client, gateway.url + "/", run_body(text, iac=ext(**iac)))
    async with websockets.connect(ws_url(gateway)) as ws:
        ws_events = await run_over(ws, run_body(text, iac=ext(**iac)))
    assert normalized(sse.events) == normalized(ws_events)


async def test_auth_header_subprotocol_and_tickets(start_gateway):
    server = start_gateway(env={"AGUI_GATEWAY_AUTH_TOKEN": "tok-123"})
    url = ws_url(server)
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url):
            pass
    assert refused.value.response.status_code == 401 and refused.value.response.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(InvalidStatus):
        async with websockets.connect(url, additional_headers={"Authorization": "Bearer nope"}):
            pass
    async with websockets.connect(url, additional_headers={"Authorization": "Bearer tok-123"}) as ws:
        assert (await run_over(ws, run_body("header")))[-1]["type"] == "RUN_FINISHED"
    async with websockets.connect(url, subprotocols=["agui-mux.v1", "agui.bearer.tok-123"]) as ws:
        assert ws.subprotocol == "agui-mux.v1", "the token is never echoed back"
    async with httpx.AsyncClient() as http:
        assert (await http.post(server.url + "/ws/tickets")).status_code == 401
        issued = await http.post(server.url + "/ws/tickets", headers={"authorization": "Bearer tok-123"})
        assert issued.status_code == 201 and issued.headers["cache-control"] == "no-store"
        ticket = issued.json()["ticket"]
        async with websockets.connect(f"{url}?ticket={ticket}") as ws:
            assert (await run_over(ws, run_body("ticket")))[-1]["type"] == "RUN_FINISHED"
        with pytest.raises(InvalidStatus):  # single use
            async with websockets.connect(f"{url}?ticket={ticket}"):
                pass
        second = (await http.post(server.url + "/ws/tickets", headers={"authorization": "Bearer tok-123"})).json()["ticket"]
        async with websockets.connect(url, subprotocols=["agui.v1", f"agui.ticket.{second}"]) as ws:
            assert ws.subprotocol == "agui.v1"
    server.stop()
    refusals = [line for line in server.logs().splitlines() if "/ws 401" in line]
    assert len(refusals) == 3 and all(" INFO " in line for line in refusals), refusals
    assert " ERROR " not in server.logs() and "without completing handshake" not in server.logs()


async def test_an_expired_ticket_is_refused(tmp_path):
    """Ticket lifetime on the store's clock: moved past the TTL, never slept through."""
    clock = FakeClock()
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",), auth_token="tok-123", ticket_ttl=60)
    with InProcessGateway(create_app(settings, store=MemoryStore(3600, clock=clock))) as server:
        url = server.url.replace("http", "ws") + "/ws"
        async with httpx.AsyncClient() as http:
            fresh = (await http.post(server.url + "/ws/tickets", headers={"authorization": "Bearer tok-123"})).json()["ticket"]
            stale = (await http.post(server.url + "/ws/tickets", headers={"authorization": "Bearer tok-123"})).json()["ticket"]
        clock.advance(59)
        async with websockets.connect(f"{url}?ticket={fresh}") as ws:
            assert (await run_over(ws, run_body("in time")))[-1]["type"] == "RUN_FINISHED"
        clock.advance(2)
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(f"{url}?ticket={stale}"):
                pass
        assert refused.value.response.status_code == 401


async def test_stock_uvicorn_websocket_protocol_works_too(tmp_path):
    """Embedders may serve the app with uvicorn's own protocol: frames then go one ASGI message at a time."""
    import uvicorn

    from gateway.settings import Settings
    from server.app import create_app
    from tests.support import free_port

    port = free_port()
    app = create_app(Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",)))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, ws="websockets-sansio"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.02)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as ws:
            events = await run_over(ws, run_body("/flood 300"))
        assert_well_formed_run(events)
        assert sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events) == 300
    finally:
        server.should_exit = True
        await task


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


async def test_a_slow_reader_slows_only_its_own_run(start_gateway):
    """A client that stops reading a huge /flood holds the server's memory bounded; others run normally."""
    server = start_gateway()
    before = _rss_kib(server.proc.pid)
    async with websockets.connect(ws_url(server), max_size=None, close_timeout=1) as stalled:
        await stalled.send(json.dumps(run_body("/flood 1000000")))
        http = httpx.AsyncClient()
        stalled_sse = http.stream("POST", server.url + "/", json=run_body("/flood 1000000"))
        await stalled_sse.__aenter__()
        await asyncio.sleep(2)  # neither reader reads: the server must not buffer a million events
        async with websockets.connect(ws_url(server)) as other:
            started = time.monotonic()
            events = await run_over(other, run_body("meanwhile"))
            assert events[-1]["outcome"]["type"] == "success" and time.monotonic() - started < 5
        grown_mib = (_rss_kib(server.proc.pid) - before) / 1024
        assert grown_mib < 60, f"server memory grew by {grown_mib:.0f} MiB"
        await stalled_sse.__aexit__(None, None, None)
        await http.aclose()


def test_a_peer_that_stops_answering_pings_is_closed(start_gateway):
    """A raw socket that completes the handshake but never answers a ping is closed by the server."""
    import base64
    import os
    import socket

    server = start_gateway("--ws-ping-seconds", "0.5")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    handshake = sock.recv(4096)
    assert handshake.startswith(b"HTTP/1.1 101"), handshake
    started = time.monotonic()
    received = b""
    while True:  # read pings (opcode 0x9) and never answer; the server must give up on us
        chunk = sock.recv(4096)
        if not chunk:
            break
        received += chunk
        assert time.monotonic() - started < 10, "a silent peer was never closed"
    assert b"\x89" in received, "the server pinged"
    assert time.monotonic() - started < 5
    sock.close()
