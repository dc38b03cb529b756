"""Real AG-UI agents from their own packages behind the gateway, no LLM and no network: a LangGraph graph served
by ag-ui-langgraph (over HTTP with its FastAPI endpoint, and in the gateway's process), Pydantic AI's AG-UI
adapter and bedrock-agentcore's AGUIApp. Each is driven by @ag-ui/client over SSE and WebSocket with zero
warnings (a chat turn, a backend tool, a client tool round trip, the agent's state coming back to the client),
followed from another replica on one Redis mid-run, and cancelled there with the upstream seeing its client go."""

from __future__ import annotations

import pytest

from tests.support import Gateway
from tests.test_node_client import check_run, drive

pytestmark = pytest.mark.node
CONFIRM = {"name": "confirm", "description": "Ask the user", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def langgraph_http():
    from tests.langgraph_agent import LangGraphServer

    server = LangGraphServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["http", "in-process"])
def langgraph(request, langgraph_http, tmp_path_factory):
    spec = "agui+" + langgraph_http.url if request.param == "http" else "tests.langgraph_agent:agent"
    server = Gateway(tmp_path_factory.mktemp("langgraph"), "--agent", spec).start()
    yield server
    server.stop()


def texts(report: dict) -> list[str]:
    return [m["content"].strip() for m in report["messages"] if m["role"] == "assistant" and m["content"]]


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_langgraph_chat_state_and_tools_through_the_gateway(langgraph, kind):
    steps = [
        {"message": "hello graph"},
        {"message": "/tool"},
        {"message": "/client", "tools": [CONFIRM]},
        {"toolResult": "yes", "tools": [CONFIRM]},
    ]
    report = drive(langgraph.url, steps, kind=kind)
    for run in report["runs"]:
        assert check_run(run)["type"] == "RUN_FINISHED", run["events"][-1]
    chat, backend, client, result = report["runs"]
    assert texts({"messages": report["messages"]})[0] == "You said: hello graph"
    assert [e["content"] for e in backend["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["found 3 vpc"]
    calls = [e["toolCallName"] for e in client["events"] if e["type"] == "TOOL_CALL_START"]
    assert calls == ["confirm"] and not any(e["type"] == "TOOL_CALL_RESULT" for e in client["events"]), "the client runs it"
    assert texts(report)[-1] == "The tool said yes"
    assert report["state"].get("turns", 0) >= 4, report["state"]


@pytest.fixture(scope="module")
def pydantic_ai(pydantic_ai_upstream, tmp_path_factory):
    server = Gateway(tmp_path_factory.mktemp("pydantic-ai"), "--agent", "agui+" + pydantic_ai_upstream.url).start()
    yield server
    server.stop()


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_pydantic_ai_chat_state_and_tools_through_the_gateway(pydantic_ai, kind):
    steps = [
        {"message": "hello model"},
        {"message": "/tool"},
        {"message": "/count"},
        {"message": "/client", "tools": [CONFIRM]},
        {"toolResult": "yes", "tools": [CONFIRM]},
    ]
    report = drive(pydantic_ai.url, steps, kind=kind, initialState={"turns": 4})
    for run in report["runs"]:
        assert check_run(run)["type"] == "RUN_FINISHED", run["events"][-1]
    chat, backend, counted, client, result = report["runs"]
    assert texts(report)[0] == "You said: hello model"
    assert [e["content"] for e in backend["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["found 3 vpc"]
    assert counted["state"] == {"turns": 5}, "the agent's state snapshot, in the client's state"
    assert [e["toolCallName"] for e in client["events"] if e["type"] == "TOOL_CALL_START"] == ["confirm"]
    assert texts(report)[-1] == "The confirm tool said yes"


@pytest.fixture(scope="module")
def agentcore_upstream():
    from tests.agentcore_agent import AgentCoreServer

    upstream = AgentCoreServer().start()
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def agentcore(agentcore_upstream, tmp_path_factory):
    server = Gateway(tmp_path_factory.mktemp("agentcore"), "--agent", "agui+" + agentcore_upstream.url).start()
    yield server
    server.stop()


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_an_agentcore_aguiapp_chat_state_and_tools_through_the_gateway(agentcore, kind):
    steps = [
        {"message": "hello core"},
        {"message": "/tool"},
        {"message": "/client", "tools": [CONFIRM]},
        {"toolResult": "yes", "tools": [CONFIRM]},
    ]
    report = drive(agentcore.url, steps, kind=kind, initialState={"theme": "dark"})
    for run in report["runs"]:
        assert check_run(run)["type"] == "RUN_FINISHED", run["events"][-1]
    assert texts(report)[0] == "You said: hello core"
    assert [e["content"] for e in report["runs"][1]["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["found 3"]
    assert report["runs"][2]["pendingToolCallIds"] != []
    assert texts(report)[-1] == "The tool said yes"
    assert report["state"] == {"theme": "dark", "turns": 4}, "the upstream's state, sent back by the client each turn"


def test_a_cancel_through_the_gateway_reaches_the_agentcore_app(agentcore, agentcore_upstream, client):
    import time
    import uuid

    from tests.reattach_client import open_post
    from tests.test_cancel_and_disconnect import CANCEL

    thread = f"t-{uuid.uuid4().hex[:8]}"
    body = {"threadId": thread, "runId": "r-cancel", "state": {}, "messages": [{"id": "m", "role": "user", "content": "/slow"}]}
    stream = open_post(agentcore.url + "/", {**body, "tools": [], "context": [], "forwardedProps": {}, "protocolVersion": "1.0"})
    head = stream.take(6)
    execution = next(e["value"]["executionId"] for _, e in head if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")
    dropped = len(agentcore_upstream.dropped)  # before the cancel: its answer may come after the upstream saw the close
    assert (
        client.post(agentcore.url + CANCEL.format(execution), json={"threadId": thread, "rosInvocationId": f"thread:{thread}"}).status_code
        == 200
    )
    assert stream.rest()[-1][1]["outcome"] == {"type": "cancelled"}
    deadline = time.monotonic() + 5
    while len(agentcore_upstream.dropped) == dropped and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(agentcore_upstream.dropped) > dropped, "the AgentCore app saw its client go"


@pytest.fixture(scope="module")
def pydantic_ai_upstream():
    from tests.pydantic_agent import PydanticAIServer

    upstream = PydanticAIServer().start()
    yield upstream
    upstream.stop()


@pytest.fixture(params=["langgraph", "pydantic-ai", "agentcore"])
def peer(request, langgraph_http, pydantic_ai_upstream, agentcore_upstream):
    """Each real peer over HTTP, with what it noted of clients that went away."""
    return {"langgraph": langgraph_http, "pydantic-ai": pydantic_ai_upstream, "agentcore": agentcore_upstream}[request.param]


def slow_body() -> dict:
    import uuid

    thread = f"t-{uuid.uuid4().hex[:8]}"
    return {
        "threadId": thread,
        "runId": f"r-{uuid.uuid4().hex[:6]}",
        "state": {},
        "messages": [{"id": f"m-{uuid.uuid4().hex[:6]}", "role": "user", "content": "/slow"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",
    }


@pytest.mark.redis
def test_each_peer_is_followed_from_another_replica_mid_run_and_cancelled_from_there(peer, tmp_path, client):
    """Two replicas on one Redis in front of the peer: a client that drops mid-run attaches again through the other
    replica and gets every event once; a cancel sent to that replica reaches the run and closes the upstream."""
    import time

    from tests.reattach_client import GRACE, assert_exactly_once, detached, events_url, open_get, open_post
    from tests.support import RedisServer
    from tests.test_cancel_and_disconnect import CANCEL

    redis_server = RedisServer(tmp_path).start()
    shared = ("--agent", "agui+" + peer.url, "--store", redis_server.url, "--default-cwd", "/tmp")
    a, b = Gateway(tmp_path, *shared).start(), Gateway(tmp_path, *shared).start()
    try:
        body = slow_body()
        head = open_post(a.url + "/", body, GRACE).take_then_drop(8)
        detached(a, body["runId"])
        ros = f"thread:{body['threadId']}"
        status, stream = open_get(events_url(b.url, body, rosInvocationId=ros), {"last-event-id": str(head[-1][0])})
        assert status == 200
        middle = stream.take(3)
        execution = next(e["value"]["executionId"] for _, e in head if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")
        before = len(peer.dropped)
        assert client.post(b.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": ros}).status_code == 200
        events = assert_exactly_once([head, middle, stream.rest()])
        assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}, events[-1]
        assert any(e["type"] == "TEXT_MESSAGE_CONTENT" and e["delta"].startswith("tick") for e in events)
        deadline = time.monotonic() + 5
        while len(peer.dropped) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(peer.dropped) > before, "the peer saw its client go"
    finally:
        a.stop()
        b.stop()
        redis_server.stop()
