"""The gateway's agents (AGENTS_AND_COPILOTKIT.md §1): `GET /agents` and `GET /agents/{agentId}` describe each with
AG-UI's AgentCapabilities; `POST /agents/{agentId}` runs one, as `POST /` runs the default (an `@ag-ui/client`
`HttpAgent` with that URL works as it does with `POST /`). The same authentication as runs; an unknown agent is 404
`AGENT_NOT_FOUND`."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from litestar import Request, Response, get
from litestar.params import FromPath

from gateway.agents.discovery import describe
from gateway.errors import GatewayError
from gateway.i18n import negotiate
from gateway.protocol.validate import MAX_BODY_BYTES
from transports.fallback import canonical
from transports.http_input import authenticate, check_media_type, header, read_body
from transports.render import json_error
from transports.services import Services, TransportServices
from transports.sse import run_answer
from transports.sse_response import SseBody

AGENTS_PREFIX = "/agents/"


def description_of(services: TransportServices, agent_id: str) -> dict[str, Any]:
    engine = services.engine
    keeps = engine.history is not None and engine.history.keeps(plain=True)
    return describe(engine.agents, agent_id, reattach=engine.reattach, keeps_conversation=keeps)


@get("/agents", status_code=200)
async def list_agents(request: Request, services: Services) -> Response:
    try:
        await authenticate(request, services)
    except GatewayError as error:
        return json_error(error, negotiate(None, header(request, "accept-language")))
    return Response({"agents": [description_of(services, agent_id) for agent_id, _ in services.engine.agents]})


@get("/agents/{agent_id:str}", status_code=200)
async def read_agent(request: Request, services: Services, agent_id: FromPath[str]) -> Response:
    try:
        await authenticate(request, services)
        services.engine.agents.get(agent_id)
    except GatewayError as error:
        return json_error(error, negotiate(None, header(request, "accept-language")))
    return Response(description_of(services, agent_id))


async def agent_run(request: Request, services: TransportServices) -> Response | SseBody:
    """`POST /agents/{agentId}` (on the fast path, transports/fast_path.py): the agent's run, streamed as `POST /`'s."""
    try:
        principal = await authenticate(request, services)
        agent_id = unquote(canonical(request.scope["path"])[len(AGENTS_PREFIX) :])
        services.engine.agents.get(agent_id)
        check_media_type(request)
        body = await read_body(request, MAX_BODY_BYTES, services.settings.body_timeout_seconds)
    except GatewayError as error:
        return json_error(error, error.language or negotiate(None, header(request, "accept-language")))
    return await run_answer(request, services, (principal, body), agent_id)
