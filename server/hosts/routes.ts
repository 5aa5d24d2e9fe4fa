/** The hosts' surfaces: `POST /hosts/heartbeat` and `/hosts/offline` (agent token) and `POST /operator/sessions` (operator token). */
import type { Context } from "koishi";
import { CreateSessionBody, HostHeartbeat, HostOfflineBody } from "../../protocol/hosts.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import type { HostRegistry } from "./registry.ts";
import type { StartService } from "./service.ts";

export const HostRoutes = {
  name: "notify-webhook-hosts",
  reusable: true,
  apply(ctx: Context, { api, hosts, starts }: { api: HttpApi; hosts: HostRegistry; starts: StartService }) {
    api.route(ctx, { method: "POST", path: "/hosts/heartbeat", auth: "agent" }, (request) => {
      hosts.record(parseWith(HostHeartbeat, request.body));
      return json(200, { ttl_ms: hosts.ttlMs, server_time: new Date().toISOString() });
    });
    api.route(ctx, { method: "POST", path: "/hosts/offline", auth: "agent" }, (request) => {
      const body = parseWith(HostOfflineBody, request.body);
      return json(200, { removed: hosts.remove(body.host_id, body.runtime_id) });
    });

    api.route(ctx, { method: "POST", path: "/operator/sessions", auth: "operator" }, async (request) => {
      const result = await starts.start(parseWith(CreateSessionBody, request.body), "operator");
      if (result.state === "refused") throw new DomainError("start_refused", { state: result.refusal });
      return json(result.state === "started" ? 201 : 202, result);
    });
  },
};
