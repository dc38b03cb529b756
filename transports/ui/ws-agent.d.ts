import { AbstractAgent, type AgentConfig } from "@ag-ui/client";

export interface MuxSocketOptions {
  /** ws:// or wss:// URL of the gateway's `/ws`. */
  url: string;
  /** Bearer token; a single-use ticket is fetched with it before each connect. */
  token?: () => string | Promise<string>;
  /** Grace window each run asks for, in seconds (default 60; the gateway caps it). */
  graceSeconds?: number;
  /** A WebSocket class (default: the global one; in Node 20, e.g. the `ws` package's). */
  WebSocket?: typeof WebSocket;
  fetch?: typeof fetch;
  onStatus?: (status: string) => void;
}

export declare class MuxSocket {
  constructor(options: MuxSocketOptions);
  static for(url: string, options?: Omit<MuxSocketOptions, "url">): MuxSocket;
  run(input: object, handlers: { id?: string; agent?: string; onEvent: (event: any, eventId: string | null) => void; onError?: (error: Error) => void }): Promise<{ cancel(): void }>;
  attach(
    run: { threadId: string; runId: string; rosInvocationId: string },
    lastEventId: string | null,
    handlers: { id?: string; onEvent: (event: any, eventId: string | null) => void; onError?: (error: Error) => void },
  ): Promise<{ cancel(): void }>;
  connect(
    thread: { threadId: string; userId?: string },
    lastEventId: string | null,
    handlers: { id: string; onEvent: (event: any, eventId: string | null) => void; onClosed?: () => void; onError?: (error: Error) => void },
  ): Promise<{ close(): void }>;
  cancel(id: string): void;
  close(): void;
}

export interface WebSocketAgentConfig extends AgentConfig {
  url: string;
  token?: string | (() => string | Promise<string>);
  graceSeconds?: number;
  /** The gateway's agent (`GET /agents`) that runs this agent's runs; unset: the gateway's default agent. */
  agent?: string;
  WebSocket?: typeof WebSocket;
  fetch?: typeof fetch;
}

export declare class WebSocketAgent extends AbstractAgent {
  constructor(config: WebSocketAgentConfig);
  url: string;
  agent?: string;
}
