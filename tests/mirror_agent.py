"""A plug-in backend for the tests (`--agent tests.mirror_agent:MirrorAgent`): it answers a plain request with a
state snapshot of what the gateway handed it, so a test sees the seam's side of the request."""

from __future__ import annotations

from collections.abc import AsyncIterator

from gateway.agents import signals as s
from gateway.agents.base import AgentBackend, AgentRequest


class MirrorAgent(AgentBackend):
    name = "mirror"
    plain_workspace = True
    client_tools = True

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:  # type: ignore[override]
        seen = {
            "plain": request.plain,
            "messages": list(request.messages),
            "tools": [tool.get("name") for tool in request.tools],
            "state": request.state,
            "context": list(request.context),
            "forwardedProps": request.forwarded_props,
            "parentRunId": request.parent_run_id,
            "userText": request.user_text,
        }
        yield s.StateSnapshot(snapshot={key: value for key, value in seen.items() if value is not None})  # no nulls on the wire
        yield s.Completed()
