// The gateway's multiplexed WebSocket (`agui-mux.v1`) as a small client: one shared socket per URL, runs as
// streams, single-use tickets before each connect when a token is given, reconnect with jittered exponential
// backoff, and reattach: every run asks for a grace window, and after a drop each run in flight is attached
// again from the last event id it received, so the drop is invisible to whoever reads the events.
// No dependencies; used by the page and by WebSocketAgent (ws-agent.js).

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);
const sockets = new Map(); // url -> MuxSocket (one shared socket per gateway URL)

/** The gateway's base URL for HTTP calls (tickets) from a ws:// or wss:// socket URL. */
function httpBase(url) {
  const parsed = new URL(url);
  parsed.protocol = parsed.protocol === "wss:" ? "https:" : "http:";
  parsed.pathname = parsed.pathname.replace(/\/ws$/, "");
  parsed.search = "";
  return parsed.toString().replace(/\/$/, "");
}

export class MuxSocket {
  /**
   * @param {object} options
   * @param {string} options.url ws:// or wss:// URL of the gateway's `/ws`
   * @param {() => (string|Promise<string>)} [options.token] bearer token: a ticket is fetched with it before each connect
   * @param {number} [options.graceSeconds] grace window each run asks for (default 60)
   * @param {typeof WebSocket} [options.WebSocket] a WebSocket class (default: the global one)
   * @param {typeof fetch} [options.fetch] for tickets (default: the global one)
   * @param {(status: string) => void} [options.onStatus] "Connected", "Reconnecting…"
   * @param {() => boolean} [options.keepAlive] reconnect after a drop even with no run in flight (the page)
   */
  constructor({ url, token, graceSeconds = 60, WebSocket: Socket, fetch: fetcher, onStatus, keepAlive } = {}) {
    this.url = url;
    this.token = token || (() => "");
    this.graceSeconds = graceSeconds;
    this.Socket = Socket || globalThis.WebSocket;
    this.fetch = fetcher || globalThis.fetch?.bind(globalThis);
    this.onStatus = onStatus || (() => {});
    this.keepAlive = keepAlive || (() => false);
    this.streams = new Map(); // stream id -> {onEvent, onError, lastEventId, attach}
    this.socket = null;
    this.ready = null;
    this.delay = 500;
    this.closed = false;
  }

  /** The shared socket for `url` (options apply when it is first made). */
  static for(url, options = {}) {
    let shared = sockets.get(url);
    if (!shared || shared.closed) {
      shared = new MuxSocket({ ...options, url });
      sockets.set(url, shared);
    }
    return shared;
  }

  async #ticketQuery() {
    const token = await this.token();
    if (!token) return "";
    const response = await this.fetch(`${httpBase(this.url)}/ws/tickets`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    if (!response.ok) throw new Error(`ticket refused (${response.status})`);
    return `?ticket=${encodeURIComponent((await response.json()).ticket)}`;
  }

  open() {
    if (!this.ready) {
      this.ready = this.#connect().catch((error) => {
        this.ready = null;
        throw error;
      });
    }
    return this.ready;
  }

  async #connect() {
    const socket = new this.Socket(`${this.url}${await this.#ticketQuery()}`, ["agui-mux.v1"]);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error("WebSocket refused (if the gateway requires a token, give one)"));
    });
    socket.onmessage = (message) => this.#receive(JSON.parse(String(message.data)));
    socket.onclose = () => this.#dropped(socket);
    this.socket = socket;
    this.delay = 500;
    this.onStatus("Connected");
    return socket;
  }

  #receive(frame) {
    const stream = this.streams.get(frame.id);
    if (!stream) return;
    if (frame.closed) {
      this.streams.delete(frame.id); // a connect to a thread with no retained run: over, with no event
      stream.onClosed?.();
      return;
    }
    if (frame.eventId) stream.lastEventId = frame.eventId;
    if (TERMINAL.has(frame.event?.type)) this.streams.delete(frame.id);
    stream.onEvent(frame.event, frame.eventId ?? null);
  }

  #dropped(socket) {
    if (this.socket !== socket) return;
    this.socket = null;
    this.ready = null;
    this.#schedule();
  }

  #schedule() {
    if (this.closed || (this.streams.size === 0 && !this.keepAlive())) return;
    this.onStatus("Reconnecting…");
    const wait = this.delay * (0.8 + Math.random() * 0.4);
    this.delay = Math.min(this.delay * 2, 10_000);
    setTimeout(() => this.#reattach(), wait);
  }

  async #reattach() {
    if (this.socket || this.closed) return;
    try {
      const socket = await this.open();
      for (const [id, stream] of this.streams) {
        socket.send(JSON.stringify({ op: stream.op || "attach", id, ...stream.attach, lastEventId: stream.lastEventId || "" }));
      }
    } catch {
      this.#schedule();
    }
  }

  /** Start a run as stream `id` (default: its runId), of the gateway's agent `agent` (default: the socket's, else the
   * gateway's default agent). `onEvent(event, eventId)` gets every event to the terminal one. */
  async run(input, { id = input.runId, agent, onEvent, onError = () => {} }) {
    const userId = input.forwardedProps?.iacCode?.userId;
    const attach = { threadId: input.threadId, runId: input.runId, rosInvocationId: rosOf(input), ...(userId ? { userId } : {}) };
    this.streams.set(id, { onEvent, onError, lastEventId: null, attach });
    try {
      const frame = { op: "run", id, input, reattachGraceSeconds: this.graceSeconds, ...(agent ? { agent } : {}) };
      (await this.open()).send(JSON.stringify(frame));
    } catch (error) {
      this.streams.delete(id);
      onError(error);
    }
    return { cancel: () => this.cancel(id) };
  }

  /** Follow a run started elsewhere (or before a reload) from `lastEventId` (null: from its first event). */
  async attach({ threadId, runId, rosInvocationId }, lastEventId, { id = runId, onEvent, onError = () => {} }) {
    const attach = { threadId, runId, rosInvocationId };
    this.streams.set(id, { onEvent, onError, lastEventId, attach });
    try {
      (await this.open()).send(JSON.stringify({ op: "attach", id, ...attach, lastEventId: lastEventId || "" }));
    } catch (error) {
      this.streams.delete(id);
      onError(error);
    }
    return { cancel: () => this.cancel(id) };
  }

  /** Join a thread as stream `id`: its newest run, replayed from its first event (or `lastEventId`) and followed
   * live while it runs; `onClosed()` when the thread has no retained run. */
  async connect({ threadId, userId }, lastEventId, { id, onEvent, onClosed = () => {}, onError = () => {} }) {
    const attach = { threadId, ...(userId ? { userId } : {}) };
    this.streams.set(id, { op: "connect", onEvent, onClosed, onError, lastEventId, attach });
    try {
      (await this.open()).send(JSON.stringify({ op: "connect", id, ...attach, lastEventId: lastEventId || "" }));
    } catch (error) {
      this.streams.delete(id);
      onError(error);
    }
    return { close: () => this.streams.delete(id) };
  }

  /** Cancel a run on purpose: it ends with RUN_FINISHED cancelled. */
  cancel(id) {
    if (this.streams.has(id) && this.socket) this.socket.send(JSON.stringify({ op: "cancel", id }));
  }

  close() {
    this.closed = true;
    this.socket?.close();
  }
}

/** The invocation identity the gateway binds the run to: `forwardedProps.iacCode.rosInvocationId`, or the plain
 * AG-UI default `thread:<threadId>`. */
export function rosOf(input) {
  return input.forwardedProps?.iacCode?.rosInvocationId || `thread:${input.threadId}`;
}
