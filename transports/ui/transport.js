// How the page reaches the gateway: one multiplexed WebSocket (tickets when a token is set, reconnect with
// backoff), SSE over fetch, reattach (both ways) and the cancel extension. Every run asks for a grace window, so a
// dropped connection or a reload does not end it: the page attaches again from the last event id it saw.
// Events go to the caller's `onEvent(event, eventId)`; nothing here touches the DOM.

import { SseParser } from "./protocol.js";

export const GRACE_SECONDS = 60; // how long the gateway keeps a run going while the page is away
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

export function authHeaders(token) {
  return token ? { authorization: `Bearer ${token}` } : {};
}

async function ticketQuery(token) {
  if (!token) return "";
  const response = await fetch("/ws/tickets", { method: "POST", headers: authHeaders(token) });
  if (!response.ok) throw new Error(`ticket refused (${response.status})`);
  return `?ticket=${encodeURIComponent((await response.json()).ticket)}`;
}

/** One WebSocket to the gateway (multiplexed, `agui-mux.v1`), opened on demand and reopened after a drop. */
export class SocketLink {
  constructor({ token, onEvent, onStatus, onDrop, onReopen, wanted }) {
    this.token = token; // () => the current bearer token
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onDrop = onDrop; // the socket closed
    this.onReopen = onReopen; // the socket is back after a drop (attach to the run in flight)
    this.wanted = wanted; // () => whether the page still wants a socket (reconnect only then)
    this.socket = null;
    this.ready = null;
    this.delay = 500;
  }

  async open() {
    if (this.ready) return this.ready;
    this.ready = this.#connect();
    try {
      return await this.ready;
    } catch (error) {
      this.ready = null;
      throw error;
    }
  }

  async #connect() {
    const query = await ticketQuery(this.token());
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws${query}`, ["agui-mux.v1"]);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error("WebSocket refused (if the gateway requires a token, set it in Settings)"));
    });
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      this.onEvent(frame.event, frame.eventId ?? null);
    };
    socket.onclose = () => {
      this.socket = null;
      this.ready = null;
      this.onDrop();
      if (this.wanted()) this.#reconnect();
    };
    this.socket = socket;
    this.delay = 500;
    this.onStatus("Connected");
    return socket;
  }

  #reconnect() {
    // After a network drop: try again with jittered backoff until the gateway answers (or SSE is chosen).
    this.onStatus("Reconnecting…");
    const wait = this.delay * (0.8 + Math.random() * 0.4);
    this.delay = Math.min(this.delay * 2, 5000);
    setTimeout(() => {
      if (!this.wanted() || this.socket) return;
      this.open().then(
        () => {
          this.onStatus("Connected");
          this.onReopen();
        },
        () => this.#reconnect(),
      );
    }, wait);
  }

  async run(input) {
    const frame = { op: "run", id: input.runId, input, reattachGraceSeconds: GRACE_SECONDS };
    (await this.open()).send(JSON.stringify(frame));
  }

  async attach({ threadId, runId, rosInvocationId }, lastEventId) {
    const frame = { op: "attach", id: runId, threadId, runId, rosInvocationId, lastEventId: lastEventId || "" };
    (await this.open()).send(JSON.stringify(frame));
  }

  close() {
    this.socket?.close();
  }
}

/** One run over SSE (`POST /`), asking for a grace window; resolves to true once its terminal event came (false:
 * the connection dropped first). A JSON error before the stream becomes a RUN_ERROR event. */
export async function runSse(input, token, onEvent) {
  return readSse(
    fetch("/", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "AGUI-Reattach-Grace": String(GRACE_SECONDS), ...authHeaders(token) },
      body: JSON.stringify(input),
    }),
    onEvent,
  );
}

/** Follow a run again after `lastEventId` (`GET /threads/{t}/runs/{r}/events`); resolves like runSse. */
export async function attachSse({ threadId, runId, rosInvocationId }, lastEventId, token, onEvent) {
  const path = `/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/events`;
  const headers = { accept: "text/event-stream", ...authHeaders(token), ...(lastEventId ? { "last-event-id": lastEventId } : {}) };
  return readSse(fetch(`${path}?rosInvocationId=${encodeURIComponent(rosInvocationId)}`, { headers }), onEvent);
}

async function readSse(request, onEvent) {
  let response;
  try {
    response = await request;
  } catch {
    return false; // the gateway is unreachable: the caller tries again
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    onEvent({ type: "RUN_ERROR", code: body.error?.code || String(response.status), message: body.error?.message || response.statusText }, null);
    return true;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const [event, id] of parser.push(decoder.decode(value, { stream: true }))) {
        onEvent(event, id);
        ended = ended || TERMINAL.has(event.type);
      }
    }
  } catch {
    return ended; // the connection dropped mid-stream
  }
  return ended;
}

/** The cancel extension; resolves to the HTTP status. */
export async function cancelExecution({ executionId, threadId, rosInvocationId, token }) {
  const response = await fetch(`/extensions/iac-code/v1/executions/${encodeURIComponent(executionId)}/cancel`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders(token) },
    body: JSON.stringify({ threadId, rosInvocationId }),
  });
  return response.status;
}
