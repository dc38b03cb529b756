"""A closed connection is freed when it closes, not by Python's cyclic collector: uvicorn's protocol with the
gateway's connection limits, served on a real loopback socket in this process, answering a real client."""

from __future__ import annotations

import asyncio
import gc

import pytest
import websockets
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.connection_limits import ConnectionLimits
from server.http_protocol import protocols


async def app(scope, receive, send) -> None:
    if scope["type"] == "websocket":
        await receive()  # the handshake
        await send({"type": "websocket.accept"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
        return
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_closed_connection_leaves_nothing_for_the_cyclic_collector(http):
    http_class, ws_class = protocols(ConnectionLimits(), http)
    config = Config(app, interface="asgi3", log_config=None, access_log=False, ws=ws_class)
    config.load()
    state = ServerState()
    server = await asyncio.get_running_loop().create_server(lambda: http_class(config, state, {}), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    gc.collect()
    gc.disable()  # unreachable objects stay listed by gc.get_objects() until a collection
    try:
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
            writer.close()
            await writer.wait_closed()
            async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as socket:  # handed over to the WebSocket protocol
                await socket.ping()
        for _ in range(200):  # the server's side of the last close, and its requests' tasks ended
            if not state.connections and not state.tasks:
                break
            await asyncio.sleep(0.01)
        # A request's task holds its protocol (uvicorn breaks that cycle as the task ends): on a loaded machine the
        # last one may still be ending when its connection is gone.
        assert not state.connections and not state.tasks
        assert [o for o in gc.get_objects() if type(o) in (http_class, ws_class)] == []
    finally:
        gc.enable()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_the_connection_is_offered_to_each_request_and_tells_it_when_it_is_lost(http):
    """The scope extension `agui.http.connection` (transports/server_extensions.py): on every request of a
    keep-alive connection; `on_lost` is called once when the client goes, and `lost` says so after."""
    from transports.server_extensions import HTTP_CONNECTION

    offered: list = []
    gone = asyncio.Event()

    async def streaming(scope, receive, send) -> None:
        connection = scope["extensions"][HTTP_CONNECTION]
        offered.append(connection)
        await receive()
        if scope["path"] == "/short":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        assert not connection.lost
        connection.on_lost = gone.set
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await gone.wait()

    http_class, _ = protocols(ConnectionLimits(), http)
    config = Config(streaming, interface="asgi3", log_config=None, access_log=False)
    config.load()
    server = await asyncio.get_running_loop().create_server(lambda: http_class(config, ServerState(), {}), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /short HTTP/1.1\r\nHost: test\r\n\r\n")
        await reader.readuntil(b"ok")
        writer.write(b"GET /stream HTTP/1.1\r\nHost: test\r\n\r\n")
        await reader.readuntil(b"data: 1\n\n")
        writer.close()
        await asyncio.wait_for(gone.wait(), 5)
        assert len(offered) == 2 and offered[0] is offered[1], "one connection, offered to both requests"
        assert offered[1].lost and offered[1].on_lost is None
    finally:
        server.close()
        await server.wait_closed()
