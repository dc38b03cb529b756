"""The state rules as pure functions on a ThreadState, used by the memory and file stores.

The Redis store runs the same rules in `store/lua/` against the same document layout and the same
bounds (`store/limits.py`); `tests/unit/test_store_parity.py` runs one scenario list against both.
"""

from __future__ import annotations

from typing import Any

import msgspec

from store.base import (
    RESTART_WINDOW_SECONDS,
    Admission,
    AdmitResult,
    CancelResult,
    CancelStatus,
    Lease,
    Progress,
    Rejected,
    Rejection,
    RenewResult,
    StopResult,
)
from store.limits import MAX_ANSWERED_IDS, MAX_HISTORY, MAX_RUN_RECORDS, QUEUE_TICKET_SECONDS
from store.records import (
    TERMINAL,
    ActiveRun,
    Binding,
    Execution,
    ExecutionStatus,
    PendingInterrupt,
    QueuedRun,
    RunRecord,
    ThreadState,
)


def _copy(execution: Execution | None) -> Execution | None:
    return None if execution is None else msgspec.structs.replace(execution, pending=list(execution.pending))


def _retire(state: ThreadState, execution: Execution) -> None:
    """Move a finished execution to the bounded history, dropping what recovery no longer needs."""
    execution.pending = []
    execution.checkpoint = None
    execution.open_steps = []
    state.history = [e for e in state.history if e.execution_id != execution.execution_id][-(MAX_HISTORY - 1) :]
    state.history.append(execution)
    if state.execution is execution:
        state.execution = None


def _answered(execution: Execution) -> list[str]:
    """The pending ids first, then the older answered ids, bounded."""
    return ([p.id for p in execution.pending] + execution.answered_ids)[:MAX_ANSWERED_IDS]


def _end(state: ThreadState, execution: Execution, status: ExecutionStatus, now: float) -> Execution:
    ended = _copy(execution)
    assert ended is not None
    if status == "expired" or status == "cancelled":
        execution.answered_ids = _answered(execution)
    execution.status = status
    execution.updated_at = now
    _retire(state, execution)
    return ended


def expire_and_reap(state: ThreadState, now: float, live_owner: str | None) -> tuple[Execution | None, bool]:
    """Expire overdue interrupts and free a lease whose owner is gone; return (the expired execution, changed)."""
    expired = None
    changed = False
    current = state.execution
    overdue = current is not None and any(p.expires_at is not None and p.expires_at <= now for p in current.pending)
    if current is not None and current.status == "interrupted" and overdue:
        expired = _end(state, current, "expired", now)
        changed = True
    active = state.active
    if active is not None and (active.lease_until <= now or (live_owner is not None and active.owner != live_owner)):
        state.active = None
        changed = True
        current = state.execution
        if current is not None and current.execution_id == active.execution_id and current.status == "running":
            _end(state, current, "lost", now)
    return expired, changed


def _check_binding(state: ThreadState, a: Admission) -> None:
    if state.binding is None:
        return
    if a.cwd and state.binding.cwd != a.cwd:  # a plain request names no workspace (""): it never conflicts on one
        raise Rejected(Rejection.THREAD_BINDING_CONFLICT, "forwardedProps.iacCode.cwd")
    if state.binding.user_id != a.user_id:
        raise Rejected(Rejection.THREAD_BINDING_CONFLICT, "forwardedProps.iacCode.userId")
    if state.binding.agent != a.agent:
        raise Rejected(Rejection.THREAD_BINDING_CONFLICT, "agentId")


def _record_run(state: ThreadState, a: Admission, execution_id: str, now: float) -> None:
    state.runs[a.run_id] = RunRecord(digest=a.digest, execution_id=execution_id, at=now, fence=state.fence, nonce=a.nonce)
    if len(state.runs) > MAX_RUN_RECORDS:
        oldest = sorted(state.runs, key=lambda run_id: state.runs[run_id].fence)
        for run_id in oldest[: len(state.runs) - MAX_RUN_RECORDS]:
            del state.runs[run_id]


def _unstarted(state: ThreadState, a: Admission, known: RunRecord, started: bool, now: float) -> bool:
    """The same request as a run that was admitted but never started (its admission's answer was lost): no events
    were logged for it, and it is recent. True: it may be admitted again once nobody holds its lease."""
    return a.restart_unstarted and known.digest == a.digest and not started and now - known.at < RESTART_WINDOW_SECONDS


def _refusal(state: ThreadState, a: Admission, started: bool, now: float) -> Rejected | None:
    """Why this admission is refused before the thread's business is looked at (binding, idempotency), or None."""
    try:
        _check_binding(state, a)
    except Rejected as refusal:
        return refusal
    known = state.runs.get(a.run_id)
    if known is not None and _unstarted(state, a, known, started, now):
        if state.active is not None and state.active.run_id == a.run_id:
            return Rejected(Rejection.THREAD_BUSY)  # its orphaned lease has not expired yet: retry shortly
    elif known is not None:
        return Rejected(Rejection.DUPLICATE_RUN_ID if known.digest == a.digest else Rejection.RUN_ID_CONFLICT, "runId")
    return None


def _interrupted(state: ThreadState) -> bool:
    return state.execution is not None and state.execution.status == "interrupted"


def _without_place(state: ThreadState, run_id: str) -> bool:
    """Take the run's place out of the thread's queue; whether it held one (lib.lua's `without_place`)."""
    kept = [q for q in state.queue if q.run_id != run_id]
    held = len(kept) != len(state.queue)
    state.queue = kept
    return held


def drop_stale_places(state: ThreadState, now: float, live_owner: str | None) -> bool:
    """Forget queued runs whose replica stopped renewing their place (or, single-process, is another process)."""
    kept = [q for q in state.queue if q.until > now and (live_owner is None or q.owner == live_owner)]
    changed = len(kept) != len(state.queue)
    state.queue = kept
    return changed


def _queue(state: ThreadState, a: Admission, now: float) -> AdmitResult | Rejected:
    """A busy thread's answer to a new run: refused, or queued (an `interrupt` or `rollback` run goes before the runs
    that only wait, and asks the active run to stop)."""
    if state.active is None and _interrupted(state):
        return Rejected(Rejection.RESUME_REQUIRED)
    if a.multitask == "reject":
        return Rejected(Rejection.THREAD_BUSY)
    if any(q.run_id == a.run_id for q in state.queue):
        return Rejected(Rejection.DUPLICATE_RUN_ID, "runId")
    if len(state.queue) >= a.max_queued:
        return Rejected(Rejection.THREAD_BUSY)
    front = a.multitask in ("interrupt", "rollback")
    place = sum(1 for q in state.queue if q.front) if front else len(state.queue)
    state.queue.insert(place, QueuedRun(a.run_id, a.owner, now + QUEUE_TICKET_SECONDS, front))
    result = AdmitResult(None, [], queued=place + 1)
    active, current = state.active, state.execution
    running = current is not None and current.status == "running"
    if front and active is not None and current is not None and running and current.execution_id == active.execution_id:
        current.cancel_requested = True
        current.rollback = current.rollback or a.multitask == "rollback"
        result.stop_owner, result.stop_execution = active.owner, active.execution_id
    return result


def _turn(state: ThreadState, a: Admission, now: float) -> AdmitResult | Rejected | None:
    """A queued run asking again: None when its turn has come (its place is given up), else its place (renewed)."""
    mine = next((i for i, q in enumerate(state.queue) if q.run_id == a.run_id), None)
    if mine is None:
        return Rejected(Rejection.DEQUEUED)
    if state.active is None and mine == 0:
        del state.queue[0]
        return None
    state.queue[mine].until = now + QUEUE_TICKET_SECONDS
    return AdmitResult(None, [], queued=mine + 1)


def _repeat(state: ThreadState, a: Admission) -> AdmitResult | None:
    """The grant an earlier try of this very admission (same nonce) made, while it still holds the lease."""
    known = state.runs.get(a.run_id)
    active = state.active
    if not a.nonce or known is None or known.nonce != a.nonce or active is None:
        return None
    if active.run_id != a.run_id or active.fence != known.fence:
        return None
    history = [e for e in map(_copy, state.history) if e is not None]
    return AdmitResult(_copy(state.execution), history, None, known.fence)


def admit(
    state: ThreadState | None, a: Admission, now: float, lease_seconds: float, live_owner: str | None, started: bool = True
) -> tuple[ThreadState | None, AdmitResult | Rejected]:
    """The new state to save (None: nothing changed) and the result, or the refusal the store raises after saving.
    `started`: whether the run `a.run_id` ever logged an event (for restarting one that never started)."""
    if state is None:
        state = ThreadState(thread_id=a.thread_id, updated_at=now)
    repeat = _repeat(state, a)
    if repeat is not None:
        return None, repeat
    expired, changed = expire_and_reap(state, now, live_owner)
    changed = drop_stale_places(state, now, live_owner) or changed
    refusal = _refusal(state, a, started, now)
    if refusal is None and a.waiting:
        turn = _turn(state, a, now)
        if isinstance(turn, AdmitResult):
            return state, turn  # its place, renewed
        if turn is not None:
            return (state if changed else None), turn  # its place is gone
        changed = True
    elif refusal is None and not a.is_resume and (state.active is not None or state.queue):
        queued = _queue(state, a, now)
        if isinstance(queued, AdmitResult):
            return state, queued
        refusal = queued
    elif refusal is None and state.active is not None:
        refusal = Rejected(Rejection.THREAD_BUSY)
    if refusal is None and not a.is_resume and _interrupted(state):
        refusal = Rejected(Rejection.RESUME_REQUIRED)
    if refusal is not None:
        if a.waiting:  # a queued run refused when its turn came gives its place up
            _without_place(state, a.run_id)
            changed = True
        return (state if changed else None), refusal
    current = state.execution
    if state.binding is None:
        state.binding = Binding(cwd=a.cwd, user_id=a.user_id, agent=a.agent)
    if not a.is_resume:
        if current is not None:
            _retire(state, current)
        current = state.execution = Execution(
            execution_id=a.new_execution_id,
            ros_invocation_id=a.ros_invocation_id,
            status="running",
            created_at=now,
            updated_at=now,
            agent=a.agent,
        )
    execution_id = current.execution_id if current is not None else ""
    state.fence += 1
    _record_run(state, a, execution_id, now)
    state.active = ActiveRun(
        run_id=a.run_id, execution_id=execution_id, owner=a.owner, started_at=now, lease_until=now + lease_seconds, fence=state.fence
    )
    state.updated_at = now
    history = [e for e in map(_copy, state.history) if e is not None]
    return state, AdmitResult(_copy(current), history, expired, state.fence)


def _holds_lease(state: ThreadState | None, lease: Lease) -> bool:
    return state is not None and state.active is not None and state.active.run_id == lease.run_id and state.active.fence == lease.fence


def _owned_execution(state: ThreadState | None, lease: Lease) -> tuple[ThreadState, Execution]:
    """The execution a run may write to: it must still hold the lease with its fence (stale owners are refused)."""
    if state is None or not _holds_lease(state, lease):
        raise Rejected(Rejection.LEASE_LOST, "runId")
    execution = state.execution
    if execution is None or execution.execution_id != lease.execution_id:
        raise Rejected(Rejection.LEASE_LOST, "executionId")
    return state, execution


def accept_resume(state: ThreadState | None, lease: Lease, applied: dict[str, str], now: float) -> ThreadState:
    state, execution = _owned_execution(state, lease)
    execution.answered_ids = _answered(execution)
    execution.pending = []
    execution.applied.update(applied)
    execution.checkpoint = None
    execution.open_steps = []
    execution.status = "running"
    execution.updated_at = now
    state.updated_at = now
    return state


def _apply_progress(execution: Execution, progress: Progress) -> None:
    execution.sequence = progress.sequence
    identities = progress.identities
    execution.context_id = identities.get("contextId", execution.context_id)
    execution.task_id = identities.get("taskId", execution.task_id)
    execution.session_id = identities.get("sessionId", execution.session_id)


def save_interrupt(
    state: ThreadState | None,
    lease: Lease,
    pending: list[PendingInterrupt],
    checkpoint: Any,
    open_steps: list[str],
    progress: Progress,
    now: float,
) -> ThreadState:
    state, execution = _owned_execution(state, lease)
    if execution.cancel_requested:
        raise Rejected(Rejection.CANCELLED)
    execution.status = "interrupted"
    execution.pending = pending
    execution.checkpoint = checkpoint
    execution.open_steps = open_steps
    execution.updated_at = now
    _apply_progress(execution, progress)
    state.active = None
    state.updated_at = now
    return state


def finish_run(
    state: ThreadState | None, lease: Lease, status: ExecutionStatus | None, progress: Progress, now: float
) -> ThreadState | None:
    if state is None or not _holds_lease(state, lease):
        return None  # the lease was already taken away (expired or reaped): nothing of ours to release
    state.active = None
    state.updated_at = now
    execution = state.execution
    if status is not None and execution is not None and execution.execution_id == lease.execution_id:
        _apply_progress(execution, progress)
        if execution.status not in TERMINAL:
            _end(state, execution, status, now)
    return state


def renew(state: ThreadState | None, lease: Lease, now: float, lease_seconds: float) -> tuple[ThreadState | None, RenewResult]:
    if state is None or state.active is None or not _holds_lease(state, lease):
        return None, RenewResult(False)
    state.active.lease_until = now + lease_seconds
    execution = state.execution
    cancel = execution is not None and execution.execution_id == state.active.execution_id and execution.cancel_requested
    return state, RenewResult(True, cancel)


def find_execution(state: ThreadState, execution_id: str) -> Execution | None:
    if state.execution is not None and state.execution.execution_id == execution_id:
        return state.execution
    return next((e for e in state.history if e.execution_id == execution_id), None)


def cancel(
    state: ThreadState | None, execution_id: str, ros_invocation_id: str, user_id: str | None, now: float, live_owner: str | None
) -> tuple[ThreadState | None, CancelResult]:
    if state is None or (state.binding is not None and state.binding.user_id != user_id):
        return None, CancelResult(CancelStatus.NOT_FOUND)
    _, changed = expire_and_reap(state, now, live_owner)
    execution = find_execution(state, execution_id)
    kept = state if changed else None
    if execution is None or execution.ros_invocation_id != ros_invocation_id:
        return kept, CancelResult(CancelStatus.NOT_FOUND)
    if execution.status == "lost":
        return kept, CancelResult(CancelStatus.LOST, execution=_copy(execution))
    if execution.status in TERMINAL:
        return kept, CancelResult(CancelStatus.ALREADY_TERMINAL, execution=_copy(execution))
    state.updated_at = now
    if execution.status == "interrupted":
        ended = _end(state, execution, "cancelled", now)
        return state, CancelResult(CancelStatus.CANCELLED, execution=ended)
    execution.cancel_requested = True
    owner = state.active.owner if state.active is not None else None
    return state, CancelResult(CancelStatus.CANCELLED, running_owner=owner, execution=_copy(execution))


def rolls_back(state: ThreadState | None, lease: Lease) -> bool:
    """The run holding `lease` was cancelled by a `rollback` run: its end writes the conversation as it was before."""
    execution = state.execution if state is not None and _holds_lease(state, lease) else None
    return execution is not None and execution.execution_id == lease.execution_id and execution.rollback


def _stop_running(state: ThreadState, now: float) -> StopResult:
    active, execution = state.active, state.execution
    assert active is not None
    if execution is None or execution.execution_id != active.execution_id or execution.status != "running":
        return StopResult(CancelStatus.NOT_RUNNING)
    execution.cancel_requested = True
    state.updated_at = now
    return StopResult(CancelStatus.CANCELLED, active.owner, active.execution_id)


def _newest_run_of(state: ThreadState, execution_id: str) -> str | None:
    runs = [(record.fence, run_id) for run_id, record in state.runs.items() if record.execution_id == execution_id]
    return max(runs)[1] if runs else None


def stop(
    state: ThreadState | None, run_id: str | None, user_id: str | None, now: float, live_owner: str | None
) -> tuple[ThreadState | None, StopResult]:
    if state is None or (state.binding is not None and state.binding.user_id != user_id):
        return None, StopResult(CancelStatus.NOT_FOUND)
    _, changed = expire_and_reap(state, now, live_owner)
    changed = drop_stale_places(state, now, live_owner) or changed
    kept = state if changed else None
    if run_id is not None and _without_place(state, run_id):  # its waiter finds its place gone
        return state, StopResult(CancelStatus.CANCELLED)
    active, execution = state.active, state.execution
    if active is not None and (run_id is None or active.run_id == run_id):
        result = _stop_running(state, now)
        return (state if result.status is CancelStatus.CANCELLED else kept), result
    if run_id is not None and run_id not in state.runs:
        return kept, StopResult(CancelStatus.NOT_RUNNING)
    waits = active is None and execution is not None and execution.status == "interrupted"
    if waits and execution is not None and (run_id is None or _newest_run_of(state, execution.execution_id) == run_id):
        state.updated_at = now
        return state, StopResult(CancelStatus.CANCELLED, None, execution.execution_id, _end(state, execution, "cancelled", now))
    return kept, StopResult(CancelStatus.ALREADY_TERMINAL if run_id is not None else CancelStatus.NOT_RUNNING)


def leave_queue(state: ThreadState | None, run_id: str) -> ThreadState | None:
    return state if state is not None and _without_place(state, run_id) else None
