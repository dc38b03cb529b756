"""The private state of pinned libraries that the gateway relies on is still there, in the shape it was written for.
Each of these would otherwise degrade silently on an upgrade: an attribute uvicorn adds lands in a per-connection
dict (1.3-1.6 KiB a connection), websockets' parser keeps the handshake request, redis-py's wire falls back to its
slower send. A failure here names what changed: adjust the adapter, then the pin in pyproject.toml."""

from __future__ import annotations

import asyncio
import base64
import os
import pathlib
import tomllib
from importlib.metadata import version

import h11
import pytest
from packaging.requirements import Requirement
from redis.asyncio.connection import Connection
from uvicorn.config import Config
from uvicorn.server import ServerState
from websockets.server import ServerProtocol

from server.http_protocol import GatewayH11Protocol, GatewayHttpToolsProtocol, GatewayWebSocketProtocol
from server.ws_protocol import fresh_frame_parser

ROOT = pathlib.Path(__file__).resolve().parents[2]


class FakeTransport(asyncio.Transport):
    """Just enough of a socket's transport for a protocol's connection_made and its first writes."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope, receive, send) -> None:  # never called: the protocols are only built and connected
    raise AssertionError


def loaded_config() -> Config:
    config = Config(app, interface="asgi3", log_config=None, ws="websockets-sansio")
    config.load()
    return config


ADAPTED = ("litestar", "uvicorn", "websockets", "redis", "httptools")  # the libraries whose private state the adapters use


def test_the_installed_versions_are_the_pinned_ones():
    """The code was written against the ranges pyproject.toml pins, each with an upper bound; h11 comes with uvicorn."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {requirement.name: requirement.specifier for requirement in map(Requirement, listed)}
    for name in ADAPTED:
        assert any(spec.operator == "<" for spec in pins[name]), f"{name} has no upper bound"
        assert pins[name].contains(version(name)), f"{name} {version(name)} is outside {pins[name]}"
    assert h11.__version__.startswith("0.16.")


@pytest.mark.parametrize("protocol_class", [GatewayH11Protocol, GatewayHttpToolsProtocol])
async def test_uvicorns_http_protocols_keep_every_attribute_in_our_slots(protocol_class):
    protocol = protocol_class(loaded_config(), ServerState(), {})
    transport = FakeTransport()
    protocol.connection_made(transport)
    try:
        assert protocol.head_pending() and protocol.nothing_to_answer() and not protocol.reading_request()
        protocol.data_received(b"POST /ping HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\nab")  # a request cycle
        extra = sorted(vars(protocol)) if hasattr(protocol, "__dict__") else []
        assert extra == [], f"uvicorn's {protocol_class.__mro__[2].__name__} has attributes the slots do not declare: {extra}"
        assert type(protocol.flow).__name__ == "FlowControl" and type(protocol.cycle.message_event).__name__ == "LeanEvent"
        assert not protocol.head_pending() and protocol.reading_request(), "the body is still arriving"
        protocol.data_received(b"cd")
        assert not protocol.reading_request() and not protocol.nothing_to_answer(), "read whole, its answer owed"
    finally:
        protocol.connection_lost(None)


async def test_uvicorns_websocket_protocol_keeps_every_attribute_in_our_slots():
    protocol = GatewayWebSocketProtocol(loaded_config(), ServerState(), {})
    transport = FakeTransport()
    protocol.connection_made(transport)
    try:
        extra = sorted(vars(protocol)) if hasattr(protocol, "__dict__") else []
        assert extra == [], f"uvicorn's WebSocketsSansIOProtocol has attributes the slots do not declare: {extra}"
    finally:
        protocol.connection_lost(None)


def test_websockets_parser_waits_at_a_frame_boundary_where_the_swap_expects_it():
    key = base64.b64encode(os.urandom(16)).decode()
    conn = ServerProtocol()
    conn.receive_data(
        f"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    conn.send_response(conn.accept(conn.events_received()[0]))
    assert fresh_frame_parser(conn), "websockets' parser generators changed shape: the handshake request stays held"


def test_redis_connections_keep_what_the_pipelined_wire_takes_over():
    """The wire takes a connected connection's transport from its `_writer` and reads replies with hiredis, raising
    redis-py's own error classes; a Sentinel master pool says so in `is_master` (a READONLY reply then moves on)."""
    import inspect

    from redis._parsers.base import BaseParser
    from redis.asyncio.sentinel import SentinelConnectionPool
    from redis.exceptions import NoScriptError, ReadOnlyError

    connection = Connection()
    assert hasattr(connection, "_writer"), "redis-py's Connection has no _writer: the wire cannot take its transport"
    for name in ("is_connected", "connect", "socket_timeout", "disconnect"):
        assert hasattr(connection, name), name
    encoder = connection.encoder
    assert isinstance(encoder.decode_responses, bool) and encoder.encoding and encoder.encoding_errors
    assert isinstance(BaseParser.parse_error("NOSCRIPT No matching script."), NoScriptError)
    assert isinstance(BaseParser.parse_error("READONLY You can't write against a read only replica."), ReadOnlyError)
    assert "is_master" in inspect.getsource(SentinelConnectionPool.__init__)


def test_httptools_protocol_uses_its_pipeline_only_as_our_lean_one_serves():
    """uvicorn's httptools protocol keeps a deque per connection for pipelined requests; ours holds nothing until one
    is pipelined, and serves only appendleft, pop and truthiness. A new use would break pipelining silently."""
    import inspect
    import re

    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    used = set(re.findall(r"self\.pipeline\.(\w+)", inspect.getsource(HttpToolsProtocol)))
    assert used <= {"appendleft", "pop"}, used
