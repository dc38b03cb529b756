"""After an answer the event loop polls for the idle-poll window instead of sleeping, then sleeps, and it stops
polling while answers go unfollowed: uvicorn's protocols with the gateway's connection limits, served on a real
loopback socket in this process, answering a real client. What is measured is the loop thread's own CPU time while
nothing happens: spent polling, or not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
import websockets
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.awake import Awake
from server.connection_limits import ConnectionLimits
from server.http_protocol import protocols
from tests.unit.test_connection_release import app  # answers GET with ok; accepts a WebSocket until it closes

WINDOW = 0.05


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


async def _websocket_ping(port: int) -> None:
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as socket:
        await socket.ping()  # the pong, then the closing handshake: writes of the server's WebSocket protocol


async def _cpu_after(window: float, http: str, answered: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    """The loop thread's CPU time in the window's length thrice after an answer, then as long again."""
    await asyncio.sleep(WINDOW * 2)  # a window another test's server opened on this loop has passed
    server, port = await _serve(window, http)
    try:
        await answered(port)
        return await _quiet_cpu(WINDOW * 3), await _quiet_cpu(WINDOW * 3)
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(("http", "answered"), [("httptools", _http_request), ("h11", _http_request), ("httptools", _websocket_ping)])
async def test_the_loop_polls_for_the_window_after_an_answer_then_sleeps(http, answered):
    polled, slept = await _cpu_after(WINDOW, http, answered)
    # Polling spends the thread's time (each turn a poll without a wait); a sleeping loop spends almost none.
    assert polled >= WINDOW * 0.3, polled
    assert slept < WINDOW * 0.2, slept


async def test_a_window_of_zero_sleeps_at_once():
    quiet, _ = await _cpu_after(0.0, "httptools", _http_request)
    assert quiet < WINDOW * 0.2, quiet


async def test_answers_that_no_request_follows_stop_the_polls_and_requests_that_follow_closely_bring_them_back():
    await asyncio.sleep(WINDOW * 2)
    server, port = await _serve(WINDOW)
    try:
        for _ in range(5):  # answers that nothing follows within the window: four in a row and polling no longer pays
            await _http_request(port)
            await asyncio.sleep(WINDOW * 1.5)
        await _http_request(port)
        given_up = await _quiet_cpu(WINDOW * 3)
        # Requests sent as soon as the answer before them is read (a client's own turnaround): polling pays again.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(12):
            writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        restored = await _quiet_cpu(WINDOW * 3)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    assert given_up < WINDOW * 0.2, given_up
    assert restored >= WINDOW * 0.3, restored
