// Drives the gateway with the reference TypeScript client (@ag-ui/client HttpAgent, or the gateway's
// WebSocketAgent built on it) and prints a JSON report.
// Input (argv[2]): {"url", "threadId", "kind"?: "http"|"ws", "token"?, "initialState"?, "steps": [{"message"?,
// "forwardedProps", "tools"?, "toolResult"?, "answer"?: {"status","payload"?}, "abortAfter"?: <events>}]}
// Each step is one runAgent call; a step with "answer" resumes every pending interrupt with it; "tools" declares
// client tools; "toolResult" adds a `tool` message with that content for each tool call the previous run left
// pending (and no user message); "abortAfter" calls abortRun() once that many events arrived. "parallel": N runs the first step on N agents at once (all
// WebSocketAgents of one URL share one socket); "metricsUrl": report the gateway's open WebSocket count then.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

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
  if (config.kind !== "ws") return new HttpAgent({ url: config.url, threadId, headers: config.headers ?? {}, initialState });
  const { WebSocketAgent } = await import("./.lib/ws-agent.js"); // the served module, copied beside node_modules
  const { WebSocket } = await import("ws");
  const url = config.url.replace(/^http/, "ws") + "/ws";
  return new WebSocketAgent({ url, threadId, WebSocket, token: config.token, graceSeconds: 30, initialState });
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
  process.stdout.write(JSON.stringify({ runs, warnings, sockets }));
  process.exit(0);
}

const agent = await makeAgent();
const report = { runs: [], warnings };
let pendingToolCalls = [];
for (const step of config.steps) {
  const events = [];
  const run = { events, error: null };
  if (step.message) {
    agent.addMessage({ id: `m-${report.runs.length}-${Date.now()}`, role: "user", content: step.message });
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
  const finished = events.findLast((e) => e.type === "RUN_FINISHED");
  pendingToolCalls = finished?.outcome?.pendingToolCallIds ?? [];
  run.pendingToolCallIds = pendingToolCalls;
  run.state = structuredClone(agent.state);
  report.runs.push(run);
}
report.messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  content: m.content ?? null,
  toolCalls: m.toolCalls?.length ?? 0,
  ...(m.activityType ? { activityType: m.activityType } : {}),
  ...(m.subagentRunId ? { subagentRunId: m.subagentRunId } : {}),
}));
report.state = agent.state;
process.stdout.write(JSON.stringify(report));
process.exit(0); // a WebSocketAgent's shared socket stays open for the next run
