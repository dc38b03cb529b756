"""A Pydantic AI agent served by its own AG-UI adapter, for the tests: a FunctionModel (no LLM, no network) streams
text, thinks with a signature (`/think`, and `/signed` says which signatures came back), calls a backend tool
(`lookup`) or a client tool the request declares, and the `count` tool sends the run's state back with a snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import EventType, StateSnapshotEvent
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext, ToolReturn
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ThinkingPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.ui import StateDeps
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import BackgroundServer


class Counter(BaseModel):
    turns: int = 0


def _last(messages: list[ModelMessage]) -> Any:
    for part in reversed(messages[-1].parts if isinstance(messages[-1], ModelRequest) else []):
        if isinstance(part, (UserPromptPart, ToolReturnPart)):
            return part
    return None


async def _stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall] | dict[int, DeltaThinkingPart]]:
    last = _last(messages)
    if isinstance(last, ToolReturnPart):
        yield f"The {last.tool_name} tool said {last.content}"
        return
    text = last.content if last is not None and isinstance(last.content, str) else ""
    if text.startswith("/tool"):
        yield {0: DeltaToolCall(name="lookup", json_args='{"q": "vpc"}', tool_call_id="call-lookup")}
    elif text.startswith("/count"):
        yield {0: DeltaToolCall(name="count", json_args="{}", tool_call_id="call-count")}
    elif text.startswith("/think"):
        # Signed thinking (as Anthropic's models send it), then the answer.
        yield {0: DeltaThinkingPart(content="pondering", signature="sig-visible")}
        yield "Thought about it."
    elif text.startswith("/signed"):
        # The signatures the client sent back with its history: what the next turn of a signed model needs.
        signatures = [p.signature for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ThinkingPart)]
        yield f"signatures {signatures}"
    elif text.startswith("/client"):
        yield {0: DeltaToolCall(name="confirm", json_args="{}", tool_call_id="call-confirm")}
    elif text.startswith("/slow"):
        for index in range(100):
            yield f"tick {index} "
            await asyncio.sleep(0.1)
    else:
        for word in f"You said: {text}".split(" "):
            yield word + " "


agent: Agent[StateDeps[Counter], str] = Agent(FunctionModel(stream_function=_stream), deps_type=StateDeps[Counter])


@agent.tool_plain
def lookup(q: str) -> str:
    """Look a resource up."""
    return f"found 3 {q}"


@agent.tool
def count(ctx: RunContext[StateDeps[Counter]]) -> ToolReturn:
    """Count this turn in the shared state."""
    ctx.deps.state.turns += 1
    snapshot = StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot=ctx.deps.state.model_dump())
    return ToolReturn(return_value=f"turn {ctx.deps.state.turns}", metadata=[snapshot])


async def _run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent, deps=StateDeps(Counter()))


def app() -> Starlette:
    """The agent under Pydantic AI's AG-UI adapter, on `POST /agent`."""
    return Starlette(routes=[Route("/agent", _run, methods=["POST"])])


class PydanticAIServer(BackgroundServer):
    def __init__(self) -> None:
        super().__init__(app(), "/agent")
