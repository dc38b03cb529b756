"""Contract-shaped answers for what no handler owns: unknown paths (404), wrong methods (405, with `Allow`),
unexpected failures (500, logged with the path), and requests refused before routing: `Content-Length` together
with `Transfer-Encoding` (request smuggling, 400) and a NUL byte in the path (404). JSON envelopes on plain
routes, an SSE `RUN_ERROR` on `/invocations`; never Litestar's default shape."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException
from litestar.types import ASGIApp, Receive, Scope, Send

from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from transports.access_log import AccessLog
from transports.http_input import header
from transports.render import Dialect, error_body

log = logging.getLogger("agui.http")


def canonical(path: str) -> str:
    """The route a path names, as Litestar's router reads it: empty segments (`//`, a trailing `/`) dropped."""
    if "//" not in path and (len(path) == 1 or not path.endswith("/")):
        return path
    return "/" + "/".join(segment for segment in path.split("/") if segment)


def _answer(request: Request[Any, Any, Any], error: GatewayError) -> Response[Any]:
    """In the dialect of the path: AgentCore's on `/invocations`, JSON everywhere else."""
    dialect = Dialect.INVOCATIONS if canonical(request.url.path) == "/invocations" else Dialect.SSE
    return dialect.refusal(error, negotiate(None, header(request, "accept-language")))


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


def refusal(scope: Scope) -> tuple[int, ErrorCode] | None:
    """What must never reach a handler, checked on every HTTP request before routing (transports/fast_path.py).
    Computed apart, so that nothing of it stays in the frame that lives as long as the request."""
    names = {name for name, _ in scope["headers"]}
    if b"content-length" in names and b"transfer-encoding" in names:
        return 400, ErrorCode.INVALID_INPUT
    if "\x00" in scope["path"]:
        return 404, ErrorCode.NOT_FOUND
    return None


class Refusals:
    """The public path's gate (transports/run_routes.py): a request `refusal` names is refused before Litestar routes
    it, through the access log; every other goes on to `app`. (The annex's fast path does the same itself.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._refuse = AccessLog(refuse)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and refusal(scope) is not None:
            await self._refuse(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a request `refusal` names, in English (nothing of the request is trusted), closing the
    connection: after a smuggling attempt, nothing more on it is read."""
    refused = refusal(scope)
    assert refused is not None
    status, code = refused
    body = error_body(GatewayError(code), "en")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


RUN_ALLOW = "OPTIONS, POST"  # the methods of `POST /` and `POST /invocations`


def wrong_method(request: Request[Any, Any, Any], allow: str | None) -> Response[Any]:
    """A route's path with a method it does not serve: 204 with `Allow` for OPTIONS, else METHOD_NOT_ALLOWED."""
    if allow is not None and request.method == "OPTIONS":
        return Response(None, status_code=204, headers={"Allow": allow})
    error = GatewayError(ErrorCode.METHOD_NOT_ALLOWED)
    if allow is not None:
        error.headers["Allow"] = allow
    return _answer(request, error)


async def other_method(scope: Scope, receive: Receive, send: Send, allow: str | None) -> None:
    """`wrong_method`'s answer, as an ASGI app (the annex's fast path)."""
    request: Request[Any, Any, Any] = Request(scope, receive)
    await wrong_method(request, allow).to_asgi_response(None, request)(scope, receive, send)
