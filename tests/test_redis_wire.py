"""The Redis store's pipelined wire against a real redis-server: many callers share one connection and each gets its
own replies in order, error replies stay in their place, a connection killed under the callers costs them one more
try on a new one, a stalled server fails the commands in flight after the socket timeout, and a lost script is
loaded again; and the store's scripts take no slot of its pool while its pooled commands wait for one."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from store import Admission
from store.redis import RedisStore
from store.redis.wire import SCRIPT_LOST, Wire, pack
from tests.support import RedisServer

pytestmark = pytest.mark.redis

ECHO = "return {ARGV[1], redis.call('INCR', KEYS[1])}"


async def connections_made(client: aioredis.Redis) -> int:
    return int((await client.info("stats"))["total_connections_received"])


async def test_many_callers_share_one_connection_and_each_gets_its_own_replies_in_order(redis_server):
    client = aioredis.Redis.from_url(redis_server.url, max_connections=50)
    observer = aioredis.Redis.from_url(redis_server.url)
    try:
        await client.delete("wire:count", "wire:text")
        await client.set("wire:text", "not a number")
        script = client.register_script(ECHO)
        await script(keys=["wire:count"], args=["load"])
        wire = Wire(client)
        before = await connections_made(observer)

        async def call(index: int) -> list:
            commands = [pack(b"EVALSHA", script.sha, 1, "wire:count", f"caller-{index}")]
            if index % 50 == 0:  # an error reply in the middle of a caller's batch, and one more command after it
                commands += [pack(b"INCR", "wire:text"), pack(b"ECHO", f"after-{index}")]
            return await wire.exchange(commands)

        results = await asyncio.gather(*(call(index) for index in range(1000)))
        for index, replies in enumerate(results):
            assert replies[0][0] == f"caller-{index}".encode(), replies
            if index % 50 == 0:
                assert isinstance(replies[1], ResponseError) and "not an integer" in str(replies[1])
                assert replies[2] == f"after-{index}".encode()
        counts = sorted(replies[0][1] for replies in results)
        assert counts == list(range(2, 1002)), "every script ran exactly once"
        assert await connections_made(observer) - before <= 1, "one connection carried them all (perhaps the pool's own)"
    finally:
        await client.aclose()
        await observer.aclose()


async def test_a_connection_killed_under_its_callers_costs_them_one_more_try_on_a_new_one(redis_server):
    client = aioredis.Redis.from_url(redis_server.url, max_connections=50)
    killer = aioredis.Redis.from_url(redis_server.url)
    try:
        wire = Wire(client)
        assert await wire.exchange([pack(b"PING")]) == [b"PONG"]
        # Callers in flight behind a command that holds the connection (a blocking pop), when it is killed.
        held = asyncio.ensure_future(wire.exchange([pack(b"BLPOP", "wire:empty", "1")]))
        await asyncio.sleep(0.1)
        waiting = [asyncio.ensure_future(wire.exchange([pack(b"ECHO", f"e{index}")])) for index in range(20)]
        await asyncio.sleep(0.05)
        before = await connections_made(killer)
        assert await killer.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes") == 1
        assert [reply for [reply] in await asyncio.gather(*waiting)] == [f"e{index}".encode() for index in range(20)]
        assert await held == [None], "the blocking pop ran again on the new connection, to its timeout"
        assert await connections_made(killer) - before == 1, "one new connection for every caller's second try"
        assert await wire.exchange([pack(b"PING")]) == [b"PONG"], "the next call runs on the new connection"
    finally:
        await client.aclose()
        await killer.aclose()


async def test_a_stalled_server_fails_the_commands_in_flight_after_the_socket_timeout_and_the_wire_recovers(tmp_path):
    server = RedisServer(tmp_path).start()
    client = aioredis.Redis.from_url(server.url, socket_timeout=0.5)
    try:
        wire = Wire(client)
        assert await wire.exchange([pack(b"PING")]) == [b"PONG"]
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        outcomes = await asyncio.gather(*(wire.exchange([pack(b"ECHO", f"e{i}")]) for i in range(10)), return_exceptions=True)
        waited = time.monotonic() - started
        assert all(isinstance(outcome, RedisTimeoutError) for outcome in outcomes), outcomes
        assert 0.4 < waited < 3, waited
        server.proc.send_signal(signal.SIGCONT)
        assert await wire.exchange([pack(b"ECHO", "back")]) == [b"back"]
    finally:
        if server.proc is not None:
            server.proc.send_signal(signal.SIGCONT)
        await client.aclose()
        server.stop()


async def test_a_script_the_server_lost_is_loaded_again_through_redis_py_in_a_slot(redis_server):
    """The wire says that the server lost a script; the store then runs it through redis-py, which loads it, on a
    pooled connection in a slot: 300 callers at once after a flush, on a store of one slot (its pool holds 10),
    take it in turn and are every one admitted."""
    client = aioredis.Redis.from_url(redis_server.url)
    store = RedisStore(redis_server.url, retention_seconds=3600, max_connections=1)
    try:
        script = client.register_script("return 'fresh-' .. ARGV[1]")
        wire = Wire(client)
        await client.script_flush()
        [reply] = await wire.exchange([pack(b"EVALSHA", script.sha, 0, "x")])
        assert isinstance(reply, NoScriptError), "an error reply in its place, never raised from the read"
        assert await wire.script(script, [], ["y"]) is SCRIPT_LOST
        await store.admit(Admission("lost-warm", "r", "d", "/w", None, "inv", False, "e", store.owner_id))  # the wire's connection
        await client.script_flush()
        admitted = await asyncio.gather(
            *(store.admit(Admission(f"lost-{i}", "r1", "d1", "/w", None, "inv", False, f"e{i}", store.owner_id)) for i in range(300))
        )
        assert [result.execution.execution_id for result in admitted] == [f"e{i}" for i in range(300)]
    finally:
        await store.close()
        await client.aclose()


async def test_the_stores_scripts_go_out_together_on_the_wire_while_its_pooled_commands_wait_for_a_slot(redis_server):
    """A store of one slot: 200 admissions at once go out together on the wire's one connection, outside the slots
    (Redis reads them in a few reads, not one apiece); then 200 document reads at once, each of which takes a
    pooled connection, wait for the slot in turn instead of failing for want of connections (the pool holds 10)."""
    store = RedisStore(redis_server.url, retention_seconds=3600, max_connections=1)
    observer = aioredis.Redis.from_url(redis_server.url)
    threads = [f"slot-{index}" for index in range(200)]
    try:
        await store.admit(Admission("slot-warm", "r", "d", "/w", None, "inv", False, "e", store.owner_id))  # the wire's connection
        before = int((await observer.info("stats"))["total_reads_processed"])
        admitted = await asyncio.gather(
            *(store.admit(Admission(thread, "r1", "d1", "/w", None, "inv", False, f"e-{thread}", store.owner_id)) for thread in threads)
        )
        reads = int((await observer.info("stats"))["total_reads_processed"]) - before
        assert [result.execution.execution_id for result in admitted] == [f"e-{thread}" for thread in threads]
        assert reads < 20, f"{reads} reads for 200 admissions: they went out one by one"
        documents = await asyncio.gather(*(store.read_document(thread) for thread in threads))
        assert [document["active"]["run_id"] for document in documents] == ["r1"] * 200
    finally:
        await store.close()
        await observer.aclose()
