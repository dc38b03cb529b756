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
.venv/bin/python -m pytest -q -rs --junitxml=test-artifacts/junit.xml "$@"
.venv/bin/python - <<'PY'
import sys
import xml.etree.ElementTree as ET

suites = ET.parse("test-artifacts/junit.xml").getroot()
skipped = [
    f"{case.get('classname')}::{case.get('name')}"
    for case in suites.iter("testcase")
    if case.find("skipped") is not None
]
total = sum(1 for _ in suites.iter("testcase"))
if total == 0 or skipped:
    print(f"{total} tests collected; skipped tests are failures here: {skipped}", file=sys.stderr)
    sys.exit(1)
print(f"all {total} tests ran, none skipped")
PY
