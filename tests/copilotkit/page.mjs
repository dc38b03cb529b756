// The test page: CopilotKit's framework-free core (@copilotkit/core 1.75) talking to its runtime (its own Node
// runtime, or the gateway's CopilotKit endpoints), with a frontend
// tool the agent calls (`confirm`) and a human-in-the-loop one (`approve`, answered by the test through
// `harness.decide`). window.harness is what the test drives; every CopilotKit error and console message is kept.
import { CopilotKitCore } from "@copilotkit/core";
import { z } from "zod";
import { confirmTool, keptConsole } from "./shared.mjs";

const errors = [];
const consoleLines = keptConsole();
let decide = null;
const calls = [];

// `?runtime=<url>`: CopilotKit's runtime elsewhere (the gateway itself, on another origin); else its Node runtime here.
// `&transport=single`: its single-route form (one POST with CopilotKit's envelope).
const asked = new URLSearchParams(location.search);
const core = new CopilotKitCore({
  runtimeUrl: asked.get("runtime") || "/api/copilotkit",
  ...(asked.get("transport") ? { runtimeTransport: asked.get("transport") } : {}),
});
core.subscribe({ onError: ({ code, error }) => errors.push(`${code}: ${error?.message ?? error}`) });
core.addTool(confirmTool(calls));
core.addTool({
  name: "approve",
  type: "human-in-the-loop",
  description: "Ask the user to approve",
  parameters: z.object({ plan: z.string() }),
  handler: (args) => {
    calls.push({ name: "approve", args });
    return new Promise((resolve) => {
      decide = resolve;
    });
  },
});

function connected() {
  return new Promise((resolve) => {
    if (core.runtimeConnectionStatus === "connected") return resolve();
    const subscription = core.subscribe({
      onRuntimeConnectionStatusChanged: ({ status }) => {
        if (status === "connected") {
          subscription.unsubscribe();
          resolve();
        }
      },
    });
  });
}

function report(agent) {
  return {
    messages: structuredClone(agent.messages),
    state: structuredClone(agent.state),
    errors: [...errors],
    console: [...consoleLines],
    calls: [...calls],
  };
}

window.harness = {
  // The agents CopilotKit learnt from the runtime's /info.
  async agents() {
    await connected();
    return Object.keys(core.agents).sort();
  },
  async send(text, agentId = "default") {
    await connected();
    const agent = core.getAgent(agentId);
    agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    try {
      await core.runAgent({ agent });
    } catch (error) {
      errors.push(`runAgent threw: ${error?.message ?? error}`);
    }
    return report(agent);
  },
  // Start a run and leave it going: `stop()` ends it as CopilotKit's stop button does.
  async start(text) {
    await connected();
    const agent = core.getAgent("default");
    agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    window.harness.running = core.runAgent({ agent }).catch((error) => errors.push(`runAgent threw: ${error?.message ?? error}`));
    const seen = () => agent.messages.some((m) => m.role === "assistant" && String(m.content ?? "").includes("tick"));
    while (!seen()) await new Promise((resolve) => setTimeout(resolve, 20));
    return agent.threadId;
  },
  async stop() {
    const agent = core.getAgent("default");
    core.stopAgent({ agent });
    await window.harness.running;
    return report(agent);
  },
  // A page opened on a thread it has not seen (a reload, a second tab): CopilotKit joins it.
  async join(threadId, agentId = "default") {
    await connected();
    const agent = core.getAgent(agentId);
    agent.threadId = threadId;
    try {
      await core.connectAgent({ agent });
    } catch (error) {
      errors.push(`connectAgent threw: ${error?.message ?? error}`);
    }
    return report(agent);
  },
  waitingForDecision: () => decide !== null,
  decide(answer) {
    decide(answer);
    decide = null;
  },
  report: (agentId = "default") => report(core.getAgent(agentId)),
  threadOf: (agentId = "default") => core.getAgent(agentId).threadId,
};
document.body.dataset.ready = "true";
