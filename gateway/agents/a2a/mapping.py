"""A2A frames (1.0 and older `kind` style) to the engine's signals, with the identity checks of A2A_BACKEND.md."""

from __future__ import annotations

import json
from typing import Any

from gateway.agents import signals as s

PIPELINE_CUSTOM_TYPES = frozenset(
    [
        "pipeline_started",
        "pipeline_resumed",
        "pipeline_completed",
        "pipeline_error",
        "pipeline_warning",
        "backup_blocked",
        "candidate_started",
        "candidate_completed",
        "candidate_failed",
        "candidate_interrupted",
        "candidate_restart_requested",
        "candidate_selected",
        "candidate_detail_shown",
        "candidate_step_failed",
        "sub_pipeline_started",
        "sub_pipeline_completed",
        "sub_step_failed",
        "step_failed",
        "stack_progress",
        "stack_instances_progress",
        "stack_current_changed",
        "cleanup_started",
        "cleanup_progress",
        "cleanup_completed",
        "cleanup_failed",
        "rollback_triggered",
        "rollback_completed",
        "context_compaction_started",
        "context_compacted",
        "context_compaction_failed",
        "fields_marked_stale",
        "diagram_shown",
        "mcp_status",
        "tool_progress",
    ]
)
_OLD_KINDS = {"task": "task", "status-update": "statusUpdate", "artifact-update": "artifactUpdate", "message": "message"}


class ProtocolViolation(Exception):
    """A frame broke the identity mapping (foreign context or task, changed session)."""


def normalise_state(state: Any) -> str:
    """`TASK_STATE_INPUT_REQUIRED` and `input-required` both become `input-required`."""
    text = str(state or "").lower()
    if text.startswith("task_state_"):
        text = text[len("task_state_") :]
    return text.replace("_", "-")


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class FrameMapper:
    """One per run: remembers the bound identities, what was streamed, and the inputs the agent requires."""

    def __init__(self, context_id: str, task_id: str | None = None, session_id: str | None = None, last_sequence: int = 0) -> None:
        self.context_id = context_id
        self.task_id = task_id
        self.session_id = session_id
        self.state = "working"
        self.inputs: list[tuple[s.InterruptRequest, dict[str, Any]]] = []
        self.text_streamed = False
        self.results_sent: set[str] = set()
        self.seen_events: set[str] = set()
        self.last_sequence = last_sequence
        self.announced = False
        self.text_message_id: str | None = None

    # -- identity -------------------------------------------------------------------------------
    def _check(self, task_id: Any, context_id: Any) -> None:
        if context_id and context_id != self.context_id:
            raise ProtocolViolation(f"foreign contextId {context_id!r}")
        if task_id:
            if self.task_id is None:
                self.task_id = task_id
            elif task_id != self.task_id:
                raise ProtocolViolation(f"foreign taskId {task_id!r}")

    def map(self, result: dict[str, Any]) -> list[s.Signal]:
        if "kind" in result and result["kind"] in _OLD_KINDS:
            result = {_OLD_KINDS[result["kind"]]: result}
        out: list[s.Signal] = []
        if "task" in result:
            task = result["task"]
            self._check(task.get("id"), task.get("contextId"))
            self._status(task.get("status") or {}, out, _is_final(task.get("metadata")))
            self._iac(task.get("metadata"), out)
            for pending in ((task.get("metadata") or {}).get("iac_code") or {}).get("pendingPermissions") or []:
                self._input({**pending, "kind": pending.get("kind", "permission"), "required": True}, out)
        elif "statusUpdate" in result:
            update = result["statusUpdate"]
            self._check(update.get("taskId"), update.get("contextId"))
            self._status(update.get("status") or {}, out, _is_final(update.get("metadata")))
            self._iac(update.get("metadata"), out)
        elif "artifactUpdate" in result:
            update = result["artifactUpdate"]
            self._check(update.get("taskId"), update.get("contextId"))
            artifact = update.get("artifact") or {}
            data = {
                "artifactId": artifact.get("artifactId"),
                "title": artifact.get("name"),
                "description": artifact.get("description"),
                "parts": artifact.get("parts") or [],
            }
            out.append(s.Artifact(data={k: v for k, v in data.items() if v is not None}))
        elif "message" in result:
            message = result["message"]
            self._check(message.get("taskId"), message.get("contextId"))
            self._text_parts(message, out)
            out.append(s.TextEnd())
        if not self.announced and self.task_id:
            # The first valid frame: identities are known (and, on a resume, the answer is accepted).
            self.announced = True
            out.insert(0, s.SessionInfo(context_id=self.context_id, task_id=self.task_id, session_id=self.session_id))
        return out

    # -- pieces ----------------------------------------------------------------------------------
    def _status(self, status: dict[str, Any], out: list[s.Signal], final: bool = False) -> None:
        if status.get("state"):
            self.state = normalise_state(status["state"])
        message = status.get("message")
        if message:
            self._check(message.get("taskId"), message.get("contextId"))
            if final and self.text_streamed:
                return  # the final status repeats the whole answer under another message id: already shown
            self._text_parts(message, out)

    def _text_parts(self, message: dict[str, Any], out: list[s.Signal]) -> None:
        message_id = message.get("messageId")
        if self.text_message_id is not None and message_id and message_id != self.text_message_id:
            out.append(s.TextEnd())
        self.text_message_id = message_id or self.text_message_id
        for part in message.get("parts") or []:
            if isinstance(part.get("text"), str) and part["text"]:
                self.text_streamed = True
                out.append(s.TextDelta(text=part["text"]))

    def _iac(self, metadata: Any, out: list[s.Signal]) -> None:
        iac = (metadata or {}).get("iac_code") if isinstance(metadata, dict) else None
        if not isinstance(iac, dict):
            return
        session = iac.get("iacCodeSessionId")
        if isinstance(session, str):
            if self.session_id is not None and session != self.session_id:
                raise ProtocolViolation("the session id changed")
            if self.session_id is None:
                self.session_id = session
                if self.announced:
                    out.append(s.SessionInfo(session_id=session))
        thinking = iac.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "raw_thinking" and thinking.get("text"):
            out.append(s.ReasoningDelta(text=thinking["text"]))
        final = iac.get("assistantFinal")
        if isinstance(final, dict) and final.get("complete") and not self.text_streamed and isinstance(final.get("text"), str):
            out.append(s.TextDelta(text=final["text"]))
            self.text_streamed = True
        if isinstance(iac.get("tool"), dict):
            self._tool(iac["tool"], out)
        if isinstance(iac.get("usage"), dict):
            self._usage(iac["usage"], out)
        if isinstance(iac.get("pipeline"), dict):
            self.pipeline(iac["pipeline"], out)
        batch = iac.get("pipelineBatch")
        if isinstance(batch, dict):
            for envelope in batch.get("events") or []:
                if isinstance(envelope, dict):
                    self.pipeline(envelope, out)
        if isinstance(iac.get("input"), dict):
            self._input(iac["input"], out)

    def _tool(self, tool: dict[str, Any], out: list[s.Signal]) -> None:
        call_id = str(tool.get("toolUseId") or "")
        status = tool.get("status")
        if not call_id:
            return
        if status == "started":
            out.append(s.ToolStart(tool_call_id=call_id, name=str(tool.get("name") or "tool")))
        elif status == "input_complete":
            args = tool.get("toolInput", tool.get("inputSummary"))
            if args is not None:
                out.append(s.ToolArgs(tool_call_id=call_id, delta=_text(args)))
            out.append(s.ToolEnd(tool_call_id=call_id))
        elif status in ("completed", "failed") and call_id not in self.results_sent:
            self.results_sent.add(call_id)
            out.append(s.ToolResult(tool_call_id=call_id, content=_text(tool.get("result", ""))))
        elif status == "progress":
            data = {k: v for k, v in tool.items() if k not in ("status", "toolUseId")}
            out.append(s.ToolProgress(tool_call_id=call_id, data=data))

    def _usage(self, usage: dict[str, Any], out: list[s.Signal]) -> None:
        out.append(
            s.Usage(
                input_tokens=_int(usage.get("inputTokens")),
                output_tokens=_int(usage.get("outputTokens")),
                reasoning_tokens=_int(usage.get("reasoningTokens")),
                model=usage.get("model"),
                provider=usage.get("provider"),
            )
        )

    def pipeline(self, envelope: dict[str, Any], out: list[s.Signal]) -> None:
        event_id = envelope.get("eventId")
        sequence = _int(envelope.get("sequence"))
        if (event_id and event_id in self.seen_events) or (sequence is not None and sequence <= self.last_sequence):
            return  # duplicates are dropped by eventId and sequence
        if event_id:
            self.seen_events.add(event_id)
        if sequence is not None:
            self.last_sequence = sequence
        kind = envelope.get("eventType")
        data: dict[str, Any] = envelope["data"] if isinstance(envelope.get("data"), dict) else {}
        step = envelope.get("step") or data.get("step") or data.get("name")
        if kind in ("step_started", "step_finished") and step:
            out.append(s.StepStart(name=str(step)) if kind == "step_started" else s.StepFinish(name=str(step)))
        elif kind == "text_delta" and data.get("text"):
            out.append(s.TextDelta(text=str(data["text"])))
        elif kind == "thinking_delta" and data.get("text"):
            out.append(s.ReasoningDelta(text=str(data["text"])))
        elif kind == "tool_started":
            self._tool({**data, "status": "started"}, out)
        elif kind == "tool_result":
            self._tool({**data, "status": "completed"}, out)
        elif kind == "usage":
            self._usage(data, out)
        elif kind in PIPELINE_CUSTOM_TYPES:
            extra = {k: envelope[k] for k in ("scope", "step", "candidate", "candidateStep") if envelope.get(k) is not None}
            out.append(s.PipelineEvent(event_type=kind, data={**extra, **data}, event_id=event_id))

    def _input(self, envelope: dict[str, Any], out: list[s.Signal]) -> None:
        if not envelope.get("required") or not envelope.get("inputId"):
            return
        self._check(envelope.get("requestTaskId"), envelope.get("contextId"))
        if any(meta["inputId"] == envelope["inputId"] for _, meta in self.inputs):
            return
        self.inputs.append(interrupt_from_input(envelope, self.task_id))


def _is_final(metadata: Any) -> bool:
    """Whether a status carries `iac_code.assistantFinal.complete`: the turn's whole text, repeated."""
    iac = metadata.get("iac_code") if isinstance(metadata, dict) else None
    final = iac.get("assistantFinal") if isinstance(iac, dict) else None
    return isinstance(final, dict) and final.get("complete") is True


def interrupt_from_input(envelope: dict[str, Any], task_id: str | None) -> tuple[s.InterruptRequest, dict[str, Any]]:
    """An input envelope as an interrupt, plus what the resume needs to answer it."""
    kind = str(envelope.get("kind") or "input")
    input_id = str(envelope["inputId"])
    options = envelope.get("options") or []
    values = [str(o.get("id") or o.get("value")) if isinstance(o, dict) else str(o) for o in options]
    labels = [
        {
            "value": v,
            "label": (o.get("label") or o.get("title") or v) if isinstance(o, dict) else v,
            **({k: o[k] for k in ("summary", "cost") if isinstance(o, dict) and k in o}),
        }
        for v, o in zip(values, options, strict=True)
    ]
    meta: dict[str, Any] = {
        "kind": kind,
        "inputId": input_id,
        "requestTaskId": envelope.get("requestTaskId") or task_id,
        "toolUseId": envelope.get("toolUseId"),
        "options": labels,
    }
    metadata = {k: envelope[k] for k in ("title", "purpose", "safeSummary") if envelope.get(k)}
    if kind == "permission":
        decisions = values or ["allow_once", "deny"]
        schema = {
            "type": "object",
            "properties": {"decision": {"type": "string", "enum": decisions}},
            "required": ["decision"],
            "additionalProperties": False,
        }
        request = s.InterruptRequest(
            id=input_id,
            reason="tool_call",
            message=str(envelope.get("prompt") or envelope.get("title") or "Allow this tool call?"),
            tool_call_id=envelope.get("toolUseId"),
            response_schema=schema,
            metadata={**metadata, "options": labels or [{"value": d, "label": d} for d in decisions], "toolName": envelope.get("toolName")},
        )
    elif kind in ("ask_user_question", "candidate_selection"):
        field = "answer" if kind == "ask_user_question" else "candidateId"
        choices: dict[str, Any] = {"type": "string", "enum": values} if values else {"type": "string", "minLength": 1}
        if kind == "ask_user_question" and envelope.get("allowFreeText", True) and values:
            choices = {"anyOf": [choices, {"type": "string", "minLength": 1}]}
        schema = {"type": "object", "properties": {field: choices}, "required": [field], "additionalProperties": False}
        request = s.InterruptRequest(
            id=input_id,
            reason="question" if kind == "ask_user_question" else "candidate_selection",
            message=str(envelope.get("question") or envelope.get("prompt") or envelope.get("title") or "Please choose."),
            response_schema=schema,
            metadata={**metadata, "options": labels, "allowFreeText": bool(envelope.get("allowFreeText", kind == "ask_user_question"))},
        )
    else:
        request = s.InterruptRequest(
            id=input_id,
            reason=kind,
            message=str(envelope.get("prompt") or envelope.get("title") or "The agent needs input."),
            response_schema={"type": "object"},
            metadata={**metadata, "options": labels},
        )
    return request, meta
