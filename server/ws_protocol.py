"""uvicorn's sans-I/O WebSocket protocol, tuned for streams of small text frames.

- Corked writes: the frames sent in one event-loop turn leave in one transport write (one syscall).
- A direct path for unfragmented server text frames while the connection is open and no extension is
  negotiated (the gateway disables permessage-deflate): the frame header is packed here instead of going
  through the generic frame serializer. Everything else (handshake, close, ping/pong, flow control,
  receiving) stays uvicorn's and websockets' own code.
- Its receive queue and writable event are the lighter ones of transports/lean.py (no deque per socket).
- The ASGI scope advertises the extension `agui.ws.text_batch`: the app may then send
  `{"type": "websocket.send", "agui.ws.text_batch": [<utf-8 bytes>, ...]}`, one text frame per item,
  in one ASGI call and without a decode/encode round trip.

Private state relied on (written for uvicorn 0.54 and websockets 17; pinned in pyproject.toml, checked by
tests/unit/test_private_shapes.py): the attribute list of WebSocketsSansIOProtocol (declared as slots here), its
`queue`, `writable`, `conn`, `transport` and `handshake_complete` (set after a denial response), and the shape of websockets' parser generators (`fresh_frame_parser`).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import OPEN, Protocol
from websockets.streams import StreamReader

from server.awake import Awake
from transports.lean import Inbox, LeanEvent
from transports.server_extensions import TEXT_BATCH

_FIN_TEXT = 0x81
_AT_EOF = StreamReader.at_eof.__code__


def text_frame(payload: bytes) -> bytes:
    """An unmasked, final text frame (server to client)."""
    length = len(payload)
    if length < 126:
        return struct.pack("!BB", _FIN_TEXT, length) + payload
    if length < 65536:
        return struct.pack("!BBH", _FIN_TEXT, 126, length) + payload
    return struct.pack("!BBQ", _FIN_TEXT, 127, length) + payload


class CorkedTransport:
    """Buffers `write` calls and flushes them together on the next loop iteration (or before closing)."""

    __slots__ = ("_buffer", "_loop", "_scheduled", "_transport", "awake")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._buffer: list[bytes] = []
        self._scheduled = False
        self.awake: Awake | None = None  # told after each flush: a run's last events may leave the loop idle

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._buffer.append(data)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._buffer:
            data = b"".join(self._buffer)
            self._buffer.clear()
            if not self._transport.is_closing():
                self._transport.write(data)
            if self.awake is not None:
                self.awake.touch(self._loop)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CorkedWebSocketsProtocol(WebSocketsSansIOProtocol):
    # uvicorn's protocol gives each socket 37 attributes. Past 30, an instance's attributes leave Python's shared-key
    # layout for a dict of their own, for every socket; declared as slots here, they never reach the instance dict.
    # An attribute a later uvicorn adds simply lands in the dict.
    __slots__ = (
        "app",
        "app_state",
        "asgi_version",
        "client",
        "close_sent",
        "close_timeout",
        "close_timer",
        "config",
        "conn",
        "connections",
        "curr_msg_data_type",
        "default_headers",
        "disconnected",
        "frames",
        "handshake_complete",
        "handshake_initiated",
        "initial_response",
        "last_ping_rtt",
        "logger",
        "loop",
        "pending_ping_payload",
        "ping_interval",
        "ping_sent_at",
        "ping_timeout",
        "ping_timer",
        "pong_timer",
        "queue",
        "read_paused",
        "request",
        "response",
        "root_path",
        "scheme",
        "scope",
        "server",
        "tasks",
        "transport",
        "writable",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue = Inbox()  # type: ignore[assignment]  # put_nowait, get, empty: what uvicorn uses of it
        self.writable = LeanEvent()  # type: ignore[assignment]
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport = CorkedTransport(self.transport, asyncio.get_running_loop())  # type: ignore[assignment]

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        self.scope["extensions"][TEXT_BATCH] = {}

    def _direct_ok(self) -> bool:
        conn = self.conn
        return (
            self.handshake_complete
            and not self.close_sent
            and not self.disconnected
            and self.initial_response is None
            and self.writable.is_set()
            and conn.state is OPEN
            and not conn.extensions
            and not conn.expect_continuation_frame
        )

    async def send(self, message: Any) -> None:
        if message["type"] == "websocket.send":
            batch = message.get(TEXT_BATCH)
            if self._direct_ok():
                if batch is not None:
                    self.transport.write(b"".join([text_frame(payload) for payload in batch]))
                    return
                if message.get("bytes") is None and message.get("text") is not None:
                    self.transport.write(text_frame(message["text"].encode()))
                    return
            elif batch is not None:
                for payload in batch:  # the generic path, one frame at a time (closing, paused, extensions)
                    await super().send({"type": "websocket.send", "text": payload.decode()})
                return
        await super().send(message)
        if message["type"] == "websocket.accept" and self.handshake_complete:
            self.request = self.response = None  # type: ignore[assignment]  # the handshake is never read again
            fresh_frame_parser(self.conn)


def fresh_frame_parser(conn: Protocol) -> bool:
    """websockets' server parser keeps the handshake request (its headers) in a local variable of its
    generator for the connection's whole life. When that parser waits at a frame boundary (nothing of a frame read),
    a fresh frame parser on the same reader takes over; anywhere else the old one stays. True when it was replaced."""
    outer = conn.parser
    inner = getattr(outer, "gi_yieldfrom", None)
    leaf = getattr(inner, "gi_yieldfrom", None)
    if getattr(leaf, "gi_code", None) is not _AT_EOF:
        return False
    conn.parser = Protocol.parse(conn)
    next(conn.parser)  # runs to the same wait: the reader's buffer is empty
    outer.close()
    return True
