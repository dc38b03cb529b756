"""What the idle-poll window costs the loop's thread in CPU while nothing happens (server/awake.py): after an answer
it polls for the window, then sleeps; after answers that no request followed closely it sleeps at once; requests
that follow closely bring the polls back. uvicorn's protocols with the gateway's connection limits on a loopback
socket in this process, answered for a real client; the choices themselves are tests/unit/test_awake.py's.

Usage: python -m bench.idle_poll [--window 0.05]
Prints the loop thread's CPU time in three windows' length after each kind of answer; run it alone on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import websockets
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.awake import Awake
from server.connection_limits import ConnectionLimits
from server.http_protocol import protocols
from tests.test_connection_release import app  # answers GET with ok; accepts a WebSocket until it closes


async def serve(window: float, http: str = "httptools") -> tuple[asyncio.Server, int]:
    http_class, ws_class = protocols(ConnectionLimits(awake=Awake(window)), http)
    config = Config(app, interface="asgi3", log_config=None, access_log=False, ws=ws_class)
    config.load()
    state = ServerState()
    server = await asyncio.get_running_loop().create_server(lambda: http_class(config, state, {}), "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def quiet_cpu(seconds: float) -> float:
    """The loop thread's CPU time over `seconds` in which nothing arrives."""
    start = time.thread_time()
    await asyncio.sleep(seconds)
    return time.thread_time() - start


async def http_request(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
    assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
    writer.close()


async def websocket_ping(port: int) -> None:
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as socket:
        await socket.ping()


async def after_answer(window: float, span: float, http: str, answered: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    """CPU in `span` after an answer, then in `span` again."""
    await asyncio.sleep(span)  # a window an earlier server opened on this loop has passed
    server, port = await serve(window, http)
    try:
        await answered(port)
        return await quiet_cpu(span), await quiet_cpu(span)
    finally:
        server.close()
        await server.wait_closed()


async def given_up_then_restored(window: float, span: float) -> tuple[float, float]:
    await asyncio.sleep(span)
    server, port = await serve(window)
    try:
        for _ in range(5):  # answers that nothing follows within the window
            await http_request(port)
            await asyncio.sleep(window * 1.5)
        await http_request(port)
        given_up = await quiet_cpu(span)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(12):  # requests sent as soon as the answer before them is read
            writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        restored = await quiet_cpu(span)
        writer.close()
        return given_up, restored
    finally:
        server.close()
        await server.wait_closed()


async def main(window: float) -> None:
    span = window * 3
    print(f"loop thread CPU in {span * 1000:.0f} ms of quiet (window {window * 1000:.0f} ms):")
    for label, http, answered in (
        ("httptools", "httptools", http_request),
        ("h11", "h11", http_request),
        ("ws", "httptools", websocket_ping),
    ):
        polled, slept = await after_answer(window, span, http, answered)
        print(f"  after an answer ({label:9}): {polled * 1000:6.1f} ms polling, then {slept * 1000:5.1f} ms")
    quiet, _ = await after_answer(0.0, span, "httptools", http_request)
    print(f"  window of zero            : {quiet * 1000:6.1f} ms")
    given_up, restored = await given_up_then_restored(window, span)
    print(f"  after unfollowed answers  : {given_up * 1000:6.1f} ms; after close ones: {restored * 1000:6.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=0.05)
    import uvloop

    uvloop.run(main(parser.parse_args().window))
