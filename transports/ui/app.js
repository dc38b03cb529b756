// The gateway's browser page: AG-UI over WebSocket (or SSE), interrupts answered with forms built from
// each interrupt's responseSchema, message and metadata; cancel, reconnect, and a thread kept across reloads.

const $ = (id) => document.getElementById(id);
const store = window.localStorage;
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

const state = {
  threadId: store.getItem("agui.threadId") || newId("thread"),
  cwd: store.getItem("agui.cwd") || "/workspace",
  ros: store.getItem("agui.ros") || null, // rosInvocationId of the current execution
  executionId: null,
  pending: JSON.parse(store.getItem("agui.pending") || "[]"),
  running: false,
  socket: null,
  socketReady: null,
  reconnectDelay: 500,
  seenEvents: new Set(),
  el: { text: null, reasoning: null },
};

function newId(prefix) {
  return `${prefix}-${crypto.randomUUID()}`;
}

function token() {
  return window.sessionStorage.getItem("agui.token") || "";
}

function save() {
  store.setItem("agui.threadId", state.threadId);
  store.setItem("agui.cwd", state.cwd);
  store.setItem("agui.pending", JSON.stringify(state.pending));
  if (state.ros) store.setItem("agui.ros", state.ros);
  store.setItem("agui.transcript", $("transcript").innerHTML);
}

function setStatus(text) {
  $("status").textContent = text;
}

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  $("cancel").disabled = !running || !state.executionId;
}

// ---- transcript -------------------------------------------------------------------------------

function add(kind, text, extra = {}) {
  const node = document.createElement("div");
  node.className = `bubble ${kind}`;
  node.textContent = text;
  for (const [key, value] of Object.entries(extra)) node.dataset[key] = value;
  $("transcript").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function toolCard(toolCallId, name) {
  let card = document.querySelector(`[data-tool-call-id="${CSS.escape(toolCallId)}"]`);
  if (!card) {
    card = document.createElement("div");
    card.className = "tool";
    card.dataset.toolCallId = toolCallId;
    card.dataset.testid = "tool-call";
    card.innerHTML = `<strong></strong><div>Arguments</div><pre class="args"></pre>`;
    card.querySelector("strong").textContent = `Tool: ${name || toolCallId}`;
    $("transcript").append(card);
  }
  return card;
}

function stepItem(name) {
  let item = [...$("steps").children].find((li) => li.dataset.step === name);
  if (!item) {
    item = document.createElement("li");
    item.dataset.step = name;
    item.textContent = name;
    $("steps").append(item);
  }
  return item;
}

function handleCustom(event) {
  const value = event.value || {};
  if (value.eventId) {
    const key = `${event.name}:${value.eventId}`;
    if (state.seenEvents.has(key)) return; // clients de-duplicate by (name, eventId)
    state.seenEvents.add(key);
  }
  if (event.name === "iac-code.session.v1") {
    state.executionId = value.executionId;
    $("cancel").disabled = !state.running;
  } else if (event.name === "iac-code.pipeline.v1") {
    const item = document.createElement("li");
    const { eventType, eventId, sequence, ...rest } = value;
    item.textContent = `${eventType}${Object.keys(rest).length ? " " + JSON.stringify(rest) : ""}`;
    $("pipeline").append(item);
  } else if (event.name === "iac-code.tool-progress.v1") {
    const card = toolCard(value.toolCallId);
    let bar = card.querySelector("progress");
    if (!bar) {
      bar = document.createElement("progress");
      bar.max = 1;
      bar.setAttribute("aria-label", "Tool progress");
      card.append(bar);
    }
    if (typeof value.progress === "number") bar.value = value.progress;
  } else if (event.name === "iac-code.artifact.v1") {
    const card = document.createElement("details");
    card.className = "artifact";
    card.dataset.testid = "artifact";
    card.innerHTML = "<summary></summary><pre></pre>";
    card.querySelector("summary").textContent = `Artifact: ${value.title || value.artifactId || "result"}`;
    card.querySelector("pre").textContent = JSON.stringify(value, null, 2);
    $("transcript").append(card);
  }
}

function handleEvent(event) {
  switch (event.type) {
    case "RUN_STARTED":
      setRunning(true);
      setStatus("Running");
      break;
    case "TEXT_MESSAGE_START":
      state.el.text = add("assistant", "", { testid: "assistant" });
      break;
    case "TEXT_MESSAGE_CONTENT":
      (state.el.text || (state.el.text = add("assistant", "", { testid: "assistant" }))).textContent += event.delta;
      break;
    case "TEXT_MESSAGE_END":
      state.el.text = null;
      break;
    case "REASONING_START": {
      const details = document.createElement("details");
      details.className = "reasoning";
      details.dataset.testid = "reasoning";
      details.innerHTML = "<summary>Reasoning</summary><div></div>";
      $("transcript").append(details);
      state.el.reasoning = details.querySelector("div");
      break;
    }
    case "REASONING_MESSAGE_CONTENT":
      if (state.el.reasoning) state.el.reasoning.textContent += event.delta;
      break;
    case "REASONING_END":
      state.el.reasoning = null;
      break;
    case "TOOL_CALL_START":
      toolCard(event.toolCallId, event.toolCallName);
      break;
    case "TOOL_CALL_ARGS":
      toolCard(event.toolCallId).querySelector(".args").textContent += event.delta;
      break;
    case "TOOL_CALL_RESULT": {
      const card = toolCard(event.toolCallId);
      const result = document.createElement("pre");
      result.className = "result";
      result.dataset.testid = "tool-result";
      result.textContent = event.content;
      card.append(Object.assign(document.createElement("div"), { textContent: "Result" }), result);
      break;
    }
    case "STEP_STARTED":
      stepItem(event.stepName).className = "running";
      break;
    case "STEP_FINISHED":
      stepItem(event.stepName).className = "done";
      break;
    case "CUSTOM":
      handleCustom(event);
      break;
    case "ACTIVITY_SNAPSHOT":
      add("note", `${event.activityType}: ${JSON.stringify(event.content)}`);
      break;
    case "RUN_FINISHED":
      finishRun(event);
      break;
    case "RUN_ERROR":
      add("error", `${event.code || "ERROR"}: ${event.message}`, { testid: "error" });
      endRun("Error");
      break;
  }
}

function finishRun(event) {
  if (event.usage && event.usage.length) {
    const total = event.usage.reduce((sum, u) => sum + (u.totalTokens || 0), 0);
    $("usage").textContent = `Tokens: ${total} (${event.usage.map((u) => `${u.model || u.provider}: in ${u.inputTokens ?? "?"}, out ${u.outputTokens ?? "?"}`).join("; ")})`;
  }
  const outcome = event.outcome || { type: "success" };
  if (outcome.type === "interrupt") {
    state.pending = outcome.interrupts;
    renderInterrupts();
    endRun("Waiting for your answer");
    return;
  }
  state.pending = [];
  hideInterrupts();
  if (outcome.type === "cancelled") add("note", "The run was cancelled.", { testid: "cancelled" });
  endRun(outcome.type === "cancelled" ? "Cancelled" : "Done");
}

function endRun(status) {
  setRunning(false);
  setStatus(status);
  save();
}

// ---- interrupts: forms from responseSchema + message + metadata ----------------------------------

function optionLabel(metadata, value) {
  const option = (metadata?.options || []).find((o) => (typeof o === "object" ? o.value : o) === value);
  return option && typeof option === "object" ? option.label || value : String(value);
}

function choiceSchema(schema) {
  // An enum, or anyOf/oneOf mixing an enum with free text.
  if (Array.isArray(schema.enum)) return { values: schema.enum, freeText: false };
  const variants = schema.anyOf || schema.oneOf || [];
  const withEnum = variants.find((v) => Array.isArray(v.enum));
  if (!withEnum) return null;
  return { values: withEnum.enum, freeText: variants.some((v) => v.type === "string" && !v.enum) };
}

function fieldFor(interrupt, name, schema, required) {
  const wrap = document.createElement("div");
  const id = `f-${interrupt.id}-${name}`;
  const choice = choiceSchema(schema);
  if (choice) {
    const group = document.createElement("fieldset");
    group.innerHTML = `<legend></legend>`;
    group.querySelector("legend").textContent = schema.title || name;
    choice.values.forEach((value, index) => {
      const label = document.createElement("label");
      const input = Object.assign(document.createElement("input"), { type: "radio", name: id, value: JSON.stringify(value), required });
      input.dataset.testid = `choice-${value}`;
      if (index === 0 && !choice.freeText) input.checked = false;
      label.append(input, " ", optionLabel(interrupt.metadata, value));
      group.append(label);
    });
    if (choice.freeText) {
      const label = document.createElement("label");
      label.htmlFor = `${id}-text`;
      label.textContent = "Or write your answer";
      const text = Object.assign(document.createElement("input"), { type: "text", id: `${id}-text` });
      text.dataset.testid = "free-text";
      text.addEventListener("input", () => group.querySelectorAll("input[type=radio]").forEach((r) => (r.required = !text.value)));
      group.append(label, text);
    }
    wrap.append(group);
    wrap.read = () => {
      const text = group.querySelector("input[type=text]");
      if (text && text.value) return text.value;
      const picked = group.querySelector("input[type=radio]:checked");
      return picked ? JSON.parse(picked.value) : undefined;
    };
    return wrap;
  }
  const label = Object.assign(document.createElement("label"), { htmlFor: id, textContent: schema.title || name });
  let input;
  if (schema.type === "boolean") {
    input = Object.assign(document.createElement("input"), { type: "checkbox", id });
    wrap.read = () => input.checked;
  } else if (schema.type === "number" || schema.type === "integer") {
    input = Object.assign(document.createElement("input"), { type: "number", id, required });
    wrap.read = () => (input.value === "" ? undefined : Number(input.value));
  } else {
    input = Object.assign(document.createElement("input"), { type: "text", id, required });
    wrap.read = () => (input.value === "" ? undefined : input.value);
  }
  input.dataset.testid = `field-${name}`;
  wrap.append(label, input);
  return wrap;
}

function renderInterrupts() {
  const form = $("interrupts");
  form.innerHTML = "";
  for (const interrupt of state.pending) {
    const box = document.createElement("fieldset");
    box.dataset.interruptId = interrupt.id;
    const meta = interrupt.metadata || {};
    box.innerHTML = "<legend></legend><p class='message'></p>";
    box.querySelector("legend").textContent = meta.title || interrupt.reason;
    box.querySelector(".message").textContent = interrupt.message || "";
    for (const extra of [meta.purpose, meta.safeSummary, interrupt.expiresAt && `Expires at ${new Date(interrupt.expiresAt).toLocaleString()}`]) {
      if (extra) box.append(Object.assign(document.createElement("p"), { className: "note", textContent: extra }));
    }
    const schema = interrupt.responseSchema || { type: "object", properties: {} };
    const required = new Set(schema.required || []);
    box.fields = [];
    for (const [name, property] of Object.entries(schema.properties || {})) {
      const field = fieldFor(interrupt, name, property, required.has(name));
      field.name = name;
      box.fields.push(field);
      box.append(field);
    }
    form.append(box);
  }
  const submit = Object.assign(document.createElement("button"), { type: "submit", textContent: "Send answer" });
  submit.dataset.testid = "answer";
  const dismiss = Object.assign(document.createElement("button"), { type: "button", className: "secondary", textContent: "Dismiss" });
  dismiss.dataset.testid = "dismiss";
  dismiss.addEventListener("click", () => answer("cancelled"));
  form.append(submit, dismiss);
  form.hidden = false;
  form.querySelector("input")?.focus();
}

function hideInterrupts() {
  $("interrupts").hidden = true;
  $("interrupts").innerHTML = "";
}

function answer(status) {
  const entries = [...$("interrupts").querySelectorAll("fieldset[data-interrupt-id]")].map((box) => {
    if (status === "cancelled") return { interruptId: box.dataset.interruptId, status };
    const payload = {};
    for (const field of box.fields) {
      const value = field.read();
      if (value !== undefined) payload[field.name] = value;
    }
    return { interruptId: box.dataset.interruptId, status, payload };
  });
  run(null, entries);
}

// ---- transports ---------------------------------------------------------------------------------

function runInput(text, resume) {
  if (!resume) state.ros = newId("ui"); // a new turn is a new execution; resumes keep its identity
  return {
    threadId: state.threadId,
    runId: newId("run"),
    state: {},
    messages: text ? [{ id: newId("msg"), role: "user", content: text }] : [],
    tools: [],
    context: [],
    forwardedProps: { iacCode: { schemaVersion: 1, rosInvocationId: state.ros, cwd: state.cwd } },
    ...(resume ? { resume } : {}),
  };
}

function authHeaders() {
  return token() ? { authorization: `Bearer ${token()}` } : {};
}

async function connectSocket() {
  if (state.socketReady) return state.socketReady;
  state.socketReady = (async () => {
    let query = "";
    if (token()) {
      const response = await fetch("/ws/tickets", { method: "POST", headers: authHeaders() });
      if (!response.ok) throw new Error(`ticket refused (${response.status})`);
      query = `?ticket=${encodeURIComponent((await response.json()).ticket)}`;
    }
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws${query}`, ["agui.v1"]);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error("WebSocket refused (if the gateway requires a token, set it in Settings)"));
    });
    socket.onmessage = (message) => handleEvent(JSON.parse(message.data));
    socket.onclose = () => {
      state.socket = null;
      state.socketReady = null;
      if (state.running) {
        add("error", "Connection lost: the run was cancelled by the gateway.", { testid: "error" });
        endRun("Disconnected");
      }
      if (transport() === "ws") scheduleReconnect();
    };
    state.socket = socket;
    state.reconnectDelay = 500;
    setStatus("Connected");
    return socket;
  })();
  try {
    return await state.socketReady;
  } catch (error) {
    state.socketReady = null;
    throw error;
  }
}

function scheduleReconnect() {
  // After a network drop: try again with backoff until the gateway answers (or SSE is chosen).
  setStatus("Reconnecting…");
  setTimeout(() => {
    if (transport() !== "ws" || state.socket) return;
    connectSocket().then(
      () => setStatus("Connected"),
      () => scheduleReconnect(),
    );
  }, state.reconnectDelay);
  state.reconnectDelay = Math.min(state.reconnectDelay * 2, 5000);
}

async function runSse(input) {
  const response = await fetch("/", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", ...authHeaders() },
    body: JSON.stringify(input),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    handleEvent({ type: "RUN_ERROR", code: body.error?.code || String(response.status), message: body.error?.message || response.statusText });
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const record = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (record.startsWith("data: ")) handleEvent(JSON.parse(record.slice(6)));
    }
  }
}

function transport() {
  return document.querySelector("input[name=transport]:checked").value;
}

async function run(text, resume) {
  if (text) add("user", text, { testid: "user" });
  hideInterrupts();
  setRunning(true);
  state.executionId = null;
  const input = runInput(text, resume);
  save();
  try {
    if (transport() === "sse") {
      await runSse(input);
    } else {
      const socket = await connectSocket();
      socket.send(JSON.stringify(input));
    }
  } catch (error) {
    add("error", `Could not reach the gateway: ${error.message}`, { testid: "error" });
    endRun("Not connected");
  }
}

async function cancel() {
  if (!state.executionId) return;
  const response = await fetch(`/extensions/iac-code/v1/executions/${encodeURIComponent(state.executionId)}/cancel`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders() },
    body: JSON.stringify({ threadId: state.threadId, rosInvocationId: state.ros }),
  });
  if (!response.ok) add("error", `Cancel failed (${response.status})`, { testid: "error" });
}

// ---- wiring ---------------------------------------------------------------------------------------

function init() {
  $("thread-id").textContent = state.threadId;
  $("cwd").value = state.cwd;
  $("token").value = token();
  $("transcript").innerHTML = store.getItem("agui.transcript") || "";
  if (state.pending.length) renderInterrupts();
  $("cwd").addEventListener("change", () => {
    state.cwd = $("cwd").value.trim();
    save();
  });
  $("token").addEventListener("change", () => {
    window.sessionStorage.setItem("agui.token", $("token").value.trim());
    state.socket?.close();
  });
  $("new-thread").addEventListener("click", () => {
    state.threadId = newId("thread");
    state.pending = [];
    state.ros = null;
    $("transcript").innerHTML = "";
    $("steps").innerHTML = "";
    $("pipeline").innerHTML = "";
    hideInterrupts();
    $("thread-id").textContent = state.threadId;
    save();
  });
  document.querySelectorAll("input[name=transport]").forEach((radio) =>
    radio.addEventListener("change", () => {
      if (transport() === "sse") state.socket?.close();
      setStatus(transport() === "sse" ? "SSE" : "Not connected");
    }),
  );
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || state.running) return;
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
    answer("resolved");
  });
  $("cancel").addEventListener("click", cancel);
  setRunning(false);
  document.body.dataset.ready = "true";
}

init();
