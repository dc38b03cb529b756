"""The command line: --help explains every flag, environment variables feed the settings, bad values are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from server.cli import settings_from_args
from tests.support import ROOT, free_port, post_sse, run_body

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
    "--redis-durability",
    "--max-reattach-grace-seconds",
    "--event-log-retention",
    "--log-level",
    "--log-format",
]


def test_help_explains_every_flag():
    done = subprocess.run([sys.executable, "-m", "server", "--help"], cwd=ROOT, capture_output=True, text=True, check=True)
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
    done = subprocess.run([sys.executable, "-m", "server", "--retention", "soon"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "duration" in done.stderr
    done = subprocess.run([sys.executable, "-m", "server", "--allowed-cwd", "relative"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "absolute" in done.stderr


def test_json_logs_are_one_object_per_line(start_gateway):
    server = start_gateway("--log-format", "json")
    with httpx.Client() as client:
        assert post_sse(client, server.url + "/", run_body("hi")).status == 200
    server.stop()
    lines = [json.loads(line) for line in server.logs().splitlines() if line.strip()]
    assert any(entry["message"].startswith("run ended") for entry in lines)
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in lines)


CONFIG_ERRORS = [
    (["--port", "99999"], {}, ["--port", "AGUI_GATEWAY_PORT", "99999", "1 to 65535"]),
    ([], {"AGUI_GATEWAY_PORT": "abc"}, ["--port", "AGUI_GATEWAY_PORT", "abc"]),
    (["--heartbeat-seconds", "-5"], {}, ["--heartbeat-seconds", "AGUI_GATEWAY_HEARTBEAT_SECONDS", "-5"]),
    (["--lease-seconds", "0"], {}, ["--lease-seconds", "0"]),
    (["--header-timeout-seconds", "0"], {}, ["--header-timeout-seconds", "> 0"]),
    (["--max-concurrent-runs", "-1"], {}, ["--max-concurrent-runs", "-1"]),
    (["--retention", "soon"], {}, ["--retention", "AGUI_GATEWAY_RETENTION", "soon", "duration"]),
    ([], {"AGUI_GATEWAY_INTERRUPT_TTL": "forever"}, ["--interrupt-ttl", "AGUI_GATEWAY_INTERRUPT_TTL", "forever"]),
    (["--rate-limit", "fast"], {}, ["--rate-limit", "fast"]),
    (["--oauth-algorithms", "HS256"], {}, ["--oauth-algorithms", "HS256"]),
    (["--log-level", "loud"], {}, ["--log-level", "loud"]),
    (["--agent", "nonsense"], {}, ["--agent", "AGUI_GATEWAY_AGENT", "nonsense", "a2a+http"]),
    (["--agent", "no_such_module_here:make"], {}, ["--agent", "no_such_module_here", "cannot be imported"]),
    (["--agent", "json:no_factory"], {}, ["--agent", "no_factory"]),
    (["--store", "bogus"], {}, ["--store", "AGUI_GATEWAY_STORE", "bogus"]),
    (["--agents", "/nowhere/agents.toml", "--agent-token", "t"], {}, ["--agents", "--agent-token"]),
    (["--agents", "/nowhere/agents.toml"], {}, ["--agents /nowhere/agents.toml", "cannot be read"]),
    (["--allowed-cwd", "relative"], {}, ["absolute", "relative"]),
    (["--redis-durability", "replicated:0"], {}, ["--redis-durability", "AGUI_GATEWAY_REDIS_DURABILITY", "replicated:0"]),
    (["--max-reattach-grace-seconds", "-1"], {}, ["--max-reattach-grace-seconds", "-1"]),
    (["--event-log-retention", "later"], {}, ["--event-log-retention", "later"]),
    (["--idle-poll-microseconds", "10001"], {}, ["--idle-poll-microseconds", "AGUI_GATEWAY_IDLE_POLL_MICROSECONDS", "0 to 10000"]),
]


@pytest.mark.parametrize(("args", "env", "words"), CONFIG_ERRORS, ids=[" ".join(a) or next(iter(e)) for a, e, _ in CONFIG_ERRORS])
def test_every_configuration_error_is_one_line_with_exit_2(args, env, words, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "server", "--state-dir", str(tmp_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agui-gateway: "), done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in done.stderr


DEMO = '[agents.one]\nbackend = "demo"\n'
AGENTS_FILE_FAULTS = [
    ("not-toml", "[agents.one\n", ["is not TOML", "line 1"]),
    ("no-agent", "[agents]\n", ["declares no agent"]),
    ("unknown-backend", '[agents.one]\nbackend = "telepathy"\n', ["agents.one.backend", "telepathy", "is not an agent"]),
    ("no-backend", "[agents.one]\ndescription = 'x'\n", ["agents.one", "missing the field `backend`"]),
    ("unknown-key", DEMO + "colour = 'red'\n", ["agents.one", "unknown field `colour`"]),
    ("bad-id", '[agents."a b"]\nbackend = "demo"\n', ["agents.a b", "1-64"]),
    ("no-default", DEMO + '[agents.two]\nbackend = "demo"\n', ["no default agent"]),
    ("two-defaults", DEMO + 'default = true\n[agents.two]\nbackend = "demo"\ndefault = true\n', ["more than one default", "one, two"]),
    ("token-unset", DEMO + 'token_env = "AGUI_TEST_UNSET_TOKEN"\n', ["agents.one.token_env", "AGUI_TEST_UNSET_TOKEN", "not set"]),
    ("bad-seconds", DEMO + "response_seconds = -1\n", ["agents.one.response_seconds"]),
]


@pytest.mark.parametrize(("name", "text", "words"), AGENTS_FILE_FAULTS, ids=[fault[0] for fault in AGENTS_FILE_FAULTS])
def test_an_agents_file_with_a_fault_refuses_to_start_with_one_line_naming_it(name, text, words, tmp_path):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "server", "--state-dir", str(tmp_path), "--agents", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"agui-gateway: --agents {path}: "), done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_help_names_every_flag_variable_and_default():
    done = subprocess.run([sys.executable, "-m", "server", "--help"], cwd=ROOT, capture_output=True, text=True, check=True)
    from server.cli import build_parser
    from server.options import env_name

    text = " ".join(done.stdout.split())
    for action in build_parser()._actions:
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag in (None, "--help", "--version"):
            continue
        assert f"[env {env_name(flag)}; default" in text, flag


def test_the_file_descriptor_soft_limit_is_raised_at_start_and_reported(tmp_path):
    """Each stream holds a descriptor: a gateway started under a low soft limit raises it to the hard one and
    /health says so, with the number open."""
    import resource
    import time

    from tests.support import free_port

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard > 256, "the machine's hard limit leaves nothing to raise"
    port = free_port()

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    args = [sys.executable, "-m", "server", "--port", str(port), "--state-dir", str(tmp_path / "state"), "--allowed-cwd", "/tmp"]
    proc = subprocess.Popen(args, cwd=ROOT, preexec_fn=low_limit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                report = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json()["fileDescriptors"]
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        expected = None if hard == resource.RLIM_INFINITY else hard
        assert report["soft"] > 256 and report["hard"] == expected and report["soft"] == (expected or report["soft"])
        assert report["open"] is None or 0 < report["open"] < report["soft"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_listen_backlog_is_the_one_configured(start_gateway):
    """`--backlog` reaches the listening socket (ss shows a listener's backlog as its Send-Q)."""
    server = start_gateway("--backlog", "37")
    listed = subprocess.run(["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True).stdout.split()
    assert listed[0] == "LISTEN" and listed[2] == "37", listed


def test_a_second_gateway_on_the_same_state_directory_is_refused_at_start(start_gateway):
    """Two processes appending to one journal would each keep an index of their own: the second one exits with 2
    and one line naming the directory and the first one's pid, and the first goes on serving."""
    first = start_gateway()
    done = subprocess.run(
        [sys.executable, "-m", "server", "--state-dir", first.state_dir, "--port", str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert line.startswith("agui-gateway: ") and "in use by another gateway" in line and f"pid {first.proc.pid}" in line, line
    assert httpx.get(first.url + "/ping").status_code == 200


def test_a_uvicorn_the_connection_limits_were_not_written_for_refuses_to_start(tmp_path):
    """The limits adapt uvicorn's protocols: on another series the gateway says so in one line and exits 2, never
    serving without them. (uvicorn's reported version is what changes here; the rest of the start is real.)"""
    start = (
        "import sys, server.annex as annex; annex.version = lambda name: '0.55.0' if name == 'uvicorn' else __import__("
        "'importlib.metadata').metadata.version(name); from server.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", start, "--store", "memory", "--state-dir", str(tmp_path), "--port", str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert "agui-gateway: uvicorn 0.55.0 is not 0.54.x, which the connection limits were written for" in done.stderr
    assert "Traceback" not in done.stderr and "Started server" not in done.stderr
