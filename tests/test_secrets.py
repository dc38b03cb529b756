"""No request secret (llmApiKey, cloud keys, STS token) ever reaches the state directory or the logs."""

from __future__ import annotations

import os

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
