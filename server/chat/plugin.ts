/** The owner's chat commands (`anon.*`), on the same operator service as the persona tools and the API. */
import type { Context } from "koishi";
import { ownerCommand, type ChatKit } from "./kit.ts";
import { chatOwner, OwnerGuard, type RefusalMode } from "./owner-guard.ts";
import { SessionNumbers } from "./refs.ts";
import { approvalCommands } from "./approvals.ts";
import { buttonPresses } from "./buttons.ts";
import { discordText } from "./discord-text.ts";
import { grantCommands } from "./grants.ts";
import { instructionCommands } from "./instructions.ts";
import { muteCommands } from "./mute.ts";
import { flatCommandMenus } from "./native-commands.ts";
import { sendCommands } from "./send.ts";
import { sessionCommands } from "./sessions.ts";
import { stopCommands } from "./stop.ts";
import { newSessionCommands } from "./new-session.ts";
import type { StartService } from "../hosts/service.ts";

export type ChatCommandsDeps = Pick<ChatKit, "operator" | "approvals" | "grants" | "audit"> & {
  starts: StartService;
  botId: string;
  recipientId: string;
  refusal: RefusalMode;
};

export const ChatCommands = {
  name: "notify-webhook-chat",
  reusable: true,
  // Only attached images need it; every other command works without.
  inject: { http: { required: false } },
  apply(ctx: Context, deps: ChatCommandsDeps) {
    // Before any command or middleware reads a Discord message's text.
    discordText(ctx);
    const guard = new OwnerGuard({ owner: chatOwner(deps.botId, deps.recipientId), refusal: deps.refusal, audit: deps.audit });
    const kit: ChatKit = { guard, operator: deps.operator, approvals: deps.approvals, grants: deps.grants, audit: deps.audit, numbers: new SessionNumbers() };
    // The group itself only shows its subcommands (Koishi's help), but is guarded like them.
    ownerCommand(ctx, kit, "anon").action(({ session }) => session!.execute("help anon", true));
    sessionCommands(ctx, kit);
    // Before the replies to notices: a quote of an approval request is a decision, never an instruction.
    approvalCommands(ctx, kit);
    buttonPresses(ctx, kit);
    grantCommands(ctx, kit);
    sendCommands(ctx, kit);
    instructionCommands(ctx, kit);
    muteCommands(ctx, kit);
    stopCommands(ctx, kit);
    flatCommandMenus(ctx, "anon");
    newSessionCommands(ctx, kit, deps.starts);
  },
};
