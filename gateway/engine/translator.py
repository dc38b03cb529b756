"""The single translator from backend signals to AG-UI events: it owns the mapping table and keeps every span balanced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agents import signals as s
from gateway.engine import documents
from gateway.engine.documents import MAX_SNAPSHOT_BYTES, MAX_STATE_BYTES, bounded, patched, refused
from gateway.ids import random_hex
from gateway.protocol import events as e

_encode = e.encode_json
_encode_string = e.encode_string

SESSION_EVENT = "iac-code.session.v1"
PIPELINE_EVENT = "iac-code.pipeline.v1"
ARTIFACT_EVENT = "iac-code.artifact.v1"
TOOL_PROGRESS_EVENT = "iac-code.tool-progress.v1"


def _new_id(prefix: str) -> str:
    return f"{prefix}-{random_hex(8)}"


def _without(open_ids: tuple[str, ...], closing: str) -> tuple[str, ...]:
    """The open ids but `closing` (each id is open at most once)."""
    return tuple(open_id for open_id in open_ids if open_id != closing)


OpenText = tuple[str, str | None, bytes, bytes]  # an open message: AG-UI id, owner, its deltas' encoded frame


def open_text(message_id: str, owner: str | None) -> OpenText:
    """An open message's entry in `Translator.texts`."""
    return (message_id, owner, *e.text_content_frame(message_id, owner))


TEXT_ROLES = frozenset({"assistant", "developer", "system", "user"})
IAC_NAMES = frozenset({SESSION_EVENT, PIPELINE_EVENT, ARTIFACT_EVENT, TOOL_PROGRESS_EVENT})
MAX_USAGE_ENTRIES = 64  # distinct (provider, model) pairs a run's usage may name
MAX_USAGE_NAME = 256  # characters of a usage entry's provider or model


class Translator:
    """Per run. `sequence` continues the execution's custom-event numbering across its runs; `state` is the
    run's shared state as the client holds it (the request's, on a plain request), which each patch must fit.
    A signal that would break the protocol raises the AGENT_PROTOCOL_ERROR that ends the run, before any of its
    events is sent; so does a signal the table does not know."""

    __slots__ = (
        "activities",
        "awaits",
        "owners",
        "reasoning_id",
        "reasoning_open",
        "sequence",
        "session",
        "session_sent",
        "state",
        "state_limit",
        "steps",
        "subagents",
        "text_ids_used",
        "texts",
        "tools",
        "usage",
    )

    def __init__(
        self,
        session: dict[str, Any],
        sequence: int,
        open_steps: list[str],
        awaits: tuple[str, ...] = (),
        state: Any = documents.UNSET,
        state_limit: int = MAX_STATE_BYTES,
    ) -> None:
        self.session = session
        self.state = state
        self.state_limit = state_limit  # bytes of the state and of a messages snapshot (--max-state-bytes)
        self.activities: dict[str, Any] | None = None  # activity message id -> its content (created on first use)
        self.owners: dict[str, str] | None = None  # tool call id -> the sub-agent that owns it
        self.subagents: dict[str, bool] | None = None  # sub-agent run id -> still active
        self.awaits = awaits  # the identities the session event waits for (the backend's `session_keys`)
        self.sequence = sequence
        self.session_sent = False
        # Open messages: the agent's message id (None: unnamed) -> the AG-UI id, the sub-agent that owns it and its
        # deltas' encoded frame (`open_text`), read together for each delta.
        self.texts: dict[str | None, OpenText] = {}
        self.text_ids_used: dict[str, None] = {}  # ids the agent named, in order (a dict: an empty set is 216 bytes)
        self.reasoning_id: str | None = None  # the open reasoning span
        self.reasoning_open = False  # its reasoning message is open (a span may hold an encrypted value and no text)
        # Open tool calls and steps as tuples: few and rarely changed, and a run with none holds the one empty tuple
        # rather than two empty lists all its life.
        self.tools: tuple[str, ...] = ()
        self.steps: tuple[str, ...] = tuple(open_steps)
        self.usage: dict[tuple[str | None, str | None], e.TokenUsage] | None = None  # (provider, model) -> its sums

    # -- spans -----------------------------------------------------------------
    def _owner(self, entity_id: str) -> str | None:
        return self.owners.get(entity_id) if self.owners else None

    def _check_active(self, subagent: str | None) -> None:
        if subagent is not None and not (self.subagents or {}).get(subagent):
            raise refused(f"sub-agent {subagent[:80]!r} is not active")

    def _own(self, entity_id: str, subagent: str | None) -> None:
        self._check_active(subagent)
        if subagent is None:
            return
        if self.owners is None:
            self.owners = {}
        self.owners[entity_id] = subagent

    def _close_text(self, out: list[e.Event]) -> None:
        for message_id, owner, _, _ in self.texts.values():
            out.append(e.TextMessageEnd(message_id=message_id, subagent_run_id=owner))
        self.texts.clear()

    def _close_reasoning(self, out: list[e.Event]) -> None:
        if self.reasoning_id is not None:
            self._close_reasoning_message(out)
            out.append(e.ReasoningEnd(message_id=self.reasoning_id))
            self.reasoning_id = None

    def _close_reasoning_message(self, out: list[e.Event]) -> None:
        if self.reasoning_open:
            assert self.reasoning_id is not None
            out.append(e.ReasoningMessageEnd(message_id=self.reasoning_id))
            self.reasoning_open = False

    def _close_messages(self, out: list[e.Event]) -> None:
        self._close_text(out)
        self._close_reasoning(out)

    def close_all(self) -> list[e.Event]:
        """Close every open span: messages, reasoning, tool calls, then steps innermost first."""
        out: list[e.Event] = []
        self._close_messages(out)
        for call_id in self.tools:
            out.append(e.ToolCallEnd(tool_call_id=call_id, subagent_run_id=self._owner(call_id)))
        self.tools = ()
        for name in reversed(self.steps):
            out.append(e.StepFinished(step_name=name))
        self.steps = ()
        for subagent, active in (self.subagents or {}).items():
            if active:  # a run never finishes with a sub-agent still active
                out.append(
                    e.SubagentError(subagent_run_id=subagent, message="The run ended before the sub-agent finished.", code="UNFINISHED")
                )
        self.subagents = None
        return out

    def reopen_steps(self) -> list[e.Event]:
        return [e.StepStarted(step_name=name) for name in self.steps]

    # -- custom events -----------------------------------------------------------
    def _custom(self, name: str, value: dict[str, Any], event_id: str | None = None) -> e.Custom:
        self.sequence += 1
        value = {**value, "eventId": event_id or f"{self.session['executionId']}:{self.sequence}", "sequence": self.sequence}
        return e.Custom(name=name, value=value)

    def session_event(self) -> list[e.Event]:
        if self.session_sent:
            return []
        self.session_sent = True
        value = {"schemaVersion": 1, **{k: v for k, v in self.session.items() if v is not None}}
        return [e.Custom(name=SESSION_EVENT, value=value)]

    # -- the mapping table ---------------------------------------------------------
    def translate(self, signal: s.Signal) -> list[e.Event]:
        """The signal's events; raises AGENT_PROTOCOL_ERROR, with none of them sent, for a signal that breaks the
        protocol."""
        out: list[e.Event] = []
        self._translate(signal, out)
        return out

    def translate_into(self, signal: s.Signal, out: list[bytes]) -> None:
        """Append the signal's events to `out`, encoded (the driver's held events: no list of its own per signal),
        or none of them when it breaks the protocol. A delta of a message already open, most of a run's events, is
        encoded in the message's frame: no event object, no handler call."""
        if type(signal) is s.TextDelta and self.reasoning_id is None and self.session_sent:
            open_message = self.texts.get(signal.message_id)
            if open_message is not None:
                if signal.text:  # as `_text`: an empty delta is no event
                    out.append(open_message[2] + _encode_string(signal.text) + open_message[3])
                return
        out.extend(map(_encode, self.translate(signal)))

    def _translate(self, signal: s.Signal, out: list[e.Event]) -> None:
        handler = _HANDLERS.get(type(signal))
        if handler is not None and self.session_sent:  # the common case, once the session event is out
            handler(self, signal, out)
            return
        if isinstance(signal, s.Accepted):
            return
        if isinstance(signal, s.SessionInfo):
            for key, value in (("contextId", signal.context_id), ("taskId", signal.task_id), ("sessionId", signal.session_id)):
                if value is not None:
                    self.session[key] = value
        # The event goes out once, as soon as the identities it waits for are known (with none awaited: before
        # the backend's first event); a run that ends first sends it with its closing events.
        if not self.session_sent and all(self.session.get(key) for key in self.awaits):
            out.extend(self.session_event())
        if isinstance(signal, s.SessionInfo):
            return
        if handler is None:
            raise refused(f"the backend sent a signal the gateway does not know ({type(signal).__name__})")
        handler(self, signal, out)

    def _stamped(self, signal: s.Stamped, out: list[e.Event]) -> None:
        """The wrapped signal's events; the agent's own timestamp and raw event go on the last (the one it became)."""
        mark = len(out)
        self._translate(signal.signal, out)
        if len(out) > mark:
            out[-1].timestamp, out[-1].raw_event = signal.timestamp, signal.raw_event

    def _text(self, signal: s.TextDelta, out: list[e.Event]) -> None:
        text = signal.text
        if not text:
            return
        if self.reasoning_id is not None:
            self._close_reasoning(out)
        key = signal.message_id
        open_message = self.texts.get(key)
        if open_message is None:  # the message starts: its owner is the sub-agent the signal names
            open_message = self._open_text(key, signal.role, signal.name, signal.subagent_run_id, out)
        message_id, owner, _, _ = open_message
        out.append(e.TextMessageContent(message_id=message_id, delta=text, subagent_run_id=owner))

    def _text_start(self, signal: s.TextStart, out: list[e.Event]) -> None:
        """Open the message now, empty: the agent showed it before any text (the parent of its tool calls)."""
        if signal.message_id in self.texts:
            return
        self._close_reasoning(out)
        self._open_text(signal.message_id, signal.role, signal.name, signal.subagent_run_id, out)

    def _open_text(self, key: str | None, role: str, name: str | None, subagent: str | None, out: list[e.Event]) -> OpenText:
        if role not in TEXT_ROLES:
            raise refused(f"a text message's role must be one of {sorted(TEXT_ROLES)}, not {role[:40]!r}")
        self._check_active(subagent)
        message_id = self._text_id(key)
        open_message = self.texts[key] = open_text(message_id, subagent)
        out.append(e.TextMessageStart(message_id=message_id, role=role, name=name, subagent_run_id=subagent))
        return open_message

    def _text_id(self, key: str | None) -> str:
        """The agent's id when it names one, made unique if that message was already closed in this run."""
        if key is None:
            return _new_id("msg")
        message_id, n = key, 1
        while message_id in self.text_ids_used:
            n += 1
            message_id = f"{key}.{n}"
        self.text_ids_used[message_id] = None
        return message_id

    def _text_end(self, signal: s.TextEnd, out: list[e.Event]) -> None:
        if signal.message_id is None:
            self._close_text(out)
        elif signal.message_id in self.texts:
            message_id, owner, _, _ = self.texts.pop(signal.message_id)
            out.append(e.TextMessageEnd(message_id=message_id, subagent_run_id=owner))

    def _reasoning_span(self, message_id: str | None, out: list[e.Event]) -> str:
        """The open reasoning span's id, opened under `message_id` (or an id of ours) when none is, or when the agent
        names another one."""
        self._close_text(out)
        if self.reasoning_id is not None and message_id is not None and message_id != self.reasoning_id:
            self._close_reasoning(out)
        if self.reasoning_id is None:
            self.reasoning_id = message_id or _new_id("reasoning")
            out.append(e.ReasoningStart(message_id=self.reasoning_id))
        return self.reasoning_id

    def _reasoning_message(self, message_id: str | None, out: list[e.Event]) -> str:
        span = self._reasoning_span(message_id, out)
        if not self.reasoning_open:
            self.reasoning_open = True
            out.append(e.ReasoningMessageStart(message_id=span, role="reasoning"))
        return span

    def _reasoning_start(self, signal: s.ReasoningStart, out: list[e.Event]) -> None:
        self._reasoning_span(signal.message_id, out)

    def _reasoning_message_start(self, signal: s.ReasoningMessageStart, out: list[e.Event]) -> None:
        self._reasoning_message(signal.message_id, out)

    def _reasoning(self, signal: s.ReasoningDelta, out: list[e.Event]) -> None:
        if not signal.text:
            return
        span = self._reasoning_message(signal.message_id, out)
        out.append(e.ReasoningMessageContent(message_id=span, delta=signal.text))

    def _reasoning_message_end(self, signal: s.ReasoningMessageEnd, out: list[e.Event]) -> None:
        self._close_reasoning_message(out)

    def _reasoning_end(self, signal: s.ReasoningEnd, out: list[e.Event]) -> None:
        self._close_reasoning(out)

    def _tool_start(self, signal: s.ToolStart, out: list[e.Event]) -> None:
        self._close_messages(out)
        if signal.tool_call_id not in self.tools:
            self._own(signal.tool_call_id, signal.subagent_run_id)
            self.tools = (*self.tools, signal.tool_call_id)
            start = e.ToolCallStart(
                tool_call_id=signal.tool_call_id,
                tool_call_name=signal.name,
                parent_message_id=signal.parent_message_id,
                subagent_run_id=signal.subagent_run_id,
            )
            out.append(start)

    def _tool_args(self, signal: s.ToolArgs, out: list[e.Event]) -> None:
        if signal.tool_call_id in self.tools and signal.delta:
            out.append(
                e.ToolCallArgs(tool_call_id=signal.tool_call_id, delta=signal.delta, subagent_run_id=self._owner(signal.tool_call_id))
            )

    def _tool_end(self, signal: s.ToolEnd, out: list[e.Event]) -> None:
        if signal.tool_call_id in self.tools:
            self.tools = _without(self.tools, signal.tool_call_id)
            out.append(e.ToolCallEnd(tool_call_id=signal.tool_call_id, subagent_run_id=self._owner(signal.tool_call_id)))

    def _tool_result(self, signal: s.ToolResult, out: list[e.Event]) -> None:
        self._close_messages(out)
        self._tool_end(s.ToolEnd(tool_call_id=signal.tool_call_id), out)
        out.append(
            e.ToolCallResult(
                message_id=signal.message_id or _new_id("tool"), tool_call_id=signal.tool_call_id, content=signal.content, role=signal.role
            )
        )

    def _tool_progress(self, signal: s.ToolProgress, out: list[e.Event]) -> None:
        out.append(self._custom(TOOL_PROGRESS_EVENT, {"schemaVersion": 1, "toolCallId": signal.tool_call_id, **signal.data}))

    def _step_start(self, signal: s.StepStart, out: list[e.Event]) -> None:
        self._close_messages(out)
        if signal.name not in self.steps:
            self.steps = (*self.steps, signal.name)
            out.append(e.StepStarted(step_name=signal.name))

    def _step_finish(self, signal: s.StepFinish, out: list[e.Event]) -> None:
        """Closes the step; a step that never opened in this run (nor was re-opened) is shown as a zero-length pair."""
        self._close_messages(out)
        if signal.name in self.steps:
            self.steps = _without(self.steps, signal.name)
        else:
            out.append(e.StepStarted(step_name=signal.name))
        out.append(e.StepFinished(step_name=signal.name))

    def _pipeline(self, signal: s.PipelineEvent, out: list[e.Event]) -> None:
        envelope = signal.envelope
        if envelope is not None and envelope.get("eventId") and isinstance(envelope.get("sequence"), int):
            out.append(e.Custom(name=PIPELINE_EVENT, value=envelope))  # the agent's envelope, as it came
            return
        value = {"eventType": signal.event_type, **signal.data} if envelope is None else envelope
        out.append(self._custom(PIPELINE_EVENT, value, signal.event_id))

    def _artifact(self, signal: s.Artifact, out: list[e.Event]) -> None:
        out.append(self._custom(ARTIFACT_EVENT, signal.data))

    def _activity(self, signal: s.ActivitySnapshot, out: list[e.Event]) -> None:
        message_id = signal.message_id or _new_id("activity")
        content = bounded(signal.content, MAX_SNAPSHOT_BYTES, "an activity snapshot")
        if self.activities is None:
            self.activities = {}
        self.activities[message_id] = content
        out.append(e.ActivitySnapshot(message_id=message_id, activity_type=signal.activity_type, content=content, replace=signal.replace))

    def _activity_delta(self, signal: s.ActivityDelta, out: list[e.Event]) -> None:
        activities = self.activities or {}
        before = activities.get(signal.message_id, documents.UNSET)
        activities[signal.message_id] = patched(before, signal.patch, "activity")
        out.append(e.ActivityDelta(message_id=signal.message_id, activity_type=signal.activity_type, patch=signal.patch))

    # -- documents: shared state, snapshots, raw and custom events ------------------------
    def _state_snapshot(self, signal: s.StateSnapshot, out: list[e.Event]) -> None:
        self._close_messages(out)
        self.state = bounded(signal.snapshot, self.state_limit, "the state snapshot", documents.STATE_FLAG)
        out.append(e.StateSnapshot(snapshot=self.state))

    def _state_delta(self, signal: s.StateDelta, out: list[e.Event]) -> None:
        self._close_messages(out)
        self.state = patched(self.state, signal.patch, "state", self.state_limit, documents.STATE_FLAG)
        out.append(e.StateDelta(delta=signal.patch))

    def _messages_snapshot(self, signal: s.MessagesSnapshot, out: list[e.Event]) -> None:
        self._close_messages(out)
        for index, message in enumerate(signal.messages):
            if not isinstance(message, dict) or not isinstance(message.get("id"), str) or not isinstance(message.get("role"), str):
                raise refused(f"message {index} of the messages snapshot has no id or role")
        out.append(e.MessagesSnapshot(messages=bounded(signal.messages, self.state_limit, "the messages snapshot", documents.STATE_FLAG)))

    def _raw(self, signal: s.Raw, out: list[e.Event]) -> None:
        out.append(e.Raw(event=bounded(signal.event, MAX_SNAPSHOT_BYTES, "a raw event"), source=signal.source))

    def _custom_event(self, signal: s.CustomEvent, out: list[e.Event]) -> None:
        if not signal.name or signal.name in IAC_NAMES:
            raise refused(f"a custom event may not be named {signal.name[:80]!r}")
        out.append(e.Custom(name=signal.name, value=bounded(signal.value, MAX_SNAPSHOT_BYTES, "a custom event's value")))

    def _encrypted(self, signal: s.ReasoningEncrypted, out: list[e.Event]) -> None:
        if signal.subtype not in ("message", "tool-call"):
            raise refused(f"an encrypted reasoning value's subtype must be message or tool-call, not {signal.subtype[:40]!r}")
        out.append(e.ReasoningEncryptedValue(subtype=signal.subtype, entity_id=signal.entity_id, encrypted_value=signal.encrypted_value))

    # -- sub-agents ------------------------------------------------------------------------
    def _subagent_start(self, signal: s.SubagentStart, out: list[e.Event]) -> None:
        if self.subagents is None:
            self.subagents = {}
        if signal.subagent_run_id in self.subagents:
            raise refused(f"sub-agent {signal.subagent_run_id[:80]!r} was already started in this run")
        self._close_messages(out)
        self.subagents[signal.subagent_run_id] = True
        out.append(
            e.SubagentStarted(
                subagent_run_id=signal.subagent_run_id,
                name=signal.name,
                description=signal.description,
                parent_tool_call_id=signal.parent_tool_call_id,
                parent_message_id=signal.parent_message_id,
            )
        )

    def _subagent_end(self, signal: s.SubagentFinish | s.SubagentError, out: list[e.Event]) -> None:
        if not (self.subagents or {}).get(signal.subagent_run_id):
            raise refused(f"sub-agent {signal.subagent_run_id[:80]!r} is not active")
        self._close_owned(signal.subagent_run_id, out)
        assert self.subagents is not None
        self.subagents[signal.subagent_run_id] = False
        if isinstance(signal, s.SubagentError):
            out.append(e.SubagentError(subagent_run_id=signal.subagent_run_id, message=signal.message, code=signal.code))
        else:
            out.append(
                e.SubagentFinished(subagent_run_id=signal.subagent_run_id, outcome=e.SubagentFinishedOutcome(), result=signal.result)
            )

    def _close_owned(self, subagent: str, out: list[e.Event]) -> None:
        """The sub-agent's open messages and tool calls end with it."""
        for key, (message_id, owner, _, _) in list(self.texts.items()):
            if owner == subagent:
                del self.texts[key]
                out.append(e.TextMessageEnd(message_id=message_id, subagent_run_id=subagent))
        for call_id in self.tools:
            if self._owner(call_id) == subagent:
                self.tools = _without(self.tools, call_id)
                out.append(e.ToolCallEnd(tool_call_id=call_id, subagent_run_id=subagent))

    def _usage(self, signal: s.Usage, out: list[e.Event]) -> None:
        self._add_usage(signal)

    def _add_usage(self, signal: s.Usage) -> None:
        """Usage reports are summed per (provider, model) into RUN_FINISHED.usage, each in constant time; more than
        MAX_USAGE_ENTRIES pairs, or a name past MAX_USAGE_NAME, is refused."""
        usage = self.usage if self.usage is not None else {}
        key = (signal.provider, signal.model)
        entry = usage.get(key)
        if entry is None:
            if len(usage) >= MAX_USAGE_ENTRIES:
                raise refused(f"the run's usage names more than {MAX_USAGE_ENTRIES} providers and models")
            if any(name is not None and len(name) > MAX_USAGE_NAME for name in key):
                raise refused(f"a usage entry's provider or model is longer than {MAX_USAGE_NAME} characters")
            entry = usage[key] = e.TokenUsage(provider=signal.provider, model=signal.model)
            self.usage = usage
        for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens"):
            value = getattr(signal, name)
            if value is not None:
                setattr(entry, name, (getattr(entry, name) or 0) + value)
        total = signal.total_tokens
        if total is None and signal.input_tokens is not None and signal.output_tokens is not None:
            total = signal.input_tokens + signal.output_tokens  # a report without its own total
        if total is not None:
            entry.total_tokens = (entry.total_tokens or 0) + total

    def usage_entries(self) -> list[e.TokenUsage] | None:
        """RUN_FINISHED's (or RUN_ERROR's) usage: one entry per (provider, model), in the order first reported."""
        return list(self.usage.values()) if self.usage else None

    def identities(self) -> dict[str, str]:
        return {k: v for k, v in self.session.items() if k in ("contextId", "taskId", "sessionId") and v is not None}


_HANDLERS: dict[type[s.Signal], Callable[[Translator, Any, list[e.Event]], None]] = {
    s.Stamped: Translator._stamped,
    s.TextStart: Translator._text_start,
    s.TextDelta: Translator._text,
    s.TextEnd: Translator._text_end,
    s.ReasoningStart: Translator._reasoning_start,
    s.ReasoningMessageStart: Translator._reasoning_message_start,
    s.ReasoningDelta: Translator._reasoning,
    s.ReasoningMessageEnd: Translator._reasoning_message_end,
    s.ReasoningEnd: Translator._reasoning_end,
    s.ToolStart: Translator._tool_start,
    s.ToolArgs: Translator._tool_args,
    s.ToolEnd: Translator._tool_end,
    s.ToolResult: Translator._tool_result,
    s.ToolProgress: Translator._tool_progress,
    s.StepStart: Translator._step_start,
    s.StepFinish: Translator._step_finish,
    s.PipelineEvent: Translator._pipeline,
    s.Artifact: Translator._artifact,
    s.ActivitySnapshot: Translator._activity,
    s.ActivityDelta: Translator._activity_delta,
    s.StateSnapshot: Translator._state_snapshot,
    s.StateDelta: Translator._state_delta,
    s.MessagesSnapshot: Translator._messages_snapshot,
    s.Raw: Translator._raw,
    s.CustomEvent: Translator._custom_event,
    s.ReasoningEncrypted: Translator._encrypted,
    s.SubagentStart: Translator._subagent_start,
    s.SubagentFinish: Translator._subagent_end,
    s.SubagentError: Translator._subagent_end,
    s.Usage: Translator._usage,
}
