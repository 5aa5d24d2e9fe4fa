/** The triggers' surface: `POST /triggers/{name}` (GitHub's at `/triggers/github`), signed by the sender, no bearer token;
 * and the owner's `PUT /operator/triggers/{name}/keys`. */
import type { Context } from "koishi";
import { KeyMapping, TRIGGER_BODY_BYTES } from "../../protocol/triggers.ts";
import { parseWith } from "../../common/domain-error.ts";
import { json, parseJson, type HttpApi } from "../http/api.ts";
import type { TriggerService } from "./service.ts";

export const TriggerRoutes = {
  name: "notify-webhook-triggers",
  reusable: true,
  apply(ctx: Context, { api, triggers }: { api: HttpApi; triggers: TriggerService }) {
    api.route(ctx, { method: "POST", path: "/triggers/:name", auth: "signed", maxBytes: TRIGGER_BODY_BYTES }, async (request) => {
      // The signature is checked over the bytes as they came, before anything reads them as JSON.
      const trigger = triggers.verify(request.params.name ?? "", request.header, request.raw, request.remoteAddress);
      const answer = await triggers.accept(trigger, request.header, parseJson(request.raw));
      return json(answer.state === "queued" ? 202 : 200, answer);
    });
    api.route(ctx, { method: "PUT", path: "/operator/triggers/:name/keys", auth: "operator" }, async (request) =>
      json(200, await triggers.mapKey(request.params.name ?? "", parseWith(KeyMapping, request.body))),
    );
  },
};
