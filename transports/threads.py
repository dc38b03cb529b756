"""The thread API (JSON, the runs' authentication, errors in the JSON envelope): `GET /threads` (the caller's, newest
first, `limit` 1-100, an opaque `cursor`, `archived` false, true or any), `GET /threads/{threadId}` (`include`:
messages, state, runs, pendingInterrupts; all by default), `PATCH /threads/{threadId}` (title, metadata,
archived), `DELETE /threads/{threadId}` (204), `GET /threads/{threadId}/runs`, `POST /threads/{threadId}/stop` (an
optional `{"runId"}`: that run only). Under the static token or without
authentication, `?userId=` names whose threads (as on the join). Litestar describes them at `/openapi` from the
wire types below."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec
from litestar import Request, Response, delete, get, patch, post
from litestar.openapi import ResponseSpec
from litestar.params import FromPath

from gateway.engine.caller import Caller
from gateway.engine.threads import ThreadPatch
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.input import MAX_ID_LENGTH
from gateway.protocol.validate import check_depth, error_from_msgspec
from transports.http_input import authenticate, caller_of, check_media_type, header, read_body
from transports.render import json_error
from transports.services import Services, TransportServices

MAX_PATCH_BODY = 64 * 1024
INCLUDES = frozenset({"messages", "state", "runs", "pendingInterrupts"})
_patch = msgspec.json.Decoder(ThreadPatch)


class RunView(msgspec.Struct, rename="camel"):
    """One run of a thread; times are ISO 8601 (UTC)."""

    run_id: str
    status: Literal["completed", "interrupted", "cancelled", "failed", "running"]
    outcome: Literal["success", "interrupt", "cancelled", "error"] | None = None
    started_at: str | None = None
    ended_at: str | None = None


class ThreadSummary(msgspec.Struct, rename="camel"):
    """A thread as its list shows it."""

    thread_id: str
    title: str | None
    created_at: str | None
    updated_at: str | None
    status: Literal["idle", "running", "interrupted"]
    queued: int  # runs waiting behind the active one (THREADS.md §4)
    archived: bool
    metadata: dict[str, Any]
    message_count: int
    dropped_messages: int
    agent_id: str  # the agent the thread belongs to: the agent of its first run
    agent: str | None  # that agent's backend (demo, agui, a2a, ...); None when this gateway no longer declares it
    run_count: int
    last_run: RunView | None


class ThreadDetail(ThreadSummary, omit_defaults=True):
    """A thread read whole: the parts `include` names (all by default)."""

    messages: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET
    state: Any = msgspec.UNSET
    runs: list[RunView] | msgspec.UnsetType = msgspec.UNSET
    pending_interrupts: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET


class ThreadPage(msgspec.Struct, rename="camel"):
    threads: list[ThreadSummary]
    next_cursor: str | None


class RunPage(msgspec.Struct, rename="camel"):
    runs: list[RunView]
    next_cursor: str | None


class StopRequest(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """What to stop: the thread's active run, or only `runId` (a run that already ended is left, and so is the next)."""

    run_id: str | None = None


class StopAnswer(msgspec.Struct):
    status: Literal["cancelled", "already_terminal", "not_running"]


_stop_decoder = msgspec.json.Decoder(StopRequest)


class ErrorBody(msgspec.Struct):
    code: str
    message: str
    field: str | None = None


class ErrorEnvelope(msgspec.Struct):
    """Every refusal (CONTRACT §7.1)."""

    error: ErrorBody


ERRORS = {
    400: ResponseSpec(ErrorEnvelope, description="INVALID_INPUT"),
    401: ResponseSpec(ErrorEnvelope, description="UNAUTHORIZED"),
    404: ResponseSpec(ErrorEnvelope, description="THREAD_NOT_FOUND"),
    503: ResponseSpec(ErrorEnvelope, description="STATE_PERSISTENCE_FAILED"),
}


def _user_id(request: Request) -> str | None:
    user_id = request.query_params.get("userId")
    if user_id is not None and len(user_id) > MAX_ID_LENGTH:
        raise GatewayError(ErrorCode.INVALID_INPUT, "userId")
    return user_id or None


def _limit(request: Request) -> int:
    text = request.query_params.get("limit", "20")
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise GatewayError(ErrorCode.INVALID_INPUT, "limit", "Between 1 and 100.")
    return int(text)


def _thread(thread_id: str) -> None:
    if not thread_id or len(thread_id) > MAX_ID_LENGTH:
        raise GatewayError(ErrorCode.THREAD_NOT_FOUND, "threadId")


async def _answered(request: Request, services: TransportServices, work: Callable[[Caller], Awaitable[Any]], shape: Any) -> Response[Any]:
    """Authenticate, do the work, answer it as `shape` (None: 204); a refusal in the JSON envelope, in the caller's
    language."""
    language = negotiate(None, header(request, "accept-language"))
    try:
        found = await work(caller_of(await authenticate(request, services)))
    except GatewayError as error:
        return json_error(error, language)
    if shape is None:
        return Response(content=None, status_code=204)
    return Response(msgspec.convert(found, shape))


def _archived(request: Request) -> str:
    archived = request.query_params.get("archived", "false")
    if archived not in ("false", "true", "any"):
        raise GatewayError(ErrorCode.INVALID_INPUT, "archived", "One of false, true, any.")
    return archived


def _include(request: Request) -> set[str]:
    asked = request.query_params.get("include")
    include = set(INCLUDES) if asked is None else {part for part in asked.split(",") if part}
    if not include <= INCLUDES:
        raise GatewayError(ErrorCode.INVALID_INPUT, "include", "Any of messages, state, runs, pendingInterrupts.")
    return include


async def _change(request: Request, services: TransportServices) -> ThreadPatch:
    check_media_type(request)
    body = await read_body(request, MAX_PATCH_BODY, services.settings.body_timeout_seconds)
    check_depth(body)
    try:
        return _patch.decode(body)
    except msgspec.MsgspecError as exc:
        raise error_from_msgspec(exc) from None


@get("/threads", status_code=200, responses=ERRORS)
async def list_threads(request: Request, services: Services) -> Response[ThreadPage]:
    threads = services.engine.threads
    return await _answered(
        request,
        services,
        lambda caller: threads.list(caller, _user_id(request), _limit(request), request.query_params.get("cursor"), _archived(request)),
        ThreadPage,
    )


@get("/threads/{thread_id:str}", status_code=200, responses=ERRORS)
async def read_thread(request: Request, services: Services, thread_id: FromPath[str]) -> Response[ThreadDetail]:
    async def work(caller: Caller) -> Any:
        _thread(thread_id)
        return await services.engine.threads.get(caller, thread_id, _user_id(request), _include(request))

    return await _answered(request, services, work, ThreadDetail)


@patch("/threads/{thread_id:str}", status_code=200, request_max_body_size=None, responses=ERRORS)
async def change_thread(request: Request, services: Services, thread_id: FromPath[str]) -> Response[ThreadDetail]:
    async def work(caller: Caller) -> Any:
        _thread(thread_id)
        return await services.engine.threads.patch(caller, thread_id, _user_id(request), await _change(request, services))

    return await _answered(request, services, work, ThreadDetail)


# The answer is 204; a route declared 204 may have no body at all, and a refusal has one.
@delete("/threads/{thread_id:str}", status_code=200, responses={204: ResponseSpec(None, description="Erased"), **ERRORS})
async def erase_thread(request: Request, services: Services, thread_id: FromPath[str]) -> Response[None]:
    async def work(caller: Caller) -> Any:
        _thread(thread_id)
        await services.engine.threads.delete(caller, thread_id, _user_id(request))

    return await _answered(request, services, work, None)


@get("/threads/{thread_id:str}/runs", status_code=200, responses=ERRORS)
async def thread_runs(request: Request, services: Services, thread_id: FromPath[str]) -> Response[RunPage]:
    async def work(caller: Caller) -> Any:
        _thread(thread_id)
        return await services.engine.threads.runs(caller, thread_id, _user_id(request), _limit(request), request.query_params.get("cursor"))

    return await _answered(request, services, work, RunPage)


async def _stop_request(request: Request, services: TransportServices) -> StopRequest:
    body = await read_body(request, MAX_PATCH_BODY, services.settings.body_timeout_seconds)
    if not body.strip():
        return StopRequest()
    check_media_type(request)
    check_depth(body)
    try:
        asked = _stop_decoder.decode(body)
    except msgspec.MsgspecError as exc:
        raise error_from_msgspec(exc) from None
    if asked.run_id is not None and not 0 < len(asked.run_id) <= MAX_ID_LENGTH:
        raise GatewayError(ErrorCode.INVALID_INPUT, "runId", f"Between 1 and {MAX_ID_LENGTH} characters.")
    return asked


@post("/threads/{thread_id:str}/stop", status_code=200, request_max_body_size=None, responses=ERRORS)
async def stop_thread(request: Request, services: Services, thread_id: FromPath[str]) -> Response[StopAnswer]:
    async def work(caller: Caller) -> Any:
        _thread(thread_id)
        asked = await _stop_request(request, services)
        return {"status": (await services.engine.stop(thread_id, asked.run_id, caller, _user_id(request))).value}

    return await _answered(request, services, work, StopAnswer)
