/** The one mapping from domain error codes to HTTP statuses. */
import { words, type ErrorCode } from "../../protocol/wire.ts";
import type { DomainError } from "../../common/domain-error.ts";

/** Each status with the codes it answers; `satisfies` makes a new code fail to compile until it is listed here. */
const CODES_BY_STATUS = {
  400: words("invalid_json invalid_request invalid_context_usage invalid_image command_incomplete"),
  401: words("unauthorized"),
  403: words("operator_disabled operator_decisions_off operator_token_reachable pairing_code_invalid"),
  404: words("not_found"),
  409: words(
    "session_offline session_in_use event_session_mismatch delivery_started already_accepted lease_mismatch images_not_supported already_decided approval_expired approval_mismatch capability_missing not_grantable host_offline host_ambiguous",
  ),
  413: words("payload_too_large"),
  422: words("idempotency_key_reused unknown_project start_refused"),
  429: words("rate_limited too_many_approvals"),
  500: words("internal_error"),
  503: words("not_ready service_missing"),
  507: words("image_budget_exceeded"),
} satisfies Record<number, ErrorCode[]>;

export const HTTP_STATUS = Object.fromEntries(
  Object.entries(CODES_BY_STATUS).flatMap(([status, codes]) => codes.map((code) => [code, Number(status)])),
) as Readonly<Record<(typeof CODES_BY_STATUS)[keyof typeof CODES_BY_STATUS][number], number>> satisfies Readonly<Record<ErrorCode, number>>;

export type JsonAnswer = { status: number; body: unknown; headers?: Readonly<Record<string, string>> };

export function json(status: number, body: unknown, headers?: Record<string, string>): JsonAnswer {
  return headers ? { status, body, headers } : { status, body };
}

/** `{"error": code, "issues"?, "state"?}` with the code's status, and `Retry-After` in whole seconds when given. */
export function errorAnswer(error: DomainError): JsonAnswer {
  const body = { error: error.code, ...(error.issues ? { issues: error.issues } : {}), ...(error.state ? { state: error.state } : {}) };
  const headers = error.retryAfterSeconds === undefined ? undefined : { "Retry-After": String(Math.max(1, Math.ceil(error.retryAfterSeconds))) };
  return json(HTTP_STATUS[error.code], body, headers);
}
