"""Shared fixtures: real gateway processes on loopback and an httpx client. The end-to-end helpers are imported
inside the fixtures, so the unit layer (tests/unit), which shares this file, loads none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:
    from tests.support import Gateway


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    """The default gateway: file store, demo agent, short heartbeat, /tmp allowed as a workspace root."""
    from tests.support import Gateway

    server = Gateway(tmp_path_factory.mktemp("gw"), "--heartbeat-seconds", "0.5", "--allowed-cwd", "/tmp").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client():
    with httpx.Client(timeout=60) as http:
        yield http


@pytest.fixture
def start_gateway(tmp_path):
    from tests.support import Gateway

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
    from tests.issuer import Issuer

    server = Issuer()
    server.add_key("k1")
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A redis-server started by the tests (never the machine's shared one): tests that need it fail without it."""
    from tests.support import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item so fixtures can act on failures (browser screenshots)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


# Headless Chromium (Debian's, driven by Playwright) for the browser tests: one browser a module, a context a test,
# and a screenshot in test-artifacts/ of a page whose test failed.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module")
def browser():
    import shutil

    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    assert executable, "Debian's chromium is required for the browser tests (.ci/run installs it)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, request):
    import os

    from tests.support import ROOT

    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        artifacts = os.path.join(ROOT, "test-artifacts")
        os.makedirs(artifacts, exist_ok=True)
        page.screenshot(path=os.path.join(artifacts, f"{request.node.name}.png"), full_page=True)
    context.close()
