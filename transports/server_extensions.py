"""The ASGI scope extensions the gateway's own server (server/) offers its routes, by name and promise: ASGI's way
for a server to offer what the specification does not cover. A route checks for one in `scope["extensions"]` and
does without it where it is absent (another server, an embedder's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# On an HTTP request: the connection, as `HttpConnection` below.
HTTP_CONNECTION = "agui.http.connection"

# On a WebSocket: present (its value an empty dict), the app may send
# `{"type": "websocket.send", "agui.ws.text_batch": [<utf-8 bytes>, ...]}`, one text frame per item, in one call.
TEXT_BATCH = "agui.ws.text_batch"


class HttpConnection(Protocol):
    """What a streaming response may ask of its connection."""

    on_lost: Callable[[], None] | None
    """Called once when the connection is lost (the client gone, or reset by a limit); the route sets it while it
    streams and clears it when done. ASGI's own way, an `http.disconnect` from `receive`, needs a task that waits."""

    @property
    def lost(self) -> bool:
        """The connection is gone already."""
        ...

    def defer_next_write(self, until_next: bool = False) -> None:
        """Hold the next write until the one after it (one system call and one packet for both), or until the end
        of this turn of the loop at the latest; `until_next`: however late the next comes."""
        ...
