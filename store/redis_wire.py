"""The Redis store's hot commands (its scripts) sent straight on a pooled connection: packed here in one buffer,
replies read in order, none of redis-py's per-command layers (pipeline and script objects, hooks) on the way."""

from __future__ import annotations

from typing import Any

from redis.exceptions import NoScriptError, ResponseError

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


class Wire:
    """Round trips on the connections of a standalone or Sentinel client's pool (not Cluster: its pipelines route
    command by command). A connection that fails is dropped and the exchange retried as the connection's own
    retry policy says, as redis-py does for its commands; the scripts are fenced or carry a nonce, so a retry of
    one that did run changes nothing."""

    def __init__(self, client: Any) -> None:
        self._pool = client.connection_pool

    async def exchange(self, commands: list[bytes]) -> list[Any]:
        """Send the packed commands in one write, read one reply each. An error reply comes back as its
        ResponseError in its place (the replies after it are still read); a broken connection raises."""
        conn = await self._pool.get_connection()
        try:
            result: list[Any] = await conn.retry.call_with_retry(lambda: _send_and_read(conn, commands), lambda _: conn.disconnect())
            return result
        finally:
            await self._pool.release(conn)

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
    await conn.send_packed_command(commands, check_health=False)
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(await conn.read_response())
        except ResponseError as error:  # read whole: the connection stays in step
            replies.append(error)
    return replies
