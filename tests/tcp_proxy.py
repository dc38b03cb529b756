"""A loopback TCP proxy in a background thread whose open connections can be cut at once: a network drop that
neither side chose (the browser sees its WebSocket die, the gateway sees its client vanish). It can also hold
every byte, both ways, on open and new connections alike, until it lets them go: a partition that heals, as
a blackholed route looks to both ends (no reset, no error: silence, then the delayed bytes). A cut can wait for an
event: `cut_after(marker)` drops everything once the marker has gone down to a client, and `cuts` says how many
connections a cut aborted, so a test proves its drop happened."""

from __future__ import annotations

import asyncio
import threading

from tests.support import free_port


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.target_port = target_port
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        # Every chunk a client sent upstream, as read, with its connection's number and how many replies had come
        # down that connection before it: chunks with the same pair went up in one round trip, however the kernel
        # split the write.
        self.sent: list[tuple[tuple[int, int], bytes]] = []
        self._connections = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._open: asyncio.Event | None = None  # set: bytes flow; clear: they wait (created on the proxy's loop)
        self._marker = b""  # cut every connection once these bytes have gone down to a client (once)
        self.cuts = 0  # connections aborted by cuts so far

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        return self._connections

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._open = asyncio.Event()
        self._open.set()
        self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers |= {writer, upstream_writer}
        self._connections += 1
        replies = [self._connections, 0]  # this connection's number, and the replies that came down it so far
        await asyncio.gather(
            self._pipe(reader, upstream_writer, replies, self.sent),
            self._pipe(upstream_reader, writer, replies, down=True),
            return_exceptions=True,
        )

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        replies: list[int],
        record: list[tuple[tuple[int, int], bytes]] | None = None,
        down: bool = False,
    ) -> None:
        seen = b""  # the tail of what went down, so a marker split across two reads is still found
        try:
            while data := await reader.read(65536):
                if record is not None:
                    record.append(((replies[0], replies[1]), data))
                if down:
                    replies[1] += 1
                assert self._open is not None
                await self._open.wait()
                writer.write(data)
                await writer.drain()
                if down and self._marker:
                    seen = seen[-len(self._marker) :] + data
                    if self._marker in seen:
                        self._marker = b""
                        self._abort()
        finally:
            writer.close()
            self._writers.discard(writer)

    def hold(self) -> None:
        """Partition: every byte from now on waits, both ways, until `release`."""
        assert self._open is not None
        self._loop.call_soon_threadsafe(self._open.clear)

    def release(self) -> None:
        """Heal: what waited goes through, in order."""
        assert self._open is not None
        self._loop.call_soon_threadsafe(self._open.set)

    def cut(self) -> None:
        """Drop every open connection, both ways, without a closing handshake."""
        self._loop.call_soon_threadsafe(self._abort)

    def cut_after(self, marker: bytes) -> None:
        """Drop every open connection once `marker` has been written down to a client: a cut on an event, not a clock."""
        self._loop.call_soon_threadsafe(setattr, self, "_marker", marker)

    def _abort(self) -> None:
        self.cuts += len(self._writers) // 2  # each proxied connection holds two writers
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
