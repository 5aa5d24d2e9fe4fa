/** The shared base of the wire contract: paths, limits, ids, timestamps and the error answer. */
import { z } from "zod";

export const API_BASE_PATH = "/api/agent-notify/v1";
/** The console page, under Koishi's UI path. */
export const CONSOLE_PAGE_PATH = "/anon-notify";
export const DEFAULT_ENDPOINT = `http://127.0.0.1:5140${API_BASE_PATH}/events`;
export const PROTOCOL_VERSIONS = { events: 1, commands: 3 } as const;

export const LIMITS = {
  idChars: 128,
  sourceChars: 120,
  taskChars: 200,
  summaryChars: 1200,
  detailsBytes: 4 * 1024,
  /** `details` nesting: `{}` is 1 level, `{"a": {}}` 2. */
  detailsDepth: 8,
  /** Any request body's nesting, checked right after parsing. */
  jsonDepth: 32,
  urlChars: 2048,
  eventBodyBytes: 64 * 1024,
  /** A heartbeat, over HTTP or as one stream frame: the largest valid one (every character escaped to six bytes) is under 6 KiB. */
  heartbeatBodyBytes: 8 * 1024,
  /** `POST /events/batch`: events per request, and the whole body. */
  eventBatchMax: 32,
  eventBatchBytes: 256 * 1024,
  operatorBodyBytes: 12 * 1024 * 1024,
  instructionChars: 4000,
  previewChars: 200,
  projectChars: 200,
  modelChars: 200,
  imagesPerCommand: 4,
  imageBytes: 4 * 1024 * 1024,
  commandImageBytes: 8 * 1024 * 1024,
  imageBudgetBytes: 32 * 1024 * 1024,
  commandListMax: 50,
  longPollMaxMs: 25_000,
  retryAfterMaxMs: 60_000,
  muteDefaultMinutes: 60,
  muteMaxMinutes: 7 * 24 * 60,
} as const;

/** Replaces the last path segment of the configured events endpoint, e.g. `events` → `sessions/heartbeat`. */
export function endpointUrl(eventsEndpoint: string, path: string): string {
  const url = new URL(eventsEndpoint);
  url.pathname = `${url.pathname.replace(/\/[^/]*$/, "")}/${path.replace(/^\//, "")}`;
  url.search = "";
  return url.toString();
}

type Words<S extends string> = S extends `${infer Head} ${infer Tail}` ? [Head, ...Words<Tail>] : [S];
/** A word list written as one string, typed as its tuple of words (for z.enum). */
export const words = <const S extends string>(list: S) => list.split(" ") as Words<S>;

export const Id = z
  .string()
  .min(1)
  .max(LIMITS.idChars)
  .regex(/^[A-Za-z0-9._:-]+$/, "must be 1-128 characters of A-Z a-z 0-9 . _ : -");
export const Timestamp = z.iso.datetime({ offset: false });

export const nonNegativeSafeInt = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
export const positiveSafeInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** An http(s) URL as the parser normalises it; whitespace and controls are refused, since the parser silently drops tabs and line breaks. */
export const httpUrl = z
  .string()
  .max(LIMITS.urlChars)
  .refine((value) => !/[\p{Cc}\p{Z}]/u.test(value), "must not contain whitespace or control characters")
  .refine((value) => {
    try {
      const { protocol } = new URL(value);
      return protocol === "http:" || protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an http(s) URL")
  .transform((value) => new URL(value).href)
  .pipe(z.string().max(LIMITS.urlChars));

/** Text shown on one line: line breaks and other control or separator characters become one space each run. */
export function oneLine(maxChars: number) {
  return z
    .string()
    .max(maxChars)
    .transform((value) => value.replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, " "));
}

/** Whether `value` nests deeper than `maxDepth` (`{}` is one); iterative and bounded, so any depth or a cycle is safe to check. */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== "object") continue;
    if (depth + 1 > maxDepth) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether text survives a database text column byte for byte: SQLite cuts at NUL, and UTF-8 cannot carry an unpaired surrogate. */
export function isStorableText(text: string): boolean {
  return !text.includes("\0") && !UNPAIRED_SURROGATE.test(text);
}
export const NOT_STORABLE = "must not contain NUL or unpaired surrogates";

export const Details = z
  .record(z.string(), z.unknown())
  .refine((d) => !nestsDeeperThan(d, LIMITS.detailsDepth), { message: `must nest at most ${LIMITS.detailsDepth} levels` })
  .refine((d) => Buffer.byteLength(JSON.stringify(d), "utf8") <= LIMITS.detailsBytes, {
    message: `must serialise to at most ${LIMITS.detailsBytes} bytes`,
  });

export const ErrorCode = z.enum(
  words(
    "unauthorized payload_too_large invalid_json invalid_request invalid_context_usage idempotency_key_reused rate_limited not_ready service_missing not_found session_offline session_in_use event_session_mismatch delivery_started already_accepted lease_mismatch image_budget_exceeded invalid_image images_not_supported capability_missing operator_disabled already_decided approval_expired approval_mismatch too_many_approvals not_grantable operator_decisions_off operator_token_reachable command_incomplete host_offline host_ambiguous unknown_project start_refused pairing_code_invalid internal_error",
  ),
);
export type ErrorCode = z.infer<typeof ErrorCode>;

export const ErrorAnswer = z.object({
  error: ErrorCode,
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  /** With `service_missing`: the Koishi services the server is waiting for, e.g. `["database"]`. */
  missing: z.array(z.string()).optional(),
  /** With `already_decided` and `approval_expired`: the approval's state now. */
  state: z.string().optional(),
});

export function wireIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join("."), message: issue.message }));
}

/** One line for a person: `path: message; …`, with `root` naming an issue about the whole value. */
export function formatIssues(error: z.ZodError, root = "(root)"): string {
  return wireIssues(error)
    .map((issue) => `${issue.path || root}: ${issue.message}`)
    .join("; ");
}
