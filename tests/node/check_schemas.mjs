// Checks JSON documents (a JSON object on stdin: {"requests": [...], "events": [...], "core": "1.0" | "0.0.59"})
// against @ag-ui/core's own zod schemas (1.0 exports them from "@ag-ui/core/schemas"): RunAgentInputSchema for each request, EventSchemas for each event.
// Prints {"ok": bool, "failures": [{"kind", "index", "error"}]}.
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { requests = [], events = [], core = "1.0" } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const schemas = core === "0.0.59" ? await import("ag-ui-core-0059") : await import("@ag-ui/core/schemas");
const failures = [];
for (const [kind, list, schema] of [
  ["request", requests, schemas.RunAgentInputSchema],
  ["event", events, schemas.EventSchemas],
]) {
  list.forEach((item, index) => {
    const parsed = schema.safeParse(item);
    if (!parsed.success) failures.push({ kind, index, type: item?.type ?? null, error: String(parsed.error).slice(0, 600) });
  });
}
process.stdout.write(JSON.stringify({ ok: failures.length === 0, failures }));
