"""A small LangGraph graph served by ag-ui-langgraph, for the tests: langchain's fake chat model (no LLM, no network)
answers, calls a backend tool (`lookup`, run by the graph's ToolNode) or a client tool the request declares, and
the graph counts its turns in its state. `/approve` asks the user first (LangGraph's `interrupt`, with a message and
a schema; `/approve expiring` with an expiry of its own) and answers with what the user said. `agent` is the in-process form (`--agent tests.langgraph_agent:agent`);
`LangGraphServer` serves the same graph over HTTP with the package's own FastAPI endpoint."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from tests.support import BackgroundServer

_calls = itertools.count(1)


class FakeToolCallingModel(GenericFakeChatModel):
    """langchain's fake chat model, whose stream also carries the message's tool calls (as a provider streams them)."""

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        message = next(self.messages)
        assert isinstance(message, AIMessage)
        for word in message.content.split(" ") if isinstance(message.content, str) and message.content else []:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word + " ", id=message.id))
            if run_manager:
                run_manager.on_llm_new_token(word + " ", chunk=chunk)
            yield chunk
        for index, call in enumerate(message.tool_calls):
            args = json.dumps(call["args"])
            pieces = [{"name": call["name"], "args": args, "id": call["id"], "index": index, "type": "tool_call_chunk"}]
            yield ChatGenerationChunk(message=AIMessageChunk(content="", id=message.id, tool_call_chunks=pieces))

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        """`/slow [n]`: n words (100 unless given), one every 0.1 s; anything else as `_stream` gives it."""
        last = messages[-1].content if messages else ""
        if not (isinstance(last, str) and last.startswith("/slow")):
            for chunk in self._stream(messages, stop, None, **kwargs):
                if run_manager:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk
            return
        next(self.messages)
        words = last.split()
        for index in range(int(words[1]) if len(words) > 1 and words[1].isdigit() else 100):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=f"tick {index} ", id="slow"))
            if run_manager:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
            await asyncio.sleep(0.1)


@tool
def lookup(q: str) -> str:
    """Look a resource up."""
    return f"found 3 {q}"


class State(MessagesState):
    turns: int


def _reply(state: State) -> AIMessage:
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"The tool said {last.content}")
    text = last.content if isinstance(last.content, str) else ""
    call = f"call-{next(_calls)}"
    if text.startswith("/tool"):
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": "vpc"}, "id": call}])
    if text.startswith("/client"):
        return AIMessage(content="", tool_calls=[{"name": "confirm", "args": {}, "id": call}])
    if text.startswith("/slow"):
        return AIMessage(content="slow")  # streamed by the model's own slow path
    return AIMessage(content=f"You said: {text}")


async def chat(state: State, config: RunnableConfig) -> dict[str, Any]:
    response = await FakeToolCallingModel(messages=iter([_reply(state)])).ainvoke(state["messages"], config)
    return {"messages": [response], "turns": state.get("turns", 0) + 1}


APPROVAL_SCHEMA = {"type": "object", "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}}, "required": ["decision"]}


async def approve(state: State) -> dict[str, Any]:
    text = state["messages"][-1].content
    ask: dict[str, Any] = {"message": "Deploy the stack?", "responseSchema": APPROVAL_SCHEMA}
    if isinstance(text, str) and "expiring" in text:
        ask["expiresAt"] = "2099-01-01T00:00:00Z"
    answer = interrupt(ask)
    return {"messages": [AIMessage(content=f"Approved: {json.dumps(answer, sort_keys=True)}")], "turns": state.get("turns", 0) + 1}


def _begin(state: State) -> str:
    last = state["messages"][-1]
    asks = isinstance(last, HumanMessage) and isinstance(last.content, str) and last.content.startswith("/approve")
    return "approve" if asks else "chat"


def _route(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and any(c["name"] == "lookup" for c in last.tool_calls) else END


def build_graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_node("approve", approve)
    builder.add_conditional_edges(START, _begin, {"approve": "approve", "chat": "chat"})
    builder.add_edge("approve", END)
    builder.add_conditional_edges("chat", _route, {"tools": "tools", END: END})
    builder.add_edge("tools", "chat")
    return builder.compile(checkpointer=MemorySaver())


agent = LangGraphAgent(name="assistant", graph=build_graph())


def app(emit_interrupt_outcome: bool = False) -> FastAPI:
    """The graph under ag-ui-langgraph's FastAPI endpoint, on `POST /agent`."""
    served = FastAPI()
    agent = LangGraphAgent(name="assistant", graph=build_graph(), emit_interrupt_outcome=emit_interrupt_outcome)
    add_langgraph_fastapi_endpoint(served, agent, "/agent")
    return served


class LangGraphServer(BackgroundServer):
    """The same graph over HTTP (ag-ui-langgraph's FastAPI endpoint), on a free loopback port in a thread.
    `emit_interrupt_outcome`: AG-UI 1.0's interrupt outcome; otherwise the package's older style (a CUSTOM
    `on_interrupt` event, answered through `forwardedProps.command.resume`)."""

    def __init__(self, emit_interrupt_outcome: bool = False) -> None:
        super().__init__(app(emit_interrupt_outcome), "/agent")
