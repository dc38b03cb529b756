"""The rest of AG-UI 1.0 through the gateway, judged by what the reference client's own state machine ends with
(@ag-ui/client 1.0 HttpAgent over SSE, and the gateway's WebSocketAgent): shared state, plans, predictive state,
client tools, snapshots, activities, raw events and sub-agents, with zero client warnings; and every event of
the same streams parsed by ag_ui.core."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import post_sse
from tests.test_node_client import check_run, drive

pytestmark = pytest.mark.node
KINDS = ["http", "ws"]
CONFIRM = {"name": "confirm", "description": "Ask the user to confirm", "parameters": {"type": "object", "properties": {}}}


def plain(text: str, *, state: object = None, tools: list | None = None, messages: list | None = None) -> dict:
    """A plain AG-UI request, as HttpAgent sends it (no iacCode extension)."""
    return {
        "threadId": f"t-{abs(hash(text)) % 10**8}",
        "runId": "r-1",
        "state": {} if state is None else state,
        "messages": messages or [{"id": "m-1", "role": "user", "content": text}],
        "tools": tools or [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",
    }


def texts(report: dict) -> list[str]:
    return [m["content"] for m in report["messages"] if m["role"] == "assistant" and m["content"]]


@pytest.mark.parametrize("kind", KINDS)
def test_shared_state_counts_turns_across_runs_when_the_client_sends_it_back(gateway, kind):
    report = drive(gateway.url, [{"message": "/state one"}, {"message": "/state two"}], kind=kind, initialState={"theme": "dark"})
    first, second = (check_run(run) for run in report["runs"])
    assert first["outcome"] == second["outcome"] == {"type": "success"}
    assert report["runs"][0]["state"] == {"theme": "dark", "demo": {"turns": 1, "lastMessage": "one"}}
    assert report["state"] == {"theme": "dark", "demo": {"turns": 2, "lastMessage": "two"}}
    assert texts(report) == ["State updated: turn 1", "State updated: turn 2"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_plan_ends_with_every_step_completed_in_the_clients_state(gateway, kind):
    report = drive(gateway.url, [{"message": "/plan 3"}], kind=kind, initialState={"kept": True})
    run = report["runs"][0]
    check_run(run)
    deltas = [e for e in run["events"] if e["type"] == "STATE_DELTA"]
    assert len(deltas) == 3, "one patch per step"
    steps = [{"description": f"Step {n}", "status": "completed"} for n in (1, 2, 3)]
    assert report["state"] == {"kept": True, "steps": steps}
    assert texts(report) == ["Done: 3 steps"]


@pytest.mark.parametrize("kind", KINDS)
def test_predictive_state_streams_the_tool_arguments_and_ends_in_the_state(gateway, kind):
    report = drive(gateway.url, [{"message": "/predict the draft"}], kind=kind)
    run = report["runs"][0]
    check_run(run)
    predict = next(e for e in run["events"] if e["type"] == "CUSTOM" and e["name"] == "PredictState")
    assert predict["value"] == [{"state_key": "document", "tool": "write_document", "tool_argument": "document"}]
    deltas = [e["delta"] for e in run["events"] if e["type"] == "TOOL_CALL_ARGS"]
    assert json.loads("".join(deltas)) == {"document": "the draft"} and len(deltas) > 1, "the arguments stream"
    assert report["state"] == {"document": "the draft"}
    assert [m["role"] for m in report["messages"]] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_tool_is_called_left_pending_and_its_result_continues_the_conversation(gateway, kind):
    steps = [{"message": '/frontend confirm {"really":true}', "tools": [CONFIRM]}, {"toolResult": "yes", "tools": [CONFIRM]}]
    report = drive(gateway.url, steps, kind=kind)
    called, continued = report["runs"]
    assert check_run(called)["outcome"]["type"] == "success"
    call = next(e for e in called["events"] if e["type"] == "TOOL_CALL_START")
    assert call["toolCallName"] == "confirm" and called["pendingToolCallIds"] == [call["toolCallId"]]
    assert not any(e["type"] == "TOOL_CALL_RESULT" for e in called["events"]), "the client runs it, not the agent"
    assert check_run(continued)["outcome"] == {"type": "success"} and continued["pendingToolCallIds"] == []
    assert [(m["role"], m["toolCalls"]) for m in report["messages"]] == [("user", 0), ("assistant", 1), ("tool", 0), ("assistant", 0)]
    assert texts(report)[-1] == "The confirm tool returned: yes"


@pytest.mark.parametrize("kind", KINDS)
def test_snapshots_activities_raw_events_and_sub_agents_end_where_the_client_expects(gateway, kind):
    steps = [{"message": "/snapshot"}, {"message": "/activity"}, {"message": "/raw"}, {"message": "/subagent scout"}]
    report = drive(gateway.url, steps, kind=kind)
    for run in report["runs"]:
        assert check_run(run)["outcome"] == {"type": "success"}
    assert "Snapshot of 1 messages" in texts(report), "the snapshot's new message is the client's"
    activity = [m for m in report["messages"] if m["role"] == "activity"]
    assert activity and activity[0]["activityType"] == "progress" and activity[0]["content"] == {"percent": 100}
    assert [e["event"] for e in report["runs"][2]["events"] if e["type"] == "RAW"] == [{"kind": "demo.raw", "n": 1}]
    owned = [m for m in report["messages"] if m.get("subagentRunId")]
    assert len(owned) == 1 and owned[0]["content"] == "scout reporting: the sub-task is done."
    assert texts(report)[-1] == "The scout sub-agent finished."


def test_every_feature_event_parses_with_ag_ui_core(gateway, client):
    """post_sse validates each event with ag_ui.core's models and refuses a null anywhere."""
    for command in ("/state x", "/plan 2", "/predict d", "/snapshot", "/activity", "/raw", "/subagent", "/frontend confirm"):
        result = post_sse(client, gateway.url + "/", plain(command, tools=[CONFIRM]))
        assert result.events[-1]["type"] == "RUN_FINISHED", (command, result.events[-1])


@pytest.mark.parametrize(
    ("tools", "field"),
    [
        ([{"name": "bad name", "parameters": {}}], "tools[0].name"),
        ([{"name": "a" * 65}], "tools[0].name"),
        ([{"name": "ok", "parameters": []}], "tools[0].parameters"),
        ([{"name": "ok", "description": 3}], "tools[0].description"),
        ([CONFIRM, CONFIRM], "tools[1].name"),
        (["confirm"], "tools[0]"),
        ([{"name": f"t{i}"} for i in range(129)], "tools"),
        ([{"name": "big", "description": "x" * (256 * 1024)}], "tools"),
    ],
)
def test_client_tools_are_validated_and_bounded_before_the_run(gateway, client, tools, field):
    response = client.post(gateway.url + "/", json=plain("/frontend confirm", tools=tools))
    assert response.status_code == 400 and response.json()["error"]["code"] == "INVALID_INPUT"
    assert response.json()["error"]["field"] == field


def test_the_iac_code_extension_keeps_refusing_client_tools(gateway, client):
    from tests.support import run_body

    body = run_body("hello")
    body["tools"] = [CONFIRM]
    response = client.post(gateway.url + "/", json=body)
    assert response.status_code == 400 and response.json()["error"]["field"] == "tools"


def test_a_run_of_only_a_tool_result_without_a_prior_call_still_needs_a_user_message_with_the_extension(gateway, client):
    from tests.support import run_body

    body = run_body("x")
    body["messages"] = [{"id": "t-1", "role": "tool", "toolCallId": "call-1", "content": "done"}]
    response = client.post(gateway.url + "/", json=body)
    assert response.status_code == 400 and response.json()["error"]["field"] == "messages"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    from tests.support import Gateway

    server = Gateway(tmp_path_factory.mktemp("mirror"), "--agent", "tests.mirror_agent:MirrorAgent").start()
    yield server
    server.stop()


def test_a_plain_request_hands_its_backend_the_whole_conversation_tools_state_context_and_props(mirror, client):
    conversation = [
        {"id": "s-1", "role": "system", "content": "Be brief."},
        {"id": "d-1", "role": "developer", "content": "Use metric units."},
        {"id": "u-1", "role": "user", "content": "Call the tool"},
        {
            "id": "a-1",
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "c-1", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}],
        },
        {"id": "t-1", "role": "tool", "toolCallId": "c-1", "content": "yes"},
        {"id": "u-2", "role": "user", "content": [{"type": "text", "text": "And now?"}]},
    ]
    body = plain("ignored", state={"theme": "dark"}, tools=[CONFIRM], messages=conversation)
    body.update(context=[{"description": "page", "value": "/ui"}], parentRunId="r-0", forwardedProps={"app": {"tier": "gold"}})
    result = post_sse(client, mirror.url + "/", body)
    seen = next(e["snapshot"] for e in result.events if e["type"] == "STATE_SNAPSHOT")
    assert seen["plain"] is True and seen["userText"] == "And now?"
    assert [(m["id"], m["role"]) for m in seen["messages"]] == [(m["id"], m["role"]) for m in conversation], "every role, in order"
    assert seen["messages"][3]["toolCalls"][0]["function"]["name"] == "confirm" and seen["messages"][4]["toolCallId"] == "c-1"
    assert seen["tools"] == ["confirm"] and seen["state"] == {"theme": "dark"}
    assert seen["context"] == [{"description": "page", "value": "/ui"}] and seen["parentRunId"] == "r-0"
    assert seen["forwardedProps"] == {"app": {"tier": "gold"}}


def test_with_the_iac_code_extension_the_backend_gets_the_seed_contract_only(mirror, client):
    from tests.support import run_body

    body = run_body("hello")
    body["state"] = {"theme": "dark"}
    result = post_sse(client, mirror.url + "/", body)
    seen = next(e["snapshot"] for e in result.events if e["type"] == "STATE_SNAPSHOT")
    assert seen["plain"] is False and seen["messages"] == [] and "state" not in seen and "forwardedProps" not in seen
    assert seen["userText"] == "hello"


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_a_client_that_attaches_mid_plan_gets_the_state_it_missed_exactly_once(gateway, transport):
    """The run's log holds its state events as it holds text: a client that drops after the snapshot and one
    patch, and attaches again from its last position, rebuilds the same final state from what it read."""
    import asyncio
    import uuid

    import jsonpatch

    from tests.reattach_client import GRACE, assert_exactly_once, detached, events_url, open_get, open_post, ws_attach

    body = plain("/plan 12")  # 0.2 s a step: the drop is seen long before the plan ends
    body["threadId"] = f"plan-{uuid.uuid4().hex[:8]}"
    ros = f"thread:{body['threadId']}"
    if transport == "sse":
        head = open_post(gateway.url + "/", body, GRACE).take_then_drop(4)  # RUN_STARTED, the session, STATE_SNAPSHOT, a patch
        detached(gateway, body["runId"])
        status, stream = open_get(events_url(gateway.url, body, rosInvocationId=ros), {"last-event-id": str(head[-1][0])})
        assert status == 200
        rest = stream.rest()
    else:
        url = gateway.url.replace("http", "ws") + "/ws"
        head = asyncio.run(ws_attach(url, {"op": "run", "input": body, "reattachGraceSeconds": 30}, 4))
        detached(gateway, body["runId"])
        attach = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": ros}
        rest = asyncio.run(ws_attach(url, {**attach, "lastEventId": str(head[-1][0])}))
    events = assert_exactly_once([head, rest])
    assert [e["type"] for e in events[:4]] == ["RUN_STARTED", "CUSTOM", "STATE_SNAPSHOT", "STATE_DELTA"]
    state = events[2]["snapshot"]
    for event in events:
        if event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    assert [step["status"] for step in state["steps"]] == ["completed"] * 12
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}


def test_a_client_that_declares_no_protocol_version_gets_what_its_older_schema_accepts(gateway, client):
    """@ag-ui/core 0.0.x (CopilotKit 1.75 ships 0.0.59) declares no protocolVersion, and its schema refuses 1.0's
    pendingToolCallIds and `cancelled` outcome: a run it starts ends in what it accepts, and its pending tool call is
    still the call with no result. A client that declares 1.0 gets 1.0's outcomes. Chosen per run, from the input."""
    from tests.reattach_client import open_post
    from tests.support import post_sse
    from tests.test_cancel_and_disconnect import CANCEL
    from tests.test_differential import check_schemas

    older = {key: value for key, value in plain('/frontend confirm {"really":true}', tools=[CONFIRM]).items() if key != "protocolVersion"}
    older["threadId"] = f"t-older-{uuid.uuid4().hex[:8]}"
    called = post_sse(client, gateway.url + "/", older)
    assert called.terminal["outcome"] == {"type": "success"}, called.terminal
    assert [event["toolCallName"] for event in called.events if event["type"] == "TOOL_CALL_START"] == ["confirm"]
    assert not any(event["type"] == "TOOL_CALL_RESULT" for event in called.events), "the call with no result is the pending one"
    declared = post_sse(client, gateway.url + "/", {**older, "threadId": older["threadId"] + "-1.0", "protocolVersion": "1.0"})
    assert declared.terminal["outcome"]["pendingToolCallIds"] != []

    thread = f"t-older-{uuid.uuid4().hex[:8]}"
    slow = {**older, "threadId": thread, "runId": "r-stop", "tools": [], "messages": [{"id": "m", "role": "user", "content": "/slow 5"}]}
    stream = open_post(gateway.url + "/", slow)
    head = stream.take(3)
    execution = next(e["value"]["executionId"] for _, e in head if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")
    cancel = client.post(gateway.url + CANCEL.format(execution), json={"threadId": thread, "rosInvocationId": f"thread:{thread}"})
    assert cancel.status_code == 200, cancel.text
    stopped = [event for _, event in [*head, *stream.rest()]]
    assert stopped[-1]["type"] == "RUN_FINISHED" and "outcome" not in stopped[-1], stopped[-1]
    check_schemas([], [*called.events, *stopped], core="0.0.59")
