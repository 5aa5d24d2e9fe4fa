/** Every authenticated operator request, audited with its inputs and status, run as the `operator` actor. */
import { Id } from "../../protocol/wire.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { OperatorRequestHook } from "./api.ts";
import { HTTP_STATUS } from "./error-status.ts";
import type { AuditLog } from "../audit/store.ts";

export function auditOperatorRequests(audit: AuditLog): OperatorRequestHook {
  return async (spec, request, run) => {
    let status = 500;
    let error: string | null = null;
    try {
      const answer = await audit.as("operator", run);
      status = answer.status;
      return answer;
    } catch (thrown) {
      if (thrown instanceof DomainError) [status, error] = [HTTP_STATUS[thrown.code], thrown.code];
      throw thrown;
    } finally {
      const query = Object.fromEntries(request.query);
      const sessionId = [(request.body as { session_id?: unknown } | undefined)?.session_id, query.session_id].find((id) => Id.safeParse(id).success);
      await audit.record({
        actor: "operator",
        action: "operator.request",
        session_id: (sessionId as string | undefined) ?? null,
        subject: request.params.command_id ?? null,
        data: { method: spec.method, path: spec.path, params: request.params, query, body: request.body ?? null, status, error },
      });
    }
  };
}
