"""The segment files behind the file store's event logs: the active segment takes every write, an index in memory
says where each log's lines are, and a sealed segment is removed once no log needs it (copied forward first when
mostly dead). Every method blocks: the event log calls them on its lane, one at a time."""

from __future__ import annotations

import collections
import itertools
import logging
import os
from collections.abc import Callable, Iterator

import msgspec

from store.appendfile import lines, write_all
from store.eventlog import TOMBSTONE_SECONDS, Entry
from store.eventlog.segment_lines import AT, RECORD, block_head, event_lines, events_of

log = logging.getLogger("agui.store")

SEGMENT_BYTES = 32 << 20  # the active segment is sealed, and a new one begun, past this size
COPY_FORWARD_BELOW = 0.25  # a sealed segment whose lines still needed fall under this share is copied forward
ABANDONED_SECONDS = 86400.0  # a log never ended (its process died) is removed after this long without writes


class Meta(msgspec.Struct):
    ros_digest: str
    request_digest: str
    owner: str
    execution_id: str = ""
    inputs: str = ""
    first: int = 1
    ended_at: float | None = None
    head: int = 0


_encode = msgspec.json.Encoder().encode
Write = tuple[str, "Meta | None", list[Entry], int, "int | None"]  # a log's digest, and what `Segments.write` takes
decode_meta = msgspec.json.Decoder(Meta).decode


class Log:
    """One run's log in the index: its meta, where its event lines are, where its newest meta line is."""

    __slots__ = ("chunks", "home", "meta", "touched")

    def __init__(self, meta: Meta, home: int, touched: float) -> None:
        self.meta = meta
        self.chunks: list[list[int]] = []  # [segment, offset, length, first position, last position], write order
        self.home = home
        self.touched = touched


class Segments:
    def __init__(self, directory: str, retention_seconds: float, clock: Callable[[], float]) -> None:
        self.directory = directory
        self.retention = retention_seconds
        self.clock = clock
        self.logs: dict[str, Log] = {}
        self.sizes: dict[int, int] = {}  # segment -> its bytes
        self._readers: dict[int, int] = {}  # segment -> a descriptor open for reading
        numbers = sorted(int(name[4:-4]) for name in os.listdir(directory) if is_segment(name))
        for number in numbers:
            self._replay(number)
        for entry in self.logs.values():
            entry.chunks = [chunk for chunk in entry.chunks if chunk[4] >= entry.meta.first]
        self.active = numbers[-1] + 1 if numbers else 1
        self.fd = self._begin(self.active)

    def _path(self, number: int) -> str:
        return os.path.join(self.directory, f"seg-{number:010d}.log")

    def _begin(self, number: int) -> int:
        fd = os.open(self._path(number), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.sizes[number] = 0
        return fd

    def write(self, digest: str, create: Meta | None, entries: list[Entry], first_kept: int, end: int | None) -> None:
        """Open (`create`: a log made again starts empty), append and end one log with one write."""
        self.write_many([(digest, create, entries, first_kept, end)])

    def write_many(self, writes: list[Write]) -> None:
        """Several `write`s in one system call (the ends of the runs that one batch of the lane finished). A log
        written twice starts another call, so that its second write is made from what the first left."""
        group: list[Write] = []
        digests: set[str] = set()
        for write in writes:
            if write[0] in digests:
                self._write_group(group)
                group, digests = [], set()
            group.append(write)
            digests.add(write[0])
        self._write_group(group)

    def _write_group(self, writes: list[Write]) -> None:
        """Writes of distinct logs: their lines made, then written at once; the index learns of them only then."""
        now = self.clock()
        at = self.sizes[self.active]
        parts: list[bytes] = []
        made: list[tuple[str, Log, bool, list[int] | None, int, Meta | None]] = []
        for digest, create, entries, first_kept, end in writes:
            entry = Log(create, self.active, now) if create is not None else self.logs.get(digest)
            if entry is None:
                continue  # never opened here, or removed since: nothing to add to
            name = digest.encode()
            if create is not None:
                parts.append(_meta_line(b"M", name, entry.meta))
                at += len(parts[-1])
            lines = event_lines(name, entries)
            parts.append(lines)
            chunk = [self.active, at, len(lines), entries[0][0], entries[-1][0]] if entries else None
            at += len(lines)
            ended = None
            if end is not None:
                # An ended run's input messages are in its thread's conversation: its end line carries none.
                ended = msgspec.structs.replace(entry.meta, ended_at=now, head=end, first=max(entry.meta.first, first_kept), inputs="")
                parts.append(_meta_line(b"E", name, ended))
                at += len(parts[-1])
            made.append((digest, entry, create is not None, chunk, first_kept, ended))
        if not made:
            return
        self._append(b"".join(parts))
        for digest, entry, created, chunk, first_kept, ended in made:
            if created:
                self.logs[digest] = entry
            if chunk is not None:
                entry.chunks.append(chunk)
            if first_kept > entry.meta.first:
                entry.meta.first = first_kept
                entry.chunks = [held for held in entry.chunks if held[4] >= first_kept]
            if ended is not None:
                entry.meta, entry.home = ended, self.active
            entry.touched = now
        if self.sizes[self.active] >= SEGMENT_BYTES:
            self._rotate()

    def _append(self, data: bytes) -> None:
        """Append to the active segment; on failure cut what got written, so no line is left torn."""
        start = self.sizes[self.active]
        try:
            write_all(self.fd, data, start)
        except OSError:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise
        self.sizes[self.active] = start + len(data)

    def entries(self, entry: Log, after: int, limit: int) -> tuple[list[Entry], int | None]:
        """Up to `limit` entries after `after` (each position once: a retried write may repeat some), and the
        oldest position held (None: none)."""
        floor = entry.meta.first
        held = [chunk for chunk in entry.chunks if chunk[4] >= floor]
        first = min((max(chunk[3], floor) for chunk in held), default=None)
        found: list[Entry] = []
        for segment, offset, length, _, high in held:
            if len(found) >= limit:
                break
            if high <= after:
                continue
            for position, event in events_of(os.pread(self._reader(segment), length, offset), max(after, floor - 1)):
                if position > after and position >= floor:
                    found.append((position, event))
                    after = position
                    if len(found) >= limit:
                        break
        return found, first

    def _reader(self, segment: int) -> int:
        fd = self._readers.get(segment)
        if fd is None:
            fd = self._readers[segment] = os.open(self._path(segment), os.O_RDONLY)
        return fd

    def purge(self) -> int:
        """Remove logs past their tombstone (or abandoned), drop expired events, remove the segments no log
        needs; returns how many logs were removed."""
        now = self.clock()
        removed = 0
        for digest, entry in list(self.logs.items()):
            ended = entry.meta.ended_at
            if (ended is not None and ended + TOMBSTONE_SECONDS <= now) or (ended is None and entry.touched + ABANDONED_SECONDS <= now):
                del self.logs[digest]
                removed += 1
        self._expire(now)
        self._retire()
        return removed

    def _expire(self, now: float) -> None:
        for entry in self.logs.values():
            if entry.chunks and entry.meta.ended_at is not None and entry.meta.ended_at + self.retention <= now:
                entry.chunks = []  # the events expired: the tombstone (its meta line) stays

    def _rotate(self) -> None:
        os.close(self.fd)
        self.active += 1
        self.fd = self._begin(self.active)
        self._expire(self.clock())
        self._retire()

    def _retire(self) -> None:
        needed: dict[int, int] = {}
        for entry in self.logs.values():
            needed[entry.home] = needed.get(entry.home, 0) + 1
            for segment, _, length, _, _ in entry.chunks:
                needed[segment] = needed.get(segment, 0) + length
        for segment in sorted(self.sizes):
            if segment == self.active:
                continue
            need = needed.get(segment, 0)
            if need and need >= COPY_FORWARD_BELOW * self.sizes[segment]:
                continue
            if need:
                self._copy_forward(segment)
            self._remove(segment)

    def _copy_forward(self, segment: int) -> None:
        """Rewrite every log with a line in `segment` into the active segment: its meta, then its events."""
        for digest, entry in self.logs.items():
            if entry.home != segment and all(chunk[0] != segment for chunk in entry.chunks):
                continue
            name = digest.encode()
            head = _meta_line(b"M", name, entry.meta)
            lines = b"".join(os.pread(self._reader(chunk[0]), chunk[2], chunk[1]) for chunk in entry.chunks)
            at = self.sizes[self.active] + len(head)
            self._append(head + lines)
            entry.home = self.active
            if entry.chunks:
                low, high = entry.chunks[0][3], max(chunk[4] for chunk in entry.chunks)
                entry.chunks = [[self.active, at, len(lines), low, high]]

    def _remove(self, segment: int) -> None:
        fd = self._readers.pop(segment, None)
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(self._path(segment))
        except FileNotFoundError:
            pass
        del self.sizes[segment]

    def _replay(self, number: int) -> None:
        """Rebuild the index from one segment's lines (a line or a block torn by a crash, at its end, is left out)."""
        path = self._path(number)
        with open(path, "rb") as handle:
            data = handle.read()
        self.sizes[number] = len(data)
        touched = os.stat(path).st_mtime
        back: collections.deque[tuple[int, bytes]] = collections.deque()  # lines to read again, before the rest
        rows = _again_first(back, lines(data))
        for offset, line in rows:
            kind, digest = line[:1], line[2:42].decode("ascii", "replace")
            try:
                if kind == b"M":
                    self.logs[digest] = Log(decode_meta(line[AT:-1]), number, touched)
                elif kind == b"E" and digest in self.logs:
                    entry = self.logs[digest]
                    entry.meta, entry.home, entry.touched = decode_meta(line[AT:-1]), number, touched
                elif kind == b"V" and digest in self.logs:
                    position = int(line[AT : line.index(b" ", AT)])
                    _extend(self.logs[digest], number, offset, len(line), position, position)
                elif kind == b"B":
                    first, count = block_head(line[:-1])
                    body = list(itertools.islice(rows, count))
                    end = body[-1][0] + len(body[-1][1]) if body else offset + len(line)
                    if RECORD.search(data, offset + len(line) - 1, end - 1):  # its count took in other records
                        back.extend(body)
                        raise ValueError("a block's count does not match its lines")
                    if len(body) < count:
                        log.warning("event log segment %s: a block cut short by a crash at byte %d is skipped", path, offset)
                        break
                    if digest in self.logs and count:
                        _extend(self.logs[digest], number, offset, end - offset, first, first + count - 1)
            except (msgspec.MsgspecError, ValueError):
                log.warning("event log segment %s: an unreadable line at byte %d is skipped", path, offset)

    def close(self) -> None:
        os.close(self.fd)
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()


def is_segment(name: str) -> bool:
    return name.startswith("seg-") and name.endswith(".log") and name[4:-4].isdigit()


def _meta_line(kind: bytes, name: bytes, meta: Meta) -> bytes:
    return b"%s %s %s\n" % (kind, name, _encode(meta))


def _extend(entry: Log, segment: int, offset: int, length: int, low: int, high: int) -> None:
    """Add replayed event bytes (a line, or a block) to their log: to the last chunk when they follow it in the
    same segment."""
    last = entry.chunks[-1] if entry.chunks else None
    if last is not None and last[0] == segment and last[1] + last[2] == offset:
        last[2] += length
        last[4] = max(last[4], high)
    else:
        entry.chunks.append([segment, offset, length, low, high])


def _again_first(back: collections.deque[tuple[int, bytes]], rows: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    """`rows`, with the rows put in `back` meanwhile read first."""
    while True:
        if back:
            yield back.popleft()
            continue
        row = next(rows, None)
        if row is None:
            return
        yield row
