"""The run state machine (gateway/engine/machine.py): which event moves a run where, when the backend counts as having
taken the execution, which stop request stands, and that none is heard once the outcome is fixed."""

from __future__ import annotations

import pytest

from gateway.engine.machine import MOVES, IllegalTransition, RunEvent, RunMachine, RunState
from gateway.engine.outcome import Cancelled, Disconnected, Failed, HandedOff
from gateway.errors import ErrorCode, GatewayError

LOST = Failed(GatewayError(ErrorCode.EXECUTION_LOST))


def machine_after(*events: RunEvent) -> RunMachine:
    machine = RunMachine()
    for event in events:
        machine.fire(event)
    return machine


@pytest.mark.parametrize(
    ("events", "state", "accepted"),
    [
        ((RunEvent.TURN_STARTED,), RunState.RUNNING, True),  # a new turn: the backend works on it at once
        ((RunEvent.RESUME_SENT,), RunState.AWAITING_ACCEPTANCE, False),  # a resume: not until it takes the answers
        ((RunEvent.RESUME_SENT, RunEvent.ANSWERS_TAKEN), RunState.RUNNING, True),
        ((RunEvent.RESUME_SENT, RunEvent.OUTCOME_FIXED), RunState.SETTLING, False),  # refused: its interrupts stay
        ((RunEvent.OUTCOME_FIXED,), RunState.SETTLING, False),  # stopped before the backend saw it
        ((RunEvent.TURN_STARTED, RunEvent.OUTCOME_FIXED, RunEvent.SETTLED), RunState.ENDED, True),
    ],
)
def test_each_event_moves_the_run_to_its_state_and_acceptance_follows(events, state, accepted):
    machine = machine_after(*events)
    assert (machine.state, machine.accepted) == (state, accepted)


@pytest.mark.parametrize(
    ("events", "event"),
    [
        ((RunEvent.TURN_STARTED,), RunEvent.ANSWERS_TAKEN),  # a new turn has no answers to take
        ((RunEvent.TURN_STARTED,), RunEvent.RESUME_SENT),
        ((RunEvent.TURN_STARTED,), RunEvent.SETTLED),  # settled without its outcome fixed first
        ((RunEvent.OUTCOME_FIXED,), RunEvent.TURN_STARTED),  # nothing starts once the outcome is fixed
        ((RunEvent.OUTCOME_FIXED,), RunEvent.OUTCOME_FIXED),
        ((RunEvent.OUTCOME_FIXED, RunEvent.SETTLED), RunEvent.SETTLED),
    ],
)
def test_an_event_with_no_move_from_the_state_is_a_bug_and_changes_nothing(events, event):
    machine = machine_after(*events)
    before = (machine.state, machine.accepted)
    with pytest.raises(IllegalTransition):
        machine.fire(event)
    assert (machine.state, machine.accepted) == before


def test_every_state_but_the_last_has_a_way_out_and_the_last_has_none():
    sources = {state for state, _ in MOVES}
    assert sources == set(RunState) - {RunState.ENDED}
    assert {target for target in MOVES.values()} == set(RunState) - {RunState.ADMITTED}


@pytest.mark.parametrize(
    ("first", "then", "stands"),
    [
        (Cancelled(), Disconnected(), Cancelled),  # the first of two plain requests stands
        (Disconnected(), Cancelled(), Disconnected),
        (Cancelled(), LOST, Failed),  # a lost lease overrides a cancel
        (Disconnected(), HandedOff(), HandedOff),  # another owner overrides a disconnect
        (LOST, Cancelled(), Failed),  # and a later cancel does not undo it
    ],
)
def test_the_stop_priority(first, then, stands):
    machine = machine_after(RunEvent.TURN_STARTED)
    assert machine.ask_stop(first) and machine.ask_stop(then)
    assert type(machine.stop_reason) is stands


@pytest.mark.parametrize("events", [(RunEvent.OUTCOME_FIXED,), (RunEvent.TURN_STARTED, RunEvent.OUTCOME_FIXED, RunEvent.SETTLED)])
def test_no_stop_is_heard_once_the_outcome_is_fixed(events):
    """A renewal answered "not ok" because the run had just released its lease must not turn success into a loss."""
    machine = machine_after(*events)
    assert machine.settled
    assert not machine.ask_stop(LOST) and machine.stop_reason is None
