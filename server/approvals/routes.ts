/** Approvals over HTTP (the agent's requests and resolutions, the owner's reads, decisions and grants)
 * and the timers that close vanished and timed-out approvals. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { ApprovalListQuery, ApprovalRequest, ApprovalResolution, GrantListQuery, OperatorApprovalDecision } from "../../protocol/approvals.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import type { SessionRegistry } from "../sessions/registry.ts";
import type { ApprovalMessenger } from "./messenger.ts";
import type { GrantService } from "./grants.ts";
import type { ApprovalService } from "./service.ts";
import { instanceText } from "../locales/load.ts";

const EXPIRY_SWEEP_MS = 15_000;
/** How long `POST /approvals` waits for the first attempt to send the request, to say truly whether it reached the owner. */
const REACH_WAIT_MS = 2_000;

export interface ApprovalRoutesDeps {
  api: HttpApi;
  approvals: ApprovalService;
  grants: GrantService;
  messenger: ApprovalMessenger;
  registry: SessionRegistry;
  /** The phone push route a pending request is handed to, when one is configured. */
  pushRoute?: string | undefined;
}

export const ApprovalRoutes = {
  name: "notify-webhook-approvals",
  reusable: true,
  apply(ctx: Context, { api, approvals, grants, messenger, registry, pushRoute }: ApprovalRoutesDeps) {
    api.offer(ctx, "approvals");
    const background = (what: string, work: Promise<void>) =>
      void work.catch((error: unknown) =>
        ctx
          .logger("notify-webhook")
          .warn(
            instanceText(ctx, "anon-notify.log.background-failed", { what: instanceText(ctx, `anon-notify.log.work.${what}`, {}), error: errorText(error) }),
          ),
      );

    // Heartbeats are frequent: only a runtime not seen before for its session is looked at.
    const runtimes = new Map<string, string>();
    ctx.effect(() =>
      registry.onChange((change) => {
        const { session_id, runtime_id } = change.entry.heartbeat;
        if (change.kind === "recorded") {
          if (runtimes.get(session_id) === runtime_id) return;
          runtimes.set(session_id, runtime_id);
          background("replaced-runtime", approvals.vanish(session_id, runtime_id));
        } else {
          runtimes.delete(session_id);
          background("vanished-session", approvals.vanish(session_id));
        }
      }),
    );
    ctx.setInterval(() => background("sweep", approvals.sweep()), EXPIRY_SWEEP_MS);
    // What a previous run of the server still owed the owner, and which sessions have open approvals.
    ctx.on("ready", () => {
      messenger.kick();
      background("load", approvals.load());
    });

    api.route(ctx, { method: "POST", path: "/approvals", auth: "agent" }, async (request) => {
      const body = parseWith(ApprovalRequest, request.body);
      const { approval, created } = await approvals.request(body);
      const reach = await messenger.reach(approval.approval_id, REACH_WAIT_MS);
      return json(created ? 201 : 200, { approval, reach, push: pushRoute && approval.state === "pending" ? pushRoute : null });
    });

    api.route(ctx, { method: "POST", path: "/approvals/:approval_id/resolution", auth: "agent" }, async (request) => {
      const body = parseWith(ApprovalResolution, request.body);
      return json(200, { approval: await approvals.resolve(request.params.approval_id ?? "", body) });
    });

    api.route(ctx, { method: "GET", path: "/operator/approvals", auth: "operator" }, async (request) => {
      const query = parseWith(ApprovalListQuery, Object.fromEntries(request.query));
      return json(200, { approvals: await approvals.list(query) });
    });

    api.route(ctx, { method: "GET", path: "/operator/approvals/:approval_id", auth: "operator" }, async (request) => {
      const approval = await approvals.find(request.params.approval_id ?? "");
      if (!approval) throw new DomainError("not_found");
      return json(200, { approval });
    });

    api.route(ctx, { method: "POST", path: "/operator/approvals/:approval_id/decision", auth: "operator" }, async (request) => {
      const body = parseWith(OperatorApprovalDecision, request.body);
      const decider = { actor: "operator", name: "operator" } as const;
      return json(200, await approvals.decide({ ...body, ref: request.params.approval_id ?? "", decider, via: "operator" }));
    });

    api.route(ctx, { method: "GET", path: "/operator/grants", auth: "operator" }, async (request) => {
      const query = parseWith(GrantListQuery, Object.fromEntries(request.query));
      return json(200, { grants: await grants.list(query) });
    });

    api.route(ctx, { method: "POST", path: "/operator/grants/:grant_id/revoke", auth: "operator" }, async (request) => {
      return json(200, await grants.revoke(request.params.grant_id ?? "", { actor: "operator", name: "operator" }));
    });
  },
};
