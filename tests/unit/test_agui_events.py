"""An upstream AG-UI agent's events read back into signals (gateway/agents/agui/events.py): the mapping rows,
the order rules, the terminal event, and what is an UpstreamViolation; and the RunAgentInput sent up."""

from __future__ import annotations

import pytest

from gateway.agents import signals as s
from gateway.agents.agui.backend import _as_dict, run_input
from gateway.agents.agui.events import EventReader, UpstreamViolation
from gateway.agents.base import AgentOptions, AgentRequest, ResumeAnswer


def started() -> EventReader:
    reader = EventReader("t", "r")
    assert reader.read({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}) == []
    return reader


def test_text_tools_state_and_the_rest_map_to_their_signals():
    reader = started()
    assert reader.read({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}) == [s.TextStart(message_id="m")]
    [text] = reader.read({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"})
    assert text == s.TextDelta(text="hi", message_id="m", role="assistant")
    assert reader.read({"type": "TEXT_MESSAGE_END", "messageId": "m"}) == [s.TextEnd(message_id="m")]
    [tool] = reader.read({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "look", "parentMessageId": "m"})
    assert tool == s.ToolStart(tool_call_id="c", name="look", parent_message_id="m")
    assert reader.read({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "{}"}) == [s.ToolArgs(tool_call_id="c", delta="{}")]
    assert reader.read({"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "c", "content": "ok", "role": "tool"}) == [
        s.ToolResult(tool_call_id="c", content="ok", message_id="x", role="tool")
    ]
    assert reader.read({"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}) == [s.StateSnapshot(snapshot={"a": 1})]
    assert reader.read({"type": "STATE_DELTA", "delta": []}) == [s.StateDelta(patch=[])]
    assert reader.read({"type": "REASONING_START", "messageId": "r1"}) == [s.ReasoningStart(message_id="r1")]
    assert reader.read({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"}) == [
        s.ReasoningMessageStart(message_id="r1")
    ]
    assert reader.read({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hm"}) == [
        s.ReasoningDelta(text="hm", message_id="r1")
    ]
    assert reader.read({"type": "REASONING_MESSAGE_END", "messageId": "r1"}) == [s.ReasoningMessageEnd()]
    assert reader.read({"type": "REASONING_END", "messageId": "r1"}) == [s.ReasoningEnd()]
    assert reader.read({"type": "CUSTOM", "name": "n", "value": 1}) == [s.CustomEvent(name="n", value=1)]
    assert reader.read({"type": "SUBAGENT_STARTED", "subagentRunId": "sub", "name": "scout"})[0].name == "scout"
    assert reader.read({"type": "STEP_STARTED", "stepName": "plan"}) == [s.StepStart(name="plan")]


def test_the_terminal_event_gives_the_runs_end():
    reader = started()
    usage = [{"inputTokens": 3, "outputTokens": 4, "model": "m"}]
    out = reader.read(
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "usage": usage, "outcome": {"type": "success", "pendingToolCallIds": ["c"]}}
    )
    assert out == [s.Usage(input_tokens=3, output_tokens=4, model="m"), s.Completed(pending_tool_call_ids=("c",))]
    assert reader.ended
    asked = started().read(
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i", "message": "ok?"}]},
        }
    )
    assert isinstance(asked[0], s.InputRequired) and asked[0].interrupts[0].id == "i" and asked[0].interrupts[0].response_schema is None
    [failed] = started().read({"type": "RUN_ERROR", "message": "quota", "code": "RATE_LIMITED"})
    assert failed == s.Failed(message="quota", code="RATE_LIMITED", as_sent=True)


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "other"}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "NOPE"}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "TOOL_CALL_START", "toolCallId": "c"}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "STATE_DELTA", "delta": {"op": "add"}}],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"}],
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "odd"}},
        ],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "RUN_ERROR", "message": "x"}, {"type": "RAW", "event": 1}],
        ["not an object"],
    ],
)
def test_what_breaks_ag_ui_is_a_violation(events):
    reader = EventReader("t", "r")
    with pytest.raises(UpstreamViolation):
        for event in events:
            reader.read(event)


def request(**extra: object) -> AgentRequest:
    base = {
        "thread_id": "key:t",
        "run_id": "r",
        "execution_id": "e",
        "cwd": "/w",
        "language": "en",
        "options": AgentOptions(invocation_id="i"),
    }
    return AgentRequest(**{**base, "user_text": "hi", "message_id": "m-1", **extra})  # type: ignore[arg-type]


def test_the_upstream_is_sent_the_plain_request_whole_and_never_the_extension():
    plain = request(plain=True, messages=({"id": "m-1", "role": "user", "content": "hi"},), state={"a": 1}, forwarded_props={"x": 1})
    sent = run_input(plain)
    assert sent["threadId"] == "key:t" and sent["state"] == {"a": 1} and sent["forwardedProps"] == {"x": 1}
    extension = run_input(request(options=AgentOptions(invocation_id="i", api_key="sk-secret")))
    assert extension["messages"] == [{"id": "m-1", "role": "user", "content": "hi"}] and "sk-secret" not in str(extension)
    answer = ResumeAnswer(interrupt_id="i", status="resolved", payload={"ok": True}, reason="question", tool_call_id=None)
    assert run_input(request(resume=(answer,)))["resume"] == [{"interruptId": "i", "status": "resolved", "payload": {"ok": True}}]


def test_in_process_events_may_be_models_dicts_or_encoded_records():
    from ag_ui.core import TextMessageContentEvent

    assert _as_dict(TextMessageContentEvent(message_id="m", delta="d")) == {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "d"}
    for end in ("\n", "\r\n", "\r"):  # the SSE grammar's line ends
        assert _as_dict(f'data: {{"type":"RAW",{end}data: "event":1}}{end}{end}') == {"type": "RAW", "event": 1}
    with pytest.raises(UpstreamViolation):
        _as_dict(object())


async def test_an_in_process_agent_that_raises_ends_its_run_with_its_words():
    from gateway.agents.agui.backend import AguiInProcessBackend

    class Broken:
        async def run(self, input):
            yield {"type": "RUN_STARTED", "threadId": input.thread_id, "runId": input.run_id}
            raise RuntimeError("the graph fell over")

    signals = [signal async for signal in AguiInProcessBackend(Broken()).run(request(plain=True))]
    assert signals == [s.Failed(message="The agent failed: RuntimeError: the graph fell over", code="AGENT_ERROR", as_sent=True)]


def test_an_events_timestamp_and_raw_event_stay_with_its_signal():
    reader = started()
    reader.read({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    [delta] = reader.read({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "timestamp": 17, "rawEvent": {"k": 1}})
    assert delta == s.Stamped(signal=s.TextDelta(text="hi", message_id="m"), timestamp=17, raw_event={"k": 1})
    [plain] = reader.read({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "yo"})
    assert plain == s.TextDelta(text="yo", message_id="m")
    [end] = reader.read({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 18})
    assert end == s.Completed(), "the run's end is the gateway's own: never wrapped"


def test_an_events_bound_makes_room_for_the_state_bound():
    """At the default --max-state-bytes (8 MiB) an event may be 9 MiB; a larger state bound grows it, and its count of
    JSON values with it, so that a snapshot the flag allows can arrive."""
    from gateway.agents.agui.backend import DEFAULT_LIMITS, EventLimits, decode_event

    assert EventLimits.for_state(8 * 1024 * 1024) == DEFAULT_LIMITS == EventLimits(9 * 1024 * 1024, 500_000)
    larger = EventLimits.for_state(32 * 1024 * 1024)
    assert larger == EventLimits(33 * 1024 * 1024, 500_000 * 33 // 9)
    snapshot = b'{"type":"STATE_SNAPSHOT","snapshot":{"text":"' + b"x" * (12 * 1024 * 1024) + b'"}}'
    with pytest.raises(UpstreamViolation, match="larger than 9437184 bytes"):
        decode_event(snapshot)
    assert decode_event(snapshot, larger)["type"] == "STATE_SNAPSHOT"
