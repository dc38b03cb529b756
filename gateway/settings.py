"""The one typed settings object, and every flag, declared once: each field's type, default and `Flag` (its help,
how its text becomes the value, its bounds). server/flags.py builds the parser, the AGUI_GATEWAY_* variables,
`--help` and the reference table (docs/reference.md) from these declarations."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from msgspec import Struct, field

from gateway.setting_values import algorithms, durability, duration, integer, network, rate, seconds


def default_state_dir() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "agui")


def default_allowed_roots() -> tuple[str, ...]:
    """The user's home directory, /workspace (container convention) and the system temp directory."""
    roots = {os.path.expanduser("~"), "/workspace", tempfile.gettempdir()}
    return tuple(sorted(os.path.normpath(r) for r in roots if r.startswith("/")))


@dataclass(frozen=True)
class Flag:
    """A setting's flag: its help, how its text becomes the value (None: the text itself; a `Literal` type's values
    are its choices), and where the flag differs from the field: its name, a list's separator in the variable
    (`many`: the flag is repeatable), the value as the setting holds it (`finish`, for a given value), the default
    as `--help` shows it (`shown`, where the value is not what a user would type)."""

    help: str
    convert: Callable[[str], Any] | None = None
    name: str = ""  # empty: the field's name, dashed
    many: str | None = None
    finish: Callable[[Any], Any] | None = None
    shown: str | None = None


_OAUTH_LIST = "repeatable (variable: comma-separated)"


def absolute_path(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def without_trailing_slash(url: str) -> str:
    return url.rstrip("/")


class Settings(Struct, kw_only=True):
    """Every setting with its flag. The annotations are evaluated where server/flags.py reads them
    (`typing.get_type_hints`), where a lambda would not see this module's names: a flag's functions are named ones."""

    host: Annotated[str, Flag("address to bind (the container image uses 0.0.0.0)")] = "127.0.0.1"
    port: Annotated[int, Flag("port to listen on", integer(1, 65535))] = 8080
    store: Annotated[
        str,
        Flag(
            "thread state store: 'file' (an append-only journal under --state-dir), 'file:///path', "
            "'memory' (lost on exit), or Redis shared by replicas: redis://host:port/db, rediss://..., "
            "redis+sentinel://host:port[,host:port]/service[/db], redis+cluster://host:port"
        ),
    ] = "file"
    state_dir: Annotated[
        str,
        Flag(
            "directory of the file store, created 0700 with files 0600 (unset: $XDG_CONFIG_HOME/agui, else ~/.config/agui)",
            finish=absolute_path,
        ),
    ] = field(default_factory=default_state_dir)
    agent: Annotated[
        str,
        Flag(
            "agent backend: 'demo' (embedded scripted agent), 'agui+http(s)://host:port/path' for an AG-UI "
            "server, 'a2a+http(s)://host:port/path' for an A2A 1.0 agent, or 'package.module:attr' for a Python "
            "plug-in (an AgentBackend factory, or an AG-UI agent object run in this process)"
        ),
    ] = "demo"
    agent_token: Annotated[str | None, Flag("bearer token the A2A or AG-UI agent expects (sent as Authorization to the agent only)")] = None
    agents_file: Annotated[
        str | None,
        Flag(
            "a TOML file declaring several agents, one [agents.<id>] table each (backend, description, token_env, default, "
            "response_seconds, follow_idle_seconds; docs/agents.md); --agent is then left unset",
            name="--agents",
        ),
    ] = None
    auth_token: Annotated[
        str | None,
        Flag(
            "static bearer token required on runs and cancels (also IAC_CODE_AGUI_AUTH_TOKEN; prefer the environment over the command line)"
        ),
    ] = None
    heartbeat_seconds: Annotated[float, Flag("write ': heartbeat' after this many seconds without an event", seconds(low=0.05))] = 15.0
    allowed_cwd: Annotated[
        tuple[str, ...],
        Flag(
            f"allowed workspace root, repeatable (variable: a list separated by '{os.pathsep}'); cwd must be one of them or "
            "below one (unset: the home directory, /workspace and the temporary directory)",
            many=os.pathsep,
        ),
    ] = field(default_factory=default_allowed_roots)
    default_cwd: Annotated[
        str | None,
        Flag(
            "workspace for plain AG-UI requests without forwardedProps.iacCode (unset: <state dir>/"
            "workspace for the demo agent; other backends then require the extension)"
        ),
    ] = None
    retention_seconds: Annotated[
        float, Flag("remove thread state untouched for this long (e.g. 3600, 12h, 30d)", duration, name="--retention")
    ] = 7 * 86400.0
    interrupt_ttl: Annotated[
        float, Flag("lifetime of an interrupt of the demo, A2A or a plug-in agent before it expires (0 = never)", duration)
    ] = 900.0
    upstream_interrupt_ttl: Annotated[
        float,
        Flag(
            "lifetime the gateway gives an AG-UI agent's interrupt that carries no expiresAt of its own (0 = never: "
            "the agent decides; one it sends is passed on and kept)",
            duration,
        ),
    ] = 0.0
    lease_seconds: Annotated[
        float,
        Flag(
            "Redis store: lifetime of a run lease, renewed every third of it; a replica that dies frees its threads after this",
            seconds(low=1),
        ),
    ] = 10.0
    max_reattach_grace_seconds: Annotated[
        float,
        Flag(
            "longest grace window a client may ask for (AGUI-Reattach-Grace, reattachGraceSeconds); 0 turns the event log and "
            "reattach off (no id: lines, the attach route answers 404)",
            seconds(low=0),
        ),
    ] = 120.0
    event_log_retention: Annotated[
        float, Flag("how long an ended run's events can be replayed; a tombstone says expired for a day after", duration)
    ] = 600.0
    agent_response_seconds: Annotated[
        float,
        Flag(
            "an AG-UI upstream (--agent agui+http...) that has not sent its response's status and headers this long after the "
            "request fails with AGENT_UNAVAILABLE (connect: 10 s; silence within its stream: 5 min)",
            seconds(low=0.1),
        ),
    ] = 60.0
    a2a_follow_idle_seconds: Annotated[
        float,
        Flag(
            "an A2A task followed with SubscribeToTask (after its stream ended early) that is silent this long and still working fails",
            duration,
        ),
    ] = 300.0
    event_log_max_events: Annotated[int, Flag("newest events kept per run for reattach", integer(100))] = 50_000
    event_log_max_bytes: Annotated[int, Flag("bytes of events kept per run for reattach", integer(65536))] = 16 * 1024 * 1024
    event_log_retained_bytes: Annotated[
        int,
        Flag(
            "bytes of ended runs' events this replica keeps for replay; past it the oldest expire early (a tombstone stays)",
            integer(1 << 20),
        ),
    ] = 256 * 1024 * 1024
    redis_min_replicas: Annotated[
        int,
        Flag(
            "Redis store: 'async' (a failover may lose acknowledged writes), or 'replicated[:N]': admission, interrupt, "
            "finish and cancel writes wait (up to 1 s) until N replicas (default 1) have them, else 503",
            durability,
            name="--redis-durability",
            shown="async",
        ),
    ] = 0
    redis_max_connections: Annotated[
        int,
        Flag(
            "Redis store: commands on pooled connections in flight per replica (the scripts pipelined on the store's own connection"
            " are not counted); more wait up to 5 s for a free connection instead of failing",
            integer(1),
        ),
    ] = 64
    ws_ping_seconds: Annotated[
        float, Flag("WebSocket ping interval; a peer that does not answer within the same time is closed (0 disables)", seconds(low=0))
    ] = 20.0
    shutdown_grace_seconds: Annotated[
        float, Flag("on SIGTERM, how long active runs may go on before they are handed off or cancelled", seconds(low=0))
    ] = 30.0
    send_timeout_seconds: Annotated[
        float,
        Flag(
            "a client whose connection drains nothing for this long is reset (what the kernel still holds for it is dropped) and its run treated as a disconnect: the "
            "backend is cancelled, the thread freed (0 = never)",
            seconds(low=0),
        ),
    ] = 30.0
    header_timeout_seconds: Annotated[
        float,
        Flag(
            "a request's line and headers must arrive within this long after their first byte, else 408 and the connection "
            "closes (slowloris); a connection that sends nothing at all is closed without an answer",
            seconds(low=0, inclusive=False),
        ),
    ] = 10.0
    body_timeout_seconds: Annotated[
        float, Flag("a request body must arrive within this long, else 408 and the connection closes", seconds(low=0, inclusive=False))
    ] = 30.0
    metrics_port: Annotated[
        int, Flag("serve Prometheus metrics at /metrics on this port (0 = off; keep it off public networks)", integer(0, 65535))
    ] = 0
    metrics_host: Annotated[str, Flag("address the metrics port binds (the compose stack uses 0.0.0.0 on its private network)")] = (
        "127.0.0.1"
    )
    trusted_proxies: Annotated[
        tuple[str, ...],
        Flag(
            "proxy address or CIDR whose X-Forwarded-For gives the client's address (for rate "
            "limits and logs), repeatable (variable: comma-separated); none by default",
            network,
            many=",",
        ),
    ] = ()
    max_connections_per_client: Annotated[
        int,
        Flag(
            "open connections allowed from one client address; beyond it 429 at once (0 = no cap). Lowered, and logged, to a "
            "quarter of the file descriptors left after a reserve of 64; behind a proxy every client has the proxy's address: raise it there",
            integer(0),
        ),
    ] = 1000
    backlog: Annotated[
        int,
        Flag(
            "connections the kernel queues for the server before it accepts them (capped by net.core.somaxconn); a burst of "
            "new connections beyond it is refused or retried by the client's TCP stack; raise it, and somaxconn, for replicas "
            "that take thousands of connections at once",
            integer(1),
        ),
    ] = 2048
    idle_poll_microseconds: Annotated[
        int,
        Flag(
            "after each response the event loop keeps polling its sockets up to this long before it sleeps: on a virtual "
            "machine whose idle CPU halts, waking a sleeping server costs the next request about 100 µs. It polls only while at "
            "least four in five recent answers were followed by a request within this long; at most this much CPU time after "
            "each response (0 = sleep at once)",
            integer(0, 10_000),
        ),
    ] = 200
    http_parser: Annotated[
        Literal["auto", "httptools", "h11"],
        Flag(
            "HTTP/1.1 parser: httptools (C; what auto picks) or h11 (pure Python, for platforms "
            "without the C parts); every connection limit holds on both",
            name="--http",
        ),
    ] = "auto"
    event_loop: Annotated[
        Literal["auto", "uvloop", "asyncio"],
        Flag("event loop: uvloop (what auto picks where it is installed) or asyncio (the standard library's)", name="--loop"),
    ] = "auto"
    ticket_ttl: Annotated[float, Flag("lifetime of a single-use WebSocket ticket from POST /ws/tickets", duration)] = 60.0
    oauth_discovery_url: Annotated[
        str | None, Flag("OAuth: the issuer's OpenID/OAuth discovery document (gives the issuer and jwks_uri)")
    ] = None
    oauth_jwks_url: Annotated[str | None, Flag("OAuth: the issuer's JWKS URL (instead of, or overriding, discovery)")] = None
    oauth_issuer: Annotated[str | None, Flag("OAuth: the expected 'iss' (required with --oauth-jwks-url alone)")] = None
    oauth_audience: Annotated[
        tuple[str, ...],
        Flag(
            f"OAuth: an accepted 'aud', {_OAUTH_LIST}; this or --oauth-client-id is required. "
            "'*' accepts any audience: unsafe, tokens for other services of the issuer pass",
            many=",",
        ),
    ] = ()
    oauth_client_id: Annotated[tuple[str, ...], Flag(f"OAuth: an accepted client id ('client_id' or 'azp'), {_OAUTH_LIST}", many=",")] = ()
    oauth_scope: Annotated[tuple[str, ...], Flag(f"OAuth: a scope every token must carry, {_OAUTH_LIST}; missing -> 403", many=",")] = ()
    oauth_algorithms: Annotated[
        tuple[str, ...], Flag("OAuth: accepted JWS algorithms, comma-separated ('none' and HS* are refused)", algorithms)
    ] = ("RS256", "ES256")
    sigv4_credentials: Annotated[
        str | None,
        Flag(
            "SigV4: a TOML file of [keys.<access key id>] tables (secret, principal, optional session_token), readable by its "
            "owner only; requests signed with these keys are accepted beside the bearer schemes"
        ),
    ] = None  # the keys file (its path; the keys are read at start, never kept here)
    sigv4_region: Annotated[str | None, Flag("SigV4: the region signatures must be scoped to (required with --sigv4-credentials)")] = None
    sigv4_service: Annotated[str, Flag("SigV4: the service signatures must be scoped to")] = "bedrock-agentcore"
    public_url: Annotated[
        str | None,
        Flag(
            "the gateway's public URL: the OAuth resource identifier and where its RFC 9728 metadata "
            "lives (required with OAuth; never taken from a request's Host)",
            finish=without_trailing_slash,
        ),
    ] = None
    max_concurrent_runs: Annotated[
        int, Flag("cap on runs in flight on this replica; beyond it 429 SERVICE_QUOTA_EXCEEDED (0 = no cap)", integer(0))
    ] = 0
    max_live_run_bytes: Annotated[
        int,
        Flag(
            "memory budget of the live runs' event rings on this replica: while they hold it new runs get 429 "
            "SERVICE_QUOTA_EXCEEDED, past it the runs over their share are cut (0 = no budget)",
            integer(0),
        ),
    ] = 128 * 1024 * 1024
    max_state_bytes: Annotated[
        int,
        Flag(
            "bytes of one shared-state document or messages snapshot from the agent, after each snapshot or patch; past "
            "it the run ends AGENT_PROTOCOL_ERROR naming this bound",
            integer(65536, 64 * 1024 * 1024),
        ),
    ] = 8 * 1024 * 1024
    thread_history: Annotated[
        Literal["off", "plain", "all"],
        Flag(
            "which threads keep their conversation (messages, state, summary) for joins and the thread API: plain AG-UI "
            "threads, all (the iacCode extension's too), or off"
        ),
    ] = "plain"
    thread_history_bytes: Annotated[
        int,
        Flag(
            "bytes of conversation kept per thread (JSON); past it the oldest whole messages are dropped, and the thread's summary counts them",
            integer(65536, 256 * 1024 * 1024),
        ),
    ] = 8 * 1024 * 1024
    copilotkit_path: Annotated[
        str,
        Flag(
            "where CopilotKit's runtime endpoints are served (info, agent/{id}/run, connect, stop, and the single route): a "
            "CopilotKit app sets its runtime URL to the gateway there; empty turns them off"
        ),
    ] = "/copilotkit"
    cors_origins: Annotated[
        tuple[str, ...],
        Flag(
            "origins whose pages may call the gateway from a browser (exact, e.g. https://app.example.com; comma-separated); none by default",
            many=",",
        ),
    ] = ()
    multitask: Annotated[
        Literal["reject", "enqueue", "interrupt", "rollback"],
        Flag(
            "what a busy thread does with a run that names no policy (AGUI-Multitask, forwardedProps.multitask): reject it "
            "(409 THREAD_BUSY), enqueue it, or interrupt / rollback the active run and go next"
        ),
    ] = "reject"
    max_queued_runs: Annotated[
        int, Flag("runs that may wait per thread behind its active run; one more is 409 THREAD_BUSY", integer(1, 1000))
    ] = 8
    max_background_seconds: Annotated[
        float, Flag("how long a run with no client (Prefer: respond-async) may go on before it is cancelled", seconds(low=1))
    ] = 3600.0
    rate_limit: Annotated[
        tuple[float, float] | None,
        Flag(
            "per-caller request rate, e.g. 20/s or 600/m (token bucket; shared across replicas with the "
            "Redis store); beyond it 429 RATE_LIMIT_EXCEEDED",
            rate,
        ),
    ] = None  # (requests per second, burst)
    tuning: Annotated[
        Literal["on", "off"],
        Flag(
            "the tuning annex (docs/architecture.md): speed and memory adapters of uvicorn's, websockets', Litestar's and "
            "redis-py's private state, each checked at start and left off, with one log line, where its library "
            "changed; off serves on those libraries' public paths only (the same behaviour, slower, more memory a connection)"
        ),
    ] = "on"
    log_level: Annotated[Literal["debug", "info", "warning", "error"], Flag("log level")] = "info"
    log_format: Annotated[Literal["text", "json"], Flag("log format: text, or json (one object per line)")] = "text"

    @property
    def store_kind(self) -> str:
        return self.store.split(":", 1)[0]

    def __repr__(self) -> str:
        token = "<set>" if self.auth_token else None
        store = redact_url(self.store)
        return f"Settings(host={self.host!r}, port={self.port}, store={store!r}, agent={self.agent!r}, auth_token={token})"


def redact_url(url: str) -> str:
    """A store URL with its password (redis://:secret@host) replaced, for logs and reprs."""
    parts = urlsplit(url)
    credentials, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}"))
