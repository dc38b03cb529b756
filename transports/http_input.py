"""What every protected HTTP endpoint checks first: bearer auth, media type, and a bounded body read."""

from __future__ import annotations

import hmac

from litestar import Request

from gateway.errors import ErrorCode, GatewayError


def check_auth(request: Request, token: str | None) -> None:
    """Static bearer token, compared in constant time; no token configured means open."""
    if not token:
        return
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), token.encode()):
        raise GatewayError(ErrorCode.UNAUTHORIZED)


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
