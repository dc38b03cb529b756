"""Every flag, declared once: the parser, `Settings`, `--help` and the reference table (docs/reference.md) are all
built from `FLAGS`. Each flag also reads its AGUI_GATEWAY_* variable."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway import __version__
from gateway.auth.sigv4 import CredentialsFileError, load_keys
from gateway.settings import Settings, default_allowed_roots, default_state_dir
from server.options import (
    ConfigError,
    Parser,
    Refused,
    algorithms,
    durability,
    duration,
    env_name,
    integer,
    network,
    rate,
    seconds,
)


@dataclass(frozen=True)
class Flag:
    """One flag: its default as typed (None: unset), its help, how its text becomes a value, and its setting."""

    name: str
    default: str | None
    help: str
    convert: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    many: str | None = None  # repeatable; the variable holds a list separated by this
    setting: str = ""  # the Settings field; empty: the flag's own name
    finish: Callable[[Any], Any] | None = None  # the parsed value as Settings holds it

    @property
    def dest(self) -> str:
        """The parser's name for it."""
        return self.name.lstrip("-").replace("-", "_")

    @property
    def field(self) -> str:
        return self.setting or self.dest

    @property
    def shown(self) -> str:
        return "unset" if self.default is None else (self.default or "empty")

    def parse(self, text: str) -> Any:
        """The value of `text`; a refusal names this flag, its variable, the value and what is allowed."""
        assert self.convert is not None
        try:
            return self.convert(text)
        except Refused as refused:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {refused.allowed} (flag {self.name}, variable {env_name(self.name)})"
            ) from None


def _or_none(value: str | None) -> str | None:
    return value or None


_OAUTH_LIST = "repeatable (variable: comma-separated)"

FLAGS: tuple[Flag, ...] = (
    Flag("--host", "127.0.0.1", "address to bind (the container image uses 0.0.0.0)"),
    Flag("--port", "8080", "port to listen on", integer(1, 65535)),
    Flag(
        "--store",
        "file",
        "thread state store: 'file' (an append-only journal under --state-dir), 'file:///path', "
        "'memory' (lost on exit), or Redis shared by replicas: redis://host:port/db, rediss://..., "
        "redis+sentinel://host:port[,host:port]/service[/db], redis+cluster://host:port",
    ),
    Flag(
        "--state-dir",
        None,
        "directory of the file store, created 0700 with files 0600 (unset: $XDG_CONFIG_HOME/agui, else ~/.config/agui)",
        finish=lambda value: os.path.abspath(os.path.expanduser(value or default_state_dir())),
    ),
    Flag(
        "--agent",
        "demo",
        "agent backend: 'demo' (embedded scripted agent), 'agui+http(s)://host:port/path' for an AG-UI "
        "server, 'a2a+http(s)://host:port/path' for an A2A 1.0 agent, or 'package.module:attr' for a Python "
        "plug-in (an AgentBackend factory, or an AG-UI agent object run in this process)",
    ),
    Flag(
        "--agents",
        None,
        "a TOML file declaring several agents, one [agents.<id>] table each (backend, description, token_env, default, "
        "response_seconds, follow_idle_seconds; docs/agents.md); --agent is then left unset",
        finish=_or_none,
        setting="agents_file",
    ),
    Flag("--agent-token", None, "bearer token the A2A or AG-UI agent expects (sent as Authorization to the agent only)", finish=_or_none),
    Flag(
        "--auth-token",
        None,
        "static bearer token required on runs and cancels (also IAC_CODE_AGUI_AUTH_TOKEN; prefer the environment over the command line)",
        finish=_or_none,
    ),
    Flag(
        "--sigv4-credentials",
        None,
        "SigV4: a TOML file of [keys.<access key id>] tables (secret, principal, optional session_token), readable by its "
        "owner only; requests signed with these keys are accepted beside the bearer schemes",
    ),
    Flag("--sigv4-region", None, "SigV4: the region signatures must be scoped to (required with --sigv4-credentials)"),
    Flag("--sigv4-service", "bedrock-agentcore", "SigV4: the service signatures must be scoped to"),
    Flag("--oauth-discovery-url", None, "OAuth: the issuer's OpenID/OAuth discovery document (gives the issuer and jwks_uri)"),
    Flag("--oauth-jwks-url", None, "OAuth: the issuer's JWKS URL (instead of, or overriding, discovery)"),
    Flag("--oauth-issuer", None, "OAuth: the expected 'iss' (required with --oauth-jwks-url alone)"),
    Flag(
        "--oauth-audience",
        None,
        f"OAuth: an accepted 'aud', {_OAUTH_LIST}; this or --oauth-client-id is required. "
        "'*' accepts any audience: unsafe, tokens for other services of the issuer pass",
        many=",",
    ),
    Flag("--oauth-client-id", None, f"OAuth: an accepted client id ('client_id' or 'azp'), {_OAUTH_LIST}", many=","),
    Flag("--oauth-scope", None, f"OAuth: a scope every token must carry, {_OAUTH_LIST}; missing -> 403", many=","),
    Flag(
        "--oauth-algorithms",
        "RS256,ES256",
        "OAuth: accepted JWS algorithms, comma-separated ('none' and HS* are refused)",
        algorithms,
    ),
    Flag(
        "--public-url",
        None,
        "the gateway's public URL: the OAuth resource identifier and where its RFC 9728 metadata "
        "lives (required with OAuth; never taken from a request's Host)",
        finish=lambda value: value.rstrip("/") if value else None,
    ),
    Flag(
        "--max-concurrent-runs",
        "0",
        "cap on runs in flight on this replica; beyond it 429 SERVICE_QUOTA_EXCEEDED (0 = no cap)",
        integer(0),
    ),
    Flag(
        "--max-live-run-bytes",
        "134217728",
        "memory budget of the live runs' event rings on this replica: while they hold it new runs get 429 "
        "SERVICE_QUOTA_EXCEEDED, past it the runs over their share are cut (0 = no budget)",
        integer(0),
    ),
    Flag(
        "--max-state-bytes",
        "8388608",
        "bytes of one shared-state document or messages snapshot from the agent, after each snapshot or patch; past "
        "it the run ends AGENT_PROTOCOL_ERROR naming this bound",
        integer(65536, 64 * 1024 * 1024),
    ),
    Flag(
        "--thread-history",
        "plain",
        "which threads keep their conversation (messages, state, summary) for joins and the thread API: plain AG-UI "
        "threads, all (the iacCode extension's too), or off",
        choices=("off", "plain", "all"),
    ),
    Flag(
        "--thread-history-bytes",
        "8388608",
        "bytes of conversation kept per thread (JSON); past it the oldest whole messages are dropped, and the thread's summary counts them",
        integer(65536, 256 * 1024 * 1024),
    ),
    Flag(
        "--copilotkit-path",
        "/copilotkit",
        "where CopilotKit's runtime endpoints are served (info, agent/{id}/run, connect, stop, and the single route): a "
        "CopilotKit app sets its runtime URL to the gateway there; empty turns them off",
    ),
    Flag(
        "--cors-origins",
        None,
        "origins whose pages may call the gateway from a browser (exact, e.g. https://app.example.com; comma-separated); none by default",
        many=",",
    ),
    Flag(
        "--multitask",
        "reject",
        "what a busy thread does with a run that names no policy (AGUI-Multitask, forwardedProps.multitask): reject it "
        "(409 THREAD_BUSY), enqueue it, or interrupt / rollback the active run and go next",
        choices=("reject", "enqueue", "interrupt", "rollback"),
    ),
    Flag(
        "--max-queued-runs",
        "8",
        "runs that may wait per thread behind its active run; one more is 409 THREAD_BUSY",
        integer(1, 1000),
    ),
    Flag(
        "--max-background-seconds",
        "3600",
        "how long a run with no client (Prefer: respond-async) may go on before it is cancelled",
        seconds(low=1),
    ),
    Flag(
        "--rate-limit",
        None,
        "per-caller request rate, e.g. 20/s or 600/m (token bucket; shared across replicas with the "
        "Redis store); beyond it 429 RATE_LIMIT_EXCEEDED",
        rate,
    ),
    Flag(
        "--heartbeat-seconds",
        "15",
        "write ': heartbeat' after this many seconds without an event",
        seconds(low=0.05),
    ),
    Flag(
        "--allowed-cwd",
        None,
        f"allowed workspace root, repeatable (variable: a list separated by '{os.pathsep}'); cwd must be one of them or "
        "below one (unset: the home directory, /workspace and the temporary directory)",
        many=os.pathsep,
    ),
    Flag(
        "--default-cwd",
        None,
        "workspace for plain AG-UI requests without forwardedProps.iacCode (unset: <state dir>/"
        "workspace for the demo agent; other backends then require the extension)",
    ),
    Flag(
        "--retention",
        "7d",
        "remove thread state untouched for this long (e.g. 3600, 12h, 30d)",
        duration,
        setting="retention_seconds",
    ),
    Flag(
        "--lease-seconds",
        "10",
        "Redis store: lifetime of a run lease, renewed every third of it; a replica that dies frees its threads after this",
        seconds(low=1),
    ),
    Flag(
        "--max-reattach-grace-seconds",
        "120",
        "longest grace window a client may ask for (AGUI-Reattach-Grace, reattachGraceSeconds); 0 turns the event log and "
        "reattach off (no id: lines, the attach route answers 404)",
        seconds(low=0),
    ),
    Flag(
        "--a2a-follow-idle-seconds",
        "5m",
        "an A2A task followed with SubscribeToTask (after its stream ended early) that is silent this long and still working fails",
        duration,
    ),
    Flag(
        "--agent-response-seconds",
        "60",
        "an AG-UI upstream (--agent agui+http...) that has not sent its response's status and headers this long after the "
        "request fails with AGENT_UNAVAILABLE (connect: 10 s; silence within its stream: 5 min)",
        seconds(low=0.1),
    ),
    Flag(
        "--event-log-retention",
        "10m",
        "how long an ended run's events can be replayed; a tombstone says expired for a day after",
        duration,
    ),
    Flag("--event-log-max-events", "50000", "newest events kept per run for reattach", integer(100)),
    Flag("--event-log-max-bytes", "16777216", "bytes of events kept per run for reattach", integer(65536)),
    Flag(
        "--event-log-retained-bytes",
        "268435456",
        "bytes of ended runs' events this replica keeps for replay; past it the oldest expire early (a tombstone stays)",
        integer(1 << 20),
    ),
    Flag(
        "--interrupt-ttl",
        "900",
        "lifetime of an interrupt of the demo, A2A or a plug-in agent before it expires (0 = never)",
        duration,
    ),
    Flag(
        "--upstream-interrupt-ttl",
        "0",
        "lifetime the gateway gives an AG-UI agent's interrupt that carries no expiresAt of its own (0 = never: "
        "the agent decides; one it sends is passed on and kept)",
        duration,
    ),
    Flag(
        "--ws-ping-seconds",
        "20",
        "WebSocket ping interval; a peer that does not answer within the same time is closed (0 disables)",
        seconds(low=0),
    ),
    Flag("--ticket-ttl", "60", "lifetime of a single-use WebSocket ticket from POST /ws/tickets", duration),
    Flag(
        "--shutdown-grace-seconds",
        "30",
        "on SIGTERM, how long active runs may go on before they are handed off or cancelled",
        seconds(low=0),
    ),
    Flag(
        "--redis-durability",
        "async",
        "Redis store: 'async' (a failover may lose acknowledged writes), or 'replicated[:N]': admission, interrupt, "
        "finish and cancel writes wait (up to 1 s) until N replicas (default 1) have them, else 503",
        durability,
        setting="redis_min_replicas",
    ),
    Flag(
        "--redis-max-connections",
        "64",
        "Redis store: commands on pooled connections in flight per replica (the scripts pipelined on the store's own connection"
        " are not counted); more wait up to 5 s for a free connection instead of failing",
        integer(1),
    ),
    Flag(
        "--send-timeout-seconds",
        "30",
        "a client whose connection drains nothing for this long is reset (what the kernel still holds for it is dropped) and its run treated as a disconnect: the "
        "backend is cancelled, the thread freed (0 = never)",
        seconds(low=0),
    ),
    Flag(
        "--header-timeout-seconds",
        "10",
        "a request's line and headers must arrive within this long after their first byte, else 408 and the connection "
        "closes (slowloris); a connection that sends nothing at all is closed without an answer",
        seconds(low=0, inclusive=False),
    ),
    Flag(
        "--body-timeout-seconds",
        "30",
        "a request body must arrive within this long, else 408 and the connection closes",
        seconds(low=0, inclusive=False),
    ),
    Flag(
        "--max-connections-per-client",
        "1000",
        "open connections allowed from one client address; beyond it 429 at once (0 = no cap). Lowered, and logged, to a "
        "quarter of the file descriptors left after a reserve of 64; behind a proxy every client has the proxy's address: raise it there",
        integer(0),
    ),
    Flag(
        "--backlog",
        "2048",
        "connections the kernel queues for the server before it accepts them (capped by net.core.somaxconn); a burst of "
        "new connections beyond it is refused or retried by the client's TCP stack; raise it, and somaxconn, for replicas "
        "that take thousands of connections at once",
        integer(1),
    ),
    Flag(
        "--idle-poll-microseconds",
        "200",
        "after each response the event loop keeps polling its sockets up to this long before it sleeps: on a virtual "
        "machine whose idle CPU halts, waking a sleeping server costs the next request about 100 µs. It polls only while at "
        "least four in five recent answers were followed by a request within this long; at most this much CPU time after "
        "each response (0 = sleep at once)",
        integer(0, 10_000),
    ),
    Flag(
        "--http",
        "auto",
        "HTTP/1.1 parser: httptools (C; what auto picks) or h11 (pure Python, for platforms "
        "without the C parts); every connection limit holds on both",
        choices=("auto", "httptools", "h11"),
        setting="http_parser",
    ),
    Flag(
        "--loop",
        "auto",
        "event loop: uvloop (what auto picks where it is installed) or asyncio (the standard library's)",
        choices=("auto", "uvloop", "asyncio"),
        setting="event_loop",
    ),
    Flag(
        "--trusted-proxies",
        None,
        "proxy address or CIDR whose X-Forwarded-For gives the client's address (for rate "
        "limits and logs), repeatable (variable: comma-separated); none by default",
        network,
        many=",",
    ),
    Flag(
        "--metrics-port",
        "0",
        "serve Prometheus metrics at /metrics on this port (0 = off; keep it off public networks)",
        integer(0, 65535),
    ),
    Flag("--metrics-host", "127.0.0.1", "address the metrics port binds (the compose stack uses 0.0.0.0 on its private network)"),
    Flag("--log-level", "info", "log level", choices=("debug", "info", "warning", "error")),
    Flag("--log-format", "text", "log format: text, or json (one object per line)", choices=("text", "json")),
)

FALLBACK_VARIABLES = {"--auth-token": "IAC_CODE_AGUI_AUTH_TOKEN"}  # read when the flag's own variable is unset


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="agui-gateway",
        description="AG-UI gateway: AG-UI 1.0 runs over SSE and WebSocket in front of a pluggable agent backend. "
        "Every flag can also be set with its environment variable, shown in brackets.",
    )
    parser.add_argument("--version", action="version", version=f"agui-gateway {__version__}")
    for flag in FLAGS:
        extra: dict[str, Any] = {"type": flag.parse} if flag.convert else {}
        if flag.choices:
            extra["choices"] = list(flag.choices)
        if flag.many is not None:  # the variable's list is read in settings_from_args: append never sees it
            extra["action"], default = "append", None
        else:
            fallback = FALLBACK_VARIABLES.get(flag.name)
            default = os.environ.get(env_name(flag.name), os.environ.get(fallback, flag.default) if fallback else flag.default)
        parser.add_argument(flag.name, default=default, help=f"{flag.help} [env {env_name(flag.name)}; default {flag.shown}]", **extra)
    return parser


def _listed(flag: Flag, given: list[Any] | None) -> tuple[Any, ...]:
    """A repeatable flag's values: from the command line, else its variable's list (each converted)."""
    if given:
        return tuple(given)
    raw = os.environ.get(env_name(flag.name))
    items = [item.strip() for item in raw.split(flag.many or ",") if item.strip()] if raw else []
    if not flag.convert:
        return tuple(items)
    try:
        return tuple(flag.parse(item) for item in items)
    except argparse.ArgumentTypeError as refused:  # argparse reports the command line's; the variable's are ours
        raise ConfigError(str(refused)) from None


# The first path segments of the gateway's own routes, which --copilotkit-path may not take.
RESERVED_SEGMENTS = frozenset(
    {"invocations", "ws", "threads", "extensions", "health", "ping", "ready", "ui", "openapi", "metrics", ".well-known", "agents"}
)


def settings_from_args(argv: list[str] | None = None) -> Settings:
    """Raises ConfigError (a ValueError) naming the flag, its variable, the value and what is allowed."""
    args = vars(build_parser().parse_args(argv))
    values: dict[str, Any] = {}
    for flag in FLAGS:
        value = args[flag.dest]
        if flag.many is not None:
            value = _listed(flag, value)
        values[flag.field] = flag.finish(value) if flag.finish else value
    values["allowed_cwd"], values["default_cwd"] = _workspaces(values["allowed_cwd"], values["default_cwd"])
    if values["oauth_jwks_url"] and not (values["oauth_issuer"] or values["oauth_discovery_url"]):
        raise ConfigError("--oauth-jwks-url needs --oauth-issuer (or --oauth-discovery-url)")
    path = values["copilotkit_path"]
    if path:
        values["copilotkit_path"] = path = "/" + "/".join(part for part in path.split("/") if part)
        if path == "/" or path.split("/")[1] in RESERVED_SEGMENTS:
            raise ConfigError(f"--copilotkit-path {path!r} would hide the gateway's own routes: name a path of its own")
    if values["agents_file"] and (values["agent"] != "demo" or values["agent_token"]):
        raise ConfigError("--agents declares every agent: leave --agent and --agent-token unset (token_env names each agent's)")
    if values["sigv4_credentials"]:
        if not values["sigv4_region"]:
            raise ConfigError("--sigv4-credentials needs --sigv4-region")
        try:
            load_keys(values["sigv4_credentials"])
        except CredentialsFileError as refused:
            raise ConfigError(f"--sigv4-credentials: {refused}") from None
    return Settings(**values)


def _workspaces(roots: tuple[str, ...], default_cwd: str | None) -> tuple[tuple[str, ...], str | None]:
    normal = tuple(os.path.normpath(root) for root in (roots or default_allowed_roots()) if root)
    default = os.path.normpath(default_cwd) if default_cwd else None
    for root in normal + ((default,) if default else ()):
        if not root.startswith("/"):
            raise ConfigError(f"workspace paths must be absolute: {root!r} (flags --allowed-cwd, --default-cwd)")
    return normal, default


def reference_table() -> str:
    """The flags table of docs/reference.md (a test fails when the document drifts from it)."""
    rows = ["| Flag | Variable | Default | Meaning |", "|---|---|---|---|"]
    for flag in FLAGS:
        meaning = flag.help.replace("|", "\\|")
        rows.append(f"| `{flag.name}` | `{env_name(flag.name)}` | {flag.shown} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m server.flags: print the reference table
    print(reference_table(), end="")
