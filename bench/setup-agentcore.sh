#!/usr/bin/env bash
# Creates bench/.venv-agentcore with bedrock-agentcore[ag-ui] for the WebSocket comparison in bench/ws_flood.py.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv-agentcore/bin/python ] || python3 -m venv .venv-agentcore
.venv-agentcore/bin/python -m pip install --quiet --upgrade pip
.venv-agentcore/bin/python -m pip install --quiet 'bedrock-agentcore[ag-ui]' uvicorn websockets
