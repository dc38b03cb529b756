// Draws the view model (protocol.js) into the page. Only the parts named in `changed` are redrawn; each
// transcript item keeps its node, so a long stream updates one text node per event.

import { interruptForm } from "./interrupts.js";
import { shortText } from "./protocol.js";

const $ = (id) => document.getElementById(id);
const TESTIDS = {
  user: "user",
  assistant: "assistant",
  error: "error",
  reasoning: "reasoning",
  tool: "tool-call",
  artifact: "artifact",
  activity: "activity",
};
const STEP_MARKS = { pending: "○", completed: "●", running: "◐" };

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function createItem(item) {
  let node;
  if (item.kind === "reasoning") {
    node = el("details", { className: "reasoning" }, el("summary", { textContent: "Reasoning" }), el("div", { className: "body" }));
  } else if (item.kind === "tool") {
    node = el("div", { className: "tool" }, el("strong"), el("div", { textContent: "Arguments" }), el("pre", { className: "args" }));
  } else if (item.kind === "artifact") {
    node = el("details", { className: "artifact" }, el("summary"), el("pre"));
  } else {
    node = el("div", { className: `bubble ${item.kind}` });
  }
  const testid = item.testid || TESTIDS[item.kind];
  if (testid) node.dataset.testid = testid;
  return node;
}

function fillTool(node, item) {
  node.querySelector("strong").textContent = `Tool: ${item.name || item.id}`;
  node.querySelector(".args").textContent = item.args || "";
  if (item.hasProgress) {
    let bar = node.querySelector("progress");
    if (!bar) {
      bar = el("progress", { max: 1 });
      bar.setAttribute("aria-label", "Tool progress");
      node.append(bar);
    }
    if (typeof item.progress === "number") bar.value = item.progress;
  }
  if (item.result !== undefined && item.result !== null && !node.querySelector(".result")) {
    const result = el("pre", { className: "result", textContent: item.result });
    result.dataset.testid = "tool-result";
    node.append(el("div", { textContent: "Result" }), result);
  }
}

function fillItem(node, item) {
  if (item.kind === "reasoning") node.querySelector(".body").textContent = item.text;
  else if (item.kind === "tool") fillTool(node, item);
  else if (item.kind === "artifact") {
    node.querySelector("summary").textContent = `Artifact: ${item.title}`;
    node.querySelector("pre").textContent = JSON.stringify(item.data, null, 2);
  } else node.textContent = item.text;
}

export class PageView {
  constructor({ onAnswer }) {
    this.onAnswer = onAnswer; // (entries) => void, from the interrupt form
    this.nodes = new Map();
    this.forms = [];
  }

  reset() {
    this.nodes.clear();
    for (const id of ["transcript", "steps", "pipeline", "state", "plan"]) $(id).replaceChildren();
    $("usage").textContent = "";
    this.hideInterrupts();
  }

  render(view, changed) {
    for (const part of changed) {
      if (part.startsWith("items:")) this.#item(view.byId.get(part.slice(6)));
    }
    if (changed.has("steps")) this.#steps(view);
    if (changed.has("pipeline")) this.#pipeline(view);
    if (changed.has("usage")) $("usage").textContent = view.usage || "";
    if (changed.has("pending")) (view.pending.length ? this.showInterrupts(view.pending) : this.hideInterrupts());
    if (changed.has("state")) this.#state(view);
    if (changed.has("status") || changed.has("pending")) this.status(view);
  }

  #item(item) {
    if (!item) return;
    let node = this.nodes.get(item.id);
    if (!node) {
      node = createItem(item);
      this.nodes.set(item.id, node);
      $("transcript").append(node);
      node.scrollIntoView({ block: "end" });
    }
    fillItem(node, item);
  }

  #steps(view) {
    $("steps").replaceChildren(
      ...view.steps.map((step) => {
        const item = el("li", { className: step.state, textContent: step.name });
        item.dataset.step = step.name;
        return item;
      }),
    );
  }

  /** The shared state as a readable list (the plan's steps drawn apart, as a checklist). */
  #state(view) {
    const state = view.state && typeof view.state === "object" && !Array.isArray(view.state) ? view.state : { value: view.state };
    const rows = Object.entries(state)
      .filter(([key]) => key !== "steps")
      .flatMap(([key, value]) => [el("dt", { textContent: key }), el("dd", { textContent: shortText(value, 120) })]);
    $("state").replaceChildren(...rows);
    const steps = Array.isArray(state.steps) ? state.steps : [];
    $("plan").replaceChildren(
      ...steps.map((step) => {
        const status = String(step?.status || "pending");
        const item = el("li", { className: status, textContent: `${STEP_MARKS[status] || "○"} ${step?.description ?? ""}` });
        item.dataset.status = status;
        return item;
      }),
    );
  }

  #pipeline(view) {
    const list = $("pipeline");
    for (const entry of view.pipeline.slice(list.children.length)) {
      const details = entry.details.map(([key, text]) => `${key}: ${text}`).join(" · ");
      list.append(el("li", {}, el("strong", { textContent: entry.eventType }), details ? el("span", { className: "details", textContent: details }) : ""));
    }
  }

  status(view) {
    $("status").textContent = view.status;
    const waiting = view.pending.length > 0;
    $("send").disabled = waiting; // while a run goes, a message waits its turn (queued)
    $("send").title = waiting ? "Answer the agent's question above (or dismiss it) first." : "";
    $("cancel").disabled = !view.running;
  }

  /** The messages waiting for their turn on the gateway, in order. */
  queued(entries) {
    $("queued").replaceChildren(...entries.map((entry) => el("li", { textContent: entry.text })));
    $("queued").hidden = entries.length === 0;
  }

  showInterrupts(pending) {
    const form = $("interrupts");
    this.forms = pending.map(interruptForm);
    const submit = el("button", { type: "submit", textContent: "Send answer" });
    submit.dataset.testid = "answer";
    const dismiss = el("button", { type: "button", className: "secondary", textContent: "Dismiss" });
    dismiss.dataset.testid = "dismiss";
    dismiss.addEventListener("click", () => this.onAnswer(this.forms.map((f) => f.read("cancelled"))));
    form.replaceChildren(...this.forms.map((f) => f.element), submit, dismiss);
    form.hidden = false;
    form.querySelector("input")?.focus();
  }

  hideInterrupts() {
    $("interrupts").hidden = true;
    $("interrupts").replaceChildren();
    this.forms = [];
  }

  answers(status) {
    return this.forms.map((f) => f.read(status));
  }
}
