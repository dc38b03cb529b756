"""The WebSocket frame parser swap (server/ws_protocol.py) on websockets' own sans-I/O server protocol: the
handshake request is let go, and frames parse exactly as before, whether they come before or after the swap."""

from __future__ import annotations

import base64
import gc
import os
import struct
import weakref

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol

from server.ws_protocol import fresh_frame_parser


def handshake() -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        "GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def masked_text(text: str) -> bytes:
    """A client frame: final, text, masked, as a browser sends it."""
    payload, mask = text.encode(), os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert len(payload) < 126
    return struct.pack("!BB", 0x81, 0x80 | len(payload)) + mask + body


def accepted(data: bytes) -> tuple[ServerProtocol, weakref.ref[Request], list[str]]:
    """A server protocol past its handshake, the request (weakly), and the texts of frames sent with the request."""
    conn = ServerProtocol()
    conn.receive_data(data)
    request, *rest = conn.events_received()
    assert isinstance(request, Request)
    conn.send_response(conn.accept(request))
    conn.data_to_send()
    return conn, weakref.ref(request), text_of(rest)


def text_of(events: list) -> list[str]:
    return [bytes(event.data).decode() for event in events if isinstance(event, Frame) and event.opcode is Opcode.TEXT]


def texts(conn: ServerProtocol) -> list[str]:
    return text_of(conn.events_received())


def test_the_swap_lets_the_handshake_request_go_and_frames_still_parse():
    conn, request, _ = accepted(handshake())
    gc.collect(0)
    assert request() is not None  # websockets' own parser holds it for the connection's life
    assert fresh_frame_parser(conn)
    gc.collect(0)
    assert request() is None
    two = masked_text("two")
    conn.receive_data(masked_text("one") + two[:3])  # a frame cut in the middle, then its rest
    assert texts(conn) == ["one"]
    conn.receive_data(two[3:])
    assert texts(conn) == ["two"]


def test_a_frame_sent_with_the_handshake_parses_before_the_swap_and_the_next_after():
    conn, _, early = accepted(handshake() + masked_text("early"))
    assert early == ["early"]
    assert fresh_frame_parser(conn)
    conn.receive_data(masked_text("later"))
    assert texts(conn) == ["later"]


def test_no_swap_in_the_middle_of_a_frame():
    partial = masked_text("half")
    conn, _, _ = accepted(handshake() + partial[:4])  # the header read, the payload not yet
    assert not fresh_frame_parser(conn)  # the old parser keeps what it has read
    conn.receive_data(partial[4:])
    assert texts(conn) == ["half"]
    assert fresh_frame_parser(conn)  # back at a frame boundary: now it can
