// How the page reaches the gateway: one WebSocket (tickets when a token is set, reconnect with backoff), SSE
// over fetch, and the cancel extension. Events go to the caller's `onEvent`; nothing here touches the DOM.

import { SseParser } from "./protocol.js";

export function authHeaders(token) {
  return token ? { authorization: `Bearer ${token}` } : {};
}

async function ticketQuery(token) {
  if (!token) return "";
  const response = await fetch("/ws/tickets", { method: "POST", headers: authHeaders(token) });
  if (!response.ok) throw new Error(`ticket refused (${response.status})`);
  return `?ticket=${encodeURIComponent((await response.json()).ticket)}`;
}

/** One WebSocket to the gateway (base mode, `agui.v1`), opened on demand and reopened after a drop. */
export class SocketLink {
  constructor({ token, onEvent, onStatus, onDrop, wanted }) {
    this.token = token; // () => the current bearer token
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onDrop = onDrop; // the socket closed (a run in flight is lost)
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
    const socket = new WebSocket(`${scheme}://${location.host}/ws${query}`, ["agui.v1"]);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error("WebSocket refused (if the gateway requires a token, set it in Settings)"));
    });
    socket.onmessage = (message) => this.onEvent(JSON.parse(message.data));
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
        () => this.onStatus("Connected"),
        () => this.#reconnect(),
      );
    }, wait);
  }

  async send(input) {
    (await this.open()).send(JSON.stringify(input));
  }

  close() {
    this.socket?.close();
  }
}

/** One run over SSE (`POST /`): a JSON error before the stream becomes a RUN_ERROR event. */
export async function runSse(input, token, onEvent) {
  const response = await fetch("/", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", ...authHeaders(token) },
    body: JSON.stringify(input),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    onEvent({ type: "RUN_ERROR", code: body.error?.code || String(response.status), message: body.error?.message || response.statusText });
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    for (const event of parser.push(decoder.decode(value, { stream: true }))) onEvent(event);
  }
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
