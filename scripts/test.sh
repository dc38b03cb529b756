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
# Two passes: the tests that bound a time or a count of system calls (marker `timing`) run after the rest, on their
# own. pytest's 5 is "nothing collected", which a pass may be when the arguments name only the other kind.
pass_of() { .venv/bin/python -m pytest -q -rs "$@" || [ $? -eq 5 ]; }
pass_of -m "not timing" --junitxml=test-artifacts/junit.xml "$@"
pass_of -m timing --junitxml=test-artifacts/junit-timing.xml "$@"
.venv/bin/python - <<'PY'
import sys
import xml.etree.ElementTree as ET

cases = [case for name in ("junit.xml", "junit-timing.xml") for case in ET.parse(f"test-artifacts/{name}").getroot().iter("testcase")]
skipped = [f"{case.get('classname')}::{case.get('name')}" for case in cases if case.find("skipped") is not None]
total = len(cases)
if total == 0 or skipped:
    print(f"{total} tests collected; skipped tests are failures here: {skipped}", file=sys.stderr)
    sys.exit(1)
print(f"all {total} tests ran, none skipped")
PY
