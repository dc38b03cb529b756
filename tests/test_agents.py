"""The gateway's agent, discovered and run by its id: `GET /agents` and `GET /agents/{id}` describe it with AG-UI's
AgentCapabilities (parsed by `ag_ui.core`), `POST /agents/default` runs it for `@ag-ui/client`'s HttpAgent as
`POST /` does, and an unknown agent is 404 AGENT_NOT_FOUND."""

from __future__ import annotations

import pytest
from ag_ui.core import AgentCapabilities

from tests.support import post_sse, run_body
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
