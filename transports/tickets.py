"""`POST /ws/tickets`: an authenticated request gets a short-lived, single-use ticket for a browser WebSocket."""

from __future__ import annotations

from litestar import Request, Response, post

from gateway.errors import GatewayError
from gateway.i18n import negotiate
from transports.http_input import authenticate, header
from transports.render import json_error
from transports.services import Services


@post("/ws/tickets", status_code=201)
async def issue_ticket(request: Request, services: Services) -> Response:
    ctx = services
    try:
        principal = await authenticate(request, services)
        ticket, lifetime = await ctx.access.issue_ticket(ctx.settings.ticket_ttl, principal)
    except GatewayError as error:
        return json_error(error, negotiate(None, header(request, "accept-language")))
    body = {"ticket": ticket, "expiresIn": round(lifetime, 3)}
    return Response(body, status_code=201, headers={"Cache-Control": "no-store"})
