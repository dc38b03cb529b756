"""The store seam: the atomic operations on one thread's state that every backend provides."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from store.records import Execution, PendingInterrupt


class Rejected(Exception):
    """An admission or state rule refused the operation; `code` is a contract error code name."""

    def __init__(self, code: str, field: str | None = None, detail: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.field = field
        self.detail = detail


class StoreUnavailable(Exception):
    """The state could not be read or written (I/O failure, corrupt file, unreachable server)."""


@dataclass(slots=True)
class Admission:
    thread_id: str
    run_id: str
    digest: str
    cwd: str
    user_id: str | None
    ros_invocation_id: str
    is_resume: bool
    new_execution_id: str
    owner: str
    now: float
    lease_seconds: float


@dataclass(slots=True)
class AdmitResult:
    execution: Execution | None  # the execution this run works on (a copy)
    history: list[Execution]  # recent finished executions (copies), for resume diagnostics
    expired: Execution | None = None  # an execution whose interrupts expired during this admission
    lost: Execution | None = None  # an execution whose owner died, found during this admission
    fence: int = 0


@dataclass(slots=True)
class RenewResult:
    ok: bool  # False: the run lost its lease (expired, or fenced off by a newer run)
    cancel_requested: bool = False


@dataclass(slots=True)
class CancelResult:
    status: Literal["cancelled", "already_terminal", "not_found", "lost"]
    running_owner: str | None = None
    execution: Execution | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ThreadStore(abc.ABC):
    """Every method is atomic for its thread: memory and file serialise per thread, Redis runs one Lua script."""

    owner_id: str = ""
    needs_renewal = False  # True where leases expire unless their owner renews them (Redis)
    lease_seconds = 10 * 365 * 86400.0  # single-process stores detect dead owners by owner id, not by time

    @abc.abstractmethod
    async def admit(self, admission: Admission) -> AdmitResult:
        """Binding, run-id idempotency, expiry, busy and resume-required checks, then take the run lease."""

    @abc.abstractmethod
    async def accept_resume(
        self, thread_id: str, run_id: str, execution_id: str, applied: dict[str, str], now: float, *, fence: int
    ) -> None:
        """The backend accepted the answers: drop the pending interrupts, remember the answers' digests."""

    @abc.abstractmethod
    async def save_interrupt(
        self,
        thread_id: str,
        run_id: str,
        execution_id: str,
        pending: list[PendingInterrupt],
        *,
        checkpoint: Any,
        open_steps: list[str],
        sequence: int,
        identities: dict[str, str],
        now: float,
        fence: int,
    ) -> None:
        """Persist the pending interrupts and release the run lease (before RUN_FINISHED is written)."""

    @abc.abstractmethod
    async def finish_run(
        self,
        thread_id: str,
        run_id: str,
        execution_id: str,
        status: str | None,
        *,
        sequence: int,
        identities: dict[str, str],
        now: float,
        fence: int,
    ) -> None:
        """Release the lease; with a status, the execution ends with it (None leaves the execution as it is)."""

    @abc.abstractmethod
    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str, now: float) -> CancelResult:
        """Cancel an execution: interrupted ones end now; running ones get a durable cancel intent."""

    @abc.abstractmethod
    async def is_cancel_requested(self, thread_id: str, execution_id: str) -> bool:
        """Whether a cancel intent is recorded for the execution."""

    @abc.abstractmethod
    async def put_ticket(self, digest: str, expires_at: float) -> None:
        """Remember a single-use WebSocket ticket (by its digest, never the ticket itself)."""

    @abc.abstractmethod
    async def take_ticket(self, digest: str, now: float) -> bool:
        """Consume a ticket: True once if it exists and has not expired, False ever after."""

    async def renew(self, thread_id: str, run_id: str, fence: int) -> RenewResult:
        """Extend the run's lease; also reports a recorded cancel intent."""
        return RenewResult(True)

    async def notify_cancel(self, owner: str, thread_id: str, execution_id: str) -> None:
        """Wake the replica that runs an execution so it cancels now (no-op for single-process stores)."""
        return None

    async def listen_for_cancels(self, on_cancel: Callable[[str, str], None]) -> None:
        """Start delivering cancel wake-ups addressed to this replica to `on_cancel(thread_id, execution_id)`."""
        return None

    @abc.abstractmethod
    async def take_token(self, caller: str, rate: float, burst: float) -> float:
        """Rate limit: take one token from the caller's bucket; 0 when allowed, else seconds to wait."""

    async def purge_expired(self, now: float) -> int:
        """Remove state older than the retention period; returns how many threads were removed."""
        return 0

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
