"""A client joining a thread that keeps its conversation: one valid AG-UI stream that starts with the whole
conversation and state, then follows the active run live, or ends at once when the thread is idle.

Idle:     RUN_STARTED, MESSAGES_SNAPSHOT, STATE_SNAPSHOT, RUN_FINISHED (its outcome the interrupts still pending)
Mid-run:  the run's RUN_STARTED (position 1), MESSAGES_SNAPSHOT, STATE_SNAPSHOT, then the run's events from position 2

The snapshots of a mid-run join hold the conversation as the run found it (with the run's new input messages), so
that the run's own events, replayed after them, add each of their changes once."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import msgspec

from gateway import PROTOCOL_VERSION
from gateway.engine.handle import RunHandle
from gateway.engine.stream import Entry
from gateway.protocol import events as e

UNSET: Any = msgspec.UNSET


def snapshot_events(messages: list[dict[str, Any]], state: Any) -> list[bytes]:
    events: list[e.Event] = [e.MessagesSnapshot(messages=messages)]
    if state is not UNSET:
        events.append(e.StateSnapshot(snapshot=state))
    return [e.encode_json(event) for event in events]


def idle_events(thread_id: str, run_id: str, messages: list[dict[str, Any]], state: Any, interrupts: list[Any]) -> list[Entry]:
    """The whole stream of a join of an idle thread, each event at AT_END: a client that reconnects with that id
    while no newer run began has it all."""
    outcome: e.InterruptOutcome | e.SuccessOutcome = e.InterruptOutcome(interrupts=interrupts) if interrupts else e.SuccessOutcome()
    started = e.encode_json(e.RunStarted(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION))
    finished = e.encode_json(e.RunFinished(thread_id=thread_id, run_id=run_id, outcome=outcome))
    return [(AT_END, data) for data in (started, *snapshot_events(messages, state), finished)]


AT_END = -1  # the position an idle thread's join gives its events: the thread's newest run, at its end


class IdleThread(RunHandle):
    """A joined thread with no run in flight: its conversation, then the end. Nothing of it is in a run's log, so it
    gives no position to attach from (a mux frame carries no `eventId`); an SSE join names its run's end instead."""

    positions = False
    names_run = True

    def __init__(self, thread_id: str, run_id: str, entries: list[Entry]) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._entries = entries

    async def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        yield self._entries

    def cancel(self) -> None:
        return


class HydratedRun(RunHandle):
    """A joined thread's active run, after the thread's conversation: the run's events from its start, with the
    snapshots right after its RUN_STARTED."""

    def __init__(self, inner: RunHandle, snapshots: list[bytes]) -> None:
        self._inner = inner
        self._snapshots = snapshots
        self.thread_id = inner.thread_id
        self.run_id = inner.run_id
        self.positions = inner.positions
        self.names_run = inner.positions

    @property
    def ending(self) -> bool:
        return self._inner.ending

    async def events(self, heartbeat_seconds: float) -> AsyncGenerator[list[Entry] | None, None]:
        snapshots: list[bytes] | None = self._snapshots
        async for batch in self._inner.events(heartbeat_seconds):
            if snapshots is not None and batch:
                # The snapshots go after position 1 (RUN_STARTED), with its position: a client that reconnects
                # from there has them already.
                at = next((index for index, (position, _) in enumerate(batch) if position > 1), len(batch))
                # RUN_STARTED goes without an id: a client that reconnects before it has the snapshots starts over.
                batch = [*((0, data) for _, data in batch[:at]), *((1, data) for data in snapshots), *batch[at:]]
                snapshots = None
            yield batch

    def cancel(self) -> None:
        self._inner.cancel()
