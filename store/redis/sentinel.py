"""Sentinel failovers, followed from every sentinel of the URL: state writes wait from the first sign of a
failover until every sentinel names the new master, and the pool then reconnects. Without this the old master
goes on accepting writes until Sentinel demotes it, and then discards them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from store.base import StoreUnavailable
from store.redis.client import sentinel_hosts, text

log = logging.getLogger("agui.store.redis")

FAILOVER_STARTS = ("+try-failover", "+failover-state-select-slave", "+selected-slave", "+failover-state-send-slaveof-noone")
# Not +failover-end: it comes before the switch, while the pool still points at the old master. Not
# -failover-abort-not-elected either: with several sentinels, one that lost the election says it while the
# elected one goes on (a failover that really stopped reopens writes after FAILOVER_PAUSE_SECONDS).
FAILOVER_ENDS = ("+switch-master", "-failover-abort-no-good-slave")
FAILOVER_PAUSE_SECONDS = 10.0  # longest wait of state writes during a Sentinel failover
SENTINEL_AGREE_SECONDS = 5.0  # after a switch, how long writes wait for every sentinel to name the new master


class FailoverWatch:
    """The gate's failover half: `writes_open` is cleared while a failover is under way."""

    def __init__(self, url: str, client: Any, drop_connections: Callable[[], Awaitable[None]]) -> None:
        self.url = url
        self.client = client  # the store's master client: its pool names the sentinels and the service
        self.drop_connections = drop_connections
        self.writes_open = asyncio.Event()
        self.writes_open.set()
        self._reopen_timer: asyncio.TimerHandle | None = None  # bounds one pause; cancelled when it ends
        self._switched_to: tuple[str, int] | None = None  # the master of the last `+switch-master` acted on
        self._task: asyncio.Future[Any] | None = None

    def start(self) -> None:
        """Every sentinel of the URL is watched at once: only the one leading a failover announces its start, and
        a failover may be asked of any of them."""
        hosts = sentinel_hosts(self.url)
        self._task = asyncio.gather(*(self._watch(host, port) for host, port in hosts))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def writes_reopened(self) -> None:
        """Wait while a failover is under way (bounded); a failover still running then is a retryable refusal."""
        try:
            async with asyncio.timeout(FAILOVER_PAUSE_SECONDS):
                await self.writes_open.wait()
        except TimeoutError:
            raise StoreUnavailable("redis: a failover is under way", retryable=True) from None

    async def _watch(self, host: str, port: int) -> None:
        delay = 0.1
        while True:
            try:
                watcher = aioredis.Redis(host=host, port=port, socket_connect_timeout=2.0)
                pubsub = watcher.pubsub()
                try:
                    await pubsub.subscribe(*FAILOVER_STARTS, *FAILOVER_ENDS)
                    delay = 0.1
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message and message.get("type") == "message":
                            await self.event(text(message["channel"]), text(message["data"]))
                finally:
                    await pubsub.aclose()
                    await watcher.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the same sentinel again, with backoff (the others are watched)
                log.warning("sentinel %s:%d watch lost (%s); retrying in %.1fs", host, port, type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def event(self, channel: str, data: str) -> None:
        if channel in FAILOVER_STARTS and self.writes_open.is_set():
            log.warning("sentinel failover under way (%s): state writes wait for the new master", channel)
            self._pause()
        elif channel == "+switch-master":
            # "<service> <old ip> <old port> <new ip> <new port>", announced by every sentinel in turn.
            fields = data.split()
            master = (fields[3], int(fields[4])) if len(fields) == 5 and fields[4].isdigit() else None
            if master is not None and master == self._switched_to:
                return
            self._switched_to = master
            log.warning("sentinel switched the master (%s): reconnecting", data)
            self._pause()  # also when the start went unseen
            if master is not None:
                await self._until_sentinels_name(master)
            await self.drop_connections()
            self._reopen()
        elif channel in FAILOVER_ENDS:
            self._reopen()

    def _pause(self) -> None:
        self.writes_open.clear()
        if self._reopen_timer is None:  # never wait forever, and one pause's bound never ends a later pause
            self._reopen_timer = asyncio.get_running_loop().call_later(FAILOVER_PAUSE_SECONDS, self._reopen)

    def _reopen(self) -> None:
        if self._reopen_timer is not None:
            self._reopen_timer.cancel()
            self._reopen_timer = None
        self.writes_open.set()

    async def _until_sentinels_name(self, master: tuple[str, int]) -> None:
        """Wait (bounded) until every sentinel that answers names the new master. The leader announces the
        switch at once; the others learn it from its hello messages up to two seconds later, and a connection
        made meanwhile through one of them would reach the old master, which still takes writes until it is
        demoted, and then drops them."""
        sentinels = self.client.connection_pool.sentinel_manager.sentinels
        service = self.client.connection_pool.service_name
        loop = asyncio.get_running_loop()
        started = loop.time()
        while loop.time() < started + SENTINEL_AGREE_SECONDS:
            named = await asyncio.gather(*(_master_named(sentinel, service) for sentinel in sentinels))
            answers = [address for address in named if address is not None]
            if answers and all(address == master for address in answers):
                log.info("every sentinel names the new master after %.2fs", loop.time() - started)
                return
            await asyncio.sleep(0.05)
        log.warning("sentinels still disagree on the master after %.0fs; reconnecting anyway", SENTINEL_AGREE_SECONDS)


async def _master_named(sentinel: Any, service: str) -> tuple[str, int] | None:
    """The master one sentinel names for `service`; None when it does not answer."""
    try:
        async with asyncio.timeout(0.5):
            address = await sentinel.sentinel_get_master_addr_by_name(service)
    except (RedisError, OSError, TimeoutError):
        return None
    return (text(address[0]), int(address[1])) if address else None
