"""The one typed settings object, built from CLI flags and AGUI_GATEWAY_* environment variables."""

from __future__ import annotations

import os
import re
import tempfile
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from msgspec import Struct, field


def default_state_dir() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "agui")


def default_allowed_roots() -> tuple[str, ...]:
    """The user's home directory, /workspace (container convention) and the system temp directory."""
    roots = {os.path.expanduser("~"), "/workspace", tempfile.gettempdir()}
    return tuple(sorted(os.path.normpath(r) for r in roots if r.startswith("/")))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|m|h)\s*$")


def parse_rate(text: str) -> tuple[float, float]:
    """`20/s`, `600/m`, `1000/h` -> (requests per second, burst = the count)."""
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"not a rate: {text!r} (use e.g. 20/s, 600/m)")
    count = float(match.group(1))
    if count <= 0:
        raise ValueError("a rate must be positive")
    return count / _UNITS[match.group(2)], count


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `12h`, `7d` -> seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 900, 15m, 12h, 7d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


class Settings(Struct, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8080
    store: str = "file"
    state_dir: str = field(default_factory=default_state_dir)
    agent: str = "demo"
    agent_token: str | None = None
    agents_file: str | None = None  # --agents: several agents declared in a TOML file
    auth_token: str | None = None
    heartbeat_seconds: float = 15.0
    allowed_cwd: tuple[str, ...] = field(default_factory=default_allowed_roots)
    default_cwd: str | None = None
    retention_seconds: float = 7 * 86400.0
    interrupt_ttl: float = 900.0
    upstream_interrupt_ttl: float = 0.0  # an AG-UI agent's interrupts: none of the gateway's unless asked
    lease_seconds: float = 10.0
    max_reattach_grace_seconds: float = 120.0  # longest grace window a client may ask for (0: reattach turned off)
    event_log_retention: float = 600.0  # how long an ended run's events can be replayed
    agent_response_seconds: float = 60.0  # an AG-UI upstream's response head must come within this
    a2a_follow_idle_seconds: float = 300.0  # a followed A2A task silent this long (and still working) fails
    event_log_max_events: int = 50_000  # newest events kept per run
    event_log_max_bytes: int = 16 * 1024 * 1024  # bytes of events kept per run
    event_log_retained_bytes: int = 256 * 1024 * 1024  # bytes of ended runs' events kept by this replica
    redis_min_replicas: int = 0  # --redis-durability replicated[:N]: writes wait for N replicas (0: asynchronous)
    redis_max_connections: int = 64  # Redis commands on pooled connections in flight per replica; more wait (bounded)
    ws_ping_seconds: float = 20.0
    shutdown_grace_seconds: float = 30.0
    send_timeout_seconds: float = 30.0  # a client that drains nothing for this long is disconnected (0: never)
    header_timeout_seconds: float = 10.0  # a request head must arrive within this long after its first byte
    body_timeout_seconds: float = 30.0  # a request body must arrive within this long
    metrics_port: int = 0  # Prometheus /metrics on its own port (0: off)
    metrics_host: str = "127.0.0.1"
    trusted_proxies: tuple[str, ...] = ()  # addresses/CIDRs whose X-Forwarded-For names the client (none by default)
    max_connections_per_client: int = 1000  # open connections per client address (0: no cap)
    backlog: int = 2048  # the listen backlog (the kernel caps it at net.core.somaxconn)
    idle_poll_microseconds: int = 200  # the loop polls, not sleeps, up to this long after a response (server/awake.py)
    http_parser: str = "auto"  # httptools where installed, else h11 (server/http_protocol.py)
    event_loop: str = "auto"  # uvloop where installed, else asyncio's own
    ticket_ttl: float = 60.0
    oauth_discovery_url: str | None = None
    oauth_jwks_url: str | None = None
    oauth_issuer: str | None = None
    oauth_audience: tuple[str, ...] = ()
    oauth_client_id: tuple[str, ...] = ()
    oauth_scope: tuple[str, ...] = ()
    oauth_algorithms: tuple[str, ...] = ("RS256", "ES256")
    sigv4_credentials: str | None = None  # the keys file (its path; the keys are read at start, never kept here)
    sigv4_region: str | None = None
    sigv4_service: str = "bedrock-agentcore"
    public_url: str | None = None
    max_concurrent_runs: int = 0  # 0: no cap
    max_live_run_bytes: int = 128 * 1024 * 1024  # the live runs' event rings on this replica (0: no budget)
    max_state_bytes: int = 8 * 1024 * 1024  # an agent's state document or messages snapshot
    thread_history: Literal["off", "plain", "all"] = "plain"  # which threads keep their conversation
    thread_history_bytes: int = 8 * 1024 * 1024  # conversation kept per thread
    copilotkit_path: str = "/copilotkit"  # CopilotKit's runtime endpoints ("" : off)
    cors_origins: tuple[str, ...] = ()  # origins whose pages may call the gateway
    multitask: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"  # a busy thread's default policy
    max_queued_runs: int = 8  # runs waiting per thread
    max_background_seconds: float = 3600.0  # a run with no client is cancelled after this long
    rate_limit: tuple[float, float] | None = None  # (requests per second, burst)
    log_level: str = "info"
    log_format: str = "text"

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
