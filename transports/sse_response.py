"""The SSE response: Litestar's `Stream`, with a body written from the request's own task.

Litestar's streaming body runs the stream in a task group beside a task that waits for the client's disconnect
(two tasks, a task group and a cancel scope per response). Here the stream runs in the request's task, and the
disconnect cancels it through a callback the connection's protocol calls when the connection is lost
(transports/http_protocol.py), so an idle run holds no task of its own for its connection. Under a server without
that hook, one task waits for the disconnect instead."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Coroutine
from typing import Any

from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from transports.lean import forget_request
from transports.render import SSE_HEADERS, SSE_MEDIA_TYPE

LOST_HOOK = "agui_on_lost"  # the attribute of uvicorn's request cycle our protocol calls when the connection is lost
_END: HTTPResponseBodyEvent = {"type": "http.response.body", "body": b"", "more_body": False}
_CONTENT_TYPE = f"{SSE_MEDIA_TYPE}; charset=utf-8"  # what Litestar's Stream says for a text media type


class SseBody:
    """A run's SSE response as a plain ASGI app (the run routes send it directly, transports/sse.py RunRoutes):
    its start with the headers Litestar's `Stream` would send, then the body as below."""

    __slots__ = ("chunks", "echo")

    def __init__(self, chunks: AsyncIterator[bytes], echo: dict[str, str]) -> None:
        self.chunks = chunks
        self.echo = echo  # headers of the request echoed on the response

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
        # The body's coroutine itself, not one awaiting it: an idle stream holds one frame fewer.
        return stream_body(self.chunks, send, receive, self._start(), scope)

    def _start(self) -> HTTPResponseStartEvent:
        headers = {**SSE_HEADERS, "Content-Type": _CONTENT_TYPE, **self.echo}
        encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
        return {"type": "http.response.start", "status": 200, "headers": encoded}

    def as_stream(self) -> SseStream:
        """The same response for Litestar's handler path."""
        return SseStream(self.chunks, media_type=SSE_MEDIA_TYPE, headers={**SSE_HEADERS, **self.echo})


class SseStream(Stream):
    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        response = super().to_asgi_response(*args, **kwargs)
        response.__class__ = _SseBody  # same layout (no slots of its own): only send_body differs
        return response


class _SseBody(ASGIStreamingResponse):
    __slots__ = ()

    async def send_body(self, send: Send, receive: Receive) -> None:
        await stream_body(self.iterator, send, receive)  # type: ignore[arg-type]  # our streams yield bytes


async def stream_body(
    chunks: AsyncIterable[bytes], send: Send, receive: Receive, start: HTTPResponseStartEvent | None = None, scope: Scope | None = None
) -> None:
    """The start when given, every chunk, then the end; the client's disconnect cancels this task and the response
    simply ends. With the scope, what only the start read is dropped once it is sent (transports/lean.py)."""
    if start is not None:
        await send(start)
        start = None  # the frame lives as long as the stream: it keeps none of the headers
    if scope is not None:
        forget_request(scope)
        scope = None
    task = asyncio.current_task()
    assert task is not None
    gone: list[bool] = []  # one entry once the client left (a list: the least a closure can flip)

    def lost() -> None:
        if not gone:
            gone.append(True)
            task.cancel()

    cycle = getattr(receive, "__self__", None)
    if cycle is None or not hasattr(cycle, "disconnected"):
        cycle, watcher = None, asyncio.ensure_future(_wait_for_disconnect(receive, lost))
    elif cycle.disconnected:
        return
    else:
        watcher = None
        setattr(cycle, LOST_HOOK, lost)
    try:
        async for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            chunk = b""  # an idle stream keeps none of what it sent
        await send(_END)
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()  # the client left: the response simply ends
    finally:
        if watcher is not None:
            watcher.cancel()
        if cycle is not None:
            setattr(cycle, LOST_HOOK, None)


async def _wait_for_disconnect(receive: Receive, lost: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    lost()
