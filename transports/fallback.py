"""Contract-shaped answers for what no handler owns: unknown paths (404), wrong methods (405), unexpected
failures (500, logged with the path), and requests refused before routing: `Content-Length` together with
`Transfer-Encoding` (request smuggling, 400) and a NUL byte in the path (404). JSON envelopes on plain routes,
an SSE `RUN_ERROR` on `/invocations`; never Litestar's default shape."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException
from litestar.types import ASGIApp, Receive, Scope, Send

from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from transports.http_input import header
from transports.render import error_body, json_error, sse_error

log = logging.getLogger("agui.http")


def _answer(request: Request[Any, Any, Any], error: GatewayError) -> Response[Any]:
    language = negotiate(None, header(request, "accept-language"))
    if request.url.path.rstrip("/") == "/invocations":
        return sse_error(error, language)
    return json_error(error, language)


def not_found(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    return _answer(request, GatewayError(ErrorCode.NOT_FOUND))


def method_not_allowed(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    error = GatewayError(ErrorCode.METHOD_NOT_ALLOWED)
    allowed = exc.headers.get("Allow") if isinstance(exc, HTTPException) and exc.headers else None
    if allowed:
        error.headers["Allow"] = allowed
    return _answer(request, error)


def other_http_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {400: ErrorCode.INVALID_INPUT, 404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(status)
    if code is None:
        return unexpected(request, exc)
    return _answer(request, GatewayError(code))


def unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.error("unexpected failure on %s %s", request.method, request.url.path[:200], exc_info=exc)
    return _answer(request, GatewayError(ErrorCode.INTERNAL_ERROR))


EXCEPTION_HANDLERS = {
    NotFoundException: not_found,
    MethodNotAllowedException: method_not_allowed,
    HTTPException: other_http_error,
    Exception: unexpected,
}


def _envelope(status: int, code: ErrorCode, language: str) -> tuple[Any, bytes]:
    body = error_body(GatewayError(code), language)
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")],
    }
    return start, body


def refusal(scope: Scope) -> tuple[int, ErrorCode] | None:
    """Computed apart, so that nothing of it stays in the frame that lives as long as the request."""
    names = {name for name, _ in scope["headers"]}
    if b"content-length" in names and b"transfer-encoding" in names:
        return 400, ErrorCode.INVALID_INPUT
    if "\x00" in scope["path"]:
        return 404, ErrorCode.NOT_FOUND
    return None


class RequestHygiene:
    """ASGI middleware: refuses, before routing, what must never reach a handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = refusal(scope)
            if refused is not None:
                start, body = _envelope(refused[0], refused[1], "en")
                await send(start)
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
        await self.app(scope, receive, send)
