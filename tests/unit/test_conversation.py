"""The conversation a thread keeps: events applied as @ag-ui/client 1.0 applies them, the bound per thread, the title,
and a run's part recorded against a memory store (its input messages the thread lacks, its events, its state)."""

from __future__ import annotations

import asyncio

import msgspec

from gateway.engine.conversation import Conversation
from gateway.engine.history import HistoryPolicy, RunRecorder, bounded, title_of
from store import Admission, Lease, Progress, ThreadHistory
from store.memory import MemoryStore


def applied(messages, *events):
    conversation = Conversation(messages)
    for event in events:
        conversation.apply(event)
    return conversation.settled()


def test_text_streams_into_one_message_and_an_empty_one_is_kept():
    messages = applied(
        [{"id": "u", "role": "user", "content": "hi"}],
        {"type": "TEXT_MESSAGE_START", "messageId": "a", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "Hel"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "lo"},
        {"type": "TEXT_MESSAGE_END", "messageId": "a"},
        {"type": "TEXT_MESSAGE_START", "messageId": "empty", "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": "empty"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "unknown", "delta": "dropped, as the client drops it"},
    )
    assert messages == [
        {"id": "u", "role": "user", "content": "hi"},
        {"id": "a", "role": "assistant", "content": "Hello"},
        {"id": "empty", "role": "assistant", "content": ""},
    ]


def test_a_tool_call_joins_its_parent_and_its_result_follows_the_call():
    messages = applied(
        [{"id": "u", "role": "user", "content": "go"}, {"id": "p", "role": "assistant", "content": ""}],
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search", "parentMessageId": "p"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"x"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "later", "role": "assistant"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "found"},
        {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "orphan"},
    )
    assert [m["id"] for m in messages] == ["u", "p", "r1", "later", "c2"]
    assert messages[1]["toolCalls"] == [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}]
    assert messages[2] == {"id": "r1", "toolCallId": "c1", "role": "tool", "content": "found"}
    assert messages[4]["toolCalls"][0]["function"]["name"] == "orphan"


def test_encrypted_values_land_on_their_message_and_tool_call():
    messages = applied(
        [],
        {"type": "REASONING_MESSAGE_START", "messageId": "think"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "think", "delta": "hmm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "think"},
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "think", "encryptedValue": "sig"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "t"},
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "c", "encryptedValue": "sig2"},
    )
    assert messages[0] == {"id": "think", "role": "reasoning", "content": "hmm", "encryptedValue": "sig"}
    assert messages[1]["toolCalls"][0]["encryptedValue"] == "sig2"


def test_a_messages_snapshot_replaces_what_it_names_and_keeps_activities_it_does_not_speak_of():
    messages = applied(
        [{"id": "u", "role": "user", "content": "old"}, {"id": "gone", "role": "assistant", "content": "x"}],
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "plan", "content": {"steps": [1]}},
        {"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "plan", "patch": [{"op": "add", "path": "/steps/-", "value": 2}]},
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [{"id": "u", "role": "user", "content": "new"}, {"id": "n", "role": "assistant", "content": "y"}],
        },
    )
    assert messages == [
        {"id": "u", "role": "user", "content": "new"},
        {"id": "act", "role": "activity", "activityType": "plan", "content": {"steps": [1, 2]}},
        {"id": "n", "role": "assistant", "content": "y"},
    ]


def test_the_bound_drops_the_oldest_whole_messages_and_a_call_takes_its_results_with_it():
    messages = [
        {"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "x" * 200}}]},
        {"id": "r", "role": "tool", "toolCallId": "c", "content": "y" * 200},
        {"id": "u", "role": "user", "content": "z" * 100},
    ]
    kept, dropped, encoded = bounded(messages, 300)
    assert [m["id"] for m in kept] == ["u"] and dropped == 2 and msgspec.json.decode(encoded) == kept
    assert bounded(messages, 10_000)[1] == 0


def test_the_title_is_the_first_user_text_cut_at_80():
    assert title_of([{"role": "assistant", "content": "no"}, {"role": "user", "content": [{"type": "text", "text": "  a   b "}]}]) == "a b"
    assert title_of([{"role": "user", "content": "x" * 100}]) == "x" * 79 + "…"
    assert title_of([{"role": "user", "content": ""}]) is None


def test_a_run_records_only_the_input_its_thread_lacks_then_its_events_with_its_end():
    async def scenario():
        store = MemoryStore(3600)
        policy = HistoryPolicy("plain", 1 << 20)
        first_input = [{"id": "u1", "role": "user", "content": "hello"}]
        for run_id, sent, reply in (
            ("r1", first_input, "one"),
            (
                "r2",
                [*first_input, {"id": "a1", "role": "assistant", "content": "one"}, {"id": "u2", "role": "user", "content": "again"}],
                "two",
            ),
        ):
            admission = Admission("t", run_id, "d" + run_id, "", None, "ros", False, "e" + run_id, store.owner_id)
            granted = await store.admit(admission)
            recorder = RunRecorder(policy, "|", "t", run_id, [dict(m) for m in sent])
            recorder.start(store, "t")
            recorder.take([b'{"type":"TEXT_MESSAGE_START","messageId":"a%s","role":"assistant"}' % run_id[1:].encode()])
            recorder.take([b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"a%s","delta":"%s"}' % (run_id[1:].encode(), reply.encode())])
            recorder.take([b'{"type":"RUN_FINISHED","threadId":"t","runId":"x"}'])  # passed over
            history = await recorder.written({"n": run_id}, "completed", "success")
            lease = Lease("t", run_id, "e" + run_id if granted.execution is None else granted.execution.execution_id, granted.fence)
            await store.finish_run(lease, "completed", Progress(0, {}), history)
        kept = await store.read_history("t")
        return msgspec.json.decode(kept.conversation), msgspec.json.decode(kept.summary), await store.list_threads("|", None, 10)

    conversation, summary, listed = asyncio.run(scenario())
    assert [m["id"] for m in conversation["messages"]] == ["u1", "a1", "u2", "a2"]
    assert conversation["state"] == {"n": "r2"} and conversation["droppedMessages"] == 0
    assert summary["title"] == "hello" and summary["messageCount"] == 4 and [r["runId"] for r in summary["runs"]] == ["r1", "r2"]
    assert [key for key, _ in listed] == ["t"]


def test_retention_removes_a_thread_whole_and_a_recent_rename_does_not_keep_its_meta_alive():
    from store.file import whole_threads

    held = {"t", "t\x00c", "t\x00s", "t\x00m", "u", "u\x00m"}
    # "t" expired (its meta too old or not): all of it goes; "u" is alive: its old meta stays; an orphan side goes.
    assert sorted(whole_threads(["t", "u\x00m", "gone\x00s"], held)) == sorted(["t", "t\x00c", "t\x00s", "t\x00m", "gone\x00s"])

    async def scenario():
        now = [1000.0]
        store = MemoryStore(100, clock=lambda: now[0])
        admission = Admission("t", "r", "d", "", None, "ros", False, "e", store.owner_id)
        granted = await store.admit(admission)
        recorder = RunRecorder(HistoryPolicy("plain", 1 << 20), "|", "t", "r", [{"id": "u1", "role": "user", "content": "hi"}])
        recorder.start(store, "t")
        history = await recorder.written({}, "completed", "success")
        await store.finish_run(Lease("t", "r", granted.execution.execution_id, granted.fence), "completed", Progress(0, {}), history)
        now[0] += 90
        assert await store.write_meta("t", b'{"title":"kept a while"}')
        now[0] += 20  # the thread was last written 110 s ago, its meta 20 s ago
        removed = await store.purge_expired()
        return removed, await store.read_history("t"), await store.list_threads("|", None, 10)

    removed, kept, listed = asyncio.run(scenario())
    assert removed == 1 and kept == ThreadHistory() and listed == []


def test_an_idle_threads_join_gives_no_position_to_attach_from_and_names_its_runs_end_over_sse():
    from gateway.engine.hydrate import IdleThread, idle_events
    from transports.sse_framing import named_records
    from transports.ws_framing import event_frames

    entries = idle_events("t", "r1", [{"id": "u", "role": "user", "content": "hi"}], {}, [])
    idle = IdleThread("t", "r1", entries)
    frames = event_frames(entries, "s", idle.positions, mux=True)
    assert len(frames) == 4 and not any(b'"eventId"' in frame for frame in frames)
    assert named_records(entries, idle.run_id).count(b"id: r1:end\n") == 4
