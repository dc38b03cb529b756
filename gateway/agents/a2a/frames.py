"""Reads A2A frames into signals, pure and without network (IAC_CODE_A2A_WIRE.md §3, §5 identities, §6 stop rule)."""

from __future__ import annotations

import json
from typing import Any

from gateway.agents import signals as s
from gateway.agents.a2a.inputs import interrupt_from_input
from gateway.agents.a2a.pipeline import PipelineReader, usage_signal

TERMINAL_STATES = frozenset(["completed", "canceled", "failed", "rejected", "auth-required"])
_WRAPPERS = ("task", "statusUpdate", "artifactUpdate", "message")
_OLD_KINDS = {"task": "task", "status-update": "statusUpdate", "artifact-update": "artifactUpdate", "message": "message"}
_AGENT_ROLES = (None, "", "ROLE_AGENT", "agent")
ALIGN_CHARS = 256 * 1024  # the longest bounded task history lined up with what was said


class ProtocolViolation(Exception):
    """A frame broke the identity mapping (foreign context or task, changed session)."""


def normalise_state(state: Any) -> str | None:
    """`TASK_STATE_INPUT_REQUIRED` and `input-required` both become `input-required`; no state stays None."""
    if not state:
        return None
    text = str(state).lower()
    if text.startswith("task_state_"):
        text = text[len("task_state_") :]
    return text.replace("_", "-")


def unwrap(result: Any) -> tuple[str, dict[str, Any]]:
    """(kind, payload): the object under `task`, `statusUpdate`, `artifactUpdate` or `message`, an older frame
    named by `kind`, or a bare result recognised by its fields (the runtime's client reads `result` itself then)."""
    if not isinstance(result, dict):
        return "none", {}
    for key in _WRAPPERS:
        if isinstance(result.get(key), dict):
            return key, result[key]
    if result.get("kind") in _OLD_KINDS:
        return _OLD_KINDS[result["kind"]], result
    if "artifact" in result:
        return "artifactUpdate", result
    if "parts" in result and "role" in result:
        return "message", result
    if "id" in result and "taskId" not in result and "status" in result:
        return "task", result
    return "statusUpdate", result


def iac_of(payload: dict[str, Any]) -> dict[str, Any]:
    metadata = payload.get("metadata")
    iac = metadata.get("iac_code") if isinstance(metadata, dict) else None
    return iac if isinstance(iac, dict) else {}


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class FrameReader:
    """One per run: the bound identities, what was already shown, the inputs the agent requires, and whether the
    last frame ends the reading (a new input, a terminal state, or input-required with no input)."""

    def __init__(
        self,
        context_id: str,
        task_id: str | None = None,
        session_id: str | None = None,
        cursor: int = 0,
        applied: frozenset[str] = frozenset(),
    ) -> None:
        self.context_id = context_id
        self.task_id = task_id
        self.session_id = session_id
        self.state: str | None = None
        self.stop = False
        self.frames = 0
        self.inputs: list[tuple[s.InterruptRequest, dict[str, Any]]] = []
        self.applied = set(applied)  # input ids already answered: a repeat of one is not a new interrupt
        self.text_shown = False
        self.status_message: str | None = None
        self.tools_started: set[str] = set()
        self.results_sent: set[str] = set()
        self.pipeline = PipelineReader(cursor)
        self.announced = False
        self.recovering = False  # adopted: the first snapshot brings the text written while nobody read
        # Adopted runs only (None otherwise): all text shown per message id, the log's included; whether the
        # subscription's snapshot was read and the task must be read again (`reconciled`); and per message, the
        # text the task held then, which the subscription may deliver again, with the chunks held meanwhile.
        self.said: dict[str, str] | None = None
        self.reconcile = False
        self.echo: dict[str, str] = {}
        self.held: dict[str, str] = {}
        self._texted_at = 0  # the frame count at the last frame with text
        self.pipeline_text: dict[str, str] = {}  # adopted: pipeline text already shown per message id, not yet met again
        self._adoption: tuple[Any, ...] = ()

    def adoption(self) -> dict[str, Any] | None:
        """What another replica needs to follow the task, when it changed since last asked (else None)."""
        state = (self.task_id, self.session_id, self.pipeline.cursor, len(self.applied))
        if self.task_id is None or state == self._adoption:
            return None
        self._adoption = state
        return {
            "taskId": self.task_id,
            "contextId": self.context_id,
            "sessionId": self.session_id,
            "cursor": self.pipeline.cursor,
            "applied": sorted(self.applied),
        }

    # -- identities ----------------------------------------------------------------------------------
    def check(self, task_id: Any, context_id: Any) -> None:
        if context_id and context_id != self.context_id:
            raise ProtocolViolation(f"foreign contextId {str(context_id)[:80]!r}")
        if task_id:
            if self.task_id is None:
                self.task_id = str(task_id)
            elif task_id != self.task_id:
                raise ProtocolViolation(f"foreign taskId {str(task_id)[:80]!r}")

    def _session(self, session: Any, out: list[s.Signal]) -> None:
        if not isinstance(session, str) or not session:
            return
        if self.session_id is not None and session != self.session_id:
            raise ProtocolViolation("the session id changed")
        if self.session_id is None:
            self.session_id = session
            if self.announced:
                out.append(s.SessionInfo(session_id=session))

    # -- one frame -----------------------------------------------------------------------------------
    def read(self, result: Any) -> list[s.Signal]:
        """The signals of one frame's `result`; afterwards `stop` says whether to stop reading this stream."""
        kind, payload = unwrap(result)
        self.frames += 1
        out: list[s.Signal] = []
        inputs_before = len(self.inputs)
        if kind == "task":
            self._task(payload, out)
        elif kind == "statusUpdate":
            self.check(payload.get("taskId"), payload.get("contextId"))
            self._status(payload.get("status") or {}, iac_of(payload), out)
            self._iac(iac_of(payload), out)
        elif kind == "artifactUpdate":
            self.check(payload.get("taskId"), payload.get("contextId"))
            artifact = payload.get("artifact")
            if isinstance(artifact, dict):
                out.append(s.Artifact(data={"schemaVersion": 1, **artifact}))
        elif kind == "message":
            self.check(payload.get("taskId"), payload.get("contextId"))
            if payload.get("role") in _AGENT_ROLES:
                self._text(payload, out)
        if not self.announced and self.task_id:
            self.announced = True  # the first valid frame: identities are known (on a resume, the answer is accepted)
            out.insert(0, s.SessionInfo(context_id=self.context_id, task_id=self.task_id, session_id=self.session_id))
        self.stop = len(self.inputs) > inputs_before or self.state in TERMINAL_STATES or self._idle()
        if self.held and (self.stop or self.frames != self._texted_at):  # held chunks wait for the next text only
            self.flush_held(out)
        return out

    def _idle(self) -> bool:
        return self.state == "input-required" and not self.inputs

    def _task(self, task: dict[str, Any], out: list[s.Signal]) -> None:
        """A Task snapshot: its state, its text only when nothing was shown yet, and the inputs it still waits for.
        Its metadata repeats the last status update's signals, so tools, usage and pipeline events are not re-read."""
        self.check(task.get("id"), task.get("contextId"))
        status = task.get("status") or {}
        self._state(status)
        iac = iac_of(task)
        self._session(iac.get("iacCodeSessionId"), out)
        if self.recovering:
            self._missed_text(task, out)  # what the agent wrote while no replica read its stream
            self.recovering = False
            self.reconcile = self.said is not None
        elif not self.text_shown:
            message = status.get("message")
            if isinstance(message, dict) and _text_parts(message):
                self._text(message, out)
            else:
                for message in trailing_agent_messages(task.get("history")):
                    self._text(message, out)
        self._inputs(iac)

    def message_id(self, raw: Any) -> str | None:
        """The AG-UI message id of an agent message: its own id when it names the task (the runtime's
        `<task>-message`), else scoped by the task (`<task>:<id>`), so an agent that reuses ids across turns
        never merges two turns' answers in a client. Runs of one task go on with the same message."""
        if not isinstance(raw, str) or not raw:
            return None
        if self.task_id is None or self.task_id in raw:
            return raw
        return f"{self.task_id}:{raw}"

    def reconciled(self, task: dict[str, Any]) -> list[s.Signal]:
        """The task read again once the subscription is tapped. a2a-sdk reads its snapshot before tapping the
        task's events: what the task said in between reached neither, and what the tap's lagging queue still
        held comes again. The first is shown from this read; the second is recognised in `_text`."""
        out: list[s.Signal] = []
        self.echo.update(self._missed_text(task, out))
        return out

    def _missed_text(self, task: dict[str, Any], out: list[s.Signal]) -> dict[str, str]:
        """Show what the task's messages hold past what was said of each, and return their whole text. Messages
        already begun come first; a new message whose text is all the others' said text joined is the runtime's
        repeat of the turn's answer (the final text), not text of its own."""
        said = self.said if self.said is not None else {}  # adopted runs only: `said` is set
        full: dict[str, str] = {}
        for raw, text in _recover_text_of(task).items():
            message_id = self.message_id(raw)
            if message_id is not None:
                full[message_id] = full.get(message_id, "") + text
        for message_id in sorted(full, key=lambda known: known not in said):
            text = full[message_id]
            if message_id not in said:
                others = "".join(value for key, value in said.items() if key != message_id)
                if others and text == others:
                    continue
            new = _beyond(said.get(message_id, ""), text)
            if new:
                self.text_shown = True
                self._say(new, message_id, out)
        return full

    def _past_echo(self, message_id: str, text: str) -> str:
        """Of a chunk of a message the task was read with, what is new: a run of chunks that ends exactly where that
        read ended was delivered again, and is dropped; chunks that may still be such a run are held; anything else
        is new, with what was held."""
        echo = self.echo[message_id]
        run = self.held.pop(message_id, "") + text
        if echo.endswith(run):
            del self.echo[message_id]
            return ""
        if run in echo:
            self.held[message_id] = run
            return ""
        del self.echo[message_id]
        return run

    def flush_held(self, out: list[s.Signal]) -> None:
        """Chunks held as a possible repeat, shown after all: something else came (never lose text)."""
        held, self.held = self.held, {}
        self.echo.clear()
        for message_id, text in held.items():
            self._say(text, message_id, out)

    def _say(self, text: str, message_id: str | None, out: list[s.Signal]) -> None:
        out.append(s.TextDelta(text=text, message_id=message_id))
        if self.said is not None and message_id is not None:
            self.said[message_id] = self.said.get(message_id, "") + text

    def _state(self, status: dict[str, Any]) -> None:
        state = normalise_state(status.get("state"))
        if state is not None:
            self.state = state

    def _status(self, status: dict[str, Any], iac: dict[str, Any], out: list[s.Signal]) -> None:
        self._state(status)
        message = status.get("message")
        if not isinstance(message, dict):
            return
        self.check(message.get("taskId"), message.get("contextId"))
        if message.get("role") not in _AGENT_ROLES:
            return  # the user's own words (an echo of the input): never shown as the agent's
        final = iac.get("assistantFinal")
        if isinstance(final, dict) and final.get("complete") is True and self.text_shown:
            return  # the turn's whole answer again, under another message id: already shown
        self._text(message, out)

    def _text(self, message: dict[str, Any], out: list[s.Signal]) -> None:
        text = _text_parts(message)
        if not text:
            return
        message_id = self.message_id(message.get("messageId"))
        self._texted_at = self.frames
        if message_id is not None and message_id in self.echo:
            text = self._past_echo(message_id, text)
            if not text:
                return
        if self.status_message is not None and message_id != self.status_message:
            out.append(s.TextEnd(message_id=self.status_message))  # a new agent message closes the previous one
        self.status_message = message_id
        self.text_shown = True
        self._say(text, message_id, out)

    def _iac(self, iac: dict[str, Any], out: list[s.Signal]) -> None:
        if not iac:
            return
        self._session(iac.get("iacCodeSessionId"), out)
        thinking = iac.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "raw_thinking" and isinstance(thinking.get("text"), str):
            out.append(s.ReasoningDelta(text=thinking["text"]))
        final = iac.get("assistantFinal")
        if isinstance(final, dict) and final.get("complete") is True and not self.text_shown and isinstance(final.get("text"), str):
            self._text({"messageId": final.get("messageId"), "parts": [{"text": final["text"]}]}, out)
        if isinstance(iac.get("tool"), dict):
            self.tool(iac["tool"], out)
        if isinstance(iac.get("usage"), dict):
            out.append(usage_signal(iac["usage"]))
        envelopes = [iac["pipeline"]] if isinstance(iac.get("pipeline"), dict) else []
        batch = iac.get("pipelineBatch")
        if isinstance(batch, dict) and isinstance(batch.get("events"), list):
            envelopes.extend(e for e in batch["events"] if isinstance(e, dict))
        for envelope in envelopes:
            self.envelope(envelope, out, recovered=False)
        self._inputs(iac)

    def envelope(self, envelope: dict[str, Any], out: list[s.Signal], *, recovered: bool) -> None:
        """One pipeline envelope, live or recovered: de-duplicated, then mapped (tools go through `tool`)."""
        if not self.pipeline.admit(envelope, recovered=recovered):
            return
        self._session(envelope.get("iacCodeSessionId"), out)
        if not self.pipeline_text:
            self.pipeline.map(envelope, out, self.tool)
            return
        mapped: list[s.Signal] = []
        self.pipeline.map(envelope, mapped, self.tool)
        out.extend(self._unseen_text(signal) if isinstance(signal, s.TextDelta) else signal for signal in mapped)

    def _unseen_text(self, delta: s.TextDelta) -> s.TextDelta:
        """An adopter meets pipeline text again that its log already shows: only what the log lacks goes on."""
        shown = self.pipeline_text.get(delta.message_id or "", "")
        if not shown:
            return delta
        if shown.startswith(delta.text):
            self.pipeline_text[delta.message_id or ""] = shown[len(delta.text) :]
            return s.TextDelta(text="", message_id=delta.message_id)
        self.pipeline_text.pop(delta.message_id or "", None)
        return s.TextDelta(text=delta.text[len(shown) :] if delta.text.startswith(shown) else delta.text, message_id=delta.message_id)

    def tool(self, tool: dict[str, Any], out: list[s.Signal]) -> None:
        call_id = tool.get("toolUseId")
        if not isinstance(call_id, str) or not call_id:
            return
        status = tool.get("status")
        name = str(tool.get("name") or tool.get("toolName") or "tool")
        if status == "started" or (status == "input_complete" and call_id not in self.tools_started):
            self.tools_started.add(call_id)
            out.append(s.ToolStart(tool_call_id=call_id, name=name))
        if status == "input_complete":
            if "toolInput" in tool:
                out.append(s.ToolArgs(tool_call_id=call_id, delta=json.dumps(tool["toolInput"])))
            elif tool.get("inputSummary") is not None:
                out.append(s.ToolArgs(tool_call_id=call_id, delta=json.dumps({"summary": tool["inputSummary"]})))
            out.append(s.ToolEnd(tool_call_id=call_id))
        elif status in ("completed", "failed") and call_id not in self.results_sent:
            self.results_sent.add(call_id)
            out.append(s.ToolResult(tool_call_id=call_id, content=_json_text(tool.get("result", ""))))
        elif status == "progress":
            out.append(s.ToolProgress(tool_call_id=call_id, data={k: v for k, v in tool.items() if k != "toolUseId"}))

    def _inputs(self, iac: dict[str, Any]) -> None:
        """`iac_code.input`, then the `pendingPermissions` list (whose entries are sideband inputs)."""
        if isinstance(iac.get("input"), dict):
            self._input(iac["input"])
        pending = iac.get("pendingPermissions")
        for envelope in pending if isinstance(pending, list) else []:
            if isinstance(envelope, dict):
                self._input({"kind": "permission", "required": True, **envelope, "sideband": True})

    def _input(self, envelope: dict[str, Any]) -> None:
        input_id = envelope.get("inputId")
        if envelope.get("required") is not True or not isinstance(input_id, str) or not input_id:
            return
        if input_id in self.applied:
            return  # answered already: the runtime may repeat an input it took
        known = next((pair for pair in self.inputs if pair[1]["inputId"] == input_id), None)
        if known is not None:
            if envelope.get("sideband") is True:  # listed as pending as well: answered the sideband way
                known[1]["sideband"] = True
                if known[0].metadata is not None:
                    known[0].metadata["sideband"] = True
            return
        self.check(envelope.get("requestTaskId"), envelope.get("contextId"))
        self.inputs.append(interrupt_from_input(envelope, self.task_id, self.context_id))


def _recover_text_of(task: dict[str, Any]) -> dict[str | None, str]:
    """Each agent message of the current turn, its chunks joined, from a Task's history and status."""
    messages = trailing_agent_messages(task.get("history"))
    current = (task.get("status") or {}).get("message")
    if isinstance(current, dict) and current.get("role") in _AGENT_ROLES:
        messages.append(current)
    full: dict[str | None, str] = {}
    for message in messages:
        message_id = message.get("messageId") if isinstance(message.get("messageId"), str) else None
        full[message_id] = full.get(message_id, "") + _text_parts(message)
    return full


def _beyond(said: str, text: str) -> str | None:
    """What `text` (a message as the task holds it, perhaps only its last chunks: GetTask's history is bounded)
    has past what was `said` of it; None when the two cannot be lined up."""
    if text.startswith(said):
        return text[len(said) :]
    if len(text) > ALIGN_CHARS:
        return None
    for overlap in range(min(len(text), len(said)), 0, -1):  # the window's first chunks end what was said
        if said.endswith(text[:overlap]):
            return text[overlap:]
    return None


def _text_parts(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def trailing_agent_messages(history: Any) -> list[dict[str, Any]]:
    """The agent's messages after the last user message of a Task's history: the text of the current turn."""
    if not isinstance(history, list):
        return []
    trailing: list[dict[str, Any]] = []
    for message in history:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("ROLE_USER", "user"):
            trailing = []
        elif message.get("role") in _AGENT_ROLES:
            trailing.append(message)
    return trailing
