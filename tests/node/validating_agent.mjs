// A TypeScript AG-UI agent that validates every request with @ag-ui/core 1.0's own RunAgentInputSchema, as a
// server built on the TypeScript SDK does, and answers with @ag-ui/encoder: a request the schema refuses gets 422
// with zod's error, and is noted. A scripted model stands in for an LLM:
//   "/tool"   calls the client's first declared tool, its arguments streamed in two pieces;
//   "/think"  reasons (with a signature: REASONING_ENCRYPTED_VALUE), then answers;
//   a tool result, or anything else: an answer that says what the history held (messages, roles, signatures),
//   so a field lost on the way up shows in the conversation.
// Usage: node validating_agent.mjs <port>; prints "ready" once listening. GET /requests: {"requests", "failures"}.
import http from "node:http";
import { EventType } from "@ag-ui/core";
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import { EventEncoder } from "@ag-ui/encoder";

const port = Number(process.argv[2]);
const requests = [];
const failures = [];

function* answer(input) {
  const { threadId, runId, messages, tools } = input;
  yield { type: EventType.RUN_STARTED, threadId, runId };
  const last = messages.at(-1) ?? {};
  const text = typeof last.content === "string" ? last.content : "";
  if (last.role === "user" && text.startsWith("/tool") && tools.length) {
    const toolCallId = `${runId}-call`;
    yield { type: EventType.TOOL_CALL_START, toolCallId, toolCallName: tools[0].name, parentMessageId: `${runId}-asks` };
    yield { type: EventType.TOOL_CALL_ARGS, toolCallId, delta: '{"really":' };
    yield { type: EventType.TOOL_CALL_ARGS, toolCallId, delta: "true}" };
    yield { type: EventType.TOOL_CALL_END, toolCallId };
    yield { type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: "success", pendingToolCallIds: [toolCallId] } };
    return;
  }
  let reply;
  if (last.role === "user" && text.startsWith("/think")) {
    const messageId = `${runId}-thinks`;
    yield { type: EventType.REASONING_START, messageId };
    yield { type: EventType.REASONING_MESSAGE_START, messageId, role: "reasoning" };
    yield { type: EventType.REASONING_MESSAGE_CONTENT, messageId, delta: "Let me think." };
    yield { type: EventType.REASONING_MESSAGE_END, messageId };
    yield { type: EventType.REASONING_ENCRYPTED_VALUE, subtype: "message", entityId: messageId, encryptedValue: `sig-turn-${messages.length}` };
    yield { type: EventType.REASONING_END, messageId };
    reply = "I thought.";
  } else if (last.role === "tool") {
    reply = `The tool said ${last.content}${last.error ? ` (error: ${last.error})` : ""}`;
  } else {
    const roles = messages.map((m) => m.role).join(",");
    const signatures = messages.filter((m) => m.encryptedValue).map((m) => m.role);
    reply = `You said: ${text} [history ${roles}; signed ${signatures.join(",") || "none"}]`;
  }
  const messageId = `${runId}-says`;
  yield { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" };
  for (const word of reply.split(" ")) yield { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: `${word} ` };
  yield { type: EventType.TEXT_MESSAGE_END, messageId };
  yield { type: EventType.RUN_FINISHED, threadId, runId };
}

const server = http.createServer(async (request, response) => {
  if (request.method === "GET" && request.url === "/requests") {
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ requests, failures }));
    return;
  }
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const raw = Buffer.concat(chunks).toString("utf8");
  requests.push(raw);
  const parsed = RunAgentInputSchema.safeParse(JSON.parse(raw));
  if (!parsed.success) {
    failures.push(String(parsed.error).slice(0, 2000));
    response.writeHead(422, { "content-type": "application/json" });
    response.end(JSON.stringify({ error: String(parsed.error) }));
    return;
  }
  const encoder = new EventEncoder({ accept: request.headers.accept });
  response.writeHead(200, { "content-type": encoder.getContentType(), "cache-control": "no-cache" });
  for (const event of answer(JSON.parse(raw))) response.write(encoder.encode(event)); // as sent: nothing the schema strips
  response.end();
});
server.listen(port, "127.0.0.1", () => process.stdout.write("ready\n"));
