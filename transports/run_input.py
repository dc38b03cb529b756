"""One preparation of a run for every transport: the body read as a `PreparedRun` within the workspaces the
settings allow, with the agent the route names, the grace window the client asks for and the busy-thread policy
(THREADS.md §4: the request's `AGUI-Multitask`, or the `/ws` upgrade's, wins over `forwardedProps.multitask`)."""

from __future__ import annotations

from gateway.engine import PreparedRun, prepare
from gateway.engine.prepare import multitask_of
from gateway.errors import GatewayError
from gateway.settings import Settings
from transports.http_input import parse_grace


def prepared_run(
    settings: Settings,
    body: bytes,
    *,
    transport: str,
    agent: str,
    accept_language: str | None,
    runtime_session: str | None,
    grace: str | float | None,
    grace_field: str,
    multitask: str | None,
) -> PreparedRun:
    """Raises GatewayError in the run's language (as far as the body was read to know it)."""
    prepared = prepare(
        body,
        allowed_roots=settings.allowed_cwd,
        default_cwd=settings.default_cwd,
        accept_language=accept_language,
        runtime_session_id=runtime_session,
        transport=transport,
    )
    prepared.agent = agent
    try:
        prepared.grace_seconds = parse_grace(grace, grace_field)
        prepared.multitask = multitask_of(multitask, "AGUI-Multitask") or prepared.multitask
    except GatewayError as error:
        error.language = prepared.language
        raise
    return prepared
