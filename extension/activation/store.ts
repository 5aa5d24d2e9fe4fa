/** Writing activation records through Pi (`appendEntry`): a failed write, and what a fork or clone inherits. */
import type { ExtensionAPI, ExtensionContext, SessionStartEvent } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { ACTIVATION_CUSTOM_TYPE, ACTIVATION_VERSION, readActivationFromFile, type ActivationReading, type ActivationRecord } from "../../activation.ts";

/** Appends a record; on failure returns why, after recording `fallbackActive` behind it: Pi 0.87.1 keeps a failed entry in memory, where a reload
 * would find it (1.x rolls back, and then the second append fails too). */
export function writeActivation(pi: ExtensionAPI, record: ActivationRecord, fallbackActive: boolean): string | undefined {
  try {
    pi.appendEntry(ACTIVATION_CUSTOM_TYPE, record);
    return undefined;
  } catch (error) {
    try {
      pi.appendEntry(ACTIVATION_CUSTOM_TYPE, { ...record, active: fallbackActive });
    } catch {
      // The file is still unwritable: nothing more to keep consistent.
    }
    return errorText(error);
  }
}

/** Fork and clone inherit the source's current session-wide value and record it as a snapshot. */
export function inheritActivation(pi: ExtensionAPI, event: SessionStartEvent, ctx: ExtensionContext, copied: ActivationReading, failed: (why: string) => void) {
  const source = event.previousSessionFile ?? ctx.sessionManager.getHeader()?.parentSession;
  const reading = (source ? readActivationFromFile(source) : undefined) ?? copied;
  const failure = writeActivation(pi, { version: ACTIVATION_VERSION, active: reading.active, via: "inherit" }, false);
  if (!failure) return reading.active;
  failed(failure);
  return false;
}
