/**
 * POST /events and GET /events/:event_id over the event intake, and the start-up load: the whole
 * API answers 503 until the receipts have been read, so nothing is answered from a half-loaded store.
 */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { Id, LIMITS } from "../../protocol/wire.ts";
import { parseWith } from "../errors.ts";
import { json, type HttpApi } from "../http/api.ts";
import type { EventIntake } from "./intake.ts";

const LOAD_RETRY_MS = 1000;

export interface EventRoutesDeps {
  api: HttpApi;
  intake: EventIntake;
}

export const EventRoutes = {
  name: "notify-webhook-events",
  reusable: true,
  apply(ctx: Context, { api, intake }: EventRoutesDeps) {
    const logger = ctx.logger("notify-webhook");
    const release = api.holdUntilReady(ctx);
    const load = async () => {
      try {
        const resumed = await intake.load();
        if (resumed > 0) logger.info("resuming %d pending events", resumed);
        release();
      } catch (error) {
        // Until the receipts can be read, every route keeps answering 503 rather than guessing.
        logger.error("cannot load event receipts (%s); retrying", errorText(error));
        ctx.setTimeout(load, LOAD_RETRY_MS);
      }
    };
    ctx.on("ready", load);
    api.offer(ctx, "events");
    api.offer(ctx, "direct");
    api.offer(ctx, "context_usage");

    api.route(ctx, { method: "POST", path: "/events", auth: "agent", maxBytes: LIMITS.eventBodyBytes }, async (request) =>
      json(202, await intake.submit(request.body, { actor: "agent", idempotencyKey: request.header("idempotency-key") })),
    );

    api.route(ctx, { method: "GET", path: "/events/:event_id", auth: "agent" }, async (request) =>
      json(200, await intake.receipt(parseWith(Id, request.params.event_id))),
    );
  },
};
