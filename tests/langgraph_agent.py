"""A small LangGraph graph served by ag-ui-langgraph, for the tests: langchain's fake chat model (no LLM, no network)
answers, calls a backend tool (`lookup`, run by the graph's ToolNode) or a client tool the request declares, and
the graph counts its turns in its state. `/approve` asks the user first (LangGraph's `interrupt`, with a message and
a schema; `/approve expiring` with an expiry of its own) and answers with what the user said. `/write <text>`
writes a document through a tool whose argument predicts the state (`predict_state`, streamed in pieces), and
`/research <topic>` is answered by a subgraph of its own. `agent` is the in-process form (`--agent tests.langgraph_agent:agent`);
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
        for index, call in enumerate(message.tool_calls):  # arguments in pieces of 8 characters, as providers stream them
            args = json.dumps(call["args"])
            for start in range(0, max(len(args), 1), 8):
                named = start == 0
                piece = {
                    "name": call["name"] if named else None,
                    "args": args[start : start + 8],
                    "id": call["id"] if named else None,
                    "index": index,
                    "type": "tool_call_chunk",
                }
                yield ChatGenerationChunk(message=AIMessageChunk(content="", id=message.id, tool_call_chunks=[piece]))

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
    document: str


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
    if text.startswith("/write"):
        document = text.removeprefix("/write").strip()
        return AIMessage(content="Writing it.", tool_calls=[{"name": "write_document", "args": {"document": document}, "id": call}])
    return AIMessage(content=f"You said: {text}")


# The tool whose streamed argument predicts the shared state's `document`, as ag-ui-langgraph reads it from metadata.
PREDICT = {"predict_state": [{"state_key": "document", "tool": "write_document", "tool_argument": "document"}]}


async def chat(state: State, config: RunnableConfig) -> dict[str, Any]:
    reply = _reply(state)
    if any(call["name"] == "write_document" for call in reply.tool_calls):
        config = {**config, "metadata": {**(config.get("metadata") or {}), **PREDICT}}
    response = await FakeToolCallingModel(messages=iter([reply])).ainvoke(state["messages"], config)
    return {"messages": [response], "turns": state.get("turns", 0) + 1}


async def write_document(state: State) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]
    document = call["args"]["document"]
    result = ToolMessage(content="written", tool_call_id=call["id"])
    return {"messages": [result, AIMessage(content=f"The document now reads: {document}")], "document": document}


async def research(state: State, config: RunnableConfig) -> dict[str, Any]:
    topic = str(state["messages"][-1].content).removeprefix("/research").strip()
    reply = AIMessage(content=f"Research on {topic}: three sources agree.")
    response = await FakeToolCallingModel(messages=iter([reply])).ainvoke(state["messages"], config)
    return {"messages": [response], "turns": state.get("turns", 0) + 1}


def _research_graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("research", research)
    builder.add_edge(START, "research")
    builder.add_edge("research", END)
    return builder.compile()


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
    text = last.content if isinstance(last, HumanMessage) and isinstance(last.content, str) else ""
    return "approve" if text.startswith("/approve") else "researcher" if text.startswith("/research") else "chat"


def _route(state: State) -> str:
    last = state["messages"][-1]
    names = [c["name"] for c in last.tool_calls] if isinstance(last, AIMessage) else []
    return "tools" if "lookup" in names else "write_document" if "write_document" in names else END


def build_graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_node("approve", approve)
    builder.add_node("write_document", write_document)
    builder.add_node("researcher", _research_graph())
    builder.add_conditional_edges(START, _begin, {"approve": "approve", "researcher": "researcher", "chat": "chat"})
    builder.add_edge("approve", END)
    builder.add_edge("write_document", END)
    builder.add_edge("researcher", END)
    builder.add_conditional_edges("chat", _route, {"tools": "tools", "write_document": "write_document", END: END})
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
