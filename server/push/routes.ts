/** `POST /push/answer/:capability` (the URL is the credential), the resume of pushes owed and the prune. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { DomainError } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { fullBucket, takeToken, type RateLimit } from "../rate-limit-rules.ts";
import { instanceText } from "../locales/load.ts";
import type { PushAnswers } from "./answers.ts";
import type { Pusher } from "./pusher.ts";

const PRUNE_MS = 60 * 60_000;
/** Presses from anyone on the internet, in all: a person presses a few; a flood of guesses is held off before any database read. */
export const PRESS_LIMIT: RateLimit = { perMinute: 60, burst: 20 };

export interface PushRoutesDeps {
  api: HttpApi;
  pusher: Pick<Pusher, "load">;
  answers: PushAnswers | undefined;
  prune: (now: Date) => Promise<void>;
}

export const PushRoutes = {
  name: "notify-webhook-push",
  reusable: true,
  apply(ctx: Context, { api, pusher, answers, prune }: PushRoutesDeps) {
    const logger = ctx.logger("notify-webhook");
    const background = (work: Promise<void>) =>
      void work.catch((error: unknown) => logger.warn(instanceText(ctx, "anon-notify.push.log.background", { error: errorText(error) })));
    ctx.on("ready", () => {
      background(pusher.load());
      background(prune(new Date()));
    });
    ctx.setInterval(() => background(prune(new Date())), PRUNE_MS);
    if (!answers) return;
    api.offer(ctx, "push_answers");
    // ntfy's http action may send a body (empty by default); it is never read for meaning.
    let bucket = fullBucket(PRESS_LIMIT, Date.now());
    api.route(ctx, { method: "POST", path: "/push/answer/:capability", auth: "capability", maxBytes: 4096, anyBody: true }, async (request) => {
      const take = takeToken(bucket, Date.now(), PRESS_LIMIT);
      bucket = take.bucket;
      if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      return json(200, await answers.redeem(request.params.capability ?? ""));
    });
  },
};
