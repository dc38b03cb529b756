"""The gateway's connection limits, enforced where the socket is visible, for any HTTP/1.1 parser uvicorn runs.

- Head size: past MAX_HEAD_BYTES of request line and headers (e.g. a huge token), 431 with a JSON error.
- Head deadline: a request head not complete `header_timeout` seconds after its first byte (slowloris) gets 408,
  and a new connection that sends nothing at all for `header_timeout` seconds is closed (a silent socket must not
  hold a descriptor for ever); both kept by the loop's shared deadlines, transports/deadlines.py: no timer each.
- Send deadline: a connection whose send buffer stays full (the client drains nothing below the low-water
  mark) for `send_timeout` seconds is reset (what the kernel still holds for it is discarded, not sent); its run
  sees its client gone (a disconnect).
- Connections per client address: past `max_per_client` open connections from one address, 429.
- Lingering close: refusals, and any close while the client is still sending a body (e.g. after a 413),
  half-close the connection and drain what the client still sends (up to DRAIN_BYTES, for DRAIN_SECONDS)
  before closing, because closing a socket with unread input makes the kernel send a TCP reset that can
  destroy the answer in flight. At most `max_lingering` connections linger at once: past that a refused
  connection is closed at once, so that refusals cannot hold the descriptors that the limits protect.

server/http_protocol.py adapts this to uvicorn's httptools and h11 protocols (where a request stands, the
WebSocket hand-over, the per-request event); server/ws_protocol.py's socket releases its address's count.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from server.awake import Awake
from transports.deadlines import deadlines
from transports.lean import LeanEvent
from transports.server_extensions import HTTP_CONNECTION

LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, zero seconds: close() sends RST and drops unsent data

# Where a request stands, for parsers that keep no such state (httptools): awaiting one, its head arriving, its
# body arriving, or read whole with the response still owed.
IDLE, HEAD, BODY, DONE = 0, 1, 2, 3

MAX_HEAD_BYTES = 64 * 1024  # request line + headers; documented in docs/reference.md (Limits)
DRAIN_SECONDS = 2.0
DRAIN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float = 10.0
    send_timeout: float = 30.0  # 0 disables
    max_per_client: int = 1000  # 0 disables
    max_lingering: int = 256  # refused connections draining at once; past it, a refusal closes at once
    awake: Awake = field(default_factory=lambda: Awake(0.0))  # the loop polls this long after a response (server/awake.py)


OPEN_BY_ADDRESS: Counter[str] = Counter()  # open connections per client address, shared by HTTP and WebSocket


class Lingering:
    """Refused connections draining before their close, on this process."""

    now = 0


def _refusal(status: int, reason: bytes, code: str, message: str, extra: bytes = b"") -> bytes:
    body = msgspec.json.encode({"error": {"code": code, "message": message}})
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n%s\r\n"
    return head % (status, reason, len(body), extra) + body


def peer_address(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"


class SendDeadline:
    """Mixin for a protocol: abort the connection when its writes stay paused for `limits.send_timeout`."""

    limits = ConnectionLimits()
    transport: Any
    _send_timer: asyncio.TimerHandle | None = None

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if self.limits.send_timeout and self._send_timer is None:
            self._send_timer = asyncio.get_running_loop().call_later(self.limits.send_timeout, self._send_expired)

    def resume_writing(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().resume_writing()  # type: ignore[misc]

    def _send_expired(self) -> None:
        self._send_timer = None
        reset(self.transport)
        self.transport.abort()  # connection_lost follows: the app sees its client gone


def reset(transport: asyncio.BaseTransport) -> None:
    """Make the next close a reset: a plain close would leave the kernel's send buffer (megabytes on loopback) to
    trickle out to a client that does not read, for minutes, after the gateway has let the connection go."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)


_DEFERRED = b""  # the state of a write deferred before it is made (a real write is never empty)


class _LingeringTransport:
    """Closes by half-closing and draining while the client is still sending (see the module docstring); a write
    it is told to defer goes out with the next one (a stream's response head with its first records). It is also
    what the routes see of the connection: the scope extension `agui.http.connection`
    (transports/server_extensions.py HttpConnection)."""

    # No bound methods kept per connection: a method call is the same hop. `_held`: the deferred write (None: none).
    __slots__ = ("_held", "_protocol", "_transport", "on_lost")

    def __init__(self, transport: asyncio.Transport, protocol: GuardedHttp) -> None:
        self._transport = transport
        self._protocol: GuardedHttp | None = protocol  # None once the connection is lost
        self._held: bytes | None = None
        self.on_lost: Callable[[], None] | None = None  # a streaming response's, while it streams

    @property
    def lost(self) -> bool:
        return self._protocol is None

    def write(self, data: bytes) -> None:  # the hot path: no __getattr__ hop per write
        held = self._held
        if held is None:
            self._transport.write(data)
        elif held is _DEFERRED:
            self._held = data
        else:
            self._held = None
            self._transport.writelines((held, data))  # one system call for both

    def defer_next_write(self, until_next: bool = False) -> None:
        """Hold the next write until the one after it, or the end of this turn of the loop at the latest: a
        response head written alone costs the server a system call and the client a packet more. `until_next`:
        however late it comes (the caller knows it comes soon: a run's one write, once its end is recorded)."""
        self._held = _DEFERRED
        if not until_next:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what is held now (nothing when the next write already took it)."""
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self.flush()
        protocol = self._protocol
        if protocol is None or (not protocol.reading_request() and not protocol.guard.head_bytes):
            self._transport.close()
        else:
            protocol.linger()

    def let_go(self) -> None:
        """The connection is gone (nothing left to drain): tell the response streaming on it, and let go of the
        protocol, which holds this transport. The two held each other, so every closed connection waited for
        Python's cyclic collector, and one that had lived long enough to reach its oldest generation waited for a
        full collection."""
        self._protocol = None
        on_lost, self.on_lost = self.on_lost, None
        if on_lost is not None:
            on_lost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def lighten_event(owner: object, name: str) -> None:
    """Swap an asyncio.Event that uvicorn holds per connection or request for a LeanEvent (transports/lean.py) in the
    same state: an idle stream keeps less. Left as is where uvicorn no longer has it."""
    event = getattr(owner, name, None)
    if type(event) is asyncio.Event:
        flag = LeanEvent()
        if event.is_set():
            flag.set()
        setattr(owner, name, flag)


class Guard:
    """The gateway's per-connection state, in one slotted object: uvicorn's protocol already has 25 attributes, and
    past 30 an instance's attributes leave Python's shared-key layout for a dict of their own, which every idle
    stream would pay for."""

    __slots__ = ("address", "counted", "draining", "head_bytes", "head_started", "phase", "tail")

    def __init__(self) -> None:
        self.head_bytes = 0  # bytes of the current request's head received so far
        self.tail = b""  # the last bytes seen, to find a head's end across chunks
        self.draining = 0  # > 0: refused; counts bytes dropped
        self.address = "unknown"
        self.counted = False
        self.head_started = False
        self.phase = IDLE  # where the request stands, for a parser that keeps no such state itself (httptools)


class GuardedHttp(SendDeadline, asyncio.Protocol):
    """The limits of the module docstring, for any HTTP/1.1 parser: the parser's adapter answers three questions
    about where the current request stands (head_pending, reading_request, nothing_to_answer) and hands over to
    the WebSocket protocol through _hand_over_to_websocket."""

    guard: Guard
    flow: Any
    lean = False  # the annex's lighter per-connection state (server/http_protocol.py)

    def head_pending(self) -> bool:
        """No complete request head since the last exchange ended: its bytes count, its deadline runs."""
        raise NotImplementedError

    def reading_request(self) -> bool:
        """A request's head or body is still arriving: closing now must linger."""
        raise NotImplementedError

    def nothing_to_answer(self) -> bool:
        """No response is owed or in progress on this connection."""
        raise NotImplementedError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = Guard()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.lean:
            lighten_event(self.flow, "_is_writable_event")  # uvicorn's flow control: one event per connection
        self.transport = _LingeringTransport(self.transport, self)
        guard = self.guard
        guard.address = peer_address(transport)
        OPEN_BY_ADDRESS[guard.address] += 1
        guard.counted = True
        cap = self.limits.max_per_client
        if cap and OPEN_BY_ADDRESS[guard.address] > cap:
            message = f"Too many open connections from this address (at most {cap})."
            self._refuse(_refusal(429, b"Too Many Requests", "RATE_LIMIT_EXCEEDED", message, b"retry-after: 1\r\n"))
            return
        # The head deadline runs from the connection's first moment: one that never sends a byte is closed too.
        guard.head_started = True
        deadlines(self.limits.header_timeout).add(self, self._head_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_deadline()
        if self._send_timer is not None:
            self._send_timer.cancel()
        if self.guard.draining:
            Lingering.now -= 1
            self.guard.draining = 0
        if self.guard.counted:
            release(self.guard.address)
            self.guard.counted = False
        super().connection_lost(exc)
        self.transport.let_go()  # connection_made wrapped it; a connection handed to a WebSocket is never lost here

    def offer_connection(self) -> None:
        """Offer the connection to the request just begun, as the scope extension `agui.http.connection`: called by
        the parser's adapter once the request's cycle is made (its task has not run yet)."""
        scope: Any = self.scope  # type: ignore[attr-defined]  # uvicorn's protocol, next in the concrete classes
        extensions = scope.get("extensions")
        if extensions is None:
            scope["extensions"] = {HTTP_CONNECTION: self.transport}
        else:
            extensions[HTTP_CONNECTION] = self.transport

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # uvicorn's protocol, next in the concrete classes
        self.limits.awake.touch(self.loop)  # type: ignore[attr-defined]

    def _hand_over_to_websocket(self) -> None:
        """The WebSocket protocol takes over this connection (the raw transport), and with it the address's count."""
        self.guard.counted = False
        self._stop_head_deadline()
        self.transport = self.transport._transport

    def data_received(self, data: bytes) -> None:
        self.limits.awake.arrived(self.loop)  # type: ignore[attr-defined]
        guard = self.guard
        if guard.draining:
            guard.draining += len(data)
            if guard.draining > DRAIN_BYTES:
                self.transport._transport.close()
            return
        if self.head_pending() and self._head_too_big(data):
            message = f"The request line and headers exceed {MAX_HEAD_BYTES} bytes."
            self._refuse(_refusal(431, b"Request Header Fields Too Large", "INVALID_INPUT", message))
            return
        super().data_received(data)
        # The head's deadline runs only for a head still incomplete once its chunk is parsed: the common head, whole
        # in one chunk, never adds and removes one.
        if self.head_pending():
            if guard.head_bytes and not guard.head_started:
                guard.head_started = True
                deadlines(self.limits.header_timeout).add(self, self._head_expired)
        elif guard.head_bytes or guard.head_started:
            if guard.head_started:
                self._stop_head_deadline()
            guard.head_bytes, guard.tail, guard.head_started = 0, b"", False

    def _head_too_big(self, data: bytes) -> bool:
        """Count the bytes of the head being read (body bytes in the same chunk do not count)."""
        guard = self.guard
        seen = guard.tail + data
        end = seen.find(b"\r\n\r\n")
        guard.head_bytes += len(data) if end < 0 else max(0, end + 4 - len(guard.tail))
        guard.tail = seen[-3:]
        return guard.head_bytes > MAX_HEAD_BYTES

    def _head_expired(self) -> None:
        guard = self.guard
        if not guard.head_bytes and not guard.draining and self.head_pending() and self.nothing_to_answer():
            self.transport._transport.close()  # nothing ever came: no answer to read, nothing to drain
            return
        if self.head_pending() and not guard.draining:
            message = f"The request head did not arrive within {self.limits.header_timeout:g} seconds."
            self._refuse(_refusal(408, b"Request Timeout", "REQUEST_TIMEOUT", message))

    def _stop_head_deadline(self) -> None:
        deadlines(self.limits.header_timeout).discard(self)

    def send_400_response(self, msg: str) -> None:
        self._refuse(_refusal(400, b"Bad Request", "INVALID_INPUT", "The HTTP request is malformed."))

    def _refuse(self, response: bytes) -> None:
        self.transport.write(response)
        self.linger()

    def linger(self) -> None:
        """Half-close, then read and drop input for a while before closing: the client reads the answer, not a reset."""
        if self.guard.draining:
            return
        raw = self.transport._transport
        if Lingering.now >= self.limits.max_lingering:
            raw.close()  # too many draining already: the answer may be lost to a reset, the descriptor is not
            return
        self.guard.draining = 1
        Lingering.now += 1
        if raw.can_write_eof():
            raw.write_eof()
        asyncio.get_running_loop().call_later(DRAIN_SECONDS, raw.close)


def release(address: str) -> None:
    OPEN_BY_ADDRESS[address] -= 1
    if OPEN_BY_ADDRESS[address] <= 0:
        del OPEN_BY_ADDRESS[address]
