// A fast load client for the benchmarks: streams one /flood run over SSE (fetch) or WebSocket (ws) and
// prints {"events": n, "seconds": s}. Node keeps the client from being the bottleneck of a Python server.
// Usage: node flood_client.mjs sse|ws|a2a BASE_URL COUNT   (a2a: the agent's own JSON-RPC stream, read directly)
import WebSocket from "ws";

const [mode, base, countText] = process.argv.slice(2);
const count = Number(countText);
const body = JSON.stringify({
  threadId: `bench-${Math.random().toString(16).slice(2)}`,
  runId: `run-${Math.random().toString(16).slice(2)}`,
  state: {},
  messages: [{ id: "m", role: "user", content: `/flood ${count}` }],
  tools: [],
  context: [],
  forwardedProps: { iacCode: { schemaVersion: 1, rosInvocationId: "bench", cwd: "/tmp/bench" } },
});

const a2aBody = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "SendStreamingMessage",
  params: { message: { messageId: "bench", role: "ROLE_USER", contextId: "agui-bench", parts: [{ text: `flood ${count}` }] } },
});

async function sse(requestBody = body, extraHeaders = {}) {
  const response = await fetch(`${base}/`, { method: "POST", body: requestBody, headers: { "content-type": "application/json", accept: "text/event-stream", ...extraHeaders } });
  let events = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    // Count SSE records by their "data:" field (LF or CRLF framing alike; JSON keys are quoted, so no false hits).
    for (let i = 4; i < value.length; i++) {
      if (value[i] === 58 && value[i - 1] === 97 && value[i - 2] === 116 && value[i - 3] === 97 && value[i - 4] === 100) events++;
    }
  }
  return events;
}

function ws() {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${base.replace("http", "ws")}/ws`, { perMessageDeflate: false, maxPayload: 0 });
    let events = 0;
    socket.on("open", () => socket.send(body));
    socket.on("message", (data) => {
      events++;
      const head = data.subarray(0, 64).toString();
      if (head.includes("RUN_FINISHED") || head.includes("RUN_ERROR")) {
        socket.close();
        resolve(events);
      }
    });
    socket.on("error", reject);
  });
}

const started = performance.now();
const events = mode === "sse" ? await sse() : mode === "a2a" ? await sse(a2aBody, { "A2A-Version": "1.0" }) : await ws();
process.stdout.write(JSON.stringify({ events, seconds: (performance.now() - started) / 1000 }));
