"""The app factory: builds the store, the agent backend, the engine and the transports' services, and mounts
the transports on Litestar with those services injected into every handler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Litestar, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.types import ControllerRouterHandler
from prometheus_client import start_http_server

from gateway import __version__
from gateway.access import Access
from gateway.agents import AgentBackend, load_agent
from gateway.agents.catalog import Agents, AgentSpec, load_agents, options_of
from gateway.auth import build_authenticator
from gateway.engine import Bounds, LogPolicy, RunEngine
from gateway.engine.history import HistoryPolicy
from gateway.instrumented import InstrumentedStore
from gateway.settings import Settings
from server.annex import annex_of
from store import Clock, ThreadStore, open_store
from transports import lean
from transports.access_log import AccessLog
from transports.agents import list_agents, read_agent
from transports.busy import BusyStatus
from transports.cancel import cancel_execution
from transports.fallback import EXCEPTION_HANDLERS
from transports.fast_path import FastPath
from transports.health import health, ping, protected_resource, ready
from transports.reattach import run_events, thread_events
from transports.run_routes import RUN_ROUTES, copilotkit_router
from transports.services import TransportServices
from transports.static_ui import ui_router
from transports.threads import change_thread, erase_thread, list_threads, read_thread, stop_thread, thread_runs
from transports.tickets import issue_ticket

log = logging.getLogger("agui.app")
PURGE_INTERVAL_SECONDS = 3600
MIN_SAFE_LEASE_SECONDS = 6.0
# The OpenAPI document (`/openapi`) describes the thread API and the agents' descriptions, JSON both ways; the other routes stream SSE, upgrade to
# WebSocket or serve files, which a generated schema would describe untruthfully.
ROUTES: list[ControllerRouterHandler] = [
    Router(
        "/",
        route_handlers=[ready, run_events, thread_events, cancel_execution, issue_ticket, health, ping, protected_resource, ui_router],
        include_in_schema=False,
    ),
    list_threads,
    read_thread,
    change_thread,
    erase_thread,
    thread_runs,
    stop_thread,
    list_agents,
    read_agent,
]


async def _purge_forever(store: ThreadStore) -> None:
    while True:
        try:
            removed = await store.purge_expired()
            if removed:
                log.info("retention removed %d thread state(s)", removed)
        except Exception:  # retention must never stop the service
            log.warning("retention purge failed", exc_info=True)
        await asyncio.sleep(PURGE_INTERVAL_SECONDS)


def with_plain_workspace(settings: Settings, agents: Agents) -> Settings:
    """Plain AG-UI requests need a default workspace: the operator's `--default-cwd`, else, for a backend that
    allows it (the demo agent), `<state dir>/workspace`, created 0700. Otherwise plain requests are refused with
    an error naming the flag."""
    if settings.default_cwd is not None or not any(agent.plain_workspace for _, agent in agents):
        return settings
    workspace = os.path.join(settings.state_dir, "workspace")
    os.makedirs(workspace, mode=0o700, exist_ok=True)
    return msgspec.structs.replace(settings, default_cwd=workspace)


def agents_of(settings: Settings) -> Agents:
    """The agents `--agents` declares, else the one `--agent` names; ValueError names what is wrong."""
    options: dict[str, Any] = {
        "follow_idle": settings.a2a_follow_idle_seconds,
        "response_seconds": settings.agent_response_seconds,
        "max_state_bytes": settings.max_state_bytes,
    }
    if settings.agents_file is None:
        return Agents.one(load_agent(settings.agent, settings.agent_token, **options))

    def load(where: str, spec: AgentSpec, token: str | None) -> AgentBackend:
        return load_agent(spec.backend, token, **options_of(spec, options), where=where)

    return load_agents(settings.agents_file, load)


def build_services(settings: Settings, store: ThreadStore, agents: Agents) -> TransportServices:
    status = BusyStatus()
    policy = None
    if settings.max_reattach_grace_seconds > 0:
        bounds = Bounds(settings.event_log_max_events, settings.event_log_max_bytes)
        policy = LogPolicy(settings.max_reattach_grace_seconds, bounds, settings.event_log_retained_bytes, settings.event_log_retention)
    engine = RunEngine(
        store,
        agents,
        interrupt_ttl=settings.interrupt_ttl,
        upstream_interrupt_ttl=settings.upstream_interrupt_ttl,
        max_runs=settings.max_concurrent_runs,
        on_busy_change=status.set_busy,
        log_policy=policy,
        max_live_bytes=settings.max_live_run_bytes,
        max_state_bytes=settings.max_state_bytes,
        history=HistoryPolicy(settings.thread_history, settings.thread_history_bytes) if settings.thread_history != "off" else None,
        multitask=settings.multitask,
        max_queued=settings.max_queued_runs,
        max_background_seconds=settings.max_background_seconds,
    )
    return TransportServices(settings, engine, Access(store), build_authenticator(settings), status)


def create_app(
    settings: Settings, *, store: ThreadStore | None = None, agent: AgentBackend | None = None, clock: Clock = time.time
) -> Litestar:
    """`store` and `agent` override the ones named in settings (embedding, tests with a failing store);
    `clock` is the memory and file stores' time (Redis uses its server's)."""
    annex = annex_of(settings.tuning)
    store = store or open_store(
        settings.store,
        state_dir=settings.state_dir,
        retention_seconds=settings.retention_seconds,
        lease_seconds=settings.lease_seconds,
        clock=clock,
        redis_max_connections=settings.redis_max_connections,
        log_retention=settings.event_log_retention,
        redis_min_replicas=settings.redis_min_replicas,
        redis_wire=annex.redis,
    )
    store = InstrumentedStore(store)
    agents = Agents.one(agent) if agent is not None else agents_of(settings)
    settings = with_plain_workspace(settings, agents)
    services = build_services(settings, store, agents)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        purger = asyncio.create_task(_purge_forever(store))
        exporter = start_http_server(settings.metrics_port, settings.metrics_host) if settings.metrics_port else None
        await store.listen_for_cancels(services.engine.cancel_local)
        services.engine.start_adopting()
        if store.needs_renewal and store.lease_seconds < MIN_SAFE_LEASE_SECONDS:
            log.warning(
                "--lease-seconds %.1f is shorter than a Sentinel or Cluster promotion (about 3-6 s): a failover or a Redis "
                "pause that long ends every run in flight on this replica",
                store.lease_seconds,
            )
        if not await services.access.store_reachable():
            log.warning("the store (%s) does not answer: serving, but not ready (GET /ready is 503) until it does", settings.store_kind)
        named = ", ".join(f"{agent_id}={backend.name}" for agent_id, backend in agents)
        log.info("agui-gateway ready on %s:%d store=%s agents=%s", settings.host, settings.port, settings.store_kind, named)
        try:
            yield
        finally:
            services.status.set_draining()
            purger.cancel()
            if exporter is not None:
                exporter[0].shutdown()
            await services.engine.shutdown()
            await agents.aclose()
            await services.auth.aclose()
            await store.close()

    run_routes: list[ControllerRouterHandler] = [
        *RUN_ROUTES,
        *([copilotkit_router(settings.copilotkit_path)] if settings.copilotkit_path else []),
    ]
    app = Litestar(
        route_handlers=[*ROUTES, *run_routes],
        dependencies={"services": Provide(lambda: services, use_cache=True, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        middleware=[AccessLog],
        openapi_config=OpenAPIConfig(title="AG-UI gateway: the thread API", version=__version__, path="/openapi"),
        lifespan=[lifespan],
        debug=False,
        logging_config=None,
    )
    if annex.litestar:  # the run routes and /ws answered before Litestar's router
        app.asgi_handler = FastPath(app.asgi_handler, settings.copilotkit_path)
    lean.forgets_requests(annex.litestar)
    app.state.services = services  # for the server wrapper (drain) only; handlers receive it injected
    app.state.annex = annex  # the tuning parts on, for the server wrapper (its protocols, acceptor, entrance)
    return app
