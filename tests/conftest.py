"""Shared fixtures: real gateway processes on loopback and an httpx client."""

from __future__ import annotations

import httpx
import pytest

from tests.issuer import Issuer
from tests.support import Gateway, RedisServer


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    """The default gateway: file store, demo agent, short heartbeat, /tmp allowed as a workspace root."""
    server = Gateway(tmp_path_factory.mktemp("gw"), "--heartbeat-seconds", "0.5", "--allowed-cwd", "/tmp").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client():
    with httpx.Client(timeout=60) as http:
        yield http


@pytest.fixture
def start_gateway(tmp_path):
    started: list[Gateway] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Gateway:
        server = Gateway(tmp_path, "--allowed-cwd", "/tmp", *args, env=env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def issuer():
    """A local OAuth issuer on loopback (discovery and JWKS) with one published RSA key, `k1`."""
    server = Issuer()
    server.add_key("k1")
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A redis-server started by the tests (never the machine's shared one): tests that need it fail without it."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item so fixtures can act on failures (browser screenshots)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
