// The gateway's browser page: wiring and persistence. protocol.js turns events into a view model, view.js
// draws it, interrupts.js builds the answer forms, transport.js talks to the gateway.
//
// What is kept across reloads (localStorage, key `agui.page.v1`): the thread id, workspace, invocation id,
// and each run's events (deltas merged), replayed through protocol.js on load. Never HTML, never the token
// (sessionStorage only).

import { apply, compact, emptyView, LOCAL_ERROR, RESUME, USER } from "./protocol.js";
import { cancelExecution, runSse, SocketLink } from "./transport.js";
import { PageView } from "./view.js";

const $ = (id) => document.getElementById(id);
const STORAGE_KEY = "agui.page.v1";
const MAX_RUNS = 40; // runs kept for the transcript; older ones are forgotten
const MAX_STORED_CHARS = 2_000_000;
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR", LOCAL_ERROR]);

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
  cwd: saved.cwd || "/workspace",
  ros: saved.ros || null, // rosInvocationId of the current execution
  thinking: Boolean(saved.thinking),
  runs: Array.isArray(saved.runs) ? saved.runs : [], // each run: its events, local pseudo-events included
};
let view = emptyView();
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

function record(event) {
  if (!page.runs.length) page.runs.push([]);
  page.runs[page.runs.length - 1].push(event);
  pageView.render(view, apply(view, event));
  if (TERMINAL.has(event.type) || event.type === USER || event.type === RESUME) save();
}

function setStatus(text) {
  view.status = text;
  pageView.status(view);
}

const link = new SocketLink({
  token,
  onEvent: record,
  onStatus: (text) => {
    if (!view.running) setStatus(text);
  },
  onDrop: () => {
    if (view.running) record({ type: LOCAL_ERROR, message: "Connection lost: the run was cancelled by the gateway.", status: "Disconnected" });
  },
  wanted: () => transport() === "ws",
});

function runInput(text, resume) {
  if (!resume) page.ros = newId("ui"); // a new turn is a new execution; resumes keep its identity
  const iacCode = { schemaVersion: 1, rosInvocationId: page.ros, cwd: page.cwd };
  if (page.thinking) iacCode.thinking = { enabled: true };
  return {
    threadId: page.threadId,
    runId: newId("run"),
    state: {},
    messages: text ? [{ id: newId("msg"), role: "user", content: text }] : [],
    tools: [],
    context: [],
    forwardedProps: { iacCode },
    ...(resume ? { resume } : {}),
  };
}

async function run(text, resume) {
  page.runs.push([]);
  record(text ? { type: USER, text } : { type: RESUME });
  const input = runInput(text, resume);
  save();
  try {
    if (transport() === "sse") await runSse(input, token(), record);
    else await link.send(input);
  } catch (error) {
    record({ type: LOCAL_ERROR, message: `Could not reach the gateway: ${error.message}`, status: "Not connected" });
  }
}

async function cancel() {
  if (!view.executionId) return;
  const status = await cancelExecution({ executionId: view.executionId, threadId: page.threadId, rosInvocationId: page.ros, token: token() });
  if (status !== 200) record({ type: LOCAL_ERROR, message: `Cancel failed (${status})`, status: view.status });
}

function replay() {
  view = emptyView();
  pageView.reset();
  const changed = new Set(["status", "pending", "usage", "steps", "pipeline"]);
  for (const events of page.runs) for (const event of events) apply(view, event, changed);
  if (view.running) {
    view.running = false; // the page was closed mid-run: that stream is gone
    view.status = "Not connected";
  }
  pageView.render(view, changed);
}

function newThread() {
  Object.assign(page, { threadId: newId("thread"), ros: null, runs: [] });
  $("thread-id").textContent = page.threadId;
  replay();
  save();
}

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
  });
  $("new-thread").addEventListener("click", newThread);
  for (const radio of document.querySelectorAll("input[name=transport]")) {
    radio.addEventListener("change", () => {
      if (transport() === "sse") link.close();
      setStatus(transport() === "sse" ? "SSE" : "Not connected");
    });
  }
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || view.running) return;
    $("message").value = "";
    run(text, null);
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
  $("cancel").addEventListener("click", cancel);
}

function init() {
  $("thread-id").textContent = page.threadId;
  $("cwd").value = page.cwd;
  $("thinking").checked = page.thinking;
  $("token").value = token();
  window.localStorage.removeItem("agui.transcript"); // the old page kept raw HTML here
  replay();
  wire();
  document.body.dataset.ready = "true";
}

init();
