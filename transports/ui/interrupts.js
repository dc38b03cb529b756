// Interrupt forms built from each interrupt's responseSchema, message and metadata. Every builder returns an
// explicit `{element, read}`: `read()` gives the value the user chose (undefined when none).

/** A readable label for a schema property: its `title`, else its key in words ("candidateId" -> "Candidate"). */
export function labelFor(name, schema) {
  if (schema && typeof schema.title === "string" && schema.title.trim()) return schema.title;
  const words = name
    .replace(/Id$/, "")
    .replace(/[_-]+/g, " ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .trim()
    .toLowerCase();
  return words ? words[0].toUpperCase() + words.slice(1) : name;
}

function optionLabel(metadata, value) {
  const option = (metadata?.options || []).find((o) => (typeof o === "object" && o !== null ? o.value : o) === value);
  return option && typeof option === "object" ? option.label || String(value) : String(value);
}

/** An enum, or anyOf/oneOf mixing an enum with free text; null for other schemas. */
export function choiceSchema(schema) {
  if (Array.isArray(schema.enum)) return { values: schema.enum, freeText: false };
  const variants = schema.anyOf || schema.oneOf || [];
  const withEnum = variants.find((v) => Array.isArray(v.enum));
  if (!withEnum) return null;
  return { values: withEnum.enum, freeText: variants.some((v) => v.type === "string" && !v.enum) };
}

/** A top-level oneOf of `{selectedId: enum}` and `{freeText: string}` objects; null for other schemas. */
export function selectionOrText(schema) {
  const variants = schema.oneOf || schema.anyOf;
  if (!Array.isArray(variants)) return null;
  const selected = variants.map((v) => v?.properties?.selectedId).find((p) => p && Array.isArray(p.enum));
  if (!selected) return null;
  return { selected, freeText: variants.some((v) => v?.properties?.freeText) };
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function choiceField(interrupt, name, schema, choice, required) {
  const id = `f-${interrupt.id}-${name}`;
  const group = el("fieldset", {}, el("legend", { textContent: labelFor(name, schema) }));
  for (const value of choice.values) {
    const input = el("input", { type: "radio", name: id, value: JSON.stringify(value), required });
    input.dataset.testid = `choice-${value}`;
    group.append(el("label", {}, input, " ", optionLabel(interrupt.metadata, value)));
  }
  let text = null;
  if (choice.freeText) {
    text = el("input", { type: "text", id: `${id}-text` });
    text.dataset.testid = "free-text";
    text.addEventListener("input", () => group.querySelectorAll("input[type=radio]").forEach((r) => (r.required = required && !text.value)));
    group.append(el("label", { htmlFor: `${id}-text`, textContent: "Or write your answer" }), text);
  }
  const read = () => {
    if (text && text.value) return text.value;
    const picked = group.querySelector("input[type=radio]:checked");
    return picked ? JSON.parse(picked.value) : undefined;
  };
  return { element: group, read };
}

function inputField(interrupt, name, schema, required) {
  const id = `f-${interrupt.id}-${name}`;
  let input;
  let read;
  if (schema.type === "boolean") {
    input = el("input", { type: "checkbox", id });
    read = () => input.checked;
  } else if (schema.type === "number" || schema.type === "integer") {
    input = el("input", { type: "number", id, required });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else {
    input = el("input", { type: "text", id, required });
    read = () => (input.value === "" ? undefined : input.value);
  }
  input.dataset.testid = `field-${name}`;
  return { element: el("div", {}, el("label", { htmlFor: id, textContent: labelFor(name, schema) }), input), read };
}

/** One property of an interrupt's responseSchema as a form field. */
export function fieldFor(interrupt, name, schema, required) {
  const choice = choiceSchema(schema);
  return choice ? choiceField(interrupt, name, schema, choice, required) : inputField(interrupt, name, schema, required);
}

/** One interrupt as a fieldset; `read(status)` gives its resume entry. */
export function interruptForm(interrupt) {
  const meta = interrupt.metadata || {};
  const box = el("fieldset", {}, el("legend", { textContent: meta.title || labelFor(interrupt.reason || "question", {}) }));
  box.dataset.interruptId = interrupt.id;
  box.append(el("p", { className: "message", textContent: interrupt.message || "" }));
  const expires = interrupt.expiresAt && `Expires at ${new Date(interrupt.expiresAt).toLocaleString()}`;
  const shown = new Set([interrupt.message || ""]); // a summary that repeats the question is not shown again
  for (const extra of [meta.purpose, meta.safeSummary, expires]) {
    if (extra && !shown.has(extra) && !(interrupt.message || "").startsWith(extra)) box.append(el("p", { className: "note", textContent: extra }));
    shown.add(extra);
  }
  const schema = interrupt.responseSchema || { type: "object", properties: {} };
  const either = selectionOrText(schema);
  if (either) {
    // The A2A agent's selections: {"selectedId": <option>} or, where allowed, {"freeText": "..."}.
    const field = choiceField(interrupt, "selectedId", either.selected, { values: either.selected.enum, freeText: either.freeText }, true);
    box.append(field.element);
    const read = (status) => {
      if (status === "cancelled") return { interruptId: interrupt.id, status };
      const value = field.read();
      const picked = either.selected.enum.includes(value);
      return { interruptId: interrupt.id, status, payload: picked ? { selectedId: value } : { freeText: value } };
    };
    return { element: box, read };
  }
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, property]) => {
    const field = fieldFor(interrupt, name, property, required.has(name));
    box.append(field.element);
    return [name, field];
  });
  const read = (status) => {
    if (status === "cancelled") return { interruptId: interrupt.id, status };
    const payload = {};
    for (const [name, field] of fields) {
      const value = field.read();
      if (value !== undefined) payload[name] = value;
    }
    return { interruptId: interrupt.id, status, payload };
  };
  return { element: box, read };
}
