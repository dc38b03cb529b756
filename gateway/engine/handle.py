"""What a transport holds of a run: its events from a position and a way to cancel it (`RunHandle`), and the
follower of a run on this process (`LiveHandle`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateway.engine.outcome import Cancelled
from gateway.engine.stream import Entry

if TYPE_CHECKING:
    from gateway.engine.run import Run


class RunHandle:
    """What a transport holds: a run's events from a position, and a way to cancel the run on purpose."""

    run_id: str
    thread_id: str
    positions = True  # whether events carry positions a client can reattach from
    # A join's stream: ids name the run too (`<runId>:<position>`, `<runId>:end` for an idle thread's), so a client
    # that reconnects across the boundary of two runs is never answered from the middle of the newer one.
    names_run = False
    queued = False  # the run waits for its turn on a busy thread (queue.py): its first events may be far off
    finished = False  # the run ended and the follower has every event up to its terminal one: nothing will come

    @property
    def ending(self) -> bool:
        """The run's end is being recorded (one store call): what it has left to send leaves with it."""
        return False

    def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        """Batches of (position, event JSON), or None after `heartbeat_seconds` of silence. Position 0 marks an
        event that is not in the log (an attacher's own error). Leaving early detaches from the run."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Cancel on purpose: the stream ends with RUN_FINISHED cancelled."""
        raise NotImplementedError

    def new_input(self) -> list[dict[str, Any]]:
        """The run's input messages its thread's conversation did not hold, as far as this handle knows them."""
        return []


class LiveHandle(RunHandle):
    """A follower of a run that lives on this process, from its ring. `paces`: the run's own request (or its retry),
    whose lag slows the backend; any other follower reads at its own pace and is cut if it falls behind the ring."""

    def __init__(self, run: Run, after: int = 0, *, paces: bool = False) -> None:
        self._run = run
        stream = run.stream
        self.finished = stream.ended and after == stream.head
        # A follower that has every event keeps no cursor: a transport that answers "nothing more" never iterates.
        self._follower = None if self.finished else stream.attach(after, paces=paces)
        self.run_id = run.lease.run_id
        self.thread_id = run.thread_id
        self.positions = run.writer is not None

    def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        if self._follower is None:
            return _nothing()
        return self._run.stream.follow(self._follower, heartbeat_seconds)

    @property
    def ending(self) -> bool:
        return self._run.stream.held_for_end

    def cancel(self) -> None:
        self._run.stop(Cancelled())

    def new_input(self) -> list[dict[str, Any]]:
        recorder = self._run.recorder
        return recorder.new_input() if recorder is not None else []


async def _nothing() -> AsyncGenerator[list[Entry] | None, None]:
    return
    yield
