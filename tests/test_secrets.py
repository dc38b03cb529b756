"""No request secret (llmApiKey, cloud keys, STS token) ever reaches the state directory or the logs."""

from __future__ import annotations

import json
import os
from urllib.parse import quote

from tests.support import ext, pending_interrupt, post_sse, run_body

SECRETS = {
    "llmApiKey": "sk-live-LLMKEY-5f1c2d",
    "accessKeyId": "LTAI-ACCESS-ID-77a1",
    "accessKeySecret": "ACCESS-SECRET-9q8w7e",
    "securityToken": "STS-TOKEN-0p9o8i",
}


def secret_ext(**overrides):
    cloud = {k: SECRETS[k] for k in ("accessKeyId", "accessKeySecret", "securityToken")}
    return ext(llmApiKey=SECRETS["llmApiKey"], alibabaCloud={**cloud, "regionId": "cn-hangzhou"}, **overrides)


def test_secrets_never_reach_disk_or_logs(start_gateway, client):
    server = start_gateway("--log-level", "debug")
    json_server = start_gateway("--log-level", "debug", "--log-format", "json")
    for target in (server, json_server):
        url = target.url
        assert post_sse(client, url + "/", run_body("hello", iac=secret_ext(thinking={"enabled": True}))).status == 200
        assert post_sse(client, url + "/invocations", run_body("/fail", iac=secret_ext())).status == 200
        body = run_body("/tool deploy {}", iac=secret_ext())
        interrupt = pending_interrupt(post_sse(client, url + "/", body))
        entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        assert post_sse(client, url + "/", run_body(None, thread=body["threadId"], resume=entry, iac=secret_ext())).status == 200
        # Refused requests carrying secrets: bad field next to them, busy thread, duplicate run id.
        assert post_sse(client, url + "/", run_body("x", iac=secret_ext(surprise=True))).status == 400
        assert post_sse(client, url + "/", run_body("x", iac=secret_ext(cwd="/etc"))).status == 400
        assert post_sse(client, url + "/", {**body, "messages": body["messages"]}).status == 409
        pipeline = run_body("/pipeline", iac=secret_ext())
        assert post_sse(client, url + "/", pipeline).terminal["outcome"]["type"] == "interrupt"
        # State, snapshots, activities and sub-agents: nothing of the request's secrets is in what they show.
        for command in ("/state s", "/plan 2", "/snapshot", "/predict doc", "/activity", "/raw", "/subagent"):
            shown = post_sse(client, url + "/", run_body(command, iac=secret_ext()))
            assert shown.terminal["type"] == "RUN_FINISHED", (command, shown.terminal)
            streamed = json.dumps(shown.events)
            assert not [name for name, secret in SECRETS.items() if secret in streamed], command
    for target in (server, json_server):
        target.stop()
        logs = target.logs()
        assert "run started" in logs, "the logs were captured"
        files = [os.path.join(d, f) for d, _, names in os.walk(target.state_dir) for f in names]
        assert files, "state was written"
        assert any(path.endswith(".log") for path in files), "the runs' event logs are scanned too"
        blobs = [(path, open(path, "rb").read()) for path in files] + [(target.log_path, logs.encode())]
        for path, data in blobs:
            for name, secret in SECRETS.items():
                assert secret.encode() not in data, f"{name} leaked into {path}"


CREDENTIAL = "CRED-s3cr3t-4f7a9b"
SPELLINGS = [
    "authorization",
    "Authorization",
    "auth",
    "api_key",
    "apikey",
    "key",
    "access_token",
    "token",
    "%74oken",
    "x-api-key",
    "ticket",
    "Ticket",
    "secret",
    "pass",
]


async def _credential_traffic(target) -> None:
    """Every way a client can hand the gateway a credential, valid or not, over HTTP and WebSocket."""
    import httpx
    import websockets

    from tests.test_websocket import ws_url

    ws = ws_url(target)
    async with httpx.AsyncClient(timeout=30) as http:
        for name in SPELLINGS:
            await http.get(f"{target.url}/ws?{name}={CREDENTIAL}")  # a plain GET: 4xx
            await http.get(f"{target.url}/threads/t/runs/r/events?{name}={CREDENTIAL}&rosInvocationId=inv-1")
            try:
                async with websockets.connect(f"{ws}?{name}={CREDENTIAL}"):
                    pass
            except websockets.InvalidStatus:
                pass
        await http.get(f"{target.url}/ws?authorization=Bearer%20{CREDENTIAL}")
        ticket = (await http.post(target.url + "/ws/tickets", headers={"authorization": f"Bearer {CREDENTIAL}"})).json()["ticket"]
        async with websockets.connect(ws, subprotocols=[f"agui.ticket.{ticket}"]) as socket:
            await socket.send(json.dumps(run_body("hello")))
            while json.loads(await socket.recv())["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                pass
        for headers, subprotocols in (({"authorization": f"Bearer {CREDENTIAL}"}, None), ({}, [f"agui.bearer.{CREDENTIAL}"])):
            async with websockets.connect(ws, additional_headers=headers, subprotocols=subprotocols) as socket:
                await socket.send(json.dumps(run_body("hello")))
                while json.loads(await socket.recv())["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                    pass
        response = await http.post(
            target.url + "/", json=run_body("hello"), headers={"authorization": f"Bearer {CREDENTIAL}", "cookie": f"s={CREDENTIAL}"}
        )
        assert response.status_code == 200


def test_no_credential_reaches_a_log_line_at_debug_in_either_format(start_gateway):
    import asyncio

    servers = [start_gateway("--auth-token", CREDENTIAL, "--log-level", "debug", "--log-format", fmt) for fmt in ("text", "json")]
    for target in servers:
        asyncio.run(_credential_traffic(target))
    for target in servers:
        target.stop()
        logs = target.logs()
        assert "[redacted]" in logs and "agui.access" in logs, "the lines were written, redacted"
        # The handshake's header lines are logged at debug, the credential's in its place redacted.
        assert "< authorization: [redacted]" in logs.lower(), [line for line in logs.splitlines() if "uthorization" in line][:5]
        assert CREDENTIAL not in logs, [line for line in logs.splitlines() if CREDENTIAL in line][:5]
        assert CREDENTIAL.lower() not in logs.lower()
        ticket_lines = [line for line in logs.splitlines() if "agui.ticket." in line]
        assert all("agui.ticket.[redacted]" in line for line in ticket_lines), ticket_lines[:3]


def test_no_client_value_forges_a_log_line(start_gateway, client):
    texts = [start_gateway("--log-format", fmt) for fmt in ("text", "json")]
    forged = "t-\x85FORGED\u2028FORGED\u2029FORGED\x1cFORGED\x0bFORGED\rFORGED\nFORGED"
    for target in texts:
        body = run_body("hello", thread=forged)
        post_sse(client, target.url + "/", body)
        client.get(target.url + "/threads/" + quote(forged, safe="") + "/runs/r/events")
    text, js = texts
    for target in texts:
        target.stop()
    assert "FORGED" in text.logs() and "FORGED" in js.logs()
    for line in text.logs().splitlines():
        assert not line.startswith("FORGED"), line
    for line in js.logs().splitlines():
        if line.startswith("{"):
            json.loads(line)
        assert not line.startswith("FORGED"), line
