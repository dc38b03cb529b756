#!/usr/bin/env bash
# Installs the Python and Node test dependencies into .venv and tests/node, then runs the whole suite.
# Fails if any test was skipped: the Node-driven (and, later, Redis and browser) tests must really run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
command -v node >/dev/null || { echo "Node.js is required (apt-get install nodejs npm)" >&2; exit 1; }
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
(cd tests/copilotkit && npm ci --no-audit --no-fund --loglevel=error)
# Linters first: a lint, format or type error fails the run before any test starts.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
mkdir -p test-artifacts
rm -f test-artifacts/junit-public.xml  # written only by a whole-suite run
# Two passes: the tests that bound a time or a count of system calls (marker `timing`) run after the rest, on their
# own. pytest's 5 is "nothing collected", which a pass may be when the arguments name only the other kind.
pass_of() { .venv/bin/python -m pytest -q -rs "$@" || [ $? -eq 5 ]; }
pass_of -m "not timing" --junitxml=test-artifacts/junit.xml "$@"
pass_of -m timing --junitxml=test-artifacts/junit-timing.xml "$@"
# The whole suite also runs the protocol, reattach and replica suites on the public path (the tuning annex off,
# server/annex.py): the annex may move the figures, never the behaviour.
public=()
if [ $# -eq 0 ]; then
  public=(tests/test_sse_runs.py tests/test_errors.py tests/test_websocket.py tests/test_hardening.py tests/test_node_client.py
    tests/test_protocol_features.py tests/test_reattach.py tests/test_replicas.py tests/test_agents.py
    tests/test_cancel_and_disconnect.py tests/test_ws_agent.py tests/test_agentcore.py tests/test_threads.py
    tests/test_thread_join.py tests/test_request_ids.py tests/test_redis_wire.py tests/test_busy_threads.py)
  AGUI_GATEWAY_TUNING=off pass_of -m "not timing" --junitxml=test-artifacts/junit-public.xml "${public[@]}"
fi
.venv/bin/python - <<'PY'
import sys
import xml.etree.ElementTree as ET

import os

names = ["junit.xml", "junit-timing.xml", *(["junit-public.xml"] if os.path.exists("test-artifacts/junit-public.xml") else [])]
cases = [case for name in names for case in ET.parse(f"test-artifacts/{name}").getroot().iter("testcase")]
skipped = [f"{case.get('classname')}::{case.get('name')}" for case in cases if case.find("skipped") is not None]
total = len(cases)
if total == 0 or skipped:
    print(f"{total} tests collected; skipped tests are failures here: {skipped}", file=sys.stderr)
    sys.exit(1)
print(f"all {total} tests ran, none skipped")
PY
