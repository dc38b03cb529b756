"""uvicorn's HTTP protocols, httptools (the default) and h11 (`--http h11`), each adapted to
the connection limits of server/connection_limits.py: where its request stands, the hand-over to the WebSocket
protocol, and the lighter per-request event; and the WebSocket protocol with the send deadline.

Private state relied on (written for uvicorn 0.54, h11 0.16 and httptools 0.6-0.9; pinned in pyproject.toml,
checked by tests/unit/test_private_shapes.py): the attribute lists of H11Protocol and HttpToolsProtocol (declared
as slots here), their `flow`, `cycle` and `transport` members, h11's `conn` states, the per-cycle
`message_event`, and what httptools' protocol does with its `pipeline` (appendleft, pop, truthiness).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from server.connection_limits import (
    BODY,
    DONE,
    HEAD,
    IDLE,
    MAX_HEAD_BYTES,
    ConnectionLimits,
    GuardedHttp,
    SendDeadline,
    lighten_event,
    peer_address,
    release,
)
from server.ws_protocol import CorkedTransport, CorkedWebSocketsProtocol

__all__ = ["MAX_HEAD_BYTES", "ConnectionLimits", "protocols"]
# uvicorn's per-connection attributes, shared by both protocols (and ours), declared as slots: past 30, an
# instance's attributes leave Python's shared-key layout for a dict of their own, for every connection.
_SHARED_SLOTS = (
    "access_log",
    "access_logger",
    "app",
    "app_state",
    "asgi_version",
    "client",
    "config",
    "connections",
    "cycle",
    "flow",
    "guard",
    "headers",
    "limit_concurrency",
    "logger",
    "loop",
    "root_path",
    "scheme",
    "scope",
    "server",
    "server_state",
    "tasks",
    "timeout_keep_alive",
    "timeout_keep_alive_task",
    "transport",
    "ws_protocol_class",
)
_NOT_READING = frozenset((h11.IDLE, h11.DONE, h11.CLOSED, h11.MUST_CLOSE))  # their side sends nothing now


class LimitedH11Protocol(GuardedHttp, H11Protocol):
    """The pure-Python parser (`--http h11`): h11's own connection states say where the request stands."""

    def head_pending(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def reading_request(self) -> bool:
        return self.conn.their_state not in _NOT_READING

    def nothing_to_answer(self) -> bool:
        return self.conn.our_state is h11.IDLE

    def handle_events(self) -> None:
        before = getattr(self, "cycle", None)
        super().handle_events()
        # A request's cycle is made here, and its task has not run yet: its event is swapped before anyone waits.
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle is not before:
            if self.lean:
                lighten_event(cycle, "message_event")
            self.offer_connection()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._hand_over_to_websocket()
        super().handle_websocket_upgrade(event)


class Pipeline:
    """What uvicorn's httptools protocol does with its per-connection deque of pipelined requests (appendleft, pop,
    truthiness), holding nothing until a client pipelines: an empty deque is memory every idle stream would keep."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[Any] | None = None

    def appendleft(self, item: Any) -> None:
        if self._items is None:
            self._items = []
        self._items.insert(0, item)

    def pop(self) -> Any:
        assert self._items
        item = self._items.pop()
        if not self._items:
            self._items = None
        return item

    def __len__(self) -> int:
        return len(self._items) if self._items else 0


class LimitedHttpToolsProtocol(GuardedHttp, HttpToolsProtocol):
    """The C parser (the default): its callbacks move the guard's phase, since httptools keeps no request state
    that Python can read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.lean:
            self.pipeline = Pipeline()  # type: ignore[assignment]

    def head_pending(self) -> bool:
        return self.guard.phase <= HEAD

    def reading_request(self) -> bool:
        return self.guard.phase in (HEAD, BODY)

    def nothing_to_answer(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def on_message_begin(self) -> None:
        self.guard.phase = HEAD
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self.guard.phase = BODY
        super().on_headers_complete()
        # The request's cycle is made here, and its task has not run yet: its event is swapped before anyone waits.
        if self.cycle is not None:  # (none for a WebSocket upgrade)
            if self.lean:
                lighten_event(self.cycle, "message_event")
            self.offer_connection()

    def on_message_complete(self) -> None:
        self.guard.phase = DONE
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self.guard.phase == DONE:  # else a pipelined request's head is already arriving, or the body still is
            self.guard.phase = IDLE
        super().on_response_complete()

    def handle_websocket_upgrade(self) -> None:
        self._hand_over_to_websocket()
        super().handle_websocket_upgrade()
        # Done with this connection: its parser holds this protocol's callbacks, and uvicorn lets go of it only when
        # the connection is lost, which the WebSocket protocol now hears instead (the two would wait for a full
        # collection).
        if self.lean:
            self.parser = None  # type: ignore[assignment]


# The annex's (server/annex.py): uvicorn's per-connection attributes in declared slots. A subclass's slots take
# those names from the instance's dict, which then stays unmade (1.3-1.6 KiB a connection).
class GatewayH11Protocol(LimitedH11Protocol):
    __slots__ = (*_SHARED_SLOTS, "conn")
    lean = True


class GatewayHttpToolsProtocol(LimitedHttpToolsProtocol):
    __slots__ = (*_SHARED_SLOTS, "expect_100_continue", "parser", "pipeline", "url")
    lean = True


class LimitedWebSocketProtocol(SendDeadline, WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol with the send deadline; it releases the connection's count for its address, and
    a refused handshake is an answered one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._address = peer_address(transport)
        if isinstance(self.transport, CorkedTransport):
            self.transport.awake = self.limits.awake  # the corked transport tells it after each flush

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and self.close_sent and not message.get("more_body"):
            # A refusal (401, 429...) is an answered handshake, logged by our access log at info. uvicorn 0.54 counts
            # only an accept or a close as completing it, and would log "ASGI callable returned without completing
            # handshake." at error level for every refused socket.
            self.handshake_complete = True

    def data_received(self, data: bytes) -> None:
        self.limits.awake.arrived(self.loop)
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
        if self._address is not None:
            release(self._address)
            self._address = None
        super().connection_lost(exc)


class GatewayWebSocketProtocol(LimitedWebSocketProtocol, CorkedWebSocketsProtocol):
    """The annex's (server/annex.py): the corked protocol, with the limits."""

    __slots__ = ("_address",)


def protocols(
    limits: ConnectionLimits, http: str = "httptools", *, lean: bool = True, corked: bool = True
) -> tuple[type[GuardedHttp], type[LimitedWebSocketProtocol]]:
    """Protocol classes carrying these limits, for the parser named (uvicorn takes classes for `http` and `ws`):
    `lean`, `corked`: with the annex's parts for uvicorn and websockets."""
    if http == "httptools":
        base: type[GuardedHttp] = GatewayHttpToolsProtocol if lean else LimitedHttpToolsProtocol
    else:
        base = GatewayH11Protocol if lean else LimitedH11Protocol
    http_class = type(f"With{base.__name__}", (base,), {"limits": limits})
    ws_base = GatewayWebSocketProtocol if corked else LimitedWebSocketProtocol
    ws = type(f"With{ws_base.__name__}", (ws_base,), {"limits": limits})
    return http_class, ws
