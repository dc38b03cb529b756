// WebSocketAgent: an @ag-ui/client agent that runs over the gateway's multiplexed WebSocket. Swap
// `new HttpAgent({ url })` for `new WebSocketAgent({ url })` and keep everything else (runAgent, subscribers,
// messages, state, pendingInterrupts, resume). Runs share one socket per URL, survive a dropped connection
// (reconnect and reattach from the last event), and abortRun() cancels the run on the gateway. connect() joins
// the thread (connectAgent(): its newest run, replayed and then followed live), as a chat page does on opening.
import { AbstractAgent } from "@ag-ui/client";
import { Observable } from "rxjs";

import { MuxSocket } from "./ws-mux.js";

export { MuxSocket };

export class WebSocketAgent extends AbstractAgent {
  /** @param {import("./ws-agent").WebSocketAgentConfig} config */
  constructor({ url, token, graceSeconds, agent, WebSocket, fetch, ...config }) {
    super(config);
    this.url = url;
    this.agent = agent; // the gateway's agent that runs this agent's runs (unset: the gateway's default)
    this.socketOptions = { token: typeof token === "function" ? token : () => token || "", graceSeconds, WebSocket, fetch };
    this.current = null;
  }

  run(input) {
    return new Observable((subscriber) => {
      let ended = false;
      const mux = MuxSocket.for(this.url, this.socketOptions);
      const started = mux.run(input, {
        agent: this.agent,
        onEvent: (event) => {
          subscriber.next(event);
          if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
            ended = true;
            subscriber.complete();
          }
        },
        onError: (error) => {
          ended = true;
          subscriber.error(error);
        },
      });
      this.current = started;
      return () => {
        if (!ended) started.then((run) => run.cancel()); // unsubscribed early (abortRun): cancel on the gateway
      };
    });
  }

  connect(input) {
    return new Observable((subscriber) => {
      let ended = false;
      const finish = () => {
        ended = true;
        subscriber.complete();
      };
      const mux = MuxSocket.for(this.url, this.socketOptions);
      const joined = mux.connect({ threadId: input.threadId, userId: input.forwardedProps?.iacCode?.userId }, null, {
        id: `connect-${input.runId}`,
        onEvent: (event) => {
          subscriber.next(event);
          if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") finish();
        },
        onClosed: finish,
        onError: (error) => {
          ended = true;
          subscriber.error(error);
        },
      });
      return () => {
        if (!ended) joined.then((stream) => stream.close());
      };
    });
  }

  abortRun() {
    this.current?.then((run) => run.cancel());
    super.abortRun();
  }

  clone() {
    const copy = super.clone();
    copy.url = this.url;
    copy.agent = this.agent;
    copy.socketOptions = this.socketOptions;
    return copy;
  }
}
