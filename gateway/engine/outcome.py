"""The typed outcomes a run settles into (the state machine that gets it there is machine.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.agents import signals as s
from gateway.errors import GatewayError
from gateway.protocol import events as e


@dataclass(frozen=True, slots=True)
class Completed:
    result: Any = None
    pending_tool_call_ids: tuple[str, ...] = ()  # client tools the client is to run (RUN_FINISHED success states them)


@dataclass(frozen=True, slots=True)
class Interrupted:
    request: s.InputRequired
    announced: tuple[e.Interrupt, ...] = ()  # the interrupts as RUN_FINISHED states them, once they are saved


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Cancelled on purpose (cancel extension, cross-replica intent, drain): RUN_FINISHED cancelled."""


@dataclass(frozen=True, slots=True)
class Failed:
    error: GatewayError


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The client went away: the backend is cancelled and no terminal event is written."""


@dataclass(frozen=True, slots=True)
class HandedOff:
    """Another replica goes on with the run (a drain's hand-off, or an adopter took the lease): this one writes
    no end, sends no terminal event, and leaves the backend's task running."""


Outcome = Completed | Interrupted | Cancelled | Failed | Disconnected | HandedOff


def outcome_label(outcome: Outcome | None) -> str:
    """A short name for logs: the outcome kind, or the error code of a failure."""
    if outcome is None:
        return "running"
    if isinstance(outcome, Failed):
        return outcome.error.code.name
    return type(outcome).__name__.lower()
