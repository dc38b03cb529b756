"""A scripted AG-UI server for the tests (`--agent agui+http://...`): its last user message picks a script, and it
records what it was sent and whether its client went away. Events are built with ag_ui.core and encoded with
the SDK's own EventEncoder, as an AG-UI server built on the SDK sends them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support import BackgroundServer


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return ""


class AguiUpstream(BackgroundServer):
    """On a free loopback port, in a background thread."""

    def __init__(self) -> None:
        super().__init__(Starlette(routes=[Route("/agent", self._run, methods=["POST"])]), "/agent")
        self.received: list[dict[str, Any]] = []  # each RunAgentInput, as sent
        self.headers: list[dict[str, str]] = []
        self.disconnected: list[str] = []  # run ids whose client went away mid-stream

    async def _run(self, request: Request) -> Response:
        body = await request.json()
        self.received.append(body)
        self.headers.append(dict(request.headers))
        newest = (body.get("messages") or [{}])[-1]
        text = _last_user_text(body) if newest.get("role") == "user" else ""  # a tool result continues, it commands nothing
        command, _, argument = text.partition(" ")
        if command == "/status":
            code = int(argument or 500)
            if code == 400:
                return JSONResponse({"detail": "the upstream does not like this input"}, status_code=400)
            return PlainTextResponse("upstream trouble", status_code=code)
        if command == "/json":
            return JSONResponse({"not": "a stream"})
        if command == "/stall":  # no response head for a while
            await asyncio.sleep(float(argument or 3))
        encoder = EventEncoder()
        events = self._script(body, command, argument)
        return StreamingResponse(self._encoded(encoder, events, body["runId"], request), media_type=encoder.get_content_type())

    async def _encoded(self, encoder: EventEncoder, events: AsyncIterator[Any], run_id: str, request: Request) -> AsyncIterator[str]:
        try:
            async for event in events:
                yield event if isinstance(event, str) else encoder.encode(event)
        except asyncio.CancelledError:
            self.disconnected.append(run_id)
            raise

    async def _script(self, body: dict[str, Any], command: str, argument: str) -> AsyncIterator[Any]:
        thread, run = body["threadId"], body["runId"]
        if command == "/foreign":
            yield RunStartedEvent(thread_id=thread, run_id="someone-else")
            return
        if command == "/early":
            yield TextMessageContentEvent(message_id="m", delta="before the start")
            return
        yield RunStartedEvent(thread_id=thread, run_id=run)
        message = f"{run}-answer"
        if command == "/malformed":
            yield "data: {not json\n\n"
            return
        if command == "/unknown":
            yield 'data: {"type":"NOT_AN_AG_UI_EVENT"}\n\n'
            return
        if command == "/truncated":
            yield TextMessageStartEvent(message_id=message, role="assistant")
            yield TextMessageContentEvent(message_id=message, delta="and then nothing")
            return
        if command == "/burst":  # a whole turn in one write, which the gateway reads in one network read
            records = [
                TextMessageStartEvent(message_id=message, role="assistant"),
                *(TextMessageContentEvent(message_id=message, delta=f"{word} ") for word in ("one", "two", "three")),
            ]
            if argument == "bad":
                tail = "data: {not json\n\n"
            else:
                ended = [TextMessageEndEvent(message_id=message), RunFinishedEvent(thread_id=thread, run_id=run)]
                tail = "".join(
                    EventEncoder().encode(event) for event in [*ended, TextMessageContentEvent(message_id=message, delta="late")]
                )
            yield "".join(EventEncoder().encode(event) for event in records) + tail
            return
        if command == "/hold":  # a text at once, then the stream held open for S seconds before its end
            yield TextMessageStartEvent(message_id=message, role="assistant")
            yield TextMessageContentEvent(message_id=message, delta="held")
            await asyncio.sleep(float(argument or 5))
            yield TextMessageEndEvent(message_id=message)
            yield RunFinishedEvent(thread_id=thread, run_id=run)
            return
        if command == "/linger":  # the run ends at once, the response S seconds later (its last chunk held back)
            yield RunFinishedEvent(thread_id=thread, run_id=run)
            await asyncio.sleep(float(argument or 0.05))
            return
        if command == "/silent":  # nothing after RUN_STARTED for S seconds
            await asyncio.sleep(float(argument or 5))
            yield RunFinishedEvent(thread_id=thread, run_id=run)
            return
        if command == "/error":
            yield RunErrorEvent(message="The model is rate limited.", code="RATE_LIMITED")
            return
        if command == "/slow":
            yield TextMessageStartEvent(message_id=message, role="assistant")
            for index in range(int(argument or 50)):
                yield TextMessageContentEvent(message_id=message, delta=f"tick {index} ")
                await asyncio.sleep(0.1)
            yield TextMessageEndEvent(message_id=message)
        elif command == "/tool":
            yield ToolCallStartEvent(tool_call_id=f"{run}-call", tool_call_name="lookup", parent_message_id=message)
            yield ToolCallArgsEvent(tool_call_id=f"{run}-call", delta='{"q":')
            yield ToolCallArgsEvent(tool_call_id=f"{run}-call", delta='"vpc"}')
            yield ToolCallEndEvent(tool_call_id=f"{run}-call")
            yield ToolCallResultEvent(message_id=f"{run}-result", tool_call_id=f"{run}-call", content="found 3")
        elif command == "/client":
            yield ToolCallStartEvent(tool_call_id=f"{run}-confirm", tool_call_name="confirm")
            yield ToolCallArgsEvent(tool_call_id=f"{run}-confirm", delta="{}")
            yield ToolCallEndEvent(tool_call_id=f"{run}-confirm")
            yield RunFinishedEvent(thread_id=thread, run_id=run, outcome={"type": "success", "pendingToolCallIds": [f"{run}-confirm"]})
            return
        elif command == "/ask":
            interrupt = {"id": f"{run}-ask", "reason": "question", "message": "Proceed?", "responseSchema": {"type": "object"}}
            yield RunFinishedEvent(thread_id=thread, run_id=run, outcome={"type": "interrupt", "interrupts": [interrupt]})
            return
        elif command == "/badpatch":
            yield StateDeltaEvent(delta=[{"op": "remove", "path": "/missing"}])
        last = (body.get("messages") or [{}])[-1]
        said = {
            "tool": f"the tool said {last.get('content')}",
            "user": f"You said: {_last_user_text(body)}",
        }.get(last.get("role"), "hello")
        if body.get("resume"):
            said = f"resumed with {json.dumps(body['resume'][0].get('payload'))}"
        state = body.get("state") if isinstance(body.get("state"), dict) else {}
        yield StateSnapshotEvent(snapshot={**state, "turns": int(state.get("turns", 0)) + 1})
        yield StateDeltaEvent(delta=[{"op": "add", "path": "/last", "value": command or "chat"}])
        yield CustomEvent(name="upstream.note", value={"n": 1})
        yield TextMessageStartEvent(message_id=f"{message}-text", role="assistant")
        yield TextMessageContentEvent(message_id=f"{message}-text", delta=said)
        yield TextMessageEndEvent(message_id=f"{message}-text")
        yield RunFinishedEvent(thread_id=thread, run_id=run)
