"""Event logs in Redis: one Stream per run whose entries are written batches (id `0-<last position>`; the
batch's first position, its events' lengths, its events end to end), a meta hash and an attach marker, all under
the thread's hash tag. Each write is one script call; followers block with XREAD on connections of their own,
never the pool that admission uses."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable
from operator import itemgetter
from typing import Any, TypeVar

import msgspec
from redis.exceptions import RedisError

from store.base import StoreUnavailable
from store.eventlog import TOMBSTONE_SECONDS, Entry, EventLog, LogFenced, LogMeta, LogRead, LogRef, LogWrite, ref_digest

T = TypeVar("T")
LUA_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "lua")
_json = msgspec.json.Encoder().encode  # the control argument (cjson reads it); a third of json.dumps's time
LIVE_TTL_MS = 86_400_000  # a live run's log outlives a silent day; when the run ends the retention applies


@functools.lru_cache(maxsize=1024)  # a run's log is written a few times, within its few hundred ms
def _keys(ref: LogRef, state_key: str) -> tuple[str, str, str]:
    """The stream, meta and watch keys, with the hash tag of the thread's state key (`agui:{t:…}:state`)."""
    tag = state_key[: -len(":state")]
    name = ref_digest(ref)
    return f"{tag}:log:{name}", f"{tag}:logmeta:{name}", f"{tag}:watch:{name}"


def _position(entry_id: Any) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return int(text.split("-", 1)[1])


def _batch(entry_id: Any, fields: dict[bytes, bytes]) -> list[Entry]:
    """A stream entry's events: a batch (f: first position, l: lengths, b: data end to end), or one event in
    field d, its position in the entry's id (logs written before batches)."""
    if b"d" in fields:
        return [(_position(entry_id), fields[b"d"])]
    position, blob, entries, offset = int(fields[b"f"]), fields[b"b"], [], 0
    for length in map(int, fields[b"l"].split(b",")):
        entries.append((position, blob[offset : offset + length]))
        position, offset = position + 1, offset + length
    return entries


def _entries(rows: list[Any], after: int, limit: int) -> list[Entry]:
    """The events of stream entries (see `_batch`) after position `after`, each position once, at most `limit`."""
    entries: list[Entry] = []
    for entry_id, fields in rows:
        for entry in _batch(entry_id, fields):
            if entry[0] > after:  # each position once (a retried write may repeat some)
                entries.append(entry)
                after = entry[0]
        if len(entries) >= limit:
            return entries[:limit]
    return entries


class RedisEventLog(EventLog):
    shared = True

    def __init__(
        self,
        client: Any,
        blocking: Callable[[], Any],
        command: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
        script: Callable[[Any, list[str], list[Any]], Awaitable[Any]],
        state_key: Callable[[str], str],
        retention_seconds: float,
        adopt_window: float = 0.0,
    ) -> None:
        self._adopt_window = adopt_window  # an adoptable run whose lease ran out is waited for this long
        self._client = client
        self._blocking_factory = blocking
        self._blocking: Any = None
        self._command = command  # the store's gate: bounded wait for a pooled connection, errors as StoreUnavailable
        self._script = script  # the store's way to run a script, through its gate
        self._state_key = state_key
        self._retention_ms = max(1, int(retention_seconds * 1000))
        with open(os.path.join(LUA_DIR, "log_append.lua")) as source:
            self._append = client.register_script(source.read())

    def _keys(self, ref: LogRef) -> tuple[str, str, str]:
        return _keys(ref, self._state_key(ref.thread_key))

    def keys_of(self, ref: LogRef) -> tuple[str, str, str]:
        """Every key of a run's log (its stream, meta and watch marker)."""
        return self._keys(ref)

    async def delete(self, ref: LogRef) -> None:
        keys = self._keys(ref)
        await self._command(lambda: self._client.delete(*keys))

    def meta_key(self, ref: LogRef) -> str:
        """The key whose existence says the run logged its first events (read by the admit script)."""
        return self._keys(ref)[1]

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        await self.write(ref, [], 1, create=meta)

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        await self.write(ref, entries, first_kept)

    async def end(self, ref: LogRef, head: int) -> None:
        await self.write(ref, [], head + 1, end=head)

    async def expire(self, ref: LogRef, head: int) -> None:
        stream = self._keys(ref)[0]
        await self._command(lambda: self._client.delete(stream))  # the meta hash stays: the tombstone

    async def apply(self, write: LogWrite) -> None:
        """One script call whatever it does (open, append a flushed batch, end): one command to encode, one trip."""
        keys, args = self.script_call(write)
        if await self._script(self._append, keys, args) == -1:
            raise LogFenced(f"run {write.ref.run_id}: a newer owner writes this log")

    def script_call(self, write: LogWrite) -> tuple[list[str], list[bytes]]:
        """The append script's keys and arguments for this write (the store may pipeline it with its own)."""
        stream, info, _ = self._keys(write.ref)
        control: dict[str, object] = {"first_kept": write.first_kept, "live_ttl_ms": LIVE_TTL_MS, "fence": write.fence}
        if write.create is not None:
            control["meta"] = {
                "ros": write.create.ros_digest,
                "digest": write.create.request_digest,
                "owner": write.create.owner,
                "execution": write.create.execution_id,
                "inputs": write.create.inputs,
            }
        if write.end is not None:
            control.update(end_head=write.end, retention_ms=self._retention_ms, tombstone_ms=int(TOMBSTONE_SECONDS * 1000))
        entries = write.entries
        if not entries:
            return [stream, info], [_json(control)]
        start = entries[0][0]
        if entries[-1][0] - start != len(entries) - 1:
            raise ValueError(f"run {write.ref.run_id}: a log write's positions must follow each other")
        control.update({"from": start, "count": len(entries)})
        events = list(map(itemgetter(1), entries))
        lengths = _json(list(map(len, events)))[1:-1]  # "12,40,...": msgspec writes the list
        return [stream, info], [_json(control), lengths, b"".join(events)]

    @property
    def append_script(self) -> Any:
        return self._append

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        stream, info, _ = self._keys(ref)

        async def fetch() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.hgetall(info)
                pipe.xrange(stream, min="-", max="+", count=1)
                pipe.xrange(stream, min=f"0-{after + 1}", max="+", count=limit)
                result: list[Any] = await pipe.execute()
                return result

        fields, oldest, rows = await self._command(fetch)
        if not fields:
            return None
        text = {k.decode(): v.decode() for k, v in fields.items()}
        meta = LogMeta(
            text.get("ros", ""), text.get("digest", ""), text.get("owner", ""), text.get("execution", ""), text.get("inputs", "")
        )
        entries = _entries(rows, after, limit)
        ended = text.get("ended") == "1"
        # With nothing held, every event expired (a tombstone) or none was written yet.
        head = int(text.get("head", "0")) if ended else None
        empty_first = head + 1 if head is not None else after + 1
        first = _batch(*oldest[0])[0][0] if oldest else empty_first
        return LogRead(meta, entries, first, ended, head)

    async def wait(self, ref: LogRef, after: int, timeout: float) -> None:
        stream = self._keys(ref)[0]
        try:
            self._blocking = self._blocking or self._blocking_factory()
            await self._blocking.xread({stream: f"0-{after}"}, count=1, block=max(1, int(timeout * 1000)))
        except RedisError as exc:
            raise StoreUnavailable(f"redis: {type(exc).__name__}") from None

    async def watch(self, ref: LogRef, seconds: float) -> None:
        watch = self._keys(ref)[2]
        await self._command(lambda: self._client.set(watch, "1", px=max(1, int(seconds * 1000))))

    async def watched(self, ref: LogRef) -> bool:
        watch = self._keys(ref)[2]
        return bool(await self._command(lambda: self._client.exists(watch)))

    async def owner_alive(self, ref: LogRef) -> bool:
        """The thread's document says this run holds the lease, and the lease has not run out (server clock), or
        the run is adoptable and still within its adoption window."""
        key = self._state_key(ref.thread_key)

        async def fetch() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.get(key)
                pipe.time()
                result: list[Any] = await pipe.execute()
                return result

        raw, (seconds, micros) = await self._command(fetch)
        active = json.loads(raw).get("active") if raw else None
        if not isinstance(active, dict) or active.get("run_id") != ref.run_id:
            return False
        now, until = float(seconds) + float(micros) / 1e6, float(active.get("lease_until", 0))
        if active.get("adopt") is not None:  # its owner stopped, but another replica is about to adopt it
            return now - until < self._adopt_window
        return until > now

    async def close(self) -> None:
        if self._blocking is not None:
            try:
                await self._blocking.aclose()
            except Exception:  # noqa: BLE001
                pass
