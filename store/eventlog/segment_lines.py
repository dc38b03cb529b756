"""How a segment holds a log's events: a write whose positions follow each other (every write the engine makes) is
one block, `B <log> <first position> <count>` and then each event's JSON on its own line; any other write is a
`V <log> <position> <event>` line per event, the layout of every event before blocks. Reading takes both."""

from __future__ import annotations

import re
from collections.abc import Iterator

from store.eventlog import Entry

AT = 43  # where a line's payload starts: kind, space, 40-character log digest, space
RECORD = re.compile(rb"\n[MEVB] [0-9a-f]{40} ")  # a record's start, after the newline before it


def event_lines(name: bytes, entries: list[Entry]) -> bytes:
    """A log's entries as segment bytes: one block (`B <log> <first> <count>`, then each event on its own line)
    when their positions follow each other, as a run's do; else a `V <log> <position> <event>` line each. A block
    is one join of the events as they are, where lines were a format apiece (a third of the time) and carried the
    log's name on every event (40% more bytes)."""
    if not entries:
        return b""
    positions, events = zip(*entries, strict=True)
    first = positions[0]
    if positions == tuple(range(first, first + len(positions))):
        return b"B %s %d %d\n%s\n" % (name, first, len(events), b"\n".join(events))
    line = b"V " + name + b" %d %s\n"  # the digest is hex, no % in it: each entry is the format's own tuple
    return b"".join([line % entry for entry in entries])


def block_head(head: bytes) -> tuple[int, int]:
    """A block header's first position and count (`head` without its newline)."""
    first, count = head[AT:].split(b" ")
    return int(first), int(count)


def events_of(data: bytes, after: int) -> Iterator[Entry]:
    """The entries of a chunk's bytes (lines and blocks), from the first position past `after` where a block can
    skip to it."""
    rows = data.split(b"\n")
    rows.pop()  # after the last newline
    index = 0
    while index < len(rows):
        row = rows[index]
        if row[:1] == b"B":
            first, count = block_head(row)
            skip = min(max(0, after + 1 - first), count)
            # A chunk holds whole blocks; were lines of one lost on disk, it yields the ones it has.
            yield from zip(range(first + skip, first + count), rows[index + 1 + skip : index + 1 + count], strict=False)
            index += 1 + count
        else:
            cut = row.index(b" ", AT)
            yield int(row[AT:cut]), row[cut + 1 :]
            index += 1
