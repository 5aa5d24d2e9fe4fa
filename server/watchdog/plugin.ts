/** The watchdog's edge: checks every `checkIntervalMs` and submits due notices through the event intake. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { DeliveryRoute, EventBody } from "../../protocol/events.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventIntake } from "../events/intake.ts";
import type { SessionRegistry } from "../sessions/registry.ts";
import { instanceSay, instanceText } from "../locales/load.ts";
import { afterNotice, due, observe, vanishedNotices, watchdogEvent, type Watched, type WatchInput } from "./decisions.ts";

type WatchdogOptions = { stallAfterMs: number; checkIntervalMs: number; delivery: DeliveryRoute };
type WatchdogDeps = { registry: SessionRegistry; intake: EventIntake; audit: AuditLog; options: WatchdogOptions };

export const Watchdog = {
  name: "notify-webhook-watchdog",
  reusable: true,
  apply(ctx: Context, { registry, intake, audit, options }: WatchdogDeps) {
    const logger = ctx.logger("notify-webhook");
    // Its notices are in the instance's language, like every text the server starts.
    const say = instanceSay(ctx);
    const watched = new Map<string, Watched>();

    const apply = (sessionId: string, input: WatchInput) => {
      const { next, ended } = observe(watched.get(sessionId), input);
      if (next) watched.set(sessionId, next);
      else watched.delete(sessionId);
      if (ended) void audit.record({ actor: "watchdog", action: `watchdog.${ended.episode}_cleared`, session_id: sessionId, data: { reason: ended.reason } });
    };
    ctx.effect(() =>
      registry.onChange((change) => {
        const sessionId = change.entry.heartbeat.session_id;
        if (change.kind === "recorded") apply(sessionId, { kind: "heartbeat", heartbeat: change.entry.heartbeat, atMs: change.entry.lastSeenMs });
        else if (change.kind === "removed") apply(sessionId, { kind: "offline" });
        else apply(sessionId, { kind: "expired", atMs: Date.now() });
      }),
    );

    const recordNotice = (action: string, sessionId: string, event: EventBody) =>
      audit.record({ actor: "watchdog", action, session_id: sessionId, subject: event.event_id, data: event.details ?? {} });
    let checking = false;
    const check = async () => {
      if (checking) return;
      checking = true;
      try {
        registry.sweep();
        const nowMs = Date.now();
        const vanished: Watched[] = [];
        for (const [sessionId, entry] of [...watched]) {
          const notice = due(entry, nowMs, options);
          if (!notice) continue;
          if (notice.kind === "vanished") {
            vanished.push(entry);
            continue;
          }
          const event = watchdogEvent(entry, notice, nowMs, options.delivery, registry.ttlMs, say);
          if (!(await submit(event, sessionId))) continue;
          await recordNotice("watchdog.stalled", sessionId, event);
          // The session may have moved on while the notice was being stored; only the raised episode is marked.
          const current = watched.get(sessionId);
          if (current === entry) watched.set(sessionId, afterNotice(entry, notice)!);
          else if (current && current.lastActivityMs === entry.lastActivityMs && current.state === "running") {
            watched.set(sessionId, { ...current, stalledAtActivityMs: entry.lastActivityMs });
          }
        }
        for (const { event, sessions } of vanishedNotices(vanished, nowMs, options.delivery, registry.ttlMs, say)) {
          if (!(await submit(event, sessions.length === 1 ? sessions[0]! : `${sessions.length} sessions`))) continue;
          const covered = new Set(sessions);
          for (const entry of vanished.filter((w) => covered.has(w.sessionId))) {
            await recordNotice("watchdog.vanished", entry.sessionId, event);
            if (watched.get(entry.sessionId) === entry) watched.delete(entry.sessionId);
          }
        }
      } finally {
        checking = false;
      }
    };
    /** Submits a notice; one not accepted yet (rate limit) is tried again at the next check. */
    const submit = async (event: EventBody, about: string): Promise<boolean> => {
      try {
        await intake.submit(event, { actor: "watchdog" });
        return true;
      } catch (error) {
        logger.warn(instanceText(ctx, "anon-notify.log.watchdog-retry", { about, error: errorText(error) }));
        return false;
      }
    };
    ctx.setInterval(() => void check(), options.checkIntervalMs);
  },
};
