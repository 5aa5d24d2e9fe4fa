/** The agent's side of the queue: claim (long poll) and ACK, plus the sweep of expired leases and stops. */
import type { Context } from "koishi";
import type { z } from "zod";
import { errorText } from "../../common/errors.ts";
import { AckBody, ClaimQuery } from "../../protocol/queue.ts";
import { Id } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { supportsImages, type SessionRegistry } from "../sessions/registry.ts";
import { mayHoldClaim, mayHoldPoll, type PollCaps } from "./decisions.ts";
import type { CommandStore } from "./store.ts";
import type { HostRegistry } from "../hosts/registry.ts";
import { instanceText } from "../locales/load.ts";

const SWEEP_MAX_MS = 5_000;
/** A refused long poll comes back after this; a well-behaved client never holds more than two per session. */
const POLL_RETRY_SECONDS = 5;

/** `hosts`: the host lane's claimers (there `session_id` names a host); `sweepMs`: the shortest time the sweep serves (lease, stop TTL). */
type CommandRoutesDeps = { api: HttpApi; registry: SessionRegistry; hosts: HostRegistry; commands: CommandStore; sweepMs: number; pollCaps: PollCaps };

export const CommandRoutes = {
  name: "notify-webhook-commands",
  reusable: true,
  apply(ctx: Context, { api, registry, hosts, commands, sweepMs, pollCaps }: CommandRoutesDeps) {
    const { waker } = commands;
    ctx.on("dispose", () => waker.close());
    for (const capability of ["commands", "command_images", "long_poll"]) api.offer(ctx, capability);
    const logger = ctx.logger("notify-webhook");
    ctx.setInterval(
      () => {
        commands.sweep().catch((error: unknown) => logger.warn(instanceText(ctx, "anon-notify.log.sweep-failed", { error: errorText(error) })));
      },
      Math.min(SWEEP_MAX_MS, Math.max(100, Math.floor(sweepMs / 2))),
    );
    // A run starting ends the held instruction claims (see mayHoldClaim).
    const unfollow = registry.onChange((change) => {
      if (change.kind === "recorded" && change.entry.heartbeat.state === "running") waker.wake(change.entry.heartbeat.session_id, "instructions");
    });
    ctx.on("dispose", unfollow);

    api.route(ctx, { method: "GET", path: "/commands", auth: "agent" }, async (request) => {
      const query = parseWith(ClaimQuery, Object.fromEntries(request.query));
      const withImages = (query.capabilities ?? "").split(",").some((c) => c.trim() === "images");
      const deadline = Date.now() + query.wait_ms;
      const release = query.wait_ms > 0 ? holdPoll(query.session_id) : () => {};
      try {
        return await claimUntil(query, withImages, deadline, request.signal);
      } finally {
        release();
      }
    });

    const held = new Map<string, number>();
    let heldTotal = 0;
    /** Counts one held long poll, or refuses it at once when a cap is reached. */
    const holdPoll = (sessionId: string) => {
      if (!mayHoldPoll(held.get(sessionId) ?? 0, heldTotal, pollCaps)) throw new DomainError("rate_limited", { retryAfterSeconds: POLL_RETRY_SECONDS });
      held.set(sessionId, (held.get(sessionId) ?? 0) + 1);
      heldTotal++;
      return () => {
        heldTotal--;
        const left = (held.get(sessionId) ?? 1) - 1;
        if (left > 0) held.set(sessionId, left);
        else held.delete(sessionId);
      };
    };

    const claimUntil = async (query: z.output<typeof ClaimQuery>, withImages: boolean, deadline: number, signal: AbortSignal) => {
      for (;;) {
        const entry = query.lane === "host" ? undefined : registry.find(query.session_id);
        const live = query.lane === "host" ? hosts.isLiveRuntime(query.session_id, query.runtime_id) : entry?.heartbeat.runtime_id === query.runtime_id;
        if (!live) throw new DomainError("session_offline");
        const watch = waker.watch(query.session_id, query.lane);
        try {
          const images = withImages && entry !== undefined && supportsImages(entry.heartbeat);
          const answer = await commands.claim(query.session_id, query.runtime_id, images, signal, query.lane);
          const remaining = deadline - Date.now();
          const state = entry && (registry.find(query.session_id)?.heartbeat.state ?? entry.heartbeat.state);
          if (answer.command || remaining <= 0 || waker.closed || signal.aborted || !mayHoldClaim(query.lane, state)) return json(200, answer);
          await watch.until(remaining, signal);
          if (waker.closed || signal.aborted) return json(200, { command: null });
        } finally {
          watch.close();
        }
      }
    };

    api.route(ctx, { method: "POST", path: "/commands/:command_id/ack", auth: "agent" }, async (request) => {
      const body = parseWith(AckBody, request.body);
      await commands.ack(parseWith(Id, request.params.command_id), body);
      return json(200, { state: "accepted" });
    });
  },
};
