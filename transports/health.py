"""Open endpoints: `GET /health`, `GET /ping` (AgentCore Healthy / HealthyBusy), and the RFC 9728 OAuth metadata."""

from __future__ import annotations

from urllib.parse import urlsplit

from litestar import Request, Response, get

from gateway import EXTENSION_SCHEMA_VERSION, PROTOCOL_VERSION, __version__
from gateway.auth.oauth import METADATA_PATH, metadata_url
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


@get([METADATA_PATH, METADATA_PATH + "/{resource_path:path}"])
async def protected_resource(request: Request, services: Services) -> Response:
    """RFC 9728 metadata, at the §3.1 place for the configured `--public-url` only (404 elsewhere, and when OAuth is
    not configured)."""
    oauth = services.oauth
    if oauth is None or request.url.path != urlsplit(metadata_url(oauth.resource)).path:
        return Response({"error": {"code": "NOT_FOUND", "message": "No protected resource is described here."}}, status_code=404)
    try:
        await oauth.ensure_discovered()
    except Exception:  # noqa: BLE001 - the document is still useful without the issuer
        pass
    return Response(oauth.metadata(), headers={"Cache-Control": "max-age=300"})
