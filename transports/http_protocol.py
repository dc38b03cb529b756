"""uvicorn's h11 protocol with a documented limit on a request's head: past MAX_HEAD_BYTES of request line and
headers (e.g. a huge token), the answer is 431 with a JSON error, never a reset. Refusals (431, and uvicorn's 400
for malformed requests) half-close the connection and drain what the client still sends before closing, because
closing a socket with unread input makes the kernel send a TCP reset that can destroy the answer in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD_BYTES = 64 * 1024  # request line + headers; documented in the README (Limits)
DRAIN_SECONDS = 2.0  # how long a refused connection's further input is read and dropped
DRAIN_BYTES = 4 * 1024 * 1024


def _refusal(status: int, reason: bytes, code: str, message: str) -> bytes:
    body = msgspec.json.encode({"error": {"code": code, "message": message}})
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % (
        status,
        reason,
        len(body),
    )
    return head + body


class GatewayH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0  # bytes of the current request's head received so far
        self._tail = b""  # the last bytes seen, to find a head's end across chunks
        self._draining = 0  # > 0: refused; counts bytes dropped

    def data_received(self, data: bytes) -> None:
        if self._draining:
            self._draining += len(data)
            if self._draining > DRAIN_BYTES:
                self.transport.close()
            return
        if self.conn.their_state is h11.IDLE:  # still reading a request's head; body bytes do not count
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
            self._tail = seen[-3:]
            if self._head_bytes > MAX_HEAD_BYTES:
                message = f"The request line and headers exceed {MAX_HEAD_BYTES} bytes."
                self._refuse(_refusal(431, b"Request Header Fields Too Large", "INVALID_INPUT", message))
                return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._head_bytes, self._tail = 0, b""

    def send_400_response(self, msg: str) -> None:
        self._refuse(_refusal(400, b"Bad Request", "INVALID_INPUT", "The HTTP request is malformed."))

    def _refuse(self, response: bytes) -> None:
        """Answer, half-close, drain for a while, then close: the client reads the answer, not a reset."""
        self._draining = 1
        self.transport.write(response)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        asyncio.get_running_loop().call_later(DRAIN_SECONDS, self.transport.close)
