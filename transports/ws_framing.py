"""`/ws` framing: the subprotocols and close codes, the multiplexed envelope (in and out), the accepted socket as a
connection uses it, and reading one text frame."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

import msgspec
from litestar import WebSocket
from litestar.exceptions import WebSocketDisconnect
from litestar.types import Receive, Send

from gateway.engine.stream import Entry
from gateway.jsondepth import too_deep
from gateway.protocol.input import MAX_ID_LENGTH

BASE_PROTOCOL = "agui.v1"
MUX_PROTOCOL = "agui-mux.v1"
BEARER_PREFIX = "agui.bearer."
TICKET_PREFIX = "agui.ticket."
MAX_QUEUED_FRAMES = 4  # base mode: frames received during a run wait here, in order
MAX_MUX_RUNS = 16  # concurrent runs on one multiplexed socket
CLOSE_UNSUPPORTED = 1003
CLOSE_INVALID = 1007
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011

Id = Annotated[str, msgspec.Meta(max_length=MAX_ID_LENGTH)]


class MuxFrame(msgspec.Struct, rename="camel"):
    op: Annotated[str, msgspec.Meta(max_length=24)]
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
    input: msgspec.Raw = msgspec.Raw(b"")  # kept raw: the engine decodes it exactly like an HTTP body
    reattach_grace_seconds: float | None = None
    thread_id: Id = ""
    run_id: Id = ""
    ros_invocation_id: Id = ""
    last_event_id: Annotated[str, msgspec.Meta(max_length=32)] = ""
    user_id: Id = ""
    agent: Annotated[str, msgspec.Meta(max_length=64)] = ""  # a run's agent (empty: the upgrade's, else the default)


mux_decoder = msgspec.json.Decoder(MuxFrame)
_encoder = msgspec.json.Encoder()


MAX_LIST_CHANGES = 256  # changes of a watched thread list queued for a socket; more are dropped


def encode_frame(frame: dict[str, object]) -> bytes:
    """A server frame of its own (not an event's), as JSON."""
    return _encoder.encode(frame)


def closed_frame(stream_id: str) -> bytes:
    """Mux mode: a stream that is over with no event (a connect to a thread with no retained run)."""
    return b'{"id":' + _encoder.encode(stream_id) + b',"closed":true}'


def event_frames(entries: list[Entry], stream_id: str | None, positions: bool, *, mux: bool) -> list[bytes]:
    """Base mode: each event's bytes as they are. Mux mode: each wrapped in its stream's envelope (`"id":null` for
    an error that belongs to no stream), with its position as `eventId` where the stream has positions."""
    if not mux:
        return [data for _, data in entries]
    head = b'{"id":' + _encoder.encode(stream_id)
    return [head + (b',"eventId":"%d","event":%s}' % (p, data) if positions and p else b',"event":%s}' % data) for p, data in entries]


class OpenSocket:
    """An accepted socket as its connection uses it: receive, send, close. Litestar's WebSocket serves the handshake
    only: kept, it would hold two closures, its state and the scope's state for the socket's life.
    Like it, it refuses to send once the peer's disconnect was received."""

    __slots__ = ("_receive", "_send", "gone")

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send: Any = send  # takes our batch extension's message too, which ASGI's types do not know
        self.gone = False

    def receive(self) -> Awaitable[Any]:
        """The server's own receive (no frame of ours while an idle socket waits); the reader marks `gone`."""
        if self.gone:
            raise WebSocketDisconnect(detail="the peer has disconnected")
        return self._receive()

    async def send(self, message: Any) -> None:
        if self.gone:
            raise WebSocketDisconnect(detail="the peer has disconnected")
        await self._send(message)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        await self.send({"type": "websocket.close", "code": code, "reason": reason or ""})


async def receive_text(socket: OpenSocket) -> str | None:
    """Next text frame, or None when the peer disconnected; closes with 1003 on a binary frame."""
    message: Any = await socket.receive()
    if message["type"] == "websocket.disconnect":
        socket.gone = True
        return None
    if message.get("text") is None:
        await socket.close(CLOSE_UNSUPPORTED, "binary frames are not supported")
        return None
    return message["text"]


async def close_quietly(socket: WebSocket | OpenSocket, code: int, reason: str) -> None:
    try:
        await socket.close(code, reason)
    except Exception:  # noqa: BLE001 - the peer may be gone already
        pass


def is_json(text: str) -> bool:
    """Whether a frame is JSON at all (over-deep JSON counts: the run input's own checks refuse it, in words)."""
    if too_deep(text):
        return True
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True
