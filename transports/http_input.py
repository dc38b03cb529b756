"""What every protected endpoint checks first: the caller (auth, rate limit), media type, a bounded body read."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from functools import partial
from types import CoroutineType
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.types import Receive

from gateway import metrics
from gateway.auth import Principal
from gateway.engine import ANONYMOUS, Caller
from gateway.engine.eager import resumed
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol.input import MAX_ID_LENGTH
from gateway.protocol.validate import MAX_BODY_BYTES
from transports.deadlines import deadlines
from transports.services import TransportServices
from transports.signed import signed, signed_request

SIGNED_BODY = "agui.signed_body"  # the scope's key for a signed request's body, read before its signature was checked


def header(connection: ASGIConnection[Any, Any, Any, Any], name: str) -> str | None:
    """The first value of a request header, read from the ASGI scope's list (names arrive lower-case): no parsed
    header map is built, nor kept for the life of a long stream."""
    return scope_header(connection.scope, name)


def scope_header(scope: Any, name: str) -> str | None:
    """`header`, from a scope."""
    key = _KEYS.get(name) or _key(name)  # the kept spelling read here first: a run asks nine times, a call each
    for raw, value in scope["headers"]:
        if raw == key:
            text: str = value.decode("latin-1")
            return text
    return None


_KEYS: dict[str, bytes] = {}  # a header name as the scope spells it, by the name asked for


def _key(name: str) -> bytes:
    """`name` as the scope spells it (lower-case bytes), kept for the next lookup of it."""
    key = _KEYS.get(name)
    if key is None:
        key = name.lower().encode("latin-1")
        if len(_KEYS) < 64:  # the names the code asks for: a run reads nine of them
            _KEYS[name] = key
    return key


def header_values(connection: ASGIConnection[Any, Any, Any, Any], name: str) -> list[str]:
    key = _key(name)
    return [value.decode("latin-1") for raw, value in connection.scope["headers"] if raw == key]


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The bearer token of the one Authorization header; two or more headers are refused (400 invalid_request)."""
    values = header_values(connection, "authorization")
    if len(values) > 1:
        error = GatewayError(ErrorCode.INVALID_INPUT, "Authorization", "Send exactly one Authorization header.", http_status=400)
        error.headers["WWW-Authenticate"] = 'Bearer error="invalid_request"'
        raise error
    scheme, _, token = (values[0] if values else "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def caller_of(principal: Principal) -> Caller:
    """What the engine needs of a principal: the identity its threads are bound to, the user it asserts."""
    return Caller(owner=principal.owner, user_id=principal.user_id) if principal.owner else ANONYMOUS


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any], services: TransportServices, token: str | None = None) -> Principal:
    """Check the bearer token (static or OAuth) or the request's SigV4 signature, then the caller's rate limit.
    Raises the contract's errors."""
    ctx = services
    sigv4 = ctx.auth.sigv4
    if sigv4 is not None and token is None and signed(connection.scope, header(connection, "authorization")):
        body = await _signed_body(connection, services)
        try:
            principal = sigv4.verify(signed_request(connection.scope), body)
        except GatewayError:
            metrics.labelled(metrics.AUTH_FAILURES, "sigv4").inc()
            raise  # 403 ACCESS_DENIED, no challenge: how a SigV4 resource refuses
    elif ctx.auth.required and not ctx.auth.takes_bearer:  # SigV4 is the only way in
        metrics.labelled(metrics.AUTH_FAILURES, "missing").inc()
        raise GatewayError(ErrorCode.ACCESS_DENIED, detail="Sign the request with AWS Signature Version 4.")
    elif ctx.auth.required:
        presented = token if token is not None else bearer_token(connection)
        try:
            principal = await ctx.auth.authenticate(presented)
        except GatewayError as error:
            reason = "missing" if presented is None else ("scope" if error.code is ErrorCode.ACCESS_DENIED else "invalid")
            metrics.labelled(metrics.AUTH_FAILURES, reason).inc()
            error.headers["WWW-Authenticate"] = services.auth.challenge(error, presented is not None)
            raise
    else:
        client = connection.client
        principal = Principal(key=f"ip:{client.host if client else 'unknown'}")
    await check_rate(services, principal)
    return principal


async def authenticate_or_redeem(
    connection: ASGIConnection[Any, Any, Any, Any], services: TransportServices, tickets: list[str], token: str | None = None
) -> Principal:
    """For clients that cannot send headers (browsers' WebSocket and EventSource): a single-use ticket acts as the
    principal it was issued to; otherwise the bearer token (header, or `token`). Raises the contract's errors."""
    if services.auth.required and tickets:
        for ticket in tickets[:2]:
            principal = await services.access.redeem_ticket(ticket)
            if principal is not None:
                return principal
        error = GatewayError(ErrorCode.UNAUTHORIZED, detail="The ticket is unknown, used or expired.")
        error.headers["WWW-Authenticate"] = services.auth.challenge(error, had_token=True)
        raise error
    return await authenticate(connection, services, token)


def check_ids(*pairs: tuple[str, str]) -> None:
    """Each (field, id) is 1 to MAX_ID_LENGTH characters, else INVALID_INPUT naming the field."""
    for name, value in pairs:
        if not value or len(value) > MAX_ID_LENGTH:
            raise GatewayError(ErrorCode.INVALID_INPUT, name, f"Between 1 and {MAX_ID_LENGTH} characters.")


async def check_rate(services: TransportServices, principal: Principal) -> None:
    if services.settings.rate_limit is None:
        return
    rate, burst = services.settings.rate_limit
    wait = await services.access.rate_wait(principal.key, rate, burst)
    if wait > 0:
        error = GatewayError(ErrorCode.RATE_LIMIT_EXCEEDED)
        error.headers["Retry-After"] = str(max(1, math.ceil(wait)))
        raise error


def check_media_type(request: Request) -> None:
    media_type = (header(request, "content-type") or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise GatewayError(ErrorCode.INVALID_INPUT, "Content-Type", "Send application/json.", http_status=415)


def check_accept(request: Request) -> None:
    accept = header(request, "accept")
    if accept is None:
        return
    kinds = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    if not kinds & {"text/event-stream", "text/*", "*/*"}:
        raise GatewayError(ErrorCode.INVALID_INPUT, "Accept", "The response is text/event-stream.", http_status=406)


async def _signed_body(connection: ASGIConnection[Any, Any, Any, Any], services: TransportServices) -> bytes:
    """A signed request's body, read before its signature is checked (its hash is signed): kept in its scope, where
    `read_body` finds it. A WebSocket's upgrade, and a request that declares none, has none."""
    if connection.scope["type"] != "http" or (
        header(connection, "content-length") in (None, "0") and not header(connection, "transfer-encoding")
    ):
        return b""
    body = await read_body(Request(connection.scope, connection.receive), MAX_BODY_BYTES, services.settings.body_timeout_seconds)
    connection.scope[SIGNED_BODY] = body  # type: ignore[literal-required]
    return body


async def read_body(request: Request[Any, Any, Any], limit: int, timeout: float) -> bytes:
    """Read at most `limit` bytes within `timeout` seconds: refuse from Content-Length, stop a chunked body once
    past the limit, and refuse a body that trickles in (408). Refusals close the connection (the rest of the
    body is never read). A signed request's body was read with its signature."""
    kept = request.scope.get(SIGNED_BODY)
    if isinstance(kept, bytes):
        if len(kept) > limit:
            raise _too_large(limit)
        return kept
    declared = header(request, "content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise _too_large(limit)
        except ValueError:
            raise GatewayError(ErrorCode.INVALID_INPUT, "Content-Length") from None
    receive = request.receive  # the ASGI messages directly: Request.stream() builds and keeps a parsed header map
    step = receive()
    if type(step) is not CoroutineType:
        return await _read_rest(step, receive, limit, timeout)
    try:  # most bodies arrive with their head: one that is here whole is read with no deadline to set and clear
        waiting_on = step.send(None)
    except StopIteration as answered:
        message = answered.value
        if message["type"] != "http.request" or message.get("more_body", False):
            return await _read_rest(_given(message), receive, limit, timeout)
        body: bytes = message.get("body", b"")
        if len(body) > limit:
            raise _too_large(limit) from None
        return body
    return await _read_rest(resumed(step, waiting_on), receive, limit, timeout)


async def _given(message: Any) -> Any:
    return message


async def _read_rest(first: Awaitable[Any], receive: Receive, limit: int, timeout: float) -> bytes:
    """`read_body` from its first message (`first`, which may still be on its way) on, under the body's deadline."""
    chunks: list[bytes] = []
    size = 0
    body_deadlines = deadlines(timeout)
    try:
        # asyncio's timeout without a timer of its own: the loop's body deadlines expire it by rescheduling it to a
        # time already past (a cancelled timer would stay in the loop's heap for `timeout` seconds after each body).
        async with asyncio.timeout(None) as within:
            body_deadlines.add(within, partial(within.reschedule, 0))
            try:
                next_message: Awaitable[Any] | None = first
                while True:
                    message: Any = await (next_message or receive())
                    next_message = None
                    if message["type"] == "http.disconnect":
                        raise _closing(GatewayError(ErrorCode.INVALID_INPUT, "body", "The client left before its body arrived."))
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _too_large(limit)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
            finally:
                body_deadlines.discard(within)
    except TimeoutError:
        raise _closing(GatewayError(ErrorCode.REQUEST_TIMEOUT, "body", f"The body did not arrive within {timeout:g} seconds.")) from None
    return b"".join(chunks)


def _too_large(limit: int) -> GatewayError:
    return _closing(GatewayError(ErrorCode.INVALID_INPUT, "body", f"The request exceeds {limit} bytes.", http_status=413))


def _closing(error: GatewayError) -> GatewayError:
    error.headers["Connection"] = "close"
    return error


GRACE_HEADER = "agui-reattach-grace"
MAX_POSITION_LENGTH = 18


def parse_position(value: str | None, field: str = "lastEventId") -> int | None:
    """A client's last event position (an `id:` it received), or None when it sent none."""
    if value is None or value == "":
        return None
    if len(value) > MAX_POSITION_LENGTH or not value.isascii() or not value.isdigit():
        raise GatewayError(ErrorCode.INVALID_INPUT, field, "Send an event id exactly as the gateway gave it.")
    return int(value)


def parse_grace(value: str | float | None, field: str = "AGUI-Reattach-Grace") -> float:
    """The grace window a client asks for, in seconds (0 when it asks for none); the engine caps it."""
    if value is None:
        return 0.0
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds < 0:
        raise GatewayError(ErrorCode.INVALID_INPUT, field, "Send a number of seconds, 0 or more.")
    return seconds
