"""The store seam: the atomic operations on one thread's state that every backend provides.

Clock policy: a store owns its time. Memory and file stores read an injectable clock; Redis reads the
server's `TIME` inside each script, so replicas never compare their own clocks.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Collection
from typing import Any, Literal

import msgspec

from store.eventlog import EventLog, LogFenced, LogWrite
from store.records import Execution, ExecutionStatus, PendingInterrupt

Clock = Callable[[], float]


class Rejection(enum.Enum):
    """Why an admission or a state rule refused an operation (the engine maps each to a contract code)."""

    THREAD_BINDING_CONFLICT = "THREAD_BINDING_CONFLICT"
    DUPLICATE_RUN_ID = "DUPLICATE_RUN_ID"
    RUN_ID_CONFLICT = "RUN_ID_CONFLICT"
    THREAD_BUSY = "THREAD_BUSY"
    RESUME_REQUIRED = "RESUME_REQUIRED"
    DEQUEUED = "DEQUEUED"  # a queued run's place is gone (stopped, or not renewed in time): it never runs
    LEASE_LOST = "LEASE_LOST"  # the run no longer holds the thread's lease with its fence
    CANCELLED = "CANCELLED"  # a cancel intent was recorded before the interrupt could be saved


class Rejected(Exception):
    """A state rule refused the operation; nothing was written."""

    def __init__(self, reason: Rejection, field: str | None = None) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.field = field


class StoreUnavailable(Exception):
    """The state could not be read or written (I/O failure, corrupt file, unreachable server). `retryable`: the
    operation may or may not have been applied (a lost connection or reply), so trying again is meaningful."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ThreadHistory(msgspec.Struct, frozen=True):
    """What a thread keeps beside its state (each None when never written): its conversation and summary (written
    with a run's end) and the meta a client set (title, metadata, archived)."""

    conversation: bytes | None = None
    summary: bytes | None = None
    meta: bytes | None = None


class Admission(msgspec.Struct, frozen=True):
    thread_id: str
    run_id: str
    digest: str
    cwd: str
    user_id: str | None
    ros_invocation_id: str
    is_resume: bool
    new_execution_id: str
    owner: str
    nonce: str = ""  # this admission attempt: a retry of the same attempt gets the grant it already made
    restart_unstarted: bool = False  # a run admitted but never started (no lease, no events) may be admitted again
    # The run keeps its thread's conversation: a store that can answers its history with the grant (`AdmitResult.kept`),
    # having put the thread in this scope's list and told the list's watchers (as `ThreadStore.open_history`).
    history_scope: str | None = None
    # What a busy thread does with this run (THREADS.md §4): reject it, or queue it (`enqueue`; `interrupt` and
    # `rollback` also cancel the active run and go first), at most `max_queued` runs waiting per thread.
    multitask: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"
    max_queued: int = 0
    waiting: bool = False  # a queued run asking for its turn again (its place is renewed while it waits)
    # The agent that runs it, empty for the default agent: a thread belongs to the agent of its first run.
    agent: str = ""


class Lease(msgspec.Struct, frozen=True):
    """What a run holds after admission; every later write presents it and is refused once it is stale."""

    thread_id: str
    run_id: str
    execution_id: str
    fence: int


class Progress(msgspec.Struct, frozen=True):
    """How far an execution got: its last custom-event sequence and the backend identities it learned."""

    sequence: int
    identities: dict[str, str]


class AdmitResult(msgspec.Struct):
    execution: Execution | None  # the execution this run works on (a copy)
    history: list[Execution]  # recent finished executions (copies), for resume diagnostics
    expired: Execution | None = None  # an execution whose interrupts expired during this admission
    fence: int = 0
    kept: ThreadHistory | None = None  # the thread's history, where the store read it with the grant
    queued: int = 0  # not admitted but queued: the run's place in the thread's queue (1: next)
    stop_owner: str | None = None  # queued to cancel the active run: the replica that runs it, to wake
    stop_execution: str = ""  # and its execution


class CancelStatus(enum.Enum):
    """What a cancel (by execution) or a stop (by thread) found; the values are the wire's words."""

    CANCELLED = "cancelled"
    ALREADY_TERMINAL = "already_terminal"
    NOT_RUNNING = "not_running"  # a stop: nothing runs on the thread
    NOT_FOUND = "not_found"
    LOST = "lost"  # a cancel: the execution's run was lost (its replica died before it ended)


class StopResult(msgspec.Struct):
    """A stop by thread (THREADS.md §5); `not_found`: no such thread for this caller. `running_owner` and
    `execution_id`: the replica to wake and the run's execution; `execution`: an interrupted one that ended now."""

    status: CancelStatus  # not LOST
    running_owner: str | None = None
    execution_id: str = ""
    execution: Execution | None = None


class RenewResult(msgspec.Struct):
    ok: bool  # False: the run lost its lease (expired, or fenced off by a newer run)
    cancel_requested: bool = False


class Adopted(msgspec.Struct, frozen=True):
    """A run this replica adopted: its new lease, the record its first owner left, and its execution (a copy)."""

    lease: Lease
    record: dict[str, Any]
    execution: Execution | None


class CancelResult(msgspec.Struct):
    status: CancelStatus  # not NOT_RUNNING
    running_owner: str | None = None
    execution: Execution | None = None


class HistoryWrite(msgspec.Struct, frozen=True):
    """A thread's conversation and summary (JSON, opaque to the store), written in the same atomic step as a run's
    end or interrupt: both land or neither does. `scope`: whose thread list the thread is in."""

    conversation: bytes
    summary: bytes
    scope: str
    # A cancelled run's alternative: the conversation and summary as if it had never run, which the store writes
    # instead when the run was cancelled by a `rollback` run (the store decides, in the same atomic step).
    rollback: tuple[bytes, bytes] | None = None

    def chosen(self, rolled_back: bool) -> tuple[bytes, bytes]:
        return self.rollback if rolled_back and self.rollback is not None else (self.conversation, self.summary)


RESTART_WINDOW_SECONDS = 3600.0  # how long after its admission a never-started run may be admitted again


class LatestRun(msgspec.Struct, frozen=True):
    """A thread's newest run (the one in flight, else the last admitted) and the userId the thread is bound to."""

    run_id: str
    user_id: str | None


def latest_run_of(document: dict[str, Any] | None) -> LatestRun | None:
    """The newest run a thread document names, or None when it names none."""
    if not document:
        return None
    active, runs = document.get("active"), document.get("runs") or {}
    if isinstance(active, dict) and isinstance(active.get("run_id"), str):
        run_id = active["run_id"]
    elif runs:
        run_id = max(runs, key=lambda name: (runs[name].get("fence", 0), runs[name].get("at", 0)))
    else:
        return None
    binding = document.get("binding")
    return LatestRun(run_id, binding.get("user_id") if isinstance(binding, dict) else None)


def thread_agent(document: dict[str, Any] | None) -> str:
    """The agent a thread document is bound to: empty for the default agent (or for no binding yet)."""
    binding = (document or {}).get("binding")
    agent = binding.get("agent") if isinstance(binding, dict) else None
    return agent if isinstance(agent, str) else ""


class ThreadStore(abc.ABC):
    """Every method is atomic for its thread: memory and file serialise per thread, Redis runs one Lua script."""

    owner_id: str = ""
    needs_renewal = False  # True where leases expire unless their owner renews them
    # True where calls never wait (in memory): the engine runs the admission in the request's own step rather than
    # in a task of its own. A store that waits gains nothing by it, and would pay for it in CPU per run.
    answers_at_once = False
    lease_seconds = 10 * 365 * 86400.0  # single-process stores detect dead owners by owner id, not by time
    events: EventLog  # each store keeps its runs' event logs beside their thread state

    async def read_document(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's document as the store keeps it (None: no such thread)."""
        raise NotImplementedError

    async def latest_run(self, thread_id: str) -> LatestRun | None:
        """The thread's newest run, for a client that joins the thread (`GET /threads/{id}/events`)."""
        return latest_run_of(await self.read_document(thread_id))

    @abc.abstractmethod
    async def now(self) -> float:
        """The store's clock (Unix seconds): interrupt expiry is computed and checked with it."""

    @abc.abstractmethod
    async def admit(self, admission: Admission) -> AdmitResult:
        """Binding, run-id idempotency, expiry, busy and resume-required checks, then take the run lease."""

    @abc.abstractmethod
    async def accept_resume(self, lease: Lease, applied: dict[str, str]) -> None:
        """The backend accepted the answers: drop the pending interrupts, remember the answers' digests."""

    @abc.abstractmethod
    async def save_interrupt(
        self,
        lease: Lease,
        pending: list[PendingInterrupt],
        *,
        checkpoint: Any,
        open_steps: list[str],
        progress: Progress,
        history: HistoryWrite | None = None,
    ) -> None:
        """Persist the pending interrupts (and the `history`, in the same step) and release the run lease (before
        RUN_FINISHED is written)."""

    @abc.abstractmethod
    async def finish_run(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, history: HistoryWrite | None = None
    ) -> None:
        """Release the lease; with a status, the execution ends with it (None leaves the execution as it is). The
        `history` is written in the same atomic step, and only when the run still held its lease; then the thread's
        list has it as newest and its watchers are told (`thread_changed`)."""

    async def finish_run_and_log(
        self, lease: Lease, status: ExecutionStatus | None, progress: Progress, log: LogWrite, history: HistoryWrite | None = None
    ) -> Exception | None:
        """`finish_run`, then the run's last event-log write (Redis: both in one round trip). The finish's refusal
        or failure is raised; the log write's (LogFenced, StoreUnavailable) is returned, None when it was written."""
        await self.finish_run(lease, status, progress, history)
        try:
            await self.events.apply(log)
        except (LogFenced, StoreUnavailable) as exc:
            return exc
        return None

    # -- conversations and the thread list ---------------------------------------------------------------------
    async def read_history(self, thread_id: str, *, conversation: bool = True) -> ThreadHistory:
        """The thread's conversation (unless `conversation` is False), summary and meta."""
        return ThreadHistory()

    async def open_history(self, thread_id: str, scope: str, at: float) -> ThreadHistory:
        """A run's start: the thread's history; a new thread (no summary yet) is put in `scope`'s list, as written at
        `at`, and the list's watchers are told."""
        found = await self.read_history(thread_id)
        if found.summary is None:
            await self.index_thread(scope, thread_id, at)
            await self.thread_changed(scope, thread_id)
        return found

    async def write_meta(self, thread_id: str, meta: bytes) -> bool:
        """Set the meta a client gives a thread; False when there is no such thread (nothing is written)."""
        return False

    async def index_thread(self, scope: str, thread_id: str, at: float) -> None:
        """Put the thread in `scope`'s list, as written at `at` (Unix seconds)."""
        return

    async def list_threads(self, scope: str, before: tuple[float, str] | None, limit: int) -> list[tuple[str, float]]:
        """Up to `limit` (thread, written at) of `scope`'s list, newest first, strictly after the cursor `before`."""
        return []

    async def delete_thread(self, thread_id: str, scope: str, run_ids: list[str]) -> None:
        """Erase the thread: its state, conversation, summary, meta, the event logs of `run_ids`, its list entry."""
        return

    # -- changes of the thread lists, for whoever watches one (the live list over /ws) ---------------------------
    _list_watchers: dict[str, set[Callable[[str, bool], None]]] | None = None

    async def thread_changed(self, scope: str, thread_id: str, deleted: bool = False) -> None:
        """Tell the watchers of `scope`'s list, on every replica, that a thread of it changed (or was erased)."""
        self.list_changed(scope, thread_id, deleted)

    def list_changed(self, scope: str, thread_id: str, deleted: bool) -> None:
        """Tell this process's watchers of `scope`'s list."""
        for on_change in list((self._list_watchers or {}).get(scope, ())):
            on_change(thread_id, deleted)

    async def threads_watched(self) -> None:
        """Return once changes made anywhere reach this process's watchers (at once for single-process stores)."""
        return

    def watch_threads(self, scope: str, on_change: Callable[[str, bool], None]) -> Callable[[], None]:
        """Call `on_change(thread, deleted)` for each change of `scope`'s list, until the returned function is called."""
        if self._list_watchers is None:
            self._list_watchers = {}
        self._list_watchers.setdefault(scope, set()).add(on_change)

        def unwatch() -> None:
            watchers = (self._list_watchers or {}).get(scope)
            if watchers is not None:
                watchers.discard(on_change)
                if not watchers:
                    del self._list_watchers[scope]  # type: ignore[union-attr]

        return unwatch

    @abc.abstractmethod
    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, user_id: str | None = None) -> CancelResult:
        """Cancel an execution: interrupted ones end now; running ones get a durable cancel intent. A caller whose
        `user_id` is not the thread's bound one is answered `not_found`, like an unknown execution."""

    @abc.abstractmethod
    async def stop(self, thread_id: str, run_id: str | None, user_id: str | None) -> StopResult:
        """Stop the thread's active run (with `run_id`, only that run: a queued one leaves the queue, an ended one is
        `already_terminal`); a thread waiting on interrupts (no `run_id`, or the run that interrupted) ends them.
        A caller whose `user_id` is not the thread's bound one is answered `not_found`."""

    @abc.abstractmethod
    async def leave_queue(self, thread_id: str, run_id: str) -> None:
        """A queued run's client left: the run gives up its place."""

    @abc.abstractmethod
    async def renew(self, lease: Lease) -> RenewResult:
        """Extend the run's lease; also reports a recorded cancel intent."""

    @abc.abstractmethod
    async def put_ticket(self, digest: str, ttl_seconds: float, value: str) -> None:
        """Remember a single-use WebSocket ticket by its digest (never the ticket itself), with what it stands for."""

    @abc.abstractmethod
    async def take_ticket(self, digest: str) -> str | None:
        """Consume a ticket: its value once if it exists and has not expired, None ever after."""

    @abc.abstractmethod
    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        """Rate limit: take one token from the caller's bucket; 0 when allowed, else seconds to wait."""

    # -- adoption of live runs by another replica (stores shared by replicas; the others say no) ------------
    supports_adoption = False

    async def mark_adoptable(self, lease: Lease, record: dict[str, Any], *, handoff: bool = False) -> bool:
        """Leave (or update) how another replica can pick this live run up; with `handoff`, also give the lease
        up now so that one does at once. False: the run no longer holds its lease (or cannot be adopted)."""
        return False

    async def adoption_candidates(self, limit: int) -> list[tuple[str, str]]:
        """(thread key, run id) of adoptable runs whose lease ran out, oldest first."""
        return []

    async def adopt(self, thread_id: str, run_id: str, agents: Collection[str] | None = None) -> Adopted | None:
        """Take over a run whose lease ran out, with the next fence; None when it is held, ended or gone, or when it
        is a run of an agent not among `agents` (None: any agent)."""
        return None

    async def notify_cancel(self, owner: str, thread_id: str, execution_id: str) -> None:
        """Wake the replica that runs an execution so it cancels now (no-op for single-process stores)."""
        return

    async def listen_for_cancels(self, on_cancel: Callable[[str, str], None]) -> None:
        """Start delivering cancel wake-ups addressed to this replica to `on_cancel(thread_id, execution_id)`."""
        return

    async def purge_expired(self) -> int:
        """Remove state older than the retention period; returns how many threads were removed."""
        return 0

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
