"""The app factory: builds the store, the agent backend and the engine, and mounts the transports on Litestar."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import AsyncIterator

from litestar import Litestar

from gateway.agents import AgentBackend, load_agent
from gateway.auth import Authenticator, build_authenticator
from gateway.auth.oauth import OAuthValidator
from gateway.engine.access import Access
from gateway.engine.runs import RunEngine
from gateway.settings import Settings
from store import ThreadStore, open_store
from transports.cancel import cancel_execution
from transports.health import BusyStatus, health, ping, protected_resource
from transports.sse import run_invocations, run_root
from transports.static_ui import ui_router
from transports.tickets import issue_ticket
from transports.websocket import ws_endpoint

log = logging.getLogger("agui.app")
PURGE_INTERVAL_SECONDS = 3600


@dataclass
class AppContext:
    settings: Settings
    store: ThreadStore
    agent: AgentBackend
    engine: RunEngine
    status: BusyStatus
    auth: Authenticator
    oauth: OAuthValidator | None
    access: Access
    sockets: set = field(default_factory=set)  # open WebSocket connections


async def _purge_forever(store: ThreadStore) -> None:
    while True:
        try:
            removed = await store.purge_expired(time.time())
            if removed:
                log.info("retention removed %d thread state(s)", removed)
        except Exception:  # noqa: BLE001 - retention must never stop the service
            log.warning("retention purge failed", exc_info=True)
        await asyncio.sleep(PURGE_INTERVAL_SECONDS)


def create_app(settings: Settings, *, store: ThreadStore | None = None, agent: AgentBackend | None = None) -> Litestar:
    """`store` and `agent` override the ones named in settings (embedding, tests with a failing store)."""
    store = store or open_store(
        settings.store, state_dir=settings.state_dir, retention_seconds=settings.retention_seconds, lease_seconds=settings.lease_seconds
    )
    agent = agent or load_agent(settings.agent, settings.agent_token)
    status = BusyStatus()
    engine = RunEngine(store, agent, interrupt_ttl=settings.interrupt_ttl, on_busy_change=status.set_busy)
    engine.max_runs = settings.max_concurrent_runs
    auth = build_authenticator(settings)
    oauth = next((m for m in getattr(auth, "members", []) if isinstance(m, OAuthValidator)), None)
    ctx = AppContext(settings, store, agent, engine, status, auth, oauth, Access(store, engine.clock))

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        purger = asyncio.create_task(_purge_forever(store))
        await store.listen_for_cancels(engine.cancel_local)
        log.info("agui-gateway ready on %s:%d store=%s agent=%s", settings.host, settings.port, settings.store_kind, agent.name)
        try:
            yield
        finally:
            status.set_draining()
            purger.cancel()
            await engine.shutdown()
            await agent.aclose()
            await auth.aclose()
            await store.close()

    app = Litestar(
        route_handlers=[run_root, run_invocations, cancel_execution, issue_ticket, ws_endpoint, health, ping, protected_resource, ui_router],
        lifespan=[lifespan],
        debug=False,
        logging_config=None,
    )
    app.state.ctx = ctx
    return app
