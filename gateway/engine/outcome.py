"""The typed outcomes a run settles into (the state machine that gets it there is machine.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.agents import signals as s
from gateway.errors import GatewayError
from gateway.protocol import events as e


class Completed(msgspec.Struct, frozen=True):
    result: Any = None
    pending_tool_call_ids: tuple[str, ...] = ()  # client tools the client is to run (RUN_FINISHED success states them)


class Interrupted(msgspec.Struct, frozen=True):
    request: s.InputRequired
    announced: tuple[e.Interrupt, ...] = ()  # the interrupts as RUN_FINISHED states them, once they are saved


class Cancelled(msgspec.Struct, frozen=True):
    """Cancelled on purpose (cancel extension, cross-replica intent, drain): RUN_FINISHED cancelled."""


class Failed(msgspec.Struct, frozen=True):
    error: GatewayError


class Disconnected(msgspec.Struct, frozen=True):
    """The client went away: the backend is cancelled and no terminal event is written."""


class HandedOff(msgspec.Struct, frozen=True):
    """Another replica goes on with the run (a drain's hand-off, or an adopter took the lease): this one writes
    no end, sends no terminal event, and leaves the backend's task running."""


Outcome = Completed | Interrupted | Cancelled | Failed | Disconnected | HandedOff


AGENT_REPORTED = "AGENT_ERROR"  # the label of a failure the agent reported itself (its own RUN_ERROR, its exception)


def outcome_label(outcome: Outcome | None) -> str:
    """A short name for logs and metrics: the outcome kind, the error code of a failure of ours, or AGENT_REPORTED
    (the agent's own codes are its vocabulary, unbounded: never a label)."""
    if outcome is None:
        return "running"
    if isinstance(outcome, Failed):
        return AGENT_REPORTED if outcome.error.agent_code is not None else outcome.error.code.name
    return type(outcome).__name__.lower()


def failure_reason(outcome: Outcome | None) -> str | None:
    """What a failure's log line says of it: the agent's own code and message, or our detail (None: no failure)."""
    if not isinstance(outcome, Failed):
        return None
    error = outcome.error
    if error.agent_code is not None:
        return f"{error.agent_code}: {(error.agent_message or '')[:300]}"
    return (error.detail or error.field or error.code.name)[:300]
