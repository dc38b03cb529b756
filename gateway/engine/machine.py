"""The run state machine, in one place: which event moves a run from which state to which, when the backend counts
as having taken the execution, which stop request wins, and that no stop is heard once the outcome is fixed."""

from __future__ import annotations

import enum

from gateway.engine.outcome import Cancelled, Disconnected, Failed, HandedOff

StopReason = Cancelled | Failed | Disconnected | HandedOff


class RunState(enum.Enum):
    ADMITTED = "admitted"  # the lease is held; nothing streamed yet
    AWAITING_ACCEPTANCE = "awaiting_acceptance"  # a resume: the backend has not yet taken the answers
    RUNNING = "running"  # the backend is working on this execution (its answers, if any, are accepted)
    SETTLING = "settling"  # the outcome is fixed: writing the store, then the terminal event
    ENDED = "ended"  # settled; nothing more is written

    # A member is its own singleton: hashed by identity in C, not by Enum's Python-level hash of its name (a call
    # each time a run's move is looked up, three moves a run).
    __hash__ = object.__hash__


class RunEvent(enum.Enum):
    TURN_STARTED = "turn_started"  # a new turn (or an adopted run) handed to the backend: it works on it
    RESUME_SENT = "resume_sent"  # a resume handed to the backend, which has not yet taken its answers
    ANSWERS_TAKEN = "answers_taken"  # the backend's first signal on a resume: it took the answers
    OUTCOME_FIXED = "outcome_fixed"  # the run settles: its outcome is decided
    SETTLED = "settled"  # the outcome is recorded (or could not be) and the stream closed

    __hash__ = object.__hash__  # as RunState's


MOVES: dict[tuple[RunState, RunEvent], RunState] = {
    (RunState.ADMITTED, RunEvent.TURN_STARTED): RunState.RUNNING,
    (RunState.ADMITTED, RunEvent.RESUME_SENT): RunState.AWAITING_ACCEPTANCE,
    (RunState.AWAITING_ACCEPTANCE, RunEvent.ANSWERS_TAKEN): RunState.RUNNING,
    (RunState.ADMITTED, RunEvent.OUTCOME_FIXED): RunState.SETTLING,
    (RunState.AWAITING_ACCEPTANCE, RunEvent.OUTCOME_FIXED): RunState.SETTLING,
    (RunState.RUNNING, RunEvent.OUTCOME_FIXED): RunState.SETTLING,
    (RunState.SETTLING, RunEvent.SETTLED): RunState.ENDED,
}

ACCEPTING = frozenset({RunState.RUNNING})  # entering it means the backend took the execution
SETTLED_STATES = frozenset({RunState.SETTLING, RunState.ENDED})  # the outcome is fixed: stops are not heard
# A lost lease (Failed) or another owner (HandedOff) replaces an earlier cancel or disconnect; otherwise the
# first reason asked for stands.
OVERRIDES: dict[type[StopReason], bool] = {Cancelled: False, Disconnected: False, Failed: True, HandedOff: True}


class IllegalTransition(RuntimeError):
    """A bug: the run met an event that its state has no move for."""


class RunMachine:
    """One run's state, whether the backend took the execution, and why it was asked to stop."""

    __slots__ = ("accepted", "state", "stop_reason")

    def __init__(self) -> None:
        self.state = RunState.ADMITTED
        self.accepted = False  # the backend works on this execution: a new turn, or a resume whose answers it took
        self.stop_reason: StopReason | None = None

    def fire(self, event: RunEvent) -> RunState:
        target = MOVES.get((self.state, event))
        if target is None:
            raise IllegalTransition(f"{event.name} in {self.state.name}")
        self.state = target
        if target in ACCEPTING:
            self.accepted = True
        return target

    @property
    def settled(self) -> bool:
        """The outcome is fixed (settling or ended): nothing may change it any more."""
        return self.state in SETTLED_STATES

    def ask_stop(self, reason: StopReason) -> bool:
        """Record a stop request; False when it is not heard (the outcome is fixed already)."""
        if self.settled:
            return False
        if self.stop_reason is None or OVERRIDES[type(reason)]:
            self.stop_reason = reason
        return True
