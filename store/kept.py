"""Encoders for bytes that are kept (stored states), sized to what they hold.

msgspec's `encode` returns its working buffer as the bytes object, without shrinking it: up to half as much again as
the bytes it holds, which is right for bytes written out and dropped and wrong for bytes a store keeps for a
thread's retention. Encoding into a reused buffer and copying out costs one copy more.
"""

from __future__ import annotations

from typing import Any, Protocol


class _BufferEncoder(Protocol):
    def encode_into(self, obj: Any, buffer: bytearray, offset: int = 0, /) -> None: ...


class KeptEncoder:
    """`encode` through one reused buffer, whose copy is exactly the encoding's size. One per store: two threads (two
    servers in one process) sharing the buffer could each copy out the other's encoding."""

    __slots__ = ("_buffer", "_encoder")

    def __init__(self, encoder: _BufferEncoder) -> None:
        self._encoder = encoder
        self._buffer = bytearray()

    def encode(self, obj: Any) -> bytes:
        self._encoder.encode_into(obj, self._buffer)
        return bytes(self._buffer)
