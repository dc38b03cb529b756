"""The A2A wire conformance table: one test per row of shared/spec/IAC_CODE_A2A_WIRE.md, named `test_s<section>_<row>`.

Frames in, signals (or the message the gateway sends) out; no network. Read the names top to bottom for the table.
"""

from __future__ import annotations

import json

import httpx
import pytest

from gateway.agents import signals as s
from gateway.agents.a2a import messages
from gateway.agents.a2a.backend import context_id_for, end_of
from gateway.agents.a2a.client import A2AClient, A2AError, _frames
from gateway.agents.a2a.frames import FrameReader, ProtocolViolation, normalise_state, unwrap
from gateway.agents.a2a.inputs import interrupt_from_input
from gateway.agents.a2a.pipeline import snapshot_signal, step_key
from gateway.agents.a2a.preflight import refused
from gateway.agents.base import AgentOptions, AgentRequest, CloudCredentials, ResumeAnswer
from gateway.engine.translator import PIPELINE_EVENT, Translator

CTX = "agui-ctx"


def status(text=None, *, task="task-1", state="TASK_STATE_WORKING", iac=None, message_id="task-1-message", context=CTX):
    update = {"taskId": task, "contextId": context, "status": {"state": state}}
    if text is not None:
        update["status"]["message"] = {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}
    if iac is not None:
        update["metadata"] = {"iac_code": iac}
    return {"statusUpdate": update}


def reader(**kw) -> FrameReader:
    return FrameReader(CTX, **kw)


def of(signals, kind):
    return [x for x in signals if isinstance(x, kind)]


def texts(signals) -> str:
    return "".join(x.text for x in of(signals, s.TextDelta))


def request(**kw) -> AgentRequest:
    options = kw.pop("options", AgentOptions(invocation_id="inv-1"))
    return AgentRequest(thread_id="t", run_id="run-1", execution_id="e", cwd="/ws", language="en", options=options, user_text="hi", **kw)


def resume_request(inputs: dict, *answers: ResumeAnswer) -> AgentRequest:
    return request(resume=answers, checkpoint={"taskId": "task-1", "inputs": inputs})


PERMISSION = {
    "schemaVersion": 1,
    "kind": "permission",
    "requestTaskId": "task-1",
    "contextId": CTX,
    "inputId": "permission-1",
    "toolUseId": "t1",
    "toolName": "bash",
    "title": "Run a local shell command",
    "purpose": "p",
    "effect": "local_execution",
    "target": "pwd",
    "isReadOnly": False,
    "prompt": "Run a local shell command Allow once?",
    "safeSummary": 'bash: {"command":"pwd"}',
    "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
    "language": "en",
    "required": True,
}


# -- §1 library, transport, auth --------------------------------------------------------------------------
def test_s1_the_client_is_made_with_the_a2a_version_and_the_bearer_token():
    """Its defaults; what the real agent receives on every call is checked end to end (test_a2a: the plain text agent)."""
    client = A2AClient("http://127.0.0.1:1/", "tok")
    assert client.http.headers["A2A-Version"] == "1.0" and client.http.headers["Authorization"] == "Bearer tok"


async def test_s1_one_sse_data_line_holds_one_json_rpc_response():
    body = b'data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"a"}}}\n\ndata: {"jsonrpc":"2.0","id":1,"result":{"message":{}}}\n\n'
    frames = [f async for f in _frames(httpx.Response(200, content=body))]
    assert frames == [{"task": {"id": "a"}}, {"message": {}}]


async def test_s1_json_rpc_errors_arrive_as_error_objects():
    body = b'data: {"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}\n\n'
    with pytest.raises(A2AError) as caught:
        _ = [f async for f in _frames(httpx.Response(200, content=body))]
    assert caught.value.error["code"] == -32602


def answering(status: int, content: bytes, content_type: str) -> tuple[A2AClient, list[dict]]:
    """A client whose agent answers every call with this one reply (httpx's own in-process transport), and the
    JSON-RPC requests it sent."""
    sent: list[dict] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(status, content=content, headers={"content-type": content_type})

    client = A2AClient("http://agent/")
    client.http = httpx.AsyncClient(transport=httpx.MockTransport(handle), headers=client.http.headers)
    return client, sent


class WireAgent:
    """An agent played over httpx's in-process transport: `replies[method or path]` is a list of replies taken
    in turn (a list of frames is an SSE stream, a dict a JSON body, an int a bare status; a frame or body with
    an `error` is sent as that JSON-RPC error); `sent` records every call as (method or path, params)."""

    def __init__(self, replies: dict[str, list]) -> None:
        self.replies = {key: list(value) for key, value in replies.items()}
        self.sent: list[tuple[str, dict]] = []

    def backend(self):
        from gateway.agents.a2a.backend import A2ABackend

        backend = A2ABackend("http://agent/")
        backend.client.http = httpx.AsyncClient(transport=httpx.MockTransport(self._handle), headers=backend.client.http.headers)
        return backend

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/":
            call = json.loads(request.content)
            key, params = call["method"], call["params"]
        else:
            key, params = request.url.path, dict(request.url.params) or (json.loads(request.content) if request.content else {})
        self.sent.append((key, params))
        reply = self.replies[key].pop(0)
        if isinstance(reply, int):
            return httpx.Response(reply, text="Not Found")
        if isinstance(reply, list):
            frames = [f if "error" in f else {"jsonrpc": "2.0", "id": "x", "result": f} for f in reply]
            body = b"".join(b"data: " + json.dumps(frame).encode() + b"\n\n" for frame in frames)
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        wrapped = reply if key.startswith("/") or "error" in reply else {"jsonrpc": "2.0", "id": "x", "result": reply}
        return httpx.Response(200, json=wrapped)

    def calls(self) -> list[str]:
        return [key for key, _ in self.sent]


async def test_s1_the_envelope_id_is_a_uuid4_on_every_call():
    import uuid

    client, sent = answering(200, b'{"jsonrpc":"2.0","id":"x","result":{}}', "application/json")
    await client.call("GetTask", {"id": "t"})
    await client.call("GetTask", {"id": "t"})
    ids = [request["id"] for request in sent]
    assert all(isinstance(i, str) and uuid.UUID(i).version == 4 for i in ids) and len(set(ids)) == 2, ids


@pytest.mark.parametrize("status", [200, 400, 404])
async def test_s1_a_json_rpc_error_answered_as_plain_json_to_a_streaming_call_raises_it(status):
    error = {"code": -32001, "message": "Task not found: task-9", "data": {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}}
    client, _ = answering(status, json.dumps({"jsonrpc": "2.0", "id": "x", "error": error}).encode(), "application/json")
    with pytest.raises(A2AError) as caught:
        _ = [frame async for frame in client.stream("SubscribeToTask", {"id": "task-9"})]
    assert caught.value.error == error, "the agent's code, message and data, kept"
    assert refused(caught.value).code == "SESSION_BACKUP_NOT_READY"


def test_s4_session_backup_not_ready_is_read_from_a2a_error_details_too():
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "INTERNAL_ERROR",
            "domain": "a2a-protocol.org",
            "metadata": {"code": "SESSION_BACKUP_NOT_READY", "retryable": True},
        }
    ]
    assert refused(A2AError({"code": -32603, "message": "syncing", "data": details})).code == "SESSION_BACKUP_NOT_READY"
    assert refused(A2AError({"code": -32603, "message": "no", "data": [{"reason": "X"}]})).code == "A2A_UNAVAILABLE"


async def test_s1_a_plain_json_result_to_a_streaming_call_is_its_one_frame():
    client, _ = answering(200, b'{"jsonrpc":"2.0","id":"x","result":{"task":{"id":"a"}}}', "application/json")
    assert [frame async for frame in client.stream("SendStreamingMessage", {})] == [{"task": {"id": "a"}}]


async def test_s1_a_plain_json_reply_past_the_frame_bound_is_malformed():
    from gateway.agents.a2a.client import MAX_FRAME_BYTES, MalformedFrame

    client, _ = answering(200, b'{"jsonrpc":"2.0","id":"x","result":"' + b"x" * MAX_FRAME_BYTES + b'"}', "application/json")
    with pytest.raises(MalformedFrame):
        _ = [frame async for frame in client.stream("SendStreamingMessage", {})]


# -- §2 a new user turn ---------------------------------------------------------------------------------------
def test_s2_new_turn_message_has_the_user_message_id_role_and_context_and_no_task_id():
    message = messages.new_turn(request(message_id="m-1"), CTX)
    assert message["messageId"] == "m-1" and message["role"] == "ROLE_USER" and message["contextId"] == CTX and "taskId" not in message
    assert message["parts"][0] == {"text": "hi"}


def test_s2_images_are_json_data_parts_with_filename_and_bytes():
    message = messages.new_turn(request(images=(("image/png", "AAAA"), ("image/webp", "BBBB"))), CTX)
    assert message["parts"][1:] == [
        {"data": {"filename": "image-1.png", "bytes": "AAAA"}, "mediaType": "image/png"},
        {"data": {"filename": "image-2.webp", "bytes": "BBBB"}, "mediaType": "image/webp"},
    ]


def test_s2_none_values_are_dropped_and_three_keys_are_always_present():
    iac = messages.iac_metadata(request())
    assert iac == {"cwd": "/ws", "preferredLanguage": "en", "cleanupOnly": False, "rosInvocationId": "inv-1"}


def test_s2_metadata_carries_the_options_in_snake_case_with_the_secrets():
    options = AgentOptions(
        invocation_id="inv-1",
        model="qwen",
        api_key="sk-1",
        thinking={"enabled": True, "effort": "low"},
        user_id="u1",
        channel="web",
        candidate_presentation="rich",
        run_mode="pipeline",
        pipeline_name="p",
        cleanup_only=True,
        cloud=CloudCredentials(access_key_id="ak", access_key_secret="sk", security_token="st", region_id="cn-hangzhou"),
    )
    iac = messages.iac_metadata(request(options=options))
    assert iac["iac_code_model"] == "qwen" and iac["iac_code_api_key"] == "sk-1" and iac["thinking"] == {"enabled": True, "effort": "low"}
    assert iac["run_mode"] == "pipeline" and iac["pipeline_name"] == "p" and iac["cleanupOnly"] is True
    assert iac["alibaba_cloud_access_key_secret"] == "sk" and iac["alibaba_cloud_region_id"] == "cn-hangzhou"


def test_s2_send_params_carry_accepted_output_modes():
    assert messages.params({"m": 1}) == {"message": {"m": 1}, "configuration": {"acceptedOutputModes": ["text/plain"]}}


# -- §3 finding the payload -----------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["task", "statusUpdate", "artifactUpdate", "message"])
def test_s3_payload_is_read_under_each_wrapper_key(key):
    assert unwrap({key: {"x": 1}}) == (key, {"x": 1})


@pytest.mark.parametrize(
    "bare, kind",
    [
        ({"id": "task-1", "contextId": CTX, "status": {"state": "TASK_STATE_WORKING"}}, "task"),
        ({"taskId": "task-1", "contextId": CTX, "status": {"state": "TASK_STATE_WORKING"}}, "statusUpdate"),
        ({"taskId": "task-1", "artifact": {"artifactId": "a"}}, "artifactUpdate"),
        ({"role": "ROLE_AGENT", "parts": [{"text": "x"}]}, "message"),
    ],
)
def test_s3_a_bare_result_without_a_wrapper_key_is_the_payload(bare, kind):
    assert unwrap(bare) == (kind, bare)


def test_s3_older_kind_frames_with_lowercase_states_parse():
    r = reader()
    signals = r.read(
        {
            "kind": "status-update",
            "taskId": "task-1",
            "contextId": CTX,
            "status": {"state": "working", "message": {"parts": [{"text": "hi"}]}},
        }
    )
    assert texts(signals) == "hi" and r.state == "working"


def test_s3_states_are_normalised():
    assert normalise_state("TASK_STATE_INPUT_REQUIRED") == "input-required" == normalise_state("input-required")
    assert normalise_state("TASK_STATE_AUTH_REQUIRED") == "auth-required" and normalise_state(None) is None


# -- §3 the signal table ---------------------------------------------------------------------------------------
def test_s3_text_delta_uses_the_agent_message_id():
    r = reader()
    first = r.read(status("Hel"))
    assert of(first, s.SessionInfo)[0].task_id == "task-1"
    assert of(first, s.TextDelta) == [s.TextDelta(text="Hel", message_id="task-1-message")]
    assert r.read(status("lo")) == [s.TextDelta(text="lo", message_id="task-1-message")]
    assert (
        r.read({"statusUpdate": {"taskId": "task-1", "status": {"message": {"role": "agent", "parts": [{"text": "!"}]}}}})[-1].text == "!"
    )


def test_s3_the_agents_message_going_on_after_a_tool_call_is_its_id_with_a_suffix():
    """A closed AG-UI message is never reopened: the agent's `<task>-message` after a tool call comes back as
    `<task>-message.2`, the agent's id as its prefix (README, A2A: text)."""
    t = Translator({"threadId": "t", "executionId": "e", "taskId": "task-1"}, 0, [])
    events = []
    for signal in (
        s.TextDelta(text="Checking. ", message_id="task-1-message"),
        s.ToolStart(tool_call_id="tu-1", name="bash"),
        s.ToolEnd(tool_call_id="tu-1"),
        s.ToolResult(tool_call_id="tu-1", content="ok"),
        s.TextDelta(text="Done.", message_id="task-1-message"),
        s.TextEnd(),
    ):
        events += t.translate(signal)
    starts = [event.message_id for event in events if type(event).__name__ == "TextMessageStart"]
    assert starts == ["task-1-message", "task-1-message.2"]


def test_s3_final_text_is_ignored_once_text_was_shown():
    r = reader()
    r.read(status("Hello"))
    r.read(status(iac={"tool": {"status": "started", "toolUseId": "c", "name": "ls"}}))
    final = r.read(status("Hello", message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))
    assert of(final, s.TextDelta) == []


def test_s3_final_text_is_the_answer_when_nothing_was_shown():
    r = reader()
    r.read(status(iac={"tool": {"status": "started", "toolUseId": "c", "name": "ls"}}))
    final = r.read(status("Whole answer", message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))
    assert texts(final) == "Whole answer"
    assert texts(r.read(status("Whole answer", message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))) == ""


def test_s3_task_snapshot_text_comes_from_trailing_agent_history_when_nothing_was_shown():
    history = [
        {"role": "ROLE_AGENT", "messageId": "old", "parts": [{"text": "last turn"}]},
        {"role": "ROLE_USER", "messageId": "u", "parts": [{"text": "q"}]},
        {"role": "ROLE_AGENT", "messageId": "a1", "parts": [{"text": "This "}]},
        {"role": "ROLE_AGENT", "messageId": "a1", "parts": [{"text": "turn."}]},
    ]
    task = {"task": {"id": "task-1", "contextId": CTX, "status": {"state": "TASK_STATE_WORKING"}, "history": history}}
    assert texts(reader().read(task)) == "This turn."
    shown = reader()
    shown.read(status("streamed"))
    assert texts(shown.read(task)) == "", "a snapshot never repeats text already shown"


def test_s3_thinking_is_reasoning():
    assert of(reader().read(status(iac={"thinking": {"type": "raw_thinking", "text": "hmm"}})), s.ReasoningDelta)[0].text == "hmm"


def test_s3_tool_start():
    assert of(reader().read(status(iac={"tool": {"status": "started", "toolUseId": "c1", "name": "ros"}})), s.ToolStart) == [
        s.ToolStart(tool_call_id="c1", name="ros")
    ]


def test_s3_tool_args_are_the_json_input_or_the_summary_then_end():
    r = reader(task_id="task-1")
    r.read(status(iac={"tool": {"status": "started", "toolUseId": "c1", "name": "ros"}}))
    assert r.read(status(iac={"tool": {"status": "input_delta", "toolUseId": "c1", "name": "ros"}})) == [], "input_delta is ignored"
    done = r.read(status(iac={"tool": {"status": "input_complete", "toolUseId": "c1", "toolInput": {"a": 1}, "inputSummary": "x"}}))
    assert done == [s.ToolArgs(tool_call_id="c1", delta='{"a": 1}'), s.ToolEnd(tool_call_id="c1")]
    summary = r.read(status(iac={"tool": {"status": "input_complete", "toolUseId": "c2", "name": "ls", "inputSummary": "list"}}))
    assert summary == [
        s.ToolStart(tool_call_id="c2", name="ls"),
        s.ToolArgs(tool_call_id="c2", delta='{"summary": "list"}'),
        s.ToolEnd(tool_call_id="c2"),
    ]


def test_s3_tool_result_once_per_tool_use_id_with_non_strings_json_encoded():
    r = reader(task_id="task-1")
    r.read(status())
    assert r.read(status(iac={"tool": {"status": "completed", "toolUseId": "c1", "result": {"ok": True}}})) == [
        s.ToolResult(tool_call_id="c1", content='{"ok": true}')
    ]
    assert r.read(status(iac={"tool": {"status": "failed", "toolUseId": "c1", "result": "late"}})) == []


def test_s3_tool_progress_is_a_custom_event():
    signals = reader().read(status(iac={"tool": {"status": "progress", "toolUseId": "c1", "name": "deploy", "mcpProgress": {"p": 1}}}))
    assert of(signals, s.ToolProgress) == [
        s.ToolProgress(tool_call_id="c1", data={"status": "progress", "name": "deploy", "mcpProgress": {"p": 1}})
    ]


def test_s3_usage_is_summed_by_provider_and_model_with_reported_totals():
    t = Translator({"executionId": "e"}, 0, [])
    r = reader()
    for usage in (
        {"provider": "p", "model": "m", "inputTokens": 10, "outputTokens": 5, "totalTokens": 20, "cachedInputTokens": 4},
        {"provider": "p", "model": "m", "inputTokens": 1, "outputTokens": 2},
    ):
        for signal in r.read(status(iac={"usage": usage})):
            t.translate(signal)
    [entry] = t.usage_entries() or []
    assert (entry.input_tokens, entry.output_tokens, entry.total_tokens, entry.cached_input_tokens) == (11, 7, 23, 4)


def test_s3_session_id_from_any_event_a_pipeline_envelope_or_a_batch():
    for iac in (
        {"iacCodeSessionId": "sess"},
        {"pipeline": {"eventId": "e1", "sequence": 1, "eventType": "x", "iacCodeSessionId": "sess"}},
        {"pipelineBatch": {"events": [{"eventId": "e1", "sequence": 1, "eventType": "x", "iacCodeSessionId": "sess"}]}},
    ):
        r = reader()
        r.read(status(iac=iac))
        assert r.session_id == "sess", iac


def test_s3_artifact_update_is_the_artifact_custom_with_schema_version():
    artifact = {
        "artifactId": "a1",
        "name": "t.yaml",
        "parts": [{"url": "file:///t.yaml", "filename": "t.yaml", "mediaType": "text/yaml", "metadata": {}}],
        "metadata": {"uri": "file:///t.yaml", "mediaType": "text/yaml", "byteSize": 3, "sha256": "ab", "sourcePath": "t.yaml"},
    }
    signals = reader().read(
        {"artifactUpdate": {"taskId": "task-1", "contextId": CTX, "artifact": artifact, "append": False, "lastChunk": True}}
    )
    assert of(signals, s.Artifact) == [s.Artifact(data={"schemaVersion": 1, **artifact})]


def test_s3_input_required_with_an_input_is_an_interrupt():
    r = reader()
    r.read(status(state="TASK_STATE_INPUT_REQUIRED", iac={"input": PERMISSION, "permission": {"pending": True}}))
    assert [req.id for req, _ in r.inputs] == ["permission-1"] and r.stop


def test_s3_pending_permissions_are_interrupts_treated_as_sideband():
    r = reader()
    pending = [{**PERMISSION, "inputId": "p1"}, {**PERMISSION, "inputId": "p2"}]
    r.read(
        {
            "task": {
                "id": "task-1",
                "contextId": CTX,
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
                "metadata": {"iac_code": {"pendingPermissions": pending}},
            }
        }
    )
    assert [(req.id, meta["sideband"]) for req, meta in r.inputs] == [("p1", True), ("p2", True)]


def test_s3_an_input_also_listed_as_pending_is_upgraded_to_sideband():
    r = reader()
    r.read(status(iac={"input": PERMISSION, "pendingPermissions": [PERMISSION]}))
    assert [meta["sideband"] for _, meta in r.inputs] == [True]


# -- §3 pipeline events -----------------------------------------------------------------------------------------
def env(seq, kind, **extra):
    return {"eventId": f"e{seq}", "sequence": seq, "eventType": kind, "pipelineRunId": "pr", **extra}


def test_s3_pipeline_single_and_batched_envelopes_are_read():
    r = reader()
    signals = r.read(status(iac={"pipeline": env(1, "pipeline_started"), "pipelineBatch": {"events": [env(2, "stack_progress")]}}))
    assert [x.event_type for x in of(signals, s.PipelineEvent)] == ["pipeline_started", "stack_progress"]


def test_s3_pipeline_deduplication_by_event_id_and_rising_sequence():
    r = reader()
    signals = r.read(
        status(
            iac={
                "pipelineBatch": {
                    "events": [env(1, "stack_progress"), env(1, "stack_progress"), {**env(1, "stack_progress"), "eventId": "other"}]
                }
            }
        )
    )
    assert len(of(signals, s.PipelineEvent)) == 1


def test_s3_pipeline_text_delta_has_one_message_per_run_scope_and_candidate():
    r = reader()
    a = env(
        1,
        "text_delta",
        scope="candidate_step",
        candidate={"id": "A", "runId": "ra"},
        candidateStep={"id": "g", "runId": "sa"},
        data={"text": "a"},
    )
    b = env(
        2,
        "text_delta",
        scope="candidate_step",
        candidate={"id": "B", "runId": "rb"},
        candidateStep={"id": "g", "runId": "sb"},
        data={"text": "b"},
    )
    signals = of(r.read(status(iac={"pipelineBatch": {"events": [a, b]}})), s.TextDelta)
    assert [(x.message_id, x.text) for x in signals] == [
        ("pipeline-message:pr:candidate_step:ra:sa", "a"),
        ("pipeline-message:pr:candidate_step:rb:sb", "b"),
    ]


def test_s3_pipeline_thinking_delta_is_reasoning():
    signals = reader().read(status(iac={"pipeline": env(1, "thinking_delta", data={"type": "raw_thinking", "text": "t"})}))
    assert of(signals, s.ReasoningDelta)[0].text == "t"


def test_s3_pipeline_tool_started_is_start_args_and_end():
    signals = reader().read(
        status(iac={"pipeline": env(1, "tool_started", data={"toolUseId": "t1", "toolName": "bash", "input": {"command": "pwd"}})})
    )
    assert [x for x in signals if not isinstance(x, s.SessionInfo)] == [
        s.ToolStart(tool_call_id="t1", name="bash"),
        s.ToolArgs(tool_call_id="t1", delta='{"command": "pwd"}'),
        s.ToolEnd(tool_call_id="t1"),
    ]


def test_s3_pipeline_tool_result():
    signals = reader().read(
        status(iac={"pipeline": env(1, "tool_result", data={"toolUseId": "t1", "toolName": "bash", "isError": True, "result": [1]})})
    )
    assert of(signals, s.ToolResult) == [s.ToolResult(tool_call_id="t1", content="[1]")]


def test_s3_pipeline_usage():
    signals = reader().read(
        status(
            iac={"pipeline": env(1, "usage", data={"provider": "p", "model": "m", "inputTokens": 1, "outputTokens": 2, "totalTokens": 3})}
        )
    )
    assert of(signals, s.Usage) == [s.Usage(input_tokens=1, output_tokens=2, total_tokens=3, provider="p", model="m")]


def test_s3_pipeline_step_keys():
    assert step_key(env(1, "step_started", step={"id": "plan"})) == "step:plan"
    assert step_key(env(1, "candidate_step_started", candidate={"id": "A"}, candidateStep={"id": "g"})) == "candidate:A:g"
    assert step_key(env(1, "candidate_step_started", subPipelineId="sub", candidateStep={"id": "g"})) == "candidate:sub:g"
    assert step_key(env(1, "candidate_step_started", candidate={"runId": "r"}, candidateStep={"id": "g"})) == "candidate:r:g"


@pytest.mark.parametrize(
    "kind, signal",
    [
        ("step_started", s.StepStart),
        ("input_received", s.StepStart),
        ("step_completed", s.StepFinish),
        ("step_failed", s.StepFinish),
    ],
)
def test_s3_pipeline_step_lifecycle(kind, signal):
    signals = reader().read(status(iac={"pipeline": env(1, kind, step={"id": "plan"})}))
    assert of(signals, signal) == [signal(name="step:plan")]


@pytest.mark.parametrize(
    "kind, signal",
    [("candidate_step_started", s.StepStart), ("candidate_step_completed", s.StepFinish), ("candidate_step_failed", s.StepFinish)],
)
def test_s3_pipeline_candidate_step_lifecycle(kind, signal):
    signals = reader().read(status(iac={"pipeline": env(1, kind, candidate={"id": "A"}, candidateStep={"id": "g"})}))
    assert of(signals, signal) == [signal(name="candidate:A:g")]


def test_s3_pipeline_allow_listed_custom_is_the_whole_envelope():
    envelope = {
        **env(7, "stack_progress"),
        "schemaVersion": "1.0",
        "createdAt": "now",
        "status": "working",
        "taskId": "task-1",
        "data": {"p": 1},
    }
    signals = reader().read(status(iac={"pipeline": envelope}))
    [custom] = Translator({"executionId": "e"}, 40, []).translate(of(signals, s.PipelineEvent)[0])[1:]
    assert custom.name == PIPELINE_EVENT and custom.value == envelope, "no field lost, the agent's sequence kept"


def test_s3_pipeline_unknown_and_standard_types_are_not_customs():
    signals = reader().read(
        status(
            iac={"pipelineBatch": {"events": [env(1, "internal_only"), env(2, "text_delta", data={"text": "x"}), env(3, "usage", data={})]}}
        )
    )
    assert of(signals, s.PipelineEvent) == []


# -- §3 input envelopes --------------------------------------------------------------------------------------
def test_s3_an_input_needs_required_true_and_an_input_id():
    r = reader()
    r.read(status(iac={"input": {**PERMISSION, "required": False}}))
    r.read(status(iac={"input": {**PERMISSION, "inputId": ""}}))
    assert r.inputs == []


def test_s3_an_inputs_task_and_context_must_be_the_bound_ones():
    r = reader(task_id="task-1")
    with pytest.raises(ProtocolViolation):
        r.read(status(iac={"input": {**PERMISSION, "requestTaskId": "task-2"}}))
    with pytest.raises(ProtocolViolation):
        reader(task_id="task-1").read(status(iac={"input": {**PERMISSION, "contextId": "agui-other"}}))


def test_s3_permission_interrupt_shape():
    req, meta = interrupt_from_input(PERMISSION, "task-1", CTX)
    assert req.reason == "tool_call" and req.tool_call_id == "t1" and req.message == PERMISSION["prompt"]
    assert req.response_schema["properties"] == {"decision": {"type": "string", "enum": ["allow_once", "deny"]}}
    for key in ("title", "purpose", "effect", "target", "isReadOnly", "safeSummary", "toolName", "language"):
        assert req.metadata[key] == PERMISSION[key], key
    assert meta == {
        "kind": "permission",
        "inputId": "permission-1",
        "requestTaskId": "task-1",
        "contextId": CTX,
        "toolUseId": "t1",
        "sideband": False,
        "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
    }


def test_s3_ask_user_question_takes_selected_id_or_free_text():
    question = {
        "kind": "ask_user_question",
        "inputId": "ask-t",
        "toolUseId": "t",
        "prompt": "Which?",
        "options": [{"id": "a", "label": "A"}, "b"],
        "allowFreeText": True,
        "required": True,
    }
    req, _ = interrupt_from_input(question, "task-1")
    assert req.reason == "question" and req.message == "Which?"
    assert req.response_schema["oneOf"][0]["properties"]["selectedId"]["enum"] == ["a", "b"]
    assert req.response_schema["oneOf"][1]["properties"] == {"freeText": {"type": "string", "minLength": 1}}


def test_s3_candidate_selection_options_keep_their_fields():
    option = {"id": "c1", "label": "Small", "summary": "s", "architectureDiagram": "d", "totalMonthlyCost": 9, "costItems": [{"n": 1}]}
    req, _ = interrupt_from_input({"kind": "candidate_selection", "inputId": "c", "options": [option], "required": True}, "task-1")
    assert req.metadata["options"] == [{**option, "value": "c1"}]
    assert req.response_schema == {
        "type": "object",
        "properties": {"selectedId": {"type": "string", "enum": ["c1"]}},
        "required": ["selectedId"],
        "additionalProperties": False,
    }


def test_s3_deployment_confirmation_options_carry_an_action():
    confirmation = {
        "kind": "deployment_confirmation",
        "inputId": "d",
        "options": [{"id": "go", "label": "Go", "action": "deploy"}],
        "required": True,
    }
    req, meta = interrupt_from_input(confirmation, "task-1")
    assert meta["options"] == [{"id": "go", "label": "Go", "action": "deploy"}]
    assert "parameterOverrides" in req.response_schema["properties"]


def test_s3_cloud_resource_selection_takes_a_value():
    selection = {"kind": "cloud_resource_selection", "inputId": "resource-1", "toolUseId": "t", "selector": {"id": "vpc"}, "required": True}
    req, meta = interrupt_from_input(selection, "task-1", CTX)
    assert req.response_schema["required"] == ["value"] and meta["selectorId"] == "vpc" and req.metadata["selector"] == {"id": "vpc"}


@pytest.mark.parametrize(
    "extra, sideband",
    [({}, False), ({"scope": "candidate"}, True), ({"subPipelineId": "sub"}, True), ({"subPipelineId": 3}, False)],
)
def test_s3_an_input_is_sideband_for_a_candidate_scope_or_a_sub_pipeline(extra, sideband):
    assert interrupt_from_input({**PERMISSION, **extra}, "task-1")[1]["sideband"] is sideband


# -- §4 answers and acceptance --------------------------------------------------------------------------------
PERM_META = {"kind": "permission", "inputId": "permission-1", "requestTaskId": "task-1", "toolUseId": "t1", "sideband": False}


def test_s4_a_permission_answer_is_one_json_part_with_exactly_six_keys():
    [out] = messages.answers(
        resume_request(
            {"permission-1": PERM_META}, ResumeAnswer("permission-1", "resolved", {"decision": "allow_once"}, "tool_call", "t1")
        ),
        CTX,
        "task-1",
    )
    assert out.streamed and out.message is not None
    assert (
        out.message["messageId"] == "agui-resume-run-1-permission-1"
        and out.message["taskId"] == "task-1"
        and out.message["role"] == "ROLE_USER"
    )
    assert out.message["parts"] == [
        {
            "data": {
                "schemaVersion": 1,
                "kind": "permission",
                "requestTaskId": "task-1",
                "inputId": "permission-1",
                "toolUseId": "t1",
                "decision": "allow_once",
            },
            "mediaType": "application/json",
        }
    ]


def test_s4_a_cancelled_permission_is_deny():
    [out] = messages.answers(
        resume_request({"permission-1": PERM_META}, ResumeAnswer("permission-1", "cancelled", None, "tool_call", "t1")), CTX, "task-1"
    )
    assert out.message is not None and out.message["parts"][0]["data"]["decision"] == "deny"


def test_s4_one_streaming_message_per_pending_permission():
    inputs = {"p1": {**PERM_META, "inputId": "p1"}, "p2": {**PERM_META, "inputId": "p2"}}
    answers = [ResumeAnswer(i, "resolved", {"decision": "deny"}, "tool_call", None) for i in ("p1", "p2")]
    out = messages.answers(resume_request(inputs, *answers), CTX, "task-1")
    assert [(o.streamed, o.message["messageId"], len(o.message["parts"])) for o in out if o.message] == [
        (True, "agui-resume-run-1-p1", 1),
        (True, "agui-resume-run-1-p2", 1),
    ]


def test_s4_sideband_permissions_go_through_send_message_with_their_own_message_id():
    inputs = {"p1": {**PERM_META, "inputId": "p1", "sideband": True}}
    [out] = messages.answers(
        resume_request(inputs, ResumeAnswer("p1", "resolved", {"decision": "allow_once"}, "tool_call", None)), CTX, "task-1"
    )
    assert not out.streamed and out.message is not None and out.message["messageId"] == "agui-resume-p1"


@pytest.mark.parametrize(
    "payload, text",
    [
        ({"freeText": "my own"}, "my own"),
        ({"selectedId": "a"}, "Alpha"),
        ({"selectedId": "n"}, "Named"),
        ({"selectedId": "i"}, "i"),
        ({"selectedId": "zz"}, "zz"),
    ],
)
def test_s4_a_question_answer_is_the_free_text_else_the_option_label_name_or_id(payload, text):
    meta = {
        "kind": "ask_user_question",
        "inputId": "q",
        "options": [{"id": "a", "label": "Alpha"}, {"id": "n", "name": "Named"}, {"id": "i"}],
    }
    [out] = messages.answers(resume_request({"q": meta}, ResumeAnswer("q", "resolved", payload, "question", None)), CTX, "task-1")
    assert out.message is not None and out.message["parts"] == [{"text": text}] and out.message["messageId"] == "agui-resume-run-1"


def test_s4_a_deployment_confirmation_is_its_action_and_overrides_as_json():
    meta = {"kind": "deployment_confirmation", "inputId": "d", "options": [{"id": "tweak", "label": "Adjust", "action": "adjust"}]}
    answer = ResumeAnswer(
        "d", "resolved", {"selectedId": "tweak", "parameterOverrides": {"InstanceType": "ecs.g7.large"}}, "deployment_confirmation", None
    )
    [out] = messages.answers(resume_request({"d": meta}, answer), CTX, "task-1")
    assert out.message is not None
    assert json.loads(out.message["parts"][0]["text"]) == {"action": "adjust", "parameter_overrides": {"InstanceType": "ecs.g7.large"}}


def test_s4_a_resource_selection_is_its_json_after_the_prefix_and_in_metadata():
    meta = {
        "kind": "cloud_resource_selection",
        "inputId": "resource-1",
        "toolUseId": "t",
        "selectorId": "vpc",
        "requestTaskId": "task-1",
        "contextId": CTX,
    }
    for status_, expected in (("resolved", "selected"), ("cancelled", "canceled")):
        payload = {"value": "vpc-1", "label": "main"} if status_ == "resolved" else None
        [out] = messages.answers(
            resume_request({"resource-1": meta}, ResumeAnswer("resource-1", status_, payload, "cloud_resource_selection", None)),
            CTX,
            "task-1",
        )
        assert out.message is not None
        body = out.message["metadata"]["iac_code"]["inputResponse"]
        assert body["status"] == expected and body["kind"] == "cloud_resource_selection" and body["inputId"] == "resource-1"
        assert out.message["parts"][0]["text"] == messages.RESOURCE_SELECTION_PREFIX + json.dumps(body, separators=(",", ":"))
    assert body.get("value") is None and body.get("selectorId") is None


def test_s4_a_dismissed_question_cancels_the_task_instead_of_sending_text():
    meta = {"kind": "ask_user_question", "inputId": "q", "options": []}
    [out] = messages.answers(resume_request({"q": meta}, ResumeAnswer("q", "cancelled", None, "question", None)), CTX, "task-1")
    assert out.cancels and out.message is None


def test_s4_an_input_id_repeated_after_acceptance_is_no_new_interrupt():
    r = reader(task_id="task-1", applied=frozenset(["permission-1"]))
    r.read(status(iac={"inputReceived": {"kind": "permission", "inputId": "permission-1"}}))
    r.read(status(iac={"input": PERMISSION}))
    assert r.inputs == [] and not r.stop
    r.read(status(iac={"input": {**PERMISSION, "inputId": "permission-2"}}))
    assert [req.id for req, _ in r.inputs] == ["permission-2"], "a new inputId starts a new interrupt"


def test_s4_session_backup_not_ready_refusal_is_its_own_retryable_code():
    assert (
        refused(A2AError({"code": -32000, "message": "x", "data": {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}})).code
        == "SESSION_BACKUP_NOT_READY"
    )
    assert refused(A2AError({"code": -32603, "message": "x"})).code == "A2A_UNAVAILABLE"


# -- §5 identity, recovery ----------------------------------------------------------------------------------
def test_s5_context_id_is_agui_and_the_sha256_prefix_of_the_thread():
    import hashlib

    assert context_id_for("thread-1") == "agui-" + hashlib.sha256(b"thread-1").hexdigest()[:40]


def test_s5_a_foreign_context_or_task_or_a_changed_session_is_a_protocol_error():
    r = reader()
    r.read(status("a"))
    with pytest.raises(ProtocolViolation):
        r.read(status("b", context="agui-other"))
    with pytest.raises(ProtocolViolation):
        r.read(status("b", task="task-2"))
    r.read(status(iac={"iacCodeSessionId": "s1"}))
    with pytest.raises(ProtocolViolation):
        r.read(status(iac={"iacCodeSessionId": "s2"}))


def test_s5_recovery_snapshot_is_one_replaceable_activity():
    snapshot = {"schemaVersion": "1.1", "pipelineRunId": "pr", "lastSequence": 42}
    signal = snapshot_signal(snapshot)
    assert signal == s.ActivitySnapshot(
        activity_type="iac-code.pipeline.v1",
        content={"schemaVersion": 1, "pipelineRunId": "pr", "snapshot": snapshot},
        message_id="pipeline:pr",
        replace=True,
    )


def test_s5_recovery_deduplicates_by_event_id_first_and_by_sequence_only_without_one():
    r = reader(cursor=2)
    out: list[s.Signal] = []
    r.read(status(iac={"pipeline": env(5, "stack_progress")}))
    for envelope in (
        env(2, "stack_progress"),
        env(3, "stack_progress"),
        env(5, "stack_progress"),
        {**env(4, "stack_progress"), "eventId": None},
    ):
        r.envelope(envelope, out, recovered=True)
    assert [x.event_id for x in of(out, s.PipelineEvent)] == ["e3"], "at or below the run's start: shown by an earlier run"
    r.pipeline.advance(42)
    assert r.pipeline.cursor == 42


# -- §6 terminal states -------------------------------------------------------------------------------------
def test_s6_reading_stops_at_a_new_input_in_any_state():
    r = reader()
    r.read(status(state="TASK_STATE_WORKING", iac={"input": PERMISSION}))
    assert r.stop


@pytest.mark.parametrize(
    "state", ["TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED"]
)
def test_s6_reading_stops_at_a_terminal_state(state):
    r = reader()
    r.read(status(state=state))
    assert r.stop


def test_s6_reading_stops_at_input_required_without_input_and_goes_on_while_working():
    r = reader()
    r.read(status("x"))
    assert not r.stop
    r.read(status(state="TASK_STATE_INPUT_REQUIRED"))
    assert r.stop


@pytest.mark.parametrize(
    "state, end",
    [
        ("TASK_STATE_COMPLETED", s.Completed()),
        ("TASK_STATE_INPUT_REQUIRED", s.Completed()),
        ("TASK_STATE_CANCELED", "CANCELLED"),
        ("TASK_STATE_FAILED", "A2A_EXECUTION_FAILED"),
        ("TASK_STATE_REJECTED", "A2A_EXECUTION_FAILED"),
        ("TASK_STATE_AUTH_REQUIRED", "A2A_EXECUTION_FAILED"),
        ("TASK_STATE_WORKING", "A2A_EXECUTION_FAILED"),
        ("TASK_STATE_SUBMITTED", "A2A_EXECUTION_FAILED"),
    ],
)
def test_s6_the_last_state_maps_to_the_run_end(state, end):
    r = reader()
    r.read(status(state=state))
    result = end_of(r)
    assert result == end if isinstance(end, s.Completed) else (isinstance(result, s.Failed) and result.code == end)


def test_s6_a_required_input_in_any_state_ends_with_an_interrupt_and_its_checkpoint():
    r = reader(session_id="sess", cursor=3)
    r.read(status(state="TASK_STATE_INPUT_REQUIRED", iac={"input": PERMISSION}))
    result = end_of(r)
    assert isinstance(result, s.InputRequired) and [i.id for i in result.interrupts] == ["permission-1"]
    assert result.checkpoint["taskId"] == "task-1" and result.checkpoint["sessionId"] == "sess" and result.checkpoint["lastSequence"] == 3
    assert result.checkpoint["inputs"]["permission-1"]["toolUseId"] == "t1"


@pytest.mark.parametrize(
    "order",
    [
        ["delta", "final"],
        ["delta", "tool", "final"],
        ["tool", "delta", "final"],
        ["delta", "tool", "delta", "final"],
        ["tool", "final"],
        ["final", "tool"],
        ["final"],
    ],
)
def test_s3_final_text_in_every_order_of_deltas_and_tool_calls(order):
    """The answer appears exactly once whatever came before the final status (issue 13's orders)."""
    r = reader()
    shown: list[str] = []
    deltas = iter(["Hello ", "world."])
    streamed = ""
    for step in order:
        if step == "delta":
            chunk = next(deltas)
            streamed += chunk
            shown.append(texts(r.read(status(chunk))))
        elif step == "tool":
            r.read(status(iac={"tool": {"status": "started", "toolUseId": f"c{len(shown)}", "name": "ls"}}))
        else:
            whole = streamed or "Hello world."
            shown.append(texts(r.read(status(whole, message_id="task-1-working", iac={"assistantFinal": {"complete": True}}))))
    assert "".join(shown) == (streamed or "Hello world.")


# -- the session event and sideband recovery, through the engine (the agent over httpx's in-process transport) --
def update(state="TASK_STATE_WORKING", text=None, **iac_signals):
    update = {"taskId": "task-1", "status": {"state": state}}
    if text is not None:
        update["status"]["message"] = {"messageId": "task-1-message", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    if iac_signals:
        update["metadata"] = {"iac_code": iac_signals}
    return {"statusUpdate": update}


SUBMITTED = {"task": {"id": "task-1", "status": {"state": "TASK_STATE_SUBMITTED"}}}
WAITING = {"task": {"id": "task-1", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}
ASKED = {k: v for k, v in PERMISSION.items() if k != "contextId"}  # the engine's thread has its own context id


def sessions(events):
    return [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1"]


async def engine_runs(agent: WireAgent, *bodies: bytes) -> list[list[dict]]:
    from tests.unit.scripted import Harness

    backend = agent.backend()
    harness = Harness(backend)  # type: ignore[arg-type]
    try:
        return [await harness.run(raw) for raw in bodies]
    finally:
        await backend.aclose()


async def test_s3_the_session_event_goes_out_once_the_task_and_session_ids_are_known():
    from tests.unit.scripted import body

    frames = [SUBMITTED, update(text="Hi "), update(iacCodeSessionId="sess"), update(text="there."), update("TASK_STATE_COMPLETED")]
    agent = WireAgent({"SendStreamingMessage": [frames]})
    [events] = await engine_runs(agent, body())
    kinds = [e["type"] for e in events]
    [session] = sessions(events)
    assert session["taskId"] == "task-1" and session["sessionId"] == "sess" and session["executionId"]
    assert kinds.index("TEXT_MESSAGE_CONTENT") < kinds.index("CUSTOM"), "it waited for the session id; the text did not wait for it"
    assert events[-1]["outcome"] == {"type": "success"}


async def test_s3_an_agent_that_never_names_its_session_gets_the_session_event_at_the_end():
    from tests.unit.scripted import body

    agent = WireAgent({"SendStreamingMessage": [[SUBMITTED, update(text="Hi."), update("TASK_STATE_COMPLETED")]]})
    [events] = await engine_runs(agent, body())
    [session] = sessions(events)
    assert session["taskId"] == "task-1" and "sessionId" not in session
    assert [e["type"] for e in events][-3:] == ["CUSTOM", "TEXT_MESSAGE_END", "RUN_FINISHED"]


async def test_s4_on_a_resume_the_session_event_goes_out_at_acceptance_never_at_a_refusal():
    from tests.unit.scripted import body

    asking = [SUBMITTED, update(iacCodeSessionId="sess"), update("TASK_STATE_INPUT_REQUIRED", input=ASKED)]
    refusal = {"jsonrpc": "2.0", "id": "x", "error": {"code": -32603, "message": "not now"}}
    taken = [update(inputReceived={"kind": "permission", "inputId": "permission-1"}), update("TASK_STATE_COMPLETED", text="Done.")]
    agent = WireAgent(
        {
            "SendStreamingMessage": [asking, refusal, taken],
            "/iac-code/session/ensure-restored": [{"status": "current"}] * 2,
            "GetTask": [WAITING] * 2,
            "/iac-code/pipeline/state": [404] * 2,
        }
    )
    answer = [{"interruptId": "permission-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    first, refused_run, accepted_run = await engine_runs(
        agent, body(), body(None, run="r2", resume=answer), body(None, run="r3", resume=answer)
    )
    assert len(sessions(first)) == 1 and first[-1]["outcome"]["type"] == "interrupt"
    assert refused_run[-1]["code"] == "A2A_UNAVAILABLE" and sessions(refused_run) == [], "a refused answer is no acceptance"
    [session] = sessions(accepted_run)
    assert session["taskId"] == "task-1" and session["sessionId"] == "sess" and accepted_run[-1]["outcome"] == {"type": "success"}


async def test_s4_after_sideband_answers_pipeline_recovery_runs_again_from_the_cursor_they_were_sent_at():
    from tests.unit.scripted import body

    def envelope(sequence, text):
        data = {"text": text}
        return {"eventId": f"evt-{sequence}", "sequence": sequence, "eventType": "text_delta", "pipelineRunId": "p", "data": data}

    sideband = {**ASKED, "scope": "candidate"}
    asking = [SUBMITTED, update(iacCodeSessionId="sess"), update("TASK_STATE_INPUT_REQUIRED", input=sideband, pipeline=envelope(3, "a "))]
    ack = {"message": {"role": "ROLE_AGENT", "messageId": "ack", "taskId": "task-1", "parts": [{"data": {"kind": "permission_ack"}}]}}
    live = [update(pipeline=envelope(5, "c ")), update("TASK_STATE_COMPLETED")]
    agent = WireAgent(
        {
            "SendStreamingMessage": [asking],
            "/iac-code/session/ensure-restored": [{"status": "current"}],
            "GetTask": [WAITING, {"task": {"id": "task-1", "status": {"state": "TASK_STATE_WORKING"}}}],
            "SendMessage": [ack],
            "SubscribeToTask": [live],
            "/iac-code/pipeline/state": [
                {"snapshot": {"pipelineRunId": "p", "lastSequence": 3}, "events": []},
                {"snapshot": {"pipelineRunId": "p", "lastSequence": 5}, "events": [envelope(4, "b "), envelope(5, "c ")]},
            ],
        }
    )
    answer = [{"interruptId": "permission-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    _, resumed = await engine_runs(agent, body(), body(None, run="r2", resume=answer))
    assert agent.calls()[1:] == [
        "/iac-code/session/ensure-restored",
        "GetTask",
        "/iac-code/pipeline/state",
        "SendMessage",
        "GetTask",
        "SubscribeToTask",
        "/iac-code/pipeline/state",
    ]
    recoveries = [params for key, params in agent.sent if key == "/iac-code/pipeline/state"]
    assert [r["afterSequence"] for r in recoveries] == ["3", "3"], "the second recovery starts where the answers were sent"
    said = "".join(e["delta"] for e in resumed if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "c b ", "the window's event is recovered; the one the subscription showed is not repeated"
    assert resumed[-1]["outcome"] == {"type": "success"}


def test_s3_a_status_message_from_the_user_is_never_shown_as_the_agents_text():
    r = reader()
    echo = status("deploy my stack")
    echo["statusUpdate"]["status"]["message"]["role"] = "ROLE_USER"
    assert of(r.read(echo), s.TextDelta) == [] and not r.text_shown
    assert texts(r.read(status("On it."))) == "On it."


async def test_s6_an_error_frame_mid_stream_ends_the_run_and_cancels_the_task():
    from tests.unit.scripted import body

    broken = [SUBMITTED, update(text="Working "), {"jsonrpc": "2.0", "id": "x", "error": {"code": -32603, "message": "model quota"}}]
    agent = WireAgent({"SendStreamingMessage": [broken], "CancelTask": [{"id": "task-1"}]})
    [events] = await engine_runs(agent, body())
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "A2A_EXECUTION_FAILED"
    assert "model quota" in events[-1]["message"], "the agent's own words are kept"
    assert agent.sent[-1] == ("CancelTask", {"id": "task-1"}), "the task nobody can follow any more is stopped"


async def test_s5_a_later_turn_of_the_thread_may_bring_a_new_session_id():
    from tests.unit.scripted import body

    def turn(session):
        return [SUBMITTED, update(iacCodeSessionId=session), update("TASK_STATE_COMPLETED", text="ok")]

    agent = WireAgent({"SendStreamingMessage": [turn("sess-1"), turn("sess-2")]})
    first, second = await engine_runs(agent, body(), body(run="r2"))
    assert [sessions(run)[0]["sessionId"] for run in (first, second)] == ["sess-1", "sess-2"]
    assert first[-1]["outcome"] == second[-1]["outcome"] == {"type": "success"}


# -- adoption: the subscription's snapshot, the task read again, and chunks the subscription repeats ----------
def adopted(said: str) -> FrameReader:
    r = reader(task_id="task-1")
    r.recovering, r.said = True, {"task-1-message": said}
    return r


def task_saying(*chunks: str, state="TASK_STATE_WORKING") -> dict:
    history = [{"messageId": "task-1-message", "role": "ROLE_AGENT", "parts": [{"text": c}]} for c in chunks]
    return {"id": "task-1", "contextId": CTX, "status": {"state": state}, "history": history}


def test_an_adopter_shows_what_the_task_said_between_its_snapshot_and_its_tap_and_drops_what_comes_again():
    r = adopted("a ")
    assert texts(r.read({"task": task_saying("a ", "b ")})) == "b ", "the snapshot: past what the log shows"
    assert r.reconcile, "the task is read again once the subscription is tapped"
    assert texts(r.reconciled(task_saying("a ", "b ", "c "))) == "c ", "said between the snapshot and the tap"
    shown = [texts(r.read(status(chunk))) for chunk in ("b ", "c ", "d ")]
    assert shown == ["", "", "d "], "the tap's lagging queue delivered b and c again; d is new"


def test_a_chunk_held_as_a_possible_repeat_is_never_lost():
    r = adopted("a ")
    r.read({"task": task_saying("a ", "b ")})
    r.reconciled(task_saying("a ", "b "))
    assert texts(r.read(status("a "))) == "", "it may be a repeat of the last chunks: held"
    assert texts(r.read(status("x "))) == "a x ", "it was not: shown, in order, with the next"
    r = adopted("a ")
    r.read({"task": task_saying("a ", "b ")})
    r.reconciled(task_saying("a ", "b "))
    assert texts(r.read(status("a "))) == ""
    assert texts(r.read(status(state="TASK_STATE_COMPLETED"))) == "a ", "the stream stops: what is held is shown"


def test_the_final_text_repeat_met_when_the_task_is_read_again_is_not_shown_twice():
    """The adopter's tap comes as the runtime repeats the whole answer under another message id: the task read
    again holds that repeat, which is the text already said, and its live frame is dropped as well."""
    r = adopted("a ")
    r.read({"task": task_saying("a ", "b ")})
    task = task_saying("a ", "b ", "c ")
    task["history"].append({"messageId": "task-1-working", "role": "ROLE_AGENT", "parts": [{"text": "a b c "}]})
    assert texts(r.reconciled(task)) == "c ", "the missed chunk only, not the repeat"
    final = {
        "statusUpdate": {
            "taskId": "task-1",
            "contextId": CTX,
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {"messageId": "task-1-working", "role": "ROLE_AGENT", "parts": [{"text": "a b c "}]},
            },
        }
    }
    assert texts(r.read(final)) == "", "the repeat's own frame"


def test_a_task_read_again_with_a_bounded_history_lines_up_with_what_was_said():
    r = adopted("w0 w1 w2 ")
    r.read({"task": task_saying("w0 ", "w1 ", "w2 ")})
    assert texts(r.reconciled(task_saying("w2 ", "w3 "))) == "w3 ", "GetTask kept only the last chunks"
