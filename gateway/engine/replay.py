"""Reads a run's logged events back into what its translator knew: the spans still open and the sub-agents that
own them, the custom-event sequence, the session mapping, and the text each message already showed (an adopter goes
on from there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from gateway.engine.translator import SESSION_EVENT, Translator, open_text

_decode = msgspec.json.Decoder().decode


@dataclass(slots=True)
class Replayed:
    """A logged run as its translator left it."""

    started: bool = False  # RUN_STARTED is in the log
    ended: bool = False  # a terminal event is in the log
    session_sent: bool = False
    session: dict[str, Any] = field(default_factory=dict)
    sequence: int = 0
    texts: dict[str, str] = field(default_factory=dict)  # open AG-UI message id -> the agent's key
    reasoning: str | None = None
    tools: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    text_ids: set[str] = field(default_factory=set)
    shown: dict[str, str] = field(default_factory=dict)  # the agent's message id -> the text shown under it
    agent_events: list[str] = field(default_factory=list)  # eventIds of the agent's own envelopes (CUSTOM values)
    agent_sequence: int = 0  # the highest sequence among them
    subagents: dict[str, bool] = field(default_factory=dict)  # sub-agent run id -> still active
    owners: dict[str, str] = field(default_factory=dict)  # message or tool call id -> the sub-agent that started it


def _key(message_id: str) -> str | None:
    """The agent's message id behind an AG-UI id (`<id>` or `<id>.<n>`); None for the gateway's own `msg-…` ids."""
    if message_id.startswith("msg-"):
        return None
    base, dot, suffix = message_id.rpartition(".")
    return base if dot and suffix.isdigit() else message_id


def replay(events: list[bytes]) -> Replayed:
    state = Replayed()
    for raw in events:
        event = _decode(raw)
        kind = event.get("type")
        if kind == "RUN_STARTED":
            state.started = True
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            state.ended = True
        elif kind == "TEXT_MESSAGE_START":
            state.texts[event["messageId"]] = event["messageId"]
            state.text_ids.add(event["messageId"])
            _owned(state, event["messageId"], event)
        elif kind == "TEXT_MESSAGE_CONTENT":
            key = _key(event["messageId"])
            if key is not None:
                state.shown[key] = state.shown.get(key, "") + event.get("delta", "")
        elif kind == "TEXT_MESSAGE_END":
            state.texts.pop(event["messageId"], None)
        elif kind == "REASONING_START":
            state.reasoning = event["messageId"]
        elif kind == "REASONING_END":
            state.reasoning = None
        elif kind == "TOOL_CALL_START":
            state.tools.append(event["toolCallId"])
            _owned(state, event["toolCallId"], event)
        elif kind in ("TOOL_CALL_END", "TOOL_CALL_RESULT") and event.get("toolCallId") in state.tools:
            state.tools.remove(event["toolCallId"])
        elif kind == "STEP_STARTED" and event["stepName"] not in state.steps:
            state.steps.append(event["stepName"])
        elif kind == "STEP_FINISHED" and event["stepName"] in state.steps:
            state.steps.remove(event["stepName"])
        elif kind == "SUBAGENT_STARTED":
            state.subagents[event["subagentRunId"]] = True
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            state.subagents[event["subagentRunId"]] = False
        elif kind == "CUSTOM":
            _custom(state, event)
    return state


def _owned(state: Replayed, span_id: str, event: dict[str, Any]) -> None:
    subagent = event.get("subagentRunId")
    if isinstance(subagent, str):
        state.owners[span_id] = subagent


def _custom(state: Replayed, event: dict[str, Any]) -> None:
    value = event.get("value")
    if not isinstance(value, dict):
        return
    if event.get("name") == SESSION_EVENT:
        state.session_sent = True
        state.session.update({k: v for k, v in value.items() if k != "schemaVersion"})
    eid, sequence = value.get("eventId"), value.get("sequence")
    if not isinstance(sequence, int) or not isinstance(eid, str):
        return
    if ":" in eid:  # the gateway's own numbering (`<executionId>:<n>`)
        state.sequence = max(state.sequence, sequence)
    else:  # an agent's envelope, sent as it came
        state.agent_events.append(eid)
        state.agent_sequence = max(state.agent_sequence, sequence)


def restore(translator: Translator, state: Replayed) -> None:
    """Put a fresh translator where the logged run's left off."""
    translator.session.update(state.session)
    translator.session_sent = state.session_sent
    translator.sequence = max(translator.sequence, state.sequence)
    translator.texts = {_key(message_id): open_text(message_id, state.owners.get(message_id)) for message_id in state.texts}
    translator.text_ids_used = dict.fromkeys(state.text_ids)
    translator.reasoning_id = state.reasoning
    translator.tools = tuple(state.tools)
    translator.owners = {call_id: state.owners[call_id] for call_id in state.tools if call_id in state.owners} or None
    translator.subagents = dict(state.subagents) or None
    translator.steps = tuple(state.steps)
