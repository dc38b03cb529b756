"""The per-run event log seam: every event of a run with its position, kept for reattach and replay.

Positions count from 1 within a run; only the run's lease holder appends. A log holds at most its bounds
(events, bytes): older entries are trimmed and `first` says the oldest position still held."""

from __future__ import annotations

import abc
import hashlib

import msgspec

Entry = tuple[int, bytes]  # (position, the event's JSON)
TOMBSTONE_SECONDS = 86_400.0
READ_LIMIT = 1000  # entries a follower, an attach or an adopter asks of one read


class LogRef(msgspec.Struct, frozen=True):
    """One run's log: the store's thread key (it carries the caller's scope) and the run id."""

    thread_key: str
    run_id: str


class LogMeta(msgspec.Struct, frozen=True):
    """What an attacher must match: the run's rosInvocationId and request (as digests), and who wrote it."""

    ros_digest: str
    request_digest: str
    owner: str
    execution_id: str = ""  # so that an attacher on another replica can cancel the run
    inputs: str = ""  # the run's new input messages (JSON): a client joining mid-run on another replica is shown them


class LogRead(msgspec.Struct):
    meta: LogMeta
    entries: list[Entry]
    first: int  # the oldest position the log still holds (head + 1 when it holds none)
    ended: bool  # the run's terminal event is in the log
    head: int | None = None  # the terminal event's position, once the run ended (the last position ever given out)


def ros_digest(ros_invocation_id: str, user_id: str | None = None) -> str:
    """What an attacher must match: the run's rosInvocationId and, when the run was bound to one, its userId (so
    that a holder of the shared static token, or anyone in plain mode, cannot follow another user's run)."""
    text = ros_invocation_id if user_id is None else f"{len(ros_invocation_id)}:{ros_invocation_id}\0{user_id}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def ref_digest(ref: LogRef) -> str:
    """A bounded, path- and key-safe name for a run's log."""
    return hashlib.sha256(f"{ref.thread_key}\0{ref.run_id}".encode("utf-8", "surrogatepass")).hexdigest()[:40]


class LogFenced(Exception):
    """A newer owner (an adopter, with a higher fence) writes this log now: this writer must stop."""


class LogWrite(msgspec.Struct, frozen=True):
    """One `EventLog.write`, described, so that a store can send it in the same round trip as another write."""

    ref: LogRef
    entries: list[Entry]
    first_kept: int
    create: LogMeta | None = None
    end: int | None = None
    fence: int = 0


class EventLog(abc.ABC):
    """`live_writes`: entries are written while the run goes (file, Redis); otherwise once, when it ends (memory,
    whose live run is read from the engine's own ring). `shared`: other replicas follow it live (Redis)."""

    live_writes = True
    shared = False

    @abc.abstractmethod
    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        """Open a run's log (before its first append)."""

    @abc.abstractmethod
    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        """Add entries (in position order) and drop every entry before `first_kept`. A position written again (a
        write retried after its reply was lost) is kept once."""

    @abc.abstractmethod
    async def end(self, ref: LogRef, head: int) -> None:
        """The terminal event (position `head`) is written: the entries are kept for the retention period from now,
        and a tombstone (the meta and `head`) for TOMBSTONE_SECONDS, so that a late attacher learns that the events
        expired rather than that the run never existed."""

    @abc.abstractmethod
    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        """Up to `limit` entries after position `after`; None when there is no such log."""

    async def write(
        self,
        ref: LogRef,
        entries: list[Entry],
        first_kept: int,
        *,
        create: LogMeta | None = None,
        end: int | None = None,
        fence: int = 0,
    ) -> None:
        """Open (`create`), append and end (`end`: the head) in one step where the log can (Redis: one call).
        `fence`: the writer's lease fence; a shared log refuses (LogFenced) a writer older than one it has seen,
        so a paused former owner writes nothing after another replica adopted its run."""
        await self.apply(LogWrite(ref, entries, first_kept, create, end, fence))

    async def apply(self, write: LogWrite) -> None:
        """One write, step by step; a log that can do it at once overrides this (file: one file operation)."""
        if write.create is not None:
            await self.create(write.ref, write.create)
        if write.entries:
            await self.append(write.ref, write.entries, write.first_kept)
        if write.end is not None:
            await self.end(write.ref, write.end)

    async def expire(self, ref: LogRef, head: int) -> None:
        """Drop an ended log's events now, before its retention runs out (the replica's byte budget for retained
        logs is spent); its tombstone stays, so a late attacher learns that the events expired."""
        await self.apply(LogWrite(ref, [], head + 1, end=head))

    async def delete(self, ref: LogRef) -> None:
        """Forget a run's log (its thread was erased). Where a log cannot forget at once (file segments), its events
        are dropped now and a tombstone of digests (no event) stays for TOMBSTONE_SECONDS."""
        read = await self.read(ref, 0, 0)
        if read is not None and read.head is not None:
            await self.expire(ref, read.head)

    async def wait(self, ref: LogRef, after: int, timeout: float) -> None:
        """Return when an entry after `after` may exist, or after `timeout` (shared logs block on the server)."""
        return

    async def watch(self, ref: LogRef, seconds: float) -> None:
        """A follower on another replica says it is attached, for `seconds`."""
        return

    async def watched(self, ref: LogRef) -> bool:
        """Whether a follower on another replica said so recently."""
        return False

    async def owner_alive(self, ref: LogRef) -> bool:
        """Whether the run still holds its thread's lease somewhere (single-process logs: the engine knows)."""
        return False

    async def purge_expired(self) -> int:
        return 0

    async def close(self) -> None:
        return None
