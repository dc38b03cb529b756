"""`agui-gateway`: flags (each also an AGUI_GATEWAY_* variable) into Settings, then serve with uvicorn."""

from __future__ import annotations

import argparse
import os
import sys

from gateway import __version__
from gateway.settings import Settings, default_allowed_roots, default_state_dir, parse_duration, parse_rate

ENV_PREFIX = "AGUI_GATEWAY_"


def _env(name: str, default=None):
    return os.environ.get(ENV_PREFIX + name, default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agui-gateway",
        description="AG-UI gateway: AG-UI 1.0 runs over SSE in front of a pluggable agent backend. "
        "Every flag can also be set with the AGUI_GATEWAY_<FLAG> environment variable (e.g. AGUI_GATEWAY_PORT).",
    )
    p.add_argument("--version", action="version", version=f"agui-gateway {__version__}")
    p.add_argument(
        "--host", default=_env("HOST", "127.0.0.1"), help="address to bind (default 127.0.0.1; the container image uses 0.0.0.0)"
    )
    p.add_argument("--port", type=int, default=int(_env("PORT", "8080")), help="port to listen on (default 8080)")
    p.add_argument(
        "--store",
        default=_env("STORE", "file"),
        help="thread state store: 'file' (default, one JSON file per thread under --state-dir), 'file:///path', 'memory' (lost on exit), or Redis shared by replicas: redis://host:port/db, rediss://..., redis+sentinel://host:port[,host:port]/service[/db], redis+cluster://host:port",
    )
    p.add_argument(
        "--state-dir",
        default=_env("STATE_DIR", default_state_dir()),
        help="directory of the file store (default $XDG_CONFIG_HOME/agui, else ~/.config/agui)",
    )
    p.add_argument(
        "--agent",
        default=_env("AGENT", "demo"),
        help="agent backend: 'demo' (embedded scripted agent, default) or 'package.module:factory' for a Python plug-in",
    )
    p.add_argument(
        "--agent-token", default=_env("AGENT_TOKEN"), help="bearer token the A2A agent expects (sent as Authorization to the agent only)"
    )
    p.add_argument(
        "--auth-token",
        default=_env("AUTH_TOKEN", os.environ.get("IAC_CODE_AGUI_AUTH_TOKEN")),
        help="static bearer token required on runs and cancels (also IAC_CODE_AGUI_AUTH_TOKEN; prefer the environment over the command line)",
    )
    p.add_argument(
        "--oauth-discovery-url",
        default=_env("OAUTH_DISCOVERY_URL"),
        help="OAuth: the issuer's OpenID/OAuth discovery document (gives the issuer and jwks_uri)",
    )
    p.add_argument(
        "--oauth-jwks-url", default=_env("OAUTH_JWKS_URL"), help="OAuth: the issuer's JWKS URL (instead of, or overriding, discovery)"
    )
    p.add_argument("--oauth-issuer", default=_env("OAUTH_ISSUER"), help="OAuth: the expected 'iss' (required with --oauth-jwks-url alone)")
    p.add_argument(
        "--oauth-audience",
        action="append",
        default=None,
        help="OAuth: an accepted 'aud', repeatable (env: comma-separated); this or --oauth-client-id is required. '*' accepts any audience: unsafe, tokens for other services of the issuer then pass",
    )
    p.add_argument(
        "--oauth-client-id",
        action="append",
        default=None,
        help="OAuth: an accepted client id ('client_id' or 'azp'), repeatable (env: comma-separated)",
    )
    p.add_argument(
        "--oauth-scope",
        action="append",
        default=None,
        help="OAuth: a scope every token must carry, repeatable (env: comma-separated); missing -> 403",
    )
    p.add_argument(
        "--oauth-algorithms",
        default=_env("OAUTH_ALGORITHMS", "RS256,ES256"),
        help="OAuth: accepted JWS algorithms, comma-separated (default RS256,ES256; 'none' is never accepted)",
    )
    p.add_argument(
        "--public-url",
        default=_env("PUBLIC_URL"),
        help="the gateway's public base URL: the OAuth resource identifier and where its RFC 9728 metadata lives (required with OAuth; never taken from a request's Host)",
    )
    p.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=int(_env("MAX_CONCURRENT_RUNS", "0")),
        help="cap on runs in flight on this replica; beyond it 429 SERVICE_QUOTA_EXCEEDED (default 0 = no cap)",
    )
    p.add_argument(
        "--rate-limit",
        default=_env("RATE_LIMIT"),
        help="per-caller request rate, e.g. 20/s or 600/m (token bucket; shared across replicas with the Redis store); beyond it 429 RATE_LIMIT_EXCEEDED",
    )
    p.add_argument(
        "--heartbeat-seconds",
        type=float,
        default=float(_env("HEARTBEAT_SECONDS", "15")),
        help="write ': heartbeat' after this many seconds without an event (default 15)",
    )
    p.add_argument(
        "--allowed-cwd",
        action="append",
        default=None,
        help="allowed workspace root, repeatable (env: a list separated by '"
        + os.pathsep
        + "'); cwd must be one of them or below one. Default: "
        + ", ".join(default_allowed_roots())
        + " (home, /workspace, temp dir)",
    )
    p.add_argument(
        "--default-cwd",
        default=_env("DEFAULT_CWD"),
        help="workspace for plain AG-UI requests without forwardedProps.iacCode (unset: <state dir>/workspace for the demo agent; other backends then require the extension)",
    )
    p.add_argument(
        "--retention", default=_env("RETENTION", "7d"), help="remove thread state untouched for this long (default 7d; e.g. 3600, 12h, 30d)"
    )
    p.add_argument(
        "--lease-seconds",
        type=float,
        default=float(_env("LEASE_SECONDS", "10")),
        help="Redis store: lifetime of a run lease, renewed every third of it; a replica that dies frees its threads after this (default 10)",
    )
    p.add_argument(
        "--interrupt-ttl",
        default=_env("INTERRUPT_TTL", "900"),
        help="lifetime of an interrupt before it expires (default 900 s; 0 = never)",
    )
    p.add_argument(
        "--ws-ping-seconds",
        type=float,
        default=float(_env("WS_PING_SECONDS", "20")),
        help="WebSocket ping interval; a peer that does not answer within the same time is closed (default 20; 0 disables)",
    )
    p.add_argument(
        "--ticket-ttl",
        default=_env("TICKET_TTL", "60"),
        help="lifetime of a single-use WebSocket ticket from POST /ws/tickets (default 60 s)",
    )
    p.add_argument(
        "--shutdown-grace-seconds",
        type=float,
        default=float(_env("SHUTDOWN_GRACE_SECONDS", "30")),
        help="on SIGTERM, how long active runs may go on before they are cancelled (default 30)",
    )
    p.add_argument(
        "--redis-max-connections",
        type=int,
        default=int(_env("REDIS_MAX_CONNECTIONS", "64")),
        help="Redis store: commands in flight per replica; more wait up to 5 s for a free connection instead of failing (default 64)",
    )
    p.add_argument(
        "--send-timeout-seconds",
        type=float,
        default=float(_env("SEND_TIMEOUT_SECONDS", "30")),
        help="a client whose connection drains nothing for this long is disconnected and its run treated as a disconnect (default 30; 0 = never)",
    )
    p.add_argument(
        "--header-timeout-seconds",
        type=float,
        default=float(_env("HEADER_TIMEOUT_SECONDS", "10")),
        help="a request's line and headers must arrive within this long after their first byte, else 408 (default 10)",
    )
    p.add_argument(
        "--body-timeout-seconds",
        type=float,
        default=float(_env("BODY_TIMEOUT_SECONDS", "30")),
        help="a request body must arrive within this long, else 408 and the connection closes (default 30)",
    )
    p.add_argument(
        "--max-connections-per-client",
        type=int,
        default=int(_env("MAX_CONNECTIONS_PER_CLIENT", "1000")),
        help="open connections allowed from one client address; beyond it 429 (default 1000; 0 = no cap; behind a proxy every client has the proxy's address)",
    )
    p.add_argument(
        "--log-level", default=_env("LOG_LEVEL", "info"), choices=["debug", "info", "warning", "error"], help="log level (default info)"
    )
    p.add_argument(
        "--log-format",
        default=_env("LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="log format: text (default) or json (one object per line)",
    )
    return p


def _many(values: list[str] | None, env_name: str) -> tuple[str, ...]:
    if values:
        return tuple(values)
    raw = _env(env_name)
    return tuple(v.strip() for v in raw.split(",") if v.strip()) if raw else ()


def _oauth_algorithms(text: str) -> tuple[str, ...]:
    algorithms = tuple(a.strip() for a in text.split(",") if a.strip())
    if not algorithms or any(a.lower() == "none" or a.upper().startswith("HS") for a in algorithms):
        raise ValueError("OAuth algorithms must be asymmetric (e.g. RS256, ES256); 'none' and HS* are refused")
    return algorithms


def settings_from_args(argv: list[str] | None = None) -> Settings:
    args = build_parser().parse_args(argv)
    env_roots = _env("ALLOWED_CWD")
    roots = args.allowed_cwd or (env_roots.split(os.pathsep) if env_roots else None) or list(default_allowed_roots())
    roots = tuple(os.path.normpath(r) for r in roots if r)
    for root in roots + ((args.default_cwd,) if args.default_cwd else ()):
        if not root.startswith("/"):
            raise SystemExit(f"agui-gateway: workspace paths must be absolute: {root!r}")
    if args.oauth_jwks_url and not (args.oauth_issuer or args.oauth_discovery_url):
        raise ValueError("--oauth-jwks-url needs --oauth-issuer (or --oauth-discovery-url)")
    return Settings(
        host=args.host,
        port=args.port,
        store=args.store,
        state_dir=os.path.abspath(os.path.expanduser(args.state_dir)),
        agent=args.agent,
        agent_token=args.agent_token or None,
        auth_token=args.auth_token or None,
        heartbeat_seconds=max(0.05, args.heartbeat_seconds),
        allowed_cwd=roots,
        default_cwd=os.path.normpath(args.default_cwd) if args.default_cwd else None,
        retention_seconds=parse_duration(args.retention),
        interrupt_ttl=parse_duration(args.interrupt_ttl),
        lease_seconds=max(1.0, args.lease_seconds),
        ws_ping_seconds=max(0.0, args.ws_ping_seconds),
        shutdown_grace_seconds=max(0.0, args.shutdown_grace_seconds),
        redis_max_connections=max(1, args.redis_max_connections),
        send_timeout_seconds=max(0.0, args.send_timeout_seconds),
        header_timeout_seconds=max(0.1, args.header_timeout_seconds),
        body_timeout_seconds=max(0.1, args.body_timeout_seconds),
        max_connections_per_client=max(0, args.max_connections_per_client),
        ticket_ttl=parse_duration(args.ticket_ttl),
        oauth_discovery_url=args.oauth_discovery_url,
        oauth_jwks_url=args.oauth_jwks_url,
        oauth_issuer=args.oauth_issuer,
        oauth_audience=_many(args.oauth_audience, "OAUTH_AUDIENCE"),
        oauth_client_id=_many(args.oauth_client_id, "OAUTH_CLIENT_ID"),
        oauth_scope=_many(args.oauth_scope, "OAUTH_SCOPE"),
        oauth_algorithms=_oauth_algorithms(args.oauth_algorithms),
        public_url=args.public_url.rstrip("/") if args.public_url else None,
        max_concurrent_runs=max(0, args.max_concurrent_runs),
        rate_limit=parse_rate(args.rate_limit) if args.rate_limit else None,
        log_level=args.log_level,
        log_format=args.log_format,
    )


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from gateway.logs import setup_logging
    from gateway.server.app import create_app
    from gateway.server.serve import GatewayServer, uvicorn_options

    try:
        settings = settings_from_args(argv)
    except ValueError as exc:
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format)
    try:
        app = create_app(settings)
    except ValueError as exc:
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False, **uvicorn_options(settings))
    GatewayServer(config, app.state.services).run()
    return 0
