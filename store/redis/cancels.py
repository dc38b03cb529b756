"""Cross-replica channels over pub/sub (sharded on a Cluster): the cancel channel, where a cancel taken by any replica
wakes the run's owner at once (a lost message only delays it to the owner's next renewal, which reads the durable
intent), and the thread-list channel, where each change of a thread list reaches the replicas whose clients watch it
(a lost message leaves a watcher's list as it was until the next change)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from store.redis.client import connect

log = logging.getLogger("agui.store.redis")

SUBSCRIBE_RETRY_CAP_SECONDS = 0.5  # a channel is back within this long of its slot's new master


def cancel_channel(owner: str) -> str:
    return f"agui:cancel:{owner}"


def cancel_message(thread_id: str, execution_id: str) -> str:
    return json.dumps([thread_id, execution_id])


LIST_CHANNEL = "agui:threads:changed"  # [scope, thread key, erased] for each change of a thread list


def list_message(scope: str, thread_id: str, deleted: bool = False) -> str:
    return json.dumps([scope, thread_id, deleted])


class ChannelListener:
    """This replica's subscription to one channel, kept up on a client of its own (a blocking read); each message's
    data (JSON, a list) goes to `on_message` as its items."""

    def __init__(self, url: str, channel: str, cluster: bool) -> None:
        self.url = url
        self.channel = channel
        self.cluster = cluster
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()  # set while the server confirmed the subscription

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self, on_message: Callable[..., None]) -> None:
        self._task = asyncio.get_running_loop().create_task(self._listen(on_message))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()

    async def _listen(self, on_message: Callable[..., None]) -> None:
        delay = 0.1
        while True:
            try:
                self._client = self._client or connect(self.url, blocking=True)
                if self.cluster:
                    await self._client.initialize()  # the slot map, which a sharded subscription needs first
                pubsub = self._client.pubsub()
                # On a Cluster a plain SUBSCRIBE only hears its own node: the channel is sharded (SSUBSCRIBE, the
                # node owning its slot), and redis-py moves the subscription when the slot moves.
                await (pubsub.ssubscribe(self.channel) if self.cluster else pubsub.subscribe(self.channel))
                self.subscribed.set()
                delay = 0.1
                try:
                    while True:
                        if self.cluster:
                            message = await pubsub.get_sharded_message(timeout=1.0)
                        else:
                            message = await pubsub.get_message(timeout=1.0)
                        if message and message.get("type") in ("sunsubscribe", "unsubscribe"):
                            # The server dropped the subscription: a node hands its slot's shard channels back
                            # when the slot changes owner (a failover, a reshard). Subscribe again, where it is now.
                            raise RedisConnectionError(f"{self.channel} was unsubscribed by the server")
                        if message and message.get("type") in ("message", "smessage"):
                            on_message(*json.loads(message["data"]))
                finally:
                    self.subscribed.clear()
                    await pubsub.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reconnect with backoff whatever happened
                log.warning("subscription to %s lost (%s); retrying in %.1fs", self.channel, type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, SUBSCRIBE_RETRY_CAP_SECONDS)
                if self.cluster and self._client is not None:
                    # Its slot map may still name a master that died: read it again, just before the next try and
                    # not before the wait, so a promotion during the wait is already seen by that try.
                    with contextlib.suppress(Exception):
                        await self._client.nodes_manager.initialize()
