"""Serving with graceful shutdown: on SIGTERM stop admitting runs, let active ones finish within the grace
period (then cancel them with the cancelled outcome), close WebSockets with 1001, then let uvicorn exit."""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType

import uvicorn

from gateway.fds import descriptor_share, free_before_reserve, per_client_cap
from gateway.protocol.validate import MAX_BODY_BYTES
from gateway.settings import Settings
from server.accept_burst import BurstAcceptor
from server.annex import Annex, annex_of, check_limits
from server.awake import Awake
from server.connection_limits import MAX_HEAD_BYTES, ConnectionLimits
from server.http_protocol import protocols
from transports.services import TransportServices

log = logging.getLogger("agui.serve")
GOING_AWAY = 1001


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, services: TransportServices, annex: Annex) -> None:
        super().__init__(config)
        self.ctx = services
        self.annex = annex
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task | None = None
        self._acceptors: list[BurstAcceptor] = []

    async def serve(self, sockets=None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if not self.annex.uvicorn:
            return
        loop = asyncio.get_running_loop()
        config, state = self.config, self.server_state

        def create_protocol() -> asyncio.Protocol:  # as uvicorn's startup makes each connection's protocol
            return config.http_protocol_class(config=config, server_state=state, app_state=self.lifespan.state)  # type: ignore[call-arg]

        for server in self.servers:
            for listener in server.sockets or ():
                acceptor = BurstAcceptor.beside(loop, listener, create_protocol, room=free_before_reserve)
                if acceptor is not None:
                    self._acceptors.append(acceptor)

    async def shutdown(self, sockets=None) -> None:
        for acceptor in self._acceptors:  # before uvicorn stops its own listening
            acceptor.close()
        self._acceptors.clear()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None or self._loop is None or sig not in (signal.SIGTERM, signal.SIGINT):
            super().handle_exit(sig, frame)  # a second signal: shut down now
            return
        self._captured_signals.append(sig)
        self._draining = self._loop.create_task(self.drain())

    async def drain(self) -> None:
        ctx = self.ctx
        grace = ctx.settings.shutdown_grace_seconds
        log.info("draining: %d run(s) in flight, grace %.0f s", ctx.engine.in_flight, grace)
        ctx.status.set_draining()
        await ctx.engine.drain(grace)
        for conn in list(ctx.sockets):
            try:
                await conn.socket.close(GOING_AWAY, "server shutting down")
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass
        self.should_exit = True


def uvicorn_options(settings: Settings, annex: Annex | None = None) -> dict:
    """Server options shared by the CLI and embedders: the connection limits (refusing a uvicorn they were not
    written for), WebSocket limits and liveness, graceful shutdown; `annex`: the tuning parts on (by default, what
    `--tuning` and the installed libraries allow)."""
    check_limits()
    annex = annex or annex_of(settings.tuning)
    ping = settings.ws_ping_seconds or None
    limits = ConnectionLimits(
        header_timeout=settings.header_timeout_seconds,
        send_timeout=settings.send_timeout_seconds,
        max_per_client=per_client_cap(settings.max_connections_per_client),
        max_lingering=descriptor_share() or ConnectionLimits.max_lingering,
        awake=Awake(settings.idle_poll_microseconds / 1e6 if annex.uvicorn else 0.0),
    )
    parser = "h11" if settings.http_parser == "h11" else "httptools"
    http, ws = protocols(limits, parser, lean=annex.uvicorn, corked=annex.websockets)
    return {
        # X-Forwarded-For/-Proto are believed only from --trusted-proxies (uvicorn's own default trusts loopback,
        # which made every client behind a local proxy share one rate-limit bucket).
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": list(settings.trusted_proxies) or None,
        "loop": settings.event_loop,  # uvicorn's own "auto": uvloop where it is installed
        "interface": "asgi3",  # said, not guessed: the app we serve returns its coroutine from a plain __call__
        "http": http,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES * 2,  # (h11 only) our protocol answers 431 past MAX_HEAD_BYTES first
        "ws": ws,
        "ws_max_size": MAX_BODY_BYTES,
        "ws_per_message_deflate": False,  # per-frame deflate costs more CPU than small AG-UI events save
        "ws_ping_interval": ping,
        "ws_ping_timeout": ping,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds + 5,
        "backlog": settings.backlog,
    }
