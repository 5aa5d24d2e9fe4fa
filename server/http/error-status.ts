/** The one mapping from domain error codes to HTTP statuses. */
import type { ErrorCode } from "../../protocol/wire.ts";
import type { DomainError } from "../../common/domain-error.ts";

export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_context_usage: 400,
  invalid_image: 400,
  command_incomplete: 400,
  unauthorized: 401,
  operator_disabled: 403,
  operator_decisions_off: 403,
  operator_token_reachable: 403,
  pairing_code_invalid: 403,
  not_found: 404,
  session_offline: 409,
  session_in_use: 409,
  event_session_mismatch: 409,
  delivery_started: 409,
  already_accepted: 409,
  lease_mismatch: 409,
  images_not_supported: 409,
  already_decided: 409,
  approval_expired: 409,
  approval_mismatch: 409,
  capability_missing: 409,
  not_grantable: 409,
  host_offline: 409,
  host_ambiguous: 409,
  payload_too_large: 413,
  idempotency_key_reused: 422,
  unknown_project: 422,
  start_refused: 422,
  rate_limited: 429,
  too_many_approvals: 429,
  internal_error: 500,
  not_ready: 503,
  service_missing: 503,
  image_budget_exceeded: 507,
};

export interface JsonAnswer {
  status: number;
  body: unknown;
  headers?: Readonly<Record<string, string>>;
}

export function json(status: number, body: unknown, headers?: Record<string, string>): JsonAnswer {
  return headers ? { status, body, headers } : { status, body };
}

/** `{"error": code, "issues"?, "state"?}` with the code's status, and `Retry-After` in whole seconds when given. */
export function errorAnswer(error: DomainError): JsonAnswer {
  const body = { error: error.code, ...(error.issues ? { issues: error.issues } : {}), ...(error.state ? { state: error.state } : {}) };
  const headers = error.retryAfterSeconds === undefined ? undefined : { "Retry-After": String(Math.max(1, Math.ceil(error.retryAfterSeconds))) };
  return json(HTTP_STATUS[error.code], body, headers);
}
