"""The state rules as pure functions on a ThreadState, shared by the memory and file stores (Redis mirrors them in Lua)."""

from __future__ import annotations

from typing import Any

import msgspec

from store.base import Admission, AdmitResult, CancelResult, Rejected
from store.records import TERMINAL, ActiveRun, Binding, Execution, PendingInterrupt, RunRecord, ThreadState

MAX_RUN_RECORDS = 256  # run ids remembered per thread for idempotency (oldest forgotten first)
MAX_HISTORY = 16  # finished executions remembered per thread (for already_terminal, repeated answers)


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


def _end(state: ThreadState, execution: Execution, status: str, now: float) -> Execution:
    ended = _copy(execution)
    if status == "expired" or status == "cancelled":
        execution.answered_ids = [p.id for p in execution.pending] + execution.answered_ids
    execution.status = status  # type: ignore[assignment]
    execution.updated_at = now
    _retire(state, execution)
    return ended  # type: ignore[return-value]


def expire_and_reap(state: ThreadState, now: float, live_owner: str | None) -> tuple[Execution | None, Execution | None]:
    """Expire overdue interrupts and free a lease whose owner is gone; return (expired, lost) executions."""
    expired = lost = None
    current = state.execution
    if current is not None and current.status == "interrupted":
        if any(p.expires_at is not None and p.expires_at <= now for p in current.pending):
            expired = _end(state, current, "expired", now)
    active = state.active
    if active is not None and (active.lease_until <= now or (live_owner is not None and active.owner != live_owner)):
        state.active = None
        current = state.execution
        if current is not None and current.execution_id == active.execution_id and current.status == "running":
            lost = _end(state, current, "lost", now)
    return expired, lost


def admit(state: ThreadState | None, a: Admission, live_owner: str | None) -> tuple[ThreadState, AdmitResult]:
    if state is None:
        state = ThreadState(thread_id=a.thread_id, updated_at=a.now)
    expired, lost = expire_and_reap(state, a.now, live_owner)
    if state.binding is not None:
        if state.binding.cwd != a.cwd:
            raise Rejected("THREAD_BINDING_CONFLICT", "forwardedProps.iacCode.cwd")
        if state.binding.user_id != a.user_id:
            raise Rejected("THREAD_BINDING_CONFLICT", "forwardedProps.iacCode.userId")
    known = state.runs.get(a.run_id)
    if known is not None:
        raise Rejected("DUPLICATE_RUN_ID" if known.digest == a.digest else "RUN_ID_CONFLICT", "runId")
    if state.active is not None:
        raise Rejected("THREAD_BUSY")
    current = state.execution
    if not a.is_resume and current is not None and current.status == "interrupted":
        raise Rejected("RESUME_REQUIRED")
    if state.binding is None:
        state.binding = Binding(cwd=a.cwd, user_id=a.user_id)
    if not a.is_resume:
        if current is not None:
            _retire(state, current)
        current = state.execution = Execution(
            execution_id=a.new_execution_id,
            ros_invocation_id=a.ros_invocation_id,
            status="running",
            created_at=a.now,
            updated_at=a.now,
        )
    execution_id = current.execution_id if current is not None else ""
    state.runs[a.run_id] = RunRecord(digest=a.digest, execution_id=execution_id, at=a.now)
    if len(state.runs) > MAX_RUN_RECORDS:
        for old in list(state.runs)[: len(state.runs) - MAX_RUN_RECORDS]:
            del state.runs[old]
    state.fence += 1
    state.active = ActiveRun(
        run_id=a.run_id,
        execution_id=execution_id,
        owner=a.owner,
        started_at=a.now,
        lease_until=a.now + a.lease_seconds,
        fence=state.fence,
    )
    state.updated_at = a.now
    history = [_copy(e) for e in state.history]
    return state, AdmitResult(_copy(current), history, expired, lost, state.fence)  # type: ignore[arg-type]


def _holds_lease(state: ThreadState | None, run_id: str, fence: int) -> bool:
    return state is not None and state.active is not None and state.active.run_id == run_id and state.active.fence == fence


def _owned_execution(state: ThreadState | None, run_id: str, execution_id: str, fence: int) -> Execution:
    """The execution a run may write to: it must still hold the lease with its fence (stale owners are refused)."""
    if not _holds_lease(state, run_id, fence):
        raise Rejected("EXECUTION_LOST", "runId", "The run no longer holds the thread's lease.")
    execution = state.execution
    if execution is None or execution.execution_id != execution_id:
        raise Rejected("EXECUTION_LOST", "executionId")
    return execution


def accept_resume(
    state: ThreadState | None, run_id: str, execution_id: str, fence: int, applied: dict[str, str], now: float
) -> ThreadState:
    execution = _owned_execution(state, run_id, execution_id, fence)
    execution.answered_ids = [p.id for p in execution.pending] + execution.answered_ids[:64]
    execution.pending = []
    execution.applied.update(applied)
    execution.checkpoint = None
    execution.open_steps = []
    execution.status = "running"
    execution.updated_at = now
    state.updated_at = now  # type: ignore[union-attr]
    return state  # type: ignore[return-value]


def _apply_identities(execution: Execution, identities: dict[str, str]) -> None:
    execution.context_id = identities.get("contextId", execution.context_id)
    execution.task_id = identities.get("taskId", execution.task_id)
    execution.session_id = identities.get("sessionId", execution.session_id)


def save_interrupt(
    state: ThreadState | None,
    run_id: str,
    execution_id: str,
    fence: int,
    pending: list[PendingInterrupt],
    checkpoint: Any,
    open_steps: list[str],
    sequence: int,
    identities: dict[str, str],
    now: float,
) -> ThreadState:
    execution = _owned_execution(state, run_id, execution_id, fence)
    if execution.cancel_requested:
        raise Rejected("CANCELLED")
    execution.status = "interrupted"
    execution.pending = pending
    execution.checkpoint = checkpoint
    execution.open_steps = open_steps
    execution.sequence = sequence
    execution.updated_at = now
    _apply_identities(execution, identities)
    state.active = None  # type: ignore[union-attr]
    state.updated_at = now  # type: ignore[union-attr]
    return state  # type: ignore[return-value]


def finish_run(
    state: ThreadState | None,
    run_id: str,
    execution_id: str,
    fence: int,
    status: str | None,
    sequence: int,
    identities: dict[str, str],
    now: float,
) -> ThreadState | None:
    if not _holds_lease(state, run_id, fence):
        return None  # the lease was already taken away (expired or reaped): nothing of ours to release
    state.active = None
    state.updated_at = now
    execution = state.execution
    if status is not None and execution is not None and execution.execution_id == execution_id:
        execution.sequence = sequence
        _apply_identities(execution, identities)
        if execution.status not in TERMINAL:
            _end(state, execution, status, now)
    return state


def find_execution(state: ThreadState, execution_id: str) -> Execution | None:
    if state.execution is not None and state.execution.execution_id == execution_id:
        return state.execution
    return next((e for e in state.history if e.execution_id == execution_id), None)


def cancel(
    state: ThreadState | None, execution_id: str, ros_invocation_id: str, now: float, live_owner: str | None
) -> tuple[ThreadState | None, CancelResult]:
    if state is None:
        return state, CancelResult("not_found")
    expire_and_reap(state, now, live_owner)
    execution = find_execution(state, execution_id)
    if execution is None or execution.ros_invocation_id != ros_invocation_id:
        return state, CancelResult("not_found")
    if execution.status == "lost":
        return state, CancelResult("lost", execution=_copy(execution))
    if execution.status in TERMINAL:
        return state, CancelResult("already_terminal", execution=_copy(execution))
    state.updated_at = now
    if execution.status == "interrupted":
        ended = _end(state, execution, "cancelled", now)
        return state, CancelResult("cancelled", execution=ended)
    execution.cancel_requested = True
    owner = state.active.owner if state.active is not None else None
    return state, CancelResult("cancelled", running_owner=owner, execution=_copy(execution))
