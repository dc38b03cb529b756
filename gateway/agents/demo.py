"""The embedded, deterministic demo agent (docs/agents.md): plain echo, reasoning, tools, questions, pipelines, and
(demo_protocol.py) the commands for the rest of AG-UI 1.0."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from gateway.agents import demo_protocol
from gateway.agents import signals as s
from gateway.agents.base import AgentBackend, AgentRequest, ResumeAnswer

MAX_SECONDS = 3600  # /slow and /sleep are capped at one hour
MAX_FLOOD = 1_000_000
FLOOD_BURST = 64  # deltas /flood hands over in one step: what the driver publishes at once
QUESTION_OPTIONS = ["yes", "no", "later"]
CANDIDATES = [
    {"id": "cand-a", "title": "Single-AZ VPC", "monthlyCost": 42},
    {"id": "cand-b", "title": "Multi-AZ VPC with NAT", "monthlyCost": 118},
]


def _chunks(text: str) -> list[str]:
    """Split text into word-sized deltas (each keeps its trailing space)."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


def _permission_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"decision": {"type": "string", "enum": ["allow_once", "deny"]}},
        "required": ["decision"],
        "additionalProperties": False,
    }


def _number(argument: str, default: float, limit: float) -> float:
    try:
        value = float(argument)
    except ValueError:
        return default
    return max(0.0, min(value, limit))


class DemoAgent(AgentBackend):
    name = "demo"
    plain_workspace = True  # it touches no files: plain AG-UI clients work out of the box
    client_tools = True  # /frontend calls the client's own tools
    capabilities: ClassVar[dict[str, Any]] = {  # DEMO_AGENT.md: what its commands do
        "tools": {"supported": True, "clientProvided": True},
        "state": {"snapshots": True, "deltas": True},
        "reasoning": {"supported": True, "streaming": True},
        "humanInTheLoop": {"supported": True, "interrupts": True, "approvals": True},
        "multiAgent": {"supported": True, "delegation": True},
        "multimodal": {"input": {"image": True}},
    }

    def __init__(self) -> None:
        self.executions = 0  # tool executions performed by this process (shows a tool never runs twice)

    def run(self, request: AgentRequest) -> AsyncIterator[s.Ready]:
        """The command's own stream, returned rather than relayed: an idle run holds one generator, not two."""
        if request.resume:
            return self._resume(request)
        if request.plain and request.messages and request.messages[-1].get("role") == "tool":
            return demo_protocol.tool_returned(request)
        text = (request.user_text or "").strip()
        command, _, argument = text.partition(" ")
        argument = argument.strip()
        handler = {
            "/tool": self._tool,
            "/tools": self._tools,
            "/ask": self._ask,
            "/pipeline": self._pipeline,
            "/slow": self._slow,
            "/sleep": self._sleep,
            "/fail": self._fail,
            "/flood": self._flood,
            **demo_protocol.COMMANDS,
        }.get(command.lower() if command.startswith("/") else "")
        return handler(request, argument) if handler else self._echo(request, text)

    async def _echo(self, request: AgentRequest, text: str) -> AsyncIterator[s.Signal]:
        yield s.SessionInfo(context_id=f"ctx-{request.thread_id}", task_id=request.execution_id)
        if request.options.thinking_enabled:
            for delta in _chunks(f"The user wrote {len(text)} characters; I will echo them back."):
                yield s.ReasoningDelta(text=delta)
            yield s.ReasoningEnd()
        images = f" (with {request.image_count} image(s))" if request.image_count else ""
        answer = f"You said: {text}{images}" if text else f"You sent no text{images}."
        for delta in _chunks(answer):
            yield s.TextDelta(text=delta)
        yield s.TextEnd()
        words = len(text.split())
        yield s.Usage(input_tokens=words, output_tokens=len(answer.split()), model=request.options.model or "demo-echo", provider="demo")
        yield s.Completed()

    async def _tool(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        name, _, raw_args = argument.partition(" ")
        async for signal in self._tool_calls(request, [(name or "tool", raw_args.strip() or "{}")]):
            yield signal

    async def _tools(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        names = argument.split() or ["first", "second"]
        async for signal in self._tool_calls(request, [(name, "{}") for name in names[:8]]):
            yield signal

    async def _tool_calls(self, request: AgentRequest, calls: list[tuple[str, str]]) -> AsyncIterator[s.Signal]:
        """Stream each tool call, then ask one permission per call (a single interrupt for /tool)."""
        yield s.TextDelta(text=f"I need to run {', '.join(name for name, _ in calls)}.")
        yield s.TextEnd()
        interrupts = []
        tools = []
        for index, (name, raw_args) in enumerate(calls):
            call_id = f"call-{request.execution_id[5:17]}-{index}"
            yield s.ToolStart(tool_call_id=call_id, name=name)
            middle = max(1, len(raw_args) // 2)
            for delta in (raw_args[:middle], raw_args[middle:]):
                if delta:
                    yield s.ToolArgs(tool_call_id=call_id, delta=delta)
            yield s.ToolEnd(tool_call_id=call_id)
            tools.append({"name": name, "args": raw_args, "toolCallId": call_id})
            interrupts.append(
                s.InterruptRequest(
                    id=f"perm-{request.execution_id[5:17]}-{index}",
                    reason="tool_call",
                    message=f"Allow the agent to run {name}?",
                    tool_call_id=call_id,
                    response_schema=_permission_schema(),
                    metadata={
                        "title": f"Run {name}",
                        "purpose": "The agent wants to call a tool that can change resources.",
                        "safeSummary": f"{name} with {len(raw_args)} bytes of arguments",
                        "options": [
                            {"value": "allow_once", "label": "Allow once"},
                            {"value": "deny", "label": "Deny"},
                        ],
                        "toolName": name,
                    },
                )
            )
        yield s.InputRequired(interrupts=interrupts, checkpoint={"kind": "tool", "tools": tools})

    async def _ask(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        question = argument or "How should I continue?"
        yield s.InputRequired(
            interrupts=[
                s.InterruptRequest(
                    id=f"ask-{request.execution_id[:12]}",
                    reason="question",
                    message=question,
                    response_schema={
                        "type": "object",
                        "properties": {
                            "answer": {
                                "anyOf": [
                                    {"type": "string", "enum": QUESTION_OPTIONS},
                                    {"type": "string", "minLength": 1, "maxLength": 4000},
                                ]
                            }
                        },
                        "required": ["answer"],
                        "additionalProperties": False,
                    },
                    metadata={
                        "title": "Question",
                        "purpose": "The agent needs an answer to continue.",
                        "safeSummary": question[:200],
                        "options": [{"value": o, "label": o.capitalize()} for o in QUESTION_OPTIONS],
                        "allowFreeText": True,
                    },
                )
            ],
            checkpoint={"kind": "ask"},
        )

    async def _pipeline(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        name = argument or request.options.pipeline_name or "selling"
        if not isinstance(name, str):
            name = "selling"
        yield s.StepStart(name="pipeline")
        yield s.PipelineEvent(event_type="pipeline_started", data={"pipelineName": name})
        yield s.StepStart(name="plan")
        yield s.TextDelta(text=f"Planning the {name} pipeline.")
        yield s.TextEnd()
        yield s.StepFinish(name="plan")
        yield s.StepStart(name="candidates")
        call_id = f"gen-{request.execution_id[:12]}"
        yield s.ToolStart(tool_call_id=call_id, name="generate_candidates")
        yield s.ToolArgs(tool_call_id=call_id, delta=json.dumps({"pipeline": name}))
        yield s.ToolEnd(tool_call_id=call_id)
        for index, candidate in enumerate(CANDIDATES):
            yield s.PipelineEvent(event_type="candidate_started", data={"candidateId": candidate["id"]})
            yield s.ToolProgress(tool_call_id=call_id, data={"progress": (index + 1) / len(CANDIDATES), "candidateId": candidate["id"]})
            yield s.PipelineEvent(event_type="candidate_completed", data={"candidateId": candidate["id"], "title": candidate["title"]})
        yield s.ToolResult(tool_call_id=call_id, content=json.dumps({"candidates": [c["id"] for c in CANDIDATES]}))
        yield s.PipelineEvent(event_type="stack_progress", data={"stage": "preview", "percent": 50})
        yield s.Artifact(
            data={
                "artifactId": f"preview-{request.execution_id[:8]}",
                "kind": "preview",
                "title": "Candidate comparison",
                "candidates": CANDIDATES,
            }
        )
        yield s.InputRequired(
            interrupts=[
                s.InterruptRequest(
                    id=f"select-{request.execution_id[:12]}",
                    reason="candidate_selection",
                    message="Choose the candidate to deploy.",
                    response_schema={
                        "type": "object",
                        "properties": {"candidateId": {"type": "string", "enum": [c["id"] for c in CANDIDATES]}},
                        "required": ["candidateId"],
                        "additionalProperties": False,
                    },
                    metadata={
                        "title": "Select a candidate",
                        "purpose": "The pipeline deploys the candidate you choose.",
                        "safeSummary": f"{len(CANDIDATES)} candidates for {name}",
                        "options": [{"value": c["id"], "label": c["title"]} for c in CANDIDATES],
                    },
                )
            ],
            checkpoint={"kind": "pipeline", "name": name},
        )

    async def _slow(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        seconds = int(_number(argument, 5, MAX_SECONDS))
        for second in range(seconds):
            yield s.TextDelta(text=f"tick {second + 1} ")
            await asyncio.sleep(1)
        yield s.TextEnd()
        yield s.Completed()

    async def _sleep(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        await asyncio.sleep(_number(argument, 5, MAX_SECONDS))
        yield s.TextDelta(text="Awake.")
        yield s.TextEnd()
        yield s.Completed()

    async def _fail(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Signal]:
        yield s.TextDelta(text="Starting a task that will fail.")
        yield s.Failed(message="The demo task failed on purpose (/fail).")

    async def _flood(self, request: AgentRequest, argument: str) -> AsyncIterator[s.Ready]:
        count = int(_number(argument, 1000, MAX_FLOOD))
        delta = s.TextDelta(text="x ")
        while count > 0:  # made at once, so handed over as a backend hands over what one read brought
            ready: list[s.Signal] = [delta] * min(count, FLOOD_BURST)
            count -= len(ready)
            yield ready
        yield s.TextEnd()
        yield s.Completed()

    async def _resume(self, request: AgentRequest) -> AsyncIterator[s.Signal]:
        checkpoint = request.checkpoint or {}
        answer = request.resume[0]
        kind = checkpoint.get("kind")
        if kind == "tool":
            async for signal in self._resume_tool(checkpoint, request.resume):
                yield signal
        elif kind == "ask":
            text = answer.payload["answer"] if answer.status == "resolved" else None
            yield s.TextDelta(text=f"You answered: {text}" if text else "The question was dismissed.")
            yield s.TextEnd()
            yield s.Completed()
        elif kind == "pipeline":
            async for signal in self._resume_pipeline(request, checkpoint, answer):
                yield signal
        else:
            yield s.Failed(message="Nothing to resume for this execution.", code="EXECUTION_LOST")

    async def _resume_tool(self, checkpoint: dict[str, Any], answers: tuple[ResumeAnswer, ...]) -> AsyncIterator[s.Signal]:
        by_call = {answer.tool_call_id: answer for answer in answers}
        for tool in checkpoint["tools"]:
            answer = by_call.get(tool["toolCallId"])
            allowed = answer is not None and answer.status == "resolved" and answer.payload.get("decision") == "allow_once"
            if allowed:
                self.executions += 1
                result = {"ok": True, "tool": tool["name"], "args": tool["args"], "execution": self.executions}
                yield s.ToolResult(tool_call_id=tool["toolCallId"], content=json.dumps(result))
                yield s.TextDelta(text=f"The tool {tool['name']} ran successfully. ")
            else:
                yield s.TextDelta(text=f"The tool {tool['name']} was not run. ")
        yield s.TextEnd()
        yield s.Completed()

    async def _resume_pipeline(self, request: AgentRequest, checkpoint: dict[str, Any], answer: ResumeAnswer) -> AsyncIterator[s.Signal]:
        if answer.status != "resolved":
            yield s.PipelineEvent(event_type="pipeline_warning", data={"message": "selection cancelled"})
            yield s.StepFinish(name="candidates")
            yield s.StepFinish(name="pipeline")
            yield s.TextDelta(text="The pipeline stopped: no candidate was selected.")
            yield s.TextEnd()
            yield s.Completed()
            return
        chosen = answer.payload["candidateId"]
        yield s.PipelineEvent(event_type="pipeline_resumed", data={"pipelineName": checkpoint["name"]})
        yield s.PipelineEvent(event_type="candidate_selected", data={"candidateId": chosen})
        yield s.StepFinish(name="candidates")
        yield s.StepStart(name="deploy")
        call_id = f"deploy-{request.execution_id[:12]}"
        yield s.ToolStart(tool_call_id=call_id, name="deploy_stack")
        yield s.ToolArgs(tool_call_id=call_id, delta=json.dumps({"candidateId": chosen}))
        yield s.ToolEnd(tool_call_id=call_id)
        for percent in (25, 75, 100):
            yield s.ToolProgress(tool_call_id=call_id, data={"progress": percent / 100})
            yield s.PipelineEvent(event_type="stack_progress", data={"stage": "deploy", "percent": percent})
        yield s.ToolResult(tool_call_id=call_id, content=json.dumps({"deployed": chosen}))
        yield s.StepFinish(name="deploy")
        yield s.PipelineEvent(event_type="pipeline_completed", data={"pipelineName": checkpoint["name"], "candidateId": chosen})
        yield s.StepFinish(name="pipeline")
        yield s.TextDelta(text=f"Deployed {chosen}.")
        yield s.TextEnd()
        yield s.Usage(input_tokens=12, output_tokens=34, model="demo-pipeline", provider="demo")
        yield s.Completed()
