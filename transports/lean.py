"""What a long-lived connection keeps, at its least: stand-ins for asyncio.Queue and asyncio.Event (asyncio's
allocate their deques at creation, for the two queues and two events an idle WebSocket needs; these allocate
nothing until they are used), and `forget_request`, which drops what only a connection's start reads."""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from litestar.utils.scope.state import CONNECTION_STATE_KEY

T = TypeVar("T")


# Scope entries read only until a response starts or a socket is accepted (the server and the access log go on
# reading the type, method, path and headers list): each a dict, list or bytes made per request.
_START_ONLY = ("asgi", "state", "raw_path", "extensions", "subprotocols")


class _Forgetting:
    on = True  # the tuning annex's (server/annex.py); off, a stream keeps its request's scope whole


def forgets_requests(on: bool) -> None:
    _Forgetting.on = on


def forget_request(scope: Any) -> None:
    """Once a stream's response has started (or a socket is accepted), the server still keeps the request's scope
    for the connection's whole life. Drop what only the start read: the request's headers (cleared in place: the
    server's protocol holds the same list), Litestar's connection state, and the scope's per-request entries above.
    (Part of the tuning annex: it relies on Litestar's name for its connection state.)"""
    if not _Forgetting.on:
        return
    headers = scope.get("headers")
    if isinstance(headers, list):
        headers.clear()
    state = scope.get("state")
    if isinstance(state, dict):
        state.pop(CONNECTION_STATE_KEY, None)
    for key in _START_ONLY:
        scope.pop(key, None)


class Inbox(Generic[T]):
    """An unbounded first-in-first-out queue with one consumer (what asyncio.Queue is used for here)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def get(self) -> T:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items


class LeanEvent:
    """asyncio.Event without its eager deque: set, clear, is_set, wait."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        if self._set:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)
        return True
