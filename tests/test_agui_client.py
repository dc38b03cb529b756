"""The AG-UI backend's HTTP client against a real AG-UI server (tests/agui_upstream.py): many runs at once each get
their own connection at once (no pool bound to wait behind), and an upstream silent past the idle bound ends its run
AGENT_UNAVAILABLE with words that say so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gateway.agents import signals as s
from gateway.agents.agui import backend
from gateway.agents.agui.backend import AguiHttpBackend
from gateway.agents.base import AgentOptions, AgentRequest
from tests.agui_upstream import AguiUpstream


@pytest.fixture(scope="module")
def upstream() -> Iterator[AguiUpstream]:
    server = AguiUpstream().start()
    yield server
    server.stop()


def request(text: str, index: int = 0) -> AgentRequest:
    return AgentRequest(
        thread_id=f"t{index}", run_id=f"r{index}", execution_id="e", cwd="/w", language="en", options=AgentOptions(invocation_id="i"), user_text=text
    )


def flat(ready: s.Ready) -> list[s.Signal]:
    return ready if isinstance(ready, list) else [ready]


async def first_text(run: AsyncIterator[s.Ready]) -> str:
    async for ready in run:
        for signal in flat(ready):
            if isinstance(signal, s.TextDelta):
                return signal.text
            assert not isinstance(signal, s.Failed), signal
    raise AssertionError("the run ended before its text")


async def test_more_runs_at_once_than_a_pool_would_hold_each_get_their_stream_at_once(upstream: AguiUpstream) -> None:
    """150 upstream streams held open together: every one shows its first text while all are still open (httpx's
    default pool of 100 made the 50 others wait for the first to end, in silence)."""
    agent = AguiHttpBackend(upstream.url)
    runs = [agent.run(request("/hold 20", index)) for index in range(150)]
    try:
        firsts = await asyncio.wait_for(asyncio.gather(*(first_text(run) for run in runs)), 15)
        assert firsts == ["held"] * 150
    finally:
        await asyncio.gather(*(run.aclose() for run in runs))  # type: ignore[attr-defined]
        await agent.aclose()


async def test_an_upstream_silent_past_the_idle_bound_ends_the_run_unavailable(upstream: AguiUpstream, monkeypatch: Any) -> None:
    monkeypatch.setattr(backend, "IDLE_SECONDS", 0.5)
    agent = AguiHttpBackend(upstream.url)
    try:
        signals = [signal async for ready in agent.run(request("/silent 5")) for signal in flat(ready)]
    finally:
        await agent.aclose()
    assert signals == [s.Failed(message="The agent sent nothing for 0.5 s.", code="AGENT_UNAVAILABLE")]
