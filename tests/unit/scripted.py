"""A scripted agent backend and an in-process engine harness: no sockets, a fake clock, the memory store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from gateway.agents import signals as s
from gateway.agents.base import AgentBackend, AgentRequest
from gateway.engine import PreparedRun, RunEngine, RunHandle, prepare
from store.memory import MemoryStore
from tests.unit.clock import FakeClock


class ScriptedAgent(AgentBackend):
    """Yields the next script for each run; a script item that is an asyncio.Event is awaited (the test's cue)."""

    name = "scripted"

    def __init__(self, *scripts: list[Any]) -> None:
        self.scripts = list(scripts)
        self.requests: list[AgentRequest] = []
        self.closed = 0
        self.cancelled: list[str] = []

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        self.requests.append(request)
        script = self.scripts.pop(0)
        try:
            for item in script:
                if isinstance(item, asyncio.Event):
                    await item.wait()
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            self.closed += 1

    async def cancel_execution(self, execution_id: str, checkpoint: Any) -> None:
        self.cancelled.append(execution_id)


def body(
    text: str | None = "hi", *, thread: str = "t1", run: str = "r1", resume: list[dict[str, Any]] | None = None, user: str | None = None
) -> bytes:
    value: dict[str, Any] = {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": "m1", "role": "user", "content": text}] if text else [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp"}},
    }
    if resume is not None:
        value["resume"] = resume
    if user is not None:
        value["forwardedProps"]["iacCode"]["userId"] = user
    return json.dumps(value).encode()


def prepare_body(raw: bytes) -> PreparedRun:
    return prepare(raw, allowed_roots=("/tmp",), default_cwd=None, accept_language=None)


class Harness:
    def __init__(self, agent: ScriptedAgent, *, interrupt_ttl: float = 900, lease_seconds: float | None = None, **engine: Any) -> None:
        self.clock = FakeClock()
        self.store = MemoryStore(3600, clock=self.clock, lease_seconds=lease_seconds)
        self.agent = agent
        self.engine = RunEngine(self.store, agent, interrupt_ttl=interrupt_ttl, **engine)

    async def start(self, raw: bytes) -> RunHandle:
        return await self.engine.start(prepare_body(raw))

    async def run(self, raw: bytes) -> list[dict[str, Any]]:
        """Start a run and read it to its end, as plain dicts (wire names)."""
        return await collect(await self.start(raw))


async def collect(handle: RunHandle) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async for batch in handle.events(30):
        for _position, data in batch or []:
            out.append(json.loads(data))
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
