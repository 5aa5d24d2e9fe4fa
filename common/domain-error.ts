/** The server's domain error, a refusal named by a protocol error code. Nothing here knows HTTP: only http/error-status.ts turns a code into a status. */
import type { z } from "zod";
import { wireIssues, type ErrorCode } from "../protocol/wire.ts";

export type WireIssue = ReturnType<typeof wireIssues>[number];

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly issues: WireIssue[] | undefined;
  /** How long the caller should wait before trying again, when the refusal is temporary. */
  readonly retryAfterSeconds: number | undefined;
  /** The state of what was refused, when the caller needs it to understand (an approval already decided). */
  readonly state: string | undefined;

  constructor(code: ErrorCode, options: { issues?: WireIssue[]; retryAfterSeconds?: number; state?: string } = {}) {
    super(code);
    this.name = "DomainError";
    this.code = code;
    this.issues = options.issues;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.state = options.state;
  }
}

/** Validates `value` with `schema`, or throws `code` (default `invalid_request`) with the wire's issue list. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, code: ErrorCode = "invalid_request"): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new DomainError(code, { issues: wireIssues(result.error) });
  return result.data;
}
