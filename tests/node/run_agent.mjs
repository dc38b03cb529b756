// Drives the gateway with the reference TypeScript client (@ag-ui/client HttpAgent, or the gateway's
// WebSocketAgent built on it) and prints a JSON report.
// Input (argv[2]): {"url", "threadId", "kind"?: "http"|"ws", "agent"?: the gateway's agent (ws), "token"?, "initialState"?, "stableIds"?, "steps": [{"message"?,
// "forwardedProps", "tools"?, "toolResult"?, "answer"?: {"status","payload"?}, "abortAfter"?: <events>}]}
// Each step is one runAgent call; a step with "answer" resumes every pending interrupt with it; "tools" declares
// client tools; "url" sends this step's run to another URL (HttpAgent: another replica); "toolResult" adds a `tool` message with that content for each tool call the previous run left
// pending (and no user message); "abortAfter" calls abortRun() once that many events arrived; "connect" joins
// the thread with connectAgent() instead of running (with "fresh", on a new agent: a page that was reloaded). "parallel": N runs the first step on N agents at once (all
// WebSocketAgents of one URL share one socket); "metricsUrl": report the gateway's open WebSocket count then.
import { HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

// The HttpAgent subclass docs/reattach.md shows for SSE apps: connect() joins the thread.
class JoiningHttpAgent extends HttpAgent {
  connect(input) {
    const url = new URL(`/threads/${encodeURIComponent(input.threadId)}/events`, this.url);
    const joined = async () => {
      const response = await fetch(url, { headers: { accept: "text/event-stream", ...this.headers } });
      // 204: the thread has no retained run. An empty stream says the same to the client.
      return response.status === 204 ? new Response("", { headers: { "content-type": "text/event-stream" } }) : response;
    };
    return transformHttpEventStream(runHttpRequest(joined));
  }
}

const config = JSON.parse(process.argv[2]);
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(`${level}: ${args.map(String).join(" ")}`);
    original(...args);
  };
}

async function makeAgent(threadId = config.threadId) {
  const initialState = config.initialState ?? {};
  if (config.kind !== "ws") return new JoiningHttpAgent({ url: config.url, threadId, headers: config.headers ?? {}, initialState });
  const { WebSocketAgent } = await import("./.lib/ws-agent.js"); // the served module, copied beside node_modules
  const { WebSocket } = await import("ws");
  const url = config.url.replace(/^http/, "ws") + "/ws";
  return new WebSocketAgent({ url, threadId, WebSocket, token: config.token, graceSeconds: 30, initialState, agent: config.agent });
}

if (config.parallel) {
  const agents = await Promise.all(Array.from({ length: config.parallel }, (_, i) => makeAgent(`${config.threadId}-${i}`)));
  const runs = await Promise.all(
    agents.map(async (agent, i) => {
      const events = [];
      agent.addMessage({ id: `m-${i}`, role: "user", content: config.steps[0].message });
      let error = null;
      try {
        await agent.runAgent({ forwardedProps: config.steps[0].forwardedProps, tools: [], context: [] }, { onEvent: ({ event }) => events.push(event) });
      } catch (err) {
        error = String(err?.message ?? err);
      }
      return { events, error };
    }),
  );
  let sockets = null;
  if (config.metricsUrl) {
    const text = await (await fetch(config.metricsUrl)).text();
    sockets = Number(/agui_connections_open\{kind="websocket"\} ([0-9.]+)/.exec(text)?.[1]);
  }
  await new Promise((done) => process.stdout.write(JSON.stringify({ runs, warnings, sockets }), done));
  process.exit(0);
}

let agent = await makeAgent();
const report = { runs: [], warnings };
let pendingToolCalls = [];
for (const step of config.steps) {
  const events = [];
  const run = { events, error: null };
  if (step.url && config.kind !== "ws") agent.url = step.url;
  if (step.message) {
    // "stableIds": the same ids on every drive of the same steps (a differential run compares two of them).
    const id = config.stableIds ? `m-${report.runs.length}` : `m-${report.runs.length}-${Date.now()}`;
    agent.addMessage({ id, role: "user", content: step.message });
  }
  if ("toolResult" in step) {
    for (const id of pendingToolCalls) agent.addMessage({ id: `result-${id}`, role: "tool", toolCallId: id, content: step.toolResult });
  }
  // No "forwardedProps" in a step: the client sends what HttpAgent sends by itself (a plain AG-UI request).
  const params = "forwardedProps" in step ? { forwardedProps: step.forwardedProps, tools: [], context: [] } : {};
  if (step.tools) params.tools = step.tools;
  if (step.answer) {
    const answers = {};
    for (const interrupt of agent.pendingInterrupts) answers[interrupt.id] = step.answer;
    params.resume = buildResumeArray(agent.pendingInterrupts, answers);
  }
  if (step.connect) {
    // The client that stayed, as it ends before the join: a joining client must end the same.
    report.stayed = { messages: structuredClone(agent.messages), state: structuredClone(agent.state) };
    if (step.fresh) agent = await makeAgent();
    try {
      await agent.connectAgent({}, { onEvent: ({ event }) => events.push(event) });
    } catch (err) {
      run.error = String(err?.message ?? err);
    }
    run.state = structuredClone(agent.state);
    run.interrupts = structuredClone(agent.pendingInterrupts);
    report.runs.push(run);
    continue;
  }
  try {
    await agent.runAgent(params, {
      onEvent({ event }) {
        events.push(event);
        if (step.abortAfter && events.length === step.abortAfter) setTimeout(() => agent.abortRun(), 0);
      },
    });
  } catch (err) {
    run.error = String(err?.message ?? err);
  }
  run.pendingInterrupts = agent.pendingInterrupts.map((i) => i.id);
  run.interrupts = structuredClone(agent.pendingInterrupts); // whole, as the client holds them
  const finished = events.findLast((e) => e.type === "RUN_FINISHED");
  run.pendingToolCallIds = finished?.outcome?.pendingToolCallIds ?? [];
  // An agent that does not say which calls are the client's (ag-ui-langgraph): the calls with no result.
  const resulted = new Set(events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => e.toolCallId));
  const unresolved = events.filter((e) => e.type === "TOOL_CALL_START" && !resulted.has(e.toolCallId)).map((e) => e.toolCallId);
  pendingToolCalls = finished?.outcome?.pendingToolCallIds ?? unresolved;
  run.state = structuredClone(agent.state);
  report.runs.push(run);
}
report.messages = agent.messages.map((m) => ({
  role: m.role,
  content: m.content ?? null,
  toolCalls: m.toolCalls?.length ?? 0,
  ...(m.activityType ? { activityType: m.activityType } : {}),
  ...(m.subagentRunId ? { subagentRunId: m.subagentRunId } : {}),
}));
report.state = agent.state;
// The client's whole end state, as its own state machine left it: every message with every field (ids, encrypted
// values, tool calls), for a differential comparison.
report.endState = { messages: structuredClone(agent.messages), state: structuredClone(agent.state) };
// Exit once the report is written (a pipe takes 64 KiB at a time); a WebSocketAgent's shared socket stays open.
await new Promise((done) => process.stdout.write(JSON.stringify(report), done));
process.exit(0);
