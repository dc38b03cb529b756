// Replays recorded runs (a JSON array of event arrays on stdin) through @ag-ui/client's verifyEvents.
// Prints {"ok": true} or {"ok": false, "error": "..."}; any console warning also fails the check.
import { from } from "rxjs";
import { verifyEvents } from "@ag-ui/client";

const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const runs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const events = runs.flat();
let error = null;
await new Promise((resolve) => {
  from(events).pipe(verifyEvents(false)).subscribe({
    error: (err) => {
      error = String(err?.message ?? err);
      resolve();
    },
    complete: resolve,
  });
});
process.stdout.write(JSON.stringify({ ok: error === null && warnings.length === 0, error, warnings, count: events.length }));
