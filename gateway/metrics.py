"""Prometheus metrics of the gateway. Every label takes values from a small closed set (transports, outcomes,
error codes, operations, reasons): never a thread, run, user or other unbounded id. Served by `--metrics-port`."""

from __future__ import annotations

from typing import Any

from gateway.metric_values import Counter, Gauge, Histogram

TRANSPORTS = ("sse", "invocations", "ws")
_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_DURATION = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)

RUNS_STARTED = Counter("agui_runs_started", "Runs admitted, by transport and agent.", ["transport", "agent"])
RUNS_ENDED = Counter(
    "agui_runs_ended",
    "Runs settled, by transport, outcome (completed, interrupted, cancelled, disconnected, or the error code) and agent.",
    ["transport", "outcome", "agent"],
)
RUNS_REFUSED = Counter("agui_runs_refused", "Runs refused before they started, by transport and error code.", ["transport", "code"])
RUNS_QUEUED = Counter(
    "agui_runs_queued", "Runs queued behind a busy thread's active run, by policy (enqueue, interrupt, rollback).", ["policy"]
)
RUNS_IN_FLIGHT = Gauge("agui_runs_in_flight", "Runs in flight on this replica.")
RUNS_CUT = Counter("agui_runs_cut", "Runs ended because they held more than their share of --max-live-run-bytes.")
# Read from the engine's account when scraped (`set_function`): no lock on the path of each event.
LIVE_RUN_BYTES = Gauge("agui_live_run_bytes", "Bytes the live runs' event rings hold, as --max-live-run-bytes counts them.")
CONNECTIONS_OPEN = Gauge("agui_connections_open", "Open run streams: SSE responses and WebSocket connections.", ["kind"])
SIGNALS_REFUSED = Counter(
    "agui_signals_refused", "Backend signals that would have broken the protocol (the run failed), by signal type.", ["signal"]
)
EVENTS_SENT = Counter("agui_events_sent", "AG-UI events written to clients, by transport.", ["transport"])
BYTES_SENT = Counter("agui_bytes_sent", "Bytes of events written to clients, by transport.", ["transport"])
TIME_TO_FIRST_EVENT = Histogram(
    "agui_time_to_first_event_seconds", "From the request's arrival to its first event written.", ["transport"], buckets=_LATENCY
)
RUN_DURATION = Histogram(
    "agui_run_duration_seconds", "From admission to settlement, by outcome kind and agent.", ["outcome", "agent"], buckets=_DURATION
)
STORE_SECONDS = Histogram("agui_store_operation_seconds", "Store operation latency, by operation.", ["operation"], buckets=_LATENCY)
STORE_ERRORS = Counter(
    "agui_store_errors", "Store operations that failed, by operation and kind (unavailable, rejected).", ["operation", "kind"]
)
LEASE_RENEWALS = Counter("agui_lease_renewals", "Lease renewals, by result (ok, lost, unavailable).", ["result"])
CANCELS = Counter("agui_cancels", "Cancels on purpose, by origin (extension, stop, socket, remote, renewal, drain).", ["origin"])
REATTACHES = Counter(
    "agui_reattaches", "Attaches to a run, by source (live: this replica's ring, log: the store's log) or refusal code.", ["source"]
)
ADOPTIONS = Counter("agui_adoptions", "Live runs this replica took over from a replica that stopped renewing (died, or drained).")
HANDOFFS = Counter("agui_handoffs", "Live runs this replica handed to another while draining (their agent task went on).")
FOLLOWERS_CUT = Counter("agui_followers_cut", "Attached followers cut because they fell behind their run's ring (they may attach again).")
RETAINED_LOG_BYTES = Gauge("agui_retained_log_bytes", "Bytes of ended runs' event logs this replica keeps for replay (its budget's count).")
RETAINED_LOGS_EXPIRED = Counter("agui_retained_logs_expired", "Ended runs' logs expired before their retention, to keep the byte budget.")
DETACHED_RUNS = Gauge("agui_detached_runs", "Runs in flight on this replica that nobody follows (in their grace window).")
AUTH_FAILURES = Counter("agui_auth_failures", "Refused credentials, by reason (missing, invalid, scope, sigv4).", ["reason"])
A2A_SECONDS = Histogram("agui_a2a_call_seconds", "A2A calls to the agent until their reply began, by method.", ["method"], buckets=_LATENCY)
A2A_ERRORS = Counter("agui_a2a_errors", "A2A calls that failed, by method.", ["method"])


def outcome_kind(label: str) -> str:
    """A run-duration label: the outcome kind, with every error code folded into `failed`."""
    return label if label in ("completed", "interrupted", "cancelled", "disconnected") else "failed"


def labelled(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`: the child for these label values, made at its first use (a run looks up nine: the
    children made already are read here, with no second call)."""
    child = metric.children.get(values)
    return child if child is not None else metric.labels(*values)
