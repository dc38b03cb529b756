"""What the file store's append-only files (the thread journal, the event-log segments) share: reading whole lines
back, and writing a batch whole."""

from __future__ import annotations

import os
from collections.abc import Iterator


def lines(data: bytes, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """Each whole line from `offset` on, with where it starts; a last line with no newline (torn by a crash) is left out."""
    while (newline := data.find(b"\n", offset)) >= 0:
        yield offset, data[offset : newline + 1]
        offset = newline + 1


def write_all(fd: int, data: bytes, offset: int) -> None:
    """All of `data` at `offset`, however many writes it takes."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
