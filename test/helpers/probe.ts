/**
 * A second extension loaded beside anon-notify in the same real Pi runtime: it records what
 * anon-notify publishes on the shared EventBus and lets a test act as another extension would
 * (emit `anon-notify:send`, append a raw activation entry).
 */
import type { ExtensionAPI, InlineExtension } from "@earendil-works/pi-coding-agent";
import { STATE_CHANNEL, SEND_CHANNEL, StatePayload } from "../../protocol/state-bus.ts";
import { ACTIVATION_CUSTOM_TYPE } from "../../activation.ts";

export interface Probe {
  extension: InlineExtension;
  states: StatePayload[];
  /** Latest `anon-notify:state` payload. */
  last(): StatePayload | undefined;
  send(payload: unknown): void;
  appendActivation(data: unknown): void;
}

export function probe(): Probe {
  const states: StatePayload[] = [];
  let api: ExtensionAPI | undefined;
  const live = () => {
    if (!api) throw new Error("probe extension not loaded");
    return api;
  };
  return {
    extension: {
      name: "probe",
      factory: (pi) => {
        api = pi;
        // Every payload is checked against the published schema: a wrong shape fails the test here.
        pi.events.on(STATE_CHANNEL, (data) => void states.push(StatePayload.parse(data)));
      },
    },
    states,
    last: () => states.at(-1),
    send: (payload) => live().events.emit(SEND_CHANNEL, payload),
    appendActivation: (data) => live().appendEntry(ACTIVATION_CUSTOM_TYPE, data),
  };
}
