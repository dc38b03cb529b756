"""Open endpoints: `GET /health`, `GET /ping` (AgentCore Healthy / HealthyBusy), and the RFC 9728 OAuth metadata."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from litestar import Request, Response, get

from gateway import EXTENSION_SCHEMA_VERSION, PROTOCOL_VERSION, __version__
from gateway.auth import METADATA_PATH
from gateway.fds import fd_report
from transports.services import Services


@get("/ready")
async def ready(services: Services) -> Response[Any]:
    """Readiness for a load balancer: 503 while draining or while the store refuses writes, else 200, within a
    second whatever the store does. (`/ping` is liveness and never touches the store; `/health` is information.)"""
    if services.status.draining:
        return Response({"status": "draining"}, status_code=503, headers={"Retry-After": "1"})
    if not await services.access.store_reachable():
        return Response({"status": "store unreachable"}, status_code=503, headers={"Retry-After": "1"})
    return Response({"status": "ready"}, status_code=200)


@get("/ping", sync_to_thread=False)
def ping(services: Services) -> dict[str, object]:
    status = services.status
    return {"status": status.status, "time_of_last_update": status.since}


@get("/health")
async def health(services: Services) -> dict[str, object]:
    ctx = services
    reachable = await ctx.access.store_reachable()
    reattach = {"version": 1, "maxGraceSeconds": ctx.settings.max_reattach_grace_seconds} if ctx.engine.reattach else None
    return {
        "status": "ok" if reachable else "degraded",
        "version": __version__,
        "protocolVersion": PROTOCOL_VERSION,
        "extensions": {
            "iac-code": {"schemaVersion": EXTENSION_SCHEMA_VERSION},
            **({"reattach": reattach} if reattach else {}),
        },
        "agent": ctx.engine.agent.name,  # the default agent's backend
        "clientTools": ctx.engine.agent.client_tools,  # whether a plain request to the default agent may declare client tools
        # Every agent: its backend, and whether its requests may declare client tools.
        "agents": [
            {"id": agent_id, "backend": agent.name, "default": agent_id == ctx.engine.agents.default_id, "clientTools": agent.client_tools}
            for agent_id, agent in ctx.engine.agents
        ],
        "store": {"kind": ctx.settings.store_kind, "reachable": reachable},
        "runsInFlight": ctx.engine.in_flight,
        "liveRunBytes": ctx.engine.live.report(),  # the memory budget of live runs (--max-live-run-bytes) in use
        "adoption": ctx.engine.adopter is not None,  # live runs of a dead or draining replica are taken over here
        "fileDescriptors": fd_report(),
    }


@get([METADATA_PATH, METADATA_PATH + "/{resource_path:path}"])
async def protected_resource(request: Request, services: Services) -> Response:
    """RFC 9728 metadata, at the §3.1 place for the configured `--public-url` only (404 elsewhere, and when OAuth is
    not configured)."""
    served_at = services.auth.metadata_url()
    document = await services.auth.resource_metadata() if served_at and request.url.path == urlsplit(served_at).path else None
    if document is None:
        return Response({"error": {"code": "NOT_FOUND", "message": "No protected resource is described here."}}, status_code=404)
    return Response(document, headers={"Cache-Control": "max-age=300"})
