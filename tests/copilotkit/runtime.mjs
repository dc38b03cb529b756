// CopilotKit 1.75's own runtime (Node) in front of the gateway, as its docs wire an AG-UI agent: an HttpAgent (the
// @ag-ui/client 0.0.59 CopilotKit ships) pointed at the gateway's `POST /`. The same server serves the test page
// (page.html, and page.js: page.mjs bundled by esbuild), so the page calls the runtime on its own origin.
// Usage: node runtime.mjs <gateway URL> <port>; prints "ready" once listening.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const [gateway, port] = [process.argv[2], Number(process.argv[3])];
const runtime = new CopilotRuntime({ agents: { default: new HttpAgent({ url: `${gateway}/` }) } });
const listener = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit", activateChannels: false });
const files = { "/": ["page.html", "text/html"], "/page.js": ["dist/page.js", "text/javascript"] };

createServer((request, response) => {
  const path = new URL(request.url, "http://x").pathname;
  if (path.startsWith("/api/copilotkit")) return listener(request, response);
  const [file, type] = files[path] ?? [];
  if (!file) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { "content-type": type }).end(readFileSync(new URL(file, import.meta.url)));
}).listen(port, "127.0.0.1", () => process.stdout.write("ready\n"));
