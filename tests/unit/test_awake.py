"""server/awake.py's choices, on a loop whose clock and callbacks the test drives: after an answer the loop is
kept polling for the window, then let sleep; answers that no request follows closely stop the polls, and requests
that follow closely bring them back. What the polls cost in CPU is bench/idle_poll.py's to measure."""

from __future__ import annotations

from collections.abc import Callable

from server.awake import Awake

WINDOW = 0.05


class SteppedLoop:
    """The three things Awake asks of a loop: its time, a callback on the next turn, whether it is closed."""

    def __init__(self) -> None:
        self.now = 100.0
        self.soon: list[Callable[[], object]] = []

    def time(self) -> float:
        return self.now

    def call_soon(self, callback: Callable[[], object]) -> None:
        self.soon.append(callback)

    def is_closed(self) -> bool:
        return False

    def turn(self, seconds: float) -> bool:
        """One turn `seconds` long; True when a poll was due in it (the loop's wait would not have blocked)."""
        self.now += seconds
        due, self.soon = self.soon, []
        for callback in due:
            callback()
        return bool(due)


def polling_turns(loop: SteppedLoop, turns: int = 20, seconds: float = WINDOW * 0.08) -> int:
    """How many of `turns` turns polled (12.5 turns of the default length fill a window: no boundary to round)."""
    return sum(loop.turn(seconds) for _ in range(turns))


def test_the_loop_polls_for_the_window_after_an_answer_then_sleeps():
    loop, awake = SteppedLoop(), Awake(WINDOW)
    awake.touch(loop)  # type: ignore[arg-type]
    assert polling_turns(loop) == 14  # the turn that set the window, the twelve inside it, the one that found it over
    assert loop.soon == [] and polling_turns(loop) == 0  # then asleep


def test_a_window_of_zero_never_polls():
    loop, awake = SteppedLoop(), Awake(0.0)
    awake.touch(loop)  # type: ignore[arg-type]
    assert polling_turns(loop) == 0


def test_answers_that_no_request_follows_stop_the_polls_and_requests_that_follow_closely_bring_them_back():
    loop, awake = SteppedLoop(), Awake(WINDOW)
    for _ in range(5):  # answers that nothing follows within the window
        awake.touch(loop)  # type: ignore[arg-type]
        polling_turns(loop, turns=1, seconds=WINDOW * 1.5)
    loop.soon.clear()
    awake.touch(loop)  # type: ignore[arg-type]
    assert polling_turns(loop) == 0, "four misses in a row: polling no longer pays"
    for _ in range(12):  # requests sent as soon as the answer before them is read
        awake.arrived(loop)  # type: ignore[arg-type]
        awake.touch(loop)  # type: ignore[arg-type]
        loop.now += WINDOW / 100
    assert polling_turns(loop) > 0, "a client's own turnaround: polling pays again"
