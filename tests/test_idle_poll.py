"""After a response the event loop polls for the idle-poll window instead of sleeping, then sleeps: uvicorn's
protocols with the gateway's connection limits, served on a real loopback socket in this process, answering a real
client. What is measured is the loop thread's own CPU time while nothing happens: spent polling, or not."""

from __future__ import annotations

import asyncio
import time

import pytest
import websockets
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.awake import Awake
from server.connection_limits import ConnectionLimits
from server.http_protocol import protocols

WINDOW = 0.05


async def app(scope, receive, send) -> None:
    if scope["type"] == "websocket":
        await receive()  # the handshake
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "ok"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
        return
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _serve(window: float, http: str = "httptools") -> tuple[asyncio.Server, int]:
    http_class, ws_class = protocols(ConnectionLimits(awake=Awake(window)), http)
    config = Config(app, interface="asgi3", log_config=None, access_log=False, ws=ws_class)
    config.load()
    state = ServerState()
    server = await asyncio.get_running_loop().create_server(lambda: http_class(config, state, {}), "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _quiet_cpu(seconds: float) -> float:
    """The loop thread's CPU time over `seconds` in which nothing arrives."""
    start = time.thread_time()
    await asyncio.sleep(seconds)
    return time.thread_time() - start


async def _http_request(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
    assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
    writer.close()


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_the_loop_polls_for_the_window_after_a_response_then_sleeps(http):
    server, port = await _serve(WINDOW, http)
    try:
        await _http_request(port)
        polled = await _quiet_cpu(WINDOW * 3)
        slept = await _quiet_cpu(WINDOW * 3)  # the window has passed: nothing keeps the loop awake
    finally:
        server.close()
        await server.wait_closed()
    # Polling spends the thread's time (each turn a poll without a wait); a sleeping loop spends almost none.
    assert polled >= WINDOW * 0.3, polled
    assert slept < WINDOW * 0.2, slept


async def test_a_websocket_send_keeps_the_loop_awake_for_the_window():
    server, port = await _serve(WINDOW)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as socket:
            assert await socket.recv() == "ok"
            polled = await _quiet_cpu(WINDOW * 3)
            slept = await _quiet_cpu(WINDOW * 3)
    finally:
        server.close()
        await server.wait_closed()
    assert polled >= WINDOW * 0.3, polled
    assert slept < WINDOW * 0.2, slept


async def test_a_window_of_zero_sleeps_at_once():
    await asyncio.sleep(WINDOW * 2)  # a window another test's server opened on this loop (closing writes) has passed
    server, port = await _serve(0.0)
    try:
        await _http_request(port)
        quiet = await _quiet_cpu(WINDOW * 3)
    finally:
        server.close()
        await server.wait_closed()
    assert quiet < WINDOW * 0.2, quiet
