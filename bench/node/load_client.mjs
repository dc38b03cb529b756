// Short-run load for bench/flood.py: CONCURRENCY workers each post /flood COUNT runs over SSE one after another,
// each on its own keep-alive connection, until RUNS runs were started; prints
// {"runs", "failures", "events", "seconds", "ttfe": {p50, p99} (ms)}.
// The time to first event is from writing the request to the first "data:" bytes of the response.
// HTTP/1.1 is spoken on raw sockets (request bytes written once, the chunked body decoded in place): fetch costs
// about 1.3 ms of CPU a request, which made this client, not the server, the limit at C=200.
// Usage: node load_client.mjs BASE_URL CONCURRENCY COUNT RUNS
import net from "node:net";
import { floodBody } from "./flood_run.mjs";

const [base, concurrencyText, countText, runsText] = process.argv.slice(2);
const [concurrency, count, runs] = [Number(concurrencyText), Number(countText), Number(runsText)];
const { hostname, port, pathname } = new URL(base); // the run route: `/` unless BASE_URL names another

const firsts = [];
let started = 0, failures = 0, events = 0;
const DATA = Buffer.from("data:");
const HEAD_END = Buffer.from("\r\n\r\n");

function request() {
  const body = Buffer.from(floodBody(count));
  const head = `POST ${pathname} HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: ${body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

// "data:" occurrences in `chunk`, counting one that straddles the previous chunk (its last 4 bytes in `carry`).
function countData(carry, chunk) {
  const joined = carry.length ? Buffer.concat([carry, chunk]) : chunk;
  let found = 0;
  for (let at = joined.indexOf(DATA); at >= 0; at = joined.indexOf(DATA, at + DATA.length)) found++;
  return [found, joined.subarray(Math.max(0, joined.length - 4))];
}

// One response read off the socket: resolves {ok, records, first, close} when it has ended.
class Response {
  constructor(sent, done) {
    this.sent = sent; this.done = done;
    this.buffer = Buffer.alloc(0); this.head = null; this.chunked = false; this.left = 0; this.close = false;
    this.state = "size";
    this.records = 0; this.first = null; this.carry = Buffer.alloc(0); this.tail = "";
  }

  feed(data) {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, data]) : data;
    if (this.head === null) {
      const end = this.buffer.indexOf(HEAD_END);
      if (end < 0) return;
      this.head = this.buffer.subarray(0, end).toString("latin1").toLowerCase();
      this.buffer = this.buffer.subarray(end + 4);
      this.status = Number(this.head.slice(9, 12));
      this.chunked = this.head.includes("transfer-encoding: chunked");
      this.close = this.head.includes("connection: close");
      const length = /content-length: (\d+)/.exec(this.head);
      this.left = this.chunked ? 0 : length ? Number(length[1]) : 0;
    }
    if (!this.chunked) {
      const taken = Math.min(this.left, this.buffer.length);
      this.body(this.buffer.subarray(0, taken));
      this.left -= taken; this.buffer = this.buffer.subarray(taken);
      if (this.left === 0) this.finish();
      return;
    }
    for (;;) {
      if (this.state === "size") {
        const end = this.buffer.indexOf("\r\n");
        if (end < 0) return;
        const size = parseInt(this.buffer.subarray(0, end).toString("latin1"), 16);
        if (size === 0) {
          if (this.buffer.length < end + 4) return;  // the last chunk and the empty trailer
          this.finish();
          return;
        }
        this.buffer = this.buffer.subarray(end + 2);
        this.left = size;
        this.state = "data";
      }
      if (this.state === "data") {
        const taken = Math.min(this.left, this.buffer.length);
        if (taken > 0) this.body(this.buffer.subarray(0, taken));
        this.left -= taken;
        this.buffer = this.buffer.subarray(taken);
        if (this.left > 0) return;
        this.state = "crlf";
      }
      if (this.buffer.length < 2) return;  // the CRLF after the chunk's data
      this.buffer = this.buffer.subarray(2);
      this.state = "size";
    }
  }

  body(data) {
    const [found, carry] = countData(this.carry, data);
    this.carry = carry;
    if (found && this.first === null) this.first = performance.now() - this.sent;
    this.records += found;
    this.tail = (this.tail + data.toString("latin1")).slice(-200);
  }

  finish() {
    const ok = this.status === 200 && this.first !== null && this.tail.includes("RUN_FINISHED") && this.records >= count;
    this.done({ ok, records: this.records, first: this.first, close: this.close });
  }
}

function connect() {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port), noDelay: true }, () => resolve(socket));
    socket.once("error", reject);
  });
}

async function worker() {
  let socket = null, current = null;
  const onData = (data) => { if (current !== null) current.feed(data); };
  while (started < runs) {
    started++;
    try {
      if (socket === null) {
        socket = await connect();
        socket.on("data", onData);
        socket.on("error", () => {});
      }
      const result = await new Promise((resolve) => {
        const open = socket;
        const lost = () => resolve({ ok: false, close: true });
        open.once("close", lost);
        current = new Response(performance.now(), (value) => { open.off("close", lost); resolve(value); });
        open.write(request());
      });
      current = null;
      if (result.ok) { firsts.push(result.first); events += result.records; } else failures++;
      if (result.close) { socket.destroy(); socket = null; }
    } catch {
      failures++;
      if (socket) socket.destroy();
      socket = null;
    }
  }
  if (socket) socket.end();
}

const begin = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (performance.now() - begin) / 1000;
firsts.sort((a, b) => a - b);
const at = (q) => (firsts.length ? firsts[Math.min(firsts.length - 1, Math.floor(q * firsts.length))] : null);
process.stdout.write(JSON.stringify({ runs: started, failures, events, seconds, ttfe: { p50: at(0.5), p99: at(0.99) } }));
