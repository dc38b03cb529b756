"""The Redis store's hot commands (its scripts), pipelined from every caller onto one connection: the commands
queued in one turn of the event loop go out in one write, and the replies are read by a protocol of ours (hiredis)
and handed back in order. A round trip costs each caller a future, not a connection checkout, a stream reader
and a timer per reply, as a call through redis-py does (bench/NOTES.md has what each costs).

The connection itself is redis-py's, taken from the client's pool and connected by it (authentication, TLS, the
database, Sentinel's current master), then read and written here: its transport is handed to `Lane`. Failures:
- the connection breaks (its server restarted, failed over, the pool was dropped): every command in flight fails
  with ConnectionError and is sent once more on a new connection, as redis-py's retry policy does for the store
  (store/redis/client.py: every store command is idempotent, fenced or carries a nonce);
- a reply takes longer than the connection's `socket_timeout`: the connection is closed and every command in
  flight fails with TimeoutError (not retried: it may have run);
- a master that was demoted answers READONLY: on a Sentinel master pool the connection is closed and the command
  retried on a new one, which asks Sentinel for the new master (redis-py's SentinelManagedConnection does the same).

Private state relied on (written for redis-py 8.1; pinned in pyproject.toml, checked by
tests/unit/test_private_shapes.py): a connection's `_writer` stream (its transport) and its `connect`,
`disconnect`, `socket_timeout`, `encoder`; the parsers' `parse_error` (the error classes redis-py raises); a
Sentinel connection's `connection_pool.is_master`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Sequence
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, NoScriptError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger("agui.store.redis")
Arg = bytes | str | int
_MORE = object()  # hiredis' answer while a reply is incomplete (False is a reply: RESP3's boolean)
WIRE_CONNECTIONS = 1  # pooled connections the wire holds (one at a time; a broken one is given back)
SCRIPT_LOST = object()  # `Wire.script`'s answer when the server does not have the script


def pack(*args: Arg) -> bytes:
    """One command in RESP, packed by hiredis (in C: a third of the time of our own join of its parts)."""
    packed: bytes = hiredis.pack_command(cast(Any, args))  # its stub types the tuple as one item long
    return packed


def evalsha(script: Any, keys: list[str], args: Sequence[Arg]) -> bytes:
    """`EVALSHA sha numkeys keys... args...`, packed as `pack` packs."""
    packed: bytes = hiredis.pack_command(cast(Any, (b"EVALSHA", script.sha, len(keys), *keys, *args)))
    return packed


class _Exchange:
    """One caller's commands on the lane: the replies they are owed, and when they were sent."""

    __slots__ = ("expected", "future", "replies", "sent")

    def __init__(self, future: asyncio.Future[list[Any]], expected: int, sent: float) -> None:
        self.future = future
        self.expected = expected
        self.replies: list[Any] = []
        self.sent = sent


class Lane(asyncio.Protocol):
    """A connected redis-py connection's transport, read and written here: many callers' commands in flight at once,
    replies matched to them in the order they were sent (Redis answers one connection in order)."""

    def __init__(self, conn: Any, transport: asyncio.Transport, demoted_is_moved: bool) -> None:
        self.conn = conn
        self._transport = transport
        self._original = transport.get_protocol()  # redis-py's: told when the connection closes (its disconnect waits)
        self._timeout: float | None = conn.socket_timeout
        self._demoted_is_moved = demoted_is_moved
        encoding = {"encoding": conn.encoder.encoding, "errors": conn.encoder.encoding_errors} if conn.encoder.decode_responses else {}
        self._reader = hiredis.Reader(protocolError=InvalidResponse, replyError=BaseParser.parse_error, notEnoughData=_MORE, **encoding)
        self._waiting: collections.deque[_Exchange] = collections.deque()
        self._out: list[bytes] = []
        self._watch: asyncio.TimerHandle | None = None
        self.broken: Exception | None = None
        transport.set_protocol(self)

    def send(self, commands: list[bytes]) -> asyncio.Future[list[Any]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        if self.broken is not None:
            future.set_exception(self.broken)
            return future
        if not self._out:
            loop.call_soon(self._flush)  # what every caller queues in this turn of the loop goes in one write
        self._out.extend(commands)
        now = loop.time()
        self._waiting.append(_Exchange(future, len(commands), now))
        if self._watch is None and self._timeout is not None:  # one timer for the lane, not one per command
            self._watch = loop.call_at(now + self._timeout, self._check_late)
        return future

    def _flush(self) -> None:
        if self.broken is None and self._out:
            self._transport.write(b"".join(self._out))
        self._out.clear()

    def data_received(self, data: bytes) -> None:
        reader, waiting = self._reader, self._waiting
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not _MORE:
                if not waiting:
                    raise InvalidResponse("a reply no command asked for")
                if self._demoted_is_moved and isinstance(reply, ReadOnlyError):
                    raise RedisConnectionError("The previous master is now a slave")
                exchange = waiting[0]
                exchange.replies.append(reply)
                if len(exchange.replies) == exchange.expected:
                    waiting.popleft()
                    if not exchange.future.done():  # its caller may have gone: the reply is read all the same
                        exchange.future.set_result(exchange.replies)
        except (InvalidResponse, RedisConnectionError) as exc:
            self._break(exc if isinstance(exc, RedisConnectionError) else RedisConnectionError(f"redis: {exc}"))

    def _check_late(self) -> None:
        self._watch = None
        if self.broken is not None or not self._waiting or self._timeout is None:
            return
        loop = asyncio.get_running_loop()
        due = self._waiting[0].sent + self._timeout
        if loop.time() >= due:
            self._break(RedisTimeoutError(f"no reply from redis within {self._timeout:g}s"))
        else:
            self._watch = loop.call_at(due, self._check_late)

    def _break(self, error: Exception) -> None:
        """Fail every command in flight with `error` and close the connection: nothing more is read from it."""
        self._fail(error)
        self._transport.abort()

    def _fail(self, error: Exception) -> None:
        if self.broken is None:
            self.broken = error
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self._waiting:
            exchange = self._waiting.popleft()
            if not exchange.future.done():
                exchange.future.set_exception(self.broken)
        self._out.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"redis: connection lost ({exc or 'closed by the server'})"))
        self._original.connection_lost(exc)

    def eof_received(self) -> bool:
        return False  # the transport closes: connection_lost follows


class Wire:
    """Round trips on one connection of a standalone or Sentinel client's pool (not Cluster: its pipelines route
    command by command), shared by every caller."""

    def __init__(self, client: Any) -> None:
        self._pool = client.connection_pool
        self._lane: Lane | None = None
        self._opening: asyncio.Future[Lane] | None = None

    async def exchange(self, commands: list[bytes]) -> list[Any]:
        """Send the packed commands, read one reply each. An error reply comes back as its ResponseError in its
        place; a broken connection raises (after one more try on a new connection), and so does a late reply."""
        try:
            return await (await self._ready()).send(commands)
        except RedisConnectionError:
            return await (await self._ready()).send(commands)

    async def _ready(self) -> Lane:
        lane = self._lane
        if lane is not None and lane.broken is None:
            return lane
        if self._opening is None:  # the first caller to find no lane opens one; the others wait for it
            self._lane = None  # a broken lane is given back to the pool once, by this opening
            self._opening = asyncio.ensure_future(self._open(lane))
            self._opening.add_done_callback(self._opened)
        return await asyncio.shield(self._opening)

    def _opened(self, opening: asyncio.Future[Lane]) -> None:
        self._opening = None
        if not opening.cancelled() and opening.exception() is None:
            self._lane = opening.result()

    async def _open(self, broken: Lane | None) -> Lane:
        if broken is not None:  # given back disconnected: the pool connects it afresh when it hands it out again
            try:
                await broken.conn.disconnect(nowait=True)
                await self._pool.release(broken.conn)
            except Exception:  # the pool was reset meanwhile (a failover drops every connection): nothing to give back
                log.debug("a broken wire connection was not given back to its pool", exc_info=True)
        conn = await self._pool.get_connection()
        try:
            if not conn.is_connected:
                await conn.connect()
            pool = getattr(conn, "connection_pool", None)
            return Lane(conn, conn._writer.transport, bool(getattr(pool, "is_master", False)))
        except BaseException:
            await self._pool.release(conn)
            raise

    async def script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """One script by its digest: its reply, or SCRIPT_LOST when the server does not have it (restarted,
        flushed), for the caller to run it through redis-py, which loads it (on a pooled connection)."""
        [reply] = await self.exchange([evalsha(script, keys, args)])
        if isinstance(reply, NoScriptError):
            return SCRIPT_LOST
        if isinstance(reply, ResponseError):
            raise reply
        return reply
