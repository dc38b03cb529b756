"""Event logs as files under the state directory: one append-only file per run, so a run's events survive a restart
of the process (not a power loss: no fsync). The file holds a meta line (`M <json>`), then `<position> <json>`
lines, then, once the run ended, an end line (`E <json>`: the meta with the end); no second file, no rename per run.
Every file operation goes through one lane (store/lane.py): many runs' writes share one worker-thread hop."""

from __future__ import annotations

import os
import time

import msgspec

from store.base import Clock, StoreUnavailable
from store.eventlog import TOMBSTONE_SECONDS, Entry, EventLog, LogMeta, LogRead, LogRef, LogWrite, ref_digest
from store.lane import IoLane

ABANDONED_SECONDS = 86400.0  # a log never ended (its process died) is removed after this long without writes


class _Meta(msgspec.Struct):
    ros_digest: str
    request_digest: str
    owner: str
    execution_id: str = ""
    first: int = 1
    ended_at: float | None = None
    head: int = 0


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Meta).decode
_HEAD, _END = b"M ", b"E "  # the meta line a log opens with, and the one its end appends


class FileEventLog(EventLog):
    def __init__(self, directory: str, retention_seconds: float, *, clock: Clock = time.time) -> None:
        self.directory = directory
        self.retention_seconds = retention_seconds
        self.clock = clock
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._kept: dict[LogRef, int] = {}  # live runs: the first position their bounds keep (recorded at the end)
        self._meta: dict[LogRef, _Meta] = {}
        self._lane = IoLane()  # every file operation of the logs, batched into one worker-thread hop

    def _path(self, ref: LogRef) -> str:
        return os.path.join(self.directory, ref_digest(ref) + ".log")

    async def _io(self, work: object, *args: object) -> object:
        try:
            return await self._lane.call(work, *args)  # type: ignore[arg-type]
        except OSError as exc:
            raise StoreUnavailable(f"event log: {exc.strerror}") from None

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        await self.apply(LogWrite(ref, [], 1, create=meta))

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        compact_to = self._compact_to(ref, entries, first_kept)
        self._kept[ref] = first_kept
        await self._io(_append, self._path(ref), _event_lines(entries), compact_to, self._meta.get(ref))

    async def end(self, ref: LogRef, head: int) -> None:
        await self.apply(LogWrite(ref, [], head + 1, end=head))

    def _compact_to(self, ref: LogRef, entries: list[Entry], first_kept: int) -> int:
        """The position to compact the file to once its trimmed part outgrows what it keeps; 0: not yet."""
        meta = self._meta.get(ref)  # its `first` is the first position still in the file
        head = entries[-1][0] if entries else first_kept
        return first_kept if meta is not None and first_kept - meta.first > max(1024, head - first_kept) else 0

    async def apply(self, write: LogWrite) -> None:
        """Open, append and end as one file operation (a short run's whole log: one open, one write), unless the
        file is due for compaction (a long run), which goes the step-by-step way."""
        ref, entries, create, end = write.ref, write.entries, write.create, write.end
        if create is None and entries and self._compact_to(ref, entries, write.first_kept):
            await super().apply(write)
            return
        parts = []
        if create is not None:
            meta = self._meta[ref] = _Meta(create.ros_digest, create.request_digest, create.owner, create.execution_id)
            parts.append(_meta_line(_HEAD, meta))
        if entries:
            self._kept[ref] = write.first_kept
            parts.append(_event_lines(entries))
        if end is not None:
            ended, kept = self._meta.pop(ref, None), self._kept.pop(ref, 1)
            if ended is not None:
                ended.ended_at, ended.head, ended.first = self.clock(), end, max(ended.first, kept)
                parts.append(_meta_line(_END, ended))
        if parts:
            await self._io(_put, self._path(ref), "wb" if create is not None else "ab", b"".join(parts))

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        result = await self._io(self._read, ref, after, limit)
        return result if isinstance(result, LogRead) else None

    def _read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        try:
            meta, lines = _parse(self._path(ref))
        except FileNotFoundError:
            return None
        if meta is None:
            return None
        info = LogMeta(meta.ros_digest, meta.request_digest, meta.owner, meta.execution_id)
        if meta.ended_at is not None and meta.ended_at + self.retention_seconds <= self.clock():
            return LogRead(info, [], meta.head + 1, True)  # a tombstone: the events expired
        entries: list[Entry] = []
        first = None
        for line in lines:
            head, _, data = line.rstrip(b"\n").partition(b" ")
            position = int(head)
            if position < meta.first:  # trimmed
                continue
            first = position if first is None else first
            if position > after and len(entries) < limit:  # each position once (a retried write may repeat some)
                entries.append((position, data))
                after = position
        return LogRead(info, entries, first if first is not None else after + 1, meta.ended_at is not None)

    async def purge_expired(self) -> int:
        result = await self._io(self._purge, self.clock())
        return result if isinstance(result, int) else 0

    def _purge(self, now: float) -> int:
        removed = 0
        for entry in os.scandir(self.directory):
            if not entry.name.endswith(".log"):
                continue
            try:
                meta, lines = _parse(entry.path)
                if meta is None:
                    continue
                ended = meta.ended_at
                if (ended is not None and ended + TOMBSTONE_SECONDS <= now) or (
                    ended is None and entry.stat().st_mtime + ABANDONED_SECONDS <= now
                ):
                    _unlink(entry.path)
                    removed += 1
                elif ended is not None and ended + self.retention_seconds <= now and lines:
                    _rewrite(entry.path, meta, [], _END)  # the events expired: the tombstone stays
            except (OSError, StoreUnavailable):
                continue
        return removed


def _meta_line(kind: bytes, meta: _Meta) -> bytes:
    return b"".join([kind, _encode(meta), b"\n"])


def _event_lines(entries: list[Entry]) -> bytes:
    return b"".join(b"%d %s\n" % (position, data) for position, data in entries)


def _rewrite(path: str, meta: _Meta, lines: list[bytes], kind: bytes = _HEAD) -> None:
    """The whole file anew (compaction, expiry): its meta line, then the lines kept."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(b"".join([_meta_line(kind, meta), *lines]))
    os.replace(tmp, path)


def _append(path: str, lines: bytes, compact_to: int, meta: _Meta | None) -> None:
    with open(path, "ab") as handle:
        handle.write(lines)
    if compact_to and meta is not None:
        _, held = _parse(path)
        meta.first = compact_to
        _rewrite(path, meta, [line for line in held if int(line.split(b" ", 1)[0]) >= compact_to])


def _put(path: str, mode: str, data: bytes) -> None:
    """One open and one write ("wb": a log made again for the same run starts empty; "ab": appended)."""
    with open(path, mode) as handle:
        handle.write(data)


def _parse(path: str) -> tuple[_Meta | None, list[bytes]]:
    """The log's meta (its last meta line: the header, or the end record) and its event lines; a line torn by a
    crash mid-write (no newline) is ignored."""
    meta = None
    events = []
    for line in _lines(path):
        if not line.endswith(b"\n"):
            continue
        if line.startswith((_HEAD, _END)):
            try:
                meta = _decode(line[2:-1])
            except msgspec.MsgspecError:
                raise StoreUnavailable("event log meta is corrupt") from None
        else:
            events.append(line)
    return meta, events


def _lines(path: str) -> list[bytes]:
    with open(path, "rb") as handle:
        return handle.readlines()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
