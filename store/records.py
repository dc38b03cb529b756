"""The records kept per thread: binding, run digests, active run, executions, pending interrupts. Never secrets or text."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct, field

ExecutionStatus = Literal["running", "interrupted", "completed", "failed", "cancelled", "expired", "lost"]
TERMINAL = frozenset({"completed", "failed", "cancelled", "expired", "lost"})


class Binding(Struct):
    cwd: str
    user_id: str | None = None
    agent: str = ""  # the agent of the thread's first run (empty: the default agent)


class RunRecord(Struct):
    digest: str
    execution_id: str
    at: float
    fence: int = 0  # the thread's fence when this run was admitted: the oldest (lowest) is trimmed first
    nonce: str = ""  # the admission attempt that recorded it (a retried attempt is recognised)


class ActiveRun(Struct):
    """The lease of the one run allowed per thread; `fence` grows with every admission."""

    run_id: str
    execution_id: str
    owner: str
    started_at: float
    lease_until: float
    fence: int


class PendingInterrupt(Struct):
    id: str
    reason: str
    wire: dict[str, Any]  # the interrupt exactly as sent in RUN_FINISHED
    response_schema: dict[str, Any] | None = None
    tool_call_id: str | None = None
    expires_at: float | None = None  # Unix seconds; None never expires


class Execution(Struct):
    """One agent task across runs: a turn, then resumes after interrupts."""

    execution_id: str
    ros_invocation_id: str
    status: ExecutionStatus
    created_at: float
    updated_at: float
    pending: list[PendingInterrupt] = field(default_factory=list)
    applied: dict[str, str] = field(default_factory=dict)  # interruptId -> digest of the accepted answer
    answered_ids: list[str] = field(default_factory=list)  # interrupts that expired or were cancelled
    checkpoint: Any = None  # the backend's opaque resume data (no secrets, no message text)
    open_steps: list[str] = field(default_factory=list)
    sequence: int = 0  # last custom-event sequence number, so resumes never repeat one
    cancel_requested: bool = False
    rollback: bool = False  # the cancel came from a `rollback` run: what the cancelled run added to the conversation goes
    context_id: str | None = None
    task_id: str | None = None
    session_id: str | None = None
    agent: str = ""  # the agent whose task this is (empty: the default agent)


class QueuedRun(Struct):
    """A run waiting its turn on a busy thread (`enqueue`, `interrupt`, `rollback`): held by the replica `owner`
    while it renews `until`; `front`: it came to cancel the active run, and goes before the runs that only wait."""

    run_id: str
    owner: str
    until: float
    front: bool = False


class ThreadState(Struct):
    thread_id: str
    updated_at: float
    binding: Binding | None = None
    runs: dict[str, RunRecord] = field(default_factory=dict)
    active: ActiveRun | None = None
    execution: Execution | None = None
    history: list[Execution] = field(default_factory=list)  # recent finished executions, newest last
    fence: int = 0
    queue: list[QueuedRun] = field(default_factory=list)  # first come, first served
