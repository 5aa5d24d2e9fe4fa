/** The buttons an approval request carries and how a press names its approval: the id is the code plus a
 * short tag of the approval id (Telegram's 64-byte `callback_data`), so a stale button never answers a newer one. */
import { createHash } from "node:crypto";
import type { OwnerButton } from "../handover/direct.ts";
import type { ApprovalRecord } from "./decisions.ts";
import type { Voice } from "./message-rules.ts";

export type ButtonAnswer = { decision: "approved"; minutes: number | null } | { decision: "rejected"; minutes: null };

const PREFIX = "an";
/** The request's one-tap grant; `anon.approve CODE <duration>` grants other lengths. */
export const GRANT_BUTTON_MINUTES = 30;
const PATTERN = /^an:(y|n|g(\d{1,4})):([A-Z]{5}):([0-9a-f]{8})$/;

/** Eight hex digits of the approval id's SHA-256: enough to tell a reused code's approvals apart. */
export function approvalTag(approvalId: string): string {
  return createHash("sha256").update(approvalId).digest("hex").slice(0, 8);
}

export function buttonId(record: Pick<ApprovalRecord, "approval_id" | "code">, answer: ButtonAnswer): string {
  const verb = answer.decision === "rejected" ? "n" : answer.minutes === null ? "y" : `g${answer.minutes}`;
  return `${PREFIX}:${verb}:${record.code}:${approvalTag(record.approval_id)}`;
}

export function parseButtonId(id: string): { code: string; tag: string; answer: ButtonAnswer } | null {
  const match = PATTERN.exec(id);
  if (!match) return null;
  const [, verb, minutes, code, tag] = match as unknown as [string, string, string | undefined, string, string];
  const answer: ButtonAnswer =
    verb === "n" ? { decision: "rejected", minutes: null } : { decision: "approved", minutes: minutes === undefined ? null : Number(minutes) };
  if (answer.minutes === 0) return null;
  return { code, tag, answer };
}

/** Approve, Deny, and (where the server may grant the approval's rules) Approve for `grantMinutes`. */
export function approvalButtons(record: Pick<ApprovalRecord, "approval_id" | "code" | "grantable">, voice: Voice, grantMinutes: number): OwnerButton[] {
  const buttons = [
    { id: buttonId(record, { decision: "approved", minutes: null }), label: voice.say("button.approve") },
    { id: buttonId(record, { decision: "rejected", minutes: null }), label: voice.say("button.deny") },
  ];
  if (record.grantable && grantMinutes > 0)
    buttons.push({ id: buttonId(record, { decision: "approved", minutes: grantMinutes }), label: voice.say("button.grant", { minutes: grantMinutes }) });
  return buttons;
}
