"""SSE runs: `POST /` (JSON errors before the stream) and `POST /invocations` (every error as an SSE RUN_ERROR).

Each record carries `id: <position>`; the same request retried with `Last-Event-ID` reattaches to its run, and
`AGUI-Reattach-Grace: <seconds>` keeps the run going that long after its client is gone. `AGUI-Multitask` names what a
busy thread does with the run (THREADS.md §4): a queued run's response is open at once, with heartbeats, and a refusal
when its turn comes is its RUN_ERROR. `POST /` with `Prefer: respond-async` answers 202 once the run is admitted (or
queued), and the run goes on with no client (THREADS.md §6)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response
from litestar.status_codes import HTTP_202_ACCEPTED
from litestar.types import Receive, Scope, Send

from gateway import metrics
from gateway.auth import Principal
from gateway.engine import RunHandle
from gateway.engine.prepare import PreparedRun
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
    parse_position,
    read_body,
)
from transports.render import Dialect
from transports.run_input import prepared_run
from transports.services import TransportServices
from transports.sse_response import BUSY_RUNS, SseBody, SseRecords

log = logging.getLogger("agui.sse")
SESSION_HEADER = "x-amzn-bedrock-agentcore-runtime-session-id"
REQUEST_ID_HEADER = "x-amzn-requestid"
MULTITASK_HEADER = "agui-multitask"


def _background(request: Request) -> bool:
    """`Prefer: respond-async` (RFC 7240: preferences are comma-separated, each maybe with parameters)."""
    prefer = header(request, "prefer")
    return prefer is not None and any(part.split(";", 1)[0].strip().lower() == "respond-async" for part in prefer.split(","))


GivenBody = tuple[Principal, bytes]  # a request's caller and body, already authenticated and read


class Accepted(msgspec.Struct):
    """A run that needs no client, admitted: where to follow it."""

    threadId: str  # noqa: N815 - the wire's names
    runId: str  # noqa: N815
    events: str


def _echo_headers(request: Request) -> dict[str, str]:
    headers = {}
    for name, out in ((SESSION_HEADER, "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"), (REQUEST_ID_HEADER, "X-Amzn-RequestId")):
        value = header(request, name)
        if value and len(value) <= 256 and value.isprintable():
            headers[out] = value
    return headers


async def _start_or_attach(
    request: Request,
    services: TransportServices,
    principal: Principal,
    body: bytes,
    dialect: Dialect,
    runtime_session: str | None,
    agent: str,
) -> RunHandle:
    """Admit the run; a retry carrying `Last-Event-ID` follows the run it already started instead."""
    prepared = _prepared(request, services, body, dialect, runtime_session, agent)
    try:
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


def _prepared(
    request: Request, services: TransportServices, body: bytes, dialect: Dialect, runtime_session: str | None, agent: str
) -> PreparedRun:
    return prepared_run(
        services.settings,
        body,
        transport=dialect.value,
        agent=agent,
        accept_language=header(request, "accept-language"),
        runtime_session=runtime_session,
        grace=header(request, GRACE_HEADER),
        grace_field="AGUI-Reattach-Grace",
        multitask=header(request, MULTITASK_HEADER),
    )


async def _start_background(request: Request, services: TransportServices, principal: Principal, body: bytes, agent: str) -> Response:
    prepared = _prepared(request, services, body, Dialect.SSE, header(request, SESSION_HEADER), agent)
    try:
        await services.engine.start_background(prepared, caller_of(principal))
    except GatewayError as error:
        error.language = error.language or prepared.language
        raise
    run = prepared.run
    events = f"/threads/{quote(run.thread_id, safe='')}/runs/{quote(run.run_id, safe='')}/events"
    answer = Accepted(run.thread_id, run.run_id, events)
    return Response(answer, status_code=HTTP_202_ACCEPTED, headers={"Location": events, **_echo_headers(request)})


async def _run(
    request: Request, services: TransportServices, dialect: Dialect, given: GivenBody | None = None, agent: str = ""
) -> Response | SseBody:
    """`given`: the caller already authenticated the request and read its body (CopilotKit's single route, whose
    run is inside its envelope); `agent`: the agent the route names (empty: the default)."""
    settings = services.settings
    arrived = time.perf_counter()
    echo = _echo_headers(request)
    language = negotiate(None, header(request, "accept-language"))
    try:
        if given is None:
            principal = await authenticate(request, services)
            check_media_type(request)
            check_accept(request)
            body = await read_body(request, MAX_BODY_BYTES, settings.body_timeout_seconds)
        else:
            principal, body = given
        if dialect is Dialect.SSE and _background(request):
            return await _start_background(request, services, principal, body, agent)
        session = echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id")
        run = await _start_or_attach(request, services, principal, body, dialect, session, agent)
    except GatewayError as error:
        language = error.language or language
        metrics.labelled(metrics.RUNS_REFUSED, dialect.value, error.code.name).inc()
        log.info(
            "run refused code=%s field=%s session=%s",
            error.code.name,
            error.field,
            echo.get("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"),
        )
        return dialect.refusal(error, language, echo)
    busy = run if services.engine.in_flight >= BUSY_RUNS and not run.queued else None
    return SseBody(SseRecords(run, settings.heartbeat_seconds, dialect, arrived), echo, busy=busy, prompt=run.queued)


async def run_answer(request: Request, services: TransportServices, given: GivenBody | None = None, agent: str = "") -> Response | SseBody:
    """`POST /`'s answer to this request, a run of `agent` (empty: the default): the run's SSE body, or its refusal (JSON)."""
    return await _run(request, services, Dialect.SSE, given, agent)


Answering = Callable[[Request, TransportServices], Awaitable[Response | SseBody]]


def run_route(dialect: Dialect) -> Answering:
    """The answer of a run route (`POST /`, `POST /invocations`), for `serve_answer`."""
    return partial(_run, dialect=dialect)


async def serve_answer(scope: Scope, receive: Receive, send: Send, answering: Answering) -> Coroutine[Any, Any, None] | None:
    """A route on the fast path (transports/fast_path.py): `answering`'s answer to the request; an unexpected failure
    before it is the contract's 500, as Litestar's exception handlers would give it.

    A stream is handed back rather than awaited: the caller awaits the SSE body's coroutine (access_log.then), so this
    frame, and the request and answer it holds, end before the stream's first write. None: the answer was sent."""
    request: Request = Request(scope, receive)
    try:
        answer = await answering(request, scope["litestar_app"].state.services)
    except Exception as exc:  # noqa: BLE001 - rendered as the contract's INTERNAL_ERROR, and logged
        answer = unexpected(request, exc)
    if isinstance(answer, SseBody):
        return answer(scope, receive, send)
    await answer.to_asgi_response(None, request)(scope, receive, send)
    return None
