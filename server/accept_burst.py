"""Accept a burst of new connections in one turn of the loop, where uvloop takes one a turn.

uvloop accepts one connection from the kernel's queue each time the listening socket is reported ready, that is
once a turn of the loop. Under load a turn lasts milliseconds (every request that is ready runs its step in it),
so the thirtieth connection of a burst waited thirty turns before it was even accepted: half
a second of silence before its first event, while the connections already open were served at once. asyncio's own
loop accepts up to the backlog in one turn, so it needs none of this.

`BurstAcceptor` watches a second descriptor of the same listening socket, which the loop reports ready at each
turn while connections wait. It asks the kernel how many do (TCP_INFO: a listening socket's accept queue); when
more than one still does after a turn longer than SLOW_TURN, it accepts them all, handing each to the loop with the
server's own protocol factory (`connect_accepted_socket`). A connection that waits alone, and a burst that short
turns drain, are left to uvloop: the second path costs only where uvloop falls behind.

A burst never takes the descriptors the process keeps in reserve: it takes only as many connections as `room`
says are free before them (gateway/fds.py), and the rest wait for uvloop. Without that, a burst larger than the
free descriptors would run the process out of them before the first of its connections was refused, and libuv, out
of descriptors, accepts and closes what waits in the queue unanswered.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import struct
from collections.abc import Callable

log = logging.getLogger("agui.serve")

# struct tcp_info (linux/tcp.h): eight one-byte fields, then rto, ato, snd_mss, rcv_mss and `unacked`, which for a
# listening socket is the number of connections in its accept queue.
_QUEUED = struct.Struct("=24xI")
_TCP_INFO = getattr(socket, "TCP_INFO", None)
# A turn this long with connections still waiting: at one accept a turn, the last of a burst of N waits N such turns.
# Shorter turns are left to uvloop: this path costs, per connection, a task while it is made and some memory for
# the connection's life (the context `connect_accepted_socket` copies, the socket object the transport keeps), where
# uvloop's costs neither.
SLOW_TURN = 0.002
RETRY_SECONDS = 1.0  # after an accept failed for want of descriptors: the loop must not spin on a ready socket


def queued(listener: socket.socket) -> int:
    """Connections waiting in the listening socket's accept queue (0 where the kernel does not say)."""
    if _TCP_INFO is None:
        return 0
    try:
        info = listener.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _QUEUED.size)
    except OSError:
        return 0
    return _QUEUED.unpack_from(info)[0] if len(info) >= _QUEUED.size else 0


class BurstAcceptor:
    """Accepts every connection waiting in `listener`'s queue when uvloop falls behind (long turns, a burst)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        listener: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        room: Callable[[int], int | None],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._loop = loop
        self._clock = clock or loop.time  # what measures a turn (the loop's own; tests step one by hand)
        self._room = room
        self._listener = listener
        self._factory = protocol_factory
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_turn: float | None = None  # the loop's time at the last call that found a burst waiting
        listener.setblocking(False)
        loop.add_reader(listener.fileno(), self._ready)

    @classmethod
    def beside(
        cls,
        loop: asyncio.AbstractEventLoop,
        server_socket: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        room: Callable[[int], int | None],
        clock: Callable[[], float] | None = None,
    ) -> BurstAcceptor | None:
        """An acceptor on a descriptor of its own for a TCP server's listening socket, which accepts no more at once
        than `room(an open descriptor)` says may be opened (None: any number); None where none is needed (asyncio's
        loop, a Unix socket, a kernel that does not report the queue)."""
        if type(loop).__module__.split(".")[0] != "uvloop" or _TCP_INFO is None:
            return None
        if server_socket.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        listener = socket.fromfd(server_socket.fileno(), server_socket.family, server_socket.type)  # a dup
        return cls(loop, listener, protocol_factory, room, clock)

    def _ready(self) -> None:
        waiting = queued(self._listener)
        if waiting < 2:  # one alone is uvloop's, this turn
            self._last_turn = None
            return
        # Called each turn while connections wait: the time since the last call is the length of a turn.
        now, last = self._clock(), self._last_turn
        self._last_turn = now
        if last is None or now - last < SLOW_TURN:  # uvloop keeps up, one connection a short turn
            return
        self._last_turn = None
        accepted = 0
        room = self._room(self._listener.fileno())
        for _ in range(waiting if room is None else min(waiting, room)):  # uvloop, coming after this, finds none and waits
            try:
                connection, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accepting connections paused for %.0f s: %s", RETRY_SECONDS, exc)
                    self._loop.remove_reader(self._listener.fileno())
                    self._loop.call_later(RETRY_SECONDS, self._resume)
                break  # anything else (a connection reset while queued) is the kernel's, and the next turn's
            task = self._loop.create_task(self._serve(connection))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            accepted += 1
        if accepted:
            log.debug("accepted %d connections of a burst in one turn", accepted)

    def _resume(self) -> None:
        if self._listener.fileno() >= 0:
            self._loop.add_reader(self._listener.fileno(), self._ready)

    async def _serve(self, connection: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, connection)
        except OSError as exc:  # the client left before its transport was made
            log.debug("an accepted connection failed at once: %s", exc)
            connection.close()  # nothing, when the transport took it: it detaches the socket as it closes

    def close(self) -> None:
        """Accept nothing more (the server is shutting down); connections already accepted go on."""
        if self._listener.fileno() >= 0:
            self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
