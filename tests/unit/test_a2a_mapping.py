"""The A2A frame mapper alone: frames in, neutral signals out, identities checked."""

from __future__ import annotations

import pytest

from gateway.agents import signals as s
from gateway.agents.a2a.mapping import FrameMapper, ProtocolViolation, interrupt_from_input, normalise_state


def status(text: str | None = None, *, task="task-1", context="ctx", state="TASK_STATE_WORKING", iac=None, message_id="m1"):
    update = {"taskId": task, "contextId": context, "status": {"state": state}}
    if text is not None:
        update["status"]["message"] = {"messageId": message_id, "parts": [{"text": text}], "taskId": task, "contextId": context}
    if iac is not None:
        update["metadata"] = {"iac_code": iac}
    return {"statusUpdate": update}


def kinds(signals) -> list[str]:
    return [type(signal).__name__ for signal in signals]


def test_the_first_frame_announces_identities_then_text_streams():
    mapper = FrameMapper("ctx")
    first = mapper.map(status("Hello"))
    assert kinds(first) == ["SessionInfo", "TextDelta"] and first[0].task_id == "task-1"
    assert kinds(mapper.map(status(" again"))) == ["TextDelta"]
    assert kinds(mapper.map(status("new", message_id="m2"))) == ["TextEnd", "TextDelta"], "a new message id closes the last one"


def test_foreign_identities_are_protocol_violations():
    mapper = FrameMapper("ctx")
    mapper.map(status("a"))
    with pytest.raises(ProtocolViolation):
        mapper.map(status("b", context="someone-else"))
    with pytest.raises(ProtocolViolation):
        mapper.map(status("b", task="task-2"))
    mapper.map(status(iac={"iacCodeSessionId": "s1"}))
    with pytest.raises(ProtocolViolation):
        mapper.map(status(iac={"iacCodeSessionId": "s2"}))


def test_tool_lifecycle_and_a_single_result():
    mapper = FrameMapper("ctx", task_id="task-1")
    started = mapper.map(status(iac={"tool": {"toolUseId": "c1", "status": "started", "name": "ros"}}))
    assert kinds(started)[-1] == "ToolStart"
    done = mapper.map(status(iac={"tool": {"toolUseId": "c1", "status": "input_complete", "toolInput": {"a": 1}}}))
    assert kinds(done) == ["ToolArgs", "ToolEnd"] and done[0].delta == '{"a": 1}'
    result = mapper.map(status(iac={"tool": {"toolUseId": "c1", "status": "completed", "result": "ok"}}))
    assert kinds(result) == ["ToolResult"]
    assert mapper.map(status(iac={"tool": {"toolUseId": "c1", "status": "failed", "result": "late"}})) == []


def test_pipeline_envelopes_are_deduplicated_by_event_id_and_sequence():
    mapper = FrameMapper("ctx", task_id="task-1")
    envelope = {"eventId": "ev-1", "sequence": 1, "eventType": "stack_progress", "data": {"pct": 10}, "scope": "main"}
    batch = {"pipelineBatch": {"events": [envelope, envelope, {**envelope, "eventId": "ev-0", "sequence": 1}]}}
    signals = mapper.map(status(iac=batch))[1:]  # after the first frame's SessionInfo
    assert kinds(signals) == ["PipelineEvent"] and signals[0].data == {"scope": "main", "pct": 10}
    steps = mapper.map(status(iac={"pipeline": {"eventId": "ev-2", "sequence": 2, "eventType": "step_started", "step": "plan"}}))
    assert steps == [s.StepStart(name="plan")]
    assert mapper.map(status(iac={"pipeline": {"eventId": "ev-x", "sequence": 5, "eventType": "not_allowed"}})) == []


def test_a_permission_input_becomes_an_interrupt_with_a_schema_of_its_options():
    envelope = {
        "kind": "permission",
        "inputId": "in-1",
        "required": True,
        "toolUseId": "c1",
        "toolName": "ros",
        "options": [{"id": "allow_once", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
        "prompt": "Run ros?",
    }
    request, meta = interrupt_from_input(envelope, "task-1")
    assert request.reason == "tool_call" and request.tool_call_id == "c1" and request.message == "Run ros?"
    assert request.response_schema["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    assert meta == {
        "kind": "permission",
        "inputId": "in-1",
        "requestTaskId": "task-1",
        "toolUseId": "c1",
        "options": [{"value": "allow_once", "label": "Allow"}, {"value": "deny", "label": "Deny"}],
    }
    question, _ = interrupt_from_input({"kind": "ask_user_question", "inputId": "q", "options": ["a", "b"]}, None)
    assert question.reason == "question" and "anyOf" in question.response_schema["properties"]["answer"]


def test_inputs_are_collected_once_and_states_normalised():
    mapper = FrameMapper("ctx", task_id="task-1")
    envelope = {"kind": "permission", "inputId": "in-1", "required": True}
    mapper.map(status(iac={"input": envelope}, state="TASK_STATE_INPUT_REQUIRED"))
    mapper.map(status(iac={"input": envelope}))
    assert [request.id for request, _ in mapper.inputs] == ["in-1"]
    assert normalise_state("TASK_STATE_INPUT_REQUIRED") == "input-required" == normalise_state("input-required")


def test_the_final_status_repeating_the_answer_is_not_shown_twice():
    """Issue 22, row "final text": chunks under `<task>-message`, then WORKING with the full text under
    `<task>-working` and assistantFinal: ignored, since the text was already emitted."""
    mapper = FrameMapper("ctx")
    mapper.map(status("Hel", message_id="task-1-message"))
    mapper.map(status("lo", message_id="task-1-message"))
    final = mapper.map(status("Hello", message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))
    assert [x for x in final if isinstance(x, s.TextDelta)] == []


def test_a_final_status_alone_is_the_answer_once():
    mapper = FrameMapper("ctx")
    final = mapper.map(status("Whole answer", message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))
    assert [x.text for x in final if isinstance(x, s.TextDelta)] == ["Whole answer"]
