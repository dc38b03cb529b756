"""`GET /threads/{threadId}/runs/{runId}/events`: follow a run from a position (`Last-Event-ID`, which a browser's
EventSource sends by itself when it reconnects, or `?lastEventId=`), as SSE. Only the run's caller may: the same
authorization as starting a run (or a single-use `?ticket=`, since EventSource cannot send headers) and the run's
`rosInvocationId`, and `?userId=` when the run was bound to a userId. An unknown run, another caller's run, a wrong
rosInvocationId and a wrong or missing userId all answer 404 alike, after the same time. A position at the run's
terminal event answers 204 (an EventSource stops reconnecting); a position past it, 400."""

from __future__ import annotations

import time

from litestar import Request, Response, get
from litestar.params import FromPath

from gateway import metrics
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.input import MAX_ID_LENGTH
from transports.http_input import authenticate_or_redeem, caller_of, check_accept, header, parse_position
from transports.render import json_error
from transports.services import Services
from transports.sse_response import SseBody, SseRecords, SseReply


def _check_ids(*pairs: tuple[str, str]) -> None:
    for name, value in pairs:
        if not value or len(value) > MAX_ID_LENGTH:
            raise GatewayError(ErrorCode.INVALID_INPUT, name, f"Between 1 and {MAX_ID_LENGTH} characters.")


@get("/threads/{thread_id:str}/runs/{run_id:str}/events", status_code=200)
async def run_events(request: Request, services: Services, thread_id: FromPath[str], run_id: FromPath[str]) -> Response:
    arrived = time.perf_counter()
    language = negotiate(None, header(request, "accept-language"))
    query = request.query_params
    try:
        tickets = [query["ticket"]] if query.get("ticket") else []
        principal = await authenticate_or_redeem(request, services, tickets)
        check_accept(request)
        _check_ids(("threadId", thread_id), ("runId", run_id))
        from_header = parse_position(header(request, "last-event-id"), "Last-Event-ID")
        last = from_header if from_header is not None else parse_position(query.get("lastEventId"))
        ros_invocation_id = query.get("rosInvocationId", "")
        user_id = query.get("userId")
        for name, value in (("rosInvocationId", ros_invocation_id), ("userId", user_id or "")):
            if len(value) > MAX_ID_LENGTH:
                raise GatewayError(ErrorCode.INVALID_INPUT, name)
        run = await services.engine.attach(
            thread_id, run_id, ros_invocation_id, last or 0, caller_of(principal), user_id=user_id or None, language=language
        )
    except GatewayError as error:
        metrics.labelled(metrics.REATTACHES, error.code.name).inc()
        return json_error(error, language)
    if run.finished:
        return Response(content=b"", status_code=204)
    return SseReply(SseBody(SseRecords(run, services.settings.heartbeat_seconds, False, "sse", arrived), {}))
