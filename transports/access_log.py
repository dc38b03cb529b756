"""Request ids and the access log, as ASGI middleware around every route.

`X-Request-ID` is honoured when it is a sane token (at most 128 of `A-Za-z0-9._:-`), else one is minted; it is
echoed on the response (and the WebSocket accept), set in `gateway.logs.REQUEST_ID` so every log line of the
request (and of the run it starts) carries it, and it goes into RUN_ERROR metadata. When the request ends, one
access line: method, path (never the query string, where credentials could be), status, bytes, duration, id.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from gateway import tracing
from gateway.logs import REQUEST_ID

log = logging.getLogger("agui.access")
_SANE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
HEADER = b"x-request-id"


def request_id_of(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == HEADER:
            text = value.decode("latin-1")
            if _SANE.match(text):
                return text
            break
    return os.urandom(16).hex()


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        outcome: dict[str, Any] = {"status": None, "bytes": 0}
        header = (HEADER, request_id.encode())

        async def tracked(message: Message) -> None:
            raw: Any = message  # ASGI's typed dicts do not cover the denial response; read and extend them as data
            kind = raw["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                outcome["status"] = raw["status"]
                raw = {**raw, "headers": [*raw.get("headers", []), header]}
            elif kind == "websocket.accept":
                outcome["status"] = 101
                raw = {**raw, "headers": [*(raw.get("headers") or []), header]}
            elif kind == "http.response.body":
                outcome["bytes"] += len(raw.get("body", b""))
            await send(raw)

        started = time.monotonic()
        try:
            if any(name == b"traceparent" for name, _ in scope["headers"]):  # continue the caller's trace (W3C)
                with tracing.incoming({name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}):
                    await self.app(scope, receive, tracked)
            else:
                await self.app(scope, receive, tracked)
        finally:
            method = scope.get("method", "WS") if scope["type"] == "http" else "WS"
            log.info(
                "%s %s %s %d bytes %.1f ms",
                method,
                scope["path"][:200],
                outcome["status"] if outcome["status"] is not None else "-",
                outcome["bytes"],
                (time.monotonic() - started) * 1000,
            )
            REQUEST_ID.reset(token)
