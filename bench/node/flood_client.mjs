// A fast load client for the benchmarks: streams one /flood run over SSE (fetch) or WebSocket (ws) and
// prints {"events": n, "seconds": s}. Node keeps the client from being the bottleneck of a Python server.
// Usage: node flood_client.mjs sse|ws|a2a BASE_URL COUNT   (a2a: the agent's own JSON-RPC stream, read directly)
import WebSocket from "ws";
import { countRecords, floodBody } from "./flood_run.mjs";

const [mode, base, countText] = process.argv.slice(2);
const count = Number(countText);
const body = floodBody(count);

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
    events += countRecords(value);
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
