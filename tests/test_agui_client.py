"""The AG-UI backend's HTTP client against a real AG-UI server (tests/agui_upstream.py): many runs at once each get
their own connection at once (no pool bound to wait behind), and an upstream silent past the idle bound ends its run
AGENT_UNAVAILABLE with words that say so."""

from __future__ import annotations

import asyncio
import json
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
        thread_id=f"t{index}",
        run_id=f"r{index}",
        execution_id="e",
        cwd="/w",
        language="en",
        options=AgentOptions(invocation_id="i"),
        user_text=text,
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


async def test_the_upstream_is_reached_through_the_proxy_the_environment_names(upstream: AguiUpstream, monkeypatch: Any) -> None:
    """HTTP_PROXY names the upstream's own address, and the agent URL a host no resolver knows: the request reaches
    the upstream only through the proxy. NO_PROXY for that host sends it straight, where it cannot be reached."""
    proxy = upstream.url.removesuffix("/agent")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    agent = AguiHttpBackend("http://agent.invalid/agent")
    try:
        signals = [signal async for ready in agent.run(request("hello")) for signal in flat(ready)]
    finally:
        await agent.aclose()
    assert agent.proxy == proxy and isinstance(signals[-1], s.Completed), signals[-1]
    assert [signal.text for signal in signals if isinstance(signal, s.TextDelta)] == ["You said: hello"]
    monkeypatch.setenv("NO_PROXY", "agent.invalid")
    direct = AguiHttpBackend("http://agent.invalid/agent")
    try:
        signals = [signal async for ready in direct.run(request("hello")) for signal in flat(ready)]
    finally:
        await direct.aclose()
    assert direct.proxy is None and signals[-1] == s.Failed(message=signals[-1].message, code="AGENT_UNAVAILABLE"), signals[-1]


@pytest.mark.parametrize("ending", [b"\r\n", b"\n", b"\r"])
async def test_records_are_read_whatever_their_line_ends_and_wherever_a_read_splits_them(ending: bytes, monkeypatch: Any) -> None:
    """The SSE grammar's three line ends, the stream cut into reads at every byte (a CRLF split between two reads
    included): the same events, in order."""
    events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"}]
    stream = b"".join(b": comment" + ending + b"data: " + json.dumps(event).encode() + ending + ending for event in events)

    class Reads:
        content = None

        async def iter_any(self) -> AsyncIterator[bytes]:
            for index in range(len(stream)):
                yield stream[index : index + 1]

    response = Reads()
    response.content = response  # type: ignore[assignment]
    read = [event async for batch in backend._sse_reads(response) for event in batch]  # type: ignore[arg-type]
    assert read == events
