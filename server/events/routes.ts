/** POST /events, /events/batch and GET /events/:event_id; the API answers 503 until the receipts are loaded. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { type BatchAccepted, type BatchRefusal, type EventAccepted, EventBatch } from "../../protocol/events.ts";
import { Id, LIMITS } from "../../protocol/wire.ts";
import { type DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { HTTP_STATUS } from "../http/error-status.ts";
import { instanceText } from "../locales/load.ts";
import type { EventIntake } from "./intake.ts";
import type { Pusher } from "../push/pusher.ts";

const LOAD_RETRY_MS = 1000;
const PRUNE_INTERVAL_MS = 60_000;

/** What `POST /events` would have answered for the element that ended a batch. */
function refusal(index: number, body: unknown, error: DomainError): BatchRefusal {
  const id = Id.safeParse((body as { event_id?: unknown } | null)?.event_id);
  return {
    index,
    event_id: id.success ? id.data : null,
    status: HTTP_STATUS[error.code],
    error: error.code,
    ...(error.issues ? { issues: error.issues } : {}),
    ...(error.retryAfterSeconds === undefined ? {} : { retry_after_seconds: Math.max(1, Math.ceil(error.retryAfterSeconds)) }),
  };
}

/** `push`: the push route, when configured; a receipt carries the event's push receipt too. */
type EventRoutesDeps = { api: HttpApi; intake: EventIntake; push?: Pick<Pusher, "receipt"> | undefined };

export const EventRoutes = {
  name: "notify-webhook-events",
  reusable: true,
  apply(ctx: Context, { api, intake, push }: EventRoutesDeps) {
    const logger = ctx.logger("notify-webhook");
    const release = api.holdUntilReady(ctx);
    const load = async () => {
      try {
        const resumed = await intake.load();
        if (resumed > 0) logger.info(instanceText(ctx, "anon-notify.log.resuming", { count: resumed }));
        release();
      } catch (error) {
        // Until the receipts can be read, every route keeps answering 503 rather than guessing.
        logger.error(instanceText(ctx, "anon-notify.log.receipts-unreadable", { error: errorText(error) }));
        ctx.setTimeout(load, LOAD_RETRY_MS);
      }
    };
    ctx.on("ready", load);
    ctx.setInterval(() => intake.prune(), PRUNE_INTERVAL_MS);
    intake.onLimited = (session, limit) => logger.warn(instanceText(ctx, "anon-notify.events-limited", { session, ...limit }));
    ctx.on("dispose", () => {
      intake.onLimited = undefined;
    });
    for (const capability of ["events", "direct", "context_usage", "events_batch"]) api.offer(ctx, capability);

    api.route(ctx, { method: "POST", path: "/events", auth: "agent", maxBytes: LIMITS.eventBodyBytes }, async (request) => {
      const accepted = await intake.submit(request.body, { actor: "agent", idempotencyKey: request.header("idempotency-key") });
      // Tells the client it may send its next backlog as one batch.
      return json(202, { ...accepted, batch_max: LIMITS.eventBatchMax } satisfies EventAccepted);
    });

    api.route(ctx, { method: "POST", path: "/events/batch", auth: "agent", maxBytes: LIMITS.eventBatchBytes }, async (request) => {
      const { events } = parseWith(EventBatch, request.body);
      const { accepted, refused } = await intake.submitBatch(events, { actor: "agent" });
      return json(200, { accepted, refused: refused ? refusal(refused.index, events[refused.index], refused.error) : null } satisfies BatchAccepted);
    });

    api.route(ctx, { method: "GET", path: "/events/:event_id", auth: "agent" }, async (request) => {
      const eventId = parseWith(Id, request.params.event_id);
      const receipt = await intake.receipt(eventId);
      return json(200, push ? { ...receipt, push: await push.receipt(eventId) } : receipt);
    });
  },
};
