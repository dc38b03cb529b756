"""The run routes as Litestar serves them: `POST /`, `POST /invocations`, `POST /agents/{agentId}`, CopilotKit's
endpoints and `/ws`, each a Litestar handler that is given the services by injection and awaits its answer.

These are the routes' public path: Litestar routes them, renders what no handler owns (transports/fallback.py)
and answers `OPTIONS` itself. With the tuning annex on (the default; server/annex.py), transports/fast_path.py
answers the same paths before Litestar's router with the same answers and fewer frames kept by an idle stream;
`--tuning off`, and an embedder that serves the Litestar app without the annex, get these."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, Router, post, route, websocket
from litestar.connection import WebSocket
from litestar.enums import HttpMethod

from transports.agents import agent_run
from transports.copilotkit import copilotkit_answer
from transports.fallback import RUN_ALLOW, wrong_method
from transports.render import Dialect
from transports.services import Services
from transports.sse import Answering, run_route
from transports.sse_response import SseBody, SseReply
from transports.websocket import serve_with


async def _answer(request: Request[Any, Any, Any], services: Services, answering: Answering) -> Response[Any]:
    answer = await answering(request, services)
    return SseReply(answer) if isinstance(answer, SseBody) else answer


_sse, _invocations = run_route(Dialect.SSE), run_route(Dialect.INVOCATIONS)


@post("/", status_code=200, request_max_body_size=None, include_in_schema=False)
async def run(request: Request[Any, Any, Any], services: Services) -> Response[Any]:
    return await _answer(request, services, _sse)


@post("/invocations", status_code=200, request_max_body_size=None, include_in_schema=False)
async def invocations(request: Request[Any, Any, Any], services: Services) -> Response[Any]:
    return await _answer(request, services, _invocations)


@post("/agents/{agent_id:str}", status_code=200, request_max_body_size=None, include_in_schema=False)
async def run_agent(request: Request[Any, Any, Any], services: Services) -> Response[Any]:
    return await _answer(request, services, agent_run)


# Every other method on the run routes is answered as the annex answers it: 204 with `Allow` for OPTIONS, else
# METHOD_NOT_ALLOWED naming what is allowed (Litestar's own refusal names nothing); HTTP on `/ws` allows nothing.
_OTHER = [HttpMethod.GET, HttpMethod.PUT, HttpMethod.PATCH, HttpMethod.DELETE, HttpMethod.OPTIONS]


@route(["/", "/invocations"], http_method=_OTHER, status_code=405, include_in_schema=False)
async def run_other_method(request: Request[Any, Any, Any]) -> Response[Any]:
    return wrong_method(request, RUN_ALLOW)


@route("/ws", http_method=[*_OTHER, HttpMethod.POST], status_code=405, include_in_schema=False)
async def socket_over_http(request: Request[Any, Any, Any]) -> Response[Any]:
    return wrong_method(request, None)


@websocket("/ws")
async def run_socket(socket: WebSocket[Any, Any, Any], services: Services) -> None:
    await serve_with(socket.scope, socket.receive, socket.send, services)


def copilotkit_router(path: str) -> Router:
    """CopilotKit's endpoints under `path` (`--copilotkit-path`): the single route at `path`, the others below it."""
    methods = [HttpMethod.GET, HttpMethod.POST]

    @route(["/", "/{rest:path}"], http_method=methods, status_code=200, request_max_body_size=None, include_in_schema=False)
    async def copilotkit(request: Request[Any, Any, Any], services: Services) -> Response[Any]:
        return await _answer(request, services, copilotkit_answer)

    return Router(path, route_handlers=[copilotkit])


# The methods each path does not serve come first: registered after a POST, they would meet the OPTIONS handler
# Litestar makes for a path that declares none.
RUN_ROUTES = [run_other_method, socket_over_http, run, invocations, run_agent, run_socket]
