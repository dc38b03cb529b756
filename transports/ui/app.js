// The gateway's browser page: wiring and persistence. protocol.js turns events into a view model, view.js
// draws it, interrupts.js builds the answer forms, transport.js talks to the gateway.
//
// What is kept across reloads (localStorage, key `agui.page.v1`): the thread id, workspace, invocation id,
// each run's events (deltas merged), replayed through protocol.js on load, and the run in flight (`live`). Never
// HTML, never the token (sessionStorage only).
//
// Two kinds of request: with a workspace (cwd) set, the iac-code extension (the seed contract: no client tools,
// the state stays the page's). With none, a plain AG-UI request carrying the whole protocol: the conversation,
// the thread's shared state (shown live in the side panel) and the page's own client tool, `show_notice`,
// which the page runs when a run leaves a call of it pending (`/frontend show_notice {"text":"..."}`), then
// sends its result in the next run.
//
// Busy thread: a message sent while a run is going is sent to the gateway at once to wait its turn there
// (`forwardedProps.multitask: "enqueue"`), and shown as queued; when its run starts (after the one before it ended)
// it joins the transcript. Stop ends the thread's run from any replica (`POST /threads/{id}/stop`, naming the run).
//
// Agents: the gateway's agents (GET /agents) are offered in a list when it has more than one. A thread belongs to
// the agent of its first run: choosing another agent starts a new thread, and opening a thread from the list
// selects its agent. The page's client tool is offered to an agent that takes client tools.
//
// Reattach: every run asks the gateway for a grace window. After a reload the run in flight is followed again
// from its first event (its transcript is rebuilt from the gateway's log); after a network drop, from the last
// event id seen. The gateway sends each event exactly once across the drop, so no text repeats or goes missing.

import { apply, compact, emptyView, LOCAL_ERROR, RESUME, TOOL_RESULT, USER } from "./protocol.js";
import { attachSse, authHeaders, GRACE_SECONDS, joinSse, runSse, stopRun } from "./transport.js";
import { MuxSocket } from "./ws-mux.js";
import { ThreadList } from "./threads.js";
import { PageView } from "./view.js";

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = "agui.page.v1";
const MAX_RUNS = 40; // runs kept for the transcript; older ones are forgotten
const MAX_STORED_CHARS = 2_000_000;
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR", LOCAL_ERROR]);
const LOCAL = new Set([USER, RESUME, TOOL_RESULT]); // the page's own pseudo-events, kept when a run is followed again
const CLIENT_TOOLS = [
  {
    name: "show_notice",
    description: "Show a notice to the user in the page; returns what was shown.",
    parameters: { type: "object", properties: { text: { type: "string" } } },
  },
];
const SSE_ATTEMPTS = 8; // reattach attempts over SSE before the page gives up on a run

const newId = (prefix) => `${prefix}-${crypto.randomUUID()}`;
const token = () => window.sessionStorage.getItem("agui.token") || "";
const transport = () => document.querySelector("input[name=transport]:checked").value;

function loadSaved() {
  try {
    return JSON.parse(window.localStorage.getItem(STORAGE_KEY) || "null") || {};
  } catch {
    return {};
  }
}

const saved = loadSaved();
const page = {
  threadId: saved.threadId || newId("thread"),
  cwd: typeof saved.cwd === "string" ? saved.cwd : "", // empty: plain AG-UI requests
  ros: saved.ros || null, // rosInvocationId of the current execution
  thinking: Boolean(saved.thinking),
  runs: Array.isArray(saved.runs) ? saved.runs : [], // each run: its events, local pseudo-events included
  live: saved.live || null, // the run in flight: {threadId, runId, rosInvocationId, transport}
  agent: typeof saved.agent === "string" ? saved.agent : "", // the thread's agent (empty: the gateway's default)
};
let agents = []; // the gateway's agents (GET /agents), the default first; read at start
const clientTools = () => Boolean((agents.find((a) => a.id === page.agent) || agents[0])?.capabilities?.tools?.clientProvided);
let cursor = null; // the last event id of the run in flight (where to attach from after a drop)
let view = emptyView();
const waiting = []; // messages sent while a run was going, in order: {text, messageId, input, events (until it runs)}
const pageView = new PageView({ onAnswer: (entries) => run(null, entries) });

function save() {
  let runs = page.runs.slice(-MAX_RUNS).map(compact);
  let text = JSON.stringify({ ...page, runs });
  while (text.length > MAX_STORED_CHARS && runs.length > 1) {
    runs = runs.slice(1);
    text = JSON.stringify({ ...page, runs });
  }
  page.runs = runs;
  window.localStorage.setItem(STORAGE_KEY, text);
}

function record(event, eventId = null) {
  if (!page.runs.length) page.runs.push([]);
  page.runs[page.runs.length - 1].push(event);
  if (eventId) cursor = eventId;
  const live = page.live;
  if (TERMINAL.has(event.type)) page.live = null;
  pageView.render(view, apply(view, event));
  if (TERMINAL.has(event.type) || LOCAL.has(event.type)) save();
  if (TERMINAL.has(event.type)) threads.refresh(); // a title, a count or a new thread to show
  if (event.type === "RUN_FINISHED" && live && view.pendingTools.length) setTimeout(runClientTools, 0);
  if (TERMINAL.has(event.type)) setTimeout(promote, 0);
}

/** Send a message while a run is going: the gateway queues its run behind the active one. */
function queueMessage(text) {
  const messageId = newId("msg");
  const input = runInput(text, null, messageId);
  input.forwardedProps = { ...input.forwardedProps, multitask: "enqueue" };
  const entry = { text, messageId, input, ros: page.ros, events: [] };
  waiting.push(entry);
  pageView.queued(waiting);
  const onEvent = (event, eventId) => {
    if (entry.events === null) return record(event, eventId); // its run is the page's live one now
    entry.events.push([event, eventId]);
    promote();
  };
  if (transport() === "sse") runSse(input, token(), onEvent, page.agent).catch(failed);
  else link.run(input, { agent: page.agent, onEvent, onError: failed });
}

/** The first queued message whose run has begun, once nothing else runs, joins the transcript as the live run. */
function promote() {
  const entry = waiting[0];
  if (!entry || view.running || !entry.events.length) return;
  waiting.shift();
  pageView.queued(waiting);
  page.runs.push([]);
  page.ros = entry.ros;
  page.live = { threadId: entry.input.threadId, runId: entry.input.runId, rosInvocationId: entry.ros, transport: transport() };
  cursor = null;
  const events = entry.events;
  entry.events = null;
  record({ type: USER, text: entry.text, id: entry.messageId });
  for (const [event, eventId] of events) record(event, eventId);
}

/** The page's own tools, for the calls the last run left pending; then the run that carries their results. */
function runClientTools() {
  const calls = view.pendingTools.slice();
  for (const id of calls) {
    const call = view.conversation.flatMap((m) => m.toolCalls || []).find((c) => c.id === id);
    let content = `The page has no tool named ${call?.function?.name}.`;
    if (call?.function?.name === "show_notice") {
      let args = {};
      try {
        args = JSON.parse(call.function.arguments || "{}");
      } catch {
        args = {};
      }
      const text = String(args.text ?? "");
      content = `Shown: ${text}`;
    }
    page.runs[page.runs.length - 1].push({ type: TOOL_RESULT, toolCallId: id, content });
    pageView.render(view, apply(view, { type: TOOL_RESULT, toolCallId: id, content }));
  }
  save();
  if (calls.length) run(null, null);
}

function setStatus(text) {
  view.status = text;
  pageView.status(view);
}

function makeLink() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return new MuxSocket({
    url: `${scheme}://${location.host}/ws`,
    token: async () => token(),
    graceSeconds: GRACE_SECONDS,
    onStatus: (text) => {
      if (!view.running || text === "Reconnecting…") setStatus(text);
    },
    keepAlive: () => transport() === "ws",
  });
}

let link = makeLink(); // one multiplexed socket; runs in flight are attached again by itself after a drop
const failed = (error) => {
  page.live = null;
  record({ type: LOCAL_ERROR, message: `Could not reach the gateway: ${error.message}`, status: "Not connected" });
};

function runInput(text, resume, messageId) {
  const user = text ? [{ id: messageId, role: "user", content: text }] : [];
  if (!page.cwd) {
    page.ros = `thread:${page.threadId}`; // what the gateway derives for a plain request (a cancel names it)
    return {
      threadId: page.threadId,
      runId: newId("run"),
      state: view.state,
      messages: [...view.conversation, ...user],
      tools: clientTools() ? CLIENT_TOOLS : [],
      context: [],
      forwardedProps: {},
      protocolVersion: "1.0", // the page reads AG-UI 1.0's outcomes (pendingToolCallIds, cancelled)
      ...(resume ? { resume } : {}),
    };
  }
  if (!resume) page.ros = newId("ui"); // a new turn is a new execution; resumes keep its identity
  const iacCode = { schemaVersion: 1, rosInvocationId: page.ros, cwd: page.cwd };
  if (page.thinking) iacCode.thinking = { enabled: true };
  return {
    threadId: page.threadId,
    runId: newId("run"),
    state: {},
    messages: user,
    tools: [],
    context: [],
    forwardedProps: { iacCode },
    ...(resume ? { resume } : {}),
  };
}

async function run(text, resume) {
  page.runs.push([]);
  const messageId = newId("msg");
  const input = runInput(text, resume, messageId);
  page.live = { threadId: input.threadId, runId: input.runId, rosInvocationId: page.ros, transport: transport() };
  cursor = null;
  record(text ? { type: USER, text, id: messageId } : { type: RESUME });
  try {
    if (page.live.transport === "sse") await followSse(() => runSse(input, token(), record, page.agent));
    else await link.run(input, { agent: page.agent, onEvent: record, onError: failed });
  } catch (error) {
    failed(error);
  }
}

/** Read a run over SSE; when the connection drops before its end, attach again from the last event id. */
async function followSse(first) {
  const live = page.live;
  let ended = await first();
  for (let attempt = 0; !ended && page.live === live && attempt < SSE_ATTEMPTS; attempt++) {
    setStatus("Reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** attempt, 4000)));
    ended = await attachSse(live, cursor, token(), record);
  }
  if (!ended && page.live === live) {
    page.live = null;
    record({ type: LOCAL_ERROR, message: "Connection lost.", status: "Disconnected" });
  }
}

/** After a reload: follow the run that was in flight again, from its first event (its stored events are replaced). */
function resumeLive() {
  const live = page.live;
  const events = page.runs[page.runs.length - 1] || [];
  page.runs[page.runs.length - 1] = events.filter((event) => LOCAL.has(event.type));
  cursor = null;
  replay();
  view.running = true;
  setStatus("Reconnecting…");
  if (live.transport === "sse") followSse(() => attachSse(live, null, token(), record));
  else link.attach(live, null, { onEvent: record, onError: failed });
}

/** On load: join the thread on the gateway. Its newest run, when this page never saw it (another tab or device
 * ran it, or the stored transcript was lost), is added and followed to its end. */
async function joinThread() {
  const known = new Set(page.runs.flatMap((events) => events.filter((e) => e.type === "RUN_STARTED").map((e) => e.runId)));
  const stop = new AbortController();
  let adding = false;
  await joinSse(
    page.threadId,
    null,
    token(),
    (event, eventId) => {
      if (!adding) {
        if (event.type !== "RUN_STARTED" || known.has(event.runId)) return stop.abort(); // already in the transcript
        adding = true;
        page.runs.push([]);
      }
      record(event, eventId);
    },
    stop.signal,
  ).catch(() => false);
}

async function stop() {
  const status = await stopRun({ threadId: page.threadId, runId: page.live?.runId, token: token() });
  if (status !== 200) record({ type: LOCAL_ERROR, message: `Stop failed (${status})`, status: view.status });
}

function replay() {
  view = emptyView();
  pageView.reset();
  const changed = new Set(["status", "pending", "usage", "steps", "pipeline"]);
  for (const events of page.runs) for (const event of events) apply(view, event, changed);
  if (view.running && !page.live) {
    view.running = false; // the page was closed mid-run and that run is not followed again
    view.status = "Not connected";
  }
  pageView.render(view, changed);
}

function newThread() {
  openThread(newId("thread"), false, page.agent);
}

/** Show another thread, of `agent`: its conversation comes from the gateway (the join hydrates it). */
function openThread(threadId, join = true, agent = page.agent) {
  Object.assign(page, { threadId, ros: null, runs: [], live: null, agent });
  $("thread-id").textContent = page.threadId;
  $("agent").value = agent;
  replay();
  save();
  if (join) joinThread().then(() => threads.refresh());
  else threads.refresh();
}

const threads = new ThreadList($("threads"), {
  open: (threadId, agent) => openThread(threadId, true, agent === agents[0]?.id ? "" : agent || ""),
  erased: (threadId) => threadId === page.threadId && newThread(),
  token: () => token(),
  current: () => page.threadId,
});

function wire() {
  $("cwd").addEventListener("change", () => {
    page.cwd = $("cwd").value.trim();
    save();
  });
  $("thinking").addEventListener("change", () => {
    page.thinking = $("thinking").checked;
    save();
  });
  $("token").addEventListener("change", () => {
    window.sessionStorage.setItem("agui.token", $("token").value.trim());
    link.close();
    link = makeLink();
    readAgents(); // the agents are listed to a caller the gateway knows
  });
  $("new-thread").addEventListener("click", newThread);
  $("agent").addEventListener("change", () => openThread(newId("thread"), false, $("agent").value)); // a thread keeps its agent
  for (const radio of document.querySelectorAll("input[name=transport]")) {
    radio.addEventListener("change", () => {
      if (transport() === "sse") {
        link.close();
        link = makeLink();
      }
      setStatus(transport() === "sse" ? "SSE" : "Not connected");
    });
  }
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || view.pending.length) return; // an answer is due first: the text stays
    $("message").value = "";
    if (view.running || waiting.length) queueMessage(text);
    else run(text, null);
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("interrupts").addEventListener("submit", (event) => {
    event.preventDefault();
    run(null, pageView.answers("resolved"));
  });
  $("cancel").addEventListener("click", stop);
}

/** The gateway's agents, offered in the list when there are several (the default's value is empty). */
async function readAgents() {
  try {
    const response = await fetch("/agents", { headers: authHeaders(token()) });
    agents = response.ok ? (await response.json()).agents : [];
  } catch {
    agents = []; // the page still works with the default agent, without its tool
  }
  const select = $("agent");
  select.replaceChildren(
    ...agents.map((agent, index) => {
      const option = document.createElement("option");
      option.value = index === 0 ? "" : agent.id;
      option.textContent = agent.description ? `${agent.id}: ${agent.description}` : agent.id;
      return option;
    }),
  );
  select.value = page.agent;
  $("agent-choice").hidden = agents.length < 2;
}

async function init() {
  await readAgents();
  $("thread-id").textContent = page.threadId;
  $("cwd").value = page.cwd;
  $("thinking").checked = page.thinking;
  $("token").value = token();
  window.localStorage.removeItem("agui.transcript"); // the old page kept raw HTML here
  replay();
  wire();
  if (page.live) resumeLive();
  else joinThread(); // not awaited: a joined run still in flight is followed to its end
  threads.refresh();
  document.body.dataset.ready = "true";
}

init();
