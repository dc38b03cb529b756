"""The real AG-UI agents bench/hop_cost.py puts behind the gateway and beside it: the test suite's LangGraph graph under
ag-ui-langgraph and its Pydantic AI agent under Pydantic AI's AG-UI adapter (scripted models: no LLM, no network),
each on `POST /agent` under uvicorn on uvloop and httptools, in a process of its own.

Run: python -m bench.peer_agents langgraph|pydantic PORT
"""

from __future__ import annotations

import sys

import uvicorn


def main(kind: str, port: int) -> None:
    if kind == "langgraph":
        from tests.langgraph_agent import app
    else:
        from tests.pydantic_agent import app
    uvicorn.run(app(), host="127.0.0.1", port=port, loop="uvloop", http="httptools", log_level="warning", access_log=False)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
