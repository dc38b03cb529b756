"""How server/accept_burst.py decides, turn by turn: a burst of new connections is accepted in one or two turns of
uvloop's loop, where uvloop alone takes one a turn. Real listening sockets and connections the kernel queued while
the loop was busy; the length of a turn is stepped by hand, so the machine's load decides nothing here."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import socket

import uvloop

from gateway.fds import RESERVED, free_before_reserve
from server.accept_burst import SLOW_TURN, BurstAcceptor, queued

BURST = 30


class Counted(asyncio.Protocol):
    def __init__(self, made: list[asyncio.BaseTransport]) -> None:
        self.made = made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made.append(transport)


async def turns_to_accept(with_acceptor: bool, turn_seconds: float = 2 * SLOW_TURN, free: int | None = None) -> int:
    """Turns of the loop, each `turn_seconds` long (the work of a loaded server, on a clock stepped by hand: the
    machine's own load never lengthens a turn), until every connection of a burst queued while the loop was busy
    was made; `free`: the descriptors left before the reserve meanwhile."""
    loop = asyncio.get_running_loop()
    elapsed = [0.0]
    made: list[asyncio.BaseTransport] = []

    def factory() -> asyncio.Protocol:
        return Counted(made)

    server = await loop.create_server(factory, "127.0.0.1", 0, backlog=128)
    listening = server.sockets[0]
    acceptor = BurstAcceptor.beside(loop, listening, factory, room=free_before_reserve, clock=lambda: elapsed[0]) if with_acceptor else None
    assert (acceptor is not None) is with_acceptor
    port = listening.getsockname()[1]
    # The loop is busy in this step: the kernel completes each handshake and queues the connection.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(BURST)]
    probe = socket.fromfd(listening.fileno(), listening.family, listening.type)
    assert queued(probe) == BURST
    probe.close()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    if free is not None:
        lowest = os.dup(0)  # the kernel's lowest free descriptor: the next accepted connection's
        os.close(lowest)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest + free + RESERVED, limit[1]))
    turns = 0
    try:
        while len(made) < BURST and turns < 10 * BURST:
            elapsed[0] += turn_seconds
            await asyncio.sleep(0)
            turns += 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)
    assert len(made) == BURST
    for transport in made:
        transport.close()
    for client in clients:
        client.close()
    if acceptor is not None:
        acceptor.close()
    server.close()
    await server.wait_closed()
    return turns


def test_a_burst_is_accepted_at_once_on_a_busy_uvloop(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="agui.serve")
    assert uvloop.run(turns_to_accept(True)) <= 4
    # By the acceptor in one turn (the second long one), all but uvloop's own of each turn.
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("accepted ") and messages[0].endswith(" connections of a burst in one turn")
    assert int(messages[0].split()[1]) >= BURST - 3


def test_a_burst_leaves_the_reserved_descriptors_to_uvloop(caplog) -> None:
    """With 10 descriptors free below the reserve, the acceptor takes 10 of the burst; uvloop, one a turn, the rest."""
    caplog.set_level(logging.DEBUG, logger="agui.serve")
    assert uvloop.run(turns_to_accept(True, free=10)) >= BURST - 12
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and messages[0].endswith(" connections of a burst in one turn")
    assert 8 <= int(messages[0].split()[1]) <= 10


def test_short_turns_leave_a_burst_to_uvloop(caplog) -> None:
    """An idle server drains a burst in as many short turns: the acceptor, whose path costs memory per connection, stays out."""
    caplog.set_level(logging.DEBUG, logger="agui.serve")
    assert uvloop.run(turns_to_accept(True, turn_seconds=0)) >= BURST - 1
    assert not [record for record in caplog.records if "burst" in record.getMessage()]


def test_uvloop_alone_takes_one_connection_a_turn() -> None:
    """Why the acceptor exists: should uvloop ever drain its queue itself, this fails and the acceptor can go."""
    assert uvloop.run(turns_to_accept(False)) >= BURST - 1


def test_the_acceptor_stands_aside_where_it_is_not_needed() -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        assert (
            BurstAcceptor.beside(loop, server.sockets[0], asyncio.Protocol, room=free_before_reserve) is None
        )  # asyncio drains its queue itself
        server.close()
        await server.wait_closed()

    asyncio.run(check())


def test_a_connection_that_arrives_alone_is_left_to_uvloop(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="agui.serve")

    async def check() -> None:
        loop = asyncio.get_running_loop()
        made: list[asyncio.BaseTransport] = []
        server = await loop.create_server(lambda: Counted(made), "127.0.0.1", 0)
        listening = server.sockets[0]
        acceptor = BurstAcceptor.beside(loop, listening, lambda: Counted(made), room=free_before_reserve)
        assert acceptor is not None
        client = socket.create_connection(("127.0.0.1", listening.getsockname()[1]))
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(made) == 1
        made[0].close()
        client.close()
        acceptor.close()
        server.close()
        await server.wait_closed()

    uvloop.run(check())
    assert not [record for record in caplog.records if "burst" in record.getMessage()]


def test_no_acceptor_for_a_unix_socket(tmp_path) -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_unix_server(asyncio.Protocol, str(tmp_path / "s"))
        assert BurstAcceptor.beside(loop, server.sockets[0], asyncio.Protocol, room=free_before_reserve) is None
        server.close()
        await server.wait_closed()

    uvloop.run(check())
