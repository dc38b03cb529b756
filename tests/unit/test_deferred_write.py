"""The connection's deferred write (server/connection_limits.py): a response head held for the first records goes
out with them in one call, or alone at the end of the loop's turn; a close never loses it. The transport below
records the calls our wrapper makes of uvloop's (what reaches the socket is one system call per call)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from server.connection_limits import _LingeringTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, chunks: Any) -> None:
        self.calls.append(("writelines", b"".join(chunks)))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.calls.append(("close", b""))


class Answered:
    """A protocol whose request was read whole: closing needs no lingering."""

    guard = SimpleNamespace(head_bytes=0)

    def reading_request(self) -> bool:
        return False


def _wrapped() -> tuple[_LingeringTransport, RecordingTransport]:
    raw = RecordingTransport()
    return _LingeringTransport(raw, Answered()), raw  # type: ignore[arg-type]


async def test_a_deferred_head_goes_out_with_the_first_records_in_one_call():
    transport, raw = _wrapped()
    transport.defer_next_write()
    transport.write(b"HEAD")
    assert raw.calls == [], "held"
    transport.write(b"RECORDS")
    transport.write(b"MORE")
    await asyncio.sleep(0)  # the end-of-turn flush finds nothing left to write
    assert raw.calls == [("writelines", b"HEADRECORDS"), ("write", b"MORE")]


async def test_a_head_whose_records_are_not_ready_goes_out_alone_at_the_end_of_the_turn():
    transport, raw = _wrapped()
    transport.defer_next_write()
    transport.write(b"HEAD")
    await asyncio.sleep(0)
    assert raw.calls == [("write", b"HEAD")]
    transport.write(b"RECORDS")
    assert raw.calls[-1] == ("write", b"RECORDS")


async def test_a_head_held_until_the_next_write_waits_for_it_past_the_turn():
    transport, raw = _wrapped()
    transport.defer_next_write(until_next=True)
    transport.write(b"HEAD")
    for _ in range(3):
        await asyncio.sleep(0)
    assert raw.calls == [], "held past the turn"
    transport.write(b"RECORDS AND END")
    assert raw.calls == [("writelines", b"HEADRECORDS AND END")]


async def test_closing_writes_what_is_held_first_and_a_closed_socket_is_not_written():
    transport, raw = _wrapped()
    transport.defer_next_write()
    transport.write(b"HEAD")
    transport.close()
    assert raw.calls == [("write", b"HEAD"), ("close", b"")]
    transport.defer_next_write()
    transport.write(b"LATE")
    await asyncio.sleep(0)
    assert raw.calls[-1] == ("close", b""), "nothing is written to a closing transport"
