"""SSE records: a batch of a run's events as the bytes of one write, with `id:` lines where the events have
positions a client can reattach from."""

from __future__ import annotations

import msgspec

from gateway.engine.stream import Entry
from gateway.protocol import events as e
from transports.render import agentcore_run_error

RUN_ERROR_HEAD = b'{"type":"RUN_ERROR"'  # how an encoded RUN_ERROR begins
# `id: N\ndata: ` for positions 0 to len - 1, made as streams reach them (at most about 200 KB): a batch of events
# whose positions follow each other is then one join of byte strings that exist already, where a format apiece
# cost four times as much (bench/NOTES.md). Longer streams format the records past it.
ID_HEADS_KEPT = 4096
_id_heads: list[bytes] = []


def agentcore_event(data: bytes) -> bytes:
    """AgentCore's RUN_ERROR codes (the gateway's code kept in metadata); other events unchanged."""
    if not data.startswith(RUN_ERROR_HEAD):
        return data
    return e.encode_json(agentcore_run_error(msgspec.json.decode(data, type=e.RunError)))


def sse_records(entries: list[Entry], positions: bool, agentcore: bool = False) -> bytes:
    """SSE records, with `id:` lines when the events have positions a client can reattach from."""
    if not entries:
        return b""
    if agentcore:
        entries = [(position, agentcore_event(data)) for position, data in entries]
    numbers, events = zip(*entries, strict=True)
    # An event without a position (0) comes alone: a follower's EXECUTION_LOST.
    if not positions or not numbers[0]:
        return b"data: " + b"\n\ndata: ".join(events) + b"\n\n"
    first, count = numbers[0], len(numbers)
    heads = _heads_through(first + count - 1)
    if heads is not None and numbers == tuple(range(first, first + count)):
        records = [b"\n\n"] * (3 * count)
        records[0::3] = heads[first : first + count]
        records[1::3] = events
        return b"".join(records)
    # The entry is the format's own tuple: no unpacking and packing again per event.
    return b"".join([b"id: %d\ndata: %s\n\n" % entry for entry in entries])


def named_records(entries: list[Entry], run_id: str) -> bytes:
    """A join's SSE records: ids `<runId>:<position>` (`<runId>:end` for position -1), none for position 0."""
    name = run_id.encode()
    records = []
    for position, data in entries:
        if position == 0:
            records.append(b"data: %s\n\n" % data)
        elif position < 0:
            records.append(b"id: %s:end\ndata: %s\n\n" % (name, data))
        else:
            records.append(b"id: %s:%d\ndata: %s\n\n" % (name, position, data))
    return b"".join(records)


def _heads_through(last: int) -> list[bytes] | None:
    """The kept `id:` heads, made through position `last`; None past what is kept."""
    if last >= ID_HEADS_KEPT:
        return None
    made = len(_id_heads)
    if last >= made:  # doubling: a stream's positions grow one batch at a time
        _id_heads.extend(b"id: %d\ndata: " % position for position in range(made, min(ID_HEADS_KEPT, max(last + 1, 2 * made))))
    return _id_heads
