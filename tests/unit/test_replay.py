"""Adoption's pure parts: a logged run read back into its translator, and the text an adopter recovers."""

from __future__ import annotations

import pytest

from gateway.agents import signals as s
from gateway.agents.a2a.frames import FrameReader
from gateway.engine.replay import replay, restore
from gateway.engine.translator import Translator
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol import events as e


def logged(*events: e.Event) -> list[bytes]:
    return [e.encode_json(event) for event in events]


def test_a_logged_run_is_read_back_with_its_open_spans_and_shown_text():
    events = logged(
        e.RunStarted(thread_id="t", run_id="r", protocol_version="1.0"),
        e.Custom(name="iac-code.session.v1", value={"schemaVersion": 1, "executionId": "x", "taskId": "task-1"}),
        e.StepStarted(step_name="step:plan"),
        e.TextMessageStart(message_id="task-1-message", role="assistant"),
        e.TextMessageContent(message_id="task-1-message", delta="w0 "),
        e.TextMessageContent(message_id="task-1-message", delta="w1 "),
        e.ToolCallStart(tool_call_id="c1", tool_call_name="ls"),
        e.Custom(name="iac-code.tool-progress.v1", value={"eventId": "x:4", "sequence": 4}),
        e.Custom(name="iac-code.pipeline.v1", value={"eventId": "evt-9", "sequence": 9}),
    )
    state = replay(events)
    assert state.started and not state.ended and state.session_sent
    assert state.shown == {"task-1-message": "w0 w1 "} and state.texts == {"task-1-message": "task-1-message"}
    assert state.tools == ["c1"] and state.steps == ["step:plan"]
    assert (state.sequence, state.agent_events, state.agent_sequence) == (4, ["evt-9"], 9)
    translator = Translator({"executionId": "x"}, 0, [])
    restore(translator, state)
    going_on = translator.translate(s.TextDelta(text="w2 ", message_id="task-1-message"))
    assert [type(x).__name__ for x in going_on] == ["TextMessageContent"], "the open message goes on, no second START"
    assert [type(x).__name__ for x in translator.close_all()] == ["TextMessageEnd", "ToolCallEnd", "StepFinished"]
    assert translator.sequence == 4 and translator.session["taskId"] == "task-1"


def task(history: list[tuple[str, str, str]], status_text: str | None = None) -> dict:
    messages = [{"role": role, "messageId": mid, "parts": [{"text": text}]} for role, mid, text in history]
    status: dict = {"state": "TASK_STATE_WORKING"}
    if status_text is not None:
        status["message"] = {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": status_text}]}
    return {"task": {"id": "task-1", "contextId": "ctx", "status": status, "history": messages}}


def test_an_adopter_recovers_only_the_text_the_log_lacks():
    reader = FrameReader("ctx", "task-1")
    reader.announced, reader.text_shown, reader.recovering, reader.said = True, True, True, {"task-1:m": "w0 w1 "}
    snapshot = task([("ROLE_USER", "u", "go"), ("ROLE_AGENT", "m", "w0 "), ("ROLE_AGENT", "m", "w1 "), ("ROLE_AGENT", "m", "w2 ")], "w3 ")
    assert reader.read(snapshot) == [s.TextDelta(text="w2 w3 ", message_id="task-1:m")], "ids scoped by the task"
    assert reader.read(task([("ROLE_AGENT", "m", "w0 ")])) == [], "a later snapshot recovers nothing again"


def test_the_final_text_repeat_in_the_history_is_not_new_text():
    reader = FrameReader("ctx", "task-1")
    reader.announced, reader.recovering, reader.said = True, True, {"task-1:m": "a b "}
    history = [("ROLE_AGENT", "m", "a "), ("ROLE_AGENT", "m", "b "), ("ROLE_AGENT", "task-1-working", "a b ")]
    assert reader.read(task(history)) == []


def test_pipeline_text_the_log_shows_is_not_sent_again():
    reader = FrameReader("ctx", "task-1")
    reader.announced = True
    message = "pipeline-message:p:step"
    reader.pipeline_text = {message: "ab"}
    out: list[s.Signal] = []
    for seq, text in ((1, "a"), (2, "bc"), (3, "d")):
        envelope = {
            "eventId": f"e{seq}",
            "sequence": seq,
            "eventType": "text_delta",
            "pipelineRunId": "p",
            "scope": "step",
            "data": {"text": text},
        }
        reader.envelope(envelope, out, recovered=True)
    assert "".join(x.text for x in out if isinstance(x, s.TextDelta)) == "cd"


def test_an_adopter_knows_the_sub_agents_and_what_each_has_open():
    first = Translator({"executionId": "x"}, 0, [])
    log: list[e.Event] = [e.RunStarted(thread_id="t", run_id="r", protocol_version="1.0")]
    for signal in (
        s.SubagentStart(subagent_run_id="done", name="planner"),
        s.SubagentFinish(subagent_run_id="done"),
        s.SubagentStart(subagent_run_id="sa", name="researcher"),
        s.ToolStart(tool_call_id="c1", name="search", subagent_run_id="sa"),
        s.TextDelta(text="found ", message_id="m1", subagent_run_id="sa"),
    ):
        log.extend(first.translate(signal))
    adopter = Translator({"executionId": "x"}, 0, [])
    restore(adopter, replay(logged(*log)))

    going_on = adopter.translate(s.TextDelta(text="more", message_id="m1"))
    assert going_on == [e.TextMessageContent(message_id="m1", delta="more", subagent_run_id="sa")], "its owner goes on"
    ended = adopter.translate(s.SubagentFinish(subagent_run_id="sa"))
    assert ended[:2] == [e.TextMessageEnd(message_id="m1", subagent_run_id="sa"), e.ToolCallEnd(tool_call_id="c1", subagent_run_id="sa")]
    assert isinstance(ended[2], e.SubagentFinished) and ended[2].subagent_run_id == "sa"
    for refused_signal in (s.SubagentStart(subagent_run_id="done", name="planner"), s.TextDelta(text="late", subagent_run_id="done")):
        with pytest.raises(GatewayError) as refused:  # a finished sub-agent stays finished after adoption
            adopter.translate(refused_signal)
        assert refused.value.code == ErrorCode.AGENT_PROTOCOL_ERROR
