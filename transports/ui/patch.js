// RFC 6902 JSON Patch for the page's copy of the shared state and of activities. The gateway has already applied
// every patch it sends to the same document (with the reference implementation, `jsonpatch`), so one that fails
// here means the page's copy is out of step: the caller keeps its document and says so.

function unescape(token) {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function pointer(path) {
  if (path === "") return [];
  if (!path.startsWith("/")) throw new Error(`not a JSON pointer: ${path}`);
  return path.slice(1).split("/").map(unescape);
}

function parentOf(doc, tokens) {
  let node = doc;
  for (const token of tokens.slice(0, -1)) {
    if (node === null || typeof node !== "object" || !(token in node)) throw new Error(`no member ${token}`);
    node = node[token];
  }
  if (node === null || typeof node !== "object") throw new Error("the parent is not a container");
  return node;
}

function index(array, token, adding) {
  if (adding && token === "-") return array.length;
  if (!/^(0|[1-9][0-9]*)$/.test(token)) throw new Error(`not an array index: ${token}`);
  const at = Number(token);
  if (at > array.length || (!adding && at === array.length)) throw new Error(`index out of range: ${token}`);
  return at;
}

function get(doc, tokens) {
  if (!tokens.length) return doc;
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent[index(parent, last, false)];
  if (!(last in parent)) throw new Error(`no member ${last}`);
  return parent[last];
}

function remove(doc, tokens) {
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent.splice(index(parent, last, false), 1)[0];
  if (!(last in parent)) throw new Error(`no member ${last}`);
  const value = parent[last];
  delete parent[last];
  return value;
}

function add(doc, tokens, value) {
  if (!tokens.length) return value;
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) parent.splice(index(parent, last, true), 0, value);
  else parent[last] = value;
  return doc;
}

/** `doc` with `operations` applied, as a new document; throws (leaving `doc` as it was) when one does not apply. */
export function applyPatch(doc, operations) {
  let out = structuredClone(doc);
  for (const op of operations) {
    const path = pointer(op.path);
    if (op.op === "add") out = add(out, path, structuredClone(op.value));
    else if (op.op === "remove") remove(out, path);
    else if (op.op === "replace") {
      get(out, path);
      out = path.length ? (remove(out, path), add(out, path, structuredClone(op.value))) : structuredClone(op.value);
    } else if (op.op === "move" || op.op === "copy") {
      const from = pointer(op.from);
      const value = op.op === "move" ? remove(out, from) : structuredClone(get(out, from));
      out = add(out, path, value);
    } else if (op.op === "test") {
      if (JSON.stringify(get(out, path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
    } else throw new Error(`unknown operation ${op.op}`);
  }
  return out;
}
