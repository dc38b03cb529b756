"""The Redis store's hot commands (its scripts) sent straight on a pooled connection: packed here in one buffer,
replies read in order, none of redis-py's per-command layers (pipeline and script objects, hooks) on the way.

Private state relied on (written for redis-py 8.1; pinned in pyproject.toml, checked by
tests/unit/test_private_shapes.py): a connection's `_writer` stream and its `is_connected`, `connect`,
`read_response` and `socket_timeout`. Without `_writer` the wire falls back to `send_packed_command`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

Arg = bytes | str | int


def pack(*args: Arg) -> bytes:
    """One command in RESP: an array of bulk strings, built in one join (redis-py re-copies a growing buffer)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else b"%d" % arg if isinstance(arg, int) else arg
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


def evalsha(script: Any, keys: list[str], args: list[Any]) -> bytes:
    return pack(b"EVALSHA", script.sha, len(keys), *keys, *args)


WIRE_IDLE = 32  # connections the wire keeps between exchanges; more go back to the pool


class Wire:
    """Round trips on connections of a standalone or Sentinel client's pool (not Cluster: its pipelines route
    command by command). The wire keeps the connections it took (up to WIRE_IDLE idle) instead of asking the
    pool each time: redis-py 8's pool takes a lock, checks the socket and reports to its hooks per checkout.
    A connection keeps its own connect (authentication, TLS, Sentinel's current master), its read timeout and its
    retry policy (store/redis/client.py `connect`: once more on a new connection when the connection broke, as for every
    command of the store; a kept connection may have died with its server while it sat here)."""

    def __init__(self, client: Any) -> None:
        self._pool = client.connection_pool
        self._idle: list[Any] = []

    async def exchange(self, commands: list[bytes]) -> list[Any]:
        """Send the packed commands in one write, read one reply each. An error reply comes back as its
        ResponseError in its place (the replies after it are still read); a broken connection raises."""
        conn = self._idle.pop() if self._idle else await self._pool.get_connection()
        try:
            result: list[Any] = await conn.retry.call_with_retry(lambda: _send_and_read(conn, commands), lambda _: conn.disconnect())
        except BaseException:
            await self._pool.release(conn)  # its state is unknown: the pool checks it before handing it out again
            raise
        if len(self._idle) < WIRE_IDLE:
            self._idle.append(conn)
        else:
            await self._pool.release(conn)
        return result

    async def script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """One script by its digest; a server that lost it (restarted, flushed) gets it through redis-py, which
        loads it and runs it."""
        [reply] = await self.exchange([evalsha(script, keys, args)])
        if isinstance(reply, NoScriptError):
            return await script(keys=keys, args=args)
        if isinstance(reply, ResponseError):
            raise reply
        return reply


async def _send_and_read(conn: Any, commands: list[bytes]) -> list[Any]:
    if not conn.is_connected:  # its connect, not its send's: a Sentinel connection finds the current master there
        await conn.connect()
    writer = getattr(conn, "_writer", None)
    if writer is None:  # a redis-py without the attribute
        await conn.send_packed_command(commands, check_health=False)
    else:  # its send wraps the write in wait_for, a task per command; a write that fails shows in the read
        try:
            writer.write(b"".join(commands))
            if writer.transport.get_write_buffer_size():  # not all sent at once: a stalled server must not hold it
                async with asyncio.timeout(conn.socket_timeout):
                    await writer.drain()
        except TimeoutError:
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError("writing to redis timed out") from None
        except OSError as exc:
            await conn.disconnect(nowait=True)
            raise RedisConnectionError(f"writing to redis: {exc}") from None
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(await conn.read_response())
        except ResponseError as error:  # read whole: the connection stays in step
            replies.append(error)
    return replies
