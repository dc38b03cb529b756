"""The file store's thread states in one append-only journal: a write appends a checksummed record, the writes
of one batch share one write and one fdatasync, an index in memory finds each thread's newest record, and the live
records are copied into a fresh journal once the dead ones outweigh them. No file is created, renamed or removed per
write (on ext4 a new file's inode is found past the recently deleted ones, a search that grows with the churn).

Every method blocks: the store calls them on its lane, one at a time."""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass, field

import msgspec

from store.appendfile import lines, write_all
from store.base import StoreUnavailable

log = logging.getLogger("agui.store")

HEADER = b"AGUI-THREAD-JOURNAL 1\n"
STATE, DELETED, CORRUPT = b"S", b"D", b"X"  # a thread's state; its removal; a record of it found unreadable (and when)
COMPACT_MIN_BYTES = 4 << 20  # below this size a journal is never compacted


class _Head(msgspec.Struct):
    thread_id: str
    updated_at: float = 0.0


_head = msgspec.json.Decoder(_Head).decode
_name = msgspec.json.Decoder(str).decode
_encode = msgspec.json.Encoder().encode


def record(kind: bytes, payload: bytes) -> bytes:
    """One line: kind, the payload's CRC-32 in 8 hex digits, a space, the payload (JSON: never a raw newline)."""
    return b"%s%08x %s\n" % (kind, zlib.crc32(payload), payload)


def state_record(payload: bytes) -> bytes:
    return record(STATE, payload)


def deleted_record(thread_id: str) -> bytes:
    return record(DELETED, _encode(thread_id))


@dataclass(slots=True)
class Scan:
    """What a journal's bytes hold: each thread's newest state record (offset and length of its line, and when it
    was written), the threads whose newest record is unreadable (and since when: 0 for found by this scan), and
    where the last whole line ends."""

    slots: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    corrupt: dict[str, float] = field(default_factory=dict)
    end: int = len(HEADER)
    unattributed: list[int] = field(default_factory=list)  # offsets of unreadable records naming no thread


def scan(data: bytes) -> Scan:
    """Replay a journal's bytes (a line torn by a crash mid-write, at the end, is left out of `end`)."""
    if not data.startswith(HEADER):
        raise StoreUnavailable("the thread journal has no journal header")
    found = Scan()
    for offset, line in lines(data, len(HEADER)):
        kind, payload = line[:1], _intact(line)
        head = _head_of(kind, payload) if payload is not None else None
        if head is None:
            guess = _head_of(STATE, line[10:-1]) or _head_of(DELETED, line[10:-1])
            if guess is None:
                found.unattributed.append(offset)
            else:
                found.slots.pop(guess.thread_id, None)
                found.corrupt[guess.thread_id] = 0.0  # found now: nothing in the line is to be believed
        elif kind == STATE:
            found.slots[head.thread_id] = (offset, len(line), head.updated_at)
            found.corrupt.pop(head.thread_id, None)
        else:
            found.slots.pop(head.thread_id, None)
            if kind == CORRUPT:
                found.corrupt[head.thread_id] = head.updated_at
            else:
                found.corrupt.pop(head.thread_id, None)
        found.end = offset + len(line)
    return found


def _head_of(kind: bytes, payload: bytes) -> _Head | None:
    """The thread a record names (and, for a state, when it was written); None when it names none."""
    try:
        if kind == STATE:
            return _head(payload)
        if kind == DELETED:
            return _Head(_name(payload))
        if kind == CORRUPT:  # the thread and since when (a bare name before marks carried their time)
            return _head(payload) if payload.startswith(b"{") else _Head(_name(payload))
    except msgspec.MsgspecError:
        return None
    return None


def _intact(line: bytes) -> bytes | None:
    """A whole line's payload, or None when its checksum does not hold."""
    payload = line[10:-1]
    if line[9:10] != b" " or line[1:9] != b"%08x" % zlib.crc32(payload) or not line.endswith(b"\n"):
        return None
    return payload


def payload_of(line: bytes) -> bytes | None:
    """The payload of one state record, or None when its checksum does not hold."""
    return _intact(line) if line[:1] == STATE else None


class Journal:
    def __init__(self, path: str, opened_at: float) -> None:
        """`opened_at`: the store's clock now, the time a record found unreadable by this start is marked with (its
        thread is purged one retention period later, as a thread not written since)."""
        self.path = path
        self.broken: str | None = None  # why writes are refused until a restart (a failed write not undone)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)
            data = _read_all(fd)
            if not data:
                os.write(fd, HEADER)
                os.fsync(fd)
                _sync_directory(os.path.dirname(path))
                data = HEADER
            found = scan(data)
            if found.end < len(data):  # the torn tail of a write that was never acknowledged
                log.warning("thread journal: %d bytes of an unfinished write dropped from its end", len(data) - found.end)
                os.ftruncate(fd, found.end)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        for offset in found.unattributed:
            log.error("thread journal: an unreadable record at byte %d names no thread; it is skipped", offset)
        self.fd = fd
        self.size = found.end
        self.slots = found.slots
        self.corrupt = {thread_id: since or opened_at for thread_id, since in found.corrupt.items()}
        self.live = sum(length for _, length, _ in self.slots.values())

    def read(self, thread_id: str) -> bytes | None:
        """The thread's newest state (JSON), None for a thread never written (or removed)."""
        if thread_id in self.corrupt:
            raise StoreUnavailable("thread state record is corrupt")
        slot = self.slots.get(thread_id)
        if slot is None:
            return None
        try:
            line = os.pread(self.fd, slot[1], slot[0])
        except OSError as exc:
            raise StoreUnavailable(f"cannot read thread state: {exc.strerror}") from None
        payload = payload_of(line)
        if payload is None:
            raise StoreUnavailable("thread state record is corrupt")
        return payload

    def append(self, writes: list[tuple[str, bytes, float]]) -> None:
        """Make a batch durable: its lines in one write, then one fdatasync. `writes`: (thread, line, written at),
        in order (a later line of the same thread wins). On failure nothing of the batch stays in the journal."""
        if self.broken is not None:
            raise StoreUnavailable(f"thread journal unusable since a failed write: {self.broken}")
        data = b"".join(line for _, line, _ in writes)
        start = self.size
        try:
            write_all(self.fd, data, start)
            os.fdatasync(self.fd)
        except OSError as exc:
            self._undo(start, exc)
            raise StoreUnavailable(f"cannot write thread state: {exc.strerror}") from None
        self.size = start + len(data)
        offset = start
        for thread_id, line, written_at in writes:
            self._forget(thread_id)
            if line[:1] == STATE:
                self.slots[thread_id] = (offset, len(line), written_at)
                self.live += len(line)
            offset += len(line)

    def _forget(self, thread_id: str) -> None:
        old = self.slots.pop(thread_id, None)
        if old is not None:
            self.live -= old[1]
        self.corrupt.pop(thread_id, None)

    def _undo(self, start: int, failure: OSError) -> None:
        try:
            os.ftruncate(self.fd, start)
            os.fsync(self.fd)
        except OSError as exc:
            self.broken = f"{failure.strerror}, then {exc.strerror}"
            log.error("thread journal: a failed write could not be undone (%s); writes refused until a restart", self.broken)

    def expired(self, cutoff: float) -> list[str]:
        """Threads not written since `cutoff`, and threads found corrupt before it."""
        old = [thread_id for thread_id, (_, _, written_at) in self.slots.items() if written_at < cutoff]
        return old + [thread_id for thread_id, since in self.corrupt.items() if since < cutoff]

    def due(self) -> bool:
        return self.size >= COMPACT_MIN_BYTES and self.size >= 2 * max(self.live, 1)

    def compact(self) -> None:
        """Copy the live records (and the marks of corrupt threads) into a fresh journal, made durable before it
        replaces this one; on failure the old journal stays in use."""
        tmp = f"{self.path}.compact"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            slots, offset, parts = {}, len(HEADER), [HEADER]
            for thread_id, (old, length, written_at) in self.slots.items():
                parts.append(os.pread(self.fd, length, old))
                slots[thread_id] = (offset, length, written_at)
                offset += length
            parts.extend(record(CORRUPT, _encode(_Head(thread_id, since))) for thread_id, since in self.corrupt.items())
            data = b"".join(parts)
            write_all(fd, data, 0)
            os.fsync(fd)
            os.replace(tmp, self.path)
            _sync_directory(os.path.dirname(self.path))
        except OSError as exc:
            os.close(fd)
            _remove(tmp)
            log.warning("thread journal: compaction failed (%s); the journal stays as it is", exc.strerror)
            return
        old_fd, self.fd = self.fd, fd
        os.close(old_fd)
        self.slots, self.size = slots, len(data)
        self.live = sum(length for _, length, _ in slots.values())

    def close(self) -> None:
        os.close(self.fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _sync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
