"""Request ids and the access log, as ASGI middleware around every route.

`X-Request-ID` is honoured when it is a sane token (at most 128 of `A-Za-z0-9._:-`), else one is minted; it is
echoed on the response (and the WebSocket accept), set in `gateway.logs.REQUEST_ID` so every log line of the
request (and of the run it starts) carries it, and it goes into RUN_ERROR metadata. When the request ends, one
access line: method, path (never the query string, where credentials could be), status, bytes, duration, id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from litestar.types import Message, Receive, Scope, Send

from gateway import tracing
from gateway.ids import random_hex
from gateway.log_output import LeanLogger
from gateway.logs import REQUEST_ID

log = LeanLogger("agui.access")  # a line every request: the lean way
_SANE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
HEADER = b"x-request-id"


def request_id_of(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == HEADER:
            text = value.decode("latin-1")
            if _SANE.match(text):
                return text
            break
    return random_hex(16)


class Tracked:
    """The request's `send`, noting the status and the bytes sent, and adding the request id to the response head
    (a slotted object rather than a closure over a dict: an idle stream keeps it for its whole life)."""

    __slots__ = ("bytes", "request_id", "send", "status")

    def __init__(self, send: Send, request_id: str) -> None:
        self.send = send
        self.request_id = request_id
        self.status: int | None = None
        self.bytes = 0

    async def __call__(self, message: Message) -> None:
        raw: Any = message  # ASGI's typed dicts do not cover the denial response; read and extend them as data
        kind = raw["type"]
        if kind == "http.response.body":
            self.bytes += len(raw.get("body", b""))
        elif kind in ("http.response.start", "websocket.http.response.start"):
            self.status = raw["status"]
            raw = {**raw, "headers": [*raw.get("headers", []), (HEADER, self.request_id.encode())]}
        elif kind == "websocket.accept":
            self.status = 101
            raw = {**raw, "headers": [*(raw.get("headers") or []), (HEADER, self.request_id.encode())]}
        await self.send(raw)


async def then(step: Awaitable[Any]) -> None:
    """Await an ASGI app's call and, when it hands back a coroutine to go on with, that coroutine: a route that
    streams (transports/sse.py serve_answer) returns its body rather than awaiting it, so its own frame, and what it
    held, end before the stream's first write. A plain ASGI app returns None."""
    rest = await step
    if rest is not None:
        await rest


Route = Callable[[Scope, Receive, Send], Awaitable[Any]]  # an ASGI app, or a route that may hand back its stream


class AccessLog:
    def __init__(self, app: Route) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        tracked = Tracked(send, request_id)
        started = time.monotonic()
        try:
            if any(name == b"traceparent" for name, _ in scope["headers"]):  # continue the caller's trace (W3C)
                with tracing.incoming({name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}):
                    await then(self.app(scope, receive, tracked))
            else:  # `then` inline: an idle stream's task holds no frame more for it
                rest = await self.app(scope, receive, tracked)
                if rest is not None:
                    await rest
        finally:
            method = scope.get("method", "WS") if scope["type"] == "http" else "WS"
            client = scope.get("client")
            log.info(
                "%s %s %s %d bytes %.1f ms from %s",
                method,
                scope["path"][:200],
                tracked.status if tracked.status is not None else "-",
                tracked.bytes,
                (time.monotonic() - started) * 1000,
                client[0] if client else "-",  # after --trusted-proxies: the client a proxy named, not the proxy
            )
            REQUEST_ID.reset(token)
