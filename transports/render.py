"""The dialects a run is answered in, and a GatewayError rendered in each endpoint's contract style: JSON envelope
(POST /, cancel) or SSE RUN_ERROR (/invocations)."""

from __future__ import annotations

import enum
from typing import Any

import msgspec
from litestar import Response

from gateway.errors import AGENTCORE_STATUS, ErrorCode, GatewayError
from gateway.i18n import message_for
from gateway.logs import with_request_id
from gateway.protocol import events as e

SSE_MEDIA_TYPE = "text/event-stream"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Dialect(enum.Enum):
    """How a run is answered; the value is its transport's metrics label (gateway/metrics.py TRANSPORTS)."""

    SSE = "sse"  # POST / and the routes that stream as it does: refusals before the stream are JSON
    INVOCATIONS = "invocations"  # AgentCore's POST /invocations: every refusal an SSE RUN_ERROR, AgentCore's codes
    WS = "ws"  # /ws: refusals are RUN_ERROR frames

    @property
    def agentcore(self) -> bool:
        return self is Dialect.INVOCATIONS

    def refusal(self, error: GatewayError, language: str, headers: dict[str, str] | None = None) -> Response:
        """A run refused before its stream (not for WS, whose refusals are frames)."""
        return sse_error(error, language, headers) if self is Dialect.INVOCATIONS else json_error(error, language, headers)


def _auth_headers(error: GatewayError) -> dict[str, str]:
    headers = {}
    if error.code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = "Bearer"
    if error.code in (ErrorCode.SHUTTING_DOWN, ErrorCode.STATE_PERSISTENCE_FAILED, ErrorCode.THREAD_BUSY, ErrorCode.SERVICE_QUOTA_EXCEEDED):
        headers["Retry-After"] = "1"  # transient: a retry (here or on another replica) can succeed
    return {**headers, **error.headers}


def error_body(error: GatewayError, language: str) -> bytes:
    """The contract's JSON envelope: `{"error":{"code","message","field"?}}`."""
    body: dict[str, Any] = {"code": error.code.name, "message": message_for(error, language)}
    if error.field:
        body["field"] = error.field
    return msgspec.json.encode({"error": body})


def json_error(error: GatewayError, language: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        error_body(error, language),
        status_code=error.http_status,
        media_type="application/json",
        headers={**_auth_headers(error), **(headers or {})},
    )


def agentcore_run_error(event: e.RunError) -> e.RunError:
    """Map a gateway RUN_ERROR to AgentCore's code, keeping the precise gateway code in metadata."""
    code = event.code or ErrorCode.INTERNAL_ERROR.name
    # An upstream agent's own code (kept on the gateway's routes) is an AGENT_ERROR in AgentCore's fixed set.
    agentcore = ErrorCode[code].agentcore_code if code in ErrorCode.__members__ else "AGENT_ERROR"
    return e.RunError(message=event.message, code=agentcore, metadata={**(event.metadata or {}), "gatewayCode": code})


def sse_error(error: GatewayError, language: str, headers: dict[str, str] | None = None) -> Response:
    agentcore = error.code.agentcore_code
    metadata = with_request_id({"gatewayCode": error.code.name, **({"field": error.field} if error.field else {})})
    event = e.RunError(message=message_for(error, language), code=agentcore, metadata=metadata)
    return Response(
        e.encode_sse(event),
        status_code=AGENTCORE_STATUS[agentcore],
        media_type=SSE_MEDIA_TYPE,
        headers={**SSE_HEADERS, **_auth_headers(error), **(headers or {})},
    )
