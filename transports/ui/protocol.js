// AG-UI events to a view model, and the SSE record parser. No DOM here: view.js draws what this computes.
//
// The view model is plain data: transcript items, steps, pipeline entries, usage, pending interrupts, the run
// status, the thread's shared state and its conversation as AG-UI messages (what a plain request sends back).
// `apply(view, event)` changes it and returns the set of parts that changed ("items:<id>", "steps",
// "pipeline", "usage", "pending", "status", "state"), so the view redraws only those.

import { applyPatch } from "./patch.js";

export const SESSION_EVENT = "iac-code.session.v1";
export const PIPELINE_EVENT = "iac-code.pipeline.v1";
export const TOOL_PROGRESS_EVENT = "iac-code.tool-progress.v1";
export const ARTIFACT_EVENT = "iac-code.artifact.v1";

// Pseudo-events the page records in a run's log beside the gateway's: what the user sent, and local failures.
export const USER = "USER";
export const RESUME = "RESUME";
export const LOCAL_ERROR = "LOCAL_ERROR";
export const TOOL_RESULT = "TOOL_RESULT"; // the page ran one of its own tools: {toolCallId, content}

export function emptyView() {
  return {
    items: [], // {id, kind: user|assistant|reasoning|tool|artifact|note|error, ...}
    byId: new Map(),
    steps: [], // {name, state: running|done}
    pipeline: [], // {eventType, details: [[key, text]]}
    usage: null, // text
    pending: [], // interrupts waiting for an answer
    executionId: null,
    running: false,
    status: "Not connected",
    seen: new Set(), // custom events de-duplicated by (name, eventId)
    counter: 0,
    state: {}, // the thread's shared state, as the agent's snapshots and patches leave it
    conversation: [], // AG-UI messages: user, assistant (with toolCalls) and tool
    pendingTools: [], // client tool calls the last run left to the page
  };
}

function message(view, id, role) {
  let found = view.conversation.find((m) => m.id === id);
  if (!found) {
    found = { id, role, content: "" };
    view.conversation.push(found);
  }
  return found;
}

function toolCallOf(view, toolCallId) {
  for (const m of view.conversation) for (const call of m.toolCalls || []) if (call.id === toolCallId) return call;
  return null;
}

function patchState(view, changed, operations) {
  try {
    view.state = applyPatch(view.state, operations);
  } catch (error) {
    addItem(view, changed, { kind: "error", text: `The page's copy of the state is out of step: ${error.message}` });
  }
  changed.add("state");
}

function addItem(view, changed, item) {
  const full = { id: item.id || `local-${++view.counter}`, ...item };
  view.items.push(full);
  view.byId.set(full.id, full);
  changed.add(`items:${full.id}`);
  return full;
}

function itemFor(view, changed, id, kind) {
  const item = view.byId.get(id) || addItem(view, changed, { id, kind, text: "" });
  changed.add(`items:${item.id}`);
  return item;
}

function setStatus(view, changed, status, running) {
  view.status = status;
  view.running = running;
  changed.add("status");
}

/** A short, readable rendering of a value: text as it is, numbers and booleans as text, the rest as compact JSON. */
export function shortText(value, limit = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function pipelineEntry(value) {
  const { eventType, eventId, sequence, ...rest } = value;
  const details = Object.entries(rest)
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([key, v]) => [key, shortText(v)]);
  return { eventType: String(eventType || "event"), details };
}

function applyCustom(view, changed, event) {
  const value = event.value || {};
  if (value.eventId) {
    const key = `${event.name}:${value.eventId}`;
    if (view.seen.has(key)) return;
    view.seen.add(key);
  }
  if (event.name === SESSION_EVENT) {
    view.executionId = value.executionId || null;
    changed.add("status");
  } else if (event.name === PIPELINE_EVENT) {
    view.pipeline.push(pipelineEntry(value));
    changed.add("pipeline");
  } else if (event.name === TOOL_PROGRESS_EVENT) {
    const tool = itemFor(view, changed, value.toolCallId, "tool");
    tool.hasProgress = true;
    if (typeof value.progress === "number") tool.progress = value.progress;
  } else if (event.name === ARTIFACT_EVENT) {
    addItem(view, changed, { kind: "artifact", title: value.title || value.artifactId || "result", data: value });
  }
}

function usageText(usage) {
  if (!usage || !usage.length) return null;
  const total = usage.reduce((sum, u) => sum + (u.totalTokens || 0), 0);
  const parts = usage.map((u) => `${u.model || u.provider || "model"}: in ${u.inputTokens ?? "?"}, out ${u.outputTokens ?? "?"}`);
  return `Tokens: ${total} (${parts.join("; ")})`;
}

function applyFinished(view, changed, event) {
  view.usage = usageText(event.usage);
  changed.add("usage");
  const outcome = event.outcome || { type: "success" };
  view.pending = outcome.type === "interrupt" ? outcome.interrupts || [] : [];
  view.pendingTools = outcome.pendingToolCallIds || [];
  changed.add("pending");
  if (outcome.type === "cancelled") addItem(view, changed, { kind: "note", text: "The run was cancelled.", testid: "cancelled" });
  const status = { interrupt: "Waiting for your answer", cancelled: "Cancelled" }[outcome.type] || "Done";
  setStatus(view, changed, status, false);
}

const HANDLERS = {
  [USER]: (view, changed, event) => {
    addItem(view, changed, { kind: "user", text: event.text });
    if (event.id) view.conversation.push({ id: event.id, role: "user", content: event.text });
    startSending(view, changed);
  },
  [TOOL_RESULT]: (view, changed, event) => {
    const call = toolCallOf(view, event.toolCallId);
    const tool = itemFor(view, changed, event.toolCallId, "tool");
    tool.result = event.content;
    view.conversation.push({ id: `result-${event.toolCallId}`, role: "tool", toolCallId: event.toolCallId, content: event.content });
    view.pendingTools = view.pendingTools.filter((id) => id !== event.toolCallId);
    if (call) tool.name = call.function.name;
  },
  [RESUME]: startSending,
  [LOCAL_ERROR]: (view, changed, event) => {
    addItem(view, changed, { kind: "error", text: event.message });
    setStatus(view, changed, event.status || "Error", false);
  },
  RUN_STARTED: (view, changed) => {
    view.usage = null; // the previous run's token count does not belong to this one
    changed.add("usage");
    setStatus(view, changed, "Running", true);
  },
  TEXT_MESSAGE_START: (view, changed, e) => {
    itemFor(view, changed, e.messageId, "assistant");
    message(view, e.messageId, e.role || "assistant");
  },
  TEXT_MESSAGE_CONTENT: (view, changed, e) => {
    itemFor(view, changed, e.messageId, "assistant").text += e.delta;
    message(view, e.messageId, "assistant").content += e.delta;
  },
  REASONING_START: (view, changed, e) => itemFor(view, changed, e.messageId, "reasoning"),
  REASONING_MESSAGE_CONTENT: (view, changed, e) => {
    itemFor(view, changed, e.messageId, "reasoning").text += e.delta;
  },
  TOOL_CALL_START: (view, changed, e) => {
    const tool = itemFor(view, changed, e.toolCallId, "tool");
    tool.name = e.toolCallName;
    tool.args = tool.args || "";
    const owner = message(view, e.parentMessageId || `calls-${e.toolCallId}`, "assistant");
    owner.toolCalls = [...(owner.toolCalls || []), { id: e.toolCallId, type: "function", function: { name: e.toolCallName, arguments: "" } }];
  },
  TOOL_CALL_ARGS: (view, changed, e) => {
    const tool = itemFor(view, changed, e.toolCallId, "tool");
    tool.args = (tool.args || "") + e.delta;
    const call = toolCallOf(view, e.toolCallId);
    if (call) call.function.arguments += e.delta;
  },
  TOOL_CALL_RESULT: (view, changed, e) => {
    itemFor(view, changed, e.toolCallId, "tool").result = e.content;
    view.conversation.push({ id: e.messageId, role: "tool", toolCallId: e.toolCallId, content: e.content });
  },
  STATE_SNAPSHOT: (view, changed, e) => {
    view.state = structuredClone(e.snapshot);
    changed.add("state");
  },
  STATE_DELTA: (view, changed, e) => patchState(view, changed, e.delta),
  MESSAGES_SNAPSHOT: (view, changed, e) => {
    view.conversation = structuredClone(e.messages);
    for (const m of e.messages) {
      if ((m.role === "assistant" || m.role === "user") && typeof m.content === "string" && !view.byId.has(m.id)) {
        addItem(view, changed, { id: m.id, kind: m.role, text: m.content });
      }
    }
  },
  ACTIVITY_DELTA: (view, changed, e) => {
    const item = itemFor(view, changed, e.messageId, "activity");
    try {
      item.content = applyPatch(item.content || {}, e.patch);
    } catch {
      return; // a later snapshot sets it right
    }
    item.text = `${e.activityType}: ${shortText(item.content, 200)}`;
  },
  SUBAGENT_STARTED: (view, changed, e) => addItem(view, changed, { kind: "note", text: `Sub-agent ${e.name} started.` }),
  SUBAGENT_FINISHED: (view, changed) => addItem(view, changed, { kind: "note", text: "Sub-agent finished." }),
  SUBAGENT_ERROR: (view, changed, e) => addItem(view, changed, { kind: "error", text: `Sub-agent failed: ${e.message}` }),
  STEP_STARTED: (view, changed, e) => setStep(view, changed, e.stepName, "running"),
  STEP_FINISHED: (view, changed, e) => setStep(view, changed, e.stepName, "done"),
  CUSTOM: applyCustom,
  ACTIVITY_SNAPSHOT: (view, changed, e) => {
    const item = itemFor(view, changed, e.messageId, "activity");
    item.content = structuredClone(e.content);
    item.text = `${e.activityType}: ${shortText(e.content, 200)}`;
  },
  RUN_FINISHED: applyFinished,
  RUN_ERROR: (view, changed, e) => {
    addItem(view, changed, { kind: "error", text: `${e.code || "ERROR"}: ${e.message}` });
    setStatus(view, changed, "Error", false);
  },
};

function startSending(view, changed) {
  view.pending = [];
  view.executionId = null;
  changed.add("pending");
  setStatus(view, changed, "Sending", true);
}

function setStep(view, changed, name, state) {
  const step = view.steps.find((s) => s.name === name);
  if (step) step.state = state;
  else view.steps.push({ name, state });
  changed.add("steps");
}

/** Apply one event (gateway or pseudo) to the view; returns what changed. Unknown events change nothing. */
export function apply(view, event, changed = new Set()) {
  const handler = HANDLERS[event.type];
  if (handler) handler(view, changed, event);
  return changed;
}

/** Parses a text/event-stream into [event, id] pairs: records split on a blank line, `data:` lines joined, the
 * record's `id:` kept with its event (null when it has none), comments (heartbeats) and `event:` set aside.
 * Accepts \n and \r\n line ends. */
export class SseParser {
  constructor() {
    this.buffer = "";
  }

  push(text) {
    this.buffer += text.replace(/\r\n/g, "\n");
    const events = [];
    let cut;
    while ((cut = this.buffer.indexOf("\n\n")) >= 0) {
      const record = this.buffer.slice(0, cut);
      this.buffer = this.buffer.slice(cut + 2);
      const data = [];
      let id = null;
      for (const line of record.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (data.length) events.push([JSON.parse(data.join("\n")), id]);
    }
    return events;
  }
}

/** A run's events for storage: consecutive deltas of one message, reasoning or tool-argument stream are merged. */
export function compact(events) {
  const out = [];
  for (const event of events) {
    const last = out[out.length - 1];
    const key = deltaKey(event);
    if (key && last && deltaKey(last) === key) out[out.length - 1] = { ...last, delta: last.delta + event.delta };
    else out.push(event);
  }
  return out;
}

function deltaKey(event) {
  if (event.type === "TEXT_MESSAGE_CONTENT" || event.type === "REASONING_MESSAGE_CONTENT") return `${event.type}:${event.messageId}`;
  if (event.type === "TOOL_CALL_ARGS") return `${event.type}:${event.toolCallId}`;
  return null;
}
