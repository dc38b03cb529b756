"""The translator alone: the mapping table, balanced spans, custom-event numbering, usage sums."""

from __future__ import annotations

import json
import re

import pytest

from gateway.agents import signals as s
from gateway.engine.translator import PIPELINE_EVENT, SESSION_EVENT, TOOL_PROGRESS_EVENT, Translator
from gateway.errors import ErrorCode, GatewayError


def translator(sequence: int = 0, open_steps: list[str] | None = None) -> Translator:
    return Translator({"threadId": "t", "executionId": "exec-1", "taskId": None}, sequence, open_steps or [])


def kinds(events) -> list[str]:
    return [type(event).__name__ for event in events]


def test_the_session_event_goes_first_and_once_with_learned_identities():
    t = translator()
    [first] = t.translate(s.SessionInfo(task_id="task-9", session_id="sess"))
    assert first.name == SESSION_EVENT and first.value["taskId"] == "task-9" and first.value["sessionId"] == "sess"
    assert kinds(t.translate(s.TextDelta(text="a"))) == ["TextMessageStart", "TextMessageContent"]
    assert t.session_event() == []
    assert t.identities() == {"taskId": "task-9", "sessionId": "sess"}


def test_a_backend_with_no_session_info_gets_the_session_event_before_its_first_event():
    first = translator().translate(s.TextDelta(text="a"))
    assert kinds(first) == ["Custom", "TextMessageStart", "TextMessageContent"] and first[0].name == SESSION_EVENT


def test_the_session_event_waits_for_every_identity_its_backend_names():
    t = Translator({"threadId": "t", "executionId": "exec-1", "taskId": None}, 0, [], ("taskId", "sessionId"))
    assert t.translate(s.SessionInfo(task_id="task-9")) == []
    assert kinds(t.translate(s.TextDelta(text="a"))) == ["TextMessageStart", "TextMessageContent"], "text does not wait for it"
    [event] = t.translate(s.SessionInfo(session_id="sess"))
    assert event.name == SESSION_EVENT and event.value["taskId"] == "task-9" and event.value["sessionId"] == "sess"
    assert t.translate(s.SessionInfo(session_id="sess")) == [] and t.session_event() == [], "once"


def test_spans_close_each_other_and_close_all_closes_everything_innermost_first():
    t = translator()
    t.translate(s.StepStart(name="outer"))
    t.translate(s.ReasoningDelta(text="think"))
    switched = t.translate(s.TextDelta(text="say"))
    assert kinds(switched)[:2] == ["ReasoningMessageEnd", "ReasoningEnd"], "text closes open reasoning"
    tool = t.translate(s.ToolStart(tool_call_id="c1", name="deploy"))
    assert kinds(tool) == ["TextMessageEnd", "ToolCallStart"], "a tool call closes open text"
    t.translate(s.StepStart(name="inner"))
    assert kinds(t.close_all()) == ["ToolCallEnd", "StepFinished", "StepFinished"]
    assert t.close_all() == []


def test_tool_calls_have_one_end_and_one_result():
    t = translator()
    t.translate(s.ToolStart(tool_call_id="c1", name="x"))
    assert kinds(t.translate(s.ToolStart(tool_call_id="c1", name="x"))) == [], "a repeated start is ignored"
    assert kinds(t.translate(s.ToolArgs(tool_call_id="c1", delta="{}"))) == ["ToolCallArgs"]
    assert kinds(t.translate(s.ToolArgs(tool_call_id="other", delta="{}"))) == [], "args for an unknown call are dropped"
    assert kinds(t.translate(s.ToolResult(tool_call_id="c1", content="ok"))) == ["ToolCallEnd", "ToolCallResult"]
    assert kinds(t.translate(s.ToolEnd(tool_call_id="c1"))) == []


def test_custom_events_number_on_from_the_execution_sequence():
    t = translator(sequence=7)
    t.translate(s.SessionInfo())
    events = t.translate(s.PipelineEvent(event_type="stack_progress", data={"p": 1}))
    progress = t.translate(s.ToolProgress(tool_call_id="c1", data={"pct": 5}))
    assert events[-1].name == PIPELINE_EVENT and events[-1].value["sequence"] == 8 and events[-1].value["eventId"] == "exec-1:8"
    assert progress[-1].name == TOOL_PROGRESS_EVENT and progress[-1].value["sequence"] == 9
    kept = t.translate(s.PipelineEvent(event_type="x", data={}, event_id="agent-7"))
    assert kept[-1].value["eventId"] == "agent-7" and t.sequence == 10


def test_usage_is_summed_per_provider_and_model():
    t = translator()
    t.translate(s.Usage(input_tokens=3, output_tokens=4, model="m", provider="p"))
    t.translate(s.Usage(input_tokens=1, output_tokens=1, reasoning_tokens=2, model="m", provider="p"))
    t.translate(s.Usage(input_tokens=5, model="other"))
    first, second = t.usage_entries() or []
    assert (first.input_tokens, first.output_tokens, first.reasoning_tokens, first.total_tokens) == (4, 5, 2, 9)
    assert second.model == "other" and second.total_tokens is None


def test_usage_is_merged_in_constant_time_per_report_and_bounded_in_entries():
    """20,000 reports of one model are one entry; a 65th distinct (provider, model) ends the run."""
    from gateway.engine.translator import MAX_USAGE_ENTRIES, MAX_USAGE_NAME
    from gateway.errors import ErrorCode, GatewayError

    t = translator()
    for _ in range(20_000):
        t.translate(s.Usage(input_tokens=1, output_tokens=1, model="m", provider="p"))
    [entry] = t.usage_entries() or []
    assert (entry.input_tokens, entry.total_tokens) == (20_000, 40_000)
    for index in range(1, MAX_USAGE_ENTRIES):
        t.translate(s.Usage(input_tokens=1, model=f"m{index}"))
    for fresh, past, said in (
        (t, s.Usage(input_tokens=1, model="one too many"), f"more than {MAX_USAGE_ENTRIES} providers"),
        (translator(), s.Usage(model="m", provider="p" * (MAX_USAGE_NAME + 1)), f"longer than {MAX_USAGE_NAME}"),
    ):
        with pytest.raises(GatewayError) as raised:
            fresh.translate(past)
        assert raised.value.code is ErrorCode.AGENT_PROTOCOL_ERROR and said in (raised.value.detail or "")
    assert len(t.usage_entries() or []) == MAX_USAGE_ENTRIES


def test_open_steps_of_an_interrupted_execution_reopen():
    t = translator(open_steps=["plan", "apply"])
    assert [e.step_name for e in t.reopen_steps()] == ["plan", "apply"]
    assert [e.step_name for e in t.close_all()] == ["apply", "plan"]


def test_messages_named_by_the_agent_interleave_and_keep_its_ids():
    t = translator()
    t.translate(s.TextDelta(text="a1", message_id="A"))
    events = t.translate(s.TextDelta(text="b1", message_id="B")) + t.translate(s.TextDelta(text="a2", message_id="A"))
    assert [(type(e).__name__, e.message_id) for e in events] == [
        ("TextMessageStart", "B"),
        ("TextMessageContent", "B"),
        ("TextMessageContent", "A"),
    ]
    assert [e.message_id for e in t.translate(s.TextEnd(message_id="A"))] == ["A"]
    again = t.translate(s.TextDelta(text="a3", message_id="A"))
    assert again[0].message_id == "A.2", "a closed message is never reopened under its id"
    assert sorted(e.message_id for e in t.close_all()) == ["A.2", "B"]


def test_a_step_finished_that_never_opened_is_a_zero_length_pair():
    assert kinds(translator().translate(s.StepFinish(name="step:x"))) == ["Custom", "StepStarted", "StepFinished"]


def test_an_agent_envelope_is_the_custom_value_unchanged():
    envelope = {"eventId": "evt-1", "sequence": 7, "eventType": "stack_progress", "pipelineRunId": "p", "data": {}}
    t = translator(sequence=40)
    [custom] = t.translate(s.PipelineEvent(event_type="stack_progress", data={}, event_id="evt-1", envelope=envelope))[1:]
    assert custom.name == PIPELINE_EVENT and custom.value == envelope and t.sequence == 40


def test_reported_totals_are_summed_as_reported():
    t = translator()
    t.translate(s.Usage(input_tokens=10, output_tokens=5, total_tokens=20, cached_input_tokens=4, model="m"))
    t.translate(s.Usage(input_tokens=1, output_tokens=2, model="m"))
    [entry] = t.usage_entries() or []
    assert (entry.total_tokens, entry.cached_input_tokens) == (23, 4)


# Deltas that JSON must escape, and text past the Basic Multilingual Plane: the encoded prefix must not change a byte.
AWKWARD_TEXTS = ['he said "hi"\\n', "tab\tnewline\nnul\x00 bell\x07", "</script>", "é 中文 🙂", "\u2028\u2029", "x" * 5000]


def without_reasoning_ids(data: bytes) -> bytes:
    return re.sub(rb"reasoning-[0-9a-f]+", b"reasoning-", data)


def test_events_encoded_from_an_open_messages_prefix_are_the_events_own_encoding():
    """translate_into encodes a delta of an open message from its prefix; translate builds the event. Fed the same
    signals, the two give the same bytes: owned messages, ids JSON escapes, reasoning between deltas, empty deltas.
    (Messages are named here: an unnamed one gets a random id, different in each translator, as reasoning does.)"""
    from gateway.protocol.events import encode_json

    signals: list[s.Signal] = [s.SubagentStart(subagent_run_id="sub-1", name="helper")]
    for text in AWKWARD_TEXTS:
        signals += [s.TextDelta(text=text, message_id="m"), s.TextDelta(text="", message_id="m")]
        signals += [s.TextDelta(text=text, message_id='na"med\\'), s.ReasoningDelta(text="hm")]
        signals += [s.TextDelta(text=text, message_id="owned", subagent_run_id="sub-1"), s.TextDelta(text=text, message_id="m")]
    signals += [s.TextEnd(message_id="m"), s.TextDelta(text="again", message_id="m"), s.TextEnd()]
    encoded, built = translator(), translator()
    out: list[bytes] = []
    for signal in signals:
        mark = len(out)
        encoded.translate_into(signal, out)
        expected = [encode_json(event) for event in built.translate(signal)]
        assert list(map(without_reasoning_ids, out[mark:])) == list(map(without_reasoning_ids, expected)), signal
    assert len(out) > 5 * len(AWKWARD_TEXTS)
    assert encoded.close_all() == built.close_all()


def test_a_delta_the_translator_refuses_appends_nothing_to_what_is_held():
    t, out = translator(), [b"held"]
    t.translate_into(s.TextDelta(text="a", message_id="m"), out)
    with pytest.raises(GatewayError) as refused:
        t.translate_into(s.TextDelta(text="b", message_id="other", role="tool"), out)
    assert refused.value.code is ErrorCode.AGENT_PROTOCOL_ERROR
    assert out[0] == b"held" and len(out) == 4  # the held entry, the session event, the start and the delta


def test_an_agents_ids_spans_and_order_are_kept():
    """What Pydantic AI sends: an empty parent message, signed thinking with its value between the message's end and
    the span's, thinking with a value and no text, a tool result's own id that a value then names."""
    t = translator()
    t.translate(s.SessionInfo())  # the session event first: what follows is each signal's own
    signals = [
        s.ReasoningStart(message_id="r1"),
        s.ReasoningMessageStart(message_id="r1"),
        s.ReasoningDelta(text="think", message_id="r1"),
        s.ReasoningMessageEnd(),
        s.ReasoningEncrypted(subtype="message", entity_id="r1", encrypted_value="sig-1"),
        s.ReasoningEnd(),
        s.ReasoningStart(message_id="r2"),
        s.ReasoningEncrypted(subtype="message", entity_id="r2", encrypted_value="sig-2"),
        s.ReasoningEnd(),
        s.TextStart(message_id="m1"),
        s.TextEnd(message_id="m1"),
        s.ToolStart(tool_call_id="c1", name="look", parent_message_id="m1"),
        s.ToolEnd(tool_call_id="c1"),
        s.ToolResult(tool_call_id="c1", content="ok", message_id="tr1", role="tool"),
        s.ReasoningEncrypted(subtype="message", entity_id="tr1", encrypted_value="outcome"),
    ]
    events = [event for signal in signals for event in t.translate(signal)]
    shown = [(type(event).__name__, getattr(event, "message_id", None) or getattr(event, "entity_id", None)) for event in events]
    assert shown == [
        ("ReasoningStart", "r1"),
        ("ReasoningMessageStart", "r1"),
        ("ReasoningMessageContent", "r1"),
        ("ReasoningMessageEnd", "r1"),
        ("ReasoningEncryptedValue", "r1"),
        ("ReasoningEnd", "r1"),
        ("ReasoningStart", "r2"),
        ("ReasoningEncryptedValue", "r2"),
        ("ReasoningEnd", "r2"),
        ("TextMessageStart", "m1"),
        ("TextMessageEnd", "m1"),
        ("ToolCallStart", None),
        ("ToolCallEnd", None),
        ("ToolCallResult", "tr1"),
        ("ReasoningEncryptedValue", "tr1"),
    ]
    assert events[-2].role == "tool" and t.close_all() == []


def test_reasoning_without_ids_still_gets_ids_of_ours():
    t = translator()
    t.translate(s.SessionInfo())
    first = t.translate(s.ReasoningDelta(text="a"))
    span = first[0].message_id
    assert span.startswith("reasoning-") and [type(e).__name__ for e in first] == [
        "ReasoningStart",
        "ReasoningMessageStart",
        "ReasoningMessageContent",
    ]
    assert [type(e).__name__ for e in t.translate(s.TextDelta(text="b"))][:2] == ["ReasoningMessageEnd", "ReasoningEnd"]


def test_an_agents_timestamp_and_raw_event_go_on_with_the_event_the_signal_became():
    t = translator()
    t.translate(s.SessionInfo())
    t.translate(s.TextDelta(text="a", message_id="m"))  # the message is open: its next deltas take the fast path
    stamped = s.Stamped(signal=s.TextDelta(text="b", message_id="m"), timestamp=1765000000123, raw_event={"provider": "x"})
    out: list[bytes] = []
    t.translate_into(stamped, out)
    [event] = [json.loads(item) for item in out]
    assert (event["type"], event["timestamp"], event["rawEvent"]) == ("TEXT_MESSAGE_CONTENT", 1765000000123, {"provider": "x"})
    [result] = [
        e
        for e in t.translate(s.Stamped(signal=s.ToolResult(tool_call_id="c", content="ok", message_id="r"), timestamp=5))
        if type(e).__name__ == "ToolCallResult"
    ]
    assert result.timestamp == 5
    plain: list[bytes] = []
    t.translate_into(s.TextDelta(text="c", message_id="n"), plain)
    assert all(b"timestamp" not in item and b"rawEvent" not in item for item in plain), "none where the agent gave none"
