// How the page reaches the gateway over HTTP: SSE runs and reattach over fetch, and the stop of a thread's run. The
// WebSocket side is ws-mux.js (MuxSocket), the same client WebSocketAgent uses. Every run asks for a grace
// window, so a dropped connection or a reload does not end it: the page attaches again from the last event id
// it saw. Events go to the caller's `onEvent(event, eventId)`; nothing here touches the DOM.

import { SseParser } from "./protocol.js";

export const GRACE_SECONDS = 60; // how long the gateway keeps a run going while the page is away
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

export function authHeaders(token) {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** One run over SSE (`POST /`, or `POST /agents/{agent}` for an agent other than the default), asking for a grace
 * window; resolves to true once its terminal event came (false: the connection dropped first). A JSON error before
 * the stream becomes a RUN_ERROR event. */
export async function runSse(input, token, onEvent, agent = "") {
  return readSse(
    fetch(agent ? `/agents/${encodeURIComponent(agent)}` : "/", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "AGUI-Reattach-Grace": String(GRACE_SECONDS), ...authHeaders(token) },
      body: JSON.stringify(input),
    }),
    onEvent,
  );
}

/** Follow a run again after `lastEventId` (`GET /threads/{t}/runs/{r}/events`); resolves like runSse. */
export async function attachSse({ threadId, runId, rosInvocationId, userId }, lastEventId, token, onEvent) {
  const path = `/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/events`;
  const headers = { accept: "text/event-stream", ...authHeaders(token), ...(lastEventId ? { "last-event-id": lastEventId } : {}) };
  const query = new URLSearchParams({ rosInvocationId, ...(userId ? { userId } : {}) });
  return readSse(fetch(`${path}?${query}`, { headers }), onEvent);
}

/** Join the thread (`GET /threads/{t}/events`): its newest run, replayed and then followed live; resolves like
 * runSse (true at once for a thread with no retained run, 204). `signal` aborts it. */
export async function joinSse(threadId, userId, token, onEvent, signal) {
  const query = userId ? `?${new URLSearchParams({ userId })}` : "";
  const headers = { accept: "text/event-stream", ...authHeaders(token) };
  return readSse(fetch(`/threads/${encodeURIComponent(threadId)}/events${query}`, { headers, signal }), onEvent);
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
  if (response.status === 204) return true; // the run ended and every event up to its terminal one was read
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

/** Stop the thread's run (`POST /threads/{t}/stop`), only `runId` when named; resolves to the HTTP status. */
export async function stopRun({ threadId, runId, token }) {
  const response = await fetch(`/threads/${encodeURIComponent(threadId)}/stop`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders(token) },
    body: JSON.stringify(runId ? { runId } : {}),
  });
  return response.status;
}
