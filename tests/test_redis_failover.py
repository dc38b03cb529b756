"""A graceful Sentinel failover (`SENTINEL FAILOVER`) during a steady stream of runs and interrupts through two
gateways: nothing acknowledged is lost (no finished run admitted again, no interrupt unknown afterwards) and
nothing is admitted twice."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

import httpx
import pytest

from tests.support import Gateway, RedisServer, free_port, pending_interrupt, post_sse, run_body

pytestmark = pytest.mark.redis


def cli(port: int, *args: str) -> str:
    return subprocess.run([shutil.which("redis-cli"), "-p", str(port), *args], capture_output=True, text=True, timeout=10).stdout


class SentinelSet:
    """A master, one replica and `sentinels` sentinels on loopback (a quorum of a majority)."""

    def __init__(self, tmp_path, sentinels: int = 1) -> None:
        self.tmp_path = tmp_path
        self.master = RedisServer(tmp_path / "m").start() if (tmp_path / "m").mkdir() is None else None
        (tmp_path / "r").mkdir()
        self.replica = RedisServer(tmp_path / "r", "--replicaof", "127.0.0.1", str(self.master.port)).start()
        self.ports = [free_port() for _ in range(sentinels)]
        self.port = self.ports[0]
        self.sentinels = []
        for index, port in enumerate(self.ports):
            config = tmp_path / f"sentinel-{index}.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
                f"sentinel monitor mymaster 127.0.0.1 {self.master.port} {sentinels // 2 + 1}\n"
                "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 4000\n"
            )
            self.sentinels.append(subprocess.Popen([shutil.which("redis-server"), str(config), "--sentinel"], stdout=subprocess.DEVNULL))
        self.url = "redis+sentinel://" + ",".join(f"127.0.0.1:{port}" for port in self.ports) + "/mymaster/0"
        self.wait_for(
            lambda: (
                "slave0:" in cli(self.master.port, "info", "replication")
                and "master_link_status:up" in cli(self.replica.port, "info", "replication")
            )
        )
        for port in self.ports:
            self.wait_for(lambda port=port: str(self.master.port) in cli(port, "sentinel", "get-master-addr-by-name", "mymaster"))
            self.wait_for(
                lambda port=port: (
                    "num-slaves" in cli(port, "sentinel", "master", "mymaster")
                    and cli(port, "sentinel", "replicas", "mymaster").strip() != ""
                    and f"num-other-sentinels\n{sentinels - 1}\n" in cli(port, "sentinel", "master", "mymaster")
                ),
                30,
            )

    @staticmethod
    def wait_for(check, seconds: float = 15) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            assert time.monotonic() < deadline, "the Redis set did not settle"
            time.sleep(0.1)

    def master_port(self) -> int:
        return int(cli(self.port, "sentinel", "get-master-addr-by-name", "mymaster").split()[1])

    def agreed_master(self) -> int:
        """The master every sentinel names (a sentinel learns a switch from the others' hellos, seconds late)."""
        named: set[str] = set()

        def agreed() -> bool:
            named.clear()
            named.update("".join(cli(port, "sentinel", "get-master-addr-by-name", "mymaster").split()[1:2]) for port in self.ports)
            return len(named) == 1 and "" not in named and "role:master" in cli(int(next(iter(named))), "info", "replication")

        self.wait_for(agreed, 30)
        return int(named.pop())

    def fail_over(self, sentinel: int, old: int) -> None:
        """`SENTINEL FAILOVER` sent to one sentinel, until a sentinel names another master. A forced failover can
        still abort (its replica not promoted within the failover timeout: in CI once in about 20 runs of three
        failovers, after which the master never changed): asked again then, as an operator would."""
        deadline = time.monotonic() + 60
        while True:
            answer = cli(self.ports[sentinel], "sentinel", "failover", "mymaster")
            if "NOGOODSLAVE" in answer:  # this sentinel has not yet seen the demoted master back as a replica
                assert time.monotonic() < deadline, answer
                time.sleep(1)
                continue
            assert "OK" in answer or "INPROG" in answer, answer
            settled = time.monotonic() + 12  # twice the failover timeout (4 s), and a margin
            while time.monotonic() < settled:
                named = [cli(port, "sentinel", "get-master-addr-by-name", "mymaster").split()[1:2] for port in self.ports]
                if any(port and port != [str(old)] for port in named):
                    return
                time.sleep(0.1)
            assert time.monotonic() < deadline, f"no failover took in 60 s: {answer}"

    def demoted(self, old: int, sentinel: int, asked_again: bool = False) -> None:
        """Wait for Sentinel to make the old master a replica of the new one. It does once its periodic INFO sees the
        old master still acting as one, usually within seconds; in CI it once took more than 60 s (3 of about 25
        runs of three failovers went past 30 s). Past 30 s the harness does what Sentinel would, as an operator
        would: what the gateway wrote to the old master after the switch is then discarded all the same. A failover
        a sentinel had already announced can still abort, every sentinel naming the old master again (once in CI):
        it is asked again then, once, as `fail_over` does."""
        try:
            self.wait_for(lambda: "role:slave" in cli(old, "info", "replication"), 30)
        except AssertionError:
            new = self.agreed_master()
            if new == old and not asked_again:
                self.fail_over(sentinel, old)
                self.demoted(old, sentinel, asked_again=True)
                return
            assert new != old, "no sentinel names a new master"
            assert "OK" in cli(old, "replicaof", "127.0.0.1", str(new))
            self.wait_for(lambda: "role:slave" in cli(old, "info", "replication"), 30)

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.kill()
            sentinel.wait()
        self.replica.stop()
        self.master.stop()


def steady_through_failovers(redis_set: SentinelSet, durability: str, sent_to: list[int]) -> None:
    """Runs and interrupts through two gateways while `SENTINEL FAILOVER` goes to each sentinel of `sent_to` in
    turn; then nothing acknowledged is lost: no finished run admitted again, no interrupt unknown."""
    gateways = [
        Gateway(redis_set.tmp_path, "--store", redis_set.url, "--allowed-cwd", "/tmp", "--redis-durability", durability).start()
        for _ in range(2)
    ]
    finished: list[dict] = []
    interrupted: list[tuple[dict, dict]] = []
    stop = threading.Event()

    def steady(index: int) -> None:
        with httpx.Client(timeout=30) as http:
            count = 0
            while not stop.is_set():
                count += 1
                url = gateways[count % 2].url + "/"
                body = run_body("/tool deploy {}" if count % 3 == 0 else "hello")
                result = post_sse(http, url, body)
                if result.status != 200 or not result.events:
                    continue
                terminal = result.terminal
                if terminal["type"] == "RUN_FINISHED" and terminal["outcome"]["type"] == "success":
                    finished.append(body)
                elif terminal["type"] == "RUN_FINISHED" and terminal["outcome"]["type"] == "interrupt":
                    interrupted.append((body, pending_interrupt(result)))
                time.sleep(0.02)

    workers = [threading.Thread(target=steady, args=(i,)) for i in range(3)]
    try:
        for worker in workers:
            worker.start()
        time.sleep(1.5)
        for sentinel in sent_to:
            old = redis_set.agreed_master()
            redis_set.fail_over(sentinel, old)
            redis_set.demoted(old, sentinel)
            redis_set.wait_for(lambda old=old: "master_link_status:up" in cli(old, "info", "replication"), 30)
            time.sleep(3)  # runs go on against the new master
        stop.set()
        for worker in workers:
            worker.join()
        assert len(finished) > 20 and len(interrupted) > 5
        with httpx.Client(timeout=30) as http:
            again = [post_sse(http, gateways[0].url + "/", body).status for body in finished]
            admitted_again = sum(status == 200 for status in again)
            lost = 0
            for body, interrupt in interrupted:
                entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
                resumed = post_sse(http, gateways[1].url + "/", run_body(None, thread=body["threadId"], resume=entry))
                lost += resumed.terminal.get("code") in ("UNKNOWN_INTERRUPT", "EXECUTION_LOST") if resumed.events else 1
        assert (admitted_again, lost) == (0, 0), (
            f"{admitted_again} of {len(finished)} runs ran again, {lost} of {len(interrupted)} interrupts lost"
        )
    finally:
        stop.set()
        for gateway in gateways:
            gateway.stop()


@pytest.mark.parametrize("durability", ["async", "replicated"])
def test_a_graceful_failover_loses_nothing_acknowledged(tmp_path, durability):
    redis_set = SentinelSet(tmp_path)
    try:
        steady_through_failovers(redis_set, durability, [0])
    finally:
        redis_set.stop()


def test_a_graceful_failover_sent_to_any_of_three_sentinels_loses_nothing(tmp_path):
    """Only the sentinel that leads a failover announces its start: the gateway watches them all, so a failover
    sent to the second or third sentinel of its URL pauses writes as one sent to the first does."""
    redis_set = SentinelSet(tmp_path, sentinels=3)
    try:
        steady_through_failovers(redis_set, "async", [1, 2, 0])
    finally:
        redis_set.stop()


def test_a_killed_master_loses_nothing_acknowledged_when_writes_are_replicated(tmp_path):
    import os
    import signal

    redis_set = SentinelSet(tmp_path)
    gateways = [
        Gateway(tmp_path, "--store", redis_set.url, "--allowed-cwd", "/tmp", "--redis-durability", "replicated").start() for _ in range(2)
    ]
    try:
        with httpx.Client(timeout=60) as http:
            finished, interrupted = [], []
            for index in range(12):
                body = run_body("/tool deploy {}" if index % 3 == 0 else "hello")
                result = post_sse(http, gateways[index % 2].url + "/", body)
                assert result.status == 200
                (interrupted if index % 3 == 0 else finished).append((body, result))
            os.kill(redis_set.replica.proc.pid, signal.SIGSTOP)  # the replica lags: nothing can be acknowledged
            try:
                lagging = post_sse(http, gateways[0].url + "/", run_body("while the replica lags"))
                assert lagging.status == 503 and b"STATE_PERSISTENCE_FAILED" in lagging.raw
            finally:
                os.kill(redis_set.replica.proc.pid, signal.SIGCONT)
            old = redis_set.agreed_master()
            redis_set.master.proc.kill()  # SIGKILL: Sentinel promotes the replica
            redis_set.master.proc.wait()
            redis_set.wait_for(lambda: redis_set.master_port() != old, 30)
            # With no replica left every write is refused (replicated:1); the old master comes back and Sentinel
            # makes it a replica of the new one, as it would in production.
            refused = post_sse(http, gateways[1].url + "/", run_body("no replica at all"))
            assert refused.status == 503
            redis_set.master.start()
            deadline = time.monotonic() + 30
            while post_sse(http, gateways[1].url + "/", run_body("after the failover")).status != 200:
                assert time.monotonic() < deadline, "the gateways did not follow the new master"
                time.sleep(0.5)
            for body, _ in finished:  # every acknowledged run is still known: nothing runs twice
                again = post_sse(http, gateways[0].url + "/", body)
                assert again.status == 409 and b"DUPLICATE_RUN_ID" in again.raw
            for body, result in interrupted:  # every acknowledged interrupt survived
                entry = [{"interruptId": pending_interrupt(result)["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
                resumed = post_sse(http, gateways[1].url + "/", run_body(None, thread=body["threadId"], resume=entry))
                assert resumed.terminal["type"] == "RUN_FINISHED" and resumed.terminal["outcome"]["type"] == "success", resumed.terminal
    finally:
        for gateway in gateways:
            gateway.stop()
        redis_set.stop()
