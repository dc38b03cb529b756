"""CopilotKit's runtime endpoints under `--copilotkit-path` (AGENTS_AND_COPILOTKIT.md §2), so a CopilotKit app sets
its runtime URL to the gateway and needs no Node runtime in between:

- `GET {base}/info`: the runtime's description (`version`, `agents`, `mode`), as CopilotKit's runtime answers it;
- `POST {base}/agent/{agentId}/run`: a run (`POST /`'s, every rule of it);
- `POST {base}/agent/{agentId}/connect`: a join of the thread the body names (its whole conversation and state,
  then its active run live), or an empty stream for a thread with nothing to show;
- `POST {base}/agent/{agentId}/stop/{threadId}`: a stop by thread (an optional `{"runId"}`), answered
  `{"stopped":...}` as CopilotKit's runtime answers;
- `POST {base}` with CopilotKit's single-route envelope `{"method","params","body"}` for `info`, `agent/run`,
  `agent/connect` and `agent/stop`.

Every route takes the gateway's own authentication; refusals are the JSON envelope. `{agentId}` is one of the gateway's
agents (`--agents`; `--agent`'s is `default`, the id CopilotKit gives an app's agent when it names none): a connect
to a thread of another agent is THREAD_BINDING_CONFLICT, as a run of it is."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import unquote

import msgspec
from litestar import Request, Response

from gateway import __version__
from gateway.auth import Principal
from gateway.engine import CancelStatus
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.validate import MAX_BODY_BYTES, check_depth, error_from_msgspec
from transports.fallback import canonical
from transports.http_input import authenticate, caller_of, check_ids, header, read_body
from transports.render import SSE_HEADERS, SSE_MEDIA_TYPE, Dialect, json_error
from transports.services import TransportServices
from transports.sse import run_answer
from transports.sse_response import SseBody, SseRecords

MAX_CONTROL_BODY = 64 * 1024  # a stop's body


class Envelope(msgspec.Struct):
    """CopilotKit's single-route request."""

    method: str
    params: dict[str, Any] = {}
    body: msgspec.Raw = msgspec.Raw(b"null")


class Joined(msgspec.Struct):
    """What a connect reads of its RunAgentInput: the thread to join."""

    threadId: str  # noqa: N815 - the wire's name


class StopScope(msgspec.Struct, forbid_unknown_fields=True):
    runId: str | None = None  # noqa: N815 - the wire's name


_envelope = msgspec.json.Decoder(Envelope)
_joined = msgspec.json.Decoder(Joined)
_stop_scope = msgspec.json.Decoder(StopScope)


async def copilotkit_answer(request: Request, services: TransportServices) -> Response | SseBody:
    """A request under `{base}` (on the fast path, transports/fast_path.py): its runs stream as `POST /`'s."""
    language = negotiate(None, header(request, "accept-language"))
    rest = canonical(request.scope["path"])[len(services.settings.copilotkit_path) :]
    parts = [unquote(part) for part in rest.split("/")[1:]] if rest else []
    method = request.method
    try:
        if not parts and method == "POST":
            return await _single_route(request, services)
        if parts == ["info"] and method == "GET":
            await authenticate(request, services)
            return Response(info(services))
        if len(parts) >= 3 and parts[0] == "agent" and method == "POST":
            principal = await authenticate(request, services)
            agent = parts[1]
            services.engine.agents.get(agent)
            if parts[2:] == ["run"]:
                body = await read_body(request, MAX_BODY_BYTES, _body_seconds(services))
                return await run_answer(request, services, (principal, body), agent)
            if parts[2:] == ["connect"]:
                return await _connect(
                    request, services, principal, await read_body(request, MAX_BODY_BYTES, _body_seconds(services)), agent
                )
            if len(parts) == 4 and parts[2] == "stop":
                body = await read_body(request, MAX_CONTROL_BODY, _body_seconds(services))
                return await _stop(services, principal, parts[3], body)
        raise GatewayError(ErrorCode.NOT_FOUND)
    except GatewayError as error:
        return json_error(error, error.language or language)


def info(services: TransportServices) -> dict[str, Any]:
    agents = services.engine.agents
    return {
        "version": __version__,
        "agents": {
            agent_id: {"name": agent_id, "description": agents.description(agent_id), "className": "HttpAgent"} for agent_id, _ in agents
        },
        "audioFileTranscriptionEnabled": False,
        "mode": "sse",
        "threadEndpoints": {"list": False, "inspect": False, "mutations": False, "realtimeMetadata": False},
        "suggestions": False,
        "a2uiEnabled": False,
        "openGenerativeUIEnabled": False,
    }


def _body_seconds(services: TransportServices) -> float:
    return services.settings.body_timeout_seconds


async def _single_route(request: Request, services: TransportServices) -> Response | SseBody:
    principal = await authenticate(request, services)
    raw = await read_body(request, MAX_BODY_BYTES, _body_seconds(services))
    check_depth(raw)
    try:
        envelope = _envelope.decode(raw)
    except msgspec.MsgspecError as exc:
        raise error_from_msgspec(exc) from None
    inner = b"" if bytes(envelope.body) == b"null" else bytes(envelope.body)
    if envelope.method == "info":
        return Response(info(services))
    agent = ""
    if envelope.method in ("agent/run", "agent/connect", "agent/stop"):
        agent = _param(envelope, "agentId")
        services.engine.agents.get(agent)
    if envelope.method == "agent/run":
        return await run_answer(request, services, (principal, inner), agent)
    if envelope.method == "agent/connect":
        return await _connect(request, services, principal, inner, agent)
    if envelope.method == "agent/stop":
        return await _stop(services, principal, _param(envelope, "threadId"), inner)
    raise GatewayError(ErrorCode.INVALID_INPUT, "method", "One of info, agent/run, agent/connect, agent/stop.")


def _param(envelope: Envelope, name: str) -> str:
    value = envelope.params.get(name)
    text = value if isinstance(value, str) else ""
    check_ids((f"params.{name}", text))
    return text


async def _connect(request: Request, services: TransportServices, principal: Principal, body: bytes, agent: str) -> Response | SseBody:
    arrived = time.perf_counter()
    check_depth(body)
    try:
        thread_id = _joined.decode(body).threadId
    except msgspec.MsgspecError as exc:
        raise error_from_msgspec(exc) from None
    check_ids(("threadId", thread_id))
    language = negotiate(None, header(request, "accept-language"))
    run = await services.engine.join(thread_id, 0, caller_of(principal), language=language, agent=agent)
    if run is None or run.finished:  # nothing to show: an empty stream, as CopilotKit's runtime answers
        return Response(content=b"", media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS)
    return SseBody(SseRecords(run, services.settings.heartbeat_seconds, Dialect.SSE, arrived), {})


async def _stop(services: TransportServices, principal: Principal, thread_id: str, body: bytes) -> Response:
    check_ids(("threadId", thread_id))
    try:
        run_id = _stop_scope.decode(body).runId if body.strip() else None
    except msgspec.MsgspecError as exc:
        raise error_from_msgspec(exc) from None
    try:
        status = await services.engine.stop(thread_id, run_id, caller_of(principal))
    except GatewayError as error:
        if error.code is not ErrorCode.THREAD_NOT_FOUND:
            raise
        status = CancelStatus.NOT_RUNNING
    if status is CancelStatus.CANCELLED:
        interrupt = {"type": "RUN_ERROR", "message": "Run stopped by user", "code": "STOPPED"}
        return Response({"stopped": True, "interrupt": interrupt})
    message = "No active run for this thread." if run_id is None else "That run is not the thread's active run."
    return Response({"stopped": False, "message": message})
