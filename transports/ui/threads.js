// The page's thread list (GET /threads): the caller's threads newest first, each opened with its whole
// conversation (the join hydrates it), renamed (PATCH) or erased (DELETE). Nothing here keeps a token.

import { authHeaders } from "./transport.js";

async function call(method, path, token, body) {
  const headers = { ...authHeaders(token), ...(body ? { "content-type": "application/json" } : {}) };
  const response = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status}`);
  return response.status === 204 ? null : response.json();
}

export class ThreadList {
  /** `list` is the element to fill; `actions`: {open(threadId, agentId), erased(threadId), token(), current()}. */
  constructor(list, actions) {
    this.list = list;
    this.actions = actions;
  }

  async refresh() {
    let found;
    try {
      found = await call("GET", "/threads?limit=50", this.actions.token());
    } catch {
      return; // the page works without its list (an old gateway, or no credential yet)
    }
    this.list.replaceChildren(...found.threads.map((thread) => this.item(thread)));
  }

  item(thread) {
    const item = document.createElement("li");
    item.dataset.threadId = thread.threadId;
    if (thread.threadId === this.actions.current()) item.setAttribute("aria-current", "true");
    const open = document.createElement("button");
    open.type = "button";
    open.className = "secondary open";
    open.textContent = thread.title || thread.threadId;
    open.title = `${thread.messageCount} messages, ${thread.status}`;
    open.addEventListener("click", () => this.actions.open(thread.threadId, thread.agentId));
    const rename = this.button("Rename", async () => {
      const title = window.prompt("Title", thread.title || "");
      if (title === null) return;
      await call("PATCH", `/threads/${encodeURIComponent(thread.threadId)}`, this.actions.token(), { title });
      await this.refresh();
    });
    const erase = this.button("Delete", async () => {
      await call("DELETE", `/threads/${encodeURIComponent(thread.threadId)}`, this.actions.token());
      this.actions.erased(thread.threadId);
      await this.refresh();
    });
    item.append(open, rename, erase);
    return item;
  }

  button(label, action) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `secondary ${label.toLowerCase()}`;
    button.textContent = label;
    button.addEventListener("click", () => action().catch(() => this.refresh()));
    return button;
  }
}
