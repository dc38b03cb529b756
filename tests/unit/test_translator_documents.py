"""The translator's rows for the rest of AG-UI 1.0: state snapshots and JSON Patch deltas (refused when they do
not apply), messages snapshots, activities, raw and custom events, encrypted reasoning, sub-agents and their
ownership, the bounds, and an unknown signal; and, through the engine, a refused signal ends the run."""

from __future__ import annotations

import pytest

from gateway.agents import signals as s
from gateway.engine import documents
from gateway.engine.documents import MAX_PATCH_BYTES
from gateway.engine.translator import SESSION_EVENT, Translator
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol import events as e
from tests.unit.scripted import Harness, ScriptedAgent, body

MAX_STATE_BYTES = 1024 * 1024  # the bound these tests give the state (--max-state-bytes)


def translator(state: object = documents.UNSET) -> Translator:
    t = Translator({"threadId": "t", "executionId": "exec-1"}, 0, [], (), state, MAX_STATE_BYTES)
    assert t.translate(s.SessionInfo())[0].name == SESSION_EVENT  # first: what follows is each signal's own
    return t


def refused(t: Translator, signal: s.Signal) -> str:
    with pytest.raises(GatewayError) as raised:
        t.translate(signal)
    assert raised.value.code is ErrorCode.AGENT_PROTOCOL_ERROR
    return raised.value.detail or ""


def test_a_state_delta_applies_to_the_requests_state_and_the_next_one_to_the_result():
    t = translator({"count": 1})
    [delta] = t.translate(s.StateDelta(patch=[{"op": "replace", "path": "/count", "value": 2}]))
    assert isinstance(delta, e.StateDelta) and t.state == {"count": 2}
    t.translate(s.StateDelta(patch=[{"op": "add", "path": "/items", "value": []}]))
    t.translate(s.StateDelta(patch=[{"op": "add", "path": "/items/-", "value": "a"}]))
    assert t.state == {"count": 2, "items": ["a"]}


def test_a_delta_that_does_not_apply_is_refused_and_the_state_is_left_as_it_was():
    t = translator({"count": 1})
    assert "does not apply" in refused(t, s.StateDelta(patch=[{"op": "replace", "path": "/missing", "value": 1}]))
    assert "does not apply" in refused(t, s.StateDelta(patch=[{"op": "test", "path": "/count", "value": 9}]))
    half = [{"op": "replace", "path": "/count", "value": 5}, {"op": "remove", "path": "/nothing"}]
    refused(t, s.StateDelta(patch=half))
    assert t.state == {"count": 1}, "a patch that fails half way applies nothing"
    assert "does not apply" in refused(t, s.StateDelta(patch=[{"op": "jump", "path": "/count"}]))


def test_without_a_known_state_a_delta_needs_a_snapshot_first():
    t = translator()
    assert "before any state snapshot" in refused(t, s.StateDelta(patch=[{"op": "add", "path": "/a", "value": 1}]))
    [snapshot] = t.translate(s.StateSnapshot(snapshot={"a": 0}))
    assert isinstance(snapshot, e.StateSnapshot)
    t.translate(s.StateDelta(patch=[{"op": "replace", "path": "/a", "value": 1}]))
    assert t.state == {"a": 1}


def test_state_patches_and_snapshots_are_bounded():
    t = translator({})
    assert "past the gateway's bound" in refused(t, s.StateSnapshot(snapshot={"big": "x" * MAX_STATE_BYTES}))
    assert "past the gateway's bound" in refused(t, s.StateDelta(patch=[{"op": "add", "path": "/big", "value": "x" * MAX_PATCH_BYTES}]))
    grow = [{"op": "add", "path": f"/k{i}", "value": "x" * (MAX_PATCH_BYTES // 2)} for i in range(1)]
    for _ in range(2 * MAX_STATE_BYTES // MAX_PATCH_BYTES - 1):
        t.translate(s.StateDelta(patch=[{**grow[0], "path": f"/k{len(t.state)}"}]))
    assert "after its patch" in refused(t, s.StateDelta(patch=[{**grow[0], "path": "/last"}])), "the document's own bound"
    assert "not JSON" in refused(t, s.StateSnapshot(snapshot={"thing": object()}))


def test_activities_take_patches_to_the_snapshot_they_opened():
    t = translator()
    [snapshot] = t.translate(s.ActivitySnapshot(activity_type="progress", content={"percent": 0}, message_id="act-1"))
    assert isinstance(snapshot, e.ActivitySnapshot)
    [delta] = t.translate(
        s.ActivityDelta(message_id="act-1", activity_type="progress", patch=[{"op": "replace", "path": "/percent", "value": 50}])
    )
    assert isinstance(delta, e.ActivityDelta) and delta.patch[0]["value"] == 50
    assert "before any activity snapshot" in refused(t, s.ActivityDelta(message_id="act-2", activity_type="progress", patch=[]))


def test_snapshots_raw_custom_and_encrypted_values_map_to_their_events():
    t = translator()
    [messages] = t.translate(s.MessagesSnapshot(messages=[{"id": "m-1", "role": "user", "content": "hi"}]))
    assert isinstance(messages, e.MessagesSnapshot)
    assert "no id or role" in refused(t, s.MessagesSnapshot(messages=[{"role": "user"}]))
    [raw] = t.translate(s.Raw(event={"k": 1}, source="lib"))
    assert isinstance(raw, e.Raw) and raw.source == "lib"
    [custom] = t.translate(s.CustomEvent(name="PredictState", value=[1]))
    assert isinstance(custom, e.Custom) and custom.name == "PredictState"
    assert "may not be named" in refused(t, s.CustomEvent(name=SESSION_EVENT, value={})), "the gateway's own names are its own"
    [encrypted] = t.translate(s.ReasoningEncrypted(subtype="message", entity_id="m-1", encrypted_value="opaque"))
    assert isinstance(encrypted, e.ReasoningEncryptedValue)
    assert "subtype" in refused(t, s.ReasoningEncrypted(subtype="other", entity_id="m", encrypted_value="v"))


def test_text_messages_keep_their_role_and_name():
    t = translator()
    start, _ = t.translate(s.TextDelta(text="a", message_id="m", role="system", name="rules"))
    assert (start.role, start.name) == ("system", "rules")
    assert "role" in refused(t, s.TextDelta(text="a", message_id="n", role="tool"))


def test_a_sub_agent_owns_its_messages_and_tool_calls_which_end_with_it():
    t = translator()
    [started] = t.translate(s.SubagentStart(subagent_run_id="sub-1", name="scout"))
    assert isinstance(started, e.SubagentStarted)
    start, content = t.translate(s.TextDelta(text="a", message_id="m", subagent_run_id="sub-1"))
    assert start.subagent_run_id == content.subagent_run_id == "sub-1"
    [more] = t.translate(s.TextDelta(text="b", message_id="m"))
    assert more.subagent_run_id == "sub-1", "the message's owner, from its start"
    ended = t.translate(s.SubagentFinish(subagent_run_id="sub-1"))
    assert [type(event).__name__ for event in ended] == ["TextMessageEnd", "SubagentFinished"]
    assert ended[0].subagent_run_id == "sub-1" and ended[1].outcome is not None
    assert "already started" in refused(t, s.SubagentStart(subagent_run_id="sub-1", name="again"))
    assert "not active" in refused(t, s.TextDelta(text="c", message_id="x", subagent_run_id="sub-1"))
    assert "not active" in refused(t, s.SubagentError(subagent_run_id="sub-9", message="no"))


def test_a_sub_agent_left_active_ends_with_an_error_when_the_run_closes():
    t = translator()
    t.translate(s.SubagentStart(subagent_run_id="sub-1", name="scout"))
    t.translate(s.ToolStart(tool_call_id="c-1", name="look", subagent_run_id="sub-1"))
    closing = t.close_all()
    assert [type(event).__name__ for event in closing] == ["ToolCallEnd", "SubagentError"]
    assert closing[0].subagent_run_id == "sub-1" and closing[1].code == "UNFINISHED"


def test_a_signal_the_table_does_not_know_is_refused():
    class Unheard(s.Signal):
        pass

    assert "does not know (Unheard)" in refused(translator(), Unheard())


async def test_a_refused_signal_ends_the_run_with_agent_protocol_error_and_none_of_it_is_sent():
    agent = ScriptedAgent([s.TextDelta(text="before"), s.StateDelta(patch=[{"op": "remove", "path": "/nothing"}]), s.Completed()])
    events = await Harness(agent).run(body())
    assert [event["type"] for event in events if event["type"].startswith("STATE")] == []
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "AGENT_PROTOCOL_ERROR", events[-1]
    assert events[-1]["message"].endswith("A state patch came before any state snapshot."), events[-1]


def test_a_patch_is_applied_as_rfc_6902_says():
    t = translator({"list": [1, 3], "obj": {"a": True}})
    patch = [
        {"op": "add", "path": "/list/1", "value": 2},
        {"op": "add", "path": "/list/-", "value": 4},
        {"op": "copy", "from": "/obj", "path": "/copied"},
        {"op": "replace", "path": "/copied/a", "value": False},
        {"op": "move", "from": "/list", "path": "/obj/list"},
        {"op": "test", "path": "/obj/a", "value": True},
        {"op": "remove", "path": "/obj/list/0"},
    ]
    [delta] = t.translate(s.StateDelta(patch=patch))
    assert t.state == {"obj": {"a": True, "list": [2, 3, 4]}, "copied": {"a": False}}
    assert isinstance(delta, e.StateDelta) and delta.delta == patch, "the patch goes on as the agent sent it"
    t.translate(s.StateDelta(patch=[{"op": "replace", "path": "", "value": {"root": 1}}]))
    assert t.state == {"root": 1}
    for bad in (
        {"op": "test", "path": "/root", "value": True},  # JSON equality: true is not 1
        {"op": "remove", "path": ""},
        {"op": "move", "from": "", "path": "/inside"},
        {"op": "add", "path": "/root/x", "value": 1},  # a number has no members
    ):
        assert "does not apply" in refused(t, s.StateDelta(patch=[bad])), bad
    assert t.state == {"root": 1}


def test_the_document_never_shares_a_value_with_the_patch_sent_on():
    t = translator({})
    patch = [{"op": "add", "path": "/a", "value": {"x": 1}}, {"op": "replace", "path": "/a/x", "value": 2}]
    [delta] = t.translate(s.StateDelta(patch=patch))
    assert isinstance(delta, e.StateDelta) and delta.delta[0]["value"] == {"x": 1}
    assert t.state == {"a": {"x": 2}}


def test_only_rfc_6902_operations_are_applied():
    t = translator({"s": "a"})
    detail = refused(t, s.StateDelta(patch=[{"op": "append", "path": "/s", "value": "b"}]))  # jsonpatch's own extension
    assert "not one of RFC 6902's" in detail and t.state == {"s": "a"}


@pytest.mark.parametrize(
    ("patch", "said"),
    [
        # Each copy of the root doubles the document: 21 would make it 2 MiB times its size.
        (
            [{"op": "copy", "from": "", "path": f"/k{i}"} for i in range(21)],
            "larger than the gateway's bound of 1048576 bytes (--max-state-bytes)",
        ),
        ([{"op": "copy", "from": "/s", "path": f"/c{i}"} for i in range(1000)], "larger than the gateway's bound"),
        # Copy and remove keep the size level; the work is what grows.
        (
            [op for _ in range(2000) for op in ({"op": "copy", "from": "/s", "path": "/t"}, {"op": "remove", "path": "/t"})],
            "bytes of work",
        ),
    ],
)
def test_a_patch_is_refused_before_its_work_is_done(patch, said):
    """The charge comes before each operation: the refusal names the bound, and the state is as it was."""
    state = {"s": "y" * 300_000}
    t = translator(state)
    assert said in refused(t, s.StateDelta(patch=patch))
    assert t.state is state and state == {"s": "y" * 300_000}


def test_a_patch_may_replace_most_of_a_state_near_its_bound():
    """A removal counts against the growth, and a move copies nothing."""
    t = translator({"big": "a" * 700_000})
    t.translate(s.StateDelta(patch=[{"op": "remove", "path": "/big"}, {"op": "add", "path": "/big", "value": "b" * 200_000}]))
    t.translate(s.StateDelta(patch=[{"op": "replace", "path": "/big", "value": "c" * 200_000}]))
    assert t.state == {"big": "c" * 200_000}
    t = translator({"big": "a" * 900_000})
    t.translate(s.StateDelta(patch=[{"op": "move", "from": "/big", "path": "/moved"}]))
    assert t.state == {"moved": "a" * 900_000}
    # No document in the middle of a patch may pass the bound either: copying first, then removing, is refused.
    copy_then_remove = [{"op": "copy", "from": "/moved", "path": "/copy"}, {"op": "remove", "path": "/moved"}]
    assert "larger than the gateway's bound" in refused(t, s.StateDelta(patch=copy_then_remove))
