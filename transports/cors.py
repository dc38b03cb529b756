"""Pages on other origins (`--cors-origins`): preflights answered, and every answer to an allowed origin carries the
headers a browser needs to read it. Installed around the whole application only when origins are listed."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from transports.http_input import scope_header

ALLOWED_METHODS = b"GET, POST, PATCH, DELETE, OPTIONS"
# What the gateway's clients send (@ag-ui/client, CopilotKit's providers, the page): their token, JSON, the gateway's
# own AGUI-* headers, a reconnect's position, a request id, the background preference, the language.
ALLOWED_HEADERS = (
    b"Authorization, Content-Type, Accept, Accept-Language, AGUI-Multitask, AGUI-Reattach-Grace, Last-Event-ID, "
    b"X-Request-ID, Prefer, X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token"
)
EXPOSED_HEADERS = b"Location, Retry-After, X-Request-ID, WWW-Authenticate"
MAX_AGE = b"600"


class Cors:
    """Wraps the served application: an allowed origin's preflight is answered here (204); its other requests go on,
    their answers with `Access-Control-Allow-Origin` for that origin. Other origins get no CORS header at all, so
    the browser refuses them. Returns the application's coroutine rather than awaiting it, as `Outermost` does."""

    __slots__ = ("app", "origins")

    def __init__(self, app: ASGIApp, origins: tuple[str, ...]) -> None:
        self.app = app
        self.origins = frozenset(origins)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        origin = scope_header(scope, "origin")
        if origin is None or origin not in self.origins:
            return self.app(scope, receive, send)
        allowed = origin.encode("latin-1")
        if scope.get("method") == "OPTIONS" and scope_header(scope, "access-control-request-method") is not None:
            return _preflight(send, allowed)
        return self.app(scope, receive, _Allowing(send, allowed))


class _Allowing:
    """The answer's head, with the origin allowed."""

    __slots__ = ("allowed", "send")

    def __init__(self, send: Send, allowed: bytes) -> None:
        self.send = send
        self.allowed = allowed

    def __call__(self, message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            headers += [
                (b"access-control-allow-origin", self.allowed),
                (b"access-control-expose-headers", EXPOSED_HEADERS),
                (b"vary", b"Origin"),
            ]
            message = {**message, "headers": headers}
        return self.send(message)


async def _preflight(send: Send, allowed: bytes) -> None:
    headers: list[Any] = [
        (b"access-control-allow-origin", allowed),
        (b"access-control-allow-methods", ALLOWED_METHODS),
        (b"access-control-allow-headers", ALLOWED_HEADERS),
        (b"access-control-max-age", MAX_AGE),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
