"""SSE runs: `POST /` (JSON errors before the stream) and `POST /invocations` (every error as an SSE RUN_ERROR).

Each record carries `id: <position>`; the same request retried with `Last-Event-ID` reattaches to its run, and
`AGUI-Reattach-Grace: <seconds>` keeps the run going that long after its client is gone."""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any

from litestar import Request, Response
from litestar.types import Receive, Scope, Send

from gateway import metrics
from gateway.auth import Principal
from gateway.engine import RunHandle, prepare
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.validate import MAX_BODY_BYTES
from transports.fallback import unexpected
from transports.http_input import (
    GRACE_HEADER,
    authenticate,
    caller_of,
    check_accept,
    check_media_type,
    header,
    parse_grace,
    parse_position,
    read_body,
)
from transports.render import json_error, sse_error
from transports.services import TransportServices
from transports.sse_response import BUSY_RUNS, SseBody, SseRecords

log = logging.getLogger("agui.sse")
SESSION_HEADER = "x-amzn-bedrock-agentcore-runtime-session-id"
REQUEST_ID_HEADER = "x-amzn-requestid"


def _echo_headers(request: Request) -> dict[str, str]:
    headers = {}
    for name, out in ((SESSION_HEADER, "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"), (REQUEST_ID_HEADER, "X-Amzn-RequestId")):
        value = header(request, name)
        if value and len(value) <= 256 and value.isprintable():
            headers[out] = value
    return headers


async def _start_or_attach(
    request: Request, services: TransportServices, principal: Principal, body: bytes, transport: str, runtime_session: str | None
) -> RunHandle:
    """Admit the run; a retry carrying `Last-Event-ID` follows the run it already started instead."""
    settings = services.settings
    prepared = prepare(
        body,
        allowed_roots=settings.allowed_cwd,
        default_cwd=settings.default_cwd,
        accept_language=header(request, "accept-language"),
        runtime_session_id=runtime_session,
        transport=transport,
    )
    try:
        prepared.grace_seconds = parse_grace(header(request, GRACE_HEADER))
        last = parse_position(header(request, "last-event-id"), "Last-Event-ID")
    except GatewayError as error:
        error.language = prepared.language
        raise
    caller = caller_of(principal)
    if last is not None and services.engine.reattach:
        run = prepared.run
        try:
            return await services.engine.attach(
                run.thread_id,
                run.run_id,
                prepared.workspace.extension.ros_invocation_id,
                last,
                caller,
                digest=prepared.digest,
                user_id=prepared.user_id,
                language=prepared.language,
            )
        except GatewayError as error:
            if error.code is not ErrorCode.EXECUTION_NOT_FOUND:
                error.language = prepared.language
                raise
    return await services.engine.start(prepared, caller, retry=last is not None)


async def _run(request: Request, services: TransportServices, agentcore: bool) -> Response | SseBody:
    settings = services.settings
    arrived = time.perf_counter()
    transport = "invocations" if agentcore else "sse"
    echo = _echo_headers(request)
    language = negotiate(None, header(request, "accept-language"))
    try:
        principal = await authenticate(request, services)
        check_media_type(request)
        check_accept(request)
        body = await read_body(request, MAX_BODY_BYTES, settings.body_timeout_seconds)
        run = await _start_or_attach(request, services, principal, body, transport, echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"))
    except GatewayError as error:
        language = error.language or language
        metrics.labelled(metrics.RUNS_REFUSED, transport, error.code.name).inc()
        log.info(
            "run refused code=%s field=%s session=%s",
            error.code.name,
            error.field,
            echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"),
        )
        return sse_error(error, language, echo) if agentcore else json_error(error, language, echo)
    busy = run if services.engine.in_flight >= BUSY_RUNS else None
    return SseBody(SseRecords(run, settings.heartbeat_seconds, agentcore, transport, arrived), echo, busy=busy)


async def serve_run(scope: Scope, receive: Receive, send: Send, agentcore: bool) -> Coroutine[Any, Any, None] | None:
    """A run route (transports/fast_path.py): the request, the run, the response; an unexpected failure before the
    response is the contract's 500, as Litestar's exception handlers would give it.

    A stream is handed back rather than awaited: the caller awaits the SSE body's coroutine (access_log.then), so this frame,
    and the request and answer it holds, end before the stream's first write. None: the answer was sent."""
    request: Request = Request(scope, receive)
    try:
        answer = await _run(request, scope["litestar_app"].state.services, agentcore)
    except Exception as exc:  # noqa: BLE001 - rendered as the contract's INTERNAL_ERROR, and logged
        answer = unexpected(request, exc)
    if isinstance(answer, SseBody):
        return answer(scope, receive, send)
    await answer.to_asgi_response(None, request)(scope, receive, send)
    return None
