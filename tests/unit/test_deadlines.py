"""The loop's shared deadlines (transports/deadlines.py) and the body deadline built on them (read_body)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar import Request

from gateway.errors import ErrorCode, GatewayError
from tests.unit.manual_time import ManualTime
from transports.deadlines import Deadlines, deadlines, install
from transports.http_input import read_body


async def test_a_deadline_fires_once_its_length_has_passed_and_not_before():
    time = ManualTime()
    fired: list[float] = []
    clock = Deadlines(0.4, clock=time.now, sleep=time.sleep)
    started = time.now()
    clock.add("a", lambda: fired.append(time.now() - started))
    await time.advance(0.35)
    assert fired == []
    await time.advance(0.2)
    assert len(fired) == 1 and 0.4 <= fired[0] <= 0.4 + 0.05  # at most one tick (an eighth: 0.05 s) late
    assert len(clock) == 0


async def test_a_discarded_deadline_never_fires_and_the_sweep_stops_when_none_is_left():
    time = ManualTime()
    fired: list[str] = []
    clock = Deadlines(0.2, clock=time.now, sleep=time.sleep)
    clock.add("met", lambda: fired.append("met"))
    clock.add("missed", lambda: fired.append("missed"))
    clock.discard("met")
    clock.discard("never added")
    await time.advance(0.35)
    assert fired == ["missed"]
    await time.advance(0.1)
    assert clock._task is None  # nothing waits: no task ticks


async def test_a_key_added_again_gets_a_new_deadline_and_a_failing_expiry_spares_the_others():
    time = ManualTime()
    fired: list[str] = []
    clock = Deadlines(0.3, clock=time.now, sleep=time.sleep)

    def broken() -> None:
        raise RuntimeError("expiry failed")

    clock.add("renewed", lambda: fired.append("renewed"))
    clock.add("broken", broken)
    clock.add("other", lambda: fired.append("other"))
    await time.advance(0.2)
    clock.add("renewed", lambda: fired.append("renewed"))  # its deadline is now 0.3 s from here
    await time.advance(0.2)
    assert fired == ["other"]
    await time.advance(0.2)
    assert fired == ["other", "renewed"]


def _request(messages: list[dict[str, Any]], forever: bool = False) -> Request[Any, Any, Any]:
    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        if forever:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b"", "app": None}
    return Request(scope, receive)  # type: ignore[arg-type]


async def test_a_body_read_at_once_leaves_no_deadline_and_no_timer_behind():
    loop: Any = asyncio.get_running_loop()
    scheduled = len(loop._scheduled)
    body = await read_body(
        _request([{"type": "http.request", "body": b'{"a":', "more_body": True}, {"type": "http.request", "body": b"1}"}]), 1000, 30
    )
    assert body == b'{"a":1}'
    assert len(deadlines(30)) == 0
    assert len(loop._scheduled) == scheduled  # asyncio's own timeout would have left a cancelled timer for 30 s


async def test_a_body_here_whole_is_read_at_once_and_a_large_one_refused_with_413():
    whole = _request([{"type": "http.request", "body": b'{"a":1}', "more_body": False}])
    assert await read_body(whole, 1000, 30) == b'{"a":1}'
    with pytest.raises(GatewayError) as refused:
        await read_body(_request([{"type": "http.request", "body": b"x" * 11, "more_body": False}]), 10, 30)
    assert refused.value.http_status == 413 and refused.value.headers["Connection"] == "close"
    left = _request([])  # the client left before its body: the first message is the disconnect
    with pytest.raises(GatewayError) as gone:
        await read_body(left, 1000, 30)
    assert gone.value.code is ErrorCode.INVALID_INPUT and gone.value.headers["Connection"] == "close"


async def test_a_body_whose_first_bytes_are_late_is_read_when_they_come_or_refused_at_its_deadline():
    time = ManualTime()
    install(Deadlines(0.3, clock=time.now, sleep=time.sleep))
    try:
        arrived = asyncio.Event()

        async def late() -> dict[str, Any]:
            await arrived.wait()
            return {"type": "http.request", "body": b"{}", "more_body": False}

        scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b"", "app": None}
        reading = asyncio.ensure_future(read_body(Request(scope, late), 1000, 0.3))  # type: ignore[arg-type]
        await time.advance(0.1)
        arrived.set()
        assert await reading == b"{}"
        arrived.clear()
        never = asyncio.ensure_future(read_body(Request(scope, late), 1000, 0.3))  # type: ignore[arg-type]
        await time.advance(0.35)
        with pytest.raises(GatewayError) as refused:
            await never
        assert refused.value.code is ErrorCode.REQUEST_TIMEOUT and len(deadlines(0.3)) == 0
    finally:
        install(Deadlines(0.3))


async def test_a_body_that_does_not_arrive_in_time_is_refused_with_408():
    time = ManualTime()
    install(Deadlines(0.3, clock=time.now, sleep=time.sleep))
    try:
        reading = asyncio.ensure_future(
            read_body(_request([{"type": "http.request", "body": b"{", "more_body": True}], forever=True), 1000, 0.3)
        )
        await time.advance(0.25)
        assert not reading.done(), "not before its deadline"
        await time.advance(0.1)
        with pytest.raises(GatewayError) as refused:
            await reading
        assert refused.value.code is ErrorCode.REQUEST_TIMEOUT and refused.value.http_status == 408
        assert len(deadlines(0.3)) == 0
    finally:
        install(Deadlines(0.3))
