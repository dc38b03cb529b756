"""The linux/arm64 image, built (scripts/arm64-image.sh: qemu user emulation and Debian's packages, where no
registry or buildx answers) and started under emulation: it is an arm64 image whose processes are aarch64, it
answers /ping and runs the AgentCore contract's example request through /invocations to RUN_FINISHED."""

from __future__ import annotations

import json
import os
import subprocess
import time

import httpx
import pytest

from tests.stack import engine, guide_commands
from tests.support import ROOT, free_port, parse_sse

pytestmark = pytest.mark.stack
TAG = "agui-gateway:arm64"


@pytest.fixture(scope="module")
def arm64_container():
    client = engine()
    if client is None:
        pytest.skip("no Docker engine answers (scripts/test.sh counts a skip as a failure)")
    started = time.monotonic()
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "arm64-image.sh"), TAG], check=True)
    built = time.monotonic()
    port = free_port()
    container = client.containers.run(
        TAG,
        detach=True,
        read_only=True,
        tmpfs={"/var/lib/agui": "uid=10001,gid=10001,mode=0700"},
        ports={"8080/tcp": ("127.0.0.1", port)},
        environment={"AGUI_GATEWAY_AUTH_TOKEN": "arm64-token"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180  # the interpreter's start under emulation takes seconds
        while True:
            try:
                if httpx.get(url + "/ping", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            container.reload()
            assert container.status == "running" and time.monotonic() < deadline, container.logs()[-3000:]
            time.sleep(1)
        print(f"arm64 image built in {built - started:.0f} s, answered /ping {time.monotonic() - built:.0f} s after its start")
        yield client.images.get(TAG), container, url
    finally:
        container.remove(force=True)


def test_the_image_is_arm64_and_its_processes_are_aarch64(arm64_container):
    image, container, _ = arm64_container
    assert image.attrs["Architecture"] == "arm64" and image.attrs["Os"] == "linux", image.attrs["Architecture"]
    assert container.exec_run(["uname", "-m"]).output.decode().strip() == "aarch64"
    assert container.exec_run(["python3", "-c", "import platform; print(platform.machine())"]).output.decode().strip() == "aarch64"


def test_ping_and_the_agentcore_example_run_to_run_finished_under_emulation(arm64_container):
    _, _, url = arm64_container
    assert httpx.get(url + "/ping", timeout=10).json()["status"] in ("Healthy", "HealthyBusy")
    example = guide_commands("stack-example")
    body = json.loads(example.split("-d '", 1)[1].rsplit("'", 1)[0])
    with httpx.Client(timeout=120) as http:
        answered = http.post(url + "/invocations", json=body, headers={"authorization": "Bearer arm64-token"})
    assert answered.status_code == 200 and answered.headers["content-type"].startswith("text/event-stream")
    events, _, _ = parse_sse(answered.content)
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert any(event["type"] == "TEXT_MESSAGE_CONTENT" for event in events)
