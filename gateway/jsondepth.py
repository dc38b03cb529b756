"""A guard on JSON nesting, checked on the raw bytes before any decoder recurses into them.

Nesting deeper than MAX_JSON_DEPTH is refused as ordinary invalid input everywhere JSON comes in (HTTP bodies,
WebSocket frames, A2A frames): recursive decoders and validators would otherwise hit the interpreter's
recursion limit and fail as a 500, a hang or a 1011. Strings are skipped first (a C-speed regex), so brackets
inside text never count; a body with few brackets takes the fast path and is not scanned at all.
"""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 64
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(raw: bytes | bytearray | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` deep (malformed text is left to the decoder)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for byte in _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS):
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False
