/** Pairing: a short-lived code a Pi exchanges once for the agent token and the recipient. */
import { z } from "zod";

/** No 0/O, 1/I/L: a code read off a terminal and typed again is typed right. */
export const PAIRING_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
export const PAIRING_CODE_CHARS = 8;
export const PAIRING_TTL_MS = 15 * 60_000;
/** The route under the API base path; the code rides in the link's fragment, never in a URL sent. */
export const PAIRING_PATH = "/pair";

/** A code as typed (any case, spaces and dashes) in the form that was issued. */
export function normalisePairingCode(raw: string): string {
  return raw.replace(/[\s-]/g, "").toUpperCase();
}

/** Two groups of four, as printed. */
export function formatPairingCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

export const PairRequest = z.strictObject({ code: z.string().min(1).max(64) });

export const PairAnswer = z.object({
  token: z.string().min(1),
  recipient: z.object({ qq: z.string(), anon_qq: z.string() }),
  /** false: a server without a chat; the recipient's numbers are placeholders nothing is sent to. */
  chat: z.boolean(),
});
export type PairAnswer = z.infer<typeof PairAnswer>;
