// Events per second through an @ag-ui/client agent: HttpAgent or the gateway's WebSocketAgent, C runs at once.
// Usage (from tests/node/.lib, where bench/agents.py copies it): node agent_rate.mjs http|ws <url> <events> <C>
import { HttpAgent } from "@ag-ui/client";
import { WebSocket } from "ws";

import { WebSocketAgent } from "./ws-agent.js";

const [kind, url, total, concurrency] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const iacCode = { schemaVersion: 1, rosInvocationId: "bench", cwd: "/tmp/bench" };

function agent(index) {
  const threadId = `bench-${kind}-${Date.now()}-${index}-${Math.random().toString(36).slice(2)}`;
  if (kind === "http") return new HttpAgent({ url, threadId });
  return new WebSocketAgent({ url: url.replace(/^http/, "ws") + "/ws", threadId, WebSocket });
}

async function one(index, count) {
  const runner = agent(index);
  runner.addMessage({ id: `m-${index}`, role: "user", content: `/flood ${count}` });
  let events = 0;
  await runner.runAgent({ forwardedProps: { iacCode }, tools: [], context: [] }, { onEvent: () => events++ });
  return events;
}

await one(-1, 500); // warm-up (and, for WebSocketAgent, the shared socket)
const started = performance.now();
const counts = await Promise.all(Array.from({ length: concurrency }, (_, i) => one(i, Math.floor(total / concurrency))));
const seconds = (performance.now() - started) / 1000;
process.stdout.write(JSON.stringify({ events: counts.reduce((a, b) => a + b, 0), seconds }));
process.exit(0);
