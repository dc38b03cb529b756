// What both test pages share: their console kept for the test, and the frontend tool the agent calls.
import { z } from "zod";

// Every console warning and error of the page (a page must log none).
export function keptConsole() {
  const lines = [];
  for (const level of ["warn", "error"]) {
    const original = console[level];
    console[level] = (...args) => {
      lines.push(`${level}: ${args.map(String).join(" ")}`);
      original(...args);
    };
  }
  return lines;
}

// The `confirm` tool: each call is kept in `calls`, and it answers "confirmed".
export function confirmTool(calls) {
  return {
    name: "confirm",
    description: "Ask the user to confirm",
    parameters: z.object({ really: z.boolean() }),
    handler: async (args) => {
      calls.push({ name: "confirm", args });
      return "confirmed";
    },
  };
}
