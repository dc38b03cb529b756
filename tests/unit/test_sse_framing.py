"""SSE records for a batch of events: the same bytes whichever way they are made (a join of kept `id:` heads for
positions that follow each other, a format per record otherwise), and what a client's SSE parser reads back."""

from __future__ import annotations

import json

import pytest

from transports import sse_framing
from transports.sse_framing import ID_HEADS_KEPT, sse_records


def formatted(entries: list[tuple[int, bytes]], positions: bool) -> bytes:
    """The records as the SSE format spells them, one at a time."""
    if not positions or (entries and not entries[0][0]):
        return b"".join(b"data: %s\n\n" % data for _, data in entries)
    return b"".join(b"id: %d\ndata: %s\n\n" % (position, data) for position, data in entries)


def batch(first: int, count: int) -> list[tuple[int, bytes]]:
    return [(position, b'{"type":"TEXT_MESSAGE_CONTENT","delta":"%d \\"q\\""}' % position) for position in range(first, first + count)]


@pytest.mark.parametrize(
    "entries",
    [
        batch(1, 1),
        batch(1, 64),
        batch(950, 200),
        batch(ID_HEADS_KEPT - 10, 20),  # across the end of the kept heads
        batch(ID_HEADS_KEPT + 5, 3),  # past it
        [(3, b"{}"), (5, b"{}"), (4, b"{}")],  # positions that do not follow each other
        [(3, b"{}"), (3, b"{}"), (5, b"{}")],  # a repeated one, the count of a run of three
        [(0, b'{"type":"RUN_ERROR","message":"lost"}')],  # no position: no id
        [],
    ],
)
def test_records_are_the_same_bytes_however_they_are_made(entries):
    for positions in (True, False):
        assert sse_records(entries, positions) == formatted(entries, positions)


def test_the_kept_heads_grow_with_the_positions_streams_reach_and_no_further(monkeypatch):
    monkeypatch.setattr(sse_framing, "_id_heads", [])
    sse_records(batch(1, 10), True)
    assert 11 <= len(sse_framing._id_heads) < 64
    sse_records(batch(300, 10), True)
    assert 310 <= len(sse_framing._id_heads) < 700
    sse_records(batch(ID_HEADS_KEPT * 3, 10), True)
    assert len(sse_framing._id_heads) <= ID_HEADS_KEPT
    assert sse_framing._id_heads[299] == b"id: 299\ndata: "


def test_agentcore_records_carry_its_run_error_codes():
    entries = [
        (1, b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}'),
        (2, b'{"type":"RUN_ERROR","message":"x","code":"RUN_CANCELLED"}'),
    ]
    records = sse_records(entries, True, agentcore=True).split(b"\n\n")[:-1]
    assert records[0] == b"id: 1\ndata: " + entries[0][1]
    error = json.loads(records[1].split(b"data: ", 1)[1])
    assert records[1].startswith(b"id: 2\n") and error["type"] == "RUN_ERROR"
    assert error["metadata"]["gatewayCode"] == "RUN_CANCELLED"
