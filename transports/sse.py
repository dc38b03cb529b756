"""SSE runs: `POST /` (JSON errors before the stream) and `POST /invocations` (every error as an SSE RUN_ERROR)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable

from litestar import Request, Response, post
from litestar.response import Stream

from gateway import metrics
from gateway.engine import RunHandle, prepare
from gateway.errors import GatewayError
from gateway.i18n import negotiate
from gateway.protocol import events as e
from gateway.protocol.validate import MAX_BODY_BYTES
from transports.http_input import authenticate, caller_of, check_accept, check_media_type, read_body
from transports.render import SSE_HEADERS, SSE_MEDIA_TYPE, agentcore_run_error, json_error, sse_error
from transports.services import Services, TransportServices

log = logging.getLogger("agui.sse")
SESSION_HEADER = "x-amzn-bedrock-agentcore-runtime-session-id"
REQUEST_ID_HEADER = "x-amzn-requestid"


async def _frames(
    run: RunHandle, heartbeat_seconds: float, rewrite: Callable[[e.Event], e.Event] | None, transport: str, arrived: float
) -> AsyncIterator[bytes]:
    encode = e.encode_sse
    events, sent = metrics.EVENTS_SENT.labels(transport), metrics.BYTES_SENT.labels(transport)
    first = True
    metrics.CONNECTIONS_OPEN.labels("sse").inc()
    try:
        async for batch in run.events(heartbeat_seconds):
            if batch is None:
                yield e.HEARTBEAT_SSE
                continue
            chunk = b"".join([encode(event) for event in batch] if rewrite is None else [encode(rewrite(event)) for event in batch])
            if first:
                metrics.TIME_TO_FIRST_EVENT.labels(transport).observe(time.perf_counter() - arrived)
                first = False
            events.inc(len(batch))
            sent.inc(len(chunk))
            yield chunk
    finally:
        metrics.CONNECTIONS_OPEN.labels("sse").dec()


def _rewrite_for_agentcore(event: e.Event) -> e.Event:
    return agentcore_run_error(event) if isinstance(event, e.RunError) else event


def _echo_headers(request: Request) -> dict[str, str]:
    headers = {}
    for name, out in ((SESSION_HEADER, "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"), (REQUEST_ID_HEADER, "X-Amzn-RequestId")):
        value = request.headers.get(name)
        if value and len(value) <= 256 and value.isprintable():
            headers[out] = value
    return headers


async def _run(request: Request, services: TransportServices, agentcore: bool) -> Response:
    settings = services.settings
    arrived = time.perf_counter()
    transport = "invocations" if agentcore else "sse"
    echo = _echo_headers(request)
    language = negotiate(None, request.headers.get("accept-language"))
    try:
        principal = await authenticate(request, services)
        check_media_type(request)
        check_accept(request)
        body = await read_body(request, MAX_BODY_BYTES, settings.body_timeout_seconds)
        prepared = prepare(
            body,
            allowed_roots=settings.allowed_cwd,
            default_cwd=settings.default_cwd,
            accept_language=request.headers.get("accept-language"),
            runtime_session_id=echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"),
            transport=transport,
        )
        language = prepared.language
        run = await services.engine.start(prepared, caller_of(principal))
    except GatewayError as error:
        language = error.language or language
        metrics.RUNS_REFUSED.labels(transport, error.code.name).inc()
        log.info(
            "run refused code=%s field=%s session=%s",
            error.code.name,
            error.field,
            echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"),
        )
        return sse_error(error, language, echo) if agentcore else json_error(error, language, echo)
    rewrite = _rewrite_for_agentcore if agentcore else None
    return Stream(
        _frames(run, settings.heartbeat_seconds, rewrite, transport, arrived),
        media_type=SSE_MEDIA_TYPE,
        headers={**SSE_HEADERS, **echo},
    )


@post("/", request_max_body_size=None, status_code=200)
async def run_root(request: Request, services: Services) -> Response:
    return await _run(request, services, agentcore=False)


@post("/invocations", request_max_body_size=None, status_code=200)
async def run_invocations(request: Request, services: Services) -> Response:
    return await _run(request, services, agentcore=True)
