// Drives the gateway with the reference TypeScript client (@ag-ui/client HttpAgent, or the gateway's
// WebSocketAgent built on it) and prints a JSON report.
// Input (argv[2]): {"url", "threadId", "kind"?: "http"|"ws", "token"?, "steps": [{"message"?, "forwardedProps",
// "answer"?: {"status","payload"?}, "abortAfter"?: <events>}]}
// Each step is one runAgent call; a step with "answer" resumes every pending interrupt with it; "abortAfter"
// calls abortRun() once that many events arrived. "parallel": N runs the first step on N agents at once (all
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
  if (config.kind !== "ws") return new HttpAgent({ url: config.url, threadId, headers: config.headers ?? {} });
  const { WebSocketAgent } = await import("./.lib/ws-agent.js"); // the served module, copied beside node_modules
  const { WebSocket } = await import("ws");
  const url = config.url.replace(/^http/, "ws") + "/ws";
  return new WebSocketAgent({ url, threadId, WebSocket, token: config.token, graceSeconds: 30 });
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
for (const step of config.steps) {
  const events = [];
  const run = { events, error: null };
  if (step.message) {
    agent.addMessage({ id: `m-${report.runs.length}-${Date.now()}`, role: "user", content: step.message });
  }
  // No "forwardedProps" in a step: the client sends what HttpAgent sends by itself (a plain AG-UI request).
  const params = "forwardedProps" in step ? { forwardedProps: step.forwardedProps, tools: [], context: [] } : {};
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
  report.runs.push(run);
}
report.messages = agent.messages.map((m) => ({ role: m.role, content: m.content ?? null, toolCalls: m.toolCalls?.length ?? 0 }));
process.stdout.write(JSON.stringify(report));
process.exit(0); // a WebSocketAgent's shared socket stays open for the next run
