"""A thread's queue and its stop, on the memory store with a clock stepped by hand: a place that is not renewed
lapses and the runs after it move up; a rollback run's victim writes the conversation as it was before it; a stop
of a thread waiting on interrupts ends them."""

from __future__ import annotations

import msgspec
import pytest

from store import Admission, HistoryWrite, Lease, Progress, Rejected, Rejection
from store.limits import QUEUE_TICKET_SECONDS
from store.memory import MemoryStore
from tests.unit.clock import FakeClock


def admission(store: MemoryStore, run: str, multitask: str = "enqueue", *, waiting: bool = False) -> Admission:
    plain = Admission("t", run, f"d-{run}", "", None, "thread:t", False, f"e-{run}", store.owner_id)
    return msgspec.structs.replace(plain, multitask=multitask, max_queued=4, waiting=waiting)


async def test_a_place_not_renewed_lapses_and_the_next_run_moves_up():
    clock = FakeClock()
    store = MemoryStore(3600, clock=clock)
    first = await store.admit(admission(store, "r1", "reject"))
    assert (await store.admit(admission(store, "r2"))).queued == 1
    assert (await store.admit(admission(store, "r3"))).queued == 2
    clock.advance(QUEUE_TICKET_SECONDS / 2)
    assert (await store.admit(admission(store, "r3", waiting=True))).queued == 2, "r3 renews; r2 does not"
    clock.advance(QUEUE_TICKET_SECONDS / 2 + 0.1)
    assert (await store.admit(admission(store, "r3", waiting=True))).queued == 1, "r2's place lapsed"
    with pytest.raises(Rejected) as gone:
        await store.admit(admission(store, "r2", waiting=True))
    assert gone.value.reason is Rejection.DEQUEUED, "a lapsed run is never run"
    await store.finish_run(Lease("t", "r1", "e-r1", first.fence), "completed", Progress(0, {}))
    turn = await store.admit(admission(store, "r3", waiting=True))
    assert turn.queued == 0 and turn.fence == first.fence + 1


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
async def test_only_a_rollback_runs_victim_writes_the_conversation_as_before(policy):
    store = MemoryStore(3600, clock=FakeClock())
    active = await store.admit(admission(store, "r1", "reject"))
    queued = await store.admit(admission(store, "r2", policy))
    assert (queued.queued, queued.stop_execution) == (1, "e-r1")
    ended = HistoryWrite(b'{"messages":["after"]}', b'{"n":2}', "scope", rollback=(b'{"messages":["before"]}', b'{"n":1}'))
    await store.finish_run(Lease("t", "r1", "e-r1", active.fence), "cancelled", Progress(0, {}), ended)
    kept = await store.read_history("t")
    expected = (b'{"messages":["before"]}', b'{"n":1}') if policy == "rollback" else (b'{"messages":["after"]}', b'{"n":2}')
    assert (kept.conversation, kept.summary) == expected


async def test_a_stop_ends_a_threads_interrupts_and_names_only_the_run_that_left_them():
    store = MemoryStore(3600, clock=FakeClock())
    admitted = await store.admit(admission(store, "r1", "reject"))
    await store.save_interrupt(Lease("t", "r1", "e-r1", admitted.fence), [], checkpoint={"k": 1}, open_steps=[], progress=Progress(0, {}))
    assert (await store.stop("t", "nobody", None)).status.value == "not_running"
    stopped = await store.stop("t", "r1", None)
    assert stopped.status.value == "cancelled" and stopped.execution is not None and stopped.execution.checkpoint == {"k": 1}
    assert (await store.stop("t", None, None)).status.value == "not_running"
    assert (await store.stop("other", None, None)).status.value == "not_found"
