"""The Redis store on a real Redis Cluster (three local nodes): hash-tagged keys keep every script on one slot."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import httpx
import pytest

from tests.support import Gateway, RedisServer, free_port, pending_interrupt, post_sse, run_body, session_of
from tests.test_cancel_and_disconnect import CANCEL, open_stream, read_until
from tests.test_threads import joined, turns

pytestmark = pytest.mark.redis


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    import random
    import socket

    for _ in range(200):
        port = random.randint(20000, 30000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def start_cluster(tmp_path, count: int, replicas: int) -> list[RedisServer]:
    """`count` local nodes made one Cluster, `replicas` replicas per master, once every slot is served."""
    nodes = []
    for _ in range(count):
        port = cluster_port()
        directory = tmp_path / f"node-{port}"  # each its own: a replica's synced copy lands in its directory
        directory.mkdir()
        nodes.append(
            RedisServer(
                directory,
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{port}.conf",
                "--cluster-node-timeout",
                "2000",
                "--repl-diskless-sync-delay",
                "0",  # a replica's first sync at once (else 5 s): it cannot take over before it has one
                port=port,
            ).start()
        )
    created = subprocess.run(
        [
            shutil.which("redis-cli"),
            "--cluster",
            "create",
            *[f"127.0.0.1:{n.port}" for n in nodes],
            "--cluster-replicas",
            str(replicas),
            "--cluster-yes",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    wait_for_cluster(nodes[0].port, "cluster_state:ok")
    deadline = time.monotonic() + 20
    while replicas and sum("master_link_status:up" in replication(n.port) for n in nodes) < count * replicas // (replicas + 1):
        assert time.monotonic() < deadline, "the replicas never synced"
        time.sleep(0.2)
    return nodes


def replication(port: int) -> str:
    return subprocess.run([shutil.which("redis-cli"), "-p", str(port), "info", "replication"], capture_output=True, text=True).stdout


def wait_for_cluster(port: int, line: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        info = subprocess.run([shutil.which("redis-cli"), "-p", str(port), "cluster", "info"], capture_output=True, text=True).stdout
        if line in info:
            return
        assert time.monotonic() < deadline, info
        time.sleep(0.2)


@pytest.fixture
def cluster(tmp_path):
    nodes = start_cluster(tmp_path, 3, 0)
    yield nodes
    for node in nodes:
        node.stop()


@pytest.mark.timing
def test_runs_interrupts_and_cancel_on_a_redis_cluster(tmp_path, cluster, client):
    url = f"redis+cluster://127.0.0.1:{cluster[0].port}"
    # A 30 s lease is renewed every 10 s: a cancel seen within 5 s came through sharded pub/sub, not a renewal.
    a = Gateway(tmp_path, "--store", url, "--lease-seconds", "30", "--allowed-cwd", "/tmp").start()
    b = Gateway(tmp_path, "--store", url, "--lease-seconds", "30", "--allowed-cwd", "/tmp").start()
    try:
        for index in range(6):  # threads land on different slots and nodes
            assert post_sse(client, a.url + "/", run_body(f"hello {index}")).terminal["outcome"]["type"] == "success"
        body = run_body("/tool deploy {}")
        interrupt = pending_interrupt(post_sse(client, a.url + "/", body))
        entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        resumed = post_sse(client, b.url + "/", run_body(None, thread=body["threadId"], resume=entry))
        assert resumed.terminal["outcome"]["type"] == "success" and resumed.of("TOOL_CALL_RESULT")
        slow = run_body("/slow 20")
        http, response, records = open_stream(a.url, slow)
        head = read_until(records, "TEXT_MESSAGE_CONTENT")
        execution = session_of(head)["executionId"]
        asked = time.monotonic()
        answer = client.post(b.url + CANCEL.format(execution), json={"threadId": slow["threadId"], "rosInvocationId": "inv-1"})
        assert answer.json()["status"] == "cancelled"
        assert list(records)[-1]["outcome"] == {"type": "cancelled"}
        # Woken through sharded pub/sub, not found at the next renewal (a third of the lease): not a speed target,
        # a check of which path delivered it, with a margin a loaded machine keeps.
        assert time.monotonic() - asked < 5
        assert "cancel subscription lost" not in a.logs() and "cancel subscription lost" not in b.logs()
        http.close()
        assert client.get(a.url + "/health").json()["store"] == {"kind": "redis+cluster", "reachable": True}
        check_conversations_across(a, b, client)
    finally:
        a.stop()
        b.stop()


def check_conversations_across(a: Gateway, b: Gateway, client) -> None:
    """Plain threads on `a` keep their conversation: `b` lists them (their list lives on another slot of a Cluster),
    reads and joins them whole, renames one and erases one."""
    threads = [f"conv-{uuid.uuid4().hex[:8]}" for _ in range(3)]  # on different slots
    said = {thread: turns(client, a.url, thread, [f"first on {thread}", "and a second turn"]) for thread in threads}
    listed = [t["threadId"] for t in client.get(b.url + "/threads?limit=100").json()["threads"]]
    assert set(threads) <= set(listed)
    for thread in threads:
        assert client.get(f"{b.url}/threads/{thread}").json()["messages"] == said[thread]
        assert joined(client, b.url, thread)[1]["messages"] == said[thread]
    assert client.patch(f"{b.url}/threads/{threads[0]}", json={"title": "Renamed"}).json()["title"] == "Renamed"
    assert client.delete(f"{b.url}/threads/{threads[1]}").status_code == 204
    assert client.get(f"{a.url}/threads/{threads[1]}").json()["error"]["code"] == "THREAD_NOT_FOUND"


def test_runs_through_redis_sentinel(tmp_path, client):
    master = RedisServer(tmp_path).start()
    sentinel_port = free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\nsentinel down-after-milliseconds mymaster 1000\n"
    )
    sentinel = subprocess.Popen(
        [shutil.which("redis-server"), str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    gateway = None
    try:
        deadline = time.monotonic() + 10
        while True:
            probe = subprocess.run(
                [shutil.which("redis-cli"), "-p", str(sentinel_port), "sentinel", "get-master-addr-by-name", "mymaster"],
                capture_output=True,
                text=True,
            )
            if str(master.port) in probe.stdout:
                break
            assert time.monotonic() < deadline, probe.stdout + probe.stderr
            time.sleep(0.1)
        gateway = Gateway(tmp_path, "--store", f"redis+sentinel://127.0.0.1:{sentinel_port}/mymaster/0", "--allowed-cwd", "/tmp").start()
        body = run_body("/tool deploy {}")
        interrupt = pending_interrupt(post_sse(client, gateway.url + "/", body))
        entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        resumed = post_sse(client, gateway.url + "/", run_body(None, thread=body["threadId"], resume=entry))
        assert resumed.terminal["outcome"]["type"] == "success"
        keys = subprocess.run([shutil.which("redis-cli"), "-p", str(master.port), "--scan"], capture_output=True, text=True).stdout
        assert "agui:{t:" in keys, "the state lives on the master the sentinel named"
        check_conversations_across(gateway, gateway, client)
    finally:
        if gateway:
            gateway.stop()
        sentinel.kill()
        sentinel.wait()
        master.stop()


def test_a_reshard_under_load_refuses_nothing_falsely(tmp_path, cluster):
    """Slots move between nodes (MIGRATE, then ASK and MOVED redirects) while runs are admitted on two gateways:
    no new run id is refused as a duplicate, no 500, no 503."""
    import threading

    url = f"redis+cluster://127.0.0.1:{cluster[0].port}"
    gateways = [Gateway(tmp_path, "--store", url, "--allowed-cwd", "/tmp").start() for _ in range(2)]
    answers: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def steady(index: int) -> None:
        with httpx.Client(timeout=60) as http:
            count = 0
            while not stop.is_set():
                count += 1
                result = post_sse(http, gateways[(index + count) % 2].url + "/", run_body(f"hello {count}"))
                answers.append((result.status, result.raw if result.status != 200 else b""))

    def node_id(port: int) -> str:
        return subprocess.run(
            [shutil.which("redis-cli"), "-p", str(port), "cluster", "myid"], capture_output=True, text=True
        ).stdout.strip()

    workers = [threading.Thread(target=steady, args=(i,)) for i in range(3)]
    try:
        for worker in workers:
            worker.start()
        time.sleep(1)
        for source, target in ((cluster[0], cluster[1]), (cluster[1], cluster[2])):
            moved = subprocess.run(
                [
                    shutil.which("redis-cli"),
                    "--cluster",
                    "reshard",
                    f"127.0.0.1:{cluster[0].port}",
                    "--cluster-from",
                    node_id(source.port),
                    "--cluster-to",
                    node_id(target.port),
                    "--cluster-slots",
                    "1500",
                    "--cluster-yes",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert moved.returncode == 0, moved.stdout[-2000:] + moved.stderr
        time.sleep(1)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
        for gateway in gateways:
            gateway.stop()
    refused = [(status, raw[:200]) for status, raw in answers if status != 200]
    assert len(answers) > 50 and refused == [], refused[:5]


def test_a_cluster_with_slots_down_is_not_ready_on_any_replica(tmp_path, cluster):
    """Each replica's own probe key lands on one slot; readiness looks at every slot, so all of them say no."""
    url = f"redis+cluster://127.0.0.1:{cluster[0].port}"
    gateways = [Gateway(tmp_path, "--store", url, "--allowed-cwd", "/tmp").start() for _ in range(4)]
    try:
        assert [httpx.get(g.url + "/ready").status_code for g in gateways] == [200] * 4
        cluster[2].stop()  # a third of the slots, with no replica to take them
        wait_for_cluster(cluster[0].port, "cluster_state:fail")
        deadline = time.monotonic() + 10
        while (statuses := [httpx.get(g.url + "/ready", timeout=5).status_code for g in gateways]) != [503] * 4:
            assert time.monotonic() < deadline, statuses
            time.sleep(0.2)
    finally:
        for gateway in gateways:
            gateway.stop()


@pytest.mark.timing
def test_a_cancel_reaches_its_run_after_the_master_of_its_channel_is_replaced(tmp_path):
    """The owner's cancel channel lives on one master (sharded pub/sub); that master dies and its replica is
    promoted. The subscription follows the slot: a cancel sent through another replica wakes the run at once,
    not at the next lease renewal."""
    import os
    import signal

    nodes = start_cluster(tmp_path, 6, 1)
    url = f"redis+cluster://127.0.0.1:{nodes[0].port}"
    a = Gateway(tmp_path, "--store", url, "--lease-seconds", "10", "--allowed-cwd", "/tmp").start()
    b = Gateway(tmp_path, "--store", url, "--lease-seconds", "10", "--allowed-cwd", "/tmp").start()
    try:

        def shard_channels(port: int) -> str:
            return subprocess.run(
                [shutil.which("redis-cli"), "-p", str(port), "pubsub", "shardchannels", "agui:cancel:*"], capture_output=True, text=True
            ).stdout

        deadline = time.monotonic() + 10

        while not (holders := [n for n in nodes if shard_channels(n.port).strip() and "role:master" in replication(n.port)]):
            assert time.monotonic() < deadline, "no cancel channel subscribed"
            time.sleep(0.2)
        victim = holders[0]
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait()
        survivor = next(n for n in nodes if n is not victim)
        wait_for_cluster(survivor.port, "cluster_state:fail", 10)
        wait_for_cluster(survivor.port, "cluster_state:ok", 30)  # its replica took the slots over
        time.sleep(1.2)  # the subscription's next try (at most a second apart)
        with httpx.Client(timeout=30) as client:
            for gateway, other in ((a, b), (b, a)):
                slow = run_body("/slow 20")
                http, _, records = open_stream(gateway.url, slow)
                execution = session_of(read_until(records, "TEXT_MESSAGE_CONTENT"))["executionId"]
                asked = time.monotonic()
                answer = client.post(other.url + CANCEL.format(execution), json={"threadId": slow["threadId"], "rosInvocationId": "inv-1"})
                assert answer.json()["status"] == "cancelled", answer.text
                assert list(records)[-1]["outcome"] == {"type": "cancelled"}
                assert time.monotonic() - asked < 2.5, "woken through its channel, not found at a renewal (3.3 s)"
                http.close()
    finally:
        a.stop()
        b.stop()
        for node in nodes:
            node.stop()
