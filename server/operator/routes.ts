/** The operator service for people and scripts, under `/operator/`, with the operator token. */
import type { Context } from "koishi";
import { AuditQuery } from "../../protocol/audit.ts";
import { Id, LIMITS } from "../../protocol/wire.ts";
import {
  MuteBody,
  OperatorCancelBody,
  OperatorCreateCommand,
  OperatorListQuery,
  OperatorSessionsQuery,
  OperatorStopBody,
  UnmuteBody,
} from "../../protocol/operator.ts";
import { parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import type { OperatorService } from "./service.ts";

export const OperatorRoutes = {
  name: "notify-webhook-operator",
  reusable: true,
  apply(ctx: Context, { api, operator }: { api: HttpApi; operator: OperatorService }) {
    api.route(ctx, { method: "GET", path: "/operator/sessions", auth: "operator" }, (request) =>
      json(200, operator.sessions(parseWith(OperatorSessionsQuery, Object.fromEntries(request.query)))),
    );

    api.route(ctx, { method: "POST", path: "/operator/commands", auth: "operator", maxBytes: LIMITS.operatorBodyBytes }, async (request) => {
      const body = parseWith(OperatorCreateCommand, request.body);
      const created = await operator.createCommand({
        ...body,
        request_key: body.request_key === undefined ? null : `operator:${body.request_key}`,
        origin: "operator",
      });
      return json(created.duplicate ? 200 : 201, created);
    });

    api.route(ctx, { method: "GET", path: "/operator/commands", auth: "operator" }, async (request) => {
      const query = parseWith(OperatorListQuery, Object.fromEntries(request.query));
      return json(200, { commands: await operator.commands(query.session_id, query.limit) });
    });

    api.route(ctx, { method: "POST", path: "/operator/commands/:command_id/cancel", auth: "operator" }, async (request) => {
      const body = parseWith(OperatorCancelBody, request.body);
      await operator.cancel(body.session_id, parseWith(Id, request.params.command_id));
      return json(200, { state: "cancelled" });
    });

    api.route(ctx, { method: "GET", path: "/operator/mute", auth: "operator" }, () => json(200, { mutes: operator.mutes() }));

    api.route(ctx, { method: "POST", path: "/operator/mute", auth: "operator" }, async (request) => {
      const body = parseWith(MuteBody, request.body ?? {});
      return json(200, { mute: await operator.mute(body.session_id ?? null, body.minutes) });
    });

    api.route(ctx, { method: "DELETE", path: "/operator/mute", auth: "operator" }, async (request) => {
      const body = parseWith(UnmuteBody, request.body ?? {});
      return json(200, { ended: await operator.unmute(body.session_id ?? null) });
    });

    api.route(ctx, { method: "POST", path: "/operator/sessions/:session_id/stop", auth: "operator" }, async (request) => {
      parseWith(OperatorStopBody, request.body);
      const sessionId = parseWith(Id, request.params.session_id ?? "");
      return json(202, { command: await operator.requestStop(sessionId, "operator") });
    });

    api.route(ctx, { method: "GET", path: "/operator/audit", auth: "operator" }, async (request) =>
      json(200, await operator.audit(parseWith(AuditQuery, Object.fromEntries(request.query)))),
    );
  },
};
