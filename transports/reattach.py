"""`GET /threads/{threadId}/runs/{runId}/events`: follow a run from a position (`Last-Event-ID`, which a browser's
EventSource sends by itself when it reconnects, or `?lastEventId=`), as SSE. Only the run's caller may: the same
authorization as starting a run (or a single-use `?ticket=`, since EventSource cannot send headers) and the run's
`rosInvocationId` (a plain AG-UI run's is its thread's, `thread:<threadId>`, taken when none is sent), and `?userId=` when the run was bound to a userId. An unknown run, another caller's run, a wrong
rosInvocationId and a wrong or missing userId all answer 404 alike, after the same time. A position at the run's
terminal event answers 204 (an EventSource stops reconnecting); a position past it, 400.

`GET /threads/{threadId}/events`: join a thread (what `@ag-ui/client`'s `connectAgent()` does when a chat page
opens): its newest run, replayed from its log and then followed live while it runs, from `Last-Event-ID` (a
position in that run). The same authorization and `?userId=` rule; a thread with no retained run, or one that
is not the caller's, answers 204."""

from __future__ import annotations

import time

from litestar import Request, Response, get
from litestar.params import FromPath

from gateway import metrics
from gateway.engine import RunHandle
from gateway.engine.caller import Caller
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.input import MAX_ID_LENGTH
from gateway.protocol.validate import plain_invocation_id
from transports.http_input import authenticate_or_redeem, caller_of, check_accept, check_ids, header, parse_position
from transports.render import Dialect, json_error
from transports.services import Services
from transports.sse_response import SseBody, SseRecords, SseReply


def _position(request: Request) -> int | None:
    from_header = parse_position(header(request, "last-event-id"), "Last-Event-ID")
    return from_header if from_header is not None else parse_position(request.query_params.get("lastEventId"))


def _join_position(request: Request) -> tuple[int, str | None]:
    """A join's position: `<runId>:<n>` or `<runId>:end` as a join gives them (the run, and -1 for its end), or a
    bare position in the thread's newest run."""
    field, text = "Last-Event-ID", header(request, "last-event-id")
    if not text:
        field, text = "lastEventId", request.query_params.get("lastEventId")
    if not text or ":" not in text:
        return parse_position(text, field) or 0, None
    run_id, _, place = text.rpartition(":")
    if not run_id or len(run_id) > MAX_ID_LENGTH:
        raise GatewayError(ErrorCode.INVALID_INPUT, field, "Send an event id exactly as the gateway gave it.")
    return (-1 if place == "end" else parse_position(place, field) or 0), run_id


def _user_id(request: Request) -> str | None:
    user_id = request.query_params.get("userId")
    if user_id is not None and len(user_id) > MAX_ID_LENGTH:
        raise GatewayError(ErrorCode.INVALID_INPUT, "userId")
    return user_id or None


async def _follower(request: Request, services: Services) -> Caller:
    """The caller of a follow or a join: a bearer or a single-use `?ticket=` (an EventSource sends no header),
    accepting an event stream."""
    tickets = [request.query_params["ticket"]] if request.query_params.get("ticket") else []
    principal = await authenticate_or_redeem(request, services, tickets)
    check_accept(request)
    return caller_of(principal)


def _streamed(run: RunHandle | None, services: Services, arrived: float) -> Response:
    """204 when there is nothing more to send (an EventSource stops reconnecting), else the run as SSE."""
    if run is None or run.finished:
        return Response(content=b"", status_code=204)
    return SseReply(SseBody(SseRecords(run, services.settings.heartbeat_seconds, Dialect.SSE, arrived), {}))


@get("/threads/{thread_id:str}/runs/{run_id:str}/events", status_code=200)
async def run_events(request: Request, services: Services, thread_id: FromPath[str], run_id: FromPath[str]) -> Response:
    arrived = time.perf_counter()
    language = negotiate(None, header(request, "accept-language"))
    try:
        caller = await _follower(request, services)
        check_ids(("threadId", thread_id), ("runId", run_id))
        # A plain run's identity is its thread's: its caller follows it with no rosInvocationId.
        ros_invocation_id = request.query_params.get("rosInvocationId") or plain_invocation_id(thread_id)
        if len(ros_invocation_id) > MAX_ID_LENGTH:
            raise GatewayError(ErrorCode.INVALID_INPUT, "rosInvocationId")
        last = _position(request) or 0
        run = await services.engine.attach(thread_id, run_id, ros_invocation_id, last, caller, user_id=_user_id(request), language=language)
    except GatewayError as error:
        metrics.labelled(metrics.REATTACHES, error.code.name).inc()
        return json_error(error, language)
    return _streamed(run, services, arrived)


@get("/threads/{thread_id:str}/events", status_code=200)
async def thread_events(request: Request, services: Services, thread_id: FromPath[str]) -> Response:
    arrived = time.perf_counter()
    language = negotiate(None, header(request, "accept-language"))
    try:
        caller = await _follower(request, services)
        check_ids(("threadId", thread_id))
        after, after_run = _join_position(request)
        run = await services.engine.join(thread_id, after, caller, user_id=_user_id(request), language=language, after_run=after_run)
    except GatewayError as error:
        metrics.labelled(metrics.REATTACHES, error.code.name).inc()
        return json_error(error, language)
    return _streamed(run, services, arrived)
