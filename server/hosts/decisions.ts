/** Which online host a start goes to, and what a start job's ACK came to. */
import type { HostHeartbeat, StartResult } from "../../protocol/hosts.ts";
import { StartRefusal, type CommandSummary } from "../../protocol/queue.ts";
import type { ErrorCode } from "../../protocol/wire.ts";

/** The host named, or the only one online; otherwise why not. */
export function pickHost(online: readonly HostHeartbeat[], name: string | undefined, project: string): HostHeartbeat | { error: ErrorCode } {
  const candidates = name === undefined ? online : online.filter((host) => host.name === name);
  if (candidates.length === 0) return { error: "host_offline" };
  if (candidates.length > 1 && name === undefined) return { error: "host_ambiguous" };
  const host = candidates[0]!;
  if (!host.projects.some((p) => p.name === project)) return { error: "unknown_project" };
  return host;
}

export function startResult(host: string, project: string, sessionId: string, command: CommandSummary, payload: unknown): StartResult {
  if (command.state === "accepted" && command.outcome === "started") return { state: "started", session_id: sessionId, host, project, command };
  if (command.state === "accepted" && command.outcome === "refused") {
    const refusal = StartRefusal.safeParse((payload as { refusal?: unknown } | null)?.refusal);
    return { state: "refused", refusal: refusal.success ? refusal.data : "start_failed", host, project, command };
  }
  return { state: "queued", host, project, command };
}
