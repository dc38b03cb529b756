"""The demo agent's commands for the rest of AG-UI 1.0 (DEMO_AGENT.md): shared state, plans, predictive state,
client tools, snapshots, activities, raw events and sub-agents. Each reads the plain request's state, tools and
messages, and speaks only signals."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway.agents import signals as s
from gateway.agents.base import AgentRequest

PLAN_STEP_SECONDS = 0.2
MAX_PLAN_STEPS = 20


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text) or [text]


def _state(request: AgentRequest) -> dict[str, Any]:
    return dict(request.state) if isinstance(request.state, dict) else {}


def _short(request: AgentRequest, text: str) -> list[s.Signal]:
    message_id = f"msg-{request.run_id}"
    return [*(s.TextDelta(text=word, message_id=message_id) for word in _words(text)), s.TextEnd(message_id=message_id)]


async def state(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    document = _state(request)
    earlier = document.get("demo")
    demo: dict[str, Any] = dict(earlier) if isinstance(earlier, dict) else {}
    turns = demo.get("turns")
    demo["turns"] = turns + 1 if isinstance(turns, int) and not isinstance(turns, bool) else 1
    document["demo"] = demo
    yield s.StateSnapshot(snapshot=document)
    yield s.StateDelta(patch=[{"op": "add", "path": "/demo/lastMessage", "value": argument}])
    for signal in _short(request, f"State updated: turn {demo['turns']}"):
        yield signal
    yield s.Completed()


async def plan(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    count = int(argument) if argument.isdigit() and 1 <= int(argument) <= MAX_PLAN_STEPS else 3
    document = {**_state(request), "steps": [{"description": f"Step {n}", "status": "pending"} for n in range(1, count + 1)]}
    yield s.StateSnapshot(snapshot=document)
    for index in range(count):
        await asyncio.sleep(PLAN_STEP_SECONDS)
        yield s.StateDelta(patch=[{"op": "replace", "path": f"/steps/{index}/status", "value": "completed"}])
    for signal in _short(request, f"Done: {count} steps"):
        yield signal
    yield s.Completed()


async def predict(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    yield s.CustomEvent(name="PredictState", value=[{"state_key": "document", "tool": "write_document", "tool_argument": "document"}])
    call_id = f"call-{request.run_id}-write"
    yield s.ToolStart(tool_call_id=call_id, name="write_document")
    arguments = json.dumps({"document": argument})
    for start in range(0, len(arguments), 8):
        yield s.ToolArgs(tool_call_id=call_id, delta=arguments[start : start + 8])
    yield s.ToolEnd(tool_call_id=call_id)
    yield s.ToolResult(tool_call_id=call_id, content="document written")
    yield s.StateSnapshot(snapshot={**_state(request), "document": argument})
    for signal in _short(request, "The document is written."):
        yield signal
    yield s.Completed()


async def frontend(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    name, _, raw = argument.partition(" ")
    if not any(tool.get("name") == name for tool in request.tools):
        for signal in _short(request, f"No client tool named {name}"):
            yield signal
        yield s.Completed()
        return
    message_id = f"msg-{request.run_id}"
    call_id = f"call-{request.run_id}-{name}"
    for word in _words(f"Calling {name}."):
        yield s.TextDelta(text=word, message_id=message_id)
    yield s.ToolStart(tool_call_id=call_id, name=name, parent_message_id=message_id)
    yield s.ToolArgs(tool_call_id=call_id, delta=raw.strip() or "{}")
    yield s.ToolEnd(tool_call_id=call_id)
    yield s.Completed(pending_tool_call_ids=(call_id,))


async def tool_returned(request: AgentRequest) -> AsyncIterator[s.Signal]:
    """The run after a client tool: its result is the newest message."""
    result = request.messages[-1]
    call_id = result.get("toolCallId")
    name = next(
        (
            (call.get("function") or {}).get("name")
            for message in request.messages
            if message.get("role") == "assistant"
            for call in message.get("toolCalls") or []
            if isinstance(call, dict) and call.get("id") == call_id
        ),
        None,
    )
    content = result.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    for signal in _short(request, f"The {name or 'client'} tool returned: {text}"):
        yield signal
    yield s.Completed()


async def snapshot(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    count = len(request.messages)
    reply = {"id": f"msg-{request.run_id}", "role": "assistant", "content": f"Snapshot of {count} messages"}
    yield s.MessagesSnapshot(messages=[*request.messages, reply])
    yield s.Completed()


async def activity(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    activity_id = f"activity-{request.run_id}"
    yield s.ActivitySnapshot(activity_type="progress", content={"percent": 0}, message_id=activity_id)
    for percent in (50, 100):
        yield s.ActivityDelta(
            message_id=activity_id, activity_type="progress", patch=[{"op": "replace", "path": "/percent", "value": percent}]
        )
    for signal in _short(request, "Progress reached 100%."):
        yield signal
    yield s.Completed()


async def raw(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    yield s.Raw(event={"kind": "demo.raw", "n": 1}, source="demo")
    for signal in _short(request, "A raw event was sent."):
        yield signal
    yield s.Completed()


async def subagent(request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
    name = argument or "helper"
    subagent_id = f"sub-{request.run_id}"
    yield s.SubagentStart(subagent_run_id=subagent_id, name=name)
    message_id = f"msg-{request.run_id}-sub"
    for word in _words(f"{name} reporting: the sub-task is done."):
        yield s.TextDelta(text=word, message_id=message_id, subagent_run_id=subagent_id)
    yield s.TextEnd(message_id=message_id)
    yield s.SubagentFinish(subagent_run_id=subagent_id)
    for signal in _short(request, f"The {name} sub-agent finished."):
        yield signal
    yield s.Completed()


COMMANDS: dict[str, Callable[[AgentRequest, str], AsyncIterator[s.Signal]]] = {
    "/state": state,
    "/plan": plan,
    "/predict": predict,
    "/frontend": frontend,
    "/snapshot": snapshot,
    "/activity": activity,
    "/raw": raw,
    "/subagent": subagent,
}
