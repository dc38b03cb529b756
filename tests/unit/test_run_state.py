"""The run state machine's table: every allowed edge, and refusal of the rest."""

from __future__ import annotations

import itertools

import pytest

from gateway.engine.outcome import TRANSITIONS, IllegalTransition, RunState, check_transition


def test_the_happy_paths_are_edges():
    path = [RunState.ADMITTED, RunState.AWAITING_ACCEPTANCE, RunState.RUNNING, RunState.SETTLING, RunState.ENDED]
    for current, target in itertools.pairwise(path):
        check_transition(current, target)
    check_transition(RunState.ADMITTED, RunState.SETTLING)  # e.g. a resume refused before the backend saw it


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (RunState.RUNNING, RunState.AWAITING_ACCEPTANCE),
        (RunState.SETTLING, RunState.RUNNING),
        (RunState.ENDED, RunState.SETTLING),
        (RunState.RUNNING, RunState.ENDED),
        (RunState.ENDED, RunState.ENDED),
    ],
)
def test_other_moves_are_bugs(current, target):
    with pytest.raises(IllegalTransition):
        check_transition(current, target)


def test_every_state_has_a_row_and_ended_is_final():
    assert set(TRANSITIONS) == set(RunState) and TRANSITIONS[RunState.ENDED] == frozenset()
