"""tests/node/validating_agent.mjs run by Node on a free loopback port: a TypeScript AG-UI agent that validates
every request with @ag-ui/core 1.0's schema (and refuses with 422 what it refuses), for the differential suite."""

from __future__ import annotations

import shutil
import subprocess

import httpx

from tests.support import free_port
from tests.test_node_client import NODE_DIR


class TypeScriptAgent:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> TypeScriptAgent:
        node = shutil.which("node")
        assert node, "Node.js is required for these tests (.ci/run installs it)"
        self.proc = subprocess.Popen(
            [node, "validating_agent.mjs", str(self.port)], cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == "ready\n", (line, self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else "")
        return self

    def _seen(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.port}/requests", timeout=10).json()

    @property
    def requests(self) -> list[str]:
        """Every request body it was sent, as sent."""
        return self._seen()["requests"]

    @property
    def failures(self) -> list[str]:
        """zod's error for each request its schema refused."""
        return self._seen()["failures"]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
