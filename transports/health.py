"""Open endpoints: `GET /health`, `GET /ping` (AgentCore Healthy / HealthyBusy), and the RFC 9728 OAuth metadata."""

from __future__ import annotations

from litestar import Request, Response, get

from gateway import EXTENSION_SCHEMA_VERSION, PROTOCOL_VERSION, __version__
from transports.http_input import public_base
from transports.services import Services


@get("/ping", sync_to_thread=False)
def ping(services: Services) -> dict[str, object]:
    status = services.status
    return {"status": status.status, "time_of_last_update": status.since}


@get("/health")
async def health(services: Services) -> dict[str, object]:
    ctx = services
    reachable = await ctx.access.store_reachable()
    return {
        "status": "ok" if reachable else "degraded",
        "version": __version__,
        "protocolVersion": PROTOCOL_VERSION,
        "extensions": {"iac-code": {"schemaVersion": EXTENSION_SCHEMA_VERSION}},
        "agent": ctx.agent_name,
        "store": {"kind": ctx.settings.store_kind, "reachable": reachable},
        "runsInFlight": ctx.engine.in_flight,
    }


@get("/.well-known/oauth-protected-resource")
async def protected_resource(request: Request, services: Services) -> Response:
    """RFC 9728 metadata: where to get tokens for this gateway (404 when OAuth is not configured)."""
    oauth = services.oauth
    if oauth is None:
        return Response({"error": {"code": "NOT_FOUND", "message": "OAuth is not configured."}}, status_code=404)
    try:
        await oauth.ensure_discovered()
    except Exception:  # noqa: BLE001 - the document is still useful without the issuer
        pass
    return Response(oauth.metadata(public_base(request, services)), headers={"Cache-Control": "max-age=300"})
