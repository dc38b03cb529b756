// Drives the gateway with the reference TypeScript client (@ag-ui/client HttpAgent) and prints a JSON report.
// Input (argv[2]): {"url", "threadId", "steps": [{"message"?, "forwardedProps", "answer"?: {"status","payload"?}}]}
// Each step is one runAgent call; a step with "answer" resumes every pending interrupt with it.
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

const agent = new HttpAgent({ url: config.url, threadId: config.threadId, headers: config.headers ?? {} });
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
