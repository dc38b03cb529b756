"""bedrock-agentcore's AGUIApp with a scripted handler, for the tests: it streams text, calls a backend tool or a
client tool the request declares, and sends its state back."""

from __future__ import annotations

import asyncio
from typing import Any

from ag_ui.core import (
    EventType,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from bedrock_agentcore.runtime.ag_ui import AGUIApp

from tests.support import BackgroundServer

app = AGUIApp()


def _text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else ""


@app.entrypoint
async def handler(run_input: Any) -> Any:
    thread, run = run_input.thread_id, run_input.run_id
    last = run_input.messages[-1] if run_input.messages else None
    text = _text_of(last)
    yield RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread, run_id=run)
    state = run_input.state if isinstance(run_input.state, dict) else {}
    yield StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot={**state, "turns": int(state.get("turns", 0)) + 1})
    answer = f"{run}-answer"
    if getattr(last, "role", None) == "tool":
        said = f"The tool said {text}"
    elif text.startswith("/tool"):
        yield ToolCallStartEvent(type=EventType.TOOL_CALL_START, tool_call_id=f"{run}-lookup", tool_call_name="lookup")
        yield ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id=f"{run}-lookup", delta='{"q":"vpc"}')
        yield ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=f"{run}-lookup")
        yield ToolCallResultEvent(type=EventType.TOOL_CALL_RESULT, message_id=f"{run}-r", tool_call_id=f"{run}-lookup", content="found 3")
        said = "Looked it up."
    elif text.startswith("/client"):
        yield ToolCallStartEvent(type=EventType.TOOL_CALL_START, tool_call_id=f"{run}-confirm", tool_call_name="confirm")
        yield ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, tool_call_id=f"{run}-confirm", delta="{}")
        yield ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=f"{run}-confirm")
        outcome = {"type": "success", "pendingToolCallIds": [f"{run}-confirm"]}
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=thread, run_id=run, outcome=outcome)
        return
    elif text.startswith("/slow"):
        yield TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id=answer, role="assistant")
        for index in range(100):
            yield TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id=answer, delta=f"tick {index} ")
            await asyncio.sleep(0.1)
        yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=answer)
        said = "done"
    else:
        said = f"You said: {text}"
    message = f"{answer}-text"
    yield TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id=message, role="assistant")
    yield TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id=message, delta=said)
    yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=message)
    yield RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=thread, run_id=run)


class AgentCoreServer(BackgroundServer):
    """The AGUIApp on a free loopback port, in a background thread; its AG-UI route is `/invocations`."""

    def __init__(self) -> None:
        super().__init__(app, "/invocations")
