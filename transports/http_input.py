"""What every protected endpoint checks first: the caller (auth, rate limit), media type, a bounded body read."""

from __future__ import annotations

import math

from litestar import Request
from litestar.connection import ASGIConnection

from gateway.auth import Principal
from gateway.errors import ErrorCode, GatewayError
from transports.services import TransportServices

METADATA_PATH = "/.well-known/oauth-protected-resource"


def bearer_token(connection: ASGIConnection) -> str | None:
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def public_base(connection: ASGIConnection, services: TransportServices) -> str:
    return services.settings.public_url or str(connection.base_url).rstrip("/")


async def authenticate(connection: ASGIConnection, services: TransportServices, token: str | None = None) -> Principal:
    """Check the bearer token (static or OAuth), then the caller's rate limit. Raises the contract's errors."""
    ctx = services
    if ctx.auth.required:
        try:
            principal = await ctx.auth.authenticate(token if token is not None else bearer_token(connection))
        except GatewayError as error:
            metadata = public_base(connection, services) + METADATA_PATH if ctx.oauth else None
            reason = (
                "insufficient_scope" if error.code is ErrorCode.ACCESS_DENIED else ("invalid_token" if bearer_token(connection) else None)
            )
            error.headers["WWW-Authenticate"] = ctx.auth.challenge(metadata, reason)
            raise
    else:
        client = connection.client
        principal = Principal(key=f"ip:{client.host if client else 'unknown'}")
    await check_rate(services, principal)
    return principal


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
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise GatewayError(ErrorCode.INVALID_INPUT, "Content-Type", "Send application/json.", http_status=415)


def check_accept(request: Request) -> None:
    accept = request.headers.get("accept")
    if accept is None:
        return
    kinds = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    if not kinds & {"text/event-stream", "text/*", "*/*"}:
        raise GatewayError(ErrorCode.INVALID_INPUT, "Accept", "The response is text/event-stream.", http_status=406)


async def read_body(request: Request, limit: int) -> bytes:
    """Read at most `limit` bytes: refuse from Content-Length, and stop a chunked body once past the limit."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise GatewayError(ErrorCode.INVALID_INPUT, "body", f"The request exceeds {limit} bytes.", http_status=413)
        except ValueError:
            raise GatewayError(ErrorCode.INVALID_INPUT, "Content-Length") from None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError(ErrorCode.INVALID_INPUT, "body", f"The request exceeds {limit} bytes.", http_status=413)
        chunks.append(chunk)
    return b"".join(chunks)
