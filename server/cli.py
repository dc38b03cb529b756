"""`agui-gateway`: flags (each also an AGUI_GATEWAY_* variable) into Settings, then serve with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from gateway import __version__
from gateway.settings import Settings, default_allowed_roots, default_state_dir
from server.options import (
    ENV_PREFIX,
    ConfigError,
    Parser,
    algorithms,
    durability,
    duration,
    env_name,
    integer,
    network,
    rate,
    seconds,
)

ROOTS_HELP = ", ".join(default_allowed_roots())


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV_PREFIX + name, default)


def _opt(p: argparse.ArgumentParser, flag: str, default: str | None, help_text: str, **kwargs: Any) -> None:
    """A flag whose default comes from its environment variable; the help names both and the default."""
    shown = "unset" if default is None else (default or "empty")
    env_default = os.environ.get(env_name(flag), default) if kwargs.get("action") != "append" else None
    p.add_argument(flag, default=env_default, help=f"{help_text} [env {env_name(flag)}; default {shown}]", **kwargs)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="agui-gateway",
        description="AG-UI gateway: AG-UI 1.0 runs over SSE and WebSocket in front of a pluggable agent backend. "
        "Every flag can also be set with its environment variable, shown in brackets.",
    )
    p.add_argument("--version", action="version", version=f"agui-gateway {__version__}")
    _opt(p, "--host", "127.0.0.1", "address to bind (the container image uses 0.0.0.0)")
    _opt(p, "--port", "8080", "port to listen on", type=integer("--port", 1, 65535))
    _opt(
        p,
        "--store",
        "file",
        "thread state store: 'file' (one JSON file per thread under --state-dir), 'file:///path', "
        "'memory' (lost on exit), or Redis shared by replicas: redis://host:port/db, rediss://..., "
        "redis+sentinel://host:port[,host:port]/service[/db], redis+cluster://host:port",
    )
    _opt(p, "--state-dir", default_state_dir(), "directory of the file store ($XDG_CONFIG_HOME/agui, else ~/.config/agui)")
    _opt(
        p,
        "--agent",
        "demo",
        "agent backend: 'demo' (embedded scripted agent), 'a2a+http(s)://host:port/path' for an A2A "
        "1.0 agent, or 'package.module:factory' for a Python plug-in",
    )
    _opt(p, "--agent-token", None, "bearer token the A2A agent expects (sent as Authorization to the agent only)")
    _opt(
        p,
        "--auth-token",
        os.environ.get("IAC_CODE_AGUI_AUTH_TOKEN"),
        "static bearer token required on runs and cancels (also IAC_CODE_AGUI_AUTH_TOKEN; prefer the environment over the command line)",
    )
    _opt(p, "--oauth-discovery-url", None, "OAuth: the issuer's OpenID/OAuth discovery document (gives the issuer and jwks_uri)")
    _opt(p, "--oauth-jwks-url", None, "OAuth: the issuer's JWKS URL (instead of, or overriding, discovery)")
    _opt(p, "--oauth-issuer", None, "OAuth: the expected 'iss' (required with --oauth-jwks-url alone)")
    _opt(
        p,
        "--oauth-audience",
        None,
        "OAuth: an accepted 'aud', repeatable (variable: comma-separated); this or "
        "--oauth-client-id is required. '*' accepts any audience: unsafe, tokens for other services of the issuer pass",
        action="append",
    )
    _opt(
        p,
        "--oauth-client-id",
        None,
        "OAuth: an accepted client id ('client_id' or 'azp'), repeatable (variable: comma-separated)",
        action="append",
    )
    _opt(
        p,
        "--oauth-scope",
        None,
        "OAuth: a scope every token must carry, repeatable (variable: comma-separated); missing -> 403",
        action="append",
    )
    _opt(
        p,
        "--oauth-algorithms",
        "RS256,ES256",
        "OAuth: accepted JWS algorithms, comma-separated ('none' and HS* are refused)",
        type=algorithms("--oauth-algorithms"),
    )
    _opt(
        p,
        "--public-url",
        None,
        "the gateway's public URL: the OAuth resource identifier and where its RFC 9728 metadata "
        "lives (required with OAuth; never taken from a request's Host)",
    )
    _opt(
        p,
        "--max-concurrent-runs",
        "0",
        "cap on runs in flight on this replica; beyond it 429 SERVICE_QUOTA_EXCEEDED (0 = no cap)",
        type=integer("--max-concurrent-runs", 0),
    )
    _opt(
        p,
        "--rate-limit",
        None,
        "per-caller request rate, e.g. 20/s or 600/m (token bucket; shared across replicas with the "
        "Redis store); beyond it 429 RATE_LIMIT_EXCEEDED",
        type=rate("--rate-limit"),
    )
    _opt(
        p,
        "--heartbeat-seconds",
        "15",
        "write ': heartbeat' after this many seconds without an event",
        type=seconds("--heartbeat-seconds", low=0.05),
    )
    _opt(
        p,
        "--allowed-cwd",
        ROOTS_HELP,
        "allowed workspace root, repeatable (variable: a list separated by '" + os.pathsep + "'); cwd must be one of them or below one",
        action="append",
    )
    _opt(
        p,
        "--default-cwd",
        None,
        "workspace for plain AG-UI requests without forwardedProps.iacCode (unset: <state dir>/"
        "workspace for the demo agent; other backends then require the extension)",
    )
    _opt(p, "--retention", "7d", "remove thread state untouched for this long (e.g. 3600, 12h, 30d)", type=duration("--retention"))
    _opt(
        p,
        "--lease-seconds",
        "10",
        "Redis store: lifetime of a run lease, renewed every third of it; a replica that dies frees its threads after this",
        type=seconds("--lease-seconds", low=1),
    )
    _opt(
        p,
        "--max-reattach-grace-seconds",
        "120",
        "longest grace window a client may ask for (AGUI-Reattach-Grace, reattachGraceSeconds); 0 turns the event log and reattach off",
        type=seconds("--max-reattach-grace-seconds", low=0),
    )
    _opt(
        p,
        "--a2a-follow-idle-seconds",
        "5m",
        "an A2A task followed with SubscribeToTask (after its stream ended early) that is silent this long and still working fails",
        type=duration("--a2a-follow-idle-seconds"),
    )
    _opt(p, "--event-log-retention", "10m", "how long an ended run's events can be replayed", type=duration("--event-log-retention"))
    _opt(p, "--event-log-max-events", "50000", "newest events kept per run for reattach", type=integer("--event-log-max-events", 100))
    _opt(
        p,
        "--event-log-max-bytes",
        "16777216",
        "bytes of events kept per run for reattach",
        type=integer("--event-log-max-bytes", 65536),
    )
    _opt(
        p,
        "--event-log-retained-bytes",
        "268435456",
        "bytes of ended runs' events this replica keeps for replay; past it the oldest expire early (a tombstone stays)",
        type=integer("--event-log-retained-bytes", 1 << 20),
    )
    _opt(p, "--interrupt-ttl", "900", "lifetime of an interrupt before it expires (0 = never)", type=duration("--interrupt-ttl"))
    _opt(
        p,
        "--ws-ping-seconds",
        "20",
        "WebSocket ping interval; a peer that does not answer within the same time is closed (0 disables)",
        type=seconds("--ws-ping-seconds", low=0),
    )
    _opt(p, "--ticket-ttl", "60", "lifetime of a single-use WebSocket ticket from POST /ws/tickets", type=duration("--ticket-ttl"))
    _opt(
        p,
        "--shutdown-grace-seconds",
        "30",
        "on SIGTERM, how long active runs may go on before they are cancelled",
        type=seconds("--shutdown-grace-seconds", low=0),
    )
    _opt(
        p,
        "--redis-durability",
        "async",
        "Redis store: 'async' (a failover may lose acknowledged writes), or 'replicated[:N]': admission, interrupt, "
        "finish and cancel writes wait (up to 1 s) until N replicas (default 1) have them, else 503",
        type=durability("--redis-durability"),
    )
    _opt(
        p,
        "--redis-max-connections",
        "64",
        "Redis store: commands in flight per replica; more wait up to 5 s for a free connection instead of failing",
        type=integer("--redis-max-connections", 1),
    )
    _opt(
        p,
        "--send-timeout-seconds",
        "30",
        "a client whose connection drains nothing for this long is disconnected and its run treated as a disconnect (0 = never)",
        type=seconds("--send-timeout-seconds", low=0),
    )
    _opt(
        p,
        "--header-timeout-seconds",
        "10",
        "a request's line and headers must arrive within this long after their first byte, else 408",
        type=seconds("--header-timeout-seconds", low=0, inclusive=False),
    )
    _opt(
        p,
        "--body-timeout-seconds",
        "30",
        "a request body must arrive within this long, else 408 and the connection closes",
        type=seconds("--body-timeout-seconds", low=0, inclusive=False),
    )
    _opt(
        p,
        "--max-connections-per-client",
        "1000",
        "open connections allowed from one client address; beyond it 429 (0 = no cap; behind a proxy every client has the proxy's address)",
        type=integer("--max-connections-per-client", 0),
    )
    _opt(
        p,
        "--backlog",
        "2048",
        "connections the kernel queues for the server before it accepts them (capped by net.core.somaxconn); a burst of "
        "new connections beyond it is refused or retried by the client's TCP stack",
        type=integer("--backlog", 1),
    )
    _opt(
        p,
        "--trusted-proxies",
        None,
        "proxy address or CIDR whose X-Forwarded-For gives the client's address (for rate "
        "limits and logs), repeatable (variable: comma-separated); none by default",
        action="append",
        type=network("--trusted-proxies"),
    )
    _opt(
        p,
        "--metrics-port",
        "0",
        "serve Prometheus metrics at /metrics on this port (0 = off; keep it off public networks)",
        type=integer("--metrics-port", 0, 65535),
    )
    _opt(p, "--metrics-host", "127.0.0.1", "address the metrics port binds (the compose stack uses 0.0.0.0 on its private network)")
    _opt(p, "--log-level", "info", "log level", choices=["debug", "info", "warning", "error"])
    _opt(p, "--log-format", "text", "log format: text, or json (one object per line)", choices=["text", "json"])
    return p


def _many(values: list[str] | None, flag: str) -> tuple[str, ...]:
    if values:
        return tuple(values)
    raw = os.environ.get(env_name(flag))
    return tuple(v.strip() for v in raw.split(",") if v.strip()) if raw else ()


def _workspaces(args: argparse.Namespace) -> tuple[tuple[str, ...], str | None]:
    env_roots = os.environ.get(env_name("--allowed-cwd"))
    roots = args.allowed_cwd or (env_roots.split(os.pathsep) if env_roots else None) or list(default_allowed_roots())
    normal = tuple(os.path.normpath(r) for r in roots if r)
    default = os.path.normpath(args.default_cwd) if args.default_cwd else None
    for root in normal + ((default,) if default else ()):
        if not root.startswith("/"):
            raise ConfigError(f"workspace paths must be absolute: {root!r} (flags --allowed-cwd, --default-cwd)")
    return normal, default


def settings_from_args(argv: list[str] | None = None) -> Settings:
    """Raises ConfigError (a ValueError) naming the flag, its variable, the value and what is allowed."""
    args = build_parser().parse_args(argv)
    roots, default_cwd = _workspaces(args)
    if args.oauth_jwks_url and not (args.oauth_issuer or args.oauth_discovery_url):
        raise ConfigError("--oauth-jwks-url needs --oauth-issuer (or --oauth-discovery-url)")
    return Settings(
        host=args.host,
        port=args.port,
        store=args.store,
        state_dir=os.path.abspath(os.path.expanduser(args.state_dir)),
        agent=args.agent,
        agent_token=args.agent_token or None,
        auth_token=args.auth_token or None,
        heartbeat_seconds=args.heartbeat_seconds,
        allowed_cwd=roots,
        default_cwd=default_cwd,
        retention_seconds=args.retention,
        interrupt_ttl=args.interrupt_ttl,
        lease_seconds=args.lease_seconds,
        max_reattach_grace_seconds=args.max_reattach_grace_seconds,
        event_log_retention=args.event_log_retention,
        a2a_follow_idle_seconds=args.a2a_follow_idle_seconds,
        event_log_max_events=args.event_log_max_events,
        event_log_max_bytes=args.event_log_max_bytes,
        event_log_retained_bytes=args.event_log_retained_bytes,
        ws_ping_seconds=args.ws_ping_seconds,
        shutdown_grace_seconds=args.shutdown_grace_seconds,
        redis_max_connections=args.redis_max_connections,
        redis_min_replicas=args.redis_durability,
        send_timeout_seconds=args.send_timeout_seconds,
        header_timeout_seconds=args.header_timeout_seconds,
        body_timeout_seconds=args.body_timeout_seconds,
        max_connections_per_client=args.max_connections_per_client,
        backlog=args.backlog,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        trusted_proxies=tuple(map(network("--trusted-proxies"), _many(args.trusted_proxies, "--trusted-proxies"))),
        ticket_ttl=args.ticket_ttl,
        oauth_discovery_url=args.oauth_discovery_url,
        oauth_jwks_url=args.oauth_jwks_url,
        oauth_issuer=args.oauth_issuer,
        oauth_audience=_many(args.oauth_audience, "--oauth-audience"),
        oauth_client_id=_many(args.oauth_client_id, "--oauth-client-id"),
        oauth_scope=_many(args.oauth_scope, "--oauth-scope"),
        oauth_algorithms=args.oauth_algorithms,
        public_url=args.public_url.rstrip("/") if args.public_url else None,
        max_concurrent_runs=args.max_concurrent_runs,
        rate_limit=args.rate_limit,
        log_level=args.log_level,
        log_format=args.log_format,
    )


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from gateway.collector import tune_collector
    from gateway.fds import raise_fd_limit
    from gateway.logs import setup_logging
    from gateway.tracing import setup_tracing
    from server.app import create_app
    from server.serve import GatewayServer, uvicorn_options
    from store import StoreUnavailable
    from transports.fast_path import Outermost

    try:
        settings = settings_from_args(argv)
    except ValueError as exc:
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format)
    setup_tracing()
    try:
        app = create_app(settings)
    except (ValueError, StoreUnavailable) as exc:  # a bad store, or a state directory another gateway holds
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    soft, hard = raise_fd_limit()  # once the configuration is known good: each connection holds a descriptor
    tune_collector()
    logging.getLogger("agui.serve").info("file descriptors: soft limit %d, hard limit %d", soft, hard)
    served = Outermost(app)  # the direct routes before Litestar's own call (transports/fast_path.py)
    config = uvicorn.Config(served, host=settings.host, port=settings.port, log_config=None, access_log=False, **uvicorn_options(settings))
    GatewayServer(config, app.state.services).run()
    return 0
