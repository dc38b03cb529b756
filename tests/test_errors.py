"""Every error code of the core, on `POST /` (JSON envelope) and `POST /invocations` (SSE RUN_ERROR), localized."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import pytest

from gateway.engine.prepare import prepare
from gateway.errors import GatewayError
from tests.support import Gateway, corrupt_thread, ext, post_sse, run_body, thread_state

AGENTCORE = {
    "INVALID_INPUT": ("VALIDATION_ERROR", 400),
    "DUPLICATE_RUN_ID": ("SESSION_BUSY", 409),
    "RUN_ID_CONFLICT": ("SESSION_BUSY", 409),
    "THREAD_BUSY": ("SESSION_BUSY", 409),
    "THREAD_BINDING_CONFLICT": ("SESSION_BUSY", 409),
    "RESUME_REQUIRED": ("SESSION_BUSY", 409),
    "UNAUTHORIZED": ("UNAUTHORIZED", 401),
    "STATE_PERSISTENCE_FAILED": ("INTERNAL_ERROR", 500),
}


def expect_error(client, url, body, code, status, *, field=None, headers=None, raw=None):
    """Assert the error on both endpoints in each one's style; return the `POST /` message."""
    root = post_sse(client, url + "/", body, headers=headers, raw=raw)
    assert root.status == status, root.raw
    assert root.headers["content-type"].startswith("application/json")
    error = json.loads(root.raw)["error"]
    assert error["code"] == code, error
    assert error["message"]
    if field is not None:
        assert error["field"] == field and field in error["message"]
    if isinstance(body, dict) and isinstance(body.get("runId"), str) and code not in ("DUPLICATE_RUN_ID", "RUN_ID_CONFLICT"):
        body = {**body, "runId": body["runId"] + "-ac"}
    inv = post_sse(client, url + "/invocations", body, headers=headers, raw=raw)
    agentcore_code, agentcore_status = AGENTCORE[code]
    assert inv.status == agentcore_status, inv.raw
    assert inv.headers["content-type"].startswith("text/event-stream")
    assert inv.raw.startswith(b"data: ") and inv.raw.endswith(b"\n\n")
    assert inv.events == [
        {"type": "RUN_ERROR", "code": agentcore_code, "message": inv.events[0]["message"], "metadata": inv.events[0]["metadata"]}
    ]
    assert inv.events[0]["metadata"]["gatewayCode"] == code
    return error["message"]


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda b: b.pop("threadId"), "threadId"),
        (lambda b: b.update(threadId=""), "threadId"),
        (lambda b: b.update(runId=7), "runId"),
        (lambda b: b.pop("state"), "state"),
        (lambda b: b.pop("context"), "context"),
        (lambda b: b.update(tools=[{"name": "x", "description": "", "parameters": {}}]), "tools"),
        (lambda b: b["forwardedProps"]["iacCode"].update(surprise=1), "forwardedProps.iacCode.surprise"),
        (lambda b: b["forwardedProps"]["iacCode"].update(schemaVersion=2), "forwardedProps.iacCode.schemaVersion"),
        (lambda b: b["forwardedProps"]["iacCode"].update(rosInvocationId="x" * 257), "forwardedProps.iacCode.rosInvocationId"),
        (lambda b: b["forwardedProps"]["iacCode"].update(cwd="relative/path"), "forwardedProps.iacCode.cwd"),
        (lambda b: b["forwardedProps"]["iacCode"].update(cwd="/etc/passwd"), "forwardedProps.iacCode.cwd"),
        (lambda b: b["forwardedProps"]["iacCode"].update(cwd="/tmp/../etc"), "forwardedProps.iacCode.cwd"),
        (lambda b: b["forwardedProps"]["iacCode"].update(thinking={"budget": 0}), "forwardedProps.iacCode.thinking.budget"),
        (lambda b: b["forwardedProps"]["iacCode"].update(alibabaCloud={"region": "x"}), "forwardedProps.iacCode.alibabaCloud.region"),
        (lambda b: b["forwardedProps"]["iacCode"].update(runMode="fast"), "forwardedProps.iacCode.runMode"),
        (
            lambda b: b.update(messages=[{"id": "m", "role": "user", "content": [{"type": "audio", "source": {}}]}]),
            "messages[0].content[0].type",
        ),
        (
            lambda b: b.update(
                messages=[
                    {"id": "m", "role": "user", "content": [{"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}]}
                ]
            ),
            "messages[0].content[0].source.type",
        ),
        (lambda b: b.update(messages=[{"id": "m", "role": "martian", "content": "x"}]), "messages[0].role"),
        (lambda b: b.update(messages=[]), "messages"),
    ],
)
def test_invalid_input_names_the_field(gateway, client, mutate, field):
    body = run_body("hi")
    mutate(body)
    before = threads_held(gateway.state_dir)
    expect_error(client, gateway.url, body, "INVALID_INPUT", 400, field=field)
    # Nothing was left behind for a rejected request: no thread of its id, nor of any other (a body whose threadId is
    # the wrong field has no id to look up).
    if isinstance(body.get("threadId"), str):
        assert thread_state(gateway.state_dir, body["threadId"]) is None
    assert threads_held(gateway.state_dir) == before


def threads_held(state_dir: str) -> int:
    """How many threads the file store's journal holds on disk."""
    import os

    from store.journal import scan

    with open(os.path.join(state_dir, "threads.journal"), "rb") as handle:
        return len(scan(handle.read()).slots)


def _image(value: str, mime: str = "image/png") -> dict:
    return {"id": "m", "role": "user", "content": [{"type": "image", "source": {"type": "data", "value": value, "mimeType": mime}}]}


PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "message, field, status",
    [
        (_image("not base64!!"), "messages[0].content[0].source.value", 400),
        (_image(base64.b64encode(PNG).decode() + "="), "messages[0].content[0].source.value", 400),
        (_image(base64.b64encode(b"GIF89a....").decode(), "image/png"), "messages[0].content[0].source.value", 400),
        (_image(base64.b64encode(PNG).decode(), "image/tiff"), "messages[0].content[0].source.mimeType", 400),
        (_image(base64.b64encode(PNG + b"\0" * (8 * 1024 * 1024)).decode()), "messages[0].content[0].source.value", 413),
    ],
)
def test_bad_images_are_refused(gateway, client, message, field, status):
    root = post_sse(client, gateway.url + "/", run_body(messages=[message]))
    assert root.status == status, root.raw
    error = json.loads(root.raw)["error"]
    assert error["code"] == "INVALID_INPUT" and error["field"] == field


def test_all_images_together_are_bounded():
    """10 MiB of images is more than a 12 MiB body can carry in base64, so the bound is checked on the parser itself."""
    five = base64.b64encode(PNG + b"\0" * (5 * 1024 * 1024)).decode()
    parts = [{"type": "image", "source": {"type": "data", "value": five, "mimeType": "image/png"}}] * 2
    body = json.dumps(run_body(messages=[{"id": "m", "role": "user", "content": parts}])).encode()
    with pytest.raises(GatewayError) as caught:
        prepare(body, allowed_roots=("/tmp",), default_cwd=None, accept_language=None)
    assert caught.value.http_status == 413 and caught.value.field == "messages[0].content[1].source.value"


def test_not_json_wrong_media_type_and_oversize(gateway, client):
    root = client.post(gateway.url + "/", content=b"{nope", headers={"content-type": "application/json"})
    assert root.status_code == 400 and root.json()["error"]["code"] == "INVALID_INPUT"
    inv = client.post(gateway.url + "/invocations", content=b"{nope", headers={"content-type": "application/json"})
    assert inv.status_code == 400 and b'"VALIDATION_ERROR"' in inv.content
    for path in ("/", "/invocations"):
        wrong = client.post(gateway.url + path, content=b"{}", headers={"content-type": "text/plain"})
        assert wrong.status_code == (415 if path == "/" else 400)
        assert b"INVALID_INPUT" in wrong.content and b"Content-Type" in wrong.content
    big = b"{" + b" " * (12 * 1024 * 1024) + b"}"
    declared = client.post(gateway.url + "/", content=big, headers={"content-type": "application/json"})
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "INVALID_INPUT"

    def chunks():
        for _ in range(13):
            yield b" " * (1024 * 1024)

    chunked = client.post(gateway.url + "/", content=chunks(), headers={"content-type": "application/json"})
    assert chunked.status_code == 413


def test_run_id_reuse_is_duplicate_or_conflict(gateway, client):
    body = run_body("first")
    assert post_sse(client, gateway.url + "/", body).status == 200
    # A retry with a rotated secret is the same request.
    retry = json.loads(json.dumps(body))
    retry["forwardedProps"]["iacCode"]["llmApiKey"] = "sk-rotated"
    expect_error(client, gateway.url, retry, "DUPLICATE_RUN_ID", 409, field="runId")
    changed = {**body, "messages": [{"id": "m2", "role": "user", "content": "other"}]}
    expect_error(client, gateway.url, changed, "RUN_ID_CONFLICT", 409, field="runId")


def test_binding_conflicts(gateway, client):
    body = run_body("first", iac=ext(userId="alice"))
    assert post_sse(client, gateway.url + "/", body).status == 200
    moved = run_body("x", thread=body["threadId"], iac=ext(cwd="/tmp/agui-tests/other", userId="alice"))
    expect_error(client, gateway.url, moved, "THREAD_BINDING_CONFLICT", 409, field="forwardedProps.iacCode.cwd")
    other_user = run_body("x", thread=body["threadId"], iac=ext(userId="mallory"))
    expect_error(client, gateway.url, other_user, "THREAD_BINDING_CONFLICT", 409, field="forwardedProps.iacCode.userId")
    # A normalised path is the same workspace.
    same = run_body("x", thread=body["threadId"], iac=ext(cwd="/tmp/agui-tests/./ws/", userId="alice"))
    assert post_sse(client, gateway.url + "/", same).status == 200


def test_thread_busy_while_a_run_is_active_and_ping_is_busy(gateway, client):
    body = run_body("/slow 2")
    holder: dict = {}
    thread = threading.Thread(target=lambda: holder.update(r=post_sse(httpx.Client(), gateway.url + "/", body)))
    before = client.get(gateway.url + "/ping").json()
    thread.start()
    deadline = time.monotonic() + 5
    while client.get(gateway.url + "/ping").json()["status"] != "HealthyBusy":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    busy = client.get(gateway.url + "/ping").json()
    assert busy["time_of_last_update"] >= before["time_of_last_update"]
    assert client.get(gateway.url + "/ping").json() == busy, "the timestamp moves only on a status change"
    expect_error(client, gateway.url, run_body("again", thread=body["threadId"]), "THREAD_BUSY", 409)
    thread.join()
    assert holder["r"].terminal["outcome"]["type"] == "success"
    assert client.get(gateway.url + "/ping").json()["status"] == "Healthy"


def test_resume_required_while_interrupts_are_pending(gateway, client):
    first = run_body("/tool deploy {}")
    assert post_sse(client, gateway.url + "/", first).terminal["outcome"]["type"] == "interrupt"
    expect_error(client, gateway.url, run_body("next turn", thread=first["threadId"]), "RESUME_REQUIRED", 409)


def test_corrupt_state_file_answers_503_for_that_thread_only(tmp_path, client):
    """A thread file found corrupt when it is read (after a restart: the running process answers from what it last
    wrote) refuses that thread only."""
    first = Gateway(tmp_path, "--allowed-cwd", "/tmp").start()
    body = run_body("first")
    assert post_sse(client, first.url + "/", body).status == 200
    first.stop()
    corrupt_thread(first.state_dir, body["threadId"])
    gateway = Gateway(tmp_path, "--allowed-cwd", "/tmp")
    gateway.args[gateway.args.index("--state-dir") + 1] = first.state_dir
    gateway.start()
    try:
        expect_error(client, gateway.url, run_body("again", thread=body["threadId"]), "STATE_PERSISTENCE_FAILED", 503)
        assert post_sse(client, gateway.url + "/", run_body("another thread")).status == 200
    finally:
        gateway.stop()


def test_messages_are_localized(gateway, client):
    body = run_body("hi", iac=ext(cwd="relative", preferredLanguage="pt-BR"))
    error = json.loads(post_sse(client, gateway.url + "/", body).raw)["error"]
    assert error["message"].startswith("Entrada inválida em forwardedProps.iacCode.cwd")
    body = run_body("hi", iac=ext(cwd="relative"))
    error = json.loads(post_sse(client, gateway.url + "/", body, headers={"accept-language": "fr;q=0.4, de;q=0.9, xx"}).raw)["error"]
    assert error["message"].startswith("Ungültige Eingabe")
    error = json.loads(post_sse(client, gateway.url + "/", body, headers={"accept-language": "ja"}).raw)["error"]
    assert "forwardedProps.iacCode.cwd の入力が無効です" in error["message"]
    error = json.loads(post_sse(client, gateway.url + "/", body, headers={"accept-language": "xx, *"}).raw)["error"]
    assert error["message"].startswith("Invalid input in forwardedProps.iacCode.cwd")


def test_static_bearer_token(start_gateway, client):
    server = start_gateway(env={"IAC_CODE_AGUI_AUTH_TOKEN": "s3cret-token"})
    body = run_body("hi")
    for headers in (None, {"authorization": "Bearer wrong"}, {"authorization": "Basic s3cret-token"}):
        expect_error(client, server.url, {**body, "runId": body["runId"] + str(headers)[:5]}, "UNAUTHORIZED", 401, headers=headers)
    refused = client.post(server.url + "/", json=body)
    assert refused.headers["www-authenticate"].startswith("Bearer")
    ok = post_sse(client, server.url + "/", body, headers={"authorization": "Bearer s3cret-token"})
    assert ok.status == 200 and ok.terminal["type"] == "RUN_FINISHED"
    assert client.get(server.url + "/ping").status_code == 200
    assert client.get(server.url + "/health").status_code == 200
    cancel = client.post(server.url + "/extensions/iac-code/v1/executions/x/cancel", json={"threadId": "t", "rosInvocationId": "i"})
    assert cancel.status_code == 401


def test_plain_agui_mode_with_default_cwd(start_gateway, client):
    server = start_gateway("--default-cwd", "/tmp/agui-default")
    body = run_body("plain client")
    body["forwardedProps"] = {}
    result = post_sse(client, server.url + "/", body)
    assert result.status == 200 and result.terminal["outcome"]["type"] == "success"
    assert result.custom("iac-code.session.v1")[0]["rosInvocationId"] == f"thread:{body['threadId']}"
