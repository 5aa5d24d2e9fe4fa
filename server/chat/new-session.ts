/**
 * `anon.new <project> <task>` (`#host` first when several hosts are online): a new Pi session on a
 * host, through the same start service as `POST /operator/sessions`; one reply saying what it became.
 */
import type { Context } from "koishi";
import { CreateSessionBody } from "../../protocol/hosts.ts";
import { parseWith } from "../../common/domain-error.ts";
import type { StartService } from "../hosts/service.ts";
import { asOwner, ownerCommand, type ChatKit } from "./kit.ts";

export function newSessionCommands(ctx: Context, kit: ChatKit, starts: StartService): void {
  ownerCommand(ctx, kit, "anon.new <words:text>").action(({ session }, words) =>
    asOwner(ctx, kit, session!, async () => {
      const parts = (words ?? "").trim().split(/\s+/);
      const host = parts[0]?.startsWith("#") ? parts.shift()!.slice(1) : undefined;
      const project = parts.shift();
      const task = parts.join(" ");
      if (!project || !task) return session!.text(".usage");
      const result = await starts.start(parseWith(CreateSessionBody, { project, task, ...(host ? { host } : {}) }), "operator");
      const names = { host: result.host, project: result.project };
      if (result.state === "started") return session!.text(".started", { ...names, session: result.session_id });
      if (result.state === "refused") return session!.text(`.refused.${result.refusal}`, names);
      return session!.text(".queued", names);
    }),
  );
}
