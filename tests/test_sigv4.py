"""SigV4, as the AgentCore contract names it (SIGV4.md), signed by AWS's own signers only: botocore (`SigV4Auth`,
`SigV4QueryAuth`) and the AWS SDK for JavaScript's (`@smithy/signature-v4`, in Node), on runs, the cancel extension,
the thread API and `/ws` (header-signed and pre-signed); every refusal is 403 ACCESS_DENIED with no challenge, in the
route's error style; a replay within the window is accepted, as AWS accepts it; the same caller through OAuth and
SigV4 is two principals; no credential reaches the log."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import uuid
from typing import Any
from unittest import mock

import httpx
import pytest
import websockets
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.issuer import Issuer
from tests.support import Gateway, free_port, parse_sse, run_body

pytestmark = pytest.mark.node
ROOT = os.path.dirname(os.path.abspath(__file__))
REGION, SERVICE = "us-west-2", "bedrock-agentcore"
KEY, SECRET = "AKIDGATEWAYTEST1", "s3cr3t-Signing-Key/For+Tests"
TEMP_KEY, TEMP_SECRET, TEMP_TOKEN = "ASIAGATEWAYTEMP1", "temporary-secret-value", "session-token-value-123"
CREDENTIALS = f"""
[keys.{KEY}]
secret = "{SECRET}"
principal = "build-service"

[keys.{TEMP_KEY}]
secret = "{TEMP_SECRET}"
principal = "temporary-role"
session_token = "{TEMP_TOKEN}"
"""


@pytest.fixture(scope="module")
def issuer():
    issuer = Issuer()
    issuer.add_key("k1")
    return issuer


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, issuer):
    tmp = tmp_path_factory.mktemp("sigv4")
    path = tmp / "keys.toml"
    path.write_text(CREDENTIALS)
    path.chmod(0o600)
    oauth = ["--oauth-discovery-url", issuer.issuer + "/.well-known/openid-configuration", "--oauth-audience", "api://agui"]
    server = Gateway(tmp, "--sigv4-credentials", str(path), "--sigv4-region", REGION, *oauth, "--public-url", "{url}").start()
    yield server
    server.stop()


def signed(
    method: str,
    url: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    key: str = KEY,
    secret: str = SECRET,
    token: str | None = None,
    region: str = REGION,
    service: str = SERVICE,
    at: datetime.datetime | None = None,
) -> dict[str, str]:
    """The request's headers, signed by botocore's SigV4Auth (at `at`, else now)."""
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    with mock.patch("botocore.auth.get_current_datetime", return_value=at) if at else _nothing():
        SigV4Auth(Credentials(key, secret, token), service, region).add_auth(request)
    return dict(request.headers.items())


def presigned(
    url: str, expires: int = 300, *, at: datetime.datetime | None = None, token: str | None = None, key: str = KEY, secret: str = SECRET
) -> str:
    """A pre-signed GET URL, by botocore's SigV4QueryAuth."""
    request = AWSRequest(method="GET", url=url)
    with mock.patch("botocore.auth.get_current_datetime", return_value=at) if at else _nothing():
        SigV4QueryAuth(Credentials(key, secret, token), SERVICE, REGION, expires=expires).add_auth(request)
    return request.url


class _nothing:  # noqa: N801 - used as a context manager's name
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def node_signed(asked: dict[str, Any]) -> dict[str, Any]:
    """Signed by the AWS SDK for JavaScript (tests/node/sigv4_sign.mjs)."""
    credentials = {"accessKeyId": KEY, "secretAccessKey": SECRET}
    done = subprocess.run(
        ["node", os.path.join(ROOT, "node", "sigv4_sign.mjs")],
        input=json.dumps({"region": REGION, "service": SERVICE, "credentials": credentials, **asked}),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(done.stdout)


def plain(text: str, thread: str | None = None) -> bytes:
    return json.dumps(run_body(text, thread=thread, forwardedProps={}, protocolVersion="1.0")).encode()


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers={"accept": "text/event-stream", **headers}, timeout=30)


def terminal(response: httpx.Response) -> dict[str, Any]:
    events, _, _ = parse_sse(response.content)
    return events[-1]


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://")


async def ws_run(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """One run over a multiplexed socket opened with `headers` (or a pre-signed `url`): its terminal event."""
    async with websockets.connect(url, subprotocols=["agui-mux.v1"], additional_headers=headers or {}) as ws:
        await ws.send(json.dumps({"op": "run", "id": "s", "input": json.loads(plain("over the socket"))}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if frame["event"]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                return frame["event"]


def test_signed_requests_on_every_route(gateway):
    body = plain("signed by botocore")
    ran = post(gateway.url + "/", body, signed("POST", gateway.url + "/", body, {"content-type": "application/json"}))
    assert ran.status_code == 200 and terminal(ran)["outcome"] == {"type": "success"}, ran.text[-300:]
    body = plain("on the AgentCore path")
    invoked = post(
        gateway.url + "/invocations", body, signed("POST", gateway.url + "/invocations", body, {"content-type": "application/json"})
    )
    assert invoked.status_code == 200 and terminal(invoked)["type"] == "RUN_FINISHED"
    listed = httpx.get(gateway.url + "/threads", headers=signed("GET", gateway.url + "/threads"))
    assert listed.status_code == 200 and listed.json()["threads"], listed.text
    thread = json.loads(ran.request.content)["threadId"]
    stop_url = f"{gateway.url}/threads/{thread}/stop"
    stopped = httpx.post(stop_url, content=b"{}", headers=signed("POST", stop_url, b"{}", {"content-type": "application/json"}))
    assert stopped.status_code == 200 and stopped.json() == {"status": "not_running"}
    cancel_url = gateway.url + "/extensions/iac-code/v1/executions/exec-none/cancel"
    cancel = json.dumps({"threadId": thread, "rosInvocationId": f"thread:{thread}"}).encode()
    answer = httpx.post(cancel_url, content=cancel, headers=signed("POST", cancel_url, cancel, {"content-type": "application/json"}))
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "EXECUTION_NOT_FOUND", "authenticated, then not found"
    socket = gateway.url + "/ws"
    assert asyncio.run(ws_run(ws_url(socket), signed("GET", socket)))["type"] == "RUN_FINISHED", "a header-signed upgrade"
    assert asyncio.run(ws_run(ws_url(presigned(socket))))["type"] == "RUN_FINISHED", "a pre-signed upgrade"


def test_signed_by_the_aws_sdk_for_javascript(gateway):
    body = plain("signed in Node")
    headers = node_signed(
        {"method": "POST", "url": gateway.url + "/", "headers": {"content-type": "application/json"}, "body": body.decode()}
    )
    sent = {name: value for name, value in headers["headers"].items() if name != "host"}
    ran = post(gateway.url + "/", body, sent)
    assert ran.status_code == 200 and terminal(ran)["outcome"] == {"type": "success"}, ran.text[-300:]
    url = node_signed({"method": "GET", "url": gateway.url + "/ws", "presign": True})["url"]
    assert asyncio.run(ws_run(ws_url(url)))["type"] == "RUN_FINISHED"


def test_temporary_credentials_need_their_session_token(gateway):
    url = gateway.url + "/threads"
    assert httpx.get(url, headers=signed("GET", url, key=TEMP_KEY, secret=TEMP_SECRET, token=TEMP_TOKEN)).status_code == 200
    for token in (None, "another-token"):
        refused = httpx.get(url, headers=signed("GET", url, key=TEMP_KEY, secret=TEMP_SECRET, token=token))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "ACCESS_DENIED"
    socket = gateway.url + "/ws"
    assert asyncio.run(ws_run(ws_url(presigned(socket, key=TEMP_KEY, secret=TEMP_SECRET, token=TEMP_TOKEN))))["type"] == "RUN_FINISHED"


def _refusals(url: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    body = plain("refused")
    json_type = {"content-type": "application/json"}
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(minutes=10)
    changed_header = signed("POST", url, body, {**json_type, "x-purpose": "test"})
    missing_header = dict(changed_header)
    del missing_header["x-purpose"]
    return {
        "wrong secret": (body, signed("POST", url, body, json_type, secret="not-the-secret")),
        "unknown key": (body, signed("POST", url, body, json_type, key="AKIDUNKNOWN")),
        "another region": (body, signed("POST", url, body, json_type, region="eu-central-1")),
        "another service": (body, signed("POST", url, body, json_type, service="execute-api")),
        "a date outside the window": (body, signed("POST", url, body, json_type, at=past)),
        "a body changed after signing": (plain("another body"), signed("POST", url, body, json_type)),
        "a signed header changed": (body, {**changed_header, "x-purpose": "other"}),
        "a missing signed header": (body, missing_header),
    }


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_every_refusal_is_403_access_denied_with_no_challenge(gateway, path):
    for name, (body, headers) in _refusals(gateway.url + path).items():
        refused = post(gateway.url + path, body, headers)
        assert refused.status_code == 403 and "www-authenticate" not in refused.headers, (name, refused.status_code, refused.headers)
        if path == "/":
            assert refused.json()["error"]["code"] == "ACCESS_DENIED", name
        else:  # the AgentCore path answers every error as an SSE RUN_ERROR
            assert terminal(refused)["code"] == "ACCESS_DENIED", name


def test_a_socket_refuses_an_expired_or_wrong_signature(gateway):
    socket = gateway.url + "/ws"
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(seconds=30)
    for url in (
        presigned(socket, expires=5, at=past),
        presigned(socket, secret="wrong"),
        presigned(socket).replace("X-Amz-Expires=300", "X-Amz-Expires=301"),
    ):
        with pytest.raises(websockets.InvalidStatus) as refused:
            asyncio.run(ws_run(ws_url(url)))
        assert refused.value.response.status_code == 403
        assert "www-authenticate" not in {name.lower() for name in refused.value.response.headers}


def test_a_replay_within_the_window_is_accepted_as_aws_accepts_it(gateway):
    url = gateway.url + "/threads"
    headers = signed("GET", url)
    assert [httpx.get(url, headers=headers).status_code for _ in range(2)] == [200, 200]


def test_the_same_caller_through_oauth_and_sigv4_is_two_principals(gateway, issuer):
    thread = "shared-" + uuid.uuid4().hex[:8]
    body = plain("as SigV4", thread)
    assert (
        terminal(post(gateway.url + "/", body, signed("POST", gateway.url + "/", body, {"content-type": "application/json"})))["type"]
        == "RUN_FINISHED"
    )
    bearer = {"authorization": f"Bearer {issuer.token()}"}
    as_oauth = httpx.post(gateway.url + "/", content=plain("as OAuth", thread), headers={"content-type": "application/json", **bearer})
    assert terminal(as_oauth)["type"] == "RUN_FINISHED", "another principal's thread: no conflict, no busy"
    url = f"{gateway.url}/threads/{thread}"
    by_sigv4 = httpx.get(url, headers=signed("GET", url)).json()
    by_oauth = httpx.get(url, headers=bearer).json()
    assert [m["content"] for m in by_sigv4["messages"] if m["role"] == "user"] == ["as SigV4"]
    assert [m["content"] for m in by_oauth["messages"] if m["role"] == "user"] == ["as OAuth"]


def test_no_credential_reaches_the_log(gateway):
    url = gateway.url + "/threads"
    temporary = signed("GET", url, key=TEMP_KEY, secret=TEMP_SECRET, token=TEMP_TOKEN)
    wrong = signed("GET", url, secret="wrong")
    socket = presigned(gateway.url + "/ws", key=TEMP_KEY, secret=TEMP_SECRET, token=TEMP_TOKEN)
    httpx.get(url, headers=temporary)
    httpx.get(url, headers=wrong)
    asyncio.run(ws_run(ws_url(socket)))
    signatures = [headers["Authorization"].rsplit("Signature=", 1)[1] for headers in (temporary, wrong)]
    signatures.append(socket.rsplit("X-Amz-Signature=", 1)[1])
    logs = gateway.logs()
    for credential in (SECRET, TEMP_SECRET, TEMP_TOKEN, KEY, TEMP_KEY, *signatures):
        assert credential not in logs, credential


def test_with_sigv4_alone_an_unsigned_request_is_403_and_a_key_file_others_can_read_is_refused(tmp_path, start_gateway):
    path = tmp_path / "keys.toml"
    path.write_text(CREDENTIALS)
    path.chmod(0o644)
    refused = subprocess.run(
        [sys.executable, "-m", "server", "--sigv4-credentials", str(path), "--sigv4-region", REGION, "--port", str(free_port())],
        cwd=os.path.dirname(ROOT),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode != 0 and "chmod 600" in refused.stderr, refused.stderr[-500:]
    assert SECRET not in refused.stderr + refused.stdout
    path.chmod(0o600)
    server = start_gateway("--sigv4-credentials", str(path), "--sigv4-region", REGION)
    for headers in ({}, {"authorization": "Bearer some-token"}):
        answer = httpx.get(server.url + "/threads", headers=headers)
        assert answer.status_code == 403 and "www-authenticate" not in answer.headers and answer.json()["error"]["code"] == "ACCESS_DENIED"
    url = server.url + "/threads"
    assert httpx.get(url, headers=signed("GET", url)).status_code == 200
