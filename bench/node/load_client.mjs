// Short-run load for bench/flood.py: CONCURRENCY workers each post /flood COUNT runs over SSE one after another
// until RUNS runs were started; prints {"runs", "failures", "events", "seconds", "ttfe": {p50, p99} (ms)}.
// The time to first event is from sending the request to the first "data:" bytes of the response.
// Usage: node load_client.mjs BASE_URL CONCURRENCY COUNT RUNS
import { countRecords, floodBody } from "./flood_run.mjs";

const [base, concurrencyText, countText, runsText] = process.argv.slice(2);
const [concurrency, count, runs] = [Number(concurrencyText), Number(countText), Number(runsText)];

const firsts = [];
let started = 0, failures = 0, events = 0;

async function one() {
  const sent = performance.now();
  let response;
  try {
    response = await fetch(`${base}/`, { method: "POST", body: floodBody(count), headers: { "content-type": "application/json", accept: "text/event-stream" } });
  } catch {
    failures++;
    return;
  }
  if (response.status !== 200) {
    failures++;
    await response.arrayBuffer().catch(() => {});
    return;
  }
  const reader = response.body.getReader();
  let seen = 0, first = null, last = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const found = countRecords(value);
    if (found && first === null) first = performance.now() - sent;
    seen += found;
    last = Buffer.from(value.subarray(Math.max(0, value.length - 200))).toString();
  }
  if (first === null || !last.includes("RUN_FINISHED") || seen < count) {
    failures++;
    return;
  }
  firsts.push(first);
  events += seen;
}

async function worker() {
  while (started < runs) {
    started++;
    await one();
  }
}

const begin = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (performance.now() - begin) / 1000;
firsts.sort((a, b) => a - b);
const at = (q) => (firsts.length ? firsts[Math.min(firsts.length - 1, Math.floor(q * firsts.length))] : null);
process.stdout.write(JSON.stringify({ runs: started, failures, events, seconds, ttfe: { p50: at(0.5), p99: at(0.99) } }));
