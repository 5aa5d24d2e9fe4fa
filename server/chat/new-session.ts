/** `anon.new <project> <task>`: a new Pi session on a host, through the same start service as
 * `POST /operator/sessions`. */
import type { Context, Session } from "koishi";
import { shownName } from "../../common/shown-name.ts";
import { CreateSessionBody } from "../../protocol/hosts.ts";
import { parseWith } from "../../common/domain-error.ts";
import type { StartService } from "../hosts/service.ts";
import { ownerAction, type ChatKit } from "./kit.ts";
import { typedTail } from "./typed.ts";
import { say } from "./words.ts";

function shown(session: Session, name: string): string {
  const { text, mixedScripts } = shownName(name);
  return mixedScripts ? text + say(session, "anon-notify.mixed-scripts") : text;
}

export function newSessionCommands(ctx: Context, kit: ChatKit, starts: StartService): void {
  ownerAction(ctx, kit, "anon.new <words:rawtext>", async (argv, words) => {
    const { session } = argv;
    // The task as the owner typed it: never parsed as markup a second time, its spacing kept.
    const typed = /^(?:#(\S+)\s+)?(\S+)\s+([\s\S]*\S)/.exec(typedTail(argv, [], words));
    if (!typed) return say(session, ".usage");
    const [, host, project, task] = typed;
    const result = await starts.start(parseWith(CreateSessionBody, { project, task, ...(host ? { host } : {}) }), "operator");
    // The host names itself: shown like any agent-chosen name.
    const names = { host: shown(session, result.host), project: shown(session, result.project) };
    if (result.state === "started") return say(session, ".started", { ...names, session: result.session_id });
    if (result.state === "refused") return say(session, `.refused.${result.refusal}`, names);
    return say(session, ".queued", names);
  });
}
