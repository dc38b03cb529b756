"""The A2A backend against a real A2A 1.0 agent (a2a-sdk) on loopback: every mapping, interrupts, ends, cancel."""

from __future__ import annotations

import json
import os

import pytest

from tests.a2a_agent import A2AAgentServer
from tests.support import assert_well_formed_run, pending_interrupt, post_sse, run_body, session_of
from tests.test_websocket import verify_with_node

pytestmark = pytest.mark.a2a


@pytest.fixture(scope="module")
def agent():
    server = A2AAgentServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway_a2a(agent, tmp_path_factory):
    from tests.support import Gateway

    server = Gateway(
        tmp_path_factory.mktemp("a2a"),
        "--agent",
        "a2a+" + agent.url,
        "--agent-token",
        "agent-secret-token",
        "--allowed-cwd",
        "/tmp",
        "--heartbeat-seconds",
        "0.5",
    ).start()
    yield server
    server.stop()


def run(client, server, text, **kw):
    result = post_sse(client, server.url + "/", run_body(text, **kw))
    assert result.status == 200, result.raw
    assert_well_formed_run(result.events)
    verify_with_node([result.events])
    return result


def text_of(result):
    return "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT"))


def last_message(agent):
    return [c for c in agent.calls if c["method"] == "SendStreamingMessage"][-1]["message"]


def test_plain_requests_need_a_default_workspace_and_the_error_names_the_flag(gateway_a2a, client):
    """A real backend works on real files: without --default-cwd the operator has chosen no workspace for plain
    AG-UI clients, and the refusal says how to choose one."""
    body = run_body("plain")
    body["forwardedProps"] = {}
    refused = client.post(gateway_a2a.url + "/", json=body)
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "INVALID_INPUT" and error["field"] == "forwardedProps.iacCode"
    assert "--default-cwd" in error["message"] and "AGUI_GATEWAY_DEFAULT_CWD" in error["message"]


def test_plain_text_agent(gateway_a2a, agent, client):
    body = run_body("plain")
    result = post_sse(client, gateway_a2a.url + "/", body)
    assert_well_formed_run(result.events)
    assert text_of(result) == "Hello from A2A" and result.terminal["outcome"] == {"type": "success"}
    assert len(result.of("TEXT_MESSAGE_START")) == 1, "deltas of one agent message form one AG-UI message"
    session = result.custom("iac-code.session.v1")[0]
    assert session["contextId"].startswith("agui-") and len(session["contextId"]) == 45 and session["taskId"]
    sent = last_message(agent)
    assert sent["role"] == "ROLE_USER" and sent["contextId"] == session["contextId"]
    assert sent["messageId"] == body["messages"][0]["id"]
    assert sent["metadata"]["iac_code"]["cwd"] == "/tmp/agui-tests/ws"
    verify_with_node([result.events])


def test_rich_runtime_signals(gateway_a2a, client):
    result = run(client, gateway_a2a, "rich")
    assert result.of("REASONING_START") and "Thinking about it." in "".join(e["delta"] for e in result.of("REASONING_MESSAGE_CONTENT"))
    assert text_of(result) == "Let me check. All good.", "the final text is not repeated"
    assert [e["toolCallName"] for e in result.of("TOOL_CALL_START")] == ["ros_validate"]
    assert json.loads("".join(e["delta"] for e in result.of("TOOL_CALL_ARGS"))) == {"template": "vpc"}
    assert len(result.of("TOOL_CALL_RESULT")) == 1, "one result per call"
    progress = result.custom("iac-code.tool-progress.v1")
    assert progress and progress[0]["toolCallId"] == "tu-1" and progress[0]["progress"] == 0.5
    artifact = result.custom("iac-code.artifact.v1")[0]
    assert artifact["artifactId"] == "art-1" and artifact["title"] == "template.yaml"
    assert result.terminal["outcome"] == {"type": "success"}, "input-required without a required input ends the turn"
    assert result.terminal["usage"] == [{"model": "qwen", "inputTokens": 11, "outputTokens": 7, "totalTokens": 18}]
    session = result.custom("iac-code.session.v1")
    assert len(session) == 1 and session[0]["sessionId"] == "sess-1"


def test_pipeline_envelopes_single_and_batched(gateway_a2a, client):
    result = run(client, gateway_a2a, "pipeline")
    assert [(e["type"], e["stepName"]) for e in result.events if e["type"].startswith("STEP_")] == [
        ("STEP_STARTED", "plan"),
        ("STEP_FINISHED", "plan"),
    ]
    kinds = [v["eventType"] for v in result.custom("iac-code.pipeline.v1")]
    assert kinds == ["pipeline_started", "candidate_started", "pipeline_completed"], "duplicates and unknown types dropped"
    assert [v["eventId"] for v in result.custom("iac-code.pipeline.v1")] == ["ev-2", "ev-4", "ev-7"]
    assert text_of(result) == "Planning. "


def test_permission_interrupt_and_allow(gateway_a2a, agent, client):
    body = run_body("permission")
    first = post_sse(client, gateway_a2a.url + "/", body)
    assert_well_formed_run(first.events)
    interrupt = pending_interrupt(first)
    assert interrupt["id"] == "in-perm-1" and interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "tu-9"
    assert interrupt["message"] == "Allow deploy?" and interrupt["metadata"]["toolName"] == "deploy"
    assert interrupt["metadata"]["title"] == "Deploy the stack" and interrupt["responseSchema"]["properties"]["decision"]["enum"] == [
        "allow_once",
        "deny",
    ]
    task_id = first.custom("iac-code.session.v1")[0]["taskId"]
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    second = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    sent = last_message(agent)
    assert sent["taskId"] == task_id
    data = sent["parts"][0]["data"]
    assert data == {
        "schemaVersion": 1.0,
        "kind": "permission",
        "requestTaskId": task_id,
        "inputId": "in-perm-1",
        "toolUseId": "tu-9",
        "decision": "allow_once",
    }
    assert second.of("TOOL_CALL_RESULT")[0]["content"] == "deployed" and text_of(second) == "Deployed."
    again = post_sse(client, gateway_a2a.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert again.terminal["code"] == "RESUME_ALREADY_APPLIED"


def test_permission_cancelled_means_deny(gateway_a2a, agent, client):
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=[{"interruptId": "in-perm-1", "status": "cancelled"}])
    assert last_message(agent)["parts"][0]["data"]["decision"] == "deny"
    assert text_of(result) == "Not deployed."


@pytest.mark.parametrize(
    "script, interrupt_id, payload, sent_text",
    [
        ("question", "in-q-1", {"answer": "cn-beijing"}, "Beijing"),
        ("question", "in-q-1", {"answer": "somewhere else"}, "somewhere else"),
        ("candidates", "in-c-1", {"candidateId": "c2"}, "Large"),
    ],
)
def test_question_and_candidate_answers_are_text(gateway_a2a, agent, client, script, interrupt_id, payload, sent_text):
    body = run_body(script)
    interrupt = pending_interrupt(post_sse(client, gateway_a2a.url + "/", body))
    assert interrupt["id"] == interrupt_id
    result = run(
        client, gateway_a2a, None, thread=body["threadId"], resume=[{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]
    )
    assert last_message(agent)["parts"] == [{"text": sent_text}]
    assert text_of(result) == f"You chose: {sent_text}"


def test_pending_permissions_on_the_task(gateway_a2a, client):
    interrupt = pending_interrupt(post_sse(client, gateway_a2a.url + "/", run_body("pending")))
    assert interrupt["id"] == "in-p-2" and interrupt["toolCallId"] == "tu-2" and interrupt["message"] == "Delete?"


@pytest.mark.parametrize(
    "script, code",
    [
        ("fail", "A2A_EXECUTION_FAILED"),
        ("reject", "A2A_EXECUTION_FAILED"),
        ("auth", "A2A_EXECUTION_FAILED"),
        ("stuck", "A2A_EXECUTION_FAILED"),
        ("canceled", "CANCELLED"),
        ("foreign", "A2A_PROTOCOL_ERROR"),
    ],
)
def test_terminal_states_and_identity_violations(gateway_a2a, client, script, code):
    result = run(client, gateway_a2a, script)
    assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == code


def test_unreachable_agent(start_gateway, client):
    from tests.support import free_port

    server = start_gateway("--agent", f"a2a+http://127.0.0.1:{free_port()}/")
    result = run(client, server, "plain")
    assert result.terminal["code"] == "A2A_UNAVAILABLE"


def test_cancel_reaches_the_agent(gateway_a2a, agent, client):
    from tests.test_cancel_and_disconnect import CANCEL, open_stream, read_until

    body = run_body("slow")
    http, response, records = open_stream(gateway_a2a.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    session = session_of(head)
    answer = client.post(
        gateway_a2a.url + CANCEL.format(session["executionId"]), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"}
    )
    assert answer.json()["status"] == "cancelled"
    events = head + list(records)
    assert events[-1]["outcome"] == {"type": "cancelled"}
    http.close()
    assert {"method": "CancelTask", "taskId": session["taskId"]} in agent.calls


def test_rejected_answer_stays_pending_and_survives_a_restart(agent, start_gateway, client):
    server = start_gateway("--agent", "a2a+" + agent.url)
    body = run_body("permission")
    post_sse(client, server.url + "/", body)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    agent.agent.refuse_next_answer = 1
    refused = post_sse(client, server.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert refused.terminal["type"] == "RUN_ERROR" and refused.terminal["code"] == "A2A_EXECUTION_FAILED"
    assert agent.calls[-1]["method"] == "refused"
    # The interrupt is still pending: a normal turn is refused.
    assert (
        json.loads(post_sse(client, server.url + "/", run_body("new turn", thread=body["threadId"])).raw)["error"]["code"]
        == "RESUME_REQUIRED"
    )
    server.stop()
    restarted = start_gateway("--agent", "a2a+" + agent.url, "--state-dir", server.state_dir)
    accepted = post_sse(client, restarted.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert accepted.terminal["outcome"] == {"type": "success"} and text_of(accepted) == "Deployed."


def test_secrets_reach_the_agent_for_that_request_only(gateway_a2a, agent, client):
    from tests.test_secrets import SECRETS, secret_ext

    run(client, gateway_a2a, "permission", iac=secret_ext())
    sent = last_message(agent)["metadata"]["iac_code"]
    assert sent["iac_code_api_key"] == SECRETS["llmApiKey"]
    assert sent["alibaba_cloud_access_key_secret"] == SECRETS["accessKeySecret"]
    assert sent["alibaba_cloud_region_id"] == "cn-hangzhou"
    for directory, _, files in os.walk(gateway_a2a.state_dir):
        for name in files:
            data = open(os.path.join(directory, name), "rb").read()
            assert not any(secret.encode() in data for secret in SECRETS.values())
    assert "agent-secret-token" not in gateway_a2a.logs()


async def test_a2a_over_websocket(gateway_a2a):
    import websockets

    from tests.test_websocket import run_over, ws_url

    async with websockets.connect(ws_url(gateway_a2a)) as ws:
        events = await run_over(ws, run_body("rich"))
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "success"}


def test_a_dropped_connection_is_unavailable(gateway_a2a, agent, client):
    agent.agent.refuse_next_answer = 1  # arms the proxy that drops the next stream
    result = run(client, gateway_a2a, "drop")
    assert result.terminal["code"] == "A2A_UNAVAILABLE"
    agent.agent.refuse_next_answer = 0


@pytest.fixture
def restore(agent):
    yield agent
    agent.restore_mode = "absent"
    agent.pipeline_state = None


def test_session_restore_before_a_resume(gateway_a2a, restore, client):
    agent = restore
    body = run_body("permission")
    first = post_sse(client, gateway_a2a.url + "/", body)
    task_id = first.custom("iac-code.session.v1")[0]["taskId"]
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    agent.restore_mode = "retryable"
    retry = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert retry.terminal["code"] == "A2A_UNAVAILABLE" and "retry" in retry.terminal["message"]
    restored = [c for c in agent.calls if c["method"] == "ensure-restored"][-1]["body"]
    assert restored == {"cwd": "/tmp/agui-tests/ws", "sessionId": None, "taskId": task_id}
    ok = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)  # still pending; now ready
    assert ok.terminal["outcome"] == {"type": "success"} and text_of(ok) == "Deployed."
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.restore_mode = "missing"
    lost = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert lost.terminal["code"] == "EXECUTION_LOST"


def test_pipeline_recovery_replays_missed_events_once(gateway_a2a, restore, client):
    agent = restore
    body = run_body("pipeline-ask")
    first = run(client, gateway_a2a, None, messages=body["messages"], thread=body["threadId"])
    assert pending_interrupt(first)["id"] == "in-pa-1"
    agent.pipeline_state = {
        "snapshot": {"phase": "selecting", "lastSequence": 4},
        "events": [
            {"eventId": "pa-2", "sequence": 2, "eventType": "pipeline_started"},  # already seen: dropped
            {"eventId": "pa-3", "sequence": 3, "eventType": "candidate_started", "candidate": "c1"},
            {"eventId": "pa-4", "sequence": 4, "eventType": "stack_progress", "data": {"percent": 40}},
        ],
    }
    entry = [{"interruptId": "in-pa-1", "status": "resolved", "payload": {"candidateId": "c1"}}]
    second = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    types = second.types()
    snapshot = second.of("ACTIVITY_SNAPSHOT")[0]
    assert snapshot["activityType"] == "iac-code.pipeline.v1" and snapshot["content"]["lastSequence"] == 4
    assert [v["eventId"] for v in second.custom("iac-code.pipeline.v1")] == ["pa-3", "pa-4"]
    assert types.index("ACTIVITY_SNAPSHOT") < types.index("TEXT_MESSAGE_START")
    params = [c for c in agent.calls if c["method"] == "pipeline-state"][-1]["params"]
    assert params["afterSequence"] == "2"
    assert text_of(second) == "You chose: Small"


def test_resume_preflight_checks_the_task_still_exists(gateway_a2a, agent, client):
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.rpc_methods.clear()
    agent.task_store._impl.tasks.clear()  # the agent forgot its tasks (e.g. it restarted without persistence)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    lost = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert lost.terminal["code"] == "EXECUTION_LOST"
    assert agent.rpc_methods == ["GetTask"], "no answer is sent for a task the agent no longer has"


def test_an_agent_frame_nested_too_deeply_is_a_protocol_error(gateway_a2a, client):
    result = post_sse(client, gateway_a2a.url + "/", run_body("deep-frame"))
    assert result.status == 200 and result.terminal["type"] == "RUN_ERROR"
    assert result.terminal["code"] == "A2A_PROTOCOL_ERROR" and "128" in result.terminal["message"]
