"""What a client can learn of the gateway's agents (AGENTS_AND_COPILOTKIT.md §1): each one's id, description and AG-UI
AgentCapabilities, from what its backend declares and what the gateway itself does for every agent."""

from __future__ import annotations

import copy
from typing import Any

from gateway import __version__
from gateway.agents.catalog import Agents


def describe(agents: Agents, agent_id: str, *, reattach: bool, keeps_conversation: bool) -> dict[str, Any]:
    """`{"id","description","default","capabilities"}`: `capabilities` holds only what is known to be true or false."""
    agent, description = agents.get(agent_id), agents.description(agent_id)
    capabilities = copy.deepcopy(agent.capabilities)
    capabilities["identity"] = {"name": agent_id, "type": agent.name, "description": description, "version": __version__}
    # Every agent behind the gateway streams over SSE and WebSocket; runs resume from a position when the event
    # log is on (--max-reattach-grace-seconds above 0).
    capabilities["transport"] = {"streaming": True, "websocket": True, "httpBinary": False, "resumable": reattach}
    capabilities.setdefault("tools", {})["clientProvided"] = agent.client_tools
    # A thread's state comes back to any client that joins it, when the thread keeps its conversation.
    capabilities.setdefault("state", {})["persistentState"] = keeps_conversation
    return {"id": agent_id, "description": description, "default": agent_id == agents.default_id, "capabilities": capabilities}
