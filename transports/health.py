"""Open endpoints: `GET /health`, `GET /ping` (AgentCore Healthy / HealthyBusy), and the RFC 9728 OAuth metadata."""

from __future__ import annotations

import time

from litestar import Request, Response, get

from gateway import EXTENSION_SCHEMA_VERSION, PROTOCOL_VERSION, __version__


class BusyStatus:
    """AgentCore ping status whose timestamp moves only when the status changes."""

    def __init__(self) -> None:
        self.busy = False
        self.draining = False
        self.status = "Healthy"
        self.since = int(time.time())

    def _update(self) -> None:
        status = "HealthyBusy" if (self.busy or self.draining) else "Healthy"
        if status != self.status:
            self.status = status
            self.since = int(time.time())

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self._update()

    def set_draining(self) -> None:
        self.draining = True
        self._update()


@get("/ping", sync_to_thread=False)
def ping(request: Request) -> dict:
    status: BusyStatus = request.app.state.ctx.status
    return {"status": status.status, "time_of_last_update": status.since}


@get("/health")
async def health(request: Request) -> dict:
    ctx = request.app.state.ctx
    reachable = await ctx.access.store_reachable()
    return {
        "status": "ok" if reachable else "degraded",
        "version": __version__,
        "protocolVersion": PROTOCOL_VERSION,
        "extensions": {"iac-code": {"schemaVersion": EXTENSION_SCHEMA_VERSION}},
        "agent": ctx.agent.name,
        "store": {"kind": ctx.settings.store_kind, "reachable": reachable},
        "runsInFlight": ctx.engine.in_flight,
    }


@get("/.well-known/oauth-protected-resource")
async def protected_resource(request: Request) -> Response:
    """RFC 9728 metadata: where to get tokens for this gateway (404 when OAuth is not configured)."""
    from transports.http_input import public_base

    oauth = request.app.state.ctx.oauth
    if oauth is None:
        return Response({"error": {"code": "NOT_FOUND", "message": "OAuth is not configured."}}, status_code=404)
    try:
        await oauth.ensure_discovered()
    except Exception:  # noqa: BLE001 - the document is still useful without the issuer
        pass
    return Response(oauth.metadata(public_base(request)), headers={"Cache-Control": "max-age=300"})
