"""Pipeline envelopes to signals (IAC_CODE_A2A_WIRE.md §3 "Pipeline events", §5 recovery): pure, no network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agents import signals as s

PIPELINE_ACTIVITY = "iac-code.pipeline.v1"
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
STEP_OPENERS = frozenset(["step_started", "candidate_step_started", "input_received"])
STEP_CLOSERS = frozenset(["step_completed", "step_failed", "candidate_step_completed", "candidate_step_failed"])

ToolSink = Callable[[dict[str, Any], list[s.Signal]], None]


def number(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def usage_signal(usage: dict[str, Any]) -> s.Usage:
    """A usage report (`iac_code.usage` or a pipeline `usage` event's data)."""
    return s.Usage(
        input_tokens=number(usage.get("inputTokens")),
        output_tokens=number(usage.get("outputTokens")),
        reasoning_tokens=number(usage.get("reasoningTokens")),
        total_tokens=number(usage.get("totalTokens")),
        cached_input_tokens=number(usage.get("cachedInputTokens")),
        model=usage.get("model") if isinstance(usage.get("model"), str) else None,
        provider=usage.get("provider") if isinstance(usage.get("provider"), str) else None,
    )


def _id(value: Any, key: str = "id") -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get(key), str) and value[key]:
        return str(value[key])
    return None


def step_key(envelope: dict[str, Any]) -> str | None:
    """`candidate:<candidate id|subPipelineId|runId>:<stepId>` for a candidate's step, else `step:<stepId>`."""
    step_id = _id(envelope.get("candidateStep")) or _id(envelope.get("step"))
    if step_id is None:
        return None
    candidate = envelope.get("candidate")
    owner = _id(candidate) or _id(envelope.get("subPipelineId")) or _id(candidate, "runId")
    kind = str(envelope.get("eventType") or "")
    in_candidate = envelope.get("candidateStep") is not None or envelope.get("scope") in ("candidate", "candidate_step")
    if owner and (in_candidate or kind.startswith("candidate_step")):
        return f"candidate:{owner}:{step_id}"
    return f"step:{step_id}"


def message_id(envelope: dict[str, Any]) -> str:
    """`pipeline-message:<pipelineRunId>:<scope>:<run ids>`: parallel candidates write parallel messages."""
    run_ids = [_id(envelope.get(k), "runId") for k in ("candidate", "candidateStep", "step")]
    parts = [str(envelope.get("pipelineRunId") or ""), str(envelope.get("scope") or ""), *[r for r in run_ids if r]]
    return "pipeline-message:" + ":".join(parts)


def snapshot_signal(snapshot: dict[str, Any]) -> s.ActivitySnapshot:
    """The recovery snapshot; one AG-UI activity per pipeline run, replaced by each later snapshot."""
    run_id = str(snapshot.get("pipelineRunId") or "")
    return s.ActivitySnapshot(
        activity_type=PIPELINE_ACTIVITY,
        content={"schemaVersion": 1, "pipelineRunId": run_id, "snapshot": snapshot},
        message_id=f"pipeline:{run_id}",
        replace=True,
    )


class PipelineReader:
    """De-duplicates envelopes (live: by eventId and rising sequence; recovered: by eventId, by sequence only
    when an envelope has none) and maps them to signals."""

    def __init__(self, cursor: int = 0) -> None:
        self.cursor = cursor
        self.floor = cursor  # shown by an earlier run of the execution (whose event ids this run never saw)
        self.seen: set[str] = set()

    def admit(self, envelope: dict[str, Any], *, recovered: bool) -> bool:
        event_id = envelope.get("eventId") if isinstance(envelope.get("eventId"), str) else None
        sequence = number(envelope.get("sequence"))
        if event_id is not None and event_id in self.seen:
            return False
        if sequence is not None and (sequence <= self.floor or (sequence <= self.cursor and not (recovered and event_id))):
            return False
        if event_id is not None:
            self.seen.add(event_id)
        if sequence is not None and sequence > self.cursor:
            self.cursor = sequence
        return True

    def advance(self, last_sequence: Any) -> None:
        value = number(last_sequence)
        if value is not None and value > self.cursor:
            self.cursor = value

    def map(self, envelope: dict[str, Any], out: list[s.Signal], tool: ToolSink) -> None:
        kind = envelope.get("eventType")
        data: dict[str, Any] = envelope["data"] if isinstance(envelope.get("data"), dict) else {}
        if kind == "text_delta" and isinstance(data.get("text"), str):
            out.append(s.TextDelta(text=data["text"], message_id=message_id(envelope)))
        elif kind == "thinking_delta" and isinstance(data.get("text"), str):
            out.append(s.ReasoningDelta(text=data["text"]))
        elif kind == "tool_started":
            call = {"toolUseId": data.get("toolUseId"), "name": data.get("toolName")}
            tool({**call, "status": "started"}, out)
            tool({**call, "status": "input_complete", **({"toolInput": data["input"]} if "input" in data else {})}, out)
        elif kind == "tool_result":
            status = "failed" if data.get("isError") else "completed"
            tool({"toolUseId": data.get("toolUseId"), "status": status, "result": data.get("result", "")}, out)
        elif kind == "usage":
            out.append(usage_signal(data))
        if kind in STEP_OPENERS or kind in STEP_CLOSERS:
            key = step_key(envelope)
            if key is not None:
                out.append(s.StepStart(name=key) if kind in STEP_OPENERS else s.StepFinish(name=key))
        if kind in PIPELINE_CUSTOM_TYPES:
            event_id = envelope.get("eventId") if isinstance(envelope.get("eventId"), str) else None
            out.append(s.PipelineEvent(event_type=str(kind), data=data, event_id=event_id, envelope=envelope))
