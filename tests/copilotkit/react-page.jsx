// The React test page: CopilotKit's React provider (@copilotkit/react-core 1.74, its v2 API) with the gateway as its
// runtime (`?runtime=<gateway>/copilotkit`, `&transport=single` for the single route). It renders the agent's
// messages and shared state as any app would; a frontend tool (`confirm`) runs in the page. window.harness is what
// the test drives; every CopilotKit error and console warning is kept.
import React, { useEffect } from "react";
import { createRoot } from "react-dom/client";
import { CopilotKitProvider, useAgent, useCopilotKit, useFrontendTool } from "@copilotkit/react-core/v2";
import { confirmTool, keptConsole } from "./shared.mjs";

const asked = new URLSearchParams(location.search);
const problems = keptConsole(); // and CopilotKit's errors, below
const calls = [];

function Conversation() {
  const { agent, isReady } = useAgent({ agentId: asked.get("agent") || "default" });
  const { copilotkit } = useCopilotKit();
  useFrontendTool(confirmTool(calls));
  useEffect(() => {
    if (!isReady) return undefined;
    const subscription = copilotkit.subscribe({ onError: ({ code, error }) => problems.push(`${code}: ${error?.message ?? error}`) });
    window.harness = {
      async send(text) {
        agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
        await copilotkit.runAgent({ agent });
      },
      // A reload: the page opens on the thread it had, and CopilotKit joins it.
      async join(threadId) {
        agent.threadId = threadId;
        await copilotkit.connectAgent({ agent });
      },
      setState: (state) => agent.setState(state),
      threadId: () => agent.threadId,
      calls: () => [...calls],
      problems: () => [...problems],
    };
    document.body.dataset.ready = "true";
    return () => subscription.unsubscribe();
  }, [agent, copilotkit, isReady]);
  return (
    <main>
      <ol id="messages">
        {agent.messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {typeof message.content === "string" ? message.content : ""}
          </li>
        ))}
      </ol>
      <pre id="state">{JSON.stringify(agent.state ?? {})}</pre>
    </main>
  );
}

createRoot(document.getElementById("root")).render(
  <CopilotKitProvider runtimeUrl={asked.get("runtime")} useSingleEndpoint={asked.get("transport") === "single"}>
    <Conversation />
  </CopilotKitProvider>,
);
