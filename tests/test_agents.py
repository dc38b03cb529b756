"""The gateway's agents, discovered and run by their ids: `GET /agents` and `GET /agents/{id}` describe each with
AG-UI's AgentCapabilities (parsed by `ag_ui.core`), `POST /agents/{id}` runs one for `@ag-ui/client`'s HttpAgent as
`POST /` runs the default, and an unknown agent is 404 AGENT_NOT_FOUND. Several agents declared in a file (`--agents`):
each served, labelled in metrics and logs, listed by `/health` and CopilotKit's `/info`; a thread stays with the agent
of its first run on every route (SSE, CopilotKit's, the WebSocket's `?agent=` and run frame)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import websockets
from ag_ui.core import AgentCapabilities
from websockets.exceptions import InvalidStatus

from tests.support import Gateway, free_port, post_sse, run_body
from tests.test_metrics import delta, scrape
from tests.test_node_client import check_run, drive

pytestmark = pytest.mark.node


def test_the_agent_is_described_with_ag_ui_capabilities(gateway, client):
    listed = client.get(gateway.url + "/agents").json()["agents"]
    assert [(agent["id"], agent["default"]) for agent in listed] == [("default", True)]
    one = client.get(gateway.url + "/agents/default").json()
    assert one == listed[0]
    capabilities = AgentCapabilities.model_validate(one["capabilities"])  # AG-UI's own schema takes it
    assert capabilities.transport.streaming and capabilities.transport.websocket and capabilities.transport.resumable
    assert capabilities.tools.client_provided and capabilities.identity.type == "demo"
    assert capabilities.human_in_the_loop.interrupts and capabilities.state.persistent_state
    for path in ("/agents/nobody",):
        missing = client.get(gateway.url + path)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_an_agent_runs_by_its_id_for_the_reference_client(gateway, client):
    report = drive(gateway.url + "/agents/default", [{"message": "by id", "forwardedProps": {}}])
    assert check_run(report["runs"][0])["outcome"]["type"] == "success"
    assert [m["content"] for m in report["messages"] if m["role"] == "assistant"] == ["You said: by id"]
    refused = post_sse(client, gateway.url + "/agents/nobody", run_body("x", forwardedProps={}))
    assert refused.status == 404 and '"AGENT_NOT_FOUND"' in refused.raw.decode()


AGENTS_FILE = """
[agents.assistant]
backend = "demo"
description = "The scripted demo agent"
default = true

[agents.mirror]
backend = "tests.mirror_agent:MirrorAgent"
description = "Shows what the gateway handed it"
"""


@pytest.fixture(scope="module")
def several(tmp_path_factory):
    """One gateway in front of two agents declared in a file (the demo agent the default), with its metrics served."""
    tmp = tmp_path_factory.mktemp("agents")
    (tmp / "agents.toml").write_text(AGENTS_FILE)
    server = Gateway(tmp, "--agents", str(tmp / "agents.toml"), "--metrics-port", str(metrics_port := free_port())).start()
    server.metrics_port = metrics_port
    yield server
    server.stop()


def mirrored(result) -> dict:
    """What the mirror agent says it was handed (its state snapshot)."""
    return next(e["snapshot"] for e in result.events if e["type"] == "STATE_SNAPSHOT")


def test_several_agents_are_described_served_and_labelled(several, client):
    listed = client.get(several.url + "/agents").json()["agents"]
    assert [(a["id"], a["default"], a["description"]) for a in listed] == [
        ("assistant", True, "The scripted demo agent"),
        ("mirror", False, "Shows what the gateway handed it"),
    ]
    for agent in listed:
        assert AgentCapabilities.model_validate(agent["capabilities"]).identity.name == agent["id"]
    health = client.get(several.url + "/health").json()["agents"]
    assert [(a["id"], a["backend"], a["default"]) for a in health] == [("assistant", "demo", True), ("mirror", "mirror", False)]
    info = client.get(several.url + "/copilotkit/info").json()["agents"]
    assert {name: agent["description"] for name, agent in info.items()} == {
        "assistant": "The scripted demo agent",
        "mirror": "Shows what the gateway handed it",
    }
    before = scrape(several.metrics_port)
    by_default = post_sse(client, several.url + "/", run_body("to whom", forwardedProps={}))
    said = "".join(e["delta"] for e in by_default.of("TEXT_MESSAGE_CONTENT"))
    assert by_default.terminal["type"] == "RUN_FINISHED" and said == "You said: to whom", "POST / runs the default"
    by_id = post_sse(client, several.url + "/agents/mirror", run_body("to the mirror", forwardedProps={}))
    assert mirrored(by_id)["userText"] == "to the mirror"
    report = drive(several.url + "/agents/assistant", [{"message": "by its id", "forwardedProps": {}}])
    assert [m["content"] for m in report["messages"] if m["role"] == "assistant"] == ["You said: by its id"]
    after = scrape(several.metrics_port)
    assert delta(before, after, "agui_runs_started_total", transport="sse", agent="assistant") == 2
    assert delta(before, after, "agui_runs_ended_total", transport="sse", outcome="completed", agent="mirror") == 1
    assert "agent=mirror" in next(line for line in several.logs().splitlines() if "run ended" in line and "agent=mirror" in line)


def test_a_thread_belongs_to_the_agent_of_its_first_run_on_every_route(several, client):
    thread = "owned-" + uuid.uuid4().hex[:8]
    first = post_sse(client, several.url + "/agents/mirror", run_body("first", thread=thread, forwardedProps={}))
    assert first.terminal["type"] == "RUN_FINISHED"
    for path in ("/", "/agents/assistant", "/copilotkit/agent/assistant/run"):
        refused = post_sse(client, several.url + path, run_body("moved", thread=thread, forwardedProps={}))
        assert refused.status == 409, (path, refused.raw)
        assert json.loads(refused.raw)["error"] == {
            **json.loads(refused.raw)["error"],
            "code": "THREAD_BINDING_CONFLICT",
            "field": "agentId",
        }
    thread_view = client.get(f"{several.url}/threads/{thread}").json()
    assert (thread_view["agentId"], thread_view["agent"]) == ("mirror", "mirror")
    joined = client.post(f"{several.url}/copilotkit/agent/assistant/connect", json={"threadId": thread})
    assert joined.status_code == 409 and joined.json()["error"]["field"] == "agentId", "a connect names the thread's agent"
    joined = client.post(f"{several.url}/copilotkit/agent/mirror/connect", json={"threadId": thread})
    events = [json.loads(line[len("data: ") :]) for line in joined.text.splitlines() if line.startswith("data: ")]
    assert joined.status_code == 200 and next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]["userText"] == "first"
    # The WebSocket: the upgrade's ?agent= and the multiplexed run frame's "agent".
    over_ws = drive(several.url, [{"message": "over the socket", "forwardedProps": {}}], kind="ws", agent="mirror", threadId=thread)
    assert over_ws["runs"][0]["error"] is None and over_ws["state"]["userText"] == "over the socket"
    asyncio.run(_socket_runs(several, thread))


async def _socket_runs(several, thread: str) -> None:
    url = several.url.replace("http", "ws") + "/ws"
    async with websockets.connect(url + "?agent=mirror") as ws:
        await ws.send(json.dumps(run_body("base mode", thread=thread, forwardedProps={})))
        events = [json.loads(await ws.recv()) for _ in range(3)]
        assert [e["type"] for e in events][:1] == ["RUN_STARTED"] and any(e["type"] == "STATE_SNAPSHOT" for e in events), events
    async with websockets.connect(url, subprotocols=["agui-mux.v1"]) as ws:
        await ws.send(
            json.dumps({"op": "run", "id": "s1", "agent": "assistant", "input": run_body("moved", thread=thread, forwardedProps={})})
        )
        refused = json.loads(await ws.recv())["event"]
        assert (refused["type"], refused["code"]) == ("RUN_ERROR", "THREAD_BINDING_CONFLICT"), refused
        await ws.send(json.dumps({"op": "run", "id": "s2", "agent": "nobody", "input": run_body("x", forwardedProps={})}))
        refused = json.loads(await ws.recv())["event"]
        assert (refused["type"], refused["code"]) == ("RUN_ERROR", "AGENT_NOT_FOUND"), refused
    with pytest.raises(InvalidStatus) as unknown:
        async with websockets.connect(url + "?agent=nobody"):
            pass
    assert unknown.value.response.status_code == 404 and b"AGENT_NOT_FOUND" in unknown.value.response.body
