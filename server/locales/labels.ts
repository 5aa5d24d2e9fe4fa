/** How a notice's status is named in the texts people read (direct notices, mute digests). Pure. */
import type { EventStatus } from "../../protocol/events.ts";
import type { Say } from "./load.ts";

export function statusLabel(status: EventStatus, say: Say): string {
  return say(`anon-notify.statuses.${status}`);
}
