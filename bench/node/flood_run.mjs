// What the Node benchmark clients share: the body of a `/flood COUNT` run (fresh thread and run ids each time)
// and a count of the SSE records in a chunk.
export function floodBody(count) {
  return JSON.stringify({
    threadId: `bench-${Math.random().toString(16).slice(2)}${Math.random().toString(16).slice(2)}`,
    runId: `run-${Math.random().toString(16).slice(2)}`,
    state: {},
    messages: [{ id: "m", role: "user", content: `/flood ${count}` }],
    tools: [],
    context: [],
    // BENCH_PLAIN: a plain AG-UI request, whose thread keeps its conversation (bench/flood.py --plain).
    forwardedProps: process.env.BENCH_PLAIN ? {} : { iacCode: { schemaVersion: 1, rosInvocationId: "bench", cwd: "/tmp/bench" } },
  });
}

// SSE records counted by their "data:" field (LF or CRLF framing alike; JSON keys are quoted, so no false hits).
export function countRecords(value) {
  let events = 0;
  for (let i = 4; i < value.length; i++) {
    if (value[i] === 58 && value[i - 1] === 97 && value[i - 2] === 116 && value[i - 3] === 97 && value[i - 4] === 100) events++;
  }
  return events;
}
