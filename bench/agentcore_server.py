"""The comparison for bench/ws_flood.py: bedrock-agentcore's AGUIApp streaming the gateway's /flood events.

Runs in its own virtualenv (bench/setup-agentcore.sh) because bedrock-agentcore pulls boto3 and pins pydantic.
Usage: bench/.venv-agentcore/bin/python bench/agentcore_server.py PORT
"""

from __future__ import annotations

import sys
import uuid

from ag_ui.core import (
    CustomEvent,
    EventType,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from bedrock_agentcore.runtime.ag_ui import AGUIApp

app = AGUIApp()


@app.entrypoint
async def flood(run_input):
    count = int(str(run_input.messages[-1].content).split()[1])
    msg = "msg-" + uuid.uuid4().hex[:16]
    thread_id, run_id = run_input.thread_id, run_input.run_id
    yield RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread_id, run_id=run_id, protocol_version="1.0")
    yield CustomEvent(type=EventType.CUSTOM, name="iac-code.session.v1", value={"schemaVersion": 1, "threadId": thread_id})
    yield TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id=msg, role="assistant")
    for _ in range(count):
        yield TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id=msg, delta="x ")
    yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=msg)
    yield RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=thread_id, run_id=run_id)


if __name__ == "__main__":
    app.run(port=int(sys.argv[1]), host="127.0.0.1", log_level="warning", ws="websockets-sansio")
