"""The command line: --help explains every flag, environment variables feed the settings, bad values are refused."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx

from gateway.server.cli import settings_from_args
from tests.support import ROOT, post_sse, run_body

FLAGS = [
    "--host",
    "--port",
    "--store",
    "--state-dir",
    "--agent",
    "--auth-token",
    "--heartbeat-seconds",
    "--allowed-cwd",
    "--default-cwd",
    "--retention",
    "--interrupt-ttl",
    "--log-level",
    "--log-format",
]


def test_help_explains_every_flag():
    done = subprocess.run([sys.executable, "-m", "gateway", "--help"], cwd=ROOT, capture_output=True, text=True, check=True)
    for flag in FLAGS:
        assert flag in done.stdout
    assert "AGUI_GATEWAY_" in done.stdout and "IAC_CODE_AGUI_AUTH_TOKEN" in done.stdout


def test_environment_and_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    defaults = settings_from_args([])
    assert (defaults.host, defaults.port, defaults.store, defaults.agent) == ("127.0.0.1", 8080, "file", "demo")
    assert defaults.state_dir == str(tmp_path / "agui") and defaults.heartbeat_seconds == 15 and defaults.interrupt_ttl == 900
    monkeypatch.setenv("AGUI_GATEWAY_PORT", "9999")
    monkeypatch.setenv("AGUI_GATEWAY_RETENTION", "2d")
    monkeypatch.setenv("AGUI_GATEWAY_ALLOWED_CWD", "/srv/a:/srv/b")
    monkeypatch.setenv("IAC_CODE_AGUI_AUTH_TOKEN", "s3cr3t-value")
    configured = settings_from_args(["--interrupt-ttl", "15m"])
    assert configured.port == 9999 and configured.retention_seconds == 2 * 86400 and configured.interrupt_ttl == 900
    assert configured.allowed_cwd == ("/srv/a", "/srv/b") and configured.auth_token == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(configured)


def test_bad_values_are_refused():
    done = subprocess.run([sys.executable, "-m", "gateway", "--retention", "soon"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "duration" in done.stderr
    done = subprocess.run([sys.executable, "-m", "gateway", "--allowed-cwd", "relative"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "absolute" in done.stderr


def test_json_logs_are_one_object_per_line(start_gateway):
    server = start_gateway("--log-format", "json")
    with httpx.Client() as client:
        assert post_sse(client, server.url + "/", run_body("hi")).status == 200
    server.stop()
    lines = [json.loads(line) for line in server.logs().splitlines() if line.strip()]
    assert any(entry["message"].startswith("run ended") for entry in lines)
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in lines)
